"""The replay's fixes (`asynclab.trace.analysis.whatif`) on the planted cases recorded on an NVIDIA H100: what each changes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from asynclab.trace import load_trace
from asynclab.trace.analysis.metrics import profiler_steps
from asynclab.trace.read.intervals import union
from asynclab.trace.analysis.replay import build_graph, replay
from asynclab.trace.analysis.whatif import OWN_WORK_MIN_US, context, fixed

CASES_DIR = Path(__file__).parents[1] / "fixtures" / "diagnose"
CASES = json.loads((CASES_DIR / "cases.json").read_text())["cases"]


def _graph(case: str, sms: int | None = None, on_gpu: bool = False):
    """The case's trace, its graph, the fixes' context and the steps' range: the host's ``ProfilerStep#N`` ranges, or
    the GPU's (``on_gpu``: where the GPU runs the steps behind the host, as diagnose then reads them)."""
    tr = load_trace(CASES_DIR / CASES[case]["bad"]["trace"])
    g = build_graph(tr.events, pd.NA)
    steps = profiler_steps(tr)
    if on_gpu:
        ev = tr.events
        gpu = ev[(ev["kind"] == "gpu_annotation") & ev["name"].astype(str).str.startswith("ProfilerStep#")]
        steps = gpu.groupby("name")[["start_us", "end_us"]].agg({"start_us": "min", "end_us": "max"})
    return tr, g, context(g, steps, sms), float(steps["start_us"].min()), float(steps["end_us"].max())


def test_an_unchanged_replay_keeps_the_first_calls_start():
    """The first runtime call's gap counts from the rank's first host row, and replays to where it was."""
    _, g, *_ = _graph("launch_bound")
    hs = replay(g)[0]
    assert g.h_origin <= g.h_start[0] and g.h_gap[0] == pytest.approx(g.h_start[0] - g.h_origin)
    assert hs[0] == pytest.approx(g.h_start[0])


def test_a_cuda_graph_takes_the_python_before_the_first_launch():
    """Captured, the step's Python before its first kernel goes too (PyTorch's own, between the step's start and
    its first launch), not only the time between launches."""
    _, g, ctx, lo, hi = _graph("launch_bound")
    before = g.h_start[0] - lo
    assert before > 100  # µs of the step's Python before its first launch, in the recording
    hs = replay(fixed(g, ["launch_bound"], lo, hi, ctx))[0]
    assert hs[0] - lo < 0.1 * before


def test_a_cuda_graph_keeps_the_hosts_own_work():
    """The host_sync case spends 2 ms a step in Python that launches nothing (a data pipeline's stand-in): capturing
    the launches leaves it, so the host's time between launches does not drop below it."""
    tr, g, ctx, lo, hi = _graph("host_sync")
    starts, ends = ctx["own_work"]
    names = set(tr.events.loc[tr.events["start_us"].isin(starts) & (tr.events["kind"] == "python"), "name"])
    assert any("host_work" in n for n in names) and not any("torch/" in n for n in names)
    assert (ends - starts).min() >= OWN_WORK_MIN_US
    mine = (starts >= lo) & (starts < hi)
    own = float(np.sum(np.subtract(*union(ends[mine], starts[mine])[::-1])))  # nested calls counted once
    g2 = fixed(g, ["launch_bound"], lo, hi, ctx)
    assert float(g2.h_gap[(g2.h_start >= lo) & (g2.h_start < hi)].clip(0).sum()) >= 0.99 * own


def test_the_backward_pass_is_not_the_hosts_own_work():
    """``run_backward`` launches from the autograd engine's thread: a call during which any thread launched is not
    the host's own work."""
    tr, _, ctx, *_ = _graph("launch_bound")
    starts, _ = ctx["own_work"]
    names = set(tr.events.loc[tr.events["start_us"].isin(starts) & (tr.events["kind"] == "python"), "name"])
    assert not any("run_backward" in n for n in names)


