#!/usr/bin/env python3
"""Record the lessons' reference results and traces on a GPU machine, into the package (or --out).

    python3 scripts/record_references.py [--lessons 01 02] [--out DIR] [--device cuda:0]

Each lesson runs its experiments module's ``run_all`` (the same functions the notebook runs live)
in a fresh Python process, as a notebook kernel would, and writes
``asynclab/lessons/<name>/reference/`` (or ``<out>/<NN_name>/``): ``results.json``, ``meta.json`` and the traces (``*.json.gz``, each <= 1 MB).
A lesson's reference needs the GPUs its live cells need (``Lesson.gpus``).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"
if str(SRC) not in sys.path:  # record the code of this checkout, installed or not
    sys.path.insert(0, str(SRC))


def _fail(msg: str, code: int = 2) -> None:
    print(f"record_references: {msg}", file=sys.stderr)
    raise SystemExit(code)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from asynclab.course.experiments import with_experiments

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lessons", nargs="+", default=with_experiments(), metavar="NN",
                   help=f"lessons to record (default: all with experiments: {' '.join(with_experiments())})")
    p.add_argument("--out", type=Path, default=None,
                   help="reference root; each lesson goes to <out>/<NN_name>/ (default: into the package, "
                        "asynclab/lessons/<name>/reference/)")
    p.add_argument("--device", default="cuda:0", help="CUDA device the single-GPU experiments run on (default cuda:0)")
    p.add_argument("--in-process", action="store_true",
                   help="run every lesson in this process instead of a fresh one each (quicker, less faithful)")
    p.add_argument("--child", metavar="NN", help=argparse.SUPPRESS)  # internal: record one lesson, here
    return p.parse_args(argv)


def _normalise(lessons_: list[str]) -> list[str]:
    from asynclab.course import registry as lessons
    from asynclab.course.experiments import with_experiments

    out = []
    for item in lessons_:
        try:
            key = lessons.lesson(item).number
        except ValueError as err:
            _fail(str(err))
        if key not in with_experiments():
            _fail(f"lesson {item!r} has no experiments to record; lessons with experiments: {', '.join(with_experiments())}")
        if key not in out:
            out.append(key)
    return out


def record_gpus(item) -> int:
    """The GPUs recording a lesson's reference needs: its live cells' (``Lesson.gpus``)."""
    return item.gpus


def _preflight(lessons_: list[str], device: str) -> None:
    """Refuse early, with one clear line, when this machine cannot record what was asked."""
    try:
        import torch
    except ImportError:
        _fail("torch is not installed; install the course's requirements first")
    if not torch.cuda.is_available():
        _fail("no CUDA GPU visible to torch on this machine: references must be recorded on a real NVIDIA GPU "
              "(an H100 for single-GPU lessons, 2x H200 for multi-GPU lessons)")
    dev = torch.device(device)
    if dev.type != "cuda":
        _fail(f"--device must be a CUDA device, got {device!r}")
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        _fail(f"--device {device}: this machine has {count} GPU(s)")
    from asynclab.course import registry as lessons

    for key in lessons_:
        need = record_gpus(lessons.lesson(key))
        if need > count:
            _fail(f"lesson {key} needs {need} GPUs; this machine has {count}")
    if "01" in lessons_:
        try:
            import d2l  # noqa: F401
        except ImportError:
            _fail("lesson 01 needs d2l: pip install --no-deps d2l==1.0.3")


def _record_one(lesson: str, out: Path, device: str) -> None:
    """Run one lesson's experiments here and write its reference."""
    import torch

    from asynclab.course import experiments

    from asynclab.course import reference

    mod = experiments.for_lesson(lesson)
    name = reference.folder_name(lesson)
    dev = torch.device(device)
    what = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "the CPU: a dry run, not a reference"
    print(f"== lesson {name} on {device} ({what}) ==", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"asynclab_ref_{lesson}_") as tmp:
        results, traces = mod.run_all(device, trace_dir=tmp)
        folder = reference.write(lesson, results, traces, root=out)
    print(f"wrote {folder} in {time.perf_counter() - t0:.1f} s", flush=True)


def _sizes(folder: Path) -> tuple[int, list[tuple[str, int]]]:
    files = sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file())
    return sum(s for _, s in files), files


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.child:
        _record_one(_normalise([args.child])[0], args.out, args.device)
        return 0
    lessons_ = _normalise(args.lessons)
    _preflight(lessons_, args.device)

    import torch

    from asynclab.gpu import hardware

    from asynclab.course import registry as lessons

    from asynclab.course import reference

    hw = hardware.inventory()
    print(hardware.report(hw), flush=True)
    gpu_name = torch.cuda.get_device_name(torch.device(args.device))
    for key in lessons_:
        planned = lessons.lesson(key).reference_gpu or ""
        if planned.split()[-1] not in gpu_name:
            print(f"note: the lesson map says lesson {key}'s reference comes from an {planned}; this is {gpu_name}. "
                  "Update its entry in asynclab/lessons/__init__.py (the notebooks name the GPU from meta.json).",
                  flush=True)
    out = args.out.resolve() if args.out is not None else None
    failed = []
    for lesson in lessons_:
        if args.in_process:
            try:
                _record_one(lesson, out, args.device)
            except Exception as err:  # noqa: BLE001 - report and go on with the next lesson
                print(f"lesson {lesson} FAILED: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
                failed.append(lesson)
            continue
        env = dict(os.environ)
        env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("MPLBACKEND", "Agg")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", lesson, "--device", args.device]
        cmd += ["--out", str(out)] if out is not None else []
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            print(f"lesson {lesson} FAILED (see the error above); its previous reference, if any, is unchanged",
                  file=sys.stderr, flush=True)
            failed.append(lesson)

    print()
    total = 0
    for lesson in lessons_:
        if lesson in failed:
            continue
        folder = reference.lesson_dir(lesson, out)
        print(reference.table(lesson, root=out))
        size, files = _sizes(folder)
        total += size
        print("files: " + ", ".join(f"{n} {s / 1e3:.0f} kB" for n, s in files) + "\n")
    folders = [reference.lesson_dir(x.number, out) for x in lessons.LESSONS]
    everything = sum(_sizes(d)[0] for d in folders if d.is_dir())
    print(f"this run: {total / 1e6:.2f} MB; the whole reference set: {everything / 1e6:.2f} MB "
          f"(limit {reference.MAX_TOTAL_BYTES / 1e6:g} MB)")
    if everything > reference.MAX_TOTAL_BYTES:
        print("record_references: the reference set is over its size limit; profile fewer iterations",
              file=sys.stderr)
        return 1
    if failed:
        print(f"record_references: failed lessons: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
