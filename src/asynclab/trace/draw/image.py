"""Save a figure as an image: PNG sharp enough to zoom into on a phone yet small, or SVG."""
from __future__ import annotations

import os
from typing import Any

__all__ = ["SAVE_DPI", "check_image_path", "png_bytes", "save_image"]

#: The resolution PNGs are saved at: 2x the 100 dpi a notebook shows, so that a figure stays sharp zoomed in
#: on a phone (1400 px for the 7-inch width).
SAVE_DPI = 200


def png_bytes(fig: Any, dpi: float = SAVE_DPI, **kwargs: Any) -> bytes:
    """The figure as PNG, cropped to what it draws, in at most 256 colours (a timeline has few: a third of the
    bytes, so a figure drawn sharp for a phone stays small).

    Example:
        >>> import matplotlib.figure
        >>> png_bytes(matplotlib.figure.Figure(figsize=(1, 1)), dpi=50)[:4]
        b'\\x89PNG'
    """
    import io

    from PIL import Image

    kwargs.setdefault("bbox_inches", "tight")
    raw = io.BytesIO()
    fig.savefig(raw, format="png", dpi=dpi, **kwargs)
    raw.seek(0)
    img = Image.open(raw).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                                  dither=Image.Dither.NONE)
    out = io.BytesIO()
    img.save(out, format="png", optimize=True)
    return out.getvalue()


def save_image(fig: Any, path: str | os.PathLike, dpi: float = SAVE_DPI, **kwargs: Any) -> str:
    """Save a figure as .png (with :func:`png_bytes`) or .svg, chosen by the file name; returns the path.

    Example:
        >>> import matplotlib.figure
        >>> save_image(matplotlib.figure.Figure(figsize=(1, 1)), "/tmp/asynclab_doctest.png", dpi=50)
        '/tmp/asynclab_doctest.png'
    """
    p = check_image_path(path)
    if p.lower().endswith(".png"):
        with open(p, "wb") as f:
            f.write(png_bytes(fig, dpi=dpi, **kwargs))
    else:
        kwargs.setdefault("bbox_inches", "tight")
        fig.savefig(p, dpi=dpi, **kwargs)
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
