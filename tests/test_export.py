"""The exported recommendation works where it is used: the YAML in a Hydra app, each snippet building a
DataLoader (plain PyTorch, a LightningDataModule, Hugging Face's Trainer) with the recommended values."""

from __future__ import annotations


import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler, TensorDataset

from loaderexp.report import export
from loaderexp.report.confirm import Confirmation
from loaderexp.result import RunResult

HOST = {"cpu_model": "Test CPU", "cpu_count": 8, "hostname": "box", "cuda_available": False}


def result(workers: int, rate: float, ranks: int = 1, host: dict = HOST, prefetch=None) -> RunResult:
    threads = {"rank_threads": 1} if ranks > 1 else {}
    return RunResult(
        status="FINISHED",
        params={"loader.num_workers": workers, "loader.batch_size": 64, "loader.pin_memory": True,
                "loader.prefetch_factor": prefetch, "loader.persistent_workers": True, "loader.drop_last": True,
                "loader.timeout": 0.0, "loader.in_order": True, "loader.multiprocessing_context": None,
                "dataset.name": "cifar10", "sampler.name": "random", "dist.nproc_per_node": ranks},
        metrics={"throughput_samples_per_s": rate, "throughput_iqr_rel": 0.01},
        info={"delivery_ok": True, "measured_until": 1_800_000_000.0,
              "loader_changed": ["batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
                                 "drop_last"], **threads}, host=dict(host))


def sweep() -> list[tuple[Path, RunResult]]:
    return [(Path(f"{w}"), result(w, rate, prefetch=4)) for w, rate in ((0, 1000), (2, 2950), (4, 3000))]


def dataset() -> TensorDataset:
    return TensorDataset(torch.arange(256, dtype=torch.float32).reshape(256, 1))


class Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(256, dtype=torch.float32).reshape(256, 1))


def marked(rows):
    """A DataModule's own collate_fn: batches marked, so a test sees whose collate ran."""
    return {"x": torch.stack([r[0] for r in rows]), "mark": "theirs"}


def test_the_yaml_composes_in_a_users_hydra_app(tmp_path):
    written = export(sweep(), tmp_path / "export", "outputs/multiruns/x")
    assert {p.name for p in written} == {"loader.yaml", "dataloader_kwargs.json", "pytorch_snippet.py",
                                         "lightning_snippet.py", "hf_training_args.py"}
    text = (tmp_path / "export" / "loader.yaml").read_text()
    assert "outputs/multiruns/x" in text and "Test CPU, 8 CPUs" in text and "not measured" in text
    # The user's project: its own config.yaml picks the file as a loader group option.
    conf = tmp_path / "app" / "conf"
    (conf / "loader").mkdir(parents=True)
    shutil.copy(tmp_path / "export" / "loader.yaml", conf / "loader" / "loaderexp_tuned.yaml")
    (conf / "config.yaml").write_text("defaults:\n  - loader: loaderexp_tuned\n  - _self_\nlr: 0.1\n")
    app = tmp_path / "app" / "train.py"
    app.write_text(
        "import hydra, torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "@hydra.main(version_base=None, config_path='conf', config_name='config')\n"
        "def main(cfg):\n"
        "    loader = DataLoader(TensorDataset(torch.zeros(256, 1)), **cfg.loader)\n"
        "    print(loader.num_workers, loader.batch_size, loader.prefetch_factor, loader.persistent_workers,"
        " loader.drop_last)\n"
        "main()\n")
    out = subprocess.run([sys.executable, str(app), "hydra.run.dir=.", "hydra.output_subdir=null"], cwd=app.parent,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "64", "4", "True", "True"]  # 2 workers: within 5% of 4, fewer of them


