#!/usr/bin/env python3
"""Measure the simulated GPU's hardware figures on a real GPU and write them as a card's data file, with its meta.json.

    python3 scripts/calibrate_gpu.py --out DIR [--card h100]

It measures, on GPU 0: memory bandwidth (a large add), matrix-product rates (fp32, tf32, bf16, fp16), the host's
time per operator and per launch from Python, autograd's time per recorded and per run backward node and per
backward call and each optimizer's Python per step and per parameter (ratios to an operator's time, scaled to the
references' host), copy rates (pinned and pageable host memory) and a tiny copy's time (to and from the host,
within the GPU), peer-to-peer and through-the-host copy rates and a small peer copy's time when there are two GPUs,
cudaMalloc/cudaFree costs, and what one SM draws of the memory's bandwidth (with the sweep that tests it,
``DIR/sharing.json``). It writes ``DIR/<card>.json`` (the figures, in the form of
``src/asynclab/sim/cards/h100.json``: each measured figure's source says so, the ones it cannot measure keep their
value and their old source) and ``DIR/meta.json`` (GPU, driver, torch, date). Copy
``<card>.json`` to ``src/asynclab/sim/cards/`` to make it the simulated card's cost model.
"""
from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

#: Figures this script measures, by the name of the card file's figure (dotted: a rate of a group).
MEASURED = ("memory_gbps", "matmul_tflops.fp32", "matmul_tflops.tf32", "matmul_tflops.bf16", "matmul_tflops.fp16",
            "host_op_us", "host_matmul_us", "launch_us", "stream_call_us", "blocking_copy_us", "min_kernel_us", "min_matmul_us",
            "copy_gbps.pinned", "copy_gbps.pageable", "copy_gbps.peer", "copy_gbps.via_host", "copy_latency_us",
            "d2d_latency_us", "sm_count", "malloc_us", "free_us", "sm_draw",
            "shared_memory_kib", "l2_cache_mb", "peer_copy_us", "autograd_record_us", "autograd_node_us",
            "optimizer_param_us.SGD", "optimizer_param_us.Adam", "optimizer_param_us.AdamW",
            "optimizer_step_us.SGD", "optimizer_step_us.Adam", "optimizer_step_us.AdamW", "backward_call_us", "host_alloc_us",
            "host_alloc_gbps", "min_kernel_us_by_kind.fp32_product", "min_kernel_us_by_kind.reduction",
            *(f"fp32_product_us_by_shape.{layout}" for layout in ("addmm_nt", "mm_nn", "mm_tn")),
            *(f"fp32_product_tflops_by_shape.{layout}" for layout in ("addmm_nt", "mm_nn", "mm_tn")),
            "pageable_staging_mib", "first_touch_gbps", *(f"matmul_tflops_by_side.{dtype}" for dtype in ("fp32", "tf32", "bf16", "fp16")),
            *(f"host_library_us.{name}" for name in ("convolution", "convolution_backward", "native_batch_norm",
                                                    "native_batch_norm_backward")))
#: The optimizers whose Python per parameter is measured (SGD with momentum, as training runs it).
OPTIMIZERS = {"SGD": {"lr": 1e-3, "momentum": 0.9}, "Adam": {"lr": 1e-3}, "AdamW": {"lr": 1e-3}}

#: The rows the SM-sharing sweep cuts the same 8 Mi float32 elements into: a softmax runs one block per row.
SWEEP_ROWS = (8, 16, 32, 64, 96, 132, 512, 4096)


def rate_gbps(nbytes: int, ms: float) -> float:
    """GB/s of moving ``nbytes`` in ``ms``.

    Example:
        >>> round(rate_gbps(1 << 30, 10.0), 2)
        107.37
    """
    return nbytes / (ms * 1e-3) / 1e9


def tflops(m: int, n: int, k: int, ms: float) -> float:
    """TFLOP/s of an (m x k) by (k x n) matrix product that took ``ms``.

    Example:
        >>> round(tflops(4096, 4096, 4096, 1.0), 2)
        137.44
    """
    return 2.0 * m * n * k / (ms * 1e-3) / 1e12


