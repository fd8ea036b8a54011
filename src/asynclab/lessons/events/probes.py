"""Lesson 04's probes: measurements behind figures the lesson states, each recorded on its own into the lesson's
reference (``scripts/record_extras.py``), with the card it ran on."""
from __future__ import annotations

import time
from typing import Any

import torch

from asynclab.gpu.timing import spin_cycles, wall_ms
from asynclab.course.experiments import gpu_or_note

__all__ = ["empty_cache_wait", "blocking_sync_cpu"]


def empty_cache_wait(device: Any = None, spin_ms: float = 50.0, cached_mib: int = 1024) -> dict[str, Any]:
    """How long ``torch.cuda.empty_cache()`` holds the host while a spin of ``spin_ms`` runs: with ``cached_mib``
    of freed blocks in the cache (it must wait for the GPU before it releases them), and with nothing cached.

    Example:
        >>> empty_cache_wait("cpu")["cached_ms"] is None
        True
    """
    dev, note = gpu_or_note(device, "no CUDA GPU: the caching allocator is the GPU's", cached_ms=None, empty_ms=None)
    if note:
        return note
    out: dict[str, Any] = {"device": str(dev), "spin_ms": spin_ms, "cached_mib": cached_mib}
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        for label, cache in (("cached", True), ("empty", False)):
            torch.cuda.synchronize(dev)
            torch.cuda.empty_cache()
            if cache:
                block = torch.empty(cached_mib << 20, dtype=torch.uint8, device=dev)
                del block  # back to the cache, not to the driver
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            torch.cuda.empty_cache()
            out[f"{label}_ms"] = wall_ms(t0)
            torch.cuda.synchronize(dev)
    return out


def blocking_sync_cpu(device: Any = None, spin_ms: float = 50.0) -> dict[str, Any]:
    """The host's CPU time spent in ``Event.synchronize()`` while a spin of ``spin_ms`` runs: a default event
    (the driver's default schedule, ``cudaDeviceScheduleAuto``) and one made with ``blocking=True``
    (``cudaEventBlockingSync``: the thread sleeps until the event completes).

    Example:
        >>> blocking_sync_cpu("cpu")["default_cpu_ms"] is None
        True
    """
    dev, note = gpu_or_note(device, "no CUDA GPU: CUDA events need one", default_cpu_ms=None, blocking_cpu_ms=None)
    if note:
        return note
    out: dict[str, Any] = {"device": str(dev), "spin_ms": spin_ms}
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        for label, blocking in (("default", False), ("blocking", True)):
            torch.cuda.synchronize(dev)
            done = torch.cuda.Event(blocking=blocking)
            torch.cuda._sleep(cycles)
            done.record()
            t0, c0 = time.perf_counter(), time.thread_time()
            done.synchronize()
            out[f"{label}_cpu_ms"] = (time.thread_time() - c0) * 1e3
            out[f"{label}_wall_ms"] = wall_ms(t0)
    return out
