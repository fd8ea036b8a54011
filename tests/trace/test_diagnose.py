"""`asynclab diagnose` on training steps with one planted mistake each, recorded with their fixes on an NVIDIA H100 (one
case, ``mask_hostbound``, on an NVIDIA H200: each case's entry names its GPU)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from asynclab import cli
from asynclab.trace.analysis.diagnose import diagnose
from asynclab.trace.analysis.findings import CATALOGUE as KINDS
from asynclab.trace import TraceError, load_trace
from tracegen import TraceBuilder

HERE = Path(__file__).parents[1]
CASES_DIR = HERE / "fixtures" / "diagnose"
CASES = json.loads((CASES_DIR / "cases.json").read_text())["cases"]
ONE_GPU = {k: v for k, v in CASES.items() if "gpus" not in next(iter(v.values()))}
TWO_GPU = {k: v for k, v in CASES.items() if k not in ONE_GPU}
#: Cases whose "mistake" costs nothing on a GPU, and what a GPU says instead: the diagnosis must not blame it.
HARMLESS = {"item_small": "launch_bound"}
PLANTED = sorted(k for k in ONE_GPU if k != "clean" and k not in HARMLESS)
LESSONS = HERE.parent / "src" / "asynclab" / "lessons"


def _trace(case: str, variant: str) -> Path:
    return CASES_DIR / CASES[case][variant]["trace"]


def kind_of(case: str) -> str:
    """The kind a case plants: its name, or the ``kind`` its bad variant names (the host syncs from the wild)."""
    return CASES[case]["bad"].get("kind", case)


def test_every_kind_that_one_gpu_can_show_is_planted():
    assert {kind_of(c) for c in PLANTED} == set(KINDS) - {"exposed_comm", "pipeline_bubble", "rank_skew"}


def _measured_saving(case: str) -> float:
    """The fix's saving, a share of the bad step: the median over the processes that timed both steps (the timing
    beside the trace, and the later ``runs`` in fresh processes): a step the host sets varies from one process to the
    next by as much as the fix saves.

    Example: mask_hostbound's savings were 0.105 beside the trace, then 0.052, 0.244, 0.252 and 0.120.
    """
    bad, fixed = CASES[case]["bad"], CASES[case]["fixed"]
    pairs = [(bad["step_ms"], fixed["step_ms"])] + [(bad["runs"][r], fixed["runs"][r]) for r in bad.get("runs", {})
                                                     if r in fixed.get("runs", {})]
    return float(np.median([(b - f) / b for b, f in pairs]))


#: Cases the replay does not yet predict to the issue's targets (one set of rules for all traces, never tuned to a
#: case): the numbers say how far off they are.
_MISSED: dict[str, str] = {}

#: Cases whose planted kind is found, but not first, and why (the numbers say how far off).
_NOT_FIRST: dict[str, str] = {}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=_NOT_FIRST[c], strict=True))
                                  if c in _NOT_FIRST else c for c in PLANTED])
def test_planted_mistake_is_found_and_its_fix_removes_it(case):
    bad, fixed = diagnose(_trace(case, "bad")), diagnose(_trace(case, "fixed"))
    assert bad.findings[0].kind == kind_of(case), bad.text()
    assert fixed.share(kind_of(case)) < 0.03, fixed.text()


def _within_target(predicted: float, saving: float) -> bool:
    """The issue's target: within a factor of 1.5 where the fix saves 10% or more, within 5 points otherwise."""
    if saving >= 0.1:
        return saving / 1.5 <= predicted <= saving * 1.5
    return abs(predicted - saving) <= 0.05


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=_MISSED[c], strict=True))
                                  if c in _MISSED else c for c in PLANTED])
def test_replayed_saving_is_within_the_target_of_the_measured_one(case):
    predicted, saving = diagnose(_trace(case, "bad")).share(kind_of(case)), _measured_saving(case)
    assert _within_target(predicted, saving), (predicted, saving)


#: Cases whose step with every fix applied is not within 25% of the fixed twin's measured step, and why.
_ALL_FIXES_MISSED: dict[str, str] = {}


@pytest.mark.filterwarnings("ignore::asynclab.trace.read.events.TraceWarning")
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=_ALL_FIXES_MISSED[c], strict=True))
                                  if c in _ALL_FIXES_MISSED else c for c in sorted(set(CASES) - {"clean", *HARMLESS})])
