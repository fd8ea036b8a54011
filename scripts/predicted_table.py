#!/usr/bin/env python3
"""Every lesson's experiment cells on the simulated card of their recordings, beside those recordings: executes
each notebook as a learner without a GPU runs it, collects what its cells show, and writes docs/predicted.md and
docs/predicted.json.

    python3 scripts/predicted_table.py [--notebooks notebooks/02_timing.ipynb ...] [--log FILE] [--from-log FILE]

Each notebook runs once in a fresh kernel (as ``scripts/bench_simulate.py --cells`` runs them) with
``ASYNCLAB_PREDICTED_LOG`` set: every figure (``Measured.figure``, ``Measured.answer``) and every claim
(``Measured.claim``) of a cell that runs its original code on the simulated card is logged beside its recording
(asynclab.course.predictlog), and every cell the simulation refuses, with its reason. The numbers come from that run
and from the packaged recordings, never typed in. ``--from-log`` writes the pages from a log already collected.
Takes about five minutes on a 2-core machine.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

from asynclab.course import misses, predictlog, registry  # noqa: E402
from lesson_stats import EXCEPTIONS  # noqa: E402

#: The label of every predicted number of the page.
LABEL = "simulated H200 (predicted)"

INTRO = """# Predicted against recorded: the lessons' cells on the simulated card of their recordings

Without a GPU, every experiment cell of a lesson runs its own code on the simulated card that its recording was
made on (all of them on an NVIDIA H200), and shows each figure and claim beside the recording. This page collects
them: each notebook executed without a GPU, and each figure and claim of a cell that runs its original code.
A figure misses when its ratio (predicted / recorded) is outside {low} to {high}; a claim misses when its predicted
verdict is not the recording's. Each miss names what the model leaves out (`asynclab.course.misses`), and
`tests/course/test_predicted.py` holds the misses to their reasons. Written by `scripts/predicted_table.py` on {date}
from the notebooks as they are; `docs/predicted.json` holds the same rows.

Summary: {figures_ok} of {figures} figures within 25% of their recording; {claims_ok} of {claims} claims with the
recording's verdict; {refused} experiments not predicted, each with its reason.
"""


def fmt(value: float | None) -> str:
    """A figure as text: four significant digits, or a dash.

    Example:
        >>> fmt(3.14159), fmt(None)
        ('3.142', '—')
    """
    return "—" if value is None else f"{value:.4g}"


def cell_text(text: str) -> str:
    """Text for a Markdown table's cell: no pipe or newline breaks the row.

    Example:
        >>> cell_text("a | b\\nc")
        'a \\\\| b c'
    """
    return " ".join(text.replace("|", "\\|").split())


def execute(notebook: Path, log: Path, upto: int | None = None) -> None:
    """Run ``notebook`` in a fresh kernel, as a learner without a GPU does, with the predicted log set to ``log``
    (its first ``upto`` cells only, when given: a test's fast subset)."""
    import nbformat
    from nbclient import NotebookClient

    env = {predictlog.LOG_ENV: str(log), "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        nb = nbformat.read(notebook, as_version=4)
        nb.cells = nb.cells[:upto]
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(notebook.parent)}}).execute()
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def with_ratios(rows: list[dict]) -> list[dict]:
    """The log's rows, each figure with its ratio (predicted / recorded; 1 where both are the same, 0 and 0 say), the
    named exceptions added as refused.

    Example:
        >>> with_ratios([{"kind": "figure", "lesson": "02", "cell": "c", "what": "w", "predicted": 2.0,
        ...               "recorded": 4.0, "unit": "ms"}])[0]["ratio"]
        0.5
    """
    out = []
    for row in rows:
        row = dict(row)
        if row["kind"] == "figure":
            same = row["predicted"] == row["recorded"]  # 0 wrong elements predicted and recorded: they agree
            row["ratio"] = 1.0 if same else row["predicted"] / row["recorded"] if row["recorded"] else None
        if row["kind"] == "refused" and row["cell"] in EXCEPTIONS.get(row["lesson"], {}):
            continue  # said below, with the reason lesson_stats gives
        out.append(row)
    for number, named in EXCEPTIONS.items():
        out += [{"kind": "refused", "lesson": number, "cell": name,
                 "reason": f"runs in a fresh process on a GPU, not on the simulated card: {why}"}
                for name, why in named.items()]
    return out


