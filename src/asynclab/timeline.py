"""Draw a trace as a timeline with matplotlib: one lane per GPU stream and per launching host thread."""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from asynclab.trace import Trace, _fmt_us, load_trace

__all__ = ["draw_timeline", "Timeline", "KIND_COLORS", "KIND_LABELS"]

#: Colour of each kind (GPU kinds; host rows are drawn in greys).
KIND_COLORS = {
    "compute": "#3b6fb6",   # blue
    "h2d": "#f28e2b",       # orange
    "d2h": "#59a14f",       # green
    "d2d": "#9467bd",       # purple
    "p2p": "#9467bd",
    "memset": "#8c6d31",    # brown
    "sync": "#d62728",      # red
    "other": "#7f7f7f",
    "cpu_op": "#d0d0d0",    # light grey
    "launch": "#5a5a5a",    # dark grey
    "host_sync": "#e8877f",  # light red: host blocked in a synchronize call
}
#: Legend text of each kind.
KIND_LABELS = {
    "compute": "compute kernel",
    "h2d": "H2D copy (host → GPU)",
    "d2h": "D2H copy (GPU → host)",
    "d2d": "D2D / P2P copy",
    "p2p": "D2D / P2P copy",
    "memset": "memset",
    "sync": "sync wait (GPU)",
    "other": "other GPU activity",
    "cpu_op": "CPU op (host)",
    "launch": "launch / runtime call (host)",
    "host_sync": "synchronize call (host)",
}
_GPU_DRAW = ("compute", "h2d", "d2h", "d2d", "p2p", "memset", "sync", "other")
_HOST_DRAW = ("cpu_op", "launch", "host_sync")
# bottom to top: rare kinds are drawn over kernels, so a copy inside a dense run of kernels stays visible
_DRAW_ORDER = ("cpu_op", "launch", "host_sync", "compute", "other", "memset", "d2d", "p2p", "h2d", "d2h", "sync")
_LEGEND_ORDER = ("compute", "h2d", "d2h", "d2d", "p2p", "memset", "sync", "other", "cpu_op", "launch", "host_sync")
_MAX_SUBLANES = 8
_BAR = 0.8
_OVERLAP_TOL_US = 0.01
_STRIP = 0.4  # height of the sync-wait strip under a GPU lane  # bar height inside a sub-lane of height 1
_ANN_STRIP = 0.55  # height of the annotation-bracket strip above a host lane
_MAX_ANNOTATIONS = 2000  # brackets drawn at most (labels only where there is room)


@dataclass
class Timeline:
    """What :func:`draw_timeline` drew: the figure, the axes, the lane order (top to bottom), the time
    unit of the x axis and its origin (``t0_us``, in the trace's µs), and the collections per kind.

    Example:
        >>> from asynclab.trace import _EXAMPLE
        >>> tl = draw_timeline(_EXAMPLE)
        >>> tl.lanes
        ['GPU 0 · stream 7 (default)', 'CPU · main thread']
    """

    fig: Any
    ax: Any
    lanes: list[str]
    unit: str = "µs"
    t0_us: float = 0.0
    collections: dict[str, Any] = field(default_factory=dict)
    sublanes: dict[str, int] = field(default_factory=dict)
    n_events: int = 0

    def savefig(self, path: str | os.PathLike, dpi: int = 120, **kwargs: Any) -> str:
        """Save as .png or .svg (chosen by the file name); returns the path.

        Example:
            >>> draw_timeline(_EXAMPLE).savefig("/tmp/asynclab_doctest.svg")  # doctest: +SKIP
        """
        p = check_image_path(path)
        kwargs.setdefault("bbox_inches", "tight")
        self.fig.savefig(p, dpi=dpi, **kwargs)
        return p


def check_image_path(path: str | os.PathLike) -> str:
    """Validate where a timeline image goes: a .png or .svg name in an existing folder; ValueError otherwise.

    Example:
        >>> check_image_path("/tmp/out.png")
        '/tmp/out.png'
    """
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext not in (".png", ".svg"):
        raise ValueError(f"{p}: unsupported output format {ext or '(no extension)'!r}; use .png or .svg")
    folder = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(folder):
        raise ValueError(f"{p}: the folder {os.path.dirname(p) or folder} does not exist")
    if os.path.isdir(p):
        raise ValueError(f"{p}: is a directory")
    return p


def _unit(span_us: float) -> tuple[str, float]:
    if span_us < 2_000:
        return "µs", 1.0
    if span_us < 2_000_000:
        return "ms", 1e3
    return "s", 1e6