def figures_from(measured: dict[str, Any], old: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """A card's figures: ``old`` with what was ``measured`` (same nesting) in their place, each measured figure's
    source saying so, and ``meta`` (GPU, driver, torch, date) in the file's meta.

    Example:
        >>> old = {"memory_gbps": 1.0, "copy_gbps": {"peer": 2.0}, "meta": {"source": {"memory_gbps": "assumption",
        ...        "copy_gbps.peer": "assumption"}}}
        >>> new = figures_from({"memory_gbps": 3.0}, old, {"gpu": "G"})
        >>> new["memory_gbps"], new["meta"]["source"]["memory_gbps"], new["meta"]["source"]["copy_gbps.peer"]
        (3.0, 'measured by scripts/calibrate_gpu.py on G', 'assumption')
    """
    figures = copy.deepcopy(old)
    sources = figures.setdefault("meta", {}).setdefault("source", {})
    for name, value in measured.items():
        for key, v in (value.items() if isinstance(value, dict) else [(None, value)]):
            if key is None:
                figures[name] = v
            else:
                figures.setdefault(name, {})[key] = v
            sources[name if key is None else f"{name}.{key}"] = f"measured by scripts/calibrate_gpu.py on {meta.get('gpu')}"
    figures["meta"].update(calibrated=True, card=meta.get("gpu", figures["meta"].get("card")), measured_on=meta,
                           note="Measured by scripts/calibrate_gpu.py; figures whose source is not 'measured' were "
                                "kept from the file before.")
    return figures


def _median_ms(fn: Callable[[], Any], repeats: int = 5, inner: int = 1) -> float:
    """The median GPU time of ``inner`` calls of ``fn``, timed with CUDA events, in ms per call."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def _host_us(fn: Callable[[], Any], n: int = 2000) -> float:
    """The host's time per call of ``fn`` from Python, in µs (the GPU kept far behind: tiny kernels)."""
    import torch

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    ms = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    return ms * 1e3 / n


def measure_compute() -> dict[str, Any]:
    """Memory bandwidth, matrix-product rates per dtype, the host's time per operator and per launch."""
    import torch

    a = torch.empty(1 << 28, device="cuda")  # 1 GiB
    b = torch.empty_like(a)
    out = {"memory_gbps": rate_gbps(3 * a.numel() * 4, _median_ms(lambda: torch.add(a, b, out=a)))}
    n, rates = 8192, {}
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        x = torch.randn(n, n, device="cuda", dtype=dtype)
        rates[name] = tflops(n, n, n, _median_ms(lambda: x @ x))
    torch.backends.cuda.matmul.allow_tf32 = False
    out["matmul_tflops"] = rates
    one, small = torch.zeros(1, device="cuda"), torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    op_us = _host_us(lambda: one.add_(1.0))
    launch_us = _host_us(lambda: torch.cuda._sleep(1))  # a launch with next to no operator around it
    out.update(host_op_us=max(0.0, op_us - launch_us), launch_us=launch_us, op_total_us=op_us,
               host_matmul_us=max(0.0, _host_us(lambda: torch.mm(small, small)) - launch_us), stream_call_us=_stream_call_us(),
               blocking_copy_us=max(0.0, _blocking_copy_us() - op_us), min_kernel_us=_min_kernel_us(),
               min_matmul_us=_min_kernel_us(work="bf16_product"),
               min_kernel_us_by_kind={w: _min_kernel_us(work=w) for w in ("fp32_product", "reduction")},
               sm_count=torch.cuda.get_device_properties(0).multi_processor_count,
               launch_queue_depth=_launch_queue_depth())
    return out


#: The sides of the square products whose rates make the card's curve of matrix-product rates by size.
MATMUL_SIDES = (64, 128, 256, 512, 1024, 2048, 4096)


def measure_matmul_sides() -> dict[str, dict[str, float]]:
    """TFLOP/s of square products of each side of :data:`MATMUL_SIDES`, by dtype: 20 products queued behind a spin
    kernel (so that the GPU runs them back to back, whatever the host's pace), timed with CUDA events."""
    import torch

    out: dict[str, dict[str, float]] = {}
    for name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        out[name] = {}
        for n in MATMUL_SIDES:
            x = torch.randn(n, n, device="cuda", dtype=dtype)
            # behind a spin of about 2 ms, in which the host queues the products
            out[name][str(n)] = tflops(n, n, n, _queued_us(lambda: x @ x, n=20, runs=3, cycles=4_000_000) / 1e3)
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def measure_host_python(op_us: float, ref_op_us: float) -> dict[str, Any]:
    """The host's time around the operators, each as a ratio to an operator's (``op_us``, an ``x.add_`` from Python
    with its launch, in the same run) scaled to the references' host, whose operator took ``ref_op_us``: autograd's
    recording of a backward node in the forward pass, its engine's time per node in the backward pass (a chain of
    multiplies) and per backward call (a chain of two, less its two nodes), and each optimizer's Python per step and
    per parameter in its step; each less what the simulation charges for it."""
    import torch

    n, leaf = 500, torch.ones(1, device="cuda", requires_grad=True)

    def chain() -> Any:
        y = leaf
        for _ in range(n):
            y = y * 1.0001
        return y
    with torch.no_grad():
        plain = _host_us(chain, n=5) / n
    recorded = _host_us(chain, n=5) / n
    node = _backward_us(leaf, n, _host_timer) / n  # a node's time: its multiply (an operator from C++) and the engine's
    call = (_backward_us(leaf, 2, _host_timer) - 2 * node) / op_us * ref_op_us
    out = {"autograd_record_us": max(0.0, recorded - plain) / op_us * ref_op_us,
           "autograd_node_us": max(0.0, node - op_us) / op_us * ref_op_us,
           "backward_call_us": max(0.1, call - _simulated_call_us()), "optimizer_param_us": {}, "optimizer_step_us": {}}
    for name, kwargs in OPTIMIZERS.items():
        slope, fixed = (v / op_us * ref_op_us for v in _optimizer_fit_us(name, kwargs, _host_step_us))
        sim_slope, sim_fixed = _simulated_fit_us(name, kwargs)
        out["optimizer_param_us"][name] = max(0.1, slope - sim_slope)
        out["optimizer_step_us"][name] = max(0.1, fixed - sim_fixed)
    return out


#: The operators whose library does host-side work first (cuDNN: plans, heuristics, layouts), by the name the
#: simulation sees: each on a small bf16 image batch, so that the GPU stays far behind the host.
LIBRARY_OPERATORS = ("convolution", "convolution_backward", "native_batch_norm", "native_batch_norm_backward")


def measure_host_library(op_us: float, ref_op_us: float, launch_us: float) -> dict[str, Any]:
    """The host's time per call of each of :data:`LIBRARY_OPERATORS` from Python (a 3 x 3 convolution of 64 channels
    and a batch norm in training mode, on 8 bf16 images of 16 x 16, their weights requiring grad as a model's do), as
    a ratio to an operator's (``op_us``, in the same run) scaled to the references' host (an operator ``ref_op_us``),
    less the references' ``launch_us``. A backward operator's time is its backward call's less that of a multiply by
    a one-number weight (two leaves as well; its backward runs three operators), plus three operators': the engine's
    time is autograd's figures'."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(8, 64, 16, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    mean, var = torch.zeros(64, device="cuda"), torch.ones(64, device="cuda")
    scale = torch.ones(64, device="cuda", requires_grad=True)  # a model's, in float32 (as under autocast)
    shift = torch.zeros(64, device="cuda", requires_grad=True)
    k = torch.ones(1, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    forward = {"convolution": lambda: F.conv2d(x, w, padding=1),
               "native_batch_norm": lambda: F.batch_norm(x, mean, var, scale, shift, training=True)}
    with torch.no_grad():
        total = {name: _host_us(fn, n=500) for name, fn in forward.items()}
    plain = _backward_call_us(lambda: x * k)
    for name, fn in forward.items():
        total[f"{name}_backward"] = _backward_call_us(fn) - plain + 3 * op_us
    return {"host_library_us": {name: max(0.1, total[name] / op_us * ref_op_us - launch_us)
                                for name in LIBRARY_OPERATORS}}


def _backward_call_us(forward: Callable[[], Any]) -> float:
    """The median host time (µs) of 25 backward calls through ``forward()`` (one operator on leaves), after two."""
    import torch

    times = []
    for _ in range(27):
        y = forward()
        grad = torch.ones_like(y)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.autograd.backward(y, grad)
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times[2:])


def _host_timer() -> Callable[[], float]:
    """The host's clock in µs (what :func:`_backward_us` reads on a GPU)."""
    import torch

    def now() -> float:
        return time.perf_counter() * 1e6
    torch.cuda.synchronize()
    return now


def _backward_us(leaf: Any, n: int, timer: Callable[[], Callable[[], float]]) -> float:
    """The median time (µs, on ``timer()``'s clock) of 25 backward calls through a chain of ``n`` multiplies of
    ``leaf``, after two such calls."""
    times = []
    for _ in range(27):
        y = leaf
        for _ in range(n):
            y = y * 1.0001
        now = timer()
        t0 = now()
        y.backward()
        times.append(now() - t0)
    return statistics.median(times[2:])


def _optimizer_fit_us(name: str, kwargs: dict, step_us: Callable[[Any], float]) -> tuple[float, float]:
    """The host's time of an optimizer's step (µs) as a line over its parameters: (per parameter, whatever their
    number), from its step on 8 and on 64 small parameters."""
    import torch

    def made(p: int) -> Any:
        params = [torch.zeros(128, 128, device="cuda", requires_grad=True) for _ in range(p)]
        for q in params:
            q.grad = torch.zeros_like(q)
        return getattr(torch.optim, name)(params, **kwargs)
    few, many = step_us(made(8)), step_us(made(64))
    slope = (many - few) / 56
    return slope, few - 8 * slope


def _host_step_us(opt: Any) -> float:
    import torch

    times = []
    for _ in range(27):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times[2:])


