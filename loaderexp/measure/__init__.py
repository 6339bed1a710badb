"""Measure: the timed loop and everything it records, from a built DataLoader to per-job figures.

Owns the measured loop and its budgets (:mod:`.loop`), the consumer a batch goes to (the copy to
the device, :mod:`.transfer`, then a stand-in step, :mod:`.steps`), the resources of the process
tree (:mod:`.resources`), the shared-memory pre-flight (:mod:`.shm`), the delivery check
(:mod:`.delivery`), and the statistics that turn repeats into figures (:mod:`.stats`,
:mod:`.batches`).  It imports torch, numpy and psutil only: no Hydra, no OmegaConf, no MLflow,
and no other loaderexp package, so a test can drive it with a fake clock and a benchmark can set
it against a bare loop.  ``tests/test_layout.py`` checks this.
"""
