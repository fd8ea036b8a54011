"""What is running: the one object that says which simulation handles use now, and what the session keeps across
simulations as a real process keeps it.

:data:`RUNNING` holds, in one place, the run-time state that used to be spread over module globals: the simulations in
place (the session's idle GPU first, a check's on top), torch.cuda's stand-ins while they are installed, each host
thread's current device and streams, the streams PyTorch's pools have handed out in this process, the one
default-stream handle of each GPU, the process's sequence of correlation ids and the operators' shapes worked out.
It imports nothing of the simulation but its limits, so every other module of it can import this one.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any

from asynclab.sim.limits import SimulationLimit

__all__ = ["RUNNING", "Running", "active", "forget_current", "in_check", "running_simulations"]


class _ThreadState(threading.local):
    """What the session keeps across simulations, as a real process does: each GPU's current stream and the current
    device, per thread as CUDA keeps them (a thread starts on GPU 0's default stream, whatever another thread set)."""

    def __init__(self) -> None:
        self.current: dict[Any, Any] = {"device": 0}


class Running:
    """Which simulations are in place, and what a session keeps across them.

    Example:
        >>> running = Running()
        >>> running.simulations(), running.in_check(), running.current
        ((), False, {'device': 0})
    """

    def __init__(self) -> None:
        self.stack: list[Any] = []  # the running simulations: the session's (if any) first, a check's on top
        self.session: Any = None  # the session's idle GPU, once stand_in_for_cuda() has run
        self.installed: list[Any] = []  # torch.cuda's stand-ins while they are in place (patches.Installed)
        self._thread = _ThreadState()
        self.handed_out: dict[tuple, int] = {}  # (device, priority pool) -> streams handed out from it
        self.defaults: dict[int, Any] = {}  # GPU index -> its one default-stream handle
        self.order = itertools.count()  # the process's sequence: work's correlation ids, free blocks' order
        self.shapes: dict = {}  # operators' output shapes already worked out, by signature (asynclab.sim.ops)
        self.schemas: dict = {}  # an operator -> what its schema says (asynclab.sim.ops.schema_facts)
        self.rules: dict = {}  # an operator -> the simulated rules that may run it (asynclab.sim.ops)
        self.rates: dict = {}  # matrix products' rates already worked out (asynclab.sim.kernel_costs.matmul_rate)

    @property
    def current(self) -> dict[Any, Any]:
        """The calling thread's current streams and device (shared by the simulations, as a session keeps them)."""
        return self._thread.current

    def forget_current(self) -> None:
        """Put this thread back as a fresh process starts: GPU 0 current, every GPU's default stream current."""
        self._thread.current = {"device": 0}

    def simulations(self) -> tuple[Any, ...]:
        """The simulations in place, innermost last."""
        return tuple(self.stack)

    def active(self) -> Any:
        """The simulation that stream and event handles use now (a check's, else the session's)."""
        if not self.stack:
            raise SimulationLimit("torch.cuda outside a simulation", "call al.start(...) first, or run on a GPU")
        return self.stack[-1]

    def in_check(self) -> bool:
        """Whether a checker's simulation (not only the idle session GPU) is running."""
        return bool(self.stack) and self.stack[-1] is not self.session


#: The process's one :class:`Running`.
RUNNING = Running()


def running_simulations() -> tuple[Any, ...]:
    """The simulations in place, innermost last (the session's, if any, first; a check's on top).

    Example:
        >>> isinstance(running_simulations(), tuple)
        True
    """
    return RUNNING.simulations()


def active() -> Any:
    """The simulation that stream and event handles use now (a check's, else the session's)."""
    return RUNNING.active()


def in_check() -> bool:
    """Whether a checker's simulation (not only the idle session GPU) is running."""
    return RUNNING.in_check()


def forget_current() -> None:
    """Put this thread back as a fresh process starts: GPU 0 current, every GPU's default stream current."""
    RUNNING.forget_current()
