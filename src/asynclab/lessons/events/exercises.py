"""Lesson 04 exercise checkers: add the missing event wait to racy code, and read who waited for whom off a trace."""
from __future__ import annotations

from typing import Any, Callable

from asynclab.grading.backend import Backend, run_answer
from asynclab.grading.checks import Verdict, exercise
from asynclab.grading.hostreads import LATE_MS  # how late a checker's producer is: as late as the host-read checks



def _handoff(b: Backend, handoff: Callable) -> tuple[bool, bool, dict[str, bool]]:
    """Run ``handoff`` against a producer that is certainly late, on a GPU or a simulated one.

    Returns ``(consumer read x right, the host went on while the producer still ran, {rule: kept})``.
    """
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    # made and loaded up front: building the stream pool and a kernel's first launch can wait for the GPU
    x, y = torch.zeros(1 << 16, device=dev), torch.zeros(1 << 16, device=dev)
    torch.add(x, 1, out=y), x.fill_(0.0)
    torch.cuda.synchronize()
    ran: dict[str, list] = {"make": [], "use": []}

    def make() -> torch.Tensor:
        ran["make"].append(torch.cuda.current_stream())
        b.late(LATE_MS)  # the producer is late...
        return x.fill_(1.0)  # ...and writes x after its spin

    def use(t: torch.Tensor) -> torch.Tensor:
        ran["use"].append(torch.cuda.current_stream())
        if t is not x:
            raise TypeError("use() takes the tensor make() returned: pass it x")
        return torch.add(t, 1, out=y)

    result = handoff(producer, consumer, make, use)
    # the producer's spin is still running when handoff returns (asked of the class: an answer can't replace it)
    host_went_on = not torch.cuda.Stream.query(producer)
    torch.cuda.synchronize()
    streams = {"make on producer": ran["make"] == [producer], "use on consumer": ran["use"] == [consumer],
               "returned use(x)": isinstance(result, torch.Tensor)}
    return bool((y == 2).all()), host_went_on, streams


@exercise("04.event_wait_fix")
def event_wait_fix(handoff: Callable) -> Verdict:
    """Does ``handoff(producer, consumer, make, use)`` order ``use(x)`` after ``make()`` with an event, and
    leave the host free?

    The checker's ``make`` is late on purpose (a spin kernel before it writes ``x``), so a missing wait
    is wrong every time. The host must not wait: the GPU's consumer stream should. The same scenario runs on a
    GPU or, without one, on a simulated GPU with CUDA's ordering rules.

    Example:
        >>> def racy(producer, consumer, make, use):
        ...     import torch
        ...     with torch.cuda.stream(producer):
        ...         x = make()
        ...     with torch.cuda.stream(consumer):
        ...         return use(x)
        >>> event_wait_fix(racy).right
        False
    """
    import torch

    got, where, verdict = run_answer(handoff, "handoff", _handoff)
    if verdict is not None:
        return verdict
    right, host_free, streams = got
    if not streams["make on producer"]:
        return Verdict(False, "call make() once, inside `with torch.cuda.stream(producer):`.")
    if not streams["use on consumer"]:
        return Verdict(False, "call use(x) once, inside `with torch.cuda.stream(consumer):`.")
    if not streams["returned use(x)"]:
        return Verdict(False, "return use(x)'s result.")
    if not right:
        return Verdict(False, f"use(x) read x before make() had written it{where}: record an event on the producer "
                              "after make(), and make the consumer wait for it before use(x).")
    if not host_free:
        return Verdict(False, f"the values are right, but the host waited for the producer (a synchronize){where}: "
                              "let the consumer's stream wait instead, with consumer.wait_event(...).")
    return Verdict(True, f"the consumer's stream waited for the producer's event on the GPU, and the host went on{where}.")


def _stream_of(lane: Any) -> str:
    """``"GPU 0 · stream 7 (default)"`` -> ``"7"``."""
    return str(lane).split("stream ")[-1].split(" ")[0]


def _pairs(answer: Any) -> set[tuple[str, str]] | None:
    """The learner's ``{(waiter, waited_for), ...}`` as stream numbers in text, or None when malformed."""
    if isinstance(answer, dict):
        answer = answer.items()
    try:
        pairs = {(a, b) for a, b in answer}
    except (TypeError, ValueError):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.isdigit()
               for pair in pairs for v in pair):
        return None
    return {(str(int(a)), str(int(b))) for a, b in pairs}


