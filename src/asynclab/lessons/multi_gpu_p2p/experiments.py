"""Lesson 06 experiments: P2P latency and the bandwidth matrix."""
from __future__ import annotations

import itertools
import statistics
import time
from typing import Any, Callable

import torch

from asynclab.course.experiments import Experiment, lesson_run_all
from asynclab.gpu.devices import sync_all
from asynclab.gpu.timing import gbps, spin_cycles, wall_ms
from asynclab.course.experiments import gpu_or_note

LESSON = "06"

#: Every experiment needs two GPUs (without them each returns a note saying so): nothing to size down.
CPU_KWARGS: dict[str, dict[str, Any]] = {name: {} for name in ("latency", "matrix")}

#: What each experiment returns on a machine with fewer than two GPUs.
NO_GPUS = "needs two CUDA GPUs: a copy from one GPU to another"

MiB = 1 << 20

#: Copy sizes of the latency sweep: 4 B to 64 KiB, in steps of 4x.
LATENCY_SIZES = tuple(4 * 4 ** k for k in range(8))


def _wall_ms(fn: Callable[[], Any]) -> float:
    """Host time from issuing ``fn`` (every GPU idle) until every GPU has finished it."""
    sync_all()
    t0 = time.perf_counter()
    fn()
    sync_all()
    return wall_ms(t0)


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    fn()  # the first run loads kernels and sets up peer access
    return statistics.median(_wall_ms(fn) for _ in range(reps))


def _copy(dst: torch.Tensor, src: torch.Tensor, send: torch.cuda.Stream, recv: torch.cuda.Stream,
          non_blocking: bool = False) -> None:
    """``dst.copy_(src)`` with ``send`` current on the source GPU and ``recv`` current on the destination GPU."""
    with torch.cuda.stream(send), torch.cuda.stream(recv):
        dst.copy_(src, non_blocking=non_blocking)


# -- 1: latency and bandwidth --------------------------------------------------------------------------------
def latency(device: Any = None, sizes: tuple[int, ...] = LATENCY_SIZES, copies: int = 100) -> dict[str, Any]:
    """GPU-side time per small copy, in the manner of NVIDIA's p2pBandwidthLatencyTest: GPU 0 to GPU 1, and
    for comparison within GPU 0 (a copy that crosses no link and needs no barrier).

    A spin kernel holds GPU 0's side stream while the host queues ``copies`` copies of each size behind it,
    so that the events around them time the GPU, not the host's launches: µs per copy = elapsed / copies.
    A copy between GPUs carries PyTorch's barrier (two event waits) with it; the local one does not.

    Returns ``{"sizes", "us_per_copy", "local_us_per_copy" (lists, one per size), "copies", "device"}``.

    Example:
        >>> latency("cpu")["us_per_copy"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, sizes=list(sizes), us_per_copy=None, local_us_per_copy=None,
                           copies=copies)
    if cpu is not None:
        return cpu
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    s0, s1 = torch.cuda.Stream(d0), torch.cuda.Stream(d1)
    cycles = spin_cycles(d0, 20.0)

    def per_copy(copy: Callable[[], None]) -> float:
        copy()  # warm
        runs = []
        for _ in range(3):
            sync_all()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.device(d0), torch.cuda.stream(s0):
                torch.cuda._sleep(cycles)  # hold the stream while the copies queue up
                start.record(s0)
                for _ in range(copies):
                    copy()
                end.record(s0)
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1e3 / copies)
        return statistics.median(runs)

    peer, local = [], []
    for size in sizes:
        src = torch.ones(max(size // 4, 1), device=d0)
        dst1, dst0 = torch.zeros_like(src, device=d1), torch.zeros_like(src)
        peer.append(per_copy(lambda: _copy(dst1, src, s0, s1)))
        local.append(per_copy(lambda: dst0.copy_(src)))
    return {"sizes": list(sizes), "us_per_copy": peer, "local_us_per_copy": local, "copies": copies,
            "device": str(dev)}


def matrix(device: Any = None, nbytes: int = 256 * MiB, reps: int = 3, batch: int = 4) -> dict[str, Any]:
    """The bandwidth between every pair of GPUs, one way (``i`` to ``j``) and both ways at once, in GB/s
    (``batch`` copies back to back, timed by the host, median of ``reps``).

    The diagonal is None (a copy within one GPU does not cross a link). Returns ``{"gpus" (count),
    "one_way_gbps", "both_ways_gbps" (n x n lists), "nbytes", "device"}``.

    Example:
        >>> matrix("cpu")["one_way_gbps"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, gpus=None, one_way_gbps=None, both_ways_gbps=None,
                           nbytes=nbytes)
    if cpu is not None:
        return cpu
    n = torch.cuda.device_count()
    devs = [torch.device("cuda", i) for i in range(n)]
    src = [torch.ones(nbytes // 4, device=d) for d in devs]
    dst = [torch.zeros(nbytes // 4, device=d) for d in devs]
    out_s = [torch.cuda.Stream(d) for d in devs]  # where copies leaving GPU i run
    in_s = [torch.cuda.Stream(d) for d in devs]  # what copies into GPU j are fenced with
    one = [[None] * n for _ in range(n)]
    both = [[None] * n for _ in range(n)]
    for i, j in itertools.permutations(range(n), 2):
        one[i][j] = gbps(batch * nbytes, _median_ms(lambda: [_copy(dst[j], src[i], out_s[i], in_s[j])
                                                             for _ in range(batch)], reps))
        if i < j:
            ms = _median_ms(lambda: [(_copy(dst[j], src[i], out_s[i], in_s[j]), _copy(dst[i], src[j], out_s[j], in_s[i]))
                                     for _ in range(batch)], reps)
            both[i][j] = both[j][i] = gbps(2 * batch * nbytes, ms)
    return {"gpus": n, "one_way_gbps": one, "both_ways_gbps": both, "nbytes": nbytes, "device": str(dev)}


# -- headline and run_all ------------------------------------------------------------------------------------
def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures the lesson's claims rest on, under the names its issue gives.

    Example:
        >>> headline({"latency": {"us_per_copy": [11.3, 11.4]}})
        {'p2p_latency_us_4B': 11.3}
    """
    lat = results.get("latency") or {}
    return {"p2p_latency_us_4B": (lat.get("us_per_copy") or [None])[0]}


#: Every lesson 06 experiment, in the order ``run_all`` runs them: its key in the results, its function, the trace
#: it writes (<trace_dir>/<name>.json.gz) and how many GPUs that trace needs.
EXPERIMENTS: list[Experiment] = [
    Experiment("latency", latency),
    Experiment("matrix", matrix),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
