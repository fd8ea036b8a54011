"""Lesson 03's probes: measurements behind figures the lesson states, each recorded on its own into the lesson's
reference (``scripts/record_extras.py``), with the card it ran on."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch

from asynclab.gpu.devices import dtype_name, native_half, sync
from asynclab.course.experiments import gpu_or_note
from asynclab.lessons.streams.experiments import NO_GPU

__all__ = ["gemm_grid", "priority_beside"]


def gemm_grid(device: Any = None, sides: tuple[int, ...] = (8192, 16384)) -> dict[str, Any]:
    """The kernel a big half-precision product runs, and its launch grid, read from a profiler trace.

    On Hopper, cuBLAS picks persistent kernels for big products: about one block per SM, each looping over tiles,
    instead of one block per tile in waves. Returns, for each side, the kernel's name, its grid and block shape
    and the number of blocks, beside the GPU's SM count.

    Example:
        >>> gemm_grid("cpu")["kernels"] is None
        True
    """
    import json
    import tempfile

    dev, note = gpu_or_note(device, "no CUDA GPU: the kernels are cuBLAS's", kernels=None)
    if note:
        return note
    kernels = {}
    with torch.cuda.device(dev), tempfile.TemporaryDirectory() as tmp:
        for side in sides:
            a = torch.randn(side, side, device=dev, dtype=native_half(dev))
            torch.mm(a, a)
            sync(dev)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                torch.mm(a, a)
                sync(dev)
            path = Path(tmp) / f"mm{side}.json"
            prof.export_chrome_trace(str(path))
            events = json.loads(path.read_text())["traceEvents"]
            mm = max((e for e in events if e.get("cat") == "kernel"), key=lambda e: e.get("dur", 0))
            grid, block = mm["args"].get("grid"), mm["args"].get("block")
            kernels[str(side)] = {"name": mm["name"], "grid": grid, "block": block,
                                  "blocks": None if grid is None else grid[0] * grid[1] * grid[2],
                                  "us": mm.get("dur")}
            del a
    return {"device": str(dev), "sms": torch.cuda.get_device_properties(dev).multi_processor_count,
            "dtype": dtype_name(native_half(dev)), "kernels": kernels}


def priority_beside(device: Any = None, side: int = 16384, elements: int = 1 << 30, repeats: int = 10
                    ) -> dict[str, Any]:
    """How long a one-element kernel on a second stream takes from its launch to its end (median µs), launched
    while a big kernel runs: a persistent ``side x side`` half-precision product, or an elementwise multiply of
    ``elements`` floats (many waves of blocks). Each at normal and at high priority.

    A persistent product holds one block per SM for its whole run; a many-wave kernel frees SMs as its blocks end,
    and a high-priority block is scheduled ahead of the waves still waiting.

    Example:
        >>> priority_beside("cpu")["beside"] is None
        True
    """
    import time

    dev, note = gpu_or_note(device, NO_GPU, beside=None)
    if note:
        return note
    low, high = torch.cuda.Stream.priority_range()
    beside: dict[str, dict[str, float]] = {}
    with torch.cuda.device(dev):
        a = torch.randn(side, side, device=dev, dtype=native_half(dev))
        x = torch.ones(elements, device=dev)
        tiny = torch.zeros(1, device=dev)
        big = {"product": lambda: torch.mm(a, a), "elementwise": lambda: x.mul_(1.0)}
        for name, fn in big.items():
            fn()
            beside[name] = {}
            for label, priority in (("normal", low), ("high", high)):
                stream = torch.cuda.Stream(priority=priority)
                reads = []
                for _ in range(repeats):
                    sync(dev)
                    fn()
                    time.sleep(0.0005)  # the big kernel is running before the tiny one is launched
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    with torch.cuda.stream(stream):
                        start.record()
                        tiny.add_(1)
                        end.record()
                    sync(dev)
                    reads.append(start.elapsed_time(end) * 1e3)
                beside[name][label] = statistics.median(reads)
    return {"device": str(dev), "side": side, "elements": elements, "beside": beside,
            "priority_range": [low, high]}
