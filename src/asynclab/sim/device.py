"""One simulated GPU under PyTorch's dispatcher: real CPU values, with CUDA's order of streams, events, copies and memory.

A :class:`DeviceTensor` is a real ``torch.Tensor`` (a wrapper subclass, as FakeTensor is) that says it lives on
``cuda:N``. Every operator on it reaches :meth:`DeviceTensor.__torch_dispatch__`, which runs it on CPU values, but
*when* the GPU would: a kernel is queued on the calling thread's current stream, starts after what is queued there
(and after any event that stream waits for), reads its inputs when it starts and writes its outputs when it ends.
So a kernel that starts before its input's producer has finished reads what that memory held before, exactly as
on a GPU, and a host read (``item``, ``tolist``, ``cpu``, ``print``, ``bool``) waits for its copy on the current
stream. Memory comes from a caching allocator with a pool per stream, so a block freed while another stream still
reads it is handed to the next allocation at once, unless ``record_stream`` named that stream. Host memory is
pageable (ordinary tensors) or pinned (:class:`PinnedTensor`); copies run on one copy engine per direction.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from asynclab.sim import methods  # noqa: F401 - registers the tensor methods a simulated GPU tensor runs
from asynclab.sim import graphs, handoffs, patches
from asynclab.sim.cuda import Stream
from asynclab.sim.running import RUNNING
from asynclab.sim.simulation import FreeHost, Simulation
from asynclab.sim.sms import SMs
from asynclab.sim.allocator import CachingAllocator
from asynclab.sim.workqueue import WorkQueue
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.figures import card_figures, rates
from asynclab.sim.hostmem import PinnedMemory
from asynclab.sim.nest import leaves
from asynclab.sim.ops import FRESH_PAGES_FROM, copy_between, run_operator
from asynclab.sim.tensors import (Block, DeviceTensor, PinnedTensor, flat_tensors, fresh_memory, gpu_of, is_cuda,
                                  memory_of, needed_bytes, shaped_on, target_of)
from asynclab.sim.trace import trace_of

__all__ = ["DeviceTensor", "PinnedTensor", "SimGPU", "gpu_of"]


def _grouped(tensorlistlist: list, with_indices: bool = False) -> dict:
    """An optimizer's tensors grouped by the device and dtype of the first list's (PyTorch's own grouping reads a
    tensor's device in C++, where a simulated GPU's tensor lives on the CPU): ``{(device, dtype): (lists, indices)}``.

    Example:
        >>> a, b = torch.zeros(1), torch.zeros(1, dtype=torch.float16)
        >>> {k[1]: v[1] for k, v in _grouped([[a, b, a]]).items()}
        {torch.float32: [0, 2], torch.float16: [1]}
    """
    out: dict = {}
    for i, first in enumerate(tensorlistlist[0]):
        lists, indices = out.setdefault((first.device, first.dtype), ([[] for _ in tensorlistlist], []))
        for kept, tensors in zip(lists, tensorlistlist):
            if tensors:  # an empty list (no momentum buffers yet) stays empty
                kept.append(tensors[i])
        indices.append(i)
    return out


#: Factories that only allocate: a GPU runs no kernel for them.
_ONLY_ALLOCATE = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided")


class _Placement(TorchFunctionMode):
    """Puts new tensors where a GPU program puts them: ``device="cuda"`` factories, ``.cuda()``, ``.to("cuda")`` of
    host tensors and ``pin_memory`` make simulated memory."""

    def __init__(self, gpu: "SimGPU"):
        super().__init__()
        self.gpu = gpu

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        host = bool(args) and isinstance(args[0], torch.Tensor) and not isinstance(args[0], DeviceTensor)
        if name == "where" and any(isinstance(a, DeviceTensor) for a in args):  # a number beside GPU tensors: 0-d
            args = tuple(torch.tensor(a) if isinstance(a, (int, float, bool)) else a for a in args)
        if name in ("to", "cuda") and host:
            target = target_of(self.gpu, name, args[1:], kwargs)
            if target is not None:
                return self.gpu.from_host(args[0], target[0], non_blocking=target[1], dtype=target[2])
        if name in ("tensor", "as_tensor") and args and isinstance(args[0], (list, tuple)):
            args = (self.read_nest(args[0]), *args[1:])  # GPU tensors in the data: the host reads each one
        if name == "pin_memory" and host:
            pinned_copy = self.gpu.pin(args[0].clone())
            self.gpu.costs.host_work(name, args, pinned_copy)  # the host copies the data into page-locked memory
            return pinned_copy
        if name == "is_pinned" and host and type(args[0]) is not PinnedTensor:
            return self.gpu.is_pinned_memory(args[0])
        device, pinned = kwargs.get("device"), kwargs.pop("pin_memory", False)
        on_gpu = any(isinstance(a, DeviceTensor) for a in flat_tensors((args, kwargs)))
        if name.startswith("_record_function_"):  # torch.profiler.record_function: the host's annotation
            return self.annotation(name, func(*args, **kwargs), args[0])
        if name.endswith("_like") and is_cuda(device) and args and isinstance(args[0], DeviceTensor):
            like = torch.empty(args[0].shape, dtype=args[0].dtype)  # zeros_like(x, device=...): a factory, x its shape
            args, on_gpu = (like, *args[1:]), False
        if is_cuda(device) and not on_gpu:  # a factory (an operator on GPU tensors is theirs to run)
            out = self._factory(func, name, args, kwargs)
            made = self.gpu.made(out, self.gpu.index(device), name)  # torch.tensor: host data, a blocking copy
            return made.requires_grad_() if out.requires_grad else made  # (a no-op where autograd does not run)
        out = func(*args, **kwargs)
        if not on_gpu and not self.gpu.gpu_working:  # the GPU's own work computing its values is no host work
            self.gpu.costs.host_work(name, args, out)
        return self.gpu.pin(out) if pinned and isinstance(out, torch.Tensor) else out

    def read_nest(self, data: Any) -> Any:
        """Lists and tuples of numbers and tensors, with each GPU tensor read by the host (as ``torch.tensor`` reads
        each element of a list of GPU tensors)."""
        if isinstance(data, (list, tuple)):
            return type(data)(self.read_nest(d) for d in data)
        return self.gpu.to_host(data, non_blocking=False, pinned=False) if isinstance(data, DeviceTensor) else data

    def annotation(self, name: str, handle: Any, arg: Any) -> Any:
        """``torch.profiler.record_function`` entered (``arg`` its name) or left (``arg`` its handle): the host's
        range goes into the GPU's trace, as the profiler's would."""
        gpu = self.gpu
        if name == "_record_function_enter_new":
            gpu.open_ranges.append((str(arg), gpu.host))
        elif gpu.open_ranges:
            label, start = gpu.open_ranges.pop()
            gpu.annotations.append((label, start, gpu.host))
        gpu.host += gpu.ANNOTATION_MS
        return handle

    def _factory(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        """A factory's result made on the host (to copy into GPU memory), or, where the simulation computes no values
        and the data is not the host's, only its shape (a meta tensor): a large model's weights cost no time."""
        if not self.gpu.computes and name not in ("tensor", "as_tensor", "from_numpy"):
            try:
                return func(*args, **{**kwargs, "device": "meta"})
            except (RuntimeError, NotImplementedError, TypeError):  # a generator of the host's, say
                pass
        return func(*args, **{**kwargs, "device": "cpu"})


def _threads(run: Callable, join: Callable) -> dict[str, Callable]:
    """``Thread.run`` and ``Thread.join`` for threads the check's code starts: each runs with the simulated GPU's
    placement of new tensors in force (a torch function mode holds for one thread only) and a host clock of its own;
    a ``join`` waits, in the joiner's time, until the thread ended."""
    def placed_run(thread: threading.Thread) -> None:
        gpu = gpu_of(required=False)
        if gpu is None:
            return run(thread)
        gpu.threads.started()
        try:
            with _Placement(gpu):
                return run(thread)
        finally:
            gpu.threads.ended(thread)

    def timed_join(thread: threading.Thread, timeout: float | None = None) -> None:
        gpu = gpu_of(required=False)
        if gpu is None:
            return join(thread, timeout)
        with gpu.threads.blocked():
            join(thread, timeout)
        gpu.threads.joined(thread)
    return {"run": placed_run, "join": timed_join}


