"""Lesson 08 exercise checkers: the fix a diagnosis ranks first, and a logging line that does not make the host wait."""
from __future__ import annotations

import functools
import math
import numbers
import random
from typing import Any, Callable

from asynclab.grading.backend import run_answer
from asynclab.grading.checks import Verdict, exercise
from asynclab.trace.read.events import a_type
from asynclab.trace.analysis.findings import CATALOGUE
from asynclab.grading.hostreads import count_reads, host_waits

#: How late each step's loss is written on the GPU (a spin kernel runs ahead of it, every step).
STEP_LATE_MS = 5.0
#: How close the saving read off the diagnosis must be (a share of it): the diagnosis prints ms to three decimals.
SAVING_TOLERANCE = 0.02


@functools.lru_cache(maxsize=1)
def baseline_diagnosis() -> dict[str, Any]:
    """The diagnosis of the reference trace of the step with its four mistakes (what the exercise shows), made
    here by :func:`asynclab.diagnose.diagnose`, as the learner's is.

    Example:
        >>> baseline_diagnosis()["findings"][0]["kind"]
        'dataloader_stall'
    """
    from asynclab.course import reference
    from asynclab.trace.analysis.diagnose import diagnose

    return diagnose(reference.trace(8, "stage0")).as_dict()


def _saving_hint(ms: float, right: dict[str, Any], d: dict[str, Any]) -> str:
    lost = right["lost_ms_per_step"]
    if abs(ms - right["share"]) <= 0.01:
        return "that is the share of the step; give the milliseconds per step"
    if abs(ms * 1e3 - lost) <= SAVING_TOLERANCE * lost:
        return "that looks like seconds; give milliseconds"
    near = {"that is the whole step; a fix saves only the time its finding loses": d["step_ms"],
            "that is all the idle time; a fix saves only its own finding's part of it": d["idle_ms_per_step"]}
    close = {hint: abs(ms - v) for hint, v in near.items() if abs(ms - v) <= SAVING_TOLERANCE * v}
    if close:  # the nearer of the two (a step that idles almost all the time is both)
        return min(close, key=close.get)
    return f"read the finding's lost_ms_per_step: the diagnosis says {lost:.3f} ms"


@exercise("08.first_fix")
def first_fix(kind: Any, saving_ms: Any) -> Verdict:
    """Which finding's fix saves the most per step in the reference diagnosis of lesson 08's step, and how many ms
    per step does the diagnosis say it saves (within :data:`SAVING_TOLERANCE`)?

    Example:
        >>> first_fix("host_sync", 1.0).right
        False
    """
    d = baseline_diagnosis()
    findings = d["findings"]
    right = max(findings, key=lambda f: f["lost_ms_per_step"])
    if not isinstance(kind, str):
        hint = " (a Finding's name is its .kind)" if hasattr(kind, "kind") else ""
        return Verdict(False, f"give the finding's kind as a string, such as \"host_sync\", not {a_type(kind)}{hint}.")
    if kind not in CATALOGUE:
        return Verdict(False, f"{kind!r} is not a finding kind; the kinds are {', '.join(CATALOGUE)}.")
    found = {f["kind"]: f for f in findings}
    if kind not in found:
        return Verdict(False, f"the diagnosis found no {kind}; it names {', '.join(found)}.")
    if kind != right["kind"]:
        return Verdict(False, f"fixing {kind} saves {found[kind]['lost_ms_per_step']:.3f} ms per step, by the "
                              f"diagnosis; another finding loses more. The findings are sorted: look at the first.")
    if isinstance(saving_ms, bool) or not isinstance(saving_ms, numbers.Real) or not math.isfinite(saving_ms):
        what = f"{saving_ms!r}" if isinstance(saving_ms, float) else a_type(saving_ms)  # nan, inf: floats, not finite
        return Verdict(False, f"give the saving as a number of milliseconds (a finite one), not {what}.")
    lost = right["lost_ms_per_step"]
    if abs(saving_ms - lost) > SAVING_TOLERANCE * lost:
        return Verdict(False, f"{kind} is the one; {saving_ms:g} ms per step is not what the diagnosis says it "
                              f"loses: {_saving_hint(float(saving_ms), right, d)}.")
    return Verdict(True, f"{kind}: {lost:.1f} ms of a {d['step_ms']:.1f} ms step, {100 * right['share']:.0f}% of it. "
                         "Section 3 measures what the fix really saves.")


