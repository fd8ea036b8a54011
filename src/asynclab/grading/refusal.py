"""The exercise checkers' anti-cheat rule: while a checker runs a learner's function, the pipeline-schedule simulator
(:mod:`asynclab.trace.pipeline.schedules`) refuses to answer, in any thread, however the function got hold of it.

The simulator keeps no state for this. Each of its entry points announces the question with an audit event
(``sys.audit(ASKED, ...)``, :data:`asynclab.trace.pipeline.schedules.ASKED`); the hook here, added to the interpreter
the first time a checker refuses, raises :class:`Refused` from inside that call while a refusal is in force, and
otherwise lets it through. An audit hook is process-wide, so a worker thread is refused too, and it is met by a
function taken beforehand (``sim = schedules.simulate``) as much as by one looked up in the module."""
from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from asynclab.trace.pipeline.schedules import ASKED

__all__ = ["Refused", "Refusal", "refusing"]


class Refused(RuntimeError):
    """The simulator was asked while an exercise checker had it refuse (see :func:`refusing`)."""


@dataclass(eq=False)
class Refusal:
    """Why the simulator refuses, and how many times it was asked meanwhile (a caught refusal still counts)."""

    reason: str
    asked: int = 0


class _Refusals:
    """The refusals in force, innermost last, and whether the audit hook that enforces them is in place (it cannot be
    taken out again: it does nothing while none is in force)."""

    def __init__(self) -> None:
        self.stack: list[Refusal] = []
        self.hooked = False
        self.lock = threading.Lock()

    def hook(self, event: str, args: Any) -> None:
        if event == ASKED and self.stack:
            refusal = self.stack[-1]
            refusal.asked += 1
            raise Refused(refusal.reason)


_IN_FORCE = _Refusals()


@contextlib.contextmanager
def refusing(reason: str) -> Iterator[Refusal]:
    """While inside, the schedule simulator (``simulate``, ``simulate_trace``, ``schedule_ops`` and
    ``bubble_formula`` of :mod:`asynclab.trace.pipeline.schedules`) raises :class:`Refused` with ``reason``: an
    exercise checker runs a learner's function this way, however the function got hold of them, in any thread. It
    yields a :class:`Refusal` that counts the times they were asked.

    Example:
        >>> from asynclab.trace.pipeline.schedules import simulate
        >>> with refusing("work it out") as refusal:
        ...     simulate("gpipe", 2, 2)
        Traceback (most recent call last):
        ...
        asynclab.grading.refusal.Refused: work it out
        >>> refusal.asked, len(simulate("gpipe", 2, 2))  # it answers again afterwards
        (1, 8)
    """
    with _IN_FORCE.lock:
        if not _IN_FORCE.hooked:
            sys.addaudithook(_IN_FORCE.hook)
            _IN_FORCE.hooked = True
    refusal = Refusal(reason)
    _IN_FORCE.stack.append(refusal)
    try:
        yield refusal
    finally:
        _IN_FORCE.stack.remove(refusal)
