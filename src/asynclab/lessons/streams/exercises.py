"""Lesson 03 exercise checkers: a side stream that waits both ways, and which workloads gain from streams."""
from __future__ import annotations

from typing import Any, Callable

from asynclab.grading.backend import Backend, run_answer
from asynclab.grading.checks import Verdict, exercise, set_answer
from asynclab.trace.read.events import a_type

#: The workloads of exercise 2, and the reference figure that says how much streams changed each
#: (a speed-up: one stream's time over the streams' time).
GAIN_FIGURES: dict[str, Callable[[dict[str, Any]], float]] = {
    "four spin kernels": lambda h: h["four_spin_kernels_speedup"],
    "two big matmuls": lambda h: h["big_mm_streams_speedup"],
    "eight tiny matmuls": lambda h: 1.0 / h["tiny_mm_streams_slowdown"],
    "a kernel's tail filled by another": lambda h: h["tail_fill_speedup"],
    "Parallel, small branches": lambda h: h["parallel_module_speedup_small"],
    "Parallel, big branches": lambda h: h["parallel_module_speedup_big"],
}

#: A workload "gains" when streams make it at least this much faster.
GAIN = 1.2


class _NotATensor(TypeError):
    """The learner's function returned something other than work(x)'s result."""


#: The checker's three runs: the producer of x is late, the branch is late, the caller reads the result late.
RUNS = ("input", "branch", "reuse")

#: How late the late work is (a spin kernel on a GPU, the same time in the simulation): long beside anything the
#: host does in between, so that only a real wait sees it end.
LATE_MS = 100.0


def _run(b: Backend, on_side_stream: Callable, late: str) -> tuple[bool, bool, bool, bool]:
    """Run the learner's function against a deterministic race, on a GPU or a simulated one.

    ``late="input"``: the producer of ``x`` spins before writing it. ``late="branch"``: the branch itself
    spins before writing its result. ``late="reuse"``: the caller's stream is busy (a spin) before it reads
    the result, and the result is freed at once and its side stream allocates again (record_stream's race).
    Returns ``(work read x right, caller read the result right, work ran on a side stream, the host waited
    for the late work)``.
    """
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    default = torch.cuda.current_stream()
    streams_seen, spun = [], torch.cuda.Event()

    # everything is made up front: building the stream pool and a kernel's first launch (lazy loading) each
    # waited for the GPU on the reference machine, and would order the race by accident
    torch.cuda.Stream()
    x, seen = (torch.zeros(1 << 16, device=dev) for _ in range(2))
    seen.copy_(torch.mul(x, 2))

    def work(t: torch.Tensor) -> torch.Tensor:
        streams_seen.append(torch.cuda.current_stream())
        if late == "branch":
            b.late(LATE_MS)
            spun.record()
        return torch.mul(t, 2)  # allocated on the stream work runs on

    # the learner's own kernels load on their first launch (lazy loading), which waits for the GPU too: run the
    # function once, race-free, so that only a wait the code asks for counts as the host waiting
    on_side_stream(lambda t: torch.mul(t, 2), x)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the side stream's pool is empty: the only block it can reuse is the result's
    if late == "input":
        b.late(LATE_MS)
        spun.record()
    x.fill_(1.0)
    result = on_side_stream(work, x)
    if not isinstance(result, torch.Tensor):
        raise _NotATensor(f"return work(x)'s result, not {a_type(result)}")
    if result.data_ptr() == x.data_ptr():
        raise _NotATensor("return work(x)'s result, not x itself")
    host_waited = late != "reuse" and spun.query()
    if late == "reuse":
        b.late(LATE_MS)  # the caller's stream is busy before it reads the result
    seen.copy_(result)  # the caller uses the result on its stream
    if late == "reuse" and streams_seen:
        del result  # freed while the caller's stream still has to read it
        with torch.cuda.stream(streams_seen[-1]):
            torch.empty(1 << 16, device=dev).fill_(-1.0)  # the side stream's next allocation
    torch.cuda.synchronize()  # only now may the host look at the values: any earlier read would order the race
    work_right = late == "reuse" or bool((result == 2).all())
    side = bool(streams_seen) and all(s != default for s in streams_seen)
    return work_right, bool((seen == 2).all()), side, bool(host_waited)


@exercise("03.wait_stream_fix")
def wait_stream_fix(on_side_stream: Callable) -> Verdict:
    """Does ``on_side_stream(work, x)`` run ``work(x)`` on a side stream, order it right both ways without the
    host waiting, and keep the result's memory for the caller's stream?

    Three races, each certain to bite code that skips its part: the producer of ``x`` is late (a spin
    kernel before it writes ``x``), the branch is late (a spin inside ``work``), and the caller's stream
    reads the result late while the side stream allocates again (``record_stream``). The same scenario runs
    on a GPU or, without one, on a simulated GPU with CUDA's ordering and allocator rules.

    Example:
        >>> wait_stream_fix(lambda work, x: work(x)).right  # runs on the default stream: no side stream
        False
    """
    outcomes, where = {}, ""
    for late in RUNS:
        outcomes[late], where, verdict = run_answer(on_side_stream, "on_side_stream", _run, late, known=(_NotATensor,))
        if verdict is not None:
            return verdict
    if not all(side for _, _, side, _ in outcomes.values()):
        return Verdict(False, "work(x) ran on the caller's stream: make a side stream and call work(x) "
                              "inside `with torch.cuda.stream(side):`.")
    if not all(work_right for work_right, _, _, _ in outcomes.values()):
        return Verdict(False, f"work(x) read x before its producer had written it{where}: the side stream must "
                              "wait for the caller's stream before work(x) reads x.")
    if not (outcomes["input"][1] and outcomes["branch"][1]):
        return Verdict(False, f"the caller read the result before work(x) had written it{where}: the caller's "
                              "stream must wait for the side stream before anyone uses the result.")
    if any(waited for _, _, _, waited in outcomes.values()):
        return Verdict(False, f"the values are right, but the host waited for the GPU (a synchronize){where}: "
                              "let the streams wait for each other instead (wait_stream or events), so that the "
                              "host runs ahead, as lesson 04's exercise asks too.")
    if not outcomes["reuse"][1]:
        return Verdict(False, f"the caller's stream read the result after its memory had been reused{where}: "
                              "the result was made on the side stream and is used on the caller's, so tell the "
                              "allocator with y.record_stream(caller) (section 2).")
    return Verdict(True, f"both races are closed and the result's memory is kept for the caller{where}: the side "
                         "stream waits for x, the caller's stream waits for the result, and the host ran ahead.")


@exercise("03.which_gain")
def which_gain(workloads: set) -> Verdict:
    """Which workloads of :data:`GAIN_FIGURES` ran at least 1.2x faster with streams, in the reference?

    Example:
        >>> which_gain({"two big matmuls"}).right
        False
    """
    from asynclab.course import reference

    head = reference.results(3)["headline"]
    gains = {name: figure(head) for name, figure in GAIN_FIGURES.items()}
    right = {name for name, g in gains.items() if g >= GAIN}
    shown = ", ".join(f"{name} {gains[name]:.2f}x" for name in sorted(right))
    return set_answer(workloads, right, set(GAIN_FIGURES), noun="workload", example='{"four spin kernels"}',
                      why=f"{shown}: in each, one kernel leaves most of the GPU idle, and it runs long enough "
                          "to hide the extra launches.", wrong=f"these did not gain {GAIN}x")
