"""A run's place against this machine's ceiling: its figures and settings as the model's inputs
(:class:`loaderexp.model.Machine`), and the ceiling, the prediction and how far the run is from both."""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from loaderexp.harness.stages import StageProfile
from loaderexp.model import CeilingModel, Machine
from loaderexp.model.ceiling import RESTART_SHARE  # noqa: F401 (the report reads it here)
from loaderexp.result import BACKEND, BATCH_SIZE, NUM_WORKERS, PERSISTENT_WORKERS, PIN_MEMORY, PROFILE_S, RunResult
from loaderexp.result import metrics as M
from loaderexp.result.facts import RunFacts
from loaderexp.result.repeats import repeat_groups

MODELLED_BACKENDS = ("dataloader",)  # the model's worker and main-process costs are torch DataLoader's


def machine_of(result: RunResult, profile: StageProfile, alongside: Sequence[RunResult] = ()) -> Machine:
    m, info, host = result.metrics, result.info, result.host
    length = info.dataset_length
    read = m[M.FILE_MB] * 2**20 / length if m.get(M.FILE_MB) and length else None
    return Machine(
        cores=float(host.cpus_usable or profile.cores),
        batch_size=result.params.get(BATCH_SIZE) or profile.batch_size,
        ranks=result.ranks,
        storage_mb_per_s=storage_read([result, *alongside]),
        read_bytes_per_sample=read,
        files_stay_warm=info.cache_stays_warm,
        copy_gb_per_s=m.get(M.H2D_GBPS) if m.get(M.H2D_MEASURED) else None,
        step_s_per_batch=m[M.STEP_MS] / 1000 if m.get(M.STEP_MS) else None,
        step_cpu_s_per_batch=m[M.STEP_CPU_MS] / 1000 if m.get(M.STEP_CPU_MS) else None,
        pins=bool(result.params.get(PIN_MEMORY)) and bool(host.cuda_available),
        cpu_s_per_sample_seen=least_cpu_per_sample([result, *alongside]),
        cpu_seen_spread=cpu_spread_of_repeats([result, *alongside]),
        restart_share=max((restart(r).share for r in [result, *alongside]), default=0.0),
    )


def epoch_samples(run: RunResult) -> int:
    """A rank's samples an epoch: its batches' (the last one may be short), at most the dataset's."""
    batches, batch = run.info.batches_per_epoch, run.params.get(BATCH_SIZE) or 1
    return min([n for n in (batches * batch if batches else None, run.info.dataset_length) if n], default=0)


class Restart(NamedTuple):
    seconds: float  # an epoch's start-up past a steady batch: its workers forked again, their first batch made
    share: float  # ... of the epoch


def restart(run: RunResult) -> Restart:
    """A run's epoch start-up; zeros without workers, with persistent workers, or without the figures."""
    workers, rate = run.params.get(NUM_WORKERS) or 0, run.metrics.get(M.THROUGHPUT, 0.0) / max(run.ranks, 1)
    start = run.metrics.get(M.FIRST_BATCH_LATER) or run.metrics.get(M.FIRST_BATCH)
    samples = epoch_samples(run)
    if workers <= 0 or run.params.get(PERSISTENT_WORKERS) or not (start and rate and samples):
        return Restart(0.0, 0.0)
    extra = max(start - (run.params.get(BATCH_SIZE) or 1) / rate, 0.0)
    return Restart(extra, extra / (samples / rate))


