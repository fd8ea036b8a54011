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


def test_host_lead_answers():
    lead_ms = metrics.host_lead(reference.trace(1, "host_runs_ahead")).lead_us / 1e3
    assert al.check("01.host_lead", lead_ms).right
    assert "µs" in al.check("01.host_lead", lead_ms * 1e3).message
    assert not al.check("01.host_lead", None).right


def test_sync_ops_answers():
    right = {r["op"] for r in reference.results(1)["hidden_syncs"]["ops"] if r["syncs"]}
    assert al.check("01.sync_ops", right).right
    assert not al.check("01.sync_ops", right | {"t.sum()"}).right
    assert "not ops of the table" in al.check("01.sync_ops", {"x.foo()"}).message


def test_no_sync_loop():
    def fast(losses):
        total = torch.zeros((), device=losses[0].device)
        for loss in losses:
            total += loss
        return total.item()

    assert al.check("01.no_sync_loop", fast).right
    assert not al.check("01.no_sync_loop", lambda losses: sum(x.item() for x in losses)).right
    assert not al.check("01.no_sync_loop", lambda losses: 0.0).right


def test_median_iqr():
    times = reference.results(2)["spread"]["times_ms"]
    q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    assert al.check("02.median_iqr", statistics.median(times), q3 - q1).right
    assert not al.check("02.median_iqr", statistics.mean(times), q3 - q1).right


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
    assert not al.check("02.event_timer", naive_ms).right  # on a CPU by reading the code, on a GPU by timing
    assert not al.check("02.event_timer", lambda fn: 0.0).right


def test_live_lessons_and_cpu_timers():
    hw = al.inventory()
    n = sum(1 for x in al.lessons.LESSONS if x.gpus and hw.live(x.gpus))
    assert al.check("00.live_lessons", n).right and not al.check("00.live_lessons", n + 1).right
    x = torch.randn(128, 128)
    naive = al.naive_timer(lambda: x @ x, repeats=20, device="cpu")
    assert not al.check("00.cpu_timers_agree", naive, naive).right  # two naive timings
