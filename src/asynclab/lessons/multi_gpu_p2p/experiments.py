"""Lesson 06 experiments: the machine's P2P links, the eight copy/compute set-ups of "Transferring data between GPUs in fully parallel fashion in PyTorch", P2P bandwidth and latency, the bandwidth matrix."""
from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

from asynclab.gpu import hardware
from asynclab.course.experiments import annotate as _annotate
from asynclab.course.experiments import record_gpu_trace as _record_trace
from asynclab.course.experiments import Experiment, lesson_run_all
from asynclab.course.experiments import run_annotated
from asynclab.gpu.devices import native_half, sync_all
from asynclab.gpu.timing import gbps, spin_cycles, wall_ms
from asynclab.course.experiments import gpu_or_note

LESSON = "06"

#: Every experiment needs two GPUs (without them each returns a note saying so): nothing to size down.
CPU_KWARGS: dict[str, dict[str, Any]] = {name: {} for name in ("machine", "fully_parallel", "bandwidth", "latency", "matrix")}

#: What each experiment returns on a machine with fewer than two GPUs.
NO_GPUS = "needs two CUDA GPUs: a copy from one GPU to another"

MiB, GiB = 1 << 20, 1 << 30

#: The eight set-ups of the blog post's experiment: the sender's stream, the receiver's stream, non_blocking.
SETUPS = tuple(itertools.product(("default", "side"), ("default", "side"), (False, True)))

#: Copy sizes of the latency sweep: 4 B to 64 KiB, in steps of 4x.
LATENCY_SIZES = tuple(4 * 4 ** k for k in range(8))


def setup_name(send: str, recv: str, non_blocking: bool) -> str:
    """The name of one set-up: which stream is current on each GPU during the copy, and ``non_blocking``.

    Example:
        >>> setup_name("side", "default", True)
        'send side, recv default, non_blocking=True'
    """
    return f"send {send}, recv {recv}, non_blocking={non_blocking}"


def control_name(recv: str) -> str:
    """A control run: the sender's default stream, the receiver's ``recv`` stream, the product on a side stream of GPU 1.

    Example:
        >>> control_name("side")
        'send default, recv side, multiply on a side stream'
    """
    return f"send default, recv {recv}, multiply on a side stream"


def _wall_ms(fn: Callable[[], Any]) -> float:
    """Host time from issuing ``fn`` (every GPU idle) until every GPU has finished it."""
    sync_all()
    t0 = time.perf_counter()
    fn()
    sync_all()
    return wall_ms(t0)


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    fn()  # the first run loads kernels and sets up peer access
    return statistics.median(_wall_ms(fn) for _ in range(reps))


def _copy(dst: torch.Tensor, src: torch.Tensor, send: torch.cuda.Stream, recv: torch.cuda.Stream,
          non_blocking: bool = False) -> None:
    """``dst.copy_(src)`` with ``send`` current on the source GPU and ``recv`` current on the destination GPU."""
    with torch.cuda.stream(send), torch.cuda.stream(recv):
        dst.copy_(src, non_blocking=non_blocking)


