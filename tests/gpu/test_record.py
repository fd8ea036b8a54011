"""Tests for asynclab.gpu.record: profiling a callable live (CPU everywhere, CUDA where there is one)."""
from __future__ import annotations

import gzip
import json

import pytest

torch = pytest.importorskip("torch")

from asynclab.gpu.record import STEP_ANNOTATION, record  # noqa: E402
from asynclab.trace import Trace, load_trace  # noqa: E402


def test_record_on_cpu_saves_gzip_and_returns_a_trace(tmp_path):
    calls = []

    def step(a, b, scale=1.0):
        calls.append(scale)
        return (a @ b * scale).relu().sum()

    x = torch.randn(48, 48)
    out = tmp_path / "sub" / "run.json.gz"  # a missing folder is created
    t = record(step, x, x, path=out, warmup=2, steps=3, scale=0.5)
    assert calls == [0.5] * 6  # warmup + the profiler's discarded warm-up step + steps; keywords reach fn
    assert isinstance(t, Trace)
    assert t.source == str(out)
    raw = out.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    doc = json.loads(gzip.decompress(raw))
    assert "traceEvents" in doc
    again = load_trace(out)
    assert len(again) == len(t)
    ev = t.events
    steps = ev[(ev["kind"] == "annotation") & (ev["name"] == STEP_ANNOTATION)]
    assert len(steps) == 3
    assert {"aten::matmul", "aten::relu"} <= set(ev.loc[ev["kind"] == "cpu_op", "name"])
    w = t.window(annotation=STEP_ANNOTATION, occurrence=1)
    assert w.meta["window"] == (steps["start_us"].iloc[1], steps["end_us"].iloc[1])
    assert t.meta["steps"] == 3 and t.meta["warmup"] == 2
    assert t.meta["torch_version"] == torch.__version__
    assert t.meta["cuda"] is torch.cuda.is_available()
    assert "CPU · main thread" in t.lanes()


def test_record_plain_json_and_options(tmp_path):
    x = torch.randn(8, 8)
    out = tmp_path / "run.json"
    t = record(torch.add, x, x, path=out, warmup=0, steps=1, record_shapes=True)
    assert json.loads(out.read_text())["traceEvents"]
    assert (t.events["name"] == "aten::add").any()
    assert record(torch.add, x, x).source == "<record>"


def test_record_rejects_bad_arguments(tmp_path):
    x = torch.randn(2)
    with pytest.raises(ValueError, match=r"must end in \.json\.gz"):
        record(torch.neg, x, path=tmp_path / "trace.txt")
    with pytest.raises(ValueError, match="steps >= 1"):
        record(torch.neg, x, steps=0)
    with pytest.raises(TypeError, match="callable"):
        record(42)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_record_on_gpu_links_launches_and_kernels(tmp_path):
    x = torch.randn(1024, 1024, device="cuda")

    def step():
        y = x @ x
        return y.sum().item()  # a D2H copy and a stream synchronisation

    t = record(step, path=tmp_path / "gpu.json.gz", steps=2, cuda_sync_events=True)
    gpu = t.gpu()
    assert (gpu["kind"] == "compute").any() and (gpu["kind"] == "d2h").any()
    work = gpu[gpu["kind"].isin(["compute", "d2h", "h2d", "memset"])]
    assert work["launch"].notna().all()
    assert t.lanes()[0] == "GPU 0 · stream 7 (default)"
    assert t.lanes()[-1] == "CPU · main thread"
    sync = gpu[gpu["kind"] == "sync"]
    assert len(sync) and sync["stream"].notna().all()
