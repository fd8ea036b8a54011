"""Timers: what they return on the CPU, their arguments, and (on a GPU) that naive timing is wrong."""
import time

import pytest
import torch

from asynclab.gpu import timing


def sleepy():
    time.sleep(0.002)


@pytest.mark.parametrize("timer", [timing.naive_timer, timing.sync_timer, timing.event_timer])
def test_cpu_timers_measure_the_work(timer):
    t = timer(sleepy, repeats=5, warmup=1, device="cpu")
    assert len(t.times_ms) == 5
    assert 2.0 <= t.median_ms < 50
    assert t.first_call_ms is not None and t.first_call_ms >= 2.0
    assert "CPU" in t.measured


def test_inner_divides_per_call():
    t = timing.sync_timer(sleepy, repeats=3, inner=4, device="cpu")
    assert 2.0 <= t.median_ms < 20 and t.inner == 4


def test_benchmark_timer_on_cpu():
    t = timing.benchmark_timer(sleepy, min_run_time=0.05, device="cpu")
    assert 2.0 <= t.median_ms < 50 and t.method == "benchmark"


def test_timing_stats_by_hand():
    t = timing.Timing("x", "y", (1.0, 2.0, 3.0, 4.0, 100.0), None, 0, 1)
    assert t.median_ms == 3.0 and t.min_ms == 1.0 and t.max_ms == 100.0
    assert t.spread_ms == pytest.approx(2.0)  # quartiles 2 and 4
    assert "median 3 ms" in str(t)


def test_bad_arguments_are_clear():
    with pytest.raises(TypeError, match="callable"):
        timing.sync_timer(42)
    with pytest.raises(ValueError, match="repeats >= 1"):
        timing.sync_timer(sleepy, repeats=0)
    with pytest.raises(ValueError, match="unknown timer 'nope'"):
        timing.compare(sleepy, methods=("nope",))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_device_without_gpu_says_so():
    with pytest.raises(RuntimeError, match="sees no CUDA GPU"):
        timing.sync_timer(sleepy, device="cuda")


def test_compare_table():
    df = timing.compare(sleepy, methods=("naive", "sync"), repeats=3, device="cpu")
    assert list(df.columns[:3]) == ["median_ms", "iqr_ms", "n"]
    assert (df["median_ms"] >= 2.0).all()


def test_fmt_ms():
    assert timing.fmt_ms(0.5) == "500 µs"
    assert timing.fmt_ms(27.6) == "27.6 ms"


@pytest.mark.gpu
def test_naive_timer_misses_gpu_work_and_events_see_it():
    spin = lambda: torch.cuda._sleep(20_000_000)  # noqa: E731 - about 10 ms of GPU spinning
    naive = timing.naive_timer(spin, repeats=3)
    events = timing.event_timer(spin, repeats=3)
    synced = timing.sync_timer(spin, repeats=3)
    assert events.median_ms > 5 * naive.median_ms
    assert synced.median_ms == pytest.approx(events.median_ms, rel=0.2)
