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

__all__ = ["record", "STEP_ANNOTATION"]

#: Each profiled call of ``fn`` runs inside ``record_function(STEP_ANNOTATION)``, so
#: ``trace.window(annotation=STEP_ANNOTATION, occurrence=i)`` zooms on step i.
STEP_ANNOTATION = "asynclab.step"


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

    if not callable(fn):
        raise TypeError(f"record() needs a callable, not {type(fn).__name__}")
    if int(warmup) < 0 or int(steps) < 1:
        raise ValueError(f"need warmup >= 0 and steps >= 1 (got warmup={warmup}, steps={steps})")
    out: Path | None = None
    if path is not None:
        out = Path(path)
        name = out.name.lower()
        if not (name.endswith(".json.gz") or name.endswith(".json")):
            raise ValueError(f"{out}: the trace file must end in .json.gz (or .json)")
        out.parent.mkdir(parents=True, exist_ok=True)

    cuda = bool(torch.cuda.is_available())
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    for _ in range(int(warmup)):
        fn(*args, **kwargs)
    if cuda:
        torch.cuda.synchronize()

    extra: dict[str, Any] = {}
    if cuda_sync_events and cuda:
        try:
            from torch._C._profiler import _ExperimentalConfig

            extra["experimental_config"] = _ExperimentalConfig(enable_cuda_sync_events=True)
        except (ImportError, TypeError):  # pragma: no cover - older PyTorch
            warnings.warn("this PyTorch cannot record cuda_sync events; recording without them", stacklevel=2)
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
            if out.name.lower().endswith(".gz"):
                with open(tmp, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst)
            else:
                shutil.copyfile(tmp, out)
    finally:
        try:
            os.remove(tmp)
        except OSError:
            pass
    src_name = str(out) if out is not None else "<record>"
    trace.source = src_name
    trace.meta["source"] = src_name
    trace.meta["torch_version"] = torch.__version__
    trace.meta["cuda"] = cuda
    if cuda:
        try:
            trace.meta["gpu_name"] = torch.cuda.get_device_name()
        except Exception:  # pragma: no cover - depends on the driver
            pass
    trace.meta["warmup"] = int(warmup)
    trace.meta["steps"] = int(steps)
    trace.meta["function"] = getattr(fn, "__qualname__", repr(fn))
    return trace
