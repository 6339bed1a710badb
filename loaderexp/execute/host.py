"""The host a run measured on, with what torch sees on it: read where torch is loaded anyway."""

from __future__ import annotations

import torch

from loaderexp.result import HostFacts, machine_facts


def host_facts() -> HostFacts:
    """The machine plus what torch sees on it (CUDA, the GPU)."""
    facts, cuda = machine_facts(), torch.cuda.is_available()
    # str(): torch.__version__ is a TorchVersion, and unpickling one imports torch into the app (4 s)
    facts.torch, facts.cuda_available, facts.cuda_version = str(torch.__version__), cuda, torch.version.cuda
    facts.gpu = torch.cuda.get_device_name(0) if cuda else None
    facts.gpu_count = torch.cuda.device_count() if cuda else 0
    return facts
