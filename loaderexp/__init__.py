"""loaderexp: declarative, measured DataLoader sweeps (Hydra configs, MLflow tracking).

Entry points: ``python -m loaderexp`` (a run or a ``-m`` sweep), ``python -m loaderexp.report``
(a sweep's table, recommendation and plot), ``python -m loaderexp.sync`` (results MLflow missed).
"""

__version__ = "0.1.0"
