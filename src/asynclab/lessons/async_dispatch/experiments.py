"""Lesson 01 experiments: the host runs ahead of the GPU, launch overhead, the overhead-bound regime and hidden syncs."""
from __future__ import annotations

import contextlib
import io
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from asynclab.course.experiments import Experiment, ExperimentRun, lesson_run_all
from asynclab.gpu.devices import dtype_name, native_half, resolve_device, sync
from asynclab.gpu.timing import spin_cycles, wall_ms
from asynclab.gpu.timing import event_timer, naive_timer, paired_ratio, sync_timer

LESSON = "01"

#: Sizes that keep every experiment to a few seconds on a 2-core CPU (the notebooks' and tests' CPU runs).
CPU_KWARGS: dict[str, dict[str, Any]] = {
    "d2l_benchmark": {"n": 400, "reps": 10, "rounds": 5, "big_n": 600, "progress": True},
    "host_runs_ahead": {"n": 256, "reps": 5, "dtype": torch.float32},
    "launch_overhead": {"ops": 300, "repeats": 3},
    "launch_overhead_trace": {"ops": 20},
    "overhead_bound": {"sizes": (2**10, 2**12, 2**14, 2**16, 2**18), "repeats": 5, "inner": 5},
    "hidden_syncs": {},
    "sync_debug_blind_spots": {},
    "async_error": {},
    "cpu_is_synchronous": {"n": 384, "reps": 5, "repeats": 15},
}

#: ``overhead_bound``'s default sizes: 2**10 ... 2**26 elements, x4 each step.
DEFAULT_SIZES = tuple(2 ** k for k in range(10, 27, 2))


def _counted(rounds: int, progress: bool):
    """``range(rounds)``; with ``progress``, one line that counts the rounds as they end (a round of d2l's blocks
    takes seconds on a laptop's CPU)."""
    if progress:
        print(f"{rounds} rounds of d2l's blocks:", end="", flush=True)
    for i in range(rounds):
        yield i
        if progress:
            print(f" {i + 1}", end="\n" if i + 1 == rounds else "", flush=True)