def test_underfilled_kernels_run_side_by_side_within_their_step():
    """Eight softmaxes of 8 blocks each on a GPU of 132 SMs: fixed, a step's eight start together, their blocks fit
    the SMs, and no step's kernels start before the last step's end."""
    tr, g, ctx, lo, hi = _graph("underfilled_gpu", sms=132, on_gpu=True)
    _, _, gs, ge = replay(fixed(g, ["underfilled_gpu"], 0.0, np.inf, ctx))
    k = np.flatnonzero(ctx["compute"])[-24:]  # the three profiled steps' (four kernels of the warm-up before them)
    assert ctx["blocks"][k].max() == 8
    groups = np.split(np.sort(gs[k]), 3)
    for group in groups:
        assert group.max() - group.min() < 0.1 * float(g.g_dur[k].min())
    for first, second in zip(groups, groups[1:]):
        assert second.min() >= first.min() + 0.99 * float(g.g_dur[k].min())
    alone = replay(fixed(g, ["underfilled_gpu"], 0.0, np.inf, {**ctx, "sms": None}))
    assert np.allclose(alone[2], replay(g)[2])  # without the SM count, nothing changes


def test_underfilled_kernels_fill_the_sms_and_no_more():
    """With 20 SMs, only two of the 8-block kernels fit together: groups of two, one after the other."""
    tr, g, ctx, lo, hi = _graph("underfilled_gpu", sms=20, on_gpu=True)
    _, _, gs, _ = replay(fixed(g, ["underfilled_gpu"], 0.0, np.inf, ctx))
    k = np.flatnonzero(ctx["compute"])[-24:]
    starts = np.sort(gs[k])
    together = np.diff(starts) < 0.1 * float(g.g_dur[k].min())
    assert together.sum() == len(k) // 2


def test_a_step_replays_as_one_of_a_run_of_steps_like_it():
    """A step that ends waiting for its GPU starts, in a run of such steps, with the GPU idle: the replay keeps its
    span. Once the fix lets the host leave the step before its GPU work ends, the next step starts with the GPU that
    far behind, still busy with the step before: the step is its span less that lag (its first work starts no
    sooner than the lag allows: a floor, where it would), shorter than the step alone, whose GPU began idle."""
    from asynclab.trace.analysis.replay import replayed_span
    from asynclab.trace.analysis.savings import _steady

    _, g, ctx, lo, hi = _graph("numpy_metric")
    segs = [(lo, hi, hi, 3)]
    floor, lags = _steady(g, replay(g), segs)
    assert floor is None and lags == [0.0]
    f = fixed(g, ["host_sync"], lo, hi, ctx)
    alone = replay(f)
    floor, (lag,) = _steady(f, alone, segs)
    assert lag > 1000.0
    steady = replayed_span(f, alone if floor is None else replay(f, None, floor), lo, hi, hi, lag)
    assert steady < replayed_span(f, alone, lo, hi, hi) - 1000.0
    early = np.full(len(f.g_start), np.nan)
    early[(f.g_start >= lo) & (f.g_start < hi)] = float(alone[2][f.g_start >= lo].min()) + 500.0
    assert replay(f, None, early)[2][f.g_start >= lo].min() == pytest.approx(early[f.g_start >= lo][0])


