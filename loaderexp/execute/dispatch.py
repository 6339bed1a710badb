"""Where a job's work runs: in a killable process forked by the dataset holder (``bench.isolate``, the
default), or in this one.  The runner asks here for the host's facts, a measurement, or only the
profiling pass; the app process never imports torch on the isolated path."""

from __future__ import annotations

from typing import Any

from loaderexp.result.facts import HostFacts, RunFacts

from loaderexp.config.schema import Config
from loaderexp.execute.host_lock import exclusive_host


def profile_only(spec: Config, label: str) -> Any:
    """The profiling pass alone, the host held as for a measurement."""
    with exclusive_host(label, spec.bench.shared_host_ok, RunFacts(), spec.bench.host_wait_s):
        if spec.bench.isolate:
            from loaderexp.execute.child import profile_in_child

            return profile_in_child(spec, spec.bench.job_timeout_s)
        from loaderexp.execute.job import configured_dataset
        from loaderexp.execute.profiling import profile_for

        return profile_for(spec, configured_dataset(spec).dataset)


def measure_spec(spec: Config, progress: Any, profile: bool) -> Any:
    if spec.bench.isolate:
        from loaderexp.execute.child import measure_in_child

        return measure_in_child(spec, spec.bench.job_timeout_s, on_batch=progress, profile=profile)
    from loaderexp.execute.ranks import measure_on_node

    return measure_on_node(spec, on_batch=progress, profile=profile)


def host_facts(isolate: bool) -> HostFacts:
    if isolate:  # torch stays out of this process
        from loaderexp.execute.child import host_facts_isolated

        return host_facts_isolated()
    from loaderexp.execute.host import host_facts as measured_here

    return measured_here()


def compare_specs(specs: list[Config], rounds: int, window_s: float) -> Any:
    """``specs`` (one dataset) side by side in ``rounds`` interleaved rounds of ``window_s`` windows: PairedRates."""
    if specs[0].bench.isolate:
        from loaderexp.execute.child import compare_in_child

        return compare_in_child(specs, rounds, window_s)
    from loaderexp.execute.paired import compare

    return compare(specs, rounds, window_s)