def test_the_step_with_every_fix_is_within_a_quarter_of_the_fixed_twin(case):
    """The twin fixes only the planted mistake: where it still shows another finding over half its step (a step the
    host sets, whose launches a CUDA graph would capture), the bad step with the planted fix alone is its match."""
    d = diagnose(_trace(case, "bad"))
    measured = CASES[case]["fixed"]["step_ms"]
    twin = diagnose(_trace(case, "fixed")) if "gpus" not in CASES[case]["fixed"] else None
    left = twin is not None and any(f.share > 0.5 and f.kind != kind_of(case) for f in twin.findings)
    predicted = d.fixed_ms[kind_of(case)] if left else d.all_fixed_ms
    assert 0.75 * measured <= predicted <= 1.25 * measured, (predicted, measured, left)


def test_the_step_with_every_fix_leaves_out_a_fix_that_saves_nothing():
    """host_sync's case reports one finding; the replay of underfilled_gpu's fix there lengthens the step, so it is
    no fix, and the step with every fix is the step with host_sync's."""
    d = diagnose(_trace("host_sync", "bad"))
    assert [f.kind for f in d.findings] == ["host_sync"], d.text()
    assert d.all_fixed_ms == pytest.approx(d.fixed_ms["host_sync"], abs=1e-6)


def _run_spread(case: str, variant: str) -> float:
    """How far apart a variant's step measured: its recorded time and its ``runs`` (the same measurement again, each
    in a fresh process), the longest over the shortest."""
    entry = CASES[case][variant]
    ms = [entry["step_ms"], *entry.get("runs", {}).values()]
    return max(ms) / min(ms)


def test_a_step_the_host_sets_differs_more_from_run_to_run_than_one_the_gpu_sets():
    """What the README says of the cases' runs: under 5% apart where the GPU sets the step, up to a factor of two
    where the host does (the DataLoader's stall, the small model's read)."""
    assert all(len(CASES[c][v].get("runs", {})) >= 3 for c in ONE_GPU for v in CASES[c])
    gpu_set = [("underfilled_gpu", "bad"), ("exposed_copy", "bad"), ("stream_wait", "bad"), ("clean", "clean")]
    assert max(_run_spread(c, v) for c, v in gpu_set) < 1.05
    assert min(_run_spread("dataloader_stall", "bad"), _run_spread("item_small", "bad")) > 1.5
    assert max(_run_spread(c, v) for c in ONE_GPU for v in CASES[c]) < 2.2


@pytest.mark.parametrize("case", sorted(HARMLESS))
def test_a_read_that_costs_nothing_is_not_blamed(case):
    """A ``.item()`` every step of a model too small to keep the GPU busy: the host is behind its launches anyway,
    so reading the loss costs nothing measurable, and the diagnosis names the launches, not the read."""
    bad = diagnose(_trace(case, "bad"))
    assert _measured_saving(case) < 0.05
    assert bad.findings[0].kind == HARMLESS[case] and bad.share("host_sync") < 0.05, bad.text()


def test_a_clean_step_reports_nothing_at_ten_percent():
    d = diagnose(_trace("clean", "clean"))
    assert all(f.share < 0.1 for f in d.findings), d.text()


def _all_traces():
    yield from sorted(CASES_DIR.glob("*.json.gz"))
    yield from sorted(p for p in CASES_DIR.iterdir() if p.is_dir())
    yield from sorted(LESSONS.glob("*/reference/*.json.gz"))
    yield from sorted((HERE / "fixtures").glob("*.json"))


