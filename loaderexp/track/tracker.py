"""MLflow logging: explicit run ids, one batched call per run, main process only.

Runs are created and ended through ``MlflowClient`` with explicit ids rather than MLflow's
active-run stack, which is per process and per thread.  A multirun is one *parent* run with
one child per job (``mlflow.parentRunId``), inside an experiment named after the sweep
(``tracking.experiment``): the UI shows the sweep as one expandable row, and named sweeps
(``classic``, ``workers``, ...) stay apart.  mlflow is imported lazily: ``tracking=none``
never loads it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import subprocess
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from loaderexp.config import RESOLVED_CONFIG, Config, check_tracking
from loaderexp.result import (DATA_ROOT, DATASET_NAME, DATASET_ROOT, DATASET_TARGET, NUM_WORKERS, RESULT_FILE, STOP_BELOW,
                              HostFacts, RunFacts, RunResult, Status, param_text, redact_uri)
from loaderexp.result import metrics as M
from loaderexp.track.stores import TrackingUnavailable, check_reachable, client
from loaderexp.track.versions import DIFF_FILE

PARAM_VALUE_LIMIT = 6000
CHARTED = (M.THROUGHPUT, M.PSS)  # the sweep's charts, against the swept knob
TABLE_METRICS = (M.THROUGHPUT, M.THROUGHPUT_IQR, M.PSS, M.CEILING_FRACTION)  # the runs table's first columns


@functools.lru_cache(maxsize=None)
def git_commit(folder: str) -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def check_store(spec: Config) -> None:
    """Before a single run measures: its experiment's name, and its store reached and opened (ConfigError or
    TrackingUnavailable, one line each)."""
    check_tracking(spec)
    if spec.tracking.backend.value == "mlflow":
        open_tracker(spec.tracking.uri, spec.tracking.experiment)


def open_tracker(uri: str, experiment: str) -> "MlflowTracker":
    """The store reached and opened, its experiment found or made: what a run or a sweep checks before anything
    is measured.  TrackingUnavailable in one line (MLflow's own first line of why) when it cannot be."""
    check_reachable(uri)
    try:
        return MlflowTracker(uri, experiment)
    except Exception as error:  # noqa: BLE001 - SQLAlchemy's, MLflow's and HTTP errors alike
        why = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise TrackingUnavailable(f"tracking.uri={redact_uri(uri)}: the store cannot be used "
                                  f"({type(error).__name__}: {why[:300]})") from None


class MlflowTracker:
    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.client = client(uri)
        self.experiment_id = self._experiment(experiment)

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = None
        if self.uri.startswith("sqlite:///"):
            # Beside the database, not in whatever folder the first sweep ran from.
            location = (Path(self.uri[len("sqlite:///") :]).parent / "mlartifacts").as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except Exception:
            found = self.client.get_experiment_by_name(name)  # created meanwhile by a parallel sweep
            if found is None:
                raise
            return found.experiment_id

    def start_run(self, name: str, tags: Mapping[str, str], parent_id: Optional[str] = None) -> str:
        all_tags = {k: _limit(v) for k, v in tags.items()}
        if parent_id:
            all_tags["mlflow.parentRunId"] = parent_id
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        return run.info.run_id

    def log(
        self,
        run_id: str,
        params: Optional[Mapping[str, Any]] = None,
        metrics: Optional[Mapping[str, float]] = None,
        tags: Optional[Mapping[str, Any]] = None,
    ) -> None:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.utils.time import get_current_time_millis

        now = get_current_time_millis()
        param_list = [Param(k, _limit(v)) for k, v in (params or {}).items()]
        tag_list = [RunTag(k, _limit(v)) for k, v in (tags or {}).items()]
        metric_list = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if _is_number(v)]
        # The client splits a call into the store's per-request limits (100 params/tags) itself.
        self.client.log_batch(run_id, metrics=metric_list, params=param_list, tags=tag_list)

    def log_dataset(self, run_id: str, params: Mapping[str, Any], info: RunFacts) -> None:
        """The run's dataset as an MLflow input (the runs table's Dataset column): its name, where it
        is, a digest of its settings, and whether it was generated or is the real one.

        Tried twice: two sweeps logging the same dataset at once race to create it in the experiment,
        and MLflow answers the loser's insert with a UNIQUE constraint error it does not retry; on the
        second try the dataset exists."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        settings = {k: v for k, v in params.items() if k.startswith("dataset.") or k == DATA_ROOT}
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
        where = params.get(DATASET_ROOT) or params.get(DATA_ROOT) or params.get(DATASET_TARGET, "")
        source = json.dumps({"uri": str(where), "target": params.get(DATASET_TARGET)})
        profile = json.dumps({"data_source": info.data_source, "samples": info.dataset_length,
                              "batches_per_epoch": info.batches_per_epoch})
        dataset = Dataset(name=str(params.get(DATASET_NAME, "dataset")), digest=digest, source_type="local",
                          source=source, profile=profile)
        tags = [InputTag("mlflow.data.context", "train"), InputTag("loaderexp.data_source", str(info.data_source))]
        try:
            self.client.log_inputs(run_id, datasets=[DatasetInput(dataset, tags=tags)])
        except Exception:  # noqa: BLE001 - MLflow raises its own and HTTP errors alike
            self.client.log_inputs(run_id, datasets=[DatasetInput(dataset, tags=tags)])

    def log_file(self, run_id: str, path: Path, artifact_path: Optional[str] = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def end_run(self, run_id: str, status: Status) -> None:
        self.client.set_terminated(run_id, status=Status(status).value)

    def ui_address(self) -> str:
        """The UI's root: the tracking server itself, or where `mlflow ui` serves a local store."""
        return self.uri.rstrip("/") if self.uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"

    def runs_url(self) -> str:
        """The experiment's runs table (MLflow 3 otherwise opens an empty GenAI overview page)."""
        return f"{self.ui_address()}/#/experiments/{self.experiment_id}/runs"

    def charts_url(self, parent_id: str, swept: Sequence[str]) -> str:
        """The sweep's jobs in MLflow's chart view: throughput (and memory) against the first swept
        knob, num_workers when it is swept, one point per configuration.

        Stored as one of MLflow's own shared views (the experiment tag ``mlflow.sharedViewState.<key>``
        that the UI's Share button writes, opened by ``?viewStateShareKey=<key>``): the jobs of this
        parent only, grouped by the swept knobs (a group per configuration, so they are not folded
        under the parent's row), with the charts already added.
        """
        keys = list(swept) or [NUM_WORKERS]
        x = chart_axis(swept)
        section = "loaderexp"
        charts = [{"uuid": f"loaderexp-{metric}", "type": "SCATTER", "runsCountToCompare": 100,
                   "metricSectionId": section, "deleted": False, "isGenerated": False,
                   "xaxis": {"key": x, "type": "PARAM"}, "yaxis": {"key": metric, "type": "METRIC"}}
                  for metric in CHARTED]
        state = {
            "searchFilter": f"tags.mlflow.parentRunId = '{parent_id}'",
            "groupBy": {"aggregateFunction": "average",
                        "groupByKeys": [{"mode": "param", "groupByData": key} for key in keys]},
            "useGroupedValuesInCharts": True,
            "hideEmptyCharts": False,
            "compareRunSections": [{"uuid": section, "name": "loaderexp: the sweep", "display": True,
                                    "isReordered": False}],
            "compareRunCharts": charts,
        }
        share_key = f"loaderexp-{parent_id}"
        self.client.set_experiment_tag(self.experiment_id, f"mlflow.sharedViewState.{share_key}", json.dumps(state))
        return f"{self.runs_url()}?viewStateShareKey={share_key}&compareRunsMode=CHART"

    def table_url(self, parent_id: str, swept: Sequence[str]) -> str:
        """The sweep's jobs in MLflow's runs table, fastest first, the columns a user compares beside their
        names (throughput, its spread, memory, how near the ceiling; the swept knobs): a shared view as
        :meth:`charts_url`'s, in table mode (a search filter also lists the jobs flat, not under the parent)."""
        columns = [*(f"metrics.`{m}`" for m in TABLE_METRICS), *(f"params.`{k}`" for k in (swept or [NUM_WORKERS]))]
        state = {"searchFilter": f"tags.mlflow.parentRunId = '{parent_id}'",
                 "orderByKey": f"metrics.`{M.THROUGHPUT}`", "orderByAsc": False,
                 "selectedColumns": columns}
        share_key = f"loaderexp-table-{parent_id}"
        self.client.set_experiment_tag(self.experiment_id, f"mlflow.sharedViewState.{share_key}", json.dumps(state))
        return f"{self.runs_url()}?viewStateShareKey={share_key}&compareRunsMode=TABLE"


