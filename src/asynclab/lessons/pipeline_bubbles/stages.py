"""One rank of lesson 07's torch.distributed.pipelining run: started by torchrun, it profiles a few steps of one schedule.

    torchrun --nproc-per-node 2 -m asynclab.lessons.pipeline_bubbles.stages OUT_DIR SCHEDULE M

Each rank builds its stage (a hand-written module of ``LAYERS`` Linear+ReLU of ``WIDTH``, the lesson's by-hand
stages' layers), runs
``SCHEDULE`` ("gpipe" or "1f1b") with ``M`` micro-batches, and writes ``OUT_DIR/rank{R}.json.gz`` (steps 2 and 3
of four, profiled) and, on rank 0, ``OUT_DIR/result.json`` with the median step time of the last steps.
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
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from torch.profiler import ProfilerActivity, profile, schedule

    from asynclab.lessons.pipeline_bubbles.experiments import BATCH, LAYERS, WIDTH, HandWrittenStage

    out, kind, m = Path(argv[0]), argv[1], int(argv[2])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    phases = {"imports": time.perf_counter() - t_start}
    try:
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
        if rank == 0:  # phases: seconds from this process's start to the end of each phase, for the lesson's run time
            (out / "result.json").write_text(json.dumps({"schedule": kind, "m": m, "gpus": world,
                                                         "step_ms": statistics.median(times), "phases_s": phases}))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
