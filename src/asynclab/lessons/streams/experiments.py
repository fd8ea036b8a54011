"""Lesson 03 experiments: one stream serializes, side streams overlap, when they help and when not, the tail, Parallel, the pool, graphs."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from asynclab.course.experiments import Experiment, lesson_run_all
from asynclab.course.experiments import dig
from asynclab.gpu.devices import dtype_name, native_half, on_device, resolve_device, sync
from asynclab.gpu.timing import spin_cycles
from asynclab.course.experiments import gpu_or_note, whole_number
from asynclab.gpu.parallel import Parallel
from asynclab.gpu.timing import event_timer, sync_timer
from asynclab.lessons.streams.kernels import SpinBlocks

LESSON = "03"

#: Sizes that keep every experiment to a few seconds on a 2-core CPU (the notebooks' and tests' CPU runs).
CPU_KWARGS: dict[str, dict[str, Any]] = {
    "branches": {"repeats": 5},
    "branches_trace": {},
    "missing_wait": {},
    "spin_kernels": {},
    "matmuls": {"big_n": 256, "repeats": 5, "tiny_repeats": 20},
    "tail_effect": {},
    "parallel_module": {"repeats": 3},
    "stream_pool": {},
    "cuda_graphs": {},
}

#: What each GPU-only experiment returns on a machine without a GPU.
NO_GPU = "no CUDA GPU: streams exist only on a GPU (the CPU runs every op to the end, in order)"


def _fork_join(streams: list[torch.cuda.Stream], work: list[Callable[[], Any]]) -> list[Any]:
    """Run ``work[i]`` on ``streams[i]``: each stream first waits for the caller's stream, and the caller's
    stream waits for all of them at the end (the pattern of :class:`asynclab.Parallel`)."""
    caller = torch.cuda.current_stream()
    out = []
    for stream, fn in zip(streams, work):
        stream.wait_stream(caller)
        with torch.cuda.stream(stream):
            out.append(fn())
    for stream in streams:
        caller.wait_stream(stream)
    return out


def _ms(fn: Callable[[], Any], dev: torch.device, repeats: int, warmup: int = 2) -> float:
    """Median time of ``fn`` in ms: CUDA events on a GPU, the wall clock on the CPU."""
    return event_timer(fn, repeats=repeats, warmup=warmup, device=dev).median_ms


# -- 1 and 2: two independent branches, one stream vs two ----------------------------------------------
def _on_two_streams(block1: Callable, block2: Callable, x: torch.Tensor) -> Callable[[], tuple]:
    """``block1(x)`` on the current stream and ``block2(x)`` on a side stream, ordered correctly."""
    side = torch.cuda.Stream()

    def run() -> tuple:
        default = torch.cuda.current_stream()
        side.wait_stream(default)  # x was made on the default stream: wait for it before reading it
        y1 = block1(x)  # queued on the default stream
        with torch.cuda.stream(side):
            y2 = block2(x)  # queued on the side stream: free to run beside block1
        default.wait_stream(side)  # whatever the default stream does next sees y2 finished
        y2.record_stream(default)  # y2's memory belongs to the side stream; it is used on the default one
        return y1, y2

    return run


def branches(device: Any = None, workload: str = "small", repeats: int = 20, rows: int | None = None,
             path: str | Path | None = None) -> dict[str, Any]:
    """``block1(x)`` and ``block2(x)``: two independent branches of a workload of :data:`WORKLOADS`, on one
    stream and on two.

    On one stream the branches run one after the other. On two, ``block2`` runs on a side stream that
    first waits for the default stream (where ``x`` was made), and the default stream waits for it at the
    end: the pattern every correct use of a side stream follows. On the CPU there is one order only.
    ``rows`` cuts the same elements into that many rows (a softmax runs one block per row, so that many SMs
    work on each kernel). With ``path`` (a GPU only) a trace of both is saved there (``"one stream"``, ``"two
    streams"``).

    Returns ``{"one_stream_ms", "two_streams_ms" (None on the CPU), "speedup", "workload", "spec", "device"}``.

    Example:
        >>> r = branches("cpu", repeats=2, rows=16)
        >>> r["one_stream_ms"] > 0 and r["two_streams_ms"] is None, r["spec"]["batch"], r["spec"]["features"]
        (True, 16, 8192)
    """
    dev = resolve_device(device)
    spec = {**_specs(dev)[workload], "branches": 2}
    if rows is not None:
        elements = spec["batch"] * spec["features"]
        spec.update(batch=whole_number("rows", rows, 1, elements), features=elements // rows)
    (block1, block2), x = workload_modules(spec, dev)
    out: dict[str, Any] = {"workload": workload, "spec": spec, "device": str(dev)}
    with on_device(dev), torch.no_grad():
        out["one_stream_ms"] = _ms(lambda: (block1(x), block2(x)), dev, repeats)
        if dev.type == "cuda":
            out["two_streams_ms"] = _ms(_on_two_streams(block1, block2, x), dev, repeats)
            if path is not None:
                _trace_parts(path, {"one stream": lambda: (block1(x), block2(x)),
                                    "two streams": _on_two_streams(block1, block2, x)}, dev)
        else:
            out["two_streams_ms"] = None
    out["speedup"] = out["one_stream_ms"] / out["two_streams_ms"] if out["two_streams_ms"] else None
    return out


def branches_trace(device: Any, path: str | Path, workload: str = "small") -> Any:
    """A profiler trace of :func:`branches`: ``"one stream"`` then ``"two streams"`` (GPU only), each ending
    with a synchronize. Saved at ``path`` (.json.gz); returns the Trace.

    Example:
        >>> t = branches_trace("cuda", "branches.json.gz")  # doctest: +SKIP
    """
    dev = resolve_device(device)
    (block1, block2), x = workload_modules({**_specs(dev)[workload], "branches": 2}, dev)
    parts = {"one stream": lambda: (block1(x), block2(x))}
    with on_device(dev), torch.no_grad():
        if dev.type == "cuda":
            parts["two streams"] = _on_two_streams(block1, block2, x)
        return _trace_parts(path, parts, dev)


# -- 2: the missing wait, made deterministic --------------------------------------------------------------
def missing_wait(device: Any = None, spin_ms: float = 20.0, size: int = 1 << 20,
                 path: str | Path | None = None) -> dict[str, Any]:
    """The race a forgotten ``wait_stream`` causes, on purpose and every time, in both directions.

    *Input side.* The default stream spins for ``spin_ms`` (``torch.cuda._sleep``), then fills ``x``
    with 1. A side stream computes ``y = x * 2`` at once. Without ``side.wait_stream(default)`` the
    multiply runs during the spin and reads the old ``x`` (zeros): every element of ``y`` is wrong. PyTorch
    creates side streams non-blocking (``cudaStreamNonBlocking``), so nothing orders them against the
    default stream implicitly. With the wait, ``y`` is 2 everywhere.

    *Output side.* The side stream spins, then writes ``z``; the default stream reads ``z`` right after.
    Without ``default.wait_stream(side)`` the read comes first.

    With ``path``, a trace of the input side (``"no wait"`` then ``"wait_stream"``) is saved there.

    Returns ``{"input_wrong_unfixed", "input_wrong_fixed", "output_wrong_unfixed", "output_wrong_fixed",
    "elements", "spin_ms", "side_stream_flags", "device"}`` (counts of wrong elements; None on the CPU).

    Example:
        >>> missing_wait("cpu")["input_wrong_unfixed"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, input_wrong_unfixed=None, input_wrong_fixed=None, output_wrong_unfixed=None,
                           output_wrong_fixed=None, elements=size, spin_ms=spin_ms, side_stream_flags=None)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        side = torch.cuda.Stream()
        default = torch.cuda.current_stream()

        # streams and tensors made, kernels loaded, up front: building the stream pool and a kernel's first launch
        # (lazy loading) each waited for the GPU on the reference machine, which hides the race
        x, y, z, seen = (torch.zeros(size, device=dev) for _ in range(4))

        def input_side(wait: bool) -> int:
            x.zero_(), y.zero_()
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)  # the producer is late...
            x.fill_(1.0)  # ...and writes x after the spin
            if wait:
                side.wait_stream(default)
            with torch.cuda.stream(side):
                torch.mul(x, 2, out=y)  # the consumer, on a side stream: y = x * 2
            default.wait_stream(side)
            torch.cuda.synchronize()
            return int((y != 2).sum())

        def output_side(wait: bool) -> int:
            z.zero_(), seen.zero_()
            torch.cuda.synchronize()
            side.wait_stream(default)
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
                z.fill_(1.0)
            if wait:
                default.wait_stream(side)
            torch.mul(z, 2, out=seen)  # the default stream reads z
            torch.cuda.synchronize()
            return int((seen != 2).sum())

        input_side(True), output_side(True)  # load the kernels first: a kernel's first launch can wait (lazy loading)
        out = {"input_wrong_unfixed": input_side(False), "input_wrong_fixed": input_side(True),
               "output_wrong_unfixed": output_side(False), "output_wrong_fixed": output_side(True)}
        if path is not None:
            from asynclab.gpu.record import record

            def step() -> None:
                with torch.profiler.record_function("no wait"):
                    input_side(False)
                with torch.profiler.record_function("wait_stream"):
                    input_side(True)

            record(step, path=path, warmup=0, steps=1)
    out.update({"elements": size, "spin_ms": spin_ms, "side_stream_flags": _stream_flags(side), "device": str(dev)})
    return out


