"""The harness of an experiment cell: the learner's own PyTorch code timed and traced, live on a GPU or on the
simulated card without one, beside the learner's guess and the recording made from the same cell.

The workload stays in the notebook: ``setup()`` builds what the code needs (tensors, streams, events), and each
workload function is the code that queues GPU work. The harness times every workload from launch to
``torch.cuda.synchronize()`` on every GPU (median of ``repeats``, after ``warmup`` runs), then profiles one more run of each, inside
``record_function(<its name>)`` up to its synchronize. The same loop runs on a GPU and inside :func:`asynclab.sim.simulate.simulate`, whose
clocks, synchronize and profiler are the simulated card's: one code path, two machines.

A cell's recording (``reference/cells.json`` and ``reference/cell_<name>.json.gz`` in the lesson's package folder)
is made by executing the notebook on a GPU with ``ASYNCLAB_RECORD=1`` (every cell), or ``ASYNCLAB_RECORD=stale`` (the
cells with no recording, or one made from other code); it keeps a fingerprint of the code it ran, and ``tests/course/test_cells.py`` fails when a cell no longer matches its recording.
"""
from __future__ import annotations

import ast
import datetime as _dt
import dis
import hashlib
import inspect
import itertools
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

__all__ = ["CELLS_FILE", "RECORD_ENV", "Measured", "global_names", "fingerprint", "median_of", "source_fingerprint", "run_cell", "settled",
           "setup_params", "recorded", "in_order_of",
           "write_recording", "guess_text", "answer_line"]

#: The file, in a lesson's reference folder, that holds the recordings of its experiment cells.
CELLS_FILE = "cells.json"
#: Set to 1 while a notebook runs on a GPU to record its experiment cells into the lesson's reference folder.
RECORD_ENV = "ASYNCLAB_RECORD"


#: The instructions that read a global name (a function's own globals, or a module's names at its top level).
_GLOBAL_READS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})

#: Fields of Python's syntax tree that say nothing about what code does, or that some Python versions lack:
#: a fingerprint leaves them out, so that every Python (3.9 to 3.13) gives a function the same fingerprint.
_NOT_CODE = frozenset({"ctx", "type_comment", "type_params", "kind", "type_ignores"})


def _canonical(node: Any) -> Any:
    """A syntax tree as plain lists, fields by name, without :data:`_NOT_CODE` and without empty values (Python 3.13's
    ``ast.dump`` leaves those out, 3.12's adds ``type_params``: a dump would differ between versions)."""
    if isinstance(node, ast.AST):
        fields = [(name, getattr(node, name, None)) for name in node._fields if name not in _NOT_CODE]
        return [type(node).__name__] + [[name, _canonical(value)] for name, value in fields if value not in (None, [])]
    if isinstance(node, list):
        return [_canonical(item) for item in node]
    return repr(node)


def _normalized(source: str) -> str:
    """A function's definition without formatting, comments or decorators, the same on every Python version."""
    tree = ast.parse(textwrap.dedent(source))
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), tree)
    if node is not tree:
        node.decorator_list = []
    return json.dumps(_canonical(node))


def source_fingerprint(sources: Mapping[str, str]) -> str:
    """The fingerprint of a cell's experiment from its functions' definitions (``role -> source``): 16 hex digits.

    Formatting and comments do not change it; any change to the code does.

    Example:
        >>> a = source_fingerprint({"setup": "def setup():\\n    return 1  # one"})
        >>> a == source_fingerprint({"setup": "def setup():\\n    return (1)"}), len(a)
        (True, 16)
        >>> a == source_fingerprint({"setup": "def setup():\\n    return 2"})
        False
    """
    parts = {role: _normalized(src) for role, src in sorted(sources.items())}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def global_names(code: Any) -> set[str]:
    """The global names a code object and the code nested in it (lambdas, comprehensions) read: not attribute names,
    so that ``s.wave`` does not reach a notebook's own ``wave``.

    Example:
        >>> sorted(global_names(compile("def f(s): return helper(s.x)", "<cell>", "exec").co_consts[0]))
        ['helper']
    """
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(i.argval for i in dis.get_instructions(c) if i.opname in _GLOBAL_READS)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    return names