def d2l_benchmark(device: Any = None, n: int = 1000, reps: int = 10, rounds: int = 5, big_n: int = 4096,
                  verbose: bool = True, progress: bool = False) -> dict[str, Any]:
    """d2l's *Asynchronous Computation* experiment, with ``d2l.Benchmark``, then synchronized.

    Three blocks, each timed by ``d2l.Benchmark`` (``time.time()`` around the ``with`` block; it
    prints ``"<description>: X sec"`` unless ``verbose=False``):

    * ``numpy``: ``reps`` x (``np.random.normal(size=(n, n))``, ``np.dot(a, a)``);
    * ``torch``: the same with ``torch.normal`` and ``torch.mm`` on ``device``, no synchronize.
      On a GPU this times only the *enqueue* of the work;
    * ``torch, synchronized``: the same, with ``torch.cuda.synchronize(device)`` before leaving
      the block, as d2l does: now the work itself is inside the window.

    The torch loop runs once untimed first (CUDA context, cuBLAS, allocator), and the queue is
    drained (untimed) between the two torch blocks, so the synchronized block waits only for its
    own work. Needs d2l (``pip install --no-deps d2l==1.0.3``).

    Each block runs ``rounds`` times (one ``d2l.Benchmark`` timing is a single noisy shot); the
    results are the medians. With ``progress`` (and ``verbose=False``) one line counts the rounds as they end: a round
    takes seconds on a laptop's CPU, where the lesson runs it with ``CPU_KWARGS``. On a fast GPU d2l's 1000 x 1000 products finish about as fast as the host
    can enqueue them (the overhead-bound regime), so the two torch blocks are then repeated with
    ``big_n x big_n`` matrices (torch only), where the work is far larger than the enqueue.

    Returns ``{"numpy_s", "torch_unsynced_s", "torch_synced_s", "big_unsynced_s", "big_synced_s",
    "rounds_s", "n", "big_n", "reps", "rounds", "device", "timer"}``, times in seconds per block.

    Example:
        >>> r = d2l_benchmark("cpu", n=100, reps=2, big_n=120, verbose=False)
        >>> r["numpy_s"] > 0, r["big_synced_s"] > 0
        (True, True)
    """
    try:
        from d2l import torch as d2l
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("d2l_benchmark needs d2l; install it with: pip install --no-deps d2l==1.0.3") from err
    import numpy as np

    dev = resolve_device(device)

    def torch_loop(size: int = n) -> None:
        for _ in range(reps):
            a = torch.normal(0, 1, size=(size, size), device=dev)
            b = torch.mm(a, a)  # noqa: F841 - d2l's code keeps the result in b

    torch_loop()  # untimed warm-ups
    torch_loop(big_n)
    sync(dev)
    times: dict[str, list[float]] = {"numpy": [], "torch": [], "torch, synchronized": [],
                                     f"torch {big_n}": [], f"torch {big_n}, synchronized": []}
    def timed(label: str, size: int, synchronized: bool) -> None:
        """One d2l.Benchmark block of the torch loop; synchronized as d2l does, before leaving the block."""
        with d2l.Benchmark(label) as bench:
            torch_loop(size)
            if synchronized and dev.type == "cuda":
                torch.cuda.synchronize(dev)
        times[label].append(float(bench.timer.times[-1]))

    printer = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())
    for _ in _counted(rounds, progress and not verbose):
        with printer:
            with d2l.Benchmark("numpy") as bench:
                for _ in range(reps):
                    a = np.random.normal(size=(n, n))
                    b = np.dot(a, a)  # noqa: F841
            times["numpy"].append(float(bench.timer.times[-1]))
            torch_loop()  # untimed: both torch blocks start from the same warm state, not from numpy's
            sync(dev)
            timed("torch", n, False)
            sync(dev)  # untimed: let the previous block's queued work finish
            timed("torch, synchronized", n, True)
            timed(f"torch {big_n}", big_n, False)
            sync(dev)
            timed(f"torch {big_n}, synchronized", big_n, True)
    keys = ("numpy_s", "torch_unsynced_s", "torch_synced_s", "big_unsynced_s", "big_synced_s")
    return {**{key: statistics.median(t) for key, t in zip(keys, times.values())}, "rounds_s": times,
            "n": int(n), "big_n": int(big_n), "reps": int(reps), "rounds": int(rounds), "device": str(dev),
            "timer": "d2l.Benchmark (time.time() around the with block), median of the rounds"}


