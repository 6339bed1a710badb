"""Several ranks per node: two ranks loading at once, lined up, gathered, checked across ranks, and
failing together when one fails.  On this CPU machine the ranks run on the CPU (gloo)."""

from __future__ import annotations

import os

import psutil
import pytest

from loaderexp.config import ConfigError, validate
from loaderexp.execute.ranks import _check_shares, core_shares, ranks_environment
from loaderexp.runner import JobContext, run
from tests.conftest import REPO, TINY

FAULTY = "tests.faulty."


def test_cores_are_split_evenly_between_ranks():
    assert core_shares(list(range(8)), 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert core_shares(list(range(8)), 3) == [[0, 1], [2, 3], [4, 5]]
    assert core_shares([0, 1], 4) == [[0], [1], [0], [1]]


def test_the_shares_check_finds_a_gap_and_counts_the_padding():
    assert _check_shares([[0, 2, 4], [1, 3, 0]], 5) == ([], 1)  # DistributedSampler pads 5 to 6
    problems, _ = _check_shares([[0, 2], [2, 3]], 4)
    assert problems and "3 distinct samples of 4" in problems[0]


def test_dist_settings_are_validated_before_anything_starts(compose_cfg):
    cfg = compose_cfg([*TINY, "dist.nproc_per_node=0"])
    with pytest.raises(ConfigError, match=r"dist.nproc_per_node=0: must be >= 1"):
        validate(_plain(cfg), False, 2, targets=False)
    cfg = compose_cfg([*TINY, "dist.nproc_per_node=2", "sampler=weighted"])
    with pytest.raises(ConfigError, match=r"sampler=weighted with dist.nproc_per_node=2: .* valid samplers: random, "
                                          r"sequential, distributed"):
        validate(_plain(cfg), False, 2, targets=False)
    warnings = validate(_plain(compose_cfg([*TINY, "dist.nproc_per_node=2", "loader.num_workers=2"])), False, 2,
                        targets=False)
    assert any("dist.nproc_per_node=2 x loader.num_workers=2 = 4 workers exceed the 2 CPUs" in w for w in warnings)


def _plain(cfg):
    from loaderexp.config import composed_spec

    return composed_spec(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_two_ranks_load_at_once_and_one_run_holds_both(compose_cfg, tmp_path, workers, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cfg = compose_cfg([*TINY, "tracking=none", "dist.nproc_per_node=2", f"loader.num_workers={workers}",
                       "dist.cpu_affinity=true", "dataset.num_samples=250"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FINISHED", result.error
    m, info = result.metrics, result.info
    assert m["ranks"] == 2 and info.ranks == 2
    per_rank = [m["rank0.throughput_samples_per_s"], m["rank1.throughput_samples_per_s"]]
    assert all(rate > 0 for rate in per_rank)
    assert m["throughput_samples_per_s"] == pytest.approx(sum(per_rank))
    assert m["throughput_slowest_rank_samples_per_s"] == min(per_rank)
    assert m["throughput_synchronous_samples_per_s"] == pytest.approx(2 * min(per_rank))
    assert m["time_to_first_batch_s"] == max(m["rank0.time_to_first_batch_s"], m["rank1.time_to_first_batch_s"])
    assert m["pss_peak_mb"] == pytest.approx(m["rank0.pss_peak_mb"] + m["rank1.pss_peak_mb"])
    # 250 samples over 2 ranks: 125 each, no padding; the shares cover every sample once.
    assert info.delivery_ok is True and info.dist_padding_samples == 0, info.delivery_problems
    assert "cover the 250 samples exactly once" in info.delivery_across_ranks
    assert info.rank_devices == ["cpu", "cpu"] and info.rank_start_method == "spawn"
    assert info.rank_threads == 1  # torchrun's OMP_NUM_THREADS=1 for each rank: no thread pool per core in each
    assert "OMP_NUM_THREADS" not in os.environ  # the launch's own, not left behind for the next job
    usable = sorted(psutil.Process().cpu_affinity())
    assert info.rank_cores == core_shares(usable, 2)
    if workers:
        assert info.worker_start_method == "fork"  # as under torchrun, not the ranks' own spawn
    batches = (tmp_path / "job" / "batches.csv").read_text().splitlines()
    assert batches[0].startswith("rank,") and {line.split(",")[0] for line in batches[1:]} == {"0", "1"}



def test_ranks_get_torchruns_one_thread_unless_the_environment_sets_it(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert ranks_environment() == {"OMP_NUM_THREADS": "1"}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert ranks_environment() == {}  # the user's, as torchrun keeps it


@pytest.mark.slow
def test_forked_ranks_take_the_users_threads_though_their_parent_imported_torch(compose_cfg, tmp_path, monkeypatch):
    """A forked rank's torch read its thread count in the parent, before the launch: the rank sets it itself."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    cfg = compose_cfg([*TINY, "tracking=none", "dist.nproc_per_node=2", "dist.start_method=fork",
                       "bench.isolate=false", "dataset.num_samples=250"])
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what a rank would inherit: not the environment's
    try:
        result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    finally:
        torch.set_num_threads(threads)
    assert result.status == "FINISHED", result.error
    assert result.info.rank_threads == 2 and result.info.rank_start_method == "fork"

@pytest.mark.slow
def test_an_odd_dataset_is_padded_and_the_padding_is_stated(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "dist.nproc_per_node=2", "dataset.num_samples=251",
                       "sampler=sequential"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FINISHED", result.error
    assert result.info.delivery_ok is True and result.info.dist_padding_samples == 1
    assert "DistributedSampler repeats 1" in result.info.delivery_across_ranks


@pytest.mark.slow
@pytest.mark.parametrize("fault,workers,expected", [
    ("RankOneRaises", 1, r"rank 1 \(pid \d+\) failed: .*ValueError: rank 1 cannot read its samples"),
    ("RankOneKilled", 0, r"rank 1 \(pid \d+\) failed: killed by signal 9"),
])
def test_a_failing_rank_fails_the_run_with_its_cause_and_takes_its_siblings_down(compose_cfg, tmp_path, fault,
                                                                                 workers, expected):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    cfg = compose_cfg([*TINY, "tracking=none", "dist.nproc_per_node=2", f"loader.num_workers={workers}",
                       f"dataset._target_={FAULTY}{fault}", f"+dataset.python_path={REPO}"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert result.error.splitlines()[0].startswith("RankFailed: rank 1"), result.error
    import re

    assert re.search(expected, result.error), result.error
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE
            and not any(kept in " ".join(p.cmdline()) for kept in ("forkserver", "resource_tracker"))]
    assert left == [], [p.cmdline() for p in left]


@pytest.mark.slow
def test_a_hung_rank_is_a_stall_and_the_run_fails(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "dist.nproc_per_node=2", f"dataset._target_={FAULTY}RankOneHangs",
                       f"+dataset.python_path={REPO}", "bench.stall_s=10"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert "stall" in result.error.lower(), result.error


def test_more_ranks_than_gpus_is_refused_up_front(compose_cfg):
    cfg = _plain(compose_cfg([*TINY, "dist.nproc_per_node=4", "device=cuda"]))
    with pytest.raises(ConfigError, match=r"dist.nproc_per_node=4 with device.type=cuda: each rank uses its own GPU "
                                          r"and this host has 2; valid here: 1..2, or device.type=cpu"):
        validate(cfg, True, 16, targets=False, gpus=2)
    assert validate(_plain(compose_cfg([*TINY, "dist.nproc_per_node=4", "device=cpu"])), True, 16, targets=False,
                    gpus=2) == []


@pytest.mark.slow
def test_a_sweep_over_rank_counts_reports_per_rank_in_mlflow(tmp_path, data_root):
    from mlflow.tracking import MlflowClient

    from tests.conftest import run_cli

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(["-m", *TINY, "dist.nproc_per_node=1,2", "loader.num_workers=0", f"tracking.uri={store}",
                    "tracking.experiment=ranks", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Recommendation: num_workers=0 per rank with 2 ranks" in proc.stdout
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("ranks").experiment_id],
                              "params.`dist.nproc_per_node` = '2'")
    assert len(runs) == 1  # one run per configuration, not one per rank
    metrics = runs[0].data.metrics
    assert metrics["ranks"] == 2 and metrics["rank1.throughput_samples_per_s"] > 0
    assert metrics["throughput_samples_per_s"] == pytest.approx(
        metrics["rank0.throughput_samples_per_s"] + metrics["rank1.throughput_samples_per_s"])


def test_the_cause_is_the_rank_that_failed_of_its_own_not_the_one_that_lost_its_peer():
    from types import SimpleNamespace

    from loaderexp.execute.ranks import _failure_text

    lost = SimpleNamespace(message={"message": "RuntimeError: [gloo/transport/tcp/pair.cc:561] Connection closed by "
                                               "peer [127.0.0.1]:51874. This is typically caused by a remote worker "
                                               "crashing."}, exitcode=1, pid=10, timestamp=100)
    cause = SimpleNamespace(message={"message": "ValueError: rank 1 cannot read its samples"}, exitcode=1, pid=11,
                            timestamp=100)
    text = _failure_text(SimpleNamespace(failures={0: lost, 1: cause}))
    assert text == "rank 1 (pid 11) failed: ValueError: rank 1 cannot read its samples"
    killed = SimpleNamespace(message="", exitcode=-9, pid=12, timestamp=101)
    assert _failure_text(SimpleNamespace(failures={0: lost, 1: killed})).startswith("rank 1 (pid 12) failed: killed "
                                                                                    "by signal 9")
