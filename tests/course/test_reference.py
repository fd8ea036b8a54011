"""Packaged references: writing, reading, describing, and clear errors when a lesson has not been recorded."""
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from asynclab.course import registry as lessons

from asynclab.course import reference
from asynclab.gpu.hardware import GPU, Hardware

REPO = Path(__file__).resolve().parents[2]

H100 = {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.2, "sm_count": 132,
                  "capability": "9.0"}], "gpu_count": 1, "gpus_used": 1, "driver": "580.95.05",
        "torch": "2.11.0+cu130", "cuda": "13.0", "date": "2026-11-22"}

TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 4,
     "args": {"correlation": 9}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 110, "dur": 20,
     "args": {"device": 0, "stream": 7, "correlation": 9}}]}


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty reference root standing in for the package's data folder."""
    d = tmp_path / "reference"
    real = reference.lesson_dir
    monkeypatch.setattr(reference, "lesson_dir", lambda lesson, root=None: real(lesson, d if root is None else root))
    return d


def gz_trace(path: Path, doc=TRACE) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return path


def test_folder_names():
    assert reference.folder_name(1) == "01_async_dispatch"
    assert reference.folder_name("01") == reference.folder_name("async_dispatch") == "01_async_dispatch"
    assert reference.folder_name("02_timing") == "02_timing"
    with pytest.raises(ValueError, match="no lesson"):
        reference.folder_name("nonsense")


def test_missing_reference_is_one_clear_line(root):
    for call in (reference.results, reference.meta, reference.describe):
        with pytest.raises(reference.ReferenceNotFound) as info:
            call(1)
        msg = str(info.value)
        assert "01_async_dispatch" in msg and "not been recorded yet" in msg and "\n" not in msg
    with pytest.raises(FileNotFoundError):  # a FileNotFoundError subclass, as callers may expect
        reference.trace_path(2, "timers")
    assert reference.available(1) is False and reference.trace_names(1) == []


def test_write_then_read_back(root, tmp_path):
    results = {"host_runs_ahead": {"finish_ms": 27.6123456789, "enqueue_ms": 0.38, "n": 8192},
               "hidden_syncs": {"ops": [{"op": ".item()", "syncs": True}]}}
    src = gz_trace(tmp_path / "anything.json.gz")
    folder = reference.write(1, results, traces={"host_runs_ahead": src}, meta=H100)
    assert folder == root / "01_async_dispatch"
    assert sorted(p.name for p in folder.iterdir()) == ["host_runs_ahead.json.gz", "meta.json", "results.json"]
    assert reference.available(1) and reference.available("async_dispatch")
    assert reference.results(1) == results  # floats exactly as measured
    text = (folder / "results.json").read_text()
    assert text.index('"hidden_syncs"') < text.index('"host_runs_ahead"')  # sorted keys
    assert '\n "hidden_syncs"' in text  # indent 1
    m = reference.meta("01")
    assert m["lesson"] == "01_async_dispatch" and m["driver"] == "580.95.05"
    assert reference.trace_names(1) == ["host_runs_ahead"]
    assert reference.trace_path(1, "host_runs_ahead.json.gz") == folder / "host_runs_ahead.json.gz"
    t = reference.trace(1, "host_runs_ahead")
    assert list(t.events["kind"]) == ["launch", "compute"] and t.devices == [0]


def test_describe_line(root):
    reference.write(1, {"x": {"a": 1.0}}, meta=H100)
    assert reference.describe(1) == ("reference recorded on NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, CUDA 13.0, "
                                     "driver 580.95.05, 2026-11-22")
    two = dict(H100, gpus=[dict(H100["gpus"][0], name="NVIDIA H200", index=i) for i in range(8)], gpus_used=2)
    reference.write(6, {"x": {}}, meta=two)
    assert reference.describe(6).startswith("reference recorded on 2x NVIDIA H200, torch")


def test_unknown_trace_lists_what_exists(root, tmp_path):
    reference.write(2, {"x": {}}, traces={"timers": gz_trace(tmp_path / "t.json.gz")}, meta=H100)
    with pytest.raises(reference.ReferenceNotFound, match=r"no reference trace named 'nope' \(recorded traces: timers\)"):
        reference.trace_path(2, "nope")


def test_rewrite_replaces_old_traces(root, tmp_path):
    reference.write(1, {"x": {}}, traces={"old": gz_trace(tmp_path / "a.json.gz")}, meta=H100)
    reference.write(1, {"y": {}}, traces={"new": gz_trace(tmp_path / "b.json.gz")}, meta=H100)
    assert reference.trace_names(1) == ["new"] and reference.results(1) == {"y": {}}


