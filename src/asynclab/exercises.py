"""Exercise checkers for every lesson, registered by name with :func:`asynclab.checks.exercise`."""
from __future__ import annotations

from asynclab import hardware, lessons
from asynclab.checks import Verdict, exercise
from asynclab.timing import Timing


@exercise("00.live_lessons")
def live_lessons(answer: int) -> Verdict:
    """How many lessons run their GPU experiments live on this machine?

    Example:
        >>> live_lessons(-1).right
        False
    """
    hw = hardware.inventory()
    right = sum(1 for item in lessons.LESSONS if item.gpus > 0 and hw.live(item.gpus))
    if answer == right:
        return Verdict(True, f"{right} of {sum(1 for x in lessons.LESSONS if x.gpus)} GPU lessons run live here "
                             f"(mode: {hw.mode}); the rest replay their references.")
    return Verdict(False, "count the lessons whose 'GPUs' column is at most the number of GPUs in the hardware "
                          "report (lesson 00 needs none and is not a GPU lesson).")


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
    ratio = naive.median_ms / synced.median_ms
    if 0.7 <= ratio <= 1.4:
        return Verdict(True, f"naive/sync = {ratio:.2f}: the CPU runs each op to the end before returning, "
                             "so there is nothing left to wait for.")
    return Verdict(False, f"naive/sync = {ratio:.2f}; a busy CPU adds noise: use more repeats and compare medians.")
