"""Simulated GPUs for exercise checkers on machines without one: they check what code does, not what it says."""
from __future__ import annotations


class _StandsInForCuda:
    """Puts fake ``torch.cuda`` functions in place on entry and the real ones back on exit."""

    def __init__(self) -> None:
        self._saved: dict[str, object] = {}

    def _install(self, fakes: dict[str, object]) -> None:
        import torch

        for name, fake in fakes.items():
            self._saved[name] = getattr(torch.cuda, name)
            setattr(torch.cuda, name, fake)

    def __exit__(self, *exc) -> None:
        import torch

        for name, original in self._saved.items():
            setattr(torch.cuda, name, original)
        self._saved.clear()


class SimulatedGPU(_StandsInForCuda):
    """A stand-in for ``torch.cuda`` on machines without a GPU, so that timer exercises check what code *does*.

    ``kernel(ms)`` enqueues work that "runs" in real time after whatever is queued, and returns at once,
    as a CUDA launch does. Events record the queue position, ``synchronize`` waits for it, and
    ``elapsed_time`` raises PyTorch's errors for events without timing or not yet completed.
    ``late_ms`` adds up how much later than asked the host woke from those waits: a busy machine's
    share of a wall-clock reading, which a checker can take off before it judges the timer.

    Example:
        >>> gpu = SimulatedGPU()
        >>> with gpu:
        ...     import torch
        ...     start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ...     start.record(); gpu.kernel(5.0); end.record(); end.synchronize()
        ...     4.5 < start.elapsed_time(end) < 30.0  # 5 ms, plus whatever delayed the host between the calls
        True
    """

    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self.queue_end = 0.0
        self.late_ms = 0.0
        super().__init__()

    def _wait_until(self, t: float) -> None:
        import time

        delay = t - self._clock()
        if delay > 0:
            time.sleep(delay)
            self.late_ms += max(0.0, self._clock() - t) * 1e3

    def kernel(self, ms: float) -> None:
        self.queue_end = max(self.queue_end, self._clock()) + ms / 1e3

    def synchronize(self, device=None) -> None:
        self._wait_until(self.queue_end)

    def idle(self) -> bool:
        """Whether everything queued has run, as ``torch.cuda.current_stream().query()`` says on a GPU."""
        return self._clock() >= self.queue_end

    def __enter__(self) -> "SimulatedGPU":
        import torch

        gpu = self

        class Event:
            def __init__(self, enable_timing=False, blocking=False, interprocess=False):
                self.enable_timing, self.time = enable_timing, None

            def record(self, stream=None):
                self.time = max(gpu.queue_end, gpu._clock())

            def query(self):
                return self.time is not None and gpu._clock() >= self.time

            def synchronize(self):
                if self.time is not None:
                    gpu._wait_until(self.time)

            def wait(self, stream=None):
                pass

            def elapsed_time(self, end):
                if not (self.enable_timing and end.enable_timing):
                    raise ValueError("Both events must be created with argument 'enable_timing=True'.")
                if not (self.query() and end.query()):
                    raise RuntimeError("Both events must be completed before calculating elapsed time.")
                return (end.time - self.time) * 1e3

        class Stream:
            def synchronize(self):
                gpu.synchronize()

            def query(self):
                return gpu.idle()

        fakes = {"is_available": lambda: True, "Event": Event, "synchronize": gpu.synchronize,
                 "current_stream": lambda device=None: Stream(), "default_stream": lambda device=None: Stream()}
        self._install(fakes)
        return self


class SimTensor:
    """A tensor of the stream simulator: it knows when its last write finishes and whether its data is right.

    Its memory belongs to the stream that made it, as in PyTorch's caching allocator: once the tensor
    is freed, that stream's next allocation reuses the memory at once, even while a kernel queued on
    another stream still reads it, unless ``record_stream`` told the allocator about that stream.
    """

    is_cuda = True

    def __init__(self, ready_at: float, right: bool = True, values: list | None = None, stream: "SimStream | None" = None):
        self.ready_at, self.right, self.values, self.stream = ready_at, right, values, stream
        self.recorded: set[int] = set()  # ids of the streams record_stream named
        # the uses on other streams the allocator does not know about: (until when, results they make)
        self.unguarded = {"until": 0.0, "results": []}
        if stream is not None:
            import weakref

            weakref.finalize(self, stream.sim._freed, stream, self.unguarded)

    def record_stream(self, stream: "SimStream") -> None:
        """Tell the allocator that ``stream`` uses this tensor: its memory waits for that stream's work."""
        self.recorded.add(id(stream))

    def tolist(self) -> list:
        """A blocking copy to the host: the host waits until the tensor is written, then reads its values."""
        if self.stream is not None:
            self.stream.sim.host = max(self.stream.sim.host, self.ready_at)
        return list(self.values or [])

    def __repr__(self) -> str:
        return f"SimTensor(ready at {self.ready_at:g} ms, {'right' if self.right else 'stale'} data)"


