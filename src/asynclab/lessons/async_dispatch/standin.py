"""CPU tensors that stand for GPU tensors in lesson 01's loop check, counting the host's reads as a GPU reports them."""
from __future__ import annotations

import contextlib
import functools
import re
from typing import Any

#: Tensor methods and ops that need a value (or a data-dependent size) on the host: each is a host read.
HOST_READS = frozenset({"item", "__float__", "__int__", "__bool__", "__index__", "__complex__", "tolist", "numpy",
                        "cpu", "__repr__", "__str__", "__format__", "__array__", "nonzero", "masked_select", "unique",
                        "_unique2", "_local_scalar_dense"})

#: Functions that make a tensor where ``device=`` says: asked for a GPU, the stand-in makes it on the CPU.
FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "linspace", "tensor",
                       "as_tensor", "scalar_tensor", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                       "randn_like", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"})

#: Of those, the ones that copy host data to the GPU: a blocking copy, which the GPU's sync report counts.
FROM_HOST = frozenset({"tensor", "as_tensor", "new_tensor"})

_NO_NUMPY = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
             "memory first.")
_TWO_DEVICES = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


def bool_index(index: object) -> bool:
    """Whether a tensor index holds a boolean mask (whose result size the host must read).

    Example:
        >>> import torch
        >>> bool_index(torch.tensor([True, False])), bool_index(3)
        (True, False)
    """
    import torch

    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def on_gpu(device: Any) -> bool:
    """Whether a ``device=`` argument names a GPU.

    Example:
        >>> on_gpu("cuda:0"), on_gpu(0), on_gpu("cpu"), on_gpu(None)
        (True, True, False, False)
    """
    return (isinstance(device, int) and not isinstance(device, bool)) or str(device).startswith("cuda")


def _devices(args: tuple, kwargs: dict) -> list:
    """The devices that a ``to``/``cuda`` call names (a tensor argument names its own)."""
    import torch

    named = [a for a in args if isinstance(a, (str, torch.device, int)) and not isinstance(a, bool)]
    named += [a.device for a in args if isinstance(a, torch.Tensor)]
    return named + ([kwargs["device"]] if kwargs.get("device") is not None else [])


def _dtypes(args: tuple, kwargs: dict) -> list:
    """The dtypes that a ``to`` call names (a tensor argument names its own)."""
    import torch

    named = [a for a in args if isinstance(a, torch.dtype)] + [a.dtype for a in args if isinstance(a, torch.Tensor)]
    return named + ([kwargs["dtype"]] if kwargs.get("dtype") is not None else [])


#: In-place ops: ``add_``, ``x += y``... (on host memory with a GPU operand, PyTorch refuses them).
_IN_PLACE = re.compile(r"^(?!_)\w+_$|^__i(add|sub|mul|truediv|floordiv|mod|pow|and|or|xor|lshift|rshift|matmul)__$")


class Check:
    """One check's state: the host reads counted, the host's own memory, and the copies to the host in flight.

    ``waits`` is a one-element list that counts the host's synchronize calls; ``dispatcher``: whether PyTorch lets
    a dispatch mode watch tensor subclasses (a read past the tensor type is then seen, and a copy to the host
    with ``non_blocking=True`` is modelled: it holds zeros until the host waits, as behind late GPU work).
    """

    def __init__(self, waits: list, dispatcher: bool, host_reads: frozenset = HOST_READS):
        self.reads = self.scalars = 0
        self.waits, self.dispatcher, self.host_reads = waits, dispatcher, host_reads
        self.host: set[int] = set()  # the storages of host memory
        self.pending: dict[int, tuple] = {}  # storage -> (host tensor, its values, (waits, reads) when copied)

    @staticmethod
    def storage(t: Any) -> int:
        return t.untyped_storage().data_ptr()

    def land_copies(self, tensors: list) -> None:
        """Copies to the host land once the host has waited for the GPU (or read from it) since they were queued."""
        for t in tensors:
            key = self.storage(t)
            if key in self.pending and (self.waits[0], self.reads) > self.pending[key][2]:
                target, values, _ = self.pending.pop(key)
                target.copy_(values)

    def to_host(self, value: Any, non_blocking: bool) -> Any:
        """What a read of a stand-in gives the host: a number, or a tensor in host memory of its own."""
        import torch

        if not isinstance(value, torch.Tensor):
            self.reads += 1
            return value
        value = value.clone()
        self.host.add(self.storage(value))
        if not non_blocking:
            self.reads += 1
        elif self.dispatcher:  # queued behind the late losses: empty until the host waits
            self.pending[self.storage(value)] = (value, value.clone(), (self.waits[0], self.reads))
            value.zero_()
        return value


