"""A lesson's named experiments (``experiments.EXPERIMENTS``) on the simulated H100 ("simulated H100 (predicted)"), for
``LessonRun.explore`` and the benchmarks; the predicted table (docs/predicted.md) runs the notebooks' cells instead."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from asynclab.course import registry
from asynclab.course.experiments import ExperimentRun, TraceFolder
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.simulate import simulate

__all__ = ["LABEL", "VALUES", "VALUE_FIGURES", "timed_only", "Prediction", "predict_one", "simulated"]

#: How every number of this module is labelled.
LABEL = "simulated H100 (predicted)"

#: Experiments whose results count wrong values: they run with values computed (slower); the others are timed only.
VALUES = {("03", "missing_wait"), ("04", "race"), ("04", "allocator_reuse"), ("05", "early_read"),
          ("05", "source_mutation")}
#: Experiments whose claims read figures from a profiler trace of their own: predicted with a folder for their traces
#: (the simulated GPU's, as torch.profiler would write them), which is deleted afterwards.
TRACED = {("05", "dataloader")}
#: Figures an experiment counts or compares from the tensors' values: an experiment timed only cannot give them (None).
VALUE_FIGURES = ("wrong_chunks", "wrong", "same_outputs")

@dataclass
class Prediction:
    """One experiment on the simulated H100: its ``results`` (None where it could not run, ``limit`` says why) and
    how many seconds the simulation took on this machine.

    Example:
        >>> Prediction("01", "async_error", None, "a subprocess", 0.1).ran
        False
    """

    lesson: str
    key: str
    results: Any
    limit: str | None = None
    seconds: float = 0.0
    label: str = field(default=LABEL)

    @property
    def ran(self) -> bool:
        """True when the experiment ran on the simulated GPU."""
        return self.limit is None


def _where(err: BaseException) -> str:
    """`` (in <package>)``: the package outside the course and torch whose code reached the refused call, if any."""
    import traceback

    names = [f.filename for f in traceback.extract_tb(err.__traceback__)]
    outside = [n for n in names if "site-packages" in n and "/torch/" not in n]
    return f" (in {outside[-1].split('site-packages/')[-1].split('/')[0]})" if outside else ""


def predict_one(lesson: str | int, key: str, values: bool | None = None) -> Prediction:
    """Run one experiment of a lesson's ``EXPERIMENTS`` on the simulated H100 (two for a two-GPU lesson), on
    device ``"cuda"``, with its GPU sizes; ``values`` (default: :data:`VALUES`) computes the tensors' values.

    Example:
        >>> predict_one(1, "host_runs_ahead").results["n"]  # doctest: +SKIP
        8192
    """
    item = registry.lesson(lesson)
    row = next((r for r in item.module("experiments").EXPERIMENTS if r.key == key), None)
    if row is None:
        raise ValueError(f"lesson {item.number} has no experiment {key!r}")
    values = (item.number, key) in VALUES if values is None else values
    with tempfile.TemporaryDirectory(prefix="asynclab_predicted_") as tmp:
        traces = TraceFolder(Path(tmp) if (item.number, key) in TRACED else None, gpu=True)
        results, limit, seconds = simulated(lambda: row.run(ExperimentRun(torch.device("cuda"), traces, False, {})),
                                            gpus=min(2, max(1, row.gpus, item.gpus)), values=values)
    return Prediction(item.number, key, results if values else timed_only(results), limit, seconds)


def timed_only(results: Any) -> Any:
    """``results`` of a run that computed no values: the figures counted or compared from values
    (:data:`VALUE_FIGURES`), at any depth, None.

    Example:
        >>> timed_only({"small": {"speedup": 4.0, "same_outputs": False}, "wrong": 0})
        {'small': {'speedup': 4.0, 'same_outputs': None}, 'wrong': None}
    """
    if isinstance(results, dict):
        return {k: None if k in VALUE_FIGURES else timed_only(v) for k, v in results.items()}
    return results


def simulated(call: Callable[[], Any], gpus: int = 1, values: bool = False) -> tuple[Any, str | None, float]:
    """Run ``call()`` on the simulated H100 (``gpus`` of them), with what it does not cover refused: returns
    ``(what it returned, None, seconds)``, or ``(None, why it could not run there, seconds)``.

    Example:
        >>> results, limit, _ = simulated(lambda: torch.ones(4, device="cuda").sum().item(), values=True)
        >>> results, limit
        (4.0, None)
    """
    box: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        simulate(lambda: box.setdefault("results", call()), gpus=gpus, values=values)
    except SimulationLimit as err:
        return None, f"the simulation refuses {err.call}{_where(err)}", time.perf_counter() - t0
    except ValueError as err:
        if "nothing ran" not in str(err):
            raise
        return None, "runs nothing on the GPU (a CPU experiment)", time.perf_counter() - t0
    return box.get("results"), None, time.perf_counter() - t0
