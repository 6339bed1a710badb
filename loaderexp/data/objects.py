"""A dataset handed over as a Python object (``loaderexp.measure(dataset)``, ``loaderexp.sweep``).

The config names it by a key: this process finds the object itself in :data:`REGISTRY`; a measuring
process started elsewhere (the forkserver's dataset holder, a launcher's job) unpickles the copy the
API wrote beside the run, so a job stays runnable from its config and its folder alone.  The copy is
cloudpickle's: a class defined in a notebook cell or a piped script (``__main__``, which the measuring
process cannot import) travels by value; an importable one by reference, as pickle writes it.  A
DataModule handed over this way is taken apart as ``dataset=lightning`` takes it.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, Optional

import cloudpickle

REGISTRY: dict[str, Any] = {}


def register(value: Any, folder: Path) -> tuple[str, Optional[Path]]:
    """(its key, the pickled copy, or None when it cannot be pickled: then only this process can load it)."""
    key = f"{type(value).__qualname__}-{id(value):x}"
    REGISTRY[key] = value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}.pkl"
    try:
        # Never through a link someone planted at the name: opened without following one, private to the user.
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as file:
            cloudpickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a lambda, a lock, an open file: measured in this process instead
        path.unlink(missing_ok=True)
        return key, None
    return key, path


def registered(key: Optional[str] = None, pickled: Optional[str] = None) -> Any:
    """The object registered as ``key`` here, else its pickled copy."""
    if key is None:
        raise ValueError("dataset=object is the dataset loaderexp.measure(dataset) and loaderexp.sweep(dataset, grid) "
                         "hand over from Python; on the command line name a class: dataset=custom "
                         "dataset._target_=mypackage.MyDataset")
    if key in REGISTRY:
        return REGISTRY[key]
    if pickled and Path(pickled).is_file():
        with open(pickled, "rb") as file:
            return pickle.load(file)
    raise LookupError(f"dataset.key={key}: a Python object handed to loaderexp.measure/sweep in another process, "
                      "and no pickled copy of it (it could not be pickled): measure it with bench.isolate=false")
