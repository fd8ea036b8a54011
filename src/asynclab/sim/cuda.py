"""Stand-ins for torch.cuda's streams, events and devices without a GPU, bound to whichever simulation is running.

A notebook without a GPU calls :func:`stand_in_for_cuda` (``al.start`` does), so that learner code such
as ``side = torch.cuda.Stream()`` runs in any cell, at any time. The objects it makes are handles: a
stream or an event has no state of its own. Its state (when its queued work ends, when it was
recorded) lives in the simulation that is running when it is used, so a stream made in an earlier
cell, or in an earlier check, starts every check idle, exactly as a real stream that has finished
its work. Outside a check, an idle session GPU answers (a ``synchronize`` returns at once). What a real
session keeps, the simulations share: the current stream of each GPU and the current device, per thread as
CUDA keeps them (a ``set_stream`` never put back stays in force, in later checks too), and the device an event
belongs to.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from asynclab.sim import patches
from asynclab.sim.figures import card_figures, rates
from asynclab.sim.hostthreads import HostThreads
from asynclab.sim.limits import SimulationLimit, unknown_attribute


_STACK: list["Simulation"] = []  # the running simulations: the session's (if any) first, a check's on top


def running_simulations() -> tuple["Simulation", ...]:
    """The simulations in place, innermost last (the session's, if any, first; a check's on top).

    Example:
        >>> isinstance(running_simulations(), tuple)
        True
    """
    return tuple(_STACK)
_INSTALLED: list[patches.Installed] = []  # torch.cuda's stand-ins while they are in place (and its own functions)
_SESSION: list["Simulation"] = []  # the session's idle GPU, once stand_in_for_cuda() has run


class _ThreadState(threading.local):
    """What the session keeps across simulations, as a real process does: each GPU's current stream and the current
    device, per thread as CUDA keeps them (a thread starts on GPU 0's default stream, whatever another thread set)."""

    def __init__(self) -> None:
        self.current: dict[Any, Any] = {"device": 0}


_THREAD = _ThreadState()


def forget_current() -> None:
    """Put this thread back as a fresh process starts: GPU 0 current, every GPU's default stream current."""
    _THREAD.current = {"device": 0}


def active() -> "Simulation":
    """The simulation that stream and event handles use now (a check's, else the session's)."""
    if not _STACK:
        raise SimulationLimit("torch.cuda outside a simulation", "call al.start(...) first, or run on a GPU")
    return _STACK[-1]


def in_check() -> bool:
    """Whether a checker's simulation (not only the idle session GPU) is running."""
    return bool(_STACK) and not (_SESSION and _STACK[-1] is _SESSION[0])


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
_HANDED_OUT: dict[tuple, int] = {}  # (device, priority pool) -> streams handed out from it in this process


class Stream:
    """A stand-in for ``torch.cuda.Stream``: a handle whose queue lives in the running simulation.

    Example:
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
        sim, other = active(), _stream(stream, "record_event")
        sim.stream_call("wait_stream")
        if not sim.captured(("wait_stream", self, other)):
            sim.set_ready(self, max(sim.ready(self), sim.ready(other)))

    def wait_event(self, event: "Event") -> None:
        sim, at = active(), active().recorded(_event(event, "wait"))
        sim.stream_call("wait_event")
        if sim.captured(("wait_event", self, event)):
            return
        if at is not None:
            sim.set_ready(self, max(sim.ready(self), at))

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event if event is not None else Event()
        _event(event, "record").record(self)
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


_DEFAULTS: dict[int, Stream] = {}


def default_stream_of(index: int) -> Stream:
    """The one default-stream handle of GPU ``index`` (the same object in every simulation)."""
    if index not in _DEFAULTS:
        stream = Stream.__new__(Stream)
        stream.device_index, stream.priority, stream.is_default = index, 0, True
        _DEFAULTS[index] = stream
    return _DEFAULTS[index]


def _stream(stream: Any, needs: str | None = None) -> Stream:
    """``stream`` as a simulated stream. A stream of another kind is the simulation's limit; anything else fails as
    it does on a GPU: where PyTorch reads attribute ``needs`` of it, an AttributeError, else the binding's TypeError
    (``side.wait_stream(torch.cuda.current_stream)``, without the call, is the learner's mistake on a GPU too)."""
    if isinstance(stream, Stream):
        return stream
    if "Stream" in type(stream).__name__:
        raise SimulationLimit(f"a stream of type {type(stream).__name__}", "pass a stream made by torch.cuda.Stream(), "
                                                                         "current_stream() or default_stream()")
    raise _not_a(stream, "a torch.cuda.Stream", needs)


def _event(event: Any, needs: str | None = None) -> "Event":
    """``event`` as a simulated event; other kinds of events are the simulation's limit, anything else fails as on
    a GPU (see :func:`_stream`)."""
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
        stream = _stream(stream) if stream is not None else sim.current()
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
        (_stream(stream) if stream is not None else active().current()).wait_event(self)

    def query(self) -> bool:
        at = active().recorded(self)
        return True if at is None else active().reached(at)

    def synchronize(self) -> None:
        at = active().recorded(self)
        if at is not None:  # a blocking event puts the host thread to sleep instead of spinning
            active().host_sync("cudaEventSynchronize", at, sleep=self.blocking)

    def elapsed_time(self, end: "Event") -> float:
        sim, end = active(), _event(end)
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
        self.stream = None if stream is None else _stream(stream, "device")

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


def _fakes() -> dict[str, Any]:
    """torch.cuda's names and their stand-ins."""
    real = _real

    def set_stream(stream: Stream | None) -> None:
        if stream is not None:
            active().set_current(_stream(stream, "stream_id"))

    def set_device(index: Any) -> None:
        sim = active()
        sim.device = sim.index(index)

    def cuda_graph(keep_graph: bool = False) -> Any:  # the check's simulated GPU makes them (asynclab.sim.graphs)
        return active().cuda_graph(keep_graph) if in_check() else real("CUDAGraph")(keep_graph)

    def graph(cuda_graph: Any, pool: Any = None, stream: Any = None, capture_error_mode: str = "global") -> Any:
        if in_check():
            return active().graph_capture(cuda_graph, pool, stream, capture_error_mode)
        return real("graph")(cuda_graph, pool, stream, capture_error_mode)

    fakes = {
        "Stream": Stream, "Event": Event, "StreamContext": StreamContext, "device": device, "device_of": device_of,
        "stream": StreamContext, "set_stream": set_stream, "set_device": set_device,
        "current_stream": lambda device=None: active().current(device),
        "default_stream": lambda device=None: default_stream_of(active().index(device)),
        "current_device": lambda: active().device,
        "synchronize": lambda device=None: active().synchronize(device),
        "_sleep": lambda cycles: active().spin(cycles),
        "empty_cache": lambda: active().empty_cache(),
        "set_sync_debug_mode": lambda mode: (active().set_sync_debug_mode(mode) if in_check()
                                             else real("set_sync_debug_mode")(mode)),
        "get_sync_debug_mode": lambda: active().sync_debug_mode if in_check() else real("get_sync_debug_mode")(),
        "get_device_capability": lambda device=None: ((9, 0) if in_check() else  # the cost model's GPU: an H100
                                                      real("get_device_capability")(device)),
        "get_device_name": lambda device=None: ("a simulated GPU" if in_check() else real("get_device_name")(device)),
        "get_device_properties": lambda device=None: (device_properties(active()) if in_check()
                                                      else real("get_device_properties")(device)),
        "is_bf16_supported": lambda *a, **k: True if in_check() else real("is_bf16_supported")(*a, **k),
        "is_available": lambda: True if in_check() else real("is_available")(),
        "device_count": lambda: active().devices if in_check() else real("device_count")(),
        "memory_allocated": lambda device=None: active().memory_stat("allocated", device),
        "max_memory_allocated": lambda device=None: active().memory_stat("allocated", device, peak=True),
        "memory_reserved": lambda device=None: active().memory_stat("reserved", device),
        "max_memory_reserved": lambda device=None: active().memory_stat("reserved", device, peak=True),
        "reset_peak_memory_stats": lambda device=None: active().reset_peak(device),
        "is_current_stream_capturing": lambda: (active().capture is not None if in_check()
                                                else real("is_current_stream_capturing")()),
        "CUDAGraph": cuda_graph, "graph": graph,
    }
    assert set(fakes) == set(patches.TORCH_CUDA), "the stand-ins are those the table of patches lists"
    return fakes


class GenericEvent(Event):
    """A stand-in for ``torch.Event``, PyTorch's device-generic event: a CUDA event where the accelerator is a GPU.

    Example:
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


def _accelerator_fakes() -> dict[str, Any]:
    """torch.accelerator's names (PyTorch 2.6+) and their stand-ins: the current GPU's, as torch.cuda's."""
    import torch

    fakes = _fakes()

    def real(name: str) -> Any:
        return _real(name, "torch.accelerator")

    return {
        "current_accelerator": lambda check_available=False: (torch.device("cuda") if in_check()
                                                              else real("current_accelerator")(check_available)),
        "is_available": lambda: True if in_check() else real("is_available")(),
        "device_count": lambda: active().devices if in_check() else real("device_count")(),
        "current_device_index": fakes["current_device"], "current_device_idx": fakes["current_device"],
        "set_device_index": fakes["set_device"], "set_device_idx": fakes["set_device"],
        "current_stream": fakes["current_stream"], "set_stream": fakes["set_stream"],
        "synchronize": fakes["synchronize"],
    }


def _real(name: str, path: str = "torch.cuda") -> Any:
    """torch.cuda's own ``name`` (or that of the module at ``path``), whether or not the stand-ins are in place."""
    for done in _INSTALLED:
        if done.path == path and name in done.originals:
            return done.originals[name]
    return getattr(patches.owner_of(path), name)


def _register_as_torch_kinds() -> None:
    """Count the stand-ins as torch's stream and event kinds where PyTorch checks it.

    PyTorch before 2.6 keeps abstract ``_StreamBase``/``_EventBase`` classes, and its ``torch._dynamo`` (which
    torchvision imports, and with it d2l) asserts at import that ``torch.cuda.Stream``/``Event`` are theirs; later
    releases deprecate those classes and check nothing.
    """
    import abc

    try:
        from torch._streambase import _EventBase, _StreamBase
    except ImportError:  # a PyTorch without them: nothing checks
        return
    if isinstance(_StreamBase, abc.ABCMeta) and isinstance(_EventBase, abc.ABCMeta):
        _StreamBase.register(Stream)
        _EventBase.register(Event)


def _install() -> None:
    if _INSTALLED:
        return
    _register_as_torch_kinds()
    _INSTALLED.append(patches.install("torch.cuda", _fakes()))
    generic = {"torch": {"Event": GenericEvent, "Stream": Stream}, "torch.accelerator": _accelerator_fakes()}
    assert {path: set(names) for path, names in generic.items()} == {
        path: set(patches.TABLE[path]) for path in generic}, "the stand-ins are those the table of patches lists"
    for path, fakes in generic.items():  # PyTorch's device-generic API, where this PyTorch has it
        owner = patches.owner_of(path)
        here = {name: fake for name, fake in fakes.items() if owner is not None and hasattr(owner, name)}
        if here:
            _INSTALLED.append(patches.install(path, here))


def _uninstall() -> None:
    while _INSTALLED:
        _INSTALLED.pop().undo()


def stand_in_for_cuda(gpus_needed: int = 1) -> bool:
    """On a machine with fewer GPUs than ``gpus_needed`` (none, or one for a two-GPU lesson), put the stand-ins in
    place for the rest of the session; True if they are.

    ``torch.cuda.is_available()`` and ``device_count()`` still answer for the machine outside a check. Nothing
    changes on a machine with enough GPUs.

    Example:
        >>> import torch
        >>> stand_in_for_cuda() == (not torch.cuda.is_available())
        True
    """
    if _SESSION:
        return True
    if gpus_here() >= gpus_needed:
        return False
    _SESSION.append(Simulation())
    _STACK.insert(0, _SESSION[0])
    _install()
    return True


def gpus_here() -> int:
    """How many GPUs the machine has, whether or not the stand-ins are in place.

    Example:
        >>> gpus_here() >= 0
        True
    """
    return _real("device_count")() if _real("is_available")() else 0


class Simulation:
    """The state of simulated GPUs: when each stream's queue ends, when each event was recorded, the host's time.

    The base class is the idle session GPU (two devices, logical time). Checkers use the subclass that runs
    PyTorch's operators, :class:`asynclab.sim.device.SimGPU`. ``with`` a simulation, handles use it.

    Example:
        >>> with Simulation() as sim:
        ...     import torch
        ...     side = torch.cuda.Stream()
        ...     sim.set_ready(side, 3.0)
        ...     done = side.record_event()
        ...     torch.cuda.current_stream().wait_event(done)
        ...     sim.ready(torch.cuda.current_stream())
        3.0
    """

    devices = 2
    #: Simulated host time one ``query()`` that says False costs (a polling loop's step).
    POLL_MS = 0.005

    def __init__(self) -> None:
        self._watchers: list[Any] = []  # called whenever the host's time moves on (see watch_host)
        #: the host program's threads and their clocks (a thread started in the check keeps its own)
        self.threads = HostThreads(on_move=self._moved)
        self._ready: dict[Stream, float] = {}
        self._recorded: dict[Event, float] = {}
        self.capture: list[tuple] | None = None  # while a CUDA graph is captured: its stream calls and work, in order
        self._numbers: dict[Stream, int] = {}
        self.sync_debug_mode = 0
        self.timer_reads = 0  # how often learner code read a host clock or an event's elapsed time

    @property
    def host(self) -> float:
        """The calling host thread's logical time, in ms: the simulations move it on as the thread launches, waits
        and sleeps. Each thread started during the simulation keeps a clock of its own (see :attr:`threads`)."""
        return self.threads.now

    @host.setter
    def host(self, t: float) -> None:
        self.threads.now = t

    def _moved(self) -> None:
        for watcher in self._watchers:
            watcher()

    def watch_host(self, watcher: Any) -> None:
        """Call ``watcher()`` whenever the host's time moves on (a host array that shows copies as they land)."""
        self._watchers.append(watcher)

    @property
    def _current(self) -> dict[Any, Any]:
        """The calling thread's current streams and device (shared by the simulations, as a session keeps them)."""
        return _THREAD.current

    @property
    def device(self) -> int:
        """The current device (the session's, kept across simulations as a process keeps it)."""
        return self._current["device"]

    @device.setter
    def device(self, index: int) -> None:
        self._current["device"] = index

    # -- the host's clock --
    #: Simulated host time one reading of a clock costs, in ms (a busy-wait loop's step).
    CLOCK_READ_MS = 0.001
    #: The clocks of the ``time`` module that learner code reads as the host's logical time, and their units per ms;
    #: the CPU-time clocks stop while the host sleeps.
    CLOCKS, CPU_CLOCKS = patches.WALL_CLOCKS, patches.CPU_CLOCKS

    def _clock(self, real: Any, per_ms: float, cpu: bool = False) -> Any:
        """A stand-in for the ``time`` clock ``real``: it reads the host's logical time (from ``real``'s reading now;
        ``cpu``: less the time the host slept), and each reading costs the host :data:`CLOCK_READ_MS`, so a busy-wait
        loop moves the host on as on a GPU. A notebook kernel's own daemon threads (which poll their clocks all the
        time) read the real clock: they are not the host program the check runs; so does a stand-in kept past its
        check (bound by a module imported during it)."""
        first = real()
        start, whole = first - self._host_clock(cpu) * per_ms, isinstance(first, int)

        def read() -> Any:
            if not self.threads.simulated() or self not in _STACK:
                return real()
            self.host += self.CLOCK_READ_MS
            self.timer_read("clock", self.host)
            now = start + self._host_clock(cpu) * per_ms
            return int(now) if whole else now
        return read

    @staticmethod
    def _clock_gettime(clocks: dict[str, Any]) -> dict[str, Any]:
        """``time.clock_gettime(clk_id)`` and its ``_ns`` twin on the stand-in clocks: CLOCK_REALTIME reads ``time``,
        the monotonic clocks ``monotonic``, the CPU-time ones ``process_time`` and ``thread_time``."""
        import time

        names = {"CLOCK_REALTIME": "time", "CLOCK_MONOTONIC": "monotonic", "CLOCK_MONOTONIC_RAW": "monotonic",
                 "CLOCK_BOOTTIME": "monotonic", "CLOCK_PROCESS_CPUTIME_ID": "process_time",
                 "CLOCK_THREAD_CPUTIME_ID": "thread_time"}
        by_id = {getattr(time, k): v for k, v in names.items() if hasattr(time, k)}
        if not hasattr(time, "clock_gettime"):  # not on Windows
            return {}
        real, real_ns = time.clock_gettime, time.clock_gettime_ns

        def gettime(clk_id: int) -> float:
            return clocks[by_id[clk_id]]() if clk_id in by_id else real(clk_id)

        def gettime_ns(clk_id: int) -> int:
            return clocks[by_id[clk_id] + "_ns"]() if clk_id in by_id else real_ns(clk_id)
        return {"clock_gettime": gettime, "clock_gettime_ns": gettime_ns}

    def timer_read(self, kind: str, ms: float) -> None:
        """Learner code read a host clock (``kind`` "clock", the host at ``ms``) or an event's elapsed time
        ("elapsed", ``ms`` long)."""
        self.timer_reads += 1

    def _host_clock(self, cpu: bool) -> float:
        return self.host - (self.threads.slept if cpu else 0.0)

    def spin(self, cycles: int) -> None:
        """``torch.cuda._sleep``: only a simulation that runs kernels can spin one."""
        raise SimulationLimit("torch.cuda._sleep outside a check")

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: nothing is cached here."""

    def memory_stat(self, kind: str, device: Any = None, peak: bool = False) -> int:
        """``torch.cuda.memory_allocated()`` and its kin: bytes of ``kind`` ("allocated" to tensors, or "reserved"
        by the caching allocator) on ``device`` now, or at their peak; none here, where no tensor lives."""
        self.index(device)
        return 0

    def reset_peak(self, device: Any = None) -> None:
        """``torch.cuda.reset_peak_memory_stats()``: the peaks start again from what is in use now."""
        self.index(device)

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` in learner code during a check: the host's time moves on, and the GPU's work with it. The
        other threads that run get to this time first (:meth:`HostThreads.await_others`), so a loop that polls what
        another thread sets sees it from the sleep in which, in its time, it was set. A notebook kernel's own daemon
        thread really sleeps: it is not the host program the check runs."""
        if not self.threads.simulated() and getattr(self, "_patches", None):
            self._patches[0].originals["sleep"](seconds)
            return
        self.threads.slept += max(0.0, float(seconds)) * 1e3
        self.host += max(0.0, float(seconds)) * 1e3
        self.threads.await_others()

    def now(self) -> float:
        """The host's time, in ms."""
        return self.host

    def wait_until(self, t: float, sleep: bool = False) -> None:
        """The host waits until ``t`` (``sleep``: asleep, using no CPU time, as on a blocking event)."""
        if sleep:
            self.threads.slept += max(0.0, t - self.host)
        self.host = max(self.host, t)

    def host_sync(self, call: str, t: float, sleep: bool = False) -> None:
        """The host calls CUDA's ``call`` (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
        ``cudaEventSynchronize``), which returns at ``t``: here, :meth:`wait_until`; a simulation that writes a trace
        also records the call, as the profiler does.

        Example:
            >>> with Simulation() as sim:
            ...     sim.host_sync("cudaDeviceSynchronize", 5.0)
            ...     sim.now()
            5.0
        """
        self.wait_until(t, sleep)

    def reached(self, t: float) -> bool:
        """Whether the host's time has reached ``t``; a False answer costs a polling step, as on a GPU."""
        done = self.now() >= t
        if not done:
            self.host += self.POLL_MS
        return done

    # -- devices and streams --
    def index(self, device: Any) -> int:
        """The index of ``device`` (None: the current device); a SimulationLimit if this simulation lacks it."""
        i = device_index(device, self.device)
        if not 0 <= i < self.devices:
            have = " and ".join(f"GPU {d}" for d in range(self.devices))
            raise SimulationLimit(f"GPU {i}", f"this check simulates {have}")
        return i

    def current(self, device: Any = None) -> Stream:
        """The current stream of ``device`` (None: the current device)."""
        i = self.index(device)
        return self._current.get(i) or default_stream_of(i)

    def set_current(self, stream: Stream) -> None:
        """Make ``stream`` current on its GPU, and its GPU the current device (as torch.cuda.set_stream does)."""
        self.device = self.index(stream.device_index)
        self._current[stream.device_index] = stream

    def ready(self, stream: Stream) -> float:
        """When the work queued on ``stream`` in this simulation ends (0: none queued)."""
        self.index(stream.device_index)
        return self._ready.get(stream, 0.0)

    def set_ready(self, stream: Stream, t: float) -> None:
        self.number(stream)
        self._ready[stream] = t

    def pool_slot(self, pool: tuple) -> int:
        """The next stream of ``pool`` (device, priority) that ``torch.cuda.Stream()`` hands out, round-robin, counted
        per process as PyTorch counts them (a stream made before a check and one the check makes are two streams).

        Example:
            >>> with Simulation() as sim:
            ...     a, b = sim.pool_slot((1, 0)), sim.pool_slot((1, 0))
            ...     (b - a) % 32, Stream() == Stream(), len({Stream() for _ in range(40)})
            (1, False, 32)
        """
        n = _HANDED_OUT.get(pool, 0)
        _HANDED_OUT[pool] = n + 1
        return n % STREAMS_PER_POOL

    def number(self, stream: Stream) -> int:
        """The stream's number in this simulation's trace: 7 for a default stream, then 13, 17, ..."""
        if stream not in self._numbers:
            self._numbers[stream] = 7 if stream.is_default else 9 + 4 * (1 + sum(not s.is_default for s in self._numbers))
        return self._numbers[stream]

    def synchronize(self, device: Any = None) -> None:
        """The host waits for every stream of ``device`` (None: the current device)."""
        i = self.index(device)
        self.host_sync("cudaDeviceSynchronize", max([0.0] + [t for s, t in self._ready.items() if s.device_index == i]))

    # -- PyTorch's sync debug mode --
    #: ``torch.cuda.set_sync_debug_mode``'s names for its modes.
    SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}

    def set_sync_debug_mode(self, mode: Any) -> None:
        """``torch.cuda.set_sync_debug_mode``: 0 or "default", 1 or "warn", 2 or "error"."""
        if isinstance(mode, str):
            if mode not in self.SYNC_DEBUG_MODES:
                raise RuntimeError('invalid value of debug_mode, expected one of `default`, `warn`, `error`')
            mode = self.SYNC_DEBUG_MODES[mode]
        self.sync_debug_mode = int(mode)

    def sync_report(self) -> None:
        """The host is about to wait for the GPU inside an operation (a read, a blocking copy, a stream's
        synchronize): warn or raise as PyTorch's sync debug mode does (c10's ``warn_or_error_on_sync``).

        Example:
            >>> import warnings
            >>> with Simulation() as sim, warnings.catch_warnings(record=True) as seen:
            ...     warnings.simplefilter("always")
            ...     sim.set_sync_debug_mode("warn")
            ...     sim.sync_report()
            >>> str(seen[0].message)
            'called a synchronizing CUDA operation'
        """
        import warnings

        if self.sync_debug_mode == 2:
            raise RuntimeError("called a synchronizing CUDA operation")
        if self.sync_debug_mode == 1:
            warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=3)

    def captured(self, action: tuple) -> bool:
        """While a CUDA graph is captured, ``action`` (a stream call, or work queued) goes into it instead of
        happening (True); else False."""
        if self.capture is None:
            return False
        self.capture.append(action)
        return True

    def copy_waited(self) -> None:
        """The host waited for a blocking copy between it and a GPU: no cost here; :func:`asynclab.sim.simulate.simulate`
        prices the round trip."""

    def stream_call(self, name: str) -> None:
        """The host made the stream call ``name`` from Python (a ``wait_stream``, an event's record or wait, a
        change of the current stream): it costs nothing here; :func:`asynclab.sim.simulate.simulate` prices it."""

    # -- events --
    def record(self, event: Event, stream: Stream) -> None:
        self._recorded[event] = max(self.ready(stream), self.now())

    def recorded(self, event: Event) -> float | None:
        """When ``event`` completes in this simulation (None: not recorded in it)."""
        return self._recorded.get(event)

    def __enter__(self) -> "Simulation":
        import time

        _install()
        _STACK.append(self)
        # learner code's sleeps and clock readings are the host's logical time
        clocks = {name: self._clock(getattr(time, name), per_ms, cpu=name in self.CPU_CLOCKS)
                  for name, per_ms in (*self.CLOCKS.items(), *self.CPU_CLOCKS.items())}
        clocks.update(self._clock_gettime(clocks))
        self._patches = [patches.install("time", {"sleep": self.sleep, **clocks}),
                         patches.install("timeit", {"default_timer": clocks["perf_counter"]}),
                         *patches.clock_defaults()]
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._patches:
            self._patches.pop().undo()
        _STACK.remove(self)
        if not _STACK:
            _uninstall()
            patches.settle_benchmark_timer()


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """Run a block with torch.cuda's own functions, as on a machine without the stand-ins (for tests)."""
    stack, saved = list(_STACK), bool(_INSTALLED)
    _uninstall()
    _STACK.clear()
    try:
        yield
    finally:
        _STACK.extend(stack)
        if saved:
            _install()
