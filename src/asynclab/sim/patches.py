"""The one place that patches torch and the standard library: a table of all that is replaced, and how it is put in place.

The simulation replaces torch.cuda's streams, events and devices, and PyTorch's device-generic ``torch.Event``, ``torch.Stream`` and
``torch.accelerator`` (:mod:`asynclab.sim.cuda`), the host's clocks and
``time.sleep`` while a check runs (they read the host's simulated time), ``threading.Thread.run`` and ``join``, and ``threading.Condition``'s
``notify`` and ``wait`` (threads started in a check put new tensors on the simulated GPU and keep host clocks of their
own, which a join or a wake-up brings together), timeit's and torch.utils.benchmark's clock defaults, the tensor types for which an optimizer and ``clip_grad_norm_`` take their multi-tensor
path and how they group tensors by device (a simulated GPU's tensors take it, as a GPU's do), the caching host
allocator's ``torch._C._host_emptyCache`` (the simulated process's pinned blocks go back), and a check
counts the host's waits by wrapping ``synchronize``. :data:`TABLE` lists all of it, and grading's tamper check watches
the same names. Besides, while a check runs, the clocks an answer bound before it (``from time import perf_counter``)
look themselves up in ``time`` (:func:`answer_clocks`). A prediction of a lesson's experiment refuses fresh
Python processes and torch.distributed instead of reaching a real driver: :data:`REFUSED` lists those.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any, Iterator

__all__ = ["ACCELERATOR", "CLOCK_DEFAULTS", "CPU_CLOCKS", "FOREACH", "HOST_CACHE", "Installed", "REFUSED", "TIME_FUNCTIONS", "answer_clocks", "install_present", "clock_defaults", "settle_benchmark_timer", "is_time_function", "TABLE", "TORCH_CUDA", "WAITS", "WALL_CLOCKS", "install", "owner_of", "patched",
           "replaced"]

#: torch.cuda's names that have stand-ins on a simulated GPU.
TORCH_CUDA = ("Stream", "Event", "StreamContext", "device", "device_of", "stream", "set_stream", "set_device", "current_stream",
              "default_stream", "current_device", "synchronize", "_sleep", "empty_cache", "set_sync_debug_mode",
              "get_sync_debug_mode", "get_device_capability", "get_device_name", "get_device_properties", "is_bf16_supported",
              "is_available", "device_count", "memory_allocated", "max_memory_allocated", "memory_reserved",
              "max_memory_reserved", "reset_peak_memory_stats", "is_current_stream_capturing", "CUDAGraph", "graph")
#: What a prediction (a lesson's experiment on the simulated H100, never a check) refuses instead of reaching a real
#: driver or a GPU of its own: owner -> names (asynclab.sim.refusals). Patched here too, through
#: :func:`patched`, but not watched by grading's tamper check, which :data:`TABLE` alone feeds.
REFUSED = {"subprocess": ("Popen",), "torch.distributed": ("init_process_group",)}
#: torch.accelerator's names (PyTorch 2.6 and later) that have stand-ins on a simulated GPU.
ACCELERATOR = ("current_accelerator", "is_available", "device_count", "current_device_index", "current_device_idx",
               "set_device_index", "set_device_idx", "current_stream", "set_stream", "synchronize")
#: The ``time`` module's wall clocks, and how many of their units make a millisecond.
WALL_CLOCKS = {"perf_counter": 1e-3, "monotonic": 1e-3, "time": 1e-3, "perf_counter_ns": 1e6, "monotonic_ns": 1e6,
               "time_ns": 1e6}
#: Its CPU-time clocks: they stop while the host sleeps (``time.sleep``, a blocking event's wait).
CPU_CLOCKS = {"process_time": 1e-3, "thread_time": 1e-3, "process_time_ns": 1e6, "thread_time_ns": 1e6}
#: Where a check counts the host's waits (with ``torch.cuda.synchronize``): each owner's ``synchronize``.
WAITS = ("torch.cuda", "torch.cuda.Stream", "torch.cuda.Event", "torch.accelerator")
#: Functions whose default arguments hold a clock of ``time``, bound when they were defined: while a check runs they
#: default to the clock that reads the host's simulated time.
CLOCK_DEFAULTS = ("timeit.timeit", "timeit.repeat", "timeit.Timer.__init__",
                  "torch.utils.benchmark.utils.timer.Timer.__init__")
#: Where PyTorch picks its multi-tensor (foreach) kernels by a tensor's type and groups tensors by their device (in
#: C++, where a simulated GPU's tensor lives on the CPU): the optimizers, and clip_grad_norm_ through its helpers.
FOREACH = {"torch.optim.optimizer": ("_foreach_supported_types", "_group_tensors_by_device_and_dtype"),
           "torch.utils._foreach_utils": ("_foreach_supported_types",),
           "torch.nn.utils.clip_grad": ("_group_tensors_by_device_and_dtype",)}
#: The caching host allocator's cache, given back to the driver (PyTorch 2.5 and later): a simulated process's own.
HOST_CACHE = {"torch._C": ("_host_emptyCache",)}
#: Where Python hands a result from one thread to another besides a Condition and a join (see asynclab.sim.handoffs):
#: the item or the result carries the sender's time to the receiver; a thread waiting in a selector, or for another
#: process, holds no one back.
THREAD_HANDOFFS = {"queue.Queue": ("put", "get"), "queue": ("SimpleQueue",),
            "concurrent.futures.Future": ("set_result", "set_exception", "result", "exception"),
            "asyncio.BaseEventLoop": ("call_soon_threadsafe",), "selectors.DefaultSelector": ("select",),
            "multiprocessing.connection": ("wait",)}
#: Everything that is ever patched: owner (its import path) -> the names replaced on it. Besides these, a check
#: points the names of ``time``'s functions that an answer bound before it ran (``from time import perf_counter``,
#: a default argument, ``functools.partial``) at the ``time`` module's own (:func:`answer_clocks`).
TABLE: dict[str, tuple[str, ...]] = {
    "torch.cuda": TORCH_CUDA,
    "torch": ("Event", "Stream"),  # PyTorch's device-generic event and stream (2.4 and later)
    "time": ("sleep", *WALL_CLOCKS, *CPU_CLOCKS, "clock_gettime", "clock_gettime_ns"),
    "timeit": ("default_timer",),
    **{path: ("__defaults__",) for path in CLOCK_DEFAULTS},
    "threading.Thread": ("run", "join"),
    "threading.Condition": ("notify", "wait"),
    **THREAD_HANDOFFS,
    **{path: ("synchronize",) for path in WAITS[1:]},
    "torch.accelerator": ACCELERATOR,
    **FOREACH,
    **HOST_CACHE,
}
#: The ``time`` functions that read or spend the host's time.
TIME_FUNCTIONS = frozenset(TABLE["time"])
_ABSENT = object()


def owner_of(path: str, imported: bool = False) -> Any:
    """The object at an import path (a module, or a class in one), as it is now; None where it does not exist (or,
    with ``imported``, where its module has not been imported yet).

    Example:
        >>> owner_of("threading.Thread").__name__, owner_of("no_such_module") is None
        ('Thread', True)
    """
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found: Any = sys.modules.get(module) if imported else importlib.import_module(module)
        except ImportError:
            continue
        if found is None:
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
        unknown = sorted(set(stand_ins) - set(TABLE.get(path, ())) - set(REFUSED.get(path, ())))
        if unknown:
            raise ValueError(f"{path}.{unknown[0]} is not in the table of what asynclab patches")
        self.path, self.owner = path, owner_of(path)
        self.originals = {name: getattr(self.owner, name) for name in stand_ins}
        self._own = {name: _own(self.owner, name) for name in stand_ins}
        for name, stand_in in stand_ins.items():
            setattr(self.owner, name, stand_in)

    def undo(self) -> None:
        """Put the originals back (a name the owner only inherited is removed again)."""
        for name, own in self._own.items():
            if own is _ABSENT:
                delattr(self.owner, name)
            else:
                setattr(self.owner, name, own)


def _own(owner: Any, name: str) -> Any:
    """What ``owner`` itself holds under ``name`` (a function's ``__defaults__`` too), or _ABSENT if it inherits it."""
    if name in vars(owner):
        return vars(owner)[name]
    return getattr(owner, name) if name.startswith("__") else _ABSENT


def install(path: str, stand_ins: dict[str, Any]) -> Installed:
    """Put ``stand_ins`` (name -> object) in place on the owner at ``path``, until the result's ``undo()``.

    Example:
        >>> import time
        >>> done = install("time", {"sleep": lambda s: None})
        >>> time.sleep(100), done.undo(), time.sleep is done.originals["sleep"]
        (None, None, True)
    """
    return Installed(path, stand_ins)


def install_present(path: str, stand_ins: dict[str, Any]) -> Installed | None:
    """:func:`install` of those of ``stand_ins`` that the owner at ``path`` has in this PyTorch (a name it lacks is
    left out); None where it has none of them.

    Example:
        >>> install_present("time", {"no_such_clock": lambda: 0.0}) is None
        True
    """
    owner = owner_of(path)
    present = {name: obj for name, obj in stand_ins.items() if owner is not None and hasattr(owner, name)}
    return install(path, present) if present else None


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


def is_time_function(value: Any) -> bool:
    """Whether ``value`` is one of the ``time`` module's own clocks or ``sleep`` (not a stand-in).

    Example:
        >>> import time
        >>> is_time_function(time.perf_counter), is_time_function(lambda: 0.0)
        (True, False)
    """
    return (type(value).__name__ == "builtin_function_or_method" and getattr(value, "__module__", None) == "time"
            and getattr(value, "__name__", None) in TIME_FUNCTIONS)


def _looked_up(value: Any) -> Any:
    """``value`` with each of ``time``'s functions in it (itself, or a ``functools.partial`` of it) made to look the
    function up in ``time`` when called; anything else as it is."""
    import functools
    import time

    if is_time_function(value):
        name = value.__name__

        def clock(*args: Any, **kwargs: Any) -> Any:
            return getattr(time, name)(*args, **kwargs)
        clock.__name__ = clock.__qualname__ = name
        return clock
    if isinstance(value, functools.partial) and is_time_function(value.func):
        return functools.partial(_looked_up(value.func), *value.args, **value.keywords)
    return value


def _synchronized_timer() -> float:
    """torch.utils.benchmark's timer where a GPU is available: wait for the GPU, then read the time."""
    import time

    import torch

    torch.cuda.synchronize()
    return time.perf_counter()


def settle_benchmark_timer() -> None:
    """torch.utils.benchmark picks its clock when it is first imported: where a GPU is available, one that waits for
    the GPU first. Imported inside a simulation it picked that one; on a machine without a GPU its Timer gets the
    plain clock back once the simulation has ended (else its next timing asks for a driver that is not there)."""
    module = sys.modules.get("torch.utils.benchmark.utils.timer")
    plain = importlib.import_module("timeit").default_timer
    if module is None or getattr(module, "timer", plain) is plain:
        return
    import torch

    if torch.cuda.is_available():
        return
    waits, module.timer = module.timer, plain
    init = module.Timer.__init__
    init.__defaults__ = tuple(plain if d is waits else d for d in (init.__defaults__ or ()))


def clock_defaults() -> list[Installed]:
    """Put in place, for a check, default arguments of :data:`CLOCK_DEFAULTS` that look their clock up when called
    (``timeit.timeit(...)`` then reads the clock the simulation put in ``time``). torch.utils.benchmark's Timer,
    imported on a machine without a GPU, gets the timer it has where a GPU is available: one that waits for the GPU
    first. Undo each when the check ends."""
    done = []
    for path in CLOCK_DEFAULTS:
        fn = owner_of(path, imported=True)  # a module imported later binds the clock then in place
        defaults = getattr(fn, "__defaults__", None)
        if defaults and any(is_time_function(d) for d in defaults):
            clock = _synchronized_timer if path.startswith("torch.") else None
            done.append(install(path, {"__defaults__": tuple((clock or _looked_up(d)) if is_time_function(d) else d
                                                             for d in defaults)}))
    return done


@contextlib.contextmanager
def answer_clocks(answers: tuple) -> Iterator[list[str]]:
    """While a check runs: in each function among ``answers`` (its module's names, its default arguments, the
    variables it closes over), every one of ``time``'s functions bound before the check ran looks itself up in
    ``time`` when called, as ``time.perf_counter()`` does. On a GPU that is the same clock; on the simulated one, the
    host's simulated time. Yields what was rebound; everything is back as it was after the block.

    Example:
        >>> from time import perf_counter
        >>> def timed():
        ...     return perf_counter()
        >>> with answer_clocks((timed,)) as rebound:
        ...     rebound
        ['perf_counter']
        >>> perf_counter.__module__
        'time'
    """
    undo: list = []
    try:
        for fn in answers:
            undo += _rebind_in(fn)
        yield [name for name, _ in undo]
    finally:
        for _, restore in reversed(undo):
            restore()


def _rebind_in_class(cls: type) -> list[tuple[str, Any]]:
    """Rebind ``time``'s functions held as attributes of a class the answer made (``clock = time.perf_counter``)."""
    undo = []
    for name, value in list(vars(cls).items()):
        new = _looked_up(value)
        if new is not value:
            setattr(cls, name, staticmethod(new))  # called as self.clock(), as the builtin is (no self passed)
            undo.append((f"{cls.__name__}.{name}", lambda n=name, v=value: setattr(cls, n, v)))
    return undo


def _rebind_in(fn: Any) -> list[tuple[str, Any]]:
    """Rebind ``time``'s functions in ``fn``'s globals, defaults and closure (a ``functools.partial``: in its
    arguments, and in the function it wraps); (name, undo) for each."""
    import functools

    if isinstance(fn, functools.partial):
        state = fn.__reduce__()[2]  # (func, args, keywords, dict): what __setstate__ takes back
        new = (state[0], tuple(map(_looked_up, state[1])), {k: _looked_up(v) for k, v in (state[2] or {}).items()},
               state[3])
        undo = _rebind_in(fn.func)
        if new[1:3] != (state[1], state[2] or {}):
            fn.__setstate__(new)
            undo.append(("partial", lambda: fn.__setstate__(state)))
        return undo
    if not (callable(fn) and hasattr(fn, "__globals__")):
        return []
    undo = []
    space = fn.__globals__
    for name, value in list(space.items()):
        new = _looked_up(value)
        if new is not value:
            space[name] = new
            undo.append((name, lambda n=name, v=value: space.__setitem__(n, v)))
        elif isinstance(value, type) and any(getattr(v, "__globals__", None) is space for v in vars(value).values()):
            undo += _rebind_in_class(value)  # a class the answer made (its methods share the answer's globals)
    for attr in ("__defaults__", "__kwdefaults__"):
        old = getattr(fn, attr)
        if old:
            new_values = tuple(map(_looked_up, old)) if attr == "__defaults__" else \
                {k: _looked_up(v) for k, v in old.items()}
            if new_values != old:
                setattr(fn, attr, new_values)
                undo.append((attr, lambda a=attr, o=old: setattr(fn, a, o)))
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a variable not assigned yet
            continue
        new = _looked_up(value)
        if new is not value:
            cell.cell_contents = new
            undo.append(("closure", lambda c=cell, v=value: setattr(c, "cell_contents", v)))
    return undo