def _stream_flags(stream: torch.cuda.Stream) -> str | None:
    """``"cudaStreamNonBlocking"`` or ``"cudaStreamDefault"``, read from the CUDA runtime (None if unreadable)."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        return None
    err, flags = runtime.cudaStreamGetFlags(runtime.cudaStream_t(stream.cuda_stream))
    if err != runtime.cudaError_t.cudaSuccess:
        return None
    return "cudaStreamNonBlocking" if int(flags) & 1 else "cudaStreamDefault"


# -- 3: when streams help: spin kernels ---------------------------------------------------------------------
def spin_kernels(device: Any = None, kernels: int = 4, spin_ms: float = 5.0, repeats: int = 5,
                 path: str | Path | None = None) -> dict[str, Any]:
    """``kernels`` spin kernels (``torch.cuda._sleep``, one thread each) on one stream, then one per stream.

    A spin kernel occupies one thread of one SM for ``spin_ms`` and nothing else, so the GPU can run
    as many side by side as there are streams to hold them. With ``path`` a trace of one run of each
    (``"1 stream"``, ``"<kernels> streams"``) is saved there.

    Returns ``{"one_stream_ms", "many_streams_ms", "speedup", "kernels", "spin_ms" (one kernel, measured),
    "device"}`` (None values on the CPU).

    Example:
        >>> spin_kernels("cpu")["speedup"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, one_stream_ms=None, many_streams_ms=None, speedup=None, kernels=kernels,
                           spin_ms=None)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        cycles = spin_cycles(dev, spin_ms)
        streams = [torch.cuda.Stream() for _ in range(kernels)]

        def one() -> None:
            for _ in range(kernels):
                torch.cuda._sleep(cycles)

        def many() -> None:
            _fork_join(streams, [lambda: torch.cuda._sleep(cycles)] * kernels)

        single = _ms(lambda: torch.cuda._sleep(cycles), dev, repeats, warmup=1)
        one_ms, many_ms = _ms(one, dev, repeats, warmup=1), _ms(many, dev, repeats, warmup=1)
        if path is not None:
            _trace_parts(path, {"1 stream": one, f"{kernels} streams": many}, dev)
    return {"one_stream_ms": one_ms, "many_streams_ms": many_ms, "speedup": one_ms / many_ms, "kernels": kernels,
            "spin_ms": single, "device": str(dev)}


