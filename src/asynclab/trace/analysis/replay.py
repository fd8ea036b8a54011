"""Replay a step's host threads and GPU streams as a dependency graph, unchanged or as a fix would change it (Daydream)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from asynclab.trace.analysis.thresholds import GPU_GAP_US, HELD_US, LAUNCH_LATENCY_US
from asynclab.trace.analysis.collectives import latest_peer_start
from asynclab.trace.read.events import WORK_KINDS, name_matches
from asynclab.trace.read.intervals import union

__all__ = ["Graph", "build_graph", "comm_keys", "replay", "replay_together", "replayed_span", "span_ends", "host_at", "host_time_in", "BLOCKING", "ALLOC", "GPU_GAP_US", "HELD_US",
           "launch_latency", "LAUNCH_LATENCY_US"]

#: Runtime calls that make the host wait for the GPU (a sync, a synchronous copy, the allocator's free).
BLOCKING = re.compile(r"(?:Synchroni[sz]e|Memcpy(?!.*Async)|Free)")
#: The allocator's own calls.
ALLOC = re.compile(r"^(?:cuda|hip|cu)(?:Malloc|Free)")


@dataclass
class Graph:
    """One rank's host calls and GPU tasks as parallel arrays, in the order they started.

    Host calls (``h_*``): runtime calls (launches, copies, syncs, the allocator), each after the call that ended
    last before it started (``h_after``, -1 for the first, whose ``h_gap`` counts from the rank's first host row,
    ``h_origin``) and the host time between them (``h_gap``); a blocking
    call (``h_block``) ends no sooner than the GPU work it waits for (``h_waits``: lists of GPU task positions) plus its
    own cost after the wait (``h_own``). GPU tasks (``g_*``): kernels, copies and memsets, each after its launch
    (``g_launch``, a host position or -1) plus a latency (``g_lat``), the previous task on its stream (``g_prev``)
    and, where it waited for another stream, that stream's task (``g_dep``); ``g_gap``/``g_dgap`` keep the small
    gaps after them; ``g_typical_lat`` is the launch latency of a task on an idle stream. A collective of several
    ranks (``g_comm_key``) ends its own time (``g_intrinsic``) after the last rank joined (``g_peer_start``).
    """

    h_start: np.ndarray
    h_end: np.ndarray
    h_after: np.ndarray
    h_gap: np.ndarray
    h_dur: np.ndarray
    h_block: np.ndarray
    h_own: np.ndarray
    h_waits: list
    h_label: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_dur: np.ndarray
    g_launch: np.ndarray
    g_lat: np.ndarray
    g_prev: np.ndarray
    g_gap: np.ndarray
    g_dep: np.ndarray
    g_dgap: np.ndarray
    g_label: np.ndarray
    g_typical_lat: float
    host: pd.DataFrame   # the rank's host rows (ops, annotations, Python), for host-time transforms
    work: pd.DataFrame   # the GPU rows, in g_* order
    g_comm_key: np.ndarray = field(default=None, repr=False)     # a collective's name#n, the same on every rank
    g_peer_start: np.ndarray = field(default=None, repr=False)   # when the last rank started it (NaN: no peers)
    g_intrinsic: np.ndarray = field(default=None, repr=False)    # its time once every rank has joined
    h_origin: float = float("nan")   # the start of the rank's first host row: where the first call's gap begins
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # what replays made, shared with its copies

    def prev_end(self) -> np.ndarray:
        """Where each host call's gap begins: the end of the call before it, or the rank's first host row."""
        first = self.h_origin if np.isfinite(self.h_origin) else self.h_start
        return np.where(self.h_after >= 0, self.h_end[np.maximum(self.h_after, 0)], first)

    def copy(self) -> "Graph":
        """A copy whose arrays can be changed without touching this one (it shares :meth:`remembered`'s memo)."""
        arrays = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        arrays["h_waits"] = list(self.h_waits)
        return replace(self, **arrays)

    def remembered(self, key: str, inputs: tuple[np.ndarray, ...], make: Any) -> Any:
        """``make()``, made once for this graph and its copies while ``inputs`` hold what they held then (a fix
        changes a few of a graph's arrays; its replay converts the others as the unchanged graph's replay did).

        Example:
            >>> g = Graph(*[np.zeros(1)] * 7, [None], *[np.zeros(1)] * 11, 0.0, pd.DataFrame(), pd.DataFrame())
            >>> a = g.remembered("h_gap", (g.h_gap,), g.h_gap.tolist)
            >>> g.copy().remembered("h_gap", (g.h_gap,), list) is a, g.remembered("h_gap", (g.h_gap + 1,), list)
            (True, [])
        """
        hit = self.memo.get(key)
        if hit is not None and all(a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
                                   for a, b in zip(hit[0], inputs)):
            return hit[1]
        value = make()
        if hit is None:
            self.memo[key] = (tuple(a.copy() for a in inputs), value)
        return value


def _top_level(calls: pd.DataFrame) -> pd.DataFrame:
    """Runtime calls that are not inside another runtime call of the same thread (driver calls in runtime ones)."""
    keep = np.ones(len(calls), dtype=bool)
    for _, g in calls.groupby("tid", sort=False):
        pos = calls.index.get_indexer(g.index)
        reach = np.maximum.accumulate(g["end_us"].to_numpy(np.float64))
        inside = np.zeros(len(g), dtype=bool)
        inside[1:] = g["end_us"].to_numpy(np.float64)[1:] <= reach[:-1]
        keep[pos[inside]] = False
    return calls[keep]


def build_graph(events: pd.DataFrame, rank: Any) -> Graph:
    """The dependency graph of one rank of a trace's event table (rank <NA>: a trace of no rank).

    Example:
        >>> from asynclab.trace import load_trace
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> bool(g.h_block.any()), len(g.g_start) > 100
        (True, True)
    """
    same = (events["rank"].isna() if pd.isna(rank) else (events["rank"] == rank).fillna(False)).to_numpy(dtype=bool)
    ev = events[same]
    host = ev[ev["device"].isna().to_numpy(dtype=bool)]
    calls = host[host["kind"] == "launch"].sort_values(["tid", "start_us"], kind="stable")
    calls = _top_level(calls).sort_values("start_us", kind="stable")
    work = ev[ev["kind"].isin(WORK_KINDS).to_numpy(dtype=bool) & ev["device"].notna().to_numpy(dtype=bool)]
    work = work.sort_values("start_us", kind="stable")
    hs, he = calls["start_us"].to_numpy(np.float64), calls["end_us"].to_numpy(np.float64)
    after = _ended_last_before(hs, he)
    origin = min(float(host["start_us"].min()), float(hs.min())) if len(hs) else float("nan")
    gap = np.where(after >= 0, hs - he[np.maximum(after, 0)], hs - origin)
    h_pos = pd.Series(np.arange(len(calls)), index=calls.index)
    launch = work["launch"].to_numpy(dtype=np.float64, na_value=np.nan)
    known = np.isfinite(launch) & np.isin(launch, calls.index.to_numpy(np.float64))
    g_launch = np.full(len(work), -1, dtype=np.int64)
    g_launch[known] = h_pos.loc[launch[known].astype(np.int64)].to_numpy(np.int64)
    gs, ge = work["start_us"].to_numpy(np.float64), work["end_us"].to_numpy(np.float64)
    g = _gpu_edges(work, gs, ge, g_launch, hs)
    block, own, waits = _blocking(calls, work, g_launch, hs, he, gs, ge)
    peer = latest_peer_start(events, work.index.to_numpy(np.int64))
    comm = (work["kind"] == "comm").to_numpy(dtype=bool) & np.isfinite(peer)
    seq = work.groupby("name", sort=False).cumcount().to_numpy()
    key = np.where(comm, work["name"].astype(str).to_numpy(dtype=object) + "#" + seq.astype(str), None)
    intrinsic = np.where(comm, ge - np.maximum(gs, np.where(comm, peer, 0.0)), np.nan)
    return Graph(hs, he, after, gap, he - hs, block, own, waits, calls.index.to_numpy(np.int64),
                 gs, ge, ge - gs, g_launch, *g[:5], work.index.to_numpy(np.int64), g[5], host, work,
                 key, np.where(comm, peer, np.nan), intrinsic, origin)


def _ended_last_before(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """For each interval, the one that ended last at or before it started (-1 if none)."""
    order = np.argsort(e, kind="stable")
    j = np.searchsorted(e[order], s + 1e-9, side="right") - 1
    return np.where(j >= 0, order[np.maximum(j, 0)], -1)


def launch_latency(free: np.ndarray) -> float:
    """The time (µs) from a launch call's start to its task's start on an idle stream: the 10th percentile of
    ``free`` (launch-to-start times of tasks no stream held), at most :data:`LAUNCH_LATENCY_US`, which it is
    where none are known.

    Example:
        >>> launch_latency(np.array([9.0, 10.0, 12.0, 300.0])), launch_latency(np.zeros(0))
        (9.3, 20.0)
    """
    if not len(free):
        return LAUNCH_LATENCY_US
    return float(min(np.percentile(free, 10), LAUNCH_LATENCY_US))


def _gpu_edges(work: pd.DataFrame, gs: np.ndarray, ge: np.ndarray, g_launch: np.ndarray,
               hs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Latency, stream predecessor and its gap, inferred cross-stream dependency and its gap, of GPU tasks."""
    n = len(work)
    prev = np.full(n, -1, dtype=np.int64)
    dev, stream = pd.factorize(work["device"])[0] + 1, pd.factorize(work["stream"].astype(str))[0] + 1
    lane = dev * (int(stream.max(initial=0)) + 1) + stream
    order = np.argsort(lane, kind="stable")
    same = lane[order][1:] == lane[order][:-1]
    prev[order[1:][same]] = order[:-1][same]
    p_end = np.where(prev >= 0, ge[np.maximum(prev, 0)], -np.inf)
    pgap = np.clip(gs - p_end, 0.0, None)
    by_stream = pgap <= HELD_US
    raw = np.where(g_launch >= 0, gs - hs[np.maximum(g_launch, 0)], np.inf)
    typical = launch_latency(raw[~by_stream & np.isfinite(raw)])
    lat = np.where(np.isfinite(raw), np.clip(raw, 0.0, None), 0.0)
    dep = np.full(n, -1, dtype=np.int64)
    held = ~by_stream & np.isfinite(raw) & (raw > typical + HELD_US)
    dep[held] = _ended_last_before_task(gs, ge, prev, np.flatnonzero(held))
    # launched while the task before it on its stream still ran, and held by nothing else: queued behind it, the
    # stream's own gap after it kept (NCCL's kernels, back to back on their stream, start tens of µs apart)
    queued = held & (dep < 0) & (prev >= 0) & (p_end > hs[np.maximum(g_launch, 0)])
    by_stream = by_stream | queued
    gated = by_stream | (dep >= 0)
    lat = np.where(gated, np.minimum(lat, typical), lat)
    dgap = np.where(dep >= 0, np.clip(gs - ge[np.maximum(dep, 0)], 0.0, None), 0.0)
    orphan = ~np.isfinite(raw)  # no known launch: it keeps its distance from the task before it on its stream
    return lat, prev, np.where(by_stream | orphan, pgap, 0.0), dep, dgap, typical


def _ended_last_before_task(gs: np.ndarray, ge: np.ndarray, prev: np.ndarray, which: np.ndarray) -> np.ndarray:
    """For each task of ``which``, the task other than its stream predecessor that ended last by its start, where
    that was at most :data:`HELD_US` before it (-1: none)."""
    order = np.argsort(ge, kind="stable")
    j = np.searchsorted(ge[order], gs[which] + 1e-6, side="right") - 1
    j = np.where((j >= 0) & (order[np.maximum(j, 0)] == prev[which]), j - 1, j)  # a permutation: one skip at most
    cand = np.where(j >= 0, order[np.maximum(j, 0)], -1)
    near = (cand >= 0) & (gs[which] - ge[np.maximum(cand, 0)] <= HELD_US)
    return np.where(near, cand, -1)


def _blocking(calls: pd.DataFrame, work: pd.DataFrame, g_launch: np.ndarray, hs: np.ndarray, he: np.ndarray,
              gs: np.ndarray, ge: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
    """Which calls block the host, their own cost after the wait, and the GPU tasks each waits for: those launched
    since the previous blocking call (or by it) that had ended when it returned."""
    block = name_matches(calls["name"], BLOCKING)
    pageable = name_matches(work["name"], "Pageable")
    by_copy = g_launch[pageable & (g_launch >= 0)]
    block[by_copy] = True
    own = he - hs
    waits: list = [None] * len(calls)
    by_launch = np.argsort(g_launch, kind="stable")
    blocks = np.flatnonzero(block)
    los = np.searchsorted(g_launch[by_launch], np.concatenate([[-1], blocks[:-1]]), "right").tolist()
    his = np.searchsorted(g_launch[by_launch], blocks, "right").tolist()
    for i, lo, hi in zip(blocks.tolist(), los, his):
        cand = by_launch[lo:hi]
        w = np.sort(cand[ge[cand] <= he[i] + 1.0])
        waits[i] = w.tolist()
        done = float(ge[w].max()) if len(w) else -np.inf
        if done > hs[i]:
            own[i] = max(0.0, he[i] - done)
    return block, own, waits


def replay(g: Graph, peer_start: np.ndarray | None = None,
           floor: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Simulate a graph: (host start, host end, GPU start, GPU end), all in µs.

    A host call starts when the call before it ends plus the host time between them; a blocking call ends at the
    later of its start plus its own cost and the end of the GPU work it waits for plus that cost; a GPU task starts
    at the latest of its launch plus latency, its stream's previous task and the task it waited for; a collective
    ends its own time after the last rank joined it (``peer_start``, per task; the trace's when not given); a task
    with a ``floor`` (per task, NaN for none) starts no sooner. The unchanged graph reproduces the trace.

    Example:
        >>> from asynclab.trace import load_trace
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> hs, he, gs, ge = replay(g)
        >>> bool(np.allclose(ge, g.g_end, atol=1e-3))
        True
    """
    peer = g.g_peer_start if peer_start is None else peer_start
    steps = _replaying(g, floor, peer, set())
    try:
        next(steps)
    except StopIteration as done:
        return done.value
    raise AssertionError("a replay that asks for nothing asked")  # pragma: no cover


def comm_keys(graphs: list[Graph]) -> list[np.ndarray]:
    """Each graph's collective key per GPU task (``g_comm_key``; None for a task that is no collective).

    Example:
        >>> from asynclab.trace import load_trace
        >>> tr = load_trace("tests/fixtures/diagnose/exposed_comm-bad")
        >>> keys = comm_keys([build_graph(tr.events, r) for r in (0, 1)])
        >>> [k for k in keys[0] if k][0] == [k for k in keys[1] if k][0], [k for k in keys[0] if k][0][-2:]
        (True, '#0')
    """
    return [g.g_comm_key if g.g_comm_key is not None else np.full(len(g.g_start), None) for g in graphs]


def replay_together(graphs: list[Graph], floors: list) -> list[tuple]:
    """Simulate the graphs of the ranks of one run together (see :func:`replay`, with ``floors``): each rank runs
    until a collective the other ranks of this run also hold, waits there for them, and the collective ends its own
    time after the last of them joined it. Where the ranks wait at different collectives (an order the trace does not
    keep), the one that started first in the trace goes on with the trace's time for its last peer.

    Example:
        >>> from asynclab.trace import load_trace
        >>> tr = load_trace("tests/fixtures/diagnose/exposed_comm-bad")
        >>> gs = [build_graph(tr.events, r) for r in (0, 1)]
        >>> [bool(np.allclose(r[3], g.g_end, atol=5.0)) for r, g in zip(replay_together(gs, [None, None]), gs)]
        [True, True]
    """
    keys = comm_keys(graphs)
    members: dict = {}
    for ks in keys:
        for k in set(ks.tolist()) - {None}:
            members[k] = members.get(k, 0) + 1
    asks = [{i for i, k in enumerate(ks.tolist()) if members.get(k, 0) > 1} for ks in keys]
    runs = [_replaying(g, f, g.g_peer_start, a) for g, f, a in zip(graphs, floors, asks)]
    results: list = [None] * len(graphs)
    waiting: dict = {}

    def go(r: int, value: float | None) -> None:
        try:
            i, t = runs[r].send(value)
            waiting[r] = (keys[r][i], i, t)
        except StopIteration as done:
            results[r] = done.value

    for r in range(len(graphs)):
        go(r, None)
    while waiting:
        at: dict = {}
        for r, (k, _, t) in waiting.items():
            at.setdefault(k, []).append((r, t))
        ready = [k for k, rs in at.items() if len(rs) == members[k]]
        for k in ready:
            join = max(t for _, t in at[k])
            for r, _ in at[k]:
                del waiting[r]
                go(r, join)
        if not ready:
            r = min(waiting, key=lambda q: graphs[q].g_start[waiting[q][1]])
            _, i, t = waiting.pop(r)
            trace_peer = float(graphs[r].g_peer_start[i])
            go(r, max(t, trace_peer) if np.isfinite(trace_peer) else t)
    return results


#: The graph's arrays a replay reads as lists, in the order :func:`_replaying` unpacks them.
_LISTED = ("h_start", "h_end", "g_start", "g_end", "h_after", "h_gap", "h_dur", "h_own", "h_block", "g_launch", "g_lat",
           "g_prev", "g_gap", "g_dep", "g_dgap", "g_dur")


def _order(g: Graph) -> tuple[list, list]:
    """What a replay visits, in turn: (what: 1 a host call, 0 a blocking call's end, 2 a GPU task; its position), by
    the trace's time; at one time a wait's end, then host calls, then GPU tasks."""
    nh, ng = len(g.h_start), len(g.g_start)
    block = np.flatnonzero(g.h_block)
    launch_s = np.where(g.g_launch >= 0, g.h_start[np.maximum(g.g_launch, 0)], -np.inf)
    keys = np.concatenate([g.h_start, g.h_end[block], np.maximum(g.g_start, launch_s)])
    what = np.concatenate([np.ones(nh, np.int8), np.zeros(len(block), np.int8), np.full(ng, 2, np.int8)])
    idx = np.concatenate([np.arange(nh), block, np.arange(ng)])
    order = np.lexsort((what, keys))
    return what[order].tolist(), idx[order].tolist()


def _replaying(g: Graph, floor: np.ndarray | None, peer: np.ndarray, asks: set):
    """:func:`replay` as a generator: at each collective of ``asks`` it yields (task, its start) and takes the time
    its last rank joined it; the others join at ``peer`` (NaN: no peers). Returns the four arrays."""
    order = g.remembered("order", (g.h_start, g.h_end, g.h_block, g.g_start, g.g_launch), lambda: _order(g))
    joins = {i: float(peer[i]) for i in np.flatnonzero(np.isfinite(peer)).tolist()}
    joins.update({i: None for i in asks})
    own_time = g.g_intrinsic.tolist() if joins else []
    floors = None if floor is None else floor.tolist()  # NaN: none (no comparison with NaN holds)
    inf = float("inf")
    hs0, he0, gs0, ge0, after, gap, dur, own, blk, launch, lat, prev, pgap, dep, dgap, gdur = (
        g.remembered(k, (getattr(g, k),), getattr(g, k).tolist) for k in _LISTED)
    HS, HE, GS, GE = list(hs0), list(he0), list(gs0), list(ge0)  # the original until replayed
    waits_of = g.h_waits
    origin = g.h_origin
    for w, i in zip(*order):
        if w == 2:  # a GPU task: after its launch, its stream's previous task and the task it waited for
            k = launch[i]
            p = prev[i]
            if k >= 0:
                t = HS[k] + lat[i]
            else:
                t = gs0[i] if p < 0 else -inf
            if p >= 0:
                x = GE[p] + pgap[i]
                if x > t:
                    t = x
            k = dep[i]
            if k >= 0:
                x = GE[k] + dgap[i]
                if x > t:
                    t = x
            if floors is not None and floors[i] > t:
                t = floors[i]
            GS[i] = t
            GE[i] = t + gdur[i]
            if joins and i in joins:
                joined = joins[i] if joins[i] is not None else (yield i, t)
                GE[i] = max(t, joined) + own_time[i]
        elif w == 1:  # a host call: the host time after the call before it
            a = after[i]
            HS[i] = origin + gap[i] if a < 0 else HE[a] + gap[i]  # build_graph sets origin where there are calls
            if not blk[i]:
                HE[i] = HS[i] + dur[i]
        else:  # a blocking call returns once the GPU work it waits for is done
            waits = waits_of[i]
            done = max([GE[k] for k in waits], default=None) if waits is not None else None
            HE[i] = HS[i] + dur[i] if done is None else max(HS[i] + own[i], done + own[i])
    return tuple(np.array(v, dtype=np.float64) for v in (HS, HE, GS, GE))


def replayed_span(g: Graph, result: tuple, lo: float, hi: float, host_hi: float | None = None,
                  lag: float = 0.0) -> float:
    """The replayed time (µs) of the trace's span ``[lo, hi)``: from the later of the host's moment at ``lo`` (plus
    ``lag``: how far the GPU ran behind the host when the span began) and the end of the GPU work started before it,
    to the later of the host's moment at ``host_hi`` (where the host ended the span; ``hi`` if not given) and the end
    of the GPU work started in the span (each less what of that work ran past ``lo`` or ``hi`` in the trace). A host
    that runs ahead of the GPU adds nothing: the span is the GPU's.

    Example:
        >>> from asynclab.trace import load_trace
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> round(replayed_span(g, replay(g), 0.0, 10.0), 3)
        10.0
    """
    start, host_end, gpu_end = span_ends(g, result, lo, hi, host_hi)
    return max(host_end, gpu_end) - max(start, host_at(g, result, lo) + lag)


def span_ends(g: Graph, result: tuple, lo: float, hi: float, host_hi: float | None = None) -> tuple[float, ...]:
    """The replayed moments of the span ``[lo, hi)`` that :func:`replayed_span` measures: (its start, where the host
    ended it, where the GPU ended the work started in it; -inf where it started none).

    Example:
        >>> from asynclab.trace import load_trace
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> [round(t, 3) for t in span_ends(g, replay(g), 0.0, 10.0)]
        [0.0, 10.0, -inf]
    """
    GE = result[3]
    start = host_at(g, result, lo)
    host_end = host_at(g, result, hi if host_hi is None else min(host_hi, hi))
    gpu_end = -np.inf
    before, inside = g.g_start < lo, (g.g_start >= lo) & (g.g_start < hi)
    if before.any():  # a host far ahead starts the span no sooner than the GPU ends the work before it
        start = max(start, float(np.nanmax(GE[before])) - (max(float(g.g_end[before].max()), lo) - lo))
    if inside.any():
        gpu_end = float(np.nanmax(GE[inside])) - (max(float(g.g_end[inside].max()), hi) - hi)
    return start, host_end, gpu_end


def host_at(g: Graph, result: tuple, t: float) -> float:
    """The replayed moment of the host's original time ``t``, counted from the last host call that started by then.

    Example:
        >>> from asynclab.trace import load_trace
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> t = float(g.h_start[5]) + 1.0
        >>> round(host_at(g, replay(g), t) - t, 6)
        0.0
    """
    HS, HE = result[0], result[1]
    k = int(np.searchsorted(g.h_start, t, side="right")) - 1
    if k < 0:
        return t
    if t >= g.h_end[k]:
        return float(HE[k]) + (t - float(g.h_end[k]))
    return float(HS[k]) + (t - float(g.h_start[k]))


def host_time_in(g: Graph, starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """How much of each host call's preceding gap and of its own duration falls in the ranges ``[starts, ends)``
    (merged), counting only calls that start in ``[lo, hi)``: (gap part, duration part), in µs.

    Example:
        >>> from asynclab.trace import load_trace
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> gap, dur = host_time_in(g, np.array([0.0]), np.array([1.0]), 0.0, 1.0)
        >>> float(gap.sum() + dur.sum())
        0.0
    """
    rs, re_ = union(np.asarray(starts, np.float64), np.asarray(ends, np.float64))
    cum = np.concatenate([[0.0], np.cumsum(re_ - rs)])

    def _covered(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.clip(_cum_at(rs, re_, cum, b) - _cum_at(rs, re_, cum, a), 0.0, None)

    prev_end = g.prev_end()
    mine = (g.h_start >= lo) & (g.h_start < hi)
    gap = np.where(mine, np.minimum(_covered(prev_end, g.h_start), np.clip(g.h_gap, 0, None)), 0.0)
    dur = np.where(mine, _covered(g.h_start, g.h_end), 0.0)
    return gap, dur


def _cum_at(rs: np.ndarray, re_: np.ndarray, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Length of the ranges' union before each time ``t``."""
    if not len(rs):
        return np.zeros(len(t))
    k = np.searchsorted(rs, t, side="right") - 1
    kk = np.maximum(k, 0)
    part = np.where(k >= 0, cum[kk] + np.clip(np.minimum(t, re_[kk]) - rs[kk], 0.0, None), 0.0)
    return part
