"""Tests for the typed fast path (same table as the stdlib path), NCCL kernels as "comm", and several ranks."""
from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from asynclab.trace import TraceError, TraceWarning, load_trace
from asynclab.trace.read import io as traceio
from tracegen import BASE_NS, TraceBuilder, simple_trace

FIX = Path(__file__).parents[1] / "fixtures"
FILES = sorted(p for p in FIX.rglob("*.json*")  # every trace of the fixtures (cases.json and heldout_steps hold times)
               if p.name not in ("truncated.json", "cases.json") and p.parent.name != "heldout_steps")


def _doc(path: Path):
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_typed_path_gives_the_same_table_as_the_stdlib_path(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        fast = load_trace(path)
        slow = load_trace(_doc(path))
    pd.testing.assert_frame_equal(fast.events, slow.events)
    drop = {"source"}
    assert {k: v for k, v in fast.meta.items() if k not in drop} == {k: v for k, v in slow.meta.items() if k not in drop}


def test_typed_path_is_taken_for_recorded_traces():
    for path in sorted((FIX / "recorded").glob("*.json.gz")):
        data = traceio._read_bytes(path, path.name)
        assert traceio._parse_typed(data) is not None, path.name


def test_unusual_values_fall_back_to_the_stdlib_path(tmp_path):
    b = simple_trace()
    doc = b.to_dict()
    first = next(e for e in doc["traceEvents"] if e.get("ph") == "X")
    first["ts"] = "soon"  # not a number: the typed decoder refuses, the stdlib path warns
    p = tmp_path / "odd.json"
    p.write_text(json.dumps(doc))
    assert traceio._parse_typed(p.read_bytes()) is None
    with pytest.warns(TraceWarning, match="skipped 1 malformed"):
        t = load_trace(p)
    assert len(t) == len(load_trace(simple_trace().to_dict())) - 1


def test_nccl_kernels_are_communication():
    b = TraceBuilder()
    b.launch(0, 2, corr=1)
    b.kernel(3, 10, corr=1, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             stream=20)
    b.launch(4, 2, corr=2)
    b.kernel(5, 4, corr=2, name="void at::native::vectorized_elementwise_kernel<4>")
    b.kernel(20, 5, name="ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", stream=20)
    ev = load_trace(b.to_dict()).gpu()
    assert ev.set_index("name")["kind"].str[:4].to_dict() == {
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "comm",
        "void at::native::vectorized_elementwise_kernel<4>": "comp",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t": "comm"}


# ---------------------------------------------------------------------------------------------
# several ranks
# ---------------------------------------------------------------------------------------------
def _rank_trace(rank: int, base_ns: int, send_at: float, world: int = 2, info: bool = True) -> dict:
    """Rank ``rank``'s trace: a launch, a compute kernel and a SendRecv at ``send_at`` µs of its own clock."""
    b = TraceBuilder(host_pid=1000 + rank, host_tid=1000 + rank)
    b.launch(0, 2, corr=1)
    b.kernel(3, 10, corr=1, device=rank, name="gemm")
    b.launch(14, 2, corr=2)
    b.kernel(send_at, 5, corr=2, device=rank, stream=20, name="ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)")
    doc = b.to_dict()
    doc["baseTimeNanoseconds"] = base_ns
    if info:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return doc


def _write(folder: Path, docs: dict[str, dict]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, doc in docs.items():
        (folder / name).write_text(json.dumps(doc))
    return folder


def test_a_folder_of_ranks_is_one_trace_with_aligned_clocks(tmp_path):
    # rank 1's clock starts 250 µs later; its SendRecv at its own 50 µs is the same moment as rank 0's at 300
    d = _write(tmp_path / "run", {"b_rank1.json": _rank_trace(1, BASE_NS + 250_000, 50.0),
                                  "a_rank0.json": _rank_trace(0, BASE_NS, 300.0)})
    t = load_trace(d)
    ev = t.events
    assert sorted(ev["rank"].unique().tolist()) == [0, 1]
    sends = ev[ev["kind"] == "comm"].set_index("rank")["start_us"]
    assert sends[0] == pytest.approx(sends[1])
    assert t.lanes() == ["rank 0 · GPU 0 · stream 7 (default)", "rank 0 · GPU 0 · stream 20",
                         "rank 0 · CPU · main thread",
                         "rank 1 · GPU 1 · stream 7 (default)", "rank 1 · GPU 1 · stream 20",
                         "rank 1 · CPU · main thread"]
    # every GPU row still points at its own rank's launch
    gpu = ev[ev["launch"].notna()]
    launches = ev.loc[gpu["launch"].astype(int)]
    assert (launches["rank"].to_numpy() == gpu["rank"].to_numpy()).all()
    assert (launches["correlation"].to_numpy() == gpu["correlation"].to_numpy()).all()
    assert ev["start_us"].is_monotonic_increasing and ev.index.equals(pd.RangeIndex(len(ev)))
    assert t.meta["rank_source"] == "distributedInfo" and t.meta["ranks"][1]["offset_us"] == pytest.approx(250.0)
    assert load_trace(sorted(d.iterdir())).events.equals(ev)  # a list of paths gives the same


def test_files_without_distributed_info_take_their_sorted_place(tmp_path):
    d = _write(tmp_path / "run", {"x1.json": _rank_trace(1, BASE_NS, 50.0, info=False),
                                  "x0.json": _rank_trace(0, BASE_NS, 50.0, info=False)})
    with pytest.warns(TraceWarning, match="ranks are their places in sorted order"):
        t = load_trace(d)
    assert t.meta["rank_source"] == "file order"
    assert t.events.groupby("rank")["device"].max().tolist() == [0, 1]


def test_one_rank_file_keeps_plain_lanes(tmp_path):
    d = _write(tmp_path / "run", {"rank0.json": _rank_trace(0, BASE_NS, 50.0, world=1)})
    assert load_trace(d).lanes()[0] == "GPU 0 · stream 7 (default)"


@pytest.mark.parametrize("case,needle", [
    ("broken", "rank1.json: invalid JSON"),
    ("truncated", "every rank file of a run must be complete"),
    ("twice", "rank 0 again"),
    ("no_info", "has no distributedInfo rank"),
    ("no_clock", "its clock cannot be placed"),
])
def test_bad_rank_files_give_one_line_naming_the_file(tmp_path, case, needle):
    r0, r1 = _rank_trace(0, BASE_NS, 50.0), _rank_trace(1, BASE_NS, 50.0)
    docs = {"rank0.json": r0, "rank1.json": r1}
    if case == "twice":
        r1["distributedInfo"]["rank"] = 0
    elif case == "no_info":
        del r1["distributedInfo"]
    elif case == "no_clock":
        del r1["baseTimeNanoseconds"]
    d = _write(tmp_path / "run", docs)
    if case == "broken":
        (d / "rank1.json").write_text(json.dumps(r1)[:40])
    elif case == "truncated":  # loads on its own with a warning, but not as a rank of a run
        (d / "rank1.json").write_text(json.dumps(r1)[:-300])
    with pytest.raises(TraceError) as ei:
        load_trace(d)
    msg = str(ei.value)
    assert needle in msg and "rank1.json" in msg and "\n" not in msg


def test_a_missing_rank_warns(tmp_path):
    d = _write(tmp_path / "run", {"rank0.json": _rank_trace(0, BASE_NS, 50.0, world=3),
                                  "rank1.json": _rank_trace(1, BASE_NS, 50.0, world=3)})
    with pytest.warns(TraceWarning, match="no file for rank"):
        load_trace(d)


def test_files_of_different_runs_warn(tmp_path):
    d = _write(tmp_path / "run", {"rank0.json": _rank_trace(0, BASE_NS, 50.0),
                                  "rank1.json": _rank_trace(1, BASE_NS + 3_600 * 10**9, 50.0)})  # an hour later
    with pytest.warns(TraceWarning, match="ran at another time than the other ranks"):
        load_trace(d)


def test_each_rank_has_its_own_step_annotation():
    trace = load_trace(FIX / "recorded" / "h200x2_pipeline")
    step = next(n for n in trace.events["name"] if str(n).startswith("ProfilerStep#"))
    both = trace.annotation_range(step)
    mine = [trace.annotation_range(step, rank=r) for r in (0, 1)]
    assert both == (min(s for s, _ in mine), max(e for _, e in mine))  # the union of the two ranks' ranges
    assert mine[0] != mine[1]
    w = trace.window(annotation=step, rank=1)
    assert w.meta["window"] == mine[1] and set(w.events["rank"].dropna()) == {0, 1}  # every rank's events kept
    with pytest.raises(TraceError, match="no rank 5 here"):
        trace.annotation_range(step, rank=5)
    with pytest.raises(TraceError, match="give annotation= with it"):
        trace.window(0, 10, rank=0)
    with pytest.raises(TraceError, match="none, a trace of one process"):
        load_trace(simple_trace().to_dict()).annotation_range("x", rank=0)
