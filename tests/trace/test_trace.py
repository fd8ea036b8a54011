"""Tests for asynclab.trace: every trace quirk, and every kind of bad input."""
from __future__ import annotations

import gzip
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import asynclab as al
from asynclab.trace import KINDS, Trace, TraceError, TraceWarning, load_trace
from tracegen import BASE_NS, EPOCH_US, TraceBuilder, simple_trace

FIX = Path(__file__).parents[1] / "fixtures"
# traces recorded with asynclab.gpu.record on real GPUs: ours in recorded/, more dropped into real/
RECORDED = FIX / "recorded"
REAL = sorted(RECORDED.glob("*.json.gz")) + (sorted((FIX / "real").glob("*.json.gz")) if (FIX / "real").is_dir() else [])


def load_quiet(src):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean fixture must load without any warning
        return load_trace(src)


def rows(t: Trace, name: str) -> pd.DataFrame:
    return t.events[t.events["name"] == name]


def one(t: Trace, name: str) -> pd.Series:
    r = rows(t, name)
    assert len(r) == 1, f"{name}: {len(r)} rows"
    return r.iloc[0]


# ---------------------------------------------------------------------------------------------
# the event model
# ---------------------------------------------------------------------------------------------
def test_columns_and_dtypes():
    t = load_quiet(simple_trace().to_dict())
    ev = t.events
    assert list(ev.columns) == ["kind", "name", "device", "stream", "lane", "pid", "tid", "start_us", "end_us",
                                "dur_us", "correlation", "bytes", "src_device", "dst_device", "launch", "rank", "blocks"]
    for col in ("device", "correlation", "bytes", "src_device", "dst_device", "launch", "rank", "blocks"):
        assert str(ev[col].dtype) == "Int64", col
    for col in ("start_us", "end_us", "dur_us"):
        assert ev[col].dtype == np.float64
    assert set(ev["kind"]) <= set(KINDS)
    assert ev.index.equals(pd.RangeIndex(len(ev)))
    assert np.allclose(ev["end_us"] - ev["start_us"], ev["dur_us"])
    host = ev[ev["device"].isna()]
    assert host["stream"].isna().all() and (host["kind"] == "launch").all()
    gpu = t.gpu()
    assert len(gpu) == 5 and gpu["stream"].notna().all()
    assert sorted(gpu["stream"].unique()) == ["13", "7"]


def test_simple_values_by_hand():
    t = load_quiet(simple_trace().to_dict(shuffle=11))  # events out of time order
    ev = t.events
    assert ev["start_us"].is_monotonic_increasing
    assert ev["start_us"].iloc[0] == 0.0
    a = one(t, "A")
    assert (a["kind"], a["device"], a["stream"], a["start_us"], a["end_us"]) == ("compute", 0, "7", 13.0, 33.0)
    assert a["lane"] == "GPU 0 · stream 7 (default)"
    launch = ev.loc[a["launch"]]
    assert (launch["name"], launch["start_us"], launch["correlation"]) == ("cudaLaunchKernel", 5.0, 2)
    h2d = rows(t, "Memcpy HtoD (Pageable -> Device)").iloc[0]
    assert (h2d["kind"], h2d["bytes"], h2d["dst_device"]) == ("h2d", 1000, 0)
    assert pd.isna(h2d["src_device"])
    d2h = rows(t, "Memcpy DtoH (Device -> Pageable)").iloc[0]
    assert (d2h["kind"], d2h["bytes"], d2h["src_device"], d2h["stream"]) == ("d2h", 2000, 0, "13")
    assert pd.isna(d2h["dst_device"])
    assert t.lanes() == ["GPU 0 · stream 7 (default)", "GPU 0 · stream 13", "CPU · main thread"]
    assert t.devices == [0]
    assert len(t) == 10
    r = repr(t)
    assert "10 events" in r and "1 GPU" in r and "63.0 µs" in r


def test_metadata_events_are_not_events():
    b = simple_trace()
    b.instant(1)
    b.counter(2, 5.0)
    t = load_quiet(b.to_dict())
    names = set(t.events["name"])
    assert not names & {"process_name", "thread_name", "process_labels", "GPU Memory",
                        "Iteration Start: PyTorch Profiler"}
    assert len(t) == 10
    assert t.meta["thread_names"][("4242", "4242")] == "thread 4242 (python)"
    assert t.meta["process_names"]["0"] == "GPU 0"


