"""Lesson 06's probes: measurements behind figures the lesson states, each recorded on its own into the lesson's
reference (``scripts/record_extras.py``), with the card it ran on."""
from __future__ import annotations

from typing import Any, Callable

import torch

from asynclab.gpu.devices import sync_all
from asynclab.gpu.timing import spin_cycles
from asynclab.course.experiments import gpu_or_note
from asynclab.gpu.timing import median_wall_ms

__all__ = ["cpu_route_parts", "producer_race"]


def cpu_route_parts(device: Any = None, mib: int = 1024, reps: int = 3) -> dict[str, Any]:
    """Where the time of ``dst1.copy_(src0.cpu())`` goes, for ``mib`` MiB (median ms of ``reps``): the whole line;
    ``src0.cpu()`` alone (a fresh pageable buffer each time, its pages touched for the first time by the copy);
    the same GPU-to-host copy into a pageable buffer made and touched beforehand; and the host-to-GPU copy from it.

    Example:
        >>> cpu_route_parts("cpu")["whole_ms"] is None
        True
    """
    dev, note = gpu_or_note(device, "needs two CUDA GPUs", min_gpus=2, whole_ms=None)
    if note:
        return note
    n = mib * (1 << 20) // 4
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    src, dst = torch.ones(n, device=d0), torch.empty(n, device=d1)
    reused = torch.empty(n)
    reused.fill_(0.0)  # its pages exist

    def timed(fn: Callable[[], Any]) -> float:
        return median_wall_ms(fn, reps, warm=1)

    return {"device": "cuda:0,cuda:1", "mib": mib,
            "whole_ms": timed(lambda: dst.copy_(src.cpu())),
            "cpu_fresh_ms": timed(lambda: src.cpu()),
            "d2h_reused_pageable_ms": timed(lambda: reused.copy_(src)),
            "h2d_pageable_ms": timed(lambda: dst.copy_(reused)),
            "alloc_touch_ms": timed(lambda: torch.empty(n).fill_(0.0))}


def producer_race(device: Any = None, elements: int = 1 << 24, spin_ms: float = 20.0) -> dict[str, Any]:
    """Section 5's race, made certain: GPU 0's default stream writes ``x0`` behind a spin of ``spin_ms`` while a
    copy to GPU 1 is issued on side streams of both GPUs, without and with ``s0.wait_stream`` for the producer.
    Returns how many of the ``elements`` arrived wrong each way.

    Example:
        >>> producer_race("cpu")["wrong_without_wait"] is None
        True
    """
    dev, note = gpu_or_note(device, "needs two CUDA GPUs", min_gpus=2, wrong_without_wait=None, wrong_with_wait=None)
    if note:
        return note
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    x0, y1 = torch.zeros(elements, device=d0), torch.empty(elements, device=d1)
    s0, s1 = torch.cuda.Stream(d0), torch.cuda.Stream(d1)
    cycles = spin_cycles(d0, spin_ms)
    out: dict[str, Any] = {"device": "cuda:0,cuda:1", "elements": elements, "spin_ms": spin_ms}
    for label, wait in (("without", False), ("with", True)):
        x0.zero_(), y1.fill_(-1.0)
        sync_all()
        with torch.cuda.device(d0):
            torch.cuda._sleep(cycles)
            x0.fill_(1.0)  # the producer, still running when the copy is issued
        if wait:
            s0.wait_stream(torch.cuda.current_stream(d0))
        s1.wait_stream(torch.cuda.current_stream(d1))
        with torch.cuda.stream(s0), torch.cuda.stream(s1):
            y1.copy_(x0)
        torch.cuda.current_stream(d1).wait_stream(s1)
        torch.cuda.current_stream(d0).wait_stream(s0)
        with torch.cuda.device(d1):
            out[f"wrong_{label}_wait"] = int((y1 != 1.0).sum())
        sync_all()
    return out
