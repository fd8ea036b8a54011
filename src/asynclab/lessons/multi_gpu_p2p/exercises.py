"""Lesson 06 exercise checkers: arrange the streams so a GPU-to-GPU copy overlaps compute, and predict a both-ways copy."""
from __future__ import annotations

import itertools
import math
import numbers
from typing import Any, Callable

from asynclab.grading.backend import Backend, run_answer
from asynclab.grading.checks import Verdict, exercise
from asynclab.trace.read.events import a_type

#: The share of the multiplication that must run while the copy runs.
MIN_OVERLAP = 0.8
#: How close a prediction of the both-ways copy must come to the measurement.
TOLERANCE = 0.2


# -- exercise 1: streams so that the copy overlaps ------------------------------------------------------------
def _returned(result: Any) -> tuple[Any, Any]:
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise _Shape(f"return (what send() returned, what multiply() returned), not {a_type(result)}")
    return result[0], result[1]


class _Counted:
    """``send`` or ``multiply``, counting its calls and keeping what it returned."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn, self.calls, self.result = fn, 0, None

    def __call__(self) -> Any:
        self.calls += 1
        self.result = self.fn()
        return self.result


def _run_step(step: Callable, send: Callable, multiply: Callable) -> tuple[Any, Any]:
    """Call the learner's step once; it must call each function once and return their results in order."""
    s, m = _Counted(send), _Counted(multiply)
    y, z = _returned(step(s, m))
    if s.calls != 1 or m.calls != 1:
        raise _Shape(f"call send() once and multiply() once (send: {s.calls}, multiply: {m.calls} calls)")
    if y is not s.result or z is not m.result:
        raise _Shape("return (what send() returned, what multiply() returned), in that order")
    return y, z


class _Shape(TypeError):
    """What step() returned is not a pair."""


def _overlap_share(trace: Any, mult: Any) -> float:
    """The share of the multiplication's time (rows ``mult`` of the trace) during which the copy ran too."""
    from asynclab.trace.read.intervals import intersection_length, spans

    ev = trace.events
    copies = ev[ev["kind"].isin(("p2p", "d2d"))]
    total = float(mult["dur_us"].sum())
    return intersection_length(spans(copies), spans(mult)) / total if total > 0 else 0.0


def _launched_in(trace: Any, annotation: str) -> Any:
    """The compute kernels launched inside the host annotation ``annotation``."""
    ev = trace.events
    lo, hi = trace.annotation_range(annotation, occurrence=0)  # the host's range (the GPU's runs on past it)
    kernels = ev[(ev["kind"] == "compute") & ev["launch"].notna()]
    at = ev.loc[kernels["launch"].astype(int), "start_us"].to_numpy()
    return kernels[(at >= lo) & (at < hi)]  # a launch that starts as the range ends is after it


#: Each scenario run: ``"profiled"`` (the overlap share), ``"slow_product"`` (a spin ahead of the product: reading it
#: without a wait is certainly early), ``"late_source"`` (``x0``'s producer still in flight on GPU 0's current stream
#: when ``step`` runs) and ``"late_reader"`` (GPU 1's last reader of ``y1`` still in flight on GPU 1's current stream).
RUNS = ("profiled", "slow_product", "late_source", "late_reader")
#: How long the late producer or reader spins ahead of its work: several times the copy, so the wrong order is certain.
LATE_MS = 12.0


