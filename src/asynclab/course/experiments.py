"""What every lesson's experiments share: devices, spin kernels, percentiles, the table of experiments and run_all."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

import torch

from asynclab.gpu.devices import gpu_count, resolve_device, sync_all
# The recorded experiment cells calibrate their spins with al.experiments.spin_cycles: the harness hands them the timer's.
from asynclab.gpu.timing import spin_cycles

def for_lesson(lesson: str | int) -> ModuleType:
    """The experiments module of a lesson (``asynclab/lessons/<name>/experiments.py``), from the lesson registry.

    Example:
        >>> for_lesson(1).__name__
        'asynclab.lessons.async_dispatch.experiments'
    """
    from asynclab.course import registry as lessons

    return lessons.lesson(lesson).module("experiments")


def with_experiments() -> list[str]:
    """Numbers of the lessons that have experiments (what the recording script can record).

    Example:
        >>> with_experiments()[:3]
        ['01', '02', '03']
    """
    from asynclab.course import registry as lessons

    return [item.number for item in lessons.LESSONS if item.has("experiments")]


def whole_number(name: str, value: Any, lo: int = 1, hi: int | None = None) -> int:
    """``value`` if it is a whole number from ``lo`` to ``hi``; else a ValueError that names the parameter (a
    learner's own parameter in a Try-it cell gets this one line, not an error from deep in torch).

    Example:
        >>> whole_number("chunks", 8)
        8
        >>> whole_number("chunks", 0)
        Traceback (most recent call last):
        ...
        ValueError: chunks must be a whole number of at least 1, not 0
    """
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= lo and (hi is None or value <= hi)
    if not ok:
        span = f"of at least {lo}" if hi is None else f"from {lo} to {hi}"
        raise ValueError(f"{name} must be a whole number {span}, not {value!r}")
    return value


def dig(results: dict[str, Any], *keys: str | int) -> Any:
    """``results[k1][k2]...``, or None where a level is missing (a headline from partial results); a whole number
    picks an item of a list.

    Example:
        >>> dig({"race": {"no wait": {"wrong": 5}}}, "race", "no wait", "wrong"), dig({}, "race", "elements")
        (5, None)
        >>> dig({"step_ms": [3.0, 2.0]}, "step_ms", 1), dig({"step_ms": [3.0]}, "step_ms", 4)
        (2.0, None)
    """
    value: Any = results
    for key in keys:
        if isinstance(key, int) and not isinstance(key, bool):
            value = value[key] if isinstance(value, list) and -len(value) <= key < len(value) else None
        else:
            value = value.get(key) if isinstance(value, dict) else None
    return value


def annotate(name: str):
    """``torch.profiler.record_function(name)``: a labelled bracket on the host's lane of the timeline.

    Example:
        >>> with annotate("my step"):
        ...     pass
    """
    return torch.profiler.record_function(name)


def record_gpu_trace(path: Any, step: Any) -> Any:
    """One profiled run of ``step`` saved to ``path``, with the GPU side of synchronisations (stream waits,
    event syncs) recorded; returns the Trace.

    Example:
        >>> record_gpu_trace("/tmp/x.json.gz", lambda: torch.cuda._sleep(1000))  # doctest: +SKIP
        <Trace ...>
    """
    from asynclab.gpu.record import record

    return record(step, path=path, warmup=0, steps=1, cuda_sync_events=True)


def no_gpu(dev: torch.device, note: str, /, **fields: Any) -> dict[str, Any]:
    """What an experiment returns where it cannot run on ``dev``: the device, a ``note`` that says why, and ``fields``
    (its results, None, or its settings).

    Example:
        >>> no_gpu(torch.device("cpu"), "no CUDA GPU", spin_ms=None)
        {'device': 'cpu', 'note': 'no CUDA GPU', 'spin_ms': None}
    """
    return {"device": str(dev), "note": note, **fields}


def gpu_or_note(device: Any, note: str, /, *, min_gpus: int = 1, **fields: Any) -> tuple[torch.device, Any]:
    """The device an experiment runs on (:func:`resolve_device`), and what it returns instead (:func:`no_gpu`) where
    that is no CUDA GPU or this machine has fewer than ``min_gpus``; None where it can run.

    Example:
        >>> gpu_or_note("cpu", "no CUDA GPU", spin_ms=None)
        (device(type='cpu'), {'device': 'cpu', 'note': 'no CUDA GPU', 'spin_ms': None})
    """
    dev = resolve_device(device)
    if dev.type != "cuda" or (min_gpus > 1 and not gpu_count() >= min_gpus):
        return dev, no_gpu(dev, note, **fields)
    return dev, None


def run_annotated(label: str, fn: Any) -> None:
    """Run ``fn()`` inside ``record_function(label)``, every GPU idle before and finished after, so that the
    label's bracket on the timeline holds exactly that work.

    Example:
        >>> run_annotated("nothing", lambda: None)
    """
    sync_all()
    with annotate(label):
        fn()
        sync_all()


class TraceFolder:
    """Where ``run_all`` writes its traces: ``folder(name, needs=1)`` is ``<out>/<name>.json.gz`` when there is a
    folder and ``needs`` GPUs (0: a trace the CPU records too), else None, so the experiment records nothing;
    ``written`` keeps what was handed out.

    Example:
        >>> folder = TraceFolder(None, gpu=False)
        >>> folder("race") is None, folder.written
        (True, {})
    """

    def __init__(self, out: Any, gpu: bool):
        self.out, self.gpu = out, gpu
        self.written: dict[str, Any] = {}

    def __call__(self, name: str, needs: int = 1) -> Any:
        folder = self.folder(needs)
        return None if folder is None else self.add(name, folder / f"{name}.json.gz")

    def folder(self, needs: int = 1) -> Any:
        """The folder itself when traces that need ``needs`` GPUs are recorded here, else None (for an experiment
        that names its trace files itself).

        Example:
            >>> TraceFolder(Path("/tmp/t"), gpu=False).folder(needs=0), TraceFolder(Path("/tmp/t"), gpu=False).folder()
            (PosixPath('/tmp/t'), None)
        """
        if self.out is None or (needs > 0 and (not self.gpu or torch.cuda.device_count() < needs)):
            return None
        return self.out

    def add(self, name: str, path: Any) -> Path:
        """Keep ``path``, a trace an experiment wrote itself, under ``name``; returns it as a Path.

        Example:
            >>> folder = TraceFolder(Path("/tmp/t"), gpu=False)
            >>> folder.add("stage0", "/tmp/t/stage0.json.gz"), list(folder.written)
            (PosixPath('/tmp/t/stage0.json.gz'), ['stage0'])
        """
        self.written[name] = Path(path)
        return self.written[name]


def run_setup(device: Any, trace_dir: Any, cpu_kwargs: dict[str, dict[str, Any]]
              ) -> tuple[torch.device, dict[str, dict[str, Any]], Any]:
    """What every lesson's ``run_all`` starts with: the device, the sizes for it, and the trace folder (created).

    Example:
        >>> dev, kw, out = run_setup("cpu", None, {"x": {"n": 2}})
        >>> dev.type, kw, out
        ('cpu', {'x': {'n': 2}}, None)
    """
    dev = resolve_device(device)
    out = Path(trace_dir) if trace_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    return dev, (cpu_kwargs if dev.type == "cpu" else {}), out


@dataclass
class ExperimentRun:
    """What one ``run_all`` hands a lesson's own small function (an :class:`Experiment` with ``custom=True``): the
    ``device``, the trace folder ``traces``, ``verbose``, and the ``sizes`` per experiment (``CPU_KWARGS`` on a CPU).

    Example:
        >>> run = ExperimentRun(torch.device("cpu"), TraceFolder(None, gpu=False))
        >>> run.traces("race") is None, run.verbose, run.sizes
        (True, True, {})
    """

    device: torch.device
    traces: TraceFolder
    verbose: bool = True
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Experiment:
    """One row of a lesson's ``EXPERIMENTS`` table: its ``key`` in the results, the function ``fn``, the ``traces``
    it writes (``<trace_dir>/<name>.json.gz``) and how many ``gpus`` they need (0: the CPU records them too).

    :func:`run_all` calls ``fn`` with the sizes ``CPU_KWARGS[key]`` (on a CPU; none on a GPU):
    ``fn(device, **sizes)``, plus ``path=`` (its trace's path, or None where it is not recorded) when it writes
    one trace; with ``trace_fn``, ``fn`` writes none and ``trace_fn(device, path, **CPU_KWARGS[trace_fn's name])``
    records the trace after it. A ``custom`` row's ``fn`` is the lesson's small function for an irregular
    experiment, ``fn(run, **sizes)`` given the :class:`ExperimentRun`; it asks ``run.traces`` for its paths, and its
    ``traces`` may be patterns (``"gpipe_m*"``).

    Example:
        >>> Experiment("race", lambda device, path=None: {}, "race").traces
        ('race',)
    """

    key: str
    fn: Callable[..., Any]
    traces: tuple[str, ...] | str = ()
    gpus: int = 1
    trace_fn: Callable[..., Any] | None = None
    custom: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.traces, str):
            object.__setattr__(self, "traces", (self.traces,))
        if not self.custom and len(self.traces) > 1:
            raise ValueError(f"experiment {self.key!r}: several traces need a custom function")
        if self.trace_fn is not None and len(self.traces) != 1:
            raise ValueError(f"experiment {self.key!r}: a trace_fn records one trace, named in traces")

    def run(self, run: ExperimentRun) -> Any:
        """This row's experiment once, in ``run``; returns its result.

        Example:
            >>> row = Experiment("n", lambda device, n=1: n)
            >>> row.run(ExperimentRun(torch.device("cpu"), TraceFolder(None, gpu=False), sizes={"n": {"n": 3}}))
            3
        """
        sizes = run.sizes.get(self.key, {})
        if self.custom:
            return self.fn(run, **sizes)
        if not self.traces:
            return self.fn(run.device, **sizes)
        if self.trace_fn is None:
            return self.fn(run.device, path=run.traces(self.traces[0], needs=self.gpus), **sizes)
        result = self.fn(run.device, **sizes)
        path = run.traces(self.traces[0], needs=self.gpus)
        if path is not None:
            self.trace_fn(run.device, path, **run.sizes.get(self.trace_fn.__name__, {}))
        return result


def run_all(experiments: Sequence[Experiment], device: Any = None, trace_dir: Any = None, verbose: bool = True, *,
            lesson: str = "", cpu_kwargs: dict[str, dict[str, Any]] | None = None,
            headline: Callable[[dict[str, Any]], Any] | None = None) -> tuple[dict[str, Any], dict[str, Path]]:
    """Run a lesson's table of experiments once, in its order, as the recording script does; a CPU device uses
    ``cpu_kwargs`` (the lesson's ``CPU_KWARGS``).

    Returns ``(results, traces)``: results keyed by each row's ``key``, plus ``"headline"`` (``headline(results)``)
    where the lesson has one; traces ``{name: path}`` of the .json.gz files written into ``trace_dir`` (those
    recorded here: a trace that needs a GPU only on a GPU, one that needs two only with two).

    Example:
        >>> table = [Experiment("double", lambda device, n=1: {"n": 2 * n, "device": str(device)})]
        >>> run_all(table, "cpu", lesson="99", cpu_kwargs={"double": {"n": 3}})
        lesson 99: 1 experiment on cpu, 0 traces
        ({'double': {'n': 6, 'device': 'cpu'}}, {})
    """
    dev, sizes, out = run_setup(device, trace_dir, cpu_kwargs or {})
    run = ExperimentRun(dev, TraceFolder(out, dev.type == "cuda"), verbose, sizes)
    results = {row.key: row.run(run) for row in experiments}
    if headline is not None:
        results["headline"] = headline(results)
    if verbose:
        n = len(experiments)
        print(f"lesson {lesson}: {n} experiment{'s' * (n != 1)} on {dev}, {len(run.traces.written)} traces")
    return results, run.traces.written


def lesson_run_all(lesson: str, experiments: Sequence[Experiment], cpu_kwargs: dict[str, dict[str, Any]],
                   headline: Callable[[dict[str, Any]], Any] | None = None) -> Callable[..., Any]:
    """A lesson's ``run_all(device=None, trace_dir=None, verbose=True) -> (results, traces)``: :func:`run_all` over
    its table, documented from it (the keys, and the traces by name).

    Example:
        >>> lesson_run = lesson_run_all("99", [Experiment("one", lambda device: 1)], {})
        >>> lesson_run("cpu", verbose=False)
        ({'one': 1}, {})
    """
    def lesson_run(device: Any = None, trace_dir: Any = None, verbose: bool = True
                   ) -> tuple[dict[str, Any], dict[str, Path]]:
        return run_all(experiments, device, trace_dir, verbose, lesson=lesson, cpu_kwargs=cpu_kwargs, headline=headline)

    keys = ", ".join(row.key for row in experiments) + (', "headline"' if headline is not None else "")
    traces = sorted(name for row in experiments for name in row.traces)
    returns = textwrap.fill(f"Returns ``(results, traces)``: results keyed {keys}; traces ``{{name: path}}`` of the "
                            f".json.gz files written into ``trace_dir``, of those its GPUs allow: "
                            f"{', '.join(traces) or 'none'}.", 110, initial_indent="    ", subsequent_indent="    ")
    lesson_run.__name__ = lesson_run.__qualname__ = "run_all"
    lesson_run.__module__ = experiments[0].fn.__module__ if experiments else __name__
    lesson_run.__doc__ = f"""Run every lesson {lesson} experiment of ``EXPERIMENTS`` once, in order, as the recording
    script does (:func:`asynclab.course.experiments.run_all`); CPU devices use ``CPU_KWARGS``.

{returns}

    Example:
        >>> results, traces = run_all("cuda", "/tmp/ref{lesson}")  # doctest: +SKIP
        >>> sorted(traces)  # doctest: +SKIP
        {traces!r}
    """
    return lesson_run


__all__ = ["for_lesson", "with_experiments", "whole_number", "dig", "run_setup", "annotate", "record_gpu_trace",
           "TraceFolder", "no_gpu", "gpu_or_note", "run_annotated", "ExperimentRun", "Experiment", "run_all",
           "lesson_run_all", "spin_cycles"]
