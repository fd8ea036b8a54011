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
    if isinstance(answer, bool) or not isinstance(answer, int):
        return Verdict(False, "give a whole number.")
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
    if abs(span_ms - right) <= 0.02 * right:
        return Verdict(True, f"{span_ms:.3f} ms to issue what took the GPU "
                             f"{metrics.host_lead(trace).gpu_busy_us / 1e3:.1f} ms to run.")
    if abs(span_ms / 1e3 - right) <= 0.02 * right:
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
    originals = {name: getattr(torch.Tensor, name) for name in ("item", "tolist", "cpu", "__float__", "numpy")}

    def counting(name):
        def wrapper(self, *args, **kwargs):
            nonlocal reads
            reads += 1
            return originals[name](self, *args, **kwargs)
        return wrapper

    for name in originals:
        setattr(torch.Tensor, name, counting(name))
    syncs = []
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
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
    reads = max(reads, len(syncs))
    if not isinstance(result, (int, float)) or abs(result - expected) > 1e-3 * max(1.0, abs(expected)):
        return Verdict(False, f"the total should be {expected:.4f}, got {result!r}; return a Python number.")
    if reads > 1:
        return Verdict(False, f"{reads} host reads (.item(), float(), .cpu(), ...): keep the running sum on the "
                              "device, read it once.")
    return Verdict(True, "one read at the end: the host can run ahead for the whole loop.")


def _names_in_code(source: str) -> set[str]:
    """The names a piece of Python source uses, comments and strings left out (words in a comment don't count).

    Example:
        >>> sorted(_names_in_code("x.record()  # elapsed_time"))
        ['record', 'x']
    """
    import io
    import tokenize

    try:
        return {t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.NAME}
    except (tokenize.TokenError, IndentationError):
        return set()


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
    try:
        got = my_time_ms(fn)
    except Exception as err:  # noqa: BLE001 - the learner's code
        hint = " (CUDA events need a GPU: fall back to the wall clock without one)" if not torch.cuda.is_available() else ""
        return Verdict(False, f"your function raised {type(err).__name__}: {err}{hint}")
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return Verdict(False, "return the time in milliseconds as a number.")
    if 0.8 * target <= got * 1e3 <= 1.3 * target:
        return Verdict(False, f"{got} looks like seconds: return milliseconds.")
    if not torch.cuda.is_available():
        import inspect

        try:
            names = _names_in_code(inspect.getsource(my_time_ms))
        except (OSError, TypeError):
            names = set()
        missing = [word for word in ("Event", "enable_timing", "record", "synchronize", "elapsed_time")
                   if names and word not in names]  # without the source there is nothing to read
        if missing:
            return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms CPU workload, but only because the CPU is "
                                  "synchronous: on a GPU this would time the launch. Use CUDA events when a GPU is "
                                  f"there (your code lacks {', '.join(missing)}).")
    if 0.8 * target <= got <= 1.3 * target:
        return Verdict(True, f"{got:.2f} ms for a {target:.0f} ms workload.")
    if got < 0.1 * target:
        return Verdict(False, f"{got:.3f} ms for a {target:.0f} ms workload: you timed the launch. Wait for the GPU.")
    return Verdict(False, f"{got:.2f} ms for a {target:.0f} ms workload; check the units (ms).")


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
