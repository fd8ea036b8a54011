"""Benchmark trace loading and rendering on large synthetic torch.profiler traces (~60-90 MB each) of several shapes.

Usage: python scripts/bench_trace.py [--shape mixed|small_kernels|ranks|python_stacks|huge_events|all]
                                     [--events N] [--repeat 3] [--png out.png] [--hta-python PATH] [--keep]

Shapes (tests/tracegen.py builds each, deterministically):
  mixed          (default) cpu_ops, launches, kernels on 4 streams, copies and flows: 430,000 events, ~90 MB
  small_kernels  many 1-3 µs kernels, each with its launch and flow, in 10 profiler steps: 400,000 events, ~80 MB
  ranks          a folder of 8 rank files (distributedInfo), NCCL collectives on a stream of their own: ~81 MB in all
  python_stacks  with_stack traces: every op under 30-60 nested python_function events: 380,000 events, ~85 MB
  huge_events    600 cpu_ops with 2,500-entry Input Dims/type/Strides/Concrete Inputs, kernels of long names: ~69 MB

For one shape it reports json.load, asynclab.load_trace (and the ratio; target <= 0.6x json.load: the typed decoder
reads only the fields the event model needs), HTA's TraceAnalysis when the `hta` package is importable (or runs under
--hta-python), with its version, and the time to render a full timeline PNG (target <= 3 s). Then whole processes,
imports included, as a user runs them: `python -c json.load` (of every file, for a folder of ranks), a `load_trace`
process (target <= 0.5x) and `asynclab diagnose --json` (target <= 1.5x). `--shape all` measures only the whole
processes, shape by shape, and prints one table: shape, size, events, json.load s, both ratios, pass or fail (its
exit status is 1 when a shape misses a target), with the ratios of CPU time beside them and the machine's load
average. Time on a quiet machine: the wall-time ratios move with the load.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from tracegen import (big_trace_events, huge_events, python_stacks_events, rank_collectives_events,  # noqa: E402
                      small_kernels_events)

LOAD_TARGET = 0.6
RENDER_TARGET_S = 3.0
LOAD_PROCESS_TARGET = 0.5
DIAGNOSE_PROCESS_TARGET = 1.5
#: shape -> (generator of a document, or of one document per rank; its default size)
SHAPES = {
    "mixed": (big_trace_events, 430_000),
    "small_kernels": (small_kernels_events, 400_000),
    "ranks": (rank_collectives_events, 340_000),
    "python_stacks": (python_stacks_events, 380_000),
    "huge_events": (huge_events, 600),
}
_JSON_LOAD = ("import json, os, sys; p = sys.argv[1]; "
              "[json.load(open(f)) for f in ([os.path.join(p, n) for n in sorted(os.listdir(p))] "
              "if os.path.isdir(p) else [p])]")
_PROCESSES = {
    "json.load": _JSON_LOAD,
    "load_trace": "import sys; from asynclab.trace import load_trace; load_trace(sys.argv[1])",
    "diagnose --json": "import sys; from asynclab.cli import main; sys.exit(main(['diagnose', sys.argv[1], '--json']))",
}

_HTA_SNIPPET = r"""
import sys, time, logging
from importlib.metadata import version
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
TraceAnalysis(trace_dir=sys.argv[1])
print(version("HolisticTraceAnalysis"))
print(time.perf_counter() - t)
"""


def timed(fn, repeat: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        result = None
        gc.collect()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def hta_time(trace_dir: str, hta_python: str | None) -> tuple[float | None, str]:
    try:
        import hta  # noqa: F401

        python = sys.executable
    except ImportError:
        if not hta_python:
            return None, "skipped: the `hta` package (HolisticTraceAnalysis) is not installed"
        python = hta_python
    proc = subprocess.run([python, "-c", _HTA_SNIPPET, trace_dir], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"failed: {last[:100]}"
    ver, secs = proc.stdout.strip().splitlines()[-2:]
    return float(secs), f"HTA {ver} via {Path(python).name}"


def process_times(path: str, repeat: int) -> dict[str, tuple[float, float]]:
    """Per entry of _PROCESSES, the median wall time of a whole Python process and the median CPU time (user + system)
    it used, which other work on a shared machine disturbs less (stdout discarded)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = {}
    for name, code in _PROCESSES.items():
        cpu = []

        def run(code=code):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", code, path], check=True, stdout=subprocess.DEVNULL, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        wall, _ = timed(run, repeat)
        out[name] = (wall, statistics.median(cpu))
    return out


