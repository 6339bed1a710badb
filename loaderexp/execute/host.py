"""The host a run measured on, with what torch sees on it: read where torch is loaded anyway."""

from __future__ import annotations

from typing import Any

import torch

from loaderexp.result import machine_facts


def host_facts() -> dict[str, Any]:
    """The machine plus what torch sees on it (CUDA, the GPU)."""
    facts = machine_facts()
    facts.update(
        torch=torch.__version__,
        cuda_available=torch.cuda.is_available(),
        cuda_version=torch.version.cuda,
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
    )
    return facts
