"""Model: why a setting is this fast and how fast this machine could be, from the measured stage costs.

Owns the ceiling model (:mod:`.ceiling`: each limit of the machine in samples/s, the lowest the ceiling,
the predicted throughput against ``num_workers``), the what-ifs it answers (:mod:`.whatif`) and the knee a
grid or a search measures first (:mod:`.knee`).  Pure Python over plain records: it imports only the
torch-free records of ``harness`` (``harness.stages``), never torch, Hydra or MLflow, so the result, the
report and the search use it alike.
"""

from loaderexp.model.ceiling import CeilingModel, Limit, Machine

__all__ = ["CeilingModel", "Limit", "Machine"]
