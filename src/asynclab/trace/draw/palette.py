"""The timelines' one palette: a colour per kind of work, wait and finding, and how far apart two colours look."""
from __future__ import annotations

from itertools import combinations
from typing import Iterable

import numpy as np

from asynclab.trace.analysis.kinds import FINDING_KINDS

__all__ = ["KIND_COLORS", "KIND_LABELS", "FINDING_COLORS", "to_rgb", "over_white", "lab", "delta_e",
           "deuteranopia", "lch", "closest_pair"]

# Built from Okabe & Ito's colour-blind-safe set and Paul Tol's "bright" and "muted" sets, placed so that kinds
# that share a figure differ in hue *and* lightness (what a reader with deuteranopia still sees). Lesson texts name
# some of them: compute blue, host→GPU orange, GPU→host green, copy GPU→GPU purple, NCCL magenta, memset brown,
# CPU ops light grey, launches dark grey, the host's waits pink, the GPU's waits dark red.

#: Colour of each kind drawn on a lane.
KIND_COLORS = {
    "compute": "#0072B2",      # blue (Okabe-Ito)
    "comm": "#CC79A7",         # reddish purple, "magenta" (Okabe-Ito)
    "h2d": "#E69F00",          # orange (Okabe-Ito)
    "d2h": "#009E73",          # bluish green (Okabe-Ito)
    "d2d": "#4B1F6F",          # dark purple
    "p2p": "#4B1F6F",
    "memset": "#86622A",       # brown
    "sync": "#8E0E1E",         # dark red: the GPU waits (a strip under its lane)
    "other": "#8C8C8C",        # grey
    "cpu_op": "#D9D9D9",       # light grey
    "launch": "#3F3F3F",       # dark grey
    "host_sync": "#F4A0A8",    # pink: the host waits in a synchronize call
    "forward": "#88CCEE",      # cyan (Tol muted): a pipeline stage's forward
    "backward": "#882255",     # wine (Tol muted): its backward
    "weight_grad": "#44AA99",  # teal (Tol muted): ZB-H1's weight gradient
}
#: Legend text of each kind.
KIND_LABELS = {
    "compute": "compute kernel",
    "comm": "NCCL kernel",
    "h2d": "copy host → GPU",
    "d2h": "copy GPU → host",
    "d2d": "copy GPU → GPU",
    "p2p": "copy GPU → GPU",
    "memset": "memset",
    "sync": "GPU waits",
    "other": "other GPU work",
    "cpu_op": "CPU op",
    "launch": "launch (host)",
    "host_sync": "host waits (synchronize)",
    "forward": "forward (F)",
    "backward": "backward (B)",
    "weight_grad": "weight gradient (W)",
}
#: Colour of each finding of a diagnosis, drawn in the findings strip above a GPU's lanes (each kind's colour is
#: in the table of finding kinds, :data:`asynclab.trace.analysis.kinds.FINDING_KINDS`).
FINDING_COLORS = {k.name: k.colour for k in FINDING_KINDS if k.colour is not None}

# Machado, Oliveira & Fernandes (2009), severity 1.0, applied to linear RGB.
_DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968],
                          [0.280085, 0.672501, 0.047413],
                          [-0.011820, 0.042940, 0.968881]])
_D65 = np.array([0.95047, 1.0, 1.08883])
_RGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                        [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])


def to_rgb(color: str | Iterable[float]) -> tuple[float, float, float]:
    """An sRGB triple in 0..1 from ``"#rrggbb"`` or a sequence of 3 or 4 numbers in 0..1 (alpha over white).

    Example:
        >>> to_rgb("#ff8000")
        (1.0, 0.5019607843137255, 0.0)
        >>> to_rgb((1.0, 0.0, 0.0, 0.5))
        (1.0, 0.5, 0.5)
    """
    if isinstance(color, str):
        h = color.lstrip("#")
        if len(h) != 6:
            raise ValueError(f"not a #rrggbb colour: {color!r}")
        return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]
    c = [float(x) for x in color]
    if len(c) == 4:
        return over_white(c[:3], c[3])
    if len(c) != 3:
        raise ValueError(f"not an RGB or RGBA colour: {color!r}")
    return c[0], c[1], c[2]


def over_white(rgb: Iterable[float], alpha: float) -> tuple[float, float, float]:
    """The colour a translucent ``rgb`` shows on a white figure.

    Example:
        >>> over_white((0.0, 0.0, 0.0), 0.25)
        (0.75, 0.75, 0.75)
    """
    r, g, b = (alpha * float(x) + (1 - alpha) for x in rgb)
    return r, g, b


def _linear(rgb: np.ndarray) -> np.ndarray:
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _srgb(lin: np.ndarray) -> np.ndarray:
    lin = np.clip(lin, 0.0, 1.0)
    return np.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin ** (1 / 2.4) - 0.055)


def deuteranopia(color: str | Iterable[float]) -> tuple[float, float, float]:
    """The sRGB colour a reader with deuteranopia (no green cones) sees, by Machado et al. (2009).

    Example:
        >>> [round(x, 2) for x in deuteranopia("#ff0000")]
        [0.64, 0.57, 0.0]
    """
    lin = _linear(np.asarray(to_rgb(color)))
    r, g, b = _srgb(_DEUTERANOPIA @ lin)
    return float(r), float(g), float(b)


def lab(color: str | Iterable[float]) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour.

    Example:
        >>> [round(x) for x in lab("#ffffff")]
        [100, 0, 0]
    """
    xyz = _RGB_TO_XYZ @ _linear(np.asarray(to_rgb(color))) / _D65
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return float(116 * f[1] - 16), float(500 * (f[0] - f[1])), float(200 * (f[1] - f[2]))


def lch(color: str | Iterable[float]) -> tuple[float, float, float]:
    """CIE LCh of an sRGB colour: lightness, chroma (how colourful) and hue angle in degrees.

    Example:
        >>> [round(x) for x in lch("#0072B2")]  # a blue
        [46, 41, 266]
    """
    L, a, b = lab(color)
    return L, float(np.hypot(a, b)), float(np.degrees(np.arctan2(b, a)) % 360)


def delta_e(a: str | Iterable[float], b: str | Iterable[float], vision: str = "normal") -> float:
    """How far apart two colours look: CIE76 ΔE, the distance in L*a*b*; ``vision="deuteranopia"`` compares what
    a reader without green cones sees. Around 2 is barely noticeable; over 20, two different colours.

    Example:
        >>> round(delta_e("#d0d0d0", "#d8d8d8"))  # two light greys
        3
    """
    if vision not in ("normal", "deuteranopia"):
        raise ValueError(f"vision must be 'normal' or 'deuteranopia', not {vision!r}")
    if vision == "deuteranopia":
        a, b = deuteranopia(a), deuteranopia(b)
    return float(np.linalg.norm(np.subtract(lab(a), lab(b))))


def closest_pair(colors: dict[str, str | Iterable[float]], vision: str = "normal") -> tuple[float, str, str]:
    """The two entries of ``colors`` (label → colour) that look most alike: ``(ΔE, label, label)``.

    Example:
        >>> closest_pair({"CPU op": "#d0d0d0", "alloc_churn": "#d8d8d8", "kernel": "#0072B2"})[1:]
        ('CPU op', 'alloc_churn')
    """
    if len(colors) < 2:
        return float("inf"), "", ""
    return min((delta_e(colors[x], colors[y], vision), x, y) for x, y in combinations(colors, 2))
