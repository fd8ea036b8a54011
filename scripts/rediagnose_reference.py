#!/usr/bin/env python3
"""Make lesson 08's recorded diagnoses again with this checkout's `asynclab diagnose`, without a GPU.

    python3 scripts/rediagnose_reference.py [--check]

Lesson 08's reference holds, beside each stage's measured step time, the diagnosis of the stage's trace and what it
predicted the next fix would save. Those are the diagnosis' reading of the recorded traces: when the diagnosis
changes, they are made again from the same traces (the measurements stay), so that the notebook's tables, its
claims and the exercise agree with what `al.diagnose` prints today. Where today's diagnosis would have ranked another
fix first, the stages no longer follow it, and the script says to record the reference again on a GPU
(scripts/record_references.py --lessons 08). ``--check`` changes nothing and exits 1 where the stored diagnoses are
not today's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 where the diagnoses are not today's")
    args = p.parse_args(argv)
    from asynclab.course import reference
    from asynclab.lessons.your_step.experiments import LESSON, rediagnose

    folder = reference.lesson_dir(LESSON)
    stored = reference.results(LESSON)
    try:
        again = rediagnose(stored, folder)
    except ValueError as err:
        print(f"rediagnose_reference: {err}", file=sys.stderr)
        return 1
    if args.check:
        same = json.dumps(again, sort_keys=True) == json.dumps(stored, sort_keys=True)
        print("the stored diagnoses are today's" if same else "the stored diagnoses are not today's: run "
              "scripts/rediagnose_reference.py")
        return 0 if same else 1
    (folder / "results.json").write_text(reference.dump_results(again))
    print(f"wrote {folder / 'results.json'}: first fix {again['headline']['first_fix']}, predicted "
          f"{again['headline']['first_fix_predicted_ms']:.1f} ms, saved {again['headline']['first_fix_saved_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
