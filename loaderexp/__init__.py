"""loaderexp: declarative, measured DataLoader sweeps (Hydra configs, MLflow tracking).

Entry points: ``python -m loaderexp`` (a run or a ``-m`` sweep), ``python -m loaderexp.report``
(a sweep's table, recommendation and plot; ``--export`` the recommendation for your training),
``python -m loaderexp.check`` (a regression check against a recorded run), ``python -m
loaderexp.sync`` (results MLflow missed), and from Python ``loaderexp.measure(dataset, **knobs)``
and ``loaderexp.sweep(dataset, grid)`` (:mod:`loaderexp.api`).
"""

__version__ = "0.1.0"
__all__ = ["measure", "sweep"]


def __getattr__(name: str):
    # Imported on first use: a measuring process or a worker that imports loaderexp.harness pays
    # nothing for Hydra and MLflow.
    if name in __all__:
        from loaderexp import api

        return getattr(api, name)
    raise AttributeError(f"module 'loaderexp' has no attribute {name!r}")
