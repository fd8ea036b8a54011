"""Lesson 02 experiments: wrong vs right timers, warm-up, spread, per-iteration syncs, synchronize's scope, event pitfalls."""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

from asynclab.course.experiments import Experiment, lesson_run_all
from asynclab.gpu.devices import dtype_name, native_half, on_device, resolve_device, sync
from asynclab.gpu.timing import percentile, spin_cycles, wall_ms
from asynclab.gpu.timing import benchmark_timer, event_timer, naive_timer, sync_timer

LESSON = "02"

#: Sizes that keep every experiment to a few seconds on a 2-core CPU (the notebooks' and tests' CPU runs).
CPU_KWARGS: dict[str, dict[str, Any]] = {
    "warmup_cost": {"n": 256, "dtype": torch.float32, "repeats": 5},
    "timers_side_by_side": {"n": 256, "dtype": torch.float32, "repeats": 5, "min_run_time": 0.05},
    "timers_trace": {"n": 256, "dtype": torch.float32},
    "spread": {"n": 128, "repeats": 50, "dtype": torch.float32},
    "sync_every_iteration": {"ops": 200, "size": 2**12},
    "sync_every_iteration_trace": {"ops": 10, "size": 2**12},
    "synchronize_scope": {},
    "event_pitfalls": {},
}


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def timers_side_by_side(device: Any = None, n: int = 8192, dtype: torch.dtype | None = None, repeats: int = 10,
                        min_run_time: float = 0.2) -> dict[str, Any]:
    """One matmul, four timers: naive (no sync), synchronize, CUDA events and ``torch.utils.benchmark``.

    The workload is ``torch.mm(a, b)`` with ``a``, ``b`` of ``n x n`` ``dtype``. Each timer warms up
    once, then times ``repeats`` calls (``benchmark_timer`` picks its own count within
    ``min_run_time`` seconds). On a GPU the naive timer reports the enqueue, tens of microseconds,
    while the other three agree on the kernel's real time; on the CPU all four agree.

    Returns ``{"naive_ms", "sync_ms", "events_ms", "benchmark_ms", "naive_iqr_ms", "sync_iqr_ms",
    "events_iqr_ms", "benchmark_iqr_ms", "tflops" (from events_ms), "measured" ({timer: what it
    measured, in words}), "n", "dtype", "repeats", "device"}``.

    Example:
        >>> r = timers_side_by_side("cpu", n=64, dtype=torch.float32, repeats=3, min_run_time=0.01)
        >>> r["sync_ms"] > 0 and set(r["measured"]) == {"naive", "sync", "events", "benchmark"}
        True
    """
    dev = resolve_device(device)
    dtype = dtype or native_half(dev)  # bf16 where the GPU computes it natively, fp16 below
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)

    def mm() -> torch.Tensor:
        return torch.mm(a, b)

    out: dict[str, Any] = {}
    measured: dict[str, str] = {}
    with on_device(dev):
        timings = {"naive": naive_timer(mm, repeats=repeats, warmup=1, device=dev)}
        sync(dev)  # the naive timer left its work queued; drain it before the next timer
        timings["sync"] = sync_timer(mm, repeats=repeats, warmup=1, device=dev)
        timings["events"] = event_timer(mm, repeats=repeats, warmup=1, device=dev)
        timings["benchmark"] = benchmark_timer(mm, min_run_time=min_run_time, warmup=1, device=dev)
        sync(dev)
    for name, t in timings.items():
        out[f"{name}_ms"] = t.median_ms
        out[f"{name}_iqr_ms"] = t.spread_ms
        measured[name] = t.measured
    out.update({
        "tflops": 2.0 * n**3 / (out["events_ms"] * 1e-3) / 1e12,
        "measured": measured,
        "n": int(n),
        "dtype": dtype_name(dtype),
        "repeats": int(repeats),
        "device": str(dev),
    })
    return out


def timers_trace(device: Any, path: str | Path, n: int = 8192, dtype: torch.dtype | None = None) -> Any:
    """A profiler trace of what a naive timer and a synchronize timer each have inside their window.

    One ``torch.mm`` under the host annotation ``"naive timer window"`` (t0, launch, t1: the window
    closes while the kernel still runs), a synchronize outside it, then one under ``"sync timer window"``
    (sync, launch, sync: the kernel is inside). Saved at ``path`` (.json.gz) via
    :func:`asynclab.record.record`; returns the Trace.

    Example:
        >>> t = timers_trace("cuda", "timers.json.gz")  # doctest: +SKIP
    """
    from asynclab.gpu.record import record

    dev = resolve_device(device)
    dtype = dtype or native_half(dev)  # bf16 where the GPU computes it natively, fp16 below
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    torch.mm(a, b)
    sync(dev)

    def windows() -> None:
        with torch.profiler.record_function("naive timer window"):
            torch.mm(a, b)
        sync(dev)
        with torch.profiler.record_function("sync timer window"):
            sync(dev)
            torch.mm(a, b)
            sync(dev)

    with on_device(dev):
        return record(windows, path=path, warmup=1, steps=1)