def _simulated_fit_us(name: str, kwargs: dict) -> tuple[float, float]:
    """What the simulated H100 charges the host for the same step (µs, per parameter and whatever their number), the
    figures being measured left out: the operators' host time, and their host tensors' (a step count on the host)."""
    from asynclab.sim.simulate import predictor

    with predictor(computes=False) as gpu:
        gpu.OPTIMIZER_PARAM_MS, gpu.OPTIMIZER_STEP_MS = {}, {}

        def step_us(opt: Any) -> float:
            opt.step()
            t0 = gpu.host
            opt.step()
            return (gpu.host - t0) * 1e3
        return _optimizer_fit_us(name, kwargs, step_us)


def _simulated_call_us() -> float:
    """What the simulated H100 charges the host for a backward call besides its nodes (µs), the figure being measured
    left out: measured on it as :func:`measure_host_python` measures it on the GPU."""
    import torch
    from asynclab.sim.simulate import predictor

    with predictor(computes=False) as gpu:
        gpu.BACKWARD_CALL_MS = 0.0
        leaf = torch.ones(1, device="cuda", requires_grad=True)

        def timer() -> Callable[[], float]:
            return lambda: gpu.host * 1e3
        node = _backward_us(leaf, 500, timer) / 500
        return _backward_us(leaf, 2, timer) - 2 * node