# ---------------------------------------------------------------------------------------------
# timestamps across PyTorch versions
# ---------------------------------------------------------------------------------------------
def test_epoch_and_base_time_timestamps_normalise_the_same():
    legacy = load_quiet(simple_trace("legacy").to_dict())
    modern = load_quiet(simple_trace("2.4").to_dict())
    cols = ["kind", "name", "start_us", "end_us", "stream", "launch"]
    pd.testing.assert_frame_equal(legacy.events[cols], modern.events[cols])
    assert legacy.meta["time_base"] == "epoch"
    assert legacy.meta["t0_epoch_us"] == EPOCH_US
    assert modern.meta["time_base"] == "baseTimeNanoseconds"
    assert modern.meta["baseTimeNanoseconds"] == BASE_NS
    assert modern.meta["t0_epoch_us"] == pytest.approx(BASE_NS / 1000 + 5_000_000.0)


def test_integer_epoch_timestamps_stay_exact():
    b = TraceBuilder("legacy")
    b.launch(0, 1, corr=1)
    b.kernel(123_456_789, 1, corr=1)  # two minutes later: still exact to the µs
    t = load_quiet(b.to_dict())
    assert one(t, "gemm_kernel")["start_us"] == 123_456_789.0


def test_fractional_nanosecond_timestamps():
    t = load_quiet(TraceBuilder("2.4").to_dict() | {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000.125, "dur": 0.25,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 1000.5, "dur": 0.001,
         "args": {"device": 0, "stream": 7}}]})
    assert t.events["start_us"].tolist() == [0.0, 0.375]
    assert t.events["dur_us"].tolist() == [0.25, 0.001]


# ---------------------------------------------------------------------------------------------
# fixtures of older and other formats
# ---------------------------------------------------------------------------------------------
def test_legacy_fixture():
    t = load_quiet(FIX / "legacy_pt21.json")
    ev = t.events
    assert t.meta["time_base"] == "epoch"
    assert ev["start_us"].is_monotonic_increasing  # the file is shuffled
    assert set(ev["kind"]) == {"launch", "h2d", "d2h", "compute", "memset", "other"}
    ms = one(t, "Memset (Device)")
    assert (ms["kind"], ms["bytes"], ms["start_us"]) == ("memset", 4096, 64.0)
    assert ev.loc[ms["launch"], "name"] == "cudaMemsetAsync"
    # legacy "Runtime" cat counts as launch; async_cpu_to_gpu flows and the orphan flow are ignored
    assert (ev.loc[ev["name"] == "cudaLaunchKernel", "kind"] == "launch").all()
    assert ev[ev["device"].notna() & (ev["kind"] != "other")]["launch"].notna().all()
    spans = one(t, "PyTorch Profiler (0)")  # pid "Spans", a string
    assert (spans["kind"], spans["pid"], spans["lane"]) == ("other", "Spans", "Spans · PyTorch Profiler")
    assert "Spans · PyTorch Profiler" not in t.lanes()


