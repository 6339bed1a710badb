"""run(cfg) in process: result.json and the MLflow run it writes, read back."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from loaderexp.result import RunFacts, RunResult
from loaderexp.runner import JobContext, run
from tests.conftest import TINY


def test_run_writes_result_json_and_an_mlflow_run(compose_cfg, store, tmp_path):
    cfg = compose_cfg([*TINY, "loader.num_workers=1", f"tracking.uri={store}", "tracking.experiment=unit"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job", overrides=["loader.num_workers=1"]))
    assert result.status == "FINISHED", result.error

    saved = json.loads((tmp_path / "job" / "result.json").read_text())
    assert saved["params"]["loader.num_workers"] == 1
    assert saved["params"]["dataset.name"] == "synthetic"
    metrics = saved["metrics"]
    assert metrics["throughput_samples_per_s"] > 0
    assert metrics["measured_batches"] == 10
    assert metrics["measured_samples"] == 320
    assert 0 < metrics["wait_p50_ms"] <= metrics["wait_p95_ms"]
    assert metrics["time_to_first_batch_s"] > 0
    assert metrics["delivery_ok"] == 1.0
    assert metrics["h2d_measured"] == 0.0
    assert saved["info"]["h2d"].startswith("CUDA not available")
    assert saved["info"]["data_source"] == "generated"
    assert saved["host"]["cpu_count"] >= 1 and saved["host"]["torch"]
    assert (tmp_path / "job" / "batches.csv").read_text().startswith("repeat,batch,wait_ms,busy_ms")

    client = MlflowClient(store)
    run_ = client.get_run(result.run_id)
    assert run_.info.status == "FINISHED"
    assert run_.data.params["loader.num_workers"] == "1"
    assert run_.data.params["loader.pin_memory"] == "false"
    assert run_.data.metrics["throughput_samples_per_s"] == pytest.approx(metrics["throughput_samples_per_s"])
    assert run_.data.tags["host.cpu_count"] == str(saved["host"]["cpu_count"])
    artifacts = {a.path for a in client.list_artifacts(result.run_id)}
    assert {"result.json", "resolved_config.yaml", "batches.csv"} <= artifacts


def test_failing_dataset_is_recorded_as_a_failed_run(compose_cfg, store, tmp_path):
    cfg = compose_cfg([*TINY, "dataset.num_samples=-5", f"tracking.uri={store}"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert "RuntimeError" in result.error or "Error" in result.error
    assert RunResult.read(tmp_path / "job" / "result.json").status == "FAILED"
    run_ = MlflowClient(store).get_run(result.run_id)
    assert run_.info.status == "FAILED"
    assert run_.data.tags["error"] == result.error


def test_invalid_combination_fails_before_any_worker_starts(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "loader.num_workers=2", "loader.prefetch_factor=0"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FAILED"
    assert result.error.startswith("loader.prefetch_factor=0: must be null or an integer >= 1")
    assert result.metrics == {}


def test_the_baseline_of_a_prefetch_sweep_runs_without_the_worker_knobs(compose_cfg, tmp_path):
    """num_workers=0 with prefetch_factor=4 and persistent_workers=true: measured, and recorded as not applied."""
    cfg = compose_cfg([*TINY, "tracking=none", "loader.prefetch_factor=4", "loader.persistent_workers=true"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FINISHED", result.error
    assert result.info.not_applied == ["loader.prefetch_factor=4", "loader.persistent_workers=true"]
    assert result.params["loader.prefetch_factor"] == 4  # what the sweep asked for stays the run's identity
    assert any("not applied" in w for w in result.warnings)


def test_pin_memory_without_accelerator_runs_and_records_the_warning(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "loader.pin_memory=true", "loader.num_workers=1"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FINISHED"
    assert any("pin_memory=true" in w for w in result.warnings)
    assert result.metrics["pinned_fraction"] == 0.0


# Loader-bound on samples that cost a known sleep (32 ms a batch against a step of none): a window of a few ms of
# synthetic batches let one preemption outside the waits flip the share (CI read under 0.5 where 0.75 is usual).
@pytest.mark.parametrize("overrides,bound", [(["step.ms=50"], "compute-bound"),
                                             (["step.ms=0", "dataset=sleep", "dataset.sleep_ms=1"], "loader-bound")])
def test_a_training_step_gives_stall_fraction_and_bound(compose_cfg, tmp_path, overrides, bound):
    cfg = compose_cfg([*TINY, "tracking=none", "step=sleep", *overrides])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FINISHED", result.error
    assert result.info.bound == bound
    stall = result.metrics["stall_fraction"]
    assert (stall < 0.1) if bound == "compute-bound" else (stall > 0.8)
    if bound == "compute-bound":
        assert result.metrics["step_ms_mean"] >= 50


def test_repeats_give_a_spread_and_later_epochs_their_own_start_up(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, "tracking=none", "bench.repeats=3", "loader.num_workers=1",
                       "loader.persistent_workers=true"])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    metrics = result.metrics
    assert metrics["repeats"] == 3 and metrics["measured_batches"] == 30
    assert metrics["throughput_iqr_rel"] >= 0 and metrics["noisy"] in (0.0, 1.0)
    assert metrics["time_to_first_batch_later_epochs_s"] > 0
    assert metrics["throughput_first_repeat_samples_per_s"] > 0


def test_a_run_holds_the_host_while_it_measures_and_records_the_interval(compose_cfg, tmp_path, monkeypatch):
    from loaderexp.execute.host_lock import exclusive_host

    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(tmp_path / "host.lock"))
    cfg = compose_cfg([*TINY, "tracking=none"])
    result = run(cfg, JobContext(output_dir=tmp_path / "exclusive"))
    assert result.status == "FINISHED", result.error
    info = result.info
    assert info.host_lock == "exclusive" and info.waited_for_host_s >= 0
    assert 0 < info.measured_until - info.measured_from < 600
    assert not [w for w in result.warnings if "shared_host_ok" in w]
    free = RunFacts()
    with exclusive_host("probe", False, free):  # released afterwards
        pass
    assert free.waited_for_host_s < 1

    shared = run(compose_cfg([*TINY, "tracking=none", "bench.shared_host_ok=true"]),
                 JobContext(output_dir=tmp_path / "shared"))
    assert shared.info.host_lock.startswith("shared")
    assert any(w.startswith("bench.shared_host_ok=true: other measurements may have run") for w in shared.warnings)


def test_an_interrupt_names_its_signal():
    """Round two, item 5: SIGHUP's record said "Ctrl-C or SIGTERM"."""
    import signal

    from loaderexp.execute.faults import interrupted_by

    assert interrupted_by(KeyboardInterrupt(f"signal {int(signal.SIGHUP)}")) == "SIGHUP"
    assert interrupted_by(KeyboardInterrupt(f"signal {int(signal.SIGTERM)}")) == "SIGTERM"
    assert interrupted_by(KeyboardInterrupt()) == "Ctrl-C"
