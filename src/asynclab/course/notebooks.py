"""Execute the course notebooks headless (into a build folder, or in place) and collect their figures."""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any
from dataclasses import dataclass
from pathlib import Path

FIGURES_ENV = "ASYNCLAB_FIGURES"


def save_figure(fig, name: str) -> None:
    """Save a course figure as PNG into the folder the course command names; a no-op elsewhere.

    Notebooks call this for every figure worth keeping; ``make course`` sets the folder (figures/).
    It returns nothing, so the cell's output is the same whether or not the figure was written.

    Example:
        >>> import matplotlib.figure
        >>> save_figure(matplotlib.figure.Figure(), "demo.png")  # not run by the course command: nothing written
    """
    folder = os.environ.get(FIGURES_ENV)
    if not folder:
        return None
    if not name.endswith(".png"):
        raise ValueError(f"course figures are PNG (SVG is never stable under nbval): {name!r}")
    from asynclab.trace.draw.image import save_image

    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    save_image(fig, path)


def sharp_figures(scale: float = 2.0) -> bool:
    """In a notebook, show matplotlib figures as PNGs drawn ``scale`` times finer than their displayed size (and
    in at most 256 colours), so they stay sharp zoomed in on a phone; returns whether it could (False outside
    IPython).

    Example:
        >>> sharp_figures()  # a plain Python process: nothing to set
        False
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    import base64
    import struct

    from matplotlib.figure import Figure

    from asynclab.trace.draw.image import png_bytes

    def show(fig: Figure) -> Any:
        if not fig.axes and not fig.lines:
            return None
        data = png_bytes(fig, dpi=fig.dpi * scale)
        w, h = struct.unpack(">II", data[16:24])
        return base64.b64encode(data).decode("ascii"), {"width": int(round(w / scale)), "height": int(round(h / scale))}

    shell.display_formatter.formatters["image/png"].for_type(Figure, show)
    return True


class CourseError(RuntimeError):
    """A notebook of the course failed to run to the end."""


@dataclass(frozen=True)
class Executed:
    """One notebook run by :func:`run_notebooks`."""

    notebook: Path
    output: Path
    seconds: float


def run_notebooks(notebooks: list[Path], out_dir: Path | None, figures: Path | None, timeout: int = 600) -> list[Executed]:
    """Execute notebooks top to bottom with nbclient; write them to ``out_dir`` (None: in place).

    In place keeps execution counts, so committed notebooks carry real outputs.

    Example:
        >>> run_notebooks([], None, None)
        []
    """
    import nbclient
    import nbformat

    results = []
    old = os.environ.get(FIGURES_ENV)
    if figures is not None:
        os.environ[FIGURES_ENV] = str(Path(figures).resolve())
    try:
        for path in notebooks:
            path = Path(path)
            nb = nbformat.read(path, as_version=4)
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="asynclab-kernel-") as sockets:  # gone with the kernel
                km = _kernel_manager(sockets)
                client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", km=km,
                                                 resources={"metadata": {"path": str(path.parent.resolve())}})
                try:
                    client.execute()
                except nbclient.exceptions.CellExecutionError as err:
                    raise CourseError(f"{path}: a cell failed: {err.ename}: {err.evalue}") from None
                finally:
                    if km.has_kernel:
                        km.shutdown_kernel(now=True)
            target = path if out_dir is None else Path(out_dir) / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
            results.append(Executed(path, target, time.perf_counter() - t0))
    finally:
        if old is None:
            os.environ.pop(FIGURES_ENV, None)
        else:
            os.environ[FIGURES_ENV] = old
    return results



def _kernel_manager(sockets: str) -> Any:
    """A notebook kernel that talks to this process over local sockets in the folder ``sockets`` where it can (not
    unencrypted TCP)."""
    from jupyter_client.manager import KernelManager

    if os.name != "posix":
        return KernelManager(kernel_name="python3")
    # an absolute socket path: the kernel runs in the notebook's folder, where a relative one would not be found
    return KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))


def add_arguments(parser) -> None:
    """The arguments of ``asynclab course``."""
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: notebooks/*.ipynb)")
    parser.add_argument("--out", type=Path, default=Path("build/notebooks"), help="where executed copies go")
    parser.add_argument("--in-place", action="store_true", help="overwrite the notebooks with fresh outputs")
    parser.add_argument("--figures", type=Path, default=Path("figures"), help="where course figures go")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")


def command(args) -> int:
    """``asynclab course``: execute every notebook headless; figures go to --figures. Returns the exit status;
    a missing notebook or a failing cell is a :class:`CourseError` (one line)."""
    notebooks = args.notebooks or sorted(Path("notebooks").glob("[0-9][0-9]_*.ipynb"))
    missing = [str(p) for p in notebooks if not Path(p).is_file()]
    if not notebooks or missing:
        raise CourseError(f"no notebook at {', '.join(missing) or 'notebooks/'} (run it from the course's root)")
    done = run_notebooks(notebooks, None if args.in_place else args.out, args.figures, args.timeout)
    for item in done:
        print(f"ran {item.notebook} -> {item.output} (took {item.seconds:.1f} s)", flush=True)
    figures = sorted(args.figures.glob("*.png")) if args.figures.is_dir() else []
    print(f"{len(figures)} figures in {args.figures}/")
    return 0
