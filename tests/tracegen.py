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
        >>> b = TraceBuilder(); b.launch(0, 2, corr=1); b.kernel(3, 10, corr=1)
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
