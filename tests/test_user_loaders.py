"""The loader the user already has: a LightningDataModule (dataset=lightning), a Hugging Face dataset from local
files (dataset=hf), and a dataset object handed to loaderexp.measure / loaderexp.sweep from Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

import loaderexp
from loaderexp.config import ConfigError
from tests.conftest import REPO, TINY, run_cli

QUICK = ["bench=quick", "bench.profile_s=0", "bench.resource_interval_s=0.05", "tracking=none"]


class MarkedBatches:
    """A DataModule's own collate: batches as dicts with a mark, so the test sees whose collate ran."""

    def __call__(self, rows):
        return {"x": torch.stack([r[0] for r in rows]), "mark": torch.ones(len(rows))}


@pytest.mark.slow
def test_a_datamodule_is_measured_with_its_own_sampler_and_collate_and_its_knobs_recorded(data_root, tmp_path):
    out = tmp_path / "run"
    done = run_cli(["+experiment=lightning", "loader.num_workers=1", "dataset.num_samples=600", *QUICK,
                    f"hydra.run.dir={out}"], cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "FINISHED" and result["info"]["delivery_ok"] is True
    assert result["info"]["datamodule_baseline"] == {
        "batch_size": 64, "num_workers": 0, "pin_memory": False, "prefetch_factor": None, "persistent_workers": False,
        "drop_last": False, "sampler": "RandomSampler", "collate_fn": "shapes_datamodule.stack_batch",
        "datamodule": "shapes_datamodule.ShapesDataModule"}
    assert result["params"]["loader.num_workers"] == 1 and result["params"]["sampler.name"] == "datamodule"
    assert result["info"]["dataset_length"] == 540  # setup("fit") split off its validation tenth
    assert "train_dataloader() as written: num_workers=0" in done.stdout


def test_the_datamodules_collate_and_sampler_reach_the_loader(data_root, compose_cfg):
    pl = pytest.importorskip("pytorch_lightning")
    from loaderexp.data.lightning import borrow
    from loaderexp.execute.job import measured_loader
    from loaderexp.config import to_spec

    class Module(pl.LightningDataModule):
        def setup(self, stage):
            self.data = TensorDataset(torch.arange(40, dtype=torch.float32).reshape(40, 1))

        def train_dataloader(self):
            return torch.utils.data.DataLoader(self.data, batch_size=8, shuffle=False, collate_fn=MarkedBatches())

    dataset = borrow(Module())
    spec = to_spec(compose_cfg([*TINY, "sampler=datamodule", "loader.batch_size=8"]))
    loader, _ = measured_loader(spec, dataset)
    batches = list(loader)
    assert len(batches) == 5 and all(b["mark"].sum() == 8 for b in batches)
    assert torch.equal(torch.cat([b["x"] for b in batches]).flatten(), torch.arange(40.0))  # its SequentialSampler


# A user's DataModule as it comes: it takes no argument at all, batches 16, and trains with one persistent worker.
USERS_DATAMODULE = '''
import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 320

    def __getitem__(self, index):
        return torch.full((4,), float(index))


class MyDM:
    def prepare_data(self):
        pass

    def setup(self, stage):
        self.data = Squares()

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=16, shuffle=True, num_workers=1, persistent_workers=True)
'''


@pytest.mark.slow
def test_a_users_datamodule_gets_only_its_own_arguments_and_its_settings_are_found_among_the_runs(data_root,
                                                                                                 tmp_path):
    (tmp_path / "mydm.py").write_text(USERS_DATAMODULE)
    common = ["dataset=lightning", "sampler=datamodule", "dataset._target_=mydm.MyDM", f"dataset.python_path={tmp_path}",
              "~dataset.batch_size", "loader.batch_size=16", *QUICK]
    done = run_cli(["-m", *common, "loader.num_workers=0,1", "loader.persistent_workers=true",
                    f"hydra.sweep.dir={tmp_path / 's'}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "takes no argument" not in done.stdout + done.stderr
    assert "mydm.MyDM.train_dataloader() as written: num_workers=1" in done.stdout
    assert "samples/s measured with them" in done.stdout, done.stdout[-2000:]
    # Without a _target_, the preset asks for one in a line before anything starts.
    done = run_cli(["dataset=lightning", "sampler=datamodule", *QUICK, f"hydra.run.dir={tmp_path / 'none'}"],
                   cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("loaderexp: error: dataset._target_ is required")


@pytest.mark.slow
def test_a_datamodule_that_batches_otherwise_is_refused_with_the_fix(data_root, tmp_path):
    done = run_cli(["+experiment=lightning", "dataset.batch_size=32", "loader.batch_size=64", *QUICK,
                    f"hydra.run.dir={tmp_path}"], cwd=REPO)
    assert done.returncode == 1
    assert "loader.batch_size=64, but shapes_datamodule.ShapesDataModule.train_dataloader() batches 32" in done.stderr
    assert "set loader.batch_size=32" in done.stderr


@pytest.mark.slow
def test_a_hugging_face_dataset_from_disk_and_from_parquet_files(data_root, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "disk"
    done = run_cli(["dataset=hf", "dataset.num_samples=400", "loader.num_workers=1", "loader.batch_size=32", *QUICK,
                    f"hydra.run.dir={out}"], cwd=REPO, env={"HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["info"]["delivery_ok"] is True and result["info"]["dataset_length"] == 400
    files = tmp_path / "table.parquet"
    datasets.Dataset.from_dict({"x": [[float(i)] * 4 for i in range(300)], "label": list(range(300))}).to_parquet(files)
    out = tmp_path / "parquet"
    done = run_cli(["dataset=hf", "dataset.builder=parquet", f"dataset.data_files={files}", "dataset.generate=false",
                    "loader.batch_size=25", *QUICK, f"hydra.run.dir={out}"], cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["info"]["dataset_length"] == 300 and result["info"]["delivery_ok"] is True


def test_the_hugging_face_dataset_is_in_torch_format(data_root, tmp_path):
    pytest.importorskip("datasets")
    from loaderexp.data.hf import from_local

    dataset = from_local(str(tmp_path / "hf"), generate=True, num_samples=50, size=8)
    row = dataset[3]
    assert isinstance(row["image"], torch.Tensor) and row["image"].shape == (8, 8, 3)
    # datasets' torch formatter widens integer arrays to int64 (8x the bytes): what a Trainer reading it gets
    assert row["image"].dtype == torch.int64 and isinstance(row["label"], torch.Tensor)
    assert len(from_local(str(tmp_path / "hf"), generate=True, num_samples=50, size=8)) == 50  # reused, not rebuilt


class Squares(Dataset):
    def __len__(self):
        return 300

    def __getitem__(self, index):
        return torch.full((4,), float(index * index))


@pytest.mark.slow
def test_measure_from_python_is_a_run_of_the_cli(data_root, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = loaderexp.measure(Squares(), num_workers=1, batch_size=30, overrides=["bench=quick", "bench.profile_s=0"],
                               tracking=uri, output_dir=tmp_path / "run")
    assert result.status == "FINISHED", result.error
    assert result.params["loader.num_workers"] == 1 and result.params["dataset.name"] == "Squares"
    assert result.info.delivery_ok is True and result.logged
    assert (tmp_path / "run" / "result.json").is_file()
    from mlflow.tracking import MlflowClient

    assert MlflowClient(uri).get_run(result.run_id).data.metrics["throughput_samples_per_s"] > 0


@pytest.mark.slow
def test_sweep_from_python_returns_the_reports_rows_and_exports_the_pick(data_root, tmp_path):
    report = loaderexp.sweep(Squares(), {"num_workers": [0, 1]}, batch_size=30, tracking="none",
                             overrides=["bench=quick", "bench.confirm_s=0", "bench.profile_s=0"],
                             sweep_dir=tmp_path / "sweep")
    assert [row["num_workers"] for row in report] == [0, 1]
    assert all(row["status"] == "FINISHED" and row["samples_per_s"] > 0 for row in report)
    assert report.recommendation["num_workers"] in (0, 1)
    assert {p.name for p in report.exported} >= {"loader.yaml", "dataloader_kwargs.json"}
    assert "Recommendation" in str(report)


def test_an_unknown_knob_is_refused_with_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match="num_wrokers: not a DataLoader knob.*valid: batch_size, num_workers"):
        loaderexp.measure(Squares(), num_wrokers=2, output_dir=tmp_path)


def test_a_dataset_that_cannot_be_pickled_is_measured_in_this_process(data_root, tmp_path):
    unpicklable = TensorDataset(torch.zeros(64, 2))
    unpicklable.lock = threading.Lock()  # a lock: no pickler takes it (a lambda cloudpickle takes, by value)
    result = loaderexp.measure(unpicklable, num_workers=0, batch_size=16, tracking="none", output_dir=tmp_path,
                               overrides=["bench=quick", "bench.profile_s=0"])
    assert result.status == "FINISHED", result.error
    assert result.params["bench.isolate"] is False


def test_importing_loaderexp_loads_neither_hydra_nor_mlflow():
    code = ("import sys, loaderexp, loaderexp.harness.records\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'hydra', 'mlflow', 'torch'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("example,says", [("measure_from_python.py", "pick: num_workers="),
                                          ("hf_local_dataset.py", "Recommendation: num_workers=")])
def test_the_examples_run_offline_as_written(example, says, data_root, tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "examples" / example), "--quick"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert says in done.stdout


def test_the_sweeps_recommendation_is_found_when_repeats_of_one_configuration_are_merged(tmp_path):
    from loaderexp.api import _report
    from loaderexp.result import RunResult

    host = {"cpu_model": "Test CPU", "cpu_count": 2, "hostname": "box", "cuda_available": False}
    for job, (workers, pin, rate) in enumerate([(0, True, 1000), (0, False, 1010), (1, True, 1900), (1, False, 2000)]):
        RunResult(status="FINISHED", params={"loader.num_workers": workers, "loader.pin_memory": pin},
                  metrics={"throughput_samples_per_s": rate, "throughput_iqr_rel": 0.01}, info={"delivery_ok": True},
                  host=host).write(tmp_path / str(job))
    report = _report(tmp_path, 4)
    assert report.recommendation is not None and report.recommendation["num_workers"] == 1  # pin_memory is inert here