def test_the_pytorch_snippet_and_the_json_build_the_recommended_loader(tmp_path):
    export(sweep(), tmp_path, "s")
    kwargs = json.loads((tmp_path / "dataloader_kwargs.json").read_text())
    assert kwargs == {"batch_size": 64, "num_workers": 2, "pin_memory": True, "prefetch_factor": 4,
                      "persistent_workers": True, "drop_last": True, "shuffle": True}
    loader = DataLoader(dataset(), **kwargs)
    assert loader.num_workers == 2 and isinstance(loader.sampler, RandomSampler)  # as measured: sampler=random
    tuned_loader = runpy.run_path(str(tmp_path / "pytorch_snippet.py"))["tuned_loader"]
    loader = tuned_loader(dataset())
    assert (loader.num_workers, loader.batch_size, loader.prefetch_factor) == (2, 64, 4)
    assert isinstance(loader.sampler, RandomSampler)  # sampler=random: shuffle=True
    assert len(list(tuned_loader(dataset(), num_workers=0))) == 4  # prefetch and persistence go with the workers
    assert len(list(tuned_loader(Stream(), num_workers=0))) == 4  # an IterableDataset takes no shuffle


def test_a_run_recorded_before_loader_changed_existed_exports_each_knob_it_has(tmp_path):
    """Without the fact of which knobs were set, every optional knob the run recorded is written as it was:
    the loader is the measured one, if more explicit."""
    old = sweep()
    for _, r in old:
        r.info.loader_changed = None
    export(old, tmp_path, "s")
    kwargs = json.loads((tmp_path / "dataloader_kwargs.json").read_text())
    assert kwargs == {"batch_size": 64, "num_workers": 2, "pin_memory": True, "prefetch_factor": 4,
                      "persistent_workers": True, "drop_last": True, "timeout": 0.0, "in_order": True,
                      "shuffle": True}
    assert DataLoader(dataset(), **kwargs).in_order is True


def test_without_workers_the_export_leaves_out_what_dataloader_refuses(tmp_path):
    export([(Path("0"), result(0, 1000, prefetch=4))], tmp_path, "s")
    kwargs = json.loads((tmp_path / "dataloader_kwargs.json").read_text())
    assert kwargs["num_workers"] == 0 and kwargs["prefetch_factor"] is None and kwargs["persistent_workers"] is False
    DataLoader(dataset(), **kwargs)  # DataLoader raises for prefetch_factor or persistent_workers without workers


def test_the_lightning_snippet_is_a_datamodules_train_dataloader(tmp_path):
    pl = pytest.importorskip("pytorch_lightning")
    export(sweep(), tmp_path, "s")
    mixin = runpy.run_path(str(tmp_path / "lightning_snippet.py"))["TunedTrainDataloader"]

    class Data(mixin, pl.LightningDataModule):
        def setup(self, stage=None):
            self.train_dataset = dataset()

    module = Data()
    module.setup("fit")
    loader = module.train_dataloader()
    assert (loader.num_workers, loader.batch_size, loader.pin_memory, loader.persistent_workers) == (2, 64, True, True)


def test_the_hugging_face_arguments_are_ones_its_trainer_takes(tmp_path):
    transformers = pytest.importorskip("transformers")
    export(sweep(), tmp_path, "s")
    arguments = runpy.run_path(str(tmp_path / "hf_training_args.py"))["TRAINING_ARGUMENTS"]
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "hf"), report_to="none", use_cpu=True,
                                          **arguments)
    model = torch.nn.Linear(1, 1)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset(),
                                   data_collator=lambda rows: torch.stack([r[0] for r in rows]))
    loader = trainer.get_train_dataloader()
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (2, 4, True)
    assert args.per_device_train_batch_size == 64 and args.dataloader_drop_last is True


def test_one_export_per_node_type_and_rank_count(tmp_path):
    big = {**HOST, "cpu_model": "Big CPU", "cpu_count": 64, "hostname": "big"}
    items = [*sweep(), (Path("b2"), result(2, 5000, host=big)), (Path("b8"), result(8, 9000, host=big)),
             (Path("r"), result(1, 4000, ranks=4, host=big))]
    written = export(items, tmp_path, "s")
    folders = sorted({p.parent.relative_to(tmp_path).as_posix() for p in written})
    assert folders == ["big_cpu_64_cpus/ranks_1", "big_cpu_64_cpus/ranks_4", "test_cpu_8_cpus"]
    assert json.loads((tmp_path / "big_cpu_64_cpus/ranks_1/dataloader_kwargs.json").read_text())["num_workers"] == 8
    ranked = (tmp_path / "big_cpu_64_cpus/ranks_4/loader.yaml").read_text()
    assert "per rank with 4 ranks" in ranked and "OMP_NUM_THREADS=1, as torchrun sets it" in ranked


