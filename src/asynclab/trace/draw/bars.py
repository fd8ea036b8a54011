"""A timeline's bars: events put into sub-lanes so that none overlaps another in one, merged where they touch at the
figure's resolution, and the short ones binned per pixel, so that a timeline of 400k events draws a few thousand bars
that still show every kind (:func:`asynclab.trace.draw.timeline.draw_timeline` draws them)."""
from __future__ import annotations

import heapq

import numpy as np

__all__ = ["sublanes", "merge_bars", "pixel_bars", "MAX_SUBLANES", "OVERLAP_TOL_US"]

#: The most sub-lanes a lane is split into (overlapping events beyond it share the last).
MAX_SUBLANES = 8
#: Overlaps up to this (µs) are the trace's rounding (ns to µs), not overlaps.
OVERLAP_TOL_US = 0.01


def sublanes(start: np.ndarray, end: np.ndarray, tol: float = OVERLAP_TOL_US) -> np.ndarray:
    """Greedy interval partitioning (events sorted by start): the fewest sub-lanes with no overlap
    inside one; beyond ``MAX_SUBLANES`` the last sub-lane takes the rest (drawn, not dropped).
    Overlaps up to ``tol`` µs are rounding noise of the trace (ns -> µs), not overlaps.

    Example:
        >>> sublanes(np.array([0.0, 1.0, 5.0]), np.array([4.0, 2.0, 6.0])).tolist()
        [0, 1, 0]
    """
    n = len(start)
    out = np.zeros(n, dtype=np.int64)
    if n < 2:
        return out
    reach = np.maximum.accumulate(end)
    if not (start[1:] + tol < reach[:-1]).any():
        return out
    busy: list[tuple[float, int]] = []
    free: list[int] = []
    nsub = 0
    for i in range(n):
        s = start[i]
        while busy and busy[0][0] <= s + tol:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            k = heapq.heappop(free)
        else:
            k = nsub
            nsub += 1
        out[i] = k
        heapq.heappush(busy, (end[i], k))
    return np.minimum(out, MAX_SUBLANES - 1)


def merge_bars(key: np.ndarray, start: np.ndarray, end: np.ndarray, px: float) -> tuple[np.ndarray, ...]:
    """Merge, within each key, intervals that overlap or lie less than one pixel (``px`` µs) apart,
    then widen every bar to at least one pixel. Returns (key, start, end) of the merged bars.

    Example:
        >>> [a.tolist() for a in merge_bars(np.array([0, 0, 1]), np.array([0.0, 0.5, 0.0]), np.array([1.0, 3.0, 0.1]), 1.0)]
        [[0, 1], [0.0, 0.0], [3.0, 1.0]]
    """
    if not len(key):
        return key, start, end
    order = np.lexsort((start, key))
    k, s, e = key[order], start[order], end[order]
    lo = float(min(s.min(), 0.0))
    width = float(e.max() - lo) + 10 * px + 1.0
    off = (k - k.min()).astype(np.float64) * width  # separate groups on one axis so a running max works
    so, eo = s - lo + off, e - lo + off
    reach = np.maximum.accumulate(eo)
    new = np.empty(len(k), dtype=bool)
    new[0] = True
    gap = so[1:] - reach[:-1]
    long_ = (e - s) >= 2 * px
    # a new bar after a gap wider than a pixel, or between two events that are each a few pixels long
    # and do not overlap (so back-to-back kernels stay distinguishable; nested CPU ops merge)
    new[1:] = (gap > px) | ((gap >= 0) & long_[1:] & long_[:-1]) | (k[1:] != k[:-1])
    idx = np.flatnonzero(new)
    ms = s[idx]
    me = np.maximum.reduceat(e, idx)
    me = np.maximum(me, ms + px)
    return k[idx], ms, me