@pytest.mark.filterwarnings("ignore::asynclab.trace.read.events.TraceWarning")
@pytest.mark.parametrize("path", list(_all_traces()), ids=lambda p: p.name)
def test_predictions_never_exceed_the_step_and_the_idle_time_is_accounted_for(path):
    """The contract since savings are replayed: a finding's lost_ms_per_step is what its fix saves, so neither one
    finding nor all of them together claim more than the step, and the step with every fix is no longer than the
    step. The idle time is still accounted for, as attribution: the idle time each finding explains
    (idle_ms_per_step) plus the unexplained add up to the GPU's idle time."""
    d = diagnose(path)
    assert all(0 < f.lost_ms_per_step <= d.step_ms * (1 + 1e-9) and f.kind in KINDS for f in d.findings)
    assert sum(f.lost_ms_per_step for f in d.findings) <= d.step_ms * (1 + 1e-9)
    assert 0 <= d.all_fixed_ms <= d.step_ms * (1 + 1e-9)
    idle = sum(f.idle_ms_per_step for f in d.findings if f.kind != "underfilled_gpu") + d.unexplained_ms_per_step
    assert idle == pytest.approx(d.idle_ms_per_step, rel=1e-6, abs=1e-9)
    assert 0 <= d.idle_ms_per_step <= d.profiled_ms * (1 + 1e-9)
    _assert_the_printed_idle_adds_up(d.text())


def _assert_the_printed_idle_adds_up(text: str) -> None:
    """The text view's idle line: the figures it prints add up, as printed, to the idle time of its first line."""
    idle = float(re.search(r"idle ([0-9.]+) ms a step", text.splitlines()[0]).group(1))
    line = re.search(r"^\S+ idle ([0-9.]+) ms/step = (.+)$", text, re.M)
    assert line is not None, text
    terms = [float(t.rsplit(" ", 1)[1]) for t in line.group(2).split(" + ")]
    assert float(line.group(1)) == idle and round(sum(terms), 3) == idle, text


