"""Lesson 03 exercise checkers: a side stream that waits both ways, and which workloads gain from streams."""
from __future__ import annotations

from typing import Any, Callable

from asynclab.checks import Verdict, exercise, harness, raised, set_answer
from asynclab.events import a_type
from asynclab.simgpu import StreamSim

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


def _run_on_gpu(on_side_stream: Callable, late: str) -> tuple[bool, bool, bool]:
    """Run the learner's function against a deterministic race on the GPU.

    ``late="input"``: the producer of ``x`` spins before writing it. ``late="branch"``: the branch itself
    spins before writing its result. Returns ``(work read x right, caller read the result right, work
    ran on a side stream)``.
    """
    import torch

    from asynclab.experiments import spin_cycles

    dev = torch.device("cuda", torch.cuda.current_device())
    cycles = spin_cycles(dev, 20.0)
    default = torch.cuda.current_stream()
    streams_seen = []

    # everything is made up front: building the stream pool and a kernel's first launch (lazy loading) each
    # waited for the GPU on the reference machine, and would order the race by accident
    torch.cuda.Stream()
    x, out, seen = (torch.zeros(1 << 20, device=dev) for _ in range(3))
    torch.mul(x, 2, out=out), seen.copy_(out)

    def work(t: torch.Tensor) -> torch.Tensor:
        streams_seen.append(torch.cuda.current_stream())
        if late == "branch":
            torch.cuda._sleep(cycles)
        return torch.mul(t, 2, out=out)

    torch.cuda.synchronize()
    if late == "input":
        torch.cuda._sleep(cycles)
    x.fill_(1.0)
    result = on_side_stream(work, x)
    if not isinstance(result, torch.Tensor):
        raise _NotATensor(a_type(result))
    seen.copy_(result)  # the caller uses the result on its stream, at once
    torch.cuda.synchronize()
    side = bool(streams_seen) and all(s != default for s in streams_seen)
    return bool((result == 2).all()), bool((seen == 2).all()), side


def _run_simulated(on_side_stream: Callable, late: str) -> tuple[bool, bool, bool]:
    """The same two races on :class:`asynclab.simgpu.StreamSim`, for machines without a GPU."""
    import torch

    with StreamSim() as sim:
        streams_seen = []
        x = sim.kernel([], ms=20.0 if late == "input" else 0.1)

        def work(t: Any) -> Any:
            streams_seen.append(torch.cuda.current_stream())
            return sim.kernel([t], ms=20.0 if late == "branch" else 0.1)

        result = on_side_stream(work, x)
        if not hasattr(result, "ready_at"):
            raise _NotATensor(a_type(result))
        seen = sim.kernel([result], ms=0.1)  # the caller uses the result on its stream, at once
        side = bool(streams_seen) and all(s is not sim.default for s in streams_seen)
        return result.right, seen.right or not result.right, side


@exercise("03.wait_stream_fix")
def wait_stream_fix(on_side_stream: Callable) -> Verdict:
    """Does ``on_side_stream(work, x)`` run ``work(x)`` on a side stream, and order it right both ways?

    Two races, each certain to bite code that skips its wait: the producer of ``x`` is late (a spin
    kernel before it writes ``x``), and the branch is late (a spin inside ``work``). On a GPU the check
    runs real kernels; without one, a simulation of streams with the same ordering rules.

    Example:
        >>> wait_stream_fix(lambda work, x: work(x)).right  # runs on the default stream: no side stream
        False
    """
    import torch

    if not callable(on_side_stream):
        return Verdict(False, "pass your function on_side_stream itself (no parentheses).")
    run, where = harness(_run_on_gpu, _run_simulated)
    outcomes = []
    for late in ("input", "branch"):
        try:
            outcomes.append(run(on_side_stream, late))
        except _NotATensor as err:
            return Verdict(False, f"return work(x)'s result, not {err}.")
        except Exception as err:  # noqa: BLE001 - the learner's code
            return raised(err)
    if not all(side for _, _, side in outcomes):
        return Verdict(False, "work(x) ran on the caller's stream: make a side stream and call work(x) "
                              "inside `with torch.cuda.stream(side):`.")
    if not all(work_right for work_right, _, _ in outcomes):
        return Verdict(False, f"work(x) read x before its producer had written it{where}: the side stream must "
                              "wait for the caller's stream before work(x) reads x.")
    if not all(caller_right for _, caller_right, _ in outcomes):
        return Verdict(False, f"the caller read the result before work(x) had written it{where}: the caller's "
                              "stream must wait for the side stream before anyone uses the result.")
    return Verdict(True, f"both races are closed{where}: the side stream waits for x, and the caller's stream "
                         "waits for the result.")


@exercise("03.which_gain")
def which_gain(workloads: set) -> Verdict:
    """Which workloads of :data:`GAIN_FIGURES` ran at least 1.2x faster with streams, in the reference?

    Example:
        >>> which_gain({"two big matmuls"}).right
        False
    """
    from asynclab import reference

    head = reference.results(3)["headline"]
    gains = {name: figure(head) for name, figure in GAIN_FIGURES.items()}
    right = {name for name, g in gains.items() if g >= GAIN}
    shown = ", ".join(f"{name} {gains[name]:.2f}x" for name in sorted(right))
    return set_answer(workloads, right, set(GAIN_FIGURES), noun="workload", example='{"four spin kernels"}',
                      why=f"{shown}: in each, one kernel leaves most of the GPU idle, and it runs long enough "
                          "to hide the extra launches.", wrong=f"these did not gain {GAIN}x")
