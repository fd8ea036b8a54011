"""The state of simulated GPUs that torch.cuda's stand-ins read and change: :class:`Simulation`, the idle session
GPU (each stream's queue end, each event's record, the host's logical clock, the sync debug mode), and
:func:`stand_in_for_cuda`, which makes one the session's for the rest of a notebook session.

Entering a simulation puts it on top of :data:`asynclab.sim.running.RUNNING`'s stack and installs the stand-ins
(:mod:`asynclab.sim.install`); checkers run :class:`asynclab.sim.device.SimGPU`, which runs PyTorch's operators.
"""
from __future__ import annotations

from typing import Any

from asynclab.sim import patches
from asynclab.sim.cuda import STREAMS_PER_POOL, Event, Stream, default_stream_of, device_index
from asynclab.sim.hostthreads import HostThreads
from asynclab.sim.install import gpus_here, install, uninstall
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.running import RUNNING

__all__ = ["FreeHost", "Simulation", "stand_in_for_cuda"]


class FreeHost:
    """A simulation's host-cost policy: what the host's own work costs besides its launches and waits, as hooks that
    :class:`Simulation` and :class:`asynclab.sim.device.SimGPU` call at named points. This one, a checker's, prices
    none of it and runs no autograd on simulated tensors; :class:`asynclab.sim.simulate.HostCosts` (what
    ``al.simulate`` runs) prices it all.

    Example:
        >>> costs = FreeHost()
        >>> costs.trains, costs.operator_starts(None, (), {}), costs.factory_starts()
        (False, None, None)
    """

    #: Whether autograd runs on the simulated tensors (they tell it they live on the CPU).
    trains = False

    def attach(self, gpu: Any) -> None:
        """The simulated GPU this policy prices the host of."""

    def enter(self) -> None:
        """The simulation is entered (after the GPU's own patches are in place)."""

    def exit(self, *exc: Any) -> None:
        """The simulation is left (before the GPU's own patches go)."""

    def operator_starts(self, func: Any, args: tuple, kwargs: dict, flat: list | None = None) -> Any:
        """An operator on GPU tensors is called from Python, before the GPU runs it (``flat``: the leaves of
        ``(args, kwargs)``, where the caller has them); what :meth:`operator_ends` gets."""
        return None

    def operator_ends(self, func: Any, started: Any) -> None:
        """The operator's call returns to Python."""

    def factory_starts(self) -> Any:
        """A factory makes a GPU tensor (``torch.ones(..., device="cuda")``); what :meth:`factory_ends` gets."""
        return None

    def factory_ends(self, name: str, started: Any) -> None:
        """The factory ``name`` returns to Python."""

    def launch_starts(self, launched: bool) -> None:
        """Work is about to be queued (``launched``: by a launch of the host's, not a CUDA graph's replay)."""

    def launch_ends(self, launched: bool, start: float) -> None:
        """The work is queued, to start at ``start``."""

    def new_memory(self, blocks: int) -> None:
        """The caching allocator asked the driver for ``blocks`` new blocks (cudaMalloc) for one allocation."""

    def host_alloc(self, nbytes: int) -> None:
        """The driver allocates and page-locks a new pinned block of ``nbytes`` (``cudaHostAlloc``)."""

    def emptying_cache(self) -> None:
        """``torch.cuda.empty_cache()`` is about to give the free blocks back."""

    def copy_waited(self) -> None:
        """The host waited for a blocking copy between it and a GPU."""

    def stream_call(self, name: str) -> None:
        """The host made the stream call ``name`` from Python."""

    def host_work(self, name: str, args: Any, out: Any) -> None:
        """The host ran ``name`` on host tensors, giving ``out``."""

    def timer_read(self, kind: str, ms: float) -> None:
        """Learner code read a host clock or an event's elapsed time."""

    def forget_past(self) -> None:
        """The trace starts afresh (after a warm-up run)."""


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
        self.costs: FreeHost = FreeHost()  # what the host's own work costs (SimGPU takes another policy)

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
        return RUNNING.current

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
            if not self.threads.simulated() or self not in RUNNING.stack:
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
        self.costs.timer_read(kind, ms)

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
        i = device if type(device) is int else device_index(device, self.device)  # an index: as it is (no lookup)
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
        n = RUNNING.handed_out.get(pool, 0)
        RUNNING.handed_out[pool] = n + 1
        return n % STREAMS_PER_POOL

    def number(self, stream: Stream) -> int:
        """The stream's number in this simulation's trace: 7 for a default stream, then 13, 17, ..."""
        number = self._numbers.get(stream)
        if number is None:
            number = self._numbers[stream] = 7 if stream.is_default else \
                9 + 4 * (1 + sum(not s.is_default for s in self._numbers))
        return number

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
        """The host waited for a blocking copy between it and a GPU: what it costs is the policy's (:attr:`costs`)."""
        self.costs.copy_waited()

    def stream_call(self, name: str) -> None:
        """The host made the stream call ``name`` from Python (a ``wait_stream``, an event's record or wait, a
        change of the current stream): what it costs is the policy's (:attr:`costs`)."""
        self.costs.stream_call(name)

    # -- events --
    def record(self, event: Event, stream: Stream) -> None:
        self._recorded[event] = max(self.ready(stream), self.now())

    def recorded(self, event: Event) -> float | None:
        """When ``event`` completes in this simulation (None: not recorded in it)."""
        return self._recorded.get(event)

    def __enter__(self) -> "Simulation":
        import time

        install()
        RUNNING.stack.append(self)
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
        RUNNING.stack.remove(self)
        if not RUNNING.stack:
            uninstall()
            patches.settle_benchmark_timer()



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
    if RUNNING.session is not None:
        return True
    if gpus_here() >= gpus_needed:
        return False
    RUNNING.session = Simulation()
    RUNNING.stack.insert(0, RUNNING.session)
    install()
    return True

