"""Which params a comparison shows: the sweep's axes, named as the user wrote them."""

from __future__ import annotations

from typing import Sequence

from loaderexp.result import IGNORED_PARAMS, NUM_WORKERS, RunResult
X_AXIS = NUM_WORKERS  # what the plot and the recommendation count


def varying_params(results: Sequence[RunResult]) -> list[str]:
    """Params whose value differs between runs: the sweep's axes."""
    keys: list[str] = []
    for result in results:
        for key in result.params:
            if key not in keys and not key.startswith(IGNORED_PARAMS):
                keys.append(key)
    return [k for k in keys if len({str(r.params.get(k)) for r in results}) > 1]


def short_key(key: str) -> str:
    return key.split(".", 1)[1] if key.startswith("loader.") else key
