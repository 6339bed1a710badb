"""Loading: the stacks that turn a dataset and a sampler into batches, one module per stack.

Owns the small contract every stack keeps (:mod:`.base`: built from the run's spec, it yields the
batches the measured loop takes, each with the indices it was fetched for where the delivery check
needs them, and shuts its threads or processes down when an epoch's iterator is dropped), and one
module per stack, named as its ``conf/backend/<name>.yaml``: ``dataloader`` (torch's DataLoader and
its worker processes), ``nodes_thread`` and ``nodes_process`` (torchdata.nodes), ``spdl``.  Each
module declares its stack as ``STACK`` with the knobs it has, which validation reads before any job,
so a module imports nothing heavy at its top.  Adding a stack is a module here and a YAML file.

It may import ``config`` (the spec's types), ``data`` (building the DataLoader and the callables a
config names) and ``harness`` (the delivery wrappers); never ``execute``, ``track`` or ``report``.
"""
