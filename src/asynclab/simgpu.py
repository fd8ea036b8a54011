"""Simulated GPUs for exercise checkers on machines without one: they check what code does, not what it says."""
from __future__ import annotations

import weakref
from typing import Any, Iterator

from asynclab.simcuda import Simulation, SimulationLimit, Stream, default_stream_of


class SimulatedGPU(Simulation):
    """A wall-clock GPU for timer exercises on machines without one, so that they check what code *does*.

    ``kernel(ms)`` enqueues work on the current stream that "runs" in real time after whatever is queued
    there, and returns at once, as a CUDA launch does. Events record the queue position, ``synchronize``
    sleeps until it, and ``elapsed_time`` raises PyTorch's errors for events without timing or not yet
    completed. ``late_ms`` adds up how much later than asked the host woke from those waits: a busy
    machine's share of a wall-clock reading, which a checker can take off before it judges the timer.

    Example:
        >>> gpu = SimulatedGPU()
        >>> with gpu:
        ...     import torch
        ...     start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ...     start.record(); gpu.kernel(5.0); end.record(); end.synchronize()
        ...     4.5 < start.elapsed_time(end) < 30.0  # 5 ms, plus whatever delayed the host between the calls
        True
    """

    devices = 1
    LOGICAL_CLOCK = False  # the wall clock: a time.sleep really passes

    def __init__(self) -> None:
        import time

        super().__init__()
        self._t0 = time.perf_counter()
        self.late_ms = 0.0
        self._pending: list[float] = []  # when each launch still queued ends

    def now(self) -> float:
        import time

        return (time.perf_counter() - self._t0) * 1e3

    def wait_until(self, t: float, sleep: bool = False) -> None:
        import time

        if t - self.now() > 0:  # the host spins, as in cudaDeviceSynchronize: CPU time passes too, not only wall time;
            while self.now() < t:  # on a blocking event (``sleep``) it sleeps, and only wall time passes
                if sleep:
                    time.sleep(max(0.0, t - self.now()) / 1e3)
            self.late_ms += max(0.0, self.now() - t)

    def reached(self, t: float) -> bool:
        return self.now() >= t  # polling costs real time here, which passes on its own

    @property
    def queue_end(self) -> float:
        """When everything queued on any stream ends, in ms since the simulation began."""
        return max([0.0] + list(self._ready.values()))

    #: Launches a GPU holds before the next launch blocks the host (CUDA's launch queue is about this deep).
    QUEUE_DEPTH = 1024

    def kernel(self, ms: float) -> None:
        """Queue ``ms`` of work on the current stream; with :data:`QUEUE_DEPTH` launches pending, the launch
        waits for the oldest one, as on a GPU (so a timer that launches without ever waiting cannot queue hours)."""
        self._pending = [t for t in self._pending if t > self.now()]
        if len(self._pending) >= self.QUEUE_DEPTH:
            self.wait_until(self._pending.pop(0))
        stream = self.current()
        self.set_ready(stream, max(self.ready(stream), self.now()) + ms)
        self._pending.append(self.ready(stream))

    def idle(self) -> bool:
        """Whether everything queued has run, as ``torch.cuda.current_stream().query()`` says on a GPU."""
        return self.now() >= self.queue_end


def _limit(what: str, instead: str = "") -> SimulationLimit:
    return SimulationLimit(what, instead)


def _to_args(args: tuple, kwargs: dict) -> tuple[Any, bool]:
    """``(device, non_blocking)`` of a ``Tensor.to`` call, as PyTorch parses ``to(device, dtype, non_blocking)``,
    ``to(dtype)`` or keywords (the dtype changes nothing here: a simulated tensor holds numbers)."""
    import torch

    rest = [a for a in args if not isinstance(a, torch.dtype)]
    device = kwargs.get("device", rest[0] if rest and not isinstance(rest[0], bool) else None)
    flags = [a for a in rest if isinstance(a, bool)]
    return device, bool(kwargs.get("non_blocking", flags[0] if flags else False))