def _sublanes(start: np.ndarray, end: np.ndarray, tol: float = _OVERLAP_TOL_US) -> np.ndarray:
    """Greedy interval partitioning (events sorted by start): the fewest sub-lanes with no overlap
    inside one; beyond ``_MAX_SUBLANES`` the last sub-lane takes the rest (drawn, not dropped).
    Overlaps up to ``tol`` µs are rounding noise of the trace (ns -> µs), not overlaps."""
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
    return np.minimum(out, _MAX_SUBLANES - 1)


def _aggregate(key: np.ndarray, start: np.ndarray, end: np.ndarray, px: float) -> tuple[np.ndarray, ...]:
    """Merge, within each key, intervals that overlap or lie less than one pixel (``px`` µs) apart,
    then widen every bar to at least one pixel. Returns (key, start, end) of the merged bars."""
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


def _bars(slot: np.ndarray, kc: np.ndarray, s: np.ndarray, e: np.ndarray, px: float, w0: float, w1: float,
          nk: int, order_rank: np.ndarray) -> tuple[np.ndarray, ...]:
    """Turn events into bars that a figure ``px`` µs per pixel wide can show.

    Events at least two pixels long are drawn as they are (overlapping ones in one slot merge, and
    every bar is at least one pixel wide). Shorter events are binned per pixel: a pixel column of a
    slot with any such activity is filled, split vertically between the kinds in proportion to their
    time there (in quarters), and runs of equal columns become one bar. So a lone short kernel stays
    visible as a 1-px bar, a copy among dense kernels still shows, and 400k events reduce to a few
    thousand bars. Returns (slot, kind code, start_us, end_us, y0 fraction, y1 fraction).
    """
    z = np.zeros(0, dtype=np.int64)
    if not len(slot):
        return z, z, np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0)
    long_ = (e - s) >= 2 * px
    k_long = slot[long_] * nk + kc[long_]
    ak, ls_, le_ = _aggregate(k_long, s[long_], e[long_], px)
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


def _lanes_to_draw(tr: Trace, host_syncs: bool) -> list[str]:
    """The trace's lanes, less GPU lanes with nothing drawable (only GPU annotations) and, unless asked for,
    the "host syncs" lanes."""
    ev = tr.events
    drawable = set(ev.loc[ev["kind"].isin(_GPU_DRAW), "lane"].astype(str))
    return [lane for lane in tr.lanes()
            if not lane.startswith("GPU ") or (lane in drawable and (host_syncs or not lane.endswith("· host syncs")))]


def _bracket_rows(ev: pd.DataFrame, candidates: np.ndarray, skip: str | None) -> np.ndarray:
    """Positions of the host annotations to draw as brackets: not profiler step markers, not ``skip``
    (the annotation the window was cut by: its bracket would only span the whole window)."""
    names = ev["name"].astype(str)
    hidden = names.str.startswith("ProfilerStep") | (names == "asynclab.step")
    if skip is not None:
        hidden |= names == skip
    return np.flatnonzero(candidates & ~hidden.to_numpy(dtype=bool))[:_MAX_ANNOTATIONS]


