"""The one place that patches torch and the standard library: a table of all that is replaced, and how it is put in place.

The simulation replaces torch.cuda's streams, events and devices (:mod:`asynclab.sim.cuda`), the host's clocks and
``time.sleep`` while a check runs (they read the host's simulated time), ``threading.Thread.run`` (threads started in
a check put new tensors on the simulated GPU), and a check counts the host's waits by wrapping ``synchronize``.
Nothing else is patched, and :data:`TABLE` lists all of it: grading's tamper check watches the same names.
"""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator

__all__ = ["CPU_CLOCKS", "Installed", "TABLE", "TORCH_CUDA", "WAITS", "WALL_CLOCKS", "install", "owner_of", "patched",
           "replaced"]

#: torch.cuda's names that have stand-ins on a simulated GPU.
TORCH_CUDA = ("Stream", "Event", "StreamContext", "device", "stream", "set_stream", "set_device", "current_stream",
              "default_stream", "current_device", "synchronize", "_sleep", "empty_cache", "set_sync_debug_mode",
              "get_sync_debug_mode", "get_device_capability", "get_device_name", "is_bf16_supported",
              "is_available", "device_count")
#: The ``time`` module's wall clocks, and how many of their units make a millisecond.
WALL_CLOCKS = {"perf_counter": 1e-3, "monotonic": 1e-3, "time": 1e-3, "perf_counter_ns": 1e6, "monotonic_ns": 1e6,
               "time_ns": 1e6}
#: Its CPU-time clocks: they stop while the host sleeps (``time.sleep``, a blocking event's wait).
CPU_CLOCKS = {"process_time": 1e-3, "thread_time": 1e-3, "process_time_ns": 1e6, "thread_time_ns": 1e6}
#: Where a check counts the host's waits (with ``torch.cuda.synchronize``): each owner's ``synchronize``.
WAITS = ("torch.cuda", "torch.cuda.Stream", "torch.cuda.Event", "torch.accelerator")
#: Everything that is ever patched: owner (its import path) -> the names replaced on it.
TABLE: dict[str, tuple[str, ...]] = {
    "torch.cuda": TORCH_CUDA,
    "time": ("sleep", *WALL_CLOCKS, *CPU_CLOCKS),
    "timeit": ("default_timer",),
    "threading.Thread": ("run",),
    **{path: ("synchronize",) for path in WAITS[1:]},
}
_ABSENT = object()


def owner_of(path: str) -> Any:
    """The object at an import path (a module, or a class in one), as it is now; None where it does not exist.

    Example:
        >>> owner_of("threading.Thread").__name__, owner_of("no_such_module") is None
        ('Thread', True)
    """
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
        return found
    return None


def replaced() -> list[tuple[str, str]]:
    """Every (owner, name) that :data:`TABLE` lists.

    Example:
        >>> ("timeit", "default_timer") in replaced()
        True
    """
    return [(path, name) for path, names in TABLE.items() for name in names]


class Installed:
    """Stand-ins in place on one owner of :data:`TABLE`, the originals they replaced, and :meth:`undo`."""

    def __init__(self, path: str, stand_ins: dict[str, Any]):
        unknown = sorted(set(stand_ins) - set(TABLE.get(path, ())))
        if unknown:
            raise ValueError(f"{path}.{unknown[0]} is not in the table of what asynclab patches")
        self.path, self.owner = path, owner_of(path)
        self.originals = {name: getattr(self.owner, name) for name in stand_ins}
        self._own = {name: vars(self.owner).get(name, _ABSENT) for name in stand_ins}
        for name, stand_in in stand_ins.items():
            setattr(self.owner, name, stand_in)

    def undo(self) -> None:
        """Put the originals back (a name the owner only inherited is removed again)."""
        for name, own in self._own.items():
            if own is _ABSENT:
                delattr(self.owner, name)
            else:
                setattr(self.owner, name, own)


def install(path: str, stand_ins: dict[str, Any]) -> Installed:
    """Put ``stand_ins`` (name -> object) in place on the owner at ``path``, until the result's ``undo()``.

    Example:
        >>> import time
        >>> done = install("time", {"sleep": lambda s: None})
        >>> time.sleep(100), done.undo(), time.sleep is done.originals["sleep"]
        (None, None, True)
    """
    return Installed(path, stand_ins)


@contextlib.contextmanager
def patched(path: str, stand_ins: dict[str, Any]) -> Iterator[Installed]:
    """``stand_ins`` in place on the owner at ``path`` for a block; the originals are back after it, whatever happens.

    Example:
        >>> import timeit
        >>> with patched("timeit", {"default_timer": lambda: 0.0}):
        ...     timeit.default_timer()
        0.0
    """
    done = install(path, stand_ins)
    try:
        yield done
    finally:
        done.undo()
