"""What the book adds to a lesson's notebook: alt text for every figure, and the lesson's reference traces to open in
Perfetto or download (the notebooks themselves stay as they are)."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

#: Where the book keeps its own script, style and the reference traces (Sphinx copies it into the site).
STATIC = "_static"
#: The book's icon in ``STATIC`` (drawn by :func:`favicon`), which every page links.
FAVICON = "favicon.ico"
_TITLE = re.compile(r"""(?:title=|set_title\(|suptitle\()f?(["'])(.+?)\1""")
_EXPRESSION = re.compile(r"\{[^{}]*\}")
_HEADING = re.compile(r"^#{2,3} (.+)$", re.M)


def alt_text(source: str, heading: str, gpu: str) -> str:
    """A figure's description for a screen reader and for search, from the titles its cell gives its panels.

    Example:
        >>> alt_text('al.draw_timeline(t, title=f"one stream ({run.reference_gpu})")', "1 · One stream", "NVIDIA H100")
        'Timeline of a profiler trace, lanes per GPU stream and host thread: one stream (NVIDIA H100) (section 1 · One stream)'
        >>> alt_text("plt.bar(x, y)", "2 · Bandwidth", "NVIDIA H100")
        'Chart for section 2 · Bandwidth'
    """
    titles = []
    for _, title in _TITLE.findall(source):
        text = _EXPRESSION.sub(lambda m: gpu if "reference_gpu" in m.group(0) else "…", title)
        text = re.sub(r"(…[\s:,]*)+", "… ", text).strip(" …:,")
        if text and text not in titles:
            titles.append(text)
    kind = "Timeline of a profiler trace, lanes per GPU stream and host thread" if "draw_timeline" in source \
        else "Chart"
    where = f" (section {heading})" if heading else ""
    return f"{kind}: {'; '.join(titles)}{where}" if titles else f"{kind} for section {heading}"


def has_image(cell: dict) -> bool:
    """Whether a cell shows a PNG figure in its stored outputs."""
    return any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


def with_alt_text(nb: dict, gpu: str) -> int:
    """Give every figure of the notebook its alt text (MyST-NB's ``mystnb.image.alt`` cell option); returns how many."""
    heading, count = "", 0
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            found = _HEADING.findall(source)
            heading = found[-1] if found else heading
        elif has_image(cell):
            options = cell.setdefault("metadata", {}).setdefault("mystnb", {}).setdefault("image", {})
            options["alt"] = alt_text(source, heading, gpu)
            count += 1
    return count


_TRACE_CALL = re.compile(r"""reference_trace\(\s*(f?)(["'])(.+?)\2""")


def traces_drawn(source: str, names: list[str]) -> list[str]:
    """The reference traces a figure's cell draws (``run.reference_trace("name")``, an f-string name matched against
    the lesson's trace names), in the order the cell names them.

    Example:
        >>> traces_drawn('t = run.reference_trace(f"gpipe_m{m}")', ["gpipe_m1", "gpipe_m4", "naive"])
        ['gpipe_m1', 'gpipe_m4']
        >>> traces_drawn("plt.plot(x)", ["naive"])
        []
    """
    found: list[str] = []
    for f, _, name in _TRACE_CALL.findall(source):
        pattern = re.escape(name) if not f else "".join(
            ".+" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{[^{}]*\})", name))
        found += [n for n in names if re.fullmatch(pattern, n) and n not in found]
    return found


def _buttons(number: str, names: list[str]) -> str:
    return " ".join(f'<button class="asynclab-perfetto" data-trace="../{STATIC}/traces/{number}/{name}.json.gz" '
                    f'data-title="lesson {number}: {name}">Open <code>{name}</code> in Perfetto</button>'
                    for name in names)


_ASSIGNED = re.compile(r"""^(\w+)\s*=\s*[\w.]*reference_trace\(""", re.M)


def measured_traces(source: str) -> dict[str, list[str]]:
    """The experiment cells' results a cell names (``m = run.measure(..., name="x")``) and the recording each has in
    the lesson's reference (``cell_x``): the trace a figure drawn from ``m`` shows, as recorded from the same cell.

    Example:
        >>> measured_traces('pipe = run.measure({"a": a}, setup, name="pipeline")')
        {'pipe': ['cell_pipeline']}
        >>> measured_traces("x = 1")
        {}
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == "measure"):
            name = next((k.value for k in node.value.keywords if k.arg == "name"), None)
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                found[node.targets[0].id] = [f"cell_{name.value}"]
    return found


def with_perfetto_beside(nb: dict, number: str, names: list[str]) -> int:
    """After every figure drawn from a reference trace, a line of buttons that open those traces in Perfetto, so that
    a reader zooms into the figure they are looking at; returns how many figures got one. A trace read into a
    variable in an earlier cell (``trace = run.reference_trace("x")``) counts for the figures that use the variable,
    and so does an experiment cell's result (``m = run.measure(..., name="x")``: its recording, ``cell_x``)."""
    cells, count, known = [], 0, {}
    for cell in nb["cells"]:
        cells.append(cell)
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        for line in source.splitlines():
            found = _ASSIGNED.match(line)
            if found:
                known[found.group(1)] = traces_drawn(line, names)
        known.update({var: [n for n in traced if n in names] for var, traced in measured_traces(source).items()})
        if not has_image(cell):
            continue
        drawn = traces_drawn(source, names)
        for var, traced in known.items():
            if re.search(rf"\b{var}\b", source):
                drawn += [n for n in traced if n not in drawn]
        if drawn:
            count += 1
            text = f'<p class="asynclab-beside">{_buttons(number, drawn)}</p>\n'
            cells.append({"cell_type": "markdown", "id": f"perfetto-{count}", "metadata": {}, "source": [text]})
    nb["cells"] = cells
    return count


def traces_cell(number: str, names: list[str], gpu: str) -> dict:
    """A markdown cell that lists the lesson's reference traces, each to open in Perfetto or to download."""
    rows = "\n".join(
        f'<li><button class="asynclab-perfetto" data-trace="../{STATIC}/traces/{number}/{name}.json.gz" '
        f'data-title="lesson {number}: {name}">Open in Perfetto</button>'
        f'<a href="../{STATIC}/traces/{number}/{name}.json.gz" download><code>{name}.json.gz</code></a></li>'
        for name in names)
    text = (f"## The traces behind this lesson\n\nThe timelines above are drawn from these profiler traces, recorded on "
            f"{gpu}. Open one in the Perfetto UI (ui.perfetto.dev) to zoom into any microsecond, or download it "
            "and open it there, in `chrome://tracing`, or with `asynclab timeline` and `asynclab summary`.\n\n"
            f'<ul class="asynclab-traces">\n{rows}\n</ul>\n')
    return {"cell_type": "markdown", "id": "asynclab-traces", "metadata": {}, "source": text.splitlines(True)}


def lesson_page(item: Any, notebook: Path, out: Path, static: Path) -> None:
    """Write the book's copy of a lesson's notebook to ``out``: alt text on its figures and, for a lesson with a GPU
    reference, its traces (copied under ``static/traces/NN/``)."""
    from asynclab.course import reference

    nb = json.loads(notebook.read_text())
    gpu = item.reference_gpu if item.gpus else "this machine"
    with_alt_text(nb, gpu)
    names = reference.trace_names(item.number) if item.gpus else []
    if names:
        folder = static / "traces" / item.number
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy(reference.trace_path(item.number, name), folder / f"{name}.json.gz")
        with_perfetto_beside(nb, item.number, names)
        nb["cells"].append(traces_cell(item.number, names, gpu))
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def favicon(path: Path) -> Path:
    """Draw the book's icon, a two-lane timeline in which a copy (orange) overlaps a kernel (blue), into ``path``
    (``.ico``, 16 to 48 px; the colours are the colour-blind-safe Okabe-Ito ones).

    Example:
        >>> import tempfile
        >>> from PIL import Image
        >>> Image.open(favicon(Path(tempfile.mkdtemp()) / "favicon.ico")).size
        (48, 48)
    """
    from PIL import Image, ImageDraw

    size = 48
    image = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, size - 1, size - 1), radius=9, fill=(255, 255, 255, 255),
                           outline=(60, 60, 60, 255), width=2)
    draw.rectangle((7, 11, 31, 21), fill=(0, 114, 178, 255))    # a kernel on one stream
    draw.rectangle((17, 27, 41, 37), fill=(230, 159, 0, 255))   # a copy on another, overlapping it
    image.save(path, sizes=[(16, 16), (32, 32), (48, 48)])
    return path


def static_files(static: Path) -> list[str]:
    """Copy the book's script and style into ``static`` and draw its icon there; the names of the script and style,
    for Sphinx's ``html_js_files`` and ``html_css_files``."""
    static.mkdir(parents=True, exist_ok=True)
    favicon(static / FAVICON)
    here = Path(__file__).resolve().parent / "book_static"
    for path in here.iterdir():
        shutil.copy(path, static / path.name)
    return sorted(p.name for p in here.iterdir())
