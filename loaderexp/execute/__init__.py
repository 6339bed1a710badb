"""Execute: one job's measurement from a plain config, and the process it runs in.

Owns building the configured dataset, sampler and loader and measuring them (:mod:`.job`), the
killable child process a job is measured in and its pipe back (:mod:`.child`), the words for
what went wrong (:mod:`.faults`), the loading stacks besides DataLoader (:mod:`.backends`, the
torchdata.nodes one in :mod:`.nodes`), several ranks of a node loading at once (:mod:`.ranks`),
the lock that keeps one measurement per host (:mod:`.host_lock`) and the job's progress bar
(:mod:`.progress`).  It takes plain values, never a DictConfig, and may import ``config`` (for
plain-value helpers), ``data``, ``measure`` and ``result`` (the host's facts, read where torch is
loaded); never MLflow, ``track``, ``report`` or the runner.
"""
