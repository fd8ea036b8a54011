#!/usr/bin/env python3
"""Every lesson's experiments on the simulated H100, beside the recorded references: prints the table as Markdown
and writes docs/predicted.md.

    python3 scripts/predicted_table.py [--lessons 01 03 ...] [--out docs/predicted.md]

Each experiment runs once in ``al.simulate`` (asynclab.course.predicted); the numbers come from that run and from
the packaged references, never typed in. Takes a few minutes on a laptop's CPU.
"""
from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from asynclab.course import misses, predicted, reference, registry  # noqa: E402
from asynclab.sim.figures import card_figures  # noqa: E402

INTRO = """# Predicted against recorded: the lessons on the simulated H100

Each lesson's experiment functions, run on the simulated H100 of `al.simulate` (device `"cuda"`, the GPU sizes),
beside the lesson's reference recorded on a real GPU. Every predicted number is labelled **{label}**. The cost
model's figures are in `src/asynclab/sim/cards/h100.json`; {calibrated}. {elsewhere}
Written by `scripts/predicted_table.py`
on {date}; `tests/course/test_predicted.py` holds a fast subset of it to the references.
"""


def recorded_elsewhere() -> str:
    """The sentence that names the lessons whose reference comes from another card than an H100.

    Example:
        >>> recorded_elsewhere().startswith(("Lesson", "Every lesson"))
        True
    """
    others = [item.number for item in registry.LESSONS
              if item.has("experiments") and "H100" not in reference.describe(item.number)]
    if not others:
        return "Every lesson was recorded on an H100."
    names = others[0] if len(others) == 1 else ", ".join(others[:-1]) + " and " + others[-1]
    return (f"Lesson{'s' if len(others) > 1 else ''} {names} {'were' if len(others) > 1 else 'was'} recorded on "
            f"another card (each section names it): {'their' if len(others) > 1 else 'its'} ratios compare an H100's "
            "prediction with that card's measurement.")


def fmt(value: float | None) -> str:
    """A figure as text: four significant digits, or a dash.

    Example:
        >>> fmt(3.14159), fmt(None)
        ('3.142', '—')
    """
    return "—" if value is None else f"{value:.4g}"


def lesson_tables(number: str, preds: dict) -> list[str]:
    """One lesson's Markdown: what could not run, its figures, its claims."""
    card = reference.describe(number).replace("reference recorded on ", "")
    lines = [f"## Lesson {number}: {registry.lesson(number).title}", "", f"Reference: {card}.", ""]
    slow = ", ".join(f"{k} {p.seconds:.1f} s" for k, p in preds.items() if p.ran)
    lines += [f"Simulated on this machine's CPU: {slow or 'none'}.", ""]
    limits = [(k, p.limit) for k, p in preds.items() if not p.ran]
    if limits:
        lines += ["Could not run on the simulated GPU:", ""] + [f"- `{k}`: {why}" for k, why in limits] + [""]
    rows = predicted.figure_rows(number, preds)
    if rows:
        lines += [f"| experiment | figure | {predicted.LABEL} | recorded | ratio |", "|---|---|---|---|---|"]
        lines += [f"| {r['experiment']} | {r['figure']} | {fmt(r['predicted'])} | {fmt(r['recorded'])} | "
                  f"{fmt(r['ratio'])} |" for r in rows] + [""]
    claims = predicted.claim_rows(number, preds)
    if claims:
        lines += ["| experiment | claim | recorded | predicted | agree |", "|---|---|---|---|---|"]
        lines += [f"| {c['experiment']} | {c['claim']} | {c['recorded']} | {c['predicted']} | "
                  f"{'yes' if c['recorded'] == c['predicted'] else 'no'} |" for c in claims] + [""]
    missed = misses.misses(rows + claims)
    if missed:
        low, high = misses.TARGET
        lines += [f"Where the prediction misses (a figure's ratio outside {low} to {high}, a claim's verdict), and why:",
                  ""] + [f"- {what}: {why or 'not yet explained'}" for what, why in missed] + [""]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the lessons' experiments on the simulated H100, print the table, write it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", nargs="*", default=None, help="lesson numbers (default: all with experiments)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "predicted.md"))
    args = parser.parse_args(argv)
    numbers = [registry.lesson(n).number for n in args.lessons] if args.lessons else \
        [item.number for item in registry.LESSONS if item.has("experiments")]
    calibrated = ("the card's own figures measured on an H100 by `scripts/calibrate_gpu.py`, the host's taken from the recordings, or measured on an H100's host and scaled to the recordings' host (its `meta.source` says which)" if card_figures("H100")["meta"].get("calibrated")
                  else "most of them are not yet calibrated on a card (its `meta.source` says which)")
    lines = [INTRO.format(label=predicted.LABEL, calibrated=calibrated, elsewhere=recorded_elsewhere(),
                          date=dt.date.today().isoformat())]
    for number in numbers:
        preds = predicted.predict(number)
        part = lesson_tables(number, preds)
        print("\n".join(part), flush=True)
        lines += part
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