class SimStream:
    """A simulated CUDA stream: a queue whose work ends at ``ready`` (ms of simulated time)."""

    def __init__(self, sim: "StreamSim", name: str, number: int = 7):
        self.sim, self.name, self.ready, self.number = sim, name, 0.0, number

    def wait_stream(self, other: "SimStream") -> None:
        self.ready = max(self.ready, other.ready)

    def wait_event(self, event: "SimEvent") -> None:
        self.ready = max(self.ready, event.time)

    def record_event(self, event: "SimEvent | None" = None) -> "SimEvent":
        event = event or SimEvent(self.sim)
        event.record(self)
        return event

    def synchronize(self) -> None:
        self.sim.host = max(self.sim.host, self.ready)

    def query(self) -> bool:
        done = self.sim.host >= self.ready
        if not done:
            self.sim.host += StreamSim.POLL_MS  # polling costs the host time, as on a GPU
        return done

    def __repr__(self) -> str:
        return f"<simulated stream {self.name}>"


class SimEvent:
    """A simulated CUDA event: a point in one stream's queue."""

    def __init__(self, sim: "StreamSim", *args, **kwargs):
        self.sim, self.time = sim, 0.0

    def record(self, stream: SimStream | None = None) -> None:
        self.time = (stream or self.sim.current).ready

    def wait(self, stream: SimStream | None = None) -> None:
        (stream or self.sim.current).wait_event(self)

    def query(self) -> bool:
        """True once the host's time has reached the event. Each call costs the host a polling step of
        simulated time, so a loop that polls until True ends, having made the host wait."""
        done = self.sim.host >= self.time
        if not done:
            self.sim.host += StreamSim.POLL_MS
        return done

    def synchronize(self) -> None:
        """The host waits for the event."""
        self.sim.host = max(self.sim.host, self.time)


class SimHostTensor:
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

    def is_pinned(self) -> bool:
        return self.pinned

    def pin_memory(self, device=None) -> "SimHostTensor":
        self.sim.host += self.copy_ms  # a copy into page-locked memory, on the host
        return SimHostTensor(self.sim, self.copy_ms, True, self.values)

    def to(self, device=None, non_blocking: bool = False, **kwargs) -> "SimTensor":
        if "cuda" not in str(device):
            raise TypeError(f"the simulated GPU copies host tensors to 'cuda' only, not to {device!r}")
        return self.sim.copy(self, non_blocking)

    def cuda(self, device=None, non_blocking: bool = False, **kwargs) -> "SimTensor":
        return self.sim.copy(self, non_blocking)

    def copy_(self, src: "SimTensor", non_blocking: bool = False) -> "SimHostTensor":
        """Copy a GPU tensor back into this one, on the current stream (D2H)."""
        if not getattr(src, "is_cuda", False):
            raise TypeError("copy_() here takes a tensor on the GPU")
        end = self.sim.queue_copy(self.copy_ms, "Memcpy DtoH (Device -> Pinned)" if self.pinned
                                  else "Memcpy DtoH (Device -> Pageable)", host_waits=not (non_blocking and self.pinned))
        # a copy that starts before src is written (on another stream, with no wait) brings back what was there
        self._landing = (end, src.values if self.sim.last_copy_start >= src.ready_at and src.right else self.values)
        return self

    def _now(self) -> list | None:
        if self._landing is not None and self.sim.host >= self._landing[0]:
            self.values, self._landing = self._landing[1], None
        return self.values

    def tolist(self) -> list | None:
        """What the host reads now: the copied values only if their copy has finished."""
        return list(self._now() or [])

    def __repr__(self) -> str:
        return f"SimHostTensor({'pinned' if self.pinned else 'pageable'}, copy {self.copy_ms:g} ms)"