#: What :func:`_min_kernel_us` times, by name: next to no work of each kind of kernel (``fp32_product`` without TF32,
#: which cuBLAS runs as a split-K product and its reduction; ``reduction``: a sum over the rows of a 32 x 64 matrix,
#: as a bias's gradient is).
KERNEL_WORKS = ("add", "bf16_product", "fp32_product", "reduction")


def _min_kernel_us(n: int = 1000, work: str = "add") -> float:
    """The GPU's time per kernel that does next to nothing, ``n`` of them launched back to back from a CUDA graph (no
    launch of the host's between them): an add on one number, a product of two 64 x 64 matrices (bf16, or fp32
    without TF32) as cuBLAS runs a small product, or a small reduction (:data:`KERNEL_WORKS`)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    one = torch.zeros(1, device="cuda")
    small = torch.randn(64, 64, device="cuda", dtype=torch.float32 if work == "fp32_product" else torch.bfloat16)
    rows = torch.randn(32, 64, device="cuda")
    work_fn = {"add": lambda: one.add_(1.0), "bf16_product": lambda: small @ small,
               "fp32_product": lambda: small @ small, "reduction": lambda: rows.sum(0)}[work]
    return _graph_us(work_fn, n)


#: The shapes :func:`measure_fp32_products` times: rows (a batch), and a layer's inputs and outputs.
PRODUCT_ROWS, PRODUCT_SIDES = (16, 32, 64, 128, 256), (32, 64, 128, 256)


def _fp32_role_works(m: int, n: int, k: int) -> dict[str, Callable[[], Any]]:
    """A float32 ``Linear(k, n)`` layer's three products for ``m`` rows, as autograd runs them: the forward
    (``addmm`` of the bias, the input and the weight transposed), the input's gradient (the output's gradient times the
    weight) and the weight's gradient (the output's gradient transposed times the input)."""
    import torch

    x, w, b = (torch.randn(*s, device="cuda") for s in ((m, k), (n, k), (n,)))
    g = torch.randn(m, n, device="cuda")
    return {"forward": lambda: torch.nn.functional.linear(x, w, b), "input_grad": lambda: g @ w,
            "weight_grad": lambda: g.t() @ x}


def _graph_us(work: Callable[[], Any], n: int = 200) -> float:
    """µs per call of ``work``, ``n`` calls replayed back to back from a CUDA graph (median of five replays)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        work()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            work()
    return _median_ms(g.replay) * 1e3 / n


