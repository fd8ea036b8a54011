"""The simulated GPU's run as a profiler trace: its kernels and copies, the host's launches and record_function ranges."""
from __future__ import annotations

import bisect
from typing import Any

#: The process id the host's rows carry (the simulation has one host process, one thread).
HOST_PID = 1


def trace_of(ran: list[tuple], launches: list[tuple] = (), annotations: list[tuple] = (), ops: list[tuple] = (),
             header: dict | None = None) -> Any:
    """A :class:`asynclab.trace.Trace` of a simulated run, in the form torch.profiler writes.

    ``ran`` holds the GPUs' work as (category, name, device, stream, start ms, end ms, correlation), ``launches``
    the host's launches as (name, start, end, correlation), ``annotations`` the host's ``record_function`` ranges as
    (name, start, end), ``ops`` the host's operators as (name, start, end) (``cpu_op`` rows), ``header`` the trace's
    top-level fields (:func:`document_of`). Each annotation also gets, on every stream that ran work launched inside it, a GPU range from
    that work's first start to its last end, as the profiler's ``gpu_user_annotation`` rows.

    Example:
        >>> t = trace_of([("kernel", "add", 0, 7, 0.01, 0.02, 1)], [("cudaLaunchKernel", 0.0, 0.004, 1)],
        ...              [("step", 0.0, 0.03)])
        >>> t.events[["kind", "name"]].values.tolist()
        [['launch', 'cudaLaunchKernel'], ['annotation', 'step'], ['compute', 'add'], ['gpu_annotation', 'step']]
    """
    from asynclab.trace import load_trace

    return load_trace(document_of(ran, launches, annotations, ops, header))


def document_of(ran: list[tuple], launches: list[tuple] = (), annotations: list[tuple] = (), ops: list[tuple] = (),
                header: dict | None = None) -> dict:
    """The Chrome trace JSON document of a simulated run (see :func:`trace_of`), as torch.profiler exports it: it opens
    in Perfetto, and ``header``'s fields (``deviceProperties``, say) go at its top level.

    Example:
        >>> doc = document_of([("kernel", "add", 0, 7, 0.01, 0.02, 1)], ops=[("aten::add", 0.0, 0.01)])
        >>> [e["cat"] for e in doc["traceEvents"]]
        ['kernel', 'cpu_op']
    """
    if not ran:
        raise ValueError("nothing ran on the simulated GPU")
    events = [_gpu_row(*row) for row in ran]
    events += [_host_row("cuda_runtime", name, start, end, {"correlation": corr}) for name, start, end, corr in launches]
    events += [_host_row("cpu_op", name, start, end) for name, start, end in ops]
    events += [_host_row("user_annotation", name, start, end) for name, start, end in annotations]
    events += _gpu_annotations(ran, launches, annotations)
    return {**(header or {}), "traceEvents": events}


def _gpu_row(cat: str, name: str, dev: int, stream: int, start: float, end: float, corr: Any = None) -> dict:
    args: dict[str, Any] = {"device": dev, "stream": stream}
    if corr is not None:
        args["correlation"] = corr
    if "PtoP" in name:  # a copy between the two GPUs runs on the sender's stream
        args.update(fromDevice=dev, toDevice=1 - dev)
    return {"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": stream, "ts": start * 1e3,
            "dur": (end - start) * 1e3, "args": args}


def _host_row(cat: str, name: str, start: float, end: float, args: dict | None = None) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": HOST_PID, "tid": HOST_PID, "ts": start * 1e3,
            "dur": (end - start) * 1e3, "args": args or {}}


def _gpu_annotations(ran: list[tuple], launches: list[tuple], annotations: list[tuple]) -> list[dict]:
    """Each host annotation's GPU ranges: per stream, from the first to the last work launched inside it."""
    launched_at = {corr: start for _, start, _, corr in launches}
    # the work by when it was launched: an annotation's work is found by a search, then taken in the order it ran
    found = sorted((at, i) for i, (_, _, _, _, _, _, *corr) in enumerate(ran)
                   if (at := launched_at.get(corr[0] if corr else None)) is not None)
    ats = [at for at, _ in found]
    rows = []
    for name, lo, hi in annotations:
        spans: dict[tuple[int, int], list[float]] = {}
        inside = sorted(i for _, i in found[bisect.bisect_left(ats, lo):bisect.bisect_left(ats, hi)])
        for _, _, dev, stream, start, end, *_ in (ran[i] for i in inside):
            span = spans.setdefault((dev, stream), [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
        rows += [_gpu_row("gpu_user_annotation", name, dev, stream, start, end)
                 for (dev, stream), (start, end) in spans.items()]
    return rows
