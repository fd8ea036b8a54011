"""Tests for asynclab.trace.analysis.metrics on hand-built traces whose answers are worked out by hand."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from asynclab.trace.analysis.metrics import (
    stream_waits,
    BubbleReport, bubble_fraction, busy_time, concurrency, hidden_fraction, idle_gaps, launch_latency, overlap,
    host_lead, summary, top_kernels, union_length,
)
import asynclab as al
from asynclab.trace import load_trace
from tracegen import TraceBuilder, simple_trace

FIX = Path(__file__).parents[1] / "fixtures"

# simple_trace():  stream 7:  H2D [3,13)  A [13,33)  B [43,53)
#                  stream 13: C [23,38)   D2H [48,63)
#                  host: launches [0,2) [5,7) [8,10) [12,14) [30,32)


@pytest.fixture(scope="module")
def simple():
    return load_trace(simple_trace().to_dict(shuffle=5))


def test_union_length():
    assert union_length([0, 5, 20], [10, 12, 25]) == 17.0
    assert union_length([], []) == 0.0
    assert union_length([0, 0], [4, 4]) == 4.0
    assert union_length([0, 4], [4, 8]) == 8.0


def test_busy_time_by_lane(simple):
    b = busy_time(simple, by="lane")
    assert b.to_dict() == {"GPU 0 · stream 7 (default)": 40.0,  # [3,33) + [43,53)
                           "GPU 0 · stream 13": 30.0,           # 15 + 15
                           "CPU · main thread": 10.0}           # five 2-µs launches
    assert b.attrs["span_us"] == 63.0


def test_busy_time_by_device_counts_concurrent_streams_once(simple):
    b = busy_time(simple, by="device")
    assert b.to_dict() == {0: 55.0}  # [3,38) + [43,63)
    assert b.attrs["span_us"] == 60.0


def test_busy_time_overlapping_events_on_one_lane():
    b = TraceBuilder()
    b.kernel(0, 10, name="k1")
    b.kernel(5, 10, name="k2")  # overlaps k1 on the same stream
    b.kernel(30, 5, name="k3")
    t = load_trace(b.to_dict())
    assert busy_time(t).to_dict() == {"GPU 0 · stream 7 (default)": 20.0}
    with pytest.raises(ValueError, match="by must be"):
        busy_time(t, by="stream")


def test_sync_waits_are_not_busy_time():
    t = load_trace(FIX / "cuda_sync_offset.json")
    b = busy_time(t, by="lane")
    assert b["GPU 0 · stream 13"] == 5.0   # only the consumer kernel [13,18)
    assert b["GPU 0 · stream 7 (default)"] == 10.0
    assert "GPU 0 · host syncs" not in b.index


def test_concurrency(simple):
    c = concurrency(simple)
    # [3,23) 1 stream, [23,33) 2, [33,38) 1, [38,43) 0, [43,48) 1, [48,53) 2, [53,63) 1
    assert c.to_dict() == {0: 5.0, 1: 40.0, 2: 15.0}
    assert c.sum() == 60.0
    assert c.index.name == "streams_busy"
    assert concurrency(simple, device=0).equals(c)
    with pytest.raises(ValueError, match="no GPU 3"):
        concurrency(simple, device=3)


def test_concurrency_counts_streams_of_all_devices():
    t = load_trace(FIX / "p2p_2gpu.json.gz")
    # GPU 0 [3,21), GPU 1 [21,33): never together
    assert concurrency(t).to_dict() == {0: 0.0, 1: 30.0}
    b = TraceBuilder()
    b.kernel(0, 10, device=0)
    b.kernel(5, 10, device=1)
    b.kernel(6, 2, device=1, stream=13)
    t2 = load_trace(b.to_dict())
    # [0,5) 1, [5,6) 2, [6,8) 3, [8,10) 2, [10,15) 1
    assert concurrency(t2).to_dict() == {0: 0.0, 1: 10.0, 2: 3.0, 3: 2.0}


def test_overlap(simple):
    assert overlap(simple, ["h2d", "d2h"], "compute") == 5.0  # D2H [48,63) with B [43,53)
    assert overlap(simple, "h2d", "compute") == 0.0           # H2D ends where A starts
    # launches [12,14) and [30,32) overlap compute [13,38): 1 + 2 µs
    assert overlap(simple, "launch", "compute") == 3.0
    assert overlap(simple, "compute", "compute") == 35.0      # its own union: [13,38) + [43,53)
    assert overlap(simple, "memset", "compute") == 0.0


def test_hidden_fraction(simple):
    assert hidden_fraction(simple) == pytest.approx(5.0 / 25.0)
    assert hidden_fraction(simple, device=0) == pytest.approx(0.2)
    assert hidden_fraction(simple, copy_kinds=("d2h",)) == pytest.approx(5.0 / 15.0)
    b = TraceBuilder()
    b.kernel(0, 10)
    assert math.isnan(hidden_fraction(load_trace(b.to_dict())))


def test_hidden_fraction_fully_hidden_copy():
    b = TraceBuilder()
    b.kernel(0, 100, stream=7)
    b.memcpy(10, 20, direction="HtoD", stream=13)
    b.memcpy(90, 20, direction="DtoH", stream=13)  # half hidden
    t = load_trace(b.to_dict())
    assert hidden_fraction(t) == pytest.approx((20 + 10) / 40)


def test_hidden_fraction_is_per_device():
    b = TraceBuilder()
    b.kernel(0, 100, device=1)
    b.memcpy(10, 20, direction="HtoD", device=0)  # concurrent with GPU 1's kernel, but not on GPU 0
    assert hidden_fraction(load_trace(b.to_dict())) == 0.0


def test_idle_gaps(simple):
    g = idle_gaps(simple)
    assert g.to_dict("records") == [{"device": 0, "start_us": 38.0, "end_us": 43.0, "dur_us": 5.0}]
    assert len(idle_gaps(simple, min_gap_us=6)) == 0
    assert list(idle_gaps(simple, min_gap_us=6).columns) == ["device", "start_us", "end_us", "dur_us"]


def test_idle_gaps_two_devices():
    t = load_trace(FIX / "p2p_2gpu.json.gz")
    assert len(idle_gaps(t)) == 0
    b = TraceBuilder()
    for dev in (0, 1):
        b.kernel(0 + dev, 5, device=dev)
        b.kernel(20, 5, device=dev)
    g = idle_gaps(load_trace(b.to_dict()))
    assert g[["device", "start_us", "end_us"]].values.tolist() == [[0, 5.0, 20.0], [1, 6.0, 20.0]]


def test_launch_latency(simple):
    ll = launch_latency(simple)
    assert ll["name"].tolist() == ["Memcpy HtoD (Pageable -> Device)", "A", "C", "B", "Memcpy DtoH (Device -> Pageable)"]
    assert ll["latency_us"].tolist() == [3.0, 8.0, 11.0, 35.0, 18.0]
    assert ll["launch_name"].tolist() == ["cudaMemcpyAsync", "cudaLaunchKernel", "cudaLaunchKernel",
                                          "cudaLaunchKernel", "cudaMemcpyAsync"]
    assert (ll.index == simple.events.index[simple.events["device"].notna()]).all()


def test_launch_latency_cuda_graph():
    t = load_trace(FIX / "cuda_graph.json")
    ll = launch_latency(t)
    assert ll["latency_us"].tolist() == [6.0, 9.0, 12.0, 15.0, 18.0]  # the orphan kernel has no launch
    assert set(ll["launch_name"]) == {"cudaGraphLaunch"}


def test_bubble_fraction(simple):
    r = bubble_fraction(simple)
    assert isinstance(r, BubbleReport)
    assert (r.start_us, r.end_us, r.window_us) == (3.0, 63.0, 60.0)
    assert r.per_device.to_dict() == {0: pytest.approx(5 / 60)}
    assert r.mean == pytest.approx(5 / 60)
    assert "8.3%" in str(r)


def test_bubble_fraction_pipeline_two_gpus():
    t = load_trace(FIX / "p2p_2gpu.json.gz")
    r = bubble_fraction(t)
    # window [3, 33): GPU 0 busy [3,21) = 18, GPU 1 busy [21,33) = 12
    assert (r.start_us, r.end_us) == (3.0, 33.0)
    assert r.busy_us.to_dict() == {0: 18.0, 1: 12.0}
    assert r.per_device.to_dict() == {0: pytest.approx(0.4), 1: pytest.approx(0.6)}
    assert r.mean == pytest.approx(0.5)
    only1 = bubble_fraction(t, devices=[1])
    assert (only1.start_us, only1.end_us, only1.mean) == (21.0, 33.0, 0.0)
    fixed = bubble_fraction(t, devices=[0], start_us=0, end_us=40)
    assert fixed.per_device[0] == pytest.approx(1 - 18 / 40)


def test_bubble_fraction_errors():
    b = TraceBuilder()
    b.launch(0, 1, corr=1)
    b.cpu_op(0, 5)
    with pytest.raises(ValueError, match="no GPU work"):
        bubble_fraction(load_trace(b.to_dict()))


def test_metrics_on_a_window(simple):
    w = simple.window(20, 45)
    # clipped: A [20,33), C [23,38), B [43,45)
    assert busy_time(w, by="device").to_dict() == {0: 20.0}
    assert idle_gaps(w)[["start_us", "end_us"]].values.tolist() == [[38.0, 43.0]]


def test_top_kernels(simple):
    tk = top_kernels(simple)
    assert tk.index.tolist() == ["A", "C", "B"]
    assert tk["total_us"].tolist() == [20.0, 15.0, 10.0]
    assert tk["share"].sum() == pytest.approx(1.0)
    assert top_kernels(simple, n=1).index.tolist() == ["A"]


def test_summary_text(simple):
    s = summary(simple)
    assert "Devices: GPU 0" in s
    assert "GPU 0 · stream 7 (default)" in s and "busy     40.0 µs" in s
    assert "busy 55.0 µs of 60.0 µs active span; idle 5.0 µs (8.3%) in 1 gap(s)" in s
    assert "hidden fraction 20.0%" in s
    assert "median 11.0 µs" in s
    assert "Top kernels by total time:" in s
    lines = s.splitlines()
    top = lines[lines.index("Top kernels by total time:") + 1]
    assert top.strip().startswith("1.") and top.endswith("A")


def test_summary_cpu_only():
    b = TraceBuilder()
    b.cpu_op(0, 10, "aten::mm")
    b.cpu_op(12, 3, "aten::add")
    s = summary(load_trace(b.to_dict()))
    assert "none (CPU-only trace)" in s
    assert "aten::mm" in s


def test_metrics_accept_anything_load_trace_takes():
    d = simple_trace().to_dict()
    assert busy_time(d, by="device").to_dict() == {0: 55.0}
    assert isinstance(concurrency(d), pd.Series)
    assert np.isclose(hidden_fraction(d), 0.2)


def test_host_lead(simple):
    lead = host_lead(simple)
    # last launch of work ends at 32; the D2H ends at 63; busy = [3,38) + [43,63) = 35 + 20
    assert (lead.last_launch_end_us, lead.gpu_end_us, lead.lead_us, lead.gpu_busy_us) == (32.0, 63.0, 31.0, 55.0)
    assert "ran 31.0 µs ahead" in str(lead)


def test_host_lead_needs_gpu_work():
    b = TraceBuilder()
    b.launch(0, 2, corr=None, name="cudaDeviceSynchronize")
    with pytest.raises(ValueError, match="no GPU work"):
        host_lead(load_trace(b.to_dict()))



def _kernel(name, stream, ts, dur, corr=None, device=0):
    args = {"device": device, "stream": stream}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": args}


def _launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 1, "ts": ts, "dur": 2,
            "args": {"correlation": corr}}


def test_stream_waits_finds_held_back_work_and_what_it_waited_for():
    t = load_trace({"traceEvents": [
        _kernel("spin A", 13, 0, 1000), _kernel("spin B", 14, 0, 400),
        _launch(10, 1), _kernel("waits for A", 15, 1003, 5, corr=1),      # held back, starts as A ends
        _launch(12, 2), _kernel("waits for B", 7, 402, 5, corr=2),        # held back, starts as B ends
        _launch(14, 3), _kernel("free", 16, 17, 5, corr=3),               # starts at once: no wait
        _launch(16, 4), _kernel("held, no neighbour", 17, 700, 5, corr=4),  # held, nothing ended just before
        _kernel("after A on GPU 1", 21, 1001, 5, device=1, corr=5), _launch(18, 5),  # a wait across GPUs
    ]})
    w = stream_waits(t).set_index("name")
    assert w.loc["waits for A", "waited_for"] == "GPU 0 · stream 13"
    assert w.loc["waits for B", "waited_for"] == "GPU 0 · stream 14"
    assert w.loc["after A on GPU 1", "waited_for"] == "GPU 0 · stream 13"
    assert pd.isna(w.loc["held, no neighbour", "waited_for"])
    assert "free" not in w.index
    assert w.loc["waits for A", "gap_us"] == pytest.approx(3.0)
    assert w.loc["waits for A", "held_us"] == pytest.approx(1003 - 12)


def test_stream_waits_on_a_trace_without_waits_is_empty():
    t = load_trace({"traceEvents": [_launch(0, 1), _kernel("k", 7, 5, 5, corr=1)]})
    assert stream_waits(t).empty and list(stream_waits(t).columns)[:2] == ["lane", "name"]


# ---------------------------------------------------------------------------------------------
# communication and breakdowns, on the 2-rank DDP step recorded on 2x H200
# ---------------------------------------------------------------------------------------------
DDP = Path(__file__).parents[1] / "fixtures" / "recorded" / "h200x2_ddp"
#: HTA 0.5.0 on the same two files: TraceAnalysis(trace_dir, include_last_profiler_step=True)
#: .get_comm_comp_overlap() and .get_temporal_breakdown() (see tests/fixtures/README.md).
HTA_OVERLAP_PCT = {0: 82.01, 1: 84.68}
HTA_KERNEL_TIME_US = {0: 21801.0, 1: 21929.0}
HTA_NON_COMPUTE_US = {0: 870.0, 1: 1074.0}


def test_comm_overlap_agrees_with_hta_on_a_recorded_ddp_step():
    co = al.comm_overlap(load_trace(DDP))
    assert list(co.index) == [(0, 0), (1, 1)]
    for (rank, _), r in co.iterrows():
        assert abs(100 * r["overlap"] - HTA_OVERLAP_PCT[rank]) < 2.0, (rank, r["overlap"])
        assert 0 < r["overlapped_us"] < r["comm_us"]


def test_time_breakdown_adds_up_and_agrees_with_hta():
    tb = al.time_breakdown(load_trace(DDP))
    parts = tb[["compute_us", "comm_us", "copy_us", "memset_us", "idle_us"]].sum(axis=1)
    assert np.allclose(parts, tb["span_us"])
    for (rank, _), r in tb.iterrows():
        assert r["span_us"] == pytest.approx(HTA_KERNEL_TIME_US[rank], abs=2.0)
        non_compute = r["comm_us"] + r["copy_us"] + r["memset_us"]
        assert non_compute == pytest.approx(HTA_NON_COMPUTE_US[rank], abs=10.0)


def test_step_breakdown_cuts_at_host_steps():
    t = load_trace(DDP)
    sb = al.step_breakdown(t)
    assert sorted(sb["step"].unique().tolist()) == [2, 3] and len(sb) == 4
    assert np.allclose(sb[["compute_us", "comm_us", "copy_us", "memset_us", "idle_us"]].sum(axis=1), sb["span_us"])
    # steps of one GPU tile its time: step 3 starts where step 2 ends
    for _, g in sb.groupby("rank"):
        g = g.sort_values("step")
        assert g["start_us"].iloc[0] + g["span_us"].iloc[0] == pytest.approx(g["start_us"].iloc[1])
    with pytest.raises(ValueError, match="no ProfilerStep"):
        al.step_breakdown(simple_trace().to_dict())


def test_nccl_kernels_of_the_two_ranks_end_together():
    """Clock alignment on real data: each all-reduce ends on both ranks at (nearly) the same moment."""
    ev = load_trace(DDP).events
    comm = ev[ev["kind"] == "comm"]
    ends = [comm[comm["rank"] == r]["end_us"].to_numpy() for r in (0, 1)]
    assert len(ends[0]) == len(ends[1]) == 16
    assert np.median(np.abs(ends[0] - ends[1])) < 50.0


def test_bubble_fraction_counts_a_waiting_nccl_kernel_as_idle():
    b = TraceBuilder()
    b.kernel(0, 10, device=0, name="gemm")
    b.kernel(0, 10, device=1, name="ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)", stream=20)  # waits for GPU 0
    b.kernel(10, 10, device=1, name="gemm")
    report = al.bubble_fraction(load_trace(b.to_dict()))
    assert report.per_device.to_dict() == {0: 0.5, 1: 0.5}


def test_launchers_shows_autograds_thread_per_gpu():
    from asynclab.course import reference
    from asynclab.trace.analysis.metrics import launchers

    table = launchers(reference.trace(7, "naive"))  # recorded on 2x H200: forward, backward, SGD step
    assert list(table.columns) == ["GPU 0", "GPU 1"]
    assert (table.loc["CPU · main thread"] > 0).all()  # the forward and the optimizer step, on both GPUs
    autograd_1 = [lane for lane in table.index if "pt_autograd_1" in lane]
    assert autograd_1 and table.loc[autograd_1[0], "GPU 1"] > 10 * table.loc[autograd_1[0], "GPU 0"]
    assert int(table.to_numpy().sum()) == len(launch_latency(reference.trace(7, "naive")))


def test_busy_together_counts_only_time_all_gpus_work():
    from asynclab.trace.analysis.metrics import busy_together

    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": d, "tid": 7, "ts": ts, "dur": dur,
               "args": {"device": d, "stream": 7}}
              for d, ts, dur in [(0, 0, 10), (0, 10, 5), (1, 5, 20), (1, 40, 5), (0, 42, 1)]]
    trace = load_trace({"traceEvents": events})
    assert busy_together(trace) == 10.0 + 1.0  # [5, 15] and [42, 43]; GPU 0's touching kernels are one stretch
    assert busy_together(trace, devices=[1]) == 25.0
    with pytest.raises(ValueError, match="no GPU work"):
        busy_together(load_trace({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1,
                                                   "ts": 0, "dur": 1}]}))