def storage_read(runs: Sequence[RunResult]) -> Optional[float]:
    """The storage's cold read (MB/s): the machine's, not a setting's, so the median the runs read (the table's)."""
    reads = sorted(r.metrics[M.STORAGE_READ] for r in runs if r.metrics.get(M.STORAGE_READ))
    return reads[len(reads) // 2] if reads else None


def _cpu_costs(runs: Sequence[RunResult]) -> list[float]:
    """The CPU per sample (seconds) of the runs with workers, their whole process trees: DataLoader's only (another
    backend's threads or nodes cost what the model does not describe)."""
    return [r.metrics[M.CPU_PER_SAMPLE] / 1000 for r in runs
            if r.finished and (r.params.get(NUM_WORKERS) or 0) > 0 and r.metrics.get(M.CPU_PER_SAMPLE)
            and modelled(r)]


def least_cpu_per_sample(runs: Sequence[RunResult]) -> Optional[float]:
    """The least CPU per sample (seconds) that the runs with workers used."""
    return min(_cpu_costs(runs), default=None)


def cpu_spread_of_repeats(runs: Sequence[RunResult]) -> float:
    """How far repeats of one configuration with workers read their CPU per sample apart (max / min - 1), the most
    over the configurations: the host's own movement from run to run, which a bound on the least of them inherits
    (0: nothing repeated).  Windows of one run agree more closely than that: they share the host's moment."""
    spreads = [max(costs) / min(costs) - 1 for group in repeat_groups(runs) if len(costs := _cpu_costs(group)) > 1]
    merged = [r.info.configuration_cpu_spread or 0.0 for r in runs]  # repeats the report shows as one run
    return max([*spreads, *merged], default=0.0)


def modelled(result: RunResult) -> bool:
    return _why_not_modelled(result) is None


def _why_not_modelled(result: RunResult) -> Optional[str]:
    """None for DataLoader's backend with batching on.  With loader.batch_size=null each item is a batch of the
    dataset's own, the profile's costs are per item and the run counts samples (a pre-batched set read "1,077,066
    samples/s, above the model's bound 133,314", the bound in items)."""
    if result.params.get(BACKEND, "dataloader") not in MODELLED_BACKENDS:
        return f"backend={result.params.get(BACKEND)}: the ceiling model covers torch's DataLoader"
    if BATCH_SIZE in result.params and result.params[BATCH_SIZE] is None:
        return ("loader.batch_size=null: each item is a batch of the dataset's own, and the stage costs are per item, "
                "where the run counts samples")
    return None


def model_of(result: RunResult, alongside: Sequence[RunResult] = ()) -> Optional[CeilingModel]:
    """The ceiling model for this run's setting, or None (no profile, or a backend it does not cover); the runs
    ``alongside`` it (its sweep's, on the same profile) tell what a sample really cost."""
    profile = result.profile
    if profile is None or not modelled(result):
        return None
    return CeilingModel(profile, machine_of(result, profile, alongside))


def refit_metrics(machine: Machine) -> dict[str, float]:
    """How a predicted run records ``bench.predict``'s refit (read back by :func:`refit_of`)."""
    if machine.all_cores_rate:
        return {M.MODEL_REFIT: round(machine.all_cores_rate, 1)}
    if machine.workers_moment != 1.0:
        return {M.MODEL_WORKERS_SCALE: round(machine.workers_moment, 4)}
    return {M.MODEL_SCALE: round(machine.moment, 4)}


def _refit_in(m: dict[str, float]) -> dict[str, float]:
    return ({"all_cores_rate": m[M.MODEL_REFIT]} if m.get(M.MODEL_REFIT) else
            {"workers_moment": m[M.MODEL_WORKERS_SCALE]} if m.get(M.MODEL_WORKERS_SCALE) else
            {"moment": m[M.MODEL_SCALE]} if m.get(M.MODEL_SCALE) else {})


def refit_of(result: RunResult) -> dict[str, float]:
    """The Machine changes ``bench.predict``'s refit recorded on a predicted run (none: the profile's model)."""
    return _refit_in(result.metrics)


def refit_of_machine(machine: Machine) -> dict[str, float]:
    """The Machine changes of a refit, as :func:`refit_of` reads them back once recorded."""
    return _refit_in(refit_metrics(machine))


def refit_words(all_cores_rate: Optional[float] = None, moment: Optional[float] = None,
                workers_moment: Optional[float] = None) -> str:
    """A refit (as :func:`refit_of` reads it back), in words."""
    if all_cores_rate:
        return f"what the cores do together taken from the runs at or past the cores ({all_cores_rate:,.0f} samples/s)"
    if workers_moment:
        return (f"every rate with workers scaled by the runs' own over the profile's (x{workers_moment:.2f}: its "
                "one-worker loop met another moment of the host than its loop without workers)")
    return f"every rate scaled by the runs' own over the profile's (x{moment:.2f})"


def refitted_error(result: RunResult, refit: dict[str, float]) -> Optional[float]:
    """predicted / measured - 1 for a measured run, by the model ``bench.predict`` refitted on the sweep's runs
    (:func:`refit_of`), not the profile's alone, which its ``model_error_rel`` used."""
    model, rate = model_of(result), result.metrics.get(M.THROUGHPUT)
    if model is None or not rate:
        return None
    return model.with_machine(**refit).predict(result.workers) / rate - 1


THIS_RUN = "this run"  # how a failure names the run itself, not the profile's loops it shares with other jobs


def about_this_run(failure: str) -> bool:
    """The model failure is this run's own rate, not the shared profile's loops (which every job that shares the
    profile would repeat)."""
    return failure.startswith(THIS_RUN)


def _no_profile(result: RunResult) -> str:
    if result.params.get(PROFILE_S) == 0:
        return "no stage profile (bench.profile_s=0 leaves the profiling pass out)"
    return ("no stage profile: an iterable dataset's stages cannot be timed a sample at a time (it yields them in "
            "its own order), or the profiling pass failed (the job's log says why)")


def ceiling_figures(result: RunResult) -> tuple[dict[str, float], RunFacts]:
    """(metrics, info) of a finished run against the ceiling."""
    model = model_of(result)
    rate = result.metrics.get(M.THROUGHPUT)
    if model is None or not rate:
        reason = _no_profile(result) if result.profile is None else _why_not_modelled(result)
        return {}, RunFacts(ceiling=f"not modelled: {reason}")
    workers = result.params.get(NUM_WORKERS) or 0
    bound = model.ceiling_range({f"{THIS_RUN} (num_workers={workers})": rate})
    ceiling, predicted = bound.limit, model.predict(workers)
    metrics = {M.CEILING: round(bound.high, 1), M.CEILING_LOW: round(bound.low, 1),
               M.CEILING_FRACTION: round(min(rate / bound.high, 1.0), 4),
               M.PREDICTED: round(predicted, 1), M.MODEL_ERROR: round(predicted / rate - 1, 4)}
    # model_failure is stated either way: a record's keys must not come and go with the host's moment
    facts = RunFacts(ceiling=f"{ceiling.name}: {ceiling.how}", ceiling_binding=ceiling.name, ceiling_lift=ceiling.lift,
                     model_failure=bound.failure)
    return metrics, facts
