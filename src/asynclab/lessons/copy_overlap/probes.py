"""Lesson 05's probes: measurements behind figures the lesson states, each recorded on its own into the lesson's
reference (``scripts/record_extras.py``), with the card it ran on."""
from __future__ import annotations

import time
from typing import Any

import torch

from asynclab.gpu.timing import spin_cycles, wall_ms
from asynclab.course.experiments import gpu_or_note

__all__ = ["pageable_async_return"]


def pageable_async_return(device: Any = None, spin_ms: float = 20.0,
                          sizes_mib: tuple[float, ...] = (0.0625, 0.25, 1, 2, 4, 8, 64)) -> dict[str, Any]:
    """When ``x.to(device, non_blocking=True)`` from pageable memory returns to the host: behind a spin of
    ``spin_ms`` (the copy cannot start before it ends), the call's host time for each size. A call that returns in
    far less than the spin did not wait for the copy; one that takes the spin waited for it.

    Example:
        >>> pageable_async_return("cpu")["returned_ms"] is None
        True
    """
    dev, note = gpu_or_note(device, "no CUDA GPU: host-to-GPU copies need one", returned_ms=None)
    if note:
        return note
    returned = []
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        for mib in sizes_mib:
            host = torch.ones(int(mib * (1 << 20)) // 4)  # pageable
            host.to(dev, non_blocking=True)  # warm-up: the staging buffers exist
            torch.cuda.synchronize(dev)
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            host.to(dev, non_blocking=True)
            returned.append(wall_ms(t0))
            torch.cuda.synchronize(dev)
    return {"device": str(dev), "spin_ms": spin_ms, "sizes_mib": list(sizes_mib), "returned_ms": returned}
