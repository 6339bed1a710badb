"""The second round of edges: each case broke on a careful user's or a careless colleague's hands."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from loaderexp.result import RunResult, Status
from tests.conftest import REPO, TINY, as_a_terminal_starts_it, run_cli

# Sleep-cost samples: two workers are truly faster than one, so the pick (2) has a rival with fewer workers
# that the final confirmation measures side by side for a while.
CONFIRMED = ["dataset=sleep", "dataset.sleep_ms=2", "loader.batch_size=8", "bench=quick", "bench.confirm_s=30",
             "loader.num_workers=1,2"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_during_the_confirmation_ends_the_sweep_at_once(tmp_path, data_root, sig):
    store, sweep = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "sweep"
    proc = subprocess.Popen([sys.executable, "-m", "loaderexp", "-m", *CONFIRMED, f"tracking.uri={store}",
                             f"hydra.sweep.dir={sweep}"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=as_a_terminal_starts_it)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "confirming the pick" in line:
            break
    else:
        pytest.fail("the sweep ended without confirming its pick:\n" + "".join(seen[-30:]))
    time.sleep(1)
    proc.send_signal(sig)
    sent = time.monotonic()
    rest, _ = proc.communicate(timeout=120)
    output = "".join(seen) + rest
    assert proc.returncode == 130, output[-3000:]
    assert time.monotonic() - sent < 30  # not the 30 s of confirmation it had left
    name = "Ctrl-C" if sig == signal.SIGINT else sig.name
    assert f"Interrupted ({name}): the sweep ended before its pick was confirmed side by side" in output
    assert f"loaderexp: interrupted ({name}); finished runs are kept" in output
    assert "Confirmed pick" not in output and "Traceback" not in output
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("loaderexp").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent")
    assert parent.info.status == "KILLED"
    assert sorted(r.info.status for r in runs if r is not parent) == ["FINISHED", "FINISHED"]  # both jobs kept


def _small_disk(path: Path, size: str = "4m") -> None:
    """A tmpfs of ``size`` at ``path`` (root only); the test is skipped, saying why, where none can be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {mounted.stderr.strip()}")