def _trace_parts(path: str | Path, parts: dict[str, Callable[[], Any]], dev: torch.device) -> Any:
    """Record one trace of several annotated parts, each ending with a synchronize."""
    from asynclab.gpu.record import record

    def step() -> None:
        for name, fn in parts.items():
            with torch.profiler.record_function(name):
                fn()
                sync(dev)

    return record(step, path=path, warmup=1, steps=1)


# -- 4: when they don't: big and tiny matrix products --------------------------------------------------------
def matmuls(device: Any = None, big_n: int = 8192, big_count: int = 2, tiny_n: int = 256, tiny_count: int = 8,
            dtype: torch.dtype | None = None, repeats: int = 10, tiny_repeats: int = 300,
            path: str | Path | None = None) -> dict[str, Any]:
    """Matrix products that fill the GPU (``big_count`` of ``big_n²``) and tiny ones (``tiny_count`` of ``tiny_n²``),
    on one stream and on one stream each.

    Big products are timed with CUDA events (GPU time). Tiny products are timed per round on the wall
    clock, launch and synchronize included, because what they cost is the host's time: each side stream
    needs its own ``wait_stream`` pair and stream switch, and the GPU has little work to overlap.
    With ``path`` a trace of one round of each set-up is saved there (``"big, 1 stream"``, ...).

    Returns ``{"big_one_ms", "big_many_ms", "big_speedup", "tiny_one_ms", "tiny_many_ms", "tiny_slowdown",
    "big_n", "big_count", "tiny_n", "tiny_count", "dtype", "device"}`` (stream figures None on the CPU).

    Example:
        >>> r = matmuls("cpu", big_n=64, repeats=2, tiny_repeats=5)
        >>> r["big_one_ms"] > 0 and r["big_many_ms"] is None
        True
    """
    dev = resolve_device(device)
    dtype = (dtype or native_half(dev)) if dev.type == "cuda" else torch.float32
    big = [torch.randn(big_n, big_n, device=dev, dtype=dtype) for _ in range(big_count + 1)]
    tiny = [torch.randn(tiny_n, tiny_n, device=dev, dtype=dtype) for _ in range(tiny_count + 1)]
    out: dict[str, Any] = {"big_n": big_n, "big_count": big_count, "tiny_n": tiny_n, "tiny_count": tiny_count,
                           "dtype": dtype_name(dtype), "device": str(dev)}

    def big_one() -> None:
        for x in big[1:]:
            big[0] @ x

    def tiny_one() -> None:
        for x in tiny[1:]:
            tiny[0] @ x

    with on_device(dev):
        out["big_one_ms"] = _ms(big_one, dev, repeats)
        out["tiny_one_ms"] = sync_timer(tiny_one, repeats=tiny_repeats, warmup=10, device=dev).median_ms
        if dev.type != "cuda":
            out.update(big_many_ms=None, big_speedup=None, tiny_many_ms=None, tiny_slowdown=None, note=NO_GPU)
            return out
        big_streams = [torch.cuda.Stream() for _ in range(big_count)]
        tiny_streams = [torch.cuda.Stream() for _ in range(tiny_count)]

        def big_many() -> None:
            _fork_join(big_streams, [lambda x=x: big[0] @ x for x in big[1:]])

        def tiny_many() -> None:
            _fork_join(tiny_streams, [lambda x=x: tiny[0] @ x for x in tiny[1:]])

        out["big_many_ms"] = _ms(big_many, dev, repeats)
        out["tiny_many_ms"] = sync_timer(tiny_many, repeats=tiny_repeats, warmup=10, device=dev).median_ms
        if path is not None:
            _trace_parts(path, {"big, 1 stream": big_one, f"big, {big_count} streams": big_many,
                                "tiny, 1 stream": tiny_one, f"tiny, {tiny_count} streams": tiny_many}, dev)
    out["big_speedup"] = out["big_one_ms"] / out["big_many_ms"]
    out["tiny_slowdown"] = out["tiny_many_ms"] / out["tiny_one_ms"]
    return out


