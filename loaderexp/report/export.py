"""The answer, in the user's training: the recommended DataLoader settings as files their code reads.

For each node type a sweep measured on, and each rank count with ``dist``, the pick (the confirmed one
when the sweep confirmed it side by side) becomes:

- ``loader.yaml``: a Hydra config group file (``conf/loader/loaderexp_tuned.yaml`` in the user's project);
- ``dataloader_kwargs.json`` and ``pytorch_snippet.py`` (``DataLoader(dataset, **kwargs)``);
- ``lightning_snippet.py`` (a LightningDataModule's ``train_dataloader``);
- ``hf_training_args.py`` (the ``TrainingArguments`` arguments that exist for these knobs).

Each file's header names the sweep, the host type and the date.  Values the sweep could not measure
(pin_memory without an accelerator) are written with a comment that says so.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from loaderexp.report.configurations import as_configurations
from loaderexp.report.confirm import Confirmation, confirmed_pick
from loaderexp.report.hosts import by_host_type
from loaderexp.report.recommend import recommend
from loaderexp.result import BACKEND, DATASET_NAME, SAMPLER_NAME, TOLERANCE, RunResult, write_whole
from loaderexp.result import metrics as M

# DataLoader's keywords loaderexp exports: always, and those written when the run set them away from the
# schema's defaults (RunFacts.loader_changed; a run recorded before that fact writes each one it has).
ALWAYS = ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
WHEN_SET = ("drop_last", "timeout", "multiprocessing_context", "in_order")
# TrainingArguments' names for them (transformers); the others have none.
HF_NAMES = {"batch_size": "per_device_train_batch_size", "num_workers": "dataloader_num_workers",
            "pin_memory": "dataloader_pin_memory", "prefetch_factor": "dataloader_prefetch_factor",
            "persistent_workers": "dataloader_persistent_workers", "drop_last": "dataloader_drop_last"}
SHUFFLED = ("random",)  # samplers a DataLoader makes itself with shuffle=True
OWN_SAMPLERS = {"RandomSampler": "random", "SequentialSampler": "sequential"}  # a DataModule's, by their class


@dataclass
class Tuned:
    """One recommendation as DataLoader keywords, and what the files' headers say about it."""

    kwargs: dict[str, Any]
    header: list[str]
    comments: dict[str, str] = field(default_factory=dict)  # keyword -> why its value is not a measurement
    sampler: Optional[str] = None  # the sweep's sampler preset

    @property
    def shuffle(self) -> Optional[bool]:
        if self.sampler in SHUFFLED:
            return True
        return False if self.sampler == "sequential" else None


def tuned(pick: RunResult, results: Sequence[RunResult], source: str, host: str, ranks: int) -> Tuned:
    """The pick's DataLoader keywords, made valid for DataLoader (no prefetch or persistence without
    workers), with the header each file carries."""
    params = pick.params
    kwargs: dict[str, Any] = {}
    for key in ALWAYS:
        kwargs[key] = params.get(f"loader.{key}")
    changed = pick.info.loader_changed
    for key in WHEN_SET:
        value = params.get(f"loader.{key}")
        if value is not None and (changed is None or key in changed):
            kwargs[key] = value
    comments = {}
    if kwargs["num_workers"] == 0:  # DataLoader refuses both without workers
        kwargs["prefetch_factor"], kwargs["persistent_workers"] = None, False
    if kwargs["pin_memory"] is None:  # left out as a repeat of one configuration: it could change nothing
        kwargs["pin_memory"] = False
    if not pick.host.cuda_available:
        comments["pin_memory"] = ("not measured: the sweep's host had no CUDA device, where pinning changes nothing; "
                                  "on a GPU host true usually copies faster (measure it there)")
    for key in ("collate_fn", "worker_init_fn"):
        if params.get(f"loader.{key}"):
            comments[key] = f"the sweep used loader.{key}={params[f'loader.{key}']}: pass your own"
    rate = pick.metrics.get(M.THROUGHPUT, 0.0)
    when = time.strftime("%Y-%m-%d", time.localtime(pick.info.measured_until or time.time()))
    fastest = max((r.metrics.get(M.THROUGHPUT, 0.0) for r in results), default=rate)
    header = [f"loaderexp's recommended DataLoader settings, from the sweep {source}",
              f"measured on {host} ({pick.host.hostname or '?'}), {when}"
              + (f", per rank with {ranks} ranks per node" if ranks > 1 else "")
              + (f" (each rank with OMP_NUM_THREADS={pick.info.rank_threads}, as torchrun sets it: set it where "
                 "your launcher does not)" if ranks > 1 and pick.info.rank_threads else ""),
              f"the pick: {rate:,.0f} samples/s" + (f" (the fastest run: {fastest:,.0f})" if fastest > rate else ""),
              f"dataset: {pick.params.get(DATASET_NAME)}, sampler: {pick.params.get(SAMPLER_NAME)}, "
              f"backend: {pick.params.get(BACKEND, 'dataloader')}"]
    sampler = pick.params.get(SAMPLER_NAME)
    own = pick.info.datamodule_baseline or {}
    if sampler == "datamodule":  # the DataModule's own: a shuffling DataLoader's, or one to pass on
        sampler = OWN_SAMPLERS.get(own.get("sampler"), f"datamodule ({own.get('sampler', 'its own')})")
    found = Tuned(kwargs, header, comments, sampler)
    if found.shuffle is not None:  # DataLoader(dataset, **kwargs) must draw samples as the measured loader did
        kwargs["shuffle"] = found.shuffle
        comments["shuffle"] = (f"the sweep's sampler={sampler}" + (": leave it out for an IterableDataset"
                                                                     if found.shuffle else ""))
    else:
        header.append(f"the sweep used sampler={sampler}: pass yours (sampler=...) with these settings")
    if kwargs["num_workers"] and kwargs["prefetch_factor"] is not None:
        comments["prefetch_factor"] = "with num_workers=0 set it to null: DataLoader refuses it without workers"
    return found


