"""Why a GPU sat idle: every idle stretch of one GPU's steps given a cause (a finding kind), vectorised over the trace."""
from __future__ import annotations

import re
from dataclasses import dataclass
import numpy as np
import pandas as pd

from asynclab.trace.analysis.thresholds import (GPU_GAP_US, HELD_US, LAUNCH_STRETCH_FACTOR, MANY_SMALL_COPIES,
                                                SMALL_COPY_BYTES, UNDERFILL_MIN_US, WAKE_US)
from asynclab.trace.analysis.collectives import is_point_to_point, latest_peer_start
from asynclab.trace.read.events import name_matches
from asynclab.trace.read.intervals import union

__all__ = ["GpuView", "Pieces", "idle_pieces", "underfilled_pieces", "thin", "SMALL_COPY_BYTES", "MANY_SMALL_COPIES",
           "LAUNCH_STRETCH_FACTOR"]


_BLOCKING = re.compile(r"(?:Synchroni[sz]e|Memcpy|Free|Malloc)")
_ALLOC = re.compile(r"(?:Free|Malloc)")

# codes of what the GPU did in a stretch (compute beats comm beats copies)
COMPUTE, COMM, COPY, EMPTY = 0, 1, 2, 3


@dataclass
class GpuView:
    """One GPU's rows and its host's rows, within the analysed steps ``[lo, hi)``."""

    work: pd.DataFrame    # GPU rows of this device (compute, memset, comm, copies), by start
    host: pd.DataFrame    # host rows of the same process (runtime calls, ops, annotations, python)
    others: pd.DataFrame  # compute rows of the other GPUs of the same process (pipeline stages)
    events: pd.DataFrame  # the whole trace's events (to follow launch links)
    lo: float
    hi: float
    n_steps: int


@dataclass
class Pieces:
    """Idle stretches with their cause: parallel arrays; ``row`` is a related event's index (-1 if none)
    and ``at``/``tid`` the host moment and thread whose context (op, Python line) explains it."""

    kind: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    row: np.ndarray
    at: np.ndarray
    tid: np.ndarray

    @staticmethod
    def empty() -> "Pieces":
        return Pieces(*(np.zeros(0, dtype=d) for d in (object, float, float, np.int64, float, object)))

    @staticmethod
    def concat(parts: list["Pieces"]) -> "Pieces":
        parts = [p for p in parts if len(p.kind)] or [Pieces.empty()]
        return Pieces(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                        ("kind", "start", "dur", "row", "at", "tid")))


def _stretches(view: GpuView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, code) of maximal stretches of ``[lo, hi)`` in which the GPU computed, only
    communicated, only copied, or did nothing."""
    w = view.work
    kind = w["kind"].to_numpy(dtype=object)
    groups = [np.isin(kind, ("compute", "memset")), kind == "comm", np.isin(kind, ("h2d", "d2h", "d2d", "p2p"))]
    s = np.clip(w["start_us"].to_numpy(np.float64), view.lo, view.hi)
    e = np.clip(w["end_us"].to_numpy(np.float64), view.lo, view.hi)
    t = np.concatenate([[view.lo, view.hi], s, e])
    t.sort(kind="stable")
    t = np.unique(t)
    mid = (t[:-1] + t[1:]) / 2
    code = np.full(len(mid), EMPTY)
    for c in (COPY, COMM, COMPUTE):  # later assignments win: compute over comm over copies
        us, ue = union(s[groups[c]], e[groups[c]])
        if len(us):
            j = np.searchsorted(us, mid, side="right") - 1
            hit = (j >= 0) & (mid < ue[np.maximum(j, 0)])
            code[hit] = c
    if not len(code):
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(np.diff(code)) + 1
    first = np.concatenate([[0], change])
    last = np.concatenate([change, [len(code)]])
    return t[first], t[last], code[first]


def _next_work(view: GpuView, at: np.ndarray) -> np.ndarray:
    """Position in ``view.work`` of the first GPU row starting at or after each time (-1 if none)."""
    starts = view.work["start_us"].to_numpy(np.float64)
    j = np.searchsorted(starts, at - 1e-6, side="left")
    return np.where(j < len(starts), j, -1)


def _launch_end(view: GpuView, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For work rows at ``pos``: their host launch's end (NaN if unknown), thread id and name."""
    launch = view.work["launch"].to_numpy(dtype=np.float64, na_value=np.nan)
    li = np.where(pos >= 0, launch[np.maximum(pos, 0)], np.nan)
    ok = np.isfinite(li)
    end = np.full(len(pos), np.nan)
    tid = np.full(len(pos), None, dtype=object)
    name = np.full(len(pos), "", dtype=object)
    if ok.any():
        rows = view.events.loc[li[ok].astype(np.int64)]
        end[ok] = rows["end_us"].to_numpy(np.float64)
        tid[ok] = rows["tid"].to_numpy(dtype=object)
        name[ok] = rows["name"].to_numpy(dtype=object)
    return end, tid, name