def _with_helpers(roles: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """``roles`` plus every function of the same module (the notebook) that they call, by ``"uses <name>"``; a
    decorated function (``@torch.no_grad()``) is read through its wrapper."""
    out = dict(roles)
    todo = [inspect.unwrap(fn) for fn in roles.values()]  # a decorated function's own code and globals
    while todo:
        fn = todo.pop()
        for name in sorted(global_names(getattr(fn, "__code__", None) or compile("", "", "exec"))):
            found = getattr(fn, "__globals__", {}).get(name)
            if inspect.isfunction(found) and found.__module__ == fn.__module__ and f"uses {name}" not in out \
                    and found not in roles.values():
                out[f"uses {name}"] = found
                todo.append(found)
    return out


def fingerprint(workloads: Mapping[str, Callable[..., Any]], setup: Callable[..., Any] | None) -> str | None:
    """:func:`source_fingerprint` of live functions (their source from ``inspect``), with the functions of the same
    module they call; None where a function's source cannot be read (a lambda on a shared line, a builtin).

    Example:
        >>> def setup():
        ...     return 3
        >>> fingerprint({}, setup) == source_fingerprint({"setup": inspect.getsource(setup)})
        True
    """
    roles = _with_helpers(dict(workloads) | ({"setup": setup} if setup is not None else {}))
    try:
        sources = {role: inspect.getsource(fn) for role, fn in roles.items()}
        return source_fingerprint(sources)
    except (OSError, TypeError, SyntaxError):
        return None


@dataclass
class Measured:
    """What :func:`run_cell` measured: each workload's median time (ms) and its repeats, what it returned (the median over the repeats, see
    :func:`median_of`), the trace
    of one profiled run of each, and where it ran (``"live on <GPU>"`` or ``"simulated <card> (predicted)"``).

    Example:
        >>> m = Measured({"a": 2.0}, {"a": [2.0, 2.1]}, {"a": None}, None, "simulated H200 (predicted)", None)
        >>> m.ms["a"], m.predicted
        (2.0, True)
    """

    ms: dict[str, float]
    times: dict[str, list[float]]
    returned: dict[str, Any]
    trace: Any
    where: str
    code: str | None
    reference: dict[str, Any] | None = None
    same_code: bool = False
    notes: list[str] = field(default_factory=list)
    recording_trace: Path | None = None
    failed: str | None = None
    #: ``setup``'s arguments as the cell defines them (``def setup(n=2**20)`` gives ``{"n": 1048576}``), so that a
    #: figure or a claim reads a size from the code that ran, not a copy of it
    params: dict[str, Any] = field(default_factory=dict)
    #: the cell's name (``run.measure``'s ``name=``) and its lesson's number, where a lesson's cell ran it
    name: str | None = None
    lesson: str | None = None
    #: the recording's trace as :meth:`recording` last loaded it: ((its path, its modification time), the trace)
    _loaded: Any = field(default=None, repr=False, compare=False)

    @property
    def predicted(self) -> bool:
        return self.where.startswith("simulated")

    @property
    def recorded_on(self) -> str | None:
        """``"recorded on <GPU>"`` when the cell has a recording, else None."""
        return f"recorded on {self.reference['gpu']}" if self.reference else None

    def table(self, fmt: Callable[[float], str] | None = None) -> str:
        """Each workload's median time: this run's, and the recording's beside it.

        Example:
            >>> m = Measured({"a": 2.0}, {"a": [2.0]}, {"a": None}, None, "live on X", None, {"gpu": "H", "ms": {"a": 1.5}})
            >>> print(m.table())
            workload  live on X  recorded on H
            a         2.000 ms   1.500 ms
        """
        fmt = fmt or (lambda v: f"{v:.3f} ms")
        if self.failed:
            return self.failed
        head = ["workload", self.where] + ([self.recorded_on] if self.reference else [])
        rows = [head]
        for name, ms in self.ms.items():
            ref = (self.reference or {}).get("ms", {}).get(name)
            rows.append([name, fmt(ms)] + ([fmt(ref) if ref is not None else "-"] if self.reference else []))
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines + self.notes)

    def __str__(self) -> str:
        return self.table()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython shows the table, not the dataclass
        printer.text(self.table())

    def recording(self) -> "Measured | None":
        """The cell's recording as a Measured (its times, and its trace, loaded from the package), or None.

        Example:
            >>> Measured({}, {}, {}, None, "live on X", None).recording() is None
            True
        """
        if not self.reference:
            return None
        trace = None
        if self.recording_trace is not None and Path(self.recording_trace).is_file():
            from asynclab.trace import load_trace

            path = Path(self.recording_trace)
            key = (str(path), path.stat().st_mtime_ns)
            if self._loaded is None or self._loaded[0] != key:  # a cell's claims and answers ask for it again and again
                self._loaded = (key, load_trace(path))
            trace = self._loaded[1]
        ref = self.reference
        ms, times, returned = (in_order_of(dict(ref.get(part, {})), getattr(self, part))
                               for part in ("ms", "times", "returned"))
        return Measured(ms, times, returned, trace,
                        self.recorded_on or "", ref.get("fingerprint"),
                        params=dict(self.params) if self.same_code else {})  # same code, same defaults

    def answer(self, guess: Any, of: Callable[["Measured"], Any] | str, what: str, unit: str = "ms",
               fmt: str = "{:.3g}") -> str:
        """The answer to a prediction: ``guess`` beside this run's figure and the recording's. ``of`` reads the figure
        from a Measured (``lambda m: m.ms["a"] / m.ms["b"]``; a workload's name reads its median time); a number
        is shown with ``fmt`` and ``unit``, a text as it is.

        Example:
            >>> m = Measured({"a": 2.0}, {}, {}, None, "live on X", None, {"gpu": "H", "ms": {"a": 3.0}}, same_code=True)
            >>> print(m.answer(None, "a", "a's time"))
            a's time
              your guess     none yet: write it in the cell above
              live on X      2 ms
              recorded on H  3 ms
            >>> m.same_code = False  # the learner changed the cell's code: the recording is of the code before
            >>> print(m.answer(4, "a", "a's time").splitlines()[-1])
              recorded on H, of the original code  3 ms
        """
        mine, ref = self._pair(of, unit, fmt, what)
        return answer_line(what, guess, mine, ref, unit)

    def figure(self, of: Callable[["Measured"], Any] | str, what: str, unit: str = "ms", fmt: str = "{:.3g}") -> str:
        """A figure of this run beside the recording's, as :meth:`answer` shows it, without a guess.

        Example:
            >>> print(Measured({"a": 2.0}, {}, {}, None, "live on X", None).figure("a", "a's time"))
            a's time
              live on X  2 ms
        """
        mine, ref = self._pair(of, unit, fmt, what)
        return answer_line(what, None, mine, ref, unit, ask=False)

    def _pair(self, of: Callable[["Measured"], Any] | str, unit: str, fmt: str,
              what: str = "") -> tuple[tuple[str, str], Any]:
        from asynclab.course.predictlog import log_figure

        pick = (lambda m: m.ms[of]) if isinstance(of, str) else of

        def show(value: Any) -> str:
            return f"{fmt.format(value)} {unit}".strip() if isinstance(value, (int, float)) else str(value)

        theirs = self.recording()
        where = "" if theirs is None else theirs.where if self.same_code else f"{theirs.where}, of the original code"
        try:
            recorded = pick(theirs) if theirs is not None else None
        except (KeyError, AttributeError):  # the learner's code has workloads the recording lacks
            theirs = recorded = None
        ref = (where, show(recorded)) if theirs is not None else None
        if self.failed:
            return (self.where, self.failed), ref
        mine = pick(self)
        log_figure(self, what, mine, recorded, unit)  # only where ASYNCLAB_PREDICTED_LOG asks, for a prediction
        return (self.where, show(mine)), ref

    def claim(self, statement: str, test: Callable[["Measured"], bool], evidence: Callable[["Measured"], str]) -> None:
        """Check a claim of the lesson on this run (``test(measured)``; it reports, never raises: a GPU may differ, a
        prediction may miss) and, where the cell still runs its original code, strictly on its recording.

        Example:
            >>> m = Measured({"a": 2.0}, {}, {}, None, "simulated H200 (predicted)", "c", {"gpu": "H", "ms": {"a": 3.0}, "fingerprint": "c"}, True)
            >>> m.claim("a takes over 1 ms", lambda m: m.ms["a"] > 1, lambda m: f"{m.ms['a']:g} ms")
            PASS (predicted): a takes over 1 ms [2 ms]
            PASS (recorded on H): a takes over 1 ms [3 ms]
            >>> Measured({"a": 2.0}, {}, {}, None, "live on X", None).claim("a is short", lambda m: m.ms["a"] < 1,
            ...                                                             lambda m: f"{m.ms['a']:g} ms")
            DIFFERS (live on X): a is short [2 ms]
        """
        from asynclab.course.claims import claim
        from asynclab.course.predictlog import log_claim

        mine = None
        if self.failed:
            print(f"n/a: {statement} [{self.failed}]")
        else:
            mine = test(self)
            claim(statement, mine, evidence=evidence(self), live=True,
                  source="predicted" if self.predicted else self.where)
        theirs = self.recording() if self.same_code else None
        if theirs is not None:
            verdict = test(theirs)
            if not self.failed:
                log_claim(self, statement, mine, verdict)  # where ASYNCLAB_PREDICTED_LOG asks
            claim(statement, verdict, evidence=evidence(theirs), live=False, source=theirs.where)

    def timeline(self, workload: str | None = None, title: str | None = None, **kwargs: Any) -> Any:
        """This run's profiled trace drawn (zoomed on one workload's range when named); returns the Timeline.

        Example:
            >>> m = Measured({}, {}, {}, None, "live on X", None)
            >>> m.timeline()  # doctest: +SKIP
        """
        from asynclab.trace.draw.timeline import draw_timeline

        if self.trace is None:
            print(self.failed or "no trace to draw")
            return None
        what = f"{workload}, " if workload else ""
        return draw_timeline(self.trace, annotation=workload, title=title or f"{what}{self.where}", **kwargs)


