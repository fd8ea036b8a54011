"""How long a kernel runs on the simulated GPU and how much of it the kernel holds: its bytes at the bandwidth the SMs
it fills draw, a matrix product's FLOPs at the card's rate for its size, the rounds of a product that fills the GPU,
and the copies within a GPU that PyTorch makes a cudaMemcpyAsync. The operator layer
(:func:`asynclab.sim.ops.run_operator`) asks it for each kernel it queues.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from asynclab.sim.figures import ShapeTable
from asynclab.sim.nest import leaves
from asynclab.sim.running import RUNNING
from asynclab.sim.simulation import Simulation

#: Operators whose work is matrix products: timed by their FLOPs, not their bytes.
MATMULS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm", "linear", "convolution"}
#: cuBLAS's products: their kernels keep their blocks on the SMs until the product ends (a stream of higher priority
#: waits for them: :meth:`asynclab.sim.sms.SMs.on_sms`), and a run's first of a dtype loads them
#: (:meth:`asynclab.sim.simulate.HostCosts.loading_ms`).
CUBLAS_PRODUCTS = MATMULS - {"convolution"}

#: How many elements fill one SM, by the shapes of PyTorch's kernels: an elementwise kernel's block is 128 threads
#: of 4 elements each, and an SM holds 2048 threads; a matrix product's block computes one tile of its output, one
#: block to an SM, and cuBLAS shrinks its tiles, down to 32 x 32, to give every SM one (the products the lessons
#: recorded on an H100 ran tiles from 32 x 32 to 320 x 128); a softmax or a norm runs one block per row, one to an SM.
ELEMENTS_PER_SM = 2048 * 4
TILE_PER_SM = 32 * 32
#: Elements of a tensor one block of a multi-tensor (foreach) kernel takes (``kChunkSize`` in ATen's
#: MultiTensorApply.cuh).
FOREACH_CHUNK = 65536
#: Operators that run one block per row (of the last dimension; softmax's own ``dim``).
_PER_ROW = {"_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data", "native_layer_norm",
            "native_layer_norm_backward", "_fused_rms_norm"}


def _operands(args: Any) -> Any:
    """An operator's positional arguments, from ``args`` or from the ``(args, kwargs)`` pair a kernel's cost gets."""
    return args[0] if isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], dict) else args


def _row_dim(name: str, args: Any) -> int:
    """The dimension a per-row operator's rows run along: a softmax's own ``dim``, else the last.

    Example:
        >>> _row_dim("_softmax", (torch.empty(2, 3), 0, False)), _row_dim("native_layer_norm", (torch.empty(2, 3),))
        (0, -1)
    """
    operands = _operands(args)
    softmax = "softmax" in name and name.startswith("_")
    return operands[1] if softmax and len(operands) > 1 and isinstance(operands[1], int) else -1


def _fill(gpu: Simulation, name: str, args: Any, tensors: list, outputs: list) -> float:
    """The share of the GPU's SMs the operator's blocks occupy (0 to 1), from the sizes the GPU would see (a check's
    tensors are ``gpu.scale`` times smaller)."""
    scale = getattr(gpu, "scale", 1.0)
    if name in MATMULS and outputs:
        units = outputs[0].numel() * scale / TILE_PER_SM
    elif name in _PER_ROW and tensors and tensors[0].dim() >= 1:
        units = tensors[0].numel() * scale / max(1, tensors[0].shape[_row_dim(name, args)])
    elif name.startswith("_foreach_") and foreach_kernels(args) == 1:  # a block per chunk of each tensor, an SM each
        units = sum(math.ceil(t.numel() * scale / FOREACH_CHUNK) for t in leaves_of_lists(args)[0])
    else:
        units = max((t.numel() for t in tensors), default=0) * scale / ELEMENTS_PER_SM
    return min(1.0, max(units, 1.0) / gpu.SM_COUNT)


#: Softmaxes whose kernel reads a long row three times (PyTorch's ``cunn_SoftMaxForward``: for its maximum, for the
#: sum of the exponentials, and for the output). PyTorch keeps a row in registers while it has under 10 elements a
#: thread (a block has 1024 threads), else in shared memory if it fits there (its length a multiple of 16 bytes);
#: only a row that fits neither is read three times, and the two rereads come from the L2 cache while the rows read
#: at once (two blocks an SM) fit in the half of it beside the SMs. On an H100 (scripts/calibrate_gpu.py): 132 rows
#: of 63 550 float32 (34 MB read at once) took 45 µs, four passes at the card's 3.0 TB/s; 512 rows of 16 384 (17 MB at
#: once) took 33 µs, a read and a write.
_ROW_REREAD = {"_softmax": 3, "_log_softmax": 3}
_REGISTER_ROW = 10 * 1024


def _bytes(gpu: Simulation, name: str, args: Any, tensors: list) -> int:
    """The bytes an operator's kernel moves from memory: each tensor once, a softmax's long rows as often as its
    kernel reads them (:data:`_ROW_REREAD`)."""
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    operands = _operands(args)
    if name not in _ROW_REREAD or not operands or not isinstance(operands[0], torch.Tensor) or operands[0].dim() < 1:
        return nbytes
    x = operands[0]
    length, size = x.shape[_row_dim(name, args)], x.element_size()
    rows = x.numel() // max(1, length)
    in_shared = length * size < gpu.SHARED_MEMORY_BYTES and length * size % 16 == 0
    in_cache = min(rows, 2 * gpu.SM_COUNT) * length * size <= gpu.L2_BYTES / 2
    if length >= _REGISTER_ROW and not in_shared and not in_cache:
        nbytes += (_ROW_REREAD[name] - 1) * x.numel() * size
    return nbytes


def kernel_cost(gpu: Simulation, func: Any, args: Any, outputs: list,
                flat: list | None = None) -> tuple[float, float, bool]:
    """How long the operator runs alone, the share of the SMs it holds meanwhile, and whether memory bounds it: its
    FLOPs at the card's rate for a product of its size (:func:`matmul_rate`: a small one fills few SMs) for
    matrix products and convolutions, else its bytes at the bandwidth that share of the SMs draws
    (:meth:`asynclab.sim.sms.SMs.drawn`); never less than the shortest kernel (or matrix product). ``flat``: the
    leaves of ``args`` (:func:`asynclab.sim.nest.leaves`) where the caller has them already.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> gpu = SimGPU()
        >>> big, tiny, mm = torch.empty(8192, 8192), torch.empty(256, 256), torch.ops.aten.mm.default
        >>> [round(kernel_cost(gpu, mm, (m, m), [m])[1], 3) for m in (big, tiny)]  # 64 tiles of 132
        [1.0, 0.485]
    """
    tensors = [t for t in (leaves(args) if flat is None else flat) if isinstance(t, torch.Tensor)] + outputs
    name = func._schema.name.split("::")[-1]
    fill = _fill(gpu, name, args, tensors, outputs)
    ms = _bytes(gpu, name, args, tensors) / gpu.MEMORY_BYTES_PER_MS / gpu.sms.drawn(fill)
    flops = _flops(name, args, outputs)
    flops_ms = flops / product_rate(gpu, name, args, outputs, flops) if flops else 0.0
    return max(least_ms(gpu, name, args, outputs, flops), ms, flops_ms), fill, ms >= flops_ms


def _flops(name: str, args: Any, outputs: list) -> float:
    """The FLOPs of a matrix product or a convolution (0 for any other operator); a convolution's backward pass
    makes the gradients its ``output_mask`` asks for, of its input and of its weight, each as many FLOPs as the
    forward pass.

    Example:
        >>> x, w, y = torch.empty(8, 3, 32, 32), torch.empty(16, 3, 3, 3), torch.empty(8, 16, 32, 32)
        >>> _flops("convolution", (x, w), [y]) == 2 * y.numel() * 27
        True
        >>> back = (y, x, w, None, [1], [1], [1], False, [0], 1, [True, True, False])
        >>> _flops("convolution_backward", back, [x, w]) == 2 * _flops("convolution", (x, w), [y])
        True
    """
    if name in MATMULS and outputs:
        return 2.0 * outputs[0].numel() * _inner(name, args)
    operands = _operands(args)
    if name != "convolution_backward" or len(operands) < 3 or not isinstance(operands[0], torch.Tensor):
        return 0.0
    grad, weight = operands[0], operands[2]
    mask = operands[10] if len(operands) > 10 else [True, True, True]
    forward = 2.0 * grad.numel() * max(1, weight.numel() // max(1, weight.shape[0]))
    return forward * sum(bool(m) for m in list(mask)[:2])


#: The output tile of a 16-bit matrix product that fills the GPU (rows x columns): cuBLAS's kernels on an H100 run one
#: block per SM, each doing tile after tile (256 x 128 for a bf16 product of 4096, 320 x 128 for one of 8192, both 132
#: blocks), so that the last round of tiles leaves the SMs without one free for other streams' kernels.
ROUND_TILE = (256, 128)


def product_rounds(gpu: Simulation, out: torch.Tensor, ms: float) -> tuple:
    """A 16-bit product that fills the GPU as the waves of :meth:`asynclab.sim.sms.SMs.in_waves`: its rounds of one tile an SM
    (:data:`ROUND_TILE`), all but the last on every SM, the last on those that have a tile left; () where the tiles
    fill their rounds, the product does not fill the GPU or is not in 16 bits. On an H100 (bf16, 4096 x 4096: 512
    tiles, 3.9 rounds), kernels of another stream ran on the 16 SMs of the last round, in its last 44 of 174 µs.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> out = torch.empty(4096, 4096, dtype=torch.bfloat16)
        >>> [(round(f, 3), round(ms, 3)) for f, ms in product_rounds(SimGPU(), out, 0.2)]
        [(1.0, 0.15), (0.879, 0.05)]
    """
    if out.dim() < 2 or out.dtype not in (torch.bfloat16, torch.float16):
        return ()
    side = math.sqrt(getattr(gpu, "scale", 1.0))
    rows, cols = math.ceil(out.shape[-2] * side / ROUND_TILE[0]), math.ceil(out.shape[-1] * side / ROUND_TILE[1])
    tiles = rows * cols * math.prod(out.shape[:-2])
    rounds = math.ceil(tiles / gpu.SM_COUNT)
    last = tiles - (rounds - 1) * gpu.SM_COUNT
    if rounds < 2 or last == gpu.SM_COUNT:
        return ()
    return ((1.0, ms * (rounds - 1) / rounds), (last / gpu.SM_COUNT, ms / rounds))


def _product_dtype(name: str, args: Any, outputs: list) -> torch.dtype:
    """The dtype a product runs in: its output's (a convolution's backward pass: its incoming gradient's)."""
    operands = _operands(args)
    return operands[0].dtype if name == "convolution_backward" else outputs[0].dtype