def test_pt24_fixture():
    t = load_quiet(FIX / "pt24_base_time.json")
    ev = t.events
    assert t.meta["baseTimeNanoseconds"] == BASE_NS
    assert t.meta["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert t.meta["distributedInfo"]["backend"] == "nccl"
    assert t.meta["schemaVersion"] == 1
    tiny = one(t, "tiny_kernel")
    assert (tiny["start_us"], tiny["dur_us"]) == (66.5, 0.25)
    drv = ev.loc[tiny["launch"]]
    assert (drv["name"], drv["kind"]) == ("cuLaunchKernel", "launch")  # cuda_driver
    fw = ev[ev["name"] == "forward"]
    assert sorted(fw["kind"]) == ["annotation", "gpu_annotation"]
    g = fw[fw["kind"] == "gpu_annotation"].iloc[0]
    assert (g["device"], g["stream"]) == (0, "7")
    # the worker thread that launched work gets its own lane, named from thread_name metadata
    assert t.lanes() == ["GPU 0 · stream 7 (default)", "GPU 0 · stream 13", "CPU · main thread",
                         "CPU · thread 777 (python)"]
    w = one(t, "from_worker")
    assert ev.loc[w["launch"], "lane"] == "CPU · thread 777 (python)"
    assert t.meta["main_thread"] == "4242/4242"


def test_rocm_fixture_string_streams():
    t = load_quiet(FIX / "amd_rocm.json")
    assert t.meta["platform"] == "rocm"
    assert t.lanes() == ["GPU 0 · stream 0", "GPU 0 · stream 1", "CPU · main thread"]  # no "(default)" on AMD
    k = one(t, "elementwise_kernel")
    assert (k["stream"], k["tid"]) == ("1", "1")
    assert t.events.loc[k["launch"], "name"] == "hipExtModuleLaunchKernel"
    assert one(t, "Memcpy HtoD (Pageable -> Device)")["kind"] == "h2d"


def test_an_mtia_trace_is_read_as_a_device():
    """MTIA's device rows (mtia_ccp_events) are its kernels, copies and waits, on its streams; its idle share is
    the one HolisticTraceAnalysis reads (4.3% of the active span), within a point."""
    t = load_quiet(FIX / "mtia_inference.json.gz")
    assert t.meta["platform"] == "mtia" and t.devices == [17]
    assert all(lane.startswith("MTIA 17 · stream ") for lane in t.lanes()[:12])
    kinds = t.events["kind"].value_counts()
    assert kinds["compute"] > 100 and kinds["h2d"] > 100 and kinds["d2h"] > 100 and kinds["launch"] > 100
    copies = t.events.loc[t.events["kind"].isin(["h2d", "d2h"]), "bytes"]
    assert copies.notna().all() and copies.min() > 0
    text = al.summary(t)
    assert "Devices: MTIA 17" in text
    idle = float(re.search(r"MTIA 17: busy .* idle .* \(([\d.]+)%\)", text).group(1))
    assert 3.3 <= idle <= 5.3, idle
    assert "MTIA idle" in str(al.diagnose(t)).splitlines()[0]


def test_stream_id_strings_that_are_not_numbers():
    t = load_quiet({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 0x7f3a", "ts": 1, "dur": 2,
         "args": {"device": 0, "stream": "0x7f3a"}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 2, "ts": 1, "dur": 2, "args": {"device": 0}}]})
    assert t.lanes() == ["GPU 0 · stream 2", "GPU 0 · stream 0x7f3a"]


