"""Lesson 00 exercise checkers: what runs live here, and CPU timers that agree."""
from __future__ import annotations

from asynclab.gpu import hardware

from asynclab.course import registry as lessons
from asynclab.grading.checks import Verdict, exercise
from asynclab.gpu.timing import Timing


@exercise("00.replayed_lessons")
def replayed_lessons(answer: int) -> Verdict:
    """How many of the lessons written so far replay a reference on this machine instead of running live?

    Example:
        >>> replayed_lessons(-1).right
        False
    """
    hw = hardware.inventory()
    written = [item for item in lessons.LESSONS if item.ready and item.gpus > 0]
    right = sum(1 for item in written if not hw.live(item.gpus))
    import numbers

    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        return Verdict(False, "give a whole number.")
    answer = int(answer)
    if answer == right:
        return Verdict(True, f"{right} of the {len(written)} GPU lessons written so far replay their reference here "
                             f"(mode: {hw.mode}); the others run live.")
    return Verdict(False, "look at the lesson map: count the written lessons (no 'not written yet') whose last "
                          "column says 'replays'.")


@exercise("00.cpu_timers_agree")
def cpu_timers_agree(naive: Timing, synced: Timing) -> Verdict:
    """Time the same CPU work with naive_timer and sync_timer; on the CPU they should agree.

    Example:
        >>> t = Timing("naive", "wall clock on the CPU", (2.0,), None, 0, 1)
        >>> cpu_timers_agree(t, Timing("sync", "wall clock on the CPU", (2.1,), None, 0, 1)).right
        True
    """
    if not (isinstance(naive, Timing) and isinstance(synced, Timing)):
        return Verdict(False, "pass the two results of al.naive_timer(...) and al.sync_timer(...).")
    if (naive.method, synced.method) != ("naive", "sync"):
        return Verdict(False, f"got timers {naive.method!r} and {synced.method!r}; use naive first, then sync.")
    if "CPU" not in naive.measured or "CPU" not in synced.measured:
        return Verdict(False, "time CPU work: pass device='cpu' and build the tensors on the CPU.")
    # the fastest run of each: the one least disturbed by other programs on a busy machine (medians of two
    # separate blocks of runs drift apart when the machine's load changes between them). On the CPU both timers
    # time the whole op, so any gap is the machine's noise, never the answer's: the fastest runs of two blocks of a
    # multi-threaded op came 3.6x and 7.6x apart on a 2-core machine running other work. So what was timed is judged
    # by the timed code itself (the same code over the same objects) where the timers say what they timed; only
    # timings without that (made by hand) are judged by a gap beyond 5x.
    ratio = min(naive.times_ms) / min(synced.times_ms)
    same = naive.timed == synced.timed if naive.timed is not None and synced.timed is not None else 0.2 <= ratio <= 5
    if not same:
        return Verdict(False, f"naive/sync = {ratio:.2f}: time the same function with both timers.")
    why = "the CPU runs each op to the end before returning, so there is nothing left to wait for"
    if 0.5 <= ratio <= 2:
        return Verdict(True, f"naive/sync = {ratio:.2f}: {why}.")
    return Verdict(True, f"naive/sync = {ratio:.2f} (fastest runs): {why}; the gap is this machine's noise (other "
                         "programs ran meanwhile): run the cell again to see the two closer.")
