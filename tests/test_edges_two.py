"""The second round of edges: each case broke on a careful user's or a careless colleague's hands."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO

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
                            text=True)
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
