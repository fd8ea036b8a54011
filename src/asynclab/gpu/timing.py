"""Timers that teach: a naive one (wrong on purpose), synchronize-based, CUDA events and torch.utils.benchmark."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from asynclab.gpu.devices import resolve_device, sync, sync_all


@dataclass(frozen=True)
class Timing:
    """Times of repeated calls, in milliseconds per call, and what the timer really measured.

    Example:
        >>> t = Timing("sync", "wall clock", (1.0, 2.0, 3.0), first_call_ms=9.0, warmup=1, inner=1)
        >>> t.median_ms, t.spread_ms
        (2.0, 1.0)
    """

    method: str
    measured: str  # in words: what the number means
    times_ms: tuple[float, ...]
    first_call_ms: float | None
    warmup: int
    inner: int
    timed: tuple | None = field(default=None, repr=False, compare=False)  # what was timed (what_it_calls)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def spread_ms(self) -> float:
        """Interquartile range (robust spread); 0 for fewer than two repeats."""
        if len(self.times_ms) < 2:
            return 0.0
        q = statistics.quantiles(self.times_ms, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        return max(self.times_ms)

    def __str__(self) -> str:
        return (f"{self.method:<10} median {fmt_ms(self.median_ms)} per call "
                f"(IQR {fmt_ms(self.spread_ms)}, n={len(self.times_ms)}) - {self.measured}")


def what_it_calls(fn: Callable[[], object]) -> tuple:
    """What a timed callable runs, so that two timings can say whether they timed the same work: its code and the
    objects it reads (its closure's, its globals', a ``functools.partial``'s), by identity. Two lambdas written
    alike over the same tensor are the same work; over another tensor, or calling another op, they are not.

    Example:
        >>> x, y = torch.ones(2), torch.ones(2)
        >>> what_it_calls(lambda: x.exp()) == what_it_calls(lambda: x.exp())
        True
        >>> what_it_calls(lambda: x.exp()) == what_it_calls(lambda: y.exp())  # another tensor
        False
        >>> what_it_calls(lambda: x.sin()) == what_it_calls(lambda: x.exp())  # another op
        False
    """
    args = ()
    while hasattr(fn, "func") and hasattr(fn, "args"):  # functools.partial
        args += tuple(id(a) for a in fn.args) + tuple((k, id(v)) for k, v in sorted((fn.keywords or {}).items()))
        fn = fn.func
    code = getattr(fn, "__code__", None)
    if code is None:  # a builtin or another callable object: itself
        return ("object", id(getattr(fn, "__self__", fn)), getattr(fn, "__name__", type(fn).__name__), args)
    cells = tuple(id(c.cell_contents) for c in (fn.__closure__ or ()))
    scope = getattr(fn, "__globals__", {})
    reads = tuple((n, id(scope[n])) for n in code.co_names if n in scope)
    consts = tuple(repr(c) for c in code.co_consts)  # as text: a nested function's code does not pickle
    return ("code", code.co_code, consts, code.co_names, cells, reads, id(getattr(fn, "__self__", None)), args)


def paired_ratio(a_ms, b_ms) -> float:
    """The median of ``a / b`` over timings taken in pairs: robust where a ratio of two medians is not.

    When the machine's speed changes part-way through (another program starts), a ratio of medians
    compares one timer's fast regime with the other's slow one; each pair was timed back to back, so
    its ratio compares like with like.

    Example:
        >>> slow_later = [0.1] * 4 + [64.0] * 5
        >>> paired_ratio(slow_later, [0.1] * 5 + [64.0] * 4)  # the medians alone would say 640
        1.0
    """
    if len(a_ms) != len(b_ms) or not a_ms:
        raise ValueError(f"paired_ratio needs two equally long, non-empty lists of timings, got {len(a_ms)} and {len(b_ms)}")
    if any(b <= 0 for b in b_ms):
        raise ValueError("paired_ratio: every timing it divides by must be above 0")
    return statistics.median(a / b for a, b in zip(a_ms, b_ms))


def fmt_ms(ms: float) -> str:
    """Format a duration given in ms with a unit a person reads at a glance.

    Example:
        >>> fmt_ms(0.0068), fmt_ms(1.41), fmt_ms(2500)
        ('6.8 µs', '1.41 ms', '2.50 s')
    """
    if ms < 1:
        return f"{ms * 1000:.3g} µs"
    if ms < 1000:
        return f"{ms:.3g} ms"
    return f"{ms / 1000:.2f} s"


def _check_args(fn, repeats: int, warmup: int, inner: int) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if repeats < 1 or warmup < 0 or inner < 1:
        raise ValueError(f"need repeats >= 1, warmup >= 0, inner >= 1 (got {repeats}, {warmup}, {inner})")


def _first_call(fn: Callable[[], object], device: torch.device, warmup: int) -> float | None:
    """Run the warm-up calls; return the first one's synchronized time in ms."""
    first = None
    for i in range(warmup):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        if i == 0:
            first = (time.perf_counter() - t0) * 1e3
    return first


def _wall_clock(fn, device, repeats, inner, synced) -> tuple[float, ...]:
    times = []
    for _ in range(repeats):
        if synced:
            sync(device)
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        if synced:
            sync(device)
        times.append((time.perf_counter() - t0) * 1e3 / inner)
    return tuple(times)


def naive_timer(fn: Callable[[], object], *, repeats: int = 10, warmup: int = 1, inner: int = 1,
                device=None) -> Timing:
    """Wall clock around the call with no synchronization: WRONG on a GPU, kept as the bad example.

    On a GPU it measures how long the host took to *enqueue* the work, not the work.

    Example:
        >>> t = naive_timer(lambda: sum(range(1000)), repeats=3)
        >>> t.method, len(t.times_ms)
        ('naive', 3)
    """
    _check_args(fn, repeats, warmup, inner)
    device = resolve_device(device)
    first = _first_call(fn, device, warmup)
    what = ("wall clock, no synchronize: only the time to enqueue the work" if device.type == "cuda"
            else "wall clock on the CPU, which runs synchronously, so this is the work")
    return Timing("naive", what, _wall_clock(fn, device, repeats, inner, synced=False), first, warmup, inner,
                  what_it_calls(fn))


def sync_timer(fn: Callable[[], object], *, repeats: int = 10, warmup: int = 1, inner: int = 1,
               device=None) -> Timing:
    """Wall clock between ``torch.cuda.synchronize(device)`` calls: right, but syncs every repeat.

    ``synchronize`` waits for *this device only*; pass the device the work runs on.

    Example:
        >>> sync_timer(lambda: sum(range(1000)), repeats=3).method
        'sync'
    """
    _check_args(fn, repeats, warmup, inner)
    device = resolve_device(device)
    first = _first_call(fn, device, warmup)
    what = (f"wall clock between synchronize({device}) calls: the work, plus launch and sync overhead"
            if device.type == "cuda" else "wall clock on the CPU (nothing to synchronize)")
    return Timing("sync", what, _wall_clock(fn, device, repeats, inner, synced=True), first, warmup, inner,
                  what_it_calls(fn))


def event_timer(fn: Callable[[], object], *, repeats: int = 10, warmup: int = 1, inner: int = 1,
                device=None) -> Timing:
    """CUDA events recorded on the current stream around each repeat; one synchronize at the end.

    Events time the GPU's own stream, so the host never waits between repeats. Without a GPU it
    falls back to the wall clock and says so.

    Example:
        >>> event_timer(lambda: sum(range(1000)), repeats=3, device="cpu").measured.startswith("no CUDA")
        True
    """
    _check_args(fn, repeats, warmup, inner)
    device = resolve_device(device)
    first = _first_call(fn, device, warmup)
    if device.type != "cuda":
        return Timing("events", "no CUDA device, so no events: wall clock on the CPU",
                      _wall_clock(fn, device, repeats, inner, synced=False), first, warmup, inner)
    with torch.cuda.device(device):
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for start, end in pairs:
            start.record()
            for _ in range(inner):
                fn()
            end.record()
        pairs[-1][1].synchronize()
    times = tuple(start.elapsed_time(end) / inner for start, end in pairs)
    return Timing("events", f"GPU time between two CUDA events on the current stream of {device}",
                  times, first, warmup, inner)


def benchmark_timer(fn: Callable[[], object], *, min_run_time: float = 0.2, warmup: int = 1,
                    device=None) -> Timing:
    """``torch.utils.benchmark.Timer.blocked_autorange``: picks the block size, syncs CUDA for you.

    Example:
        >>> benchmark_timer(lambda: sum(range(1000)), min_run_time=0.01).method
        'benchmark'
    """
    import logging

    cpp_log = logging.getLogger("torch.utils.cpp_extension")
    level = cpp_log.level
    cpp_log.setLevel(logging.ERROR)  # importing benchmark warns "No CUDA runtime is found" on CPU-only machines
    try:
        from torch.utils import benchmark
    finally:
        cpp_log.setLevel(level)

    _check_args(fn, 1, warmup, 1)
    device = resolve_device(device)
    first = _first_call(fn, device, warmup)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    m = timer.blocked_autorange(min_run_time=min_run_time)
    times = tuple(t * 1e3 for t in m.times)
    what = (f"torch.utils.benchmark: blocks of {m.number_per_run} calls, synchronized for you"
            if device.type == "cuda" else f"torch.utils.benchmark on the CPU, blocks of {m.number_per_run} calls")
    return Timing("benchmark", what, times, first, warmup, m.number_per_run)


TIMERS = {"naive": naive_timer, "sync": sync_timer, "events": event_timer, "benchmark": benchmark_timer}


def compare(fn: Callable[[], object], methods=("naive", "sync", "events", "benchmark"), **kwargs):
    """Time ``fn`` with several timers; returns a DataFrame, one row per timer.

    Example:
        >>> df = compare(lambda: sum(range(1000)), methods=("naive", "sync"), repeats=3)
        >>> list(df.index)
        ['naive', 'sync']
    """
    import pandas as pd

    rows = []
    for name in methods:
        if name not in TIMERS:
            raise ValueError(f"unknown timer {name!r}; choose from {', '.join(TIMERS)}")
        opts = {k: v for k, v in kwargs.items() if name != "benchmark" or k in ("warmup", "device")}
        t = TIMERS[name](fn, **opts)
        rows.append({"timer": name, "median_ms": t.median_ms, "iqr_ms": t.spread_ms, "n": len(t.times_ms),
                     "first_call_ms": t.first_call_ms, "measured": t.measured})
    return pd.DataFrame(rows).set_index("timer")


def spin_cycles(device: torch.device, ms: float) -> int:
    """How many ``torch.cuda._sleep`` cycles keep ``device`` busy for about ``ms`` milliseconds.

    ``_sleep`` spins on the SM clock, whose rate changes with boost clocks, so the rate is measured:
    one probe spin timed with CUDA events (the first guess comes from the device's clock rate when
    torch reports it). Callers still report the spin time they measured, never ``ms``.

    Example:
        >>> spin_cycles(torch.device("cuda"), 50)  # doctest: +SKIP
        98000000
    """
    if device.type != "cuda":
        raise ValueError(f"torch.cuda._sleep needs a CUDA device, got {device}")
    with torch.cuda.device(device):
        khz = getattr(torch.cuda.get_device_properties(device), "clock_rate", 0) or 0
        probe = int(khz * 5) if khz > 0 else 10_000_000  # ~5 ms at the nominal clock
        torch.cuda._sleep(1000)  # first use loads the kernel; keep that out of the probe
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        probe_ms = start.elapsed_time(end)
    per_ms = probe / max(probe_ms, 1e-3)
    return max(1, int(per_ms * ms))


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a list, like ``numpy.percentile``.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0, 5.0], 25)
        2.0
    """
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of an empty list")
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def wall_ms(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter()`` value)."""
    return (time.perf_counter() - t0) * 1e3


def gbps(nbytes: float, ms: float) -> float:
    """Bytes per millisecond as GB/s (10^9 bytes per second, as link speeds are quoted).

    Example:
        >>> gbps(1_000_000_000, 20.0)
        50.0
    """
    return nbytes / (ms * 1e6)


def median_wall_ms(fn: Any, reps: int, warm: int = 2) -> float:
    """The median wall time of ``fn()`` over ``reps`` runs after ``warm`` warm-up runs, every GPU idle before each run
    and waited for after it (ms).

    Example:
        >>> median_wall_ms(lambda: None, reps=3) >= 0
        True
    """
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        sync_all()
        t0 = time.perf_counter()
        fn()
        sync_all()
        times.append(wall_ms(t0))
    return statistics.median(times)