@pytest.mark.filterwarnings("ignore::asynclab.trace.read.events.TraceWarning")
def test_ranks_replay_together_so_that_each_collective_waits_for_its_last_rank():
    """A collective waits for its last rank, and the next one on its stream waits for it: the ranks replay together,
    each waiting at a collective until the others reach it, so that one more replay of each rank with when its peers
    joined changes nothing (three rounds of separate replays had left rank_skew's later all-reduces where the trace
    had them, behind the late rank of the trace)."""
    from asynclab.trace.analysis.replay import replay_together
    from asynclab.trace.analysis.savings import profiler_cost_per_op
    from asynclab.trace.analysis.whatif import profiler_free

    ev = load_trace(CASES_DIR / CASES["rank_skew"]["bad"]["trace"]).events
    host = ev["device"].isna().to_numpy(dtype=bool)
    graphs = [profiler_free(build_graph(ev, r), profiler_cost_per_op(ev[host & (ev["rank"] == r).fillna(False)
                                                                        .to_numpy(dtype=bool)]), -np.inf, np.inf)
              for r in (0, 1)]
    results = replay_together(graphs, [None, None])
    joined: dict = {}
    for g, res in zip(graphs, results):
        for key, t in zip(g.g_comm_key.tolist(), res[2].tolist()):
            if key is not None:
                joined[key] = max(joined.get(key, -np.inf), t)
    for g, res in zip(graphs, results):
        peers = np.array([joined.get(k, np.nan) if k is not None else np.nan for k in g.g_comm_key.tolist()])
        comm = np.isfinite(peers)
        assert comm.sum() >= 20
        again = replay(g, peers)
        assert np.abs(again[2] - res[2]).max() <= 1e-6 and np.abs(again[3] - res[3]).max() <= 1e-6
        assert (res[2][comm] < g.g_start[comm] - 1000.0).any()  # without the profiler's cost they move


@pytest.mark.filterwarnings("ignore::asynclab.trace.read.events.TraceWarning")
def test_a_kernel_launched_behind_a_running_one_is_queued_not_late():
    """A kernel launched while the one before it on its stream still ran waits for it, however long that takes:
    NCCL's all-reduces, back to back on their stream, start tens of µs after the one before, and a collective that
    waited for a late rank holds the next one. Its latency is a launch's, not the trace's wait."""
    tr = load_trace(CASES_DIR / CASES["rank_skew"]["bad"]["trace"])
    g = build_graph(tr.events, 0)
    hs = g.h_start[np.maximum(g.g_launch, 0)]
    queued = (g.g_launch >= 0) & (g.g_prev >= 0) & (g.g_end[np.maximum(g.g_prev, 0)] > hs) & (g.g_comm_key != None)  # noqa: E711
    assert queued.sum() >= 10
    assert (g.g_lat[queued] <= g.g_typical_lat + 1e-9).all()


@pytest.mark.filterwarnings("ignore::asynclab.trace.read.events.TraceWarning")
def test_a_busy_wait_on_a_clock_is_the_hosts_own_time_not_the_profilers():
    """rank_skew's late rank spins 4 ms a step on ``time.perf_counter()``, and with stacks each call is a recorded
    row. A loop of clock reads waits for a time, which the profiler's cost per row does not lengthen: its rows are
    not counted as the profiler's cost, and a CUDA graph (the fix of launch_bound) keeps it as the host's own work."""
    from asynclab.trace.analysis.savings import profiler_cost_per_op
    from asynclab.trace.analysis.whatif import context, fixed, profiler_free

    tr = load_trace(CASES_DIR / CASES["rank_skew"]["bad"]["trace"])
    ev = tr.events
    host = ev[(ev["rank"] == 1).fillna(False).to_numpy(dtype=bool) & ev["device"].isna().to_numpy(dtype=bool)]
    g = build_graph(ev, 1)
    free = profiler_free(g, profiler_cost_per_op(host), -np.inf, np.inf)
    spins = np.sort(host.loc[host["name"].astype(str).str.contains("perf_counter"), "start_us"].to_numpy(np.float64))
    holds = np.searchsorted(spins, g.h_start) - np.searchsorted(spins, g.prev_end()) > 1000
    assert holds.sum() >= 3                                    # one gap a step holds the spin
    assert free.h_gap[holds].min() >= 4000.0                   # and keeps its 4 ms (the other rows there are the profiler's)
    captured = fixed(free, ["launch_bound"], -np.inf, np.inf, context(g, pd.DataFrame({"start_us": [0.0]})))
    assert captured.h_gap[holds].min() >= 3500.0               # a CUDA graph does not replace it