def host_runs_ahead(device: Any = None, n: int = 8192, reps: int = 20, dtype: torch.dtype | None = None,
                    path: str | Path | None = None) -> tuple[dict[str, Any], Any]:
    """How long the host takes to *enqueue* ``reps`` matmuls vs how long the GPU takes to *finish* them.

    ``a`` and ``b`` (``n x n``, ``dtype``) are built once and the loop is warmed up. Then
    ``perf_counter`` is read before the loop, after the last ``torch.mm`` returned (enqueue), and after
    ``torch.cuda.synchronize`` returned (finish). On a GPU enqueue is a small fraction of finish; on the
    CPU (pass a small ``n``) they are about equal, because each ``torch.mm`` does the work before it
    returns.

    With ``path``, the same loop (annotated ``"enqueue <reps> x mm"`` and ``"synchronize"``) is
    profiled once via :func:`asynclab.record.record` and saved there as .json.gz.

    Returns ``(results, trace)``: results ``{"enqueue_ms", "finish_ms", "tflops", "host_free_ms",
    "enqueue_us_per_mm", "mm_ms", "n", "reps", "dtype", "device"}``; trace is a Trace or None.

    Example:
        >>> r, trace = host_runs_ahead("cpu", n=64, reps=3, dtype=torch.float32)
        >>> r["finish_ms"] >= r["enqueue_ms"] > 0, trace is None
        (True, True)
    """
    dev = resolve_device(device)
    dtype = dtype or native_half(dev)  # bf16 where the GPU computes it natively, fp16 below
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)

    def enqueue(count: int) -> torch.Tensor | None:
        c = None
        for _ in range(count):
            c = torch.mm(a, b)
        return c

    enqueue(3)  # warm-up: cuBLAS, kernel choice, and the two output blocks the loop keeps alive
    sync(dev)

    t0 = time.perf_counter()
    c = enqueue(reps)
    enqueue_ms = wall_ms(t0)
    sync(dev)
    finish_ms = wall_ms(t0)
    del c

    trace = None
    if path is not None:
        from asynclab.gpu.record import record

        def loop() -> None:
            with torch.profiler.record_function(f"enqueue {reps} x mm"):
                enqueue(reps)  # the result is freed here, still queued: the allocator is stream-ordered
            with torch.profiler.record_function("synchronize"):
                sync(dev)

        trace = record(loop, path=path, warmup=1, steps=1)

    results = {
        "enqueue_ms": enqueue_ms,
        "finish_ms": finish_ms,
        "host_free_ms": finish_ms - enqueue_ms,
        "enqueue_us_per_mm": enqueue_ms * 1e3 / reps,
        "mm_ms": finish_ms / reps,
        "tflops": 2.0 * n**3 * reps / (finish_ms * 1e-3) / 1e12,
        "n": int(n),
        "reps": int(reps),
        "dtype": dtype_name(dtype),
        "device": str(dev),
    }
    return results, trace


def _cuda_major() -> int:
    """CUDA major version torch was built with; a large number when not a CUDA build (ROCm: no workaround)."""
    try:
        return int(str(torch.version.cuda).split(".")[0])
    except ValueError:
        return 99


def _capture_graph(dev: torch.device, body: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """Capture ``body`` in a CUDA graph, warming it up on a side stream first as the CUDA graphs docs require."""
    if _cuda_major() < 12:  # pytorch/pytorch#75504: the profiler must start once before any capture on CUDA < 12
        from torch.profiler._utils import _init_for_cuda_graphs

        _init_for_cuda_graphs()
    with torch.cuda.device(dev):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):  # an explicit stream on this device
            body()
        graph.replay()  # the first replay uploads the graph; keep it out of the timings
        torch.cuda.synchronize(dev)
    return graph


def launch_overhead(device: Any = None, ops: int = 1000, size: int = 1, repeats: int = 15) -> dict[str, Any]:
    """Per-op time of a tiny op launched eagerly vs replayed from a CUDA graph.

    The op is ``x.add_(1.0)`` on a tensor of ``size`` elements: the GPU work is negligible, so the
    eager time per op is the host's cost to launch it (Python, dispatcher, ``cudaLaunchKernel``). Eager:
    synchronized wall clock around ``ops`` calls, divided by ``ops``; median of ``repeats``. Graph: the
    same ``ops`` calls captured once in a ``torch.cuda.CUDAGraph`` (after a warm-up on a side stream),
    then ``graph.replay()`` timed the same way. On the CPU there is no graph: ``graph_us_per_op`` is None.

    Returns ``{"eager_us_per_op", "graph_us_per_op", "speedup", "ops", "size", "op", "device"}``.

    Example:
        >>> r = launch_overhead("cpu", ops=100, repeats=2)
        >>> r["eager_us_per_op"] > 0, r["graph_us_per_op"]
        (True, None)
    """
    dev = resolve_device(device)
    x = torch.zeros(size, device=dev)

    def body() -> None:
        for _ in range(ops):
            x.add_(1.0)

    def once_us(run: Callable[[], None]) -> float:
        sync(dev)
        t0 = time.perf_counter()
        run()
        sync(dev)
        return wall_ms(t0) * 1e3 / ops

    body()  # warm-up
    sync(dev)
    graph = _capture_graph(dev, body) if dev.type == "cuda" else None
    eager_t, graph_t = [], []
    with torch.cuda.device(dev) if graph is not None else contextlib.nullcontext():
        for _ in range(repeats):  # interleaved, so that a noisy moment of the host hits both alike
            eager_t.append(once_us(body))
            if graph is not None:
                graph_t.append(once_us(graph.replay))
    eager = statistics.median(eager_t)
    graph_us = statistics.median(graph_t) if graph_t else None
    del graph
    return {
        "eager_us_per_op": eager,
        "graph_us_per_op": graph_us,
        "speedup": eager / graph_us if graph_us else None,
        "ops": int(ops),
        "size": int(size),
        "op": "x.add_(1.0)",
        "device": str(dev),
    }


