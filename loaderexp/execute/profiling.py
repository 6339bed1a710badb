"""The profiling pass, once per sweep for each dataset, transform and batch size: run in a fork of the
measuring process before its windows (:func:`profile_for`), kept in the sweep folder for the jobs after
(:class:`ProfileStore`, any launcher: a job needs only its config and its folder).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Optional

from loaderexp.config.schema import Config
from loaderexp.harness.forked import ForkFailed, answer_from_fork, can_fork
from loaderexp.harness.stages import StageProfile
from loaderexp.result.facts import HostFacts
from loaderexp.result.host import usable_cpus

log = logging.getLogger("loaderexp")
FOLDER = "profiles"


def profile_key(spec: Config, host: HostFacts) -> str:
    """What a profile depends on: the dataset, its transform, the batch and its collate, and the host."""
    described = {"dataset": spec.dataset.node, "transform": spec.transform.node, "batch_size": spec.loader.batch_size,
                 "collate_fn": spec.loader.collate_fn, "budget_s": spec.bench.profile_s,
                 "host": [host.hostname, host.cpus_usable, host.cpu_model]}
    text = json.dumps(described, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class ProfileStore:
    """``<sweep>/profiles/<key>.json``: written whole (a reader never sees half), read leniently (a broken
    file is profiled again)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder) / FOLDER

    def get(self, key: str) -> Optional[StageProfile]:
        try:
            return StageProfile.from_dict(json.loads((self.folder / f"{key}.json").read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, key: str, profile: StageProfile) -> None:
        tmp = self.folder / f".{key}.{os.getpid()}.tmp"  # a name of its own: jobs of a launcher may write at once
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(profile.to_dict(), indent=2))
            tmp.replace(self.folder / f"{key}.json")
        except OSError as error:  # the next job profiles again; this one has its figures
            log.warning("could not keep the stage profile in %s: %s", self.folder, error)
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass


def profile_for(spec: Config, dataset: Any) -> Optional[StageProfile]:
    """The stage costs of the spec's dataset, transform and batch (``bench.profile_s``; 0: none), profiled in
    a forked copy of this process: what the pass reads, caches or draws stays out of the dataset and the
    memory the measurement then sees."""
    if spec.bench.profile_s <= 0:
        return None
    if not can_fork():
        return _profile(spec, dataset)  # no fork here: in this process, its random state restored after
    try:
        return answer_from_fork(lambda: _profile(spec, dataset), PROFILE_LIMIT_S + 10 * spec.bench.profile_s,
                                "loaderexp-profile")
    except (ForkFailed, OSError) as error:  # the job measures on without it, saying why
        timed_out = isinstance(error, ForkFailed) and error.why == "timeout"
        why = "did not finish in time" if timed_out else f"failed ({error})"
        log.warning("the profiling pass %s: no stage profile for this job", why)
        return None


PROFILE_LIMIT_S = 60.0


def _profile(spec: Config, dataset: Any) -> Optional[StageProfile]:
    from loaderexp.data.build import collate_for
    from loaderexp.harness.host_pace import reference_ms
    from loaderexp.harness.profile import profile_stages

    pace = reference_ms()  # the host's pace around the pass: the runs' are held against it in the report
    # The usable cores: a CPU quota's share (inside `--cpus=1` a 2-core machine is a 1-core one), not the affinity's.
    profile = profile_stages(dataset, spec.loader.batch_size, collate_for(spec.loader, dataset), usable_cpus(),
                             spec.bench.profile_s, spec.bench.seed)
    if profile is not None:
        profile.reference_ms = min(pace, reference_ms())  # as a run's: the quicker reading of the two
    return profile