#: The wall clock, bound before a simulation replaces ``time.perf_counter`` with the simulated card's.
_WALL = time.perf_counter


class SimulationProgress:
    """A line on stderr that says what the simulation is running, once it has run for ``after_s`` seconds (a learner
    without a GPU waits seconds for a long cell: the line says why, and how far it got).

    Example:
        >>> p = SimulationProgress("H200", after_s=3600)
        >>> p("one stream", 1, 5), p.done()  # quiet: an hour has not passed
        (None, None)
    """

    #: Seconds of simulating before the line shows.
    AFTER_S = 2.0

    def __init__(self, card: str, after_s: float | None = None):
        self.card, self.start, self.shown = card, _WALL(), False
        self.after_s = self.AFTER_S if after_s is None else after_s

    def __call__(self, what: str, k: int, n: int) -> None:
        elapsed = _WALL() - self.start
        if elapsed >= self.after_s:
            sys.stderr.write(f"\rsimulating {what} ({k} of {n}) on the simulated {self.card}: {elapsed:.0f} s ")
            sys.stderr.flush()
            self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write(f"\rsimulated in {_WALL() - self.start:.0f} s{' ' * 40}\n")
            sys.stderr.flush()


def _timing_loop(workloads: Mapping[str, Callable[..., Any]], setup: Callable[[], Any] | None, repeats: int,
                 warmup: int, path: str | None, progress: Callable[[str, int, int], None] | None = None,
                 settle: bool = False) -> dict[str, Any]:
    """Build the state, time each workload from launch to synchronize, then profile one run of each; ``progress``
    hears of each run (what, which, of how many). With ``settle`` (the simulated card, a machine without noise), a
    workload whose last two repeats took the same time and returned the same value has settled: its remaining
    repeats are that repeat again, not simulated again (:func:`settled`); and where one repeat is asked for, the
    profiled run is that repeat (the simulated profiler adds nothing to a run's time), not a run more."""
    from torch.profiler import record_function

    from asynclab.gpu.record import record

    tell = progress or (lambda what, k, n: None)
    profiled_is_timed = settle and repeats == 1  # see the docstring
    runs, done = len(workloads) * (warmup + (1 if profiled_is_timed else repeats + 1)), itertools.count(1)
    state = setup() if setup is not None else None
    sync = _synchronize_all

    def call(name: str, fn: Callable[..., Any]) -> Any:
        tell(repr(name), next(done), runs)
        return fn(state) if setup is not None else fn()

    times: dict[str, list[float]] = {}
    returned: dict[str, list[Any]] = {}
    for name, fn in workloads.items():
        for _ in range(warmup):
            call(name, fn)
            sync()
        times[name], returned[name] = [], []
        for _ in range(0 if profiled_is_timed else repeats):
            if settle and settled(times[name], returned[name]):
                times[name].append(times[name][-1])
                returned[name].append(returned[name][-1])
                next(done)
                continue
            sync()
            t0 = time.perf_counter()
            returned[name].append(_plain(call(name, fn)))
            sync()
            times[name].append((time.perf_counter() - t0) * 1e3)

    def traced() -> None:
        for name, fn in workloads.items():
            with record_function(name):  # the range ends when the GPUs are done: it holds all of the run's work
                t0 = time.perf_counter()
                got = call(name, fn)
                sync()
                if profiled_is_timed:
                    times[name].append((time.perf_counter() - t0) * 1e3)
                    returned[name].append(_plain(got))

    trace = record(traced, warmup=0, steps=1, path=path)
    return {"times": times, "returned": {k: median_of(v) for k, v in returned.items()}, "trace": trace}


