#!/usr/bin/env python3
"""Put the launch links, the install cell (tagged so the book leaves it out, folded in JupyterLab to its first line)
and Colab's GPU request into every notebook.

    python3 scripts/launch_cells.py [--check]

With --check, change nothing and exit 1 if a notebook is not up to date (tests/course/test_launch.py does the same).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from asynclab.course import launch  # noqa: E402
from asynclab.course import registry as lessons  # noqa: E402

MARK = "[![Open in Colab]"
#: Jupyter Book's tag for a cell it leaves out of the page (input and output).
INSTALL_TAG = "remove-cell"
METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []},
            "kaggle": {"accelerator": "gpu", "isGpuEnabled": True, "isInternetEnabled": True}}


def _runs_first(cells: list[dict], install: int) -> None:
    """Number the install cell as the first one run (it prints nothing outside Colab and Kaggle, so the stored
    outputs of the run that made them stay what they were), and every later count one higher."""
    for cell in cells:
        if cell["cell_type"] == "code" and cell.get("execution_count") is not None:
            cell["execution_count"] += 1
            for out in cell.get("outputs", []):
                if out.get("execution_count") is not None:
                    out["execution_count"] += 1
    cells[install]["execution_count"] = 1


def updated(nb: dict, notebook: str) -> dict:
    """The notebook with its badges line, its install cell and the GPU metadata in place."""
    cells = nb["cells"]
    title = cells[0]
    lines = "".join(title["source"]).split("\n")
    lines = [line for line in lines if not line.startswith(MARK)]
    lines[1:1] = ["", launch.badges(notebook)]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    title["source"] = text.splitlines(True)
    code = launch.install_cell().splitlines(True)
    first = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    if not "".join(cells[first]["source"]).startswith("# On Colab or Kaggle"):
        cells.insert(first, {"cell_type": "code", "execution_count": None, "id": "install0", "metadata": {},
                             "outputs": [], "source": code})
    cells[first]["source"] = code
    tags = cells[first].setdefault("metadata", {}).setdefault("tags", [])
    if INSTALL_TAG not in tags:  # the platform's set-up, not the lesson: off the book's pages and out of its search
        tags.append(INSTALL_TAG)
    # folded in JupyterLab, which then shows its first line only: what the cell is for
    cells[first]["metadata"].setdefault("jupyter", {})["source_hidden"] = True
    if cells[first]["execution_count"] is None:
        _runs_first(cells, first)
    nb["metadata"].update(METADATA)
    return nb


def main(argv: list[str]) -> int:
    stale = []
    for item in lessons.written():
        path = REPO / "notebooks" / item.notebook
        before = path.read_text()
        after = json.dumps(updated(json.loads(before), item.notebook), indent=1, ensure_ascii=False) + "\n"
        if after != before:
            stale.append(item.notebook)
            if "--check" not in argv:
                path.write_text(after)
    if stale:
        print(("not up to date: " if "--check" in argv else "updated: ") + ", ".join(stale))
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