# -- 5: the tail effect ----------------------------------------------------------------------------------------
def tail_effect(device: Any = None, block_us: float = 200.0, waves: int = 3, tail: float = 0.125,
                repeats: int = 3, path: str | Path | None = None) -> dict[str, Any]:
    """The kernel tail (wave quantization): time against block count, then a second stream filling the tail.

    A *wave* is as many blocks as the GPU holds at once (SMs x blocks per SM). Each block of
    :class:`SpinBlocks` spins for ``block_us``, so a grid of ``blocks`` takes about
    ``ceil(blocks / wave) x block_us``: a staircase. Then kernel A with ``wave + k`` blocks
    (``k = tail x wave``: its last wave nearly empty) and kernel B with ``wave - k`` blocks run on one
    stream, then on two: on two, B's blocks fill the slots A's tail leaves idle. With ``path`` a trace
    of both (``"tail: 1 stream"``, ``"tail: 2 streams"``) is saved there.

    Returns ``{"blocks", "ms" (the staircase), "wave", "sms", "blocks_per_sm", "occupancy_source",
    "block_us", "a_blocks", "b_blocks", "one_stream_ms", "two_streams_ms", "tail_fill_speedup", "device"}``.

    Example:
        >>> tail_effect("cpu")["wave"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, blocks=[], ms=[], wave=None, sms=None, blocks_per_sm=None,
                           tail_fill_speedup=None)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        k = SpinBlocks(dev, block_us=block_us)
        w = k.wave
        counts = sorted({1, w // 4, w // 2, w - 1, w} | {m * w + d for m in range(1, waves)
                                                       for d in (1, w // 8, w // 4, w // 2, w - 1, w)}
                        | {waves * w + 1})
        ms = [_ms(lambda c=c: k(c), dev, repeats, warmup=1) for c in counts]
        extra = max(1, int(tail * w))
        a_blocks, b_blocks = w + extra, w - extra
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]

        def one() -> None:
            k(a_blocks)
            k(b_blocks)

        def two() -> None:
            _fork_join(streams, [lambda: k(a_blocks), lambda: k(b_blocks)])

        one_ms, two_ms = _ms(one, dev, repeats, warmup=1), _ms(two, dev, repeats, warmup=1)
        if path is not None:
            _trace_parts(path, {"tail: 1 stream": one, "tail: 2 streams": two}, dev)
    return {"blocks": counts, "ms": ms, "wave": w, "sms": k.sms, "blocks_per_sm": k.blocks_per_sm,
            "occupancy_source": k.occupancy_source, "block_us": block_us, "a_blocks": a_blocks,
            "b_blocks": b_blocks, "one_stream_ms": one_ms, "two_streams_ms": two_ms,
            "tail_fill_speedup": one_ms / two_ms, "device": str(dev)}


# -- 6: asynclab.Parallel on two workloads ---------------------------------------------------------------------
#: The workloads of sections 1, 2 and 6: branches whose kernels leave most of the GPU idle (softmax over a
#: few long rows: one block per row, so 8 of the GPU's SMs work), and branches whose kernels fill it (big products).
WORKLOADS: dict[str, dict[str, Any]] = {
    "small": {"layer": "softmax", "branches": 4, "depth": 2, "features": 1 << 20, "batch": 8, "dtype": "float32"},
    "big": {"layer": "linear", "branches": 2, "depth": 2, "features": 8192, "batch": 8192, "dtype": "bfloat16"},
}

#: The same workloads at sizes a 2-core CPU runs in well under a second.
CPU_WORKLOADS: dict[str, dict[str, Any]] = {
    "small": {**WORKLOADS["small"], "features": 1 << 14},
    "big": {**WORKLOADS["big"], "features": 256, "batch": 256, "dtype": "float32"},
}

_LAYERS: dict[str, Callable[[int], nn.Module]] = {
    "layernorm": lambda f: nn.LayerNorm(f),
    "softmax": lambda f: nn.Softmax(dim=-1),
    "linear": lambda f: nn.Linear(f, f),
    "conv": lambda f: nn.Conv2d(f, f, 3, padding=1),
}


def _specs(dev: torch.device) -> dict[str, dict[str, Any]]:
    return WORKLOADS if dev.type == "cuda" else CPU_WORKLOADS


def describe_workload(spec: dict[str, Any]) -> str:
    """A workload in words.

    Example:
        >>> describe_workload(WORKLOADS["big"])
        '2 branches of 2 x Linear(8192), input 8192 x 8192 bfloat16'
    """
    layer = {"layernorm": f"LayerNorm({spec['features']})", "softmax": "Softmax(dim=-1)",
             "linear": f"Linear({spec['features']})", "conv": f"Conv2d({spec['features']}, 3x3)"}[spec["layer"]]
    shape = f"{spec['batch']} x {spec['features']}" + (f" x {spec['size']}²" if spec["layer"] == "conv" else "")
    return f"{spec['branches']} branches of {spec['depth']} x {layer}, input {shape} {spec['dtype']}"


def workload_modules(spec: dict[str, Any], dev: torch.device) -> tuple[list[nn.Module], torch.Tensor]:
    """The branches and the input of one workload of :data:`WORKLOADS`, on ``dev``.

    Example:
        >>> mods, x = workload_modules(CPU_WORKLOADS["small"], torch.device("cpu"))
        >>> len(mods), tuple(x.shape)
        (4, (8, 16384))
    """
    dtype = getattr(torch, spec["dtype"])
    dtype = native_half(dev) if dtype == torch.bfloat16 else dtype  # fp16 on GPUs without native bf16
    torch.manual_seed(0)
    make = _LAYERS[spec["layer"]]
    mods = [nn.Sequential(*[make(spec["features"]) for _ in range(spec["depth"])]).to(dev, dtype)
            for _ in range(spec["branches"])]
    shape = (spec["batch"], spec["features"]) + ((spec["size"],) * 2 if spec["layer"] == "conv" else ())
    return mods, torch.randn(*shape, device=dev, dtype=dtype)


def parallel_module(device: Any = None, workloads: tuple[str, ...] = ("small", "big"), repeats: int = 20,
                    path: str | Path | None = None) -> dict[str, Any]:
    """:class:`asynclab.Parallel` against running the same branches one after another, on each workload.

    Forward passes under ``torch.no_grad()``, timed with CUDA events (the wall clock on the CPU).
    Also checks that both give the same outputs. With ``path`` a trace of one pass of each
    (``"<workload>: sequential"``, ``"<workload>: Parallel"``) is saved there.

    Returns ``{"<workload>": {"sequential_ms", "parallel_ms", "speedup", "same_outputs", "spec"}, "device"}``.

    Example:
        >>> r = parallel_module("cpu", workloads=("small",), repeats=2)
        >>> r["small"]["same_outputs"]
        True
    """
    dev = resolve_device(device)
    specs = _specs(dev)
    out: dict[str, Any] = {"device": str(dev)}
    parts: dict[str, Callable[[], Any]] = {}
    with on_device(dev), torch.no_grad():
        for name in workloads:
            mods, x = workload_modules(specs[name], dev)
            par = Parallel(*mods)

            def sequential(mods=mods, x=x) -> tuple[torch.Tensor, ...]:
                return tuple(m(x) for m in mods)

            def parallel(par=par, x=x) -> tuple[torch.Tensor, ...]:
                return par(x)

            same = all(torch.allclose(p, s, rtol=1e-3, atol=1e-3) for p, s in zip(parallel(), sequential()))
            seq_ms, par_ms = _ms(sequential, dev, repeats), _ms(parallel, dev, repeats)
            out[name] = {"sequential_ms": seq_ms, "parallel_ms": par_ms, "speedup": seq_ms / par_ms,
                         "same_outputs": bool(same), "spec": {**specs[name], "dtype": dtype_name(x.dtype)}}
            parts[f"{name}: sequential"], parts[f"{name}: Parallel"] = sequential, parallel
        if path is not None:
            _trace_parts(path, parts, dev)
    return out


# -- 7: the stream pool and priorities -------------------------------------------------------------------------
def stream_pool(device: Any = None, created: int = 40, block_us: float = 200.0, big_waves: int = 20,
                path: str | Path | None = None) -> dict[str, Any]:
    """How many distinct CUDA streams ``created`` calls of ``torch.cuda.Stream()`` give, and what priority does.

    PyTorch does not create a CUDA stream per call: it hands out streams round-robin from a pool made
    once per device and priority. Counting the distinct ``cuda_stream`` handles shows the pool's size.

    Priority: a long kernel of ``big_waves`` waves (:class:`SpinBlocks`) runs on a normal stream; right
    after it is launched, one short block is launched on another stream of normal priority, then (in a
    second run) on a high-priority stream. The short kernel's wait is timed with events on its own stream.
    With ``path`` a trace of both runs (``"normal priority"``, ``"high priority"``) is saved there.

    Returns ``{"created", "distinct_streams", "priority_range", "normal_wait_ms", "high_wait_ms",
    "big_kernel_ms", "device"}`` (None values on the CPU).

    Example:
        >>> stream_pool("cpu")["distinct_streams"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, created=created, distinct_streams=None, priority_range=None,
                           normal_wait_ms=None, high_wait_ms=None, big_kernel_ms=None)
    if cpu is not None:
        return cpu
    with torch.cuda.device(dev):
        handles = [torch.cuda.Stream().cuda_stream for _ in range(created)]
        low, high = torch.cuda.Stream.priority_range()
        k = SpinBlocks(dev, block_us=block_us)
        big_stream = torch.cuda.Stream()
        big_blocks = big_waves * k.wave

        def run(priority: int) -> float:
            small = torch.cuda.Stream(priority=priority)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            with torch.cuda.stream(big_stream):
                k(big_blocks)
            with torch.cuda.stream(small):
                start.record()
                k(1)
                end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        run(low)  # warm-up
        normal = statistics.median(run(low) for _ in range(3))
        urgent = statistics.median(run(high) for _ in range(3))
        big_ms = _ms(lambda: k(big_blocks), dev, 3, warmup=1)
        if path is not None:
            _trace_parts(path, {"normal priority": lambda: run(low), "high priority": lambda: run(high)}, dev)
    return {"created": created, "distinct_streams": len(set(handles)), "priority_range": [low, high],
            "normal_wait_ms": normal, "high_wait_ms": urgent, "big_kernel_ms": big_ms, "block_us": block_us,
            "device": str(dev)}


