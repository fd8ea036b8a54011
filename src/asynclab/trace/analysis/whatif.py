"""What each fix would save: the replay graph changed as the fix changes the step (Daydream's what-if), kind by kind."""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pandas as pd

from asynclab.trace.analysis.thresholds import (FIRST_SHARE, GRAPH_LAUNCH_US, MANY_SMALL_COPIES, OWN_WORK_MIN_US,
                                                PCIE5_PINNED_BYTES_PER_US, PINNED_BYTES_PER_US, SMALL_COPY_BYTES,
                                                SM_DRAW)
from asynclab.trace.read.events import name_matches
from asynclab.trace.analysis.idle import thin
from asynclab.trace.analysis.replay import ALLOC, Graph, comm_keys, host_time_in, replay, replayed_span

__all__ = ["TRANSFORMS", "REPLAYED_KINDS", "rank_skew_cuts", "NEEDS_FIRST", "FIRST_SHARE", "fixed", "pinned_rate", "pinned_default", "PINNED_BYTES_PER_US",
           "PCIE5_PINNED_BYTES_PER_US", "GRAPH_LAUNCH_US", "OWN_WORK_MIN_US",
           "profiler_free", "context", "span", "SIZE_FROM_DATA"]

#: Ops whose output's size the data decides (selecting by a boolean mask, ``nonzero``, ``unique``): the host reads
#: the size back from the GPU, a sync, before it can go on. The fix keeps the work on the GPU at a size known ahead
#: (a multiply by the mask, ``ignore_index``, ``nonzero_static``): it replaces each such op by one plain op.
SIZE_FROM_DATA = (r"^aten::(?:index|_index_put_impl_|index_put_?|masked_select|masked_scatter|nonzero|unique\w*"
                  r"|_unique2?|repeat_interleave)$")
_KERNEL_LAUNCH = re.compile(r"(?:LaunchKernel|MemsetAsync)")
_LOADER = r"DataLoader.*__next__"
_SYNC = r"Synchroni[sz]e"
_TORCH_FILE = r"(?:^|/)torch/|torch\._C|pybind11"
#: A read of a clock from Python: a loop of them waits for a time, which the profiler's cost per call does not lengthen.
_CLOCK = r"^<built-in function (?:perf_counter|monotonic|time|process_time|thread_time)(?:_ns)?>$"  # PyTorch's Python files, and its C functions (bound by pybind11)


def pinned_default(device_properties: Any) -> float:
    """The pinned rate to assume for a trace's GPUs (its ``deviceProperties``) where it has no pinned copy of its own:
    PCIe 5.0's (:data:`PCIE5_PINNED_BYTES_PER_US`) where every GPU it names is of compute capability 9 or later, else
    PCIe 4.0's (:data:`PINNED_BYTES_PER_US`).

    Example:
        >>> pinned_default([{"id": 0, "computeMajor": 9}]), pinned_default([{"id": 0, "computeMajor": 8}]), pinned_default(None)
        (53700.0, 25000.0, 25000.0)
    """
    majors = [p.get("computeMajor") for p in device_properties or [] if isinstance(p, dict)]
    if majors and all(isinstance(m, int) and m >= 9 for m in majors):
        return PCIE5_PINNED_BYTES_PER_US
    return PINNED_BYTES_PER_US


def pinned_rate(work: pd.DataFrame, default: float = PINNED_BYTES_PER_US) -> float:
    """Bytes per µs of the trace's pinned host-to-device copies of 1 MB or more (``default`` if none).

    Example:
        >>> w = pd.DataFrame({"kind": ["h2d"], "name": ["Memcpy HtoD (Pinned -> Device)"], "bytes": [2e6],
        ...                   "dur_us": [40.0]})
        >>> pinned_rate(w)
        50000.0
    """
    m = (work["kind"] == "h2d").to_numpy(dtype=bool) & name_matches(work["name"], "Pinned")
    rows = work[m & (work["bytes"] >= 1e6).fillna(False).to_numpy(dtype=bool)]
    if rows.empty:
        return default
    return float(np.median(rows["bytes"].to_numpy(np.float64) / np.maximum(rows["dur_us"].to_numpy(np.float64), 1e-3)))