def settled(times: list[float], returned: list[Any]) -> bool:
    """Whether a workload's last two repeats on the simulated card took the same time (to a part in a million)
    and returned the same value: the machine has no noise, so the next repeat would be the same again.

    Example:
        >>> settled([5.2, 5.0, 5.0000000001], [None, None, None]), settled([5.0, 5.1], [1, 1]), settled([5.0], [1])
        (True, False, False)
        >>> settled([5.0, 5.0], [1, 2])
        False
    """
    if len(times) < 2:
        return False
    a, b = times[-2], times[-1]
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-9) and returned[-2] == returned[-1]


def _synchronize_all() -> None:
    """``torch.cuda.synchronize`` on every GPU: a workload may queue work on more than one."""
    for device in range(torch.cuda.device_count()):
        torch.cuda.synchronize(device)


def median_of(values: list[Any]) -> Any:
    """What the repeats of a workload returned, as one value: the median of numbers (and of each key of dicts of
    numbers), else the last run's.

    Example:
        >>> median_of([3.0, 1.0, 2.0]), median_of([{"a": 1, "b": 5}, {"a": 3, "b": 4}, {"a": 2, "b": 6}])
        (2.0, {'a': 2, 'b': 5})
        >>> median_of([None, [1, 2]])
        [1, 2]
    """
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if values and all(number(v) for v in values):
        return statistics.median(values)
    if values and all(isinstance(v, dict) for v in values) and all(v.keys() == values[0].keys() for v in values) \
            and all(number(x) for v in values for x in v.values()):
        return {k: statistics.median(v[k] for v in values) for k in values[0]}
    return values[-1] if values else None


