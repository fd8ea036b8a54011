"""Exercise checkers for every lesson, registered by name with :func:`asynclab.checks.exercise`."""
from __future__ import annotations

from asynclab import hardware, lessons
from asynclab.checks import Verdict, exercise
from asynclab.timing import Timing


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
    ratio = naive.median_ms / synced.median_ms
    if not 0.2 <= ratio <= 5:
        return Verdict(False, f"naive/sync = {ratio:.2f}: time the same function with both timers.")
    if 0.7 <= ratio <= 1.4:
        return Verdict(True, f"naive/sync = {ratio:.2f}: the CPU runs each op to the end before returning, "
                             "so there is nothing left to wait for.")
    return Verdict(False, f"naive/sync = {ratio:.2f}; a busy CPU adds noise: use more repeats and compare medians.")


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
    right = {r["op"] for r in rows if r["syncs"]}
    if isinstance(ops, str) or not all(isinstance(op, str) for op in (ops or ())):
        return Verdict(False, 'give a set of op names, e.g. {".item()", "print(t)"}.')
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
    # item(), float(), int(), bool() and f-strings reach _local_scalar_dense (counted below); these do not
    originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "cpu", "numpy")}

    def counting(name):
        def wrapper(self, *args, **kwargs):
            nonlocal reads
            reads += 1
            return originals[name](self, *args, **kwargs)
        return wrapper

    from torch.utils._python_dispatch import TorchDispatchMode

    class HostReads(TorchDispatchMode):
        """Counts the ATen ops that need a value or a data-dependent size on the host."""

        ops = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2")

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            nonlocal reads
            if func.__name__.split(".")[0] in self.ops:
                reads += 1
            return func(*args, **(kwargs or {}))

    for name in originals:
        setattr(torch.Tensor, name, counting(name))
    syncs = []
    mode = HostReads()
    mode.__enter__()
    try:
        if device == "cuda":
            import warnings

            old_mode = torch.cuda.get_sync_debug_mode()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    result = fast_loop(losses)
                finally:
                    torch.cuda.set_sync_debug_mode(old_mode)
            syncs = [w for w in caught if "synchroniz" in str(w.message) and "prototype" not in str(w.message)]
        else:
            result = fast_loop(losses)
    except Exception as err:  # noqa: BLE001 - the learner's code
        return Verdict(False, f"your function raised {type(err).__name__}: {err}")
    finally:
        mode.__exit__(None, None, None)
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
    reads = max(reads, len(syncs))
    if not isinstance(result, (int, float)) or abs(result - expected) > 1e-3 * max(1.0, abs(expected)):
        return Verdict(False, f"the total should be {expected:.4f}, got {result!r}; return a Python number.")
    if reads > 1:
        return Verdict(False, f"{reads} host reads (.item(), float(), .cpu(), ...): keep the running sum on the "
                              "device, read it once.")
    return Verdict(True, "one read at the end: the host can run ahead for the whole loop.")


class _SimulatedGPU:
    """A stand-in for ``torch.cuda`` on machines without a GPU, so that timer exercises check what code *does*.

    ``kernel(ms)`` enqueues work that "runs" in real time after whatever is queued, and returns at once,
    as a CUDA launch does. Events record the queue position, ``synchronize`` waits for it, and
    ``elapsed_time`` raises PyTorch's errors for events without timing or not yet completed.

    Example:
        >>> gpu = _SimulatedGPU()
        >>> with gpu:
        ...     import torch
        ...     start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ...     start.record(); gpu.kernel(5.0); end.record(); end.synchronize()
        ...     4.5 < start.elapsed_time(end) < 6.0
        True
    """

    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self.queue_end = 0.0
        self._saved: dict[str, object] = {}

    def _wait_until(self, t: float) -> None:
        import time

        delay = t - self._clock()
        if delay > 0:
            time.sleep(delay)

    def kernel(self, ms: float) -> None:
        self.queue_end = max(self.queue_end, self._clock()) + ms / 1e3

    def synchronize(self, device=None) -> None:
        self._wait_until(self.queue_end)

    def __enter__(self) -> "_SimulatedGPU":
        import torch

        gpu = self

        class Event:
            def __init__(self, enable_timing=False, blocking=False, interprocess=False):
                self.enable_timing, self.time = enable_timing, None

            def record(self, stream=None):
                self.time = max(gpu.queue_end, gpu._clock())

            def query(self):
                return self.time is not None and gpu._clock() >= self.time

            def synchronize(self):
                if self.time is not None:
                    gpu._wait_until(self.time)

            def wait(self, stream=None):
                pass

            def elapsed_time(self, end):
                if not (self.enable_timing and end.enable_timing):
                    raise ValueError("Both events must be created with argument 'enable_timing=True'.")
                if not (self.query() and end.query()):
                    raise RuntimeError("Both events must be completed before calculating elapsed time.")
                return (end.time - self.time) * 1e3

        class Stream:
            def synchronize(self):
                gpu.synchronize()

        fakes = {"is_available": lambda: True, "Event": Event, "synchronize": gpu.synchronize,
                 "current_stream": lambda device=None: Stream(), "default_stream": lambda device=None: Stream()}
        for name, fake in fakes.items():
            self._saved[name] = getattr(torch.cuda, name)
            setattr(torch.cuda, name, fake)
        return self

    def __exit__(self, *exc) -> None:
        import torch

        for name, original in self._saved.items():
            setattr(torch.cuda, name, original)
        self._saved.clear()


@exercise("02.event_timer")
def event_timer_answer(my_time_ms) -> Verdict:
    """Time a 20 ms GPU workload with the learner's timer: a real spin kernel, or a simulated GPU without one.

    Example:
        >>> event_timer_answer(lambda fn: 0.0).right
        False
    """
    import torch

    if not callable(my_time_ms):
        return Verdict(False, "pass your function my_time_ms itself.")
    target = 20.0
    simulated = not torch.cuda.is_available()
    try:
        if simulated:
            with _SimulatedGPU() as gpu:
                got = my_time_ms(lambda: gpu.kernel(target))
                gpu.synchronize()
        else:
            from asynclab.experiments import spin_cycles

            cycles = spin_cycles(torch.device("cuda", torch.cuda.current_device()), target)
            torch.cuda._sleep(cycles)
            torch.cuda.synchronize()
            got = my_time_ms(lambda: torch.cuda._sleep(cycles))
            torch.cuda.synchronize()
    except Exception as err:  # noqa: BLE001 - the learner's code
        return Verdict(False, f"your function raised {type(err).__name__}: {err}")
    where = " (on a simulated GPU: this machine has none)" if simulated else ""
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return Verdict(False, "return the time in milliseconds as a number.")
    if 0.8 * target <= got * 1e3 <= 1.3 * target:
        return Verdict(False, f"{got} looks like seconds: return milliseconds.")
    if 0.8 * target <= got <= 1.3 * target:
        return Verdict(True, f"{got:.2f} ms for a {target:.0f} ms GPU workload{where}.")
    if got < 0.1 * target:
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms GPU workload{where}: you timed the launch. "
                              "Wait for the GPU before you read the time.")
    return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms GPU workload{where}; check the units (ms).")


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
