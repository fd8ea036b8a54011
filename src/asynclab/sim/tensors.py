"""Simulated memory: GPU tensors (a wrapper subclass that says ``cuda:N``), pinned host tensors, and their methods' registry.

A :class:`DeviceTensor` is a real ``torch.Tensor`` (a wrapper subclass, as FakeTensor is) whose values live in a CPU
view of a :class:`Block`; every operator on it goes to the running simulated GPU (:mod:`asynclab.sim.device`).
Tensor methods whose Python bindings would need a real driver are registered here, one rule per name
(:func:`register_tensor_methods`, from :mod:`asynclab.sim.methods`).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from asynclab.sim.cuda import Stream
from asynclab.sim.running import running_simulations
from asynclab.sim.simulation import Simulation
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.nest import leaves, map_leaves

__all__ = ["Block", "DeviceTensor", "PinnedTensor", "TENSOR_METHODS", "flat_tensors", "fresh_memory", "gpu_of", "is_cuda", "target_of", "storage_of",
           "memory_of", "moves_trained", "needed_bytes", "register_tensor_methods", "shaped_on",
           "trains_here"]

#: Tensor methods run by the simulation instead of torch's bindings, by name (filled by :mod:`asynclab.sim.methods`).
TENSOR_METHODS: dict[str, Callable] = {}


def register_tensor_methods(methods: dict[str, Callable]) -> None:
    """Run each method of ``methods`` (by name) instead of torch's own binding on a simulated GPU tensor: one rule per
    name, a second one refused.

    Example:
        >>> register_tensor_methods({"item": lambda t: 0})
        Traceback (most recent call last):
        ...
        ValueError: a second simulated rule for the tensor method 'item'
    """
    again = sorted(set(methods) & set(TENSOR_METHODS))
    if again:
        raise ValueError(f"a second simulated rule for the tensor method {again[0]!r}")
    TENSOR_METHODS.update(methods)
    for name, method in methods.items():  # found before torch.Tensor's own (whose argument parser comes first)
        setattr(DeviceTensor, name, method)


class Block:
    """A piece of simulated memory: its bytes (a CPU tensor), the GPU and stream that allocated it (None: pinned host
    memory), the streams ``record_stream`` named, and the simulation it belongs to. When no tensor uses it any more,
    it goes back to its pool."""

    def __init__(self, base: torch.Tensor, device: int | None, stream: Stream | None,
                 simulation: Simulation | None = None):
        self.base, self.device, self.stream, self.recorded = base, device, stream, set()
        self.simulation = simulation


def fresh_memory(nbytes: int, marked: bool = True) -> torch.Tensor:
    """New memory of at least ``nbytes`` (rounded up to 512 bytes, as PyTorch's allocator does), holding garbage:
    every byte 0xFF (NaN as floats, -1 as integers) where ``marked``, else whatever the host's memory held (a
    simulation that computes no values never touches it, so its pages cost neither time nor the host's memory).

    Example:
        >>> fresh_memory(3).numel(), fresh_memory(600)[:2].tolist()
        (512, [255, 255])
    """
    size = max(512, -(-nbytes // 512) * 512)
    return torch.full((size,), 255, dtype=torch.uint8) if marked else torch.empty(size, dtype=torch.uint8)


def shaped_on(base: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A tensor shaped like ``like`` (sizes, strides, offset, dtype) on the bytes of ``base``."""
    size, rest = base.numel(), base.numel() % like.element_size()
    flat = (base[: size - rest] if rest else base).view(like.dtype)  # (no slice where the bytes divide evenly)
    return flat.as_strided(like.shape, like.stride(), like.storage_offset())


def storage_of(t: torch.Tensor) -> torch.UntypedStorage:
    """The storage a tensor lives in (of its own memory, not a subclass's)."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.untyped_storage()


def memory_of(t: torch.Tensor) -> int:
    """Which memory a tensor lives in (its storage's address)."""
    return storage_of(t).data_ptr()


def needed_bytes(like: torch.Tensor) -> int:
    if like.numel() == 0:
        return 0
    last = like.storage_offset() + sum((s - 1) * st for s, st in zip(like.shape, like.stride()))
    return (last + 1) * like.element_size()


class DeviceTensor(torch.Tensor):
    """A tensor on a simulated GPU: ``device`` says ``cuda:N``, its values live in ``elem`` (a CPU view of its
    :class:`Block`), and the running :class:`SimGPU` decides when each operator on it reads and writes them.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     x = torch.ones(4, device="cuda")
        ...     y = (x * 2).clone().sum()
        ...     (x.device, y.item())
        (device(type='cuda', index=0), 8.0)
    """

    elem: torch.Tensor
    block: Block
    stands_for = "Tensor"  # what messages call it, as on a GPU (asynclab.trace.read.events.a_type)

    @staticmethod
    def __new__(cls, elem: torch.Tensor, block: Block, requires_grad: bool = False) -> "DeviceTensor":
        trains = trains_here()  # autograd's engine would ask a real driver for a "cuda" tensor's stream
        t = torch.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(),
                                                storage_offset=elem.storage_offset(), dtype=elem.dtype,
                                                device=torch.device("cpu") if trains else torch.device("cuda", block.device),
                                                requires_grad=requires_grad)
        t.elem, t.block, t.trains = elem, block, trains
        return t

    # what Python asks of its device is a GPU's answer, whatever autograd is told (see trains_here)
    device = property(lambda self: torch.device("cuda", self.block.device))
    is_cuda = property(lambda self: True)
    is_cpu = property(lambda self: False)

    @property
    def simulation(self) -> Simulation:
        """The simulated GPU this tensor lives on, as a FakeTensor knows its mode: the one whose memory it is, while
        that one runs; a tensor kept from an earlier check lives on in the check running now, as on a GPU.

        Example:
            >>> from asynclab.sim.device import SimGPU
            >>> with SimGPU() as gpu:
            ...     torch.ones(2, device="cuda").simulation is gpu
            True
        """
        own = self.block.simulation
        return own if own is not None and own in running_simulations() else gpu_of()

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # printing a GPU tensor reads it on the host
        text = repr(self.simulation.to_host(self, non_blocking=False, pinned=False))
        return text[:-1] + f", device='cuda:{self.block.device}')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec) if spec and self.dim() == 0 else repr(self)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if args and getattr(args[0], "trains", False):
            moved = moves_trained(func, args, kwargs)
            if moved is not NotImplemented:
                return moved
        elif _asks_for_grad(func, args, kwargs):  # forward passes run without a graph; a backward pass says so
            return None if func is torch.Tensor.requires_grad.__set__ else args[0]
        if func in _BACKWARD and not trains_here():
            raise SimulationLimit("autograd's backward pass on a simulated GPU tensor",
                                  "the forward pass runs here; check a backward pass on a machine with a GPU")
        special = TENSOR_METHODS.get(getattr(func, "__name__", None))
        if special is not None and args and isinstance(args[0], DeviceTensor):
            return special(*args, **kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        flat = leaves((args, kwargs))  # once for the operator: the simulation's steps take it along
        owner = next((t for t in flat if isinstance(t, DeviceTensor)), None)
        return (owner.simulation if owner is not None else gpu_of()).dispatch(func, args, kwargs, flat)


class PinnedTensor(torch.Tensor):
    """Page-locked host memory (``pin_memory()``, ``pin_memory=True``, a non-blocking copy to the host): an ordinary
    CPU tensor that a copy from the GPU may write later, when that copy ends. The host sees such writes as its time
    passes: any operation on it first brings the simulation up to the host's time.

    Example:
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU():
        ...     host = torch.zeros(3).pin_memory()
        ...     host.is_pinned(), type(host).__name__
        (True, 'PinnedTensor')
    """

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        gpu = gpu_of(required=False)
        if gpu is not None:
            gpu.catch_up()
        name = getattr(func, "__name__", None)
        if name == "is_pinned":
            return True
        if name in ("numpy", "tolist", "__array__") and args:
            with torch._C.DisableTorchFunctionSubclass():
                return getattr(args[0].as_subclass(torch.Tensor), name)(*args[1:], **(kwargs or {}))
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
            pinned = {t.untyped_storage().data_ptr() for t in flat_tensors((args, kwargs)) if type(t) is PinnedTensor}

            def keep(t: Any) -> Any:  # a view of pinned memory is pinned; new memory (a clone, say) is pageable
                if not isinstance(t, torch.Tensor) or isinstance(t, DeviceTensor):
                    return t
                shares = t.untyped_storage().data_ptr() in pinned
                return t if (type(t) is PinnedTensor) == shares else t.as_subclass(PinnedTensor if shares else torch.Tensor)
            return map_leaves(keep, out)


#: Calls that run autograd's backward pass.
_BACKWARD = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}


def _asks_for_grad(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether a call makes a simulated GPU tensor require gradients. Autograd would ask the real CUDA driver for the
    tensor's stream, which a machine without a GPU does not have, so the tensor stays out of autograd's graph: the
    forward pass runs, and a backward pass is the simulation's limit."""
    if func is torch.Tensor.requires_grad.__set__:
        return bool(args[1]) if len(args) > 1 else False
    if getattr(func, "__name__", None) == "requires_grad_":
        return bool(args[1] if len(args) > 1 else kwargs.get("requires_grad", True))
    return False


def trains_here() -> bool:
    """Whether the running simulated GPU runs autograd's backward pass (:func:`asynclab.sim.simulate.simulate` does):
    its tensors then tell autograd they live on the CPU (while ``device`` says ``cuda:N``), so that its engine runs
    their backward pass on the host thread, and each of its operators reaches the simulated GPU as the forward's do.

    Example:
        >>> trains_here()
        False
    """
    return bool(getattr(gpu_of(required=False), "trains", False))


def moves_trained(func: Any, args: tuple, kwargs: dict) -> Any:
    """What a move of a tensor that tells autograd it lives on the CPU does (see :func:`trains_here`): ``cpu()``
    and ``to("cpu")`` copy it to the host, ``cuda()`` and ``to("cuda")`` of its own GPU keep it, and
    ``get_device()`` gives its GPU; NotImplemented for anything else (the call runs as usual).

    Example:
        >>> moves_trained(torch.Tensor.add, (torch.ones(1), 1), {})
        NotImplemented
    """
    name, t = getattr(func, "__name__", ""), args[0]
    if name == "get_device":
        return t.block.device
    if name == "cpu":
        return t.simulation.to_host(t, non_blocking=False, pinned=False)
    if name == "to":
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
    elif name == "cuda":
        index = args[1] if len(args) > 1 else kwargs.get("device")
        device = torch.device("cuda", index) if isinstance(index, int) else torch.device(index or "cuda")
        dtype, non_blocking = None, False
    else:
        return NotImplemented
    if device is not None and device.type == "cpu":
        host = t.simulation.to_host(t, non_blocking=non_blocking, pinned=non_blocking)
        return host if dtype in (None, t.dtype) else host.to(dtype)
    here = device is None or (device.type == "cuda" and device.index in (None, t.block.device))
    if here:
        return t if dtype in (None, t.dtype) else NotImplemented
    if device.type == "cuda" and t.requires_grad and torch.is_grad_enabled():
        return _ToOtherGPU.apply(t, device.index, dtype, non_blocking)
    return NotImplemented


class _ToOtherGPU(torch.autograd.Function):
    """A move of a trained tensor to another simulated GPU, as autograd sees it: its gradient moves back to the
    tensor's own GPU (autograd, told both live on the CPU, would otherwise keep it where it was computed)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, index: int, dtype: Any, non_blocking: bool) -> torch.Tensor:
        ctx.home, ctx.dtype = t.block.device, t.dtype
        return t.to(torch.device("cuda", index), dtype=dtype, non_blocking=non_blocking)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        return grad.to(torch.device("cuda", ctx.home), dtype=ctx.dtype), None, None, None


def gpu_of(required: bool = True) -> Simulation | None:
    """The simulated GPU of the check in progress (the innermost); without one, None or a SimulationLimit.

    Example:
        >>> gpu_of(required=False) is None
        True
    """
    for sim in reversed(running_simulations()):
        if getattr(sim, "runs_tensors", False):
            return sim
    if required:
        raise SimulationLimit("a simulated GPU tensor outside its check", "make GPU tensors inside your function")
    return None


def flat_tensors(tree: Any) -> list:
    """Every tensor in a nest of lists, tuples and dicts."""
    return [x for x in leaves(tree) if isinstance(x, torch.Tensor)]


def is_cuda(device: Any) -> bool:
    """Whether ``device`` (an index, "cuda", "cuda:1", a torch.device) names a GPU.

    Example:
        >>> is_cuda(1), is_cuda("cuda:0"), is_cuda("cpu"), is_cuda(True)
        (True, True, False, False)
    """
    return (isinstance(device, int) and not isinstance(device, bool)) or str(device).startswith("cuda")


def target_of(gpu: Any, name: str, args: tuple, kwargs: dict) -> tuple[int, bool, Any] | None:
    """(device, non_blocking, dtype) of a ``.to(...)``/``.cuda(...)`` call that moves a host tensor to a GPU
    (``gpu.index``: the device as an index of the simulated GPU ``gpu``), None where it moves none there."""
    if name == "cuda":
        device = args[0] if args else kwargs.get("device")
        return gpu.index(device), bool(kwargs.get("non_blocking", args[1] if len(args) > 1 else False)), None
    other = next((a for a in args if isinstance(a, torch.Tensor)), None)  # to(other): its device and dtype
    device = kwargs.get("device", next((a for a in args if isinstance(a, (str, torch.device, int))
                                        and not isinstance(a, bool)), other.device if other is not None else None))
    flags = [a for a in args if isinstance(a, bool)]
    dtype = kwargs.get("dtype", next((a for a in args if isinstance(a, torch.dtype)),
                                     other.dtype if other is not None else None))
    if not is_cuda(device):
        return None
    return gpu.index(device), bool(kwargs.get("non_blocking", flags[0] if flags else False)), dtype