def _in(g: Graph, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    return (g.h_start >= lo) & (g.h_start < hi), (g.g_start >= lo) & (g.g_start < hi)


def _unblock(g: Graph, m: np.ndarray, cost: float | None = None) -> None:
    """The calls no longer wait: each costs its own time after the wait (or ``cost``, if less)."""
    g.h_dur[m] = np.minimum(g.h_dur[m], g.h_own[m] if cost is None else np.minimum(g.h_own[m], cost))
    g.h_own[m] = g.h_dur[m]
    g.h_block[m] = False


def _remove_host_time(g: Graph, starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> None:
    """The host no longer spends time in the ranges: gaps and calls shrink, calls inside wait for nothing."""
    gap, dur = host_time_in(g, starts, ends, lo, hi)
    g.h_gap -= gap
    g.h_dur = np.maximum(g.h_dur - dur, 0.0)
    inside = dur >= g.h_end - g.h_start - 1e-9
    g.h_block[inside & (dur > 0)] = False
    g.h_own[inside] = 0.0


def _fix_host_sync(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    """The host no longer waits: a synchronize call goes (its time after the wait, the host's wake-up, too), and a
    read of the GPU's memory costs only its own time. A read inside an op whose output's size the data decides
    (:data:`SIZE_FROM_DATA`) goes with that op's host time, all but one plain op's (``ctx["op_us"]``): the fix keeps
    the work on the GPU at a size known ahead."""
    hm, _ = _in(g, lo, hi)
    m = hm & g.h_block & (ctx["waited"] == "host_sync")
    _unblock(g, m & ctx["sync"], 0.0)
    _unblock(g, m & ~ctx["sync"])
    s, e, inside = _enclosing(g, np.flatnonzero(m), ctx, "size_ops")
    s, e = s[inside], e[inside]
    _remove_host_time(g, s, np.maximum(s, e - ctx["op_us"]), lo, hi)


def _waited(g: Graph, alloc: np.ndarray) -> np.ndarray:
    """What each blocking call waited for: the allocator (``alloc``: the calls that are its), a pageable copy
    (small_copies when tiny), or anything (host_sync); "" for calls that do not block."""
    w = g.work
    pageable = ((w["kind"] == "h2d").to_numpy(dtype=bool)
                & name_matches(w["name"], "Pageable"))
    tiny = (w["bytes"] <= SMALL_COPY_BYTES).fillna(False).to_numpy(dtype=bool)
    out = np.full(len(g.h_start), "", dtype=object)
    for i in np.flatnonzero(g.h_block):
        waits = g.h_waits[i]
        out[i] = "host_sync"
        if alloc[i]:
            out[i] = "alloc_churn"
        elif waits is not None and len(waits):
            last = int(waits[np.argmax(g.g_end[waits])])
            if pageable[last]:
                out[i] = "small_copies" if tiny[last] else "pageable_copy"
    return out


def _pageable(g: Graph, lo: float, hi: float) -> np.ndarray:
    _, gm = _in(g, lo, hi)
    w = g.work
    big = (w["bytes"] > SMALL_COPY_BYTES).fillna(True).to_numpy(dtype=bool)
    return gm & (w["kind"] == "h2d").to_numpy(dtype=bool) & name_matches(w["name"], "Pageable") & big


def _fix_pageable_copy(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    m = _pageable(g, lo, hi)
    nbytes = g.work["bytes"].to_numpy(dtype=np.float64, na_value=np.nan)
    pinned = np.where(np.isfinite(nbytes[m]), nbytes[m] / ctx["pinned"], g.g_dur[m])
    g.g_dur[m] = np.minimum(g.g_dur[m], pinned)  # a copy from pinned memory is never slower than the pageable one
    calls = np.zeros(len(g.h_start), dtype=bool)
    calls[g.g_launch[m & (g.g_launch >= 0)]] = True
    hm, _ = _in(g, lo, hi)
    calls |= hm & g.h_block & (ctx["waited"] == "pageable_copy")
    _unblock(g, calls, ctx["call_us"])
    g.g_lat[m] = np.minimum(g.g_lat[m], g.g_typical_lat)


def _exposed_copies(g: Graph, lo: float, hi: float) -> np.ndarray:
    """Copies (not pageable, not tiny) that ran with compute beside them for under half their time."""
    _, gm = _in(g, lo, hi)
    w = g.work
    kind = w["kind"].to_numpy(dtype=object)
    copy = np.isin(kind, ("h2d", "d2h", "d2d")) & gm & ~_pageable(g, lo, hi)
    copy &= (w["bytes"] > SMALL_COPY_BYTES).fillna(True).to_numpy(dtype=bool)
    comp = np.isin(kind, ("compute",))
    cs, ce = g.g_start[comp], g.g_end[comp]
    out = np.zeros(len(kind), dtype=bool)
    for i in np.flatnonzero(copy):
        over = np.clip(np.minimum(ce, g.g_end[i]) - np.maximum(cs, g.g_start[i]), 0, None).sum()
        out[i] = over < 0.5 * g.g_dur[i]
    return out


def _fix_exposed_copy(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    """Each exposed copy moves to a side stream a step ahead: it waits for nothing and nothing waits for it."""
    for i in np.flatnonzero(_exposed_copies(g, lo, hi)):
        nxt = np.flatnonzero(g.g_prev == i)
        g.g_prev[nxt] = g.g_prev[i]
        g.g_dep[g.g_dep == i] = -1
        g.g_prev[i], g.g_dep[i], g.g_gap[i] = -1, -1, 0.0
        g.g_lat[i] = min(g.g_lat[i], g.g_typical_lat)


def _fix_small_copies(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    """The tiny host-to-device copies of a step become one: the ops that made the others take no host time."""
    _, gm = _in(g, lo, hi)
    w = g.work
    tiny = gm & (w["kind"] == "h2d").to_numpy(dtype=bool) & (w["bytes"] <= SMALL_COPY_BYTES).fillna(False).to_numpy(dtype=bool)
    steps = ctx["steps"]
    step_of = np.searchsorted(steps["start_us"].to_numpy(np.float64), g.g_start, side="right") - 1
    drop = np.zeros(len(tiny), dtype=bool)
    for s in np.unique(step_of[tiny]):
        idx = np.flatnonzero(tiny & (step_of == s))
        if len(idx) >= MANY_SMALL_COPIES:
            drop[idx[1:]] = True
    if not drop.any():
        return
    g.g_dur[drop] = 0.0
    g.g_lat[drop] = 0.0
    launches = g.g_launch[drop & (g.g_launch >= 0)]
    s, e = _outer_ops(g, launches, ctx)
    _remove_host_time(g, s, e, lo, hi)


def _outer_ops(g: Graph, calls: np.ndarray, ctx: dict) -> tuple[np.ndarray, np.ndarray]:
    """The outermost op around each host call (the call itself where it is in none)."""
    starts, ends, _ = _enclosing(g, calls, ctx, "outer_ops")
    return starts, ends


def _enclosing(g: Graph, calls: np.ndarray, ctx: dict, ops: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The op of ``ctx[ops]`` (per thread, outermost ops: see :func:`_outermost`) around each host call, the call
    itself where it is in none: (starts, ends, whether it is in one)."""
    starts, ends = g.h_start[calls].copy(), g.h_end[calls].copy()
    found = np.zeros(len(calls), dtype=bool)
    tids = ctx["call_tids"][calls] if len(calls) else np.zeros(0, dtype=object)
    for tid, (os_, oe) in ctx[ops].items():
        m = np.flatnonzero(tids == tid)
        if not len(m) or not len(os_):
            continue
        k = np.searchsorted(os_, starts[m], side="right") - 1
        kk = np.maximum(k, 0)
        inside = (k >= 0) & (oe[kk] >= ends[m])
        starts[m[inside]], ends[m[inside]] = os_[kk[inside]], oe[kk[inside]]
        found[m[inside]] = True
    return starts, ends, found


def _own_work(h: pd.DataFrame, calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The host's own work: (starts, ends) of the Python calls of :data:`OWN_WORK_MIN_US` or more, outside PyTorch's
    own files and C functions, during which no thread made a runtime call (a data pipeline, a logger; PyTorch's
    own Python is what a CUDA graph replaces)."""
    py = h.loc[(h["kind"] == "python").to_numpy(dtype=bool), ["name", "start_us", "end_us"]]  # the columns read
    s, e = py["start_us"].to_numpy(np.float64), py["end_us"].to_numpy(np.float64)
    at = np.sort(calls["start_us"].to_numpy(np.float64))
    keep = (np.searchsorted(at, e) == np.searchsorted(at, s)) & (e - s >= OWN_WORK_MIN_US)
    cand = np.flatnonzero(keep)  # of those, the calls outside PyTorch's own files (the names of a few rows searched)
    keep[cand] = ~name_matches(py["name"].iloc[cand], _TORCH_FILE)
    cs, ce = _clock_waits(py, at)
    order = np.argsort(np.concatenate([s[keep], cs]), kind="stable")
    return np.concatenate([s[keep], cs])[order], np.concatenate([e[keep], ce])[order]


def _clock_waits(py: pd.DataFrame, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of clock reads (:data:`_CLOCK`) of :data:`OWN_WORK_MIN_US` or more, each read less
    than that after the one before with no runtime call between: a wait for a time, the host's own work.

    Example:
        >>> py = pd.DataFrame({"name": ["<built-in function perf_counter>"] * 3, "start_us": [0.0, 30.0, 60.0],
        ...                    "end_us": [1.0, 31.0, 61.0]})
        >>> _clock_waits(py, np.array([100.0]))
        (array([0.]), array([61.]))
    """
    clock = py[name_matches(py["name"], _CLOCK)].sort_values("start_us", kind="stable")
    s, e = clock["start_us"].to_numpy(np.float64), clock["end_us"].to_numpy(np.float64)
    if not len(s):
        return s, e
    joined = (s[1:] - e[:-1] < OWN_WORK_MIN_US) & (np.searchsorted(at, s[1:]) == np.searchsorted(at, e[:-1]))
    first = np.flatnonzero(np.r_[True, ~joined])
    last = np.r_[first[1:] - 1, len(s) - 1]
    long = e[last] - s[first] >= OWN_WORK_MIN_US
    return s[first][long], e[last][long]


def _outermost(ops: pd.DataFrame) -> dict:
    """Per thread, the ops that are in no other op: (starts, ends), sorted."""
    out = {}
    for tid, o in ops.sort_values("start_us", kind="stable").groupby("tid", sort=False):
        s, e = o["start_us"].to_numpy(np.float64), o["end_us"].to_numpy(np.float64)
        reach = np.maximum.accumulate(e)
        top = np.ones(len(s), dtype=bool)
        top[1:] = e[1:] > reach[:-1]
        out[tid] = (s[top], e[top])
    return out


def _fix_dataloader(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    h = g.host
    rows = h[h["kind"].isin(("annotation", "cpu_op", "python")).to_numpy(dtype=bool)]
    rows = rows[name_matches(rows["name"], _LOADER)]
    _remove_host_time(g, rows["start_us"].to_numpy(np.float64), rows["end_us"].to_numpy(np.float64), lo, hi)


def _fix_alloc(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    hm, _ = _in(g, lo, hi)
    m = hm & ctx["alloc"]
    g.h_dur[m] = 0.0
    g.h_own[m] = 0.0
    g.h_block[m] = False


def _fix_launch_bound(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    """The step's eager launches are replayed from CUDA graphs, one per run of launches between host waits (a step
    that waits for the GPU cannot be captured across the wait): in a run, every launch after the first costs
    :data:`GRAPH_LAUNCH_US`, and the ops that made them and the host's time from one to the next take none, but
    for the host's own work (Python calls that launch nothing: a data pipeline, a logger); the kernels follow each
    other as the GPU allows."""
    hm, gm = _in(g, lo, hi)
    launch = hm & ctx["eager_launch"]
    after = g.h_after
    in_run = launch & ((after < 0) | ~g.h_block[np.maximum(after, 0)])  # the rank's first call: nothing before it
    idx = np.flatnonzero(in_run)
    s, e = _outer_ops(g, idx, ctx)
    _remove_host_time(g, s, e, lo, hi)
    between = idx[launch[np.maximum(after[idx], 0)] | (after[idx] < 0)]
    floor = np.where(after[between] < 0, np.clip(lo - g.h_origin, 0.0, None), 0.0)  # the first: from ``lo`` on
    own, _ = host_time_in(g, *ctx["own_work"], lo, hi)  # the host's own work between launches stays
    g.h_gap[between] = np.minimum(g.h_gap[between], floor + own[between])  # the rest of the time between launches
    g.h_dur[idx] = GRAPH_LAUNCH_US
    g.h_own[idx] = GRAPH_LAUNCH_US
    ours = gm & (g.g_launch >= 0) & np.isin(g.g_launch, idx)
    g.g_lat[ours] = 0.0


def _fix_stream_wait(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    _, gm = _in(g, lo, hi)
    held = gm & (g.g_dep >= 0)
    g.g_dep[held] = -1
    g.g_lat[held] = np.minimum(g.g_lat[held], g.g_typical_lat)


def _fix_underfilled(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    """Kernels with fewer blocks than the GPU has SMs run beside each other, as on streams of their own (the fix's
    premise: they do not need each other). Within a step, a run of them on one stream is packed, in order, into
    groups whose blocks fit the SMs; a group starts after the group before it (the member that ends last), and the
    task after the run waits for the last group. The members of a group share the memory's bandwidth: each SM draws
    :data:`SM_DRAW` times its even share of it, so a group whose SMs would draw more than all of it runs that much
    slower (a kernel of few blocks is most often memory-bound: a softmax, a norm, a reduction over few rows)."""
    sms = ctx.get("sms")
    if not sms:
        return
    _, gm = _in(g, lo, hi)
    blocks = ctx["blocks"]
    few = gm & ctx["compute"] & thin(blocks, g.g_dur, sms)
    if few.sum() < 2:
        return
    step = np.searchsorted(ctx["steps"]["start_us"].to_numpy(np.float64), g.g_start, side="right")
    issued = np.where(g.g_launch >= 0, g.h_start[np.maximum(g.g_launch, 0)], g.g_start)
    ends = issued + g.g_dur  # which member of a group ends last, before the replay knows
    last_of: dict[int, int] = {}  # a run's kernel -> the member of its group that ends last
    group: list[int] = []
    groups: list[list[int]] = []
    anchor = -1
    for i in np.flatnonzero(few).tolist():
        p = int(g.g_prev[i])
        if p in last_of and step[p] == step[i] and blocks[group].sum() + blocks[i] <= sms:
            group.append(i)
        else:
            anchor, group = last_of.get(p, p), [i]
            groups.append(group)
        if anchor != p:
            g.g_prev[i], g.g_gap[i] = anchor, 0.0
        late = max(group, key=lambda k: ends[k])
        for k in group:
            last_of[k] = late
    for edge in (g.g_prev, g.g_dep):  # the tasks after a run wait for its last group
        after = np.flatnonzero(np.isin(edge, list(last_of)) & ~few)
        edge[after] = [last_of[int(p)] for p in edge[after]]
    for members in groups:  # side by side, they share the bandwidth their SMs draw
        g.g_dur[members] *= max(1.0, float(blocks[members].sum()) * SM_DRAW / sms)

def rank_skew_cuts(graphs: list[Graph]) -> list[dict[int, tuple[int, float]]]:
    """What evening out the ranks' own host work would take off each rank before each collective they all hold: the
    host's time between its runtime calls (its gaps) since its previous such collective, less the least any rank
    spent there. Returns, per rank, {the collective's launch (host position): (the previous one's, µs to cut)}.

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.replay import build_graph
        >>> tr = load_trace("tests/fixtures/diagnose/rank_skew-bad")
        >>> cuts = rank_skew_cuts([build_graph(tr.events, r) for r in (0, 1)])
        >>> [round(sum(c for _, c in r.values()) / 1e3) for r in cuts]  # rank 1 is late: its ms of extra host work
        [1, 12]
    """
    keys = comm_keys(graphs)
    shared = set.intersection(*(set(k.tolist()) - {None} for k in keys)) if len(graphs) > 1 else set()
    spent: list[dict] = []
    for g, ks in zip(graphs, keys):
        launches = sorted({int(g.g_launch[i]): k for i, k in enumerate(ks.tolist())
                           if k in shared and g.g_launch[i] >= 0}.items())
        cum = np.concatenate([[0.0], np.cumsum(np.clip(g.h_gap, 0.0, None))])
        prev, mine = -1, {}
        for launch, key in launches:
            mine[key] = (launch, prev, float(cum[launch + 1] - cum[prev + 1]))
            prev = launch
        spent.append(mine)
    common = set.intersection(*(set(m) for m in spent)) if spent else set()
    least = {k: min(m[k][2] for m in spent) for k in common}
    return [{launch: (prev, t - least[k]) for k, (launch, prev, t) in m.items() if k in least and t > least[k]}
            for m in spent]


def _fix_rank_skew(g: Graph, lo: float, hi: float, ctx: dict) -> None:
    """The late rank's extra host work goes (see :func:`rank_skew_cuts`): before each collective, its longest gaps
    between runtime calls since the collective before are cut by what it spent there beyond the rank that spent least."""
    hm, _ = _in(g, lo, hi)
    todo = [(launch, prev, cut) for launch, (prev, cut) in ctx.get("skew_cuts", {}).items() if hm[launch]]
    if not todo:
        return
    launch, prev, cut = (np.array(c) for c in zip(*todo))
    n = launch - prev  # each collective's calls since the one before: prev + 1 .. launch (the ranges are disjoint)
    seg = np.repeat(np.arange(len(n)), n)
    first = np.cumsum(n) - n
    calls = np.repeat(prev + 1, n) + np.arange(len(seg)) - np.repeat(first, n)
    gaps = np.clip(g.h_gap[calls], 0.0, None)
    order = np.lexsort((-gaps, seg))  # each range's gaps, the longest first (stable)
    calls, seg, gaps = calls[order], seg[order], gaps[order]
    before = _exclusive_cumsum(gaps, np.arange(len(seg)) - np.repeat(first, n))  # what the longer gaps already gave
    g.h_gap[calls] = gaps - np.clip(cut[seg] - before, 0.0, gaps)


def _exclusive_cumsum(x: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Within each run of ``x`` (``pos``: each element's place in its run, runs one after another), the sum of the
    elements before it, added one by one as ``np.cumsum`` adds them.

    Example:
        >>> _exclusive_cumsum(np.array([3.0, 1.0, 5.0, 2.0, 4.0]), np.array([0, 1, 2, 0, 1])).tolist()
        [0.0, 3.0, 4.0, 0.0, 2.0]
    """
    out = np.zeros(len(x))
    by_pos = np.argsort(pos, kind="stable")
    bounds = np.r_[0, np.cumsum(np.bincount(pos))]
    for k in range(1, len(bounds) - 1):  # as many passes as the longest run is long
        at = by_pos[bounds[k]:bounds[k + 1]]
        out[at] = out[at - 1] + x[at - 1]
    return out


TRANSFORMS: dict[str, Callable[[Graph, float, float, dict], None]] = {
    "host_sync": _fix_host_sync, "pageable_copy": _fix_pageable_copy, "exposed_copy": _fix_exposed_copy,
    "small_copies": _fix_small_copies, "dataloader_stall": _fix_dataloader, "alloc_churn": _fix_alloc,
    "launch_bound": _fix_launch_bound, "stream_wait": _fix_stream_wait, "underfilled_gpu": _fix_underfilled,
    "rank_skew": _fix_rank_skew,
}
#: The kinds whose saving the replay predicts; the others (the kinds of several ranks but rank_skew) keep the idle time
#: they explain.
REPLAYED_KINDS = tuple(TRANSFORMS)
#: Fixes that need others first, and which: a CUDA graph cannot capture a step in which the host waits for the GPU,
#: so capturing the launches saves what it adds once the step's waits (syncs, synchronous copies, frees) that save
#: :data:`FIRST_SHARE` of the step or more are gone (lesser waits stay, and the launches between them are captured).
NEEDS_FIRST: dict[str, tuple[str, ...]] = {
    "launch_bound": ("host_sync", "pageable_copy", "small_copies", "alloc_churn"),
}


def context(g: Graph, steps: pd.DataFrame, sms: int | None = None, pinned: float = PINNED_BYTES_PER_US) -> dict:
    """What the transforms look up: which calls are eager launches, the allocator's and synchronize calls, what each
    blocking call waited for, the calls' threads, ops, the host's own work, the pinned rate (``pinned`` where the
    trace has no pinned copy), a runtime call's usual cost (µs), the steps, the GPU's SM count (``sms``, None where the
    trace does not give it) and each kernel's blocks.

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.replay import build_graph
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/pageable_copy-bad.json.gz").events, pd.NA)
        >>> context(g, pd.DataFrame({"start_us": [0.0]}))["pinned"] == PINNED_BYTES_PER_US  # no pinned copy there
        True
    """
    h = g.host
    names = h.loc[g.h_label, "name"]
    eager = name_matches(names, _KERNEL_LAUNCH) & ~name_matches(names, "Graph")
    alloc = name_matches(names, ALLOC)
    ops = h[h["kind"] == "cpu_op"]
    outer = _outermost(ops)
    op_us = np.concatenate([e - s for s, e in outer.values()]) if outer else np.zeros(0)
    return {"waited": _waited(g, alloc), "eager_launch": eager, "alloc": alloc, "sync": name_matches(names, _SYNC),
            "call_tids": h.loc[g.h_label, "tid"].to_numpy(dtype=object),
            "size_ops": _outermost(ops[name_matches(ops["name"], SIZE_FROM_DATA)]),
            "op_us": float(np.median(op_us)) if len(op_us) else 0.0, "outer_ops": outer, "own_work": _own_work(h, h.loc[g.h_label]),
            "pinned": pinned_rate(g.work, pinned), "steps": steps,
            "call_us": float(np.median(g.h_dur[~g.h_block])) if (~g.h_block).any() else 5.0, "sms": sms,
            "blocks": g.work["blocks"].to_numpy(dtype=np.float64, na_value=np.nan) if "blocks" in g.work
            else np.full(len(g.g_start), np.nan), "compute": (g.work["kind"] == "compute").to_numpy(dtype=bool)}


def fixed(g: Graph, kinds: tuple[str, ...] | list[str], lo: float, hi: float, ctx: dict) -> Graph:
    """A copy of the graph with the fixes of ``kinds`` applied to the calls and tasks that start in ``[lo, hi)``.

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.replay import build_graph
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> ctx = context(g, pd.DataFrame({"start_us": [g.h_start[0]]}))
        >>> int(fixed(g, ["host_sync"], 0, 1e12, ctx).h_block.sum()) < int(g.h_block.sum())
        True
    """
    out = g.copy()
    for k in kinds:
        if k in TRANSFORMS:
            TRANSFORMS[k](out, lo, hi, ctx)
    return out


def profiler_free(g: Graph, per_event_us: float, lo: float, hi: float) -> Graph:
    """A copy of the graph with the profiler's own host cost taken out: ``per_event_us`` for every host row
    (op, Python call, runtime call) that starts in the host time before each call.

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.replay import build_graph
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> bool((profiler_free(g, 1.0, 0, 1e12).h_gap <= g.h_gap).all())
        True
    """
    out = g.copy()
    h = g.host
    rows = h["kind"].isin(("cpu_op", "launch", "python")).to_numpy(dtype=bool) & ~name_matches(h["name"], _CLOCK)
    t = np.sort(h.loc[rows, "start_us"].to_numpy(np.float64))
    prev_end = g.prev_end()
    n = np.searchsorted(t, g.h_start, side="right") - np.searchsorted(t, prev_end, side="left")
    mine = (g.h_start >= lo) & (g.h_start < hi)
    cut = np.where(mine, np.minimum(np.clip(n, 0, None) * per_event_us, np.clip(g.h_gap, 0, None)), 0.0)
    out.h_gap = g.h_gap - cut
    return out


def span(g: Graph, lo: float, hi: float, host_hi: float | None = None) -> float:
    """The replayed length (µs) of ``[lo, hi)`` of a graph.

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.replay import build_graph
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> round(span(g, 0.0, 10.0), 3)
        10.0
    """
    return replayed_span(g, replay(g), lo, hi, host_hi)