# A DataLoader knob's name in a run's name (the param keeps its whole key).
SHORT_NAMES = {"num_workers": "workers", "pin_memory": "pin", "batch_size": "batch", "prefetch_factor": "prefetch",
               "persistent_workers": "persistent"}


def run_name(swept: Sequence[str]) -> str:
    """A job's run name: its swept values, short enough for MLflow's runs table to show whole
    (``loader.num_workers=2 loader.pin_memory=true`` -> ``workers=2 pin=true``)."""
    def short(override: str) -> str:
        key, _, value = override.partition("=")
        if key.startswith("loader."):
            key = SHORT_NAMES.get(key.removeprefix("loader."), key.removeprefix("loader."))
        return f"{key}={value}" if value else key

    return " ".join(short(o) for o in swept) or "defaults"


def close_stale_runs(tracker: MlflowTracker, parent_id: str) -> int:
    """Close as KILLED the runs under ``parent_id`` still RUNNING: a sweep killed outright (SIGKILL, the
    OOM killer) could not close them, and nothing else will.  Called when that sweep is resumed or synced."""
    stale = tracker.client.search_runs([tracker.experiment_id], filter_string=(
        f"tags.mlflow.parentRunId = '{parent_id}' and attributes.status = '{Status.RUNNING.value}'"), max_results=10_000)
    for run in stale:
        tracker.client.set_tag(run.info.run_id, "mlflow.note.content",
                               "**KILLED**: its sweep was killed while it measured (closed when the sweep was resumed)")
        tracker.end_run(run.info.run_id, Status.KILLED)
    return len(stale)


