"""Report: compare a sweep's runs as a table, a recommendation with its reason, and a plot.

Owns reading results back (:mod:`.load`, from the sweep folder or MLflow), which params are the
sweep's axes (:mod:`.params`), the table (:mod:`.table`), the recommendation rule
(:mod:`.recommend`), why the runs are as fast as they are against this machine's ceiling
(:mod:`.ceiling`, from :mod:`loaderexp.model`), the plot (:mod:`.plot`), the recommendation as files for the user's training (:mod:`.export`) and
``python -m loaderexp.report`` (:mod:`.cli`).  It works on :class:`loaderexp.result.RunResult` values only: it may
import ``result`` and ``model`` (and mlflow, lazily, to read a sweep back), never ``harness``,
``execute``, ``track`` or the runner.
"""

from loaderexp.report.ceiling import ceiling_sections, stage_metrics
from loaderexp.report.cli import main, write_report
from loaderexp.report.export import export
from loaderexp.report.load import load_results, results_from_mlflow
from loaderexp.report.recommend import Recommendation, recommend
from loaderexp.report.table import summary_table

__all__ = ["Recommendation", "ceiling_sections", "export", "load_results", "main", "recommend", "results_from_mlflow",
           "stage_metrics", "summary_table", "write_report"]