def timer_window(trace: Any, name: str) -> dict[str, float]:
    """What a timer's window in :func:`timers_trace` holds, in µs: the whole host window, the host time before its
    kernel starts (the synchronize before it, the launch), the kernel, and the time from the kernel's end to the
    window's end (the return from the synchronize after it, for the synchronize timer; negative where the window
    closed while the kernel still ran, as the naive timer's does).

    Example:
        >>> from asynclab.course import reference
        >>> w = timer_window(reference.trace(2, "timers"), "sync timer window")
        >>> abs(w["before_us"] + w["kernel_us"] + w["after_us"] - w["window_us"]) < 1e-6
        True
    """
    start, end = trace.annotation_range(name, occurrence=0)
    ev = trace.events
    kernel = ev[(ev["kind"] == "compute") & (ev["start_us"] >= start)].sort_values("start_us").iloc[0]
    k_start, k_end = float(kernel["start_us"]), float(kernel["start_us"] + kernel["dur_us"])
    return {"window_us": end - start, "before_us": k_start - start, "kernel_us": k_end - k_start,
            "after_us": end - k_end}


def warmup_cost(device: Any = None, n: int = 4096, dtype: torch.dtype = torch.float16,
                repeats: int = 20) -> dict[str, Any]:
    """The first call of a workload vs its steady-state median, both with the synchronized wall clock.

    The workload is ``torch.mm(a, b)`` on ``n x n`` ``dtype`` inputs (built and synchronized before
    the clock starts). On a GPU the first call pays one-off costs the later calls do not: creating
    the cuBLAS handle and its workspace (if no matmul ran yet in this process), loading the kernel's
    code onto the GPU (CUDA loads modules lazily, on first use), cuBLAS's choice of a kernel for this
    shape and dtype, and the caching allocator's first ``cudaMalloc`` for the output. Call it before
    any other matmul in the process to see the whole bill; later calls of a different dtype or shape
    still pay the kernel-load and selection part. On the CPU the first call pays thread-pool start-up
    and allocation, usually a smaller ratio.

    Returns ``{"first_ms", "median_ms", "ratio" (first / median), "extra_ms" (first - median),
    "workload", "n", "dtype", "repeats", "device"}``.

    Example:
        >>> r = warmup_cost("cpu", n=64, dtype=torch.float32, repeats=3)
        >>> r["first_ms"] > 0 and r["ratio"] == r["first_ms"] / r["median_ms"]
        True
    """
    dev = resolve_device(device)
    with on_device(dev):
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        sync(dev)
        t0 = time.perf_counter()
        c = torch.mm(a, b)
        sync(dev)
        first_ms = wall_ms(t0)
        del c
        steady = sync_timer(lambda: torch.mm(a, b), repeats=repeats, warmup=1, device=dev)
    return {
        "first_ms": first_ms,
        "median_ms": steady.median_ms,
        "ratio": first_ms / steady.median_ms,
        "extra_ms": first_ms - steady.median_ms,
        "workload": f"torch.mm(a, b), {n}x{n} {dtype_name(dtype)}",
        "n": int(n),
        "dtype": dtype_name(dtype),
        "repeats": int(repeats),
        "device": str(dev),
    }


