"""The share of the host a job may use: a cgroup's CPU quota and memory limit (v1 and v2), read from the
kernel's own files, and what the record then says (cpus_usable, memory_gb capped; the limits stated)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from loaderexp.harness.cgroup import Throttling, cpu_quota_cores, memory_limit_bytes, throttling
from tests.conftest import REPO


def fake_v2(tmp_path: Path, cpu_max: str, memory_max: str, parent_cpu_max: str = "max 100000") -> tuple[str, str]:
    leaf = tmp_path / "fs" / "jobs" / "job1"
    leaf.mkdir(parents=True)
    (leaf.parent / "cpu.max").write_text(parent_cpu_max + "\n")
    (leaf / "cpu.max").write_text(cpu_max + "\n")
    (leaf / "memory.max").write_text(memory_max + "\n")
    (leaf / "cpu.stat").write_text("usage_usec 100\nnr_periods 10\nnr_throttled 3\nthrottled_usec 250000\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/jobs/job1\n")
    return str(tmp_path / "fs"), str(proc)


def test_a_v2_quota_and_limit_are_read_and_the_tightest_ancestor_binds(tmp_path):
    root, proc = fake_v2(tmp_path, "150000 100000", str(3 * 2**30), parent_cpu_max="50000 100000")
    assert cpu_quota_cores(root, proc) == pytest.approx(0.5)  # the parent's half core binds
    assert memory_limit_bytes(root, proc) == 3 * 2**30
    assert throttling(root, proc) == Throttling(periods=3, seconds=0.25)


def test_no_quota_no_limit_reads_as_none(tmp_path):
    root, proc = fake_v2(tmp_path, "max 100000", "max")
    assert cpu_quota_cores(root, proc) is None and memory_limit_bytes(root, proc) is None


def test_a_v1_quota_is_read_from_cfs_files(tmp_path):
    leaf = tmp_path / "fs" / "cpu,cpuacct" / "docker" / "abc"
    leaf.mkdir(parents=True)
    (leaf / "cpu.cfs_quota_us").write_text("150000\n")
    (leaf / "cpu.cfs_period_us").write_text("100000\n")
    (leaf / "cpu.stat").write_text("nr_periods 5\nnr_throttled 2\nthrottled_time 4000000000\n")
    memory = tmp_path / "fs" / "memory" / "docker" / "abc"
    memory.mkdir(parents=True)
    (memory / "memory.limit_in_bytes").write_text(str(2**30) + "\n")
    (memory.parent / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    root = str(tmp_path / "fs")
    assert cpu_quota_cores(root, str(proc)) == pytest.approx(1.5)
    assert memory_limit_bytes(root, str(proc)) == 2**30
    assert throttling(root, str(proc)) == Throttling(periods=2, seconds=4.0)


def _quota_cgroup() -> tuple[Path, str]:
    """A real cgroup with a CPU quota of half a core, or a skip that says why not."""
    name = f"loaderexp-test-{uuid.uuid4().hex[:8]}"
    for base, files in ((Path("/sys/fs/cgroup/cpu"), {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"}),
                        (Path("/sys/fs/cgroup"), {"cpu.max": "50000 100000"})):
        if not base.is_dir() or not any((base / f).exists() for f in files):
            continue
        group = base / name
        try:
            group.mkdir()
            for file, value in files.items():
                (group / file).write_text(value)
        except OSError as error:
            if group.is_dir():
                group.rmdir()
            pytest.skip(f"cannot make a cgroup with a CPU quota under {base}: {error.strerror} (needs root)")
        return group, "cgroup.procs"
    pytest.skip("no cgroup CPU controller mounted under /sys/fs/cgroup")


def test_inside_a_real_cpu_quota_the_job_counts_the_quota_not_the_affinity():
    group, procs = _quota_cgroup()
    code = ("from loaderexp.result import machine_facts; f = machine_facts(); "
            "print(f.cpus_usable, f.cpu_quota_cores)")
    try:
        out = subprocess.run(["sh", "-c", f'echo $$ > {group / procs} && exec "$0" -c "$1"', sys.executable, code],
                             capture_output=True, text=True, cwd=REPO, timeout=120)
    finally:
        group.rmdir()
    assert out.returncode == 0, out.stderr
    usable, quota = out.stdout.split()
    affinity = len(os.sched_getaffinity(0))
    assert float(quota) == pytest.approx(0.5)
    assert float(usable) == pytest.approx(min(0.5, affinity))
