"""The host a run measured on, with what torch sees on it: read where torch is loaded anyway."""

from __future__ import annotations

import dataclasses

import torch

from loaderexp.result import HostFacts, machine_facts


def host_facts() -> HostFacts:
    """The machine plus what torch sees on it (CUDA, the GPU)."""
    return dataclasses.replace(
        machine_facts(),
        torch=torch.__version__,
        cuda_available=torch.cuda.is_available(),
        cuda_version=torch.version.cuda,
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
    )
