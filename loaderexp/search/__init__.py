"""Search: the grid's answer from fewer jobs, as a Hydra sweeper (``hydra/sweeper=search``).

Owns reading the space from override syntax (:mod:`.space`, no Optuna) and the search loop on an
Optuna study (:mod:`.sweeper`), which the plugin in ``hydra_plugins/loaderexp_search`` wraps.  It
may import ``config`` (to validate a trial before launching it), ``report`` (the recommendation
rule, which also decides when the search has converged) and ``result``; never ``harness``,
``execute`` or ``track``: trials are jobs, launched through the sweep's launcher.
"""
