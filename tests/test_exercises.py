"""Exercise checkers say right to right answers and not yet to the starter code."""
import statistics
import time

import pytest
import torch

import asynclab as al
from asynclab import metrics, reference


def test_unknown_exercise_and_wrong_arity():
    with pytest.raises(KeyError, match="no exercise"):
        al.check("99.nope", 1)
    assert not al.check("00.cpu_timers_agree", 1).right  # takes two answers


def test_enqueue_span_answers():
    from asynclab.exercises import enqueue_span_ms

    trace = reference.trace(1, "host_runs_ahead")
    span = enqueue_span_ms(trace)
    ev = trace.events
    kernels = ev[ev["kind"] == "compute"]
    assert len(kernels) == 20 and kernels["launch"].notna().all()
    assert 0 < span < metrics.host_lead(trace).gpu_busy_us / 1e3 / 10  # the host issues far faster than the GPU runs
    assert al.check("01.enqueue_span", span).right
    assert "µs" in al.check("01.enqueue_span", span * 1e3).message
    assert not al.check("01.enqueue_span", metrics.host_lead(trace).gpu_busy_us / 1e3).right  # GPU busy time
    assert not al.check("01.enqueue_span", None).right


def test_sync_ops_answers():
    right = {r["op"] for r in reference.results(1)["hidden_syncs"]["ops"] if r["syncs"]}
    assert al.check("01.sync_ops", right).right
    assert not al.check("01.sync_ops", right | {"t.sum()"}).right
    assert "not ops of the table" in al.check("01.sync_ops", {"x.foo()"}).message
    assert "set of op names" in al.check("01.sync_ops", ".item()").message


def test_no_sync_loop():
    def fast(losses):
        total = torch.zeros((), device=losses[0].device)
        for loss in losses:
            total += loss
        return total.item()

    assert al.check("01.no_sync_loop", fast).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(x.item() for x in losses)).right
    assert not al.check("01.no_sync_loop", lambda losses: 0.0).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(float(x) for x in losses)).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(x.cpu().tolist() for x in losses)).right
    assert "raised ZeroDivisionError" in al.check("01.no_sync_loop", lambda losses: 1 / 0).message


def test_tail_share():
    times = reference.results(2)["spread"]["times_ms"]
    med = statistics.median(times)
    share = sum(t > 1.1 * med for t in times) / len(times)
    assert 0 < share < 0.5
    assert al.check("02.tail_share", share).right
    assert "percentage" in al.check("02.tail_share", share * 100).message
    assert not al.check("02.tail_share", share + 0.05).right


def naive_ms(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def events_ms(fn):
    if not torch.cuda.is_available():
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def test_event_timer_exercise():
    assert al.check("02.event_timer", events_ms).right
    assert not al.check("02.event_timer", naive_ms).right  # on a real or a simulated GPU
    assert not al.check("02.event_timer", lambda fn: 0.0).right
    assert "seconds" in al.check("02.event_timer", lambda fn: events_ms(fn) / 1e3).message
    assert "raised" in al.check("02.event_timer", lambda fn: 1 / 0).message


def sync_before_only_ms(fn):
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    return start.elapsed_time(end)


def no_timing_events_ms(fn):
    start, end = torch.cuda.Event(), torch.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def sync_wall_clock_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def test_event_timer_checks_behaviour_not_words():
    assert "Both events must be completed" in al.check("02.event_timer", sync_before_only_ms).message
    assert "enable_timing" in al.check("02.event_timer", no_timing_events_ms).message
    assert al.check("02.event_timer", sync_wall_clock_ms).right  # synchronize around the call is right too
    assert "timed the launch" in al.check("02.event_timer", naive_ms).message


@pytest.mark.skipif(torch.cuda.is_available(), reason="the simulated GPU stands in only without a real one")
def test_simulated_gpu_restores_torch_cuda():
    from asynclab.exercises import _SimulatedGPU

    with _SimulatedGPU() as gpu:
        assert torch.cuda.is_available()
        gpu.kernel(1.0)
    assert not torch.cuda.is_available()


def test_live_lessons_and_cpu_timers():
    hw = al.inventory()
    n = sum(1 for x in al.lessons.LESSONS if x.ready and x.gpus and not hw.live(x.gpus))
    assert al.check("00.replayed_lessons", n).right and not al.check("00.replayed_lessons", n + 1).right
    assert not al.check("00.replayed_lessons", False).right
    x = torch.randn(128, 128)
    naive = al.naive_timer(lambda: x @ x, repeats=20, device="cpu")
    assert not al.check("00.cpu_timers_agree", naive, naive).right  # two naive timings