class _SimValue:
    """What simulated tensors share: their values as the host reads them, and a clear limit for anything else."""

    values: list | None
    stands_for = "Tensor"  # what error messages call it (asynclab.events.a_type)

    def _host_values(self) -> list:
        raise NotImplementedError

    def tolist(self) -> list:
        return list(self._host_values())

    def item(self) -> float:
        values = self._host_values()
        if len(values) != 1:
            raise RuntimeError(f"a Tensor with {len(values)} elements cannot be converted to Scalar")
        return values[0]

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def numpy(self) -> Any:
        import numpy as np

        if getattr(self, "is_cuda", False):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                            "to host memory first.")
        return np.array(self._host_values())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:  # np.asarray shares memory, np.array copies
        array = self.numpy().copy() if copy else self.numpy()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __len__(self) -> int:
        return len(self.values or [])

    @property
    def shape(self) -> Any:
        import torch

        return torch.Size([len(self)])

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    @property
    def data(self) -> "_SimValue":
        """The same memory as a tensor outside autograd, as ``Tensor.data`` gives."""
        return self.detach()

    def detach(self) -> "_SimValue":
        """A new tensor object on the same memory, as ``Tensor.detach`` gives: the memory stays allocated while
        either object lives."""
        import copy

        twin = copy.copy(self)
        twin._memory = self  # holds the original, whose finalizer frees the memory
        return twin

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise _limit(f"tensor.{name}")

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        import torch

        kwargs = kwargs or {}
        if func is torch.empty_like and args and isinstance(args[0], SimHostTensor) and "cuda" in str(kwargs.get("device")):
            return args[0].sim.allocate(len(args[0]))
        parts = list(args[0]) if args and isinstance(args[0], (list, tuple)) else []
        if func in (torch.stack, torch.cat) and parts and all(isinstance(t, SimTensor) and t.sim for t in parts):
            # one kernel on the current stream that reads every part, as on a GPU
            return parts[0].sim.kernel(parts, ms=0.01, values=[v for t in parts for v in (t.values or [])])
        raise _limit(f"{getattr(func, '__module__', None) or 'torch'}.{getattr(func, '__name__', func)}(...) on a "
                     "simulated tensor".replace("torch._C._TensorBase", "Tensor").replace("torch._tensor", "Tensor"))


