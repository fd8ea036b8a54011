"""Lesson 01 exercise checkers: the enqueue span, which ops sync, a loop without per-step syncs."""
from __future__ import annotations

import contextlib
from typing import Iterator

from asynclab.checks import Verdict, exercise, raised, set_answer


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


#: Tensor methods and ops that need a value (or a data-dependent size) on the host: each is a host read.
HOST_READS = frozenset({"item", "__float__", "__int__", "__bool__", "__index__", "__complex__", "tolist", "numpy",
                        "cpu", "__repr__", "__str__", "__format__", "__array__", "nonzero", "masked_select", "unique",
                        "_unique2", "_local_scalar_dense"})


def _bool_index(index: object) -> bool:
    """Whether a tensor index holds a boolean mask (whose result size the host must read)."""
    import torch

    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _reads_on_cpu(fast_loop, losses: list, host_reads: frozenset = HOST_READS) -> tuple[object, int]:
    """``fast_loop`` on CPU losses that stand for losses on a GPU: ops on them stay "on the device" (their results
    too), and each read of one on the host counts, as ``torch.cuda.set_sync_debug_mode`` counts syncs on a GPU.

    A value read past the tensor type (its subclass stripped, or torch functions switched off) is still a read of a
    scalar at the dispatcher, as the GPU's sync report still sees it: the count is the larger of the two.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    reads, scalars = [0], [0]

    class ScalarReads(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            scalars[0] += func.__name__.split(".")[0] == "_local_scalar_dense"
            return func(*args, **(kwargs or {}))

    class OnDevice(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            to_host = name == "to" and "cpu" in " ".join(map(str, list(args[1:]) + list(kwargs.values())))
            if name in host_reads or to_host:
                reads[0] += 1
                plain = [a.as_subclass(torch.Tensor) if isinstance(a, OnDevice) else a for a in args]
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*plain, **kwargs)  # what the host reads is a plain (host) tensor or number
            if name in ("__getitem__", "__setitem__") and _bool_index(args[1] if len(args) > 1 else None):
                reads[0] += 1  # a boolean mask: the result's size is the number of Trues, read on the host
            return super().__torch_function__(func, types, args, kwargs)

    with ScalarReads() if modes_see_subclasses() else contextlib.nullcontext():
        result = fast_loop([t.as_subclass(OnDevice) for t in losses])
    return result, max(reads[0], scalars[0])


def modes_see_subclasses() -> bool:
    """Whether this PyTorch runs a tensor subclass's ops under a dispatch mode, as :func:`_reads_on_cpu` needs to
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


@contextlib.contextmanager
def _host_waits() -> Iterator[list]:
    """Count the host's explicit waits for the GPU in a block: ``torch.cuda.synchronize()``, ``Stream.synchronize``
    and ``Event.synchronize`` (on a GPU or on its stand-ins). Yields a one-element list holding the count."""
    import torch

    count = [0]
    places = [(torch.cuda, "synchronize"), (torch.cuda.Stream, "synchronize"), (torch.cuda.Event, "synchronize")]
    saved = [(owner, name, owner.__dict__[name]) for owner, name in places if name in owner.__dict__]

    def counting(original):
        def wait(*args, **kwargs):
            count[0] += 1
            return original(*args, **kwargs)
        return wait

    for owner, name, original in saved:
        setattr(owner, name, counting(original))
    try:
        yield count
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def _reads_on_gpu(fast_loop, losses: list) -> tuple[object, int]:
    """``fast_loop`` on GPU losses: the syncs ``torch.cuda.set_sync_debug_mode`` reports, or the reads of GPU tensors
    counted op by op, whichever is more."""
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

    On a GPU the reads are the syncs the GPU reports; without one, the losses are CPU tensors that stand for
    GPU tensors, and every read of one on the host (``.item()``, ``float``, ``print``, ``.cpu()``, ``if loss``,
    ``nonzero``...) counts, so the verdict is the same.

    Example:
        >>> no_sync_loop(lambda losses: sum(x.item() for x in losses)).right
        False
    """
    import torch

    if not callable(fast_loop):
        return Verdict(False, "pass your function fast_loop itself (no parentheses).")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    losses = [torch.rand((), device=device) for _ in range(50)]
    expected = float(torch.stack(losses).sum())
    try:
        with _host_waits() as waits:
            result, reads = (_reads_on_gpu if device == "cuda" else _reads_on_cpu)(fast_loop, losses)
    except Exception as err:  # noqa: BLE001 - the learner's code
        return raised(err)
    reads = max(reads, waits[0])  # a stream's synchronize is also among the GPU's reported syncs: count it once
    if isinstance(result, torch.Tensor) or not isinstance(result, (int, float)) \
            or abs(result - expected) > 1e-3 * max(1.0, abs(expected)):
        return Verdict(False, f"the total should be {expected:.4f}, got {result!r}; return a Python number.")
    if reads > 1:
        return Verdict(False, f"{reads} host reads (.item(), float(), .cpu(), print, a synchronize, ...): keep the "
                              "running sum on the device, read it once.")
    return Verdict(True, "one read at the end: the host can run ahead for the whole loop.")


#: Answers for the classroom's solved examples, where the lesson publishes no code (``asynclab.classroom``).
CLASSROOM_ANSWERS = {
    "01.sync_ops": 'my_syncing_ops = {r["op"] for r in run.reference("hidden_syncs")["ops"] if r["syncs"]}',
}
