"""Where a checker runs its scenario: the machine's GPUs, or simulated ones; the scenario is written once for both."""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch


class Backend:
    """What a checker's scenario needs besides ordinary PyTorch: late work (a spin kernel), the trace of a run, and
    the words its verdicts add about where they ran. ``with backend:`` the scenario runs; inside, ``torch.cuda`` and
    tensors on ``"cuda"`` are the machine's GPUs or the simulated ones, and the code is the same for both.

    Example:
        >>> with backend() as b:
        ...     x = torch.ones(3, device="cuda")
        ...     b.late(5.0)                    # the current stream is busy for 5 ms...
        ...     y = x + 1                      # ...before this kernel runs
        ...     y.tolist()                     # a host read waits for it
        [2.0, 2.0, 2.0]
    """

    where = ""
    simulated = False
    #: How many times smaller than a GPU's the tensors of a scenario are here (see :meth:`nbytes`).
    scale = 1

    def nbytes(self, n: int) -> int:
        """A scenario's tensor size of ``n`` bytes on a GPU, as this backend holds it: the simulated GPU's tensors
        are :attr:`Simulated.scale` times smaller (its CPU does their arithmetic) and as slow, so they take as long.

        Example:
            >>> backend().nbytes(64 << 20) in (64 << 20, 64 << 10)
            True
        """
        return max(1, int(n // self.scale))

    def side(self, n: int) -> int:
        """A scenario's matrix side of ``n`` on a GPU, as this backend holds it: ``sqrt(scale)`` times shorter, so
        that the matrix is :attr:`scale` times smaller in bytes, like every tensor of a scenario, and its product
        ``scale ** 1.5`` times fewer FLOPs (the simulated GPU runs both that much slower: they take as long).

        Example:
            >>> backend().side(1024) in (1024, 32)
            True
        """
        return max(1, round(n / self.scale ** 0.5))

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def cycles(self, ms: float) -> int:
        """The ``torch.cuda._sleep`` argument that keeps the current GPU busy for ``ms``."""
        return _spin_cycles(torch.cuda.current_device(), round(ms, 3))

    def late(self, ms: float, device: Any = None) -> None:
        """Keep ``device``'s current stream busy for ``ms`` (a spin kernel), so that what is queued next is late."""
        with torch.cuda.device(torch.cuda.current_device() if device is None else device):
            torch.cuda._sleep(self.cycles(ms))

    def timer_reads(self) -> int | None:
        """How often code read a host clock or an event's elapsed time here (None on a GPU, where nothing counts):
        on the simulated GPU, a timer that read neither read a clock the simulation does not drive."""
        return None

    def late_copies(self, t: Any, ms: float) -> Any:
        """``t``, whose every copy (``copy_``, ``to``, ``cpu``) starts late: a spin of ``ms`` runs ahead of it on the
        copy's stream, as ahead of a big copy. Only a wait for the copy itself sees it end."""
        late = self.late

        class LateCopies(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if getattr(func, "__name__", "") in ("copy_", "to", "cpu", "_to_copy"):
                    late(ms)
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **(kwargs or {}))

        return t.as_subclass(LateCopies)

    def profile(self, fn: Callable[[], Any], runs: int = 1) -> Any:
        """Run ``fn`` ``runs`` times (after one warm-up run) under the profiler; the Trace, one step per run."""
        from asynclab.gpu.record import record

        return record(fn, warmup=1, steps=runs)


@functools.lru_cache(maxsize=None)
def _spin_cycles(index: int, ms: float) -> int:
    from asynclab.gpu.timing import spin_cycles

    return spin_cycles(torch.device("cuda", index), ms)


class Simulated(Backend):
    """Simulated GPUs (:class:`asynclab.sim.device.SimGPU`) for a machine without enough of them."""

    simulated = True
    scale = 1024

    def __init__(self, gpus: int, have: int, peer_access: bool = True):
        self.gpus, self.peer_access = gpus, peer_access
        self.where = (" (on a simulated GPU: this machine has none)" if gpus == 1 else
                      f" (on {gpus} simulated GPUs: this machine has {have or 'no'} GPU{'s' if have != 1 else ''})")

    def __enter__(self) -> "Simulated":
        from asynclab.sim.device import SimGPU

        self.gpu = SimGPU(devices=self.gpus, peer_access=self.peer_access, scale=self.scale)  # each run: idle GPUs
        self.gpu.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.gpu.__exit__(*exc)

    def cycles(self, ms: float) -> int:
        return self.gpu.cycles(ms)

    def timer_reads(self) -> int | None:
        return self.gpu.timer_reads

    def late_copies(self, t: Any, ms: float) -> Any:
        self.gpu.late_copies[id(t.block)] = self.gpu.cycles(ms)
        return t

    def profile(self, fn: Callable[[], Any], runs: int = 1) -> Any:
        """The simulated GPU's own timeline of ``runs`` runs of ``fn`` after a warm-up, one step per run (an
        ``asynclab.step`` annotation, as :func:`asynclab.record.record` makes on a GPU)."""
        from asynclab.trace.read.events import STEP_ANNOTATION

        fn()
        torch.cuda.synchronize()
        self.gpu.forget_past()
        for _ in range(runs):
            with torch.profiler.record_function(STEP_ANNOTATION):
                fn()
                torch.cuda.synchronize()
            self.gpu.host += self.gpu.LAUNCH_MS  # the profiler's own step, between one run's end and the next's start
        return self.gpu.trace()


def backend(gpus: int = 1, peer_access: bool = True) -> Backend:
    """The backend for a check that needs ``gpus`` GPUs: this machine's when it has them, else simulated ones.

    Example:
        >>> b = backend()
        >>> b.simulated == (not torch.cuda.is_available())
        True
    """
    from asynclab.sim.install import gpus_here

    have = gpus_here()
    return Backend() if have >= gpus else Simulated(gpus, have, peer_access)


def run_answer(answer: Any, name: str, scenario: Callable[..., Any], *args: Any, gpus: int = 1,
               known: tuple[type[BaseException], ...] = ()) -> tuple[Any, str, Any]:
    """Run a checker's ``scenario(b, answer, *args)`` inside ``with b:``, ``b`` the :func:`backend` for ``gpus`` GPUs.

    Returns ``(what the scenario returned, b.where, None)``; or ``(None, where, verdict)`` when ``answer``, the
    learner's function ``name``, is not callable (:func:`asynclab.grading.checks.not_a_function`), when the scenario
    raised one of ``known`` (the verdict is its message), or when it raised anything else
    (:func:`asynclab.grading.checks.raised`: the learner's code failed).

    Example:
        >>> print(run_answer(len("ab"), "count", lambda b, fn: fn())[2])
        Not yet: pass your function count itself (no parentheses).
        >>> got, where, verdict = run_answer(lambda: 2, "count", lambda b, fn, x: fn() + x, 1)
        >>> got, verdict
        (3, None)
        >>> print(run_answer(lambda: 1 / 0, "count", lambda b, fn: fn())[2])
        Not yet: your function raised ZeroDivisionError: division by zero
    """
    from asynclab.grading.checks import Verdict, not_a_function, raised

    verdict = not_a_function(answer, name)
    if verdict is not None:
        return None, "", verdict
    b = backend(gpus)
    try:
        with b:
            return scenario(b, answer, *args), b.where, None
    except known as err:
        return None, b.where, Verdict(False, f"{err}.")
    except Exception as err:  # noqa: BLE001 - the learner's code
        return None, b.where, raised(err)
