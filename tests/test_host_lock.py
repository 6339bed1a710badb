"""One measurement per host: a second job waits for the first, whichever launcher started them."""

from __future__ import annotations

import multiprocessing as mp
import time

from loaderexp.execute.host_lock import exclusive_host
from loaderexp.result import RunFacts


def hold(label: str, seconds: float, shared_ok: bool, queue) -> None:
    facts = RunFacts()
    with exclusive_host(label, shared_ok, facts):
        time.sleep(seconds)
    queue.put((label, facts))


def run_two(shared_ok: bool) -> dict[str, RunFacts]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    first = ctx.Process(target=hold, args=("job 1", 1.0, shared_ok, queue))
    first.start()
    time.sleep(0.5)  # job 1 holds the host by now (spawn start-up included)
    second = ctx.Process(target=hold, args=("job 2", 0.1, shared_ok, queue))
    second.start()
    results = dict(queue.get(timeout=30) for _ in range(2))
    first.join(10), second.join(10)
    return results


def test_a_second_measurement_waits_for_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(tmp_path / "host.lock"))
    facts = run_two(shared_ok=False)
    one, two = facts["job 1"], facts["job 2"]
    assert one.host_lock == two.host_lock == "exclusive"
    assert two.measured_from >= one.measured_until  # no overlap
    assert two.waited_for_host_s > 0 and one.waited_for_host_s < two.waited_for_host_s
    assert (tmp_path / "host.lock").read_text() == "loaderexp host lock\n"  # nobody named as holding it now


def test_shared_host_ok_lets_measurements_overlap(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(tmp_path / "host.lock"))
    facts = run_two(shared_ok=True)
    one, two = facts["job 1"], facts["job 2"]
    assert two.measured_from < one.measured_until
    assert one.host_lock.startswith("shared") and two.waited_for_host_s is None


def test_a_killed_holder_frees_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADEREXP_HOST_LOCK", str(tmp_path / "host.lock"))
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    holder = ctx.Process(target=hold, args=("job 1", 60.0, False, queue))
    holder.start()
    time.sleep(1.0)
    holder.kill()
    holder.join(10)
    facts = RunFacts()
    with exclusive_host("job 2", False, facts):
        pass
    assert facts.waited_for_host_s < 5