def idle_pieces(view: GpuView, small_copies_per_step: float) -> Pieces:
    """Every stretch of ``[lo, hi)`` in which the GPU computed nothing, with its cause: exposed
    communication, a copy (pageable, tiny, waited for by another stream, or just exposed), a stage
    held back by a dependency, a host call that waited for the GPU, or the host's next launch.
    :func:`asynclab.diagnose.diagnose` turns them into findings."""
    s, e, code = _stretches(view)
    parts = []
    m = code == COMM
    parts.append(_comm_pieces(view, s[m], e[m]))
    m = code == COPY
    parts.append(_copy_pieces(view, s[m], e[m], small_copies_per_step))
    m = code == EMPTY
    parts.append(_empty_pieces(view, s[m], e[m], small_copies_per_step))
    return Pieces.concat(parts)


def _comm_pieces(view: GpuView, s: np.ndarray, e: np.ndarray) -> Pieces:
    """Stretches of communication alone: until the last rank joined the collective, the wait for a late rank
    (rank_skew); then a stage's send/receive waiting for its peer (pipeline_bubble), or a collective's own
    time (exposed_comm)."""
    rows = _covering(view, s, ("comm",))
    p2p = is_point_to_point(view.events, view.host, rows)
    kind = np.where(p2p, "pipeline_bubble", "exposed_comm").astype(object)
    joined = np.clip(np.nan_to_num(latest_peer_start(view.events, rows), nan=-np.inf), s, e)
    skew = ~p2p & (joined > s)
    none = np.full(len(s), None, dtype=object)
    late = Pieces(np.full(int(skew.sum()), "rank_skew", dtype=object), s[skew], (joined - s)[skew],
                  rows[skew], s[skew], none[skew])
    start = np.where(skew, joined, s)
    keep = e > start
    return Pieces.concat([late, Pieces(kind[keep], start[keep], (e - start)[keep], rows[keep], start[keep],
                                       none[keep])])


def _covering(view: GpuView, at: np.ndarray, kinds: tuple[str, ...]) -> np.ndarray:
    """Index label of a row of ``kinds`` running at each time (the latest started; -1 if none)."""
    rows = view.work[view.work["kind"].isin(kinds)]
    starts = rows["start_us"].to_numpy(np.float64)
    j = np.searchsorted(starts, at + 1e-6, side="right") - 1
    labels = rows.index.to_numpy(np.int64)
    return np.where(j >= 0, labels[np.maximum(j, 0)] if len(labels) else -1, -1)


def _copy_class(view: GpuView, rows: np.ndarray, small_copies_per_step: float) -> np.ndarray:
    """pageable_copy, small_copies or exposed_copy for copy rows (index labels)."""
    ev = view.events
    names = ev.loc[rows, "name"].to_numpy(dtype=object) if len(rows) else np.zeros(0, dtype=object)
    kinds = ev.loc[rows, "kind"].to_numpy(dtype=object) if len(rows) else np.zeros(0, dtype=object)
    nbytes = ev.loc[rows, "bytes"].to_numpy(dtype=np.float64, na_value=np.nan) if len(rows) else np.zeros(0)
    out = np.full(len(rows), "exposed_copy", dtype=object)
    tiny = (kinds == "h2d") & (nbytes <= SMALL_COPY_BYTES)
    if small_copies_per_step >= MANY_SMALL_COPIES:
        out[tiny] = "small_copies"
    pageable = np.array(["Pageable" in str(n) for n in names], dtype=bool)
    out[pageable & ~(tiny & (small_copies_per_step >= MANY_SMALL_COPIES))] = "pageable_copy"
    return out


def _copy_pieces(view: GpuView, s: np.ndarray, e: np.ndarray, small_copies_per_step: float) -> Pieces:
    copy_rows = _covering(view, s, ("h2d", "d2h", "d2d", "p2p"))
    kind = _copy_class(view, copy_rows, small_copies_per_step)
    # compute already launched on another stream, held until the copy ended: a stream waited for it
    nxt = _next_compute(view, e)
    lend, tid, _ = _launch_end(view, nxt)
    streams = view.work["stream"].to_numpy(dtype=object)
    copy_stream = view.events.loc[copy_rows, "stream"].to_numpy(dtype=object) if len(copy_rows) else copy_rows
    held = np.isfinite(lend) & (lend < s - HELD_US) & (nxt >= 0)
    held &= np.array([streams[n] != c for n, c in zip(np.maximum(nxt, 0), copy_stream)], dtype=bool)
    kind[held & (kind == "exposed_copy")] = "stream_wait"
    return Pieces(kind, s, e - s, copy_rows, s, np.full(len(s), None, dtype=object))