def _plain(value: Any) -> Any:
    """A workload's result as the recording keeps it: numbers, texts, lists of numbers, dicts of them, or None."""
    if isinstance(value, torch.Tensor):
        return None
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, bool)) for v in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(v, (int, float, bool, str)) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


def _checked(workloads: Any, setup: Any, repeats: Any, warmup: Any) -> dict[str, Callable[..., Any]]:
    if callable(workloads):
        workloads = {getattr(workloads, "__name__", "workload"): workloads}
    if not isinstance(workloads, Mapping) or not workloads or not all(
            isinstance(k, str) and callable(v) for k, v in workloads.items()):
        raise TypeError("measure needs a function, or a dict of name -> function, of the code to time")
    if setup is not None and not callable(setup):
        raise TypeError(f"setup must be a function that builds what the code needs, not {type(setup).__name__}")
    if not (isinstance(repeats, int) and 1 <= repeats <= 100 and isinstance(warmup, int) and 0 <= warmup <= 10):
        raise ValueError(f"repeats must be 1 to 100 and warmup 0 to 10 (got {repeats!r}, {warmup!r})")
    return dict(workloads)


def run_cell(workloads: Any, setup: Callable[[], Any] | None = None, *, live: bool, card: str = "H100",
             gpus: int = 1, repeats: int = 5, warmup: int = 1, values: bool = False,
             path: str | os.PathLike | None = None) -> Measured:
    """Time and trace ``workloads`` (a function, or ``{name: function}``; each takes ``setup()``'s result when a
    ``setup`` is given): live on this machine's GPU when ``live``, else on ``gpus`` simulated ``card`` GPUs, its
    times predicted. ``values=False`` runs the simulation timed only (fast): what the host reads back is garbage.

    Example:
        >>> def setup():
        ...     return torch.ones(1024, 1024, device="cuda")
        >>> def square(x):
        ...     return (x @ x).sum().item()
        >>> m = run_cell({"square": square}, setup, live=False, repeats=2, values=True)
        >>> m.where, m.returned["square"], m.ms["square"] > 0
        ('simulated H100 (predicted)', 1073741824.0, True)
    """
    workloads = _checked(workloads, setup, repeats, warmup)
    out, params = str(path) if path is not None else None, setup_params(setup)
    if live:
        from asynclab.gpu import hardware

        box = _timing_loop(workloads, setup, repeats, warmup, out)
        where = f"live on {hardware.inventory().gpus[0].name}"
    else:
        from asynclab.sim.limits import SimulationLimit
        from asynclab.sim.simulate import run_simulated

        box = {}
        where = f"simulated {card} (predicted)"
        progress = SimulationProgress(card)
        try:
            # the cell's own profiled run is its trace: the whole simulated run's is not made
            run_simulated(lambda: box.update(_timing_loop(workloads, setup, repeats, warmup, out, progress, settle=True)),
                          gpus=gpus, card=card, values=values)
        except SimulationLimit as err:  # our limit, not the learner's mistake: said in one line, nothing measured
            return Measured({}, {}, {}, None, where, fingerprint(workloads, setup), params=params,
                            failed=f"not predicted here: {err}; on a GPU this cell measures it")
        except ValueError as err:
            if "nothing ran" not in str(err):
                raise
            return Measured({}, {}, {}, None, where, fingerprint(workloads, setup), params=params,
                            failed="nothing to time: the code queued no work on the GPU")
        finally:
            progress.done()
    ms = {name: statistics.median(ts) for name, ts in box["times"].items()}
    return Measured(ms, box["times"], box["returned"], box["trace"], where, fingerprint(workloads, setup),
                    params=params)