def _inner(name: str, args: Any) -> int:
    """The length of the sums a matrix product makes for each output element: the first factor's last dimension
    (``addmm``'s and ``baddbmm``'s second argument), a convolution's weight size per output channel."""
    operands = _operands(args)
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    first = 1 if name in ("addmm", "baddbmm") else 0
    if name == "convolution" and len(tensors) > 1:
        return max(1, tensors[1].numel() // max(1, tensors[1].shape[0]))
    if len(tensors) > first and tensors[first].dim() >= 1:
        return tensors[first].shape[-1]
    return 1


def memcpy_bytes(name: str, args: tuple, outputs: list) -> int | None:
    """The bytes of a copy within one GPU that PyTorch makes a cudaMemcpyAsync from device to device, not a kernel:
    ``copy_`` or ``clone`` of one dtype into the same shape and strides, laid out densely; None for any other.

    Example:
        >>> x = torch.empty(4, 8)
        >>> memcpy_bytes("copy_", (torch.empty(4, 8), x), []), memcpy_bytes("clone", (x.t(),), [x.t().clone()])
        (128, 128)
        >>> memcpy_bytes("copy_", (torch.empty(8, 4), x.t()), []), memcpy_bytes("copy_", (x.half(), x), [])
        (None, None)
    """
    if name == "copy_" and len(args) > 1:
        dst, src = args[0], args[1]
    elif name == "clone" and outputs:
        dst, src = outputs[0], args[0]
    else:
        return None
    if not (isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor)) or src.dtype != dst.dtype \
            or src.shape != dst.shape or src.stride() != dst.stride() or not src.numel() or not _dense(src) \
            or src.is_conj() or src.is_neg():
        return None
    return src.numel() * src.element_size()


