"""Loader backends: DataLoader, torchdata.nodes on threads and on processes, SPDL; the same data,
the same loop, the same delivery check; knobs a backend lacks are errors; a failure is the run's."""

from __future__ import annotations

import pytest

from loaderexp.config import ConfigError, composed_spec
from loaderexp.loading.registry import checked
from tests.conftest import REPO
from tests.test_datasets import SMALL, run_small

BACKENDS = ["dataloader", "nodes_thread", "nodes_process", "spdl"]


def _validate(compose_cfg, overrides):
    return checked(composed_spec(compose_cfg(overrides)), False, 2, targets=False)


@pytest.mark.parametrize("overrides,message", [
    (["backend=nodes_thread", "loader.persistent_workers=true", "loader.num_workers=2"],
     "loader.persistent_workers=true: backend=nodes_thread has no such knob; with it set: batch_size, num_workers"),
    (["backend=spdl", "loader.num_workers=0"], "loader.num_workers=0: backend=spdl loads on a pool of num_workers"),
    (["backend=nodes_thread", "loader.num_workers=2", "loader.multiprocessing_context=spawn"],
     "loader.multiprocessing_context=spawn: backend=nodes_thread has no such knob"),
    (["backend=dataloader", "backend.name=spdl", "loader.num_workers=2"],
     "backend.name=spdl: choose the stack as backend=spdl, which brings its options"),
    (["backend=spdl", "loader.num_workers=2", "loader.worker_init_fn=os.getpid"],
     "loader.worker_init_fn=os.getpid: backend=spdl has no such knob"),
])
def test_a_knob_the_backend_lacks_is_an_error(compose_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        _validate(compose_cfg, overrides)


def test_an_option_of_another_stack_fails_at_compose_time(compose_cfg):
    with pytest.raises(Exception, match="Could not override 'backend.num_threads'"):
        compose_cfg(["backend=nodes_thread", "loader.num_workers=2", "backend.num_threads=4"])


def test_the_knobs_a_backend_has_pass(compose_cfg):
    assert _validate(compose_cfg, ["backend=nodes_process", "loader.num_workers=2",
                                   "loader.multiprocessing_context=spawn"]) == []
    assert _validate(compose_cfg, ["backend=spdl", "loader.num_workers=2", "backend.num_threads=4",
                                   "loader.in_order=false", "loader.prefetch_factor=4"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["cifar10", "imagefolder", "synthetic"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_loads_every_dataset_with_delivery_ok(compose_cfg, tmp_path, backend, dataset):
    pytest.importorskip({"nodes_thread": "torchdata.nodes", "nodes_process": "torchdata.nodes",
                         "spdl": "spdl.pipeline"}.get(backend, "torch"))
    result = run_small(compose_cfg, tmp_path, [f"dataset={dataset}", f"backend={backend}", "loader.num_workers=2",
                                               "sampler=random", *SMALL[dataset]])
    assert result.status == "FINISHED", result.error
    assert result.info.backend == backend
    assert result.info.delivery_ok is True, result.info.delivery_problems
    assert result.metrics["throughput_samples_per_s"] > 0 and result.metrics["pss_peak_mb"] > 0
    if backend == "nodes_thread" or backend == "spdl":
        assert result.info.worker_start_method is None  # threads: no processes to start


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["nodes_thread", "spdl"])
def test_a_transform_that_raises_in_a_thread_fails_the_run_with_its_cause(compose_cfg, tmp_path, backend):
    pytest.importorskip("torchdata.nodes" if backend.startswith("nodes") else "spdl.pipeline")
    result = run_small(compose_cfg, tmp_path, ["dataset=synthetic", f"backend={backend}", "loader.num_workers=2",
                                               *SMALL["synthetic"], "dataset._target_=tests.faulty.Raising",
                                               f"+dataset.python_path={REPO}"])
    assert result.status == "FAILED"
    assert "broken sample 5" in result.error, result.error


@pytest.mark.slow
def test_an_iterable_dataset_needs_the_dataloader(compose_cfg, tmp_path):
    pytest.importorskip("torchdata.nodes")
    result = run_small(compose_cfg, tmp_path, ["dataset=stream", "backend=nodes_thread", "loader.num_workers=2",
                                               *SMALL["stream"]])
    assert result.status == "FAILED"
    assert "backend=nodes_thread: the dataset is an IterableDataset" in result.error


def test_host_facts_say_whether_the_gil_is_on():
    import sys

    from loaderexp.result import machine_facts

    expected = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    assert machine_facts().gil_enabled is expected


def test_a_backend_whose_package_is_missing_says_how_to_install_it(compose_cfg, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "spdl" else real(name, *a))
    with pytest.raises(ConfigError, match=r'backend=spdl needs spdl, which is not installed: pip install -e "\.\[backends\]"'):
        _validate(compose_cfg, ["backend=spdl", "loader.num_workers=2"])


class _CountsChildrenAtFirstDraw:
    """A batch sampler that notes how many child processes exist when its first batch is drawn."""

    def __init__(self, size: int, batch: int):
        self.batches = [list(range(i, min(i + batch, size))) for i in range(0, size, batch)]
        self.children_at_first_draw = None

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        import multiprocessing

        self.children_at_first_draw = len(multiprocessing.active_children())
        yield from self.batches


def test_nodes_process_draws_no_batch_before_its_workers_have_started():
    """torchdata starts its reader thread before it forks the workers; a fork landing inside the
    sampler's first torch call hangs the worker (glibc's atexit lock), so the sampler is held."""
    pytest.importorskip("torchdata.nodes")
    import multiprocessing

    import torch
    from torch.utils.data import TensorDataset
    from torch.utils.data._utils.collate import default_collate

    from loaderexp.config.schema import LoaderConfig, MpContext
    from loaderexp.loading.base import BatchFetch
    from loaderexp.loading.nodes_graph import NodesLoader

    sampler = _CountsChildrenAtFirstDraw(64, 8)
    before = len(multiprocessing.active_children())
    loader = LoaderConfig(num_workers=2, in_order=True, multiprocessing_context=MpContext.fork, prefetch_factor=2)
    nodes = NodesLoader(sampler, BatchFetch(TensorDataset(torch.arange(64)), default_collate), loader, "process", False)
    batches = list(nodes)
    assert len(batches) == 8
    assert sampler.children_at_first_draw == before + 2
