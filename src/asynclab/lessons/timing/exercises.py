"""Lesson 02 exercise checkers: an event timer (on a GPU or a simulated one) and the tail share of timings."""
from __future__ import annotations

from asynclab.grading.backend import Backend, backend
from asynclab.grading.checks import Verdict, exercise, not_judged, raised

#: The workloads each timer times, as multiples of the first (20 ms): a timer of the work grows with them.
SCALES = (1, 2, 4)


@exercise("02.event_timer")
def event_timer_answer(my_time_ms) -> Verdict:
    """Time GPU workloads of 20, 40 and 80 ms with the learner's timer: a spin kernel, on a GPU or a simulated one.

    Example:
        >>> event_timer_answer(lambda fn: 0.0).right
        False
    """
    if not callable(my_time_ms):
        return Verdict(False, "pass your function my_time_ms itself.")
    b = backend()
    try:
        with b:
            runs = [_time_workload(b, my_time_ms, k * TARGET_MS) for k in SCALES]
    except Exception as err:  # noqa: BLE001 - the learner's code
        return raised(err)
    verdict = _verdict([(got, done) for got, done, _ in runs], b.where)
    if not verdict.right and any(unseen for _, _, unseen in runs):
        return not_judged(*UNSEEN_CLOCK)
    return verdict


#: The first workload's length, in ms.
TARGET_MS = 20.0


def _verdict(runs: list[tuple[object, bool]], where: str) -> Verdict:
    """The verdict on the timer's ``(reading, work finished when it returned)`` for each of the workloads."""
    target = TARGET_MS
    (got, _), (twice, _) = runs[:2]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v, _ in runs):
        return Verdict(False, "return the time in milliseconds as a number.")
    if not all(done for _, done in runs):  # the timer returned while the GPU was still working: it cannot have timed the work
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms GPU workload{where}, and the GPU was still working "
                              "when your function returned: you timed the launch. Wait for the GPU before you read the time.")

    def fits(scale: float) -> bool:
        """The readings, taken as ``scale`` x ms, time the work."""
        # a timer of the work grows with the workload (x2, x4); a timer of the launch does not (the value alone cannot
        # tell a launch's 0.02 ms from a 20 ms workload given in seconds, and two launches may differ by 2x by chance)
        a, *more = (v * scale for v, _ in runs)
        return a > 0 and 0.8 * target <= a <= 1.3 * target and all(0.8 * k <= b / a <= 1.2 * k
                                                                    for k, b in zip(SCALES[1:], more))

    if fits(1e3):
        return Verdict(False, f"{got} looks like seconds: return milliseconds.")
    if fits(1.0):
        return Verdict(True, f"{got:.2f} ms for a {target:.0f} ms GPU workload, {twice:.2f} ms for one twice as long{where}.")
    if got < 0.1 * target:
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms GPU workload{where}: you timed the launch. "
                              "Wait for the GPU before you read the time.")
    return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms GPU workload and {twice:.2f} ms for one twice as long"
                          f"{where}; check the units (ms) and that you time the work itself.")


def _time_workload(b: Backend, my_time_ms, ms: float) -> tuple[object, bool, bool]:
    """The learner's timer on a GPU workload of ``ms`` milliseconds (a spin kernel, on a GPU or a simulated one).

    Returns ``(reading, finished, unseen)``: ``finished`` whether the work was done when the learner's function
    returned; ``unseen`` whether, on the simulated GPU, it ran the work and waited for it but read no clock there.
    """
    import torch

    cycles = b.cycles(ms)  # the work as a spin kernel takes it, never the milliseconds the checker expects back
    torch.cuda._sleep(cycles)  # once before: the spin kernel is loaded, and the GPU idle, when the timer starts
    torch.cuda.synchronize()
    read_before, ran = b.timer_reads(), []
    got = my_time_ms(lambda: ran.append(torch.cuda._sleep(cycles)))
    finished = torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    unseen = read_before is not None and b.timer_reads() == read_before and bool(ran) and finished
    return got, finished, unseen


#: What a timer whose clock the simulated GPU cannot see is told: what it reached for, and what to write instead.
UNSEEN_CLOCK = ("a clock the simulation does not move (datetime.now(), or one kept where the check cannot see it, "
                "such as a clock saved inside another module): your timer waited for the GPU, but read no clock "
                "the simulation moves",
                "look the clock up when your function runs: time.perf_counter(), time.monotonic(), "
                "time.process_time(), timeit.default_timer() or CUDA events")


@exercise("02.tail_share")
def tail_share_answer(share: float) -> Verdict:
    """The share (0 to 1) of lesson 02's 200 reference timings that lie more than 10% above their median.

    Example:
        >>> tail_share_answer(2.0).right
        False
    """
    import statistics

    from asynclab.course import reference

    times = reference.results(2)["spread"]["times_ms"]
    med = statistics.median(times)
    right = sum(1 for t in times if t > 1.1 * med) / len(times)
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        return Verdict(False, "give a number between 0 and 1.")
    if abs(share - right) < 1e-9 + 0.5 / len(times):
        return Verdict(True, f"{right:.1%} of the timings sit in the slow tail: one timing alone could be one of them.")
    if abs(share / 100 - right) < 0.5 / len(times):
        return Verdict(False, "that looks like a percentage: give a fraction (0 to 1).")
    return Verdict(False, "compute the median first, then count the timings above 1.1 x median, and divide by 200.")