def _dense(t: torch.Tensor) -> bool:
    """Whether a tensor's elements fill its memory without gaps or overlap, in some order of its dimensions."""
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


#: Operators PyTorch runs as a reduction kernel (``reduce_kernel``): on a card that measured it
#: (``min_kernel_us_by_kind.reduction``), none takes less than that card's shortest reduction.
REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "norm", "linalg_vector_norm",
              "var", "std", "var_mean", "std_mean", "any", "all", "nansum", "count_nonzero", "logsumexp", "aminmax"}


def least_ms(gpu: Simulation, name: str, args: Any, outputs: list, flops: float) -> float:
    """The shortest time a kernel of operator ``name`` takes: the card's shortest product for a matrix product (for a
    float32 product without TF32, its time by layout and shape where the card measured it, :func:`nearest_measured`,
    else its shortest one: cuBLAS runs a small one as a split-K product and its reduction), its shortest reduction for a reduction where it gives one, else its shortest kernel. A
    multi-tensor (``_foreach_``) operator whose tensor lists differ in shape runs PyTorch's slow path: one kernel per
    tensor, each at least the shortest kernel.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> gpu = SimGPU(card="H200")
        >>> a, b = torch.empty(64, 64), torch.empty(64, 64, dtype=torch.bfloat16)
        >>> [round(least_ms(gpu, "mm", ((x, x), {}), [x], 1.0) * 1e3, 2) for x in (a, b)]
        [3.29, 2.01]
        >>> round(least_ms(gpu, "sum", ((a,), {}), [torch.empty(())], 0.0) * 1e3, 2)
        3.13
        >>> xs, zero_d = [torch.empty(8)] * 10, [torch.empty(())] * 10
        >>> round(least_ms(gpu, "_foreach_div_", ((xs, zero_d), {}), [], 0.0) * 1e3, 2)  # ten kernels
        8.5
    """
    kinds = gpu.KIND_KERNEL_MS
    if flops:
        fp32 = _product_dtype(name, args, outputs) is torch.float32 and not torch.backends.cuda.matmul.allow_tf32
        if not (fp32 and name in CUBLAS_PRODUCTS):
            return gpu.MATMUL_KERNEL_MS
        by_shape = nearest_measured(gpu.FP32_PRODUCT_MS_BY_SHAPE, name, args)
        return by_shape if by_shape is not None else kinds.get("fp32_product", gpu.MATMUL_KERNEL_MS)
    if name in REDUCTIONS:
        return kinds.get("reduction", gpu.KERNEL_MS)
    if name.startswith("_foreach_"):
        return gpu.KERNEL_MS * foreach_kernels(args)
    return gpu.KERNEL_MS