def _host_bound_rocm_steps() -> TraceBuilder:
    """Issue 62's AMD trace (HolisticTraceAnalysis's tests/data/amd_trace, an MI250) in small: each step's host
    issues 20 hipLaunchKernel of 5 µs kernels, then spends 1.2 ms in AccumulateGrad, which launches nothing."""
    b = TraceBuilder("rocm")
    for step in range(4):
        t0 = step * 2_000
        b.annotation(t0, 2_000, f"ProfilerStep#{step + 1}")
        for i in range(20):
            corr = step * 20 + i + 1
            b.launch(t0 + 10 + 30 * i, 20, corr=corr)
            b.kernel(t0 + 32 + 30 * i, 5, corr=corr, stream=0, name=f"elementwise_kernel_{i}")
        b.cpu_op(t0 + 700, 1_200, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad")
    return b


def test_the_text_adds_up_to_the_idle_time_where_a_fix_saves_more_than_the_idle_it_explains(capsys, tmp_path):
    """Issue 62: on a host-bound ROCm trace, launch_bound's fix (a CUDA graph) saves 1.64 ms a step, more than the
    0.48 ms of idle its launches explain, since it also removes the host's time in AccumulateGrad, which the idle
    counts as unexplained (1.42 ms): the text printed 1.640 and 1.417 beside an idle of 1.900 ms, which the README
    says add up. The text now prints the idle as the sum of what each finding explains and the unexplained, and says
    that a finding's ms/step is its saving."""
    path = _host_bound_rocm_steps().write(tmp_path / "rocm_host_bound.json")
    d = diagnose(path)
    f = d.finding("launch_bound")
    assert f is not None and f.lost_ms_per_step > f.idle_ms_per_step + d.unexplained_ms_per_step / 2, d.text()
    assert cli.main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    _assert_the_printed_idle_adds_up(out)
    assert "GPU idle 1.900 ms/step = launch_bound 0.483 + unexplained idle 1.417" in out, out
    assert "its ms/step above is what its fix saves" in out


def test_the_unchanged_replay_reproduces_the_profiled_steps():
    from asynclab.trace.analysis.replay import build_graph, replay

    for case, variants in ONE_GPU.items():
        for v in variants.values():
            g = build_graph(load_trace(CASES_DIR / v["trace"]).events, pd.NA)
            _, he, _, ge = replay(g)
            assert np.allclose(he, g.h_end, atol=2.0) and np.allclose(ge, g.g_end, atol=2.0), case


def _with_checkpoint(tmp_path, case: str, step: int, ms: float):
    """A case's trace with ``ms`` of the host's own work (a checkpoint saved) early in its step ``step``: everything
    after it later by that much, the ranges around it that much longer."""
    doc = json.load(gzip.open(_trace(case, "bad")))
    events = doc["traceEvents"]
    mark = next(e for e in events if e.get("name") == f"ProfilerStep#{step}" and e.get("cat") == "user_annotation")
    at, shift = mark["ts"] + 50.0, ms * 1e3
    for e in events:
        if not isinstance(e.get("ts"), (int, float)) or e.get("ph") == "M":
            continue
        if e["ts"] >= at:
            e["ts"] += shift
        elif e["ts"] + e.get("dur", 0) > at:
            e["dur"] += shift
    events.append({"ph": "X", "cat": "python_function", "name": "train.py(12): save_checkpoint", "pid": mark["pid"],
                   "tid": mark["tid"], "ts": at, "dur": shift, "args": {}})
    path = tmp_path / f"{case}-checkpoint.json"
    path.write_text(json.dumps(doc))
    return path


def test_an_outlier_step_is_named_and_left_out(tmp_path):
    """A checkpoint saved in one step (40 ms of the host's own work) makes it an outlier: named, and left out of
    the steps the findings average over; the others' diagnosis is the one without it."""
    plain = diagnose(_trace("host_sync", "bad"))
    d = diagnose(_with_checkpoint(tmp_path, "host_sync", 2, 40.0))
    assert d.outliers == [2] and any("outlier step 2" in n for n in d.notes), d.notes
    assert 2 not in d.finding("host_sync").where["steps"]
    assert d.finding("host_sync").share == pytest.approx(plain.finding("host_sync").share, abs=0.05)


def test_a_gpu_that_sets_the_pace_gives_the_steps_their_length():
    """exposed_copy's host runs ahead of a GPU that takes longer over each step (its own step ranges: 8.3, 9.9 and
    9.9 ms, the host's 4.4 and 7.3 ms before it waits for the GPU in its last): the steps are the GPU's, none an
    outlier, and the replayed step is within a quarter of the one measured without the profiler."""
    d = diagnose(_trace("exposed_copy", "bad"))
    assert d.outliers == [] and len(d.steps) == 3
    assert 0.75 <= d.step_ms / CASES["exposed_copy"]["bad"]["step_ms"] <= 1.25


def test_cuda_start_up_is_named_as_start_up(tmp_path):
    """A trace with no steps whose first kernel ran before a 6 s cudaFree (CUDA's start-up): the step is
    diagnosed from the start-up's end, and the cudaFree is named as start-up, not alloc_churn."""
    doc = json.load(gzip.open(_trace("host_sync", "bad")))
    events = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    first = min(kernels, key=lambda e: e["ts"])
    for e in events:
        if e is not first and isinstance(e.get("ts"), (int, float)):
            e["ts"] += 6e6
    host = next(e for e in events if e.get("cat") == "cuda_runtime")
    events.append({**host, "name": "cudaFree", "ts": first["ts"] + first.get("dur", 0) + 1, "dur": 6e6 - 10,
                   "args": {}})
    doc["traceEvents"] = events
    path = tmp_path / "start_up.json"
    path.write_text(json.dumps(doc))
    d = diagnose(path)
    assert any("start-up" in n and "cudaFree 6000 ms" in n for n in d.notes), d.notes
    assert d.finding("alloc_churn") is None and d.step_ms < 100, d.text()


def test_what_if_prints_each_fix_and_all_of_them(capsys):
    assert cli.main(["diagnose", str(_trace("host_sync", "bad")), "--what-if"]) == 0
    out = capsys.readouterr().out
    assert "replayed step (no profiler)" in out and "fix host_sync" in out and "all fixes above" in out


def test_where_names_the_op_the_line_and_the_steps():
    f = diagnose(_trace("host_sync", "bad")).finding("host_sync")
    assert f.where["op"] == "aten::item"
    assert f.where["line"].startswith("record_diagnose_cases.py:")
    assert f.where["steps"] == [2, 3]  # in the first step the GPU had little queued: the sync cost it nothing
    loader = diagnose(_trace("dataloader_stall", "bad")).finding("dataloader_stall")
    assert "__getitem__" in loader.where["line"]


def test_without_stacks_the_kind_is_found_and_a_note_says_how_to_get_lines(tmp_path):
    doc = json.load(gzip.open(_trace("host_sync", "bad")))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "python_function"]
    path = tmp_path / "no_stacks.json"
    path.write_text(json.dumps(doc))
    d = diagnose(path)
    assert d.findings[0].kind == "host_sync" and "line" not in d.findings[0].where
    assert any("with_stack=True" in n for n in d.notes)


