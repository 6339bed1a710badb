"""``backend=nodes_process``: torchdata.nodes as ``nodes_thread``, the ParallelMapper on processes."""

from __future__ import annotations

from loaderexp.loading.base import COMMON_KNOBS
from loaderexp.loading.nodes_thread import NodesThreadStack


class NodesProcessStack(NodesThreadStack):
    name = "nodes_process"
    knobs = (*COMMON_KNOBS, "multiprocessing_context")
    method = "process"
    processes = True


STACK = NodesProcessStack
