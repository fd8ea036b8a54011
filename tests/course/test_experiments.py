"""Lesson 01 and 02 experiments on the CPU at tiny sizes: documented keys, JSON-ready values, relations that must hold."""
import json
import math
import statistics

import pytest
import torch

import asynclab as al
from asynclab.course import experiments
from asynclab.lessons.async_dispatch import experiments as A
from asynclab.lessons.timing import experiments as T

CPU = "cpu"


def is_json_ready(obj) -> bool:
    """Plain JSON types only (no numpy, torch or tuples that would change on a round trip)."""
    return json.loads(json.dumps(obj)) == obj


def finite_positive(*values):
    return all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in values)


# -- package helpers -----------------------------------------------------------------------------
def test_for_lesson_and_helpers():
    assert experiments.for_lesson(1) is A and experiments.for_lesson("02") is T
    assert experiments.for_lesson("01_async_dispatch") is A
    with pytest.raises(ValueError, match="has no experiments module"):
        experiments.for_lesson(0)
    from asynclab.gpu import devices, timing

    assert devices.dtype_name(torch.float16) == "float16"
    assert timing.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert timing.percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    with pytest.raises(ValueError):
        timing.spin_cycles(torch.device("cpu"), 10)


# -- lesson 01 -----------------------------------------------------------------------------------
def test_d2l_benchmark_prints_like_d2l_and_returns_seconds(capsys):
    pytest.importorskip("d2l")
    r = A.d2l_benchmark(CPU, n=64, reps=2, rounds=1, big_n=96)
    printed = capsys.readouterr().out
    for desc in ("numpy", "torch", "torch, synchronized"):
        assert f"{desc}: " in printed and " sec" in printed
    assert {"numpy_s", "torch_unsynced_s", "torch_synced_s", "big_unsynced_s", "big_synced_s", "n", "big_n", "reps",
            "device"} <= set(r)
    assert "torch 96, synchronized: " in printed
    assert finite_positive(r["numpy_s"]) and r["torch_unsynced_s"] >= 0 and r["torch_synced_s"] >= 0
    assert (r["n"], r["reps"], r["device"]) == (64, 2, "cpu")
    assert is_json_ready(r)
    # the printed numbers are the returned ones (d2l prints 4 decimals)
    assert f"numpy: {r['numpy_s']:.4f} sec" in printed


def test_d2l_benchmark_quiet(capsys):
    pytest.importorskip("d2l")
    A.d2l_benchmark(CPU, n=32, reps=1, rounds=1, big_n=48, verbose=False)
    assert capsys.readouterr().out == ""


def test_host_runs_ahead_on_cpu_enqueue_is_the_work():
    r, trace = A.host_runs_ahead(CPU, n=128, reps=4, dtype=torch.float32)
    assert trace is None
    assert {"enqueue_ms", "finish_ms", "tflops", "host_free_ms", "n", "reps", "dtype", "device"} <= set(r)
    assert finite_positive(r["enqueue_ms"], r["finish_ms"], r["tflops"])
    assert r["finish_ms"] >= r["enqueue_ms"]
    # the CPU is synchronous: the synchronize after the loop adds (almost) nothing
    assert r["host_free_ms"] < 0.5 * r["finish_ms"]
    assert r["tflops"] == pytest.approx(2 * 128**3 * 4 / (r["finish_ms"] * 1e-3) / 1e12)
    assert r["dtype"] == "float32" and is_json_ready(r)


def test_host_runs_ahead_records_a_trace(tmp_path):
    pytest.importorskip("asynclab.gpu.record")
    path = tmp_path / "h.json.gz"
    r, trace = A.host_runs_ahead(CPU, n=32, reps=3, dtype=torch.float32, path=path)
    assert path.is_file() and path.read_bytes()[:2] == b"\x1f\x8b"
    names = set(trace.events.loc[trace.events["kind"] == "annotation", "name"])
    assert {"enqueue 3 x mm", "synchronize"} <= names
    assert (trace.events["name"] == "aten::mm").sum() == 3  # one profiled step of the same loop


def test_launch_overhead_cpu_has_no_graph():
    r = A.launch_overhead(CPU, ops=100, repeats=2)
    assert set(r) >= {"eager_us_per_op", "graph_us_per_op", "ops"}
    assert finite_positive(r["eager_us_per_op"]) and r["eager_us_per_op"] < 1000
    assert r["graph_us_per_op"] is None and r["speedup"] is None and r["ops"] == 100
    assert is_json_ready(r)


