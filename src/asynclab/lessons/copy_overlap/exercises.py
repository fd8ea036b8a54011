"""Lesson 05 exercise checkers: write a copy/compute loop that overlaps, and add the missing sync to a GPU->host read."""
from __future__ import annotations

import itertools
import random
import statistics
from typing import Any, Callable

from asynclab.grading.backend import Backend, run_answer
from asynclab.grading.checks import Verdict, brief, exercise
from asynclab.grading.hostreads import LATE_MS  # how late the GPU's numbers are in the read checker: as in the host-read checks
from asynclab.trace.read.events import a_type

#: Chunks the overlap checker feeds the learner's loop.
CHUNKS = 12
#: The share of copy time that must be hidden behind compute; the best possible is (CHUNKS - 1) / CHUNKS. A loop that
#: synchronizes every 4 chunks hides at most 3 / 4, so the bar sits above that, below the best.
MIN_HIDDEN = 0.8
#: The scenario's compute per chunk, as a multiple of a chunk's copy (float32, as the chunks come).
COMPUTE_OVER_COPY = 1.5
#: Profiled runs of the learner's loop on a GPU; the checker takes the median of their hidden shares.
RUNS = 3
#: The losses' values come from a generator of the checker's own: seeding Python's cannot predict them.
_TRUTH = random.Random()