def spread(device: Any = None, n: int = 2048, repeats: int = 200, dtype: torch.dtype | None = None
           ) -> dict[str, Any]:
    """Many CUDA-event timings of one matmul: the distribution, not one number.

    ``repeats`` event pairs around ``torch.mm(a, b)`` (``n x n`` ``dtype``) after three warm-up calls
    (wall clock on the CPU). ``p05``/``p95`` are the 5th/95th percentiles and ``iqr_ms`` the
    interquartile range, all in ms.

    Returns ``{"times_ms", "median_ms", "mean_ms", "p05", "p95", "iqr_ms", "min_ms", "max_ms",
    "n", "dtype", "repeats", "device", "timer"}``.

    Example:
        >>> r = spread("cpu", n=32, repeats=20, dtype=torch.float32)
        >>> len(r["times_ms"]), r["p05"] <= r["median_ms"] <= r["p95"]
        (20, True)
    """
    dev = resolve_device(device)
    dtype = dtype or native_half(dev)  # bf16 where the GPU computes it natively, fp16 below
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    with on_device(dev):
        t = event_timer(lambda: torch.mm(a, b), repeats=repeats, warmup=3, device=dev)
    xs = [float(v) for v in t.times_ms]
    return {
        "times_ms": xs,
        "median_ms": float(statistics.median(xs)),
        "mean_ms": float(statistics.fmean(xs)),
        "p05": percentile(xs, 5),
        "p95": percentile(xs, 95),
        "iqr_ms": percentile(xs, 75) - percentile(xs, 25),
        "min_ms": min(xs),
        "max_ms": max(xs),
        "n": int(n),
        "dtype": dtype_name(dtype),
        "repeats": int(repeats),
        "device": str(dev),
        "timer": t.measured,
    }


def sync_every_iteration(device: Any = None, ops: int = 1000, size: int = 2**23) -> dict[str, Any]:
    """A short kernel timed with a synchronize around every call vs one event pair around a loop.

    The kernel is ``x.add_(1.0)`` on ``size`` float32 elements: by default 32 MB, tens of microseconds
    on a recent GPU, longer than one launch, so the back-to-back loop keeps the GPU busy and measures
    the kernel (a smaller tensor would measure the host's launch rate instead: lesson 01). (a) :func:`asynclab.gpu.timing.sync_timer`
    with ``repeats=ops``: each call pays launch, kernel, and the round trip of a synchronize; median per
    call. (b) :func:`asynclab.gpu.timing.event_timer` with ``inner=ops``: one event pair around ``ops``
    back-to-back calls, so launches overlap with the GPU's work; median of 5 such loops, per call.
    ``inflation`` is (a) / (b). On the CPU both are the plain wall clock and ``inflation`` is about 1.

    Returns ``{"per_call_synced_us", "per_call_batched_us", "inflation", "ops", "size", "op", "device"}``.

    Example:
        >>> r = sync_every_iteration("cpu", ops=50, size=256)
        >>> r["per_call_synced_us"] > 0 and r["per_call_batched_us"] > 0
        True
    """
    dev = resolve_device(device)
    x = torch.zeros(size, device=dev)

    def op() -> None:
        x.add_(1.0)

    with on_device(dev):
        synced = sync_timer(op, repeats=ops, warmup=3, device=dev)
        batched = event_timer(op, repeats=5, warmup=3, inner=ops, device=dev)
    a_us, b_us = synced.median_ms * 1e3, batched.median_ms * 1e3
    return {
        "per_call_synced_us": a_us,
        "per_call_batched_us": b_us,
        "inflation": a_us / b_us,
        "ops": int(ops),
        "size": int(size),
        "op": "x.add_(1.0)",
        "device": str(dev),
    }


def sync_every_iteration_trace(device: Any, path: str | Path, ops: int = 30, size: int = 2**23) -> Any:
    """A profiler trace of ``ops`` calls of ``x.add_(1.0)`` synchronized one by one, then ``ops`` calls with one sync.

    Annotated ``"sync every call"`` and ``"one sync at the end"``: on the timeline the first part's
    kernels sit apart, separated by synchronize round trips; the second's follow one another. Saved at
    ``path`` (.json.gz) via :func:`asynclab.record.record`; returns the Trace.

    Example:
        >>> t = sync_every_iteration_trace("cuda", "sync.json.gz")  # doctest: +SKIP
    """
    from asynclab.gpu.record import record

    dev = resolve_device(device)
    x = torch.zeros(size, device=dev)
    x.add_(1.0)
    sync(dev)

    def both() -> None:
        with torch.profiler.record_function("sync every call"):
            for _ in range(ops):
                x.add_(1.0)
                sync(dev)
        with torch.profiler.record_function("one sync at the end"):
            for _ in range(ops):
                x.add_(1.0)
            sync(dev)

    with on_device(dev):
        return record(both, path=path, warmup=1, steps=1)