#: Each role's product as the card's ``fp32_product_us_by_shape`` names it (its layout), and its shape (M, N, K) from
#: the layer's (rows m, outputs n, inputs k): the forward x @ w.t(), the input's gradient g @ w, the weight's g.t() @ x.
ROLE_LAYOUTS = {"forward": ("addmm_nt", lambda m, n, k: (m, n, k)), "input_grad": ("mm_nn", lambda m, n, k: (m, k, n)),
                "weight_grad": ("mm_tn", lambda m, n, k: (n, k, m))}


def measure_fp32_products() -> dict[str, Any]:
    """The GPU's time for each of a small float32 layer's three products without TF32 (:func:`_fp32_role_works`),
    on every shape of :data:`PRODUCT_ROWS` x :data:`PRODUCT_SIDES` x :data:`PRODUCT_SIDES`, from CUDA graphs, by
    layout and the product's own shape 'M x N x K' (``fp32_product_us_by_shape``): cuBLAS runs a product this small
    as one to four kernels, chosen by its layout and shape, whose launches on the GPU, not its arithmetic, set its
    time."""
    import torch

    shapes = [(m, n, k) for m in PRODUCT_ROWS for n in PRODUCT_SIDES for k in PRODUCT_SIDES]
    return {"fp32_product_us_by_shape": _by_layout(shapes, lambda work, m, n, k: round(_graph_us(work), 2))}


def _by_layout(shapes: list[tuple[int, int, int]], figure: Callable[..., float]) -> dict[str, dict[str, float]]:
    """``figure(work, m, n, k)`` of each role's product (:func:`_fp32_role_works`) of each layer shape (rows m,
    outputs n, inputs k), in float32 without TF32, by layout and the product's own shape 'M x N x K'
    (:data:`ROLE_LAYOUTS`)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    out: dict[str, dict[str, float]] = {layout: {} for layout, _ in ROLE_LAYOUTS.values()}
    for m, n, k in shapes:
        for role, work in _fp32_role_works(m, n, k).items():
            layout, shape = ROLE_LAYOUTS[role]
            out[layout]["x".join(map(str, shape(m, n, k)))] = figure(work, m, n, k)
    return out


#: The sizes of pageable copies :func:`measure_pageable_staging` tries, in KiB.
STAGING_KIB = (256, 512, 1024, 1536, 2048, 3072, 4096, 8192)


#: The large float32 products :func:`measure_fp32_large_products` times: a Linear layer's rows, and its inputs and
#: outputs (square).
LARGE_ROWS, LARGE_SIDES = (128, 256, 512, 1024, 2048, 4096, 8192), (2048, 4096)


def measure_fp32_large_products() -> dict[str, Any]:
    """TFLOPS of a float32 Linear layer's three products without TF32 (:func:`_fp32_role_works`) on every shape of
    :data:`LARGE_ROWS` x :data:`LARGE_SIDES`, by layout and the product's own shape (``fp32_product_tflops_by_shape``):
    20 of each back to back behind a spin, timed with CUDA events (the median of three)."""
    def rate(work: Callable[[], Any], m: int, n: int, k: int) -> float:
        return round(tflops(m, n, k, _queued_us(work, n=20, runs=3, cycles=4_000_000) / 1e3), 1)

    shapes = [(m, side, side) for side in LARGE_SIDES for m in LARGE_ROWS]
    return {"fp32_product_tflops_by_shape": _by_layout(shapes, rate)}


def measure_pageable_staging(spin_ms: float = 10.0) -> dict[str, float]:
    """The largest copy from pageable host memory to the GPU (of :data:`STAGING_KIB`) whose ``copy_(...,
    non_blocking=True)`` returns before a spin of ``spin_ms`` queued before it ends (the median of five calls under
    half the spin): the driver stages it through its own pinned buffer; a larger one waits for the spin
    (``pageable_staging_mib``)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(20_000_000)  # about 10 ms: the clock's cycles per ms
    end.record()
    torch.cuda.synchronize()
    cycles = int(20_000_000 * spin_ms / start.elapsed_time(end))
    staged = 0
    for kib in STAGING_KIB:
        gpu, host = torch.empty(kib * 256, device="cuda"), torch.ones(kib * 256)
        times = []
        for _ in range(6):
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            gpu.copy_(host, non_blocking=True)
            times.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize()
        if statistics.median(times[1:]) < spin_ms / 2:
            staged = kib
    return {"pageable_staging_mib": staged / 1024}


