#!/usr/bin/env python3
"""How long the simulated H100 takes on this machine's CPU for what a learner without a GPU runs: the lessons'
explore cells (lesson 03's rows, 05's chunks, 07's micro-batches) and a few of their experiments.

    python3 scripts/bench_simulate.py [--repeat 3]

Prints one line per call, the median of ``--repeat`` runs in seconds (each run after a first one that warms up
imports and caches). A benchmark, not a test: quote its figures, with the machine, in a note.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

#: (lesson, experiment, parameters) as the notebooks' explore cells pass them, and experiments the table runs.
EXPLORE = [(3, "branches", {"rows": 64}), (5, "pipeline", {"chunks": 4}),
           (7, "gpipe", {"micro_batches": (3,), "reps": 1}), (7, "gpipe", {"micro_batches": (16,), "reps": 1})]
EXPERIMENTS = [("06", "latency"), ("07", "asker"), ("08", "fix_one_at_a_time")]


def median_s(call: Callable[[], Any], repeat: int) -> float:
    """The median wall time of ``call`` over ``repeat`` runs after one more, in seconds.

    Example:
        >>> median_s(lambda: None, 3) < 0.1
        True
    """
    call()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="counted runs of each call (default 3)")
    args = p.parse_args(argv)
    from asynclab.course.lessonrun import LessonRun
    from asynclab.course.predicted import predict_one
    from asynclab.course.registry import lesson
    from asynclab.gpu import hardware

    hw = hardware.Hardware()
    for number, name, params in EXPLORE:
        run = LessonRun(lesson(number), hw)
        s = median_s(lambda: run.explore(name, **params), args.repeat)
        print(f"explore lesson {number:02d} {name} {params}: {s:.2f} s", flush=True)
    for number, key in EXPERIMENTS:
        s = median_s(lambda: predict_one(number, key), args.repeat)
        print(f"experiment lesson {number} {key}: {s:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
