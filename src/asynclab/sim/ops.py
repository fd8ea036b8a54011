"""How the simulated GPU runs one operator: a special rule, a view, a kernel on the current stream, or a read by the host.

Every function here takes the running :class:`asynclab.sim.device.SimGPU` as ``gpu``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from asynclab.sim.running import RUNNING
from asynclab.sim.simulation import Simulation
from asynclab.sim.nest import leaves, map_leaves
from asynclab.sim.tensors import DeviceTensor, PinnedTensor, fresh_memory, needed_bytes, shaped_on

aten = torch.ops.aten

#: Operators whose work is matrix products: timed by their FLOPs, not their bytes.
MATMULS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm", "linear", "convolution"}
#: cuBLAS's products: their kernels keep their blocks on the SMs until the product ends (a stream of higher priority
#: waits for them: :meth:`asynclab.sim.sms.SMs.on_sms`), and a run's first of a dtype loads them
#: (:meth:`asynclab.sim.simulate.HostCosts.loading_ms`).
CUBLAS_PRODUCTS = MATMULS - {"convolution"}


class _NeedsHostRead(Exception):
    """The operator's output shape or value depends on the data: the host must read it (as nonzero does on a GPU)."""


def _devices(args: Any) -> set[int]:
    return {t.block.device for t in leaves(args) if isinstance(t, DeviceTensor)}


def _host_tensors(args: Any) -> list[torch.Tensor]:
    """Host tensors among an operator's arguments, other than 0-d ones (which PyTorch lets a GPU kernel read)."""
    return [t for t in leaves(args)
            if isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) and t.dim() > 0]


def _any_host(tensors: Any) -> bool:
    """Whether a host tensor of any shape is among these: a copy to or from one is a host-GPU copy, a 0-d one
    (``out[i].copy_(loss)``, ``host[i] = t``) too."""
    return any(isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) for t in leaves(tensors))


