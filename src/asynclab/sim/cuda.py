"""Stand-ins for torch.cuda's streams, events and devices without a GPU, bound to whichever simulation is running.

A notebook without a GPU calls :func:`asynclab.sim.simulation.stand_in_for_cuda` (``al.start`` does), so that learner
code such as ``side = torch.cuda.Stream()`` runs in any cell, at any time. The objects here are handles: a
stream or an event has no state of its own. Its state (when its queued work ends, when it was
recorded) lives in the simulation that is running when it is used (:func:`asynclab.sim.running.active`), so a stream
made in an earlier cell, or in an earlier check, starts every check idle, exactly as a real stream that has finished
its work. What a real session keeps, the simulations share (:data:`asynclab.sim.running.RUNNING`): the current stream
of each GPU and the current device, per thread as CUDA keeps them, and the device an event belongs to. Their
installation in torch is :mod:`asynclab.sim.install`; the state they read, :class:`asynclab.sim.simulation.Simulation`.
"""
from __future__ import annotations

from typing import Any

from asynclab.sim.figures import card_figures, rates
from asynclab.sim.limits import SimulationLimit, unknown_attribute
from asynclab.sim.running import RUNNING, active



def device_index(device: Any, current: int = 0) -> int:
    """A device given as None, 1, "cuda", "cuda:1" or torch.device("cuda", 1), as its index.

    Example:
        >>> device_index("cuda:1"), device_index(None, current=1), device_index(0)
        (1, 1, 0)
    """
    if device is None:
        return current
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, Stream):
        return device.device_index
    text = str(device)
    if text == "cuda":
        index = None if isinstance(device, str) else getattr(device, "index", None)
        return current if index is None else int(index)
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    if text == "cpu" or text.startswith("cpu:"):  # as torch.cuda's functions refuse it
        raise ValueError(f"Expected a cuda device, but got: {text}")
    raise SimulationLimit(f"the device {device!r}", "the simulated GPUs are 'cuda:0' and 'cuda:1'")



#: What ``torch.cuda.Stream.priority_range()`` gives on an NVIDIA H100 with PyTorch 2.11.
PRIORITY_RANGE = (0, -3)
#: PyTorch's stream pools (c10/cuda/CUDAStream.cpp): one per device and priority (0, -1, -2, -3), each of
#: ``STREAMS_PER_POOL`` streams that ``torch.cuda.Stream()`` hands out round-robin, counted per process.
STREAM_POOLS, STREAMS_PER_POOL = 4, 32


