"""CUDA checks for a machine with a GPU (under 5 minutes): copy bandwidth, overlap, a small sweep.

    python benchmarks/cuda_check.py

1. pinned vs pageable host-to-device bandwidth for a few batch sizes (CUDA events on a copy stream);
2. non_blocking overlap: a pinned batch copied on a side stream while a matmul runs on the default
   stream, against the same two done one after the other;
3. a small loaderexp sweep on the GPU (num_workers 0 and 2, pin_memory true and false, a matmul step)
   through the same code path as `python -m loaderexp device=cuda`.

Without CUDA it says so and exits 0 having measured nothing: there is no copy to time.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def copy_bandwidth(batch: int, shape: tuple[int, ...], pinned: bool, repeats: int = 20) -> float:
    """GB/s of ``batch`` float32 samples of ``shape`` copied host-to-device (median of ``repeats``)."""
    host = torch.rand((batch, *shape))
    if pinned:
        host = host.pin_memory()
    stream = torch.cuda.Stream()
    times = []
    for _ in range(repeats + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record(stream)
            host.to("cuda", non_blocking=pinned)
            end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    seconds = sorted(times[2:])[repeats // 2]
    return host.numel() * host.element_size() / seconds / 1e9


def overlap(batch: int, shape: tuple[int, ...], size: int = 4096) -> tuple[float, float, float]:
    """(serial s, overlapped s, copy s): copy + matmul one after the other, then concurrently."""
    host = torch.rand((batch, *shape)).pin_memory()
    a = torch.randn(size, size, device="cuda")
    copy_stream = torch.cuda.Stream()

    def timed(fn) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / 10

    def copy_only():
        host.to("cuda", non_blocking=True)

    def serial():
        host.to("cuda", non_blocking=False)
        a @ a

    def overlapped():
        with torch.cuda.stream(copy_stream):
            host.to("cuda", non_blocking=True)
        a @ a
        torch.cuda.current_stream().wait_stream(copy_stream)

    timed(serial)  # warm-up: cuBLAS handles, allocator
    return timed(serial), timed(overlapped), timed(copy_only)


def small_sweep() -> None:
    from loaderexp.config import compose, resolve_auto_transform, to_plain
    from loaderexp.execute.job import measure_job

    print("\n3. loaderexp on the GPU: synthetic data, matmul step (size 2048), 100 batches x 3 repeats")
    print(f"   {'workers':>7} {'pin':>5} {'samples/s':>10} {'h2d GB/s':>9} {'h2d ms/batch':>12} {'pinned':>6} "
          f"{'stall%':>6}  bound")
    for workers in (0, 2):
        for pin in (False, True):
            cfg = resolve_auto_transform(to_plain(compose([
                "dataset=synthetic", "device=cuda", "step=matmul", "step.size=2048", "tracking=none",
                f"loader.num_workers={workers}", f"loader.pin_memory={str(pin).lower()}", "loader.batch_size=256",
            ])))
            m = measure_job(cfg)
            print(f"   {workers:>7} {str(pin).lower():>5} {m.metrics['throughput_samples_per_s']:>10,.0f} "
                  f"{m.metrics.get('h2d_gbps', float('nan')):>9.2f} {m.metrics.get('h2d_ms_per_batch', float('nan')):>12.3f} "
                  f"{m.metrics['pinned_fraction']:>6.2f} {100 * m.metrics['stall_fraction']:>6.1f}  {m.info['bound']}")


def main() -> int:
    if not torch.cuda.is_available():
        print("CUDA not available on this machine: nothing measured (run this on a machine with a GPU).")
        return 0
    os.environ.setdefault("LOADEREXP_DATA_ROOT", str(REPO / "data"))
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, CUDA {torch.version.cuda}")
    print("\n1. host-to-device bandwidth, GB/s (median of 20 copies, CUDA events on a copy stream)")
    print(f"   {'batch':>6} {'sample':>12} {'MB':>8} {'pageable':>9} {'pinned':>8} {'ratio':>6}")
    for shape in ((3, 32, 32), (3, 224, 224)):
        for batch in (32, 128, 512):
            pageable = copy_bandwidth(batch, shape, pinned=False)
            pinned = copy_bandwidth(batch, shape, pinned=True)
            mb = batch * torch.Size(shape).numel() * 4 / 1e6
            print(f"   {batch:>6} {'x'.join(map(str, shape)):>12} {mb:>8.1f} {pageable:>9.1f} {pinned:>8.1f} "
                  f"{pinned / pageable:>6.2f}")
    serial, overlapped, copy = overlap(256, (3, 224, 224))
    print(f"\n2. non_blocking overlap (pinned 256x3x224x224 batch, 4096^2 matmul): copy alone {1000 * copy:.2f} ms, "
          f"copy then matmul {1000 * serial:.2f} ms, concurrent {1000 * overlapped:.2f} ms "
          f"({100 * (1 - overlapped / serial):.0f}% saved)")
    small_sweep()
    return 0


if __name__ == "__main__":
    sys.exit(main())
