"""Numbers from a trace: busy time, concurrency, copy/compute overlap, idle gaps, stream waits, launch latency, bubbles."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from asynclab.trace.analysis.breakdown import (  # noqa: F401 - part of this module's API
    BREAKDOWN, comm_overlap, gpus_with_work, profiler_steps, rows_on_gpu, steady_window, step_breakdown, time_breakdown,
    top_kernels)
from asynclab.trace.analysis.select import as_kinds, as_trace, gpu_work, rows_of  # noqa: F401 - as_trace is public here too
from asynclab.trace.read.intervals import coverage, intersection_length, spans, union_length  # noqa: F401 - union_length is public here too
from asynclab.trace import COPY_KINDS, WORK_KINDS, Trace, load_trace  # noqa: F401 - load_trace serves the examples

__all__ = [
    "busy_time", "concurrency", "concurrent_time", "overlap", "hidden_fraction", "idle_gaps", "launch_latency",
    "launchers",
    "bubble_fraction", "BubbleReport", "top_kernels", "summary", "union_length", "host_lead", "HostLead",
    "stream_waits", "comm_overlap", "time_breakdown", "step_breakdown", "BREAKDOWN", "steady_window",
]


#: Host kinds counted as "busy" for host lanes in :func:`busy_time`.
HOST_BUSY_KINDS = ("cpu_op", "launch", "python")


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def busy_time(trace: Any, by: str = "lane") -> pd.Series:
    """Busy µs per lane or per device: the length of the union of the intervals, so overlapping
    events on one lane (or concurrent streams of one device) are not double counted.

    GPU lanes count work (kernels, copies, memsets; not sync waits or annotations); host lanes
    (those of :meth:`Trace.lanes`) count CPU ops, runtime calls and python functions. With
    ``by="device"`` the index is the GPU index. ``result.attrs["span_us"]`` holds the span the
    counted events cover (first start to last end), to turn busy time into a utilisation.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> busy_time(load_trace(EXAMPLE_TRACE), by="device").tolist()
        [5.0]
    """
    tr = as_trace(trace)
    if by == "device":
        w = gpu_work(tr)
        out = {int(d): float((lambda u: (u[1] - u[0]).sum())(spans(g))) for d, g in w.groupby("device", sort=True)}
        s = pd.Series(out, name="busy_us", dtype=np.float64)
        s.index.name = "device"
        span_rows = w
    elif by == "lane":
        lanes = tr.lanes()
        w = gpu_work(tr)
        h = rows_of(tr, HOST_BUSY_KINDS)
        h = h[h["device"].isna() & h["lane"].isin(lanes)]
        rows = pd.concat([w, h]) if len(h) else w
        out = {lane: float((lambda u: (u[1] - u[0]).sum())(spans(g))) for lane, g in rows.groupby("lane", sort=False)}
        s = pd.Series({lane: out.get(lane, 0.0) for lane in lanes if lane in out}, name="busy_us", dtype=np.float64)
        s.index.name = "lane"
        span_rows = rows
    else:
        raise ValueError(f"by must be 'lane' or 'device', not {by!r}")
    s.attrs["span_us"] = float(span_rows["end_us"].max() - span_rows["start_us"].min()) if len(span_rows) else 0.0
    return s


def concurrency(trace: Any, device: int | None = None) -> pd.Series:
    """µs during which exactly k GPU streams were busy, for k = 0, 1, 2, ... (index), within the
    GPU-active span (first GPU work start to last GPU work end). Streams are (device, stream) pairs;
    ``device`` restricts to one GPU. The values add up to the span.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> concurrency(load_trace(EXAMPLE_TRACE)).to_dict()
        {0: 0.0, 1: 5.0}
    """
    return _concurrency(gpu_work(as_trace(trace), device))


def _concurrency(w: pd.DataFrame) -> pd.Series:
    if not len(w):
        return pd.Series({0: 0.0}, name="time_us", dtype=np.float64).rename_axis("streams_busy")
    groups = [spans(g) for _, g in w.groupby(["rank", "device", "stream"], sort=True, dropna=False)]
    t, count = coverage(groups)
    seg = np.diff(t)
    kmax = len(groups)
    totals = np.bincount(count, weights=seg, minlength=kmax + 1)
    s = pd.Series(totals.astype(np.float64), index=pd.RangeIndex(kmax + 1, name="streams_busy"), name="time_us")
    while len(s) > 2 and s.iloc[-1] == 0.0:
        s = s.iloc[:-1]
    return s


def busy_together(trace: Any, devices: Iterable[int] | None = None) -> float:
    """µs during which every GPU of ``devices`` (all of the trace's when None) was doing work at once: how much
    of a model split over GPUs really ran in parallel.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> busy_together(load_trace(EXAMPLE_TRACE))  # one GPU: its busy time
        5.0
    """
    tr = as_trace(trace)
    devs = sorted(int(d) for d in (devices if devices is not None else tr.devices))
    if not devs:
        raise ValueError(f"{tr.source}: no GPU work in this trace")
    times, steps = [], []
    for d in devs:
        s, e = spans(gpu_work(tr, d))
        times += [s, e]
        steps += [np.ones(len(s)), -np.ones(len(e))]
    t, step = np.concatenate(times), np.concatenate(steps)
    if not len(t):
        return 0.0
    order = np.lexsort((step, t))  # at one instant, an end before a start: touching work is not "at once"
    t, busy = t[order], np.cumsum(step[order])[:-1]
    return float(np.diff(t)[busy == len(devs)].sum())


def concurrent_time(trace: Any, at_least: int = 2, device: int | None = None) -> float:
    """µs during which at least ``at_least`` GPU streams were busy at once (from :func:`concurrency`).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> concurrent_time(load_trace(EXAMPLE_TRACE)), concurrent_time(load_trace(EXAMPLE_TRACE), at_least=1)
        (0.0, 5.0)
    """
    c = concurrency(trace, device)
    return float(c[c.index >= at_least].sum())


def overlap(trace: Any, a_kinds: str | Iterable[str], b_kinds: str | Iterable[str],
            device: int | None = None) -> float:
    """µs during which at least one event of ``a_kinds`` and one of ``b_kinds`` are active at once.

    With ``device`` only that GPU's rows count; without, all rows of the trace (host rows too), so
    ``overlap(t, "launch", "compute")`` tells how long the CPU was launching while a GPU computed.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> overlap(load_trace(EXAMPLE_TRACE), "launch", "compute")
        1.0
    """
    tr = as_trace(trace)
    a = rows_of(tr, as_kinds(a_kinds), device)
    b = rows_of(tr, as_kinds(b_kinds), device)
    return intersection_length(spans(a), spans(b))


def hidden_fraction(trace: Any, copy_kinds: Iterable[str] = COPY_KINDS, compute_kinds: Iterable[str] = ("compute",),
                    device: int | None = None) -> float:
    """Share (0..1) of copy time that overlaps compute on the same GPU: 1 means the copies were
    completely hidden behind kernels. Without ``device`` the copy and hidden times of every GPU are
    added up. Returns NaN when the trace (or device) has no copies.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> hidden_fraction(load_trace(EXAMPLE_TRACE))  # one kernel, no copies
        nan
    """
    tr = as_trace(trace)
    devices = [int(device)] if device is not None else tr.devices
    copy_total = 0.0
    hidden = 0.0
    for d in devices:
        c = spans(rows_of(tr, as_kinds(copy_kinds), d))
        k = spans(rows_of(tr, as_kinds(compute_kinds), d))
        copy_total += float((c[1] - c[0]).sum())
        hidden += intersection_length(c, k)
    if copy_total <= 0.0:
        return float("nan")
    return hidden / copy_total


def idle_gaps(trace: Any, device: int | None = None, min_gap_us: float = 0.0) -> pd.DataFrame:
    """Gaps between GPU busy intervals (all streams of a device together), per device, from its
    first to its last work. Columns: device, start_us, end_us, dur_us; only gaps of at least
    ``min_gap_us`` (and longer than 0).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> len(idle_gaps(load_trace(EXAMPLE_TRACE)))
        0
    """
    tr = as_trace(trace)
    w = gpu_work(tr, device)
    parts = []
    for d, g in w.groupby("device", sort=True):
        s, e = spans(g)
        gs, ge = e[:-1], s[1:]
        dur = ge - gs
        keep = (dur > 0) & (dur >= min_gap_us)
        parts.append(pd.DataFrame({"device": np.full(int(keep.sum()), int(d)), "start_us": gs[keep],
                                   "end_us": ge[keep], "dur_us": dur[keep]}))
    if not parts:
        return pd.DataFrame({"device": pd.Series([], dtype=np.int64), "start_us": pd.Series([], dtype=np.float64),
                             "end_us": pd.Series([], dtype=np.float64), "dur_us": pd.Series([], dtype=np.float64)})
    return pd.concat(parts, ignore_index=True)


def stream_waits(trace: Any, min_held_us: float = 50.0, tol_us: float = 30.0) -> pd.DataFrame:
    """Which GPU stream waited for which: inferred from when each piece of GPU work started.

    A piece of work was *held back* when it started more than ``min_held_us`` after both its host
    launch ended and the previous work on its own stream ended: the GPU kept it waiting for
    something else. What it waited for is the work on *another* stream (any GPU) that ended last at
    most ``tol_us`` before it started: the end of the work before an event's ``record()``. Work
    held back with no such neighbour is listed with ``waited_for`` <NA> (it waited on something
    the trace does not show). Profilers record a stream wait only as a mark where it was queued
    (``Stream Wait Event``, often without the event's stream), so the timing is the evidence used.

    Columns: lane, name, start_us, held_us (how long after its launch or its stream's previous work
    it started), waited_for (that other stream's lane), after (the name of the work it waited for),
    gap_us (from that work's end to this start).

    Example:
        >>> t = load_trace({"traceEvents": [
        ...     {"ph": "X", "cat": "kernel", "name": "spin", "pid": 0, "tid": 13, "ts": 0, "dur": 1000,
        ...      "args": {"device": 0, "stream": 13}},
        ...     {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10,
        ...      "dur": 4, "args": {"correlation": 2}},  # "use" is launched at once, and held back
        ...     {"ph": "X", "cat": "kernel", "name": "use", "pid": 0, "tid": 7, "ts": 1002, "dur": 5,
        ...      "args": {"device": 0, "stream": 7, "correlation": 2}}]})
        >>> stream_waits(t)[["lane", "waited_for", "after"]].values.tolist()
        [['GPU 0 · stream 7 (default)', 'GPU 0 · stream 13', 'spin']]
    """
    tr = as_trace(trace)
    ev = tr.events
    work = ev[ev["kind"].isin(WORK_KINDS)].sort_values("start_us", kind="stable")
    launch_end = pd.Series(np.nan, index=work.index, dtype=np.float64)
    has = work["launch"].notna() & work["launch"].isin(ev.index)
    if has.any():
        launch_end[has] = ev.loc[work.loc[has, "launch"].astype(np.int64), "end_us"].to_numpy()
    prev_end = work.groupby("lane", sort=False)["end_us"].transform(lambda e: e.cummax().shift(1))
    ready = np.fmax(launch_end.to_numpy(), prev_end.to_numpy(dtype=np.float64, na_value=np.nan))
    start = work["start_us"].to_numpy()
    ends, lanes, names = work["end_us"].to_numpy(), work["lane"].to_numpy(dtype=object), work["name"].to_numpy(dtype=object)
    rows = []
    for i in np.flatnonzero(np.isfinite(ready) & (start - ready > min_held_us)):
        near = (lanes != lanes[i]) & (ends <= start[i] + 1e-6) & (ends >= start[i] - tol_us)
        j = np.flatnonzero(near)
        j = j[np.argmax(ends[j])] if len(j) else None
        rows.append({"lane": lanes[i], "name": names[i], "start_us": float(start[i]), "held_us": float(start[i] - ready[i]),
                     "waited_for": lanes[j] if j is not None else pd.NA, "after": names[j] if j is not None else pd.NA,
                     "gap_us": float(start[i] - ends[j]) if j is not None else np.nan})
    cols = ["lane", "name", "start_us", "held_us", "waited_for", "after", "gap_us"]
    return pd.DataFrame(rows, columns=cols)


def launch_latency(trace: Any) -> pd.DataFrame:
    """Launch-to-start delay of every GPU event whose host launch is in the trace.

    Columns: name, kind, device, stream, launch_name, launch_lane (the host thread that launched it),
    launch_start_us, launch_end_us, gpu_start_us, gpu_end_us, latency_us (= gpu_start_us - launch_start_us). All kernels of one CUDA-graph launch share its start.
    The index is the GPU row's index in ``trace.events``.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> launch_latency(load_trace(EXAMPLE_TRACE))["latency_us"].tolist()
        [1.0]
    """
    tr = as_trace(trace)
    ev = tr.events
    g = ev[ev["device"].notna() & ev["launch"].notna() & ev["kind"].isin(list(WORK_KINDS) + ["sync"])]
    li = g["launch"].astype(np.int64).to_numpy()
    ls = ev.loc[li]
    out = pd.DataFrame({
        "name": g["name"].to_numpy(), "kind": g["kind"].to_numpy(), "device": g["device"].to_numpy(),
        "stream": g["stream"].to_numpy(), "launch_name": ls["name"].to_numpy(), "launch_lane": ls["lane"].to_numpy(),
        "launch_start_us": ls["start_us"].to_numpy(np.float64), "launch_end_us": ls["end_us"].to_numpy(np.float64),
        "gpu_start_us": g["start_us"].to_numpy(np.float64), "gpu_end_us": g["end_us"].to_numpy(np.float64),
    }, index=g.index)
    out["latency_us"] = out["gpu_start_us"] - out["launch_start_us"]
    return out


def launchers(trace: Any) -> pd.DataFrame:
    """Which host thread launched the GPU work on which GPU: a count of GPU ops per host lane (rows) and
    GPU (columns "GPU n"), from each GPU op's launch link. Shows, for example, that autograd runs each
    GPU's backward from a thread of its own.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> launchers(load_trace(EXAMPLE_TRACE)).to_dict()
        {'GPU 0': {'CPU · main thread': 1}}
    """
    lat = launch_latency(trace)
    table = pd.crosstab(lat["launch_lane"].to_numpy(), [f"GPU {int(d)}" for d in lat["device"]])
    table.index.name, table.columns.name = "launched from", None
    return table


@dataclass(frozen=True)
class HostLead:
    """How far the host ran ahead: from its last launch of GPU work to the end of that work (µs)."""

    last_launch_end_us: float
    gpu_end_us: float
    gpu_busy_us: float

    @property
    def lead_us(self) -> float:
        return self.gpu_end_us - self.last_launch_end_us

    def __str__(self) -> str:
        return (f"host issued its last launch at {_fmt(self.last_launch_end_us)}, the GPU finished at "
                f"{_fmt(self.gpu_end_us)}: the host ran {_fmt(self.lead_us)} ahead "
                f"(GPU busy {_fmt(self.gpu_busy_us)})")


def host_lead(trace: Any, device: int | None = None) -> HostLead:
    """The host's lead over the GPU: last launch of GPU work (end) to the end of the GPU's work.

    Only launches that caused GPU work count (a sync call is not a launch of work).

    Example:
        >>> from asynclab import reference
        >>> lead = host_lead(reference.trace(1, "host_runs_ahead"))  # 20 big matmuls on an H100
        >>> lead.lead_us > 0.9 * lead.gpu_busy_us
        True
    """
    tr = as_trace(trace)
    work = gpu_work(tr, device)
    if work.empty:
        raise ValueError(f"{tr.source}: no GPU work in this trace, so the host has nothing to run ahead of")
    launched = work["launch"].dropna().astype(int)
    if launched.empty:
        raise ValueError(f"{tr.source}: no GPU work is linked to a host launch (no correlation ids)")
    launches = tr.events.loc[launched.unique()]
    starts, ends = spans(work)
    return HostLead(float(launches["end_us"].max()), float(work["end_us"].max()), float((ends - starts).sum()))


@dataclass
class BubbleReport:
    """Idle ("bubble") share of each GPU over one common window.

    ``per_device``: idle fraction by GPU; ``idle_us``/``busy_us``: the µs behind it; ``mean``: the
    mean of ``per_device``; ``start_us``/``end_us``: the window.
    """

    start_us: float
    end_us: float
    per_device: pd.Series
    idle_us: pd.Series
    busy_us: pd.Series
    mean: float

    @property
    def window_us(self) -> float:
        return self.end_us - self.start_us

    def __str__(self) -> str:
        parts = ", ".join(f"GPU {d}: {v:.1%}" for d, v in self.per_device.items())
        return f"bubble fraction {self.mean:.1%} over {self.window_us:.1f} µs ({parts})"


def bubble_fraction(trace: Any, devices: Iterable[int] | None = None, start_us: float | None = None,
                    end_us: float | None = None) -> BubbleReport:
    """Pipeline bubble: the idle share of each GPU over one window, by default from the first GPU
    work start to the last GPU work end across ``devices`` (all GPUs when None).

    Busy means computing, copying or setting memory. A communication kernel does not count: a pipeline
    stage waiting for its input sits in a NCCL receive kernel, and that wait is the bubble.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> bubble_fraction(load_trace(EXAMPLE_TRACE)).mean
        0.0
    """
    tr = as_trace(trace)
    devs = sorted(int(d) for d in (devices if devices is not None else tr.devices))
    if not devs:
        raise ValueError(f"{tr.source}: no GPU work in this trace, so no bubble fraction")
    work = {d: (lambda w: w[w["kind"] != "comm"])(gpu_work(tr, d)) for d in devs}
    allw = pd.concat(list(work.values()))
    if not len(allw):
        raise ValueError(f"{tr.source}: no GPU work on devices {devs}")
    lo = float(allw["start_us"].min()) if start_us is None else float(start_us)
    hi = float(allw["end_us"].max()) if end_us is None else float(end_us)
    if not hi > lo:
        raise ValueError(f"{tr.source}: empty window [{lo:g}, {hi:g}] µs")
    busy = {}
    for d, w in work.items():
        s, e = spans(w)
        s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
        busy[d] = float((e - s).sum())
    busy_s = pd.Series(busy, dtype=np.float64).rename_axis("device")
    idle_s = (hi - lo) - busy_s
    frac = idle_s / (hi - lo)
    return BubbleReport(lo, hi, frac.rename("idle_fraction"), idle_s.rename("idle_us"), busy_s.rename("busy_us"),
                        float(frac.mean()))


# --------------------------------------------------------------------------------------------
# text summary
# --------------------------------------------------------------------------------------------
def _fmt(us: float) -> str:
    if not np.isfinite(us):
        return "n/a"
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f} s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} µs"


def _short(s: str, n: int = 70) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def _gpu_name(rank: Any, device: int, word: str = "GPU") -> str:
    return f"{word} {device}" if pd.isna(rank) else f"rank {int(rank)} · {word} {device}"


def _device_word(tr: Trace) -> str:
    """What the trace's devices are called: "MTIA" in a trace of MTIA accelerators, else "GPU"."""
    return "MTIA" if tr.meta.get("platform") == "mtia" else "GPU"


def summary(trace: Any, top: int = 10) -> str:
    """A plain-text report: devices, lanes and their busy time, idle time, copy–compute overlap and
    hidden fraction, communication overlapped by compute, the per-step breakdown, launch latency, and
    the top kernels by total time. A trace of several ranks reports each rank's GPUs.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> print(summary(load_trace(EXAMPLE_TRACE)).splitlines()[0])  # doctest: +ELLIPSIS
        Trace <dict>: 2 events, span 6.0 µs...
    """
    tr = as_trace(trace)
    sections = [_summary_head(tr), _summary_lanes(tr)]
    if tr.devices:
        sections += [_summary_gpus(tr), _summary_copies(tr), _summary_comm(tr), _summary_steps(tr),
                     _summary_launches(tr), _summary_kernels(tr, top)]
    else:
        sections.append(_summary_cpu_ops(tr, top))
    return "\n\n".join("\n".join(lines) for lines in sections if lines)


def _summary_head(tr: Trace) -> list[str]:
    ev = tr.events
    lines = [f"Trace {tr.source}: {len(ev):,} events, span {_fmt(tr.span_us())} ({tr.meta.get('platform', '?')})"]
    ranks = sorted(int(r) for r in ev["rank"].dropna().unique())
    if len(ranks) > 1:
        how = "distributedInfo" if tr.meta.get("rank_source") == "distributedInfo" else "file order"
        lines.append(f"Ranks: {', '.join(map(str, ranks))} (from {how}; clocks aligned)")
    if "window" in tr.meta:
        a, b = tr.meta["window"]
        lines.append(f"Window: {_fmt(a)} – {_fmt(b)} from the trace start")
    devs = tr.devices
    none = (f"none read (truncated: {tr.meta.get('recovered_events', 0):,} events read, the GPU's may be missing)"
            if tr.meta.get("damage") else "none (CPU-only trace)")
    lines.append("Devices: " + (", ".join(f"{_device_word(tr)} {d}" for d in devs) if devs else none))
    return lines


def _summary_lanes(tr: Trace) -> list[str]:
    lanes = tr.lanes()
    if not lanes:
        return []
    busy = busy_time(tr, by="lane")
    counts = tr.events["lane"].value_counts()
    width = max(len(x) for x in lanes)
    return ["Lanes (busy time = union of its events):"] + [
        f"  {lane:<{width}}  busy {_fmt(busy.get(lane, 0.0)):>11}  {int(counts.get(lane, 0)):>8,} events"
        for lane in lanes]


def _summary_gpus(tr: Trace) -> list[str]:
    lines = []
    for rank, dev in gpus_with_work(tr):
        work = rows_on_gpu(tr, rank, dev, WORK_KINDS)
        s, e = spans(work)
        span = float(e[-1] - s[0])
        busy = float((e - s).sum())
        gaps = s[1:] - e[:-1]
        gaps = gaps[gaps > 0]
        share = f" ({(span - busy) / span:.1%})" if span > 0 else ""
        big = f", longest gap {_fmt(float(gaps.max()))}" if len(gaps) else ""
        lines.append(f"{_gpu_name(rank, dev, _device_word(tr))}: busy {_fmt(busy)} of {_fmt(span)} active span; "
                     f"idle {_fmt(span - busy)}{share} in {len(gaps)} gap(s){big}")
        conc = _concurrency(work)
        parts = ", ".join(f"{k} streams {_fmt(v)}" for k, v in conc.items() if v > 0 and k >= 2)
        if parts:
            lines.append(f"  concurrent streams: {parts}")
    return lines


def _summary_copies(tr: Trace) -> list[str]:
    copy_total = hidden = 0.0
    for rank, dev in gpus_with_work(tr):
        c = spans(rows_on_gpu(tr, rank, dev, COPY_KINDS))
        copy_total += float((c[1] - c[0]).sum())
        hidden += intersection_length(c, spans(rows_on_gpu(tr, rank, dev, ("compute",))))
    if copy_total <= 0:
        return ["Copies: none (hidden fraction n/a)"]
    by_kind = rows_of(tr, COPY_KINDS).groupby("kind")["dur_us"].agg(["count", "sum"])
    return [f"Copies: {_fmt(copy_total)} in total; overlapping compute {_fmt(hidden)}; "
            f"hidden fraction {hidden / copy_total:.1%}",
            "  " + ", ".join(f"{k.upper()} {int(r['count'])}× {_fmt(float(r['sum']))}" for k, r in by_kind.iterrows())]


def _summary_comm(tr: Trace) -> list[str]:
    co = comm_overlap(tr)
    co = co[co["comm_us"] > 0]
    if not len(co):
        return []
    lines = ["Communication (NCCL/RCCL kernels) overlapped by compute:"]
    for (rank, dev), r in co.iterrows():
        lines.append(f"  {_gpu_name(rank, dev, _device_word(tr))}: {_fmt(float(r['comm_us']))} of communication, "
                     f"{r['overlap']:.1%} of it overlapped by compute")
    return lines


def _summary_steps(tr: Trace) -> list[str]:
    if not len(profiler_steps(tr)):
        return []
    table = pd.concat([step_breakdown(tr).assign(step=lambda d: d["step"].astype(str)),
                       time_breakdown(tr).reset_index().assign(step="all")], ignore_index=True)
    head = f"  {'step':>5}  {'GPU':<16}{'span':>11}{'compute':>11}{'comm':>11}{'copies':>11}{'memset':>11}{'idle':>11}"
    lines = ["Per step (ProfilerStep#N) and whole trace (all). Each instant is counted once, in the first of compute,",
             "comm, copies, memset that is busy, else idle: comm here is communication NOT overlapped by compute.",
             "A step runs from its host start to the next step's; 'all' from each GPU's first work to its last.", head]
    for _, r in table.iterrows():
        cells = "".join(f"{_fmt(float(r[c])):>11}" for c in ("span_us", "compute_us", "comm_us", "copy_us",
                                                              "memset_us", "idle_us"))
        lines.append(f"  {r['step']:>5}  {_gpu_name(r['rank'], int(r['device']), _device_word(tr)):<16}{cells}")
    return lines


def _summary_launches(tr: Trace) -> list[str]:
    lines = []
    ll = launch_latency(tr)
    if len(ll):
        q = ll["latency_us"].quantile([0.5, 0.9]).tolist()
        lines.append(f"Launch → start latency: median {_fmt(q[0])}, p90 {_fmt(q[1])} over {len(ll):,} GPU events")
    ev = tr.events
    n_orphan = int((ev["device"].notna() & ev["launch"].isna() & ev["kind"].isin(WORK_KINDS)).sum())
    if n_orphan:
        lines.append(f"GPU events without a launch in the trace: {n_orphan:,}")
    return lines


def _summary_kernels(tr: Trace, top: int) -> list[str]:
    tk = top_kernels(tr, top, kinds=("compute", "comm"))
    if not len(tk):
        return []
    return ["Top kernels by total time:"] + [
        f"  {i:>2}. {_fmt(float(r['total_us'])):>11}  {r['share']:6.1%}  {int(r['count']):>6}×  {_short(name)}"
        for i, (name, r) in enumerate(tk.iterrows(), 1)]


def _summary_cpu_ops(tr: Trace, top: int) -> list[str]:
    ops = tr.events[tr.events["kind"] == "cpu_op"]
    if not len(ops):
        return []
    agg = ops.groupby("name")["dur_us"].agg(["count", "sum"]).sort_values("sum", ascending=False).head(top)
    return ["Top CPU ops by total time:"] + [
        f"  {i:>2}. {_fmt(float(r['sum'])):>11}  {int(r['count']):>6}×  {_short(name)}"
        for i, (name, r) in enumerate(agg.iterrows(), 1)]
