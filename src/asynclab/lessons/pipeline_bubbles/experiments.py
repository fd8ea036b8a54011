"""Lesson 07 experiments: the model of the PyTorch Forums thread "How CUDA do Asynchronous execution really looks like?" split over two GPUs: naive, chunk by chunk as the asker wrote it, and pipelined by hand; GPipe over m; 1F1B's memory; torch.distributed.pipelining."""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from asynclab.course.experiments import record_gpu_trace as _record_trace
from asynclab.course.experiments import Experiment, ExperimentRun, lesson_run_all
from asynclab.course.experiments import run_annotated
from asynclab.gpu.devices import gpu_count, resolve_device, sync_all
from asynclab.gpu.timing import median_wall_ms
from asynclab.course.experiments import gpu_or_note, no_gpu, whole_number

LESSON = "07"

#: One stage: LAYERS x (Linear(WIDTH, WIDTH) + ReLU); the batch the step trains on.
WIDTH, LAYERS, BATCH = 4096, 8, 8192
#: Micro-batch counts of the GPipe sweep.
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
#: GPipe traces kept in the reference (the sweep measures every m, from traces of its own).
KEEP_M = (1, 4, 32)
#: Profiled steps whose median bubble the GPipe sweep reports.
PROFILED_STEPS = 3
#: Environment every process of a multi-GPU run gets (NVLink multicast off, as the course's machines need).
MULTI_GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

#: Every experiment needs two GPUs (without them each returns a note saying so): nothing to size down.
CPU_KWARGS: dict[str, dict[str, Any]] = {name: {} for name in (
    "one_stage", "naive", "asker", "gpipe", "memory", "torch_pipelining", "work_wait")}

NO_GPUS = "needs two CUDA GPUs: a model split over two GPUs"
NO_PIPELINING = ("needs torch.distributed.pipelining (PyTorch 2.4 or newer): this PyTorch is older, so this section "
                 "replays its reference")


def has_pipelining() -> bool:
    """Whether this PyTorch has ``torch.distributed.pipelining`` (2.4 and newer).

    Example:
        >>> isinstance(has_pipelining(), bool)
        True
    """
    import importlib.util

    try:
        return importlib.util.find_spec("torch.distributed.pipelining") is not None
    except ModuleNotFoundError:  # no torch.distributed at all
        return False


class HandWrittenStage(nn.Module):
    """A pipeline stage written by hand, not an ``nn.Sequential`` (the same layers as :func:`stage_module`):
    ``torch.distributed.pipelining``'s ``PipelineStage`` takes any module as one stage.

    Example:
        >>> HandWrittenStage(2, 8)(torch.ones(3, 8)).shape
        torch.Size([3, 8])
    """

    def __init__(self, layers: int = LAYERS, width: int = WIDTH, device: Any = None):
        super().__init__()
        self.linears = nn.ModuleList(nn.Linear(width, width, device=device) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for linear in self.linears:
            x = torch.relu(linear(x))
        return x


def stage_module(layers: int = LAYERS, width: int = WIDTH, device: Any = None) -> nn.Sequential:
    """One pipeline stage: ``layers`` x (Linear + ReLU), ``width`` wide (the forum asker's ToyModel, made big enough to time),
    made on ``device``: its weights are drawn there (on the host, a stage's 134 million weights take seconds to draw).

    Example:
        >>> len(stage_module(2, 8))
        4
    """
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(width, width, device=device), nn.ReLU()]
    return nn.Sequential(*mods)


