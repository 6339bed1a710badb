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
import subprocess
from pathlib import Path
from typing import Any, Mapping, Optional
from urllib.parse import urlparse

from loaderexp.result import param_text

PARAM_VALUE_LIMIT = 6000


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached or opened."""


@functools.lru_cache(maxsize=None)
def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def check_reachable(uri: str) -> None:
    """Fail up front, with the URI in the message, when the store cannot be used."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        import urllib.request

        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=5) as response:
                response.read()
        except Exception as error:
            raise TrackingUnavailable(f"tracking.uri={uri}: MLflow server not reachable ({error})") from error
    elif parsed.scheme == "sqlite":
        folder = Path(uri[len("sqlite:///") :]).parent
        if not folder.is_dir():
            raise TrackingUnavailable(f"tracking.uri={uri}: folder {folder} does not exist")


@functools.lru_cache(maxsize=None)
def git_commit(folder: str) -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


class MlflowTracker:
    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.client = _client(uri)
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

    def log_file(self, run_id: str, path: Path) -> None:
        self.client.log_artifact(run_id, str(path))

    def end_run(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=status)

    def ui_address(self) -> str:
        """The UI's root: the tracking server itself, or where `mlflow ui` serves a local store."""
        return self.uri.rstrip("/") if self.uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"

    def runs_url(self, chart: bool = False) -> str:
        """The experiment's runs table (MLflow 3 otherwise opens an empty GenAI overview page)."""
        url = f"{self.ui_address()}/#/experiments/{self.experiment_id}/runs"
        return url + "?compareRunsMode=CHART" if chart else url


def _limit(value: Any) -> str:
    text = param_text(value)
    return text if len(text) <= PARAM_VALUE_LIMIT else text[: PARAM_VALUE_LIMIT - 3] + "..."


def _is_number(value: Any) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return number == number  # NaN is not logged: MLflow's UI charts it as a gap anyway


def host_tags(host: Mapping[str, Any]) -> dict[str, Any]:
    """Host facts as run tags (``host.cpu_count`` ...), so runs from different machines stay apart."""
    return {f"host.{k}": v for k, v in host.items()}


def log_result(tracker: MlflowTracker, run_id: str, result: Any, folder: Path) -> None:
    """A finished job's params, metrics, tags and files, then its final status."""
    tags: dict[str, Any] = {f"info.{k}": v for k, v in result.info.items() if k != "traceback"}
    tags["loaderexp.warnings"] = " | ".join(result.warnings)
    if result.error:
        tags["error"] = result.error
        tags["mlflow.note.content"] = f"**{result.status}**: {result.error}"
    tracker.log(run_id, params=result.params, metrics=result.metrics, tags=tags)
    for name in ("result.json", "resolved_config.yaml", "batches.csv"):
        if (folder / name).is_file():
            tracker.log_file(run_id, folder / name)
    tracker.end_run(run_id, result.status)