class SimTensor(_SimValue):
    """A tensor on a simulated GPU: it knows when its last write finishes and whether its data is right.

    Its memory belongs to the stream that made it, as in PyTorch's caching allocator: once the tensor
    is freed, that stream's next allocation reuses the memory at once, even while a kernel queued on
    another stream still reads it, unless ``record_stream`` told the allocator about that stream.
    Reading it on the host (``tolist``, ``item``, ``float``, ``cpu``) waits for its last write.
    """

    is_cuda = True

    def __init__(self, sim: "StreamSim | None", ready_at: float, right: bool = True, values: list | None = None,
                 stream: Stream | None = None, device: int | None = None):
        self.sim, self.ready_at, self.right, self.values, self.stream = sim, ready_at, right, values, stream
        self.device_index = device if device is not None else (0 if stream is None else stream.device_index)
        self.recorded: set[int] = set()  # ids of the streams record_stream named
        # the uses on other streams the allocator does not know about: (until when, results they make); and every
        # read of its memory by a kernel (end, result), which a write from another stream after a reuse spoils
        self.unguarded = {"until": 0.0, "results": [], "reads": []}
        self.before: list = []  # the reads of whoever had this memory before (a block reused by allocate())
        if stream is not None and sim is not None:
            weakref.finalize(self, sim._freed, stream, self.unguarded)

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", self.device_index)

    def record_stream(self, stream: Stream) -> None:
        """Tell the allocator that ``stream`` uses this tensor: its memory waits for that stream's work."""
        self.recorded.add(id(stream))

    def _host_values(self) -> list:
        """A blocking copy to the host, queued on the current stream of the tensor's GPU: the host waits for that
        stream to reach it, and the copy reads the tensor then. A stream that has not waited for the tensor's
        writer reads what its memory held before (NaN here), and the host does not wait for the writer."""
        if self.sim is None:
            return list(self.values or [])
        at = max(self.sim.ready(self.sim.current(self.device_index)), self.sim.host)
        self.sim.wait_until(at)
        return list(self.values or []) if at >= self.ready_at else [float("nan")] * len(self)

    def __iter__(self) -> Iterator["SimTensor"]:
        for v in self.values or []:
            yield SimTensor(self.sim, self.ready_at, self.right, [v])

    def to(self, *args: Any, **kwargs: Any) -> Any:
        device, non_blocking = _to_args(args, kwargs)
        if "cpu" in str(device):
            return self._to_host(non_blocking)
        if device is None or "cuda" in str(device):
            return self
        raise _limit(f"tensor.to({device!r})")

    def cpu(self, memory_format: Any = None) -> "SimHostTensor":  # takes no non_blocking, as in PyTorch
        return self._to_host(False)

    def __getitem__(self, i: Any) -> "SimTensor":
        """An element or a slice: a view, written when this tensor is."""
        if self.values is None:  # a tensor whose numbers the check does not follow
            values = None if isinstance(i, slice) else [float("nan")]
        else:
            values = self.values[i] if isinstance(i, slice) else [self.values[i]]
        view = SimTensor(self.sim, self.ready_at, self.right, values, device=self.device_index)
        view._memory = self
        return view

    def cuda(self, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> "SimTensor":
        return self

    def _to_host(self, non_blocking: bool) -> "SimHostTensor":
        """A D2H copy into new host memory (pinned when non_blocking, as PyTorch allocates it)."""
        if self.sim is None:
            raise _limit("copying this tensor to the host")
        out = SimHostTensor(self.sim, copy_ms=0.01, pinned=non_blocking, values=[float("nan")] * len(self))
        return out.copy_(self, non_blocking=non_blocking)

    def copy_(self, src: Any, non_blocking: bool = False) -> "SimTensor":
        """Copy a host tensor into this one (H2D) on the current stream; the data is there when the copy ends.

        The memory may be reused from a tensor that the allocating stream's kernels still read: a copy into it on
        another stream, started before those kernels end, spoils their results (the allocator only orders reuse on
        the allocating stream).
        """
        if not isinstance(src, SimHostTensor) or self.sim is None:
            raise _limit("tensor.copy_ from this source")
        self.ready_at = self.sim.h2d(src, non_blocking)
        reused = self.before if self.stream is not None and self.sim.current() is not self.stream else []
        for end, ref in reused + self.unguarded["reads"]:  # a kernel still reading this memory reads the new data
            if end > self.sim.last_copy_start and ref() is not None:
                ref().right = False
        self.values, self.right = src._host_values(), True
        return self

    def __repr__(self) -> str:  # printing a GPU tensor reads it on the host
        values = self._host_values()
        return f"tensor({values[0] if len(values) == 1 else values}, device='cuda:{self.device_index}')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec) if spec else repr(self)


class SimHostTensor(_SimValue):
    """A host tensor of the stream simulator, pageable or pinned, whose copy to the GPU takes ``copy_ms``.

    ``.to("cuda", non_blocking=...)`` (or ``.cuda(...)``) queues the copy on the current stream. As on a
    GPU, the host returns at once only for a pinned tensor with ``non_blocking=True``; otherwise it waits
    until the copy is done. ``pin_memory()`` costs the host ``copy_ms``. ``values`` is what a reader sees;
    ``copy_(gpu_tensor, non_blocking=...)`` brings a GPU tensor's values back (they land when the copy ends).
    """

    is_cuda = False

    def __init__(self, sim: "StreamSim", copy_ms: float = 1.0, pinned: bool = False, values: list | None = None):
        self.sim, self.copy_ms, self.pinned, self.values = sim, copy_ms, pinned, values
        self._landing: tuple[float, list | None] | None = None  # (when, values) of a copy still on its way
        self._array: Any = None  # the numpy array numpy() handed out: a view of this memory, as on a GPU's host

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cpu")

    def is_pinned(self) -> bool:
        return self.pinned

    def pin_memory(self, device: Any = None) -> "SimHostTensor":
        self.sim.host += self.copy_ms  # a copy into page-locked memory, on the host
        return SimHostTensor(self.sim, self.copy_ms, True, self._host_values())

    def to(self, *args: Any, **kwargs: Any) -> Any:
        device, non_blocking = _to_args(args, kwargs)
        if device is None or "cpu" in str(device):
            return self
        if "cuda" not in str(device):
            raise _limit(f"tensor.to({device!r})")
        return self.sim.copy(self, non_blocking)

    def cuda(self, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> "SimTensor":
        return self.sim.copy(self, non_blocking)

    def cpu(self, memory_format: Any = None) -> "SimHostTensor":
        return self

    def clone(self, **kwargs: Any) -> "SimHostTensor":
        """A copy in new, pageable memory (as in PyTorch, a clone of pinned memory is not pinned), made by the host:
        it costs the host ``copy_ms``, as ``pin_memory()`` does."""
        self.sim.host += self.copy_ms
        return SimHostTensor(self.sim, self.copy_ms, False, self._host_values())

    def copy_(self, src: Any, non_blocking: bool = False) -> "SimHostTensor":
        """Copy a GPU tensor back into this one, on the current stream (D2H)."""
        if not isinstance(src, SimTensor):
            raise _limit("host_tensor.copy_ from a source other than a simulated GPU tensor")
        end = self.sim.queue_copy(self.copy_ms, "Memcpy DtoH (Device -> Pinned)" if self.pinned
                                  else "Memcpy DtoH (Device -> Pageable)", host_waits=not (non_blocking and self.pinned))
        # a copy that starts before src is written (on another stream, with no wait) brings back what was there
        ok = self.sim.last_copy_start >= src.ready_at and src.right
        self._landing = (end, list(src.values or []) if ok else self.values)
        return self

    def _host_values(self) -> list:
        """What the host reads now: the copied values only if their copy has finished."""
        if self._landing is not None and self.sim.now() >= self._landing[0]:
            self.values, self._landing = self._landing[1], None
            if self._array is not None and len(self.values or []) == len(self._array):
                self._array[:] = self.values  # the array numpy() gave shares this memory: it shows the copy too
        return list(self.values or [])

    def numpy(self) -> Any:
        """A numpy array that shares this tensor's memory, as ``Tensor.numpy()`` does: a copy that lands later
        shows in it (without the host reading the tensor again)."""
        if self._array is None:
            import numpy as np

            self._array = np.array(self._host_values())
            if self.sim.LOGICAL_CLOCK:
                self.sim.watch_host(self._host_values)
        return self._array

    def __iter__(self) -> Iterator["SimHostScalar"]:
        return iter([SimHostScalar(v) for v in self._host_values()])  # 0-d tensors, as iterating a tensor gives

    def __getitem__(self, i: Any) -> Any:
        values = self._host_values()[i]
        return [SimHostScalar(v) for v in values] if isinstance(i, slice) else SimHostScalar(values)

    def __setitem__(self, i: Any, src: Any) -> None:
        """``out[:] = gpu_tensor``: a blocking copy of the whole tensor into this one."""
        if i not in (slice(None), Ellipsis) or not isinstance(src, SimTensor):
            raise _limit("assigning to part of a host tensor", "copy the whole tensor with out.copy_(gpu_tensor) "
                                                               "or out[:] = gpu_tensor")
        self.copy_(src)

    def __repr__(self) -> str:  # what the host holds now (no wait: it is host memory)
        return f"tensor({self._host_values()})"


class SimHostScalar(_SimValue):
    """One element of a host tensor, as iterating or indexing it gives: a 0-d tensor, not a Python number."""

    is_cuda = False

    def __init__(self, value: float):
        self.values = [value]

    def _host_values(self) -> list:
        return list(self.values)

    def __repr__(self) -> str:
        return f"tensor({self.values[0]})"


class StreamSim(Simulation):
    """A logical-time model of one GPU's streams, for checkers on machines without a GPU.

    Work queued on a stream starts when everything before it on that stream is done (and after any
    stream or event it was told to wait for), exactly as on a GPU; different streams run side by side.
    A kernel that reads a :class:`SimTensor` before its last write has finished reads stale data.
    Learner code uses the real API names (``torch.cuda.Stream()``, ``torch.cuda.stream(s)``,
    ``torch.cuda.current_stream()``, ``wait_stream``, ``Event``) and the checker's kernels.

    Example:
        >>> with StreamSim() as sim:
        ...     import torch
        ...     x = sim.kernel([], ms=20)           # a late producer on the default stream
        ...     side = torch.cuda.Stream()
        ...     with torch.cuda.stream(side):
        ...         y = sim.kernel([x], ms=1)       # no wait_stream: reads x during the spin
        ...     y.right
        False
    """

    devices = 1

    def __init__(self) -> None:
        super().__init__()
        self.copy_engine = 0.0  # when the (one) copy engine is free again
        self.last_copy_start = 0.0
        self.free_blocks: list[tuple[Stream, dict]] = []  # freed memory, with the unguarded uses it still has
        self.ran: list[tuple[str, str, int, float, float]] = []  # (kind, name, stream, start, end) of all GPU work

    @property
    def default(self) -> Stream:
        """GPU 0's default stream."""
        return default_stream_of(0)

    def kernel(self, reads: list, ms: float = 1.0, values: list | None = None) -> SimTensor:
        """Queue a kernel of ``ms`` on the current stream that reads ``reads``; returns what it writes."""
        if any(not getattr(t, "is_cuda", False) for t in reads):
            raise TypeError("a GPU kernel reads tensors on the GPU: copy host tensors there first, with .to('cuda')")
        stream = self.current()
        start = max(self.ready(stream), self.host)
        right = all(t.right and start >= t.ready_at for t in reads)
        self.set_ready(stream, start + ms)
        self.ran.append(("kernel", "kernel", self.number(stream), start, start + ms))
        out = SimTensor(self, start + ms, right, values, stream=stream)
        self._allocated(stream, start)
        for t in reads:
            t.unguarded["reads"].append((start + ms, weakref.ref(out)))
            if t.stream is not None and t.stream is not stream and id(stream) not in t.recorded:
                t.unguarded["until"] = max(t.unguarded["until"], start + ms)
                t.unguarded["results"].append(weakref.ref(out))  # a result freed since needs no marking
        return out

    def _freed(self, stream: Stream, unguarded: dict) -> None:
        self.free_blocks.append((stream, unguarded))

    def _allocated(self, stream: Stream, start: float) -> list:
        """New memory on ``stream``, written from ``start``: a freed block of that stream is reused, and a kernel
        on another stream still reading it (no record_stream) reads the new data: its result is wrong.
        Returns the reads of the block's previous tensor ([] for fresh memory)."""
        for i, (owner, unguarded) in enumerate(self.free_blocks):
            if owner is stream:
                del self.free_blocks[i]
                if unguarded["until"] > start:
                    for ref in unguarded["results"]:
                        if ref() is not None:
                            ref().right = False
                return unguarded["reads"]
        return []

    def queue_copy(self, ms: float, name: str, host_waits: bool) -> float:
        """Queue a copy of ``ms`` on the current stream and the copy engine; returns when it ends."""
        stream = self.current()
        start = max(self.ready(stream), self.host, self.copy_engine)
        self.copy_engine = start + ms
        self.set_ready(stream, start + ms)
        self.ran.append(("gpu_memcpy", name, self.number(stream), start, start + ms))
        if host_waits:
            self.host = start + ms
        self.last_copy_start = start
        return start + ms

    def allocate(self, n: int) -> SimTensor:
        """New GPU memory of ``n`` elements on the current stream (``torch.empty_like(host, device="cuda")``)."""
        stream = self.current()
        before = self._allocated(stream, max(self.ready(stream), self.host))
        out = SimTensor(self, 0.0, True, [float("nan")] * n, stream=stream)
        out.before = before
        return out

    def h2d(self, src: SimHostTensor, non_blocking: bool) -> float:
        """Queue ``src``'s copy to the GPU; the host waits unless the source is pinned and the copy non-blocking."""
        name = "Memcpy HtoD (Pinned -> Device)" if src.pinned else "Memcpy HtoD (Pageable -> Device)"
        return self.queue_copy(src.copy_ms, name, host_waits=not (non_blocking and src.pinned))

    def copy(self, src: SimHostTensor, non_blocking: bool) -> SimTensor:
        """``src.to("cuda", non_blocking=...)``: new GPU memory on the current stream, written by the copy."""
        end = self.h2d(src, non_blocking)
        self._allocated(self.current(), self.last_copy_start)
        return SimTensor(self, end, True, src._host_values(), stream=self.current())

    def trace(self):
        """What ran on the simulated GPU as a :class:`asynclab.trace.Trace` (one device, the streams' numbers).

        Example:
            >>> with StreamSim() as sim:
            ...     x = SimHostTensor(sim, copy_ms=2.0, pinned=True).to("cuda", non_blocking=True)
            ...     y = sim.kernel([x], ms=1.0)
            >>> sim.trace().lanes()
            ['GPU 0 · stream 7 (default)']
        """
        return trace_of([(cat, name, 0, stream, start, end) for cat, name, stream, start, end in self.ran],
                        "nothing ran on the simulated GPU")


def trace_of(ran: list[tuple[str, str, int, int, float, float]], empty: str):
    """A Trace of simulated work: rows of (category, name, device, stream, start ms, end ms)."""
    from asynclab.trace import load_trace

    if not ran:
        raise ValueError(empty)
    events = [{"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": stream, "ts": start * 1e3,
               "dur": (end - start) * 1e3,
               "args": {"device": dev, "stream": stream, **({"fromDevice": 0, "toDevice": 1} if "PtoP" in name else {})}}
              for cat, name, dev, stream, start, end in ran]
    return load_trace({"traceEvents": events})
