"""Lesson 01 exercise checkers: the enqueue span, which ops sync, a loop without per-step syncs."""
from __future__ import annotations

import contextlib
from typing import Iterator

from asynclab.backend import Backend, backend
from asynclab.checks import Verdict, exercise, raised, set_answer
from asynclab.events import a_type

#: Operators that need a value (or a data-dependent size) on the host: each is a host read of a GPU tensor.
HOST_READS = frozenset({"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "_unique",
                        "unique_consecutive", "unique_dim"})


def enqueue_span_ms(trace) -> float:
    """From the start of the first launch of a compute kernel to the end of the last one, in ms.

    Example:
        >>> from asynclab import reference
        >>> enqueue_span_ms(reference.trace(1, "host_runs_ahead")) < 5
        True
    """
    ev = trace.events
    kernels = ev[ev["kind"] == "compute"]
    launches = ev.loc[kernels["launch"].dropna().astype(int)]
    return float(launches["end_us"].max() - launches["start_us"].min()) / 1e3


@exercise("01.enqueue_span")
def enqueue_span_answer(span_ms: float) -> Verdict:
    """How long did the host take to issue the kernels of lesson 01's reference trace (first launch to last)?

    Example:
        >>> enqueue_span_answer(None).right
        False
    """
    from asynclab import metrics, reference

    trace = reference.trace(1, "host_runs_ahead")
    right = enqueue_span_ms(trace)
    if isinstance(span_ms, bool) or not isinstance(span_ms, (int, float)):
        return Verdict(False, "give a number of milliseconds.")
    if abs(span_ms - right) <= 0.005 * right:
        return Verdict(True, f"{span_ms:.3f} ms to issue what took the GPU "
                             f"{metrics.host_lead(trace).gpu_busy_us / 1e3:.1f} ms to run. It is longer than the "
                             "enqueue figure of section 2, which was timed without the profiler: recording every "
                             "call costs the host time too.")
    if abs(span_ms / 1e3 - right) <= 0.005 * right:
        return Verdict(False, "that looks like µs: trace times are in µs, divide by 1000.")
    return Verdict(False, f"{span_ms:.3f} ms is off: take the launches of the compute kernels (the `launch` column "
                          "of the kernel rows), from the first one's start to the last one's end.")


@exercise("01.sync_ops")
def sync_ops_answer(ops: set) -> Verdict:
    """Which ops of lesson 01's table make the host wait? Checked against the reference.

    Example:
        >>> sync_ops_answer({".item()"}).right
        False
    """
    from asynclab import reference

    rows = reference.results(1)["hidden_syncs"]["ops"]
    return set_answer(ops, {r["op"] for r in rows if r["syncs"]}, {r["op"] for r in rows}, noun="op",
                      example='{".item()", "print(t)"}', why="each of them needs a value or a size on the host.",
                      wrong="these do not wait", shown_in="the table")


#: How late the losses are written on a GPU (behind a spin kernel): a copy to the host that nobody waited for is
#: still empty when the host reads it, on every run.
LATE_MS = 20.0


@contextlib.contextmanager
def _host_waits() -> Iterator[list]:
    """Count the host's explicit waits for the GPU in a block: ``torch.cuda.synchronize()``, ``Stream.synchronize``,
    ``Event.synchronize`` and ``torch.accelerator.synchronize()`` (on a GPU or on its stand-ins). Yields a
    one-element list holding the count."""
    import torch

    count = [0]
    places = [torch.cuda, torch.cuda.Stream, torch.cuda.Event, getattr(torch, "accelerator", None)]
    saved = [(owner, owner.__dict__["synchronize"]) for owner in places if "synchronize" in vars(owner or object)]
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

    accelerator = getattr(torch, "accelerator", None)
    for owner, original in saved:
        setattr(owner, "synchronize", counting(device_wait if owner is accelerator else original))
    try:
        yield count
    finally:
        for owner, original in saved:
            setattr(owner, "synchronize", original)


def _loop(b: Backend, fast_loop, values) -> tuple[object, int]:
    """Run ``fast_loop`` on losses on the GPU, written late (behind a spin kernel of :data:`LATE_MS`) without the host
    waiting; returns ``(its result, the host's reads and waits)``.

    A first run, uncounted and race-free, warms it up, as a check on a GPU must: the first launch of each of its
    kernels loads the kernel (lazy loading), which waits for the GPU and would close the race by accident.
    """
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    with _host_waits():  # the warm-up's waits are the check's own (uncounted); other values: memory it leaves must
        torch.cuda.synchronize()  # not hold the answer
        fast_loop([v.to(dev) for v in -values])
        torch.cuda.synchronize()
    pinned = values.pin_memory()
    b.late(LATE_MS)
    on_gpu = pinned.to(dev, non_blocking=True)
    losses = [on_gpu[i].clone() for i in range(len(values))]
    try:
        with _host_waits() as waits:
            result, reads = _reads(fast_loop, losses)
    finally:
        torch.cuda.synchronize()  # the copies in flight land before their memory goes
    return result, max(reads, waits[0])  # a synchronize then one read: the host waited once


def _reads(fast_loop, losses: list) -> tuple[object, int]:
    """``fast_loop`` on GPU losses: the syncs ``torch.cuda.set_sync_debug_mode`` reports, or the reads of GPU tensors
    counted operator by operator, whichever is more."""
    import warnings

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    reads = [0]

    class HostReads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
            if on_gpu and func.__name__.split(".")[0] in HOST_READS:
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


@exercise("01.no_sync_loop")
def no_sync_loop(fast_loop) -> Verdict:
    """Sum per-step losses without a sync per step: right total, at most one host read.

    The reads are the syncs PyTorch's sync debug mode reports, on a GPU or on the simulated one: every read of a GPU
    tensor on the host (``.item()``, ``float``, ``print``, ``.cpu()``, ``if loss``, ``nonzero``...) and every wait.

    Example:
        >>> no_sync_loop(lambda losses: sum(x.item() for x in losses)).right
        False
    """
    import torch

    if not callable(fast_loop):
        return Verdict(False, "pass your function fast_loop itself (no parentheses).")
    values = torch.rand(50)
    expected = float(values.sum())
    try:
        with backend() as b:
            result, reads = _loop(b, fast_loop, values)
    except Exception as err:  # noqa: BLE001 - the learner's code
        return raised(err)
    if isinstance(result, torch.Tensor) or not isinstance(result, (int, float)) \
            or abs(result - expected) > 1e-3 * max(1.0, abs(expected)):
        got = a_type(result) if isinstance(result, torch.Tensor) else repr(result)
        return Verdict(False, f"the total should be {expected:.4f}, got {got}; return a Python number.")
    if reads > 1:
        return Verdict(False, f"{reads} host reads (.item(), float(), .cpu(), print, a synchronize, ...): keep the "
                              "running sum on the device, read it once.")
    return Verdict(True, "one read at the end: the host can run ahead for the whole loop.")


#: Answers for the classroom's solved examples, where the lesson publishes no code (``asynclab.classroom``).
CLASSROOM_ANSWERS = {
    "01.sync_ops": 'my_syncing_ops = {r["op"] for r in run.reference("hidden_syncs")["ops"] if r["syncs"]}',
}
