"""The edges a team meets in its first week: nothing lost, nothing overwritten, no hang, clear and early errors.
Each test failed on the code before its fix (issue 24); the security edges are in test_security.py."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from loaderexp.result import RunResult
from tests.conftest import REPO, TINY, run_cli, wait_until_a_job_measures


def children(store: str, experiment: str = "loaderexp") -> tuple[object, list]:
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parent = next(r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent")
    return parent, [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def folder_configs(sweep: Path) -> dict[str, tuple]:
    """Each job folder's seed as Hydra recorded its overrides, and as its result.json measured it."""
    found = {}
    for result in sweep.glob("*/result.json"):
        overrides = (result.parent / ".hydra" / "overrides.yaml").read_text()
        seed = next(line.split("=")[1] for line in overrides.splitlines() if "bench.seed=" in line)
        found[result.parent.name] = (int(seed), RunResult.read(result).params["bench.seed"])
    return found


@pytest.mark.slow
def test_resuming_with_a_changed_grid_never_writes_into_another_configurations_folder(tmp_path, data_root):
    store, sweep = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep"
    first = run_cli(["-m", *TINY, "bench.seed=1,2", f"tracking.uri={store}", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p.parent.name: RunResult.read(p) for p in sweep.glob("*/result.json")}
    again = run_cli(["-m", *TINY, "bench.seed=0,1,2", "resume=true", f"tracking.uri={store}",
                     f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    configs = folder_configs(sweep)
    assert sorted(seed for seed, _ in configs.values()) == [0, 1, 2]
    assert all(recorded == measured for recorded, measured in configs.values())  # no folder holds two
    for name, result in before.items():  # what was measured stays where it was, untouched
        assert RunResult.read(sweep / name / "result.json").info.measured_from == result.info.measured_from
    parent, runs = children(store)
    assert len(runs) == 3 and {r.data.params["bench.seed"] for r in runs} == {"0", "1", "2"}
    assert "bench.seed=0,1,2" in parent.data.tags["loaderexp.grid"]  # the grid as it is now
    assert "3 jobs" in parent.info.run_name and parent.info.status == "FINISHED"
    assert "resume" not in again.stdout.split("Recommendation")[1].split("\n")[0]


@pytest.mark.slow
def test_a_full_disk_for_one_result_loses_neither_its_measurement_nor_the_sweep(tmp_path, data_root):
    store, sweep = f"sqlite:///{tmp_path / 'a dir' / 'mlflow.db'}", tmp_path / "sweep"
    (tmp_path / "a dir").mkdir()
    (sweep / "1").mkdir(parents=True)
    (sweep / "1" / "result.tmp").symlink_to("/dev/full")  # its writes fail with ENOSPC, as on a full disk
    proc = run_cli(["-m", *TINY, "bench.seed=0,1,2", f"tracking.uri={store}", f"hydra.sweep.dir={sweep}"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output and "UserWarning" not in output
    assert f"result.json could not be written to {sweep / '1' / 'result.json'}" in output
    assert "3 of 3 jobs recorded" in proc.stdout and "Recommendation" in proc.stdout  # MLflow holds the third
    assert "1 of them could not be written to the sweep folder: 1 (MLflow run " in proc.stdout
    assert f"--backend-store-uri 'sqlite:///{tmp_path / 'a dir' / 'mlflow.db'}'" in proc.stdout  # pastes as one
    parent, runs = children(store)
    assert parent.info.status == "FINISHED" and sorted(r.info.status for r in runs) == ["FINISHED"] * 3
    unwritten = next(r for r in runs if r.data.params["bench.seed"] == "1")
    assert unwritten.data.metrics["throughput_samples_per_s"] > 0  # the measurement reached MLflow
    assert str(sweep / "1" / "result.json") in unwritten.data.tags["mlflow.note.content"]
    # A truncated file another run left in the folder (a sweep refuses a used folder, so it comes after):
    (sweep / "stray").mkdir()
    (sweep / "stray" / "result.json").write_text('{"status": "FINI')
    report = subprocess.run([sys.executable, "-m", "loaderexp.report", str(sweep)], capture_output=True, text=True,
                            cwd=tmp_path)
    assert report.returncode == 0 and "Traceback" not in report.stderr
    assert f"skipped {sweep / 'stray' / 'result.json'}: not a loaderexp result" in report.stderr  # named, not fatal


def _sweep_until_measuring(tmp_path: Path, store: str, sweep: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "loaderexp", "-m", *TINY, "bench.budget=seconds", "bench.seconds=1.5",
            "bench.seed=0,1,2", f"tracking.uri={store}", f"hydra.sweep.dir={sweep}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    wait_until_a_job_measures(proc, store)  # job 2 is measuring now
    return proc


@pytest.mark.slow
def test_a_closed_terminal_ends_the_sweep_as_ctrl_c_does(tmp_path, data_root):
    store, sweep = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep"
    proc = _sweep_until_measuring(tmp_path, store, sweep)
    proc.send_signal(signal.SIGHUP)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    parent, runs = children(store)
    assert parent.info.status == "KILLED" and sorted(r.info.status for r in runs) == ["FINISHED", "KILLED"]


@pytest.mark.slow
def test_resuming_a_sweep_killed_outright_closes_what_it_left_running(tmp_path, data_root):
    store, sweep = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep"
    proc = _sweep_until_measuring(tmp_path, store, sweep)
    os.killpg(proc.pid, signal.SIGKILL)  # the OOM killer, or kill -9: nothing of it can clean up
    proc.communicate(timeout=60)
    time.sleep(1)
    _, runs = children(store)
    assert "RUNNING" in {r.info.status for r in runs}
    again = run_cli(["-m", *TINY, "bench.budget=seconds", "bench.seconds=1.5", "bench.seed=0,1,2", "resume=true",
                     f"tracking.uri={store}", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    parent, runs = children(store)
    assert parent.info.status == "FINISHED" and "RUNNING" not in {r.info.status for r in runs}
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED", "FINISHED", "KILLED"]


def test_resume_is_not_a_knob_of_the_comparison():
    from loaderexp.report.params import varying_params

    results = [RunResult("FINISHED", {"bench.seed": 1, "dataset.seed": s, "resume": r}) for s, r in ((1, False), (2, True))]
    assert varying_params(results) == ["dataset.seed"]


@pytest.mark.parametrize("override,message", [
    ("bench.precision=nan", "bench.precision=nan: must be a finite number > 0"),
    ("bench.stall_s=nan", "bench.stall_s=nan: must be a finite number > 0"),
    ("bench.job_timeout_s=nan", "bench.job_timeout_s=nan: must be a finite number > 0"),
    ("bench.noise_threshold=-1", "bench.noise_threshold=-1: must be >= 0"),
    ("step.num_classes=0", "step.num_classes=0: must be >= 1"),
    ("bench.seconds=inf", "bench.seconds=inf: must be a finite number > 0"),
    ("tracking.experiment=''", "tracking.experiment='': must not be empty"),
])
def test_a_number_out_of_range_or_not_finite_is_a_config_error(compose_cfg, override, message):
    from loaderexp.config import ConfigError, to_spec, validate

    with pytest.raises(ConfigError) as error:
        validate(to_spec(compose_cfg([*TINY, override])), cuda_available=False, cpus=2, targets=False)
    assert message in error.value.problems


@pytest.mark.slow
def test_building_the_dataset_is_not_a_stall_and_has_its_own_limit(compose_cfg, tmp_path):
    from loaderexp.runner import JobContext, run

    slow = [*TINY, "tracking=none", "dataset._target_=tests.faulty.SlowToBuild", f"+dataset.python_path={REPO}"]
    built = run(compose_cfg([*slow, "+dataset.build_s=4", "bench.stall_s=1"]), JobContext(output_dir=tmp_path / "a"))
    assert built.status == "FINISHED", built.error
    timed_out = run(compose_cfg([*slow, "+dataset.build_s=60", "bench.job_timeout_s=3", "bench.seed=1"]),
                    JobContext(output_dir=tmp_path / "b"))
    assert timed_out.status == "FAILED" and "the dataset was still being built" in timed_out.error


@pytest.mark.parametrize("multirun,uri", [
    pytest.param(False, "sqlite:////proc/loaderexp.db", id="False-sqlite:////proc/loaderexp.db"),
    pytest.param(True, "file:///proc/loaderexp-mlruns", id="True-file:///proc/loaderexp-mlruns"),
    pytest.param(True, "sqlite:////proc/loaderexp.db", id="True-sqlite:////proc/loaderexp.db", marks=pytest.mark.slow),
    pytest.param(False, "file:///proc/loaderexp-mlruns", id="False-file:///proc/loaderexp-mlruns", marks=pytest.mark.slow),
])
def test_a_store_that_cannot_be_written_stops_a_run_and_a_sweep_alike(tmp_path, data_root, uri, multirun):
    mode = ["-m", f"hydra.sweep.dir={tmp_path / 'sweep'}"] if multirun else [f"hydra.run.dir={tmp_path / 'run'}"]
    started = time.monotonic()
    proc = run_cli([*mode, *TINY, f"tracking.uri={uri}"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and time.monotonic() - started < 60
    assert f"tracking.uri={uri}: cannot create" in proc.stderr
    assert not list(tmp_path.rglob("result.json"))  # nothing measured, unlogged


@pytest.mark.slow
def test_an_empty_experiment_name_is_a_config_error_not_an_unavailable_store(tmp_path, data_root, store):
    proc = run_cli([*TINY, f"tracking.uri={store}", "tracking.experiment=''", f"hydra.run.dir={tmp_path / 'run'}"],
                   cwd=tmp_path)
    assert proc.returncode == 2 and "tracking.experiment='': must not be empty" in proc.stderr
    assert "unavailable" not in proc.stderr


def _open_store(uri: str, start: float, answers) -> None:
    while time.time() < start:
        time.sleep(0.001)
    try:
        from loaderexp.track.tracker import MlflowTracker

        MlflowTracker(uri, "race")
        answers.put("ok")
    except Exception as error:  # noqa: BLE001 - the test wants what it was
        answers.put(f"{type(error).__name__}: {str(error).splitlines()[0]}")


@pytest.mark.slow
def test_two_sweeps_starting_on_a_fresh_sqlite_file_both_get_the_store(tmp_path):
    ctx = mp.get_context("spawn")
    for attempt in range(3):
        uri, answers = f"sqlite:///{tmp_path / f'fresh{attempt}.db'}", ctx.Queue()
        start = time.time() + 5  # both past their imports, then at once
        sweeps = [ctx.Process(target=_open_store, args=(uri, start, answers)) for _ in range(2)]
        for process in sweeps:
            process.start()
        assert [answers.get(timeout=120) for _ in sweeps] == ["ok", "ok"]
        for process in sweeps:
            process.join(30)


@pytest.mark.slow
def test_the_report_never_creates_a_store_and_names_an_unknown_run_in_a_line(tmp_path, store):
    from loaderexp.track.tracker import MlflowTracker

    typo = tmp_path / "typo.db"
    proc = subprocess.run([sys.executable, "-m", "loaderexp.report", "abc123", "--uri", f"sqlite:///{typo}"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "no MLflow store there" in proc.stderr and not typo.exists()
    MlflowTracker(store, "x")
    proc = subprocess.run([sys.executable, "-m", "loaderexp.report", "abc123", "--uri", store], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "abc123: no such run" in proc.stderr and "Traceback" not in proc.stderr


def test_the_shm_preflight_counts_the_batch_a_short_dataset_really_makes():
    import torch
    from torch.utils.data import TensorDataset

    from loaderexp.harness.shm import shm_preflight

    free = shutil.disk_usage("/dev/shm").free
    per_sample = int(2 * free / (8 * 2 * 1024)) + 1  # 1024-sample batches in flight: twice /dev/shm
    dataset = TensorDataset(torch.zeros(2, per_sample // 4, dtype=torch.float32))
    shm_preflight(dataset, False, batch_size=1024, num_workers=8, prefetch_factor=2)  # 2 samples a batch: fits


def test_more_workers_than_an_epoch_has_batches_size_the_warmup_to_the_epoch(compose_cfg, tmp_path):
    from loaderexp.runner import JobContext, run

    result = run(compose_cfg([*TINY, "tracking=none", "loader.num_workers=12"]), JobContext(output_dir=tmp_path))
    assert result.status == "FINISHED", result.error
    per_epoch = result.info.batches_per_epoch  # 256 samples in batches of 32
    assert per_epoch == 8 and result.info.warmup_batches <= per_epoch and result.info.round_size <= per_epoch
    assert any("loader.num_workers=12 for 8 batches an epoch" in w for w in result.warnings)


def test_the_v2_switch_works_with_the_datasets_usual_transform(compose_cfg):
    from loaderexp.config import to_spec

    transform = to_spec(compose_cfg(["transform.api=v2"])).transform
    assert transform.name == "cifar_train" and transform.get("api") == "v2"


@pytest.mark.slow
@pytest.mark.parametrize("resources, cpus, offered", [
    (None, 1, '{"CPU": 1.0, "loaderexp_host": 0}'),  # a plain `ray start --head`
    ('{"loaderexp_host": 1}', 0, '{"CPU": 0, "loaderexp_host": 1.0}'),  # the resource, but no CPU (round two, 12)
])
def test_a_ray_cluster_whose_nodes_offer_no_host_resource_is_refused_up_front(tmp_path, data_root, resources, cpus,
                                                                              offered):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    from tests.ray_cluster import one_node_cluster

    with one_node_cluster(resources=resources, cpus=cpus) as ray_env:
        started = time.monotonic()
        proc = run_cli(["-m", "hydra/launcher=ray", *TINY, "loader.num_workers=0,1", "tracking=none",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=ray_env, timeout=300)
    assert proc.returncode == 2 and time.monotonic() - started < 240, proc.stderr[-2000:]
    assert 'offers {"CPU": 1, "loaderexp_host": 1} together' in proc.stderr and "--resources=" in proc.stderr
    assert f"the nodes offer: {offered}" in proc.stderr


def test_no_ray_cluster_to_join_says_how_to_start_one(monkeypatch, capsys):
    """hydra/launcher=ray with no `ray start` on the machine ended in Ray's own words ("Please specify the one to
    connect to by setting `--address` flag"), a flag of Ray's CLI, not of this command.  Ray finds a cluster by
    scanning the machine's processes (a parallel test's head would be found), so Ray's refusal is made here."""
    ray = pytest.importorskip("ray")
    from omegaconf import OmegaConf

    from loaderexp.track.launchers import check_ray_resources

    def refuse(**kwargs):
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to by "
                              "setting `--address` flag or `RAY_ADDRESS` environment variable.")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    config = OmegaConf.create({"hydra": {"launcher": {"ray": {"init": {"address": "auto"}, "remote": {
        "num_cpus": 1, "resources": {"loaderexp_host": 1}}}}}})
    with pytest.raises(SystemExit) as stopped:
        check_ray_resources(config)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1
    assert "hydra/launcher=ray: no Ray cluster at auto" in err and "`ray start --head --resources=" in err
    assert "the sweep did not start" in err and "--address` flag" not in err


@pytest.mark.slow
def test_a_sweep_where_every_job_failed_exits_non_zero_and_says_so(tmp_path, data_root):
    """Round two, item 7: CI relies on the exit code; the parent run says FAILED too."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = run_cli(["-m", *TINY, "dataset.num_samples=-5", "loader.num_workers=0,1", f"tracking.uri={uri}",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=REPO)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "no job measured: 2 of 2 jobs recorded, none finished" in done.stderr
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    parents = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
               if r.data.tags.get("loaderexp.sweep") == "parent"]
    assert [p.info.status for p in parents] == ["FAILED"]


@pytest.mark.slow
def test_a_used_sweep_folder_is_refused_without_resume_and_locked_while_a_sweep_writes_it(tmp_path, data_root):
    """Round two, item 3: two sweeps into one hydra.sweep.dir overwrote each other's job folders."""
    import fcntl
    import os

    sweep = tmp_path / "sweep"
    args = ["-m", *TINY, "tracking=none", "loader.num_workers=0", f"hydra.sweep.dir={sweep}"]
    assert run_cli(args, cwd=REPO).returncode == 0
    before = (sweep / "0" / "result.json").read_text()
    again = run_cli(args, cwd=REPO)
    assert again.returncode == 2 and f"hydra.sweep.dir={sweep} already holds a sweep" in again.stderr
    assert "add resume=true" in again.stderr and (sweep / "0" / "result.json").read_text() == before
    assert run_cli([*args, "resume=true"], cwd=REPO).returncode == 0  # resuming it is the way on
    fd = os.open(sweep / ".loaderexp-sweep.lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a sweep writing it now
    try:
        busy = run_cli([*args, "resume=true"], cwd=REPO)
    finally:
        os.close(fd)
    assert busy.returncode == 2 and "another sweep is writing this folder now" in busy.stderr


def test_a_grid_resumed_into_a_folder_of_other_jobs_counts_them_together(tmp_path):
    """A different grid resumed into a folder (dataset=custom's two failed jobs, then six CIFAR-10 ones) said "8 of 6
    jobs recorded": the folder's jobs and the command's are counted together, and the axes are both grids'; the same
    grid resumed (resume=true among its overrides) adds nothing."""
    from loaderexp.result.sweep_record import SweepRecord
    from loaderexp.track.sweep import with_the_folders_jobs

    old = [["dataset=custom", "loader.num_workers=0"], ["dataset=custom", "loader.num_workers=2"]]
    SweepRecord(total=2, swept_keys=["loader.num_workers"], jobs=old).write(tmp_path)
    new = [[f"sampler={s}", f"loader.num_workers={w}", "resume=true"] for s in ("random", "weighted") for w in (0, 2, 4)]
    total, swept, jobs = with_the_folders_jobs(tmp_path, 6, ("sampler", "loader.num_workers"), new, resume=True)
    assert total == 8 and swept == ("loader.num_workers", "sampler") and jobs == [*old, *new]
    again = [[*job, "resume=true", "hydra.sweep.dir=x"] for job in old]
    assert with_the_folders_jobs(tmp_path, 2, ("loader.num_workers",), again, resume=True)[0] == 2
    assert with_the_folders_jobs(tmp_path, 6, ("sampler",), new, resume=False)[0] == 6  # a new sweep: its own