def nearest_measured(by_shape: dict[str, Any], name: str, args: Any) -> float | None:
    """A card's figure for a 2-D ``mm`` or ``addmm`` by its layout and shape: the figure of the measured shape
    (M, N, K: the output's rows and columns, the inner length) nearest on a log scale, where the card measured the
    layout and each side lies within the measured ones (half a doubling beyond them at most); else None.

    The layout names the operator and whether each factor is transposed: a ``Linear`` layer's forward is
    ``addmm_nt`` (its weight transposed), its input's gradient ``mm_nn`` and its weight's ``mm_tn``. cuBLAS runs a
    small float32 product as one to four kernels (a split-K product and its reduction; for ``addmm`` with a bias, a
    memset, a scaling and an epilogue besides), chosen by layout and shape.

    Example:
        >>> card = {"mm_nn": {(32, 64, 64): 5.0, (256, 256, 256): 4.0}}
        >>> nearest_measured(card, "mm", ((torch.empty(200, 256), torch.empty(256, 300)), {}))
        4.0
        >>> nearest_measured(card, "mm", ((torch.empty(4096, 64), torch.empty(64, 64)), {})) is None  # far beyond
        True
        >>> nearest_measured(card, "mm", ((torch.empty(64, 32).t(), torch.empty(64, 64)), {})) is None  # mm_tn
        True
    """
    operands = _operands(args)
    factors = operands[1:3] if name == "addmm" else operands[:2] if name == "mm" else ()
    if len(factors) != 2 or not all(isinstance(t, torch.Tensor) and t.dim() == 2 for t in factors):
        return None
    a, b = factors
    table = by_shape.get(f"{name}_{_layout(a)}{_layout(b)}")
    if not table:
        return None
    table = table if isinstance(table, ShapeTable) else ShapeTable(table)
    return table.nearest((a.shape[0], b.shape[1], a.shape[1]))


def _layout(t: torch.Tensor) -> str:
    """``t`` for a matrix laid out by columns (a transposed view), ``n`` otherwise."""
    return "t" if t.stride(-1) != 1 and t.stride(-2) == 1 else "n"


