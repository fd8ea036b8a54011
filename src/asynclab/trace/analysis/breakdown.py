"""Communication and the time breakdown, per rank and GPU: which GPUs have work, communication overlapped by compute,
the time each GPU spent computing, communicating, copying or idle, per step and over a window, the profiler's steps and
the steady window, and the top kernels."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from asynclab.trace.analysis.thresholds import STEADY_MIN_LEFT_OUT
from asynclab.trace.analysis.select import as_kinds, as_trace, rows_of
from asynclab.trace.read.events import name_matches
from asynclab.trace.read.intervals import intersection_length, spans, union
from asynclab.trace import COPY_KINDS, WORK_KINDS, Trace, load_trace  # noqa: F401 - load_trace serves the examples

__all__ = ["BREAKDOWN", "gpus_with_work", "rows_on_gpu", "comm_overlap", "time_breakdown", "profiler_steps",
           "steady_window", "step_breakdown", "top_kernels"]


#: The time breakdown's categories, in the order an instant is claimed (compute first, as HTA does).
BREAKDOWN = (("compute", ("compute",)), ("comm", ("comm",)), ("copy", COPY_KINDS), ("memset", ("memset",)))


def gpus_with_work(tr: Trace) -> list[tuple[Any, int]]:
    """The (rank, device) pairs that have GPU work, rank <NA> in a trace of no rank.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> [d for _, d in gpus_with_work(load_trace(EXAMPLE_TRACE))]
        [0]
    """
    w = tr.events[tr.events["kind"].isin(WORK_KINDS) & tr.events["device"].notna()]
    pairs = w[["rank", "device"]].drop_duplicates()
    return sorted(((r, int(d)) for r, d in zip(pairs["rank"], pairs["device"])),
                  key=lambda p: (-1 if pd.isna(p[0]) else int(p[0]), p[1]))


def rows_on_gpu(tr: Trace, rank: Any, device: int, kinds: Iterable[str]) -> pd.DataFrame:
    """The rows of ``kinds`` on one GPU of one rank (rank <NA>: a trace of no rank).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> rows_on_gpu(load_trace(EXAMPLE_TRACE), pd.NA, 0, ["compute"])["name"].tolist()
        ['k']
    """
    ev = tr.events
    m = ev["kind"].isin(list(kinds)) & (ev["device"] == device).fillna(False)
    m &= ev["rank"].isna() if pd.isna(rank) else (ev["rank"] == rank).fillna(False)
    return ev[m.to_numpy(dtype=bool)]


def _gpu_index(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df["rank"] = df["rank"].astype("Int64")
    return df.set_index(["rank", "device"])


def comm_overlap(trace: Any) -> pd.DataFrame:
    """Communication time overlapped by compute, per rank and GPU: the share of the time a NCCL/RCCL
    kernel runs during which a compute kernel runs on the same GPU.

    Columns ``comm_us`` (union of the communication kernels), ``overlapped_us`` (the part of it during
    which the union of compute kernels is busy too) and ``overlap`` (their ratio; NaN without
    communication), indexed by (rank, device). This is HTA's ``get_comm_comp_overlap`` ratio, per GPU
    rather than per rank (the same for one GPU per rank); HTA counts as compute only the kernels it
    recognises by name, asynclab every kernel that is not communication.

    Example:
        >>> t = load_trace({"traceEvents": [
        ...     {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 20, "ts": 0,
        ...      "dur": 10, "args": {"device": 0, "stream": 20}},
        ...     {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 6, "dur": 10,
        ...      "args": {"device": 0, "stream": 7}}]})
        >>> comm_overlap(t)["overlap"].tolist()
        [0.4]
    """
    tr = as_trace(trace)
    rows = []
    for rank, dev in gpus_with_work(tr):
        comm = spans(rows_on_gpu(tr, rank, dev, ("comm",)))
        comp = spans(rows_on_gpu(tr, rank, dev, ("compute",)))
        total = float((comm[1] - comm[0]).sum())
        ov = intersection_length(comm, comp)
        rows.append({"rank": rank, "device": dev, "comm_us": total, "overlapped_us": ov,
                     "overlap": ov / total if total > 0 else np.nan})
    if not rows:
        raise ValueError(f"{tr.source}: no GPU work in this trace, so no communication overlap")
    return _gpu_index(rows)


def _partition(work: pd.DataFrame, lo: float, hi: float) -> dict[str, float]:
    """µs of [lo, hi) claimed by each category in BREAKDOWN order, and idle for the rest."""
    out: dict[str, float] = {}
    claimed = (np.zeros(0), np.zeros(0))
    for name, kinds in BREAKDOWN:
        s, e = spans(work[work["kind"].isin(kinds)])
        s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
        mine = float((e - s).sum()) - intersection_length((s, e), claimed)
        out[f"{name}_us"] = mine
        claimed = union(np.concatenate([claimed[0], s]), np.concatenate([claimed[1], e]))
    out["idle_us"] = (hi - lo) - float((claimed[1] - claimed[0]).sum())
    return out


def time_breakdown(trace: Any, start_us: float | None = None, end_us: float | None = None) -> pd.DataFrame:
    """Where each GPU's time went: compute, communication, copies, memsets and idle, per rank and GPU.

    The window is ``[start_us, end_us)``, by default each GPU's own span from its first work to its last
    (HTA's "kernel time"). Every instant is counted once, in the first busy category of compute, comm,
    copy, memset, so the columns add up to ``span_us``. HTA's temporal breakdown uses the same window and
    the same precedence for compute but lumps comm, copies and memsets into one "non-compute" time.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> time_breakdown(load_trace(EXAMPLE_TRACE), 0, 10)[["compute_us", "idle_us"]].values.tolist()
        [[5.0, 5.0]]
    """
    tr = as_trace(trace)
    rows = []
    for rank, dev in gpus_with_work(tr):
        work = rows_on_gpu(tr, rank, dev, WORK_KINDS)
        lo = float(work["start_us"].min()) if start_us is None else float(start_us)
        hi = float(work["end_us"].max()) if end_us is None else float(end_us)
        rows.append({"rank": rank, "device": dev, "start_us": lo, "span_us": hi - lo, **_partition(work, lo, hi)})
    if not rows:
        raise ValueError(f"{tr.source}: no GPU work in this trace, so no time breakdown")
    return _gpu_index(rows)


def profiler_steps(tr: Trace) -> pd.DataFrame:
    """The ``ProfilerStep#N`` annotations of a trace, with their number in ``step``, by rank and start.

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> len(profiler_steps(load_trace(EXAMPLE_TRACE)))
        0
    """
    ev = tr.events
    steps = ev[(ev["kind"] == "annotation").to_numpy(dtype=bool)]
    steps = steps[name_matches(steps["name"], "^ProfilerStep#")]
    steps = steps.assign(step=pd.to_numeric(steps["name"].str.slice(13), errors="coerce")).dropna(subset=["step"])
    return steps.sort_values(["rank", "start_us"], na_position="first")


def steady_window(trace: Any) -> tuple[float, float, str] | None:
    """Where a picture of the whole trace should look: the profiler's steps (``ProfilerStep#N``, from the first one's
    start to the end of the GPU work begun by the last one's end), with a sentence that says what it leaves out;
    None where the trace has no steps, or they cover all but :data:`STEADY_MIN_LEFT_OUT` of its span (start-up, a
    warm-up, the profiler's own set-up are what a whole trace often shows instead of its steps).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> steady_window(load_trace(EXAMPLE_TRACE)) is None
        True
    """
    tr = as_trace(trace)
    steps = profiler_steps(tr)
    if steps.empty:
        return None
    start, last = float(steps["start_us"].min()), float(steps["end_us"].max())
    ev = tr.events
    gpu = ev[ev["device"].notna().to_numpy(dtype=bool) & (ev["start_us"] < last).to_numpy(dtype=bool)]
    end = max(last, float(gpu["end_us"].max())) if len(gpu) else last
    lo, hi = float(ev["start_us"].min()), float(ev["end_us"].max())
    if (start - lo) + (hi - end) < STEADY_MIN_LEFT_OUT * (hi - lo):
        return None
    first, final = int(steps["step"].min()), int(steps["step"].max())
    return start, end, (f"ProfilerStep#{first} to #{final}; left out {(start - lo) / 1e3:.1f} ms before them and "
                        f"{(hi - end) / 1e3:.1f} ms after")


def step_breakdown(trace: Any) -> pd.DataFrame:
    """:func:`time_breakdown` for every ``ProfilerStep#N`` of the trace, per rank and GPU.

    Steps are cut where the host starts the next step (where ``torch.profiler``'s ``step()`` was
    called): step N's window runs from its host start to step N+1's, and the last step's to its host
    end or the end of the GPU work it launched, whichever is later. GPU work that a step launched but
    that runs after the next step began counts in the next step. HTA has no per-step breakdown; its
    temporal breakdown is this table's whole-trace row (see :func:`time_breakdown`).

    Example:
        >>> t = load_trace({"traceEvents": [
        ...     {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0,
        ...      "dur": 50},
        ...     {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 30,
        ...      "args": {"device": 0, "stream": 7}}]})
        >>> r = step_breakdown(t).iloc[0]
        >>> int(r["step"]), float(r["compute_us"]), float(r["idle_us"])
        (4, 30.0, 20.0)
    """
    tr = as_trace(trace)
    steps = profiler_steps(tr)
    if not len(steps):
        raise ValueError(f"{tr.source}: the trace has no ProfilerStep#N ranges (record it with "
                         f"torch.profiler's schedule and call prof.step() each step)")
    rows = []
    for rank, dev in gpus_with_work(tr):
        mine = steps[steps["rank"].isna()] if pd.isna(rank) else steps[(steps["rank"] == rank).fillna(False)]
        work = rows_on_gpu(tr, rank, dev, WORK_KINDS)
        starts = mine["start_us"].to_numpy(np.float64)
        for i, (step, s) in enumerate(zip(mine["step"].astype(int), starts)):
            if i + 1 < len(starts):
                e = float(starts[i + 1])
            else:
                later = work[work["start_us"] >= s]
                e = max(float(mine["end_us"].iloc[i]), float(later["end_us"].max()) if len(later) else s)
            rows.append({"step": step, "rank": rank, "device": dev, "start_us": float(s), "span_us": e - s,
                         **_partition(work, float(s), e)})
    df = pd.DataFrame(rows)
    df["rank"] = df["rank"].astype("Int64")
    return df


def top_kernels(trace: Any, n: int = 10, kinds: Iterable[str] = ("compute",)) -> pd.DataFrame:
    """The ``n`` GPU event names with the most total time: columns count, total_us, mean_us, share
    (of the total time of those kinds).

    Example:
        >>> from asynclab.trace import EXAMPLE_TRACE
        >>> top_kernels(load_trace(EXAMPLE_TRACE))["total_us"].tolist()
        [5.0]
    """
    tr = as_trace(trace)
    g = rows_of(tr, as_kinds(kinds))
    g = g[g["device"].notna()]
    if not len(g):
        return pd.DataFrame(columns=["count", "total_us", "mean_us", "share"])
    agg = g.groupby("name", sort=False)["dur_us"].agg(["count", "sum", "mean"])
    agg.columns = ["count", "total_us", "mean_us"]
    agg["share"] = agg["total_us"] / agg["total_us"].sum()
    return agg.sort_values("total_us", ascending=False).head(n)