# -- 8: CUDA graphs, when the launches are the bottleneck (the last answer of "How can l run two blocks in parallel?") --------------------------
#: Tiny branches: every kernel is a few microseconds, so eager mode is bound by the host's launches.
GRAPH_TINY: dict[str, Any] = {"layer": "linear", "branches": 8, "depth": 4, "features": 256, "batch": 32,
                              "dtype": "float32"}


def captured(fn: Callable[[], Any], dev: torch.device) -> Callable[[], Any]:
    """``fn`` captured once into a CUDA graph; the callable returned replays it and returns the captured outputs.

    ``fn`` runs three times first, on a side stream, outside the capture (what PyTorch's graph notes ask:
    cuBLAS workspaces, lazily loaded kernels and :class:`asynclab.Parallel`'s streams are made then). Inside
    the capture, side streams that wait for the capturing stream and are waited for by it become parallel
    branches of the graph. A replay reuses the captured memory, so each replay overwrites the last outputs.

    Example:
        >>> replay = captured(lambda: x @ x, torch.device("cuda"))  # doctest: +SKIP
        >>> replay() is replay()  # doctest: +SKIP
        True
    """
    caller = torch.cuda.current_stream(dev)
    warm = torch.cuda.Stream(dev)
    warm.wait_stream(caller)
    with torch.cuda.stream(warm):
        for _ in range(3):
            fn()
    caller.wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> Any:
        graph.replay()
        return out

    return replay


