"""Count the host's reads and waits of GPU tensors while learner code runs, on a GPU or on the simulated one."""
from __future__ import annotations

import contextlib
from typing import Iterator

from asynclab.grading.backend import Backend
from asynclab.sim import patches

__all__ = ["HOST_READS", "LATE_MS", "count_reads", "host_waits", "on_late_losses"]

#: Operators that need a value (or a data-dependent size) on the host: each is a host read of a GPU tensor.
HOST_READS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "_unique",
                        "unique_consecutive", "unique_dim"})


#: How late the losses are written on a GPU (behind a spin kernel): a copy to the host that nobody waited for is
#: still empty when the host reads it, on every run.
LATE_MS = 20.0


@contextlib.contextmanager
def host_waits() -> Iterator[list]:
    """Count the host's explicit waits for the GPU in a block: ``torch.cuda.synchronize()``, ``Stream.synchronize``,
    ``Event.synchronize`` and ``torch.accelerator.synchronize()`` (on a GPU or on its stand-ins). Yields a
    one-element list holding the count."""
    import torch

    count = [0]
    owners = [path for path in patches.WAITS if "synchronize" in vars(patches.owner_of(path) or object)]
    device_wait = torch.cuda.synchronize  # torch.accelerator.synchronize() is this wait on an NVIDIA GPU

    def counting(original):
        def wait(*args, **kwargs):  # counted here, once: kept out of the GPU's sync report (which reports some waits)
            count[0] += 1
            mode = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode(0)
            try:
                return original(*args, **kwargs)
            finally:
                torch.cuda.set_sync_debug_mode(mode)
        return wait

    with contextlib.ExitStack() as stack:
        for path in owners:
            original = device_wait if path == "torch.accelerator" else vars(patches.owner_of(path))["synchronize"]
            stack.enter_context(patches.patched(path, {"synchronize": counting(original)}))
        yield count


def on_late_losses(b: Backend, fast_loop, values) -> tuple[object, int]:
    """Run ``fast_loop`` on losses on the GPU, written late (behind a spin kernel of :data:`LATE_MS`) without the host
    waiting; returns ``(its result, the host's reads and waits)``.

    A first run, uncounted and race-free, warms it up, as a check on a GPU must: the first launch of each of its
    kernels loads the kernel (lazy loading), which waits for the GPU and would close the race by accident.
    """
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    with host_waits():  # the warm-up's waits are the check's own (uncounted); other values: memory it leaves must
        torch.cuda.synchronize()  # not hold the answer
        fast_loop([v.to(dev) for v in -values])
        torch.cuda.synchronize()
    pinned = values.pin_memory()
    b.late(LATE_MS)
    on_gpu = pinned.to(dev, non_blocking=True)
    losses = [on_gpu[i].clone() for i in range(len(values))]
    try:
        with host_waits() as waits:
            result, reads = count_reads(fast_loop, losses)
    finally:
        torch.cuda.synchronize()  # the copies in flight land before their memory goes
    return result, max(reads, waits[0])  # a synchronize then one read: the host waited once


def _into_pageable(func, args: tuple) -> bool:
    """Whether the operator copies a real GPU's tensor into pageable host memory: CUDA returns from such a copy only
    once it has landed, ``non_blocking`` or not, so the host waits (PyTorch's sync debug mode does not report the
    ``non_blocking`` one). The simulated GPU counts that wait itself, as its host waits for the copy."""
    import torch

    from asynclab.sim.tensors import DeviceTensor

    if func is not torch.ops.aten.copy_.default or len(args) < 2:
        return False
    target, source = args[0], args[1]
    return isinstance(source, torch.Tensor) and source.is_cuda and not isinstance(source, DeviceTensor) \
        and isinstance(target, torch.Tensor) and target.device.type == "cpu" and not target.is_pinned()


def count_reads(fast_loop, losses: list) -> tuple[object, int]:
    """``fast_loop`` on GPU losses: the syncs ``torch.cuda.set_sync_debug_mode`` reports, or the reads of GPU tensors
    counted operator by operator, whichever is more."""
    import warnings

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    reads = [0]

    class HostReads(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # PyTorch wraps a mode's __torch_dispatch__ to keep torch.compile out of it, and that wrapper imports
            # torch._dynamo on the mode's first operator: 2-8 s before a learner's first verdict. This mode only
            # counts operators, so it opts out of the wrapper, as the flag's own docstring shows.
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
            if on_gpu and (func.__name__.split(".")[0] in HOST_READS or _into_pageable(func, args)):
                reads[0] += 1
            return func(*args, **(kwargs or {}))

    old_mode = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught, HostReads():
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            result = fast_loop(losses)
        finally:
            torch.cuda.set_sync_debug_mode(old_mode)
    syncs = [w for w in caught if "synchroniz" in str(w.message) and "prototype" not in str(w.message)]
    return result, max(reads[0], len(syncs))
