"""Lesson 02's probes: measurements behind figures the lesson states, each recorded on its own into the lesson's
reference (``scripts/record_extras.py``), with the card it ran on."""
from __future__ import annotations

import statistics
from typing import Any

import torch

from asynclab.course.experiments import gpu_or_note
from asynclab.gpu.devices import dtype_name, native_half, sync
from asynclab.gpu.timing import spin_cycles

__all__ = ["event_pair_gaps"]


def event_pair_gaps(device: Any = None, n: int = 8192, elements: int = 1 << 20, repeats: int = 20,
                    spin_ms: float = 5.0) -> dict[str, Any]:
    """What an event pair around one kernel reads on an idle GPU and queued behind other work (median µs).

    On an idle GPU the first event runs as soon as the host records it; the kernel starts only when its launch
    reaches the GPU, so the pair holds the launch too. Queued behind a spin, the launch is done before the GPU
    gets there, and the pair holds little more than the kernel. Two kernels: an ``n x n`` half-precision product and
    an add of ``elements`` floats.

    Example:
        >>> event_pair_gaps("cpu")["idle_add_us"] is None
        True
    """
    dev, note = gpu_or_note(device, "no CUDA GPU: CUDA events need one", idle_add_us=None)
    if note:
        return note
    out: dict[str, Any] = {"device": str(dev), "n": n, "elements": elements, "repeats": repeats}
    with torch.cuda.device(dev):
        a = torch.randn(n, n, device=dev, dtype=native_half(dev))
        x = torch.randn(elements, device=dev)
        cycles = spin_cycles(dev, spin_ms)
        kernels = {"mm": lambda: torch.mm(a, a), "add": lambda: x.add(1.0)}
        for name, fn in kernels.items():
            fn()
            for where in ("idle", "queued"):
                reads = []
                for _ in range(repeats):
                    sync(dev)
                    if where == "queued":
                        torch.cuda._sleep(cycles)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    end.record()
                    end.synchronize()
                    reads.append(start.elapsed_time(end) * 1e3)
                out[f"{where}_{name}_us"] = statistics.median(reads)
    out["dtype"] = dtype_name(native_half(dev))
    return out