def pixel_bars(slot: np.ndarray, kc: np.ndarray, s: np.ndarray, e: np.ndarray, px: float, w0: float, w1: float,
               nk: int, order_rank: np.ndarray) -> tuple[np.ndarray, ...]:
    """Turn events into bars that a figure ``px`` µs per pixel wide can show.

    Events at least two pixels long are drawn as they are (overlapping ones in one slot merge, and
    every bar is at least one pixel wide). Shorter events are binned per pixel: a pixel column of a
    slot with any such activity is filled, split vertically between the kinds in proportion to their
    time there (in quarters), and runs of equal columns become one bar. So a lone short kernel stays
    visible as a 1-px bar, a copy among dense kernels still shows, and 400k events reduce to a few
    thousand bars. Returns (slot, kind code, start_us, end_us, y0 fraction, y1 fraction).

    Example:
        >>> slot, kind, s, e, y0, y1 = pixel_bars(np.array([0, 0]), np.array([0, 1]), np.array([0.0, 10.0]),
        ...                                       np.array([5.0, 10.2]), 1.0, 0.0, 20.0, 2, np.array([0, 1]))
        >>> kind.tolist(), s.tolist(), e.tolist()  # a long bar as it is; a short one filling its pixel
        ([0, 1], [0.0, 10.0], [5.0, 11.0])
    """
    z = np.zeros(0, dtype=np.int64)
    if not len(slot):
        return z, z, np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0)
    long_ = (e - s) >= 2 * px
    k_long = slot[long_] * nk + kc[long_]
    ak, ls_, le_ = merge_bars(k_long, s[long_], e[long_], px)
    out = [[ak // nk], [ak % nk], [ls_], [le_], [np.zeros(len(ak))], [np.ones(len(ak))]]
    sh = ~long_
    if sh.any():
        nb = int(np.ceil((w1 - w0) / px)) + 2
        mid = 0.5 * (s[sh] + e[sh])
        b = np.clip(np.floor((mid - w0) / px).astype(np.int64), 0, nb - 1)
        g = (slot[sh] * nb + b) * nk + kc[sh]
        u, inv = np.unique(g, return_inverse=True)
        w = np.bincount(inv.ravel(), weights=(e[sh] - s[sh]) + 1e-6 * px)  # zero-length events count too
        sb, kk = u // nk, u % nk
        # stack the kinds of one pixel column in drawing order, heights by share of time
        order = np.lexsort((order_rank[kk], sb))
        sb, kk, w = sb[order], kk[order], w[order]
        grp = np.r_[True, sb[1:] != sb[:-1]]
        gid = np.cumsum(grp) - 1
        tot = np.bincount(gid, weights=w)
        share = w / tot[gid]
        cum = np.cumsum(share)
        base = cum - share
        first_cum = (cum - share)[grp][gid]  # cumulative share before this column's first kind
        lo = np.round((base - first_cum) * 4) / 4
        hi = np.round((cum - first_cum) * 4) / 4
        # a kind present in a column keeps at least a quarter (so it never vanishes)
        hi = np.maximum(hi, lo + 0.25)
        last_in_col = np.r_[grp[1:], True]
        hi = np.where(last_in_col, 1.0, np.minimum(hi, 1.0))
        lo = np.minimum(lo, hi - 0.25)
        keep = hi > lo
        sb, kk, lo, hi = sb[keep], kk[keep], lo[keep], hi[keep]
        sl, bi = sb // nb, sb % nb
        # run-length: consecutive columns with the same slot, kind and stack position merge
        o2 = np.lexsort((bi, hi, lo, kk, sl))
        sl, bi, kk, lo, hi = sl[o2], bi[o2], kk[o2], lo[o2], hi[o2]
        new = np.r_[True, (sl[1:] != sl[:-1]) | (kk[1:] != kk[:-1]) | (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
                    | (bi[1:] != bi[:-1] + 1)]
        idx = np.flatnonzero(new)
        last = np.append(idx[1:], len(sl)) - 1
        for lst, v in zip(out, (sl[idx], kk[idx], w0 + bi[idx] * px, w0 + (bi[last] + 1) * px, lo[idx], hi[idx])):
            lst.append(v)
    return tuple(np.concatenate(x) for x in out)