def launch_overhead_trace(device: Any, path: str | Path, ops: int = 50, size: int = 1) -> Any:
    """A profiler trace of ``ops`` eager ``x.add_(1.0)`` calls, then (on a GPU) the same calls replayed from a CUDA graph.

    The two parts are annotated ``"eager: <ops> x add_"`` and ``"graph replay: <ops> x add_"``, each
    ending with a synchronize: on the timeline the eager kernels sit apart, spaced by the host's
    launch cost, while the graph's kernels run back to back from one ``cudaGraphLaunch``. Saved at
    ``path`` (.json.gz) via :func:`asynclab.record.record`; returns the Trace.

    Example:
        >>> t = launch_overhead_trace("cuda", "launch.json.gz")  # doctest: +SKIP
    """
    from asynclab.gpu.record import record

    dev = resolve_device(device)
    x = torch.zeros(size, device=dev)

    def body() -> None:
        for _ in range(ops):
            x.add_(1.0)

    body()
    sync(dev)
    graph = _capture_graph(dev, body) if dev.type == "cuda" else None

    def both() -> None:
        with torch.profiler.record_function(f"eager: {ops} x add_"):
            body()
            sync(dev)
        if graph is not None:
            with torch.profiler.record_function(f"graph replay: {ops} x add_"):
                graph.replay()
                sync(dev)

    with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
        return record(both, path=path, warmup=1, steps=1)


_ELEMENTWISE: dict[str, tuple[int, Callable[..., Any]]] = {
    # name: (tensors read + written per element, fn(x, y, out))
    "add": (3, lambda x, y, out: torch.add(x, y, out=out)),
    "mul": (3, lambda x, y, out: torch.mul(x, y, out=out)),
    "sin": (2, lambda x, y, out: torch.sin(x, out=out)),
    "relu": (2, lambda x, y, out: torch.clamp_min(x, 0.0, out=out)),
}


def _time_elementwise(fn: Callable[..., Any], dev: torch.device, size: int, dtype: torch.dtype, repeats: int,
                      inner: int):
    x = torch.rand(size, device=dev, dtype=dtype)
    y = torch.rand(size, device=dev, dtype=dtype)
    out = torch.empty_like(x)
    return event_timer(lambda: fn(x, y, out), repeats=repeats, warmup=2, inner=inner, device=dev)


def flat_until(sizes: Sequence[int], us: Sequence[float], level: float, within: float = 1.25) -> int | None:
    """The largest size up to which every time stays within ``within`` x ``level``; None if even the first is above.

    None is an honest answer on a noisy run: when the smallest size was slow, there is no flat stretch
    starting at it, and claiming one would be wrong.

    Example:
        >>> flat_until([1, 2, 4, 8], [5.0, 5.2, 4.9, 9.0], level=5.0)
        4
        >>> flat_until([1, 2, 4], [7.0, 5.0, 5.0], level=5.0) is None
        True
    """
    last = None
    for size, t_us in zip(sizes, us):
        if t_us > within * level:
            break
        last = int(size)
    return last


