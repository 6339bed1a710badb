"""Which params a comparison shows: the sweep's axes, named as the user wrote them."""

from __future__ import annotations

from typing import Sequence

from loaderexp.result import IGNORED_PARAMS, NUM_WORKERS, RunResult
X_AXIS = NUM_WORKERS  # what the plot and the recommendation count


def varying_params(results: Sequence[RunResult]) -> list[str]:
    """Params whose value differs between runs: the sweep's axes."""
    keys: list[str] = []
    for result in results:
        for key in result.params:
            if key not in keys and not key.startswith(IGNORED_PARAMS):
                keys.append(key)
    varying = [k for k in keys if len({str(r.params.get(k)) for r in results}) > 1]
    return [k for k in varying if not _follows_its_group(k, varying, results)]


def _follows_its_group(key: str, varying: list[str], results: Sequence[RunResult]) -> bool:
    """A member of a config group whose choice the sweep varies (``sampler=random,sequential``), with one value for
    each choice: the choice says it (else sampler._target_, sampler.name and sampler.replacement were three axes,
    and the pick read "sampler._target_=torch.utils.data.SequentialSampler, sampler.name=sequential, ...")."""
    group, _, member = key.partition(".")
    choice = f"{group}.{GROUP_CHOICE}"
    if not member or member == GROUP_CHOICE or choice not in varying:
        return False
    values: dict[str, str] = {}
    return all(values.setdefault(str(r.params.get(choice)), str(r.params.get(key))) == str(r.params.get(key))
               for r in results)


GROUP_CHOICE = "name"  # every group file's own name (conf/sampler/sequential.yaml: name: sequential)


def short_key(key: str) -> str:
    """As the user wrote it: num_workers for loader.num_workers, sampler for the group's choice (sampler.name)."""
    if key.startswith("loader."):
        return key.split(".", 1)[1]
    group, _, member = key.partition(".")
    return group if member == GROUP_CHOICE else key
