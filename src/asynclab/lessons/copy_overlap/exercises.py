"""Lesson 05 exercise checkers: write a copy/compute loop that overlaps, and add the missing sync to a GPU->host read."""
from __future__ import annotations

import itertools
import random
from typing import Any, Callable

from asynclab.checks import Verdict, exercise, harness, raised
from asynclab.events import a_type
from asynclab.simgpu import SimHostTensor, SimTensor, StreamSim

#: Chunks the overlap checker feeds the learner's loop.
CHUNKS = 12
#: The share of copy time that must be hidden behind compute; the best possible is (CHUNKS - 1) / CHUNKS. A loop that
#: synchronizes every 4 chunks hides at most 3 / 4, so the bar sits above that, below the best.
MIN_HIDDEN = 0.8
#: Profiled runs of the learner's loop on a GPU; the checker takes the median of their hidden shares.
RUNS = 3
#: How late the GPU's numbers are in the read checker, in ms.
LATE_MS = 20.0

#: The losses' values come from a generator of the checker's own: seeding Python's cannot predict them.
_TRUTH = random.Random()


# -- exercise 1: a loop that overlaps copies with compute -------------------------------------------------------
def _overlap_on_gpu(overlapped: Callable) -> tuple[int, int, float, int, int]:
    """Run ``overlapped(chunks, compute)`` on the GPU, profiled; returns ``(results, wrong results, hidden fraction,
    compute calls, streams the copies ran on)``."""
    import torch

    from asynclab.lessons.copy_overlap.experiments import MiB, Pipeline
    from asynclab.metrics import hidden_fraction
    from asynclab.record import STEP_ANNOTATION, record

    dev = torch.device("cuda", torch.cuda.current_device())
    # big chunks, compute 1.5x a chunk's copy: the host's launches (slower under the profiler) stay small beside them
    pipe = Pipeline(dev, "pinned", chunks=CHUNKS, chunk_bytes=64 * MiB, compute_over_copy=1.5)
    counts = {"results": 0, "wrong": 0, "calls": 0}
    runs = itertools.count(1)

    def compute(x: Any) -> Any:
        counts["calls"] += 1
        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise TypeError("compute() takes a chunk on the GPU: copy it there first, with .to('cuda', non_blocking=True)")
        y = x
        for _ in range(pipe.reps):
            y = torch.mm(y, pipe.eye)
        return y

    def once() -> None:
        counts["calls"] = 0
        run = next(runs)
        values = [run * 100.0 + i for i in range(CHUNKS)]  # new numbers every run: stale data can't pass
        torch.cuda.synchronize()
        for chunk, v in zip(pipe.host, values):
            chunk.fill_(v)
        results = _as_list(overlapped(list(pipe.host), compute))
        torch.cuda.synchronize()
        counts["results"] = len(results)
        wrong = sum(not isinstance(r, torch.Tensor) or bool((r != v).any()) for r, v in zip(results, values))
        counts["wrong"] = max(counts["wrong"], wrong + max(0, CHUNKS - len(results)))  # the worst run counts

    trace = record(once, warmup=1, steps=RUNS)
    # each run on its own (a stream made inside the function is a new one every call), and the median of their
    # shares: one run that the machine slowed down does not decide
    runs = [trace.window(annotation=STEP_ANNOTATION, occurrence=i) for i in range(RUNS)]
    hidden = sorted(hidden_fraction(run) for run in runs)
    median = float("nan") if any(h != h for h in hidden) else hidden[RUNS // 2]
    return counts["results"], counts["wrong"], median, counts["calls"], max(_copy_streams(run) for run in runs)


def _copy_streams(trace: Any) -> int:
    """On how many streams the trace's host-to-GPU copies ran."""
    ev = trace.events
    return int(ev.loc[ev["kind"] == "h2d", ["device", "stream"]].drop_duplicates().shape[0])


def _as_list(results: Any) -> list:
    """The learner's results as a list; a clear error for anything else."""
    if isinstance(results, (list, tuple)):
        return list(results)
    raise _NotAList(f"return a list of the results, one per chunk, not {a_type(results)}")


class _NotAList(TypeError):
    """What overlapped() returned is not a list."""


def _overlap_simulated(overlapped: Callable) -> tuple[int, int, float, int, int]:
    """The same on :class:`asynclab.simgpu.StreamSim`: pinned chunks of 1 ms copies, 1.2 ms of compute each (two
    kernels, whose intermediate's memory the compute stream reuses at once, as on a GPU)."""
    import torch

    from asynclab.metrics import hidden_fraction

    with StreamSim() as sim:
        chunks = [SimHostTensor(sim, copy_ms=1.0, pinned=True, values=[i]) for i in range(CHUNKS)]
        calls = [0]  # a count: keeping the chunks would keep their memory from being reused

        def compute(x: Any) -> Any:
            calls[0] += 1
            if not getattr(x, "is_cuda", False):
                raise TypeError("compute() takes a chunk on the GPU: copy it there first, with .to('cuda', non_blocking=True)")
            y = sim.kernel([x], ms=0.6)  # an intermediate, freed on return, as the GPU's chain of products makes:
            return sim.kernel([x, y], ms=0.6, values=x.values)  # y's memory goes back to the compute stream's pool

        results = _as_list(overlapped(list(chunks), compute))
        wrong = sum(not isinstance(r, SimTensor) or not r.right or r.values != [i] for i, r in enumerate(results))
        wrong += max(0, CHUNKS - len(results))
        trace = sim.trace() if sim.ran else None
        hidden = hidden_fraction(trace) if trace is not None else float("nan")
        torch.cuda.synchronize()
    return len(results), wrong, hidden, calls[0], _copy_streams(trace) if trace is not None else 0


@exercise("05.overlap_loop")
def overlap_loop(overlapped: Callable) -> Verdict:
    """Does ``overlapped(chunks, compute)`` copy the chunks to the GPU while earlier chunks compute, and get every result right?

    ``chunks`` is a list of pinned host tensors; ``compute(x)`` queues the work for one chunk already on
    the GPU, on the current stream, and returns its result. The function returns the results in order.
    The checker reads the share of copy time hidden behind compute off a profiler trace (on a GPU: the
    median of :data:`RUNS` profiled runs) or off the simulated GPU's timeline (without one), with
    :func:`asynclab.metrics.hidden_fraction`. It
    needs at least :data:`MIN_HIDDEN`, and every result right: the chunks hold new numbers every run,
    so a compute that reads a chunk before it has arrived gets old ones. It needs the copies on one stream: across
    streams a GPU keeps no order, and whether their overlap holds depends on the GPU (lesson 05, section 4).

    Example:
        >>> def one_stream(chunks, compute):
        ...     return [compute(c.to("cuda")) for c in chunks]
        >>> overlap_loop(one_stream).right
        False
    """

    if not callable(overlapped):
        return Verdict(False, "pass your function overlapped itself (no parentheses).")
    run, where = harness(_overlap_on_gpu, _overlap_simulated)
    try:
        count, wrong, hidden, calls, copy_streams = run(overlapped)
    except _NotAList as err:
        return Verdict(False, f"{err}.")
    except Exception as err:  # noqa: BLE001 - the learner's code
        return raised(err)
    if calls != CHUNKS:
        return Verdict(False, f"call compute() once per chunk: {CHUNKS} chunks, {calls} calls (extra work would hide "
                              "copies behind nothing useful).")
    if count != CHUNKS:
        return Verdict(False, f"return one result per chunk, in order: {CHUNKS} chunks, {count} results.")
    if hidden != hidden:  # NaN: no copies at all
        return Verdict(False, "no host-to-GPU copies ran: copy each chunk with .to('cuda', non_blocking=True).")
    if wrong:
        return Verdict(False, f"{wrong} of {CHUNKS} results are wrong{where}: compute read a chunk that was not there yet, "
                              "or no longer. Make the compute stream wait for an event recorded after each copy, and "
                              "keep each chunk's memory for it: x.record_stream(compute stream) (lesson 04).")
    if copy_streams > 1:
        return Verdict(False, f"right results, but the copies ran on {copy_streams} streams{where}. A GPU keeps the order "
                              "of the copies on one stream, not across streams: on lesson 05's reference GPU, copies on "
                              "two streams in turn ran out of the order they were issued in, and chunks waited for "
                              "copies issued after theirs (section 4). Whether that happens depends on the GPU, so put "
                              "every copy on one stream of its own.")
    if hidden < MIN_HIDDEN:
        return Verdict(False, f"right results, but only {hidden:.0%} of the copy time was hidden behind compute{where} "
                              f"(needed: {MIN_HIDDEN:.0%}): issue the copies on a stream of their own, non_blocking, "
                              "and let the host run ahead (no synchronize in the loop).")
    return Verdict(True, f"{hidden:.0%} of the copy time was hidden behind compute, every result right{where} "
                         f"(the first copy has nothing to hide behind: {(CHUNKS - 1) / CHUNKS:.0%} is the best).")


# -- exercise 2: the missing sync in a GPU->host read ------------------------------------------------------------
def _late_copies(cycles: int) -> type:
    """A tensor type whose copies to the host start late: a spin kernel runs ahead of each, on the copy's stream.

    It stands for a big copy: only a read that waits for the copy itself (an event recorded after it, or a
    synchronize) sees the new numbers; a wait for anything recorded before the copy is certainly too early.
    """
    import torch

    class LateCopies(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if getattr(func, "__name__", "") in ("copy_", "to", "cpu", "_to_copy"):
                torch.cuda._sleep(cycles)
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    return LateCopies


def _read_on_gpu(read_losses: Callable) -> tuple[Any, list[float]]:
    """Run ``read_losses(losses, out)`` with the GPU's losses late (a spin ahead) and every copy of them late too;
    returns ``(what it returned, truth)``."""
    import torch

    from asynclab.experiments import spin_cycles

    dev = torch.device("cuda", torch.cuda.current_device())
    cycles = spin_cycles(dev, LATE_MS)
    truth = [round(_TRUTH.uniform(0.5, 3.0), 3) for _ in range(8)]
    out = torch.tensor([-1.0] * len(truth), pin_memory=True)  # last step's numbers, as far as anyone can tell
    expected = torch.tensor(truth)
    torch.cuda.Stream()  # the stream pool is built now: building it waits for the GPU, which would order the race
    torch.cuda.synchronize()
    torch.cuda._sleep(2 * cycles)  # the GPU is still busy with this step, longer than a copy takes...
    losses = expected.to(dev, non_blocking=True).as_subclass(_late_copies(cycles))  # ...so its losses arrive late
    got = read_losses(losses, out)
    torch.cuda.synchronize()
    return got, truth


def _read_simulated(read_losses: Callable) -> tuple[Any, list[float]]:
    """The same on :class:`asynclab.simgpu.StreamSim`."""
    truth = [round(_TRUTH.uniform(0.5, 3.0), 3) for _ in range(8)]
    with StreamSim() as sim:
        losses = sim.kernel([], ms=2 * LATE_MS, values=list(truth))  # later than a copy takes, as on a GPU
        out = SimHostTensor(sim, copy_ms=LATE_MS, pinned=True, values=[-1.0] * len(truth))  # a late copy, as on a GPU
        got = read_losses(losses, out)
    return got, truth


@exercise("05.d2h_read")
def d2h_read(read_losses: Callable) -> Verdict:
    """Does ``read_losses(losses, out)`` return this step's losses, not what ``out`` held before?

    ``losses`` is on the GPU and is written late (behind a spin kernel of 2 x :data:`LATE_MS`), and each copy of
    it ends late too (a spin of :data:`LATE_MS` runs ahead of it: a big copy), so a wait for anything before the
    copy is certainly too early, and a copy on a stream that does not wait for the losses certainly reads them
    before they are written;
    ``out`` is a pinned host tensor that holds the step before's numbers. The checker draws new losses
    every time, so only a read after the copy has finished returns them. On a GPU it runs real copies; without one, a
    simulation of streams with the same rules.

    Example:
        >>> def no_sync(losses, out):
        ...     out.copy_(losses, non_blocking=True)
        ...     return out.tolist()
        >>> d2h_read(no_sync).right
        False
    """

    if not callable(read_losses):
        return Verdict(False, "pass your function read_losses itself (no parentheses).")
    run, where = harness(_read_on_gpu, _read_simulated)
    try:
        got, truth = run(read_losses)
        truth = [round(float(v), 3) for v in truth]
    except Exception as err:  # noqa: BLE001 - the learner's code
        return raised(err)
    if not isinstance(got, list) or len(got) != len(truth) or not all(isinstance(v, (int, float)) for v in got):
        return Verdict(False, f"return the {len(truth)} losses as a list of numbers (out.tolist()), "
                              f"not {a_type(got)} {str(got)[:40]}.")
    if [round(float(v), 3) for v in got] != truth:
        stale = all(float(v) == -1.0 for v in got)
        return Verdict(False, ("you read out before the copy had landed: it still held the step before's numbers"
                               if stale else "the numbers returned are not this step's losses") + where
                       + ". Record an event after the copy and synchronize on it before reading.")
    return Verdict(True, f"this step's losses, read after their copy had finished{where}.")
