#!/usr/bin/env python3
"""How long the simulated card takes on this machine's CPU for what a learner without a GPU runs: the lessons'
explore cells (lesson 03's rows, 05's chunks, 07's micro-batches) and a few of their experiments; with ``--cells``,
every experiment cell of the notebooks (a code cell that calls ``run.measure``), run as a learner runs it.

    python3 scripts/bench_simulate.py [--repeat 3]
    python3 scripts/bench_simulate.py --cells [--notebooks notebooks/07_pipeline_bubbles.ipynb ...] [--over 2]
    python3 scripts/bench_simulate.py --training [--cases host_sync ...] [--steps 20]

Prints one line per call, the median of ``--repeat`` runs in seconds (each run after a first one that warms up
imports and caches). ``--cells`` executes each notebook once in a fresh kernel (as JupyterLab does) and prints each
experiment cell's time, from the kernel's own timestamps, and the cells over ``--over`` seconds. ``--training`` times
a training loop of ``--steps`` steps of each one-GPU diagnosis case (``scripts/record_diagnose_cases.py``: its bad and
its fixed step, the sizes recorded on GPUs), simulated once each (target: 30 s). A benchmark, not a test: quote its
figures, with the machine and its load, in a note.
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


def cell_seconds(notebook: Path) -> list[tuple[int, str, float]]:
    """Execute ``notebook`` in a fresh kernel, as a learner without a GPU runs it, and give each experiment cell's
    (index, first line, seconds) from the kernel's timestamps.

    Example:
        >>> cell_seconds(ROOT / "notebooks" / "02_timing.ipynb")[0][2] > 0  # doctest: +SKIP
        True
    """
    import datetime

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=True,
                   resources={"metadata": {"path": str(notebook.parent)}}).execute()
    out = []
    for i, cell in enumerate(nb.cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type != "code" or "run.measure(" not in cell.source or "iopub.execute_input" not in stamps:
            continue
        start, end = (datetime.datetime.fromisoformat(stamps[k].replace("Z", "+00:00"))
                      for k in ("iopub.execute_input", "shell.execute_reply"))
        first = next((line for line in cell.source.splitlines() if "run.measure(" in line), "").strip()
        out.append((i, first[:70], (end - start).total_seconds()))
    return out


def cells_table(notebooks: list[Path], over: float) -> int:
    """Print every experiment cell's seconds, notebook by notebook, then the cells over ``over`` seconds."""
    slow = []
    for notebook in notebooks:
        for i, first, seconds in cell_seconds(notebook):
            print(f"{notebook.stem[:2]} cell {i:>3}  {seconds:6.2f} s  {first}", flush=True)
            if seconds > over:
                slow.append((seconds, notebook.stem[:2], i))
    print(f"{len(slow)} experiment cells over {over:g} s: "
          + ", ".join(f"{n} cell {i} ({s:.1f} s)" for s, n, i in sorted(slow, reverse=True)))
    return 0


def training_table(cases: list[str] | None, steps: int) -> int:
    """Print the seconds a loop of ``steps`` training steps of each diagnosis case takes on the simulated H200."""
    import importlib.util

    import torch

    import asynclab as al

    spec = importlib.util.spec_from_file_location("record_diagnose_cases", ROOT / "scripts" / "record_diagnose_cases.py")
    rdc = importlib.util.module_from_spec(spec)
    sys.modules["record_diagnose_cases"] = rdc
    spec.loader.exec_module(rdc)
    worst = 0.0
    for case in cases or [c for c in rdc.CASES if c not in ("all_to_all", "exposed_comm", "rank_skew",
                                                            "pipeline_bubble")]:
        for variant in rdc.variants(case):
            def loop(step):
                for i in range(steps):
                    step(i)
                torch.cuda.synchronize()

            t0 = time.perf_counter()
            al.simulate(loop, setup=lambda: rdc.CASES[case](variant), values=False, card="H200")
            seconds = time.perf_counter() - t0
            worst = max(worst, seconds)
            print(f"{case:>18} {variant:<6} {steps} steps: {seconds:6.2f} s", flush=True)
    print(f"slowest: {worst:.2f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="counted runs of each call (default 3)")
    p.add_argument("--cells", action="store_true", help="time every experiment cell of the notebooks instead")
    p.add_argument("--notebooks", nargs="+", type=Path, default=sorted((ROOT / "notebooks").glob("0[1-8]_*.ipynb")),
                   help="with --cells: the notebooks to run (default: lessons 01 to 08)")
    p.add_argument("--over", type=float, default=2.0, help="with --cells: list the cells over this many seconds")
    p.add_argument("--training", action="store_true", help="time a training loop of each diagnosis case instead")
    p.add_argument("--cases", nargs="+", help="with --training: the cases (default: every one-GPU case)")
    p.add_argument("--steps", type=int, default=20, help="with --training: steps in the loop (default 20)")
    args = p.parse_args(argv)
    if args.training:
        return training_table(args.cases, args.steps)
    if args.cells:
        return cells_table(args.notebooks, args.over)
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