# -- 1: the machine ------------------------------------------------------------------------------------------
def machine(device: Any = None) -> dict[str, Any]:
    """The GPUs, who can reach whom directly (P2P access), the topology table and the NVLink peak.

    The peak each way between GPU 0 and GPU 1 is the number of NVLink links ``nvidia-smi topo -m`` reports
    for the pair ("NV18") times the bandwidth of one link each way for the GPU's generation
    (:data:`asynclab.gpu.hardware.NVLINK_GBPS_PER_LINK`).

    Returns ``{"gpus", "p2p" (matrix of booleans), "topology" (text), "links_0_1", "gbps_per_link",
    "nvlink_peak_gbps", "capability", "device"}`` (a note with fewer than two GPUs).

    Example:
        >>> machine("cpu")["nvlink_peak_gbps"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, gpus=None, p2p=None, topology=None, links_0_1=None,
                           gbps_per_link=None, nvlink_peak_gbps=None, capability=None)
    if cpu is not None:
        return cpu
    hw = hardware.inventory()
    major, minor = torch.cuda.get_device_capability(0)
    links = hardware.nvlink_links(hw.topology).get((0, 1), 0)
    return {"gpus": [g.name for g in hw.gpus], "p2p": [list(row) for row in hw.p2p], "topology": hw.topology,
            "links_0_1": links, "gbps_per_link": hardware.NVLINK_GBPS_PER_LINK.get(major),
            "nvlink_peak_gbps": hardware.nvlink_peak_gbps(links, major), "capability": f"{major}.{minor}",
            "device": str(dev)}


def link_line(m: dict[str, Any]) -> str:
    """One line on how GPU 0 and GPU 1 reach each other, from :func:`machine`'s result.

    Example:
        >>> link_line({"p2p": [[True, True], [True, True]], "links_0_1": 18, "nvlink_peak_gbps": 450.0})
        'GPU 0 <-> GPU 1: 18 NVLink links, peak 450.0 GB/s each way'
        >>> link_line({"p2p": [[True, False], [False, True]], "links_0_1": 0, "nvlink_peak_gbps": None})[:43]
        'no peer access between GPU 0 and GPU 1 here'
    """
    from asynclab.course.registry import NO_PEER_ACCESS

    if not (m["p2p"][0][1] and m["p2p"][1][0]):
        return NO_PEER_ACCESS
    if not m["links_0_1"]:
        return ("GPU 0 <-> GPU 1: peer access over PCIe, no NVLink links; "
                "the NVLink figures in this lesson are the reference's")
    return f"GPU 0 <-> GPU 1: {m['links_0_1']} NVLink links, peak {m['nvlink_peak_gbps']} GB/s each way"


# -- 2: the blog post's experiment --------------------------------------------------------------------------------
def _matmul_size(d1: torch.device, target_ms: float) -> int:
    """The 16-bit (bf16, or fp16 without native bf16) matrix size whose product takes about ``target_ms`` on ``d1`` (a multiple of 512)."""
    n = 4096
    for _ in range(3):
        a = torch.randn(n, n, device=d1, dtype=native_half(d1))
        with torch.cuda.device(d1):
            ms = _median_ms(lambda: a @ a, 3)
        n = max(512, int(round(n * (target_ms / ms) ** (1 / 3) / 512)) * 512)
    return n


def fully_parallel(device: Any = None, nbytes: int = GiB, multiply_ms: float = 2.0, reps: int = 5,
            path: str | Path | None = None) -> dict[str, Any]:
    """The experiment of the blog post "Transferring data between GPUs in fully parallel fashion in PyTorch": copy ``nbytes`` from GPU 0 to GPU 1 while GPU 1 multiplies, in eight set-ups.

    In each set-up the copy ``dst.copy_(src, non_blocking=...)`` is issued with the default or a side stream
    current on GPU 0 (the sender) and on GPU 1 (the receiver); then a bf16 matrix product (sized to take
    about ``multiply_ms``) is issued on GPU 1, outside those contexts, so on GPU 1's default stream. The step
    time is the host's, from issuing both until both GPUs are done (median of ``reps``). Each set-up is then
    recorded once, in one trace, under a ``record_function`` of its name, and whether the copy and the
    product overlapped is read from that trace: the time both ran, against the shorter of the two.

    Two control runs follow, with the sender on its default stream and the product on a side stream of GPU 1
    instead of its default stream (:func:`control_name`): they tell a wait that PyTorch's barrier adds from
    one that CUDA's default streams add.

    Returns ``{"copy_ms", "multiply_ms", "matrix_n", "nbytes", "setups": {name: {"send", "recv",
    "non_blocking", "step_ms", "overlap_ms", "overlapped"}}, "controls": {name: {...}}, "device"}``.

    Example:
        >>> fully_parallel("cpu")["setups"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, copy_ms=None, multiply_ms=None, matrix_n=None, nbytes=nbytes,
                           setups=None, controls=None)
    if cpu is not None:
        return cpu
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    src = torch.ones(nbytes // 4, device=d0)
    dst = torch.zeros(nbytes // 4, device=d1)
    n = _matmul_size(d1, multiply_ms)
    a = torch.randn(n, n, device=d1, dtype=native_half(d1))
    c = torch.empty(n, n, device=d1, dtype=native_half(d1))
    streams = {("send", "default"): torch.cuda.default_stream(d0), ("send", "side"): torch.cuda.Stream(d0),
               ("recv", "default"): torch.cuda.default_stream(d1), ("recv", "side"): torch.cuda.Stream(d1)}

    def multiply() -> None:
        with torch.cuda.device(d1):
            torch.mm(a, a, out=c)  # GPU 1's current stream: its default stream

    def step(send: str, recv: str, nb: bool) -> None:
        _copy(dst, src, streams[("send", send)], streams[("recv", recv)], nb)
        multiply()

    side1 = torch.cuda.Stream(d1)  # for the controls: the product on a side stream of GPU 1

    def multiply_on_side() -> None:
        with torch.cuda.stream(side1):
            torch.mm(a, a, out=c)

    def control(recv: str) -> None:
        _copy(dst, src, streams[("send", "default")], streams[("recv", recv)])
        multiply_on_side()

    copy_ms = _median_ms(lambda: _copy(dst, src, streams[("send", "side")], streams[("recv", "side")]), reps)
    mult_ms = _median_ms(multiply, reps)
    runs: dict[str, Callable[[], None]] = {setup_name(*s): (lambda s=s: step(*s)) for s in SETUPS}
    runs.update({control_name(recv): (lambda recv=recv: control(recv)) for recv in ("default", "side")})
    rows: dict[str, dict[str, Any]] = {name: {"step_ms": _median_ms(fn, reps)} for name, fn in runs.items()}

    def all_runs() -> None:
        for name, fn in runs.items():
            sync_all()
            with _annotate(name):
                fn()
                sync_all()

    trace = _record_trace(path or Path(tempfile.mkdtemp(prefix="asynclab_06_")) / "fully_parallel.json.gz", all_runs)
    for name, row in rows.items():
        row.update(_overlap(trace.window(annotation=name)))
    setups = {setup_name(*s): {"send": s[0], "recv": s[1], "non_blocking": s[2], **rows[setup_name(*s)]}
              for s in SETUPS}
    controls = {control_name(recv): {"send": "default", "recv": recv, "multiply": "side", **rows[control_name(recv)]}
                for recv in ("default", "side")}
    return {"copy_ms": copy_ms, "multiply_ms": mult_ms, "matrix_n": n, "nbytes": nbytes, "setups": setups,
            "controls": controls, "device": str(dev)}


def _overlap(window: Any) -> dict[str, Any]:
    """How long the copy and the product ran at the same time in one set-up's window, from its trace."""
    from asynclab.trace.analysis import metrics

    both = metrics.overlap(window, ("p2p", "d2d"), "compute")
    ev = window.events
    shorter = min(ev.loc[ev["kind"].isin(("p2p", "d2d")), "dur_us"].sum(), ev.loc[ev["kind"] == "compute", "dur_us"].sum())
    return {"overlap_ms": both / 1e3, "overlapped": bool(shorter > 0 and both >= 0.5 * shorter)}


# -- 3: bandwidth and latency --------------------------------------------------------------------------------
def bandwidth(device: Any = None, nbytes: int = GiB, reps: int = 5, batch: int = 4,
              path: str | Path | None = None) -> dict[str, Any]:
    """P2P copy bandwidth between GPU 0 and GPU 1: one way, both ways at once, and staged through the host.

    One way: ``dst1.copy_(src0)`` on side streams. Both ways: that copy and ``dst0.copy_(src1)`` issued
    together, each on its own pair of side streams, so that neither waits for the other. Through the host:
    into a pinned host buffer and on to GPU 1 (``host.copy_(src0); dst1.copy_(host)``, the best the host path
    does), and as everyday code writes it, ``src0.cpu()`` then on to GPU 1 (a fresh pageable buffer each
    time). Each is timed by the host from issue until both GPUs are done, over ``batch`` copies back to back
    (median of ``reps``); GB/s counts the bytes moved (twice ``nbytes`` both ways). With ``path`` one run of
    each is recorded there, annotated ``"one way"``, ``"both ways"``, ``"via host"``.

    Returns ``{"nbytes", "one_way_ms", "one_way_gbps", "both_ways_ms", "both_ways_gbps", "via_host_ms",
    "via_host_gbps", "via_cpu_ms", "via_cpu_gbps", "device"}`` (ms per copy).

    Example:
        >>> bandwidth("cpu")["one_way_gbps"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, nbytes=nbytes, one_way_ms=None, one_way_gbps=None,
                           both_ways_ms=None, both_ways_gbps=None, via_host_ms=None, via_host_gbps=None,
                           via_cpu_ms=None, via_cpu_gbps=None)
    if cpu is not None:
        return cpu
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    src0, dst0 = torch.ones(nbytes // 4, device=d0), torch.zeros(nbytes // 4, device=d0)
    src1, dst1 = torch.ones(nbytes // 4, device=d1), torch.zeros(nbytes // 4, device=d1)
    host = torch.empty(nbytes // 4, pin_memory=True)
    a0, a1, b0, b1 = torch.cuda.Stream(d0), torch.cuda.Stream(d1), torch.cuda.Stream(d0), torch.cuda.Stream(d1)

    def one_way() -> None:
        _copy(dst1, src0, a0, a1)

    def both_ways() -> None:
        _copy(dst1, src0, a0, a1)  # runs on a0 (GPU 0's current stream), fenced with a1
        _copy(dst0, src1, b1, b0)  # runs on b1 (GPU 1's current stream), fenced with b0

    def via_host() -> None:
        host.copy_(src0)  # GPU 0 -> pinned host memory (the host waits for it)...
        dst1.copy_(host)  # ...-> GPU 1

    def via_cpu() -> None:
        dst1.copy_(src0.cpu())

    def batched(fn: Callable[[], None], k: int) -> Callable[[], None]:
        return lambda: [fn() for _ in range(k)]

    ms = {name: _median_ms(batched(fn, k), reps) / k for name, fn, k in (
        ("one_way", one_way, batch), ("both_ways", both_ways, batch), ("via_host", via_host, batch),
        ("via_cpu", via_cpu, 1))}
    if path is not None:
        _record_trace(path, lambda: [run_annotated(label, fn) for label, fn in
                                     (("one way", one_way), ("both ways", both_ways), ("via host", via_host))])
    return {"nbytes": nbytes, "one_way_ms": ms["one_way"], "one_way_gbps": gbps(nbytes, ms["one_way"]),
            "both_ways_ms": ms["both_ways"], "both_ways_gbps": gbps(2 * nbytes, ms["both_ways"]),
            "via_host_ms": ms["via_host"], "via_host_gbps": gbps(nbytes, ms["via_host"]),
            "via_cpu_ms": ms["via_cpu"], "via_cpu_gbps": gbps(nbytes, ms["via_cpu"]), "device": str(dev)}


def latency(device: Any = None, sizes: tuple[int, ...] = LATENCY_SIZES, copies: int = 100) -> dict[str, Any]:
    """GPU-side time per small copy, in the manner of NVIDIA's p2pBandwidthLatencyTest: GPU 0 to GPU 1, and
    for comparison within GPU 0 (a copy that crosses no link and needs no barrier).

    A spin kernel holds GPU 0's side stream while the host queues ``copies`` copies of each size behind it,
    so that the events around them time the GPU, not the host's launches: µs per copy = elapsed / copies.
    A copy between GPUs carries PyTorch's barrier (two event waits) with it; the local one does not.

    Returns ``{"sizes", "us_per_copy", "local_us_per_copy" (lists, one per size), "copies", "device"}``.

    Example:
        >>> latency("cpu")["us_per_copy"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, sizes=list(sizes), us_per_copy=None, local_us_per_copy=None,
                           copies=copies)
    if cpu is not None:
        return cpu
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    s0, s1 = torch.cuda.Stream(d0), torch.cuda.Stream(d1)
    cycles = spin_cycles(d0, 20.0)

    def per_copy(copy: Callable[[], None]) -> float:
        copy()  # warm
        runs = []
        for _ in range(3):
            sync_all()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.device(d0), torch.cuda.stream(s0):
                torch.cuda._sleep(cycles)  # hold the stream while the copies queue up
                start.record(s0)
                for _ in range(copies):
                    copy()
                end.record(s0)
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1e3 / copies)
        return statistics.median(runs)

    peer, local = [], []
    for size in sizes:
        src = torch.ones(max(size // 4, 1), device=d0)
        dst1, dst0 = torch.zeros_like(src, device=d1), torch.zeros_like(src)
        peer.append(per_copy(lambda: _copy(dst1, src, s0, s1)))
        local.append(per_copy(lambda: dst0.copy_(src)))
    return {"sizes": list(sizes), "us_per_copy": peer, "local_us_per_copy": local, "copies": copies,
            "device": str(dev)}


def matrix(device: Any = None, nbytes: int = 256 * MiB, reps: int = 3, batch: int = 4) -> dict[str, Any]:
    """The bandwidth between every pair of GPUs, one way (``i`` to ``j``) and both ways at once, in GB/s
    (``batch`` copies back to back, timed by the host, median of ``reps``).

    The diagonal is None (a copy within one GPU does not cross a link). Returns ``{"gpus" (count),
    "one_way_gbps", "both_ways_gbps" (n x n lists), "nbytes", "device"}``.

    Example:
        >>> matrix("cpu")["one_way_gbps"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPUS, min_gpus=2, gpus=None, one_way_gbps=None, both_ways_gbps=None,
                           nbytes=nbytes)
    if cpu is not None:
        return cpu
    n = torch.cuda.device_count()
    devs = [torch.device("cuda", i) for i in range(n)]
    src = [torch.ones(nbytes // 4, device=d) for d in devs]
    dst = [torch.zeros(nbytes // 4, device=d) for d in devs]
    out_s = [torch.cuda.Stream(d) for d in devs]  # where copies leaving GPU i run
    in_s = [torch.cuda.Stream(d) for d in devs]  # what copies into GPU j are fenced with
    one = [[None] * n for _ in range(n)]
    both = [[None] * n for _ in range(n)]
    for i, j in itertools.permutations(range(n), 2):
        one[i][j] = gbps(batch * nbytes, _median_ms(lambda: [_copy(dst[j], src[i], out_s[i], in_s[j])
                                                             for _ in range(batch)], reps))
        if i < j:
            ms = _median_ms(lambda: [(_copy(dst[j], src[i], out_s[i], in_s[j]), _copy(dst[i], src[j], out_s[j], in_s[i]))
                                     for _ in range(batch)], reps)
            both[i][j] = both[j][i] = gbps(2 * batch * nbytes, ms)
    return {"gpus": n, "one_way_gbps": one, "both_ways_gbps": both, "nbytes": nbytes, "device": str(dev)}


# -- headline and run_all ------------------------------------------------------------------------------------
def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures the lesson's claims rest on, under the names its issue gives."""
    bw, seed, lat, mach = (results.get(k) or {} for k in ("bandwidth", "fully_parallel", "latency", "machine"))
    setups = seed.get("setups") or {}
    return {
        "p2p_one_way_gbps": bw.get("one_way_gbps"),
        "p2p_both_ways_gbps": bw.get("both_ways_gbps"),
        "via_host_gbps": bw.get("via_host_gbps"),
        "via_cpu_gbps": bw.get("via_cpu_gbps"),
        "p2p_latency_us_4B": (lat.get("us_per_copy") or [None])[0],
        "fully_parallel_ms": {name: row["step_ms"] for name, row in setups.items()},
        "fully_parallel_overlap": {name: row["overlapped"] for name, row in setups.items()},
        "copy_alone_ms": seed.get("copy_ms"),
        "multiply_alone_ms": seed.get("multiply_ms"),
        "nvlink_peak_gbps": mach.get("nvlink_peak_gbps"),
    }


#: Every lesson 06 experiment, in the order ``run_all`` runs them: its key in the results, its function, the trace
#: it writes (<trace_dir>/<name>.json.gz) and how many GPUs that trace needs.
EXPERIMENTS: list[Experiment] = [
    Experiment("machine", machine),
    Experiment("fully_parallel", fully_parallel, "fully_parallel", gpus=2),
    Experiment("bandwidth", bandwidth, "bandwidth", gpus=2),
    Experiment("latency", latency),
    Experiment("matrix", matrix),
]

run_all = lesson_run_all(LESSON, EXPERIMENTS, CPU_KWARGS, headline)


# -- probes of the lesson's statements, recorded by scripts/record_extras.py -----------------------------------------