# -- exercise 1: a loop that overlaps copies with compute -------------------------------------------------------
def _overlap(b: Backend, overlapped: Callable, late_compute: bool = False) -> Any:
    """Run ``overlapped(chunks, compute)`` on a GPU or a simulated one, profiled; returns ``(results, wrong results,
    hidden fraction, compute calls, streams the copies ran on, whether each copy waited for the compute before it,
    the compute's time over the copies')``.

    With ``late_compute``, each compute starts late (a spin of :data:`LATE_MS` on the stream it is queued on) and
    the caller's current stream reads the results as soon as the function returns, before any synchronize, as the
    rest of a program would: a result read before the compute that makes it is done is certainly wrong. Returns
    the wrong results of two such runs, unprofiled."""
    import torch

    from asynclab.lessons.copy_overlap import MiB
    from asynclab.lessons.copy_overlap.experiments import COLS, Pipeline
    from asynclab.trace.analysis.metrics import hidden_fraction
    from asynclab.trace.read.events import STEP_ANNOTATION

    dev = torch.device("cuda", torch.cuda.current_device())
    # big chunks, compute 1.5x a chunk's copy: the host's launches (slower under the profiler) stay small beside them
    pipe = Pipeline(dev, "pinned", chunks=CHUNKS, chunk_bytes=b.nbytes(64 * MiB), compute_over_copy=COMPUTE_OVER_COPY,
                    cols=b.side(COLS))
    counts = {"results": 0, "wrong": 0, "calls": 0}
    runs = itertools.count(1)

    def compute(x: Any) -> Any:
        counts["calls"] += 1
        if not isinstance(x, torch.Tensor) or not x.is_cuda:
            raise TypeError("compute() takes a chunk on the GPU: copy it there first, with .to('cuda', non_blocking=True)")
        if late_compute:
            b.late(LATE_MS)
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
        if late_compute:  # the caller's stream reads the results at once, as the rest of a program would
            read = [(r != v).any() if isinstance(r, torch.Tensor) else True for r, v in zip(results, values)]
        torch.cuda.synchronize()
        if not late_compute:
            read = [(r != v).any() if isinstance(r, torch.Tensor) else True for r, v in zip(results, values)]
        counts["results"] = len(results)
        wrong = sum(not isinstance(r, torch.Tensor) or bool(bad) for r, bad in zip(results, read))
        counts["wrong"] = max(counts["wrong"], wrong + max(0, CHUNKS - len(results)))  # the worst run counts

    if late_compute:
        once(), once()
        return counts["wrong"]
    trace = b.profile(once, runs=RUNS)
    # each run on its own (a stream made inside the function is a new one every call), and the median of their
    # shares: one run that the machine slowed down does not decide
    runs = [trace.window(annotation=STEP_ANNOTATION, occurrence=i) for i in range(RUNS)]
    hidden = sorted(hidden_fraction(run) for run in runs)
    median = float("nan") if any(h != h for h in hidden) else hidden[RUNS // 2]
    return (counts["results"], counts["wrong"], median, counts["calls"], max(_copy_streams(run) for run in runs),
            all(_copies_wait_for_compute(run) for run in runs), statistics.median(map(_compute_over_copy, runs)))


def _copies_wait_for_compute(trace: Any) -> bool:
    """Whether every copy after the first waited on the GPU for the compute queued before it: it was issued while that
    compute ran, yet started only once it had ended (a wait_stream or an event of the compute stream before it)."""
    ev = trace.events
    copies = ev[(ev["kind"] == "h2d") & ev["launch"].notna()].sort_values("start_us")
    compute = ev[(ev["kind"] == "compute") & ev["launch"].notna()]
    if len(copies) < 2 or not len(compute):
        return False
    compute_issued = ev.loc[compute["launch"].astype(int), "start_us"].to_numpy()
    for _, copy in copies.iloc[1:].iterrows():
        issued = float(ev.loc[int(copy["launch"]), "start_us"])
        before = compute[compute_issued < issued]
        if not len(before):
            return False
        ended = float(before["end_us"].max())
        if not issued < ended <= copy["start_us"] + 1.0:  # issued while it ran, started after it ended
            return False
    return True


def _compute_over_copy(trace: Any) -> float:
    """The GPU time of the trace's compute kernels over that of its host-to-GPU copies."""
    ev = trace.events
    took = (ev["end_us"] - ev["start_us"]).groupby(ev["kind"]).sum()
    return float(took.get("compute", 0.0) / took["h2d"]) if took.get("h2d", 0.0) > 0 else float("inf")


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


@exercise("05.overlap_loop")
def overlap_loop(overlapped: Callable) -> Verdict:
    """Does ``overlapped(chunks, compute)`` copy the chunks to the GPU while earlier chunks compute, and get every result right?

    ``chunks`` is a list of pinned host tensors; ``compute(x)`` queues the work for one chunk already on
    the GPU, on the current stream, and returns its result. The function returns the results in order.
    The checker reads the share of copy time hidden behind compute off a profiler trace (on a GPU: the
    median of :data:`RUNS` profiled runs) or off the simulated GPU's timeline (without one), with
    :func:`asynclab.trace.analysis.metrics.hidden_fraction`. It
    needs at least :data:`MIN_HIDDEN`, and every result right: the chunks hold new numbers every run,
    so a compute that reads a chunk before it has arrived gets old ones. It needs the copies on one stream: across
    streams a GPU keeps no order, and whether their overlap holds depends on the GPU (lesson 05, section 4).

    Example:
        >>> def one_stream(chunks, compute):
        ...     return [compute(c.to("cuda")) for c in chunks]
        >>> overlap_loop(one_stream).right
        False
    """

    got, where, verdict = run_answer(overlapped, "overlapped", _overlap, known=(_NotAList,))
    if verdict is not None:
        return verdict
    count, wrong, hidden, calls, copy_streams, chained, compute_ratio = got
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
    if hidden < MIN_HIDDEN and chained:
        return Verdict(False, f"right results, but only {hidden:.0%} of the copy time was hidden behind compute{where} "
                              f"(needed: {MIN_HIDDEN:.0%}): each copy waited on the GPU for the compute queued before "
                              "it, so no copy could run beside compute. A copy_stream.wait_stream(compute stream) (or "
                              "an event of the compute stream) before each copy does that: the compute must wait for "
                              "the copies, not the copies for the compute.")
    if hidden < MIN_HIDDEN and compute_ratio < 1.0:
        return Verdict(False, f"right results, but only {hidden:.0%} of the copy time was hidden behind compute{where} "
                              f"(needed: {MIN_HIDDEN:.0%}): the compute ran in {compute_ratio:.0%} of the copies' "
                              "time, so most of each copy had nothing to hide behind. As the chunks come (float32), "
                              f"it takes about {COMPUTE_OVER_COPY:g}x a copy: give compute each chunk as it came, "
                              "outside autocast and without a cast (its precision is the model's, not the loop's).")
    if hidden < MIN_HIDDEN:
        return Verdict(False, f"right results, but only {hidden:.0%} of the copy time was hidden behind compute{where} "
                              f"(needed: {MIN_HIDDEN:.0%}): issue the copies on a stream of their own, non_blocking, "
                              "and let the host run ahead (no synchronize in the loop).")
    late_wrong, where, verdict = run_answer(overlapped, "overlapped", _overlap, True, known=(_NotAList,))
    if verdict is not None:
        return verdict
    if late_wrong:
        return Verdict(False, f"the copies overlap, but the caller's stream read {late_wrong} of {CHUNKS} results before "
                              f"the compute that makes them was done{where} (a run where each compute starts late): "
                              "whoever reads your results waits for the stream that made them. After the loop, make "
                              "the caller's stream wait for your compute stream (wait_stream, or an event): the "
                              "consumer waits before it reads.")
    return Verdict(True, f"{hidden:.0%} of the copy time was hidden behind compute, every result right{where} "
                         f"(the first copy has nothing to hide behind: {(CHUNKS - 1) / CHUNKS:.0%} is the best).")


# -- exercise 2: the missing sync in a GPU->host read ------------------------------------------------------------
def _read(b: Backend, read_losses: Callable) -> tuple[Any, list[float]]:
    """Run ``read_losses(losses, out)`` with the GPU's losses late (a spin ahead) and every copy of them late too;
    returns ``(what it returned, truth)``."""
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    truth = [round(_TRUTH.uniform(0.5, 3.0), 3) for _ in range(8)]
    out = torch.tensor([-1.0] * len(truth), pin_memory=True)  # last step's numbers, as far as anyone can tell
    expected = torch.tensor(truth)
    torch.cuda.Stream()  # the stream pool is built now: building it waits for the GPU, which would order the race
    torch.cuda.synchronize()
    b.late(2 * LATE_MS)  # the GPU is still busy with this step, longer than a copy takes...
    losses = b.late_copies(expected.to(dev, non_blocking=True), LATE_MS)  # ...so its losses arrive late
    got = read_losses(losses, out)
    torch.cuda.synchronize()
    return got, truth


@exercise("05.d2h_read")
def d2h_read(read_losses: Callable) -> Verdict:
    """Does ``read_losses(losses, out)`` return this step's losses, not what ``out`` held before?

    ``losses`` is on the GPU and is written late (behind a spin kernel of 2 x :data:`LATE_MS`), and each copy of
    it ends late too (a spin of :data:`LATE_MS` runs ahead of it: a big copy), so a wait for anything before the
    copy is certainly too early, and a copy on a stream that does not wait for the losses certainly reads them
    before they are written;
    ``out`` is a pinned host tensor that holds the step before's numbers. The checker draws new losses
    every time, so only a read after the copy has finished returns them. The same scenario runs on a GPU or, without
    one, on a simulated GPU with CUDA's rules.

    Example:
        >>> def no_sync(losses, out):
        ...     out.copy_(losses, non_blocking=True)
        ...     return out.tolist()
        >>> d2h_read(no_sync).right
        False
    """

    ran, where, verdict = run_answer(read_losses, "read_losses", _read)
    if verdict is not None:
        return verdict
    got, truth = ran
    truth = [round(float(v), 3) for v in truth]
    if not isinstance(got, list) or len(got) != len(truth) or not all(isinstance(v, (int, float)) for v in got):
        return Verdict(False, f"return the {len(truth)} losses as a list of numbers (out.tolist()), "
                              f"not {a_type(got)} {brief(str(got), 40)}.")
    if [round(float(v), 3) for v in got] != truth:
        stale = all(float(v) == -1.0 for v in got)
        return Verdict(False, ("you read out before the copy had landed: it still held the step before's numbers"
                               if stale else "the numbers returned are not this step's losses") + where
                       + ". Record an event after the copy and synchronize on it before reading.")
    return Verdict(True, f"this step's losses, read after their copy had finished{where}.")