@dataclass
class Pick:
    """A sweep's recommendation for one node type and rank count, and the runs it was chosen from."""

    where: str  # a relative folder name: "" for one node type and one rank count
    host: str  # the node type (report.hosts.host_type)
    ranks: int
    folder: Path  # the picked run's folder
    result: RunResult
    results: list[RunResult]


def recommended(items: Sequence[tuple[Path, RunResult]], confirmation: Optional[Confirmation] = None,
                tolerance: float = TOLERANCE) -> list[Pick]:
    """The recommendation of each node type and rank count: the confirmed pick when the sweep confirmed it."""
    groups = by_host_type(items)
    found = []
    for kind, group in groups.items():
        configurations, _ = as_configurations(group)
        counts = sorted({r.ranks for _, r in configurations})
        for count in counts:
            ranked = [(f, r) for f, r in configurations if r.ranks == count]
            rec = recommend([r for _, r in ranked], tolerance)
            if rec is None:
                continue
            raced = len(groups) == 1 and count == 1  # the race compares runs of one host with one rank
            confirmed = confirmed_pick(confirmation, [r for _, r in ranked]) if raced else None
            answer = confirmed if confirmed is not None else rec.result
            chosen = next((f, r) for f, r in ranked if r is answer)
            where = "/".join(part for part in (_slug(kind) if len(groups) > 1 else "",
                                               f"ranks_{count}" if len(counts) > 1 else "") if part)
            found.append(Pick(where, kind, count, chosen[0], chosen[1], [r for _, r in ranked]))
    return found


def picks(items: Sequence[tuple[Path, RunResult]], confirmation: Optional[Confirmation], source: str,
          tolerance: float = TOLERANCE) -> dict[str, Tuned]:
    """Each recommendation as DataLoader keywords, by the relative folder its files go to."""
    return {p.where: tuned(p.result, p.results, source, p.host, p.ranks)
            for p in recommended(items, confirmation, tolerance)}


def export(items: Sequence[tuple[Path, RunResult]], folder: Path, source: str,
           confirmation: Optional[Confirmation] = None) -> list[Path]:
    """Write every recommendation's files under ``folder``; the paths written (none without a pick)."""
    written = []
    for where, recommendation in picks(items, confirmation, source).items():
        target = folder / where if where else folder
        target.mkdir(parents=True, exist_ok=True)
        for name, text in render(recommendation).items():
            write_whole(target / name, text)
            written.append(target / name)
    return written


def render(t: Tuned) -> dict[str, str]:
    """Each file's text."""
    return {"loader.yaml": _yaml(t), "dataloader_kwargs.json": json.dumps(t.kwargs, indent=2) + "\n",
            "pytorch_snippet.py": _pytorch(t), "lightning_snippet.py": _lightning(t),
            "hf_training_args.py": _hf(t)}


def _comment(lines: Sequence[str]) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in lines)


def _yaml_value(value: Any) -> str:
    return json.dumps(value)  # JSON's null, true, false, numbers and quoted strings are YAML's too


def _yaml(t: Tuned) -> str:
    body = "".join(f"{key}: {_yaml_value(value)}" + (f"  # {t.comments[key]}" if key in t.comments else "") + "\n"
                   for key, value in t.kwargs.items())
    use = ["", "In your Hydra project: save as conf/loader/loaderexp_tuned.yaml, put `- loader: loaderexp_tuned`",
           "in your defaults list, and build the loader with DataLoader(dataset, **cfg.loader)."]
    return _comment(t.header + use) + body


