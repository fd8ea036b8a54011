"""Tensor methods of a simulated GPU tensor whose PyTorch bindings would need a real driver: each as its operators."""
from __future__ import annotations

from typing import Any, Callable

import torch

from asynclab.sim.cuda import Stream
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.tensors import DeviceTensor, moves_trained, register_tensor_methods, target_of

aten = torch.ops.aten


def _record_stream(t: DeviceTensor, stream: Any) -> None:
    if not isinstance(stream, Stream):
        raise TypeError(f"record_stream(): argument 'stream' must be torch.cuda.Stream, not {type(stream).__name__}")
    t.block.recorded.add(stream)


def _numpy(t: DeviceTensor, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(f"can't convert cuda:{t.block.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                    "tensor to host memory first.")


def _host_read(name: str) -> Callable:
    def read(t: DeviceTensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(t.simulation.to_host(t, non_blocking=False, pinned=False), name)(*args, **kwargs)
    return read


def _scalar(convert: Callable) -> Callable:
    def read(t: DeviceTensor) -> Any:
        if t.numel() != 1:
            raise RuntimeError(f"a Tensor with {t.numel()} elements cannot be converted to Scalar")
        return convert(torch.ops.aten._local_scalar_dense.default(t))
    return read


def _bool(t: DeviceTensor) -> bool:
    if t.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(torch.ops.aten._local_scalar_dense.default(t))


def _index_tensor(t: DeviceTensor, i: Any) -> DeviceTensor:
    """An index given as a list or a host tensor, on ``t``'s GPU (PyTorch copies it there)."""
    i = torch.tensor(i) if isinstance(i, list) else i
    if isinstance(i, DeviceTensor):
        return i
    return t.simulation.from_host(i, t.block.device, non_blocking=True)


def _advanced(i: Any) -> bool:
    return isinstance(i, (torch.Tensor, list))


def _is_mask(i: Any) -> bool:
    return isinstance(i, torch.Tensor) and i.dtype == torch.bool


def _basic_index(t: DeviceTensor, index: Any) -> DeviceTensor:
    """``t[index]`` for integers, slices, ``None`` and ``...``: a view, made by the operators PyTorch uses."""
    return _apply_index(t, index)[0]


def _apply_index(t: DeviceTensor, index: Any) -> tuple[DeviceTensor, list]:
    """Apply the integers, slices, ``None`` and ``...`` of ``index`` to ``t`` as views, in the order PyTorch does;
    returns the view and, per remaining dimension, the tensor index that still applies there (None: all of it)."""
    items = index if isinstance(index, tuple) else (index,)
    real = sum(i.dim() if _is_mask(i) else 1 for i in items if i is not None and i is not Ellipsis)
    if real > t.dim():
        raise IndexError(f"too many indices for tensor of dimension {t.dim()}")
    out, dim, tensors = t, 0, []
    for i in items:
        if i is Ellipsis:
            dim += t.dim() - real
            tensors += [None] * (t.dim() - real)
        elif i is None:
            out, dim = aten.unsqueeze.default(out, dim), dim + 1
            tensors.append(None)
        elif isinstance(i, int) and not isinstance(i, bool):
            if not -out.shape[dim] <= i < out.shape[dim]:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {out.shape[dim]}")
            out = aten.select.int(out, dim, i)
        elif isinstance(i, slice):
            out, dim = aten.slice.Tensor(out, dim, i.start, i.stop, i.step or 1), dim + 1
            tensors.append(None)
        elif _is_mask(i) and i.dim() == 0:  # a 0-d mask adds a dimension of its own, as PyTorch's indexing does
            out = aten.unsqueeze.default(out, dim)
            tensors.append(_index_tensor(t, i.unsqueeze(0)))
            dim += 1
        elif _advanced(i):
            tensors.append(_index_tensor(t, i))
            dim += i.dim() if _is_mask(i) else 1  # a mask covers as many dimensions as it has
        else:
            raise SimulationLimit(f"indexing a GPU tensor with {type(i).__name__}", "index with integers, slices or tensors")
    while tensors and tensors[-1] is None:
        tensors.pop()
    return (out if out is not t else aten.alias.default(t)), tensors


def _getitem(t: DeviceTensor, index: Any) -> Any:
    view, tensors = _apply_index(t, index)
    return aten.index.Tensor(view, tensors) if tensors else view


def _setitem(t: DeviceTensor, index: Any, value: Any) -> None:
    part, tensors = _apply_index(t, index)
    if tensors:
        value = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=t.dtype)
        aten.index_put_.default(part, tensors, value if value.dim() == 0 or isinstance(value, DeviceTensor)
                                else _index_tensor(t, value))
        return
    if isinstance(value, torch.Tensor):
        torch.ops.aten.copy_.default(part, value)
    else:
        torch.ops.aten.fill_.Scalar(part, value)


def _move(name: str) -> Callable:
    def move(t: DeviceTensor, *args: Any, **kwargs: Any) -> Any:
        gpu = t.simulation
        if t.trains:  # a tensor that tells autograd it lives on the CPU: its moves are moves_trained's
            moved = moves_trained(getattr(torch.Tensor, name), (t, *args), kwargs)
            if moved is not NotImplemented:
                return moved
        target = target_of(gpu, name, args, kwargs)
        if target is None:  # a dtype, or the host
            with torch._C.DisableTorchFunctionSubclass():
                return getattr(torch.Tensor, name)(t, *args, **kwargs)
        device, non_blocking, dtype = target
        if device == t.block.device and dtype in (None, t.dtype):
            return t
        return torch.ops.aten._to_copy.default(t, device=torch.device("cuda", device), dtype=dtype,
                                               non_blocking=non_blocking)
    return move


def _new_tensor(t: DeviceTensor, data: Any, dtype: Any = None, device: Any = None, **kwargs: Any) -> DeviceTensor:
    gpu = t.simulation
    host = torch.tensor(data, dtype=dtype or t.dtype)
    return gpu.from_host(host, gpu.index(device if device is not None else t.block.device), non_blocking=False)


def _nonzero(t: DeviceTensor, *, as_tuple: bool = False, **kwargs: Any) -> Any:
    found = aten.nonzero.default(t)
    return tuple(aten.unbind.int(found, 1)) if as_tuple else found


def _contiguous(t: DeviceTensor, memory_format: Any = torch.contiguous_format) -> DeviceTensor:
    if t.is_contiguous(memory_format=memory_format):
        return t
    return aten.clone.default(t, memory_format=memory_format)


#: ``Tensor.type`` names of dtypes (``"torch.cuda.FloatTensor"``, ``"torch.FloatTensor"``).
_TYPE_NAMES = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16,
               "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8,
               "Bool": torch.bool}


def _type(t: DeviceTensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    if dtype is None:
        return f"torch.cuda.{next(k for k, v in _TYPE_NAMES.items() if v == t.dtype)}Tensor"
    if isinstance(dtype, str):
        name = dtype.rsplit(".", 1)[-1].removesuffix("Tensor")
        if name not in _TYPE_NAMES:
            raise ValueError(f"invalid type: '{dtype}'")
        if ".cuda." not in dtype:
            return _move("cpu")(t).to(_TYPE_NAMES[name])
        dtype = _TYPE_NAMES[name]
    return t if dtype == t.dtype else aten._to_copy.default(t, dtype=dtype)


def _data_ptr(t: DeviceTensor) -> int:
    return t.elem.data_ptr()


#: Tensor methods that never reach the dispatcher as an operator, and what a GPU tensor does for them.
def _as_subclass(t: DeviceTensor, cls: Any) -> Any:
    """``t.as_subclass(torch.Tensor)``: on a GPU a plain tensor of the same memory; here the GPU tensor itself (its
    memory is the simulation's)."""
    if cls is torch.Tensor:
        return t
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(t, cls)


register_tensor_methods({
    "as_subclass": _as_subclass,
    "record_stream": _record_stream, "numpy": _numpy, "__array__": _numpy, "tolist": _host_read("tolist"),
    "data_ptr": _data_ptr, "untyped_storage": lambda t: t.elem.untyped_storage(),
    # Python bindings that put the tensor's GPU in force first (a device guard), which needs a real driver: their
    # operators, called directly
    "copy_": lambda t, src, non_blocking=False: torch.ops.aten.copy_.default(t, src, non_blocking),
    "item": _scalar(lambda v: v), "__float__": _scalar(float), "__int__": _scalar(int), "__index__": _scalar(int),
    "__complex__": _scalar(complex), "__bool__": _bool, "__getitem__": _getitem, "__setitem__": _setitem,
    "cuda": _move("cuda"), "to": _move("to"),
    "cpu": lambda t, memory_format=torch.preserve_format: _move("cpu")(t), "new_tensor": _new_tensor,
    "__invert__": lambda t: aten.bitwise_not.default(t), "nonzero": _nonzero, "contiguous": _contiguous,
    "type": _type, "type_as": lambda t, other: _type(t, other.dtype),
})