def _step(b: Backend, step: Callable, mode: str = "profiled") -> tuple[dict[str, int], float | None]:
    """Run ``step(send, multiply)`` on GPUs 0 and 1 in one of :data:`RUNS`; returns ``(wrong counts, overlap share)``.

    The copy is 1 GiB on a GPU (about three times the multiplication); both results are read on GPU 1's default
    stream right after ``step`` returns, as the rest of a program would. The wrong counts are keyed ``"result"``
    (elements of ``y`` or the product that GPU 1's default stream read wrong), ``"source"`` (elements of ``y`` that
    hold the source's old numbers: the copy read ``x0`` before its producer finished) and ``"reader"`` (elements that
    GPU 1's earlier reader saw overwritten: the copy wrote ``y1`` before that reader was done). Only the profiled run
    gives an overlap share.
    """
    import torch

    from asynclab.gpu.devices import native_half

    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    src = torch.empty(b.nbytes(1 << 30) // 4, device=d0)
    dst = torch.empty(b.nbytes(1 << 30) // 4, device=d1)
    side = b.side(7168)  # a product of about 1 ms on an H200; the copy about 3 ms
    a = torch.randn(side, side, device=d1, dtype=native_half(d1))
    c = torch.empty_like(a)
    want = a @ a
    runs = itertools.count(1)
    wrong = {"result": 0, "source": 0, "reader": 0}

    def send() -> Any:
        dst.copy_(src)
        return dst

    def multiply() -> Any:
        with torch.cuda.device(d1):
            if mode == "slow_product":
                b.late(20.0)
            return torch.mm(a, a, out=c)

    def once() -> None:
        value = float(next(runs))  # new numbers every run: a read before the copy ends sees old ones
        src.fill_(-2.0 if mode == "late_source" else value), dst.fill_(-1.0), c.zero_()
        torch.cuda.synchronize(d0), torch.cuda.synchronize(d1)
        seen = None
        if mode == "late_source":  # x0's producer still running on GPU 0's current stream
            b.late(LATE_MS, device=d0)
            with torch.cuda.device(d0):
                src.fill_(value)
        elif mode == "late_reader":  # GPU 1's last reader of y1 still running on GPU 1's current stream
            b.late(LATE_MS, device=d1)
            with torch.cuda.device(d1):
                seen = (dst != -1.0).sum()
        with torch.profiler.record_function("step"):
            y, z = _run_step(step, send, multiply)
        with torch.cuda.device(d1):  # GPU 1's default stream reads both results at once
            bad = int((y != value).sum()) if isinstance(y, torch.Tensor) else y.numel() if hasattr(y, "numel") else 1
            old = int((y == -2.0).sum()) if isinstance(y, torch.Tensor) and mode == "late_source" else 0
            off = ~((z.float() - want.float()).abs() <= 0.05 * float(want.float().abs().max())) \
                if isinstance(z, torch.Tensor) and z.shape == want.shape else None  # NaN and inf are off
            bad += 1 if off is None else int(off.sum())
        torch.cuda.synchronize(d0), torch.cuda.synchronize(d1)
        wrong.update(result=bad, source=old, reader=0 if seen is None else int(seen))

    if mode != "profiled":
        once(), once()
        return wrong, None
    trace = b.profile(once)
    return wrong, _overlap_share(trace, _launched_in(trace, "step"))


@exercise("06.overlap_copy")
def overlap_copy(step: Callable) -> Verdict:
    """Check ``step(send, multiply)``: copy GPU 0's tensor to GPU 1 with ``send()`` and multiply on GPU 1 with
    ``multiply()``, so that the two overlap, and return ``(send(), multiply())`` ready for GPU 1's default stream.

    ``send()`` runs ``y1.copy_(x0)``, a copy between GPUs, with whatever streams are current; ``multiply()``
    runs a matrix product on GPU 1's current stream (whichever device is current). After ``step`` returns, GPU 1's default stream reads
    both results. The checker needs at least :data:`MIN_OVERLAP` of the multiplication to run during the copy
    (read from a profiler trace of two GPUs, or of two simulated ones without them)
    and both results right (the tensor holds new numbers every run), also in three more runs: one where the product
    is late (a spin ahead of it), so that reading it without a wait is certainly wrong; one where ``x0``'s producer is
    still running on GPU 0's current stream when ``step`` is called; and one where GPU 1's current stream is still
    reading ``y1`` then (the two halves of the correctness checklist that PyTorch's copy leaves to its caller).

    Example:
        >>> def plain(send, multiply):
        ...     import torch
        ...     y = send()
        ...     with torch.cuda.device(1):
        ...         z = multiply()
        ...     return y, z
        >>> overlap_copy(plain).right
        False
    """
    runs = {}
    for mode in RUNS:
        ran, where, verdict = run_answer(step, "step", _step, mode, gpus=2, known=(_Shape,))
        if verdict is not None:
            return verdict
        runs[mode] = ran
    share = runs["profiled"][1]
    early = Verdict(False, f"GPU 1's default stream read a result before it was there{where}: after the copy (or the "
                           "product) on a side stream, make GPU 1's default stream wait for that stream "
                           "(torch.cuda.default_stream(1).wait_stream(side), lesson 04: the consumer waits before it "
                           "reads).")
    if runs["profiled"][0]["result"] or runs["slow_product"][0]["result"]:
        return early
    if share < MIN_OVERLAP:
        return Verdict(False, f"right results, but only {share:.0%} of the multiplication ran during the copy{where} "
                              f"(needed: {MIN_OVERLAP:.0%}). The copy makes the receiver's *current* stream wait for "
                              "it, and a copy from GPU 0's default stream holds GPU 1's default stream: which "
                              "stream is current on each GPU while you call send(), and which one does multiply() "
                              "run on?")
    if runs["late_source"][0]["source"]:
        return Verdict(False, f"the product overlaps the copy, but the copy read x0 before GPU 0's current stream had "
                              f"finished writing it{where}: PyTorch's copy waits for the destination's current stream "
                              "only, so a copy issued on a side stream of GPU 0 must first wait for the stream that "
                              "produced x0: s0.wait_stream(torch.cuda.current_stream(0)) before send() (the producer "
                              "is done before you read).")
    if runs["late_reader"][0]["reader"]:
        return Verdict(False, f"the product overlaps the copy, but the copy overwrote y1 while GPU 1's current stream "
                              f"was still reading it{where}: the copy waits only for the stream current on GPU 1 when "
                              "you call send(), so a side stream there must first wait for GPU 1's earlier work: "
                              "s1.wait_stream(torch.cuda.current_stream(1)) before send().")
    if runs["late_source"][0]["result"] or runs["late_reader"][0]["result"]:
        return early
    return Verdict(True, f"{share:.0%} of the multiplication ran during the copy, and GPU 1's default stream read "
                         f"both results right{where}, also with x0 still being written and y1 still being read when "
                         "step ran: the copy fenced only the streams current while it was issued, and the product's "
                         "stream was not among them.")


# -- exercise 2: a both-ways copy ----------------------------------------------------------------------------------
#: The cell that measures bandwidth on the lesson's page (section 3), and the 1 GiB copies each of its runs makes.
BANDWIDTH_CELL, COPIES = "p2p_bandwidth", 4


def _measured_both_ways() -> tuple[float, float, str]:
    """(one-way ms, both-ways ms) for 1 GiB each way, as the page's bandwidth cell measures them: live with two GPUs
    (its workloads: :data:`COPIES` copies of 1 GiB on side streams, timed by the host, median of 3), else its recording."""
    import time

    import torch

    from asynclab.course import cells
    from asynclab.course.registry import lesson

    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        n = (1 << 30) // 4
        src0, dst0 = torch.ones(n, device="cuda:0"), torch.zeros(n, device="cuda:0")
        src1, dst1 = torch.ones(n, device="cuda:1"), torch.zeros(n, device="cuda:1")
        a0, a1, b0, b1 = (torch.cuda.Stream(d) for d in (0, 1, 0, 1))
        torch.cuda.synchronize(0), torch.cuda.synchronize(1)  # the tensors are written before a side stream reads them

        def ms(both: bool) -> float:
            times = []
            for _ in range(4):  # the first run sets up peer access
                t0 = time.perf_counter()
                for _ in range(COPIES):
                    with torch.cuda.stream(a0), torch.cuda.stream(a1):
                        dst1.copy_(src0)  # runs on a0, fenced with a1
                    if both:
                        with torch.cuda.stream(b0), torch.cuda.stream(b1):
                            dst0.copy_(src1)  # runs on b1, fenced with b0
                torch.cuda.synchronize(0), torch.cuda.synchronize(1)
                times.append((time.perf_counter() - t0) * 1e3 / COPIES)
            return sorted(times[1:])[1]

        return ms(False), ms(True), "measured on your GPUs"
    r = cells.recorded(lesson(6).reference_dir, BANDWIDTH_CELL)
    return (r["ms"]["one way"] / COPIES, r["ms"]["both ways"] / COPIES,
            f"the recording of section 3's cell, on 2x {r['gpu']}")


@exercise("06.both_ways")
def both_ways(predicted_ms: Any) -> Verdict:
    """Check a prediction, in ms, of copying 1 GiB from GPU 0 to GPU 1 and 1 GiB back at the same time.

    Right within :data:`TOLERANCE` of the measurement: section 3's cell's, live with two GPUs, else its recording.

    Example:
        >>> both_ways("soon").right
        False
    """
    if isinstance(predicted_ms, bool) or not isinstance(predicted_ms, numbers.Real):
        return Verdict(False, f"give the time in milliseconds as a number, not {a_type(predicted_ms)}.")
    predicted_ms = float(predicted_ms)
    if not math.isfinite(predicted_ms):
        return Verdict(False, f"give a finite number of milliseconds, not {predicted_ms}.")
    if predicted_ms <= 0:
        return Verdict(False, "a copy takes some time: give a positive number of milliseconds.")
    one, both, where = _measured_both_ways()
    error = predicted_ms / both - 1
    if abs(error) <= TOLERANCE:
        return Verdict(True, f"{both:.2f} ms measured ({where}), against {one:.2f} ms one way: NVLink carries each "
                             "direction on its own lanes, so two opposite copies barely slow each other.")
    if 1.6 * one <= predicted_ms <= 2.4 * one:
        return Verdict(False, f"{predicted_ms:.2f} ms is about two one-way copies, as if the two directions took "
                              "turns. Do they share the same wires?")
    if error < 0:
        return Verdict(False, f"{predicted_ms:.2f} ms is {-error:.1%} under the measurement. Can two copies finish "
                              "faster than one?")
    return Verdict(False, f"{predicted_ms:.2f} ms is {error:.1%} over the measurement (20% is the limit).")


#: Answers for the classroom's solved examples, where the lesson publishes no code (``asynclab.grading.classroom``).
CLASSROOM_ANSWERS = {
    "06.both_ways": 'predicted_ms = 1.05 * one_way_ms  # each direction has its own lanes',
}
