"""What a timeline draws beside its bars: names that fit their box, short work widened to be seen, a callout."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MIN_BAR_PX", "widen", "FittedLabel", "Callout", "parse_callout", "draw_callout"]

#: Work shorter than this many pixels (as the figure is drawn) is drawn this wide, into the free space beside it.
MIN_BAR_PX = 4.0


def widen(slot: np.ndarray, start: np.ndarray, end: np.ndarray, min_w: float,
          on_top: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Widen bars narrower than ``min_w`` about their centre, into the free space of their ``slot``: a bar never
    grows over a neighbour, except that a bar drawn ``on_top`` (a rare kind, such as a memset between kernels)
    may cover up to ``min_w / 2`` of a neighbour at least twice ``min_w`` long. Returns
    ``(start, end, widened)``, ``widened`` True where a bar grew.

    Example:
        >>> s, e, w = widen(np.array([0, 0]), np.array([0.0, 10.0]), np.array([0.5, 20.0]), 4.0)
        >>> s.tolist(), e.tolist(), w.tolist()
        ([-1.75, 10.0], [2.25, 20.0], [True, False])
        >>> s, e, w = widen(np.zeros(3, int), np.array([0.0, 20.0, 20.1]), np.array([20.0, 20.1, 40.0]), 4.0,
        ...                 on_top=np.array([False, True, False]))
        >>> float(s[1]), float(e[1])  # a memset between two kernels: 2 into each
        (18.05, 22.05)
    """
    s, e = start.astype(np.float64).copy(), end.astype(np.float64).copy()
    narrow = (e - s) < min_w
    if not narrow.any():
        return s, e, np.zeros(len(s), dtype=bool)
    order = np.lexsort((s, slot))
    so, eo, ko = s[order], e[order], slot[order]
    first = np.r_[True, ko[1:] != ko[:-1]]
    last = np.r_[ko[1:] != ko[:-1], True]
    # the end of the bars before each one in its slot (a running max, reset at each slot)
    run_end = np.empty(len(so))
    for a, b in zip(np.flatnonzero(first), np.flatnonzero(last) + 1):
        run_end[a:b] = np.maximum.accumulate(eo[a:b])
    thin = (eo - so) < min_w
    prev_end = np.r_[-np.inf, run_end[:-1]]
    next_start = np.r_[so[1:], np.inf]
    # a gap between two bars that both grow is shared: each takes up to its middle
    left = np.where(first, -np.inf,
                    np.where(np.r_[False, thin[:-1]], np.maximum(prev_end, (prev_end + so) / 2), prev_end))
    right = np.where(last, np.inf, np.where(np.r_[thin[1:], False], np.minimum(next_start, (eo + next_start) / 2),
                                           next_start))
    if on_top is not None:  # a rare kind may lap over the edge of a long neighbour
        top = np.asarray(on_top, dtype=bool)[order]
        long_ = (eo - so) >= 2 * min_w
        left = np.where(top & np.r_[False, long_[:-1]] & ~first, left - min_w / 2, left)
        right = np.where(top & np.r_[long_[1:], False] & ~last, right + min_w / 2, right)
    c = 0.5 * (so + eo)
    ns = np.minimum(so, np.maximum(c - min_w / 2, left))
    ne = np.maximum(eo, np.minimum(c + min_w / 2, right))
    grow = thin & ((ne - eo > 1e-12 * min_w) | (so - ns > 1e-12 * min_w))
    s[order] = np.where(grow, ns, so)
    e[order] = np.where(grow, ne, eo)
    widened = np.zeros(len(s), dtype=bool)
    widened[order] = grow
    return s, e, widened