def setup_params(setup: Callable[..., Any] | None) -> dict[str, Any]:
    """The arguments ``setup`` runs with, as its definition gives them (a measured cell calls ``setup()``).

    Example:
        >>> def setup(n=2**20, spin_ms=20):
        ...     pass
        >>> setup_params(setup), setup_params(None)
        ({'n': 1048576, 'spin_ms': 20}, {})
    """
    if setup is None:
        return {}
    try:
        signature = inspect.signature(setup)
    except (TypeError, ValueError):  # a builtin or a C function: nothing to read
        return {}
    return {name: p.default for name, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}


def in_order_of(theirs: Any, mine: Any) -> Any:
    """``theirs`` with the keys of its dicts (nested ones too) in the order ``mine`` has them, its other keys after:
    a recording's file keeps its keys sorted, and a figure lists the workloads in the order the cell wrote them.

    Example:
        >>> in_order_of({"events": 1, "naive": {"b": 2, "a": 3}}, {"naive": {"a": 0, "b": 0}, "events": 0})
        {'naive': {'a': 3, 'b': 2}, 'events': 1}
    """
    if not isinstance(theirs, dict) or not isinstance(mine, dict):
        return theirs
    keys = [k for k in mine if k in theirs] + [k for k in theirs if k not in mine]
    return {k: in_order_of(theirs[k], mine.get(k)) for k in keys}


