"""Lesson claims checked on the data shown (strict on references), and exercise answer checks."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from asynclab.course.claims import Claim, ClaimFailed, claim  # noqa: F401 - al.claim's home is the course layer


@dataclass(frozen=True)
class Verdict:
    """Whether an exercise answer is right, with a hint when it is not; ``judged`` is False when the check could not
    judge it here (the answer reached past the simulated GPU), which is never the answer's fault.

    Example:
        >>> print(Verdict(False, "the simulated GPU does not cover X.", judged=False))
        Not judged here: the simulated GPU does not cover X.
    """

    right: bool
    message: str
    judged: bool = True

    def __str__(self) -> str:
        return ("Right: " if self.right else "Not yet: " if self.judged else "Not judged here: ") + self.message

    def _repr_pretty_(self, p, cycle) -> None:  # Jupyter shows the sentence, not the dataclass
        p.text(str(self))


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool, a tensor, NaN or inf), else None.

    A value check compares what this returns, so that NaN, which compares false with everything, never passes.

    Example:
        >>> finite_number(2), finite_number(float("nan")), finite_number(True), finite_number("3")
        (2.0, None, None, None)
    """
    import math
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def raised(err: BaseException) -> Verdict:
    """The verdict for a learner's function that raised ``err``: not yet, saying what it raised, or, when it
    reached past what the simulated GPU covers, that this is the simulation's limit (with what to do).

    Example:
        >>> print(raised(ZeroDivisionError("division by zero")))
        Not yet: your function raised ZeroDivisionError: division by zero
        >>> from asynclab.sim.limits import SimulationLimit
        >>> print(raised(SimulationLimit("tensor.pin_memory()")))  # doctest: +ELLIPSIS
        Not judged here: the simulated GPU does not cover tensor.pin_memory(). This machine has ..., so the check ...
    """
    from asynclab.sim.install import gpus_here
    from asynclab.sim.limits import limit_message

    limit = limit_message(err, gpus_here())
    if limit is not None:
        return Verdict(False, limit, judged=False)
    return Verdict(False, f"your function raised {type(err).__name__}: {err}")


def not_a_function(answer: Any, name: str) -> Verdict | None:
    """The verdict for an ``answer`` that should be the learner's function ``name`` but is not callable (the learner
    passed what it returned, with parentheses); None when it is callable.

    Example:
        >>> print(not_a_function(3, "step"))
        Not yet: pass your function step itself (no parentheses).
        >>> not_a_function(len, "step") is None
        True
    """
    if callable(answer):
        return None
    return Verdict(False, f"pass your function {name} itself (no parentheses).")


def brief(text: str, limit: int = 60) -> str:
    """``text`` cut to at most ``limit`` characters at a space or a comma, never inside a number or a word.

    Example:
        >>> brief("[1.25, 2.5, 3.75, 5.0]", 14)
        '[1.25, 2.5, ...'
    """
    if len(text) <= limit:
        return text
    cut = max(text.rfind(" ", 0, limit - 3), text.rfind(",", 0, limit - 3) + 1)
    return (text[:cut] if cut > 0 else text[:limit - 4]).rstrip() + " ..."


def not_judged(call: str, instead: str = "") -> Verdict:
    """The verdict for an answer that reached past the simulated GPU with ``call``: it cannot be judged here.

    Example:
        >>> print(not_judged("a clock bound before the check"))  # doctest: +ELLIPSIS
        Not judged here: the simulated GPU does not cover a clock bound before the check. This machine has ...
    """
    from asynclab.sim.limits import SimulationLimit

    return raised(SimulationLimit(call, instead))


