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


@exercise("01.host_lead")
def host_lead_answer(lead_ms: float) -> Verdict:
    """How long was the GPU still busy after the host's last launch, in the reference trace of lesson 01?

    Example:
        >>> host_lead_answer(None).right
        False
    """
    from asynclab import metrics, reference

    right = metrics.host_lead(reference.trace(1, "host_runs_ahead")).lead_us / 1e3
    if not isinstance(lead_ms, (int, float)):
        return Verdict(False, "give a number of milliseconds: the last kernel's end minus the last launch's end.")
    if abs(lead_ms - right) <= 0.05 * right:
        return Verdict(True, f"{lead_ms:.2f} ms (the trace says {right:.2f} ms): the host was done long before the GPU.")
    if abs(lead_ms / 1e3 - right) <= 0.05 * right:
        return Verdict(False, "that looks like µs: trace times are in µs, divide by 1000.")
    return Verdict(False, f"{lead_ms:.2f} ms is off; use the END of the last launch and the END of the last compute kernel.")


@exercise("01.sync_ops")
def sync_ops_answer(ops: set) -> Verdict:
    """Which ops of lesson 01's table make the host wait? Checked against the reference.

    Example:
        >>> sync_ops_answer({".item()"}).right
        False
    """
    from asynclab import reference

    rows = reference.results(1)["hidden_syncs"]["ops"]
    right = {r["op"] for r in rows if r["syncs"]}
    ops = set(ops or ())
    unknown = ops - {r["op"] for r in rows}
    if unknown:
        return Verdict(False, f"not ops of the table: {sorted(unknown)}; copy the names exactly.")
    if ops == right:
        return Verdict(True, "each of them needs a value or a size on the host.")
    return Verdict(False, f"{len(ops & right)} of {len(right)} right"
                          + (f"; these do not wait: {sorted(ops - right)}" if ops - right else "")
                          + (f"; {len(right - ops)} missing" if right - ops else "") + ".")


@exercise("01.no_sync_loop")
def no_sync_loop(fast_loop) -> Verdict:
    """Sum per-step losses without a sync per step: right total, at most one host read.

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
    reads = 0
    item = torch.Tensor.item

    def counting_item(self):
        nonlocal reads
        reads += 1
        return item(self)

    torch.Tensor.item = counting_item
    try:
        result = fast_loop(losses)
    finally:
        torch.Tensor.item = item
    if not isinstance(result, (int, float)) or abs(result - expected) > 1e-3 * max(1.0, abs(expected)):
        return Verdict(False, f"the total should be {expected:.4f}, got {result!r}; return a Python number.")
    if reads > 1:
        return Verdict(False, f"{reads} host reads (.item() calls): keep the running sum on the device, read once.")
    return Verdict(True, "one read at the end: the host can run ahead for the whole loop.")


@exercise("02.event_timer")
def event_timer_answer(my_time_ms) -> Verdict:
    """Time a workload of known length with the learner's timer (a GPU spin kernel, or a CPU sleep).

    Example:
        >>> import time
        >>> event_timer_answer(lambda fn: 0.0).right
        False
    """
    import time

    import torch

    if not callable(my_time_ms):
        return Verdict(False, "pass your function my_time_ms itself.")
    if torch.cuda.is_available():
        from asynclab.experiments import spin_cycles

        dev = torch.device("cuda", torch.cuda.current_device())
        cycles = spin_cycles(dev, 20.0)
        fn, target = (lambda: torch.cuda._sleep(cycles)), 20.0
        fn()
        torch.cuda.synchronize()
    else:
        fn, target = (lambda: time.sleep(0.02)), 20.0
    got = my_time_ms(fn)
    if not isinstance(got, (int, float)):
        return Verdict(False, "return the time in milliseconds as a number.")
    if not torch.cuda.is_available():
        import inspect

        try:
            source = inspect.getsource(my_time_ms)
        except (OSError, TypeError):
            source = ""
        missing = [word for word in ("enable_timing=True", ".record(", "synchronize(", "elapsed_time(")
                   if source and word not in source]  # without the source there is nothing to read
        if missing:
            return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms CPU workload, but only because the CPU is "
                                  "synchronous: on a GPU this would time the launch. Use CUDA events when a GPU is "
                                  f"there (your code lacks {', '.join(missing)}).")
    if 0.8 * target <= got <= 1.3 * target:
        return Verdict(True, f"{got:.2f} ms for a {target:.0f} ms workload.")
    if got < 0.1 * target:
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms workload: you timed the launch. Wait for the GPU.")
    return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms workload; check the units (ms).")


@exercise("02.median_iqr")
def median_iqr_answer(median_ms: float, iqr_ms: float) -> Verdict:
    """The median and IQR of lesson 02's 200 reference timings.

    Example:
        >>> median_iqr_answer(0.0, 0.0).right
        False
    """
    import statistics

    from asynclab import reference

    times = reference.results(2)["spread"]["times_ms"]
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    med, iqr = statistics.median(times), q3 - q1
    if not all(isinstance(v, (int, float)) for v in (median_ms, iqr_ms)):
        return Verdict(False, "give two numbers, in milliseconds.")
    ok_med, ok_iqr = abs(median_ms - med) <= 0.01 * med, abs(iqr_ms - iqr) <= 0.05 * iqr
    if ok_med and ok_iqr:
        return Verdict(True, f"median {med * 1e3:.2f} µs, IQR {iqr * 1e3:.2f} µs: the middle half lies within that band.")
    return Verdict(False, ("median right" if ok_med else "median off (sort, take the middle)") + ", "
                          + ("IQR right" if ok_iqr else "IQR off (third quartile minus first)") + ".")
