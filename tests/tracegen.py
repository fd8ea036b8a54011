"""Build synthetic torch.profiler Chrome traces in code (test helper; also used by scripts/bench_trace.py)."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

EPOCH_US = 1_700_000_000_000_000  # an integer-µs-since-epoch origin, like PyTorch <= 2.3 traces
BASE_NS = 1_735_689_600_000_000_000  # a baseTimeNanoseconds, like PyTorch >= 2.4 traces


class TraceBuilder:
    """Write events the way a given kineto generation does; all times are given in µs from 0.

    style: "2.4" (fractional µs relative to baseTimeNanoseconds, cats kernel/gpu_memcpy/cuda_runtime,
    ac2g flows), "legacy" (integer µs since the epoch, cats Kernel/Memcpy/Memset/Runtime,
    async_cpu_to_gpu flows) or "rocm" (like 2.4, hip* runtime names, string stream ids).

    Example:
        >>> b = TraceBuilder(); _ = b.launch(0, 2, corr=1); _ = b.kernel(3, 10, corr=1)
        >>> len(b.to_dict()["traceEvents"]) > 2
        True
    """

    def __init__(self, style: str = "2.4", host_pid: int = 4242, host_tid: int = 4242, flows: bool = True):
        assert style in ("2.4", "legacy", "rocm")
        self.style = style
        self.pid = host_pid
        self.tid = host_tid
        self.flows = flows
        self.events: list[dict[str, Any]] = []
        self.top: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []}
        if style != "legacy":
            self.top["baseTimeNanoseconds"] = BASE_NS
        self._launch_ts: dict[int, float] = {}
        self._devices: set[int] = set()
        self._threads: set[int] = {host_tid}

    # ---- time and category spelling --------------------------------------------------------------
    def t(self, us: float) -> float | int:
        if self.style == "legacy":
            return EPOCH_US + int(round(us))
        return round(us + 5_000_000.0, 3)  # relative to the base, never starting at 0

    def d(self, us: float) -> float | int:
        return int(round(us)) if self.style == "legacy" else round(us, 3)

    def cat(self, modern: str) -> str:
        if self.style != "legacy":
            return modern
        return {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset",
                "cuda_runtime": "Runtime"}.get(modern, modern)

    def _x(self, cat: str, name: str, pid: Any, tid: Any, start: float, dur: float, args: dict | None = None) -> dict:
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
             "ts": self.t(start), "dur": self.d(dur)}
        if args is not None:
            e["args"] = args
        self.events.append(e)
        return e

    def _stream_tid(self, stream: int | str) -> int | str:
        if self.style == "rocm":
            return str(stream)
        return stream

    def _flow(self, ph: str, corr: int, pid: Any, tid: Any, ts: float) -> None:
        name = "async_cpu_to_gpu" if self.style == "legacy" else "ac2g"
        e = {"ph": ph, "id": corr, "pid": pid, "tid": tid, "ts": self.t(ts), "cat": name, "name": name}
        if ph == "f":
            e["bp"] = "e"
        self.events.append(e)

    # ---- host --------------------------------------------------------------------------------------
    def launch(self, start: float, dur: float, corr: int | None, name: str | None = None,
               tid: int | None = None, cat: str = "cuda_runtime") -> dict:
        if name is None:
            name = "hipLaunchKernel" if self.style == "rocm" else "cudaLaunchKernel"
        tid = self.tid if tid is None else tid
        self._threads.add(tid)
        args = {"cbid": 211, "correlation": corr} if corr is not None else {"cbid": 211}
        e = self._x(self.cat(cat), name, self.pid, tid, start, dur, args)
        if corr is not None:
            self._launch_ts[corr] = start
            if self.flows:
                self._flow("s", corr, self.pid, tid, start)
        return e

    def cpu_op(self, start: float, dur: float, name: str = "aten::mm", tid: int | None = None) -> dict:
        tid = self.tid if tid is None else tid
        self._threads.add(tid)
        return self._x("cpu_op", name, self.pid, tid, start, dur, {"External id": len(self.events) + 1})

    def python_function(self, start: float, dur: float, name: str, tid: int | None = None) -> dict:
        tid = self.tid if tid is None else tid
        return self._x("python_function", name, self.pid, tid, start, dur, {"Python id": len(self.events) + 1})

    def annotation(self, start: float, dur: float, name: str, tid: int | None = None) -> dict:
        tid = self.tid if tid is None else tid
        return self._x("user_annotation", name, self.pid, tid, start, dur, {"External id": len(self.events) + 1})

    def gpu_annotation(self, start: float, dur: float, name: str, device: int = 0, stream: int | str = 7) -> dict:
        self._devices.add(device)
        return self._x("gpu_user_annotation", name, device, self._stream_tid(stream), start, dur,
                       {"External id": len(self.events) + 1})

    # ---- GPU ---------------------------------------------------------------------------------------
    def _gpu_args(self, device: int, stream: Any, corr: int | None) -> dict:
        a: dict[str, Any] = {"device": device, "context": 1, "stream": stream}
        if corr is not None:
            a["correlation"] = corr
        return a

    def _gpu_flow(self, corr: int | None, device: int, stream: Any, start: float) -> None:
        if self.flows and corr is not None and corr in self._launch_ts:
            self._flow("f", corr, device, self._stream_tid(stream), start)

    def kernel(self, start: float, dur: float, corr: int | None = None, device: int = 0,
               stream: int | str = 7, name: str = "gemm_kernel") -> dict:
        self._devices.add(device)
        a = self._gpu_args(device, stream, corr)
        a.update({"queued": 0, "registers per thread": 32, "shared memory": 0, "grid": [1, 1, 1],
                  "block": [128, 1, 1], "est. achieved occupancy %": 50})
        e = self._x(self.cat("kernel"), name, device, self._stream_tid(stream), start, dur, a)
        self._gpu_flow(corr, device, stream, start)
        return e

    def memcpy(self, start: float, dur: float, corr: int | None = None, direction: str = "HtoD",
               nbytes: int = 1 << 20, device: int = 0, stream: int | str = 7,
               peer: tuple[int, int] | None = None, name: str | None = None) -> dict:
        self._devices.add(device)
        if name is None:
            what = {"HtoD": "Pageable -> Device", "DtoH": "Device -> Pageable", "DtoD": "Device -> Device",
                    "PtoP": "Device -> Device"}[direction]
            name = f"Memcpy {direction} ({what})"
        if peer is not None:  # CUPTI memcpy2 record: fromDevice/inDevice/toDevice, no "device"
            a: dict[str, Any] = {"fromDevice": peer[0], "inDevice": device, "toDevice": peer[1],
                                 "fromContext": 1, "inContext": 1, "toContext": 2, "stream": stream}
            if corr is not None:
                a["correlation"] = corr
        else:
            a = self._gpu_args(device, stream, corr)
        a["bytes"] = nbytes
        a["memory bandwidth (GB/s)"] = round(nbytes / max(dur, 1e-3) / 1e3, 3)
        e = self._x(self.cat("gpu_memcpy"), name, device, self._stream_tid(stream), start, dur, a)
        self._gpu_flow(corr, device, stream, start)
        return e

    def memset(self, start: float, dur: float, corr: int | None = None, nbytes: int = 4096,
               device: int = 0, stream: int | str = 7) -> dict:
        self._devices.add(device)
        a = self._gpu_args(device, stream, corr)
        a["bytes"] = nbytes
        e = self._x(self.cat("gpu_memset"), "Memset (Device)", device, self._stream_tid(stream), start, dur, a)
        self._gpu_flow(corr, device, stream, start)
        return e

    def sync(self, start: float, dur: float, device: int = 0, stream: int = 7, corr: int | None = None,
             tid_offset: bool = False, stream_arg: bool = True, name: str = "Event Sync") -> dict:
        self._devices.add(device)
        a: dict[str, Any] = {"cuda_sync_kind": name, "device": device, "context": 1}
        if stream_arg:
            a["stream"] = stream
        if corr is not None:
            a["correlation"] = corr
        tid = stream + 1_000_000 if tid_offset else stream
        return self._x("cuda_sync", name, device, tid, start, dur, a)

    # ---- extras -------------------------------------------------------------------------------------
    def orphan_flow(self, corr: int, start: float) -> None:
        self._flow("s", corr, self.pid, self.tid, start)

    def instant(self, start: float, name: str = "Iteration Start: PyTorch Profiler") -> None:
        self.events.append({"name": name, "ph": "i", "s": "g", "pid": "Traces",
                            "tid": "Trace PyTorch Profiler", "ts": self.t(start)})

    def counter(self, start: float, value: float) -> None:
        self.events.append({"name": "GPU Memory", "ph": "C", "pid": 0, "ts": self.t(start),
                            "args": {"allocated": value}})

    def span(self, start: float, dur: float) -> None:
        self._x("Trace", "PyTorch Profiler (0)", "Spans", "PyTorch Profiler", start, dur, {"Op count": 0})

    def metadata(self) -> list[dict]:
        out = [{"name": "process_name", "ph": "M", "ts": self.t(0), "pid": self.pid, "tid": 0,
                "args": {"name": "python"}},
               {"name": "process_labels", "ph": "M", "ts": self.t(0), "pid": self.pid, "tid": 0,
                "args": {"labels": "CPU"}}]
        for tid in sorted(self._threads):
            out.append({"name": "thread_name", "ph": "M", "ts": self.t(0), "pid": self.pid, "tid": tid,
                        "args": {"name": f"thread {tid} (python)"}})
        for dev in sorted(self._devices):
            out.append({"name": "process_name", "ph": "M", "ts": self.t(0), "pid": dev, "tid": 0,
                        "args": {"name": f"GPU {dev}"}})
            out.append({"name": "process_labels", "ph": "M", "ts": self.t(0), "pid": dev, "tid": 0,
                        "args": {"labels": f"GPU {dev}"}})
        return out

    def to_dict(self, shuffle: int | None = None) -> dict:
        evs = self.metadata() + list(self.events)
        if shuffle is not None:
            random.Random(shuffle).shuffle(evs)
        doc: dict[str, Any] = dict(self.top)
        doc["traceEvents"] = evs
        doc["traceName"] = "synthetic.json"
        return doc

    def write(self, path: str | Path, shuffle: int | None = None) -> Path:
        path = Path(path)
        text = json.dumps(self.to_dict(shuffle), indent=1)
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(text.encode(), mtime=0))
        else:
            path.write_text(text)
        return path


def simple_trace(style: str = "2.4") -> TraceBuilder:
    """A small trace whose answers are worked out by hand in tests/trace/test_metrics.py.

    GPU 0, stream 7:  H2D copy [3, 13), kernel A [13, 33), kernel B [43, 53)
    GPU 0, stream 13: kernel C [23, 38), D2H copy [48, 63)
    host thread: launches at 0, 5, 8, 12, 30 (2 µs each), correlations 1..5 in that order
    """
    b = TraceBuilder(style)
    b.launch(0, 2, corr=1, name="cudaMemcpyAsync")
    b.launch(5, 2, corr=2)
    b.launch(8, 2, corr=3)
    b.launch(12, 2, corr=4)
    b.launch(30, 2, corr=5, name="cudaMemcpyAsync")
    b.memcpy(3, 10, corr=1, direction="HtoD", nbytes=1000)
    b.kernel(13, 20, corr=2, name="A")
    b.kernel(43, 10, corr=3, name="B")
    b.kernel(23, 15, corr=4, stream=13, name="C")
    b.memcpy(48, 15, corr=5, direction="DtoH", stream=13, nbytes=2000)
    return b


def big_trace_events(n_events: int = 400_000, streams: int = 4, seed: int = 0) -> dict:
    """A large realistic-looking trace (cpu_op + runtime launches + kernels on several streams +
    memcpys + flows) of about ``n_events`` events, as a dict ready for json.dump."""
    rng = random.Random(seed)
    evs: list[dict[str, Any]] = []
    pid, tid = 3001, 3001
    t = 1000.0
    gpu_free = [1000.0] * streams
    corr = 1
    ops = ["aten::mm", "aten::add", "aten::relu", "aten::copy_", "aten::layer_norm", "aten::softmax"]
    kernels = ["void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nn_align4>(Params)",
               "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
               "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
               "ampere_sgemm_128x64_tn", "void at::native::reduce_kernel<512, 1>"]
    while len(evs) < n_events:
        op = rng.choice(ops)
        op_dur = rng.uniform(8, 30)
        evs.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": tid,
                    "ts": round(t, 3), "dur": round(op_dur, 3),
                    "args": {"External id": corr, "Record function id": 0, "Sequence number": corr,
                             "Fwd thread id": 0, "Ev Idx": len(evs)}})
        lt = t + rng.uniform(1, 3)
        is_copy = rng.random() < 0.1
        name = "cudaMemcpyAsync" if is_copy else "cudaLaunchKernel"
        ldur = rng.uniform(3, 6)
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid,
                    "ts": round(lt, 3), "dur": round(ldur, 3),
                    "args": {"External id": corr, "cbid": 211, "correlation": corr}})
        s = 7 if is_copy else rng.choice([7] + [13 + 2 * i for i in range(streams - 1)])
        si = 0 if s == 7 else 1 + (s - 13) // 2
        gs = max(gpu_free[si], lt + rng.uniform(5, 20))
        gd = rng.uniform(2, 40)
        gpu_free[si] = gs + gd
        if is_copy:
            direction = rng.choice(["HtoD", "DtoH"])
            what = "Pageable -> Device" if direction == "HtoD" else "Device -> Pageable"
            nb = rng.randint(1 << 10, 1 << 24)
            evs.append({"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {direction} ({what})", "pid": 0, "tid": s,
                        "ts": round(gs, 3), "dur": round(gd, 3),
                        "args": {"External id": corr, "device": 0, "context": 1, "stream": s,
                                 "correlation": corr, "bytes": nb, "memory bandwidth (GB/s)": round(nb / gd / 1e3, 3)}})
        else:
            evs.append({"ph": "X", "cat": "kernel", "name": rng.choice(kernels), "pid": 0, "tid": s,
                        "ts": round(gs, 3), "dur": round(gd, 3),
                        "args": {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": s,
                                 "correlation": corr, "registers per thread": 128, "shared memory": 49152,
                                 "blocks per SM": 1.2, "warps per SM": 9.6, "grid": [132, 1, 1],
                                 "block": [256, 1, 1], "est. achieved occupancy %": 12}})
        evs.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": round(lt, 3), "cat": "ac2g", "name": "ac2g"})
        evs.append({"ph": "f", "id": corr, "pid": 0, "tid": s, "ts": round(gs, 3), "cat": "ac2g", "name": "ac2g",
                    "bp": "e"})
        corr += 1
        t += op_dur + rng.uniform(0.5, 4)
    meta = [{"name": "process_name", "ph": "M", "ts": 1000.0, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            {"name": "thread_name", "ph": "M", "ts": 1000.0, "pid": pid, "tid": tid,
             "args": {"name": f"thread {tid} (python)"}}]
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS, "traceEvents": meta + evs,
            "traceName": "big.json"}


# --------------------------------------------------------------------------------------------
# Traces of other shapes for scripts/bench_trace.py --shape (each about 60-90 MB as JSON at its default size)
# --------------------------------------------------------------------------------------------
_KERNEL_ARGS = {"queued": 0, "device": 0, "context": 1, "registers per thread": 32, "shared memory": 0,
                "blocks per SM": 0.25, "warps per SM": 1.0, "grid": [33, 1, 1], "block": [128, 1, 1],
                "est. achieved occupancy %": 3}
_SMALL_KERNELS = ["void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
                  "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>",
                  "void at::native::reduce_kernel<128, 4>", "Memset (Device)", "elementwise_kernel_add"]


def _launched(evs: list, corr: int, host: tuple, lt: float, gpu: tuple, gs: float, gd: float, name: str,
              cat: str = "kernel", extra: dict | None = None) -> None:
    """Append a cudaLaunchKernel at ``lt`` on ``host`` (pid, tid), its kernel at ``gs`` on ``gpu`` (device, stream)
    and their ac2g flow pair, as kineto writes them."""
    pid, tid = host
    dev, s = gpu
    evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                "ts": round(lt, 3), "dur": 2.5, "args": {"External id": corr, "cbid": 211, "correlation": corr}})
    args = dict(_KERNEL_ARGS, device=dev, stream=s, correlation=corr, **{"External id": corr})
    if extra:
        args.update(extra)
    evs.append({"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": s, "ts": round(gs, 3),
                "dur": round(gd, 3), "args": args})
    evs.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": round(lt, 3), "cat": "ac2g", "name": "ac2g"})
    evs.append({"ph": "f", "id": corr, "pid": dev, "tid": s, "ts": round(gs, 3), "cat": "ac2g", "name": "ac2g",
                "bp": "e"})


def _doc(evs: list, name: str, device: int = 0, pid: int = 3001, steps: list | None = None, **top: Any) -> dict:
    """A trace document around ``evs``: process/thread names, ``ProfilerStep#N`` annotations over ``steps``
    ([(start, end), ...]), the 2.4 header fields and ``top``."""
    meta = [{"name": "process_name", "ph": "M", "ts": 1000.0, "pid": device, "tid": 0,
             "args": {"name": f"GPU {device}"}},
            {"name": "thread_name", "ph": "M", "ts": 1000.0, "pid": pid, "tid": pid,
             "args": {"name": f"thread {pid} (python)"}}]
    ann = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": pid, "tid": pid,
            "ts": round(a, 3), "dur": round(b - a, 3), "args": {"External id": 0}}
           for i, (a, b) in enumerate(steps or [])]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": device, "name": "NVIDIA H100 80GB HBM3"}],
           "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS, "traceEvents": meta + ann + evs,
           "traceName": name}
    doc.update(top)
    return doc


def small_kernels_events(n_events: int = 400_000, seed: int = 0, n_steps: int = 10) -> dict:
    """Many short kernels (1-3 µs), each with its runtime launch and ac2g flow, a cpu_op over every four, in
    ``n_steps`` profiler steps: a launch-bound trace.

    Example:
        >>> doc = small_kernels_events(200)
        >>> 200 <= len(doc["traceEvents"]) < 220
        True
    """
    rng = random.Random(seed)
    evs: list[dict[str, Any]] = []
    pid = tid = 3001
    t, gpu_free, corr = 1000.0, 1000.0, 1
    while len(evs) < n_events:
        op_start = t
        for _ in range(4):
            lt = t + rng.uniform(0.5, 1.5)
            gs = max(gpu_free, lt + rng.uniform(3, 6))
            gd = rng.uniform(1, 3)
            gpu_free = gs + gd
            _launched(evs, corr, (pid, tid), lt, (0, 7), gs, gd, rng.choice(_SMALL_KERNELS))
            corr += 1
            t = lt + 3.0
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": pid, "tid": tid,
                    "ts": round(op_start, 3), "dur": round(t - op_start, 3),
                    "args": {"External id": corr, "Record function id": 0, "Ev Idx": len(evs)}})
        t += rng.uniform(0.2, 1.0)
    cut = [1000.0 + (t - 1000.0) * i / n_steps for i in range(n_steps + 1)]
    return _doc(evs, "small_kernels.json", steps=list(zip(cut, cut[1:])))


_COLLECTIVES = [("allreduce", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
                ("_allgather_base", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
                ("_reduce_scatter_base", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)")]


def _rank_step(evs: list, rng: random.Random, rank: int, t: float, corr: int, per_step: int) -> tuple[float, int]:
    """One training step of one rank: compute kernels on stream 7, and after every three a collective (its
    record_param_comms cpu_op, launch and NCCL kernel) on the rank's NCCL stream, the same sequence on every rank.
    Returns (end, corr)."""
    host, free = (rank, rank), {7: t, 20 + rank: t}
    for i in range(per_step):
        lt = t + rng.uniform(1, 3)
        if i % 4 == 3:
            coll, kname = _COLLECTIVES[i // 4 % 3]  # every rank issues the same collectives in the same order
            s = 20 + rank  # DDP's process group: one NCCL stream of its own
            nelems = 1 << (20 + 2 * (i // 4 % 3))
            evs.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": rank, "tid": rank,
                        "ts": round(t, 3), "dur": 12.0,
                        "args": {"External id": corr, "Collective name": coll, "Process Group Name": "0",
                                 "Process Group Description": "default_pg", "Group size": 8,
                                 "In msg nelems": nelems, "Out msg nelems": nelems, "dtype": "BFloat16",
                                 "In split size": "[]", "Out split size": "[]", "Global rank start": 0,
                                 "Global rank stride": 1, "Rank": rank}})
            gs = max(free[s], free[7], lt + 5)
            gd = rng.uniform(20, 200)
            _launched(evs, corr, host, lt, (rank, s), gs, gd, kname,
                      extra={"Collective name": coll, "In msg nelems": nelems, "Out msg nelems": nelems,
                             "Group size": 8, "dtype": "BFloat16", "Process Group Name": "0", "Rank": rank})
        else:
            s = 7
            gs = max(free[s], lt + rng.uniform(5, 15))
            gd = rng.uniform(5, 60)
            _launched(evs, corr, host, lt, (rank, s), gs, gd, rng.choice(_SMALL_KERNELS[:3] + ["ampere_sgemm_128x64_tn"]))
        free[s] = gs + gd
        corr += 1
        t = lt + rng.uniform(3, 8)
    return max(t, *free.values()), corr


def rank_collectives_events(n_events: int = 340_000, ranks: int = 8, seed: int = 0, n_steps: int = 10) -> list[dict]:
    """One trace per rank of a data-parallel run (``distributedInfo`` rank r of ``ranks``, GPU r), about
    ``n_events`` events in all: compute kernels, and NCCL collectives on a stream of their own, in ``n_steps``
    profiler steps; the ranks' clocks start a few µs apart. Write each as its own file in one folder.

    Example:
        >>> docs = rank_collectives_events(800, ranks=2)
        >>> [d["distributedInfo"]["rank"] for d in docs], len(docs[0]["traceEvents"]) > 300
        ([0, 1], True)
    """
    docs = []
    per_step = max(4, n_events // ranks // n_steps // 4)
    for rank in range(ranks):
        rng = random.Random(seed * 1000 + rank)
        evs: list[dict[str, Any]] = []
        t, corr, steps = 1000.0 + rng.uniform(0, 20), 1, []
        for _ in range(n_steps):
            end, corr = _rank_step(evs, rng, rank, t, corr, per_step)
            steps.append((t, end))
            t = end + rng.uniform(5, 30)
        info = {"backend": "nccl", "rank": rank, "world_size": ranks, "pg_count": 1,
                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                               "ranks": list(range(ranks)), "group_size": ranks}], "nccl_version": "2.21.5"}
        docs.append(_doc(evs, f"rank{rank}.json", device=rank, pid=rank, steps=steps, distributedInfo=info))
    return docs


_PY_FRAMES = ["torch/nn/modules/module.py(1739): _wrapped_call_impl", "torch/nn/modules/module.py(1750): _call_impl",
              "train.py(88): forward", "transformers/models/llama/modeling_llama.py(412): forward",
              "torch/_dynamo/eval_frame.py(745): _fn", "torch/utils/checkpoint.py(488): checkpoint",
              "torch/nn/functional.py(2910): layer_norm", "torch/autograd/function.py(575): apply",
              "<built-in method matmul of type object at 0x7f1c2a3b4c50>", "threading.py(1012): run"]


def python_stacks_events(n_events: int = 380_000, seed: int = 0, n_steps: int = 10) -> dict:
    """A ``with_stack=True`` trace: each op sits under a Python call stack of 30-60 nested ``python_function``
    events (ids and parent ids as kineto writes them), then its cpu_op, launch and kernel.

    Example:
        >>> doc = python_stacks_events(500)
        >>> sum(e.get("cat") == "python_function" for e in doc["traceEvents"]) > 400
        True
    """
    rng = random.Random(seed)
    evs: list[dict[str, Any]] = []
    pid = tid = 3001
    t, gpu_free, corr, py_id = 1000.0, 1000.0, 1, 1
    while len(evs) < n_events:
        depth = rng.randint(30, 60)
        total = depth * 0.4 + 20
        parent = 0
        for level in range(depth):
            evs.append({"ph": "X", "cat": "python_function", "name": rng.choice(_PY_FRAMES), "pid": pid, "tid": tid,
                        "ts": round(t + 0.2 * level, 3), "dur": round(total - 0.4 * level, 3),
                        "args": {"Python parent id": parent, "Python id": py_id, "Python thread": 0}})
            parent, py_id = py_id, py_id + 1
        op_t = t + 0.2 * depth
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": tid, "ts": round(op_t, 3),
                    "dur": 15.0, "args": {"External id": corr, "Record function id": 0, "Ev Idx": len(evs)}})
        lt = op_t + 2
        gs = max(gpu_free, lt + rng.uniform(5, 20))
        gd = rng.uniform(10, 40)
        gpu_free = gs + gd
        _launched(evs, corr, (pid, tid), lt, (0, 7), gs, gd, "ampere_sgemm_128x64_tn")
        corr += 1
        t += total + rng.uniform(0.5, 3)
    cut = [1000.0 + (t - 1000.0) * i / n_steps for i in range(n_steps + 1)]
    return _doc(evs, "python_stacks.json", steps=list(zip(cut, cut[1:])), with_stack=1)


def huge_events(n_events: int = 600, seed: int = 0, inputs: int = 2500, n_steps: int = 5) -> dict:
    """Few events with very large args: ``n_events`` cpu_ops, each with ``inputs`` entries in its ``Input Dims``,
    ``Input type``, ``Input Strides`` and ``Concrete Inputs`` (a traced ``torch.cat`` of a long list), launching a
    kernel whose templated name runs to a few thousand characters.

    Example:
        >>> doc = huge_events(4, inputs=10)
        >>> [len(e["args"]["Input Dims"][0]) for e in doc["traceEvents"] if e["name"] == "aten::cat"]
        [10, 10, 10, 10]
    """
    rng = random.Random(seed)
    evs: list[dict[str, Any]] = []
    pid = tid = 3001
    t, gpu_free = 1000.0, 1000.0
    for corr in range(1, n_events + 1):
        dims = [[rng.randint(1, 64), 128, rng.choice([64, 128, 256])] for _ in range(inputs)]
        evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::cat", "pid": pid, "tid": tid, "ts": round(t, 3),
                    "dur": 400.0, "args": {"External id": corr, "Record function id": 0, "Ev Idx": corr,
                                           "Input Dims": [dims, []], "Input type": [["float"] * inputs, "Scalar"],
                                           "Input Strides": [[[d[1] * d[2], d[2], 1] for d in dims], []],
                                           "Concrete Inputs": [[""] * inputs, str(corr % 3)]}})
        tmpl = ", ".join(f"cute::tuple<cute::C<{rng.randint(1, 256)}>, cute::C<{d[2]}>>" for d in dims[:60])
        name = f"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<{tmpl}>>(Params{corr % 7})"
        lt = t + 380
        gs = max(gpu_free, lt + 10)
        gpu_free = gs + 300
        _launched(evs, corr, (pid, tid), lt, (0, 7), gs, 300.0, name)
        t += 420
    cut = [1000.0 + (t - 1000.0) * i / n_steps for i in range(n_steps + 1)]
    return _doc(evs, "huge_events.json", steps=list(zip(cut, cut[1:])), record_shapes=1)