def foreach_kernels(args: Any) -> int:
    """How many kernels a multi-tensor operator runs: one (its fast path) where its tensor lists agree tensor by tensor
    in shape and dtype, else one per tensor of the first list (PyTorch's slow path: ``check_fast_path_restrictions``
    in ATen's ForeachUtils.h).

    Example:
        >>> xs = [torch.empty(4, 4), torch.empty(8)]
        >>> foreach_kernels(((xs, [torch.empty(4, 4), torch.empty(8)]), {})), foreach_kernels(((xs, 2.0), {}))
        (1, 1)
        >>> foreach_kernels(((xs, [torch.empty(()), torch.empty(())]), {}))
        2
    """
    lists = [a for a in leaves_of_lists(args) if a and all(isinstance(t, torch.Tensor) for t in a)]
    if len(lists) < 2:
        return 1
    first = lists[0]
    same = all(len(other) == len(first) and all(t.shape == u.shape and t.dtype == u.dtype for t, u in zip(first, other))
               for other in lists[1:])
    return 1 if same else len(first)


def leaves_of_lists(args: Any) -> list:
    """The lists and tuples among an operator's positional arguments (``args`` is ``(positional, keywords)``)."""
    positional = args[0] if isinstance(args, tuple) and len(args) == 2 and isinstance(args[1], dict) else args
    return [a for a in positional if isinstance(a, (list, tuple))]


def product_rate(gpu: Simulation, name: str, args: Any, outputs: list, flops: float) -> float:
    """FLOPs per ms of a matrix product or convolution: for a float32 product without TF32, the rate its card
    measured for its layout and shape where it did (``fp32_product_tflops_by_shape``: cuBLAS's kernel for a thin
    product, or a Linear layer's forward with its bias epilogue, runs slower than a square one of the same work),
    else :func:`matmul_rate`.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> gpu = SimGPU(card="H200")
        >>> x, w = torch.empty(512, 4096), torch.empty(4096, 4096)
        >>> round(product_rate(gpu, "mm", ((x, w), {}), [x], 2.0 * 512 * 4096 ** 2) / 1e9, 1)  # measured: 45.3
        45.3
    """
    dtype = _product_dtype(name, args, outputs)
    if dtype is torch.float32 and name in CUBLAS_PRODUCTS and not torch.backends.cuda.matmul.allow_tf32 \
            and gpu.scale == 1:  # a check's shrunk products: the curve's rate at the GPU's sizes
        measured = nearest_measured(gpu.FP32_PRODUCT_FLOPS_PER_MS_BY_SHAPE, name, args)
        if measured is not None:
            return measured
    return matmul_rate(gpu, dtype, flops, "convolution" in name)


def matmul_rate(gpu: Simulation, dtype: torch.dtype, flops: float, convolution: bool = False) -> float:
    """FLOPs per ms, on the simulated GPU ``gpu`` (its card's figures and its ``scale``), of a matrix product of ``flops`` FLOPs (at a check's sizes) with output of ``dtype``: bf16,
    fp16, tf32 (float32 where PyTorch allows TF32: ``torch.backends.cuda.matmul.allow_tf32``, or
    ``set_float32_matmul_precision("high")``; for a ``convolution``, where cuDNN may:
    ``torch.backends.cudnn.allow_tf32``, on by default), fp32 (any other dtype too). It is the card's rate for a
    square product of the same work at the GPU's sizes, interpolated on a log-log scale between the sides it was
    measured at (``matmul_tflops_by_side``), the smallest side's rate below them and the largest's above.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> gpu = SimGPU()
        >>> [round(matmul_rate(gpu, torch.bfloat16, 2.0 * n ** 3) / 1e9) for n in (256, 1024, 8192, 16384)]
        [9, 320, 772, 772]
        >>> round(matmul_rate(gpu, torch.float32, 2e9) / 1e9, 1)  # a 1000 x 1000 product in fp32
        37.2
    """
    tf32 = torch.backends.cudnn.allow_tf32 if convolution else torch.backends.cuda.matmul.allow_tf32
    if dtype is torch.float32 and tf32:
        kind = "tf32"
    else:
        kind = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")
    sides, rates = gpu.MATMUL_CURVES[kind]
    key = (sides, rates, gpu.scale, flops)  # the curves are tuples: the same key, the same rate
    known = RUNNING.rates.get(key)
    if known is None:
        scale = gpu.scale ** 1.5  # a check's products have sides sqrt(scale) shorter: FLOPs scale ** 1.5 fewer
        side = math.log(max(flops * scale / 2.0, 1.0)) / 3.0
        known = math.exp(float(np.interp(side, np.log(sides), np.log(rates)))) / scale
        if len(RUNNING.rates) >= 4096:
            RUNNING.rates.clear()
        RUNNING.rates[key] = known
    return known