@pytest.mark.slow
def test_a_disk_that_fills_while_a_job_measures_loses_no_run_and_ends_the_sweep_in_lines(tmp_path, data_root):
    """Round two, item 4: the first job's dataset fills the sweep folder's disk as it is built; the job measures
    on, its result reaches MLflow only; the next job's folder cannot be made, and the sweep ends there."""
    disk, store = tmp_path / "disk", f"sqlite:///{tmp_path / 'mlflow.db'}"
    _small_disk(disk)
    try:
        proc = run_cli(["-m", "dataset=custom", f"dataset.python_path={REPO}", "loader.batch_size=32", "bench=quick",
                        "dataset._target_=tests.faulty.DiskFiller", f"+dataset.fill={disk}", "+dataset.num_samples=256",
                        "bench.seed=0,1,2", f"tracking.uri={store}",
                        f"hydra.sweep.dir={disk / 'sweep'}"], cwd=tmp_path)
        leftovers = [p.name for p in disk.rglob("*.tmp")]
        sizes = {p.name: p.stat().st_size for p in (disk / "sweep").rglob("*") if p.is_file()}
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-3000:]
    assert "Traceback" not in output and "Logging error" not in output, output[-3000:]
    empty = [name for name, size in sizes.items() if size == 0 and not name.endswith(".lock")]  # locks are empty
    assert not leftovers and not empty, (leftovers, sizes)  # nothing half-written
    assert output.count("result.json could not be written") == 1
    assert "job 2's folder cannot be written" in output and "the sweep stops here" in output
    assert "1 of 3 jobs recorded" in output and "1 of them could not be written to the sweep folder: 0" in output
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("loaderexp").experiment_id])
    parent = next(r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent")
    children = [r for r in runs if r is not parent]
    assert parent.info.status == "FAILED"
    assert [r.info.status for r in children] == ["FINISHED"] and children[0].data.metrics["throughput_samples_per_s"] > 0


@pytest.mark.parametrize("store", ["truncated", "file", "long name"])
def test_a_single_run_refuses_a_store_it_cannot_use_before_measuring(tmp_path, data_root, store):
    """Round two, item 6: what a sweep refuses, a single run refuses too (it printed "measuring anyway" and
    exited 0 with nothing logged)."""
    args = [*TINY, f"hydra.run.dir={tmp_path / 'run'}"]
    if store == "truncated":
        (tmp_path / "mlflow.db").write_bytes(b"SQLite format 3\0" + b"\1" * 100)  # a file cut short
        args.append(f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}")
    elif store == "file":
        args.append(f"tracking.uri=file://{tmp_path / 'mlruns'}")  # MLflow 3 refuses the file store
    else:
        args += [f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"tracking.experiment={'x' * 600}"]
    proc = run_cli(args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("loaderexp: error:")]
    assert len(errors) == 1 and "nothing was measured" in errors[0] and "Traceback" not in proc.stderr, proc.stderr
    assert "measuring anyway" not in proc.stdout + proc.stderr
    assert not (tmp_path / "run" / "result.json").exists()


def test_a_report_from_a_store_that_cannot_be_read_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "loaderexp.report", "0123abcd", "--uri", f"file://{tmp_path}"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "the store cannot be read" in done.stderr


@pytest.mark.slow
def test_a_report_or_export_into_an_impossible_place_is_one_line_and_the_table_still_prints(tmp_path, data_root):
    """Round two, item 10: a read-only sweep folder, a path under a regular file."""
    sweep = tmp_path / "sweep"
    done = run_cli(["-m", *TINY, "loader.num_workers=0,1", "tracking=none", f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")

    def report(*args: str, folder: Path = sweep) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "loaderexp.report", str(folder), *args], cwd=tmp_path,
                              capture_output=True, text=True)

    for args in (["--out", str(blocker / "report")], ["--export", str(blocker / "export")]):
        proc = report(*args)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Not a directory" in proc.stderr, proc.stderr
        assert "num_workers" in proc.stdout and "Recommendation" in proc.stdout  # the table, all the same

    readonly = tmp_path / "ro"
    _small_disk(readonly, "16m")
    try:
        shutil.copytree(sweep, readonly / "sweep")
        for name in ("report.txt", "throughput.png"):
            (readonly / "sweep" / name).unlink(missing_ok=True)
        subprocess.run(["mount", "-o", "remount,ro", str(readonly)], check=True)
        proc = report(folder=readonly / "sweep")
    finally:
        subprocess.run(["umount", "-l", str(readonly)], capture_output=True)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "Recommendation" in proc.stdout and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "were not written" in proc.stderr and "Read-only file system" in proc.stderr


@pytest.mark.parametrize("body", [
    "loaderexp.sweep(SyntheticImages(num_samples=64), {'num_workers': [0, 1]}, tracking='none')",
    "def main():\n    loaderexp.measure(SyntheticImages(num_samples=64), tracking='none')\n\n\nmain()",
])
def test_the_api_in_a_script_without_a_main_guard_stops_in_one_line_before_anything_starts(tmp_path, body):
    """Round two, item 11: the script body ran three times, two nested sweeps started inside forkserver
    processes, and 150 lines of "bootstrapping phase" errors followed."""
    script = tmp_path / "tune.py"
    script.write_text("import loaderexp\nfrom loaderexp.data.synthetic import SyntheticImages\n\n"
                      "print('the script body ran')\n" + body + "\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout.count("the script body ran") == 1
    assert proc.stderr.strip().count("\n") == 0 and 'if __name__ == "__main__":' in proc.stderr, proc.stderr
    assert f"{script}:" in proc.stderr and not (tmp_path / "outputs").exists()


def test_a_worker_count_far_past_the_epoch_or_the_memory_is_refused_before_any_worker_starts():
    """Round two, item 13 (the rule; a run of it below): 512 workers on 2 cores started for 74 s."""
    from loaderexp.config.schema import LoaderConfig
    from loaderexp.execute.worker_count import WORKER_FLOOR_MB, refused_worker_count

    assert refused_worker_count(LoaderConfig(num_workers=16), 8, 20_000) == []  # twice the batches: warned only
    (past,) = refused_worker_count(LoaderConfig(num_workers=512), 8, 20_000)
    assert "an epoch has 8 batches, so at most 8 workers ever get one" in past
    (memory,) = refused_worker_count(LoaderConfig(num_workers=512), 10_000, 512 * WORKER_FLOOR_MB - 1)
    assert f"512 worker processes hold at least {512 * WORKER_FLOOR_MB:,.0f} MB" in memory
    assert refused_worker_count(LoaderConfig(num_workers=64), None, 20_000) == []  # an iterable: no epoch known


@pytest.mark.slow
def test_a_run_with_far_more_workers_than_batches_is_refused_in_a_line(tmp_path, data_root):
    proc = run_cli([*TINY, "loader.num_workers=512", "tracking=none", f"hydra.run.dir={tmp_path / 'run'}"],
                   cwd=tmp_path, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "loader.num_workers=512 exceeds the" in proc.stdout + proc.stderr  # printed, not only in result.json
    assert "loader.num_workers=512: an epoch has 8 batches" in proc.stderr
    result = RunResult.read(tmp_path / "run" / "result.json")
    assert result.status is Status.FAILED and not result.metrics  # refused before any worker started


@pytest.mark.slow
def test_a_data_root_lock_held_elsewhere_is_named_with_its_holder(tmp_path):
    """Round two, item 13: a build lock another process holds timed out as "still being built"."""
    root = tmp_path / "root"
    root.mkdir()
    lock = root / ".cifar-10-batches-py.lock"
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as another job building the same data set would
    try:
        proc = run_cli(["dataset=cifar10", "bench=quick", "bench.job_timeout_s=6", "tracking=none",
                        f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, timeout=120,
                       env={"LOADEREXP_DATA_ROOT": str(root)})
    finally:
        os.close(fd)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-2000:]
    assert f"waiting for the build lock {lock}, held by pid {os.getpid()}" in output, output[-2000:]
