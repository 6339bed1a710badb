"""Data: the datasets, samplers and transforms a run loads, and the DataLoader built over them.

Owns the generated data sets (CIFAR-10 in its own file format, JPEG folders, synthetic tensors,
streams; :mod:`.generated` makes each once per ``data_root``), the samplers and transforms the
config groups name, and building all of them from plain config nodes with
``hydra.utils.instantiate`` (:mod:`.build`).  It may import torch, torchvision, Hydra's
``instantiate`` and ``loaderexp.config.schema``; nothing that measures, tracks or reports.
"""