def test_the_confirmed_pick_is_the_one_exported(tmp_path):
    confirmation = Confirmation(pick={"loader.num_workers": 4, "loader.batch_size": 64})
    export(sweep(), tmp_path, "s", confirmation)
    assert json.loads((tmp_path / "dataloader_kwargs.json").read_text())["num_workers"] == 4


def test_report_export_from_a_sweep_folder(tmp_path):
    for folder, run in sweep():
        run.write(tmp_path / "sweep" / f"job{folder}")
    out = subprocess.run([sys.executable, "-m", "loaderexp.report", str(tmp_path / "sweep"), "--export",
                          str(tmp_path / "tuned")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "exported the recommendation" in out.stdout
    assert "num_workers: 2" in (tmp_path / "tuned" / "loader.yaml").read_text()


def test_a_datamodules_own_random_sampler_is_exported_as_shuffle(tmp_path):
    run = result(2, 3000)
    run.params["sampler.name"] = "datamodule"
    run.info.datamodule_baseline = {"sampler": "RandomSampler"}
    export([(Path("2"), run)], tmp_path, "s")
    assert json.loads((tmp_path / "dataloader_kwargs.json").read_text())["shuffle"] is True


def test_the_lightning_mixin_keeps_the_datamodules_own_sampler_and_collate_and_fits_num_workers_0(tmp_path):
    pl = pytest.importorskip("pytorch_lightning")
    export(sweep(), tmp_path, "s")
    snippet = runpy.run_path(str(tmp_path / "lightning_snippet.py"))

    class Theirs(pl.LightningDataModule):  # a DataModule as users write it: no train_dataset attribute
        def setup(self, stage=None):
            self.data = dataset()

        def train_dataloader(self):
            return DataLoader(self.data, batch_size=8, sampler=SequentialSampler(self.data), collate_fn=marked)

    class Tuned(snippet["TunedTrainDataloader"], Theirs):
        pass

    module = Tuned()
    module.setup("fit")
    loader = module.train_dataloader()
    assert (loader.num_workers, loader.batch_size, loader.prefetch_factor) == (2, 64, 4)
    assert isinstance(loader.sampler, SequentialSampler) and loader.collate_fn is marked
    assert next(iter(snippet["retuned"](loader, num_workers=0)))["mark"] == "theirs"


@pytest.mark.parametrize("sampler, kind", [("random", RandomSampler), ("sequential", SequentialSampler)])
def test_every_exported_file_builds_the_measured_sampler(tmp_path, sampler, kind):
    import yaml

    runs = sweep()
    for _, r in runs:
        r.params["sampler.name"] = sampler
    export(runs, tmp_path, "s")
    data = dataset()
    built = {"loader.yaml": DataLoader(data, **yaml.safe_load((tmp_path / "loader.yaml").read_text())),
             "dataloader_kwargs.json": DataLoader(data, **json.loads((tmp_path / "dataloader_kwargs.json").read_text())),
             "pytorch_snippet.py": runpy.run_path(str(tmp_path / "pytorch_snippet.py"))["tuned_loader"](data)}
    for name, loader in built.items():
        assert isinstance(loader.sampler, kind), name
        assert loader.num_workers == 2 and loader.batch_size == 64, name


def test_a_sampler_of_its_own_is_named_in_every_file_for_the_user_to_pass(tmp_path):
    runs = sweep()
    for _, r in runs:
        r.params["sampler.name"] = "weighted"
    export(runs, tmp_path, "s")
    for name in ("loader.yaml", "pytorch_snippet.py", "lightning_snippet.py"):
        assert "the sweep used sampler=weighted: pass yours" in (tmp_path / name).read_text(), name
    assert "shuffle" not in json.loads((tmp_path / "dataloader_kwargs.json").read_text())