def true_waits(trace: Any) -> set[tuple[str, str]]:
    """``{(waiter stream, waited-for stream)}`` in a trace, read by :func:`asynclab.trace.analysis.metrics.stream_waits`.

    Example:
        >>> sorted(true_waits(exercise_trace()))  # doctest: +SKIP
        [('42', '34'), ('7', '38')]
    """
    from asynclab.trace.analysis.metrics import stream_waits

    waits = stream_waits(trace).dropna(subset=["waited_for"])
    return {(_stream_of(w), _stream_of(f)) for w, f in zip(waits["lane"], waits["waited_for"])}


#: The experiment cell of exercise 2: ``run.measure({...}, setup, name=WHO_WAITED)``, its five streams on the page.
WHO_WAITED = "who_waited"


def exercise_trace(trace: Any = None) -> Any:
    """The trace exercise 2 is about: ``trace`` when given (the cell's own run: its Measured, or the Measured's
    trace), else the cell's recording (``reference/cell_who_waited.json.gz``).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE, load_trace
        >>> t = load_trace(EXAMPLE_TRACE)
        >>> exercise_trace(t) is t, exercise_trace().lanes()[0].startswith("GPU 0")
        (True, True)
    """
    from asynclab.course import reference

    trace = getattr(trace, "trace", trace)  # a Measured: the trace of its run
    return reference.trace(4, f"cell_{WHO_WAITED}") if trace is None else trace


@exercise("04.who_waited")
def who_waited(answer: Any, trace: Any = None) -> Verdict:
    """Which stream waited for which, in the trace of the exercise's cell? Answer ``{(waiter, waited_for), ...}``
    with the stream numbers of the timeline's lanes. ``trace`` is the cell's run (its Measured, or its trace), the
    timeline the learner read; without it, the cell's recording (:func:`exercise_trace`).

    Example:
        >>> who_waited({(7, 7)}).right
        False
    """
    pairs = _pairs(answer)
    if pairs is None:
        return Verdict(False, "give a set of (waiter, waited_for) pairs of whole stream numbers, e.g. {(13, 7)}: "
                              "stream 13 waited for stream 7.")
    trace = exercise_trace(trace)
    right = true_waits(trace)
    streams = {_stream_of(lane) for lane in trace.lanes() if "· stream " in lane}
    unknown = sorted({s for pair in pairs for s in pair} - streams)
    if unknown:
        return Verdict(False, f"no stream {', '.join(unknown)} in this trace; its streams are {', '.join(sorted(streams, key=int))}.")
    if len(pairs) > len(streams):
        return Verdict(False, f"{len(pairs)} pairs for {len(streams)} streams: each stream that waited, waited for one "
                              "other stream. Name only the waits you can see.")
    if pairs == right:
        return Verdict(True, "each waiting stream's kernel began within microseconds of the other stream's spin ending, "
                             "though it was launched long before: that is a wait on an event.")
    reversed_pairs = {(b, a) for a, b in pairs - right} & right
    if reversed_pairs:
        n = len(reversed_pairs)
        return Verdict(False, f"{len(pairs & right)} of {len(right)} right; {n} pair{'s' if n > 1 else ''} the wrong way "
                              "round. A pair is (waiter, waited_for): first the stream whose work started late, long "
                              "after its launch, then the stream whose work it waited for.")
    wrong = len(pairs - right)
    return Verdict(False, f"{len(pairs & right)} of {len(right)} right"
                          + (f"; {wrong} pair{'s' if wrong > 1 else ''} that did not wait like that" if wrong else "")
                          + (f"; {len(right - pairs)} missing" if right - pairs else "")
                          + ". Look for work that starts long after its launch, right when another stream's work ends.")


#: Answers for the classroom's solved examples, where the lesson publishes no code (``asynclab.grading.classroom``).
CLASSROOM_ANSWERS = {
    "04.who_waited": ("from asynclab.lessons.events.exercises import true_waits\n"
                      "answer = {(int(a), int(b)) for a, b in true_waits(five.trace)}"),
}