def chart_axis(swept: Sequence[str]) -> str:
    """The x axis of a sweep's charts: num_workers when it is swept, else the first swept knob."""
    return NUM_WORKERS if NUM_WORKERS in swept or not swept else swept[0]


def _limit(value: Any) -> str:
    text = param_text(value)
    return text if len(text) <= PARAM_VALUE_LIMIT else text[: PARAM_VALUE_LIMIT - 3] + "..."


def _is_number(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number == number  # NaN is not logged: MLflow's UI charts it as a gap anyway


def host_tags(host: HostFacts) -> dict[str, Any]:
    """Host facts as run tags (``host.cpu_count`` ...), so runs from different machines stay apart."""
    return {f"host.{k}": v for k, v in host.to_dict().items()}


def opening_tags(result: RunResult, output_dir: Path, overrides: Optional[Sequence[str]] = None,
                 config_root: Optional[str] = None) -> dict[str, Any]:
    """A job's run tags when it opens: the host, the configuration's hash and folder, its overrides and the
    commit of the config folder it was composed from (``mlflow.source.git.commit``), where one is known."""
    tags = {**host_tags(result.host), "loaderexp.config_hash": result.config_hash,
            "loaderexp.output_dir": str(output_dir)}
    if overrides is not None:  # a job's (an import's are in its result.json)
        tags["loaderexp.overrides"] = " ".join(overrides)
    own = [s["commit"] for s in result.info.config_sources or [] if s["provider"] == "main"]
    commit = own[0] if own else (git_commit(config_root) if config_root else None)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def log_result(tracker: MlflowTracker, run_id: str, result: RunResult, folder: Path) -> None:
    """A finished job's params, metrics, tags and files, then its final status."""
    tags: dict[str, Any] = {f"info.{k}": v for k, v in result.info.to_dict().items() if k != "traceback"}
    tags["loaderexp.warnings"] = " | ".join(result.warnings)
    if result.error:
        tags["error"] = result.error
        tags["mlflow.note.content"] = f"**{result.status}**: {result.error}"
    elif result.info.not_written:  # measured and logged, but a local file is missing (a full disk)
        tags["mlflow.note.content"] = f"**{result.status}**, not written locally: " + "; ".join(result.info.not_written)
    elif result.metrics.get(M.PRUNED):  # shown on the run's page; the tag filters the table
        tags["loaderexp.pruned"] = "true"
        tags["mlflow.note.content"] = ("**PRUNED** by the search after its first window: below "
                                       f"{result.params.get(STOP_BELOW)} samples/s, the best trial's rate "
                                       "less the search's prune_margin.")
    tracker.log(run_id, params=result.params, metrics=result.metrics, tags=tags)
    if result.finished:
        _log_dataset(tracker, run_id, result)
    for name in (RESULT_FILE, RESOLVED_CONFIG, "batches.csv", DIFF_FILE):
        if (folder / name).is_file():
            tracker.log_file(run_id, folder / name)
    tracker.end_run(run_id, result.status)


def _log_dataset(tracker: MlflowTracker, run_id: str, result: RunResult) -> None:
    """The run's dataset input: a label, not a measurement, so a store that refuses it twice leaves
    the run recorded without it, and says so."""
    try:
        tracker.log_dataset(run_id, result.params, result.info)
    except Exception as error:  # noqa: BLE001 - MLflow raises its own and HTTP errors alike
        logging.getLogger("loaderexp").warning("run %s: its dataset input was not logged (%s)", run_id,
                                               str(error).splitlines()[0] if str(error) else type(error).__name__)