def _next_compute(view: GpuView, at: np.ndarray) -> np.ndarray:
    """Position in ``view.work`` of the first compute row starting at or after each time (-1 if none)."""
    is_c = np.flatnonzero(view.work["kind"].to_numpy(dtype=object) == "compute")
    starts = view.work["start_us"].to_numpy(np.float64)[is_c]
    j = np.searchsorted(starts, at - 1e-6, side="left")
    return np.where(j < len(is_c), is_c[np.minimum(j, len(is_c) - 1)] if len(is_c) else -1, -1)


def _blocking_calls(view: GpuView) -> pd.DataFrame:
    h = view.host
    calls = h[(h["kind"] == "launch").to_numpy(dtype=bool)]
    return calls[name_matches(calls["name"], _BLOCKING)].sort_values("start_us")


def _blocked_by(view: GpuView, s: np.ndarray) -> np.ndarray:
    """For each time the GPU ran dry: the index label of a blocking host call (sync, copy, free) that was
    waiting across it and returned within WAKE_US (-1 if none)."""
    calls = _blocking_calls(view)
    out = np.full(len(s), -1, dtype=np.int64)
    if calls.empty or not len(s):
        return out
    cs, ce = calls["start_us"].to_numpy(np.float64), calls["end_us"].to_numpy(np.float64)
    labels = calls.index.to_numpy(np.int64)
    j = np.searchsorted(cs, s, side="left") - 1
    for back in range(4):  # a few calls on other threads may start between the blocking one and the drain
        k = j - back
        ok = (k >= 0) & (out < 0)
        kk = np.maximum(k, 0)
        hit = ok & (ce[kk] >= s - 1.0) & (ce[kk] <= s + WAKE_US)
        out[hit] = labels[kk[hit]]
    return out


def _empty_pieces(view: GpuView, s: np.ndarray, e: np.ndarray, small_copies_per_step: float) -> Pieces:
    """Stretches in which the GPU did nothing at all: held work waited for a dependency; otherwise the GPU waited
    for the host, whose time in a DataLoader, the allocator or the profiler is claimed first, the rest going to
    the host call that waited for the GPU before it (host_sync and its kin) or to the launches."""
    nxt = _next_work(view, e)
    lend, tid, lname = _launch_end(view, nxt)
    work_labels = view.work.index.to_numpy(np.int64)
    nxt_label = np.where(nxt >= 0, work_labels[np.maximum(nxt, 0)] if len(work_labels) else -1, -1)
    kind = np.full(len(s), "", dtype=object)
    in_graph = np.array(["Graph" in str(n) for n in lname], dtype=bool)
    held = np.isfinite(lend) & (lend < s - HELD_US)
    kind[held & (in_graph | (e - s < GPU_GAP_US))] = "unexplained"  # inside a graph, or the GPU's own gap
    kind[held & (kind == "")] = "pipeline_bubble" if len(view.others) else "stream_wait"
    done = Pieces(kind[held], s[held], (e - s)[held], nxt_label[held], s[held], tid[held])
    free = ~held
    blocker = _blocked_by(view, s[free])
    waited = blocker >= 0
    bkind = np.full(len(blocker), "", dtype=object)
    bkind[waited] = _blocked_kind(view, blocker[waited], s[free][waited], small_copies_per_step)
    at, btid = s[free].copy(), tid[free].copy()
    if waited.any():
        at[waited] = view.events.loc[blocker[waited], "start_us"].to_numpy(np.float64)
        btid[waited] = view.events.loc[blocker[waited], "tid"].to_numpy(dtype=object)
    cause = (bkind, np.where(waited, blocker, nxt_label[free]), at, btid)
    return Pieces.concat([done, _host_bound(view, s[free], e[free], cause)])


