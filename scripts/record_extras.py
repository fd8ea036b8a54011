#!/usr/bin/env python3
"""Record some experiments of one lesson on a GPU machine into that lesson's reference results, leaving the rest.

    python3 scripts/record_extras.py LESSON EXPERIMENT [EXPERIMENT ...]

Each is a function of the lesson's probes module (or its experiments module), run with its defaults on ``cuda:0``; its
result goes into ``results.json`` under its name, with ``recorded_on`` (the GPUs, torch, CUDA, driver and
date), since the rest of that reference may come from another card. For a lesson whose experiments changed
as a whole, re-record it with ``record_references.py`` instead.
"""
from __future__ import annotations

import datetime
import importlib
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))


def recorded_on() -> str:
    """Where this run is: ``2x NVIDIA H100 80GB HBM3, torch ..., CUDA ..., driver ..., date``."""
    from asynclab.gpu import hardware

    hw = hardware.inventory()
    count = f"{len(hw.gpus)}x " if len(hw.gpus) > 1 else ""
    return (f"{count}{hw.gpus[0].name}, torch {hw.torch_version}, CUDA {hw.cuda_version}, driver {hw.driver}, "
            f"{datetime.date.today().isoformat()}")


def store(lesson: int, key: str, result: dict) -> None:
    """Write ``result`` (with ``recorded_on``) under ``key`` in the lesson's reference results.json."""
    from asynclab.course import reference

    result["recorded_on"] = recorded_on()
    path = reference.lesson_dir(lesson) / "results.json"
    results = json.loads(path.read_text())
    results[key] = result
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def main(argv: list[str]) -> int:
    import torch

    from asynclab.course.registry import LESSONS

    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("record_extras: needs a CUDA GPU", file=sys.stderr)
        return 2
    lesson = int(argv[0])
    name_of = {int(entry.number): entry.name for entry in LESSONS}
    if lesson not in name_of:
        print(f"record_extras: no lesson {argv[0]}", file=sys.stderr)
        return 2
    modules = [importlib.import_module(f"asynclab.lessons.{name_of[lesson]}.{part}")
               for part in ("probes", "experiments")
               if importlib.util.find_spec(f"asynclab.lessons.{name_of[lesson]}.{part}") is not None]
    for name in argv[1:]:
        fn = next((getattr(m, name) for m in modules if callable(getattr(m, name, None))), None)
        if not callable(fn):
            print(f"record_extras: lesson {lesson:02d} has no experiment {name!r}", file=sys.stderr)
            return 2
        result = fn("cuda:0")
        store(lesson, name, result)
        print(f"{name}: {json.dumps(result)[:400]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