class Stream:
    """A stand-in for ``torch.cuda.Stream``: a handle whose queue lives in the running simulation.

    Example:
        >>> from asynclab.sim.simulation import Simulation
        >>> with Simulation() as sim:
        ...     side = Stream()
        ...     sim.set_ready(side, 5.0)   # work queued on it until 5 ms
        ...     side.query()
        False

    """

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        sim = active()
        self.device_index = sim.index(device)
        self.priority = priority
        self.is_default = False
        self.pool = (self.device_index, min(max(-int(priority), 0), STREAM_POOLS - 1))
        self.slot = sim.pool_slot(self.pool)

    def _key(self) -> tuple:
        """Which CUDA stream this handle is: PyTorch hands out the streams of a pool round-robin, so two handles
        can be one stream."""
        return ("default", self.device_index) if self.is_default else (*self.pool, self.slot)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Stream) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", self.device_index)

    @property
    def stream_id(self) -> int:
        return active().number(self)

    cuda_stream = stream_id

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(lowest, highest) stream priority, as PyTorch reports it for a GPU (lower numbers are more urgent)."""
        return PRIORITY_RANGE

    def wait_stream(self, stream: "Stream") -> None:
        sim, other = active(), as_stream(stream, "record_event")
        sim.stream_call("wait_stream")
        if not sim.captured(("wait_stream", self, other)):
            sim.set_ready(self, max(sim.ready(self), sim.ready(other)))

    def wait_event(self, event: "Event") -> None:
        sim, at = active(), active().recorded(as_event(event, "wait"))
        sim.stream_call("wait_event")
        if sim.captured(("wait_event", self, event)):
            return
        if at is not None:
            sim.set_ready(self, max(sim.ready(self), at))

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event if event is not None else Event()
        as_event(event, "record").record(self)
        return event

    def synchronize(self) -> None:
        sim = active()
        sim.sync_report()  # cudaStreamSynchronize, as PyTorch's sync debug mode reports it
        sim.host_sync("cudaStreamSynchronize", sim.ready(self))

    def query(self) -> bool:
        sim = active()
        return sim.reached(sim.ready(self))

    def __enter__(self) -> "Stream":  # `with stream:` makes it current, as torch.Stream does
        self._contexts = getattr(self, "_contexts", []) + [StreamContext(self)]
        self._contexts[-1].__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._contexts.pop().__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        import torch.cuda.streams

        raise unknown_attribute(torch.cuda.streams.Stream, "stream", name, "write it with wait_stream, wait_event, "
                                "record_event, synchronize or query")

    def __repr__(self) -> str:
        kind = "default stream" if self.is_default else "stream"
        return f"<simulated {kind} of GPU {self.device_index}>"



def default_stream_of(index: int) -> Stream:
    """The one default-stream handle of GPU ``index`` (the same object in every simulation)."""
    if index not in RUNNING.defaults:
        stream = Stream.__new__(Stream)
        stream.device_index, stream.priority, stream.is_default = index, 0, True
        RUNNING.defaults[index] = stream
    return RUNNING.defaults[index]


def as_stream(stream: Any, needs: str | None = None) -> Stream:
    """``stream`` as a simulated stream. A stream of another kind is the simulation's limit; anything else fails as
    it does on a GPU: where PyTorch reads attribute ``needs`` of it, an AttributeError, else the binding's TypeError
    (``side.wait_stream(torch.cuda.current_stream)``, without the call, is the learner's mistake on a GPU too)."""
    if isinstance(stream, Stream):
        return stream
    if "Stream" in type(stream).__name__:
        raise SimulationLimit(f"a stream of type {type(stream).__name__}", "pass a stream made by torch.cuda.Stream(), "
                                                                         "current_stream() or default_stream()")
    raise _not_a(stream, "a torch.cuda.Stream", needs)



def as_event(event: Any, needs: str | None = None) -> "Event":
    """``event`` as a simulated event; other kinds of events are the simulation's limit, anything else fails as on
    a GPU (see :func:`as_stream`)."""
    if isinstance(event, Event):
        return event
    if "Event" in type(event).__name__:
        raise SimulationLimit(f"an event of type {type(event).__name__}", "pass an event made by torch.cuda.Event()")
    raise _not_a(event, "a torch.cuda.Event", needs)



def _not_a(value: Any, what: str, needs: str | None) -> Exception:
    if needs is not None:
        return AttributeError(f"'{type(value).__name__}' object has no attribute '{needs}'")
    return TypeError(f"incompatible function arguments: expected {what}, got {type(value).__name__}")



class Event:
    """A stand-in for ``torch.cuda.Event``: a point in a stream's queue, kept by the running simulation."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 **kwargs: Any) -> None:
        self.enable_timing, self.blocking, self.interprocess = enable_timing, blocking, interprocess
        self._device: int | None = None  # set by its first record: an event belongs to one GPU for life

    def record(self, stream: Stream | None = None) -> None:
        import torch

        sim = active()
        stream = as_stream(stream) if stream is not None else sim.current()
        if self.interprocess and self.enable_timing:  # CUDA creates the event at its first record, and refuses this
            raise getattr(torch, "AcceleratorError", RuntimeError)("CUDA error: invalid argument (an interprocess "
                                                                   "event must be made with enable_timing=False)")
        if self._device is None:
            self._device = stream.device_index
        if self._device != stream.device_index:
            raise RuntimeError(f"Event device {self._device} does not match recording stream's device "
                               f"{stream.device_index}.")
        if not sim.captured(("record", self, stream)):
            sim.record(self, stream)
        sim.stream_call("record")

    def wait(self, stream: Stream | None = None) -> None:
        (as_stream(stream) if stream is not None else active().current()).wait_event(self)

    def query(self) -> bool:
        at = active().recorded(self)
        return True if at is None else active().reached(at)

    def synchronize(self) -> None:
        at = active().recorded(self)
        if at is not None:  # a blocking event puts the host thread to sleep instead of spinning
            active().host_sync("cudaEventSynchronize", at, sleep=self.blocking)

    def elapsed_time(self, end: "Event") -> float:
        sim, end = active(), as_event(end)
        if not (self.enable_timing and end.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if sim.recorded(self) is None or sim.recorded(end) is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (sim.now() >= sim.recorded(self) and sim.now() >= sim.recorded(end)):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        sim.timer_read("elapsed", sim.recorded(end) - sim.recorded(self))
        return sim.recorded(end) - sim.recorded(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        import torch.cuda.streams

        raise unknown_attribute(torch.cuda.streams.Event, "event", name, "write it with record, wait, query, "
                                "synchronize or elapsed_time")

    def __repr__(self) -> str:
        return "<simulated event>"



class StreamContext:
    """A stand-in for ``torch.cuda.StreamContext`` (what ``torch.cuda.stream(s)`` returns): ``s`` is current
    on its GPU, and its GPU the current device, inside the block."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = None if stream is None else as_stream(stream, "device")

    def __enter__(self) -> None:  # returns nothing, as torch.cuda.StreamContext does: `as s` binds None
        if self.stream is not None:
            sim = active()
            self._before = (sim.device, sim.current(self.stream.device_index))
            sim.set_current(self.stream)
            sim.stream_call("set_stream")

    def __exit__(self, *exc: Any) -> None:
        if self.stream is not None:
            sim = active()
            device, stream = self._before
            sim.set_current(stream)
            sim.device = device
            sim.stream_call("set_stream")



class device:  # noqa: N801 - the name torch.cuda uses
    """A stand-in for ``torch.cuda.device(i)``: GPU ``i`` is the current device inside the block."""

    def __init__(self, device: Any) -> None:
        self.index = active().index(device)

    def __enter__(self) -> None:
        sim = active()
        self._before, sim.device = sim.device, self.index

    def __exit__(self, *exc: Any) -> None:
        active().device = self._before



class device_of(device):  # noqa: N801 - the name torch.cuda uses
    """A stand-in for ``torch.cuda.device_of(obj)``: the GPU ``obj`` lives on is the current device inside the block;
    for an object on the CPU, the block changes nothing (as PyTorch's).

    Example:
        >>> import torch
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU(devices=2):
        ...     y = torch.ones(4, device="cuda:1")
        ...     with torch.cuda.device_of(y):
        ...         inside = torch.cuda.current_device()
        ...     with torch.cuda.device_of(torch.ones(4)):
        ...         cpu = torch.cuda.current_device()
        >>> inside, cpu
        (1, 0)
    """

    def __init__(self, obj: Any) -> None:
        self.index = obj.get_device() if obj.is_cuda else None

    def __enter__(self) -> None:
        if self.index is not None:
            super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self.index is not None:
            super().__exit__(*exc)



def device_properties(sim: Any) -> Any:
    """``torch.cuda.get_device_properties`` of a simulated GPU: its name, compute capability 9.0 (an H100), its SM
    count and, as ``clock_rate`` (kHz), the spin rate ``torch.cuda._sleep`` runs at (an H100's figures where the
    simulation has none of its own).

    Example:
        >>> import torch
        >>> from asynclab.sim.simulation import Simulation
        >>> with Simulation() as sim:
        ...     props = torch.cuda.get_device_properties(0)
        >>> props.major, props.clock_rate > 0
        (9, True)
    """
    from types import SimpleNamespace

    card = rates(card_figures("H100"))
    return SimpleNamespace(name="a simulated GPU", major=9, minor=0,
                           multi_processor_count=int(getattr(sim, "SM_COUNT", card["SM_COUNT"])),
                           clock_rate=int(getattr(sim, "CYCLES_PER_MS", card["CYCLES_PER_MS"])),
                           total_memory=80 * 2**30)



class GenericEvent(Event):
    """A stand-in for ``torch.Event``, PyTorch's device-generic event: a CUDA event where the accelerator is a GPU.

    Example:
        >>> from asynclab.sim.simulation import Simulation
        >>> with Simulation() as sim:
        ...     done = GenericEvent(enable_timing=True)
        ...     done.record()
        ...     done.query()
        True
    """

    def __init__(self, device: Any = None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        super().__init__(enable_timing, blocking, interprocess)
        if device is not None:
            self._device = active().index(device)

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", self._device if self._device is not None else active().device)
