"""Profile a callable live with torch.profiler, save the trace as .json.gz (Perfetto-ready), return a Trace."""
from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

from asynclab.trace import Trace, load_trace
from asynclab.trace.read.events import STEP_ANNOTATION

__all__ = ["record", "STEP_ANNOTATION"]



def record(fn: Callable[..., Any], *args: Any, path: str | os.PathLike | None = None, warmup: int = 1,
           steps: int = 1, record_shapes: bool = False, with_stack: bool = False, cuda_sync_events: bool = False,
           **kwargs: Any) -> Trace:
    """Run ``fn(*args, **kwargs)`` ``warmup`` times, then once more under a profiler warm-up step that is
    discarded, then ``steps`` times under torch.profiler, and return the trace as a :class:`~asynclab.trace.Trace`.

    The profiler records CPU activity, plus CUDA activity when ``torch.cuda.is_available()``; CUDA is
    synchronised before the profiler stops so that every kernel lands in the trace. Each profiled call
    is wrapped in ``record_function("asynclab.step")``. With ``path`` (``.json.gz`` or ``.json``;
    missing folders are created) the Chrome trace is saved there; it opens in https://ui.perfetto.dev
    and chrome://tracing. ``record_shapes`` and ``with_stack`` go to ``torch.profiler.profile``;
    ``cuda_sync_events=True`` also records the GPU side of synchronisations (``cuda_sync`` rows:
    stream waits, stream/device syncs; needs CUDA and a PyTorch that supports it). Every other keyword
    goes to ``fn``.

    Example:
        >>> import torch
        >>> x = torch.randn(64, 64)
        >>> t = record(torch.matmul, x, x, steps=2)  # doctest: +SKIP
        >>> (t.events["kind"] == "cpu_op").any()  # doctest: +SKIP
        True
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from asynclab.sim.simulate import running_predictor

    if not callable(fn):
        raise TypeError(f"record() needs a callable, not {type(fn).__name__}")
    if int(warmup) < 0 or int(steps) < 1:
        raise ValueError(f"need warmup >= 0 and steps >= 1 (got warmup={warmup}, steps={steps})")
    out = _output_path(path)
    if running_predictor() is not None:  # inside al.simulate: the simulated GPU's trace of the same steps
        return _record_simulated(lambda: fn(*args, **kwargs), out, int(warmup), int(steps))

    cuda = bool(torch.cuda.is_available())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for _ in range(int(warmup)):
        fn(*args, **kwargs)
    if cuda:
        torch.cuda.synchronize()

    extra = _sync_events_config() if cuda_sync_events and cuda else {}
    fd, tmp = tempfile.mkstemp(prefix="asynclab_record_", suffix=".json")
    os.close(fd)
    # One profiled warm-up step first, then discarded: the profiler's own start-up (CUPTI buffers,
    # "Activity Buffer Request") lands there instead of inflating the first recorded operation.
    sched = schedule(wait=0, warmup=1, active=int(steps), repeat=1)
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # no "gpuGetDeviceCount failed" noise on CPU-only machines
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
            with profile(activities=activities, record_shapes=record_shapes, with_stack=with_stack, schedule=sched,
                         on_trace_ready=lambda p: p.export_chrome_trace(tmp), **extra) as prof:
                for i in range(int(steps) + 1):
                    with record_function(STEP_ANNOTATION):
                        fn(*args, **kwargs)
                    if cuda and i == int(steps):
                        torch.cuda.synchronize()  # every kernel of the last step lands in the trace
                    prof.step()
        trace = load_trace(tmp)
        if out is not None:
            _save(tmp, out)
    finally:
        try:
            os.remove(tmp)
        except OSError:
            pass
    trace.source = trace.meta["source"] = str(out) if out is not None else "<record>"
    trace.meta.update(torch_version=torch.__version__, cuda=cuda, warmup=int(warmup), steps=int(steps),
                      function=getattr(fn, "__qualname__", repr(fn)))
    if cuda:
        try:
            trace.meta["gpu_name"] = torch.cuda.get_device_name()
        except Exception:  # pragma: no cover - depends on the driver
            pass
    return trace


def _record_simulated(call: Callable[[], Any], out: Path | None, warmup: int, steps: int) -> Trace:
    """:func:`record` inside ``al.simulate``: the simulated GPU's steps, in predicted times (a profiler there sees no
    GPU at all)."""
    from asynclab.sim.simulate import record_predicted, running_predictor, save_document

    doc = record_predicted(running_predictor(), call, steps, warmup, STEP_ANNOTATION)
    trace = load_trace(doc)
    if out is not None:
        save_document(doc, out)
    trace.source = trace.meta["source"] = str(out) if out is not None else "<simulated>"
    return trace


def _output_path(path: str | os.PathLike | None) -> Path | None:
    """Where the trace is saved (its folders made), or None; a name not ending in .json(.gz) is refused."""
    if path is None:
        return None
    out = Path(path)
    name = out.name.lower()
    if not (name.endswith(".json.gz") or name.endswith(".json")):
        raise ValueError(f"{out}: the trace file must end in .json.gz (or .json)")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _sync_events_config() -> dict[str, Any]:
    """The profiler's keyword that records cuda_sync rows, where this PyTorch has it (else a warning)."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return {"experimental_config": _ExperimentalConfig(enable_cuda_sync_events=True)}
    except (ImportError, TypeError):  # pragma: no cover - older PyTorch
        warnings.warn("this PyTorch cannot record cuda_sync events; recording without them", stacklevel=3)
        return {}


def _save(tmp: str, out: Path) -> None:
    """Copy the exported trace to ``out``, gzipped when its name ends in .gz."""
    if out.name.lower().endswith(".gz"):
        with open(tmp, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
    else:
        shutil.copyfile(tmp, out)