class StreamSim(_StandsInForCuda):
    """A logical-time model of CUDA streams, standing in for ``torch.cuda`` in checkers on machines without a GPU.

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

    #: Simulated host time one ``query()`` that says False costs (a polling loop's step).
    POLL_MS = 0.5

    def __init__(self) -> None:
        self.default = SimStream(self, "default")
        self.current = self.default
        self.host = 0.0
        self.streams = [self.default]
        self.copy_engine = 0.0  # when the (one) copy engine is free again
        self.free_blocks: list[tuple["SimStream", dict]] = []  # freed memory, with the unguarded uses it still has
        self.ran: list[tuple[str, str, int, float, float]] = []  # (kind, name, stream, start, end) of all GPU work
        super().__init__()

    def kernel(self, reads: list[SimTensor], ms: float = 1.0, values: list | None = None) -> SimTensor:
        """Queue a kernel of ``ms`` on the current stream that reads ``reads``; returns what it writes."""
        if any(not getattr(t, "is_cuda", False) for t in reads):
            raise TypeError("a GPU kernel reads tensors on the GPU: copy host tensors there first, with .to('cuda')")
        stream = self.current
        start = max(stream.ready, self.host)
        right = all(t.right and start >= t.ready_at for t in reads)
        stream.ready = start + ms
        self.ran.append(("kernel", "kernel", stream.number, start, stream.ready))
        out = SimTensor(stream.ready, right, values, stream=stream)
        self._allocated(stream, start)
        for t in reads:
            if t.stream is not None and t.stream is not stream and id(stream) not in t.recorded:
                t.unguarded["until"] = max(t.unguarded["until"], stream.ready)
                t.unguarded["results"].append(out)
        return out

    def _freed(self, stream: "SimStream", unguarded: dict) -> None:
        self.free_blocks.append((stream, unguarded))

    def _allocated(self, stream: "SimStream", start: float) -> None:
        """New memory on ``stream``, written from ``start``: a freed block of that stream is reused, and a kernel
        on another stream still reading it (no record_stream) reads the new data: its result is wrong."""
        for i, (owner, unguarded) in enumerate(self.free_blocks):
            if owner is stream:
                del self.free_blocks[i]
                if unguarded["until"] > start:
                    for result in unguarded["results"]:
                        result.right = False
                return

    def queue_copy(self, ms: float, name: str, host_waits: bool) -> float:
        """Queue a copy of ``ms`` on the current stream and the copy engine; returns when it ends."""
        stream = self.current
        start = max(stream.ready, self.host, self.copy_engine)
        stream.ready = self.copy_engine = start + ms
        self.ran.append(("gpu_memcpy", name, stream.number, start, stream.ready))
        if host_waits:
            self.host = stream.ready
        self.last_copy_start = start
        return stream.ready

    def copy(self, src: SimHostTensor, non_blocking: bool) -> SimTensor:
        """``src.to("cuda", non_blocking=...)``: the host waits unless the source is pinned and the copy non-blocking."""
        name = "Memcpy HtoD (Pinned -> Device)" if src.pinned else "Memcpy HtoD (Pageable -> Device)"
        end = self.queue_copy(src.copy_ms, name, host_waits=not (non_blocking and src.pinned))
        self._allocated(self.current, self.last_copy_start)
        return SimTensor(end, True, src.values, stream=self.current)

    def trace(self):
        """What ran on the simulated GPU as a :class:`asynclab.trace.Trace` (one device, the streams' numbers).

        Example:
            >>> with StreamSim() as sim:
            ...     x = SimHostTensor(sim, copy_ms=2.0, pinned=True).to("cuda", non_blocking=True)
            ...     y = sim.kernel([x], ms=1.0)
            >>> sim.trace().lanes()
            ['GPU 0 · stream 7 (default)']
        """
        from asynclab.trace import load_trace

        if not self.ran:
            raise ValueError("nothing ran on the simulated GPU")
        events = [{"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": start * 1e3,
                   "dur": (end - start) * 1e3, "args": {"device": 0, "stream": stream}}
                  for cat, name, stream, start, end in self.ran]
        return load_trace({"traceEvents": events})

    def __enter__(self) -> "StreamSim":
        import contextlib

        import torch

        sim = self

        def new_stream(device=None, priority=0, **kwargs) -> SimStream:
            stream = SimStream(sim, f"side {len(sim.streams)}", number=9 + 4 * len(sim.streams))
            sim.streams.append(stream)
            return stream

        @contextlib.contextmanager
        def use(stream: SimStream | None):
            before = sim.current
            sim.current = stream or before
            try:
                yield stream
            finally:
                sim.current = before

        def synchronize(device=None) -> None:
            sim.host = max([sim.host] + [s.ready for s in sim.streams])

        fakes = {"is_available": lambda: True, "Stream": new_stream, "stream": use,
                 "current_stream": lambda device=None: sim.current, "default_stream": lambda device=None: sim.default,
                 "Event": lambda *a, **k: SimEvent(sim, *a, **k), "synchronize": synchronize}
        self._install(fakes)
        return self