def _blocked_kind(view: GpuView, blocker: np.ndarray, s: np.ndarray, small_copies_per_step: float) -> np.ndarray:
    """What a blocking call waited for: the allocator, a copy (pageable, tiny) or anything (host_sync)."""
    names = view.events.loc[blocker, "name"].to_numpy(dtype=object)
    out = np.full(len(blocker), "host_sync", dtype=object)
    last = _last_work_before(view, s)
    known = last >= 0
    copy_kind = np.full(len(last), "", dtype=object)
    copy_kind[known] = _copy_class(view, last[known], small_copies_per_step)
    kinds = np.full(len(last), "", dtype=object)
    kinds[known] = view.events.loc[last[known], "kind"].to_numpy(dtype=object)
    is_h2d = kinds == "h2d"
    out[is_h2d & (copy_kind == "pageable_copy")] = "pageable_copy"
    out[is_h2d & (copy_kind == "small_copies")] = "small_copies"
    out[np.array([bool(_ALLOC.search(str(n))) for n in names], dtype=bool)] = "alloc_churn"
    return out


def _last_work_before(view: GpuView, at: np.ndarray) -> np.ndarray:
    """Index label of the GPU row that ended last at or before each time."""
    w = view.work
    ends = w["end_us"].to_numpy(np.float64)
    order = np.argsort(ends, kind="stable")
    j = np.searchsorted(ends[order], at + 1e-6, side="right") - 1
    labels = w.index.to_numpy(np.int64)[order]
    return np.where(j >= 0, labels[np.maximum(j, 0)] if len(labels) else -1, -1)


