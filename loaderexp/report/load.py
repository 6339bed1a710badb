"""A sweep's results, read back from its folder (result.json files) or from MLflow."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from loaderexp.report.confirm import CONFIRMATION_FILE
from loaderexp.result import RESULT_FILE, RunResult

log = logging.getLogger("loaderexp")


def load_results(sweep_dir: Path) -> list[tuple[Path, RunResult]]:
    """Every job's result below ``sweep_dir``, in job order; a file that is not one (truncated, stray,
    of another tool) is skipped with a warning that names it."""
    found = []
    for path in Path(sweep_dir).rglob(RESULT_FILE):
        try:
            found.append((path.parent, RunResult.read(path)))
        except (OSError, ValueError, TypeError) as error:  # JSONDecodeError is a ValueError; a wrong shape, TypeError
            log.warning("skipped %s: not a loaderexp result (%s: %s)", path, type(error).__name__,
                        str(error).splitlines()[0] if str(error) else "")
    return sorted(found, key=lambda item: _job_order(item[0]))


def _job_order(folder: Path) -> tuple:
    return (0, int(folder.name), "") if folder.name.isdigit() else (1, 0, str(folder))


def results_from_mlflow(uri: str, parent_run_id: str) -> list[tuple[Path, RunResult]]:
    """A sweep's child runs, read back from MLflow as results (for sweeps run elsewhere).  Raises
    LookupError, with one line, for a store that is not there (reading never creates one) or a run
    that is not in it."""
    client, parent = _opened(uri, parent_run_id)
    runs = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'", max_results=10_000
    )
    items = []
    for run in sorted(runs, key=lambda r: r.info.start_time):
        params = {k: _parse(v) for k, v in run.data.params.items()}
        info = {k[len("info."):]: _parse(v) for k, v in run.data.tags.items() if k.startswith("info.")}
        host = {k[len("host."):]: _parse(v) for k, v in run.data.tags.items() if k.startswith("host.")}
        try:
            result = RunResult.from_record({"status": run.info.status, "params": params, "info": info, "host": host,
                                            "metrics": dict(run.data.metrics), "error": run.data.tags.get("error"),
                                            "run_id": run.info.run_id})
        except ValueError as error:  # a run MLflow holds but loaderexp did not end (SCHEDULED)
            log.warning("skipped run %s: %s", run.info.run_id, error)
            continue
        items.append((Path(run.data.tags.get("loaderexp.output_dir", run.info.run_id)), result))
    return items


def _opened(uri: str, run_id: str):
    """(the store's client, the run): LookupError, in one line, for a store that is not there (reading never
    creates one) or a run that is not in it."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    local = Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None
    if local is not None and not local.is_file():
        raise LookupError(f"--uri {uri}: no MLflow store there ({local} does not exist)")
    try:
        client = MlflowClient(uri)
        client.search_experiments(max_results=1)  # the store itself, apart from the run
    except Exception as error:  # noqa: BLE001 - MLflow's, SQLAlchemy's and HTTP errors alike
        why = next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)
        raise LookupError(f"--uri {uri}: the store cannot be read ({type(error).__name__}: {why[:300]})") from None
    try:
        return client, client.get_run(run_id)
    except MlflowException as error:
        raise LookupError(f"{run_id}: no such run in {uri} ({str(error).splitlines()[0]})") from None


def _parse(text: str):
    """A param or tag back to the value it was logged from (numbers, booleans, null)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.startswith(("[", "{")):  # a list or dict fact (repeat_rates, loader_changed), as param_text wrote it
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            pass
    return text


def confirmation_from_mlflow(uri: str, parent_run_id: str, into: Path) -> Path:
    """The folder ``into`` with the sweep parent's confirmation.json in it, when the sweep logged one."""
    client, _ = _opened(uri, parent_run_id)
    _download_confirmation(client, parent_run_id, into)
    return into


def _download_confirmation(client, run_id: str, into: Path) -> None:
    if CONFIRMATION_FILE in {a.path for a in client.list_artifacts(run_id)}:
        client.download_artifacts(run_id, CONFIRMATION_FILE, str(into))


def download_runs(uri: str, run_id: str, into: Path) -> Path:
    """A run's (or a sweep parent's children's) result.json and resolved_config.yaml from MLflow, into
    ``into``/<run id>/ as a sweep folder holds them; ``into`` is returned.  Raises LookupError as above."""
    from mlflow.exceptions import MlflowException

    client, run = _opened(uri, run_id)
    children = client.search_runs([run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'",
                                  max_results=10_000)
    _download_confirmation(client, run_id, into)
    for child in children or [run]:
        folder = into / child.info.run_id
        folder.mkdir(parents=True, exist_ok=True)
        for name in (RESULT_FILE, "resolved_config.yaml"):  # config.RESOLVED_CONFIG (report does not import config)
            try:
                client.download_artifacts(child.info.run_id, name, str(folder))
            except (MlflowException, OSError):
                log.warning("run %s has no %s in MLflow: left out", child.info.run_id, name)
    return into
