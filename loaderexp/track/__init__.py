"""Track: results into MLflow, a multirun as one parent run, and imports of what MLflow missed.

Owns the MLflow client wrapper (:mod:`.tracker`: explicit run ids, batched logging, the UI's
addresses), the Hydra callback that makes a sweep one unit (:mod:`.sweep`: its size, its parent
run, its summary) and ``python -m loaderexp.sync`` (:mod:`.sync`).  It may import Hydra, MLflow
(lazily: ``tracking=none`` never loads it), ``result`` and ``report``; never ``measure`` or
``execute``: it records measurements, it does not make them.
"""
