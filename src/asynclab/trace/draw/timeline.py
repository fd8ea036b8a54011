"""Draw a trace as a timeline with matplotlib: one lane per GPU stream and per launching host thread."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from asynclab.trace import Trace, fmt_us, load_trace
from asynclab.trace.draw.bars import MAX_SUBLANES, pixel_bars, sublanes
from asynclab.trace.draw.image import SAVE_DPI, save_image
from asynclab.trace.draw.marks import MIN_BAR_PX, FittedLabel, draw_callout, parse_callout, widen
from asynclab.trace.analysis.thresholds import FOLD_SHARE, STEADY_MIN_LEFT_OUT
from asynclab.trace.draw.palette import FINDING_COLORS, KIND_COLORS, KIND_LABELS, lab

__all__ = ["draw_timeline", "work_window", "Timeline", "KIND_COLORS", "KIND_LABELS", "FINDING_COLORS"]

_GPU_DRAW = ("compute", "comm", "h2d", "d2h", "d2d", "p2p", "memset", "sync", "other")
_HOST_DRAW = ("cpu_op", "launch", "host_sync")
# bottom to top: rare kinds are drawn over kernels, so a copy inside a dense run of kernels stays visible
_DRAW_ORDER = ("cpu_op", "launch", "host_sync", "compute", "forward", "backward", "weight_grad", "comm", "other",
               "memset", "d2d", "p2p", "h2d", "d2h", "sync")
_LEGEND_ORDER = ("compute", "forward", "backward", "weight_grad", "comm", "h2d", "d2h", "d2d", "p2p", "memset", "sync",
                 "other", "cpu_op", "launch", "host_sync")
_BAR = 0.8
_STRIP = 0.4  # height of the sync-wait strip under a GPU lane  # bar height inside a sub-lane of height 1
_ANN_STRIP = 0.55  # height of the annotation-bracket strip above a host lane
_FIND_STRIP = 0.45  # height of the findings strip above a GPU's lanes (with diagnosis=)
_MAX_ANNOTATIONS = 2000  # brackets drawn at most (labels only where there is room)
_MAX_LABELS = 500  # names written into GPU bars at most (labels=True)
#: A figure's width, in inches: about 700 px as a notebook shows it (100 dpi), which is the width of the book's text
#: column at 1280 px and fits JupyterLab's output area, so neither scales it down.
FIGURE_WIDTH_IN = 7.0
#: The smallest text a timeline draws, in points (12.5 px as a notebook shows it: over 9 px wherever it is read).
MIN_FONT_PT = 9.0
#: How far under the axes the legend's row starts (below the tick labels and the x label), in points.
_LEGEND_DROP_PT = 30.0


@dataclass
class Timeline:
    """What :func:`draw_timeline` drew: the figure, the axes, the lane order (top to bottom), the time
    unit of the x axis and its origin (``t0_us``, in the trace's µs), and the collections per kind.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> tl = draw_timeline(EXAMPLE_TRACE)
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
    widened: int = 0

    def savefig(self, path: str | os.PathLike, dpi: int = SAVE_DPI, **kwargs: Any) -> str:
        """Save as .png or .svg (chosen by the file name); returns the path.

        Example:
            >>> draw_timeline(EXAMPLE_TRACE).savefig("/tmp/asynclab_doctest.svg")  # doctest: +SKIP
        """
        return save_image(self.fig, path, dpi=dpi, **kwargs)


_SCALES = {"µs": 1.0, "ms": 1e3, "s": 1e6}


def _unit(span_us: float) -> tuple[str, float]:
    if span_us < 2_000:
        return "µs", 1.0
    if span_us < 2_000_000:
        return "ms", 1e3
    return "s", 1e6


def _lanes_to_draw(tr: Trace, host_syncs: bool) -> list[str]:
    """The trace's lanes, less GPU lanes with nothing drawable (only GPU annotations) and, unless asked for,
    the "host syncs" lanes."""
    ev = tr.events
    gpu = set(ev.loc[ev["device"].notna(), "lane"].astype(str))
    drawable = set(ev.loc[ev["kind"].isin(_GPU_DRAW), "lane"].astype(str))
    return [lane for lane in tr.lanes()
            if lane not in gpu or (lane in drawable and (host_syncs or not lane.endswith("· host syncs")))]


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
        level[order] = sublanes(start[order], end[order], tol=0.0)
    return level


@dataclass
class _Frame:
    """The window being drawn and its x scale."""

    trace: Trace
    w0: float
    w1: float
    span: float
    unit: str
    scale: float


@dataclass
class _Rows:
    """The events to draw, as arrays (positions ``rows`` in the trace's event table)."""

    rows: np.ndarray
    S: np.ndarray
    E: np.ndarray
    L: np.ndarray
    K: np.ndarray
    KC: np.ndarray
    kinds: list[str]
    lane_codes: np.ndarray
    on_gpu: np.ndarray
    ok: np.ndarray


@dataclass
class _Layout:
    """Where each lane sits: sub-lanes, the sync strip under it, the annotation brackets above it."""

    sub: np.ndarray
    nsub: np.ndarray
    strip: np.ndarray
    in_strip: np.ndarray
    ann: np.ndarray
    ann_pos: np.ndarray
    ann_lane: np.ndarray
    ann_level: np.ndarray
    y0: np.ndarray
    total_h: float
    gap: float = 0.5


def draw_timeline(trace: Any, ax: Any = None, *, start_us: float | None = None, end_us: float | None = None,
                  annotation: str | None = None, occurrence: int | None = None, arrows: bool = False,
                  host: bool = True, annotations: bool = True, host_syncs: bool = False,
                  title: str | None = None, figsize: tuple[float, float] | None = None,
                  max_arrows: int = 300, width_px: int | None = None, labels: bool = False,
                  diagnosis: Any = None, callout: Any = None) -> Timeline:
    """Draw a trace: one lane per (GPU, stream) and per host thread that launched work, coloured by
    kind, overlapping events in sub-lanes, with optional launch → kernel arrows.

    ``trace`` is a :class:`~asynclab.trace.Trace` or anything :func:`load_trace` takes (a folder of rank
    files too: each rank's lanes are then drawn together, "rank 1 · GPU 1 · stream 7"). Zoom with
    ``start_us``/``end_us`` (µs from the trace start) or ``annotation`` (a ``record_function`` name;
    all its occurrences, or only the ``occurrence``-th);
    the x axis starts at 0 at the window's start, in µs, ms or s depending on the span. ``ax=`` draws
    into existing axes. With ``annotations`` (the default), the host's ``record_function`` ranges are drawn as
    labelled brackets above their thread's lane (profiler step markers, and the annotation the
    window was cut by, are left out; nested brackets stack). ``host_syncs=True`` also draws the lanes
    "GPU n · host syncs": what the profiler records on the GPU side when the host waits (with
    ``cuda_sync_events``), which the host lane's synchronize calls already show. GPU lanes with nothing
    to draw in the window are left out, and the legend lists only the kinds drawn. ``labels=True`` writes
    each GPU event's name inside its bar where it fits as drawn (at most ``_MAX_LABELS``): for few, named events,
    such as a simulated pipeline schedule's "F0", "B0" (whose forwards and backwards get colours of their own).
    ``diagnosis=`` (from :func:`asynclab.diagnose.diagnose` of the same trace) draws, in a strip above each
    GPU's lanes, the stretches each finding explains, one colour per kind, with its share of the step in the
    legend, and a faint band of that colour behind (never over) the lanes' work. ``callout=`` points a label
    and an arrow at the event a figure is about: an event name (its first drawn event), a time in µs from the
    window start, ``(name or time, "label")``, or a list of them; by default, the callouts the trace carries
    in ``meta["callouts"]`` whose event is in the window. Drawing is vectorised (one collection per kind);
    events closer than a pixel are merged, and work shorter than ``MIN_BAR_PX`` pixels is drawn that wide
    (into the free space beside it; the legend says so), so short kernels stay visible. With an
    ``annotation`` window, that range's bracket is left out unless ``occurrence`` picked one of several.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> tl = draw_timeline(EXAMPLE_TRACE, arrows=True, title="one kernel")
        >>> tl.unit, sorted(tl.collections)
        ('µs', ['arrows', 'compute', 'launch'])
    """
    fig, ax, own_fig, width_px = _figure(ax, figsize, width_px)
    # one time unit per figure: the panels drawn into a figure after its first keep the first one's unit
    fr = _frame(trace, start_us, end_us, annotation, occurrence, getattr(fig, "_asynclab_unit", None))
    fig._asynclab_unit = fr.unit
    lanes, is_gpu_lane = _choose_lanes(fr.trace, host, host_syncs)
    px = fr.span / width_px  # µs per pixel
    sel = _select(fr.trace.events, lanes, is_gpu_lane, fr.trace.meta.get("kind_by_name"))
    found = _findings(diagnosis, fr, lanes, is_gpu_lane) if diagnosis is not None else []
    # the range the window was cut by is drawn when one occurrence of several was picked: it says which
    skip = (annotation if occurrence is None else None) if annotations else False
    lay = _layout(fr.trace.events, lanes, is_gpu_lane, sel, skip, _findings_room(found, len(lanes)))
    if own_fig and figsize is None:
        fig.set_size_inches(FIGURE_WIDTH_IN, float(np.clip(1.7 + 0.42 * lay.total_h, 2.7, 16.0)))
    collections, n_widened = _draw_bars(ax, fr, sel, lay, px)
    if labels:
        _draw_labels(ax, fr, sel, lay, px, collections)
    n_arrows = _draw_arrows(ax, fr, sel, lay, max_arrows, collections) if arrows else 0
    _draw_brackets(ax, fr, lay, px, collections)
    _style_axes(ax, fr, lanes, is_gpu_lane, lay)
    shaded = _draw_findings(ax, fr, lay, found)
    callouts = _draw_callouts(ax, fr, sel, lay, callout)
    if callouts:
        collections["callouts"] = callouts
    _legend(ax, collections, shaded, n_widened)
    if not len(sel.rows):
        ax.text(0.5, 0.5, "no GPU or launch activity in this range", transform=ax.transAxes,
                ha="center", va="center", color="#777777")
    title = _title(fr, len(sel.rows), n_arrows) if title is None else title
    if title:
        ax.set_title(title, fontsize=MIN_FONT_PT + 1, loc="left", wrap=True)
    return Timeline(fig=fig, ax=ax, lanes=list(lanes), unit=fr.unit, t0_us=fr.w0, collections=collections,
                    sublanes={lane: int(lay.nsub[i]) for i, lane in enumerate(lanes)}, n_events=int(len(sel.rows)),
                    widened=n_widened)


def _frame(trace: Any, start_us, end_us, annotation, occurrence, unit: str | None = None) -> _Frame:
    """Load and window the trace; pick the x unit for its span (or keep ``unit``, the figure's)."""
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
    unit, scale = (unit, _SCALES[unit]) if unit in _SCALES else _unit(span)
    return _Frame(tr, w0, w1, span, unit, scale)


def work_window(trace: Any, host: bool = True) -> tuple[float, float, str] | None:
    """Where a picture of the trace should look when events that draw nothing stretch its time range: from the
    first to the last thing :func:`draw_timeline` draws (the lanes' GPU work, their host ops and runtime calls, the
    ``record_function`` brackets; with ``host=False`` the GPU lanes' work only), with a sentence that says what it
    leaves out and which events reach there; None where what is drawn covers all but
    :data:`~asynclab.trace.analysis.metrics.STEADY_MIN_LEFT_OUT` of the range (or nothing is drawn). The range is the trace's
    window when it has one. What stretches a range without drawing: the profiler's own span (the "Spans" row), a
    ``ProfilerStep`` that runs on after its work, Python function events, GPU-side annotations, the ops of host
    threads that launch nothing (instants, counters and flows are never read as events).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> span = {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
        ...         "tid": "PyTorch Profiler", "ts": 0, "dur": 1000}
        >>> start, end, note = work_window({"traceEvents": EXAMPLE_TRACE["traceEvents"] + [span]})
        >>> start, end
        (0.0, 6.0)
        >>> print(note)
        left out 0.0 µs before the work drawn and 994.0 µs after, where only "PyTorch Profiler (0)" reaches
    """
    tr = trace if isinstance(trace, Trace) else load_trace(trace)
    ev = tr.events
    if not len(ev):
        return None
    lo, hi = tr.meta["window"] if "window" in tr.meta else (float(ev["start_us"].min()), float(ev["end_us"].max()))
    lanes, is_gpu_lane = _choose_lanes(tr, host, False)
    sel = _select(ev, lanes, is_gpu_lane, tr.meta.get("kind_by_name"))
    brackets = _bracket_rows(ev, sel.ok & ~sel.on_gpu & (ev["kind"] == "annotation").to_numpy(dtype=bool), None)
    start = np.concatenate([sel.S, ev["start_us"].to_numpy(np.float64)[brackets]])
    end = np.concatenate([sel.E, ev["end_us"].to_numpy(np.float64)[brackets]])
    if not len(start):
        return None
    a, b = max(float(start.min()), lo), min(float(end.max()), hi)
    if (a - lo) + (hi - b) < STEADY_MIN_LEFT_OUT * (hi - lo):
        return None
    s, e = ev["start_us"].to_numpy(np.float64), ev["end_us"].to_numpy(np.float64)
    reach = np.maximum(a - s, e - b)
    far = pd.Series(reach, index=ev["name"].astype(str).to_numpy())[reach > 0]
    names = far.groupby(level=0).max().sort_values(ascending=False, kind="stable").index.tolist()  # farthest first
    shown = [f'"{n}"' for n in names[:3]]
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    who = (", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]) + more
    return a, b, (f"left out {fmt_us(a - lo)} before the work drawn and {fmt_us(hi - b)} after, where only {who} "
                  f"reach{'es' if len(names) == 1 else ''}")


def _choose_lanes(tr: Trace, host: bool, host_syncs: bool) -> tuple[list[str], np.ndarray]:
    lanes = _lanes_to_draw(tr, host_syncs)
    gpu_lanes = set(tr.events.loc[tr.events["device"].notna(), "lane"].astype(str))
    if not host:
        lanes = [x for x in lanes if x in gpu_lanes]
    return lanes, np.array([lane in gpu_lanes for lane in lanes], dtype=bool)


def _figure(ax: Any, figsize, width_px) -> tuple[Any, Any, bool, int]:
    import matplotlib.pyplot as plt

    own_fig = ax is None
    if own_fig:
        fig, ax = plt.subplots(figsize=figsize or (FIGURE_WIDTH_IN, 2.0))  # the height follows the lanes
    else:
        fig = ax.figure
    if width_px is None:
        width_px = int(max(ax.get_window_extent().width, 300))
    return fig, ax, own_fig, width_px


def _select(ev: pd.DataFrame, lanes: list[str], is_gpu_lane: np.ndarray, kind_by_name: dict | None = None) -> _Rows:
    """The drawable rows of the chosen lanes: GPU work and sync waits, host CPU ops and runtime calls
    (synchronize calls get a kind of their own; ``kind_by_name`` maps a name prefix of GPU compute work to a
    kind of its own, as a simulated pipeline's trace says in ``meta["kind_by_name"]``)."""
    lane_codes = np.asarray(pd.Index(lanes, dtype=object).get_indexer(ev["lane"].astype(object)), dtype=np.int64)
    kind = ev["kind"].to_numpy(dtype=object)
    on_gpu = np.zeros(len(ev), dtype=bool)
    ok = lane_codes >= 0
    on_gpu[ok] = is_gpu_lane[lane_codes[ok]]
    draw_kind = kind.copy()
    hl = np.flatnonzero(ok & ~on_gpu & (kind == "launch"))
    if len(hl):
        names = ev["name"].to_numpy(dtype=object)[hl]
        draw_kind[hl[np.array(["ynchronize" in str(x) for x in names], dtype=bool)]] = "host_sync"
    sel = ok & ((on_gpu & np.isin(kind, _GPU_DRAW)) | (~on_gpu & np.isin(draw_kind, _HOST_DRAW)))
    for prefix, k in dict(kind_by_name or {}).items():  # e.g. a simulated pipeline's "F3" -> forward
        if k in KIND_COLORS:
            named = on_gpu & (kind == "compute") & ev["name"].astype(str).str.startswith(prefix).to_numpy(dtype=bool)
            draw_kind[named] = k
    rows = np.flatnonzero(sel)
    K = draw_kind[rows]
    kinds = [k for k in _DRAW_ORDER if (K == k).any()]
    code = {k: i for i, k in enumerate(kinds)}
    KC = np.array([code[k] for k in K], dtype=np.int64) if len(K) else np.zeros(0, np.int64)
    return _Rows(rows, ev["start_us"].to_numpy(np.float64)[rows], ev["end_us"].to_numpy(np.float64)[rows],
                 lane_codes[rows], K, KC, kinds, lane_codes, on_gpu, ok)


def _layout(ev: pd.DataFrame, lanes: list[str], is_gpu_lane: np.ndarray, sel: _Rows, annotation: Any,
            above: np.ndarray | None = None) -> _Layout:
    """Sub-lanes for overlapping GPU work, a strip under GPU lanes with sync waits (which span the time
    something waited, on top of the stream's kernels), and bracket rows above host lanes with
    ``record_function`` ranges (``annotation=False`` draws none; a name leaves that one out). ``above`` is
    room to keep above each lane (the findings strip), counted with the brackets' room."""
    S, E, L, K = sel.S, sel.E, sel.L, sel.K
    sub = np.zeros(len(sel.rows), dtype=np.int64)
    nsub = np.ones(len(lanes), dtype=np.int64)
    strip = np.zeros(len(lanes))
    is_sync = K == "sync"
    for li in np.flatnonzero(is_gpu_lane):
        on = L == li
        m = np.flatnonzero(on & ~is_sync)
        if len(m) > 1:
            sub[m] = sublanes(S[m], E[m])
            nsub[li] = int(sub[m].max()) + 1
        if len(m) and (on & is_sync).any():
            strip[li] = _STRIP
    in_strip = is_sync & (strip[L] > 0) if len(L) else np.zeros(0, dtype=bool)
    ann_pos, ann_level = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ann = np.zeros(len(lanes))
    if annotation is not False and len(lanes):
        kind = ev["kind"].to_numpy(dtype=object)
        ann_pos = _bracket_rows(ev, sel.ok & ~sel.on_gpu & (kind == "annotation"), skip=annotation)
        ann_level = _bracket_levels(sel.lane_codes[ann_pos], ev["start_us"].to_numpy(np.float64)[ann_pos],
                                    ev["end_us"].to_numpy(np.float64)[ann_pos])
        for li in np.unique(sel.lane_codes[ann_pos]):
            ann[li] = _ANN_STRIP * (int(ann_level[sel.lane_codes[ann_pos] == li].max()) + 1)
    if above is not None:
        ann = ann + above
    gap = 0.5
    y0 = np.zeros(len(lanes))
    y = 0.0
    for i in range(len(lanes)):  # top to bottom
        y += ann[i]
        y0[i] = y
        y += nsub[i] + strip[i] + gap
    total_h = y - gap if len(lanes) else 1.0
    return _Layout(sub, nsub, strip, in_strip, ann, ann_pos, sel.lane_codes[ann_pos], ann_level, y0, total_h, gap)


def _draw_bars(ax: Any, fr: _Frame, sel: _Rows, lay: _Layout, px: float) -> tuple[dict[str, Any], int]:
    """One PolyCollection per kind, of the bars :func:`_bars` makes of the rows, those under ``MIN_BAR_PX``
    pixels widened into the free space beside them; returns the collections and how many bars were widened."""
    from matplotlib.collections import PolyCollection

    kinds = sel.kinds
    nk = max(len(kinds), 1)
    host_cls = np.array([k in _HOST_DRAW or k == "sync" for k in kinds], dtype=bool)
    # a "slot" is one sub-lane, plus, on host lanes, one layer per kind (CPU ops and calls overlay)
    cls = np.where(host_cls[sel.KC], sel.KC + 1, 0) if len(sel.KC) else sel.KC
    slot = (sel.L * MAX_SUBLANES + lay.sub) * (nk + 1) + cls
    order = np.array([_DRAW_ORDER.index(k) for k in kinds] or [0], dtype=np.int64)
    a_slot, a_kind, a_s, a_e, f_lo, f_hi = pixel_bars(slot, sel.KC, sel.S, sel.E, px, fr.w0, fr.w1, nk, order)
    on_top = order[a_kind] > _DRAW_ORDER.index("compute") if len(a_kind) else np.zeros(0, dtype=bool)
    a_s, a_e, widened = widen(a_slot, a_s, a_e, MIN_BAR_PX * px, on_top)
    ls = a_slot // (nk + 1)
    a_sub, a_lane = ls % MAX_SUBLANES, ls // MAX_SUBLANES
    xs, xe = (a_s - fr.w0) / fr.scale, (a_e - fr.w0) / fr.scale
    collections: dict[str, Any] = {}
    for code, k in enumerate(kinds):
        m = a_kind == code
        if not m.any():
            continue
        top = lay.y0[a_lane[m]] + a_sub[m]
        bar = 0.5 if k in ("launch", "host_sync") else _BAR
        pad = 0.5 - bar / 2
        # y grows downwards (inverted axis): fraction 0 is the bar's bottom edge
        yb = top + 1 - pad - f_lo[m] * bar
        yt = top + 1 - pad - f_hi[m] * bar
        if k == "sync":
            st = lay.strip[a_lane[m]]
            s_top = lay.y0[a_lane[m]] + lay.nsub[a_lane[m]]
            yb = np.where(st > 0, s_top + st * 0.85 - f_lo[m] * st * 0.7, yb)
            yt = np.where(st > 0, s_top + st * 0.85 - f_hi[m] * st * 0.7, yt)
        x0, x1 = xs[m], xe[m]
        verts = np.stack([np.column_stack([x0, yt]), np.column_stack([x0, yb]),
                          np.column_stack([x1, yb]), np.column_stack([x1, yt])], axis=1)
        wide = (x1 - x0) * fr.scale >= 4 * px  # white edges separate neighbours, but never hide a thin bar
        pc = PolyCollection(verts, facecolors=KIND_COLORS.get(k, "#7f7f7f"), edgecolors="white",
                            linewidths=np.where(wide, 0.6, 0.0), antialiased=False,
                            zorder=2 + _DRAW_ORDER.index(k) * 0.01, label=KIND_LABELS.get(k, k))
        ax.add_collection(pc)
        collections[k] = pc
    return collections, int(widened.sum())


def _draw_labels(ax: Any, fr: _Frame, sel: _Rows, lay: _Layout, px: float, collections: dict) -> None:
    """Each GPU event's name, centred in its bar, shown only while it fits the bar as drawn (GPU work only, at
    most _MAX_LABELS; names plainly too long for their bar now are not even tried)."""
    gpu = np.flatnonzero(sel.on_gpu[sel.rows] & (sel.K != "sync"))
    names = fr.trace.events["name"].to_numpy(dtype=object)[sel.rows[gpu]]
    s, e = np.clip(sel.S[gpu], fr.w0, fr.w1), np.clip(sel.E[gpu], fr.w0, fr.w1)
    maybe = (e - s) / px >= np.array([4.0 * len(str(n)) + 2 for n in names])
    drawn = []
    for i in np.flatnonzero(maybe)[:_MAX_LABELS]:
        r = gpu[i]
        y = lay.y0[sel.L[r]] + lay.sub[r] + 0.5
        ink = "black" if lab(KIND_COLORS.get(sel.K[r], "#7f7f7f"))[0] > 60 else "white"  # dark names on light bars
        label = FittedLabel(ax, (s[i] - fr.w0) / fr.scale, (e[i] - fr.w0) / fr.scale, y, str(names[i]),
                            fontsize=MIN_FONT_PT, color=ink, zorder=5)
        drawn.append(label.text)
    collections["labels"] = drawn


def _draw_arrows(ax: Any, fr: _Frame, sel: _Rows, lay: _Layout, max_arrows: int, collections: dict) -> int:
    """Lines from each launch's start on its host lane to its GPU work's start; returns how many."""
    from matplotlib.collections import LineCollection

    ev = fr.trace.events
    g = np.flatnonzero(sel.on_gpu[sel.rows] & np.isin(sel.K, _GPU_DRAW))
    launch = ev["launch"].to_numpy(dtype=np.float64, na_value=np.nan)[sel.rows[g]]
    has = np.isfinite(launch)
    g, launch = g[has], launch[has].astype(np.int64)
    pos = ev.index.get_indexer(launch)
    g, pos = g[pos >= 0], pos[pos >= 0]
    src_lane = sel.lane_codes[pos]
    g, pos, src_lane = g[src_lane >= 0], pos[src_lane >= 0], src_lane[src_lane >= 0]
    if len(g) > max_arrows:
        pick = np.linspace(0, len(g) - 1, max_arrows).astype(np.int64)
        g, pos, src_lane = g[pick], pos[pick], src_lane[pick]
    if not len(g):
        return 0
    L = sel.L
    lx = (ev["start_us"].to_numpy(np.float64)[pos] - fr.w0) / fr.scale
    ly = lay.y0[src_lane] + 0.5
    gx = (sel.S[g] - fr.w0) / fr.scale
    gy = np.where(lay.in_strip[g], lay.y0[L[g]] + lay.nsub[L[g]] + lay.strip[L[g]] / 2, lay.y0[L[g]] + lay.sub[g] + 0.5)
    segs = np.stack([np.column_stack([lx, ly]), np.column_stack([gx, gy])], axis=1)
    lc = LineCollection(segs, colors="#444444", linewidths=0.6, alpha=0.45, zorder=5)
    ax.add_collection(lc)
    head = np.where(lay.in_strip[g], gy - lay.strip[L[g]] / 2, gy - 0.45)
    ax.scatter(gx, head, marker="v", s=10, c="#444444", alpha=0.6, zorder=6, linewidths=0)
    collections["arrows"] = lc
    return len(g)


def _draw_brackets(ax: Any, fr: _Frame, lay: _Layout, px: float, collections: dict) -> None:
    """The host's record_function ranges as brackets above their lane, labelled where the name fits."""
    from matplotlib.collections import LineCollection

    if not len(lay.ann_pos):
        return
    ev, pos = fr.trace.events, lay.ann_pos
    a_s = np.clip(ev["start_us"].to_numpy(np.float64)[pos], fr.w0, fr.w1)
    a_e = np.clip(ev["end_us"].to_numpy(np.float64)[pos], fr.w0, fr.w1)
    ax0, ax1 = (a_s - fr.w0) / fr.scale, (a_e - fr.w0) / fr.scale
    yy = lay.y0[lay.ann_lane] - 0.12 - _ANN_STRIP * lay.ann_level
    tick = 0.2
    segs = np.concatenate([
        np.stack([np.column_stack([ax0, yy]), np.column_stack([ax1, yy])], axis=1),
        np.stack([np.column_stack([ax0, yy]), np.column_stack([ax0, yy + tick])], axis=1),
        np.stack([np.column_stack([ax1, yy]), np.column_stack([ax1, yy + tick])], axis=1)])
    ax.add_collection(LineCollection(segs, colors="#6a3d9a", linewidths=1.0, zorder=4))
    collections["annotations"] = segs
    for x_a, x_b, y_a, name in zip(ax0, ax1, yy, ev["name"].to_numpy(dtype=object)[pos]):
        if (x_b - x_a) * fr.scale / px >= 7.0 * len(str(name)) + 4:  # only where the label fits its bracket
            ax.text(x_a, y_a - 0.05, str(name), fontsize=MIN_FONT_PT, color="#6a3d9a", va="bottom", ha="left",
                    clip_on=True, zorder=6)


def _style_axes(ax: Any, fr: _Frame, lanes: list[str], is_gpu_lane: np.ndarray, lay: _Layout) -> None:
    """Lane labels, separators (darker between a rank's GPU and host lanes, darkest between ranks), limits."""
    centers = lay.y0 + (lay.nsub + lay.strip) / 2.0
    ax.set_yticks(centers)
    ax.set_yticklabels([lane + (f"  [{lay.nsub[i]} rows]" if lay.nsub[i] > 1 else "") for i, lane in enumerate(lanes)])
    rank_of = [lane.split(" · ", 1)[0] if lane.startswith("rank ") else "" for lane in lanes]
    for i in range(1, len(lanes)):
        sep = lay.y0[i] - lay.ann[i] - lay.gap / 2
        if rank_of[i] != rank_of[i - 1]:
            ax.axhline(sep, color="#000000", lw=1.6, zorder=1)
        elif is_gpu_lane[i - 1] and not is_gpu_lane[i]:
            ax.axhline(sep, color="#333333", lw=1.0, zorder=1)
        else:
            ax.axhline(sep, color="#999999", lw=0.5, zorder=1)
    ax.set_ylim(lay.total_h + 0.2, -0.2 - (lay.ann[0] if len(lay.ann) else 0.0))
    ax.set_xlim(-0.01 * fr.span / fr.scale, fr.span * 1.01 / fr.scale)
    ax.set_xlabel(f"time ({fr.unit}) from " + ("the window start" if "window" in fr.trace.meta else "the trace start"),
                  fontsize=MIN_FONT_PT)
    ax.tick_params(labelsize=MIN_FONT_PT)
    ax.grid(axis="x", color="#e6e6e6", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


@dataclass
class _Finding:
    """Where one finding of a diagnosis explains time, over one GPU's lanes (``lanes``; its strip sits above
    the first); ``x0``/``x1`` in the trace's µs."""

    kind: str
    share: float
    lanes: list[int]
    x0: np.ndarray
    x1: np.ndarray


def _findings(diagnosis: Any, fr: _Frame, lanes: list[str], is_gpu_lane: np.ndarray) -> list[_Finding]:
    """The stretches each finding of ``diagnosis`` explains in the window, per GPU (as drawn: its lanes)."""
    p = diagnosis.pieces
    p = p[p["kind"].isin(list(FINDING_COLORS)) & (p["start"] + p["dur"] > fr.w0) & (p["start"] < fr.w1)]
    ev = fr.trace.events
    out = []
    for f in diagnosis.findings:
        mine = p[p["kind"] == f.kind] if f.share >= FOLD_SHARE else p.iloc[:0]
        for (rank, dev), g in mine.groupby(["rank", "device"], dropna=False):
            on = ev["device"] == dev if pd.isna(rank) else (ev["device"] == dev) & (ev["rank"] == rank)
            idx = [i for i, lane in enumerate(lanes) if is_gpu_lane[i] and lane in set(ev.loc[on.fillna(False), "lane"])]
            if idx:
                out.append(_Finding(f.kind, f.share, idx, np.maximum(g["start"].to_numpy(np.float64), fr.w0),
                                    np.minimum((g["start"] + g["dur"]).to_numpy(np.float64), fr.w1)))
    return out


def _findings_room(found: list[_Finding], n_lanes: int) -> np.ndarray:
    """Room for a findings strip above the first lane of each GPU that has findings."""
    room = np.zeros(n_lanes)
    for f in found:
        room[min(f.lanes)] = _FIND_STRIP
    return room


def _draw_findings(ax: Any, fr: _Frame, lay: _Layout, found: list[_Finding]) -> list:
    """Each finding as solid spans in a strip above its GPU's lanes, and a faint band behind the lanes' work
    (under the bars, never over them); returns the legend handles, one per kind with its share of the step."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    handles, seen = [], set()
    for f in found:
        top = min(f.lanes)
        x0, x1 = (f.x0 - fr.w0) / fr.scale, (f.x1 - fr.w0) / fr.scale
        s_top, s_bot = lay.y0[top] - _FIND_STRIP + 0.06, lay.y0[top] - 0.1
        strip = [[(a, s_top), (a, s_bot), (b, s_bot), (b, s_top)] for a, b in zip(x0, x1)]
        ax.add_collection(PolyCollection(strip, facecolors=FINDING_COLORS[f.kind], linewidths=0, zorder=3))
        bottom = float((lay.y0[f.lanes] + lay.nsub[f.lanes] + lay.strip[f.lanes]).max()) + 0.1
        band = [[(a, lay.y0[top] - 0.05), (a, bottom), (b, bottom), (b, lay.y0[top] - 0.05)] for a, b in zip(x0, x1)]
        ax.add_collection(PolyCollection(band, facecolors=FINDING_COLORS[f.kind], alpha=0.12, linewidths=0,
                                         zorder=0.5))
        if (top, "label") not in seen:
            seen.add((top, "label"))
            ax.text(-0.01, (s_top + s_bot) / 2, "findings", transform=ax.get_yaxis_transform(), ha="right",
                    va="center", fontsize=MIN_FONT_PT, color="#555555")
        if f.kind not in seen:
            seen.add(f.kind)
            handles.append(Patch(facecolor=FINDING_COLORS[f.kind], label=f"{f.kind} {100 * f.share:.0f}%"))
    return handles


def _legend(ax: Any, collections: dict, extra: list | None = None, widened: int = 0) -> None:
    """One entry per kind drawn (D2D and P2P share one), plus the arrows when there are any, plus ``extra``,
    plus a note when short work was drawn wider than it lasted."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, seen = [], set()
    for k in _LEGEND_ORDER:
        if k in collections and KIND_LABELS[k] not in seen:
            seen.add(KIND_LABELS[k])
            handles.append(Patch(facecolor=KIND_COLORS[k], label=KIND_LABELS[k]))
    if "arrows" in collections:
        handles.append(Line2D([], [], color="#444444", lw=0.8, label="launch → GPU start"))
    handles += extra or []
    if widened:
        handles.append(Patch(facecolor="none", edgecolor="none", label=f"short work widened to {MIN_BAR_PX:g} px"))
    if handles:  # a row under the axes, right-aligned: never over the lanes, and no width taken from them
        from matplotlib.transforms import offset_copy

        under = offset_copy(ax.transAxes, fig=ax.figure, y=-_LEGEND_DROP_PT, units="points")
        ax.legend(handles=handles, loc="upper right", bbox_to_anchor=(1.0, 0.0), bbox_transform=under,
                  ncol=len(handles) if len(handles) <= 4 else min(4, -(-len(handles) // 2)), fontsize=MIN_FONT_PT,
                  frameon=False, handlelength=1.2, columnspacing=1.0, borderaxespad=0.0)


def _draw_callouts(ax: Any, fr: _Frame, sel: _Rows, lay: _Layout, callout: Any) -> list:
    """Label and arrow at the event (or time) each callout names: ``callout`` as draw_timeline takes it, or
    None for those the trace carries in ``meta["callouts"]`` (drawn only where their event is in the window)."""
    given = callout is not None
    wanted = parse_callout(callout if given else fr.trace.meta.get("callouts"))
    names = fr.trace.events["name"].astype(str).to_numpy(dtype=object)[sel.rows]
    gpu_first = np.argsort(~sel.on_gpu[sel.rows], kind="stable")  # GPU work before host calls of the same name
    drawn = []
    for c in wanted:
        if isinstance(c.at, str):
            hit = [i for i in gpu_first if c.at in names[i] and sel.E[i] > fr.w0 and sel.S[i] < fr.w1]
            if not hit:
                if given:
                    raise ValueError(f"callout {c.at!r}: no drawn event of that name in this window")
                continue
            i = min(hit, key=lambda j: sel.S[j])
            x = (0.5 * (max(sel.S[i], fr.w0) + min(sel.E[i], fr.w1)) - fr.w0) / fr.scale
            y = lay.y0[sel.L[i]] + lay.sub[i] + 0.5
            text = c.text or names[i]
        else:
            x, text = float(c.at) / fr.scale, c.text or fmt_us(c.at)
            y = float(lay.y0.min()) + 0.5 if len(lay.y0) else 0.5
        drawn.append(draw_callout(ax, x, y, text, MIN_FONT_PT))
    return drawn


def _title(fr: _Frame, n_rows: int, n_arrows: int) -> str:
    base = os.path.basename(fr.trace.source) or fr.trace.source
    title = f"{base}: {n_rows:,} events"
    if "window" in fr.trace.meta:
        title += f", window {fmt_us(fr.w0)} – {fmt_us(fr.w1)} of the trace"
    if n_arrows:
        title += f", {n_arrows} launch arrows"
    return title
