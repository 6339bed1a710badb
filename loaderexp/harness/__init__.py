"""The harness: the timed loop and everything it records, from a built loader to a typed Measurement.

Owns the measured loop and its budgets (:mod:`.loop`), how many windows a run takes
(:mod:`.repeats`), the consumer a batch goes to (the copy to the device, :mod:`.transfer`, then a
step, :mod:`.steps`), the resources of the process tree (:mod:`.resources`), the shared-memory
pre-flight (:mod:`.shm`), the delivery check (the wrappers that tag batches, :mod:`.tagging`, and
the checker, :mod:`.delivery`), memory over an epoch (:mod:`.footprint`, :mod:`.memory`) and the page
cache (:mod:`.page_cache`), the profiling pass's stage costs (:mod:`.profile`, :mod:`.profile_loops`,
recorded in :mod:`.stages`), settings side by side in interleaved windows (:mod:`.paired`), and the
records a measurement is made of (:mod:`.records`, pure Python, which the app unpickles without torch;
:mod:`.batches` writes their per-batch table).  It
imports torch, numpy and psutil only: no Hydra, no OmegaConf, no MLflow, and no other loaderexp
package, so a test can drive it with a fake clock and a benchmark can set it against a bare loop.
``tests/test_layout.py`` checks this.
"""
