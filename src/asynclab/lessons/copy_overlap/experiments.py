"""Lesson 05 experiments: copy bandwidth, what non_blocking does, the cost of pinning, a copy/compute pipeline, two wrong-number bugs, a DataLoader."""
from __future__ import annotations

import itertools
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

from asynclab.course.experiments import annotate as _annotate
from asynclab.course.experiments import Experiment, ExperimentRun, lesson_run_all
from asynclab.course.experiments import dig
from asynclab.gpu.devices import resolve_device
from asynclab.gpu.timing import gbps, spin_cycles, wall_ms
from asynclab.course.experiments import record_gpu_trace as _record_trace
from asynclab.course.experiments import gpu_or_note, no_gpu, whole_number
from asynclab.lessons.copy_overlap import NO_GPU, MiB
from asynclab.lessons.copy_overlap.loader import dataloader

LESSON = "05"

#: Every experiment of this lesson needs a GPU (on the CPU each returns a note saying so): nothing to size down.
CPU_KWARGS: dict[str, dict[str, Any]] = {name: {} for name in (
    "bandwidth", "bidirectional", "non_blocking", "pageable_sizes", "pin_cost", "pipeline", "copy_streams", "early_read",
    "source_mutation", "dataloader")}


#: The copy sizes of the bandwidth sweep: 64 KiB to 1 GiB, in steps of 4x.
SIZES = tuple(64 * 1024 * 4 ** k for k in range(8))

#: The two kinds of host memory a copy can start from or land in.
MEMORY = ("pageable", "pinned")


