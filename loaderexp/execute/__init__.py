"""Execute: one job's measurement from its typed spec, and the processes it runs in.

Owns the recipe of a job (:mod:`.job`: dataset, sampler, loading stack, device copy and step, then
the measured windows), the dataset holder that builds a sweep's dataset once and forks each job's
measuring process (:mod:`.holder`), the app's watch over that killable process (:mod:`.child`) and
the typed messages between them (:mod:`.messages`), the words for what went wrong (:mod:`.faults`),
several ranks of a node loading at once (:mod:`.ranks`), where a job's work runs (:mod:`.dispatch`),
the profiling pass kept once per sweep (:mod:`.profiling`), a grid cut short at the predicted knee
(:mod:`.predict`), settings compared side by side (:mod:`.paired`), the lock that keeps one
measurement per host (:mod:`.host_lock`) and the job's progress bar (:mod:`.progress`).  It takes the
spec, never a DictConfig, and may import ``config`` (the spec's types and checks), ``data``,
``loading``, ``harness``, ``model`` and ``result`` (the host's facts, read where torch is loaded);
never MLflow, ``track``, ``report`` or the runner.
"""