def measure_first_touch(mib: int = 256, runs: int = 4) -> dict[str, float]:
    """GB/s at which a copy from the GPU writes host pages the process never wrote (``first_touch_gbps``): ``x.cpu()``
    of ``mib`` MiB (new memory: malloc maps a block this large anew) against ``x``'s copy into host memory already
    written, the median of ``runs`` each; the difference is the system's mapping of each page at its first touch."""
    import torch

    x = torch.randn(mib * 2**18, device="cuda")
    written = torch.ones(mib * 2**18)

    def ms(fn: Callable[[], Any]) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    fresh = statistics.median(ms(x.cpu) for _ in range(runs))
    into_written = statistics.median(ms(lambda: written.copy_(x)) for _ in range(runs))
    return {"first_touch_gbps": round(mib * 2**20 / max(1e-6, fresh - into_written) / 1e6, 2)}


def _launch_queue_depth(most: int = 8192) -> int:
    """How many launches may wait on the GPU before the host blocks: tiny adds launched behind a spin kernel of about
    a second, counted until one launch takes the host over a millisecond (``most`` if none does)."""
    import torch

    one = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # about a second at an H100's clock: the adds wait behind it
    depth = most
    for i in range(most):
        t0 = time.perf_counter()
        one.add_(1.0)
        if time.perf_counter() - t0 > 1e-3:
            depth = i
            break
    torch.cuda.synchronize()
    return depth


def _blocking_copy_us() -> float:
    """The host's time per blocking copy of one number from Python, with the GPU idle: the mean of one to the GPU
    from pageable memory (``torch.tensor(x, device="cuda")``) and one back (``.item()``)."""
    import torch

    one = torch.ones((), device="cuda")
    return (_host_us(lambda: torch.tensor(0.5, device="cuda"), n=500) + _host_us(one.item, n=500)) / 2


def _stream_call_us() -> float:
    """The host's time per stream call from Python: the mean of a ``wait_stream`` (an event made, recorded and
    waited for) and of entering and leaving ``torch.cuda.stream`` (two calls)."""
    import torch

    side, here = torch.cuda.Stream(), torch.cuda.current_stream()

    def switch() -> None:
        with torch.cuda.stream(side):
            pass
    return (_host_us(lambda: side.wait_stream(here)) + _host_us(switch) / 2) / 2