def _bracket_levels(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A level per bracket, so that nested or overlapping brackets of one lane stack instead of
    drawing over each other (level 0 sits right above the lane)."""
    level = np.zeros(len(lane), dtype=np.int64)
    for li in np.unique(lane):
        m = np.flatnonzero(lane == li)
        order = m[np.argsort(start[m], kind="stable")]
        level[order] = _sublanes(start[order], end[order], tol=0.0)
    return level


def draw_timeline(trace: Any, ax: Any = None, *, start_us: float | None = None, end_us: float | None = None,
                  annotation: str | None = None, occurrence: int | None = None, arrows: bool = False,
                  host: bool = True, annotations: bool = True, host_syncs: bool = False,
                  title: str | None = None, figsize: tuple[float, float] | None = None,
                  max_arrows: int = 300, width_px: int | None = None) -> Timeline:
    """Draw a trace: one lane per (GPU, stream) and per host thread that launched work, coloured by
    kind, overlapping events in sub-lanes, with optional launch → kernel arrows.

    ``trace`` is a :class:`~asynclab.trace.Trace` or anything :func:`load_trace` takes. Zoom with
    ``start_us``/``end_us`` (µs from the trace start) or ``annotation`` (a ``record_function`` name;
    all its occurrences, or only the ``occurrence``-th);
    the x axis starts at 0 at the window's start, in µs, ms or s depending on the span. ``ax=`` draws
    into existing axes. With ``annotations`` (the default), the host's ``record_function`` ranges are drawn as
    labelled brackets above their thread's lane (profiler step markers, and the annotation the
    window was cut by, are left out; nested brackets stack). ``host_syncs=True`` also draws the lanes
    "GPU n · host syncs": what the profiler records on the GPU side when the host waits (with
    ``cuda_sync_events``), which the host lane's synchronize calls already show. GPU lanes with nothing
    to draw in the window are left out. Drawing is vectorised (one collection per kind); events closer than a pixel
    are merged and every bar is at least one pixel wide, so short kernels stay visible.

    Example:
        >>> from asynclab.trace import _EXAMPLE
        >>> tl = draw_timeline(_EXAMPLE, arrows=True, title="one kernel")
        >>> tl.unit, sorted(tl.collections)
        ('µs', ['arrows', 'compute', 'launch'])
    """
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.patches import Patch

    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    if annotation is not None or start_us is not None or end_us is not None:
        tr = tr.window(start_us, end_us, annotation=annotation, occurrence=occurrence)
    ev = tr.events
    if "window" in tr.meta:
        w0, w1 = tr.meta["window"]
    else:
        w0 = float(ev["start_us"].min()) if len(ev) else 0.0
        w1 = float(ev["end_us"].max()) if len(ev) else 1.0
    span = max(w1 - w0, 1e-3)
    unit, scale = _unit(span)

    lanes = _lanes_to_draw(tr, host_syncs)
    gpu_lanes = [x for x in lanes if x.startswith("GPU ")]
    if not host:
        lanes = [x for x in lanes if x in gpu_lanes] or lanes[:0]
    is_gpu_lane = np.array([lane in set(gpu_lanes) for lane in lanes], dtype=bool)

    # ---- figure ----------------------------------------------------------------------------------
    if ax is None:
        if figsize is None:
            figsize = (13.0, 2.0)  # height fixed below once sub-lanes are known
        fig, ax = plt.subplots(figsize=figsize)
        own_fig = True
    else:
        fig = ax.figure
        own_fig = False
    if width_px is None:
        bbox = ax.get_window_extent()
        width_px = int(max(bbox.width, 300))
    px = span / width_px  # µs per pixel

    # ---- select rows --------------------------------------------------------------------------------
    lane_codes = np.asarray(pd.Index(lanes, dtype=object).get_indexer(ev["lane"].astype(object)), dtype=np.int64)
    kind = ev["kind"].to_numpy(dtype=object)
    on_gpu = np.zeros(len(ev), dtype=bool)
    ok = lane_codes >= 0
    on_gpu[ok] = is_gpu_lane[lane_codes[ok]]
    draw_kind = kind.copy()
    host_rows = ok & ~on_gpu
    if host_rows.any():
        names = ev["name"].to_numpy(dtype=object)
        hl = np.flatnonzero(host_rows & (kind == "launch"))
        if len(hl):
            is_sync = np.array(["ynchronize" in str(x) for x in names[hl]], dtype=bool)
            draw_kind[hl[is_sync]] = "host_sync"
    sel = ok & ((on_gpu & np.isin(kind, _GPU_DRAW)) | (~on_gpu & np.isin(draw_kind, _HOST_DRAW)))
    rows = np.flatnonzero(sel)
    S = ev["start_us"].to_numpy(np.float64)[rows]
    E = ev["end_us"].to_numpy(np.float64)[rows]
    L = lane_codes[rows]
    K = draw_kind[rows]
    kinds_present = [k for k in _DRAW_ORDER if (K == k).any()]
    kind_code = {k: i for i, k in enumerate(kinds_present)}
    KC = np.array([kind_code[k] for k in K], dtype=np.int64) if len(K) else np.zeros(0, np.int64)

    # ---- sub-lanes (GPU lanes only; host lanes overlay CPU ops and calls) ------------------------------
    # GPU sync waits ("Stream Sync", "Stream Wait Event") span the time something waited, on top of
    # the stream's kernels: they get a thin strip under the lane instead of sub-lanes of their own.
    SUB = np.zeros(len(rows), dtype=np.int64)
    nsub = np.ones(len(lanes), dtype=np.int64)
    strip = np.zeros(len(lanes))
    is_sync = K == "sync"
    for li in np.flatnonzero(is_gpu_lane):
        on = L == li
        m = np.flatnonzero(on & ~is_sync)
        if len(m) > 1:
            sub = _sublanes(S[m], E[m])
            SUB[m] = sub
            nsub[li] = int(sub.max()) + 1
        if len(m) and (on & is_sync).any():
            strip[li] = _STRIP
    in_strip = is_sync & (strip[L] > 0) if len(L) else np.zeros(0, dtype=bool)
    # host annotations (record_function ranges): a bracket strip above their lane
    ann_pos, ann_level = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ann = np.zeros(len(lanes))
    if annotations and len(lanes):
        ann_pos = _bracket_rows(ev, ok & ~on_gpu & (kind == "annotation"), skip=annotation)
        ann_level = _bracket_levels(lane_codes[ann_pos], ev["start_us"].to_numpy(np.float64)[ann_pos],
                                    ev["end_us"].to_numpy(np.float64)[ann_pos])
        for li in np.unique(lane_codes[ann_pos]):
            ann[li] = _ANN_STRIP * (int(ann_level[lane_codes[ann_pos] == li].max()) + 1)
    # y layout, top to bottom
    gap = 0.5
    y0 = np.zeros(len(lanes))
    y = 0.0
    for i in range(len(lanes)):
        y += ann[i]
        y0[i] = y
        y += nsub[i] + strip[i] + gap
    total_h = y - gap if len(lanes) else 1.0
    if own_fig and figsize == (13.0, 2.0):
        fig.set_size_inches(13.0, float(np.clip(1.4 + 0.42 * total_h, 2.4, 16.0)))

    # ---- aggregate and draw ---------------------------------------------------------------------
    collections: dict[str, Any] = {}
    nk = max(len(kinds_present), 1)
    host_cls = np.array([k in _HOST_DRAW or k == "sync" for k in kinds_present], dtype=bool)
    # a "slot" is one sub-lane, plus, on host lanes, one layer per kind (CPU ops and calls overlay)
    cls = np.where(host_cls[KC], KC + 1, 0) if len(KC) else KC
    slot = (L * _MAX_SUBLANES + SUB) * (nk + 1) + cls
    rank = np.array([_DRAW_ORDER.index(k) for k in kinds_present] or [0], dtype=np.int64)
    a_slot, a_kind, a_s, a_e, f_lo, f_hi = _bars(slot, KC, S, E, px, w0, w1, nk, rank)
    ls = a_slot // (nk + 1)
    a_sub = ls % _MAX_SUBLANES
    a_lane = ls // _MAX_SUBLANES
    xs, xe = (a_s - w0) / scale, (a_e - w0) / scale
    for k in kinds_present:
        m = a_kind == kind_code[k]
        if not m.any():
            continue
        top = y0[a_lane[m]] + a_sub[m]
        bar = 0.5 if k in ("launch", "host_sync") else _BAR
        pad = 0.5 - bar / 2
        # y grows downwards (inverted axis): fraction 0 is the bar's bottom edge
        yb = top + 1 - pad - f_lo[m] * bar
        yt = top + 1 - pad - f_hi[m] * bar
        if k == "sync":
            st = strip[a_lane[m]]
            s_on = st > 0
            s_top = y0[a_lane[m]] + nsub[a_lane[m]]
            yb = np.where(s_on, s_top + st * 0.85 - f_lo[m] * st * 0.7, yb)
            yt = np.where(s_on, s_top + st * 0.85 - f_hi[m] * st * 0.7, yt)
        x0, x1 = xs[m], xe[m]
        verts = np.stack([np.column_stack([x0, yt]), np.column_stack([x0, yb]),
                          np.column_stack([x1, yb]), np.column_stack([x1, yt])], axis=1)
        wide = (x1 - x0) * scale >= 4 * px  # white edges separate neighbours, but never hide a thin bar
        pc = PolyCollection(verts, facecolors=KIND_COLORS.get(k, "#7f7f7f"), edgecolors="white",
                            linewidths=np.where(wide, 0.6, 0.0), antialiased=False, zorder=2 + _DRAW_ORDER.index(k) * 0.01,
                            label=KIND_LABELS.get(k, k))
        ax.add_collection(pc)
        collections[k] = pc

    # ---- arrows: launch start (host lane) -> GPU start (its sub-lane) --------------------------------
    n_arrows = 0
    if arrows and len(rows):
        g = np.flatnonzero(on_gpu[rows] & np.isin(K, _GPU_DRAW))
        launch = ev["launch"].to_numpy(dtype=np.float64, na_value=np.nan)[rows[g]]
        has = np.isfinite(launch)
        g, launch = g[has], launch[has].astype(np.int64)
        if len(g):
            pos = ev.index.get_indexer(launch)
            okp = pos >= 0
            g, pos = g[okp], pos[okp]
            src_lane = lane_codes[pos]
            okl = src_lane >= 0
            g, pos, src_lane = g[okl], pos[okl], src_lane[okl]
            if len(g) > max_arrows:
                pick = np.linspace(0, len(g) - 1, max_arrows).astype(np.int64)
                g, pos, src_lane = g[pick], pos[pick], src_lane[pick]
            if len(g):
                lx = (ev["start_us"].to_numpy(np.float64)[pos] - w0) / scale
                ly = y0[src_lane] + 0.5
                gx = (S[g] - w0) / scale
                gy = np.where(in_strip[g], y0[L[g]] + nsub[L[g]] + strip[L[g]] / 2, y0[L[g]] + SUB[g] + 0.5)
                segs = np.stack([np.column_stack([lx, ly]), np.column_stack([gx, gy])], axis=1)
                lc = LineCollection(segs, colors="#444444", linewidths=0.6, alpha=0.45, zorder=5)
                ax.add_collection(lc)
                head = np.where(in_strip[g], gy - strip[L[g]] / 2, gy - 0.45)
                ax.scatter(gx, head, marker="v", s=10, c="#444444", alpha=0.6, zorder=6, linewidths=0)
                collections["arrows"] = lc
                n_arrows = len(g)

    # ---- annotation brackets ----------------------------------------------------------------------------
    if len(ann_pos):
        a_s = np.clip(ev["start_us"].to_numpy(np.float64)[ann_pos], w0, w1)
        a_e = np.clip(ev["end_us"].to_numpy(np.float64)[ann_pos], w0, w1)
        ax0, ax1 = (a_s - w0) / scale, (a_e - w0) / scale
        yy = y0[lane_codes[ann_pos]] - 0.12 - _ANN_STRIP * ann_level
        tick = 0.2
        segs = np.concatenate([
            np.stack([np.column_stack([ax0, yy]), np.column_stack([ax1, yy])], axis=1),
            np.stack([np.column_stack([ax0, yy]), np.column_stack([ax0, yy + tick])], axis=1),
            np.stack([np.column_stack([ax1, yy]), np.column_stack([ax1, yy + tick])], axis=1)])
        ax.add_collection(LineCollection(segs, colors="#6a3d9a", linewidths=1.0, zorder=4))
        collections["annotations"] = segs
        names_a = ev["name"].to_numpy(dtype=object)[ann_pos]
        for x_a, x_b, y_a, name in zip(ax0, ax1, yy, names_a):
            if (x_b - x_a) * scale / px >= 5.0 * len(str(name)) + 4:  # only where the label fits its bracket
                ax.text(x_a, y_a - 0.05, str(name), fontsize=7, color="#6a3d9a", va="bottom", ha="left",
                        clip_on=True, zorder=6)

    # ---- axes ---------------------------------------------------------------------------------------
    centers = y0 + (nsub + strip) / 2.0
    ax.set_yticks(centers)
    ax.set_yticklabels([f"{lane}" + (f"  [{nsub[i]} rows]" if nsub[i] > 1 else "") for i, lane in enumerate(lanes)])
    for i in range(1, len(lanes)):
        sep = y0[i] - ann[i] - gap / 2
        ax.axhline(sep, color="#999999", lw=0.5, zorder=1)
        if is_gpu_lane[i - 1] and not is_gpu_lane[i]:
            ax.axhline(sep, color="#333333", lw=1.0, zorder=1)
    ax.set_ylim(total_h + 0.2, -0.2 - (ann[0] if len(ann) else 0.0))
    ax.set_xlim(-0.01 * span / scale, span * 1.01 / scale)
    ax.set_xlabel(f"time ({unit}) from " + ("the window start" if "window" in tr.meta else "the trace start"))
    ax.grid(axis="x", color="#e6e6e6", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = []
    seen = set()
    for k in _LEGEND_ORDER:
        if k in collections and KIND_LABELS[k] not in seen:
            seen.add(KIND_LABELS[k])
            handles.append(Patch(facecolor=KIND_COLORS[k], label=KIND_LABELS[k]))
    if "arrows" in collections:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="#444444", lw=0.8, label="launch → GPU start"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    if not len(rows):
        ax.text(0.5, 0.5, "no GPU or launch activity in this range", transform=ax.transAxes,
                ha="center", va="center", color="#777777")
    if title is None:
        base = os.path.basename(tr.source) or tr.source
        title = f"{base}: {len(rows):,} events"
        if "window" in tr.meta:
            title += f", window {_fmt_us(w0)} – {_fmt_us(w1)} of the trace"
        if n_arrows:
            title += f", {n_arrows} launch arrows"
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    return Timeline(fig=fig, ax=ax, lanes=list(lanes), unit=unit, t0_us=w0, collections=collections,
                    sublanes={lane: int(nsub[i]) for i, lane in enumerate(lanes)}, n_events=int(len(rows)))