def _kwargs_literal(kwargs: dict[str, Any], comments: dict[str, str], indent: str = "    ") -> str:
    lines = [f"{indent}{key!r}: {value!r}," + (f"  # {comments[key]}" if key in comments else "")
             for key, value in kwargs.items()]
    return "{\n" + "\n".join(lines) + "\n}"


FIT = (
    "def fitted(dataset, **overrides):\n"
    '    """The measured settings, with ``overrides`` (a sampler, collate_fn, num_workers) winning, made valid for\n'
    '    DataLoader: no shuffle beside a sampler or for an IterableDataset, no prefetch or persistence without\n'
    '    workers."""\n'
    "    settings = {**DATALOADER_KWARGS, **overrides}\n"
    "    if 'sampler' in overrides or isinstance(dataset, IterableDataset):\n"
    "        settings.pop('shuffle', None)\n"
    "    if not settings.get('num_workers'):\n"
    "        settings['prefetch_factor'], settings['persistent_workers'] = None, False\n"
    "    return settings\n")


def _pytorch(t: Tuned) -> str:
    return (_comment(t.header) + '"""Plain PyTorch: loader = tuned_loader(train_dataset)."""\n\n'
            "from torch.utils.data import DataLoader, IterableDataset\n\n"
            f"DATALOADER_KWARGS = {_kwargs_literal(t.kwargs, t.comments)}\n\n\n{FIT}\n\n"
            "def tuned_loader(dataset, **overrides):\n"
            '    """A DataLoader with the measured settings; overrides (a sampler, collate_fn) win."""\n'
            "    return DataLoader(dataset, **fitted(dataset, **overrides))\n")


def _lightning(t: Tuned) -> str:
    return (_comment(t.header) + '"""Lightning: the train_dataloader of your LightningDataModule, with the measured\n'
            "settings.\n\n"
            "Mix the class in first: class MyData(TunedTrainDataloader, MyDataModule). When your DataModule has a\n"
            "train_dataloader() of its own, its loader is rebuilt with these settings and keeps its dataset,\n"
            "sampler and collate_fn (what loaderexp measured with sampler=datamodule); otherwise\n"
            "self.train_dataset (set in setup()) is loaded. Lightning swaps in a DistributedSampler itself when\n"
            "it trains on several devices.\n"
            '"""\n\n'
            "from torch.utils.data import DataLoader, IterableDataset\n\n"
            f"DATALOADER_KWARGS = {_kwargs_literal(t.kwargs, t.comments)}\n\n\n{FIT}\n\n"
            "def retuned(loader, **overrides):\n"
            '    """``loader`` rebuilt with the measured settings: its dataset, sampler and collate_fn kept."""\n'
            "    own = {'collate_fn': loader.collate_fn}\n"
            "    if 'drop_last' not in DATALOADER_KWARGS:  # the sweep did not set it: yours stands\n"
            "        own['drop_last'] = loader.drop_last\n"
            "    if not isinstance(loader.dataset, IterableDataset):\n"
            "        batches = loader.batch_sampler\n"
            "        own['sampler'] = batches.sampler if batches is not None else loader.sampler\n"
            "    return DataLoader(loader.dataset, **fitted(loader.dataset, **{**own, **overrides}))\n\n\n"
            "class TunedTrainDataloader:\n"
            "    def train_dataloader(self):\n"
            "        own = super().train_dataloader\n"
            "        if getattr(own, '__module__', '').startswith(('lightning', 'pytorch_lightning')):  # not written\n"
            "            return DataLoader(self.train_dataset, **fitted(self.train_dataset))\n"
            "        return retuned(own())\n")


def _hf(t: Tuned) -> str:
    named = {HF_NAMES[k]: v for k, v in t.kwargs.items() if k in HF_NAMES}
    comments = {HF_NAMES[k]: c for k, c in t.comments.items() if k in HF_NAMES}
    missing = [k for k in t.kwargs if k not in HF_NAMES and not (k == "shuffle" and t.kwargs[k])]  # it shuffles
    note = ([f"TrainingArguments has no argument for {', '.join(missing)}: its Trainer builds the DataLoader "
             "without them"] if missing else [])
    return (_comment(t.header + note) + '"""Hugging Face Trainer: TrainingArguments(output_dir=..., '
            '**TRAINING_ARGUMENTS)."""\n\n'
            f"TRAINING_ARGUMENTS = {_kwargs_literal(named, comments)}\n")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()[:80] or "host"

