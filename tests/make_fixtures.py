"""Regenerate the small synthetic trace fixtures in tests/fixtures/ (run: python tests/make_fixtures.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tracegen import TraceBuilder, simple_trace  # noqa: E402

HERE = Path(__file__).parent / "fixtures"


def legacy() -> TraceBuilder:
    """PyTorch <= 2.3 look: integer µs since the epoch, Kernel/Runtime/Memcpy/Memset cats,
    async_cpu_to_gpu flows, a Spans row, instant events, an orphan flow; written shuffled."""
    b = simple_trace("legacy")
    b.launch(55, 2, corr=6, name="cudaMemsetAsync")
    b.memset(64, 1, corr=6, nbytes=4096)
    b.orphan_flow(99, 20)
    b.span(0, 70)
    b.instant(0)
    return b


def pt24() -> TraceBuilder:
    """PyTorch >= 2.4 look: fractional µs relative to baseTimeNanoseconds; annotations on host and GPU;
    a cuda_driver launch; a second host thread that launches; a counter; deviceProperties."""
    b = simple_trace("2.4")
    b.top["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
                                  "computeMajor": 9, "computeMinor": 0, "numSms": 132}]
    b.top["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1}
    b.annotation(0, 40, "forward")
    b.gpu_annotation(3, 35, "forward")
    b.annotation(41, 30, "backward")
    b.cpu_op(0.5, 1.0, "aten::copy_")
    b.launch(64.25, 1.5, corr=7, name="cuLaunchKernel", cat="cuda_driver")
    b.kernel(66.5, 0.25, corr=7, name="tiny_kernel")
    b.launch(20, 2, corr=8, tid=777)  # a worker thread that also launches
    b.kernel(70, 3, corr=8, stream=13, name="from_worker")
    b.counter(10, 1234.0)
    b.orphan_flow(123, 30)
    return b


def rocm() -> TraceBuilder:
    """AMD look: hip* runtime names, string stream ids."""
    b = TraceBuilder("rocm")
    b.launch(0, 3, corr=1, name="hipMemcpyAsync")
    b.memcpy(4, 6, corr=1, direction="HtoD", stream=0, nbytes=4096)
    b.launch(5, 3, corr=2, name="hipLaunchKernel")
    b.kernel(11, 9, corr=2, stream=0, name="Cijk_Ailk_Bljk_SB_MT64x64")
    b.launch(9, 3, corr=3, name="hipExtModuleLaunchKernel")
    b.kernel(13, 4, corr=3, stream=1, name="elementwise_kernel")
    return b


def cuda_graph() -> TraceBuilder:
    """One cudaGraphLaunch (correlation 10) that runs 5 kernels; one kernel without any launch."""
    b = TraceBuilder("2.4")
    b.launch(0, 4, corr=10, name="cudaGraphLaunch")
    for i in range(5):
        b.kernel(6 + 3 * i, 2, corr=10, name=f"graph_kernel_{i}")
    b.kernel(30, 2, corr=None, name="orphan_kernel")
    return b


def cuda_sync() -> TraceBuilder:
    """cuda_sync rows at tid = stream + 1,000,000 (one with args.stream, one without), plus a
    device-wide sync (stream -1, written at tid 1 as kineto sanitises negative tids)."""
    b = TraceBuilder("2.4")
    b.launch(0, 2, corr=1)
    b.kernel(3, 10, corr=1, stream=7, name="producer")
    b.launch(2, 2, corr=2, name="cudaStreamWaitEvent")
    b.sync(3, 10, stream=13, corr=2, tid_offset=True, name="Stream Wait Event")
    b.launch(4, 2, corr=3)
    b.kernel(13, 5, corr=3, stream=13, name="consumer")
    b.launch(6, 14, corr=4, name="cudaStreamSynchronize")
    b.sync(18, 1, stream=13, corr=4, tid_offset=True, stream_arg=False, name="Stream Sync")
    b.launch(21, 3, corr=5, name="cudaDeviceSynchronize")
    e = b.sync(21, 2, stream=1, corr=5, name="Device Sync")
    e["args"]["stream"] = -1
    return b


def p2p() -> TraceBuilder:
    """Two GPUs; a peer copy GPU 0 -> GPU 1 (memcpy2 record: fromDevice/toDevice, no device)."""
    b = TraceBuilder("2.4")
    b.launch(0, 2, corr=1)
    b.kernel(3, 10, corr=1, device=0, name="stage0")
    b.launch(3, 2, corr=2, name="cudaMemcpyPeerAsync")
    b.memcpy(13, 8, corr=2, direction="PtoP", device=0, peer=(0, 1), nbytes=8 << 20)
    b.launch(5, 2, corr=3)
    b.kernel(21, 10, corr=3, device=1, name="stage1")
    b.launch(7, 2, corr=4, name="cudaMemcpyAsync")
    b.memcpy(31, 2, corr=4, direction="DtoD", device=1, nbytes=1 << 20)
    return b


def sparse_work() -> TraceBuilder:
    """GPU work in a short part of a long recording: 2 ms of work at 36 ms of a 60 ms trace, with events that draw
    nothing around it: the profiler's span from 0 (the "Spans" row), an instant at 0 and a counter at the end, the
    script's Python function over it all, an op on a thread that launches nothing at 1 ms, and ProfilerStep#1 (host
    and GPU) that runs on 22 ms after its last kernel, as a profiler schedule's last recorded step does."""
    b = TraceBuilder("2.4")
    b.span(0, 60_000)
    b.instant(0)
    b.python_function(500, 59_000, "train.py(12): main")
    b.cpu_op(1_000, 100, "aten::copy_", tid=99)  # a loader thread: launches nothing, so it has no lane
    b.annotation(36_000, 24_000, "ProfilerStep#1")
    b.gpu_annotation(36_020, 23_900, "ProfilerStep#1")
    b.annotation(36_005, 1_500, "forward")
    for i in range(4):
        b.launch(36_010 + 300 * i, 20, corr=i + 1)
        b.kernel(36_040 + 480 * i, 450, corr=i + 1, stream=7 if i % 2 == 0 else 13, name=f"layer{i}")
    b.counter(59_900, 4096.0)
    return b


def main() -> None:
    HERE.mkdir(exist_ok=True)
    legacy().write(HERE / "legacy_pt21.json", shuffle=7)
    pt24().write(HERE / "pt24_base_time.json", shuffle=3)
    rocm().write(HERE / "amd_rocm.json")
    cuda_graph().write(HERE / "cuda_graph.json")
    cuda_sync().write(HERE / "cuda_sync_offset.json")
    p2p().write(HERE / "p2p_2gpu.json.gz")
    sparse_work().write(HERE / "sparse_work.json")
    # a killed process: the pt24 trace cut in the middle of an event
    text = json.dumps(pt24().to_dict(), indent=1)
    cut = int(len(text) * 0.62)
    (HERE / "truncated.json").write_text(text[:cut])
    # a bare list of events (no top-level object)
    (HERE / "bare_list.json").write_text(json.dumps(simple_trace("2.4").to_dict()["traceEvents"], indent=0))


if __name__ == "__main__":
    main()
