"""asynclab: see what the GPU really did. Helpers for the course notebooks and for any torch.profiler trace.

The package has five layers, each importing only those below it (``tests/test_layout.py`` holds them to it):

- ``asynclab.trace``: read a profiler trace, its event table, metrics, timelines, schedules, diagnosis (no torch);
- ``asynclab.gpu`` and ``asynclab.sim``: the machine's own GPUs, and the simulated one;
- ``asynclab.course``: the lesson registry, references, lesson runs, running the notebooks;
- ``asynclab.grading``: claims and exercise checks, fresh-process grades, classrooms;
- ``asynclab.lessons.<name>`` and ``asynclab.cli`` on top.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

__version__ = "0.1.0"

#: The short names the lessons use, each the alias of one module where it lives: ``al.metrics`` and
#: ``from asynclab.metrics import bubble_fraction`` (as a learner writes it) give ``asynclab.trace.analysis.metrics``,
#: the same module. Only these: the package itself imports every module by where it lives (tests/test_layout.py).
ALIASES = {
    "events": "trace.read.events", "ranks": "trace.read.ranks", "metrics": "trace.analysis.metrics",
    "findings": "trace.analysis.findings", "diagnose": "trace.analysis.diagnose", "timeline": "trace.draw.timeline",
    "schedules": "trace.pipeline.schedules", "record": "gpu.record", "timing": "gpu.timing",
    "parallel": "gpu.parallel", "hardware": "gpu.hardware", "reference": "course.reference",
    "experiments": "course.experiments", "lessonrun": "course.lessonrun", "launch": "course.launch",
    "checks": "grading.checks",
}
# Names are imported on first use, so that reading and drawing a trace never imports torch.
_NAMES = {
    "grading.checks": ("check", "claim"),
    "course.notebooks": ("save_figure",),
    "trace.analysis.diagnose": ("Diagnosis", "diagnose"),
    "gpu.hardware": ("inventory", "report"),
    "course.registry": ("lesson_map",),
    "course.begin": ("start",),
    "gpu.parallel": ("Parallel",),
    "trace.analysis.metrics": ("bubble_fraction", "busy_time", "busy_together", "comm_overlap", "concurrency",
                               "concurrent_time", "hidden_fraction", "host_lead", "idle_gaps", "launch_latency",
                               "launchers", "overlap", "step_breakdown", "stream_waits", "summary", "time_breakdown",
                               "top_kernels"),
    "gpu.record": ("record",),
    "sim.simulate": ("simulate",),
    "trace.draw.timeline": ("Timeline", "draw_timeline"),
    "gpu.timing": ("benchmark_timer", "compare", "event_timer", "fmt_ms", "naive_timer", "paired_ratio",
                   "sync_timer"),
    "trace": ("Trace", "TraceError", "TraceWarning", "load_trace"),
}
_HOME = {name: module for module, names in _NAMES.items() for name in names}
#: The package's rooms, which ``al.<room>`` gives too.
_ROOMS = ("course", "gpu", "grading", "lessons", "sim", "trace")
__all__ = sorted(_HOME) + sorted(set(ALIASES) - set(_HOME)) + ["course", "grading", "lessons", "trace"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(f"asynclab.{_HOME[name]}"), name)
    elif name in ALIASES or name in _ROOMS:
        value = importlib.import_module(f"asynclab.{ALIASES.get(name, name)}")
    else:
        raise AttributeError(f"module 'asynclab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Aliases:
    """``import asynclab.metrics`` (a short name of :data:`ALIASES`) gives the module where it lives: a finder on
    ``sys.meta_path`` and the loader of what it finds (the import system asks for these methods only; importing
    ``importlib.abc`` for their base classes would cost every ``import asynclab`` several ms)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        prefix, _, short = fullname.partition(".")
        if prefix != "asynclab" or short not in ALIASES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        module = importlib.import_module(f"asynclab.{ALIASES[spec.name.partition('.')[2]]}")
        spec.loader_state = module.__spec__  # the import system writes the alias's spec on the module
        return module

    def exec_module(self, module: Any) -> None:  # the module ran where it lives: it keeps its own spec
        module.__spec__ = module.__spec__.loader_state


sys.meta_path.append(_Aliases())


class _Facade(types.ModuleType):
    """The package's module: a function of :data:`_NAMES` keeps its name when an alias that is the same word is
    imported (``import asynclab.diagnose`` leaves ``al.diagnose`` the function; the module is in
    ``sys.modules``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOME and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
