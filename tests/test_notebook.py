"""loaderexp from a notebook, as a user runs it: a dataset class defined in a cell (its module is ``__main__``,
which the measuring process cannot import), measured and swept through a real Jupyter kernel; and the same
from a piped script (``python -``, whose ``__main__`` is no file)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

DATASET_CELL = '''
import torch
from torch.utils.data import Dataset

class CellData(Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, index):
        return torch.full((4,), float(index))
'''
QUICK = '["bench=quick", "bench.profile_s=0", "bench.confirm_s=0"]'


@pytest.mark.slow
def test_a_dataset_defined_in_a_notebook_cell_is_measured_and_the_sweep_shows_as_a_table(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    cells = [DATASET_CELL,
             "import loaderexp\n"
             f"result = loaderexp.measure(CellData(), num_workers=1, batch_size=16, overrides={QUICK}, "
             "tracking='none')\nprint('STATUS', result.status, result.error)",
             f"report = loaderexp.sweep(CellData(), {{'num_workers': [0, 1]}}, batch_size=16, overrides={QUICK}, "
             "tracking='none')\nreport"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = nbclient.NotebookClient(notebook, timeout=240, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    printed = "".join(o.get("text", "") for o in notebook.cells[1].outputs if o.output_type == "stream")
    assert "STATUS FINISHED None" in printed, printed[-2000:]
    shown = next(o for o in notebook.cells[2].outputs if o.output_type == "execute_result")
    html = shown["data"]["text/html"]
    assert html.startswith("<table>") and "<th>num_workers</th>" in html and "samples_per_s" in html
    assert 'style="font-weight:bold"' in html  # the pick


# Another measurement holds the host for 8 s from the script's start.
HELD = '''
import threading, time
from loaderexp.execute.host_lock import exclusive_host
from loaderexp.result import RunFacts

started = threading.Event()

def hold():
    with exclusive_host("another sweep", False, RunFacts()):
        started.set()
        time.sleep(8)  # past the composing: the measurement starts inside it

threading.Thread(target=hold).start()
started.wait()
'''


@pytest.mark.slow
def test_a_dataset_defined_in_a_piped_script_is_measured_and_a_wait_for_the_host_is_said(tmp_path):
    script = (DATASET_CELL + "import loaderexp\nfrom loaderexp.config import compose\ncompose([])\n" + HELD  # Hydra's start paid first
              +
              f"result = loaderexp.measure(CellData(), num_workers=1, batch_size=16, overrides={QUICK}, "
              "tracking='none')\nprint('STATUS', result.status, result.error, result.info.waited_for_host_s)\n")
    done = subprocess.run([sys.executable, "-"], input=script, cwd=tmp_path, capture_output=True, text=True,
                          timeout=240, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                            "LOADEREXP_HOST_LOCK": str(tmp_path / "host.lock")})
    assert "STATUS FINISHED None" in done.stdout, done.stdout[-1500:] + done.stderr[-3000:]
    assert float(done.stdout.split()[-1]) > 0  # it did wait
    assert "loaderexp: run: waiting for the host: loaderexp another sweep" in done.stderr, done.stderr[-2000:]
