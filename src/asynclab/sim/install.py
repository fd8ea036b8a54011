"""torch.cuda's stand-ins put in place: the names :mod:`asynclab.sim.cuda` stands in for in ``torch.cuda``,
``torch`` and ``torch.accelerator``, their installation while a simulation runs (:func:`install`,
:func:`uninstall`), torch.cuda's own functions beside them (:func:`real`), and how many GPUs the machine really has
(:func:`gpus_here`). What is installed is kept in :data:`asynclab.sim.running.RUNNING`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from asynclab.sim import patches
from asynclab.sim.cuda import (Event, GenericEvent, Stream, StreamContext, as_stream, default_stream_of, device,
                               device_of, device_properties)
from asynclab.sim.running import RUNNING, active, in_check

__all__ = ["gpus_here", "install", "outside", "real", "uninstall"]


def torch_cuda_fakes() -> dict[str, Any]:
    """torch.cuda's names and their stand-ins."""
    def set_stream(stream: Stream | None) -> None:
        if stream is not None:
            active().set_current(as_stream(stream, "stream_id"))

    def set_device(index: Any) -> None:
        sim = active()
        sim.device = sim.index(index)

    def cuda_graph(keep_graph: bool = False) -> Any:  # the check's simulated GPU makes them (asynclab.sim.graphs)
        return active().cuda_graph(keep_graph) if in_check() else real("CUDAGraph")(keep_graph)

    def graph(cuda_graph: Any, pool: Any = None, stream: Any = None, capture_error_mode: str = "global") -> Any:
        if in_check():
            return active().graph_capture(cuda_graph, pool, stream, capture_error_mode)
        return real("graph")(cuda_graph, pool, stream, capture_error_mode)

    fakes = {
        "Stream": Stream, "Event": Event, "StreamContext": StreamContext, "device": device, "device_of": device_of,
        "stream": StreamContext, "set_stream": set_stream, "set_device": set_device,
        "current_stream": lambda device=None: active().current(device),
        "default_stream": lambda device=None: default_stream_of(active().index(device)),
        "current_device": lambda: active().device,
        "synchronize": lambda device=None: active().synchronize(device),
        "_sleep": lambda cycles: active().spin(cycles),
        "empty_cache": lambda: active().empty_cache(),
        "set_sync_debug_mode": lambda mode: (active().set_sync_debug_mode(mode) if in_check()
                                             else real("set_sync_debug_mode")(mode)),
        "get_sync_debug_mode": lambda: active().sync_debug_mode if in_check() else real("get_sync_debug_mode")(),
        "get_device_capability": lambda device=None: ((9, 0) if in_check() else  # the cost model's GPU: an H100
                                                      real("get_device_capability")(device)),
        "get_device_name": lambda device=None: ("a simulated GPU" if in_check() else real("get_device_name")(device)),
        "get_device_properties": lambda device=None: (device_properties(active()) if in_check()
                                                      else real("get_device_properties")(device)),
        "is_bf16_supported": lambda *a, **k: True if in_check() else real("is_bf16_supported")(*a, **k),
        "is_available": lambda: True if in_check() else real("is_available")(),
        "device_count": lambda: active().devices if in_check() else real("device_count")(),
        "memory_allocated": lambda device=None: active().memory_stat("allocated", device),
        "max_memory_allocated": lambda device=None: active().memory_stat("allocated", device, peak=True),
        "memory_reserved": lambda device=None: active().memory_stat("reserved", device),
        "max_memory_reserved": lambda device=None: active().memory_stat("reserved", device, peak=True),
        "reset_peak_memory_stats": lambda device=None: active().reset_peak(device),
        "is_current_stream_capturing": lambda: (active().capture is not None if in_check()
                                                else real("is_current_stream_capturing")()),
        "CUDAGraph": cuda_graph, "graph": graph,
    }
    assert set(fakes) == set(patches.TORCH_CUDA), "the stand-ins are those the table of patches lists"
    return fakes


def accelerator_fakes() -> dict[str, Any]:
    """torch.accelerator's names (PyTorch 2.6+) and their stand-ins: the current GPU's, as torch.cuda's."""
    import torch

    fakes = torch_cuda_fakes()

    def own(name: str) -> Any:
        return real(name, "torch.accelerator")

    return {
        "current_accelerator": lambda check_available=False: (torch.device("cuda") if in_check()
                                                              else own("current_accelerator")(check_available)),
        "is_available": lambda: True if in_check() else own("is_available")(),
        "device_count": lambda: active().devices if in_check() else own("device_count")(),
        "current_device_index": fakes["current_device"], "current_device_idx": fakes["current_device"],
        "set_device_index": fakes["set_device"], "set_device_idx": fakes["set_device"],
        "current_stream": fakes["current_stream"], "set_stream": fakes["set_stream"],
        "synchronize": fakes["synchronize"],
    }


def real(name: str, path: str = "torch.cuda") -> Any:
    """torch.cuda's own ``name`` (or that of the module at ``path``), whether or not the stand-ins are in place."""
    for done in RUNNING.installed:
        if done.path == path and name in done.originals:
            return done.originals[name]
    return getattr(patches.owner_of(path), name)


def register_as_torch_kinds() -> None:
    """Count the stand-ins as torch's stream and event kinds where PyTorch checks it.

    PyTorch before 2.6 keeps abstract ``_StreamBase``/``_EventBase`` classes, and its ``torch._dynamo`` (which
    torchvision imports, and with it d2l) asserts at import that ``torch.cuda.Stream``/``Event`` are theirs; later
    releases deprecate those classes and check nothing.
    """
    import abc

    try:
        from torch._streambase import _EventBase, _StreamBase
    except ImportError:  # a PyTorch without them: nothing checks
        return
    if isinstance(_StreamBase, abc.ABCMeta) and isinstance(_EventBase, abc.ABCMeta):
        _StreamBase.register(Stream)
        _EventBase.register(Event)


def install() -> None:
    """Put the stand-ins in place in torch.cuda, torch and torch.accelerator (once: a second call changes nothing)."""
    if RUNNING.installed:
        return
    register_as_torch_kinds()
    RUNNING.installed.append(patches.install("torch.cuda", torch_cuda_fakes()))
    generic = {"torch": {"Event": GenericEvent, "Stream": Stream}, "torch.accelerator": accelerator_fakes()}
    assert {path: set(names) for path, names in generic.items()} == {
        path: set(patches.TABLE[path]) for path in generic}, "the stand-ins are those the table of patches lists"
    for path, fakes in generic.items():  # PyTorch's device-generic API, where this PyTorch has it
        owner = patches.owner_of(path)
        here = {name: fake for name, fake in fakes.items() if owner is not None and hasattr(owner, name)}
        if here:
            RUNNING.installed.append(patches.install(path, here))


def uninstall() -> None:
    """Put torch.cuda's, torch's and torch.accelerator's own names back."""
    while RUNNING.installed:
        RUNNING.installed.pop().undo()


def gpus_here() -> int:
    """How many GPUs the machine has, whether or not the stand-ins are in place.

    Example:
        >>> gpus_here() >= 0
        True
    """
    return real("device_count")() if real("is_available")() else 0


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """Run a block with torch.cuda's own functions, as on a machine without the stand-ins (for tests)."""
    stack, saved = list(RUNNING.stack), bool(RUNNING.installed)
    uninstall()
    RUNNING.stack.clear()
    try:
        yield
    finally:
        RUNNING.stack.extend(stack)
        if saved:
            install()
