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

    Example:
        >>> gpu = SimulatedGPU()
        >>> with gpu:
        ...     import torch
        ...     start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ...     start.record(); gpu.kernel(5.0); end.record(); end.synchronize()
        ...     4.5 < start.elapsed_time(end) < 6.0
        True
    """

    def __init__(self) -> None:
        import time

        self._clock = time.perf_counter
        self.queue_end = 0.0
        super().__init__()

    def _wait_until(self, t: float) -> None:
        import time

        delay = t - self._clock()
        if delay > 0:
            time.sleep(delay)

    def kernel(self, ms: float) -> None:
        self.queue_end = max(self.queue_end, self._clock()) + ms / 1e3

    def synchronize(self, device=None) -> None:
        self._wait_until(self.queue_end)

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

        fakes = {"is_available": lambda: True, "Event": Event, "synchronize": gpu.synchronize,
                 "current_stream": lambda device=None: Stream(), "default_stream": lambda device=None: Stream()}
        self._install(fakes)
        return self


class SimTensor:
    """A tensor of the stream simulator: it knows when its last write finishes and whether its data is right."""

    def __init__(self, ready_at: float, right: bool = True):
        self.ready_at, self.right = ready_at, right

    def record_stream(self, stream: "SimStream") -> None:
        """Accepted, as on a real tensor; the simulator has no allocator to protect."""

    def __repr__(self) -> str:
        return f"SimTensor(ready at {self.ready_at:g} ms, {'right' if self.right else 'stale'} data)"


class SimStream:
    """A simulated CUDA stream: a queue whose work ends at ``ready`` (ms of simulated time)."""

    def __init__(self, sim: "StreamSim", name: str):
        self.sim, self.name, self.ready = sim, name, 0.0

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
        super().__init__()

    def kernel(self, reads: list[SimTensor], ms: float = 1.0) -> SimTensor:
        """Queue a kernel of ``ms`` on the current stream that reads ``reads``; returns what it writes."""
        stream = self.current
        start = max(stream.ready, self.host)
        right = all(t.right and start >= t.ready_at for t in reads)
        stream.ready = start + ms
        return SimTensor(stream.ready, right)

    def __enter__(self) -> "StreamSim":
        import contextlib

        import torch

        sim = self

        def new_stream(device=None, priority=0, **kwargs) -> SimStream:
            stream = SimStream(sim, f"side {len(sim.streams)}")
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
