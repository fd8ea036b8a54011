"""asynclab: see what the GPU really did. Helpers for the course notebooks and for any torch.profiler trace."""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Names are imported on first use, so that reading and drawing a trace never imports torch.
_SUBMODULES = ("checks", "course", "diagnose", "events", "experiments", "findings", "hardware", "launch", "lessonrun", "lessons", "metrics",
               "parallel", "ranks", "record", "reference", "schedules", "timeline", "timing", "trace")
_NAMES = {
    "checks": ("check", "claim"),
    "course": ("save_figure",),
    "diagnose": ("Diagnosis", "diagnose"),
    "hardware": ("inventory", "report"),
    "lessons": ("lesson_map",),
    "lessonrun": ("start",),
    "parallel": ("Parallel",),
    "metrics": ("bubble_fraction", "busy_time", "busy_together", "comm_overlap", "concurrency", "concurrent_time", "hidden_fraction",
                "host_lead", "idle_gaps", "launch_latency", "launchers", "overlap", "step_breakdown", "stream_waits", "summary",
                "time_breakdown",
                "top_kernels"),
    "record": ("record",),
    "timeline": ("Timeline", "draw_timeline"),
    "timing": ("benchmark_timer", "compare", "event_timer", "fmt_ms", "naive_timer", "paired_ratio", "sync_timer"),
    "trace": ("Trace", "TraceError", "TraceWarning", "load_trace"),
}
_HOME = {name: module for module, names in _NAMES.items() for name in names}
__all__ = sorted(_HOME) + list(_SUBMODULES)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(f"asynclab.{_HOME[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"asynclab.{name}")
    else:
        raise AttributeError(f"module 'asynclab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