def cuda_graphs(device: Any = None, repeats: int = 50, path: str | Path | None = None) -> dict[str, Any]:
    """Launch-bound work four ways, and MobileNetV2 at batch 1, eager against a CUDA graph.

    Tiny branches (:data:`GRAPH_TINY`): one stream, :class:`asynclab.Parallel`, a graph of one stream, and
    a graph of ``Parallel`` (its side streams become parallel branches of the graph). Then torchvision's
    MobileNetV2 (random weights), inference at batch 1, eager and as a graph. Forward passes under
    ``torch.no_grad()``, medians of ``repeats`` timed with CUDA events; outputs compared with eager's.
    With ``path`` a trace of one pass of each (annotated ``"tiny: eager"``, ``"tiny: Parallel"``,
    ``"tiny: graph"``, ``"tiny: graph of Parallel"``, ``"MobileNetV2: eager"``, ``"MobileNetV2: graph"``).

    Returns ``{"tiny_ms": {"eager", "parallel", "graph", "graph_parallel"}, "mobilenet_ms": {"eager",
    "graph"}, "same_outputs", "spec", "device"}`` (None values on the CPU: graphs exist only on a GPU).

    Example:
        >>> cuda_graphs("cpu")["tiny_ms"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, tiny_ms=None, mobilenet_ms=None, same_outputs=None, spec=dict(GRAPH_TINY))
    if cpu is not None:
        return cpu
    from torchvision.models import mobilenet_v2

    with on_device(dev), torch.no_grad():
        mods, x = workload_modules(GRAPH_TINY, dev)
        par = Parallel(*mods)
        net = mobilenet_v2().to(dev).eval()
        image = torch.randn(1, 3, 224, 224, device=dev)
        parts: dict[str, Callable[[], Any]] = {
            "tiny: eager": lambda: tuple(m(x) for m in mods), "tiny: Parallel": lambda: par(x)}
        parts["tiny: graph"] = captured(parts["tiny: eager"], dev)
        parts["tiny: graph of Parallel"] = captured(parts["tiny: Parallel"], dev)
        parts["MobileNetV2: eager"] = lambda: net(image)
        parts["MobileNetV2: graph"] = captured(parts["MobileNetV2: eager"], dev)
        want = parts["tiny: eager"]()
        same = all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for name in ("tiny: graph", "tiny: graph of Parallel")
                   for a, b in zip(parts[name](), want))
        same = same and torch.allclose(parts["MobileNetV2: graph"](), net(image), rtol=1e-3, atol=1e-3)
        ms = {name: _ms(fn, dev, repeats, warmup=3) for name, fn in parts.items()}
        if path is not None:
            _trace_parts(path, parts, dev)
    return {"tiny_ms": {"eager": ms["tiny: eager"], "parallel": ms["tiny: Parallel"], "graph": ms["tiny: graph"],
                        "graph_parallel": ms["tiny: graph of Parallel"]},
            "mobilenet_ms": {"eager": ms["MobileNetV2: eager"], "graph": ms["MobileNetV2: graph"]},
            "same_outputs": bool(same), "spec": dict(GRAPH_TINY), "repeats": repeats, "device": str(dev)}


# -- everything, as the recording script runs it ------------------------------------------------------------------
def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures lesson 03's claims rest on, under the names its issue gives (None where not measured).

    Example:
        >>> headline({"spin_kernels": {"speedup": 3.9}})["four_spin_kernels_speedup"]
        3.9
    """
    def get(*keys: str) -> Any:
        return dig(results, *keys)

    return {
        "four_spin_kernels_speedup": get("spin_kernels", "speedup"),
        "tiny_mm_streams_slowdown": get("matmuls", "tiny_slowdown"),
        "big_mm_streams_speedup": get("matmuls", "big_speedup"),
        "tail_fill_speedup": get("tail_effect", "tail_fill_speedup"),
        "parallel_module_speedup_small": get("parallel_module", "small", "speedup"),
        "parallel_module_speedup_big": get("parallel_module", "big", "speedup"),
        "distinct_pool_streams": get("stream_pool", "distinct_streams"),
        "graph_tiny_ms": get("cuda_graphs", "tiny_ms"),
        "mobilenet_batch1_ms": get("cuda_graphs", "mobilenet_ms"),
    }


#: The event each trace's figures are about, called out on them: (part of the event's name, label).
CALLOUTS = {"missing_wait": [("MulFunctor", "y = x * 2, on the side stream")]}

#: Every lesson 03 experiment, in the order ``run_all`` runs them: its key in the results, its function, the trace
#: it writes (<trace_dir>/<name>.json.gz) and how many GPUs that trace needs (0: the CPU records it too).
EXPERIMENTS: list[Experiment] = [
    Experiment("branches", branches, "branches", gpus=0, trace_fn=branches_trace),
    Experiment("missing_wait", missing_wait, "missing_wait"),
    Experiment("spin_kernels", spin_kernels, "spin_kernels"),
    Experiment("matmuls", matmuls, "matmuls"),
    Experiment("tail_effect", tail_effect, "tail_fill"),
    Experiment("parallel_module", parallel_module, "parallel"),
    Experiment("stream_pool", stream_pool, "priority"),
    Experiment("cuda_graphs", cuda_graphs, "graphs"),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