def test_launch_overhead_trace_cpu(tmp_path):
    pytest.importorskip("asynclab.gpu.record")
    t = A.launch_overhead_trace(CPU, tmp_path / "l.json.gz", ops=7)
    ev = t.events
    assert (ev["name"] == "aten::add_").sum() == 7
    assert "eager: 7 x add_" in set(ev["name"]) and "graph replay: 7 x add_" not in set(ev["name"])


def test_overhead_bound_shapes_and_flat_until():
    sizes = (2**8, 2**10, 2**12)
    r = A.overhead_bound(CPU, sizes=sizes, repeats=3, inner=3)
    assert r["sizes"] == list(sizes) and len(r["us_per_op"]) == 3 and len(r["gb_per_s"]) == 3
    assert finite_positive(*r["us_per_op"], *r["gb_per_s"])
    # flat_level_us and flat_until follow their definitions on the returned times
    us, level = r["us_per_op"], r["flat_level_us"]
    assert level == sorted(us[:3])[1]
    if r["flat_until"] is None:  # a noisy run: even the smallest size was above 1.25x the level
        assert us[0] > 1.25 * level
    else:
        i = r["sizes"].index(r["flat_until"])
        assert all(t <= 1.25 * level for t in us[: i + 1])
        assert i == len(sizes) - 1 or us[i + 1] > 1.25 * level
    assert is_json_ready(r)


@pytest.mark.parametrize("us, expected", [
    ([5.0, 5.1, 4.9, 6.0, 20.0], 8),    # flat, then the fourth is within 1.25x too, then not
    ([5.0, 5.1, 4.9, 6.3, 5.0], 4),     # stops at the first time above, even if a later one is back down
    ([5.0, 5.0, 5.0, 5.0, 5.0], 16),    # flat to the end
    ([9.0, 5.0, 5.0, 5.0, 5.0], None),  # the smallest size was slow: no flat stretch starts there
])
def test_flat_until_follows_its_definition(us, expected):
    assert A.flat_until([1, 2, 4, 8, 16], us, level=5.0) == expected


def test_overhead_bound_default_sizes_and_bad_op():
    assert A.DEFAULT_SIZES[0] == 2**10 and A.DEFAULT_SIZES[-1] == 2**26 and len(A.DEFAULT_SIZES) == 9
    with pytest.raises(ValueError, match="unknown op"):
        A.overhead_bound(CPU, sizes=(16,), op="tan")
    r = A.overhead_bound(CPU, sizes=(64,), op="sin", repeats=2, inner=2)
    assert r["op"] == "sin" and r["flat_until"] == 64


def test_hidden_syncs_cpu_says_no_cuda():
    r = A.hidden_syncs(CPU)
    ops = [row["op"] for row in r["ops"]]
    for op in (".item()", "print(t)", ".cpu()", "torch.nonzero(t)", "t.sum()", 't.to("cpu", non_blocking=True)'):
        assert op in ops
    assert all(row["syncs"] is None and "no CUDA device" in row["message"] for row in r["ops"])
    assert is_json_ready(r)


def test_sync_ops_run_on_cpu():
    t = torch.tensor([1.0, -2.0, 3.0])
    for name, fn, _ in A.SYNC_OPS:
        fn(t)  # every op the GPU experiment runs is valid code


def test_cpu_is_synchronous_ratio_near_one():
    r = A.cpu_is_synchronous(n=128, reps=4, repeats=9)
    assert {"naive_ms", "sync_ms", "ratio", "n", "reps"} <= set(r)
    assert finite_positive(r["naive_ms"], r["sync_ms"])
    naive, synced = r["naive_times_ms"], r["sync_times_ms"]
    assert len(naive) == len(synced) == 9
    assert r["naive_ms"] == statistics.median(naive) and r["sync_ms"] == statistics.median(synced)
    assert r["ratio"] == pytest.approx(statistics.median(a / b for a, b in zip(naive, synced)))
    assert 0.33 < r["ratio"] < 3.0  # same work both ways; loose for a shared 2-core CI machine