def set_answer(answer, right: set, choices: set, *, noun: str, example: str, why: str, wrong: str,
               shown_in: str = "the list") -> Verdict:
    """Check an answer that picks names out of ``choices``: right when it is exactly ``right``.

    ``noun`` names the choices ("op", "workload"), ``example`` shows one valid answer, ``why`` is said
    when the answer is right, ``wrong`` describes a pick that is not in ``right``, and ``shown_in`` says
    where the learner found the choices.

    Example:
        >>> print(set_answer({"a"}, {"a", "b"}, {"a", "b", "c"}, noun="letter", example='{"a"}', why="", wrong="not vowels"))
        Not yet: 1 of 2 right; 1 missing.
    """
    if isinstance(answer, str) or not all(isinstance(x, str) for x in (answer or ())):
        return Verdict(False, f"give a set of {noun} names, e.g. {example}.")
    chosen = set(answer or ())
    unknown = chosen - set(choices)
    if unknown:
        return Verdict(False, f"not {noun}s of {shown_in}: {sorted(unknown)}; copy the names exactly.")
    if chosen == right:
        return Verdict(True, why)
    return Verdict(False, f"{len(chosen & right)} of {len(right)} right"
                          + (f"; {wrong}: {sorted(chosen - right)}" if chosen - right else "")
                          + (f"; {len(right - chosen)} missing" if right - chosen else "") + ".")


_EXERCISES: dict[str, Callable[..., Verdict]] = {}


def exercises() -> dict[str, Callable[..., Verdict]]:
    """Every registered exercise checker by name (a copy: changing it changes no checker).

    Only the checkers of lessons already imported are there; :func:`load_all` imports every lesson's.

    Example:
        >>> "00.replayed_lessons" in load_all()
        True
    """
    return dict(_EXERCISES)


def load_all() -> dict[str, Callable[..., Verdict]]:
    """Import every lesson's exercises, so that all checkers are registered; returns them (see :func:`exercises`).

    Example:
        >>> len(load_all()) > 10
        True
    """
    from asynclab.course import registry as lessons

    for item in lessons.LESSONS:  # importing a lesson's exercises module registers its checkers
        if item.has("exercises"):
            item.module("exercises")
    return exercises()


def load_lesson(number: str) -> None:
    """Import one lesson's exercises (``"05"``), registering its checkers; a lesson without exercises, or no such
    lesson, registers nothing.

    Example:
        >>> load_lesson("00"); "00.replayed_lessons" in exercises()
        True
    """
    from asynclab.course import registry as lessons

    for item in lessons.LESSONS:
        if item.number == number and item.has("exercises"):
            item.module("exercises")


def exercise(name: str):
    """Register an exercise checker under ``name`` (``"<lesson number>.<exercise>"``).

    Example:
        >>> @exercise("99.demo")
        ... def _demo(answer):
        ...     return Verdict(answer == 42, "42 it is" if answer == 42 else "think of 6 x 7")
        >>> check("99.demo", 42).right
        True
    """

    def register(fn: Callable[..., Verdict]) -> Callable[..., Verdict]:
        _EXERCISES[name] = fn
        return fn

    return register


def check(name: str, *answer, **kwargs) -> Verdict:
    """Check a learner's answer to exercise ``name``; returns a Verdict that prints as a sentence.

    Example:
        >>> print(check("00.replayed_lessons", -1))  # doctest: +ELLIPSIS
        Not yet: ...
    """
    load_lesson(name.split(".")[0])  # its lesson's module registers the real checker, over any registered before
    if name not in _EXERCISES:
        load_all()
    if name not in _EXERCISES:
        raise KeyError(f"no exercise {name!r}; known: {', '.join(sorted(_EXERCISES))}")
    import inspect

    fn = _EXERCISES[name]
    try:
        inspect.signature(fn).bind(*answer, **kwargs)
    except TypeError:
        params = ", ".join(inspect.signature(fn).parameters)
        return Verdict(False, f"this check takes ({params}); see the exercise text.")
    from asynclab.grading import compiled
    from asynclab.sim.patches import answer_clocks

    given = (*answer, *kwargs.values())
    is_compiled = compiled.compiled_in(given)
    if is_compiled and compiled.too_old():
        return Verdict(False, f"{compiled.too_old()}.", judged=False)
    with answer_clocks(given), compiled.eager_compile():  # clocks the answer bound early read the check's time
        verdict = fn(*answer, **kwargs)
    if is_compiled and verdict.judged:
        verdict = dataclasses.replace(verdict, message=f"{verdict.message.rstrip()} ({compiled.EAGER_NOTE}.)")
    return verdict
