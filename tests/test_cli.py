"""Tests for the `asynclab timeline` and `asynclab summary` commands, good input and bad."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import asynclab
from asynclab.cli import main
from tracegen import simple_trace

FIX = Path(__file__).parent / "fixtures"
SRC = str(Path(asynclab.__file__).resolve().parent.parent)


@pytest.fixture
def good(tmp_path) -> Path:
    p = tmp_path / "good.json"
    p.write_text(json.dumps(simple_trace().to_dict()))
    return p


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------------
# good input
# ---------------------------------------------------------------------------------------------
def test_summary(capsys, good):
    code, out, err = run(capsys, "summary", good)
    assert code == 0 and err == ""
    assert "Devices: GPU 0" in out
    assert "GPU 0 · stream 13" in out
    assert "hidden fraction 20.0%" in out
    assert "Top kernels by total time:" in out


def test_summary_gzip_fixture_two_gpus(capsys):
    code, out, _ = run(capsys, "summary", FIX / "p2p_2gpu.json.gz", "--top", "1")
    assert code == 0
    assert "Devices: GPU 0, GPU 1" in out
    assert "P2P 1×" in out
    top = out.split("Top kernels by total time:")[1].strip().splitlines()
    assert len(top) == 1


def test_timeline_png(capsys, good, tmp_path):
    out_png = tmp_path / "t.png"
    code, out, err = run(capsys, "timeline", good, "-o", out_png, "--arrows", "--title", "hello")
    assert code == 0 and err == ""
    assert out_png.read_bytes()[:4] == b"\x89PNG"
    assert "3 lanes" in out and "10 events drawn" in out


def test_timeline_svg_window_and_no_host(capsys, good, tmp_path):
    out_svg = tmp_path / "t.svg"
    code, out, _ = run(capsys, "timeline", good, "-o", out_svg, "--start-ms", "0.02", "--end-ms", "0.045",
                       "--no-host", "--no-arrows")
    assert code == 0
    assert b"<svg" in out_svg.read_bytes()[:500]
    assert "2 lanes" in out and "3 events drawn" in out  # A, C, B clipped to [20, 45) µs


def test_timeline_annotation(capsys, tmp_path):
    out_png = tmp_path / "a.png"
    code, out, _ = run(capsys, "timeline", FIX / "pt24_base_time.json", "-o", out_png, "--annotation", "backward",
                       "--occurrence", "0")
    assert code == 0 and out_png.exists()


def test_truncated_file_warns_in_one_line_and_succeeds(capsys):
    code, out, err = run(capsys, "summary", FIX / "truncated.json")
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("asynclab: warning: ") and "truncated.json" in lines[0]
    assert "loaded the 9 complete events" in lines[0]


# ---------------------------------------------------------------------------------------------
# bad input: exit 2, one line on stderr, naming the file and the problem
# ---------------------------------------------------------------------------------------------
def _write(tmp_path: Path, name: str, content) -> Path:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    return p


def _cases(tmp_path: Path, good: Path) -> list[tuple[list, str, str]]:
    """(argv, the file the message must name, a phrase of the problem)."""
    png = str(tmp_path / "o.png")
    empty = _write(tmp_path, "empty.json", "")
    notjson = _write(tmp_path, "notjson.json", "this is { not json")
    garbage = _write(tmp_path, "garbage.json", json.dumps([1, 2, "three", None]))
    notrace = _write(tmp_path, "notrace.json", json.dumps({"schemaVersion": 1, "events": []}))
    wrong = _write(tmp_path, "wrongtypes.json", json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "noon", "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": -2}]}))
    badgz = _write(tmp_path, "bad.json.gz", b"\x1f\x8b\x08\x00garbage-not-deflate" * 3)
    fakegz = _write(tmp_path, "fake.json.gz", json.dumps(simple_trace().to_dict()))
    cut = _write(tmp_path, "cut.json", '{"traceEvents": [{"ph": "X", "cat": "kernel", "na')
    binary = _write(tmp_path, "binary.json", bytes(range(256)) * 8)
    evdict = _write(tmp_path, "evdict.json", json.dumps({"traceEvents": {"ph": "X"}}))
    missing = tmp_path / "missing.json"
    return [
        (["summary", missing], str(missing), "no such file"),
        (["summary", tmp_path], "bad.json.gz", "corrupt gzip data"),  # a folder: a broken rank file is named
        (["summary", _empty_dir(tmp_path)], "empty_dir", "holds no trace files"),
        (["summary", empty], str(empty), "empty"),
        (["summary", notjson], str(notjson), "not JSON"),
        (["summary", garbage], str(garbage), "no event objects"),
        (["summary", notrace], str(notrace), "no 'traceEvents'"),
        (["summary", evdict], str(evdict), "not a list"),
        (["summary", wrong], str(wrong), "no valid events"),
        (["summary", badgz], str(badgz), "gzip"),
        (["summary", fakegz], str(fakegz), "not gzip"),
        (["summary", cut], str(cut), "no complete event"),
        (["summary", binary], str(binary), "binary"),
        (["timeline", missing, "-o", png], str(missing), "no such file"),
        (["timeline", good, "-o", str(tmp_path / "nodir" / "o.png")], "nodir", "does not exist"),
        (["timeline", good, "-o", str(tmp_path / "o.jpg")], "o.jpg", "unsupported output format '.jpg'"),
        (["timeline", good, "-o", str(tmp_path / "o")], "o", "unsupported output format"),
        (["timeline", good, "-o", png, "--annotation", "nope"], str(good), "no annotation named 'nope'"),
        (["timeline", good, "-o", png, "--start-ms", "5", "--end-ms", "1"], str(good), "is after --end-ms"),
        (["timeline", good, "-o", png, "--start-ms", "1", "--annotation", "x"], str(good), "not both"),
        (["timeline", good, "-o", png, "--start-ms", "5000", "--end-ms", "6000"], str(good), "no events in the window"),
        (["timeline", good, "-o", png, "--start-ms", "nan"], str(good), "finite"),
        (["timeline", good, "-o", png, "--occurrence", "1"], str(good), "--occurrence needs --annotation"),
        (["timeline", good, "-o", png, "--rank", "1"], str(good), "--rank needs --annotation"),
        (["timeline", good], "asynclab timeline", "-o/--output"),
        (["timeline", good, "-o", png, "--start-ms", "soon"], "asynclab timeline", "invalid float value"),
        (["frobnicate"], "asynclab", "invalid choice"),
        ([], "asynclab", "required"),
    ]


def _empty_dir(tmp_path):
    d = tmp_path / "empty_dir"
    d.mkdir(exist_ok=True)
    return d


def test_bad_input_exits_2_with_one_line(capsys, tmp_path, good):
    cases = _cases(tmp_path, good)
    assert len(cases) >= 20
    for argv, who, needle in cases:
        code, out, err = run(capsys, *argv)
        lines = err.strip().splitlines()
        assert code == 2, (argv, code, err)
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("asynclab: error: "), (argv, err)
        assert who in lines[0], (argv, err)
        assert needle.lower() in lines[0].lower(), (argv, err)
        assert "Traceback" not in err and out == "", (argv, out)
    assert not (tmp_path / "o.png").exists()


def test_truncated_gzip_beyond_recovery(capsys, tmp_path):
    raw = gzip.compress(json.dumps(simple_trace().to_dict()).encode())
    p = tmp_path / "early.json.gz"
    p.write_bytes(raw[:12])
    code, _, err = run(capsys, "summary", p)
    assert code == 2 and err.count("\n") == 1 and "early.json.gz" in err


# ---------------------------------------------------------------------------------------------
# the real entry point, in a fresh interpreter
# ---------------------------------------------------------------------------------------------
def test_module_entry_point_subprocess(tmp_path, good):
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    bad = subprocess.run([sys.executable, "-m", "asynclab.cli", "summary", str(tmp_path / "nope.json")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"asynclab: error: {tmp_path / 'nope.json'}: no such file"
    assert bad.stdout == ""
    out_png = tmp_path / "sub.png"
    ok = subprocess.run([sys.executable, "-m", "asynclab.cli", "timeline", str(good), "-o", str(out_png)],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert out_png.read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------
# several ranks, and a command line that never imports torch for traces
# ---------------------------------------------------------------------------------------------
RANKS = Path(__file__).parent / "fixtures" / "recorded" / "h200x2_ddp"


def test_summary_of_a_folder_reports_each_rank_and_step(capsys):
    code, out, err = run(capsys, "summary", RANKS)
    assert code == 0, err
    assert "Ranks: 0, 1 (from distributedInfo; clocks aligned)" in out
    for rank in (0, 1):
        assert f"rank {rank} · GPU {rank}: " in out and f"rank {rank} · GPU {rank} · stream 17" in out
    comm = [line for line in out.splitlines() if "of it overlapped by compute" in line]
    assert len(comm) == 2
    steps = [line.split()[0] for line in out.split("Per step")[1].splitlines()[4:10]]
    assert steps == ["2", "3", "2", "3", "all", "all"]
    # several files given one by one are the same run
    code2, out2, _ = run(capsys, "summary", *sorted(RANKS.iterdir()))
    assert code2 == 0 and out2.split("\n", 1)[1] == out.split("\n", 1)[1]


def test_timeline_of_a_folder(capsys, tmp_path):
    png = tmp_path / "ranks.png"
    code, out, err = run(capsys, "timeline", RANKS, "-o", png)
    assert code == 0, err
    assert "8 lanes" in out and png.stat().st_size > 10_000


def test_timeline_of_one_ranks_step(capsys, tmp_path):
    png = tmp_path / "step.png"
    code, out, err = run(capsys, "timeline", RANKS, "-o", png, "--annotation", "ProfilerStep#3", "--rank", "1")
    assert code == 0, err
    assert "8 lanes" in out and png.stat().st_size > 10_000
    code, _, err = run(capsys, "timeline", RANKS, "-o", png, "--annotation", "ProfilerStep#3", "--rank", "5")
    assert code == 2 and "no rank 5 here (ranks: 0, 1)" in err and "Traceback" not in err


_NO_TORCH = r"""
import sys, matplotlib
matplotlib.use("Agg")
from asynclab.cli import main
import asynclab as al
t = al.load_trace(sys.argv[1])
al.draw_timeline(t, arrows=True)
al.summary(t); al.comm_overlap(t); al.step_breakdown(t)
al.draw_timeline(t, diagnosis=al.diagnose(t))
assert main(["summary", sys.argv[1]]) == 0
assert main(["diagnose", sys.argv[1], "--json"]) == 0
assert main(["timeline", sys.argv[1], "-o", sys.argv[2]]) == 0
assert main(["hardware", "--no-torch"]) == 0
print("torch imported:", "torch" in sys.modules)
"""


def test_trace_commands_never_import_torch(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _NO_TORCH, str(RANKS), str(tmp_path / "t.png")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "torch imported: False"


def test_hardware_no_torch(capsys):
    code, out, err = run(capsys, "hardware", "--no-torch")
    assert code == 0 and "torch not imported (--no-torch)" in out and out.rstrip().splitlines()[-1].startswith("mode: ")


def test_course_executes_a_notebook_and_writes_its_figures(tmp_path):
    """What ``make course`` runs (``asynclab course --out ... --figures ...``), on lesson 00, which runs anywhere."""
    nb = Path(__file__).resolve().parent.parent / "notebooks" / "00_welcome.ipynb"
    # a temporary folder of its own, with a short name: a kernel's socket path must fit in about 100 characters
    tmp = Path(tempfile.mkdtemp(prefix="al-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        proc = subprocess.run([sys.executable, "-m", "asynclab.cli", "course", "--out", str(tmp_path / "nb"),
                               "--figures", str(tmp_path / "fig"), str(nb)], capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, TMPDIR=str(tmp)))
        left = [p.name for p in tmp.iterdir() if p.name.startswith(("asynclab-kernel", "tmp"))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not left, left
    ran = json.loads((tmp_path / "nb" / nb.name).read_text())
    outputs = [o for c in ran["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert outputs and not any(o["output_type"] == "error" for o in outputs)
    assert (tmp_path / "fig" / "00_reading_a_timeline.png").stat().st_size > 10_000


def test_classroom_grade_needs_an_assignment(tmp_path, capsys):
    from asynclab import cli

    assert cli.main(["classroom", "grade", str(tmp_path)]) == 2
    assert "name the assignment" in capsys.readouterr().err
    assert cli.main(["classroom", "grade", str(tmp_path), "03_streams"]) == 2
    assert "no submissions of 03_streams" in capsys.readouterr().err


def test_version_and_one_error_prefix(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"asynclab {version('asynclab')}"
    assert main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("asynclab: error: the following arguments") and err.count("asynclab:") == 1, err
    assert main(["timeline"]) == 2
    assert capsys.readouterr().err.startswith("asynclab: error: timeline: the following arguments")


def test_every_subcommand_has_a_description_without_markup():
    from asynclab.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, p in sub.choices.items():
        text = p.format_help()
        assert p.description, name
        assert "``" not in text and ":class:" not in text and ":func:" not in text, (name, text)


def test_one_lane_is_singular(capsys, tmp_path):
    from tracegen import TraceBuilder

    path = tmp_path / "one.json"
    b = TraceBuilder()
    b.kernel(0, 10)
    b.write(path)
    assert main(["timeline", str(path), "-o", str(tmp_path / "one.png"), "--no-host"]) == 0
    assert "1 lane, 1 event drawn" in capsys.readouterr().out


def test_a_truncated_trace_without_gpu_events_says_truncated(capsys, tmp_path):
    """The profiler writes the GPU's events after the host's: a file cut short loses them first, and the commands
    say so rather than calling the recording CPU-only."""
    from tracegen import TraceBuilder

    b = TraceBuilder()
    for i in range(20):
        b.launch(i * 10, 2, corr=i + 1)
    whole = json.dumps(b.to_dict())
    b.kernel(500, 10, corr=1)
    with_gpu = json.dumps(b.to_dict())
    cut = tmp_path / "cut.json"
    cut.write_text(with_gpu[: len(whole) - 300])  # inside the host's events: every GPU event lost
    code, out, err = run(capsys, "summary", cut)
    assert code == 0 and "truncated:" in out and "the GPU's may be missing" in out and "CPU-only" not in out, out
    code, out, err = run(capsys, "diagnose", cut)
    assert code == 2 and "truncated:" in err and "no GPU activity" not in err, err
    whole_file = tmp_path / "cpu.json"
    whole_file.write_text(whole)
    code, out, err = run(capsys, "summary", whole_file)
    assert "CPU-only trace" in out and "truncated:" not in out


def test_a_whole_trace_with_a_long_start_up_draws_its_steps(capsys, tmp_path):
    """A trace of 30 ms of start-up, then three profiler steps of 1 ms: the picture shows the steps, says what it left
    out, and --whole draws everything."""
    from tracegen import TraceBuilder

    b = TraceBuilder()
    b.launch(0, 2, corr=1)
    b.kernel(5, 10, corr=1)  # start-up work
    for i in range(3):
        at = 30_000 + i * 1_000
        b.annotation(at, 900, f"ProfilerStep#{i + 1}")
        b.launch(at + 10, 2, corr=10 + i)
        b.kernel(at + 20, 500, corr=10 + i)
    path = tmp_path / "startup.json"
    b.write(path)
    code, out, err = run(capsys, "timeline", path, "-o", tmp_path / "steps.png")
    assert code == 0 and "drew the steps: ProfilerStep#1 to #3; left out 30.0 ms before them" in out, out
    assert "3 events drawn" not in out and "events drawn" in out
    code, out, err = run(capsys, "timeline", path, "-o", tmp_path / "all.png", "--whole")
    assert code == 0 and "drew the steps" not in out


def test_a_trace_whose_work_fills_a_short_part_of_it_draws_the_work(capsys, tmp_path):
    """Issue 62: 2 ms of work in a 60 ms recording, stretched by events that draw nothing (the profiler's span from 0,
    a ProfilerStep that runs on 22 ms after its last kernel, the script's Python function): the picture shows the work,
    says what it left out and which events reach there, and --whole draws everything."""
    code, out, err = run(capsys, "timeline", FIX / "sparse_work.json", "-o", tmp_path / "work.png")
    assert code == 0 and "drew the steps: ProfilerStep#1 to #1; left out 36.0 ms before them" in out, out
    assert ('drew the work: left out 5.0 µs before the work drawn and 22.070 ms after, where only "ProfilerStep#1", '
            '"PyTorch Profiler (0)" and "train.py(12): main" reach (--whole draws everything)') in out, out
    code, out, err = run(capsys, "timeline", FIX / "sparse_work.json", "-o", tmp_path / "all.png", "--whole")
    assert code == 0 and "drew the" not in out
    code, out, err = run(capsys, "timeline", FIX / "pt24_base_time.json", "-o", tmp_path / "pt24.png")
    assert code == 0 and "drew the" not in out, out
