"""One rank of lesson 07's torch.distributed.pipelining run: started by torchrun, it profiles a few steps of one schedule.

    torchrun --nproc-per-node 2 -m asynclab.lessons.pipeline_bubbles.stages OUT_DIR SCHEDULE M

Each rank builds its stage (a hand-written module of ``LAYERS`` Linear+ReLU of ``WIDTH``, the lesson's by-hand
stages' layers), runs
``SCHEDULE`` ("gpipe" or "1f1b"; "none" skips the pipeline) with ``M`` micro-batches, and writes
``OUT_DIR/rank{R}.json.gz`` (steps 2 and 3 of four, profiled). Then the ranks time an all-reduce with
``async_op=True`` that the last rank joins late (:func:`work_wait`). Rank 0 writes ``OUT_DIR/result.json``: the
median step time of the last steps, and what ``work.wait()`` cost its host and its stream.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    t_start = time.perf_counter()
    import torch
    import torch.distributed as dist

    out, kind, m = Path(argv[0]), argv[1], int(argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    phases = {"imports": time.perf_counter() - t_start}
    result: dict = {"schedule": kind, "m": m, "gpus": world, "step_ms": None}
    try:
        if kind != "none":
            result["step_ms"] = pipeline(out, kind, m, rank, world, dev, phases, t_start)
        result["work_wait"] = work_wait(dev, rank, world)
        phases["work.wait"] = time.perf_counter() - t_start
        if rank == 0:  # phases: seconds from this process's start to the end of each phase, for the lesson's run time
            out.mkdir(parents=True, exist_ok=True)
            (out / "result.json").write_text(json.dumps({**result, "phases_s": phases}))
    finally:
        dist.destroy_process_group()
    return 0


def pipeline(out: Path, kind: str, m: int, rank: int, world: int, dev, phases: dict, t_start: float) -> float:
    """This rank's stage under ``kind``'s schedule: warm-up, timed steps (their median ms is returned), then four
    profiled steps whose trace goes to ``out/rank{rank}.json.gz``."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from torch.profiler import ProfilerActivity, profile, schedule

    from asynclab.lessons.pipeline_bubbles.experiments import BATCH, LAYERS, WIDTH, HandWrittenStage

    torch.manual_seed(rank)
    stage = PipelineStage(HandWrittenStage(LAYERS, WIDTH, dev), stage_index=rank, num_stages=world, device=dev)
    cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[kind]
    sched = cls(stage, n_microbatches=m, loss_fn=lambda y, t: y.square().mean())
    x = torch.randn(BATCH, WIDTH, device=dev)

    def step() -> None:
        if rank == 0:
            sched.step(x)
        elif rank == world - 1:
            sched.step(target=x, losses=[])
        else:
            sched.step()
        torch.cuda.synchronize(dev)

    times = []
    phases["init"] = time.perf_counter() - t_start
    for _ in range(3):  # warm up, then time
        step()
    phases["warm-up"] = time.perf_counter() - t_start
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    out.mkdir(parents=True, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(out / f"rank{rank}.json.gz"))) as prof:
        for _ in range(4):
            dist.barrier()
            step()
            prof.step()
    phases["profiled and written"] = time.perf_counter() - t_start
    return statistics.median(times)


def work_wait(dev, rank: int, world: int, late_ms: float = 20.0, size: int = 1 << 20) -> dict:
    """An all-reduce issued with ``async_op=True``, which the last rank joins ``late_ms`` late (a spin kernel ahead
    of it on its stream), then ``work.wait()``: how long rank 0's host spent issuing it, in ``wait()`` and in the
    ``torch.cuda.synchronize()`` after, and how long its stream took from just before the all-reduce to just after
    the wait (CUDA events). The second of two rounds (the first warms up). ``late_ms`` is the measured spin."""
    import torch
    import torch.distributed as dist

    from asynclab.course.experiments import spin_cycles

    cycles, t = spin_cycles(dev, late_ms), torch.ones(size, device=dev)
    for _ in range(2):
        dist.barrier()
        torch.cuda.synchronize(dev)
        spun = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        if rank == world - 1:
            spun[2].record()
            torch.cuda._sleep(cycles)
            spun[3].record()
        spun[0].record()
        t0 = time.perf_counter()
        work = dist.all_reduce(t, async_op=True)
        t1 = time.perf_counter()
        work.wait()
        t2 = time.perf_counter()
        spun[1].record()
        torch.cuda.synchronize(dev)
        t3 = time.perf_counter()
    late = torch.tensor([spun[2].elapsed_time(spun[3]) if rank == world - 1 else 0.0], device=dev)
    dist.all_reduce(late)  # rank 0 learns how late the last rank was
    return {"issue_ms": (t1 - t0) * 1e3, "wait_host_ms": (t2 - t1) * 1e3, "synchronize_ms": (t3 - t2) * 1e3,
            "stream_ms": spun[0].elapsed_time(spun[1]), "late_ms": float(late.item()), "nbytes": size * 4}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