def test_one_step_and_no_steps(tmp_path):
    d = diagnose(_trace("host_sync", "bad"), step=2)
    assert d.steps == [2] and d.finding("host_sync").where["steps"] == [2]
    doc = json.load(gzip.open(_trace("host_sync", "bad")))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    path = tmp_path / "no_steps.json"
    path.write_text(json.dumps(doc))
    whole = diagnose(path)
    assert whole.steps == [0] and any("ProfilerStep#N" in n for n in whole.notes)
    assert whole.findings[0].kind == "host_sync"
    with pytest.raises(TraceError, match=r"no step 9 \(steps: 1, 2, 3\)"):
        diagnose(_trace("host_sync", "bad"), step=9)


def test_a_trace_without_gpu_activity_is_refused_in_one_line():
    cpu_only = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0,
                                 "dur": 5}]}
    with pytest.raises(TraceError, match="no GPU activity to diagnose"):
        diagnose(cpu_only)


# --------------------------------------------------------------------------------------------
# the lessons' own reference traces
# --------------------------------------------------------------------------------------------
def _ref(lesson: str, name: str) -> Path:
    return LESSONS / lesson / "reference" / f"{name}.json.gz"


def test_lesson_03_tiny_branches_leave_the_gpu_underfilled_or_launch_bound():
    for name in ("branches", "graphs"):
        top = diagnose(_ref("streams", name)).findings[0]
        assert top.kind in ("underfilled_gpu", "launch_bound") and top.share >= 0.3
        assert "CUDA graph" in top.fix


def test_lesson_07_stages_wait_for_each_other():
    for name in ("naive", "asker"):
        top = diagnose(_ref("pipeline_bubbles", name)).findings[0]
        assert top.kind == "pipeline_bubble" and top.share >= 0.3
        assert "(p-1)/(m+p-1)" in top.why
    m32 = diagnose(_ref("pipeline_bubbles", "gpipe_m32")).share("pipeline_bubble")
    assert m32 < diagnose(_ref("pipeline_bubbles", "gpipe_m4")).share("pipeline_bubble")


def test_lesson_05_dataloader_without_pinning_copies_from_pageable_memory():
    plain, pinned = diagnose(_ref("copy_overlap", "dataloader_plain")), diagnose(_ref("copy_overlap", "dataloader_pinned"))
    assert plain.findings[0].kind == "pageable_copy"
    assert pinned.share("pageable_copy") == 0


def test_lessons_01_and_02_syncs_and_launches():
    assert diagnose(_ref("timing", "sync_every_iteration")).findings[0].kind == "host_sync"
    assert diagnose(_ref("async_dispatch", "launch_overhead")).findings[0].kind == "launch_bound"


# --------------------------------------------------------------------------------------------
# two GPUs: recorded on two NVIDIA H100s (scripts/record_two_gpu_cases.py), each with its fix
# --------------------------------------------------------------------------------------------
def _saving(case: str) -> float:
    bad, fixed = TWO_GPU[case]["bad"]["step_ms"], TWO_GPU[case]["fixed"]["step_ms"]
    return (bad - fixed) / bad


def test_every_two_gpu_kind_is_planted():
    assert {"exposed_comm", "pipeline_bubble", "rank_skew"} <= set(TWO_GPU)


def test_a_late_rank_is_named_and_its_wait_predicts_the_saving():
    bad, fixed = diagnose(_trace("rank_skew", "bad")), diagnose(_trace("rank_skew", "fixed"))
    f = bad.finding("rank_skew")
    assert f is not None and f.share >= 0.1, bad.text()
    assert f.where["late_rank"] == 1 and "waiting for rank 1" in bad.text()
    assert "AllReduce" in f.where["kernel"] and bad.finding("pipeline_bubble") is None
    assert fixed.share("rank_skew") <= bad.share("rank_skew") / 3, fixed.text()
    assert _saving("rank_skew") / 1.5 <= f.share <= _saving("rank_skew") * 1.5, (f.share, _saving("rank_skew"))