def test_write_refuses_bad_traces_and_writes_nothing(root, tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(TRACE))
    with pytest.raises(ValueError, match="not gzip"):
        reference.write(1, {"x": {}}, traces={"t": plain}, meta=H100)
    big = tmp_path / "big.json.gz"
    big.write_bytes(b"\x1f\x8b" + b"\0" * (reference.MAX_TRACE_BYTES + 1))
    with pytest.raises(ValueError, match="over the 1 MB limit"):
        reference.write(1, {"x": {}}, traces={"t": big}, meta=H100)
    with pytest.raises(FileNotFoundError, match="not found"):
        reference.write(1, {"x": {}}, traces={"t": tmp_path / "missing.json.gz"}, meta=H100)
    with pytest.raises(ValueError, match="bad trace name"):
        reference.write(1, {"x": {}}, traces={"../escape": gz_trace(tmp_path / "e.json.gz")}, meta=H100)
    with pytest.raises(TypeError):
        reference.write(1, {"x": object()}, meta=H100)
    assert not (root / "01_async_dispatch").exists()


def test_bad_json_is_a_clear_error(root):
    d = root / "01_async_dispatch"
    d.mkdir(parents=True)
    (d / "results.json").write_text("{not json")
    with pytest.raises(ValueError, match="results.json: not valid JSON"):
        reference.results(1)
    (d / "meta.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        reference.meta(1)


def test_meta_from_hardware_has_no_hostname():
    g = GPU(0, "NVIDIA H100 80GB HBM3", 79.19, 132, "9.0")
    hw = Hardware(gpus=(g, g), p2p=((True, True), (True, True)), topology="GPU0 X NV18", driver="580.95.05",
                  torch_version="2.11.0+cu130", cuda_version="13.0")
    m = reference.meta_from_hardware(hw, gpus_used=1)
    assert m["gpu_count"] == 2 and m["gpus"][0]["name"] == g.name and m["gpus_used"] == 1
    assert m["p2p"] == [[True, True], [True, True]] and m["topology"] == "GPU0 X NV18"
    assert {"driver", "torch", "cuda", "date"} <= set(m)
    import socket

    assert socket.gethostname() not in json.dumps(m)
    assert not any("host" in k for k in m)


def test_default_meta_comes_from_this_machine(root):
    reference.write(2, {"x": {"v": 1}})
    m = reference.meta(2)
    assert m["lesson"] == "02_timing" and m["gpus_used"] == 1 and "torch" in m and len(m["date"]) == 10


def test_figures_table(root):
    reference.write(1, {"d2l_benchmark": {"numpy_s": 0.332, "device": "cuda:0"},
                        "overhead_bound": {"sizes": [1, 4, 16, 64, 256]},
                        "hidden_syncs": {"ops": [{"op": ".item()", "syncs": True, "waited_ms": 20.01}]}}, meta=H100)
    text = reference.table(1)
    lines = text.splitlines()
    assert lines[0] == reference.describe(1)
    assert any("numpy_s" in ln and "0.332" in ln for ln in lines)
    assert any("ops: .item()" in ln and "syncs=True" in ln and "waited_ms=20.01" in ln for ln in lines)
    assert any("[1, 4, 16, 64, ...] (5 values)" in ln for ln in lines)


# -- the recording script --------------------------------------------------------------------------
def load_script():
    spec = importlib.util.spec_from_file_location("record_references", REPO / "scripts" / "record_references.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_refuses_without_a_gpu(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    script = load_script()
    with pytest.raises(SystemExit) as info:
        script.main(["--lessons", "01", "--out", "/nonexistent"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "no CUDA GPU" in err and len(err.strip().splitlines()) == 1


def test_script_refuses_a_lesson_whose_reference_needs_more_gpus(monkeypatch, capsys):
    """A reference needs the GPUs its lesson's live cells need: two for lessons 06 and 07."""
    import torch

    script = load_script()
    assert [script.record_gpus(item) for item in lessons.LESSONS[1:]] == [1, 1, 1, 1, 1, 2, 2, 1]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(SystemExit) as info:
        script.main(["--lessons", "03", "06", "--out", "/nonexistent"])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == "record_references: lesson 06 needs 2 GPUs; this machine has 1"


def test_script_rejects_unknown_lessons(capsys):
    script = load_script()
    with pytest.raises(SystemExit):
        script.main(["--lessons", "00"])
    assert "has no experiments" in capsys.readouterr().err


def test_script_records_one_lesson_end_to_end(root, capsys):
    """The child step (run_all, write) on the CPU: a dry run of what the script does on a GPU."""
    pytest.importorskip("asynclab.gpu.record")
    script = load_script()
    script._record_one("02", root, "cpu")
    assert "dry run" in capsys.readouterr().out
    r = reference.results(2)
    assert {"timers_side_by_side", "warmup_cost", "spread", "sync_every_iteration", "synchronize_scope",
            "event_pitfalls"} == set(r)
    assert reference.trace_names(2) == ["sync_every_iteration", "timers"]
    assert "timers_side_by_side" in reference.table(2)


def test_lesson_08s_stored_diagnoses_are_todays():
    """Lesson 08's reference stores the diagnosis of each stage's trace and what it predicted: they must be what
    ``diagnose`` says of those traces today (scripts/rediagnose_reference.py makes them again)."""
    import json

    from asynclab.course import reference
    from asynclab.lessons.your_step.experiments import rediagnose

    stored = reference.results(8)
    again = rediagnose(stored, reference.lesson_dir(8))
    assert json.dumps(again, sort_keys=True) == json.dumps(stored, sort_keys=True), \
        "lesson 08's stored diagnoses are not today's: run scripts/rediagnose_reference.py"
