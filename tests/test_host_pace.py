"""The host's pace (:mod:`loaderexp.harness.host_pace`): a fixed piece of CPU work timed around each run, so that
sharing the host's own counters cannot see (a neighbour below the VM, steal the guest is not told of, a moving
clock) is said, not taken for the settings' doing."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loaderexp.check import compared, pace_now
from loaderexp.harness.host_pace import reference_ms
from loaderexp.report.busy import pace_notes
from loaderexp.report.table import summary_table
from loaderexp.result import HostFacts, RunResult
from loaderexp.result import metrics as M
from loaderexp.runner import JobContext, run

# The burner test reads the thread's CPU against the wall while it loads both cores: alone under xdist.
pytestmark = pytest.mark.quiet_host


def _burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


@pytest.mark.slow
def test_a_reading_is_its_threads_cpu_so_a_visible_load_does_not_move_it():
    """Both cores burning (the others' load, which the run counts apart) doubles the reading's wall time on 2 cores,
    not the reading: interleaved rounds, quiet and loaded, so the host's own drift meets both alike."""
    quiet, loaded, walls = [], [], []
    for _ in range(3):
        quiet.append(statistics.median(reference_ms() for _ in range(3)))
        burners = _burners(2)
        try:
            time.sleep(0.3)
            start = time.perf_counter()
            loaded.append(statistics.median(reference_ms() for _ in range(3)))
            walls.append((time.perf_counter() - start) / 3 * 1000)
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
    ratio = statistics.median(loaded) / statistics.median(quiet)
    assert 0.8 < ratio < 1.25, f"quiet {quiet}, loaded {loaded} ms: the reading moved with a load the run counts"
    assert all(r > 0 for r in quiet + loaded)


@pytest.mark.slow
def test_a_run_records_the_pace_before_and_after_and_a_profile_as_it_began(compose_cfg, tmp_path: Path):
    cfg = compose_cfg(["dataset=synthetic", "dataset.num_samples=2048", "tracking=none", "bench=quick",
                       "loader.num_workers=1", "bench.profile_s=0.5"])
    result = run(cfg, JobContext(output_dir=tmp_path))
    assert result.status == "FINISHED", result.error
    before, after = result.metrics[M.PACE_BEFORE], result.metrics[M.PACE_AFTER]
    assert before > 0 and after > 0
    assert result.profile is not None and result.profile.reference_ms > 0
    # the same host a second later: the readings agree far better than the x1.15 the report calls a moved pace
    assert max(before, after) / min(before, after) < 2.0


def _run(workers: int, before: float, after: float, rate: float = 1000.0) -> RunResult:
    return RunResult("FINISHED", {"loader.num_workers": workers},
                     {M.THROUGHPUT: rate, M.OTHERS_CPU: 0.02, M.STEAL: 0.0, M.PACE_BEFORE: before,
                      M.PACE_AFTER: after, M.REPEATS: 3, M.THROUGHPUT_IQR: 0.02}, host=HostFacts(cpus_usable=2))


def test_the_report_says_when_the_pace_moved_and_shows_each_runs_against_the_quickest(tmp_path: Path):
    steady = [_run(0, 2.00, 2.05), _run(1, 2.02, 1.98), _run(2, 2.1, 2.04)]
    assert pace_notes(steady) == []
    moved = [_run(0, 2.00, 2.05), _run(1, 2.5, 2.6), _run(2, 3.2, 3.0)]
    notes = pace_notes(moved)
    assert len(notes) == 1
    assert notes[0].startswith("the host's pace moved while this sweep measured: a fixed piece of CPU work took "
                               "2.00 to 3.00 ms") and "x1.50" in notes[0] and "0.02 cores at most" in notes[0]
    # one slow reading is an episode the windows may have missed: a run's pace is its quicker reading
    assert pace_notes([_run(0, 2.0, 2.0), _run(1, 2.7, 2.0), _run(2, 2.0, 2.6)]) == []
    table = summary_table([(tmp_path / str(i), r) for i, r in enumerate(moved)])
    header = next(line for line in table.splitlines() if line.startswith("num_workers"))
    assert "pace" in header.split()
    assert "1.00x" in table and "1.25x" in table and "1.50x" in table  # each run's quicker reading over 2.00


def test_the_check_does_not_blame_the_code_for_a_slower_pace_but_still_fails_a_fall_beyond_it(tmp_path, capsys):
    base = _run(2, 2.0, 2.0)
    same_pace = [_run(2, 2.0, 2.05, 990.0), _run(2, 2.02, 2.0, 1010.0), _run(2, 1.98, 2.0, 1000.0)]
    assert compared(base, tmp_path, same_pace, tmp_path, 0.05) == 0
    slower_host = [_run(2, 2.6, 2.7, r) for r in (770.0, 760.0, 780.0)]  # the pace x1.3, the rate x0.77
    assert pace_now(base, slower_host) == pytest.approx(1.3)  # each run's quicker reading, 2.6, over 2.0
    assert compared(base, tmp_path, slower_host, tmp_path, 0.05) == 2
    assert "cannot compare: the host's pace moved" in capsys.readouterr().out
    three_times = [_run(2, 2.6, 2.7, r) for r in (330.0, 335.0, 340.0)]  # far beyond what x1.3 explains
    assert compared(base, tmp_path, three_times, tmp_path, 0.05) == 1
    assert "REGRESSION" in capsys.readouterr().out
    old_baseline = RunResult("FINISHED", {"loader.num_workers": 2}, {M.THROUGHPUT: 1000.0})  # before the pace
    assert pace_now(old_baseline, slower_host) is None