def test_a_pipeline_at_one_micro_batch_is_a_bubble_and_more_micro_batches_shrink_it():
    bad, fixed = diagnose(_trace("pipeline_bubble", "bad")), diagnose(_trace("pipeline_bubble", "fixed"))
    assert bad.findings[0].kind == "pipeline_bubble" and bad.share("pipeline_bubble") >= 0.3, bad.text()
    # m=8 keeps a bubble of its own ((p-1)/(m+p-1) = 11% with equal stages): the saving is the difference
    predicted = bad.share("pipeline_bubble") - fixed.share("pipeline_bubble")
    assert _saving("pipeline_bubble") / 1.5 <= predicted <= _saving("pipeline_bubble") * 1.5, (predicted, _saving("pipeline_bubble"))


@pytest.mark.parametrize("case", ["all_to_all", "exposed_comm"])
def test_collectives_are_communication_never_a_pipeline_bubble(case):
    for variant in ("bad", "fixed"):
        d = diagnose(_trace(case, variant))
        assert d.finding("pipeline_bubble") is None, d.text()
    d = diagnose(_trace(case, "bad"))
    assert d.finding("exposed_comm") is not None, d.text()


@pytest.mark.parametrize("case", ["all_to_all", "exposed_comm"])
def test_exposed_comm_is_within_the_target_of_the_measured_saving(case):
    predicted = diagnose(_trace(case, "bad")).share("exposed_comm")
    assert _within_target(predicted, _saving(case)), (predicted, _saving(case))


def test_exposed_comm_names_the_all_reduce_of_one_bucket():
    f = diagnose(_trace("exposed_comm", "bad")).finding("exposed_comm")
    assert f.share >= 0.05 and "AllReduce" in f.where["kernel"]


def test_ranks_folder_names_its_exposed_collectives():
    d = diagnose(load_trace(HERE / "fixtures" / "recorded" / "h200x2_ddp"))
    assert d.finding("exposed_comm") is not None
    assert "AllReduce" in d.finding("exposed_comm").where["kernel"]


# --------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------
def test_cli_json_has_the_documented_shape(capsys):
    assert cli.main(["diagnose", str(_trace("small_copies", "bad")), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"trace", "steps", "step_ms", "idle_ms_per_step", "findings"} <= set(doc)
    f = doc["findings"][0]
    assert set(f) == {"kind", "lost_ms_per_step", "share", "idle_ms_per_step", "where", "why", "fix", "lesson"}
    assert {"fixed_ms", "all_fixed_ms"} <= set(doc["what_if"])
    assert f["kind"] == "small_copies"


def test_cli_text_folds_small_findings(capsys):
    assert cli.main(["diagnose", str(_trace("item_small", "bad"))]) == 0
    out = capsys.readouterr().out
    assert "launch_bound" in out and "fix:" in out and "under 2% of the step each: host_sync" in out


def test_cli_fail_on(capsys):
    path = str(_trace("host_sync", "bad"))
    assert cli.main(["diagnose", path, "--fail-on", "host_sync:5%"]) == 1
    assert "host_sync loses" in capsys.readouterr().err
    assert cli.main(["diagnose", path, "--fail-on", "host_sync:0.5"]) == 0
    assert cli.main(["diagnose", str(_trace("host_sync", "fixed")), "--fail-on", "host_sync"]) == 0


@pytest.mark.parametrize("argv, message", [
    (["--fail-on", "sync"], "no finding kind 'sync'"),
    (["--fail-on", "host_sync:lots"], "must be a number"),
    (["--fail-on", "host_sync:2"], "under 1"),
    (["--step", "7"], "no step 7"),
])
def test_cli_bad_input_is_one_line(capsys, argv, message):
    assert cli.main(["diagnose", str(_trace("host_sync", "bad")), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_timeline_shades_what_each_finding_explains():
    import matplotlib

    matplotlib.use("Agg")
    from asynclab.trace.draw.timeline import draw_timeline

    path = _trace("item_small", "bad")
    d = diagnose(path)
    tl = draw_timeline(path, diagnosis=d)
    labels = [t.get_text() for t in tl.ax.get_legend().get_texts()]
    assert f"launch_bound {100 * d.share('launch_bound'):.0f}%" in labels
    small = [f.kind for f in d.findings if f.share < 0.02]
    assert small, d.text()
    assert not any(x.startswith(k) for k in small for x in labels)  # under 2% of the step: not shaded