def how(row: dict) -> str:
    """How a row misses, in words: the two figures, or the two verdicts.

    Example:
        >>> how({"kind": "figure", "predicted": 4.0, "recorded": 1.0, "unit": "MiB"})
        'predicted 4 MiB, recorded 1 MiB'
    """
    if row["kind"] == "figure":
        return f"predicted {fmt(row['predicted'])} {row['unit']}, recorded {fmt(row['recorded'])} {row['unit']}".replace(" )", ")")
    return f"predicted {row['predicted']}, recorded {row['recorded']}"


def lesson_part(number: str, rows: list[dict]) -> list[str]:
    """One lesson's Markdown: its cards, its figures, its claims, its misses and the cells it does not predict."""
    item = registry.lesson(number)
    mine = [r for r in rows if r["lesson"] == number]
    figures = [r for r in mine if r["kind"] == "figure"]
    claims = [r for r in mine if r["kind"] == "claim"]
    gpus = sorted({r["gpu"] for r in figures + claims})
    where = sorted({r["where"] for r in figures + claims})
    lines = [f"## Lesson {number}: {item.title}", ""]
    if gpus:
        cards = ", ".join(w.removesuffix(" (predicted)") for w in where)
        lines += [f"Recorded on {', '.join(gpus)}; predicted on the {cards}.", ""]
    if figures:
        lines += [f"| cell | figure | {LABEL} | recorded on NVIDIA H200 | ratio |", "|---|---|---|---|---|"]
        lines += [f"| {r['cell']} | {cell_text(r['what'])} | {fmt(r['predicted'])} {r['unit']} | "
                  f"{fmt(r['recorded'])} {r['unit']} | {fmt(r['ratio'])} |" for r in figures] + [""]
    if claims:
        lines += ["| cell | claim | recorded | predicted | agree |", "|---|---|---|---|---|"]
        lines += [f"| {r['cell']} | {cell_text(r['what'])} | {r['recorded']} | {r['predicted']} | "
                  f"{'yes' if r['recorded'] == r['predicted'] else 'no'} |" for r in claims] + [""]
    missed = [r for r in figures + claims if misses.is_miss(r)]
    if missed:
        lines += ["**Where the prediction misses, and why**", ""]
        lines += [f"- {r['cell']}, {cell_text(r['what'])}: {misses.MISSES.get(misses.key(r), 'not yet explained')}"
                  + (f" ({how(r)})" if misses.key(r) in misses.UNEXPLAINED else "") for r in missed] + [""]
    refused = [r for r in mine if r["kind"] == "refused"]
    if refused:
        lines += ["**Not predicted**", ""] + [f"- {r['cell']}: {r['reason']}" for r in refused] + [""]
    if not (figures or claims or refused):
        lines += ["No experiment cell: nothing to predict.", ""]
    return lines


def page(rows: list[dict]) -> str:
    """docs/predicted.md from the rows of :func:`with_ratios`."""
    figures = [r for r in rows if r["kind"] == "figure"]
    claims = [r for r in rows if r["kind"] == "claim"]
    low, high = misses.TARGET
    text = INTRO.format(low=low, high=high, date=dt.date.today().isoformat(), figures=len(figures),
                        figures_ok=sum(not misses.is_miss(r) for r in figures), claims=len(claims),
                        claims_ok=sum(not misses.is_miss(r) for r in claims),
                        refused=sum(r["kind"] == "refused" for r in rows))
    lines = [text]
    for item in registry.LESSONS:
        lines += lesson_part(item.number, rows)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Execute the notebooks with the log set (or read a log), write docs/predicted.md and docs/predicted.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="+", type=Path, default=sorted((ROOT / "notebooks").glob("0*.ipynb")))
    parser.add_argument("--log", type=Path, default=None, help="where to keep the log (default: a temporary file)")
    parser.add_argument("--from-log", type=Path, default=None, help="write the pages from this log, executing nothing")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "predicted.md")
    args = parser.parse_args(argv)
    log = args.from_log
    if log is None:
        log = args.log or Path(tempfile.mkstemp(suffix=".jsonl")[1])
        log.write_text("")
        for notebook in args.notebooks:
            print(f"executing {notebook.name}", flush=True)
            execute(notebook, log)
    rows = with_ratios(predictlog.read(log))
    args.out.write_text(page(rows))
    args.out.with_suffix(".json").write_text("[\n" + ",\n".join(json.dumps(r, sort_keys=True, ensure_ascii=False)
                                                                for r in rows) + "\n]\n", encoding="utf-8")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')} ({len(rows)} rows, log {log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