def test_paired_ratio_compares_each_pair_and_refuses_bad_input():
    # the machine slows 640-fold after the fourth pair: the ratio of medians would say 640, the pairs say 1
    assert al.paired_ratio([0.1] * 4 + [64.0] * 5, [0.1] * 5 + [64.0] * 4) == pytest.approx(1.0)
    assert al.paired_ratio([2.0, 4.0, 9.0], [1.0, 1.0, 1.0]) == 4.0
    with pytest.raises(ValueError, match="equally long"):
        al.paired_ratio([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="above 0"):
        al.paired_ratio([1.0], [0.0])


# -- lesson 02 -----------------------------------------------------------------------------------
def test_timers_side_by_side_cpu():
    r = T.timers_side_by_side(CPU, n=64, dtype=torch.float32, repeats=3, min_run_time=0.02)
    for name in ("naive", "sync", "events", "benchmark"):
        assert finite_positive(r[f"{name}_ms"]) and r[f"{name}_iqr_ms"] >= 0
        assert isinstance(r["measured"][name], str)
    assert "no CUDA" in r["measured"]["events"]  # the event timer says it fell back to the wall clock
    assert r["tflops"] > 0 and is_json_ready(r)


def test_timers_trace_cpu(tmp_path):
    pytest.importorskip("asynclab.gpu.record")
    t = T.timers_trace(CPU, tmp_path / "t.json.gz", n=32, dtype=torch.float32)
    names = set(t.events.loc[t.events["kind"] == "annotation", "name"])
    assert {"naive timer window", "sync timer window"} <= names


def test_warmup_cost_cpu():
    r = T.warmup_cost(CPU, n=64, dtype=torch.float32, repeats=3)
    assert {"first_ms", "median_ms", "ratio"} <= set(r)
    assert finite_positive(r["first_ms"], r["median_ms"])
    assert r["ratio"] == pytest.approx(r["first_ms"] / r["median_ms"])
    assert r["extra_ms"] == pytest.approx(r["first_ms"] - r["median_ms"])
    assert "64x64 float32" in r["workload"] and is_json_ready(r)


def test_spread_statistics_are_consistent():
    r = T.spread(CPU, n=32, repeats=40, dtype=torch.float32)
    xs = r["times_ms"]
    assert len(xs) == 40 and finite_positive(*xs)
    assert r["min_ms"] <= r["p05"] <= r["median_ms"] <= r["p95"] <= r["max_ms"]
    assert r["median_ms"] == pytest.approx(sorted(xs)[19] / 2 + sorted(xs)[20] / 2)
    assert r["mean_ms"] == pytest.approx(sum(xs) / 40)
    assert r["iqr_ms"] >= 0 and is_json_ready(r)


def test_sync_every_iteration_cpu():
    r = T.sync_every_iteration(CPU, ops=50, size=256)
    assert {"per_call_synced_us", "per_call_batched_us", "inflation"} <= set(r)
    assert finite_positive(r["per_call_synced_us"], r["per_call_batched_us"])
    assert r["inflation"] == pytest.approx(r["per_call_synced_us"] / r["per_call_batched_us"])
    assert 0.2 < r["inflation"] < 5  # nothing to sync on the CPU: about 1


def test_sync_every_iteration_trace_cpu(tmp_path):
    pytest.importorskip("asynclab.gpu.record")
    t = T.sync_every_iteration_trace(CPU, tmp_path / "s.json.gz", ops=4, size=16)
    ev = t.events
    assert (ev["name"] == "aten::add_").sum() == 8
    assert {"sync every call", "one sync at the end"} <= set(ev["name"])


def test_gpu_only_experiments_explain_themselves_on_cpu():
    s = T.synchronize_scope(CPU)
    assert s["parts"] == [] and s["device_sync_ms"] is None and "no CUDA" in s["note"]
    e = T.event_pitfalls(CPU)
    assert e["no_enable_timing_error"] is None and e["not_completed_error"] is None and "no CUDA" in e["note"]
    assert is_json_ready(s) and is_json_ready(e)


# -- run_all: the recording path, at CPU sizes -----------------------------------------------------
#: The lessons whose run_all runs here at CPU sizes, with traces where the CPU records them.
RUN_ON_CPU = ["01", "02", "03", "04", "05", "08"]


@pytest.mark.parametrize("mod", RUN_ON_CPU)
def test_run_all_on_cpu(mod, tmp_path):
    mod = experiments.for_lesson(mod)
    if mod is A:
        pytest.importorskip("d2l")
    pytest.importorskip("asynclab.gpu.record")
    results, traces = mod.run_all(CPU, trace_dir=tmp_path, verbose=False)
    public = {name for name in mod.CPU_KWARGS if not name.endswith("_trace")}
    assert set(results) - {"headline"} == public
    assert_run_all_gives_the_table(mod, results, traces)
    assert is_json_ready(results)
    assert all(p.is_file() and p.stat().st_size < 1_000_000 for p in traces.values())
    gpu_only = [r for name, r in results.items() if name != "headline" and "no CUDA GPU" in str(r.get("note", ""))]
    assert traces or len(gpu_only) == len(results) - 1  # no trace on the CPU only when every experiment needs a GPU


def assert_run_all_gives_the_table(mod, results, traces):
    """run_all's results have the keys of the lesson's EXPERIMENTS table, in its order (plus a headline from lesson
    03 on), and its traces are named by the table (a custom row's names may be patterns)."""
    from fnmatch import fnmatch

    assert [k for k in results if k != "headline"] == [row.key for row in mod.EXPERIMENTS]
    assert ("headline" in results) == (mod.LESSON >= "03")
    patterns = [name for row in mod.EXPERIMENTS for name in row.traces]
    assert all(any(fnmatch(name, p) for p in patterns) for name in traces), sorted(traces)


@pytest.mark.parametrize("number", experiments.with_experiments())
def test_every_lessons_table_names_its_own_functions(number):
    """A row's function is its module's own, named after its key (a custom row's ``_<key>``), and CPU_KWARGS sizes
    only what the table runs; run_all is the table's."""
    mod = experiments.for_lesson(number)
    table = mod.EXPERIMENTS
    assert table and all(isinstance(row, experiments.Experiment) for row in table)
    for row in table:
        assert getattr(mod, row.fn.__name__) is row.fn and row.fn.__module__ == mod.__name__, row.key
        assert row.fn.__name__ == ("_" if row.custom else "") + row.key
        assert row.trace_fn is None or getattr(mod, row.trace_fn.__name__) is row.trace_fn
    keys = [row.key for row in table]
    assert len(set(keys)) == len(keys)
    assert set(mod.CPU_KWARGS) <= set(keys) | {row.trace_fn.__name__ for row in table if row.trace_fn}
    assert mod.run_all.__name__ == "run_all" and "EXPERIMENTS" in mod.run_all.__doc__


@pytest.mark.parametrize("number", sorted(set(experiments.with_experiments()) - set(RUN_ON_CPU)))
def test_run_all_of_the_two_gpu_lessons_gives_the_tables_keys(number, tmp_path):
    """The lessons that test_run_all_on_cpu leaves out (each experiment says it needs two GPUs)."""
    mod = experiments.for_lesson(number)
    results, traces = mod.run_all(CPU, trace_dir=tmp_path, verbose=False)
    assert_run_all_gives_the_table(mod, results, traces)
    assert traces == {} and all("needs two CUDA GPUs" in r["note"] for k, r in results.items() if k != "headline")


def test_experiment_rows_call_their_functions_as_documented(tmp_path):
    calls = []

    def exp(device, path=None, n=1):
        calls.append(("exp", device.type, path and path.name, n))
        return n

    def exp_trace(device, path, ops=1):
        calls.append(("exp_trace", device.type, path.name, ops))

    def _custom(run, **sizes):
        calls.append(("custom", run.device.type, run.traces("c1", needs=0).name, run.traces("c2", needs=1), sizes))
        return "c"

    table = [experiments.Experiment("exp", exp, "e", gpus=0), experiments.Experiment("plain", exp),
             experiments.Experiment("traced", exp, "t", gpus=0, trace_fn=exp_trace),
             experiments.Experiment("custom", _custom, ("c1", "c2"), custom=True)]
    sizes = {"exp": {"n": 2}, "exp_trace": {"ops": 5}, "custom": {"k": 3}}
    results, traces = experiments.run_all(table, CPU, tmp_path, verbose=False, cpu_kwargs=sizes, headline=len)
    assert results == {"exp": 2, "plain": 1, "traced": 1, "custom": "c", "headline": 4}
    assert calls == [("exp", "cpu", "e.json.gz", 2), ("exp", "cpu", None, 1), ("exp", "cpu", None, 1),
                     ("exp_trace", "cpu", "t.json.gz", 5), ("custom", "cpu", "c1.json.gz", None, {"k": 3})]
    assert list(traces) == ["e", "t", "c1"] and traces["t"] == tmp_path / "t.json.gz"
    with pytest.raises(ValueError, match="custom"):
        experiments.Experiment("two", exp, ("a", "b"))
    with pytest.raises(ValueError, match="trace_fn"):
        experiments.Experiment("none", exp, trace_fn=exp_trace)


def test_cpu_kwargs_name_real_functions():
    for mod in (A, T, *(experiments.for_lesson(n) for n in (3, 4, 5, 8))):
        for name, kwargs in mod.CPU_KWARGS.items():
            fn = getattr(mod, name)
            assert callable(fn) and fn.__doc__ and "Example" in fn.__doc__
            assert set(kwargs) <= set(fn.__code__.co_varnames[: fn.__code__.co_argcount])


@pytest.mark.gpu
def test_gpu_host_runs_ahead_and_hidden_syncs():
    r, _ = A.host_runs_ahead("cuda", n=2048, reps=10)
    assert r["enqueue_ms"] < r["finish_ms"]
    rows = {row["op"]: row for row in A.hidden_syncs("cuda", spin_ms=10)["ops"]}
    assert rows[".item()"]["syncs"] is True and rows["t.sum()"]["syncs"] is False
    s = T.synchronize_scope("cuda", spin_ms=20)
    assert s["current_stream_sync_ms"] < s["device_sync_ms"]
    e = T.event_pitfalls("cuda", spin_ms=20)
    assert "enable_timing" in e["no_enable_timing_error"]


# -- lesson 03 (streams) on the CPU: what runs there, and clear notes for what needs a GPU -----------------
from asynclab.lessons.streams import experiments as S  # noqa: E402


def test_streams_cpu_runs_what_a_cpu_can():
    b = S.branches(CPU, repeats=2)
    assert finite_positive(b["one_stream_ms"]) and b["two_streams_ms"] is None and b["spec"]["branches"] == 2
    p = S.parallel_module(CPU, repeats=2)
    assert p["small"]["same_outputs"] and p["big"]["same_outputs"]
    assert finite_positive(p["small"]["sequential_ms"], p["small"]["parallel_ms"])
    assert is_json_ready(b) and is_json_ready(p)


@pytest.mark.parametrize("name", ["missing_wait", "spin_kernels", "tail_effect", "stream_pool", "cuda_graphs"])
def test_streams_gpu_only_experiments_say_so_on_cpu(name):
    r = getattr(S, name)(CPU)
    assert "no CUDA GPU" in r["note"] and is_json_ready(r)


def test_streams_headline_names_and_missing_figures():
    h = S.headline({"spin_kernels": {"speedup": 3.9}, "parallel_module": {"small": {"speedup": 2.5}}})
    assert set(h) == {"four_spin_kernels_speedup", "tiny_mm_streams_slowdown", "big_mm_streams_speedup",
                      "tail_fill_speedup", "parallel_module_speedup_small", "parallel_module_speedup_big",
                      "distinct_pool_streams", "graph_tiny_ms", "mobilenet_batch1_ms"}
    assert h["four_spin_kernels_speedup"] == 3.9 and h["parallel_module_speedup_small"] == 2.5
    assert h["tail_fill_speedup"] is None


def test_streams_workloads_are_described():
    assert S.describe_workload(S.WORKLOADS["small"]).startswith("4 branches of 2 x Softmax")
    mods, x = S.workload_modules(S.CPU_WORKLOADS["big"], torch.device("cpu"))
    assert len(mods) == 2 and tuple(x.shape) == (256, 256)


@pytest.mark.gpu
def test_gpu_streams_claims_hold_at_small_sizes():
    m = S.missing_wait("cuda", spin_ms=10, size=1 << 16)
    assert m["input_wrong_unfixed"] == m["output_wrong_unfixed"] == 1 << 16
    assert m["input_wrong_fixed"] == m["output_wrong_fixed"] == 0
    assert S.spin_kernels("cuda", spin_ms=2, repeats=2)["speedup"] > 3
    assert S.stream_pool("cuda", big_waves=5)["distinct_streams"] == 32
    g = S.cuda_graphs("cuda", repeats=5)
    assert g["same_outputs"] and g["tiny_ms"]["graph_parallel"] < g["tiny_ms"]["eager"]
    assert g["mobilenet_ms"]["graph"] < g["mobilenet_ms"]["eager"]


# -- lesson 04 (events): GPU-only; on the CPU each experiment says so; on a GPU the races are certain ------------
from asynclab.lessons.events import experiments as E  # noqa: E402


def test_events_experiments_explain_themselves_on_cpu():
    for name in E.CPU_KWARGS:
        r = getattr(E, name)(CPU)
        assert "no CUDA GPU" in r["note"] and is_json_ready(r), name
    head = E.headline({})
    assert set(head) >= {"race_wrong_values_unfixed", "race_wrong_values_fixed", "sanitizer_reported_race_unfixed",
                         "sanitizer_clean_fixed", "allocator_reuse_corrupted_unfixed", "allocator_reuse_corrupted_fixed"}
    assert all(v is None for k, v in head.items() if k != "race_elements")


def test_events_sanitizer_entry_point_refuses_bad_arguments(capsys):
    assert E._main(["--sanitized-race", "sometimes"]) == 2
    assert "usage" in capsys.readouterr().err


def test_trim_report_keeps_only_package_frames():
    report = ("Access by stream 9 during kernel:\nWith stack trace:\n"
              '  File "/opt/x/torch/_ops.py", line 1, in f\n    g()\n'
              '  File "/home/u/src/asynclab/lessons/events/experiments.py", line 3, in run\n    h()\n'
              "Previous access by stream 0 during kernel:")
    out = E.trim_report(report, {"9": "consumer", "0": "default"})
    assert "torch/_ops.py" not in out and "g()" not in out and "/home/u" not in out
    assert 'File "asynclab/lessons/events/experiments.py", line 3' in out and "    h()" in out
    assert "stream 9 (consumer)" in out and "stream 0 (default)" in out


@pytest.mark.gpu
def test_gpu_events_races_are_certain_and_fixed():
    r = E.race("cuda", spin_ms=10)
    assert r["no wait"]["wrong"] == r["elements"] and r["wait_event"]["wrong"] == 0 and r["synchronize"]["wrong"] == 0
    assert r["wait_event"]["host_ms"] < 0.2 * r["synchronize"]["host_ms"]
    a = E.allocator_reuse("cuda", spin_ms=10)
    assert a["nothing"]["same_block"] and a["nothing"]["wrong"] == a["elements"]
    assert a["record_stream"]["wrong"] == 0 and a["keep a reference"]["wrong"] == 0
    s = E.sanitizer("cuda")
    assert s["unfixed"]["reported"] and not s["fixed"]["reported"]


# -- lesson 05 (copy overlap): GPU-only; on the CPU each experiment says so; on a GPU the claims hold ----------------
from asynclab.lessons.copy_overlap import experiments as C  # noqa: E402


def test_copy_overlap_experiments_explain_themselves_on_cpu():
    for name in C.CPU_KWARGS:
        r = getattr(C, name)(CPU)
        assert "no CUDA GPU" in r["note"] and is_json_ready(r), name
    head = C.headline({})
    assert set(head) >= {"h2d_pageable_gbps", "h2d_pinned_gbps", "d2h_pinned_gbps", "bidirectional_gbps",
                         "hidden_fraction_pinned", "hidden_fraction_pageable", "d2h_early_read_wrong",
                         "pinned_source_mutation_wrong", "dataloader_step_ms_plain", "dataloader_step_ms_pinned"}
    assert all(v is None for v in head.values())


def test_copy_overlap_headline_reads_the_sweep_at_256_mib():
    sizes = [64 * 1024, 256 * C.MiB, C.SIZES[-1]]
    results = {"bandwidth": {"sizes": sizes, "gbps": {"h2d pinned": [4.0, 55.0, 56.0]}},
               "pipeline": {"pinned": {"hidden_fraction": 0.93}}, "early_read": {"no sync": {"wrong": 0}}}
    head = C.headline(results)
    assert head["h2d_pinned_gbps"] == 55.0 and head["h2d_pageable_gbps"] is None
    assert head["hidden_fraction_pinned"] == 0.93 and head["d2h_early_read_wrong"] is False
    assert C.SIZES[0] == 64 * 1024 and C.SIZES[-1] == 1 << 30


def test_pcie_peak_from_generation_and_lanes():
    from asynclab.gpu.hardware import pcie_peak_gbps

    assert round(pcie_peak_gbps(5, 16), 2) == 63.02 and round(pcie_peak_gbps(3, 16), 2) == 15.75
    with pytest.raises(ValueError, match="generation 9"):
        pcie_peak_gbps(9, 16)
    with pytest.raises(ValueError, match="at least 1 lane"):
        pcie_peak_gbps(5, 0)


def test_host_memory_kind_is_checked():
    with pytest.raises(ValueError, match="'pageable' or 'pinned'"):
        C._host(1024, "locked")


@pytest.mark.gpu
def test_gpu_copy_overlap_claims_hold_at_small_sizes():
    b = C.bandwidth("cuda", sizes=(64 * C.MiB,))
    assert b["gbps"]["h2d pinned"][0] > b["gbps"]["h2d pageable"][0]
    nb = C.non_blocking("cuda", nbytes=64 * C.MiB, spin_ms=10)["setups"]
    assert nb["pinned, non_blocking=True"]["call_ms"] < 1.0 < nb["pageable, non_blocking=True"]["call_ms"]
    p = C.pipeline("cuda", chunks=8, chunk_bytes=8 * C.MiB, path=None)
    assert p["wrong_chunks"] == 0 and p["overlapped_ms"] < p["serial_ms"]
    r = C.early_read("cuda", spin_ms=10)
    assert r["no sync"]["wrong"] == r["n"] and r["event sync"]["wrong"] == 0
    m = C.source_mutation("cuda", spin_ms=10)
    assert m["unfixed"]["wrong"] == m["n"] and m["fixed"]["wrong"] == 0


# ---------------------------------------------------------------------------------------------
# lesson 07: the recorded torch.distributed.pipelining bubble is what its own traces give
# ---------------------------------------------------------------------------------------------
from asynclab.lessons.pipeline_bubbles import experiments as P  # noqa: E402


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipelining_bubble_in_the_reference_is_measured_on_its_traces(schedule):
    from asynclab.course import reference
    from asynclab.trace.analysis.metrics import bubble_fraction
    from asynclab.trace import load_trace

    recorded = reference.results(7)["torch_pipelining"][schedule]
    ranks = load_trace([reference.trace_path(7, f"pipelining_{schedule}_rank{r}") for r in range(recorded["gpus"])])
    assert recorded["bubble_measured"] == pytest.approx(P.pipelining_bubble(ranks, recorded["gpus"]), abs=1e-9)
    # the union of the ranks' step ranges also holds rank 0 ending the step before while rank 1 waits for it
    union = bubble_fraction(ranks.window(annotation="ProfilerStep#3"), devices=[0, 1]).mean
    assert union > recorded["bubble_measured"] + 0.01


def test_copy_barriers_find_where_gpu0_stalls_and_name_a_trace_without_them():
    from asynclab.course import reference
    from asynclab.trace.analysis.metrics import idle_gaps

    for m in (4, 32):
        trace = reference.trace(7, f"gpipe_m{m}").window(annotation=f"gpipe m={m}")
        barriers = P.copy_barriers(trace)
        assert len(barriers) == m  # one gradient per micro-batch comes back to GPU 0
        assert [b["issued_us"] for b in barriers] == sorted(b["issued_us"] for b in barriers)
        positions = [b["kernels_before"] for b in barriers]
        assert positions == sorted(positions) and positions[0] == 0 and positions[-1] < barriers[0]["kernels"]
        # GPU 0's long idle gaps are mostly where the barriers put their waits (at m=32 on the H100s, 1.1 ms of
        # 17.5 are at the start, where GPU 0 waited for the host to launch the first forwards: lesson 07's 85%)
        idle = idle_gaps(trace).query("device == 0 and dur_us >= 20")["dur_us"].sum()
        assert 0.85 * idle <= sum(b["held_us"] for b in barriers) <= 1.05 * idle
    with pytest.raises(ValueError, match="no host thread other than the main one launched work on GPU 1"):
        P.copy_barriers(reference.trace(7, "pipelining_1f1b_rank0"))


def test_native_half_is_fp16_below_compute_capability_8(monkeypatch):
    from asynclab.gpu.devices import native_half

    assert native_half("cpu") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (7, 5))  # a T4
    assert native_half("cuda:0") == torch.float16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (8, 0))
    assert native_half("cuda:0") == torch.bfloat16


def test_pipelining_section_says_when_this_torch_is_too_old(monkeypatch):
    monkeypatch.setattr(P, "gpu_count", lambda: 2)
    monkeypatch.setattr(P, "resolve_device", lambda device=None: torch.device("cuda", 0))
    monkeypatch.setattr(P, "has_pipelining", lambda: False)
    r = P.torch_pipelining("cuda")
    assert "PyTorch 2.4 or newer" in r["note"] and r["gpipe"] is None and r["1f1b"] is None