def synchronize_scope(device: Any = None, spin_ms: float = 50.0) -> dict[str, Any]:
    """What ``synchronize`` waits for: the current stream only, or the whole device.

    A ``torch.cuda._sleep`` spin of about ``spin_ms`` is launched on a *side* stream, then
    ``torch.cuda.current_stream().synchronize()`` is timed (returns at once: the current stream has
    nothing queued, and PyTorch's side streams do not synchronize with it), then
    ``torch.cuda.synchronize()`` (waits for every stream of the device, so for the rest of the spin).
    The spin length is calibrated on the device and measured with CUDA events (``spin_ms``). Whether it
    waits for other devices too is a cell of the notebook, run on two GPUs (``synchronize_scope_2gpu``).

    Returns ``{"parts", "spin_ms", "current_stream_sync_ms", "device_sync_ms", "device", "note"}``;
    the figures are None where nothing ran. On the CPU nothing runs (``parts == []``).

    Example:
        >>> synchronize_scope("cpu")["parts"]
        []
    """
    dev = resolve_device(device)
    out: dict[str, Any] = {
        "parts": [], "spin_ms": None, "current_stream_sync_ms": None, "device_sync_ms": None,
        "device": str(dev), "note": "",
    }
    if dev.type != "cuda":
        out["note"] = "no CUDA device: there are no streams to wait for on the CPU"
        return out
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        side = torch.cuda.Stream()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(side):
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
        t0 = time.perf_counter()
        torch.cuda.current_stream().synchronize()
        out["current_stream_sync_ms"] = wall_ms(t0)
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        out["device_sync_ms"] = wall_ms(t0)
        out["spin_ms"] = start.elapsed_time(end)
        out["parts"].append("one_gpu")
    return out


def event_pitfalls(device: Any = None, spin_ms: float = 100.0) -> dict[str, Any]:
    """Two ways ``Event.elapsed_time`` fails, with the errors torch gives, and the fix.

    (a) Events created without ``enable_timing=True``, recorded around some work and completed:
    ``elapsed_time`` refuses. (b) Events with timing, the end one recorded after a ``torch.cuda._sleep``
    spin of about ``spin_ms``, and ``elapsed_time`` called at once, before the end event completed.
    Then the fix: ``end.synchronize()`` first, and ``elapsed_time`` returns the spin time.

    Returns ``{"no_enable_timing_error", "no_enable_timing_error_type", "not_completed_error",
    "not_completed_error_type", "not_completed_returned_ms", "after_synchronize_ms", "device", "note"}``;
    an ``*_error`` is the exception's first line, or None if torch did not raise (then
    ``not_completed_returned_ms`` holds what it returned). On the CPU all are None, with a note.

    Example:
        >>> event_pitfalls("cpu")["no_enable_timing_error"] is None
        True
    """
    dev = resolve_device(device)
    out: dict[str, Any] = {
        "no_enable_timing_error": None, "no_enable_timing_error_type": None,
        "not_completed_error": None, "not_completed_error_type": None,
        "not_completed_returned_ms": None, "after_synchronize_ms": None, "device": str(dev), "note": "",
    }
    if dev.type != "cuda":
        out["note"] = "no CUDA device: CUDA events need a GPU"
        return out
    with torch.cuda.device(dev):
        x = torch.randn(1 << 16, device=dev)
        start, end = torch.cuda.Event(), torch.cuda.Event()  # no enable_timing
        start.record()
        x.mul_(1.0001)
        end.record()
        end.synchronize()
        try:
            start.elapsed_time(end)
        except Exception as err:  # noqa: BLE001 - the message is the lesson
            out["no_enable_timing_error"] = _first_line(err)
            out["no_enable_timing_error_type"] = type(err).__name__

        cycles = spin_cycles(dev, spin_ms)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        try:
            out["not_completed_returned_ms"] = start.elapsed_time(end)
        except Exception as err:  # noqa: BLE001
            out["not_completed_error"] = _first_line(err)
            out["not_completed_error_type"] = type(err).__name__
        end.synchronize()
        out["after_synchronize_ms"] = start.elapsed_time(end)
        torch.cuda.synchronize(dev)
    if out["not_completed_error"] is None:
        out["note"] = "elapsed_time returned before the end event completed: this torch does not check"
    return out


#: Every lesson 02 experiment, in the order ``run_all`` runs them: its key in the results, its function, the trace
#: it writes (<trace_dir>/<name>.json.gz) and how many GPUs that trace needs (0: the CPU records it too).
#: ``warmup_cost`` runs first, so that in a fresh process it sees the whole first-call bill.
EXPERIMENTS: list[Experiment] = [
    Experiment("warmup_cost", warmup_cost),
    Experiment("timers_side_by_side", timers_side_by_side, "timers", gpus=0, trace_fn=timers_trace),
    Experiment("spread", spread),
    Experiment("sync_every_iteration", sync_every_iteration, "sync_every_iteration", gpus=0,
               trace_fn=sync_every_iteration_trace),
    Experiment("synchronize_scope", synchronize_scope),
    Experiment("event_pitfalls", event_pitfalls),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS)


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
