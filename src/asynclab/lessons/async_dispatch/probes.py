"""Lesson 01's probes: measurements behind figures the lesson states, each recorded on its own into the lesson's
reference (``scripts/record_extras.py``), with the card it ran on."""
from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from asynclab.course.experiments import gpu_or_note
from asynclab.gpu.devices import sync
from asynclab.gpu.timing import spin_cycles

__all__ = ["run_ahead_bound", "queued_memory"]


def run_ahead_bound(device: Any = None, spin_ms: float = 500.0, launches: int = 4000) -> dict[str, Any]:
    """How far the host runs ahead: tiny kernels queued behind a long spin, each launch timed on the host.

    The GPU is held by a spin of ``spin_ms``; the host then launches up to ``launches`` one-element adds. A launch
    returns in microseconds while the launch queue has room; once it is full, a launch waits for a slot.
    ``queued`` counts the launches before the first one that took over 0.5 ms.

    Example:
        >>> run_ahead_bound("cpu")["queued"] is None
        True
    """
    dev, note = gpu_or_note(device, "no CUDA GPU: the launch queue is the GPU's", queued=None)
    if note:
        return note
    with torch.cuda.device(dev):
        x = torch.zeros(1, device=dev)
        x.add_(1)
        sync(dev)
        torch.cuda._sleep(spin_cycles(dev, spin_ms))
        times = []
        for _ in range(launches):
            t0 = time.perf_counter()
            x.add_(1)
            times.append((time.perf_counter() - t0) * 1e3)
        sync(dev)
    slow = next((i for i, ms in enumerate(times) if ms > 0.5), None)
    return {"device": str(dev), "queued": slow, "launches": launches, "spin_ms": spin_ms,
            "median_launch_us": statistics.median(times[: slow or launches]) * 1e3,
            "first_slow_launch_ms": None if slow is None else times[slow]}


def queued_memory(device: Any = None, temporaries: int = 300, mib: int = 4, spin_ms: float = 200.0) -> dict[str, Any]:
    """What queued work costs in memory on one stream: ``temporaries`` tensors of ``mib`` MiB, each made, used and
    dropped while a spin holds the GPU. The caching allocator hands a block freed on a stream to the next request
    on the same stream at once (stream order makes that safe), so the peak grows by about one tensor.

    Example:
        >>> queued_memory("cpu")["peak_growth_mib"] is None
        True
    """
    dev, note = gpu_or_note(device, "no CUDA GPU: the caching allocator is the GPU's", peak_growth_mib=None)
    if note:
        return note
    n = mib * (1 << 20) // 4
    with torch.cuda.device(dev):
        out = torch.zeros(n, device=dev)
        sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        torch.cuda._sleep(spin_cycles(dev, spin_ms))
        t0 = time.perf_counter()
        for _ in range(temporaries):
            t = torch.empty(n, device=dev)
            t.fill_(1.0)
            out.add_(t)
            del t
        queued_ms = (time.perf_counter() - t0) * 1e3
        still_queued = not torch.cuda.current_stream(dev).query()
        sync(dev)
        peak = torch.cuda.max_memory_allocated(dev)
    return {"device": str(dev), "temporaries": temporaries, "mib_each": mib, "spin_ms": spin_ms,
            "peak_growth_mib": (peak - before) / (1 << 20), "host_ms": queued_ms, "queued_behind_spin": still_queued}
