#!/usr/bin/env python3
"""Record training steps with one planted asynchrony mistake each, and their fixes, on a GPU: the test set of `asynclab diagnose`.

    python3 scripts/record_diagnose_cases.py --out DIR [--cases host_sync launch_bound ...] [--measure-only]

For every case it writes ``DIR/<case>-<variant>.json.gz`` (a torch.profiler trace of 3 steps after
1 of warm-up, with Python stacks) and ``DIR/cases.json``: each variant's measured step time (the median
of 3 timings of 20 steps, or of 15 for a step under 5 ms, without the profiler), and the GPU, the PyTorch version and the date, each variant's own
beside the file's first (a case recorded later, on another GPU, says so). Variants are
"bad" (the planted mistake), "fixed" (that mistake fixed, nothing else changed) and "clean" (a
well-written step: AMP, data already on the GPU, nothing read back). Every case fits in 6 GiB.

``--measure-only`` records no trace and leaves ``step_ms`` as it is: it measures each variant's step again and adds
the time to its ``runs`` under the run's number (the GPU, the PyTorch version and the date of run ``n`` are
``doc["runs"][n - 1]``), so that a run of this script in each of several fresh processes shows how much the step
itself differs from run to run.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import gzip
import io
import shutil
import statistics
import time
from pathlib import Path

import torch
from torch import nn

DEV = "cuda"
WIDTH, IN_DIM, BATCH = 8192, 256, 4096
COPY_DIM = 4096  # the copy cases feed 64 MiB batches from the host
HOST_WORK_S = 0.002  # the host's own work per step (a data pipeline, a logger): 2 ms of CPU time


def host_work() -> None:
    """Stands for the host's own per-step work: 2 ms of CPU time, spent in short C calls between clock reads (a
    bare clock-polling loop would put thousands of calls into every trace recorded with Python stacks)."""
    end = time.perf_counter() + HOST_WORK_S
    while time.perf_counter() < end:
        sum(range(2000))


def mlp(in_dim: int = IN_DIM, width: int = WIDTH, depth: int = 3) -> nn.Module:
    layers = [nn.Linear(in_dim, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10)).to(DEV)


class Trainer:
    """One AMP (bf16) training step of an MLP with SGD; ``step(x, y)`` returns the loss on the GPU."""

    def __init__(self, in_dim: int = IN_DIM, width: int = WIDTH, depth: int = 3):
        self.model = mlp(in_dim, width, depth)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.loss_fn = nn.CrossEntropyLoss()

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()


def gpu_batches(n: int = 4, in_dim: int = IN_DIM):
    return [(torch.randn(BATCH, in_dim, device=DEV), torch.randint(0, 10, (BATCH,), device=DEV)) for _ in range(n)]


# --------------------------------------------------------------------------------------------
# The cases: each returns a step function (called with the step number)
# --------------------------------------------------------------------------------------------
def _data_on_gpu(after=None):
    """The clean step: AMP, data already on the GPU, the loss summed on the GPU; ``after`` runs after each step."""
    tr, data = Trainer(), gpu_batches()
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        x, y = data[i % len(data)]
        total = total + tr.step(x, y)
        if after is not None:
            after()
    return step


def case_clean(variant: str):
    return _data_on_gpu()


def _read_loss(variant: str, read):
    """A step after the host's own work whose loss is read on the host every step with ``read(i, loss)`` (bad), or
    summed on the GPU and read once, after the loop (fixed)."""
    tr, data = Trainer(), gpu_batches()
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        host_work()
        x, y = data[i % len(data)]
        loss = tr.step(x, y)
        if variant == "bad":
            read(i, loss)
        else:
            total = total + loss
    return step


def case_host_sync(variant: str):
    losses = []
    return _read_loss(variant, lambda i, loss: losses.append(loss.item()))  # the host waits for every step


class SyntheticBatches(torch.utils.data.Dataset):
    """Whole batches made on the CPU, as a decoding/augmenting dataset does (about 5 ms each)."""

    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(BATCH, IN_DIM, generator=g)
        for _ in range(3):
            x = torch.tanh(x * 1.01)
        return x, torch.randint(0, 10, (BATCH,), generator=g)


def case_dataloader_stall(variant: str):
    tr = Trainer()
    workers = 0 if variant == "bad" else 4  # the planted mistake: loading on the training process
    loader = torch.utils.data.DataLoader(SyntheticBatches(), batch_size=None, shuffle=False, num_workers=workers,
                                         pin_memory=True, persistent_workers=workers > 0,
                                         prefetch_factor=4 if workers else None)
    it = iter(loader)
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        x, y = next(it)
        total = total + tr.step(x.to(DEV, non_blocking=True), y.to(DEV, non_blocking=True))
    return step


def _copy_case(pinned: bool):
    """A trainer fed 64 MiB batches from host memory (two, alternating), pinned or pageable."""
    xs = [torch.randn(BATCH, COPY_DIM) for _ in range(2)]
    xs = [x.pin_memory() for x in xs] if pinned else xs
    return Trainer(in_dim=COPY_DIM), xs, torch.randint(0, 10, (BATCH,), device=DEV)


def case_pageable_copy(variant: str):
    tr, xs, y = _copy_case(pinned=variant != "bad")  # the fix: pinned memory, copied without blocking
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        x = xs[i % 2].to(DEV, non_blocking=variant != "bad")
        total = total + tr.step(x, y)
    return step


def _prefetching(tr: Trainer, xs: list, y: torch.Tensor, ahead: bool, guard: bool = False):
    """Copies on a side stream, one step ahead or just before use; ``guard`` makes the copy stream first wait
    for the compute stream, as a defensive ``side.wait_stream(current)`` copied from a recipe does."""
    side = torch.cuda.Stream()
    total = torch.zeros((), device=DEV)
    state = {}

    def load(i):
        if guard:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            state["next"] = xs[i % 2].to(DEV, non_blocking=True)

    def step(i):
        nonlocal total
        if not ahead or "next" not in state:
            load(i)
        torch.cuda.current_stream().wait_stream(side)
        x = state.pop("next")
        x.record_stream(torch.cuda.current_stream())
        if ahead:
            load(i + 1)
        total = total + tr.step(x, y)
    return step


def case_exposed_copy(variant: str):
    tr, xs, y = _copy_case(pinned=True)
    if variant != "bad":
        return _prefetching(tr, xs, y, ahead=True)
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        x = xs[i % 2].to(DEV, non_blocking=True)  # the planted mistake: the copy runs on the compute stream
        total = total + tr.step(x, y)
    return step


def case_stream_wait(variant: str):
    tr, xs, y = _copy_case(pinned=True)
    return _prefetching(tr, xs, y, ahead=False, guard=variant == "bad")  # the planted mistake: the guard


def case_small_copies(variant: str):
    tr, data = Trainer(), gpu_batches()
    weights = [0.5 + (k % 7) / 10 for k in range(256)]
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        x, y = data[i % len(data)]
        if variant == "bad":  # the planted mistake: one tiny copy per value
            w = torch.stack([torch.tensor(v, device=DEV) for v in weights])
        else:
            w = torch.tensor(weights, device=DEV)
        total = total + tr.step(x * w.mean(), y)
    return step


def case_alloc_churn(variant: str):
    return _data_on_gpu(after=torch.cuda.empty_cache if variant == "bad" else None)  # the planted mistake


def case_launch_bound(variant: str):
    tr = Trainer(in_dim=128, width=128, depth=16)
    x, y = torch.randn(64, 128, device=DEV), torch.randint(0, 10, (64,), device=DEV)
    if variant == "bad":
        return lambda i: tr.step(x, y)
    side = torch.cuda.Stream()  # the fix: the whole step as one CUDA graph (PyTorch's "whole network capture")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            tr.step(x, y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = tr.loss_fn(tr.model(x), y)
        loss.backward()
        tr.opt.step()
    return lambda i: graph.replay()


def case_underfilled_gpu(variant: str):
    """Eight independent branches, each a softmax over 8 long rows: 8 blocks a kernel on a GPU of many SMs
    (the forum thread "How can l run two blocks in parallel?", lesson 03). The fix runs them on 8 streams,
    captured as one CUDA graph so that they start together."""
    xs = [torch.randn(8, 2 ** 20, device=DEV) for _ in range(8)]
    if variant == "bad":
        return lambda i: [torch.softmax(x, dim=-1) for x in xs]
    streams = [torch.cuda.Stream() for _ in xs]

    def branches():
        here, outs = torch.cuda.current_stream(), []
        for x, s in zip(xs, streams):
            s.wait_stream(here)
            with torch.cuda.stream(s):
                outs.append(torch.softmax(x, dim=-1))
        for s in streams:
            here.wait_stream(s)
        return outs

    branches()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        branches()
    return lambda i: graph.replay()


# -- host syncs as they are written in the wild: each a host_sync of its own kind of line --------------------
def _train(tr: Trainer, x: torch.Tensor, y: torch.Tensor, loss_of=None):
    """One AMP step of ``tr`` with the loss ``loss_of(out, y)`` (default: the trainer's); returns (out, loss), detached."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = tr.model(x)
        loss = (loss_of or tr.loss_fn)(out, y)
    loss.backward()
    tr.opt.step()
    tr.opt.zero_grad(set_to_none=True)
    return out.detach(), loss.detach()


def case_item_small(variant: str):
    """A small model, whose GPU step is shorter than the host's launches: the loss read with ``.item()`` every step
    (bad), or summed on the GPU and read after the loop (fixed)."""
    tr, data, losses = Trainer(width=1024, depth=2), gpu_batches(), []
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        x, y = data[i % len(data)]
        loss = tr.step(x, y)
        if variant == "bad":
            losses.append(loss.item())
        else:
            total = total + loss
    return step


def case_sync_timing(variant: str):
    """Each layer's forward timed: ``torch.cuda.synchronize()`` and ``perf_counter`` around it (bad), or CUDA events
    recorded around it and read after the loop (fixed)."""
    tr, data, times, events = Trainer(), gpu_batches(), [], []
    total = torch.zeros((), device=DEV)

    def forward(x):
        for layer in tr.model:
            if variant == "bad":
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                x = layer(x)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            else:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                x = layer(x)
                end.record()
                events.append((start, end))
        return x

    def step(i):
        nonlocal total
        host_work()
        x, y = data[i % len(data)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = tr.loss_fn(forward(x), y)
        loss.backward()
        tr.opt.step()
        tr.opt.zero_grad(set_to_none=True)
        total = total + loss.detach()
    return step


def case_mask_index(variant: str):
    """The loss over the labelled rows only (one in ten unlabelled, -100): boolean-mask indexing, whose output size
    the host must read from the GPU (bad), or ``ignore_index=-100`` (fixed)."""
    tr, data = Trainer(), gpu_batches()
    labels = [torch.where(torch.rand(BATCH, device=DEV) < 0.9, y, torch.full_like(y, -100)) for _, y in data]
    ignoring = nn.CrossEntropyLoss(ignore_index=-100)
    total = torch.zeros((), device=DEV)

    def masked(out, y):
        keep = y != -100
        return nn.functional.cross_entropy(out[keep], y[keep])

    def step(i):
        nonlocal total
        host_work()
        _, loss = _train(tr, data[i % len(data)][0], labels[i % len(labels)], masked if variant == "bad" else ignoring)
        total = total + loss
    return step


def case_mask_hostbound(variant: str):
    """A host-bound step (a small model: its GPU work is shorter than the host's launches) whose loss averages each
    row's loss over a boolean mask: ``loss[mask].mean()`` (bad: selecting by a mask needs the count of its True
    elements on the host), or ``(loss * mask).sum() / mask.sum()`` (fixed: the same mean, on the GPU)."""
    tr, data = Trainer(width=1024, depth=2), gpu_batches()
    masks = [torch.rand(BATCH, device=DEV) < 0.9 for _ in data]
    per_row = nn.CrossEntropyLoss(reduction="none")
    total = torch.zeros((), device=DEV)

    def step(i):
        nonlocal total
        mask = masks[i % len(masks)]

        def masked_mean(out, y):
            loss = per_row(out, y)
            return loss[mask].mean() if variant == "bad" else (loss * mask).sum() / mask.sum()

        x, y = data[i % len(data)]
        total = total + _train(tr, x, y, masked_mean)[1]
    return step


def case_numpy_metric(variant: str):
    """The step's accuracy through ``.cpu().numpy()`` every step (bad), or summed on the GPU and read after the loop
    (fixed)."""
    tr, data, accs = Trainer(), gpu_batches(), []
    correct = torch.zeros((), device=DEV)

    def step(i):
        nonlocal correct
        host_work()
        x, y = data[i % len(data)]
        out, _ = _train(tr, x, y)
        hit = (out.argmax(1) == y).float().mean()
        if variant == "bad":
            accs.append(hit.cpu().numpy())
        else:
            correct = correct + hit
    return step


def case_print_loss(variant: str):
    """``print(loss)`` every step, which formats a GPU tensor and so reads it (bad), or the losses summed on the GPU
    and printed after the loop (fixed). The lines go to a buffer, not the terminal."""
    sink = io.StringIO()
    return _read_loss(variant, lambda i, loss: print(f"step {i}: loss", loss, file=sink))


#: The kind each case plants, where its name is not that kind.
PLANTED = {"item_small": "host_sync", "sync_timing": "host_sync", "mask_index": "host_sync", "mask_hostbound": "host_sync",
           "numpy_metric": "host_sync", "print_loss": "host_sync"}


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
VARIANTS = {"clean": ("clean",)}


def variants(case: str) -> tuple[str, ...]:
    return VARIANTS.get(case, ("bad", "fixed"))


# --------------------------------------------------------------------------------------------
# Timing and recording
# --------------------------------------------------------------------------------------------
#: A step shorter than this (ms) is timed :data:`SHORT_REPEATS` times, not ``repeats``: the host sets such a step, and
#: the host's speed varies more from one timing to the next than a GPU's.
SHORT_STEP_MS = 5.0
SHORT_REPEATS = 15


def measure_ms(step, steps: int = 20, repeats: int = 3, sync=None) -> float:
    """The median of ``repeats`` timings of ``steps`` steps (:data:`SHORT_REPEATS` where the first timing is under
    :data:`SHORT_STEP_MS` a step), in ms per step; ``sync`` waits for the GPUs (default: ``torch.cuda.synchronize``,
    the current GPU)."""
    sync = sync or torch.cuda.synchronize
    for i in range(5):
        step(i)
    sync()
    times = []
    for r in range(max(repeats, SHORT_REPEATS)):
        if r >= repeats and times[0] >= SHORT_STEP_MS:
            break
        t0 = time.perf_counter()
        for i in range(steps):
            step(i)
        sync()
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(times)


def record(step, path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    def export(prof):
        torch.cuda.synchronize()
        prof.export_chrome_trace(str(path))

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1), on_trace_ready=export) as prof:
        for i in range(4):
            step(i)
            prof.step()


def _steps(cases: list[str]):
    """Each case's variants in turn: (case, variant, its step made from seed 0); its memory freed after."""
    for case in cases:
        for variant in variants(case):
            torch.manual_seed(0)
            yield case, variant, CASES[case](variant)
            torch.cuda.empty_cache()


def measure_again(doc: dict, cases: list[str], index: Path) -> None:
    """Each variant's step measured again (as :func:`main` measures it), added to its ``runs`` in ``doc``."""
    runs = doc.setdefault("runs", [])
    runs.append({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "date": dt.date.today().isoformat()})
    for case, variant, step in _steps(cases):
        entry = doc["cases"].setdefault(case, {}).setdefault(variant, {})
        ms = entry.setdefault("runs", {})[str(len(runs))] = round(measure_ms(step), 4)
        entry["runs_gpu"] = runs[-1]["gpu"]  # a case recorded on another GPU than the file's first says so
        print(f"{case:18s} {variant:6s} {ms:8.3f} ms/step (run {len(runs)})", flush=True)
        del step
    index.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cases", nargs="+", default=sorted(CASES), choices=sorted(CASES))
    p.add_argument("--measure-only", action="store_true", help="measure the steps again into their runs; no traces")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    index = args.out / "cases.json"
    doc = json.loads(index.read_text()) if index.exists() else {"cases": {}}
    if args.measure_only:
        return measure_again(doc, args.cases, index)
    here = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "date": dt.date.today().isoformat()}
    for key, value in here.items():  # the file's first recording names it; each case names its own
        doc.setdefault(key, value)
    # every step timed before any is profiled: a profiler with Python stacks leaves the process's Python slower after it
    step_ms = {(case, variant): measure_ms(step) for case, variant, step in _steps(args.cases)}
    for case, variant, step in _steps(args.cases):
        ms = step_ms[case, variant]
        name = f"{case}-{variant}.json"
        record(step, args.out / name)
        with open(args.out / name, "rb") as src, gzip.open(args.out / f"{name}.gz", "wb", 9) as dst:
            shutil.copyfileobj(src, dst)
        (args.out / name).unlink()
        doc["cases"].setdefault(case, {})[variant] = {"step_ms": round(ms, 4), "trace": f"{name}.gz", **here,
                                                      **({"kind": PLANTED[case]} if case in PLANTED else {})}
        print(f"{case:18s} {variant:6s} {ms:8.3f} ms/step  {(args.out / f'{name}.gz').stat().st_size // 1024} KiB",
              flush=True)
        del step
        index.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