@functools.lru_cache(maxsize=None)
def _classes() -> tuple[type, type, type]:
    """The stand-in tensor type and the two modes, made once (they subclass torch's types)."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class OnDevice(torch.Tensor):
        """A CPU tensor that stands for a tensor on GPU 0: it says so, and each read of it on the host counts."""
        check: Check

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs, name = kwargs or {}, getattr(func, "__name__", "")
            getter = getattr(func, "__self__", None) if name == "__get__" else None
            if getter is torch.Tensor.device:
                return torch.device("cuda", 0)
            if getter is torch.Tensor.is_cuda or name == "get_device":
                return True if getter is not None else 0
            if name == "numpy":
                raise TypeError(_NO_NUMPY)
            devices = _devices(args[1:], kwargs) if name == "to" else []
            if name in cls.check.host_reads or any(not on_gpu(d) for d in devices):
                plain = [a.as_subclass(torch.Tensor) if isinstance(a, OnDevice) else a for a in args]
                non_blocking = name == "to" and bool(kwargs.pop("non_blocking", False))
                with torch._C.DisableTorchFunctionSubclass():
                    value = func(*plain, **kwargs)  # what the host reads is a plain (host) tensor or number
                return cls.check.to_host(value, non_blocking)
            if name in ("to", "cuda"):  # a move to the GPU it is on: at most a change of dtype
                dtypes = _dtypes(args[1:], kwargs)
                if not dtypes:
                    return args[0]
                args, kwargs, func = (args[0], dtypes[0]), {}, torch.Tensor.to
            if name in ("__getitem__", "__setitem__") and bool_index(args[1] if len(args) > 1 else None):
                cls.check.reads += 1  # a boolean mask: the result's size is the number of Trues, read on the host
            return super().__torch_function__(func, types, args, kwargs)

    class OnGPU(TorchFunctionMode):
        """Tensors made with ``device="cuda"`` become stand-ins; host memory moved to the GPU too (a blocking copy
        is a read); an in-place op on host memory with a stand-in operand raises, as on a GPU."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs, name = kwargs or {}, getattr(func, "__name__", "")
            check, plain_self = OnDevice.check, bool(args) and type(args[0]) is torch.Tensor
            if name == "new_tensor" and args and isinstance(args[0], OnDevice):
                check.reads += 1  # host data copied to the GPU: a blocking copy
            if name in FACTORIES and on_gpu(kwargs.get("device")):
                check.reads += name in FROM_HOST
                made = func(*args, **{k: v for k, v in kwargs.items() if k != "device"})
                return made.as_subclass(OnDevice)
            to_gpu = name == "cuda" or (name == "to" and any(map(on_gpu, _devices(args[1:], kwargs))))
            if plain_self and to_gpu:
                check.reads += not kwargs.get("non_blocking", False)  # a blocking copy from the host
                return args[0].to(*_dtypes(args[1:], kwargs)[:1]).clone().as_subclass(OnDevice)
            from_gpu = plain_self and any(isinstance(a, OnDevice) for a in args[1:])
            if from_gpu and name in ("copy_", "__setitem__"):  # a copy into host memory: a read, unless non_blocking
                check.reads += not kwargs.get("non_blocking", False)
            elif from_gpu and _IN_PLACE.match(name):
                raise RuntimeError(_TWO_DEVICES)
            return func(*args, **kwargs)

    class ScalarReads(TorchDispatchMode):
        """Every read of a scalar at the dispatcher that is not of host memory counts (a read past the tensor
        type); what is computed from host memory alone is host memory too."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            check = OnDevice.check
            tensors = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            check.land_copies(tensors)
            on_host = bool(tensors) and all(check.storage(t) in check.host for t in tensors)
            check.scalars += func.__name__.split(".")[0] == "_local_scalar_dense" and not on_host
            out = func(*args, **(kwargs or {}))
            if on_host:
                check.host.update(check.storage(o) for o in torch.utils._pytree.tree_leaves(out)
                                  if isinstance(o, torch.Tensor))
            return out

    return OnDevice, OnGPU, ScalarReads


@functools.lru_cache(maxsize=None)
def modes_see_subclasses() -> bool:
    """Whether this PyTorch runs a tensor subclass's ops under a dispatch mode, as :func:`reads_on_cpu` needs to
    see reads past the tensor type (PyTorch 2.3 refuses: its check then counts the reads the tensor type sees).

    Example:
        >>> import torch
        >>> modes_see_subclasses() or torch.__version__ < "2.4"
        True
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Probe(torch.Tensor):
        pass

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    try:
        with Passing():
            (torch.zeros(()).as_subclass(Probe) + 1).as_subclass(torch.Tensor).item()
    except RuntimeError:
        return False
    return True


def reads_on_cpu(fast_loop, losses: list, waits: list | None = None, dispatcher: bool | None = None,
                 host_reads: frozenset = HOST_READS) -> tuple[object, int]:
    """``fast_loop`` on CPU losses that stand for losses on GPU 0: ``(its result, the host reads)``.

    Ops on them stay "on the device" (their results too), and each read of one on the host counts, as
    ``torch.cuda.set_sync_debug_mode`` counts syncs on a GPU. What a host read returns is host memory: reading
    it again, or computing with it, reads nothing. ``waits`` counts the host's synchronize calls (see
    :class:`Check`); ``dispatcher``: whether to watch the dispatcher (by default where :func:`modes_see_subclasses`).

    Example:
        >>> import torch
        >>> losses = [torch.tensor(float(i)) for i in range(5)]
        >>> reads_on_cpu(lambda ls: sum(x.item() for x in ls), losses)
        (10.0, 5)
        >>> reads_on_cpu(lambda ls: torch.stack(ls).sum().item(), losses)
        (10.0, 1)
    """
    import torch

    on_device, on_gpu_mode, scalar_reads = _classes()
    dispatcher = modes_see_subclasses() if dispatcher is None else dispatcher
    check = Check(waits if waits is not None else [0], dispatcher, host_reads)
    on_device.check = check

    def no_sync_report(*args, **kwargs):  # no GPU, no sync report to switch: the reads are counted here
        return 0

    saved = torch.cuda.set_sync_debug_mode, torch.cuda.get_sync_debug_mode, torch.cuda.is_available
    torch.cuda.set_sync_debug_mode = torch.cuda.get_sync_debug_mode = no_sync_report
    torch.cuda.is_available = lambda: True
    try:
        with scalar_reads() if dispatcher else contextlib.nullcontext(), on_gpu_mode():
            result = fast_loop([t.as_subclass(on_device) for t in losses])
    finally:
        torch.cuda.set_sync_debug_mode, torch.cuda.get_sync_debug_mode, torch.cuda.is_available = saved
    return result, max(check.reads, check.scalars)
