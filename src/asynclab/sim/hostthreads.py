"""The simulated host program's threads and their clocks: plain bookkeeping, no torch.

A simulation keeps one clock per host thread of the program a check runs, in ms. The thread that runs the check
owns the first; each thread the program starts gets its own, starting at the starter's time, as threads run side by
side. Clocks meet where a real program's threads meet: a ``join``, a wake-up from a ``Condition``, a hand-off (a
queue's item, a future's result; see :mod:`asynclab.sim.handoffs`). A thread blocked in a join or a wait holds no one
back. :class:`asynclab.sim.simulation.Simulation` holds one :class:`HostThreads` and moves its clocks as the host launches,
waits and sleeps.

Example:
    >>> import threading
    >>> clocks = HostThreads()
    >>> clocks.now = 2.0
    >>> def worker():
    ...     clocks.started()
    ...     clocks.now += 5.0      # the worker's own work: 5 ms from the time it started
    ...     clocks.ended(t)
    >>> t = threading.Thread(target=worker)
    >>> t.start(); t.join(); clocks.joined(t)
    >>> clocks.now
    7.0
"""
from __future__ import annotations

import _thread
import contextlib
import threading
from typing import Any, Callable, Iterator

__all__ = ["HostThreads"]


class HostThreads:
    """Each host thread's clock (ms), how long each slept, which are blocked, and when each signal was given."""

    #: Real seconds a thread that waits for the others' time to catch up gives them without any moving on, before it
    #: goes ahead (one stuck outside the simulation's view, as in a lock's ``acquire``, must not hold it forever).
    STALL_S = 0.25

    def __init__(self, on_move: Callable[[], None] | None = None) -> None:
        self._on_move = on_move  # called whenever a clock moves (a host array that shows copies as they land)
        self._owner = threading.get_ident()  # the thread that runs the check; its threads get clocks of their own
        self._clocks: dict[int, float] = {self._owner: 0.0}
        self._slept: dict[int, float] = {self._owner: 0.0}  # how long each has slept (its CPU-time clocks stood still)
        self._ended: dict[threading.Thread, float] = {}  # when each thread started in the simulation ended
        self._blocked: set[int] = set()  # threads blocked in a join or a wait: their clocks hold no one back
        self._waiting: dict[Any, list[int]] = {}  # a condition -> the threads waiting on it, in the order they came
        self._signals: dict[Any, float] = {}  # the latest time each condition was signalled at (see signalled)

    def _mine(self) -> int:
        """The thread whose clock the calling thread reads: its own if it started in this simulation, else the
        check's (a thread from before the check shares the check's clock)."""
        here = threading.get_ident()
        return here if here in self._clocks else self._owner

    @property
    def now(self) -> float:
        """The calling thread's time, in ms."""
        clocks = self._clocks
        if len(clocks) == 1:  # the check's thread alone: every thread reads its clock (see _mine)
            return clocks[self._owner]
        return clocks[self._mine()]

    @now.setter
    def now(self, t: float) -> None:
        clocks = self._clocks
        clocks[self._owner if len(clocks) == 1 else self._mine()] = t
        if self._on_move is not None:
            self._on_move()

    @property
    def horizon(self) -> float:
        """How far the GPU's work may have happened, in ms: the earliest clock of the threads that run now (the
        caller's included; one blocked in a join or a wait is left out). A thread that waits for a copy does not
        make it land for another thread that reads the memory earlier in its own time."""
        clocks = self._clocks
        if len(clocks) == 1:  # the check's thread alone: its clock, blocked or not (it is the caller's, see _mine)
            return clocks[self._owner]
        here = self._mine()
        return min(t for i, t in list(clocks.items()) if i == here or i not in self._blocked)

    def await_others(self) -> None:
        """The calling thread's clock moved past those of other threads that run (it waited for the GPU, or slept):
        as threads run side by side, give those the real time to reach its time first, so what they do earlier in
        their time (set a flag, read memory that a copy has not yet reached) happens before what this one does next."""
        if len(self._clocks) < 2:
            return
        here, pause = self._mine(), _thread.allocate_lock()
        pause.acquire()
        last, still = None, 0.0
        while still < self.STALL_S:
            mine = self._clocks.get(here, self.now)
            behind = {i: t for i, t in dict(self._clocks).items() if i != here and i not in self._blocked and t < mine}
            if not behind:
                return
            last, still = behind, (still + 0.001 if behind == last else 0.0)
            pause.acquire(timeout=0.001)

    @contextlib.contextmanager
    def blocked(self, cond: Any = None) -> Iterator[None]:
        """The calling thread is blocked (in a join, or a wait on ``cond``) meanwhile: other threads' GPU time is not
        held back by its clock, until it returns or a ``notify`` of ``cond`` wakes it."""
        here = threading.get_ident()
        self._blocked.add(here)
        waiters = self._waiting.setdefault(cond, []) if cond is not None else []
        waiters.append(here)
        try:
            yield
        finally:
            self._blocked.discard(here)
            if here in waiters:
                waiters.remove(here)

    @property
    def slept(self) -> float:
        """How long the calling thread has slept, in ms (its CPU-time clocks stood still meanwhile)."""
        return self._slept[self._mine()]

    @slept.setter
    def slept(self, ms: float) -> None:
        self._slept[self._mine()] = ms

    def started(self) -> None:
        """The calling thread was just started by the check's code: its clock starts at the check's time."""
        here = threading.get_ident()
        self._clocks[here], self._slept[here] = self._clocks[self._owner], 0.0

    def ended(self, thread: threading.Thread) -> None:
        """``thread`` (the calling one) is done: keep when it ended, for a ``join``, and free its clock."""
        here = threading.get_ident()
        if here != self._owner and here in self._clocks:
            self._ended[thread] = self._clocks.pop(here)
            self._slept.pop(here, None)

    def joined(self, thread: threading.Thread) -> None:
        """The calling thread joined ``thread``: it has waited until ``thread`` ended."""
        if thread in self._ended and not thread.is_alive():
            self.now = max(self.now, self._ended[thread])

    def signalled(self, cond: Any, n: int = 1) -> None:
        """The calling thread signals ``cond`` now (a ``notify`` of ``n``): whoever it wakes goes on from this time,
        and runs from now on, before the operating system gets to it (a thread just woken must hold back what other
        threads' GPU work may have done by its time)."""
        for woken in list(self._waiting.get(cond, []))[:n]:
            self._blocked.discard(woken)
        if threading.get_ident() in self._clocks:  # (never current_thread(): a thread starting up signals too)
            self._signals[cond] = max(self._signals.get(cond, 0.0), self.now)

    def woken(self, cond: Any) -> None:
        """The calling thread was woken from a wait on ``cond``: it catches up with the time it was signalled at."""
        if threading.get_ident() in self._clocks and cond in self._signals:
            self.now = max(self.now, self._signals[cond])

    def handed_from(self) -> float | None:
        """The calling thread's time, where it is part of the host program the check runs (else None): what it hands
        another thread (a queue's item, a future's result) leaves at this time."""
        here = threading.get_ident()
        return self._clocks[here] if here in self._clocks else None

    def handed_to(self, t: float) -> None:
        """The calling thread received what another handed over at ``t``: it goes on no earlier."""
        if threading.get_ident() in self._clocks:
            self.now = max(self.now, t)

    def simulated(self) -> bool:
        """Whether the calling thread is part of the host program the check runs (the check's thread, one it
        started, or a non-daemon thread): a notebook kernel's own daemon threads are not, and keep real time."""
        return threading.get_ident() in self._clocks or not threading.current_thread().daemon