def test_pytorch_1x_stream_tids():
    t = load_quiet({"traceEvents": [
        {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 1_600_000_000_000_010,
         "dur": 2, "args": {"device": 0, "stream": 7, "correlation": 3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 99, "tid": 99, "ts": 1_600_000_000_000_000,
         "dur": 4, "args": {"correlation": 3, "external id": 1}}]})
    k = one(t, "k")
    assert (k["stream"], k["lane"], k["launch"], k["start_us"]) == ("7", "GPU 0 · stream 7 (default)", 0, 10.0)


def test_cuda_graph_one_launch_many_kernels():
    t = load_quiet(FIX / "cuda_graph.json")
    ev = t.events
    graph = ev[ev["name"].str.startswith("graph_kernel")]
    assert len(graph) == 5
    assert graph["launch"].nunique() == 1
    assert ev.loc[int(graph["launch"].iloc[0]), "name"] == "cudaGraphLaunch"
    assert pd.isna(one(t, "orphan_kernel")["launch"])


def test_cuda_sync_rows_map_back_to_their_stream():
    t = load_quiet(FIX / "cuda_sync_offset.json")
    sync = t.events[t.events["kind"] == "sync"].set_index("name")
    assert sync.loc["Stream Wait Event", "stream"] == "13"   # tid 1000013, args.stream 13
    assert sync.loc["Stream Sync", "stream"] == "13"         # tid 1000013, no args.stream
    assert sync.loc["Device Sync", "stream"] == "-1"         # device-wide
    assert sync.loc["Stream Wait Event", "lane"] == "GPU 0 · stream 13"
    assert t.lanes() == ["GPU 0 · stream 7 (default)", "GPU 0 · stream 13", "GPU 0 · host syncs",
                         "CPU · main thread"]
    assert t.events.loc[sync.loc["Stream Sync", "launch"], "name"] == "cudaStreamSynchronize"


def test_p2p_fixture_gzip_two_gpus():
    t = load_quiet(FIX / "p2p_2gpu.json.gz")
    assert t.devices == [0, 1]
    p = one(t, "Memcpy PtoP (Device -> Device)")
    assert (p["kind"], p["device"], p["src_device"], p["dst_device"], p["bytes"]) == ("p2p", 0, 0, 1, 8 << 20)
    d = one(t, "Memcpy DtoD (Device -> Device)")
    assert (d["kind"], d["device"], d["src_device"], d["dst_device"]) == ("d2d", 1, 1, 1)
    assert t.lanes()[:2] == ["GPU 0 · stream 7 (default)", "GPU 1 · stream 7 (default)"]


def test_memcpy_direction_from_args_when_the_name_says_nothing():
    b = TraceBuilder("2.4")
    b.memcpy(0, 5, direction="DtoD", device=1, peer=(1, 0), name="Memcpy (copy)")
    b.memcpy(10, 5, direction="DtoD", device=1, name="Memcpy DtoD (Device -> Device)", peer=(1, 0))
    t = load_quiet(b.to_dict())
    assert t.events["kind"].tolist() == ["p2p", "p2p"]
    assert t.events["src_device"].tolist() == [1, 1] and t.events["dst_device"].tolist() == [0, 0]


def test_bare_list_and_dict_and_trace_sources():
    t = load_quiet(FIX / "bare_list.json")
    assert len(t) == 10 and t.devices == [0]
    d = simple_trace().to_dict()
    assert len(load_quiet(d)) == 10
    assert len(load_quiet(d["traceEvents"])) == 10
    assert load_trace(t) is t


def test_gzip_detected_by_content_not_name(tmp_path):
    p = tmp_path / "trace.json"
    p.write_bytes(gzip.compress(json.dumps(simple_trace().to_dict()).encode()))
    assert len(load_quiet(p)) == 10


def test_profiler_object_cpu():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(32, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            with record_function("my_block"):
                (x @ x).sum()
    t = load_trace(prof)
    assert t.source == "<profiler>"
    assert (t.events["kind"] == "cpu_op").sum() >= 2
    assert "my_block" in set(t.events.loc[t.events["kind"] == "annotation", "name"])
    assert t.lanes() == ["CPU · main thread"]  # no launches: the CPU threads stand in
    w = t.window(annotation="my_block")
    assert (w.events["kind"] == "cpu_op").any()


def test_bookkeeping_rows_do_not_rename_the_main_thread():
    b = simple_trace()
    b.events.append({"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0,
                     "ts": b.t(1), "dur": 3})
    t = load_quiet(b.to_dict())
    assert t.lanes()[-1] == "CPU · main thread"
    assert one(t, "Activity Buffer Request")["lane"] == "pid -1 · thread 0"


# ---------------------------------------------------------------------------------------------
# real traces, recorded with asynclab.gpu.record (torch 2.11, CUDA 13) on an H100 and on 2x H200
# ---------------------------------------------------------------------------------------------
def _launch_names(t: Trace) -> pd.Series:
    g = t.events[t.events["device"].notna() & t.events["launch"].notna()]
    return pd.Series(t.events.loc[g["launch"].astype(int), "name"].to_numpy(), index=g.index)


def test_recorded_h100_overlap():
    t = load_quiet(RECORDED / "h100_overlap.json.gz")
    ev = t.events
    assert t.lanes() == ["GPU 0 · stream 7 (default)", "GPU 0 · stream 13", "CPU · main thread"]
    assert t.meta["time_base"] == "baseTimeNanoseconds" and t.meta["cuda_runtime_version"] == 13000
    h2d = ev[ev["kind"] == "h2d"]
    assert len(h2d) == 3 and set(h2d["stream"]) == {"13"} and set(h2d["bytes"]) == {4096 * 4096 * 4}
    assert set(h2d["name"]) == {"Memcpy HtoD (Pinned -> Device)"}
    gpu_work = ev[ev["kind"].isin(["compute", "h2d", "d2h", "memset"])]
    assert gpu_work["launch"].notna().all()  # every kernel and copy finds its launch by correlation
    launches = _launch_names(t)
    graph = launches[launches == "cudaGraphLaunch"]
    assert len(graph) == 12  # 3 graph replays of 4 kernels each, one launch each
    assert ev.loc[graph.index, "launch"].value_counts().tolist() == [4, 4, 4]
    assert (ev.loc[ev["kind"] == "annotation", "name"].value_counts() == 3).all()
    w = t.window(annotation="copy_and_compute", occurrence=0)
    assert set(w.events["kind"]) >= {"h2d", "compute", "launch"}


def test_recorded_h200_cuda_sync_events():
    t = load_quiet(RECORDED / "h200x2_overlap_sync.json.gz")
    sync = t.events[t.events["kind"] == "sync"]
    assert len(sync) == 14
    assert set(sync["name"]) == {"Stream Wait Event", "Stream Sync", "Context Sync"}
    ctx = sync[sync["name"] == "Context Sync"]
    assert set(ctx["stream"]) == {"-1"} and set(ctx["lane"]) == {"GPU 0 · host syncs"}
    assert set(sync.loc[sync["name"] == "Stream Wait Event", "stream"]) == {"7"}
    assert sync["launch"].notna().all()
    assert set(t.events.loc[ctx["launch"].astype(int), "name"]) == {"cudaDeviceSynchronize"}


def test_recorded_h200x2_p2p():
    t = load_quiet(RECORDED / "h200x2_p2p.json.gz")
    assert t.devices == [0, 1]
    p = t.events[t.events["kind"] == "p2p"]
    assert len(p) == 3
    assert (p["device"] == 0).all() and (p["src_device"] == 0).all() and (p["dst_device"] == 1).all()
    assert set(p["bytes"]) == {8192 * 8192 * 4}
    assert t.lanes() == ["GPU 0 · stream 7 (default)", "GPU 0 · host syncs", "GPU 1 · stream 145",
                         "GPU 1 · host syncs", "CPU · main thread"]


def test_recorded_h200x2_microbatch_forward_backward():
    from asynclab.trace.analysis.metrics import bubble_fraction, busy_time

    t = load_quiet(RECORDED / "h200x2_microbatch.json.gz")
    assert t.devices == [0, 1]
    p = t.events[t.events["kind"] == "p2p"]
    # 4 micro-batches: activations go 0 -> 1 in the forward, their gradients 1 -> 0 in the backward
    pairs = sorted(zip(p["src_device"].astype(int), p["dst_device"].astype(int)))
    assert pairs == [(0, 1)] * 4 + [(1, 0)] * 4
    assert set(p["bytes"]) == {1024 * 2048 * 4}
    assert (p["device"] == p["src_device"]).all()
    assert [x for x in t.lanes() if "autograd" in x] == ["CPU · thread 630 (pt_autograd_1)",
                                                         "CPU · thread 629 (pt_autograd_0)"]
    names = t.events.loc[t.events["kind"] == "annotation", "name"].tolist()
    assert [n for n in names if n.startswith("forward")] == [f"forward mb{i}" for i in range(4)]
    report = bubble_fraction(t)
    busy = busy_time(t, by="device")
    for dev in (0, 1):  # idle = window - busy, by construction of the report
        assert report.idle_us[dev] == pytest.approx(report.window_us - busy[dev], abs=1e-6)
    assert 0.2 < report.per_device[0] < 0.6 and 0.2 < report.per_device[1] < 0.6


# ---------------------------------------------------------------------------------------------
# damaged files
# ---------------------------------------------------------------------------------------------
def test_truncated_file_loads_what_is_complete():
    with pytest.warns(TraceWarning, match=r"truncated\.json.*truncated.*loaded the 9 complete events"):
        t = load_trace(FIX / "truncated.json")
    assert len(t) == 9
    assert t.meta["recovered_events"] == 9
    assert t.meta["baseTimeNanoseconds"] == BASE_NS  # header written before traceEvents is kept
    assert one(t, "B")["start_us"] == 43.0


def test_truncated_gzip(tmp_path):
    raw = gzip.compress(json.dumps(simple_trace().to_dict(), indent=1).encode())
    p = tmp_path / "killed.json.gz"
    p.write_bytes(raw[: int(len(raw) * 0.8)])
    with pytest.warns(TraceWarning, match="killed.json.gz"):
        t = load_trace(p)
    assert 0 < len(t) < 10


def test_gzip_damaged_in_the_middle_keeps_the_start(tmp_path):
    from tracegen import big_trace_events

    raw = bytearray(gzip.compress(json.dumps(big_trace_events(80_000)).encode(), 1))
    assert len(raw) > 4 * (1 << 18)  # several decompression chunks
    cut = int(len(raw) * 0.75)
    raw[cut:cut + 64] = bytes(64)
    p = tmp_path / "damaged.json.gz"
    p.write_bytes(bytes(raw))
    with pytest.warns(TraceWarning, match="damaged.json.gz.*complete events"):
        t = load_trace(p)
    assert 5_000 < len(t) < 47_000  # of 48,000


def test_truncated_bare_list(tmp_path):
    text = json.dumps(simple_trace().to_dict()["traceEvents"])
    p = tmp_path / "cut.json"
    p.write_text(text[: int(len(text) * 0.7)])
    with pytest.warns(TraceWarning, match="cut.json"):
        t = load_trace(p)
    assert 0 < len(t) < 10


def test_malformed_events_are_skipped_with_one_warning():
    d = simple_trace().to_dict()
    d["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "bad_ts", "pid": 0, "tid": 7, "ts": "soon",
                             "dur": 1, "args": {"device": 0}})
    d["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "neg", "pid": 0, "tid": 7, "ts": 5, "dur": -3})
    d["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "nodur", "pid": 0, "tid": 7, "ts": 5})
    d["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "numstr", "pid": 0, "tid": 7,
                             "ts": "5000040", "dur": "2", "args": {"device": 0}})  # numeric strings are fine
    d["traceEvents"].append(["not", "an", "event"])
    d["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "weird_args", "pid": 0, "tid": 7,
                             "ts": 5000041, "dur": 1, "args": [1, 2]})
    with pytest.warns(TraceWarning, match=r"skipped 3 malformed event"):
        t = load_trace(d)
    assert set(t.events["name"]) >= {"numstr", "weird_args"}
    assert not set(t.events["name"]) & {"bad_ts", "neg", "nodur"}
    assert t.meta["skipped_events"] == 3
    assert one(t, "numstr")["start_us"] == 40.0


# ---------------------------------------------------------------------------------------------
# bad input: one clear TraceError naming the file
# ---------------------------------------------------------------------------------------------
def _bad(tmp_path, name: str, content: bytes | str | None):
    p = tmp_path / name
    if isinstance(content, str):
        p.write_text(content)
    elif content is not None:
        p.write_bytes(content)
    return p


BAD = [
    ("missing.json", None, "no such file"),
    ("empty.json", b"", "empty"),
    ("blank.json", "  \n\t ", "only whitespace"),
    ("text.json", "hello, I am not JSON", "not JSON"),
    ("html.json", "<html><body>404</body></html>", "not JSON"),
    ("binary.json", bytes(range(256)) * 4, "binary"),
    ("latin.json", b"\xff\xfe\xfa garbage \xe9\xe8", "not"),
    ("notrace.json", json.dumps({"hello": "world"}), "no 'traceEvents'"),
    ("evnotlist.json", json.dumps({"traceEvents": {"a": 1}}), "not a list"),
    ("evempty.json", json.dumps({"traceEvents": []}), "no events"),
    ("garbage_list.json", json.dumps([1, "two", None, [3]]), "no event objects"),
    ("number.json", "42", "not a trace"),
    ("string.json", '"traceEvents"', "not a trace"),
    ("only_meta.json", json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 0,
                                                    "args": {"name": "x"}}]}), "no complete events"),
    ("all_bad.json", json.dumps({"traceEvents": [{"ph": "X", "name": "k", "ts": "x", "dur": 1},
                                                 {"ph": "X", "name": "k", "ts": 1, "dur": -1}]}), "no valid events"),
    ("nothing_useful.json", json.dumps({"traceEvents": [{"ph": "X", "cat": "Trace", "name": "span",
                                                         "pid": "Spans", "tid": "x", "ts": 1, "dur": 5}]}),
     "no GPU or host activity"),
    ("fakegz.json.gz", json.dumps(simple_trace().to_dict()), "not gzip"),
    ("corrupt.json.gz", b"\x1f\x8b\x08\x00" + bytes(range(200)), "gzip"),
    ("cut_early.json", '{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "ker', "no complete event"),
    ("cut_header.json", '{"schemaVersion": 1, "deviceProp', "invalid JSON"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "not a trace"),
]