def _windows(values: list[float], every: int) -> list[float | None]:
    """What a right logger returns at each step: the mean of the last ``every`` values at multiples of ``every``."""
    return [sum(values[i + 1 - every:i + 1]) / every if (i + 1) % every == 0 else None for i in range(len(values))]


def _logged(b: Any, make_logger: Callable, every: int, values: Any) -> tuple[list, int]:
    """A training loop's logging: each step's loss is written on the GPU late (behind a spin kernel queued that
    step), then a fresh logger gets it; returns ``(what the logger returned at each step, the host's reads and
    waits)``. A first run, uncounted, warms up the kernels and the pinned-memory cache, as a notebook's loop has
    after its first steps; a wait for memory the caching allocator hands out can then no longer hide a race."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    dev = torch.device("cuda", torch.cuda.current_device())

    def pinned() -> list:  # one pinned tensor per step and run, each made whole, before the run starts
        return [torch.tensor([v]).pin_memory() for v in values.tolist()]

    def late_loss(value: Any) -> Any:  # the check's own work, kept out of what counts the learner's reads
        with _disable_current_modes():
            b.late(STEP_LATE_MS)
            return value.to(dev, non_blocking=True)[0]

    def loop(losses: list) -> list:
        log, out = make_logger(every), []
        for step, value in enumerate(losses, start=1):
            out.append(log(step, late_loss(value)))
        return out

    with host_waits():  # the warm-up's waits are the check's own
        torch.cuda.synchronize()
        loop(pinned())
        torch.cuda.synchronize()
    counted = pinned()
    try:
        with host_waits() as waits:
            result, reads = count_reads(loop, counted)
    finally:
        torch.cuda.synchronize()
    return result, max(reads, waits[0])


def _wrong_values(got: list, want: list[float | None], every: int) -> str | None:
    for step, (g, w) in enumerate(zip(got, want), start=1):
        if w is None and g is not None:
            return f"step {step} returned {a_type(g)}; return None between logging steps (every {every} steps)"
        if w is not None and (isinstance(g, bool) or not isinstance(g, numbers.Real)):
            return f"step {step} returned {a_type(g)}; return the mean loss as a Python float at steps {every}, " \
                   f"{2 * every}, ..."
        if w is not None and not abs(g - w) <= 1e-4 * max(1.0, abs(w)):  # NaN (memory not yet written) is wrong
            return f"step {step}: the mean of the last {every} losses is {w:.4f}, yours {g:.4f}"
    return None


@exercise("08.quiet_logger")
def quiet_logger(make_logger: Callable) -> Verdict:
    """Check ``make_logger(every)``: it returns ``log(step, loss)``, called after steps 1, 2, 3, ... with the step's
    loss (a 0-d tensor on the GPU, written late: see :func:`_logged`); at every ``every``-th step it returns the mean of the last ``every``
    losses as a Python float, and None at the others. The host may read or wait once per logging step, no more.

    Example:
        >>> quiet_logger(lambda every: lambda step, loss: loss.item()).right
        False
    """
    import torch

    every = random.Random().randint(3, 6)
    values = torch.rand(4 * every + 1)
    want = _windows(values.tolist(), every)
    ran, _, verdict = run_answer(make_logger, "make_logger", _logged, every, values)
    if verdict is not None:
        return verdict
    got, reads = ran
    if not isinstance(got, list) or len(got) != len(want):
        return Verdict(False, "log(step, loss) must return a value at every step (None between logging steps).")
    prints = len(values) // every
    if reads > prints:
        return Verdict(False, f"every={every}: {reads} host reads or waits in {len(values)} steps, for {prints} "
                              "logging lines: keep the sum on the GPU and read it only when you log.")
    wrong = _wrong_values(got, want, every)
    if wrong:
        return Verdict(False, f"every={every}: {wrong}.")
    return Verdict(True, f"every={every}: {prints} reads in {len(values)} steps, one per logging line; between them "
                         "the host runs ahead of the GPU.")