def recorded(folder: Path, name: str) -> dict[str, Any] | None:
    """The recording of experiment cell ``name`` in a lesson's reference ``folder``, or None if it has none.

    Example:
        >>> recorded(Path(tempfile.mkdtemp()), "pipeline") is None
        True
    """
    path = Path(folder) / CELLS_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get(name)


def write_recording(folder: Path, name: str, measured: Measured, gpu: str) -> Path:
    """Add (or replace) cell ``name``'s recording in ``folder/cells.json``, with its trace as ``cell_<name>.json.gz``
    (the trace must have been saved by :func:`run_cell` with a ``path``). Returns the cells file.

    Example:
        >>> m = Measured({"a": 2.0}, {"a": [2.0]}, {"a": 1}, None, "live on X", "0123456789abcdef")
        >>> p = write_recording(Path(tempfile.mkdtemp()), "demo", m, "NVIDIA H200")
        >>> json.loads(p.read_text())["demo"]["gpu"]
        'NVIDIA H200'
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cells_path = folder / CELLS_FILE
    cells = json.loads(cells_path.read_text(encoding="utf-8")) if cells_path.is_file() else {}
    cells[name] = {"gpu": gpu, "torch": torch.__version__, "fingerprint": measured.code, "ms": measured.ms,
                   "times": measured.times, "returned": measured.returned,
                   "date": _dt.datetime.now(_dt.timezone.utc).date().isoformat()}
    source = getattr(measured.trace, "source", None)
    if source and Path(source).is_file():
        (folder / f"cell_{name}.json.gz").write_bytes(Path(source).read_bytes())
    cells_path.write_text(json.dumps(cells, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    return cells_path


def guess_text(guess: Any, unit: str = "") -> str:
    """A learner's guess as the answer line shows it; a missing one asks for it, a wrong type says what is wanted.

    Example:
        >>> guess_text(2, "x"), guess_text(None)
        ('2 x', 'none yet: write it in the cell above')
        >>> guess_text("fast")
        'fast'
    """
    if guess is None or guess is ...:
        return "none yet: write it in the cell above"
    if isinstance(guess, bool) or not isinstance(guess, (int, float, str)):
        return f"not a number or a choice ({type(guess).__name__})"
    return f"{guess:g} {unit}".strip() if isinstance(guess, (int, float)) else guess


def answer_line(what: str, guess: Any, mine: tuple[str, str] | None, reference: tuple[str, str] | None,
                unit: str = "", ask: bool = True) -> str:
    """The answer to a prediction: the guess, then this run's figure and the recording's, each with where it is from.

    Example:
        >>> print(answer_line("speed-up", 2, ("simulated H200 (predicted)", "1.62 x"), ("recorded on NVIDIA H200", "1.71 x"), "x"))
        speed-up
          your guess                  2 x
          simulated H200 (predicted)  1.62 x
          recorded on NVIDIA H200     1.71 x
    """
    rows = [("your guess", guess_text(guess, unit))] if ask else []
    rows += [pair for pair in (mine, reference) if pair is not None]
    width = max(len(label) for label, _ in rows)
    return "\n".join([what] + [f"  {label.ljust(width)}  {value}" for label, value in rows])