@pytest.mark.parametrize("name,content,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_input_gives_one_clear_error(tmp_path, name, content, needle):
    p = _bad(tmp_path, name, content)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        with pytest.raises(TraceError) as ei:
            load_trace(p)
    msg = str(ei.value)
    assert msg.startswith(str(p) + ": "), msg
    assert needle.lower() in msg.lower(), msg
    assert "\n" not in msg
    assert isinstance(ei.value, ValueError)
    # no chained traceback from deep inside (json, gzip, numpy)
    assert ei.value.__cause__ is None and (ei.value.__context__ is None or ei.value.__suppress_context__)


def test_directory_is_an_error(tmp_path):
    with pytest.raises(TraceError, match="holds no trace files"):
        load_trace(tmp_path)


def test_unsupported_source_type():
    with pytest.raises(TraceError, match="not a trace"):
        load_trace(3.14)


# ---------------------------------------------------------------------------------------------
# windows
# ---------------------------------------------------------------------------------------------
def test_window_by_time_clips_and_keeps_overlapping_events():
    t = load_quiet(simple_trace().to_dict())
    w = t.window(20, 45)
    ev = w.events
    assert set(ev["name"]) == {"A", "B", "C", "cudaMemcpyAsync"}
    a = ev[ev["name"] == "A"].iloc[0]
    assert (a["start_us"], a["end_us"], a["dur_us"]) == (20.0, 33.0, 13.0)
    # launches outside the window are gone, so the GPU rows lose their launch
    assert pd.isna(a["launch"])
    memcpy_launch = ev[ev["name"] == "cudaMemcpyAsync"]
    assert memcpy_launch["start_us"].tolist() == [30.0]
    assert w.meta["window"] == (20.0, 45.0)
    unclipped = t.window(20, 45, clip=False).events
    assert unclipped.loc[unclipped["name"] == "A", "start_us"].tolist() == [13.0]
    assert t.window(0, 100).events.index.equals(t.events.index)


def test_window_keeps_launch_links_inside():
    t = load_quiet(simple_trace().to_dict())
    w = t.window(4, 40)
    c = w.events[w.events["name"] == "C"].iloc[0]
    assert w.events.loc[c["launch"], "start_us"] == 12.0


def test_window_by_annotation():
    t = load_quiet(FIX / "pt24_base_time.json")
    w = t.window(annotation="forward")
    assert w.meta["window"] == (0.0, 40.0)  # host 0..40, GPU 3..38
    b = t.window(annotation="backward")
    assert b.meta["window"] == (41.0, 71.0)
    assert "B" in set(b.events["name"]) and "A" not in set(b.events["name"])
    assert t.window(annotation="forward", occurrence=0).meta["window"] == (0.0, 40.0)
    with pytest.raises(TraceError, match=r"no annotation named 'fwd' \(annotations here: forward, backward"):
        t.window(annotation="fwd")
    with pytest.raises(TraceError, match="occurs 1 time"):
        t.window(annotation="forward", occurrence=3)


def test_window_errors():
    t = load_quiet(simple_trace().to_dict())
    with pytest.raises(TraceError, match="after its end"):
        t.window(50, 10)
    with pytest.raises(TraceError, match="not both"):
        t.window(1, 2, annotation="x")
    with pytest.raises(TraceError, match="no record_function annotations"):
        t.window(annotation="x")


# ---------------------------------------------------------------------------------------------
# every real trace (tests/fixtures/recorded/ and any *.json.gz dropped into tests/fixtures/real/)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", REAL or [pytest.param(None, marks=pytest.mark.skip(reason="no real traces yet"))],
                         ids=[p.name for p in REAL] or ["none"])