class TwoGPUModel(nn.Module):
    """The forum asker's ``MyModel``: one stage on GPU 0, the next on GPU 1, and the activations copied between them.

    Example:
        >>> TwoGPUModel.__name__
        'TwoGPUModel'
    """

    def __init__(self, layers: int = LAYERS, width: int = WIDTH):
        super().__init__()
        self.d0, self.d1 = torch.device("cuda", 0), torch.device("cuda", 1)
        self.stage0 = stage_module(layers, width, self.d0)
        self.stage1 = stage_module(layers, width, self.d1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stage1(self.stage0(x.to(self.d0)).to(self.d1))


def _busy_share(trace: Any, annotation: str) -> list[float]:
    """Each GPU's busy share (1 - idle) over the window of one annotation, from the trace."""
    from asynclab.trace.analysis.metrics import bubble_fraction

    report = bubble_fraction(trace.window(annotation=annotation), devices=[0, 1])
    return [1.0 - float(report.per_device[d]) for d in (0, 1)]


def _loss(y: torch.Tensor) -> torch.Tensor:
    return y.square().mean()


class _Trainer:
    """The model, its optimizer and a batch, for the training steps below."""

    def __init__(self, keep_grads: bool = False) -> None:
        torch.manual_seed(0)
        self.model = TwoGPUModel()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-6)
        self.x = torch.randn(BATCH, WIDTH, device=self.model.d0)
        self.keep_grads = keep_grads  # zeroed in place, so that gradient memory is there before each step

    def finish(self) -> None:
        self.opt.step()
        self.opt.zero_grad(set_to_none=not self.keep_grads)

    def plain(self) -> None:
        """The ordinary training step: forward, loss, backward, optimizer step."""
        _loss(self.model(self.x)).backward()
        self.finish()

    def chunk_by_chunk(self, m: int) -> None:
        """The asker's ``train_pipeline``: the batch in ``m`` chunks, each forward and backward before the next."""
        for xc in self.x.chunk(m):
            _loss(self.model(xc)).backward()
        self.finish()

    def gpipe(self, m: int) -> None:
        """GPipe by hand: every micro-batch's forward, then every backward (one autograd call)."""
        losses = [_loss(self.model(xc)) for xc in self.x.chunk(m)]
        torch.autograd.backward(losses)
        self.finish()

    def one_f_one_b(self, m: int, p: int = 2) -> None:
        """1F1B by hand: at most ``p`` micro-batches in flight; each backward as soon as ``p`` forwards wait."""
        waiting: list[torch.Tensor] = []
        for xc in self.x.chunk(m):
            waiting.append(_loss(self.model(xc)))
            if len(waiting) == p:
                waiting.pop(0).backward()
        for loss in waiting:
            loss.backward()
        self.finish()


# -- 1: one stage, and the naive split -------------------------------------------------------------------------
def one_stage(device: Any = None, reps: int = 5) -> dict[str, Any]:
    """Forward and backward of one stage alone, on the whole batch, on GPU 0: the unit of every pipeline figure.

    Returns ``{"ms", "forward_ms", "batch", "layers", "width", "device"}``.

    Example:
        >>> one_stage("cpu")["ms"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, ms=None, forward_ms=None, batch=BATCH, layers=LAYERS,
                           width=WIDTH)
    if cpu is not None:
        return cpu
    d0 = torch.device("cuda", 0)
    torch.manual_seed(0)
    stage = stage_module(device=d0)
    x = torch.randn(BATCH, WIDTH, device=d0)

    def fwd() -> torch.Tensor:
        return stage(x)

    def fwd_bwd() -> None:
        _loss(stage(x)).backward()

    out = {"forward_ms": median_wall_ms(lambda: fwd(), reps), "ms": median_wall_ms(fwd_bwd, reps)}
    return {**out, "batch": BATCH, "layers": LAYERS, "width": WIDTH, "device": str(dev)}


def naive(device: Any = None, reps: int = 5, path: str | Path | None = None) -> dict[str, Any]:
    """The forum asker's model trained the plain way: each GPU's busy share of a step, from its trace.

    Returns ``{"step_ms", "busy_share" ([GPU 0, GPU 1]), "device"}``.

    Example:
        >>> naive("cpu")["busy_share"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, step_ms=None, busy_share=None)
    if cpu is not None:
        return cpu
    t = _Trainer()
    step_ms = median_wall_ms(t.plain, reps)
    trace = _record_trace(path or _tmp("naive"), lambda: run_annotated("naive step", t.plain))
    return {"step_ms": step_ms, "busy_share": _busy_share(trace, "naive step"), "device": str(dev)}


