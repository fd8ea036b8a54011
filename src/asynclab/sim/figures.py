"""The simulated GPU's cost model as a handful of named hardware figures, read from one data file per card (sim/cards/)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["CARDS", "FIGURES", "MATMUL_SIDE", "card_figures", "check_figures", "rates"]

#: Where the cards' data files live: ``<card>.json`` (lower case), written by ``scripts/calibrate_gpu.py``.
CARDS = Path(__file__).resolve().parent / "cards"

#: Every figure a card's file gives, with its unit.
FIGURES = {
    "memory_gbps": "GB/s a kernel reads and writes device memory at",
    "matmul_tflops": "TFLOP/s of matrix products, by dtype: fp32, tf32, bf16, fp16 (square products of side 8192)",
    "matmul_tflops_by_side": "TFLOP/s of smaller square matrix products, by dtype (fp32, tf32, bf16, fp16), then by "
                             "side (\"64\" to \"4096\")",
    "host_op_us": "µs of host time per PyTorch operator from Python, besides its launch",
    "host_matmul_us": "µs of host time per matrix product from Python (cuBLAS's call), besides its launch",
    "launch_us": "µs of host time per kernel or copy launch",
    "stream_call_us": "µs of host time per stream call from Python: a wait_stream, an event's record or wait, "
                      "entering or leaving torch.cuda.stream",
    "annotation_us": "µs of host time to enter or leave a record_function range",
    "min_kernel_us": "µs the shortest kernel takes",
    "min_matmul_us": "µs the shortest matrix product takes (cuBLAS's kernel for a small product)",
    "launch_queue_depth": "launches that may wait on a GPU before the host blocks",
    "copy_gbps": "GB/s of copies: pinned, pageable (host memory), peer (GPU to GPU), via_host (GPU to GPU without P2P)",
    "copy_latency_us": "µs of GPU time every copy between the host and a GPU takes besides its bytes",
    "d2d_latency_us": "µs of GPU time every copy within one GPU (a cudaMemcpyAsync from device to device) takes besides "
                      "its bytes",
    "blocking_copy_us": "µs of host time a blocking copy between the host and a GPU costs once it has landed, besides "
                        "its operator and launch",
    "sm_count": "streaming multiprocessors",
    "sm_draw": "how many times its even share of the memory bandwidth an SM draws while few are busy",
    "shared_memory_kib": "KiB of shared memory a block may hold (PyTorch's softmax rereads a longer row)",
    "l2_cache_mb": "MB of L2 cache (rows reread from it do not cost the memory's bandwidth)",
    "peer_copy_us": "µs of GPU time a small copy between two GPUs takes, with PyTorch's barrier between them",
    "malloc_us": "µs of host time per cudaMalloc",
    "matmul_load_ms": "ms of host time a process's first matrix product of a dtype costs (cuBLAS loads its kernels; "
                      "the first of all also makes its handle and workspace)",
    "host_alloc_us": "µs of host time per cudaHostAlloc (a new pinned block), besides its bytes",
    "host_alloc_gbps": "GB/s at which cudaHostAlloc page-locks a new pinned block",
    "free_us": "µs of host time per cudaFree (which also waits for the GPU)",
    "spin_cycles_per_ms": "clock cycles per ms of a spin kernel (torch.cuda._sleep)",
    "host_gbps": "GB/s the host's own tensor work moves (its inputs and outputs) on host tensors",
    "host_random_ns": "ns of host time per random number the host's generator makes (randn, randint, ...)",
    "autograd_record_us": "µs of host time an operator takes to record its backward node (autograd on, an input "
                          "that requires grad)",
    "autograd_node_us": "µs of host time autograd's engine takes per backward node it runs, besides the node's "
                        "operators",
    "optimizer_param_us": "µs of host time an optimizer's step takes per parameter, besides its operators, by "
                          "optimizer: SGD, Adam, AdamW (the Python that gathers each parameter's state)",
    "optimizer_step_us": "µs of host time an optimizer's step takes whatever its parameters, besides its operators, by "
                         "optimizer: SGD, Adam, AdamW (its Python around them: hooks, grouping by device and dtype)",
    "backward_call_us": "µs of host time a backward call takes whatever its nodes (autograd's engine starting and "
                        "finishing a graph task)",
}
#: Figures a card's file may give (a card without one prices those operators as any other).
OPTIONAL_FIGURES = {
    "host_library_us": "µs of host time per call from Python, besides its launch, of the operators whose library does "
                       "host-side work first (cuDNN's plans and heuristics), by the operator's name: convolution, "
                       "convolution_backward, native_batch_norm, native_batch_norm_backward",
    "min_kernel_us_by_kind": "µs the shortest kernel of a kind takes, where it is not min_kernel_us (or min_matmul_us), "
                             "by kind: fp32_product (a small float32 product without TF32, which cuBLAS runs as a "
                             "split-K product and its reduction), reduction (a sum, mean, max ... over a small tensor)",
    "pageable_staging_mib": "MiB a copy from pageable host memory to the GPU may stage through the driver's own pinned "
                            "buffer and return at once with non_blocking=True; a larger one makes the host wait for "
                            "the stream's work before it and for all of the copy but the buffer's last fill",
    "first_touch_gbps": "GB/s at which a copy from the GPU writes pageable host memory the process never wrote "
                        "before: the system maps each page at its first touch (a new host tensor of 32 MiB or more "
                        "always has fresh pages)",
    "fp32_product_tflops_by_shape": "TFLOPS of a large float32 product without TF32 by layout (as "
                                    "fp32_product_us_by_shape) and shape 'M x N x K', as cuBLAS runs it: a thin "
                                    "product, or a Linear layer's forward with its bias epilogue, runs slower than a "
                                    "square product of the same work",
    "fp32_product_us_by_shape": "µs a small float32 product without TF32 takes on the GPU, by layout (addmm_nt: a "
                                "Linear layer's forward with its bias; mm_nn: its input's gradient; mm_tn: its "
                                "weight's) and shape ('M x N x K': the output's rows and columns, the inner length), "
                                "as cuBLAS runs it (one to four kernels, chosen by layout and shape)",
}
_DTYPES = ("fp32", "tf32", "bf16", "fp16")
#: The side of the square products whose rates ``matmul_tflops`` gives: the last point of each dtype's curve.
MATMUL_SIDE = 8192
_COPIES = ("pinned", "pageable", "peer", "via_host")
_OPTIMIZERS = ("SGD", "Adam", "AdamW")


class ShapeTable:
    """A card's figure for a matrix product of one layout by its shape (M, N, K: the output's rows and columns, the
    inner length), as measured on a grid of shapes: :meth:`nearest` gives the figure of the measured shape nearest on
    a log scale, where each side lies within the measured ones (half a doubling beyond them at most), else None; it
    remembers each shape it was asked (a training loop asks the same few again and again).

    Example:
        >>> table = ShapeTable({(32, 64, 64): 5.0, (256, 256, 256): 4.0})
        >>> table.nearest((40, 64, 64)), table.nearest((200, 256, 300)), table.nearest((4096, 64, 64))
        (5.0, 4.0, None)
    """

    __slots__ = ("_shapes", "_low", "_high", "_memo")

    def __init__(self, shapes: dict[tuple[int, int, int], float]) -> None:
        self._shapes = dict(shapes)
        self._low = tuple(min(s[i] for s in self._shapes) / 1.5 for i in range(3))
        self._high = tuple(max(s[i] for s in self._shapes) * 1.5 for i in range(3))
        self._memo: dict[tuple[int, int, int], float | None] = {}

    def nearest(self, want: tuple[int, int, int]) -> float | None:
        """The figure of the measured shape nearest ``want``, or None beyond the measured ones."""
        if want in self._memo:
            return self._memo[want]
        found = None
        if all(lo <= w <= hi for lo, w, hi in zip(self._low, want, self._high)):
            logs = [math.log2(max(1, v)) for v in want]
            nearest = min(self._shapes, key=lambda s: sum((math.log2(v) - w) ** 2 for v, w in zip(s, logs)))
            found = self._shapes[nearest]
        if len(self._memo) < 4096:
            self._memo[want] = found
        return found


def check_figures(figures: dict[str, Any], where: str = "the figures") -> dict[str, Any]:
    """``figures`` if it has every figure of :data:`FIGURES` as a positive number (its matmul and copy rates by
    name), else a ValueError of one line that names what is wrong.

    Example:
        >>> check_figures({"memory_gbps": 3000.0}, "x.json")
        Traceback (most recent call last):
        ...
        ValueError: x.json: no figure 'matmul_tflops' (a card's file gives all of memory_gbps, matmul_tflops, ...)
    """
    for name in FIGURES:
        if name not in figures:
            raise ValueError(f"{where}: no figure {name!r} (a card's file gives all of memory_gbps, matmul_tflops, "
                             "...)")
        groups = {"matmul_tflops": _DTYPES, "matmul_tflops_by_side": _DTYPES, "copy_gbps": _COPIES,
                  "optimizer_param_us": _OPTIMIZERS, "optimizer_step_us": _OPTIMIZERS}
        value, keys = figures[name], groups.get(name)
        values = [value.get(k) for k in keys] if keys and isinstance(value, dict) else [value]
        if name == "matmul_tflops_by_side":  # each dtype's rates by side: a non-empty dict of positive numbers
            values = [v for curve in values for v in (curve.values() if isinstance(curve, dict) and curve
                                                      and all(str(k).isdigit() for k in curve) else [curve])]
        if keys and not isinstance(value, dict):
            raise ValueError(f"{where}: {name} must give a rate for each of {', '.join(keys)}")
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0]
        if bad:
            raise ValueError(f"{where}: {name} must be positive numbers ({', '.join(keys or ())}), not {bad[0]!r}"
                             .replace(" ()", ""))
    for name in OPTIONAL_FIGURES:
        value = figures.get(name, {})
        leaves = [v for group in value.values() for v in (group.values() if isinstance(group, dict) else [group])] \
            if isinstance(value, dict) else [value]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 for v in leaves):
            raise ValueError(f"{where}: {name} must give positive numbers, not {value!r}")
    return figures


def card_figures(card: str = "H100") -> dict[str, Any]:
    """The figures of ``card`` (a name such as ``"H100"``, or the path of a card's JSON file), with its ``meta``
    (which figures were measured, and where).

    Example:
        >>> f = card_figures("H100")
        >>> f["memory_gbps"], f["matmul_tflops"]["bf16"], f["meta"]["card"]
        (2982.1, 771.5, 'NVIDIA H100 80GB HBM3')
        >>> card_figures("Z9")
        Traceback (most recent call last):
        ...
        ValueError: no figures for the card 'Z9' (there are: h100, h200)
    """
    path = Path(card) if str(card).endswith(".json") else CARDS / f"{str(card).lower()}.json"
    if not path.is_file():
        have = ", ".join(sorted(p.stem for p in CARDS.glob("*.json")))
        raise ValueError(f"no figures for the card {card!r} (there are: {have})")
    try:
        figures = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a card's figures ({type(err).__name__})") from None
    if not isinstance(figures, dict):
        raise ValueError(f"{path}: not a card's figures (a JSON object of figures)")
    return check_figures(figures, str(path))


def rates(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures as the simulated GPU's constants: times in ms, rates in bytes or FLOPs per ms (an optimizer's time
    per parameter and per step by its name; each dtype's matrix-product rates as a curve of (sides, rates)).

    Example:
        >>> r = rates(card_figures("H100"))
        >>> r["MEMORY_BYTES_PER_MS"], r["MATMUL_CURVES"]["bf16"][1][-1], r["LAUNCH_MS"]
        (2982100000.0, 771500000000.0, 0.004)
    """
    f, tflops, copies = figures, figures["matmul_tflops"], figures["copy_gbps"]
    return {
        "MEMORY_BYTES_PER_MS": f["memory_gbps"] * 1e6,
        "MATMUL_CURVES": {dtype: _curve(f["matmul_tflops_by_side"][dtype], tflops[dtype]) for dtype in _DTYPES},
        "HOST_OP_MS": f["host_op_us"] / 1e3,
        "HOST_MATMUL_MS": f["host_matmul_us"] / 1e3,
        "LAUNCH_MS": f["launch_us"] / 1e3,
        "STREAM_CALL_MS": f["stream_call_us"] / 1e3,
        "ANNOTATION_MS": f["annotation_us"] / 1e3,
        "KERNEL_MS": f["min_kernel_us"] / 1e3,
        "MATMUL_KERNEL_MS": f["min_matmul_us"] / 1e3,
        "LAUNCH_QUEUE_DEPTH": int(f["launch_queue_depth"]),
        "PINNED_BYTES_PER_MS": copies["pinned"] * 1e6,
        "PAGEABLE_BYTES_PER_MS": copies["pageable"] * 1e6,
        "PEER_BYTES_PER_MS": copies["peer"] * 1e6,
        "VIA_HOST_BYTES_PER_MS": copies["via_host"] * 1e6,
        "COPY_LATENCY_MS": f["copy_latency_us"] / 1e3,
        "D2D_LATENCY_MS": f["d2d_latency_us"] / 1e3,
        "BLOCKING_COPY_MS": f["blocking_copy_us"] / 1e3,
        "SM_COUNT": int(f["sm_count"]),
        "SM_DRAW": float(f["sm_draw"]),
        "SHARED_MEMORY_BYTES": f["shared_memory_kib"] * 1024,
        "L2_BYTES": f["l2_cache_mb"] * 1e6,
        "PEER_COPY_MS": f["peer_copy_us"] / 1e3,
        "MALLOC_MS": f["malloc_us"] / 1e3,
        "MATMUL_LOAD_MS": float(f["matmul_load_ms"]),
        "HOST_ALLOC_MS": f["host_alloc_us"] / 1e3,
        "HOST_ALLOC_BYTES_PER_MS": f["host_alloc_gbps"] * 1e6,
        "HOST_BYTES_PER_MS": f["host_gbps"] * 1e6,
        "HOST_RANDOM_MS": f["host_random_ns"] / 1e6,
        "FREE_MS": f["free_us"] / 1e3,
        "AUTOGRAD_RECORD_MS": f["autograd_record_us"] / 1e3,
        "AUTOGRAD_NODE_MS": f["autograd_node_us"] / 1e3,
        "OPTIMIZER_PARAM_MS": {name: us / 1e3 for name, us in f["optimizer_param_us"].items()},
        "OPTIMIZER_STEP_MS": {name: us / 1e3 for name, us in f["optimizer_step_us"].items()},
        "BACKWARD_CALL_MS": f["backward_call_us"] / 1e3,
        "HOST_LIBRARY_MS": {name: us / 1e3 for name, us in f.get("host_library_us", {}).items()},
        "KIND_KERNEL_MS": {kind: us / 1e3 for kind, us in f.get("min_kernel_us_by_kind", {}).items()},
        "FIRST_TOUCH_BYTES_PER_MS": f["first_touch_gbps"] * 1e6 if "first_touch_gbps" in f else None,
        "PAGEABLE_STAGING_BYTES": f["pageable_staging_mib"] * 2**20 if "pageable_staging_mib" in f else None,
        "FP32_PRODUCT_FLOPS_PER_MS_BY_SHAPE": {layout: ShapeTable({_shape(key): tf * 1e9 for key, tf in shapes.items()})
                                               for layout, shapes in f.get("fp32_product_tflops_by_shape", {}).items()},
        "FP32_PRODUCT_MS_BY_SHAPE": {layout: ShapeTable({_shape(key): us / 1e3 for key, us in shapes.items()})
                                     for layout, shapes in f.get("fp32_product_us_by_shape", {}).items()},
        "CYCLES_PER_MS": float(f["spin_cycles_per_ms"]),
    }


def _shape(key: str) -> tuple[int, int, int]:
    """A card file's shape key, 'M x N x K', as numbers: ``_shape("32x64x64") == (32, 64, 64)``."""
    m, n, k = (int(v) for v in key.split("x"))
    return m, n, k


def _curve(by_side: dict[str, float], largest: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A dtype's matrix-product rates as (sides, FLOPs per ms), by side, :data:`MATMUL_SIDE` last (``matmul_tflops``).

    Example:
        >>> _curve({"512": 20.0, "256": 4.0}, 50.0)
        ((256.0, 512.0, 8192.0), (4000000000.0, 20000000000.0, 50000000000.0))
    """
    points = sorted((float(side), tflops) for side, tflops in by_side.items() if float(side) < MATMUL_SIDE)
    points.append((float(MATMUL_SIDE), largest))
    return tuple(p[0] for p in points), tuple(p[1] * 1e9 for p in points)
