"""Lesson 01 exercise checkers: the enqueue span, which ops sync, a loop without per-step syncs."""
from __future__ import annotations

from asynclab.grading.backend import run_answer
from asynclab.grading.checks import Verdict, exercise, finite_number, set_answer
from asynclab.trace.read.events import a_type
from asynclab.grading.hostreads import on_late_losses

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
    from asynclab.trace.analysis import metrics
    from asynclab.course import reference

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
    from asynclab.course import reference

    rows = reference.results(1)["hidden_syncs"]["ops"]
    return set_answer(ops, {r["op"] for r in rows if r["syncs"]}, {r["op"] for r in rows}, noun="op",
                      example='{".item()", "print(t)"}', why="each of them needs a value or a size on the host.",
                      wrong="these do not wait", shown_in="the table")


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

    values = torch.rand(50)
    values[0] += (0.5625 - float(values.sum())) % 1  # a total of a fraction 9/16: never an integer (int() or round()
    # is never right), and halfway between two bfloat16 numbers (a bfloat16 accumulator is never right either), every
    # loss still positive: an answer that keeps out zero losses sums them all
    expected = float(values.sum())
    got, _, verdict = run_answer(fast_loop, "fast_loop", on_late_losses, values)
    if verdict is not None:
        return verdict
    result, reads = got
    number = finite_number(result) if isinstance(result, (int, float)) else None  # a Python number, as asked
    if number is None or not abs(number - expected) <= 1e-3 * max(1.0, abs(expected)):
        got = a_type(result) if isinstance(result, torch.Tensor) else repr(result)
        return Verdict(False, f"the total should be {expected:.4f}, got {got}; return a Python number.")
    if reads > 1:
        return Verdict(False, f"{reads} host reads (.item(), float(), .cpu(), print, a synchronize, ...): keep the "
                              "running sum on the device, read it once.")
    return Verdict(True, "one read at the end: the host can run ahead for the whole loop.")


#: Answers for the classroom's solved examples, where the lesson publishes no code (``asynclab.grading.classroom``).
CLASSROOM_ANSWERS = {
    "01.sync_ops": 'my_syncing_ops = {r["op"] for r in run.reference("hidden_syncs")["ops"] if r["syncs"]}',
}