def _rows_ms(rows: int, streams: int, n: int = 8) -> float:
    """GPU ms per pair of softmaxes over 8 Mi float32 elements cut into ``rows`` rows, the two of a pair on one
    stream or on two, ``n`` pairs queued behind a spin kernel so that the events time the GPU, not the launches."""
    import torch

    xs = [torch.randn(rows, (1 << 23) // rows, device="cuda") for _ in range(2)]
    side = [torch.cuda.Stream() for _ in range(streams)]
    here = torch.cuda.current_stream()

    def pairs() -> None:
        for s in side:
            s.wait_stream(here)
        for _ in range(n):
            for i, x in enumerate(xs):
                with torch.cuda.stream(side[i % streams]):
                    torch.softmax(x, -1)
        for s in side:
            here.wait_stream(s)
    pairs()
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(5_000_000)  # about 2.5 ms: the launches below queue up behind it
        start.record()
        pairs()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / n)
    return statistics.median(times)


def sm_draw(rows: int, sms: int, ratio: float) -> float:
    """How many times its even share of the memory bandwidth a busy SM draws, from a softmax of ``rows`` rows (one
    block, one SM, a row) taking ``ratio`` times as long as one that fills all ``sms`` SMs: the model's bandwidth at a
    share f of the SMs is ``d f / (1 + (d - 1) f)`` of the whole (``asynclab.sim.device.SimGPU.drawn``).

    Example:
        >>> round(sm_draw(8, 132, 8.38), 2)
        2.1
    """
    f = rows / sms
    return (1 - f) / (f * (ratio - 1))


def measure_sharing() -> dict[str, Any]:
    """What one SM can draw of the memory's bandwidth, a block's shared memory, and the sweep that tests the model:
    softmaxes cut into more rows, one stream against two (and, raw, a softmax over all SMs beside a copy of as many
    bytes, for the passes PyTorch's softmax makes over a long row)."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sweep = {rows: {"one_stream_ms": _rows_ms(rows, 1), "two_streams_ms": _rows_ms(rows, 2)} for rows in SWEEP_ROWS}
    x = torch.randn(sms, (1 << 23) // sms, device="cuda")
    y = torch.empty_like(x)
    copy_ms = _median_ms(lambda: torch.mul(x, 1.0, out=y), inner=10)
    full_ms = _median_ms(lambda: torch.softmax(x, -1), inner=10)
    few_ms = sweep[8]["one_stream_ms"] / 2
    props = torch.cuda.get_device_properties(0)
    smem = getattr(props, "shared_memory_per_block", 48 << 10)
    return {"sm_draw": sm_draw(8, sms, few_ms / full_ms), "shared_memory_kib": smem / 1024,
            "l2_cache_mb": getattr(props, "L2_cache_size", 50e6) / 1e6, "sweep": sweep,
            "raw": {"copy_ms": copy_ms, "softmax_full_ms": full_ms, "softmax_8_rows_ms": few_ms}}


def measure_copies() -> dict[str, float]:
    """Copy rates between host and GPU (pinned, pageable), and between two GPUs (peer, through the host)."""
    import torch

    nbytes = 256 << 20
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    pinned, pageable = torch.empty(nbytes, dtype=torch.uint8).pin_memory(), torch.empty(nbytes, dtype=torch.uint8)
    rates = {"pinned": rate_gbps(nbytes, _median_ms(lambda: dev.copy_(pinned, non_blocking=True))),
             "pageable": rate_gbps(nbytes, _median_ms(lambda: dev.copy_(pageable)))}
    if torch.cuda.device_count() > 1:
        other = torch.empty(nbytes, dtype=torch.uint8, device="cuda:1")
        rates["peer"] = rate_gbps(nbytes, _median_ms(lambda: other.copy_(dev)))
        # staged through pinned host memory, as lesson 06 measures it (a fresh pageable buffer per copy, as
        # dev.cpu() makes, measures the host's page faults instead: 1.1 GB/s on two H200s); the host waits for GPU 1
        # before GPU 0's end event is recorded, so the events hold both halves
        rates["via_host"] = rate_gbps(nbytes, _median_ms(
            lambda: (pinned.copy_(dev), other.copy_(pinned), torch.cuda.synchronize(other.device))))
    return rates


def _queued_us(work: Callable[[], Any], n: int = 200, runs: int = 5, cycles: int = 20_000_000) -> float:
    """The GPU's time (µs) per call of ``work``, ``n`` of them queued behind a spin kernel of ``cycles`` (about 10 ms
    by default, so that the GPU runs them back to back, whatever the host's pace), timed with CUDA events after one
    warm call: the median of ``runs``."""
    import torch

    work()
    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        start.record()
        for _ in range(n):
            work()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / n)
    return statistics.median(times)


def measure_copy_latency() -> dict[str, float]:
    """The GPU's time per copy of 4 bytes: between pinned host memory and the GPU (the median of the two
    directions), and within the GPU (PyTorch's ``copy_`` of one dtype, a cudaMemcpyAsync from device to device)."""
    import torch

    one, other = torch.ones(1, device="cuda"), torch.zeros(1, device="cuda")
    pinned_in, pinned_out = torch.ones(1).pin_memory(), torch.zeros(1).pin_memory()
    both = [_queued_us(lambda: other.copy_(pinned_in, non_blocking=True)),
            _queued_us(lambda: pinned_out.copy_(one, non_blocking=True))]
    return {"copy_latency_us": statistics.median(both), "d2d_latency_us": _queued_us(lambda: other.copy_(one))}


def measure_allocator() -> dict[str, float]:
    """cudaMalloc and cudaFree costs: a 64 MiB block the caching allocator must get from the driver, then give back."""
    import torch

    mallocs, frees = [], []
    for _ in range(20):
        torch.cuda.empty_cache()
        t0 = time.perf_counter()
        x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        t1 = time.perf_counter()
        del x
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        torch.cuda.empty_cache()
        frees.append((time.perf_counter() - t2) * 1e6)
        mallocs.append((t1 - t0) * 1e6)
    return {"malloc_us": statistics.median(mallocs), "free_us": statistics.median(frees)}


def measure_pinning() -> dict[str, float]:
    """cudaHostAlloc's cost: a pinned block the caching host allocator must get from the driver (its cache emptied
    first), of 1, 16 and 256 MiB, the median of five each: a fixed part and a rate (the driver page-locks each page)."""
    import torch

    def fresh_ms(nbytes: int) -> float:
        runs = []
        for _ in range(5):
            torch._C._host_emptyCache()
            t0 = time.perf_counter()
            x = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            runs.append((time.perf_counter() - t0) * 1e3)
            del x
        return statistics.median(runs)

    small, mid, big = (fresh_ms(n << 20) for n in (1, 16, 256))
    per_ms = (240 << 20) / (big - mid)  # bytes per ms, from the two larger blocks
    print(f"fresh pins: 1 MiB {small:.3f} ms, 16 MiB {mid:.3f} ms, 256 MiB {big:.3f} ms", file=sys.stderr)
    return {"host_alloc_gbps": per_ms / 1e6, "host_alloc_us": max(1.0, (small - (1 << 20) / per_ms) * 1e3)}


#: Run in a fresh process: the one-off costs of a process's first launches (CUDA loads each kernel's module on its
#: first use) and of its first matrix product of a dtype (cuBLAS loads its kernels), each less the same call once warm.
_STARTUP = r"""
import json, statistics, time, torch
x = torch.ones(1 << 10, device="cuda")
torch.cuda.synchronize()

def first_and_warm(fn):
    t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); first = time.perf_counter() - t0
    warm = []
    for _ in range(5):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); warm.append(time.perf_counter() - t0)
    return (first - statistics.median(warm)) * 1e3

loads = [first_and_warm(lambda op=op: op(x)) for op in (torch.sigmoid, torch.exp, torch.tanh, torch.erf,
                                                        torch.log1p, torch.rsqrt, torch.expm1)]
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
first_mm = first_and_warm(lambda: torch.mm(a, a))
b = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
other_mm = first_and_warm(lambda: torch.mm(b, b))
print(json.dumps({"loads_ms": loads, "first_mm_ms": first_mm, "other_mm_ms": other_mm}))
"""


def measure_startup(runs: int = 3) -> dict[str, float]:
    """The one-off cost of a process's first matrix product of a dtype (cuBLAS loads its kernels, and makes its handle
    and workspace with the first): a 4096 x 4096 fp16 product, then a 1024 x 1024 fp32 one, each first call less a
    warm one, in ``runs`` fresh processes; the median of all. The first launches of seven elementwise operators are
    printed beside: CUDA loads a kernel's module on its first use, from a tenth of a millisecond to tens, by module,
    which the simulated GPU leaves out.
    """
    costs = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _STARTUP], capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip().splitlines()[-1])
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"start-up: first launches {[round(v, 3) for v in r['loads_ms']]} ms, first fp16 product "
              f"{r['first_mm_ms']:.2f} ms, then first fp32 product {r['other_mm_ms']:.2f} ms", file=sys.stderr)
        costs += [r["first_mm_ms"], r["other_mm_ms"]]
    return {"matmul_load_ms": statistics.median(costs)}