def _signals(notify: Callable, wait: Callable) -> dict[str, Callable]:
    """``Condition.notify`` and ``Condition.wait`` (under ``threading.Event``, ``queue.Queue`` and a future's
    ``result()``): a thread woken by another catches up with the time at which that one signalled."""
    def timed_notify(cond: threading.Condition, n: int = 1) -> None:
        gpu = gpu_of(required=False)
        if gpu is not None:
            gpu.threads.signalled(cond, n)
        notify(cond, n)

    def timed_wait(cond: threading.Condition, timeout: float | None = None) -> bool:
        gpu = gpu_of(required=False)
        if gpu is None:
            return wait(cond, timeout)
        with gpu.threads.blocked(cond):
            woken = wait(cond, timeout)
        if woken:
            gpu.threads.woken(cond)
        return woken
    return {"notify": timed_notify, "wait": timed_wait}


def _install_gpu_patches(gpu: "SimGPU") -> list:
    """What a simulated GPU puts in place while it runs, done (to undo in reverse order): threads started in the check
    place tensors there too; an optimizer takes its multi-tensor (foreach) path for parameters on the simulated GPU,
    as it does for a GPU's (it checks a parameter's type and groups by device), and so do clip_grad_norm_'s foreach
    kernels; the caching host allocator's cache is the simulation's (each where this PyTorch has it)."""
    installed = [patches.install("threading.Thread", _threads(threading.Thread.run, threading.Thread.join)),
                 patches.install("threading.Condition", _signals(threading.Condition.notify, threading.Condition.wait)),
                 *handoffs.install()]
    here = {"_group_tensors_by_device_and_dtype": _grouped, "_host_emptyCache": gpu.pinned.empty_cache}
    for path, names in {**patches.FOREACH, **patches.HOST_CACHE}.items():
        owner = patches.owner_of(path)
        ours = {**here, "_foreach_supported_types": [*getattr(owner, "_foreach_supported_types", ()), DeviceTensor]}
        done = patches.install_present(path, {name: ours[name] for name in names})
        if done is not None:
            installed.append(done)
    return installed


