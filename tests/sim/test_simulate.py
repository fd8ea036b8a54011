"""al.simulate: training steps on simulated H100s as a profiler's trace, the cost model's figures, and the predicted
step times of the diagnosis cases against those measured on an NVIDIA H100."""
from __future__ import annotations

import gzip
import importlib.util
import itertools
import json
import statistics
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import asynclab as al
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.figures import card_figures, check_figures

ROOT = Path(__file__).resolve().parents[2]
CASES_JSON = ROOT / "tests" / "fixtures" / "diagnose" / "cases.json"


def _train_step():
    """A small model's AMP training step, built on the first call."""
    state = {}

    def step():
        if not state:
            state["model"] = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
            state["opt"] = torch.optim.SGD(state["model"].parameters(), lr=0.1)
            state["x"], state["y"] = torch.randn(32, 64, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(state["model"](state["x"]), state["y"])
        loss.backward()
        state["opt"].step()
        state["opt"].zero_grad(set_to_none=True)
        return loss.item()
    return step


def test_a_training_step_is_a_profilers_trace(tmp_path):
    trace = al.simulate(_train_step(), steps=3, path=tmp_path / "t.json.gz")
    ev = trace.events
    kinds = set(ev["kind"])
    assert {"launch", "compute", "cpu_op", "annotation"} <= kinds
    steps = ev.loc[ev["kind"] == "annotation", "name"]
    assert [s for s in steps if s.startswith("ProfilerStep#")] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    names = set(ev.loc[ev["kind"] == "compute", "name"])
    assert {"addmm", "mm", "threshold_backward", "_to_copy"} <= names  # forward, backward, autocast's casts
    sim = trace.meta["simulated"]
    assert sim["predicted"] and len(sim["step_ms"]) == 3 and all(ms > 0 for ms in sim["step_ms"])
    assert isinstance(sim["returned"], float)  # the last step's loss, computed on the CPU
    ops = ev.loc[ev["kind"] == "cpu_op", "name"]
    assert {"autograd::engine::evaluate_function: AddmmBackward0", "Optimizer.step#SGD.step"} <= set(ops)
    diagnosis = al.diagnose(trace)
    assert "steps" in str(diagnosis) and "no profiler ran" in " ".join(diagnosis.notes)
    assert diagnosis.step_ms > 0.5 * diagnosis.profiled_ms  # nothing taken out as the profiler's cost
    assert al.draw_timeline(trace) is not None
    doc = json.loads(gzip.open(tmp_path / "t.json.gz", "rt").read())  # Chrome trace JSON, as Perfetto opens it
    assert doc["traceEvents"] and all({"ph", "ts", "dur", "pid", "tid"} <= set(e) for e in doc["traceEvents"])
    assert len(al.load_trace(tmp_path / "t.json.gz").events) == len(ev)


def test_the_codes_own_timers_are_recorded():
    def timed():
        import time
        x = torch.randn(4096, 4096, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        y = x @ x
        end.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        return (t1 - t0) * 1e3, start.elapsed_time(end)

    sim = al.simulate(timed, values=False).meta["simulated"]
    host_ms, event_ms = sim["returned"]
    assert sim["elapsed_ms"] == [event_ms] and sim["timed_ms"][0] == pytest.approx(host_ms)
    assert 2.0 < event_ms < host_ms  # 137 GFLOP of fp32 at 50 TFLOP/s: about 2.7 ms


def test_the_hosts_own_tensor_work_is_a_row_of_the_trace():
    trace = al.simulate(lambda: torch.randn(512, 512).tanh().cuda().sum().item())
    rows = trace.events[trace.events["kind"] == "cpu_op"]
    made = rows[rows["name"].isin(["aten::randn", "aten::tanh"])]
    assert len(made) == 2 and (made["end_us"] - made["start_us"]).min() > 0


def test_the_host_gets_what_the_code_copies_back():
    seen = []

    def metric():
        a = torch.arange(8.0, device="cuda")
        hit = (a > 5).float().mean()
        seen[:] = [hit.cpu().numpy().item(), a.to("cpu").tolist(), str(a.to("cpu", torch.float16).dtype),
                   a.to("cpu", non_blocking=True).is_pinned(), str(a.cpu().device)]
    al.simulate(metric)
    assert seen == [0.25, list(range(8)), "torch.float16", True, "cpu"]


def test_an_optimizer_takes_the_multi_tensor_path_a_gpu_takes():
    """PyTorch's optimizers pick their multi-tensor (foreach) kernels for parameters on a GPU: on the simulated GPU
    too, so the step runs the operators, and takes the values, a GPU's step does."""
    from asynclab.sim.simulate import predictor

    with predictor() as gpu:
        params = [torch.ones(4, device="cuda", requires_grad=True) for _ in range(3)]
        for p in params:
            p.grad = torch.full((4,), 2.0, device="cuda")
        opt = torch.optim.SGD(params, lr=0.5)
        gpu.costs.ops.clear()
        opt.step()
        names = [name for name, *_ in gpu.costs.ops]
        values = params[0].tolist()
    assert "aten::_foreach_add_" in names and "aten::add_" not in names, names
    assert values == [0.0] * 4


def test_clip_grad_norm_takes_the_multi_tensor_path_a_gpu_takes():
    from asynclab.sim.simulate import predictor

    def clipped(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(16, 16)
        x = torch.randn(8, 16)
        model = model.to(device)
        model(x.to(device)).pow(2).sum().backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        return float(norm), model.weight.grad.cpu()

    norm, grad = clipped("cpu")
    with predictor() as gpu:
        gpu.costs.ops.clear()
        sim_norm, sim_grad = clipped("cuda")
        names = [name for name, *_ in gpu.costs.ops]
    if hasattr(torch.utils._foreach_utils, "_foreach_supported_types"):  # a PyTorch whose check reads that list
        assert "aten::_foreach_norm" in names and "aten::_foreach_mul_" in names, names
    assert sim_norm == pytest.approx(norm) and torch.allclose(sim_grad, grad)


def _host_ms(setup, timed):
    """The simulated host's time (ms) of ``timed(state)`` after ``state = setup()``, on a simulated H100."""
    from asynclab.sim.simulate import predictor

    with predictor(computes=False) as gpu:
        state = setup()
        t0 = gpu.host
        timed(state)
        return gpu.host - t0


def _chain(x, grad=True, n=10):
    with torch.set_grad_enabled(grad):
        for _ in range(n):
            x = x * 1.0001
    return x


def _backward_ms(n):
    def warm():  # a backward pass first, so that the timed one finds its memory in the allocator's cache
        x = torch.ones(1, device="cuda", requires_grad=True)
        _chain(x, n=n).backward()
        return _chain(x, n=n)
    return _host_ms(warm, lambda y: y.backward())


def _optimizer_ms(kind, n):
    def setup():
        params = [torch.zeros(8, device="cuda", requires_grad=True) for _ in range(n)]
        for p in params:
            p.grad = torch.zeros_like(p)
        opt = getattr(torch.optim, kind)(params, lr=0.1)
        opt.step()  # its state made: the timed step is a steady one
        return opt
    return _host_ms(setup, lambda opt: opt.step())


def test_autograd_and_the_optimizer_cost_the_host_their_measured_figures():
    """Each backward node costs its operators and the engine's ``autograd_node_us``, each operator that records a
    node ``autograd_record_us`` more, each backward call ``backward_call_us`` once, and an optimizer's step
    ``optimizer_step_us`` and ``optimizer_param_us`` (its class's) per parameter."""
    f = card_figures("H100")
    leaf = lambda: torch.ones(1, device="cuda", requires_grad=True)  # noqa: E731
    plain, recorded = _host_ms(leaf, lambda x: _chain(x, grad=False)), _host_ms(leaf, _chain)
    assert recorded - plain == pytest.approx(10 * f["autograd_record_us"] / 1e3)
    node = (f["host_op_us"] + f["launch_us"] + f["autograd_node_us"]) / 1e3  # its multiply, and the engine's time
    assert (_backward_ms(20) - _backward_ms(10)) / 10 == pytest.approx(node)
    leaf_node = _backward_ms(1) - node  # the leaf's own node (its gradient accumulated) and the call
    assert _backward_ms(10) == pytest.approx(10 * node + leaf_node)
    assert leaf_node > f["backward_call_us"] / 1e3
    for kind in ("SGD", "Adam", "AdamW"):
        per_param = (_optimizer_ms(kind, 40) - _optimizer_ms(kind, 8)) / 32
        assert per_param == pytest.approx(f["optimizer_param_us"][kind] / 1e3, rel=0.05), kind
        assert _optimizer_ms(kind, 8) - 8 * per_param > f["optimizer_step_us"][kind] / 1e3, kind


def test_a_backward_call_and_an_optimizers_step_cost_their_fixed_time_once():
    """The fixed parts: one ``BACKWARD_CALL_MS`` a backward call, whatever its nodes, and one ``OPTIMIZER_STEP_MS`` a
    step that has gradients to apply (none for a step after ``zero_grad()``, which skips its parameters)."""
    from asynclab.sim.simulate import predictor

    with predictor(computes=False) as gpu:
        x = torch.ones(1, device="cuda", requires_grad=True)
        opt = torch.optim.SGD([x], lr=0.1)

        def cost(call):
            t0 = gpu.host
            call()
            return gpu.host - t0
        steps = []
        for extra in (0.0, 0.0, 1.0):  # the first round makes the gradient's memory and the optimizer's state
            gpu.BACKWARD_CALL_MS += extra
            gpu.OPTIMIZER_STEP_MS = dict(gpu.OPTIMIZER_STEP_MS, SGD=gpu.OPTIMIZER_STEP_MS["SGD"] + extra)
            y = _chain(x, n=5)
            steps.append((cost(y.backward), cost(opt.step), cost(lambda: (opt.zero_grad(), opt.step()))))
    _, (back0, step0, empty0), (back1, step1, empty1) = steps
    assert back1 - back0 == pytest.approx(1.0) and step1 - step0 == pytest.approx(1.0)
    assert empty1 == pytest.approx(empty0)


def test_two_gpus():
    def two():
        a = torch.randn(1 << 20, device="cuda:0")
        b = a.to("cuda:1")
        return (b * 2).sum().item()

    trace = al.simulate(two, gpus=2)
    assert trace.devices == [0, 1]
    assert "p2p" in set(trace.events["kind"])


def test_a_model_split_over_two_gpus_trains_with_each_gradient_on_its_own_gpu():
    """Autograd is told a trained tensor lives on the CPU: a move to the other GPU must still send its gradient back
    (else the first GPU's backward met a gradient on the second: 'Expected all tensors to be on the same device')."""
    grads = {}

    def step():
        w0 = torch.ones(64, 64, device="cuda:0", requires_grad=True)
        w1 = torch.ones(64, 64, device="cuda:1", requires_grad=True)
        x = torch.ones(8, 64, device="cuda:0")
        ((x @ w0).to("cuda:1") @ w1).sum().backward()
        grads.update({name: (w.grad.device, float(w.grad.sum())) for name, w in (("w0", w0), ("w1", w1))})

    trace = al.simulate(step, gpus=2)
    assert grads == {"w0": (torch.device("cuda", 0), 8 * 64 * 64 * 64.0), "w1": (torch.device("cuda", 1), 8 * 64 * 64 * 64.0)}
    kinds = trace.events.groupby("device")["kind"].agg(set)
    assert "p2p" in kinds[0] and "p2p" in kinds[1], kinds  # the activations one way, their gradient back


def test_record_inside_a_simulation_gives_the_simulated_steps(tmp_path):
    """The lessons' experiments record their traces with asynclab.gpu.record: inside al.simulate it writes the
    simulated GPU's steps (a profiler there sees no GPU at all)."""
    from asynclab.gpu.record import STEP_ANNOTATION, record

    box = {}

    def run():
        x = torch.randn(512, 512, device="cuda")
        box["trace"] = record(lambda: (x @ x).sum(), path=tmp_path / "t.json.gz", warmup=1, steps=2)

    al.simulate(run)
    trace = box["trace"]
    assert trace.devices == [0] and "compute" in set(trace.events["kind"])
    names = list(trace.events.loc[trace.events["kind"] == "annotation", "name"])
    assert names.count(STEP_ANNOTATION) == 2 and "ProfilerStep#1" in names and "ProfilerStep#2" in names
    assert al.load_trace(tmp_path / "t.json.gz").devices == [0]


def test_bad_input_is_one_line():
    with pytest.raises(TypeError, match="needs a function"):
        al.simulate(3)
    with pytest.raises(ValueError, match="1 or 2 simulated GPUs"):
        al.simulate(lambda: None, gpus=3)
    with pytest.raises(ValueError, match="no figures for the card"):
        al.simulate(lambda: None, card="Z9")
    with pytest.raises(SimulationLimit, match=r"does not cover torch.distributed \(NCCL\)"):
        al.simulate(lambda: torch.distributed.init_process_group("nccl"))  # not NCCL's own error, far from the call


def test_a_matrix_product_costs_the_host_its_own_time():
    """cuBLAS's call makes a product cost the host more than an elementwise operator (the card's host_matmul_us)."""
    trace = al.simulate(lambda xs: (xs[0].add_(1.0), torch.mm(*xs)), steps=3, values=False,
                        setup=lambda: [torch.randn(64, 64, device="cuda") for _ in range(2)])
    ops = trace.events.loc[trace.events["kind"] == "cpu_op"].groupby("name")["dur_us"].last()  # allocations cached
    figures = card_figures("H100")
    assert ops["aten::mm"] == pytest.approx(figures["host_matmul_us"] + figures["launch_us"], rel=0.01)
    assert ops["aten::add_"] == pytest.approx(figures["host_op_us"] + figures["launch_us"], rel=0.01)


def test_the_figures_say_where_they_come_from():
    figures = card_figures("H100")
    assert figures["meta"]["calibrated"] is True and "H100" in figures["meta"]["measured_on"]["gpu"]
    sources = figures["meta"]["source"]
    assert all(any(word in text for word in ("measured", "recording", "assumption", "specification"))
               for text in sources.values())
    card_own = ["memory_gbps", "matmul_tflops.fp32", "matmul_tflops.bf16", "copy_gbps.pinned"]
    assert all(sources[name].startswith("measured") for name in card_own)
    with pytest.raises(ValueError, match="copy_gbps must be positive"):
        check_figures({**figures, "copy_gbps": {**figures["copy_gbps"], "peer": 0}})


def test_a_small_product_runs_at_the_rate_the_card_measured_for_its_size():
    figures = card_figures("H100")

    def product(n: int, dtype: torch.dtype) -> float:
        t = al.simulate(lambda x: x @ x, setup=lambda: torch.empty(n, n, device="cuda", dtype=dtype), values=False)
        return float(t.events.loc[t.events["kind"] == "compute", "dur_us"].iloc[-1])

    for n, dtype, name in ((1024, torch.float32, "fp32"), (512, torch.bfloat16, "bf16")):
        measured = figures["matmul_tflops_by_side"][name][str(n)]
        assert product(n, dtype) == pytest.approx(2 * n ** 3 / measured / 1e6, rel=0.01)  # µs at the measured rate
    between = product(1000, torch.float32)  # between the sides measured: between their rates
    assert 2e9 / 38.07e6 < between < 2e9 / 18.9e6
    assert product(8192, torch.bfloat16) == pytest.approx(2 * 8192 ** 3 / figures["matmul_tflops"]["bf16"] / 1e6,
                                                          rel=0.01)
    with pytest.raises(ValueError, match="matmul_tflops_by_side must be positive"):
        check_figures({**figures, "matmul_tflops_by_side": {**figures["matmul_tflops_by_side"], "bf16": {"64": -1}}})


def _kernel_us(card: str, work, setup) -> dict:
    ev = al.simulate(work, setup=setup, values=False, card=card).events
    return ev[ev["kind"] == "compute"].groupby("name")["dur_us"].sum().to_dict()


def test_the_shortest_kernels_of_a_kind_take_what_the_card_measured_of_that_kind():
    """On an H200, cuBLAS runs a small fp32 product (without TF32) as a split-K product and its reduction: it takes
    what the card measured for its layout and shape (fp32_product_us_by_shape: 5.14 µs for 32 x 64 by 64 x 64); a
    small sum is a reduction kernel, the card's measured shortest of its kind; bf16 products and adds keep theirs.
    A card that did not measure a kind (the H100's) prices it as before."""
    h200 = card_figures("H200")
    kinds = h200["min_kernel_us_by_kind"]

    def setup():
        return (torch.empty(64, 64, device="cuda"), torch.empty(64, 64, device="cuda", dtype=torch.bfloat16),
                torch.empty(32, 64, device="cuda"))

    def work(t):  # products of 32 x 64 by 64 x 64: too small for the card's rate to price them over its floor
        small32, small16, rows = t
        torch.mm(rows, small32)
        torch.mm(rows.bfloat16(), small16)
        rows.sum(0)
        rows.add_(1.0)

    got = _kernel_us("H200", work, setup)
    measured = h200["fp32_product_us_by_shape"]["mm_nn"]["32x64x64"]
    assert got["mm"] == pytest.approx(measured + h200["min_matmul_us"], rel=1e-6)
    assert got["sum"] == pytest.approx(kinds["reduction"], rel=1e-6)
    assert got["add_"] == pytest.approx(h200["min_kernel_us"], rel=1e-6)
    torch.backends.cuda.matmul.allow_tf32 = True
    try:  # with TF32, no split-K pair: the product takes what the card's TF32 rate gives, under the fp32 floor
        assert _kernel_us("H200", work, setup)["mm"] < kinds["fp32_product"] + h200["min_matmul_us"] - 0.1
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    h100 = card_figures("H100")
    assert "min_kernel_us_by_kind" not in h100
    got = _kernel_us("H100", work, setup)
    assert got["mm"] < kinds["fp32_product"] + h100["min_matmul_us"] - 0.1  # no split-K floor
    assert got["sum"] == pytest.approx(h100["min_kernel_us"], rel=1e-6)


def test_a_multi_tensor_operator_on_lists_that_differ_in_shape_runs_a_kernel_per_tensor():
    """PyTorch's foreach fast path needs its lists to agree tensor by tensor; capturable Adam divides 64-wide
    tensors by 0-d ones, which an H200 ran as 50 kernels for 50 tensors (one kernel where the shapes agree)."""
    def setup():
        return ([torch.empty(64, 64, device="cuda") for _ in range(50)],
                [torch.empty((), device="cuda") for _ in range(50)],
                [torch.empty(64, 64, device="cuda") for _ in range(50)])

    def work(t):
        xs, zero_d, same = t
        torch._foreach_div_(xs, zero_d)

    def fast(t):
        xs, zero_d, same = t
        torch._foreach_div_(xs, same)

    floor = card_figures("H200")["min_kernel_us"]
    assert _kernel_us("H200", work, setup)["_foreach_div_"] == pytest.approx(50 * floor, rel=1e-6)
    assert _kernel_us("H200", fast, setup)["_foreach_div_"] < 10 * floor  # one kernel over all the SMs


def test_a_convolution_runs_at_cudnns_rates_and_its_backward_pass_at_twice_its_work():
    def step(parts):
        x, conv = parts
        conv(x).sum().backward()

    def setup():
        return torch.randn(64, 128, 56, 56, device="cuda", requires_grad=True), torch.nn.Conv2d(128, 128, 3).cuda()

    def kernels(tf32: bool) -> dict:
        before = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = tf32
        try:
            ev = al.simulate(step, setup=setup, values=False).events
        finally:
            torch.backends.cudnn.allow_tf32 = before
        return ev[ev["kind"] == "compute"].groupby("name")["dur_us"].sum().to_dict()

    fast, slow = kernels(True), kernels(False)  # PyTorch lets cuDNN use TF32 by default
    assert slow["convolution"] > 4 * fast["convolution"]
    assert fast["convolution_backward"] == pytest.approx(2 * fast["convolution"], rel=0.2)


def test_an_h200_card_measured_on_h200s_moves_memory_faster():
    figures = card_figures("H200")
    assert figures["meta"]["calibrated"] and figures["meta"]["measured_on"]["gpu"] == "NVIDIA H200"

    def big_add():
        x = torch.empty(1 << 27, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x.add_(1.0)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)
    h100 = al.simulate(big_add, values=False).meta["simulated"]["returned"]
    h200 = al.simulate(big_add, values=False, card="H200").meta["simulated"]["returned"]
    ratio = card_figures("H100")["memory_gbps"] / figures["memory_gbps"]
    assert h200 == pytest.approx(h100 * ratio, rel=0.05)  # 1 GiB read and written: the cards' bandwidths


def _calibrate():
    spec = importlib.util.spec_from_file_location("calibrate_gpu", ROOT / "scripts" / "calibrate_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_calibration_script_writes_valid_figures_and_refuses_without_a_gpu(tmp_path, capsys):
    cal = _calibrate()
    measured = {"memory_gbps": 2900.0, "matmul_tflops": {"fp32": 51.0, "tf32": 380.0, "bf16": 650.0, "fp16": 660.0},
                "host_op_us": 12.0, "launch_us": 4.5, "copy_gbps": {"pinned": 53.0, "pageable": 9.0}}
    figures = cal.figures_from(measured, card_figures("H100"), {"gpu": "NVIDIA H100 80GB HBM3"})
    check_figures(figures)
    assert figures["meta"]["calibrated"] and "measured" in figures["meta"]["source"]["memory_gbps"]
    assert "recording" in figures["meta"]["source"]["copy_gbps.peer"]  # not measured on one GPU: kept, and says so
    assert cal.rate_gbps(1 << 30, 10.0) == pytest.approx(107.37, abs=0.01)
    assert cal.tflops(4096, 4096, 4096, 1.0) == pytest.approx(137.44, abs=0.01)
    if not torch.cuda.is_available():
        assert cal.main(["--out", str(tmp_path)]) == 1
        assert capsys.readouterr().err.count("\n") == 1


def _script(name: str):
    """One of the scripts that recorded the diagnosis cases, as a module (its case functions and its timing)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases():
    return _script("record_diagnose_cases")


#: The one-GPU diagnosis cases, all of which the simulated GPU runs (launch_bound's and underfilled_gpu's fixes are
#: CUDA graphs).
SIMULATED_CASES = ("clean", "host_sync", "pageable_copy", "exposed_copy", "stream_wait", "small_copies",
                   "alloc_churn", "dataloader_stall", "item_small", "sync_timing", "mask_index", "numpy_metric",
                   "print_loss", "launch_bound", "underfilled_gpu")
#: The two-GPU case it runs: two stages in one process (the others run a process per GPU, through torch.distributed,
#: which the simulation does not cover).
TWO_GPU_CASES = ("pipeline_bubble",)


def predicted_steps(cases=SIMULATED_CASES + TWO_GPU_CASES) -> dict:
    """Each case's step time on the simulated H100 (two for a two-GPU case), timed as the scripts that recorded them
    time them on GPUs (5 steps after 5 of warm-up, between two perf_counter readings around a synchronize), in ms."""
    rdc, out = _cases(), {}
    two = _script("record_two_gpu_cases") if set(cases) & set(TWO_GPU_CASES) else None
    for case in cases:
        gpus, where = (2, two) if case in TWO_GPU_CASES else (1, rdc)
        sync = two._sync_all if gpus == 2 else None
        for variant in rdc.variants(case):
            torch.manual_seed(0)
            trace = al.simulate(lambda step: rdc.measure_ms(step, steps=5, repeats=1, sync=sync),
                                setup=lambda: where.CASES[case](variant), values=False, gpus=gpus)
            out[case, variant] = trace.meta["simulated"]["returned"]
    return out


@pytest.fixture(scope="module")
def predicted():
    return predicted_steps()


def test_the_cases_run_and_bad_is_never_faster(predicted):
    for case in SIMULATED_CASES + TWO_GPU_CASES:
        if (case, "bad") in predicted:
            assert predicted[case, "bad"] >= predicted[case, "fixed"], case


MEASURED = json.loads(CASES_JSON.read_text())["cases"]


def measured_ms(case: str, variant: str) -> float:
    """A case's step as the GPU measured it: the median of its four measurements, the one beside its trace and its
    ``runs`` (the same measurement again, each in a fresh process). Where the GPU sets the step they agree within 5%;
    where the host does, one run may be twice another (dataloader_stall's bad step: 17.2 ms beside the trace, 8.6 to
    10.5 in the fresh processes), and one run alone is no measure of the step."""
    entry = MEASURED[case][variant]
    return statistics.median([entry["step_ms"], *entry.get("runs", {}).values()])


def _runs(case: str) -> str:
    """The saving each fresh process measured, for a reason to quote beside the median."""
    runs = {v: MEASURED[case][v].get("runs", {}) for v in ("bad", "fixed")}
    got = [runs["bad"][r] - runs["fixed"][r] for r in runs["bad"] if r in runs["fixed"]]
    return f"; measured in {len(got)} fresh processes: {min(got):.2f} to {max(got):.2f} ms" if got else ""


#: Where the prediction of a saving is known to miss, and why (not tuned away): on the simulated H100, against the
#: median of the H100's measurements.
_SYNC_REFILL = ("after each host sync the GPU starves while the host relaunches, and the model's step loses less to it "
                "than the H100's did: the sync's own host cost (cudaDeviceSynchronize's median in the trace, 4 µs) "
                "explains a few percent of the difference, and the rest is not yet accounted for")
SAVING_MISSES = {"alloc_churn": "empty_cache's cost: 2.7 ms a step on the H100, 1.6 ms predicted with cudaMalloc and "
                                "cudaFree as measured alone on an H100 (42 and 47 µs): the model has no cost for "
                                f"empty_cache's own release of the cached blocks{_runs('alloc_churn')}",
                 "item_small": "the fix measured 0.10 ms slower than the read it removed (noise: the read costs "
                               f"nothing on a GPU the host cannot keep busy); 0.01 ms saved predicted"
                               f"{_runs('item_small')}",
                 "sync_timing": f"14 synchronize calls a step: 0.62 ms saved predicted against 1.28 ms measured"
                                f"{_runs('sync_timing')}: {_SYNC_REFILL}",
                 "mask_index": f"boolean-mask indexing in the loss: 0.48 ms saved predicted against 1.12 ms measured"
                               f"{_runs('mask_index')}: {_SYNC_REFILL}",
                 "print_loss": "print(loss) each step: 1.67 ms saved predicted against 2.66 ms measured (0.63 of it)"
                               f"{_runs('print_loss')}: printing a GPU tensor costs the H100's host more than one "
                               "blocking read"}
KEYS = [(c, v) for c in SIMULATED_CASES + TWO_GPU_CASES
        for v in (("clean",) if c == "clean" else ("bad", "fixed"))]


@pytest.mark.parametrize("key", KEYS, ids="-".join)
def test_predicted_step_within_30_percent_of_the_measured(predicted, key):
    ratio = predicted[key] / measured_ms(*key)
    assert 0.7 <= ratio <= 1.3, f"{key}: predicted {predicted[key]:.2f} ms, {ratio:.2f} of the measured"


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=SAVING_MISSES[c], strict=True))
                                  if c in SAVING_MISSES else c for c in SIMULATED_CASES + TWO_GPU_CASES
                                  if c != "clean"])
def test_predicted_saving_within_a_factor_of_1_5(predicted, case):
    saved = predicted[case, "bad"] - predicted[case, "fixed"]
    measured = measured_ms(case, "bad") - measured_ms(case, "fixed")
    assert 1 / 1.5 <= saved / measured <= 1.5, f"{case}: {saved:.2f} ms saved, {measured:.2f} measured"


def test_a_finished_simulation_holds_no_memory():
    """Its tensors are freed when it returns (not at a later gc pass): a notebook simulating a large model several
    times must not fill the machine's memory."""
    import gc
    import weakref

    held = []

    def setup():
        model = torch.nn.Linear(512, 512).cuda()
        held.append(weakref.ref(model.weight))
        return model

    gc.disable()
    try:
        al.simulate(lambda m: m(torch.randn(8, 512, device="cuda")).sum().backward(), setup=setup, steps=2,
                    values=False)
        assert held[0]() is None
    finally:
        gc.enable()



def _streams_ms(inputs, op, streams: int) -> float:
    """GPU time of ``op(*inputs())`` once per stream, on ``streams`` streams at once, on the simulated H100 (all of it
    queued before the GPU starts: the host's launches are not in it)."""
    def run(*xs) -> float:
        op(*xs)  # a first call: one-off costs (cuBLAS loading its kernels) come before the timing, as on a GPU
        side = [torch.cuda.Stream() for _ in range(streams)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(4_000_000)  # 2 ms: the host queues everything before the GPU starts on it
        start.record()
        for s in side:
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                op(*xs)
        for s in side:
            torch.cuda.current_stream().wait_stream(s)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    return al.simulate(lambda xs: run(*xs), setup=inputs, values=False).meta["simulated"]["returned"]


def test_kernels_share_the_sms_their_blocks_fill():
    """Products that fill the 132 SMs take turns on two streams; a softmax over 8 rows (8 blocks) leaves room for
    another beside it, the two sharing the bandwidth their SMs draw, and runs as many times slower than one over 132
    rows as the H100's did (the figure the card's sm_draw comes from)."""
    big = lambda: [torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2)]  # noqa: E731
    one, two = (_streams_ms(big, torch.mm, n) for n in (1, 2))
    assert 1.9 <= two / one <= 2.1, (one, two)
    narrow = lambda: [torch.randn(8, (1 << 23) // 8, device="cuda")]  # noqa: E731
    one, two = (_streams_ms(narrow, lambda x: torch.softmax(x, -1), n) for n in (1, 2))
    assert 1.0 <= two / one <= 1.2, (one, two)
    wide = lambda: [torch.randn(132, (1 << 23) // 132, device="cuda")]  # noqa: E731
    raw = json.loads((ROOT / "tests" / "sim" / "sm_sharing_h100.json").read_text())["raw"]
    h100 = raw["softmax_8_rows_ms"] / raw["softmax_full_ms"]
    assert one / _streams_ms(wide, lambda x: torch.softmax(x, -1), 1) == pytest.approx(h100, rel=0.1), one


def test_torch_benchmark_first_imported_in_a_simulation_times_the_cpu_after_it():
    """torch.utils.benchmark picks its clock when first imported; imported inside a simulation on a machine without
    a GPU, its Timer must not ask for a driver once the simulation has ended (a fresh process: this one may have
    imported it already)."""
    import subprocess

    code = ("import torch, asynclab as al\n"
            "def f():\n"
            "    import torch.utils.benchmark as b\n"
            "    return b.Timer('x * 2', globals={'x': torch.ones(4, device='cuda')}).timeit(3).mean\n"
            "al.simulate(f)\n"
            "import torch.utils.benchmark as b\n"
            "print(torch.cuda.is_available() or b.Timer('x * 2', globals={'x': torch.ones(4)}).timeit(3).mean > 0)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-500:]


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch.library.custom_op: PyTorch 2.4 and later")
def test_a_kernel_of_more_blocks_than_a_wave_runs_in_waves_and_another_stream_fills_its_tail():
    """Lesson 03's spin-blocks operator on the simulated H100: a grid's time is its waves (132 SMs x 2 blocks of
    1024 threads), and a kernel on a second stream fills the SMs that the last wave leaves empty."""
    from asynclab.course.predicted import simulated
    from asynclab.lessons.streams import experiments as S

    r, limit, _ = simulated(lambda: S.tail_effect("cuda", block_us=100.0, waves=2))
    assert limit is None and r["wave"] == 264 and r["blocks_per_sm"] == 2
    t = dict(zip(r["blocks"], r["ms"]))
    assert t[264] == pytest.approx(0.1, rel=0.05) and t[265] == pytest.approx(0.2, rel=0.05)
    assert r["one_stream_ms"] == pytest.approx(0.3, rel=0.05) and r["two_streams_ms"] == pytest.approx(0.2, rel=0.05)


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch.library.custom_op: PyTorch 2.4 and later")
def test_a_high_priority_streams_kernel_cuts_in_at_the_next_wave():
    """Lesson 03's priority experiment on the simulated H100: behind a kernel of five waves of 100 µs blocks, one
    block on a normal stream waits for all five; on a high-priority stream, for the wave running when it came."""
    from asynclab.course.predicted import simulated
    from asynclab.lessons.streams import experiments as S

    r, limit, _ = simulated(lambda: S.stream_pool("cuda", block_us=100.0, big_waves=5))
    assert limit is None and r["big_kernel_ms"] == pytest.approx(0.5, rel=0.05)
    assert r["normal_wait_ms"] == pytest.approx(0.6, rel=0.05)
    assert 0.1 <= r["high_wait_ms"] <= 0.2 + 1e-6


def test_a_high_priority_streams_kernel_takes_the_sms_of_a_running_kernel():
    """A kernel that fills the SMs gives them to a kernel on a high-priority stream as its short blocks end (at once,
    in the model); a kernel on a normal stream waits for it to end."""
    def run(priority: int) -> tuple[float, float]:
        big, small = torch.ones(2 ** 27, device="cuda"), torch.ones(16, device="cuda")
        side = torch.cuda.Stream(priority=priority)
        b0, b1, s0, s1 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        torch.cuda.synchronize()
        b0.record()
        big.mul_(2.0)
        b1.record()
        with torch.cuda.stream(side):
            s0.record()
            small.add_(1.0)
            s1.record()
        torch.cuda.synchronize()
        return s0.elapsed_time(s1), b0.elapsed_time(b1)

    from asynclab.course.predicted import simulated

    (normal, big_ms), _, _ = simulated(lambda: run(0))
    (urgent, _), _, _ = simulated(lambda: run(-1))
    assert normal > 0.5 * big_ms and urgent < 0.1 * big_ms


def test_a_matrix_product_keeps_its_sms_from_a_high_priority_stream():
    """cuBLAS's products on an H100 keep their blocks on the SMs until they end: behind a bf16 product of 8192 x 8192,
    a kernel launched on a high-priority stream waited 1.23 ms, on a normal one 1.22 (recorded on an NVIDIA H100)."""
    def run(priority: int) -> float:
        a, small = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16), torch.ones(16, device="cuda")
        side = torch.cuda.Stream(priority=priority)
        a @ a  # a first product: cuBLAS's one-off loading comes before the timing
        s0, s1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        torch.cuda.synchronize()
        a @ a
        with torch.cuda.stream(side):
            s0.record()
            small.add_(1.0)
            s1.record()
        torch.cuda.synchronize()
        return s0.elapsed_time(s1)

    from asynclab.course.predicted import simulated

    (normal, _, _), (urgent, _, _) = simulated(lambda: run(0)), simulated(lambda: run(-1))
    assert urgent == pytest.approx(normal, rel=0.05) and 1.0 < urgent < 1.6


def test_another_streams_kernels_run_in_a_products_last_round():
    """A bf16 product of 4096 x 4096 runs 512 tiles on 132 SMs, one block an SM: its last round leaves 16 SMs free,
    and kernels of another stream run there. Recorded on an NVIDIA H100: ten small kernels on a side stream, beside
    four such products queued before them, took 0.207 ms (a product takes 0.17 ms); the model without the last round
    had them wait for the four products (0.61 ms)."""
    def run() -> float:
        a, small = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16), torch.ones(1 << 16, device="cuda")
        side = torch.cuda.Stream()
        a @ a
        s0, s1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        torch.cuda.synchronize()
        for _ in range(4):
            a @ a
        with torch.cuda.stream(side):
            s0.record()
            for _ in range(10):
                small.mul_(1.0001)
            s1.record()
        torch.cuda.synchronize()
        return s0.elapsed_time(s1)

    from asynclab.course.predicted import simulated

    chain, _, _ = simulated(run)
    assert 0.15 < chain < 0.3


def test_streams_come_from_pytorchs_pool_of_32():
    """``torch.cuda.Stream()`` hands out a pool's 32 streams round-robin: the 33rd handle is the 1st stream, and work
    on one waits for work on the other."""
    def run():
        streams = [torch.cuda.Stream() for _ in range(33)]
        with torch.cuda.stream(streams[0]):
            torch.cuda._sleep(int(1e6))
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(streams[32])
        with torch.cuda.stream(streams[32]):
            torch.cuda._sleep(int(1e6))
        end.record(streams[32])
        torch.cuda.synchronize()
        return len(set(streams)), streams[0] == streams[32], torch.cuda.Stream(priority=-1) == streams[1]

    from asynclab.course.predicted import simulated

    (distinct, same, other_pool), limit, _ = simulated(run)
    assert limit is None and (distinct, same, other_pool) == (32, True, False)


def test_the_diagnosis_shares_bandwidth_as_the_simulated_h100_does():
    """The replay of underfilled_gpu's fix (asynclab.trace.analysis.whatif, which imports nothing of the simulation) assumes
    the H100 card's figure of what an SM draws of the memory's bandwidth."""
    from asynclab.trace.analysis.whatif import SM_DRAW

    assert SM_DRAW == card_figures("H100")["sm_draw"]


def _timed_as_users_time(graph: bool) -> float:
    """A user's timing of a spin and 20 dependent small steps (a running sum on a 0-d GPU tensor, or the same
    captured as a CUDA graph and replayed): ``perf_counter`` around the work and ``synchronize``, in ms."""
    import time

    x, total = torch.ones(2048, 2048, device="cuda"), torch.zeros((), device="cuda")

    def work():
        torch.cuda._sleep(4_000_000)  # 2 ms: the GPU runs behind the host; what follows is queued at the synchronize
        for _ in range(20):
            total.add_((x * 1.5).sum())

    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            work()
        work = g.replay
    work()
    torch.cuda.synchronize()
    start = time.perf_counter()
    work()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


@pytest.mark.parametrize("graph", [False, True], ids=["running_sum", "cuda_graph"])
def test_computing_the_gpus_values_costs_the_host_nothing(graph):
    """The simulated GPU computes its kernels' values with the host's operators, when its work happens: inside a
    ``synchronize`` or a CUDA graph's ``replay`` too. That is the GPU's work, not the host's: the times a user's code
    measures are the same whether the simulation computes the values or only times the work. (Priced as the host's,
    a replayed CUDA graph took 23 times and a running sum on the GPU 7.6 times what an H100 measured.)"""
    timed = [al.simulate(_timed_as_users_time, graph, values=values).meta["simulated"]["returned"]
             for values in (True, False)]
    assert timed[0] == pytest.approx(timed[1], rel=1e-6)
    operators = 61 * 0.0148  # ms: the host's time for 61 operators from Python (host_op_us + launch_us)
    spin = 4_000_000 / card_figures("H100")["spin_cycles_per_ms"]
    assert timed[0] < spin + 0.5 * operators, timed  # the GPU's time: 60 kernels of 16 MiB after the spin


def test_a_convolution_costs_the_host_its_librarys_time_where_the_card_measured_it():
    """cuDNN plans a convolution and a batch norm on the host before launching them: an H200's host took 55 and 51 µs
    (scaled to the references' host), four and five times an operator's; the H100's card has no such figure and
    prices them as a matrix product and an operator."""
    import time

    def step():
        x = torch.randn(8, 64, 16, 16, device="cuda", requires_grad=True)
        conv, norm = nn.Conv2d(64, 64, 3, padding=1).cuda(), nn.BatchNorm2d(64).cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        norm(conv(x)).sum().backward()
        return (time.perf_counter() - start) * 1e3

    h200 = card_figures("H200")["host_library_us"]
    assert set(h200) == {"convolution", "convolution_backward", "native_batch_norm", "native_batch_norm_backward"}
    assert "host_library_us" not in card_figures("H100")
    timed = {card: al.simulate(step, card=card, values=False).meta["simulated"]["returned"] for card in ("H100", "H200")}
    assert timed["H200"] - timed["H100"] > 0.8 * sum(h200.values()) / 1e3 - 0.1, timed  # ms: the library's, not an op's
    with pytest.raises(ValueError, match="host_library_us must give positive numbers"):
        check_figures({**card_figures("H200"), "host_library_us": {"convolution": -1.0}})
