"""Benchmark trace loading and rendering on a large synthetic torch.profiler trace (~400k events, ~90 MB).

Usage: python scripts/bench_trace.py [--events 430000] [--repeat 3] [--png out.png] [--hta-python PATH]

Reports json.load, asynclab.load_trace (and the ratio; target <= 0.6x json.load: the typed decoder reads
only the fields the event model needs), HTA's TraceAnalysis when the `hta` package is importable (or
runs under --hta-python), with its version, and the time to render a full timeline PNG (target <= 3 s).
Then whole processes, imports included, as a user runs them: `python -c json.load`, a `load_trace`
process (target <= 0.5x) and `asynclab diagnose --json` (target <= 1.5x).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from tracegen import big_trace_events  # noqa: E402

LOAD_TARGET = 0.6
RENDER_TARGET_S = 3.0
LOAD_PROCESS_TARGET = 0.5
DIAGNOSE_PROCESS_TARGET = 1.5
_PROCESSES = {
    "json.load": "import json, sys; json.load(open(sys.argv[1]))",
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


def process_times(path: str, repeat: int) -> dict[str, float]:
    """Median wall time of a whole Python process per entry of _PROCESSES (stdout discarded)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = {}
    for name, code in _PROCESSES.items():
        def run(code=code):
            subprocess.run([sys.executable, "-c", code, path], check=True, stdout=subprocess.DEVNULL, env=env)
        out[name], _ = timed(run, repeat)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=430_000, help="events in the trace (default 430000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    ap.add_argument("--png", default=None, help="where to keep the rendered timeline (default: temp dir)")
    ap.add_argument("--hta-python", default=None, help="a python with HolisticTraceAnalysis installed")
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asynclab.trace.timeline import draw_timeline
    from asynclab.trace import load_trace

    tmp = tempfile.mkdtemp(prefix="asynclab_bench_")
    path = os.path.join(tmp, "rank0_trace.json")
    t = time.perf_counter()
    doc = big_trace_events(args.events)
    doc["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1}
    with open(path, "w") as fh:
        json.dump(doc, fh)
    n_events = len(doc["traceEvents"])
    del doc
    gc.collect()
    mb = os.path.getsize(path) / 1e6
    print(f"generated {n_events:,} events, {mb:.1f} MB JSON in {time.perf_counter() - t:.1f} s: {path}")

    def plain_json():
        with open(path) as fh:
            return json.load(fh)

    t_json, _ = timed(plain_json, args.repeat)

    def json_gc_paused():
        gc.disable()
        try:
            return plain_json()
        finally:
            gc.enable()

    t_json_nogc, _ = timed(json_gc_paused, args.repeat)
    t_load, trace = timed(lambda: load_trace(path), args.repeat)
    hta_s, hta_note = hta_time(tmp, args.hta_python)

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
    procs = process_times(path, args.repeat)
    base = procs["json.load"]
    print()
    print(f"{'whole process':<40}{'time (s)':>10}{'vs json.load':>15}  note")
    print("-" * 100)
    for name, target in (("json.load", None), ("load_trace", LOAD_PROCESS_TARGET),
                         ("diagnose --json", DIAGNOSE_PROCESS_TARGET)):
        note = f"target <= {target}x: {ok(procs[name] <= target * base)}" if target else ""
        print(f"{name:<40}{procs[name]:>10.2f}{procs[name] / base:>14.2f}x  {note}")
    print(f"(median of {args.repeat} runs; python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    if not args.keep:
        os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