def write_shape(shape: str, events: int | None, tmp: str) -> tuple[str, int, float]:
    """Generate one shape into ``tmp``: (the path load_trace reads, a file or a folder of rank files; events; MB)."""
    gen, default = SHAPES[shape]
    docs = gen(events or default)
    if isinstance(docs, dict):
        docs["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1}
        path, files = os.path.join(tmp, "rank0_trace.json"), {"rank0_trace.json": docs}
    else:
        path = os.path.join(tmp, "ranks")
        os.mkdir(path)
        files = {f"ranks/rank{i}_trace.json": d for i, d in enumerate(docs)}
    n_events, size = 0, 0
    for name, doc in files.items():
        with open(os.path.join(tmp, name), "w") as fh:
            json.dump(doc, fh)
        n_events += len(doc["traceEvents"])
        size += os.path.getsize(os.path.join(tmp, name))
    del docs, files
    gc.collect()
    return path, n_events, size / 1e6


def in_process(path: str, tmp: str, args: argparse.Namespace) -> None:
    """json.load, load_trace, HTA and the timeline's rendering, timed inside this process, as a table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asynclab.trace.draw.timeline import draw_timeline
    from asynclab.trace import load_trace

    files = [os.path.join(path, n) for n in sorted(os.listdir(path))] if os.path.isdir(path) else [path]

    def plain_json():
        out = []
        for f in files:
            with open(f) as fh:
                out.append(json.load(fh))
        return out

    t_json, _ = timed(plain_json, args.repeat)

    def json_gc_paused():
        gc.disable()
        try:
            return plain_json()
        finally:
            gc.enable()

    t_json_nogc, _ = timed(json_gc_paused, args.repeat)
    t_load, trace = timed(lambda: load_trace(path), args.repeat)
    hta_s, hta_note = hta_time(os.path.dirname(files[0]), args.hta_python)

    png = args.png or os.path.join(tmp, "timeline.png")

    def render():
        tl = draw_timeline(trace, arrows=True)
        tl.savefig(png)
        plt.close(tl.fig)
        return tl

    draw_timeline(trace.window(0, 1000))  # warm matplotlib's font cache outside the measurement
    plt.close("all")
    t_render, tl = timed(render, max(1, args.repeat - 1))

    ok = lambda good: "OK" if good else "MISSED"  # noqa: E731
    rows = [
        ("json.load (stdlib, as is)", t_json, "1.00x", ""),
        ("json.load (gc paused; for reference)", t_json_nogc, f"{t_json_nogc / t_json:.2f}x", ""),
        ("asynclab.load_trace", t_load, f"{t_load / t_json:.2f}x",
         f"target <= {LOAD_TARGET}x: {ok(t_load <= LOAD_TARGET * t_json)}"),
        ("HTA TraceAnalysis", hta_s, f"{hta_s / t_json:.2f}x" if hta_s else "", hta_note),
        ("render full timeline PNG (arrows on)", t_render, "",
         f"target <= {RENDER_TARGET_S:.0f} s: {ok(t_render <= RENDER_TARGET_S)}"),
    ]
    print()
    print(f"{'step':<40}{'time (s)':>10}{'vs json.load':>15}  note")
    print("-" * 100)
    for name, secs, ratio, note in rows:
        s = f"{secs:.2f}" if secs is not None else "-"
        print(f"{name:<40}{s:>10}{ratio:>15}  {note}")
    print()
    print(f"trace: {len(trace):,} complete events, {len(trace.lanes())} lanes; "
          f"timeline: {tl.n_events:,} events drawn as {sum(len(c.get_paths()) for c in tl.collections.values()):,} "
          f"bars/arrows -> {png}")


def whole_processes(path: str, repeat: int) -> None:
    """The three whole processes of one shape, as a table against the targets."""
    procs = process_times(path, repeat)
    base, base_cpu = procs["json.load"]
    ok = lambda good: "OK" if good else "MISSED"  # noqa: E731
    print()
    print(f"{'whole process':<40}{'time (s)':>10}{'vs json.load':>15}  note")
    print("-" * 100)
    for name, target in (("json.load", None), ("load_trace", LOAD_PROCESS_TARGET),
                         ("diagnose --json", DIAGNOSE_PROCESS_TARGET)):
        wall, cpu = procs[name]
        note = f"target <= {target}x: {ok(wall <= target * base)}" if target else ""
        print(f"{name:<40}{wall:>10.2f}{wall / base:>14.2f}x  {note} (CPU time {cpu / base_cpu:.2f}x)")


def every_shape(args: argparse.Namespace) -> int:
    """Each shape generated, timed as whole processes and removed; one table; exit status 1 when a target is missed."""
    print(f"{'shape':<15}{'MB':>7}{'events':>10}{'json.load s':>13}{'load_trace':>12}{'diagnose':>10}  "
          f"{'verdict':<36}CPU time: load, diagnose")
    print("-" * 120)
    missed = 0
    load_avg = os.getloadavg()[0]
    for shape in SHAPES:
        tmp = tempfile.mkdtemp(prefix=f"asynclab_bench_{shape}_")
        try:
            path, n_events, mb = write_shape(shape, None, tmp)
            procs = process_times(path, args.repeat)
        finally:
            if not args.keep:
                shutil.rmtree(tmp, ignore_errors=True)
        (base, base_cpu), (load, load_cpu), (diag, diag_cpu) = (procs[k] for k in _PROCESSES)
        load, diag = load / base, diag / base
        fails = [f"{what} > {target}x" for what, r, target in (("load", load, LOAD_PROCESS_TARGET),
                                                                ("diagnose", diag, DIAGNOSE_PROCESS_TARGET)) if r > target]
        missed += bool(fails)
        verdict = "FAIL: " + ", ".join(fails) if fails else "pass"
        print(f"{shape:<15}{mb:>7.1f}{n_events:>10,}{base:>13.2f}{load:>11.2f}x{diag:>9.2f}x  {verdict:<36}"
              f"{load_cpu / base_cpu:.2f}x, {diag_cpu / base_cpu:.2f}x", flush=True)
    print(f"(targets: load_trace process <= {LOAD_PROCESS_TARGET}x, diagnose --json <= {DIAGNOSE_PROCESS_TARGET}x "
          f"json.load's wall time; median of {args.repeat} runs; python {sys.version.split()[0]}, {os.cpu_count()} "
          f"cores; load average {load_avg:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)")
    return 1 if missed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="mixed", choices=[*SHAPES, "all"], help="the trace's shape (default mixed)")
    ap.add_argument("--events", type=int, default=None,
                    help="events in the trace (huge_events: its huge ops); one shape only (default: the shape's own)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    ap.add_argument("--png", default=None, help="where to keep the rendered timeline (default: temp dir)")
    ap.add_argument("--hta-python", default=None, help="a python with HolisticTraceAnalysis installed")
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    args = ap.parse_args(argv)
    if args.shape == "all":
        if args.events is not None:
            ap.error("--events sizes one shape; --shape all runs each at its own size")
        return every_shape(args)

    tmp = tempfile.mkdtemp(prefix="asynclab_bench_")
    t = time.perf_counter()
    path, n_events, mb = write_shape(args.shape, args.events, tmp)
    print(f"{args.shape}: generated {n_events:,} events, {mb:.1f} MB JSON in {time.perf_counter() - t:.1f} s: {path}")
    in_process(path, tmp, args)
    whole_processes(path, args.repeat)
    print(f"(median of {args.repeat} runs; python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