def overhead_bound(device: Any = None, sizes: tuple[int, ...] = DEFAULT_SIZES, op: str = "add",
                   repeats: int = 10, inner: int = 20, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Per-op time of an elementwise op as the tensor grows: flat while launch overhead dominates.

    For each size, ``op`` (``"add"``, ``"mul"``, ``"sin"`` or ``"relu"``, written into a preallocated
    output) is timed with :func:`asynclab.gpu.timing.event_timer`: ``repeats`` event pairs, each around
    ``inner`` back-to-back calls (CUDA events on a GPU, wall clock on the CPU); the median per call is
    kept. ``flat_level_us`` is the median time of the three smallest sizes, and ``flat_until`` the
    largest size up to which every time stays within 1.25x of it (see :func:`flat_until`; None on a
    run so noisy that even the smallest size is above that): below it, the op costs what launching it
    costs.

    Returns ``{"sizes", "us_per_op", "gb_per_s", "flat_level_us", "flat_until", "op", "dtype", "device", "timer"}``
    (``gb_per_s``: bytes read and written per second, the memory-bound end's figure).

    Example:
        >>> r = overhead_bound("cpu", sizes=(2**10, 2**12), repeats=3, inner=3)
        >>> r["sizes"], len(r["us_per_op"]), r["flat_until"] == flat_until(r["sizes"], r["us_per_op"], r["flat_level_us"])
        ([1024, 4096], 2, True)
    """
    if op not in _ELEMENTWISE:
        raise ValueError(f"unknown op {op!r}; choose from {', '.join(_ELEMENTWISE)}")
    if not sizes:
        raise ValueError("sizes must name at least one tensor size")
    dev = resolve_device(device)
    touched, fn = _ELEMENTWISE[op]
    itemsize = torch.empty((), dtype=dtype).element_size()
    us, gbs = [], []
    timer_text = ""
    with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
        for size in sizes:
            t = _time_elementwise(fn, dev, int(size), dtype, repeats, inner)  # frees its tensors when done
            timer_text = t.measured
            us.append(t.median_ms * 1e3)
            gbs.append(touched * int(size) * itemsize / (t.median_ms * 1e-3) / 1e9)
    level = statistics.median(us[:3])
    return {
        "sizes": [int(s) for s in sizes],
        "us_per_op": us,
        "gb_per_s": gbs,
        "flat_level_us": level,
        "flat_until": flat_until(sizes, us, level),
        "op": op,
        "dtype": dtype_name(dtype),
        "device": str(dev),
        "timer": timer_text,
    }


def _print_tensor(t: torch.Tensor) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        print(t)


#: (what the learner writes, what runs, a note). The last two are the controls that do not sync.
SYNC_OPS: tuple[tuple[str, Callable[[torch.Tensor], Any], str], ...] = (
    (".item()", lambda t: t[0].item(), "copies one number to the host and waits for it"),
    ("print(t)", _print_tensor, "formatting needs the values on the host"),
    (".cpu()", lambda t: t.cpu(), "a blocking device-to-host copy"),
    ("torch.nonzero(t)", lambda t: torch.nonzero(t), "the output's size depends on the data: the host must read it"),
    ("if t.sum() > 0:", lambda t: bool(t.sum() > 0), "Python's if needs a bool on the host (an .item() in disguise)"),
    ("t[t > 0]", lambda t: t[t > 0], "boolean-mask indexing calls nonzero"),
    ("t.sum()", lambda t: t.sum(), "control: the result stays on the GPU, nothing waits"),
    ('t.to("cpu", non_blocking=True)', lambda t: t.to("cpu", non_blocking=True),
     "copies into pinned host memory without waiting; reading it before a sync is a race (lesson 05)"),
)


def _first_line(message: str) -> str:
    line = str(message).strip().splitlines()[0] if str(message).strip() else ""
    return line.split(" (Triggered internally at")[0].strip()


def hidden_syncs(device: Any = None, spin_ms: float = 20.0, size: int = 4096) -> dict[str, Any]:
    """Which everyday operations make the host wait for the GPU, found with ``torch.cuda.set_sync_debug_mode("warn")``.

    For each op in :data:`SYNC_OPS`, the GPU is first kept busy with a ``torch.cuda._sleep`` spin of
    about ``spin_ms`` on the current stream; then the op runs with the sync debug mode set to
    ``"warn"`` (restored right after) and every warning recorded. Two independent signs of a sync
    are reported: the warning (``syncs``, ``message``), and the host time the op took (``waited_ms``:
    an op that syncs waits for the spin, one that does not returns in microseconds).

    On the CPU there is nothing to wait for and ``set_sync_debug_mode`` is CUDA-only: every op comes
    back with ``syncs=None`` and a note.

    Returns ``{"ops": [{"op", "syncs", "message", "waited_ms", "spin_ms", "note"}, ...], "device", "spin_ms"}``.

    Example:
        >>> r = hidden_syncs("cpu")
        >>> r["ops"][0]["op"], r["ops"][0]["syncs"]
        ('.item()', None)
    """
    dev = resolve_device(device)
    if dev.type != "cuda":
        return {
            "ops": [{"op": name, "syncs": None, "message": "no CUDA device: the CPU runs each op before it returns",
                     "waited_ms": None, "spin_ms": None, "note": note} for name, _, note in SYNC_OPS],
            "device": str(dev),
            "spin_ms": None,
        }
    rows = []
    with torch.cuda.device(dev):
        t = torch.randn(size, device=dev)
        for _, fn, _ in SYNC_OPS:  # warm-up, untimed: kernels loaded, a pinned host block cached for .to()
            fn(t)
        cycles = spin_cycles(dev, spin_ms)
        torch.cuda.synchronize(dev)
        old_mode = torch.cuda.get_sync_debug_mode()
        for name, fn, note in SYNC_OPS:
            row, result = _under_debug_mode(dev, cycles, lambda: fn(t), old_mode)
            if name.startswith("t.to(") and isinstance(result, torch.Tensor):
                note = f"{note} (result pinned: {result.is_pinned()})"
            rows.append({"op": name, **row, "note": note})
            del result
    return {"ops": rows, "device": str(dev), "spin_ms": float(statistics.median(r["spin_ms"] for r in rows))}


def _under_debug_mode(dev: torch.device, cycles: int, call: Callable[[], Any], old_mode: Any) -> tuple[dict, Any]:
    """Run ``call`` behind a spin kernel with the sync debug mode set to "warn": whether it warned, and how long
    the host was inside it (``{"syncs", "message", "waited_ms", "spin_ms"}``), and what it returned."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    result = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            t0 = time.perf_counter()
            result = call()
            waited = wall_ms(t0)
        finally:
            torch.cuda.set_sync_debug_mode(old_mode)
    torch.cuda.synchronize(dev)
    msgs = [_first_line(str(w.message)) for w in caught
            if "synchroniz" in str(w.message) and "prototype" not in str(w.message)]
    return {"syncs": bool(msgs), "message": msgs[0] if msgs else "", "waited_ms": waited,
            "spin_ms": start.elapsed_time(end)}, result


#: Calls that wait for the GPU that the sync debug mode does not report (PyTorch's docs: it "does not yet detect
#: all" synchronizing operations): (label, call given a GPU tensor and a pageable host tensor of its size, why).
BLIND_SPOTS: tuple[tuple[str, Callable[..., Any], str], ...] = (
    ("event.synchronize()", lambda t, host: _recorded_event().synchronize(), "the host waits for the event"),
    ("stream.synchronize()", lambda t, host: torch.cuda.current_stream().synchronize(), "the host waits for the stream"),
    ("host.copy_(t, non_blocking=True)", lambda t, host: host.copy_(t, non_blocking=True),
     "into pageable memory: the copy is staged, and the host waits for it, flag or not"),
    (".cpu()", lambda t, host: t.cpu(), "control: a blocking copy the mode reports"),
)


def _recorded_event() -> "torch.cuda.Event":
    ev = torch.cuda.Event()
    ev.record()
    return ev


def sync_debug_blind_spots(device: Any = None, spin_ms: float = 20.0, size: int = 4096) -> dict[str, Any]:
    """Calls that make the host wait although ``set_sync_debug_mode("warn")`` stays silent, beside one it reports.

    Each call in :data:`BLIND_SPOTS` runs behind a spin of ``spin_ms`` with the mode set to "warn", as in
    :func:`hidden_syncs`: whether it warned (``syncs``) and how long the host was inside it (``waited_ms``).
    The measured wait is the evidence; the warning is a helper with blind spots.

    Returns ``{"ops": [{"op", "syncs", "message", "waited_ms", "spin_ms", "note"}, ...], "device"}``.

    Example:
        >>> sync_debug_blind_spots("cpu")["ops"][0]["syncs"] is None
        True
    """
    dev = resolve_device(device)
    if dev.type != "cuda":
        return {"ops": [{"op": name, "syncs": None, "message": "", "waited_ms": None, "spin_ms": None, "note": note}
                        for name, _, note in BLIND_SPOTS], "device": str(dev)}
    rows = []
    with torch.cuda.device(dev):
        t, host = torch.randn(size, device=dev), torch.empty(size)
        for _, fn, _ in BLIND_SPOTS:  # warm-up, untimed
            fn(t, host)
        cycles = spin_cycles(dev, spin_ms)
        torch.cuda.synchronize(dev)
        old_mode = torch.cuda.get_sync_debug_mode()
        for name, fn, note in BLIND_SPOTS:
            row, _ = _under_debug_mode(dev, cycles, lambda: fn(t, host), old_mode)
            rows.append({"op": name, **row, "note": note})
    return {"ops": rows, "device": str(dev)}


#: A script that queues an out-of-bounds gather on the GPU, then unrelated work, then reads a value: it prints,
#: as JSON, the step at which the error surfaced.
ASYNC_ERROR_SCRIPT = r"""
import json, torch
steps = ["1 · y = x[index]: the faulty kernel is queued", "2 · z = a @ a: unrelated work",
         "3 · z.sum().item(): the first read on the host"]
x, a = torch.zeros(16, device="cuda"), torch.randn(512, 512, device="cuda")
torch.cuda.synchronize()
done = 0
try:
    y = x[torch.tensor([1 << 20], device="cuda")]
    done = 1
    z = a @ a
    done = 2
    z.sum().item()
    done = 3
    print(json.dumps({"raised_at": None, "error": None}))
except Exception as e:
    print(json.dumps({"raised_at": steps[done], "error": str(e).strip().splitlines()[0][:120]}))
"""


def async_error(device: Any = None, timeout_s: float = 120.0) -> dict[str, Any]:
    """Where a GPU error surfaces: a device-side assert in an indexing kernel, reported at a later, unrelated line;
    with ``CUDA_LAUNCH_BLOCKING=1`` at the line that queued it. Each run is a fresh Python process (a device-side
    assert leaves the CUDA context unusable); the two run side by side.

    Returns ``{"default": {"raised_at", "error"}, "launch_blocking": {...}, "faulty_step", "device"}``.

    Example:
        >>> async_error("cpu")["default"] is None
        True
    """
    import json
    import os

    from asynclab.gpu.processes import side_by_side

    dev = resolve_device(device)
    faulty = "1 · y = x[index]: the faulty kernel is queued"
    if dev.type != "cuda":
        return {"default": None, "launch_blocking": None, "faulty_step": faulty, "device": str(dev)}
    out: dict[str, Any] = {"faulty_step": faulty, "device": str(dev)}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(dev.index or 0)}
    runs = side_by_side({"default": (["-c", ASYNC_ERROR_SCRIPT], env),
                         "launch_blocking": (["-c", ASYNC_ERROR_SCRIPT], {**env, "CUDA_LAUNCH_BLOCKING": "1"})},
                        timeout_s, "faulty run")
    for key, proc in runs.items():
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        out[key] = json.loads(lines[-1]) if lines else {"raised_at": None, "error": f"no result ({proc.returncode})"}
    return out


def cpu_is_synchronous(n: int = 512, reps: int = 10, repeats: int = 5) -> dict[str, Any]:
    """On the CPU, the naive timer and the synchronized timer agree: each op finishes before it returns.

    Times ``reps`` x ``torch.mm(a, a)`` (``n x n`` float32, on the CPU) with
    :func:`asynclab.gpu.timing.naive_timer` and :func:`asynclab.gpu.timing.sync_timer`, ``repeats`` times each,
    alternating between the two (so that other load on the machine hits both alike); medians, and the
    ratio as the median of each back-to-back pair's ratio (:func:`asynclab.gpu.timing.paired_ratio`).

    Returns ``{"naive_ms", "sync_ms", "ratio" (naive / sync, about 1), "naive_times_ms", "sync_times_ms"
    (the pairs, in the order timed), "n", "reps", "device"}``.

    Example:
        >>> r = cpu_is_synchronous(n=64, reps=2, repeats=3)  # the ratio is checked in the unit tests, on more work
        >>> sorted(r), r["device"]
        (['device', 'n', 'naive_ms', 'naive_times_ms', 'ratio', 'reps', 'sync_ms', 'sync_times_ms'], 'cpu')
    """
    a = torch.randn(n, n)

    def work() -> None:
        for _ in range(reps):
            torch.mm(a, a)

    for _ in range(2):  # warm-up: thread pool, allocator
        work()
    naive, synced = [], []
    for _ in range(repeats):  # alternate the two timers, so that a busy machine slows both alike
        naive.extend(naive_timer(work, repeats=1, warmup=0, device="cpu").times_ms)
        synced.extend(sync_timer(work, repeats=1, warmup=0, device="cpu").times_ms)
    naive_ms, sync_ms = statistics.median(naive), statistics.median(synced)
    return {
        "naive_ms": naive_ms,
        "sync_ms": sync_ms,
        "ratio": paired_ratio(naive, synced),
        "naive_times_ms": naive,
        "sync_times_ms": synced,
        "n": int(n),
        "reps": int(reps),
        "device": "cpu",
    }


def _d2l_benchmark(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`d2l_benchmark`, printing d2l's lines when ``run_all`` is verbose."""
    return d2l_benchmark(run.device, verbose=run.verbose, **sizes)


def _host_runs_ahead(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`host_runs_ahead`'s results (it returns its trace too), its trace recorded on the CPU as well."""
    results, _ = host_runs_ahead(run.device, path=run.traces("host_runs_ahead", needs=0), **sizes)
    return results


def _cpu_is_synchronous(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`cpu_is_synchronous`, which runs on the CPU whatever the device."""
    return cpu_is_synchronous(**sizes)


#: Every lesson 01 experiment, in the order ``run_all`` runs them: its key in the results, its function, the trace
#: it writes (<trace_dir>/<name>.json.gz) and how many GPUs that trace needs (0: the CPU records it too).
EXPERIMENTS: list[Experiment] = [
    Experiment("d2l_benchmark", _d2l_benchmark, custom=True),
    Experiment("host_runs_ahead", _host_runs_ahead, "host_runs_ahead", gpus=0, custom=True),
    Experiment("launch_overhead", launch_overhead, "launch_overhead", gpus=0, trace_fn=launch_overhead_trace),
    Experiment("overhead_bound", overhead_bound),
    Experiment("hidden_syncs", hidden_syncs),
    Experiment("sync_debug_blind_spots", sync_debug_blind_spots),
    Experiment("async_error", async_error),
    Experiment("cpu_is_synchronous", _cpu_is_synchronous, custom=True),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS)


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