def test_real_trace_loads_renders_and_summarises(path, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asynclab.trace.analysis.metrics import busy_time, summary
    from asynclab.trace.draw.timeline import draw_timeline

    t = load_trace(path)
    assert len(t) > 0
    assert t.devices, "a real GPU trace has GPU rows"
    assert (t.events["kind"] == "compute").any()
    assert t.events["start_us"].min() == 0.0
    gpu = t.gpu()
    work = gpu[gpu["kind"].isin(["compute", "h2d", "d2h", "d2d", "p2p", "memset"])]
    assert work["launch"].notna().mean() > 0.5, "most GPU work should find its launch by correlation"
    assert any(lane.startswith("CPU · main thread") for lane in t.lanes())
    b = busy_time(t, by="device")
    assert (b > 0).all()
    text = summary(t)
    assert "Top kernels" in text
    tl = draw_timeline(t, arrows=True)
    out = tl.savefig(tmp_path / (path.name + ".png"))
    assert Path(out).stat().st_size > 10_000
    plt.close(tl.fig)


@pytest.mark.parametrize("extra", [{}, {"host_name": "lab-3", "tw_job": {"id": [1, 2]}}])
def test_a_files_top_level_fields_reach_meta_whichever_pass_reads_them(tmp_path, extra):
    """A document with only the fields torch.profiler writes is read in one pass; one with others in two: both give
    every field, as the stdlib reads them."""
    from asynclab.trace.read import io

    doc = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H100 80GB HBM3"}], **extra,
           "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 3,
                            "args": {"device": 0, "stream": 7}}], "traceName": "t.json", "baseTimeNanoseconds": 9}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    raw = io.read_file(path, str(path))
    assert raw.typed and raw.header == {k: v for k, v in doc.items() if k != "traceEvents"}
    assert load_trace(path).meta["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    path.write_text(json.dumps({k: v for k, v in doc.items() if k != "traceEvents"}))
    with pytest.raises(TraceError):
        load_trace(path)


def test_a_large_file_is_read_through_a_memory_map_that_is_closed_once_it_is_read(tmp_path, monkeypatch):
    import mmap

    from asynclab.trace.read import io

    maps = []

    class Recorded(mmap.mmap):
        def __new__(cls, *a, **k):
            m = super().__new__(cls, *a, **k)
            maps.append(m)
            return m

    monkeypatch.setattr(io.mmap, "mmap", Recorded)
    doc = simple_trace().to_dict()
    good = tmp_path / "t.json"
    good.write_text(json.dumps(doc))
    load_trace(good)
    assert maps == []  # a small file is read
    monkeypatch.setattr(io, "MAP_FROM_BYTES", 0)  # the small files here mapped too
    bad = tmp_path / "cut.json"  # the stdlib path reads what the map held, and recovers
    bad.write_text(json.dumps(doc)[:-40])
    assert load_trace(good).events.equals(load_trace(doc).events)
    with pytest.warns(TraceWarning, match="truncated"):
        load_trace(bad)
    assert len(maps) == 2 and all(m.closed for m in maps)


def test_a_stream_that_cannot_be_mapped_is_read_instead():
    import os

    from asynclab.trace.read import io

    r, w = os.pipe()
    os.write(w, b'{"traceEvents": []}')
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        assert io._contents(fh) == b'{"traceEvents": []}'


def test_names_and_categories_of_any_json_type_load_as_text():
    doc = simple_trace().to_dict()
    extra = [{"ph": "X", "cat": {"odd": 1}, "name": ["a", 1], "pid": 1, "tid": 1, "ts": doc["traceEvents"][-1]["ts"],
              "dur": 1, "args": {}},
             {"ph": "X", "cat": "cpu_op", "name": None, "pid": 1, "tid": 1, "ts": doc["traceEvents"][-1]["ts"],
              "dur": 1, "args": {}}]
    t = load_quiet({**doc, "traceEvents": doc["traceEvents"] + extra})
    assert {"['a', 1]", ""} <= set(t.events["name"])
    assert t.events.loc[t.events["name"] == "['a', 1]", "kind"].tolist() == ["other"]


def test_an_unknown_stream_is_named_so():
    """Some traces write -1 as an unsigned 32-bit stream id for work whose stream the profiler did not record."""
    from asynclab.trace import load_trace

    t = load_trace({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 4294967295, "ts": 20, "dur": 5,
         "args": {"device": 0, "stream": 4294967295}}]})
    assert t.lanes() == ["GPU 0 · stream 7 (default)", "GPU 0 · unknown stream"]