def _meta(x: Any) -> Any:
    if isinstance(x, DeviceTensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    if isinstance(x, torch.device) and x.type == "cuda":
        return torch.device("meta")
    return x


def _elem(x: Any) -> Any:
    return x.elem if isinstance(x, DeviceTensor) else x


def _on_cpu(x: Any) -> Any:
    """An operator's argument as its CPU run takes it: a GPU tensor's memory, a GPU device as the CPU."""
    if isinstance(x, torch.device) and x.type == "cuda":
        return torch.device("cpu")
    return _elem(x)


def _garbage(x: Any) -> Any:
    """An operator's argument as a run that computes no values reads it: a GPU tensor as never-written memory (every
    byte 0xFF), whatever its memory holds.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     _garbage(torch.ones(2, device="cuda")).tolist(), _garbage(3)
        ([nan, nan], 3)
    """
    if isinstance(x, DeviceTensor):
        return shaped_on(fresh_memory(needed_bytes(x)), x)
    return _on_cpu(x)


def _raw(x: Any) -> Any:
    """A host tensor as a plain tensor: writing into it must not bring the simulation up to date (it is doing that)."""
    if type(x) is PinnedTensor:
        with torch._C.DisableTorchFunctionSubclass():
            return x.as_subclass(torch.Tensor)
    return _elem(x)


def _mutated(func: Any, args: tuple, kwargs: dict, kind: type = DeviceTensor) -> list:
    """The tensors (of type ``kind``) the operator writes in place, from its schema (``Tensor(a!)``), in order."""
    out = []
    for i, arg in enumerate(func._schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        out += [t for t in leaves(value) if isinstance(t, kind)]
    return out


def _is_view(func: Any) -> bool:
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns) \
        and not any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


#: How many elements fill one SM, by the shapes of PyTorch's kernels: an elementwise kernel's block is 128 threads
#: of 4 elements each, and an SM holds 2048 threads; a matrix product's block computes one tile of its output, one
#: block to an SM, and cuBLAS shrinks its tiles, down to 32 x 32, to give every SM one (the products the lessons
#: recorded on an H100 ran tiles from 32 x 32 to 320 x 128); a softmax or a norm runs one block per row, one to an SM.
ELEMENTS_PER_SM = 2048 * 4
TILE_PER_SM = 32 * 32
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


def _kernel_cost(gpu: Simulation, func: Any, args: Any, outputs: list) -> tuple[float, float, bool]:
    """How long the operator runs alone, the share of the SMs it holds meanwhile, and whether memory bounds it: its
    FLOPs at the card's rate for a product of its size (:func:`matmul_rate`: a small one fills few SMs) for
    matrix products and convolutions, else its bytes at the bandwidth that share of the SMs draws
    (:meth:`asynclab.sim.sms.SMs.drawn`); never less than the shortest kernel (or matrix product).

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> gpu = SimGPU()
        >>> big, tiny = torch.empty(8192, 8192), torch.empty(256, 256)
        >>> [round(_kernel_cost(gpu, aten.mm.default, (m, m), [m])[1], 3) for m in (big, tiny)]  # 64 tiles of 132
        [1.0, 0.485]
    """
    tensors = [t for t in leaves(args) if isinstance(t, torch.Tensor)] + outputs
    name = func._schema.name.split("::")[-1]
    fill = _fill(gpu, name, args, tensors, outputs)
    ms = _bytes(gpu, name, args, tensors) / gpu.MEMORY_BYTES_PER_MS / gpu.sms.drawn(fill)
    flops = _flops(name, args, outputs)
    flops_ms = flops / matmul_rate(gpu, _product_dtype(name, args, outputs), flops, "convolution" in name) \
        if flops else 0.0
    least = gpu.MATMUL_KERNEL_MS if flops else gpu.KERNEL_MS
    return max(least, ms, flops_ms), fill, ms >= flops_ms


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


#: Operators with a rule of their own, one each (filled by :func:`operator_rule`, as PyTorch's FakeTensor fills its
#: ``op_implementations``); a rule may hand the operator back to the general path by returning :data:`GENERAL`.
OPERATOR_RULES: dict[Any, Callable] = {}
GENERAL = object()


def operator_rule(*ops: Any) -> Callable:
    """Register the decorated ``rule(gpu, args, kwargs)`` for each of ``ops``; a second rule for one is refused.

    Example:
        >>> operator_rule(aten.is_pinned.default)(lambda gpu, args, kwargs: True)
        Traceback (most recent call last):
        ...
        ValueError: a second simulated rule for aten.is_pinned.default
    """
    def register(rule: Callable) -> Callable:
        again = [op for op in ops if op in OPERATOR_RULES]
        if again:
            raise ValueError(f"a second simulated rule for {again[0]}")
        OPERATOR_RULES.update(dict.fromkeys(ops, rule))
        return rule
    return register


@operator_rule(aten._local_scalar_dense.default)
def _item(gpu: Simulation, args: tuple, kwargs: dict) -> Any:
    """``.item()``: a blocking copy to the host."""
    return gpu.to_host(args[0], non_blocking=False, pinned=False).item()


@operator_rule(aten.is_pinned.default)
def _is_pinned(gpu: Simulation, args: tuple, kwargs: dict) -> bool:
    """GPU memory is not pinned host memory."""
    return False


@operator_rule(aten._to_copy.default)
def _to_copy(gpu: Simulation, args: tuple, kwargs: dict) -> Any:
    """``.to(device)``: a copy to another device; a change of dtype alone is a kernel. A tensor that tells autograd it
    lives on the CPU (:func:`asynclab.sim.tensors.trains_here`) stays on its GPU when autograd casts it "to the CPU"."""
    device = kwargs.get("device")
    if getattr(args[0], "trains", False) and device is not None and device.type == "cpu":
        return run_operator(gpu, aten._to_copy.default, args, {k: v for k, v in kwargs.items() if k != "device"})
    moved = _to_device(gpu, args[0], kwargs)
    return GENERAL if moved is None else moved


@operator_rule(aten.copy_.default)
def _copy(gpu: Simulation, args: tuple, kwargs: dict) -> Any:
    """``dst.copy_(src)`` between the host and a GPU or two GPUs: a copy; on one GPU, a kernel."""
    if not (_any_host(args[:2]) or len(_devices(args)) > 1):
        return GENERAL
    gpu.copy(args[0], args[1], bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking")))
    return args[0]


def _allocation(op: Any) -> Callable:
    """The rule of an operator that only allocates (``empty_like``, ``new_empty``): memory from the caching
    allocator, no kernel, as on a GPU; one that asks for another device than a GPU is left to the general path."""
    def rule(gpu: Simulation, args: tuple, kwargs: dict) -> Any:
        device = kwargs.get("device")
        if device is not None and torch.device(device).type != "cuda":
            return GENERAL
        meta = op(*map_leaves(_meta, args), **{**kwargs, "device": "meta", "pin_memory": None})
        return gpu.allocate(meta, args[0].block.device if device is None else gpu.index(device))
    return rule


for _op in (aten.empty_like.default, aten.new_empty.default, aten.new_empty_strided.default):
    operator_rule(_op)(_allocation(_op))


#: PyTorch's C++ names of dtypes, as its error messages print them.
_CPP_DTYPE = {torch.float32: "float", torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16",
              torch.float64: "double"}


@operator_rule(aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default)
def _matrix_product(gpu: Simulation, args: tuple, kwargs: dict) -> Any:
    """A matrix product of two dtypes raises at its launch, as the GPU's does (its meta kernel does not check)."""
    a, b = (args[1], args[2]) if len(args) > 2 else (args[0], args[1])
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype != b.dtype:
        raise RuntimeError(f"expected mat1 and mat2 to have the same dtype, but got: "
                           f"{_CPP_DTYPE.get(a.dtype, a.dtype)} != {_CPP_DTYPE.get(b.dtype, b.dtype)}")
    return GENERAL


def run_operator(gpu: Simulation, func: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``func`` on simulated tensors: a view at once, a copy between devices, a read by the host, or a kernel.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     x = torch.arange(6.0, device="cuda").view(2, 3)
        ...     (x.t() @ x).sum().item()
        153.0
    """
    special = OPERATOR_RULES.get(func)
    if special is not None:
        out = special(gpu, args, kwargs)
        if out is not GENERAL:
            return out
    devices = _devices((args, kwargs))
    host_written = [t for t in _mutated(func, args, kwargs, torch.Tensor) if not isinstance(t, DeviceTensor)]
    if _host_tensors((args, kwargs)) or host_written or len(devices) > 1:  # a GPU kernel writes no host memory
        names = sorted({f"cuda:{d}" for d in devices} | ({"cpu"} if _host_tensors((args, kwargs)) or host_written
                                                          else set()))
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                           f"{names[0]} and {names[1]}!")
    device = devices.pop() if devices else gpu.device
    if _is_view(func):
        base = next(t for t in leaves(args) if isinstance(t, DeviceTensor))
        views = func(*map_leaves(_elem, args), **map_leaves(_elem, kwargs))
        with torch.inference_mode(base.is_inference()):  # a view is an inference tensor if its base is one
            return map_leaves(lambda o: DeviceTensor(o, base.block) if isinstance(o, torch.Tensor) else o, views)
    try:
        shapes = _shapes(func, args, kwargs)
        in_place = not func._schema.returns and bool(_mutated(func, args, kwargs))  # torch._foreach_add_(xs, ys)
        if not all(isinstance(o, torch.Tensor) for o in leaves(shapes)) or not (leaves(shapes) or in_place):
            raise _NeedsHostRead()
    except (_NeedsHostRead, NotImplementedError, RuntimeError) as err:
        meta = isinstance(err, (_NeedsHostRead, NotImplementedError)) or "meta" in str(err).lower() \
            or "data-dependent" in str(err)
        if not meta:
            raise
        return _read_by_host(gpu, func, args, kwargs, device)
    return _kernel(gpu, func, args, kwargs, device, shapes)


#: How many operators' output shapes :data:`asynclab.sim.running.RUNNING` keeps (:func:`_shapes`).
_SHAPES_KEPT = 4096
_TENSOR = object()  # marks a tensor in a signature


def _signature(x: Any) -> Any:
    """What an operator's output shapes depend on: its tensors' dtypes, sizes and strides, and its other arguments."""
    if isinstance(x, (tuple, list)):
        return tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return tuple((k, _signature(v)) for k, v in x.items())
    if isinstance(x, torch.Tensor):
        return _TENSOR, x.dtype, tuple(x.shape), x.stride(), x.storage_offset(), isinstance(x, DeviceTensor)
    return x


def _shapes(func: Any, args: tuple, kwargs: dict) -> Any:
    """The operator's outputs as meta tensors (their sizes, strides and dtypes): from PyTorch's meta kernels, once for
    each operator and signature of its arguments (a training loop asks the same ones again and again).

    Example:
        >>> a = torch.empty(2, 3)
        >>> [_shapes(aten.mm.default, (a, a.t()), {}).shape for _ in range(2)], len(RUNNING.shapes) > 0
        ([torch.Size([2, 2]), torch.Size([2, 2])], True)
    """
    try:
        key = (func, _signature(args), _signature(kwargs))
        known = RUNNING.shapes.get(key)
    except TypeError:  # an argument that cannot be a key (a SymInt's expression, say): worked out each time
        key, known = None, None
    if known is not None:
        return map_leaves(lambda m: torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device="meta"), known)
    shapes = func(*map_leaves(_meta, args), **map_leaves(_meta, kwargs))
    if key is not None and leaves(shapes) and all(isinstance(o, torch.Tensor) for o in leaves(shapes)):
        if len(RUNNING.shapes) >= _SHAPES_KEPT:
            RUNNING.shapes.clear()
        RUNNING.shapes[key] = shapes
    return shapes


def _returns(func: Any, shapes: Any) -> list:
    """The schema's return for each output tensor in ``shapes`` (in :func:`leaves` order: an optional output the
    operator did not make is not there; a list of tensors takes its return once per tensor)."""
    returns = func._schema.returns
    outs = shapes if isinstance(shapes, tuple) and len(returns) > 1 else (shapes,)
    return [ret for ret, out in zip(returns, outs) for _ in leaves(out)]


def _kernel(gpu: Simulation, func: Any, args: tuple, kwargs: dict, device: int, shapes: Any) -> Any:
    """Queue ``func`` as a kernel on the current stream: it reads its inputs when it starts and writes its outputs
    (new memory, and the tensors it mutates) when it ends."""
    mutated = _mutated(func, args, kwargs)
    name = func._schema.name.split("::")[-1]
    flat = leaves(shapes)
    written = iter(mutated)
    outputs = []
    for meta, ret in zip(flat, _returns(func, shapes)):
        aliased = ret.alias_info is not None and ret.alias_info.is_write
        outputs.append(next(written, None) if aliased else gpu.allocate(meta, device))
    stream = gpu.current(device)
    # the work holds the memory, never the tensors: a tensor freed while its work is queued frees its memory
    eargs, ekwargs = map_leaves(_on_cpu, args), map_leaves(_on_cpu, kwargs)
    written_to = [t.elem for t in mutated]
    fresh = [None if t is None or any(t is m for m in mutated) else t.elem for t in outputs]

    def at_start() -> Any:
        if not gpu.computes:  # timing only: the memory keeps what it held
            return None
        clones = {id(e): e.clone() for e in written_to}
        swap = lambda x: clones.get(id(x), x) if isinstance(x, torch.Tensor) else x  # noqa: E731
        try:
            values = leaves(func(*map_leaves(swap, eargs), **map_leaves(swap, ekwargs)))
        except Exception as err:  # noqa: BLE001 - the host hears of it at its next wait, as of a device-side error
            gpu.failed.append(f"{name} ({type(err).__name__}: {str(err).splitlines()[0][:120]})")
            return lambda: [e.fill_(float("nan") if e.dtype.is_floating_point else -1)
                            for e in [f for f in fresh if f is not None] + written_to]

        def at_end() -> None:
            for out, value in zip(fresh, values):
                if out is not None and isinstance(value, torch.Tensor):
                    out.copy_(value)
            for e in written_to:
                e.copy_(clones[id(e)])
        return at_end

    reads = tuple(t for t in leaves((eargs, ekwargs)) if isinstance(t, torch.Tensor)
                  and any(t is x.elem for x in leaves((args, kwargs)) if isinstance(x, DeviceTensor)))
    made_or_written = [o for o in outputs if o is not None] or mutated  # an in-place op of no return writes its inputs
    ms, fill, memory = _kernel_cost(gpu, func, (args, kwargs), made_or_written)
    product = name in CUBLAS_PRODUCTS
    nbytes = memcpy_bytes(name, args, made_or_written)
    if nbytes is not None:  # PyTorch copies these with cudaMemcpyAsync (aten/src/ATen/native/cuda/Copy.cu)
        name, ms = "Memcpy DtoD (Device -> Device)", gpu.D2D_LATENCY_MS + 2 * nbytes / gpu.MEMORY_BYTES_PER_MS
    gpu.queue(name, stream, ms, at_start, cat="kernel" if nbytes is None else "gpu_memcpy", fill=fill, memory=memory,
              reads=reads,
              writes=tuple(f for f in fresh if f is not None) + tuple(written_to), holds=product,
              waves=product_rounds(gpu, made_or_written[0], ms) if product and made_or_written else ())
    made = iter([o if o is not None else m for o, m in zip(outputs, flat)])
    return map_leaves(lambda _: next(made), shapes)


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


def _read_by_host(gpu: Simulation, func: Any, args: tuple, kwargs: dict, device: int) -> Any:
    """An operator whose result the host must read (a size that depends on the data, or a Python value): a kernel on
    the current stream that reads its inputs when it starts, and the host waits for it, as CUDA's ``nonzero`` does."""
    box: list = []
    read = _on_cpu if gpu.computes else _garbage  # timing only: what the host reads is garbage, the same every run
    eargs, ekwargs = map_leaves(read, args), map_leaves(read, kwargs)

    def at_start() -> None:
        box.append(func(*eargs, **ekwargs))
    _, end = gpu.queue(func._schema.name.split("::")[-1], gpu.current(device), gpu.KERNEL_MS, at_start)
    gpu.sync_report()
    gpu.wait_until(end)
    gpu.catch_up()
    result = box[0]

    def on_gpu(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        out = gpu.allocate(value, device)
        out.elem.copy_(value)
        return out
    return map_leaves(on_gpu, result)


def _to_device(gpu: Simulation, src: Any, kwargs: dict) -> Any:
    """``_to_copy`` to another device: a copy to the host or to the other GPU (None: the same device, a kernel)."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    non_blocking = bool(kwargs.get("non_blocking", False))
    here = src.block.device if isinstance(src, DeviceTensor) else None
    if device is None or (device.type == "cuda" and (device.index if device.index is not None else gpu.device) == here):
        return None
    like = torch.empty_strided(src.shape, src.stride(), dtype=dtype or src.dtype)
    if device.type == "cpu":
        host = gpu.to_host(src, non_blocking=non_blocking, pinned=non_blocking)
        return host if dtype in (None, src.dtype) else host.to(dtype)
    target = gpu.allocate(like, gpu.index(device))
    gpu.copy(target, src, non_blocking)
    return target


def copy_between(gpu: Simulation, dst: torch.Tensor, src: torch.Tensor, non_blocking: bool) -> None:
    """``dst.copy_(src)`` where one side is host memory or the two sides are different GPUs.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     host = torch.ones(2).pin_memory()
        ...     x = host.to("cuda", non_blocking=True)
        ...     ev = gpu.trace().events
        ...     ev.loc[ev["kind"] == "h2d", "name"].tolist()
        ['Memcpy HtoD (Pinned -> Device)']
    """
    to_gpu, from_gpu = isinstance(dst, DeviceTensor), isinstance(src, DeviceTensor)
    if from_gpu and id(src.block) in gpu.late_copies:  # a big copy: it starts late (Backend.late_copies)
        with torch.cuda.device(src.block.device):
            gpu.spin(gpu.late_copies[id(src.block)])
    nbytes = src.numel() * src.element_size()
    if to_gpu and from_gpu:
        return _peer_copy(gpu, dst, src, nbytes)
    gpu_side, host_side = (dst, src) if to_gpu else (src, dst)
    pinned = gpu.is_pinned_memory(host_side)
    direction = "HtoD" if to_gpu else "DtoH"
    memory = "Pinned" if pinned else "Pageable"
    name = f"Memcpy {direction} ({memory} -> Device)" if to_gpu else f"Memcpy {direction} (Device -> {memory})"
    rate = gpu.PINNED_BYTES_PER_MS if pinned else gpu.PAGEABLE_BYTES_PER_MS
    staged = _raw(src).clone() if to_gpu and not pinned and gpu.computes else None  # the host stages pageable data
    source, target = _raw(src), _raw(dst)  # the memory, not the tensors (see _kernel)

    def at_start() -> Any:
        if not gpu.computes:  # timing only: the memory keeps what it held
            return None
        value = staged if staged is not None else source.clone()
        return lambda: target.copy_(value)

    device = gpu_side.block.device
    _, end = gpu.queue(name, gpu.current(device), gpu.COPY_LATENCY_MS + nbytes / rate, at_start, cat="gpu_memcpy",
                       engine=(device, direction), reads=() if to_gpu and not pinned else (source,), writes=(target,))
    if pinned:  # the caching host allocator keeps the pinned block from reuse until the copy has ended
        gpu.pinned.used(host_side, end)
    # the host waits for the copy, but for one that is non-blocking from pinned memory, or from pageable memory to the
    # GPU (the driver stages the data at once and returns; the copy runs in the stream's order)
    if not (non_blocking and (pinned or to_gpu)):
        gpu.sync_report()
        gpu.wait_until(end)
        gpu.copy_waited()
    gpu.catch_up()


def _peer_copy(gpu: Simulation, dst: DeviceTensor, src: DeviceTensor, nbytes: int) -> None:
    """A copy between GPUs (or within one), as PyTorch issues it: on the source GPU's current stream, after the
    destination's current stream, which then waits for the copy (aten/src/ATen/native/cuda/Copy.cu)."""
    from asynclab.sim.cuda import default_stream_of

    sender, receiver = gpu.current(src.block.device), gpu.current(dst.block.device)
    same = src.block.device == dst.block.device
    rate = gpu.MEMORY_BYTES_PER_MS if same else (gpu.PEER_BYTES_PER_MS if gpu.peer_access else gpu.PAGEABLE_BYTES_PER_MS)
    name = "Memcpy DtoD (Device -> Device)" if same else "Memcpy PtoP (Device -> Device)"

    source, target = src.elem, dst.elem

    def at_start() -> Any:
        if not gpu.computes:  # timing only
            return None
        value = source.clone()
        return lambda: target.copy_(value)
    latency = gpu.COPY_LATENCY_MS if same else gpu.PEER_COPY_MS  # a copy between GPUs carries PyTorch's barrier
    _, end = gpu.queue(name, sender, latency + nbytes / rate, at_start, cat="gpu_memcpy", after=gpu.ready(receiver),
                       reads=(source,), writes=(target,))
    if not same:
        gpu.set_ready(receiver, max(gpu.ready(receiver), end))
        if sender is default_stream_of(src.block.device):  # the legacy default streams: the other GPU's waits too
            other = default_stream_of(dst.block.device)
            gpu.set_ready(other, max(gpu.ready(other), end))


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
    scale = gpu.scale ** 1.5  # a check's products have sides sqrt(scale) shorter: FLOPs scale ** 1.5 fewer
    side = math.log(max(flops * scale / 2.0, 1.0)) / 3.0
    return math.exp(float(np.interp(side, np.log(sides), np.log(rates)))) / scale
