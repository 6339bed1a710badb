"""Track: results into MLflow, a multirun as one parent run, and imports of what MLflow missed.

Owns the MLflow client wrapper (:mod:`.tracker`: explicit run ids, batched logging, the UI's
addresses), the Hydra callback that makes a sweep one unit (:mod:`.sweep`: its size, its parent
run, its summary), the sweep's last step, its pick confirmed side by side (:mod:`.confirm`) and
``python -m loaderexp.sync`` (:mod:`.sync`).  It may import Hydra, MLflow (lazily: ``tracking=none``
never loads it), ``config``, ``result``, ``report`` and ``execute`` (only to run the confirmation
through the same measuring processes as a job); never ``harness``: it does not time anything itself.
"""
