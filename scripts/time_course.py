#!/usr/bin/env python3
"""Time the course live: each notebook's wall time, and its slowest cells, from one headless run.

    python3 scripts/time_course.py [NOTEBOOK ...] [--out build/timed] [--json timings.json] [--top 6]

Executes the notebooks one after another (as ``asynclab course`` does: a fresh kernel each, never two at
once, so that no notebook's live measurement shares the GPUs) into ``--out``, then reads each cell's
start and end from the timing nbclient records in the executed notebook. Prints a table and, with
``--json``, writes ``{"gpus": ..., "total_s": ..., "notebooks": {name: {"seconds", "cells": [...]}}}``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def cell_seconds(nb) -> list[dict]:
    """Each code cell's index, wall time and first line, from nbclient's ``metadata.execution``."""
    out = []
    for i, cell in enumerate(nb.cells):
        ex = cell.get("metadata", {}).get("execution", {})
        start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
        if cell.cell_type != "code" or not (start and end):
            continue
        secs = (dt.datetime.fromisoformat(end.replace("Z", "+00:00"))
                - dt.datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
        first = next((ln for ln in cell.source.splitlines() if ln.strip() and not ln.startswith("#")), "")
        out.append({"cell": i, "seconds": round(secs, 2), "source": first[:70]})
    return out


def main(argv: list[str] | None = None) -> int:
    import nbformat

    from asynclab.course.notebooks import run_notebooks

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*", type=Path)
    p.add_argument("--out", type=Path, default=Path("build/timed"))
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=Path("build/timed/figures"))
    p.add_argument("--top", type=int, default=6, help="slowest cells to list per notebook")
    args = p.parse_args(argv)
    notebooks = args.notebooks or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    report = {"notebooks": {}}
    try:
        import torch
        report["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        report["gpus"] = []
    for item in run_notebooks(notebooks, args.out, args.figures):
        cells = cell_seconds(nbformat.read(item.output, as_version=4))
        report["notebooks"][item.notebook.name] = {"seconds": round(item.seconds, 1), "cells": cells}
        print(f"{item.notebook.name:<28} {item.seconds:6.1f} s (cells {sum(c['seconds'] for c in cells):.1f} s)", flush=True)
        for c in sorted(cells, key=lambda c: -c["seconds"])[:args.top]:
            print(f"    [{c['cell']:>2}] {c['seconds']:6.2f} s  {c['source']}", flush=True)
    report["total_s"] = round(sum(n["seconds"] for n in report["notebooks"].values()), 1)
    print(f"{'whole course':<28} {report['total_s']:6.1f} s on {', '.join(report['gpus']) or 'no GPU'}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