def _host_ranges(view: GpuView, pattern: str, kinds: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    h = view.host
    at = np.flatnonzero(h["kind"].isin(kinds).to_numpy(dtype=bool))  # two columns of the rows, not the whole rows
    at = at[name_matches(h["name"].iloc[at], pattern)]
    return union(h["start_us"].to_numpy(np.float64)[at], h["end_us"].to_numpy(np.float64)[at])


def _clip_to(s: np.ndarray, e: np.ndarray, rs: np.ndarray, re_: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of stretches [s, e) that fall in the disjoint ranges [rs, re_): (start, end, stretch position)."""
    if not len(rs) or not len(s):
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    t = np.concatenate([s, e, rs, re_])
    t = np.unique(t)
    mid = (t[:-1] + t[1:]) / 2
    i = np.searchsorted(s, mid, side="right") - 1
    in_s = (i >= 0) & (mid < e[np.maximum(i, 0)])
    k = np.searchsorted(rs, mid, side="right") - 1
    in_r = (k >= 0) & (mid < re_[np.maximum(k, 0)])
    m = in_s & in_r
    return t[:-1][m], t[1:][m], i[m]


def _host_bound(view: GpuView, s: np.ndarray, e: np.ndarray, cause: tuple) -> Pieces:
    """Stretches the GPU waited for the host: the host's time in the profiler's own code (``profiler``, counted as
    unexplained), in a DataLoader, in the allocator or beside another GPU's stage is claimed first; the rest goes
    to the call that waited for the GPU just before (``cause``: its kind, or "" where none did, then the row, the
    moment and the thread that explain it), or to the launches (launch_bound when the kernels are shorter than
    their launches and the stretch lasts a few launches at most, else unexplained)."""
    kinds, rows, ats, tids = cause
    parts, left = [], (s.copy(), e.copy(), np.arange(len(s)))
    claims = [("profiler", _host_ranges(view, r"^torch/profiler/", ("python",))),
              ("dataloader_stall", _host_ranges(view, r"DataLoader.*__next__", ("annotation", "cpu_op", "python"))),
              ("alloc_churn", _host_ranges(view, r"^(?:cudaMalloc|cudaFree|hipMalloc|hipFree)", ("launch",)))]
    if len(view.others):
        claims.append(("pipeline_bubble", union(view.others["start_us"].to_numpy(np.float64),
                                                  view.others["end_us"].to_numpy(np.float64))))
    for name, (rs, re_) in claims:
        ps, pe, pos = _clip_to(left[0], left[1], rs, re_)
        if len(ps):
            i = left[2][pos]
            parts.append(Pieces(np.full(len(ps), name, dtype=object), ps, pe - ps, rows[i], (ps + pe) / 2, tids[i]))
            left = _subtract(left, ps, pe)
    ls, le, lp = left
    per_launch = _launch_interval_if_bound(view)
    by_launch = (le - ls <= LAUNCH_STRETCH_FACTOR * per_launch) if per_launch else np.zeros(len(ls), dtype=bool)
    rest = np.where(kinds[lp] != "", kinds[lp], np.where(by_launch, "launch_bound", "unexplained"))
    parts.append(Pieces(rest.astype(object), ls, le - ls, rows[lp], np.where(kinds[lp] != "", ats[lp], (ls + le) / 2),
                        tids[lp]))
    return Pieces.concat(parts)


def _subtract(left: tuple[np.ndarray, np.ndarray, np.ndarray], ps: np.ndarray,
              pe: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stretches ``left`` minus the (disjoint, sorted) parts ``[ps, pe)`` taken out of them."""
    s, e, pos = left
    t = np.unique(np.concatenate([s, e, ps, pe]))
    if len(t) < 2:
        return s[:0], e[:0], pos[:0]
    mid = (t[:-1] + t[1:]) / 2
    i = np.searchsorted(s, mid, side="right") - 1
    in_s = (i >= 0) & (mid < e[np.maximum(i, 0)])
    k = np.searchsorted(ps, mid, side="right") - 1
    taken = (k >= 0) & (mid < pe[np.maximum(k, 0)]) if len(ps) else np.zeros(len(mid), dtype=bool)
    m = in_s & ~taken
    return t[:-1][m], t[1:][m], pos[i[m]]


def _launch_interval_if_bound(view: GpuView) -> float:
    """The host's median time per launch (µs) where this GPU's kernels (the median one) ran for less than it (0.0
    where they did not): the time from one launch of a kernel to the next on the launching thread, op overhead and
    Python included. A CUDA graph's kernels share one launch, so they are left out."""
    k = view.work[(view.work["kind"] == "compute") & view.work["launch"].notna()]
    launches = view.events.loc[k["launch"].astype(np.int64)]
    eager = ~name_matches(launches["name"], "Graph")
    if eager.sum() < 2:
        return 0.0
    launches = launches[eager].drop_duplicates()
    per_launch = [np.diff(np.sort(g["start_us"].to_numpy(np.float64))) for _, g in launches.groupby("tid")]
    per_launch = np.concatenate(per_launch) if per_launch else np.zeros(0)
    if not len(per_launch):
        return 0.0
    median = float(np.median(per_launch))
    return median if float(np.median(k["dur_us"].to_numpy(np.float64)[eager])) < median else 0.0


def thin(blocks: np.ndarray, dur_us: np.ndarray, sms: int) -> np.ndarray:
    """Which kernels leave SMs empty and last long enough to matter: fewer blocks than ``sms``, and at least
    :data:`UNDERFILL_MIN_US` (a kernel of unknown blocks is not).

    Example:
        >>> thin(np.array([8.0, 264.0, np.nan, 8.0]), np.array([300.0, 300.0, 300.0, 2.0]), 132).tolist()
        [True, False, False, False]
    """
    return np.isfinite(blocks) & (blocks < sms) & (dur_us >= UNDERFILL_MIN_US)


def underfilled_pieces(view: GpuView, sms: int | None) -> Pieces:
    """Stretches in which one kernel ran alone with fewer blocks than SMs: the empty SMs' share of them."""
    k = view.work[view.work["kind"] == "compute"]
    if sms is None or k.empty or k["blocks"].isna().all():
        return Pieces.empty()
    s = np.clip(k["start_us"].to_numpy(np.float64), view.lo, view.hi)
    e = np.clip(k["end_us"].to_numpy(np.float64), view.lo, view.hi)
    t = np.unique(np.concatenate([s, e]))
    if len(t) < 2:
        return Pieces.empty()
    d = np.zeros(len(t))
    np.add.at(d, np.searchsorted(t, s), 1)
    np.add.at(d, np.searchsorted(t, e), -1)
    alone = np.cumsum(d)[:-1] == 1
    mid = (t[:-1] + t[1:]) / 2
    j = np.searchsorted(s, mid, side="right") - 1
    reach = np.maximum.accumulate(e)
    arg = _running_argmax(e)
    j = np.where(e[np.maximum(j, 0)] > mid, j, arg[np.maximum(j, 0)])
    blocks = k["blocks"].to_numpy(dtype=np.float64, na_value=np.nan)[j]
    dur = k["dur_us"].to_numpy(np.float64)[j]
    m = alone & thin(blocks, dur, sms) & (reach[np.maximum(j, 0)] > 0)
    lost = (t[1:] - t[:-1])[m] * (1 - blocks[m] / sms)
    rows = k.index.to_numpy(np.int64)[j[m]]
    return Pieces(np.full(int(m.sum()), "underfilled_gpu", dtype=object), t[:-1][m], lost, rows, t[:-1][m],
                  np.full(int(m.sum()), None, dtype=object))


def _running_argmax(a: np.ndarray) -> np.ndarray:
    """For each position, the position of the largest value so far."""
    idx = np.arange(len(a))
    best = np.maximum.accumulate(a)
    is_new = a >= best
    return np.maximum.accumulate(np.where(is_new, idx, 0))
