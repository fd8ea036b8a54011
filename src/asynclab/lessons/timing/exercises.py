"""Lesson 02 exercise checkers: an event timer (on a real or simulated GPU) and the tail share of timings."""
from __future__ import annotations

from asynclab.checks import Verdict, exercise, raised
from asynclab.simgpu import SimulatedGPU


#: The simulated GPU's clock, for its spin kernels (an H100's boost clock): the work a timer is handed is a number
#: of cycles, as on a GPU, never the milliseconds the checker expects back.
SPIN_CYCLES_PER_MS = 1_980_000

#: The workloads each timer times, as multiples of the first (20 ms): a timer of the work grows with them.
SCALES = (1, 2, 4)


@exercise("02.event_timer")
def event_timer_answer(my_time_ms) -> Verdict:
    """Time GPU workloads of 20, 40 and 80 ms with the learner's timer: a real spin kernel, or a simulated GPU without one.

    Example:
        >>> event_timer_answer(lambda fn: 0.0).right
        False
    """
    import torch

    if not callable(my_time_ms):
        return Verdict(False, "pass your function my_time_ms itself.")
    target = 20.0
    simulated = not torch.cuda.is_available()
    where = " (on a simulated GPU: this machine has none)" if simulated else ""
    try:
        runs = [_time_workload(my_time_ms, k * target, simulated) for k in SCALES]
    except Exception as err:  # noqa: BLE001 - the learner's code
        return raised(err)
    (got, _, _), (twice, _, _) = runs[:2]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v, _, _ in runs):
        return Verdict(False, "return the time in milliseconds as a number.")
    if not all(done for _, _, done in runs):  # the timer returned while the GPU was still working: it cannot have timed the work
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms GPU workload{where}, and the GPU was still working "
                              "when your function returned: you timed the launch. Wait for the GPU before you read the time.")

    def fits(scale: float) -> bool:
        """The readings, taken as ``scale`` x ms, time the work: with or without the host's late wake-ups."""
        # a timer of the work grows with the workload (x2, x4); a timer of the launch does not (the value alone cannot
        # tell a launch's 0.02 ms from a 20 ms workload given in seconds, and two launches may differ by 2x by chance)
        for wake in (False, True):
            a, *more = (v * scale - (late if wake else 0.0) for v, late, _ in runs)
            if a > 0 and 0.8 * target <= a <= 1.3 * target and all(0.8 * k <= b / a <= 1.2 * k
                                                                    for k, b in zip(SCALES[1:], more)):
                return True
        return False

    if fits(1e3):
        return Verdict(False, f"{got} looks like seconds: return milliseconds.")
    if fits(1.0):
        return Verdict(True, f"{got:.2f} ms for a {target:.0f} ms GPU workload, {twice:.2f} ms for one twice as long{where}.")
    if got < 0.1 * target:
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms GPU workload{where}: you timed the launch. "
                              "Wait for the GPU before you read the time.")
    return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms GPU workload and {twice:.2f} ms for one twice as long"
                          f"{where}; check the units (ms) and that you time the work itself.")


def _time_workload(my_time_ms, ms: float, simulated: bool) -> tuple[object, float, bool]:
    """The learner's timer on a GPU workload of ``ms`` milliseconds (a spin kernel, or a simulated GPU's kernel).

    Returns ``(reading, late_ms, finished)``: ``late_ms`` is how late the host woke from the simulated
    GPU's waits during the learner's call (0 on a real GPU), which a wall-clock timer rightly includes;
    ``finished`` whether the work was done when the learner's function returned.
    """
    import torch

    if simulated:
        with SimulatedGPU() as gpu:
            cycles = ms * SPIN_CYCLES_PER_MS  # the work in clock cycles, as a spin kernel takes it on a GPU
            got = my_time_ms(lambda: gpu.kernel(cycles / SPIN_CYCLES_PER_MS))
            late, finished = gpu.late_ms, gpu.idle()
            gpu.synchronize()
        return got, late, finished
    from asynclab.experiments import spin_cycles

    cycles = spin_cycles(torch.device("cuda", torch.cuda.current_device()), ms)
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    got = my_time_ms(lambda: torch.cuda._sleep(cycles))
    finished = torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    return got, 0.0, finished


@exercise("02.tail_share")
def tail_share_answer(share: float) -> Verdict:
    """The share (0 to 1) of lesson 02's 200 reference timings that lie more than 10% above their median.

    Example:
        >>> tail_share_answer(2.0).right
        False
    """
    import statistics

    from asynclab import reference

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