def asker(device: Any = None, m: int = 4, reps: int = 5, path: str | Path | None = None) -> dict[str, Any]:
    """The asker's ``train_pipeline`` (each chunk's forward and backward before the next) beside the smallest
    change that pipelines it: every forward first, then every backward (GPipe, same ``m`` chunks).

    Returns ``{"m", "chunk_by_chunk": {"step_ms", "busy_share"}, "forwards_first": {...}, "device"}``.

    Example:
        >>> asker("cpu")["chunk_by_chunk"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, m=m, chunk_by_chunk=None, forwards_first=None)
    if cpu is not None:
        return cpu
    t = _Trainer()
    runs = {"chunk_by_chunk": lambda: t.chunk_by_chunk(m), "forwards_first": lambda: t.gpipe(m)}
    step_ms = {name: median_wall_ms(fn, reps) for name, fn in runs.items()}
    trace = _record_trace(path or _tmp("asker"), lambda: [run_annotated(name, fn) for name, fn in runs.items()])
    return {"m": m, **{name: {"step_ms": step_ms[name], "busy_share": _busy_share(trace, name)} for name in runs},
            "device": str(dev)}


# -- 2: GPipe over m -------------------------------------------------------------------------------------------
def gpipe(device: Any = None, micro_batches: tuple[int, ...] = MICRO_BATCHES, reps: int = 5,
          trace_dir: str | Path | None = None) -> dict[str, Any]:
    """GPipe by hand for each ``m``: the step time, and the bubble fraction measured on its traces (the idle share
    of the two GPUs between the step's first and last GPU work; the median of :data:`PROFILED_STEPS` profiled
    steps, after a warm-up, since one profiled step alone varies by several points), beside the formula
    (p-1)/(m+p-1).

    With ``trace_dir`` the traces of m in :data:`KEEP_M` are kept there as ``gpipe_m{m}.json.gz``.

    Returns ``{"p", "m": [...], "step_ms": [...], "bubble_measured": [...], "bubble_formula": [...],
    "traces": {m: path}, "device"}``.

    Example:
        >>> gpipe("cpu")["step_ms"] is None
        True
    """
    micro_batches = (micro_batches,) if isinstance(micro_batches, int) else tuple(micro_batches)  # one m, or several
    for m in micro_batches:  # each splits the batch
        whole_number("each of micro_batches", m, 1, BATCH)
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, p=2, m=list(micro_batches), step_ms=None, bubble_measured=None,
                           bubble_formula=None, traces={})
    if cpu is not None:
        return cpu
    from asynclab.trace.analysis.metrics import bubble_fraction
    from asynclab.gpu.record import record

    t = _Trainer()
    p = 2
    out: dict[str, Any] = {"p": p, "m": list(micro_batches), "step_ms": [], "bubble_measured": [],
                           "bubble_formula": [], "traces": {}}
    for m in micro_batches:
        out["step_ms"].append(median_wall_ms(lambda: t.gpipe(m), reps))
        name = f"gpipe m={m}"
        trace = record(lambda: run_annotated(name, lambda: t.gpipe(m)), path=_tmp(f"gpipe_m{m}"), warmup=1,
                       steps=PROFILED_STEPS, cuda_sync_events=True)
        out["bubble_measured"].append(statistics.median(
            bubble_fraction(trace.window(annotation=name, occurrence=i), devices=[0, 1]).mean
            for i in range(PROFILED_STEPS)))
        out["bubble_formula"].append((p - 1) / (m + p - 1))
        if trace_dir is not None and m in KEEP_M:  # one step of it in the reference, for the timelines
            path = Path(trace_dir) / f"gpipe_m{m}.json.gz"
            _record_trace(path, lambda: run_annotated(name, lambda: t.gpipe(m)))
            out["traces"][m] = str(path)
    out["device"] = str(dev)
    return out


# -- 3: memory, GPipe against 1F1B -----------------------------------------------------------------------------
def memory(device: Any = None, m: int = 8, reps: int = 3) -> dict[str, Any]:
    """Peak memory on each GPU during one step, GPipe against 1F1B, both by hand with ``m`` micro-batches.

    ``peak_gib`` is ``torch.cuda.max_memory_allocated`` during the step, ``activation_gib`` that peak less what
    was allocated before the step (weights, gradients kept from the last step, the batch): what the step's
    activations and temporaries took. ``micro_batch_activation_gib`` is what autograd keeps of one
    micro-batch on one stage: each layer's ReLU output (also the next Linear's saved input). Returns ``{"m",
    "gpipe": {"peak_gib", "activation_gib", "step_ms"} per GPU as lists, "1f1b": {...},
    "micro_batch_activation_gib", "device"}``.

    Example:
        >>> memory("cpu")["gpipe"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, m=m, gpipe=None, **{"1f1b": None})
    if cpu is not None:
        return cpu
    t = _Trainer(keep_grads=True)
    out: dict[str, Any] = {"m": m}
    for name, fn in (("gpipe", lambda: t.gpipe(m)), ("1f1b", lambda: t.one_f_one_b(m))):
        step_ms = median_wall_ms(fn, reps)
        sync_all()
        before = [torch.cuda.memory_allocated(d) for d in (0, 1)]
        for d in (0, 1):
            torch.cuda.reset_peak_memory_stats(d)
        fn()
        sync_all()
        peak = [torch.cuda.max_memory_allocated(d) for d in (0, 1)]
        out[name] = {"peak_gib": [v / 2**30 for v in peak],
                     "activation_gib": [(v - b) / 2**30 for v, b in zip(peak, before)], "step_ms": step_ms}
    out["micro_batch_activation_gib"] = LAYERS * (BATCH // m) * WIDTH * 4 / 2**30
    out["device"] = str(dev)
    return out


# -- 4: torch.distributed.pipelining under torchrun ----------------------------------------------------------
def torch_pipelining(device: Any = None, schedules: tuple[str, ...] = ("gpipe", "1f1b"), m: int = 8,
                     trace_dir: str | Path | None = None, timeout_s: float = 300.0) -> dict[str, Any]:
    """Run ``torch.distributed.pipelining`` under ``torchrun``, one process per GPU, for each schedule.

    Each run is a subprocess (:mod:`asynclab.lessons.pipeline_bubbles.stages`) whose ranks write their own
    traces; the bubble is measured on the ranks' traces loaded as one (clocks aligned), over the last profiled
    step from the moment the barrier before it lets the last rank start (:func:`asynclab.trace.read.ranks.step_window`).
    With ``trace_dir`` the rank traces are kept there as ``pipelining_{schedule}_rank{r}.json.gz``.

    After its pipeline each run also measures ``work.wait()`` (:func:`work_wait`), under ``"work_wait"``.

    Returns ``{schedule: {"gpus", "m", "step_ms", "bubble_measured", "traces", "work_wait"}, "device"}``.

    Example:
        >>> torch_pipelining("cpu")["gpipe"] is None
        True
    """
    dev = resolve_device(device)
    if dev.type != "cuda" or not gpu_count() >= 2:
        return no_gpu(dev, NO_GPUS, **{s: None for s in schedules})
    if not has_pipelining():
        return {"device": str(dev), "note": NO_PIPELINING, **{s: None for s in schedules}}
    from asynclab.trace.read.ranks import load_ranks

    gpus = torch.cuda.device_count()
    out: dict[str, Any] = {}
    for sched in schedules:
        folder, result = _torchrun(sched, m, timeout_s)
        ranks = sorted(folder.glob("rank*.json.gz"))
        trace = load_ranks(ranks)
        result["bubble_measured"] = pipelining_bubble(trace, gpus)
        result["traces"] = {}
        if trace_dir is not None:
            for r, f in enumerate(ranks):
                kept = Path(trace_dir) / f"pipelining_{sched}_rank{r}.json.gz"
                shutil.copy(f, kept)
                result["traces"][r] = str(kept)
        out[sched] = result
    out["device"] = str(dev)
    return out


def _torchrun(kind: str, m: int, timeout_s: float) -> tuple[Path, dict[str, Any]]:
    """Run :mod:`asynclab.lessons.pipeline_bubbles.stages` under ``torchrun``, one process per GPU, in a folder of
    its own; that folder and rank 0's ``result.json`` (with ``torchrun_s``, the launch's wall time)."""
    folder = Path(tempfile.mkdtemp(prefix=f"asynclab_07_{kind}_"))
    env = {**os.environ, **MULTI_GPU_ENV, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")]))}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={torch.cuda.device_count()}",
           "-m", "asynclab.lessons.pipeline_bubbles.stages", str(folder), kind, str(m)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"torchrun ({kind}) failed: {last[:300]}")
    result = json.loads((folder / "result.json").read_text())
    result["torchrun_s"] = time.perf_counter() - t0
    return folder, result


def work_wait(device: Any = None, timeout_s: float = 300.0) -> dict[str, Any]:
    """``work.wait()`` on an all-reduce issued with ``async_op=True`` that the last rank joins about 20 ms late:
    rank 0's host time issuing it, in ``wait()`` and in the ``torch.cuda.synchronize()`` after, and its stream's
    time across the all-reduce and the wait. Under ``torchrun``, one process per GPU, as
    :func:`torch_pipelining` (whose live run measures the same after its pipeline).

    Returns ``{"issue_ms", "wait_host_ms", "synchronize_ms", "stream_ms", "late_ms", "nbytes", "gpus", "device"}``.

    Example:
        >>> work_wait("cpu")["wait_host_ms"] is None
        True
    """
    keys = ("issue_ms", "wait_host_ms", "synchronize_ms", "stream_ms", "late_ms", "nbytes")
    dev = resolve_device(device)
    if dev.type != "cuda" or not gpu_count() >= 2:
        return no_gpu(dev, NO_GPUS, **{k: None for k in keys})
    _, result = _torchrun("none", 1, timeout_s)
    return {**result["work_wait"], "gpus": result["gpus"], "device": str(dev)}


def pipelining_bubble(trace: Any, gpus: int = 2, step: str = "ProfilerStep#3") -> float:
    """The bubble of one profiled step of :func:`torch_pipelining`, on its ranks' traces loaded as one: the
    GPUs' idle share, NCCL kernels counted as idle, from when the last rank starts ``step`` to its end.

    Example:
        >>> from asynclab import reference
        >>> t = reference.trace(7, "pipelining_1f1b_rank0")  # one rank alone: that rank's step
        >>> 0 < pipelining_bubble(t, gpus=1) < 0.5
        True
    """
    from asynclab.trace.analysis.metrics import bubble_fraction
    from asynclab.trace.read.ranks import step_window

    return bubble_fraction(step_window(trace, step), devices=list(range(gpus))).mean


# -- reading the by-hand backward from a trace --------------------------------------------------------------
def _autograd_lane(ops: Any, gpu: int, source: str) -> str:
    """The host lane, other than the main thread, that launched most of ``gpu``'s ops (``ops``: a
    :func:`~asynclab.trace.analysis.metrics.launch_latency` table): autograd's thread for that GPU."""
    mine = ops.loc[(ops["device"] == gpu) & ~ops["launch_lane"].str.contains("main thread"), "launch_lane"]
    if not len(mine):
        raise ValueError(f"{source}: no host thread other than the main one launched work on GPU {gpu}")
    return str(mine.value_counts().idxmax())


def copy_barriers(trace: Any) -> list[dict[str, float]]:
    """Where each gradient sent back to GPU 0 during a by-hand backward put a wait into GPU 0's stream, and how
    long GPU 0 sat idle there.

    A copy from GPU 1 to GPU 0 makes GPU 0's current stream wait for it (lesson 06). GPU 1's autograd thread
    launches that wait when it issues the copy, wherever GPU 0's autograd thread has got to in launching GPU 0's
    part of the backward; the wait lands after every GPU 0 op whose launch call had returned by then. Returns, per
    wait in launch order: ``issued_us`` (its launch), ``kernels_before`` (GPU 0 backward ops launched by GPU 0's
    autograd thread before it), ``kernels`` (all of them), and ``held_us``: GPU 0's idle time just before its
    next backward op, the one that runs after the wait.

    Example:
        >>> from asynclab import reference
        >>> t = reference.trace(7, "gpipe_m4").window(annotation="gpipe m=4")
        >>> [(b["kernels_before"], b["held_us"] > 1000) for b in copy_barriers(t)]
        [(0, True), (20, True), (82, False), (137, True)]
    """
    from asynclab.trace.analysis.metrics import launch_latency
    from asynclab.trace import WORK_KINDS

    every = launch_latency(trace)
    lane0, lane1 = (_autograd_lane(every, gpu, trace.source) for gpu in (0, 1))
    ops = every[every["device"] == 0]
    work = ops[ops["kind"].isin(WORK_KINDS)]
    own = work[work["launch_lane"] == lane0].sort_values("gpu_start_us")
    waits = ops[(ops["kind"] == "sync") & (ops["launch_lane"] == lane1)].sort_values("launch_start_us")
    out = []
    for _, w in waits.iterrows():
        before = int((own["launch_end_us"] < w["launch_start_us"]).sum())
        held = 0.0
        if before < len(own):
            nxt = own.iloc[before]["gpu_start_us"]
            earlier = work.loc[work["gpu_start_us"] < nxt, "gpu_end_us"]
            held = max(0.0, float(nxt - earlier.max())) if len(earlier) else 0.0
        out.append({"issued_us": float(w["launch_start_us"]), "kernels_before": before, "kernels": len(own),
                    "held_us": held})
    return out


# -- helpers, headline and run_all -----------------------------------------------------------------------------
def _tmp(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix="asynclab_07_")) / f"{name}.json.gz"


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures the lesson's claims rest on, under the names its issue gives."""
    naive_, stage, gp, mem, tp = (results.get(k) or {} for k in ("naive", "one_stage", "gpipe", "memory",
                                                                    "torch_pipelining"))
    ms = gp.get("m") or []
    by_m = lambda key: dict(zip(map(str, ms), gp.get(key) or []))  # noqa: E731
    pipelining = {s: r for s, r in tp.items() if isinstance(r, dict)}
    return {
        "naive_busy_share_per_gpu": naive_.get("busy_share"),
        "one_stage_ms": stage.get("ms"),
        "gpipe_step_ms": by_m("step_ms"),
        "gpipe_bubble_measured": by_m("bubble_measured"),
        "gpipe_bubble_formula": by_m("bubble_formula"),
        "peak_mem_gib_gpipe_m8": (mem.get("gpipe") or {}).get("peak_gib"),
        "peak_mem_gib_1f1b_m8": (mem.get("1f1b") or {}).get("peak_gib"),
        "torch_pipelining_step_ms": {f"{s} {r['gpus']} GPUs": r["step_ms"] for s, r in pipelining.items()},
        "torch_pipelining_bubble_measured": {f"{s} {r['gpus']} GPUs": r["bubble_measured"] for s, r in pipelining.items()},
        "work_wait_host_ms": (results.get("work_wait") or {}).get("wait_host_ms"),
        "work_wait_stream_ms": (results.get("work_wait") or {}).get("stream_ms"),
    }