class SimGPU(Simulation):
    """One or two simulated GPUs for checkers on machines without them: any PyTorch code runs, in CUDA's order.

    Work is timed in logical milliseconds from the cost model below (an H100's rates, slowed by ``scale``: a check
    hands a simulated GPU tensors ``scale`` times smaller in bytes than a GPU's, each side of a matrix ``sqrt(scale)``
    times shorter, so that its bytes move ``scale`` times slower and its matrix products' FLOPs, ``scale ** 1.5``
    times fewer, run that much slower: every kernel and copy takes as long as the GPU's, whatever its dtype, and a
    cast or an operand takes its share of the time as on the GPU); a kernel holds the share of the ``SM_COUNT`` SMs
    its blocks fill and leaves the rest to kernels on other streams: a matrix product runs that much slower than one
    that fills them, a memory-bound kernel as much slower as its SMs draw less of the bandwidth, which it shares with
    those beside it (:class:`asynclab.sim.sms.SMs`); the host moves on by :data:`LAUNCH_MS` per launch, and
    ``torch.cuda._sleep(cycles)`` spins for ``cycles / CYCLES_PER_MS``. What ran comes back as a
    :class:`asynclab.trace.Trace` from :meth:`trace`.

    Example:
        >>> with SimGPU() as gpu:
        ...     x = torch.zeros(4, device="cuda")
        ...     side = torch.cuda.Stream()
        ...     torch.cuda._sleep(gpu.cycles(50.0))   # the default stream is busy for 50 ms...
        ...     _ = x.fill_(1.0)                      # ...before x is written
        ...     with torch.cuda.stream(side):
        ...         y = x * 2                         # no wait_stream: reads the zeros x held before
        ...     side.synchronize()
        ...     y.tolist()
        [0.0, 0.0, 0.0, 0.0]
    """

    #: The cost model: an H100's figures (:mod:`asynclab.sim.figures`, from ``sim/cards/h100.json``) as constants in
    #: ms and in bytes or FLOPs per ms: the host time of a launch (``LAUNCH_MS``) and of entering or leaving a
    #: ``record_function`` range (``ANNOTATION_MS``), the shortest kernel (``KERNEL_MS``), a spin kernel's clock
    #: (``CYCLES_PER_MS``), the memory, matrix-product (``MATMUL_CURVES``, by dtype and size) and copy rates. The
    #: figures only :func:`asynclab.sim.simulate.simulate` uses (the host's time per operator, cudaMalloc and cudaFree,
    #: new pinned memory, the launch queue's depth) are here too; a check never uses them.
    locals().update(rates(card_figures("H100")))
    #: Operators on simulated GPU tensors run here (:func:`asynclab.sim.tensors.gpu_of` finds it).
    runs_tensors = True

    def __init__(self, devices: int = 1, peer_access: bool = True, scale: float = 1.0, card: str | None = None,
                 computes: bool = True, costs: FreeHost | None = None) -> None:
        """``card``: another card's figures than the H100's (:func:`asynclab.sim.figures.card_figures`);
        ``computes``: whether kernels compute their values on the CPU (False: timing only, the memory keeps what it
        held); ``costs``: what the host's own work costs (:class:`asynclab.sim.simulation.FreeHost`, a checker's:
        nothing; :class:`asynclab.sim.simulate.HostCosts`, ``al.simulate``'s)."""
        super().__init__()
        self.devices, self.peer_access, self.scale, self.computes = devices, peer_access, scale, computes
        self.figures = card_figures(card) if card is not None else None
        for name, value in rates(self.figures).items() if self.figures is not None else ():
            setattr(self, name, value)
        for rate in ("MEMORY_BYTES_PER_MS", "PINNED_BYTES_PER_MS", "PAGEABLE_BYTES_PER_MS", "PEER_BYTES_PER_MS",
                     "VIA_HOST_BYTES_PER_MS"):  # bytes `scale` times fewer, moved as much slower: a GPU's times
            setattr(self, rate, getattr(self, rate) / scale)
        #: what the GPUs' work does when, in time order
        self.work = WorkQueue(lambda: self.threads.horizon, lambda: torch.inference_mode(False), memory_of)
        self.memory = CachingAllocator(now=lambda: self.host, order=lambda: next(RUNNING.order))  # the allocator's books
        self._engines: dict[tuple, float] = {}  # (device, direction) -> when that copy engine is free
        self.sms = SMs(self)  # the kernels on each device's SMs
        self.ran: list[tuple] = []  # (cat, name, device, stream, start, end, correlation)
        self.launches: list[tuple[str, float, float, int]] = []  # the host's: (name, start, end, correlation)
        self.annotations: list[tuple[str, float, float]] = []  # the host's record_function ranges: (name, start, end)
        self.open_ranges: list[tuple[str, float]] = []  # record_function ranges the host is in
        self.failed: list[str] = []  # operators whose CPU run failed (the host hears of it at its next wait)
        self.pinned = PinnedMemory()  # page-locked host memory, as PyTorch's caching host allocator keeps it
        self.late_copies: dict[int, int] = {}  # id of a block -> the spin (cycles) that runs ahead of each copy of it
        self.watch_host(self.catch_up)
        self.costs = costs if costs is not None else FreeHost()
        self.costs.attach(self)

    @property
    def trains(self) -> bool:
        """Whether autograd runs on this GPU's tensors (the host-cost policy's say: ``al.simulate``'s does)."""
        return self.costs.trains

    # -- the simulation's time ------------------------------------------------------------------------------------
    def catch_up(self, upto: float | None = None) -> None:
        """Let everything the GPU does up to ``upto`` happen, in time order (by default the host threads' horizon: the
        host's time, or with threads the earliest clock of those that run)."""
        self.work.catch_up(upto)

    @property
    def gpu_working(self) -> bool:
        """Whether the GPU's work is happening now (:meth:`catch_up`): the operators its kernels run to compute their
        values are the GPU's, never the host's tensor work, whatever the host called that let them happen (a
        ``synchronize``, a CUDA graph's ``replay``, a read of a clock).

        Example:
            >>> SimGPU().gpu_working
            False
        """
        return self.work.busy

    def cuda_graph(self, keep_graph: bool = False) -> graphs.CUDAGraph:
        """``torch.cuda.CUDAGraph()`` on this simulated GPU."""
        return graphs.CUDAGraph(keep_graph)

    def graph_capture(self, cuda_graph: graphs.CUDAGraph, pool: Any = None, stream: Stream | None = None,
                      capture_error_mode: str = "global") -> Any:
        """``torch.cuda.graph(...)`` on this simulated GPU: the block captured into ``cuda_graph``."""
        return graphs.graph(cuda_graph, pool, stream, capture_error_mode)

    def host_sync(self, call: str, t: float, sleep: bool = False) -> None:
        """The host in CUDA's ``call`` until ``t``, recorded among the launches as the profiler records it (a
        ``cuda_runtime`` row from the call to its return)."""
        start = self.host
        self.wait_until(t, sleep)
        self.launches.append((call, start, max(self.host, start + 0.001), next(RUNNING.order)))

    def wait_until(self, t: float, sleep: bool = False) -> None:
        """The host waits until ``t``; an operator that failed meanwhile is reported now, as CUDA reports a kernel's
        error at the next synchronization. With threads, the others first reach its time (see await_others); then
        what it waited for has happened. While a CUDA graph is captured the host may not wait, as in CUDA."""
        if self.capture is not None:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        super().wait_until(t, sleep)
        self.threads.await_others()
        self.catch_up(self.host)
        if self.failed:
            what = self.failed.pop(0)
            self.failed.clear()
            raise SimulationLimit(f"the operator {what} as the simulated GPU ran it")

    def finish(self) -> None:
        """Let all queued work happen (the end of a check), without moving the host."""
        self.work.finish()

    def cycles(self, ms: float) -> int:
        """The ``torch.cuda._sleep`` argument that spins for ``ms``."""
        return int(ms * self.CYCLES_PER_MS)

    def spin(self, cycles: int) -> None:
        """``torch.cuda._sleep(cycles)``: a spin kernel on the current stream."""
        self.queue("spin", self.current(), max(self.KERNEL_MS, cycles / self.CYCLES_PER_MS), lambda: None)

    def queue(self, name: str, stream: Stream, ms: float, at_start: Callable, launched: bool = True,
              **kw: Any) -> tuple[float, float]:
        """Queue GPU work of ``ms`` on ``stream``, launched by the host (``launched``) or by a CUDA graph's replay, as
        :meth:`enqueue` does; the host-cost policy sees the launch before and after (``al.simulate``'s: the launch
        queue's depth). Returns (start, end)."""
        self.costs.launch_starts(launched)
        start, end = self.enqueue(name, stream, ms, at_start, launched=launched, **kw)
        self.costs.launch_ends(launched, start)
        return start, end

    def enqueue(self, name: str, stream: Stream, ms: float, at_start: Callable, cat: str = "kernel",
                engine: tuple | None = None, after: float = 0.0, reads: tuple = (), writes: tuple = (),
                fill: float = 0.0, memory: bool = False, launched: bool = True,
                waves: tuple = (), holds: bool = False) -> tuple[float, float]:
        """Queue GPU work of ``ms`` on ``stream`` (and on a copy ``engine``): ``at_start()`` runs when it starts and
        may return what to do when it ends. A kernel whose blocks hold a share ``fill`` of the SMs gets what the
        kernels already queued leave of them (:class:`asynclab.sim.sms.SMs`); one given as ``waves`` ((fill, ms) of each, for a
        kernel of more blocks than the GPU holds at once, whose blocks' time is known) runs them one after another,
        its last wave's empty SMs left to the kernels queued after it; ``holds``: its blocks hold their SMs until it
        ends (see :meth:`asynclab.sim.sms.SMs.on_sms`). The work reads the memory of ``reads`` all
        along: if other work writes it meanwhile, what it writes (``writes``) is garbage, as on a GPU. The host pays
        one launch (none for a CUDA graph's work, ``launched=False``). While a graph is captured the work goes into
        it instead. Returns (start, end)."""
        if self.captured(("work", name, stream, ms, at_start, dict(cat=cat, engine=engine, reads=reads, writes=writes,
                                                                   fill=fill, memory=memory, waves=waves,
                                                                   holds=holds))):
            self.host += self.LAUNCH_MS
            return self.host, self.host
        host = self.host  # the host's clock stands still until its launch below
        start = max(self.ready(stream), host, after, self._engines.get(engine, 0.0))
        priority = getattr(stream, "priority", 0)
        if waves:
            start, end = self.sms.in_waves(stream.device_index, start, waves, memory, priority)
        elif fill > 0:
            start, end = self.sms.on_sms(stream.device_index, start, ms, fill, memory, priority, holds)
        else:
            end = start + ms
        self.set_ready(stream, end)
        if engine is not None:
            self._engines[engine] = end
        corr = next(RUNNING.order)
        self.ran.append((cat, name, stream.device_index, self.number(stream), start, end, corr))
        if launched:
            launch = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
            self.launches.append((launch, host, host + self.LAUNCH_MS, corr))
            self.host = host + self.LAUNCH_MS

        def begin() -> None:
            then = at_start()
            if then is not None:
                self.work.writes(writes, corr)
                self.work.at(end, lambda: self.work.ended(then, start, end, reads, writes, corr))
        self.work.at(start, begin, starts=True)
        return start, end

    # -- memory ---------------------------------------------------------------------------------------------------
    def allocate(self, like: torch.Tensor, device: int, stream: Stream | None = None) -> DeviceTensor:
        """New memory on ``device`` shaped like ``like``, from the pool of ``stream`` (default: the current one)."""
        stream = stream or self.current(device)
        need, pool = needed_bytes(like), self.memory.pool(device, stream)
        fits = self.memory.fitting(pool, need)
        with torch.inference_mode(False):  # memory the simulation writes later, whatever mode the host is in then
            base = pool.pop(fits)[2] if fits is not None else fresh_memory(need, self.computes)
            self.memory.mallocs += fits is None
            elem = shaped_on(base, like)
        self.memory.count(device, base.numel(), reserved=base.numel() if fits is None else 0)
        block = Block(base, device, stream, self)
        weakref.finalize(block, self._free, base, device, stream, block.recorded)
        out = DeviceTensor(elem, block)
        self.costs.new_memory(int(fits is None))  # the policy prices cudaMalloc
        return out

    def _free(self, base: torch.Tensor, device: int, stream: Stream, recorded: set) -> None:
        """A block no tensor uses: back to its stream's pool, at once, or once the streams record_stream named have
        done what is queued on them now."""
        free_at = max([self.host] + [self.ready(s) for s in recorded if s.device_index == device and s is not stream])
        with torch._C.DisableTorchFunction():  # the books read the block's size: no operator of the host's program
            self.memory.freed(base, device, stream, free_at)

    def memory_stat(self, kind: str, device: Any = None, peak: bool = False) -> int:
        """Bytes ``allocated`` to tensors (rounded up to 512, as PyTorch's caching allocator rounds them) or
        ``reserved`` by its pools, on ``device``, now or at their peak.

        Example:
            >>> with SimGPU() as gpu:
            ...     x = torch.ones(1000, device="cuda")
            ...     torch.cuda.memory_allocated(), torch.cuda.max_memory_reserved()
            (4096, 4096)
        """
        return self.memory.stat(kind, self.index(device), peak)

    def reset_peak(self, device: Any = None) -> None:
        self.memory.reset_peak(self.index(device))

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: the free blocks go back to the driver (the policy prices their cudaFree)."""
        self.costs.emptying_cache()
        self.memory.empty()

    def pin(self, host: torch.Tensor) -> PinnedTensor:
        """``host`` as page-locked memory: the memory is pinned, whichever tensor reaches it (a view, ``from_numpy``
        of its ``numpy()``, a ``set_`` onto its storage). PyTorch's caching host allocator keeps its block once no
        tensor holds it, for a later pin of the same size (:class:`asynclab.sim.hostmem.PinnedMemory`); a pin it cannot
        serve from there has the driver page-lock a new block, which the host-cost policy prices."""
        fresh = self.pinned.pin(host, self.host)
        if fresh:
            self.costs.host_alloc(fresh)
        return host.as_subclass(PinnedTensor)

    def is_pinned_memory(self, host: torch.Tensor) -> bool:
        """Whether a host tensor's memory is page-locked (:meth:`pin`).

        Example:
            >>> with SimGPU() as gpu:
            ...     chunk = torch.zeros(4).pin_memory()
            ...     alias = torch.from_numpy(chunk.numpy())
            ...     gpu.is_pinned_memory(alias), gpu.is_pinned_memory(torch.zeros(4))
            (True, False)
        """
        return type(host) is PinnedTensor or self.pinned.holds(host)

    # -- operators ------------------------------------------------------------------------------------------------
    def dispatch(self, func: Any, args: tuple, kwargs: dict, flat: list | None = None) -> Any:
        """Run one operator on simulated tensors, where and when a GPU would; the host-cost policy prices its call
        from Python around it. ``flat``: the leaves of ``(args, kwargs)``, where the caller has them already."""
        flat = leaves((args, kwargs)) if flat is None else flat
        started = self.costs.operator_starts(func, args, kwargs, flat)
        self.catch_up()
        out = run_operator(self, func, args, kwargs, flat)
        self.costs.operator_ends(func, started)
        return out

    def made(self, out: Any, device: int, name: str) -> Any:
        """A factory's CPU result ``out`` as GPU memory on ``device``, written by a kernel (or, for data from the host,
        a blocking copy) on the current stream; the host-cost policy prices the factory's call from Python."""
        started = self.costs.factory_starts()
        made = self.place(out, device, name)
        self.costs.factory_ends(name, started)
        return made

    def place(self, out: Any, device: int, name: str) -> Any:
        """A factory's CPU result ``out`` as GPU memory on ``device`` (see :meth:`made`)."""
        if not isinstance(out, torch.Tensor):
            return out
        if name in ("tensor", "as_tensor", "from_numpy"):
            return self.from_host(out, device, non_blocking=False)
        target = self.allocate(out, device)
        if name in _ONLY_ALLOCATE:  # memory, no kernel: what it holds is whatever was there
            return target
        computed = self.computes and not out.is_meta
        ms = max(self.KERNEL_MS, out.numel() * out.element_size() / self.MEMORY_BYTES_PER_MS)  # a kernel writes it
        self.queue(name, self.current(device), ms, lambda: (lambda: target.elem.copy_(out)) if computed else None,
                   writes=(target.elem,))
        return target

    def from_host(self, host: torch.Tensor, device: int, non_blocking: bool, dtype: Any = None) -> DeviceTensor:
        """A copy of ``host`` to GPU ``device`` on its current stream: into new memory allocated there."""
        target = self.allocate(host.to(dtype) if dtype is not None else host, device)
        self.copy(target, host, non_blocking)
        return target

    def to_host(self, src: DeviceTensor, non_blocking: bool, pinned: bool) -> torch.Tensor:
        """A copy of ``src`` into new host memory (pinned when ``pinned``), on the current stream of its GPU."""
        # the layout PyTorch gives a copy: the source's strides where they are dense, else contiguous
        meta = torch.empty_strided(src.shape, src.stride(), dtype=src.dtype, device="meta")
        host = torch.empty_like(meta, device="cpu")
        host.fill_(float("nan") if src.dtype.is_floating_point else -1)  # until the copy writes it (timing only: ever)
        host = self.pin(host) if pinned else host
        fresh = not pinned and host.numel() * host.element_size() >= FRESH_PAGES_FROM  # mapped anew by malloc
        self.copy(host, src, non_blocking, fresh_pages=fresh)
        return host

    def copy(self, dst: torch.Tensor, src: torch.Tensor, non_blocking: bool, fresh_pages: bool = False) -> None:
        """``dst.copy_(src)`` across host and GPUs: on the copy engine of its direction, read when it starts and
        written when it ends; the host waits unless it is non-blocking between a GPU and pinned memory.
        ``fresh_pages``: the copy writes new pageable host memory first (:func:`copy_between`)."""
        copy_between(self, dst, src, non_blocking, fresh_pages)

    def forget_past(self) -> None:
        """Start the trace afresh (after a warm-up run)."""
        self.ran.clear(), self.launches.clear(), self.annotations.clear()
        self.costs.forget_past()

    def trace(self):
        """What ran on the simulated GPUs, the host's launches and its ``record_function`` ranges, as a
        :class:`asynclab.trace.Trace`: a profiler's trace of the same program, in the simulation's times.

        Example:
            >>> with SimGPU() as gpu:
            ...     with torch.profiler.record_function("step"):
            ...         x = torch.zeros(4, device="cuda") + 1
            ...     ev = gpu.trace().events
            >>> sorted(set(ev["kind"]))
            ['annotation', 'compute', 'gpu_annotation', 'launch']
        """
        return trace_of(self.ran, self.launches, self.annotations)

    def __enter__(self) -> "SimGPU":
        super().__enter__()
        # module.cuda() makes new parameters around its GPU tensors (the default would swap a CPU parameter's data for a
        # simulated tensor's, which holds no values)
        self._overwrite = torch.__future__.get_overwrite_module_params_on_conversion()
        torch.__future__.set_overwrite_module_params_on_conversion(True)
        self._placement = _Placement(self)
        self._placement.__enter__()
        self._installed = _install_gpu_patches(self)
        self.costs.enter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.costs.exit(*exc)
        while self._installed:
            self._installed.pop().undo()
        self._placement.__exit__(*exc)
        torch.__future__.set_overwrite_module_params_on_conversion(self._overwrite)
        self.finish()
        self.memory.pools.clear()  # the simulated process ends: its cached memory goes back at once, not at a gc pass
        super().__exit__(*exc)
