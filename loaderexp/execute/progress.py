"""Progress of the current job and of the sweep: a tqdm bar on a terminal, plain log lines elsewhere."""

from __future__ import annotations

import sys
from typing import Optional


def interactive() -> bool:
    return sys.stderr.isatty()


class JobProgress:
    """Counts the measured batches of one job; ``label`` says which job of the sweep it is.
    Adaptive repeats may take more than planned: the bar then grows."""

    def __init__(self, label: str):
        self.label = label
        self.bar = None
        self.enabled = interactive()

    def __call__(self, done: int, total: Optional[int]) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.label, unit="batch", leave=False, dynamic_ncols=True)
        if self.bar.total is not None and done > self.bar.total:
            self.bar.total = done
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
