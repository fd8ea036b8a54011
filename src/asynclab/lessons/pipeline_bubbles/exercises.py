"""Lesson 07 exercise checkers: predict a pipeline's step time, and pick the micro-batches that shrink its bubble."""
from __future__ import annotations

import math
import numbers
import random
from typing import Any, Callable

from asynclab.trace.pipeline import schedules
from asynclab.grading.checks import Verdict, exercise, not_a_function, raised
from asynclab.grading.refusal import Refused, refusing
from asynclab.trace.read.events import a_type

#: Configurations each checker draws at random (new ones every call).
TRIALS = 12

#: The simulator the checkers compare with, kept here: a learner's function that replaces schedules.simulate or
#: schedules.simulate_trace changes what it calls, not what the checker compares with.
_SIMULATE, _SIMULATE_TRACE = schedules.simulate, schedules.simulate_trace


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise _NotANumber(f"{what} must be a finite number, not {a_type(value)}")
    return float(value)


class _NotANumber(TypeError):
    """The learner's function returned something else than a number."""


def _call(fn: Callable, *args: Any, refusal: str) -> tuple[Any, Verdict | None]:
    """The learner's ``fn(*args)``, with the simulator refusing to answer for it (``refusal`` says why): a function
    that asked it, in any thread, gets the refusal, whatever it did with it."""
    with refusing(refusal) as asked:
        try:
            got, verdict = fn(*args), None
        except (Refused, _NotANumber) as err:
            got, verdict = None, Verdict(False, f"{err}.")
        except Exception as err:  # noqa: BLE001 - the learner's code
            got, verdict = None, raised(err)
    if asked.asked:
        return None, Verdict(False, f"{refusal}.")
    return got, verdict


@exercise("07.step_time")
def step_time(predict: Callable) -> Verdict:
    """Check ``predict(p, m, t_f, t_b)``: the step time of a GPipe schedule with ``p`` stages, ``m`` micro-batches,
    and ``t_f``/``t_b`` the forward/backward time of one micro-batch on one stage (ms).

    It is compared with the schedule simulator (:func:`asynclab.trace.pipeline.schedules.simulate`) on configurations drawn at
    random, to rounding (1e-6); the simulator is off limits while ``predict`` runs.

    Example:
        >>> step_time(lambda p, m, t_f, t_b: m * (t_f + t_b)).right  # no bubble: too fast
        False
    """
    if (verdict := not_a_function(predict, "predict")) is not None:
        return verdict
    rng = random.Random()
    for _ in range(TRIALS):
        p, m = rng.randint(2, 8), rng.randint(1, 32)
        t_f = round(rng.uniform(0.5, 5.0), 2)
        t_b = round(t_f * rng.uniform(1.5, 2.5), 2)
        got, verdict = _call(predict, p, m, t_f, t_b, refusal="work it out from p, m, t_f and t_b: the checker "
                                                               "compares with the simulator")
        if verdict is not None:
            return verdict
        try:
            got = _number(got, "predict(...)")
        except _NotANumber as err:
            return Verdict(False, f"{err}.")
        truth = max(op.end for op in _SIMULATE("gpipe", p, m, t_f, t_b))
        if abs(got / truth - 1) > 1e-6:
            ideal = m * (t_f + t_b)
            hint = ("that is the time with no bubble: the first micro-batch must go through every stage before the "
                    "last stage is busy" if abs(got / ideal - 1) <= 0.01 else
                    "count how many stage-times the last micro-batch waits for, forward and backward")
            return Verdict(False, f"p={p}, m={m}, t_f={t_f}, t_b={t_b}: you said {got:.2f} ms, the simulator "
                                  f"{truth:.2f} ms; {hint}.")
    return Verdict(True, f"{TRIALS} random pipelines, each the simulator's step time: a GPipe step takes "
                         "(m + p - 1) stage-times of forward and backward.")


@exercise("07.pick_m")
def pick_m(choose: Callable) -> Verdict:
    """Check ``choose(p, target)``: the fewest micro-batches ``m`` that bring a GPipe pipeline of ``p`` stages to
    a bubble fraction (idle share of the step) of at most ``target``.

    Checked against the closed form (p-1)/(m+p-1) and, for the chosen ``m``, against the bubble measured with
    :func:`asynclab.trace.analysis.metrics.bubble_fraction` on the simulator's trace, on configurations drawn at random.

    Example:
        >>> pick_m(lambda p, target: 1000).right  # enough, but not the fewest
        False
    """
    from asynclab.trace.analysis.metrics import bubble_fraction

    if (verdict := not_a_function(choose, "choose")) is not None:
        return verdict
    rng = random.Random()
    for _ in range(TRIALS):
        p = rng.randint(2, 8)
        target = round(rng.uniform(0.05, 0.4), 3)
        while abs((p - 1) / target - round((p - 1) / target)) < 1e-6:  # no target exactly on a boundary
            target = round(rng.uniform(0.05, 0.4), 3)
        got, verdict = _call(choose, p, target, refusal="work it out from p and the target: the checker compares "
                                                         "with the formula and the simulator")
        if verdict is not None:
            return verdict
        if isinstance(got, bool) or not isinstance(got, numbers.Integral) or got < 1:
            return Verdict(False, f"return a number of micro-batches (a positive integer, e.g. from math.ceil), not "
                                  f"{a_type(got)} {got!r}.")
        best = next(m for m in range(1, 10_000) if (p - 1) / (m + p - 1) <= target + 1e-12)
        measured = bubble_fraction(_SIMULATE_TRACE("gpipe", p, int(got))).mean
        if measured > target + 1e-9:
            return Verdict(False, f"p={p}, target {target:.1%}: with m={got} the simulated bubble is {measured:.1%}, "
                                  f"over the target. Write the bubble as a function of m and solve for m.")
        if got != best:
            return Verdict(False, f"p={p}, target {target:.1%}: m={got} works, but m={best} is enough, and every "
                                  f"extra micro-batch adds its own overhead (lesson 07, section 3).")
    return Verdict(True, f"{TRIALS} random pipelines: each m is the fewest whose bubble, (p-1)/(m+p-1), measured on "
                         "the simulated trace, is within the target.")
