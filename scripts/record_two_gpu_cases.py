#!/usr/bin/env python3
"""Record two-GPU training steps with one planted mistake each, and their fixes: the two-GPU test set of `asynclab diagnose`.

    python3 scripts/record_two_gpu_cases.py --out DIR [--cases exposed_comm rank_skew ...]

The cases that run one process per GPU (``exposed_comm``, ``rank_skew``, ``all_to_all``) start themselves
under ``torchrun --nproc-per-node 2``; ``pipeline_bubble`` runs two stages in one process. As
``record_diagnose_cases.py`` does for one GPU, each variant is timed without the profiler (the median of
3 timings of 20 steps, on rank 0), then profiled for 3 steps after 1 of warm-up, with Python stacks. A
case of several processes writes one trace per rank, ``DIR/<case>-<variant>/rank<r>.json.gz``; the others
``DIR/<case>-<variant>.json.gz``. Their step times go into ``DIR/cases.json`` beside the one-GPU cases,
each with ``"gpus": 2``. NVLink multicast stays off in every process started (NCCL_NVLS_ENABLE=0 and
the two other variables).
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import record_diagnose_cases as one  # noqa: E402  (the timing and the profiler settings of the one-GPU cases)

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
WIDTH, DEPTH, BATCH = 4096, 6, 8192  # DDP: 6 x Linear(4096) (400 MB of fp32 gradients), batch 8192
LATE_HOST_S = 0.004  # rank_skew: the late rank's own extra host work per step
A2A_MB = 256  # all_to_all: the tokens each rank exchanges per step


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _ddp_trainer(bucket_cap_mb: float):
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = torch.device("cuda", _rank())
    layers = []
    for _ in range(DEPTH):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    model = DDP(nn.Sequential(*layers).to(dev), device_ids=[dev.index], bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xs = [torch.randn(BATCH, WIDTH, device=dev) for _ in range(2)]
    total = torch.zeros((), device=dev)

    def step(i):
        nonlocal total
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(xs[i % 2]).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = total + loss.detach()
    return step


def case_exposed_comm(variant: str):
    # the planted mistake: one bucket as big as the model, so the all-reduce starts only after the whole backward
    return _ddp_trainer(bucket_cap_mb=10_000 if variant == "bad" else 25)


def case_rank_skew(variant: str):
    inner = _ddp_trainer(bucket_cap_mb=25)
    late = variant == "bad" and _rank() == 1  # the planted mistake: rank 1 alone does 4 ms of host work a step

    def step(i):
        if late:
            end = time.perf_counter() + LATE_HOST_S
            while time.perf_counter() < end:
                pass
        inner(i)
    return step


def case_all_to_all(variant: str):
    """Expert-parallel style traffic: each step exchanges its tokens with the other rank, then computes on them.
    The fix issues the next step's exchange with ``async_op=True`` before this step's compute, and waits for it
    (``work.wait()``: the current stream waits, not the host) just before its result is used."""
    dev = torch.device("cuda", _rank())
    n = A2A_MB * 2 ** 20 // 2 // WIDTH
    w = torch.randn(WIDTH, WIDTH, device=dev, dtype=torch.bfloat16)
    tokens = [torch.randn(n, WIDTH, device=dev, dtype=torch.bfloat16) for _ in range(2)]
    total = torch.zeros((), device=dev)
    state = {}

    def exchange(i, async_op):
        out = torch.empty_like(tokens[i % 2])
        return out, dist.all_to_all_single(out, tokens[i % 2], async_op=async_op)

    def compute(x):
        for _ in range(2):
            x = torch.relu(x @ w)
        return x.float().mean()

    def step(i):
        nonlocal total
        if variant == "bad":
            x, _ = exchange(i, False)
        else:
            x, work = state.pop("next", None) or exchange(i, True)
            work.wait()
            state["next"] = exchange(i + 1, True)
        total = total + compute(x)
    return step


class _Stage(nn.Module):
    def __init__(self, dev: str, layers: int = 4, width: int = 4096):
        super().__init__()
        mods = []
        for _ in range(layers):
            mods += [nn.Linear(width, width), nn.ReLU()]
        self.net = nn.Sequential(*mods).to(dev)

    def forward(self, x):
        return self.net(x)


def case_pipeline_bubble(variant: str):
    """Two stages of 4 x Linear(4096) in fp32, one per GPU, batch 4096, GPipe by hand (lesson 07): every
    micro-batch's forward, then one backward for all. The planted mistake: the whole batch as one
    micro-batch (m=1), so each GPU waits for the other; the fix m=8, whose bubble is (p-1)/(m+p-1) = 11%."""
    s0, s1 = _Stage("cuda:0"), _Stage("cuda:1")
    opt = torch.optim.SGD(list(s0.parameters()) + list(s1.parameters()), lr=1e-6)
    x = torch.randn(4096, 4096, device="cuda:0")
    m = 1 if variant == "bad" else 8
    total = torch.zeros((), device="cuda:1")

    def step(i):
        nonlocal total
        losses = [s1(s0(xc).to("cuda:1")).square().mean() for xc in x.chunk(m)]
        torch.autograd.backward(losses)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = total + losses[0].detach()
    return step


RANKED = {"exposed_comm", "rank_skew", "all_to_all"}
CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def _sync_all() -> None:
    for d in range(torch.cuda.device_count()):
        torch.cuda.synchronize(d)


def _gz(path: Path) -> Path:
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb", 9) as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return Path(f"{path}.gz")


def run_case(case: str, variant: str, out: Path) -> float:
    """Time and profile one variant here (in this process: one rank, or the single process of two GPUs)."""
    torch.manual_seed(0)
    step = CASES[case](variant)
    if dist.is_initialized():
        dist.barrier()
    ms = one.measure_ms(step, sync=None if dist.is_initialized() else _sync_all)  # one process: wait for both GPUs
    name = f"{case}-{variant}"
    if case in RANKED:
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rank{_rank()}.json"
    else:
        path = out / f"{name}.json"
    if dist.is_initialized():
        dist.barrier()
    one.record(step, path)
    torch.cuda.synchronize() if dist.is_initialized() else _sync_all()
    _gz(path)
    return ms


def child(case: str, out: Path) -> None:
    """One rank of a case under torchrun: every variant, then rank 0 writes the step times to a side file."""
    dist.init_process_group("nccl")
    torch.cuda.set_device(_rank())
    times = {}
    for variant in ("bad", "fixed"):
        times[variant] = run_case(case, variant, out)
        torch.cuda.empty_cache()
    if _rank() == 0:
        (out / f".{case}.times.json").write_text(json.dumps(times))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cases", nargs="+", default=sorted(CASES), choices=sorted(CASES))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args.child, args.out)
    if torch.cuda.device_count() < 2:
        raise SystemExit("record_two_gpu_cases: needs two CUDA GPUs")
    os.environ.update(NO_MULTICAST)
    args.out.mkdir(parents=True, exist_ok=True)
    index = args.out / "cases.json"
    doc = json.loads(index.read_text()) if index.exists() else {"cases": {}}
    doc.setdefault("two_gpu", {}).update(gpu=f"2x {torch.cuda.get_device_name(0)}", torch=torch.__version__,
                                         date=dt.date.today().isoformat())
    for case in args.cases:
        if case in RANKED:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                   __file__, "--out", str(args.out), "--child", case]
            subprocess.run(cmd, check=True, env={**os.environ, **NO_MULTICAST})
            side = args.out / f".{case}.times.json"
            times = json.loads(side.read_text())
            side.unlink()
        else:
            times = {v: run_case(case, v, args.out) for v in ("bad", "fixed")}
        for variant, ms in times.items():
            name = f"{case}-{variant}" if case in RANKED else f"{case}-{variant}.json.gz"
            doc["cases"].setdefault(case, {})[variant] = {"step_ms": round(ms, 4), "trace": name, "gpus": 2}
            size = sum(f.stat().st_size for f in (args.out / name).glob("*")) if case in RANKED else (args.out / name).stat().st_size
            print(f"{case:18s} {variant:6s} {ms:8.3f} ms/step  {size // 1024} KiB", flush=True)
        torch.cuda.empty_cache()
        index.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