def _gpipe(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`gpipe`, keeping its traces (one per micro-batch count ``m``) as ``gpipe_m<m>`` on two GPUs."""
    result = gpipe(run.device, trace_dir=run.traces.folder(needs=2), **sizes)
    for m, path in (result.get("traces") or {}).items():
        run.traces.add(f"gpipe_m{m}", path)
    return result


def _torch_pipelining(run: ExperimentRun, **sizes: Any) -> dict[str, Any]:
    """:func:`torch_pipelining`, keeping each schedule's traces (one per rank) as ``pipelining_<schedule>_rank<r>``
    on two GPUs."""
    result = torch_pipelining(run.device, trace_dir=run.traces.folder(needs=2), **sizes)
    for schedule, r in result.items():
        for rank, path in ((r.get("traces") or {}) if isinstance(r, dict) else {}).items():
            run.traces.add(f"pipelining_{schedule}_rank{rank}", path)
    return result


#: Every lesson 07 experiment, in the order ``run_all`` runs them: its key in the results, its function, the
#: trace(s) it writes (<trace_dir>/<name>.json.gz) and how many GPUs they need.
EXPERIMENTS: list[Experiment] = [
    Experiment("one_stage", one_stage),
    Experiment("naive", naive, "naive", gpus=2),
    Experiment("asker", asker, "asker", gpus=2),
    Experiment("gpipe", _gpipe, "gpipe_m*", gpus=2, custom=True),
    Experiment("memory", memory),
    Experiment("torch_pipelining", _torch_pipelining, "pipelining_*_rank*", gpus=2, custom=True),
    Experiment("work_wait", work_wait),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)
