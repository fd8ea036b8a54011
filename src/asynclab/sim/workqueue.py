"""The simulated GPUs' time: what their work does when, in time order, and when work last wrote each memory. No torch:
the actions run inside ``quiet()`` (the simulated GPU gives ``torch.inference_mode(False)``: the GPU's work, whatever
mode the host is in), and a memory is known by ``key(tensor)`` (its address).
"""
from __future__ import annotations

import heapq
from typing import Any, Callable, ContextManager

from asynclab.sim.running import RUNNING

__all__ = ["WorkQueue"]


class WorkQueue:
    """Actions at times of the GPU's, done in time order as the host's time (``horizon()``) reaches them.

    Example:
        >>> import contextlib
        >>> now, done = [0.0], []
        >>> work = WorkQueue(horizon=lambda: now[0], quiet=contextlib.nullcontext, key=id)
        >>> work.at(2.0, lambda: done.append("ends")); work.at(1.0, lambda: done.append("starts"), starts=True)
        >>> done
        []
        >>> now[0] = 5.0; work.catch_up(); done
        ['starts', 'ends']
    """

    def __init__(self, horizon: Callable[[], float], quiet: Callable[[], ContextManager], key: Callable[[Any], int]):
        self.horizon, self.quiet, self.key = horizon, quiet, key
        self.actions: list[tuple[float, bool, int, Callable]] = []  # (when, a start?, order, what happens then)
        self.busy = False  # whether an action is happening now
        self.written: dict[int, float] = {}  # memory (its address) -> when work last wrote it
        self.writing: dict[int, set[int]] = {}  # memory (its address) -> the work writing it now (correlation ids)

    def at(self, t: float, action: Callable, starts: bool = False) -> None:
        """Do ``action`` when the GPU's time reaches ``t`` (at once if the host is already there); at the same time,
        work that ends comes before work that ``starts``, which then reads what the other wrote."""
        heapq.heappush(self.actions, (t, starts, next(RUNNING.order), action))
        self.catch_up()

    def catch_up(self, upto: float | None = None) -> None:
        """Let everything the GPU does up to ``upto`` happen, in time order (by default the horizon: the host's time,
        or with threads the earliest clock of those that run)."""
        if self.busy:  # an action that moves the host on: the loop below goes on with it
            return
        if not self.actions or self.actions[0][0] > (self.horizon() if upto is None else upto):
            return  # nothing due: no need to enter quiet() (the host's clock moves often, the GPU's work less)
        self.busy = True
        try:
            with self.quiet():
                while self.actions and self.actions[0][0] <= (self.horizon() if upto is None else upto):
                    heapq.heappop(self.actions)[-1]()
        finally:
            self.busy = False

    def finish(self) -> None:
        """Let all queued work happen (the end of a check), without moving the host."""
        with self.quiet():
            while self.actions:
                heapq.heappop(self.actions)[-1]()

    def writes(self, writes: tuple, corr: int) -> None:
        """Work ``corr`` writes the memory of ``writes`` from now on, a little at a time, until it ends."""
        for t in writes:
            self.writing.setdefault(self.key(t), set()).add(corr)

    def ended(self, then: Callable, start: float, end: float, reads: tuple, writes: tuple, corr: int) -> None:
        """Work ends at ``end``: it writes its results (``then()``), unless memory it read was written while it ran
        (by work that ended meanwhile, or that is still writing it): then what it writes is garbage, as on a GPU."""
        key = self.key
        if any(self.written.get(key(t), -1.0) > start or self.writing.get(key(t), set()) - {corr} for t in reads):
            for t in writes:
                t.fill_(float("nan") if t.dtype.is_floating_point else -1)
        else:
            then()
        for t in writes:
            self.written[key(t)] = end
            self.writing.get(key(t), set()).discard(corr)