class FittedLabel:
    """A name written in the middle of a bar from ``x0`` to ``x1`` (data units), shown only while it fits the
    bar as drawn: checked at every draw, so a later ``set_xlim``, a shared x axis or a new size cannot make it
    spill onto its neighbours.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> label = FittedLabel(ax, 0.0, 1.0, 0.5, "F0")
        >>> label.text.get_text()
        'F0'
    """

    def __init__(self, ax: Any, x0: float, x1: float, y: float, name: str, pad_pt: float = 1.5, **kw: Any):
        self.x0, self.x1, self.pad_pt = x0, x1, pad_pt
        self.text = ax.text((x0 + x1) / 2, y, name, ha="center", va="center", clip_on=True, **kw)
        original = self.text.draw

        def draw(renderer: Any) -> None:
            self.text.set_visible(self.fits(renderer))
            original(renderer)

        self.text.draw = draw

    def fits(self, renderer: Any) -> bool:
        """Whether the name, as drawn now, fits between its bar's ends (with ``pad_pt`` points on each side).

        Example:
            >>> import matplotlib.pyplot as plt
            >>> fig, ax = plt.subplots(figsize=(7, 2))
            >>> ax.set_xlim(0, 100)
            (0.0, 100.0)
            >>> renderer = fig.canvas.get_renderer()
            >>> FittedLabel(ax, 0, 50, 0.5, "B3").fits(renderer), FittedLabel(ax, 0, 0.5, 0.5, "B3").fits(renderer)
            (True, False)
        """
        ax = self.text.axes
        (a, _), (b, _) = ax.transData.transform([(self.x0, 0.0), (self.x1, 0.0)])
        self.text.set_visible(True)
        need = self.text.get_window_extent(renderer).width + 2 * renderer.points_to_pixels(self.pad_pt)
        return bool(abs(b - a) >= need)


@dataclass(frozen=True)
class Callout:
    """The event a figure is about: ``at`` is an event name (the first drawn event whose name contains it)
    or a time in µs from the window start; ``text`` is the label (the event's name if empty).

    Example:
        >>> Callout("MulFunctor", "y = x * 2").text
        'y = x * 2'
    """

    at: str | float
    text: str = ""


def parse_callout(value: Any) -> list[Callout]:
    """Callouts from what ``draw_timeline(callout=...)`` takes: a name, a time (µs from the window start),
    ``(at, text)``, a :class:`Callout`, or a list of these; None gives none.

    Example:
        >>> parse_callout(("mul", "y = x * 2 reads x too early"))
        [Callout(at='mul', text='y = x * 2 reads x too early')]
        >>> parse_callout(None)
        []
    """
    if value is None or value is False:
        return []
    if isinstance(value, Callout):
        return [value]
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return [Callout(value if isinstance(value, str) else float(value))]
    if isinstance(value, dict):
        return [Callout(value["at"], str(value.get("text", "")))]
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        at = value[0]
        return [Callout(at if isinstance(at, str) else float(at), value[1])]
    if isinstance(value, (list, tuple)):
        return [c for v in value for c in parse_callout(v)]
    raise ValueError(f"callout must be an event name, a time in µs, (at, text) or a list of them, not {value!r}")


def draw_callout(ax: Any, x: float, y: float, text: str, fontsize: float, color: str = "#000000") -> Any:
    """``text`` in a box beside the point ``(x, y)`` (data units; the middle of the event's bar), with an arrow
    to it: on the right of the point in the left half of the axes, on its left in the right half, so that it
    stays inside the figure. Returns the annotation.

    Example:
        >>> import matplotlib.pyplot as plt
        >>> fig, ax = plt.subplots()
        >>> draw_callout(ax, 0.5, 0.5, "here", 9).get_text()
        'here'
    """
    lo, hi = ax.get_xlim()
    right = (x - lo) / (hi - lo) < 0.5 if hi != lo else True
    return ax.annotate(text, xy=(x, y), xycoords="data", xytext=(22 if right else -22, 0), textcoords="offset points",
                       ha="left" if right else "right", va="center", fontsize=fontsize, color=color, zorder=8,
                       arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.0, "shrinkA": 0, "shrinkB": 2},
                       bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": color, "lw": 0.6},
                       annotation_clip=False)
