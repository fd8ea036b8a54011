"""How long each exercise check takes: the published solution's al.check, timed in a fresh process, median of runs.

    python3 scripts/bench_checks.py [--runs 5] [--fresh | --in-notebook] [EXERCISE ...]

Without a GPU the checks run on the simulated GPU; with one, on the GPU. Prints one line per exercise: the median
and the spread of the check's own time (the set-up before it is not counted). With ``--fresh``, the time of the
whole fresh-process grade the classroom gives it instead (asynclab.grading.fresh: a new Python, the set-up, the
answer, the check). With ``--in-notebook``, the check's time after every code cell of the lesson before it has run
(its live measurements and traces included), as a learner's first check in a running notebook.

Let Python cache bytecode (no PYTHONDONTWRITEBYTECODE), as an installed PyTorch has it: without a cache every fresh
process compiles torch's Python modules again, seconds that no learner's machine pays.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import answers  # noqa: E402 - the corpus's own reader of the notebooks' solutions

_TIMED = '''
import json as _json, time as _time, asynclab as _al
_check, _times = _al.check, []
def _timed(*a, **k):
    t = _time.perf_counter(); v = _check(*a, **k); _times.append(_time.perf_counter() - t); return v
_al.check = _timed
'''


def time_solution(answer: answers.Answer) -> float:
    """Seconds the answer's (first) check took, in a fresh process after the lesson's set-up."""
    code = f"{answer.setup}\n{_TIMED}\n{answer.code}\nprint('BENCH' + _json.dumps(_times))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH")), None)
    if line is None:
        raise RuntimeError(f"{answer.id}: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(line[5:])[0]


def in_notebook(answer: answers.Answer, notebook: Path) -> answers.Answer:
    """The answer with, as its set-up, every code cell of the notebook before its solution (less the checks)."""
    at = int(answer.name.rsplit(" ", 1)[1])
    cells = json.loads(notebook.read_text())["cells"][:at]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return dataclasses.replace(answer, setup="\n".join(c for c in code if "al.check(" not in c))


def time_fresh_grade(answer: answers.Answer) -> float:
    """Seconds the classroom's fresh-process grade of the answer took, whole (its last ``al.check(...)`` call)."""
    from asynclab.grading.fresh import check_in_fresh_process

    lines = answer.code.rstrip().splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith("al.check("))
    t0 = time.perf_counter()
    grade = check_in_fresh_process(answer.setup, "\n".join(lines[:at]), "\n".join(lines[at:]))
    seconds = time.perf_counter() - t0
    if not grade.right:
        raise RuntimeError(f"{answer.id}: graded not right: {grade.message[:200]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--fresh", action="store_true", help="time the whole fresh-process grade")
    how.add_argument("--in-notebook", action="store_true", help="time the check after the lesson's cells before it")
    parser.add_argument("exercises", nargs="*")
    args = parser.parse_args()
    chosen = {}
    for nb in sorted(answers.NOTEBOOKS.glob("*.ipynb")):
        for answer in answers.solutions(nb):
            if not args.exercises or answer.exercise in args.exercises:
                chosen.setdefault(answer.exercise, in_notebook(answer, nb) if args.in_notebook else answer)
    for exercise, answer in chosen.items():
        timed = time_fresh_grade if args.fresh else time_solution
        times = [timed(answer) for _ in range(args.runs)]
        print(f"{exercise:22s} median {statistics.median(times):6.2f} s  (min {min(times):.2f}, max {max(times):.2f}, "
              f"{args.runs} runs)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