def _host(nbytes: int, memory: str, fill: float = 1.0) -> torch.Tensor:
    """A float32 host tensor of ``nbytes``, pageable or pinned, written once (so its pages exist before any copy)."""
    if memory not in MEMORY:
        raise ValueError(f"host memory is 'pageable' or 'pinned', not {memory!r}")
    t = torch.empty(nbytes // 4, dtype=torch.float32, pin_memory=(memory == "pinned"))
    return t.fill_(fill)


def _event_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median GPU time (CUDA events around ``fn`` on the current stream) over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _repeats(nbytes: int) -> int:
    return 20 if nbytes <= 16 * MiB else 5 if nbytes <= 256 * MiB else 3


# -- 1: bandwidth -------------------------------------------------------------------------------------------
def pcie_ceiling(dev: torch.device) -> dict[str, Any]:
    """The PCIe link of ``dev`` (generation, lanes) and its raw peak per direction, from the driver.

    Example:
        >>> pcie_ceiling(torch.device("cpu"))["peak_gbps"] is None
        True
    """
    from asynclab.gpu.hardware import pcie_link, pcie_peak_gbps

    link = pcie_link(dev.index or 0) if dev.type == "cuda" else None
    if link is None:
        return {"gen": None, "lanes": None, "peak_gbps": None}
    return {"gen": link[0], "lanes": link[1], "peak_gbps": pcie_peak_gbps(*link)}


def bandwidth(device: Any = None, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    """Copy bandwidth host->GPU (H2D) and GPU->host (D2H), from pageable and from pinned host memory, per size.

    Each copy is timed with CUDA events on the stream that runs it (median of several runs). A pageable
    copy goes through a staging buffer the driver fills on the host, so its events also span that work.

    Returns ``{"sizes": [...bytes], "gbps": {"h2d pageable": [...], "h2d pinned": [...], "d2h pageable": [...],
    "d2h pinned": [...]}, "ms": {same keys}, "pcie": {gen, lanes, peak_gbps}, "device"}``.

    Example:
        >>> bandwidth("cpu")["gbps"] is None
        True
    """
    dev = resolve_device(device)
    if dev.type != "cuda":
        return no_gpu(dev, NO_GPU, sizes=list(sizes), gbps=None, ms=None, pcie=pcie_ceiling(dev))
    ms: dict[str, list[float]] = {f"{d} {m}": [] for d in ("h2d", "d2h") for m in MEMORY}
    with torch.cuda.device(dev):
        for nbytes in sizes:
            gpu = torch.empty(nbytes // 4, device=dev)
            for memory in MEMORY:
                host = _host(nbytes, memory)
                gpu.copy_(host), host.copy_(gpu)  # first copies set up the driver's staging and mappings
                ms[f"h2d {memory}"].append(_event_ms(lambda: gpu.copy_(host, non_blocking=True), _repeats(nbytes)))
                ms[f"d2h {memory}"].append(_event_ms(lambda: host.copy_(gpu, non_blocking=True), _repeats(nbytes)))
                del host
            del gpu
        torch.cuda.synchronize()
    rates = {k: [gbps(n, t) for n, t in zip(sizes, v)] for k, v in ms.items()}
    return {"sizes": list(sizes), "gbps": rates, "ms": ms, "pcie": pcie_ceiling(dev), "device": str(dev)}


def bidirectional(device: Any = None, nbytes: int = 256 * MiB, repeats: int = 5,
                  path: str | Path | None = None) -> dict[str, Any]:
    """A pinned H2D and a pinned D2H copy of ``nbytes`` each, alone and at once on two streams.

    The GPU has separate copy engines for each direction, so the two can run together. Times are host
    wall-clock from launch to ``synchronize`` (median of ``repeats``).

    Returns ``{"h2d_ms", "d2h_ms", "both_ms", "h2d_gbps", "d2h_gbps", "both_gbps" (bytes of both copies /
    both_ms), "copies_overlapped_ms" (from the trace, when ``path``), "nbytes", "device"}``.

    Example:
        >>> bidirectional("cpu")["both_gbps"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, h2d_ms=None, d2h_ms=None, both_ms=None, h2d_gbps=None, d2h_gbps=None,
                           both_gbps=None, copies_overlapped_ms=None, nbytes=nbytes)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        up_src, down_dst = _host(nbytes, "pinned"), _host(nbytes, "pinned", 0.0)
        up_dst, down_src = torch.empty(nbytes // 4, device=dev), torch.ones(nbytes // 4, device=dev)
        up, down = torch.cuda.Stream(), torch.cuda.Stream()

        def copies(h2d: bool, d2h: bool) -> float:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if h2d:
                with torch.cuda.stream(up):
                    up_dst.copy_(up_src, non_blocking=True)
            if d2h:
                with torch.cuda.stream(down):
                    down_dst.copy_(down_src, non_blocking=True)
            torch.cuda.synchronize()
            return wall_ms(t0)

        def median(h2d: bool, d2h: bool) -> float:
            copies(h2d, d2h)
            return statistics.median(copies(h2d, d2h) for _ in range(repeats))

        h2d_ms, d2h_ms, both_ms = median(True, False), median(False, True), median(True, True)
        overlapped = None
        if path is not None:
            def both() -> None:
                with _annotate("H2D and D2H at once"):
                    copies(True, True)

            from asynclab.trace.analysis.metrics import overlap

            overlapped = overlap(_record_trace(path, both), "h2d", "d2h") / 1e3
    return {"h2d_ms": h2d_ms, "d2h_ms": d2h_ms, "both_ms": both_ms, "h2d_gbps": gbps(nbytes, h2d_ms),
            "d2h_gbps": gbps(nbytes, d2h_ms), "both_gbps": gbps(2 * nbytes, both_ms),
            "copies_overlapped_ms": overlapped, "nbytes": nbytes, "device": str(dev)}


# -- 2: what non_blocking=True does -----------------------------------------------------------------------------
def non_blocking(device: Any = None, nbytes: int = 256 * MiB, spin_ms: float = 10.0,
                 path: str | Path | None = None) -> dict[str, Any]:
    """How long the host spends in ``gpu.copy_(host, non_blocking=...)``, for pinned and pageable memory.

    A spin kernel of ``spin_ms`` is queued first, so the copy cannot start at once: a call that waits
    for the copy waits for the spin too. For each of the four set-ups: the host's time in the call, the
    time until the copy had finished (host wall-clock, from the spin's launch to synchronize), and the
    spin measured with events. On the timeline, each set-up is a bracket of its name, the call one of its own.

    Returns ``{"setups": {"pinned, non_blocking=True": {"call_ms", "done_ms"}, ...} (call_ms from the spin's
    launch to the call's return), "spin_ms" (measured),
    "nbytes", "device"}``.

    Example:
        >>> non_blocking("cpu")["setups"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, setups=None, spin_ms=None, nbytes=nbytes)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        gpu = torch.empty(nbytes // 4, device=dev)
        hosts = {m: _host(nbytes, m) for m in MEMORY}

        def once(memory: str, flag: bool) -> dict[str, float]:
            torch.cuda.synchronize()
            with _annotate(f"{memory}, non_blocking={flag}"):
                t0 = time.perf_counter()
                torch.cuda._sleep(cycles)
                with _annotate("the copy_ call"):
                    gpu.copy_(hosts[memory], non_blocking=flag)
                call = wall_ms(t0)
                torch.cuda.synchronize()
                done = wall_ms(t0)
            return {"call_ms": call, "done_ms": done}

        setups = [(m, f) for m in ("pinned", "pageable") for f in (True, False)]
        for m, f in setups:
            once(m, f)  # warm: first copies set up staging buffers and mappings
        out = {f"{m}, non_blocking={f}": once(m, f) for m, f in setups}
        spin = _event_ms(lambda: torch.cuda._sleep(cycles), 3)
        if path is not None:
            _record_trace(path, lambda: [once(m, f) for m, f in setups])
    return {"setups": out, "spin_ms": spin, "nbytes": nbytes, "device": str(dev)}


#: Sizes of pageable host->GPU copies whose non_blocking behaviour lesson 05 measures: 4 KiB to 64 MiB.
PAGEABLE_SIZES = (4 * 1024, 256 * 1024, 4 * MiB, 64 * MiB)


def pageable_sizes(device: Any = None, sizes: tuple[int, ...] = PAGEABLE_SIZES, spin_ms: float = 10.0,
                   repeats: int = 3) -> dict[str, Any]:
    """The host's time in ``gpu.copy_(pageable, non_blocking=flag)`` behind a spin kernel, for each size and flag.

    A pageable copy is staged by the driver through pinned buffers of its own; a small one fits, and the call
    can return once the data is staged, before the copy has run. The blocking path adds a stream synchronize
    after the copy. Each figure is the median of ``repeats`` calls, from the call's start to its return, while
    a spin of ``spin_ms`` holds the stream.

    Returns ``{"sizes": [...], "non_blocking": [ms per size], "blocking": [ms per size], "spin_ms", "device"}``.

    Example:
        >>> pageable_sizes("cpu")["non_blocking"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, sizes=list(sizes), non_blocking=None, blocking=None, spin_ms=spin_ms)
    if cpu is not None:
        return cpu
    out: dict[str, Any] = {"sizes": list(sizes), "non_blocking": [], "blocking": []}
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        for nbytes in sizes:
            gpu, host = torch.empty(nbytes // 4, device=dev), _host(nbytes, "pageable")
            for key, flag in (("non_blocking", True), ("blocking", False)):
                times = []
                for _ in range(repeats + 1):  # the first call sets up the staging buffers
                    torch.cuda.synchronize()
                    torch.cuda._sleep(cycles)
                    t0 = time.perf_counter()
                    gpu.copy_(host, non_blocking=flag)
                    times.append(wall_ms(t0))
                    torch.cuda.synchronize()
                out[key].append(statistics.median(times[1:]))
        out["spin_ms"] = _event_ms(lambda: torch.cuda._sleep(cycles), 3)
    out["device"] = str(dev)
    return out


# -- 3: the cost of pinning ---------------------------------------------------------------------------------------
def _empty_host_cache() -> None:
    """Give the caching host allocator's free pinned blocks back to the driver, so the next pin is a fresh one."""
    empty = getattr(torch._C, "_host_emptyCache", None)
    if empty is not None:
        empty()


def pin_cost(device: Any = None, nbytes: int = 256 * MiB, repeats: int = 3) -> dict[str, Any]:
    """What ``pageable.pin_memory()`` costs against the copy time it saves, for one copy of ``nbytes``.

    Times are host wall-clock, medians of ``repeats``: a pageable copy to the GPU (to synchronize); a pin
    into a fresh pinned block (the driver pins new pages); a pin into a block the caching host allocator
    kept from before; a pinned copy.

    Returns ``{"pageable_copy_ms", "pin_fresh_ms", "pin_cached_ms", "pinned_copy_ms", "saved_ms" (pageable -
    pinned copy), "copies_to_repay_fresh" (pin_fresh / saved), "nbytes", "device"}``.

    Example:
        >>> pin_cost("cpu")["saved_ms"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, pageable_copy_ms=None, pin_fresh_ms=None, pin_cached_ms=None,
                           pinned_copy_ms=None, saved_ms=None, copies_to_repay_fresh=None, nbytes=nbytes)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        pageable = _host(nbytes, "pageable")
        gpu = torch.empty(nbytes // 4, device=dev)

        def timed(fn: Callable[[], Any]) -> float:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            return wall_ms(t0)

        def pin_fresh() -> float:
            _empty_host_cache()
            return timed(pageable.pin_memory)

        def pin_cached() -> float:
            pinned = pageable.pin_memory()
            del pinned  # its block goes back to the cache, and the next pin of this size reuses it
            return timed(pageable.pin_memory)

        pinned = pageable.pin_memory()
        timed(lambda: gpu.copy_(pageable)), timed(lambda: gpu.copy_(pinned))  # warm both copy paths
        out = {
            "pageable_copy_ms": statistics.median(timed(lambda: gpu.copy_(pageable)) for _ in range(repeats)),
            "pinned_copy_ms": statistics.median(timed(lambda: gpu.copy_(pinned)) for _ in range(repeats)),
        }
        del pinned
        out["pin_fresh_ms"] = statistics.median(pin_fresh() for _ in range(repeats))
        out["pin_cached_ms"] = statistics.median(pin_cached() for _ in range(repeats))
    saved = out["pageable_copy_ms"] - out["pinned_copy_ms"]
    return {**out, "saved_ms": saved, "copies_to_repay_fresh": out["pin_fresh_ms"] / saved if saved > 0 else None,
            "nbytes": nbytes, "device": str(dev)}


# -- 4: a copy/compute pipeline ------------------------------------------------------------------------------------
#: Columns of each chunk (float32): a chunk is ``rows x COLS``, multiplied by a ``COLS x COLS`` identity.
COLS = 1024


class Pipeline:
    """Copy ``chunks`` host chunks to the GPU and compute on each: serially on one stream, or overlapped.

    ``run("overlapped")`` copies chunk i+1 on a copy stream while chunk i computes on the compute
    stream, through two GPU buffers (double buffering): an event says "chunk i has arrived" (the compute
    stream waits for it) and another "buffer b is free again" (the copy stream waits for it before
    overwriting). ``run("serial")`` does copy, compute, copy, compute... on one stream. Compute is ``reps``
    multiplications by an identity matrix, so each result must equal its chunk: ``run`` returns how many
    chunks came out wrong. A chunk has ``cols`` columns (:data:`COLS` on a GPU; a checker's scaled scenario has fewer).
    """

    def __init__(self, dev: torch.device, memory: str = "pinned", chunks: int = 16, chunk_bytes: int = 32 * MiB,
                 reps: int | None = None, compute_over_copy: float = 1.2, cols: int = COLS):
        self.dev, self.memory, self.chunks = dev, memory, int(chunks)
        rows = chunk_bytes // (4 * cols)
        self.host = [_host(rows * cols * 4, memory, fill=float(i)).view(rows, cols) for i in range(self.chunks)]
        self.buffers = [torch.empty(rows, cols, device=dev) for _ in range(2)]
        self.out = torch.empty(self.chunks, device=dev)
        self.eye = torch.eye(cols, device=dev)
        self.copy_stream, self.compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
        self.arrived = [torch.cuda.Event() for _ in range(self.chunks)]
        self.freed = [torch.cuda.Event() for _ in range(2)]
        self.reps = reps if reps is not None else self._balance(compute_over_copy)

    def _balance(self, ratio: float) -> int:
        """How many multiplications make one chunk's compute about ``ratio`` x its copy (both measured here)."""
        buf = self.buffers[0]
        copy_ms = _event_ms(lambda: buf.copy_(self.host[0], non_blocking=True), 5)
        mm_ms = _event_ms(lambda: torch.mm(buf, self.eye), 5)
        self.copy_ms, self.mm_ms = copy_ms, mm_ms
        return max(1, math.ceil(ratio * copy_ms / mm_ms))

    def compute(self, i: int, x: torch.Tensor) -> None:
        y = x
        for _ in range(self.reps):
            y = torch.mm(y, self.eye)
        # chunk i holds the value i everywhere, and so must its product with the identity
        self.out[i] = (y[:, 0] != float(i)).sum()

    def run(self, how: str) -> None:
        if how == "serial":
            with torch.cuda.stream(self.compute_stream):
                for i, chunk in enumerate(self.host):
                    self.buffers[0].copy_(chunk, non_blocking=True)
                    self.compute(i, self.buffers[0])
            return
        if how != "overlapped":
            raise ValueError(f"a pipeline runs 'serial' or 'overlapped', not {how!r}")
        for i, chunk in enumerate(self.host):
            b = i % 2
            with torch.cuda.stream(self.copy_stream):
                self.copy_stream.wait_event(self.freed[b])  # compute is done with what this buffer held
                self.buffers[b].copy_(chunk, non_blocking=True)
                self.arrived[i].record()
            with torch.cuda.stream(self.compute_stream):
                self.compute_stream.wait_event(self.arrived[i])  # chunk i is on the GPU
                self.compute(i, self.buffers[b])
                self.freed[b].record()

    def step(self, how: str) -> tuple[float, int]:
        """One run, timed on the host from launch to synchronize; returns ``(ms, wrong chunks)``."""
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with _annotate(f"{self.memory}, {how}"):
            self.run(how)
            torch.cuda.synchronize()
        ms = wall_ms(t0)
        return ms, int((self.out != 0).sum())


def pipeline(device: Any = None, memory: str = "pinned", chunks: int = 16, chunk_bytes: int = 32 * MiB,
             reps: int | None = None, repeats: int = 3, path: str | Path | None = None) -> dict[str, Any]:
    """A chunked copy/compute pipeline (:class:`Pipeline`), serial and overlapped, from ``memory`` host memory.

    The compute per chunk is sized (``reps`` multiplications, measured here unless given) to about 1.2x one
    chunk's copy. With ``path`` the overlapped run is profiled, and the share of copy time hidden behind
    compute is read from that trace with :func:`asynclab.trace.analysis.metrics.hidden_fraction`.

    Returns ``{"serial_ms", "overlapped_ms" (medians), "hidden_fraction" (from the trace, or None),
    "best_hidden_fraction" ((chunks-1)/chunks: the first copy has nothing to hide behind), "wrong_chunks",
    "copy_ms", "mm_ms" (one chunk's copy and one multiplication, events), "reps", "chunks", "chunk_bytes",
    "memory", "device"}``.

    Example:
        >>> pipeline("cpu")["hidden_fraction"] is None
        True
    """
    whole_number("chunks", chunks), whole_number("chunk_bytes", chunk_bytes, 4)
    dev, cpu = gpu_or_note(device, NO_GPU, serial_ms=None, overlapped_ms=None, hidden_fraction=None,
                           best_hidden_fraction=(chunks - 1) / chunks, wrong_chunks=None, copy_ms=None, mm_ms=None,
                           reps=reps, chunks=chunks, chunk_bytes=chunk_bytes, memory=memory)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        pipe = Pipeline(dev, memory, chunks, chunk_bytes, reps)
        pipe.step("serial"), pipe.step("overlapped")  # warm: kernels loaded, streams built
        serial = [pipe.step("serial") for _ in range(repeats)]
        overlapped = [pipe.step("overlapped") for _ in range(repeats)]
        hidden = None
        if path is not None:
            from asynclab.trace.analysis.metrics import hidden_fraction

            hidden = hidden_fraction(_record_trace(path, lambda: pipe.step("overlapped")))
    return {"serial_ms": statistics.median(t for t, _ in serial),
            "overlapped_ms": statistics.median(t for t, _ in overlapped), "hidden_fraction": hidden,
            "best_hidden_fraction": (chunks - 1) / chunks, "wrong_chunks": sum(w for _, w in serial + overlapped),
            "copy_ms": getattr(pipe, "copy_ms", None), "mm_ms": getattr(pipe, "mm_ms", None), "reps": pipe.reps,
            "chunks": chunks, "chunk_bytes": chunk_bytes, "memory": memory, "device": str(dev)}


#: The two set-ups of :func:`copy_streams`: how many copy streams the chunks' copies take turns on.
COPY_STREAMS = {"one copy stream": 1, "two copy streams in turn": 2}


def _chunk_loop(pipe: Pipeline, streams: list[torch.cuda.Stream]) -> list[torch.Tensor]:
    """The exercise's loop: each chunk copied on the next of ``streams`` (new GPU memory, non_blocking), the
    compute stream waiting for an event recorded after its copy, then the chunk's compute."""
    main, results = torch.cuda.current_stream(), []
    for i, chunk in enumerate(pipe.host):
        side = streams[i % len(streams)]
        with torch.cuda.stream(side):
            x = chunk.to(pipe.dev, non_blocking=True)
        main.wait_event(side.record_event())
        x.record_stream(main)
        for _ in range(pipe.reps):
            x = torch.mm(x, pipe.eye)
        results.append(x)
    return results


def copy_order(window: Any) -> list[int]:
    """The chunks' copies in the order the copy engine ran them (chunk numbers, by launch order), from a trace window.

    Example:
        >>> from asynclab.trace import load_trace
        >>> events = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": t,
        ...            "dur": 1, "args": {"correlation": c}} for t, c in ((0, 1), (2, 2))]
        >>> events += [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
        ...             "ts": t, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": c}} for t, c in ((20, 1), (10, 2))]
        >>> copy_order(load_trace({"traceEvents": events}))  # the second copy ran first
        [1, 0]
    """
    ev = window.events
    copies = ev.loc[ev["kind"] == "h2d"].dropna(subset=["launch"])
    issued = {launch: i for i, launch in enumerate(sorted(copies["launch"].astype(int)))}
    return [issued[int(launch)] for launch in copies.sort_values("start_us")["launch"]]


def copy_streams(device: Any = None, chunks: int = 12, chunk_bytes: int = 64 * MiB, compute_over_copy: float = 1.5,
                 path: str | Path | None = None) -> dict[str, Any]:
    """The exercise's loop with the copies on one copy stream, then on two in turn, profiled (one trace, a
    ``record_function`` range per set-up): the share of copy time hidden behind compute, and the order the copy
    engine ran the copies in. Copies on one stream run in the order they were issued; across streams they need not.

    Returns ``{"setups": {name: {"hidden_fraction", "order" (chunk numbers as the copies ran), "in_order"}},
    "best_hidden_fraction", "chunks", "chunk_bytes", "copy_ms", "reps", "device"}``.

    Example:
        >>> copy_streams("cpu")["setups"] is None
        True
    """
    from asynclab.trace.analysis.metrics import hidden_fraction

    dev, cpu = gpu_or_note(device, NO_GPU, setups=None, best_hidden_fraction=(chunks - 1) / chunks, chunks=chunks,
                           chunk_bytes=chunk_bytes, copy_ms=None, reps=None)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        pipe = Pipeline(dev, "pinned", chunks, chunk_bytes, compute_over_copy=compute_over_copy)
        runs = {name: [torch.cuda.Stream() for _ in range(n)] for name, n in COPY_STREAMS.items()}

        def both() -> None:
            for name, streams in runs.items():
                torch.cuda.synchronize()
                with _annotate(name):
                    _chunk_loop(pipe, streams)
                    torch.cuda.synchronize()

        both()  # warm: kernels loaded, the streams' memory pools filled
        trace = _record_trace(path, both) if path is not None else None
    setups = None
    if trace is not None:
        setups = {}
        for name in COPY_STREAMS:
            window = trace.window(annotation=name)
            order = copy_order(window)
            setups[name] = {"hidden_fraction": hidden_fraction(window), "order": order,
                            "in_order": order == sorted(order)}
    return {"setups": setups, "best_hidden_fraction": (chunks - 1) / chunks, "chunks": chunks,
            "chunk_bytes": chunk_bytes, "copy_ms": pipe.copy_ms, "reps": pipe.reps, "device": str(dev)}


# -- 5: two ways to get wrong numbers ------------------------------------------------------------------------------
#: How the host reads the copied result in :func:`early_read`.
READS = ("no sync", "event sync", "to(cpu) no sync")


def early_read(device: Any = None, spin_ms: float = 20.0, n: int = 1 << 20,
               path: str | Path | None = None) -> dict[str, Any]:
    """Read the result of a ``non_blocking`` GPU->host copy before synchronizing, and after.

    Each read is one "step" k of a loop: the GPU writes ``x = k`` (step k's numbers) behind a spin of
    ``spin_ms``, and it is copied to the host with ``non_blocking=True``. "no sync": into a pinned
    buffer that still holds the step before's numbers, read at once. "event sync": the same, read after
    ``done.synchronize()`` on an event recorded after the copy. "to(cpu) no sync": ``x.to("cpu",
    non_blocking=True)``, which returns a new host tensor, read at once: it holds what its memory held.

    Returns ``{"no sync": {"step", "wrong", "sample", "pinned"}, "event sync": {...}, "to(cpu) no sync": {...},
    "n", "device"}``: wrong counts the elements that are not step k's; pinned says whether the tensor
    read is in pinned memory.

    Example:
        >>> early_read("cpu")["no sync"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, **{how: None for how in READS}, n=n)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        x = torch.empty(n, device=dev)
        out = torch.zeros(n, pin_memory=True)
        steps = itertools.count(1)

        def read(how: str, step: int) -> torch.Tensor:
            torch.cuda._sleep(cycles)  # the GPU is busy: the copy is queued behind this
            x.fill_(float(step))  # step k's numbers
            if how == "to(cpu) no sync":
                return x.to("cpu", non_blocking=True)
            out.copy_(x, non_blocking=True)
            if how == "event sync":
                done = torch.cuda.Event()
                done.record()
                done.synchronize()
            return out

        def once() -> dict[str, Any]:
            results = {}
            for how in READS:
                step = next(steps)
                torch.cuda.synchronize()
                with _annotate(how):
                    got = read(how, step)
                    results[how] = {"step": step, "wrong": int((got != step).sum()),  # what the host sees now
                                    "sample": [float(v) for v in got[:4].tolist()], "pinned": got.is_pinned()}
                torch.cuda.synchronize()
            return results

        once()
        results = once()
        if path is not None:
            _record_trace(path, once)
    return {**results, "n": n, "device": str(dev)}


def source_mutation(device: Any = None, spin_ms: float = 20.0, n: int = 1 << 20,
                    path: str | Path | None = None) -> dict[str, Any]:
    """Refill a pinned host tensor right after a ``non_blocking`` host->GPU copy from it, with and without waiting.

    The source holds batch 1 (all 1.0). A spin of ``spin_ms`` is queued, then ``gpu.copy_(src,
    non_blocking=True)``, then the host writes batch 2 (2.0) into ``src`` as a loader reusing its buffer
    would. Unfixed, the copy runs after the refill and the GPU receives batch 2. Fixed, the host waits on
    an event recorded after the copy (``copied.synchronize()``) before refilling.

    Returns ``{"unfixed": {"wrong", "sample"}, "fixed": {...}, "n", "device"}`` (wrong: GPU elements that
    are not batch 1).

    Example:
        >>> source_mutation("cpu")["unfixed"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, unfixed=None, fixed=None, n=n)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        src = torch.empty(n, pin_memory=True)
        gpu = torch.empty(n, device=dev)

        def once() -> dict[str, Any]:
            results = {}
            for how in ("unfixed", "fixed"):
                src.fill_(1.0)  # batch 1
                gpu.zero_()
                torch.cuda.synchronize()
                with _annotate(how):
                    torch.cuda._sleep(cycles)
                    gpu.copy_(src, non_blocking=True)
                    if how == "fixed":
                        copied = torch.cuda.Event()
                        copied.record()
                        copied.synchronize()  # the copy has read src: it may be reused
                    src.fill_(2.0)  # the host loads batch 2 into the same buffer
                    torch.cuda.synchronize()
                results[how] = {"wrong": int((gpu != 1.0).sum()), "sample": [float(v) for v in gpu[:4].tolist()]}
            return results

        once()
        results = once()
        if path is not None:
            _record_trace(path, once)
    return {**results, "n": n, "device": str(dev)}


# -- 6: a training input pipeline ------------------------------------------------------------------------------------
def _at(results: dict[str, Any], key: str, nbytes: int) -> float | None:
    """The bandwidth sweep's ``key`` (``"h2d pinned"``) at ``nbytes``, or None."""
    sizes, rates = dig(results, "bandwidth", "sizes"), dig(results, "bandwidth", "gbps", key)
    if not sizes or not rates or nbytes not in sizes:
        return None
    return rates[sizes.index(nbytes)]


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures lesson 05's claims rest on, under the names its issue gives (None where not measured).

    Bandwidths are at 256 MiB.

    Example:
        >>> headline({"early_read": {"no sync": {"wrong": 5}}})["d2h_early_read_wrong"]
        True
    """
    def get(*keys: str) -> Any:
        return dig(results, *keys)

    early, mutated = get("early_read", "no sync", "wrong"), get("source_mutation", "unfixed", "wrong")
    return {
        "h2d_pageable_gbps": _at(results, "h2d pageable", 256 * MiB),
        "h2d_pinned_gbps": _at(results, "h2d pinned", 256 * MiB),
        "d2h_pageable_gbps": _at(results, "d2h pageable", 256 * MiB),
        "d2h_pinned_gbps": _at(results, "d2h pinned", 256 * MiB),
        "bidirectional_gbps": get("bidirectional", "both_gbps"),
        "pcie_peak_gbps": get("bandwidth", "pcie", "peak_gbps"),
        "hidden_fraction_pinned": get("pipeline", "pinned", "hidden_fraction"),
        "hidden_fraction_pageable": get("pipeline", "pageable", "hidden_fraction"),
        "d2h_early_read_wrong": None if early is None else early > 0,
        "pinned_source_mutation_wrong": None if mutated is None else mutated > 0,
        "dataloader_step_ms_plain": get("dataloader", "plain", "step_ms"),
        "dataloader_step_ms_pinned": get("dataloader", "pinned", "step_ms"),
    }


def _pipeline(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`pipeline` from pinned memory, then the same work from pageable memory: the pinned run's balance
    (``reps``), so that only the memory differs."""
    pinned = pipeline(run.device, "pinned", path=run.traces("pipeline_pinned"), **sizes)
    pageable = pipeline(run.device, "pageable", reps=pinned["reps"], path=run.traces("pipeline_pageable"), **sizes)
    return {"pinned": pinned, "pageable": pageable, **({"note": pinned["note"]} if "note" in pinned else {})}


def _dataloader(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`dataloader`, with a trace of each of its two loaders."""
    return dataloader(run.device, path_plain=run.traces("dataloader_plain"),
                      path_pinned=run.traces("dataloader_pinned"), **sizes)


#: Every lesson 05 experiment, in the order ``run_all`` runs them: its key in the results, its function, the
#: trace(s) it writes (<trace_dir>/<name>.json.gz) and how many GPUs they need.
EXPERIMENTS: list[Experiment] = [
    Experiment("bandwidth", bandwidth),
    Experiment("bidirectional", bidirectional, "bidirectional"),
    Experiment("non_blocking", non_blocking, "non_blocking"),
    Experiment("pageable_sizes", pageable_sizes),
    Experiment("pin_cost", pin_cost),
    Experiment("pipeline", _pipeline, ("pipeline_pinned", "pipeline_pageable"), custom=True),
    Experiment("copy_streams", copy_streams, "copy_streams"),
    Experiment("early_read", early_read, "early_read"),
    Experiment("source_mutation", source_mutation, "source_mutation"),
    Experiment("dataloader", _dataloader, ("dataloader_plain", "dataloader_pinned"), custom=True),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