def meta_of() -> dict[str, str]:
    """GPU, driver, torch, CUDA and the date of this calibration."""
    import torch

    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.split("\n")[0].strip()
    except (OSError, subprocess.SubprocessError):
        driver = "unknown"
    return {"gpu": torch.cuda.get_device_name(0), "gpus": str(torch.cuda.device_count()), "driver": driver,
            "torch": torch.__version__, "cuda": str(torch.version.cuda), "date": dt.date.today().isoformat()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for <card>.json and meta.json")
    p.add_argument("--card", default="h100", help="the card file's name (default: h100)")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("calibrate_gpu.py: no CUDA GPU here; run it on the card to calibrate.", file=sys.stderr)
        return 1
    from asynclab.sim.figures import card_figures, check_figures

    meta = meta_of()
    measured = measure_compute()
    old = card_figures(args.card)
    op_us, ref_op_us = measured.pop("op_total_us"), old["host_op_us"] + old["launch_us"]
    measured.update(measure_host_python(op_us, ref_op_us))
    measured.update(measure_host_library(op_us, ref_op_us, old["launch_us"]))
    measured["copy_gbps"] = measure_copies()
    measured.update(measure_copy_latency())
    measured.update(measure_allocator())
    measured.update(measure_pinning())
    measured.update(measure_fp32_products())
    measured.update(measure_fp32_large_products())
    measured.update(measure_pageable_staging())
    measured.update(measure_first_touch())
    measured.update(measure_startup())
    measured["matmul_tflops_by_side"] = measure_matmul_sides()
    sharing = measure_sharing()
    measured.update({k: sharing[k] for k in ("sm_draw", "shared_memory_kib", "l2_cache_mb")})
    if torch.cuda.device_count() > 1:
        from asynclab.lessons.multi_gpu_p2p.experiments import latency

        measured["peer_copy_us"] = latency("cuda", sizes=(4,))["us_per_copy"][0]
    figures = check_figures(figures_from(measured, old, meta), "the measured figures")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.card.lower()}.json").write_text(json.dumps(figures, indent=1) + "\n")
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (args.out / "sharing.json").write_text(json.dumps({k: sharing[k] for k in ("sweep", "raw")}, indent=1) + "\n")
    print(json.dumps({k: v for k, v in figures.items() if k != "meta"}, indent=1))
    print(json.dumps(sharing, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
