"""What the simulated GPU does not cover, and how a learner is told: :class:`SimulationLimit`, the error a stand-in
raises for a name the real class lacks (:func:`unknown_attribute`), and :func:`limit_message`, the one sentence a
verdict gives, naming the learner's own line. No torch at import, and nothing else of the simulation.
"""
from __future__ import annotations

import contextlib
import linecache
import os
import traceback

__all__ = ["SimulationLimit", "limit_message", "unknown_attribute"]


class SimulationLimit(RuntimeError):
    """Learner code reached for ``call``, which the simulated GPU does not cover; ``instead`` says what to write."""

    def __init__(self, call: str, instead: str = ""):
        self.call, self.instead = call, instead
        super().__init__(f"the simulated GPU does not cover {call}" + (f": {instead}" if instead else ""))


def unknown_attribute(real: type, what: str, name: str, instead: str = "") -> Exception:
    """What reaching for ``name`` on a stand-in that lacks it raises: the real class's own AttributeError where the real
    class lacks it too (a typo is the learner's, as on a GPU), else a :class:`SimulationLimit` (a limit of ours).

    Example:
        >>> import torch.cuda.streams
        >>> unknown_attribute(torch.cuda.streams.Event, "event", "synchronise")
        AttributeError("'Event' object has no attribute 'synchronise'")
        >>> unknown_attribute(torch.cuda.streams.Event, "event", "ipc_handle")
        SimulationLimit('the simulated GPU does not cover event.ipc_handle')
    """
    if not hasattr(real, name):
        return AttributeError(f"'{real.__name__}' object has no attribute '{name}'")
    return SimulationLimit(f"{what}.{name}", instead)


_NO_GPU = ("NVIDIA driver", "CUDA driver", "not compiled with CUDA", "No CUDA GPUs", "cudaGetDeviceCount",
           "invalid device ordinal", "Invalid device argument", "invalid argument to reset_peak_memory_stats",
           "does not match recording stream's device type",
           "already associated to a python object of type DeviceTensor",  # PyTorch 2.3: as_subclass of a GPU tensor,
           "already associated to a python object of type Tensor")  # and of pinned memory under a dispatch mode
#: Errors other than RuntimeError that mean "no GPU here": NVML's Python bindings, which torch.cuda's utilization(),
#: temperature() and others need beside a driver, and memory_summary() of a machine whose allocator never ran.
_NO_GPU_OTHER = {ModuleNotFoundError: ("nvidia-ml-py", "pynvml"), KeyError: ("allocated_bytes.all.current",)}
_OURS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(os.path.abspath(contextlib.__file__)))


def _learner_line(err: BaseException) -> str | None:
    """The last line of learner code on ``err``'s way up (not torch's, the library's or asynclab's)."""
    import torch

    skip = _OURS + (os.path.dirname(os.path.abspath(torch.__file__)),)
    lines = [frame for frame in traceback.extract_tb(err.__traceback__)
             if not os.path.abspath(frame.filename).startswith(skip)]
    if not lines:
        return None
    frame = lines[-1]
    return (frame.line or linecache.getline(frame.filename, frame.lineno)).strip() or None


def limit_message(err: BaseException, gpus: int = 0) -> str | None:
    """What to tell a learner whose code reached past the simulated GPU with ``err``, on a machine with ``gpus`` GPUs
    (:func:`asynclab.sim.install.gpus_here`); None when it did not.

    Example:
        >>> print(limit_message(SimulationLimit("torch.cuda.memory_allocated()")))  # doctest: +ELLIPSIS
        the simulated GPU does not cover torch.cuda.memory_allocated(). This machine has ..., so the check runs ...
        >>> limit_message(ZeroDivisionError("division by zero")) is None
        True
    """
    if isinstance(err, SimulationLimit):
        call, instead = err.call, err.instead
    elif (isinstance(err, (RuntimeError, AssertionError)) and any(s in str(err) for s in _NO_GPU)) or any(
            isinstance(err, kind) and any(s in str(err) for s in texts) for kind, texts in _NO_GPU_OTHER.items()):
        line = _learner_line(err)
        call, instead = (f"`{line}`" if line else "a call that needs a real GPU"), ""
    else:
        return None
    extra = f" {instead[:1].upper()}{instead[1:]}." if instead else ""
    have = gpus
    machine = "This machine has no GPU" if not have else f"This machine has {have} GPU{'s' if have > 1 else ''}, fewer than the check needs"
    return (f"the simulated GPU does not cover {call}. {machine}, so the check runs your code on a simulated GPU, "
            f"which runs PyTorch's operators and torch.cuda's streams and events in CUDA's order, but not this.{extra} "
            "To judge the answer as it is, run the check where there is a GPU (Colab or Kaggle give one): this is the "
            "simulation's limit, not a fault in your answer.")
