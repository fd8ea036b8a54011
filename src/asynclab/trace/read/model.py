"""The Trace: one event table of a torch.profiler run (or several ranks), with its lanes, windows and annotations."""
from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from asynclab.trace.read.events import KINDS, TraceError, name_matches

__all__ = ["Trace", "fmt_us", "EXAMPLE_TRACE"]


# --------------------------------------------------------------------------------------------
# The Trace object
# --------------------------------------------------------------------------------------------
class Trace:
    """The events of one torch.profiler trace as a table, plus the trace's metadata.

    ``events`` is a pandas DataFrame, one row per complete event (Chrome ``ph == "X"``),
    sorted by start time; its index (0..n-1 after loading) is what ``launch`` refers to. A loaded trace makes it
    when it is first read (loading imports no pandas): ``events`` given to the constructor is the DataFrame, or a
    table with ``frame()`` (that builds it) and ``len()``.

    ==============  =========  ===============================================================
    column          dtype      meaning
    ==============  =========  ===============================================================
    kind            str        one of :data:`KINDS`: compute, comm (NCCL/RCCL kernels), h2d, d2h,
                               d2d, p2p, memset, sync (GPU rows); launch (CUDA/HIP runtime and driver calls), cpu_op,
                               annotation (``record_function`` on the host), gpu_annotation,
                               python, other
    name            str        event name (kernel name, ``aten::mm``, ``cudaLaunchKernel``...)
    device          Int64      GPU index for GPU rows, <NA> for host rows
    stream          string     stream id as text for GPU rows ("7"), <NA> for host rows;
                               cuda_sync rows at tid = stream + 1,000,000 are mapped back;
                               syncs not tied to a stream (the host waiting for the device
                               or an event) have stream "-1", lane "GPU n · host syncs"
    lane            str        lane label in words: "GPU 0 · stream 7 (default)",
                               "CPU · main thread", "CPU · thread 1234"; with several ranks
                               "rank 1 · GPU 1 · stream 7"
    pid, tid        str        the raw pid/tid of the event, as text
    start_us        float64    start, in µs from the trace's first event
    end_us          float64    end, in µs from the trace's first event
    dur_us          float64    end_us - start_us
    correlation     Int64      CUPTI/roctracer correlation id (args "correlation"), launches
                               and GPU rows
    bytes           Int64      bytes moved/set (args "bytes"/"Bytes"), copies and memsets
    src_device      Int64      source GPU of a copy (<NA> for host memory)
    dst_device      Int64      destination GPU of a copy (<NA> for host memory)
    launch          Int64      for GPU rows: index label of the host launch row with the same
                               correlation (one launch may own many GPU rows, e.g. a CUDA graph);
                               <NA> when there is none in the trace (or the window)
    rank            Int64      the process's rank (``distributedInfo``, or the file's place among
                               the rank files loaded together); <NA> for a trace of no rank
    blocks          Int64      thread blocks of a kernel (the product of its ``grid`` arg); <NA>
                               where the trace does not say
    ==============  =========  ===============================================================

    ``meta`` holds the top-level trace fields (``baseTimeNanoseconds``, ``deviceProperties``,
    ``distributedInfo``, ``schemaVersion``...), plus ``source``, ``t0_us`` (raw ``ts`` of the
    first event), ``time_base`` ("epoch" or "baseTimeNanoseconds"), ``platform`` ("cuda",
    "rocm" or "cpu"), thread/process names, and, when they apply, ``recovered_events``
    (truncated file), ``skipped_events`` and ``window``.

    Example:
        >>> from asynclab.trace import load_trace; t = load_trace({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k",
        ...     "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}}]})
        >>> t.lanes()
        ['GPU 0 · stream 7 (default)']
    """

    def __init__(self, events: Any, meta: dict[str, Any] | None = None, source: str = "<trace>"):
        self.events = events
        self.meta = dict(meta or {})
        self.source = str(source)
        self._lanes: list[str] | None = None

    @property
    def events(self) -> pd.DataFrame:
        """The event table (a DataFrame), made on first use from the columns the trace was loaded into."""
        if self._table is not None:
            self._events, self._table = self._table.frame(), None
        return self._events

    @property
    def table(self) -> Any:
        """The columns a loaded trace holds until its events are first read (an ``EventColumns``), then None.

        Example:
            >>> from asynclab.trace import load_trace; t = load_trace(EXAMPLE_TRACE)
            >>> len(t.table), len(t.events), t.table
            (2, 2, None)
        """
        return self._table

    @events.setter
    def events(self, events: Any) -> None:
        lazy = hasattr(events, "frame") and not hasattr(events, "columns")
        self._events, self._table = (None, events) if lazy else (events, None)

    # -- basic protocol -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._table) if self._table is not None else len(self.events)

    def __repr__(self) -> str:
        ev = self.events
        devs = self.devices
        n_gpu_lanes = int(ev.loc[ev["device"].notna(), "lane"].nunique()) if len(ev) else 0
        span = float(ev["end_us"].max() - ev["start_us"].min()) if len(ev) else 0.0
        name = os.path.basename(self.source) or self.source
        gpus = f"{len(devs)} GPU{'s' if len(devs) != 1 else ''}" + (f" {tuple(devs)}" if devs else "")
        n_ranks = int(ev["rank"].nunique()) if "rank" in ev and len(ev) else 0
        if n_ranks > 1:
            gpus = f"{n_ranks} ranks, {gpus}"
        win = ""
        if "window" in self.meta:
            a, b = self.meta["window"]
            win = f", window {a:.1f}–{b:.1f} µs"
        return (f"<Trace {name!r}: {len(ev):,} events, {gpus}, {n_gpu_lanes} GPU lane"
                f"{'s' if n_gpu_lanes != 1 else ''}, span {fmt_us(span)}{win}>")

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def devices(self) -> list[int]:
        """Sorted GPU indices that have events.

        Example:
            >>> from asynclab.trace import load_trace; load_trace(EXAMPLE_TRACE).devices
            [0]
        """
        d = self.events["device"].dropna().unique()
        return sorted(int(x) for x in d)

    def gpu(self) -> pd.DataFrame:
        """The GPU rows (kernels, copies, memsets, syncs, GPU annotations).

        Example:
            >>> from asynclab.trace import load_trace; len(load_trace(EXAMPLE_TRACE).gpu())
            1
        """
        return self.events[self.events["device"].notna()]

    def host(self) -> pd.DataFrame:
        """The host rows (launches, CPU ops, annotations, python, other).

        Example:
            >>> from asynclab.trace import load_trace; load_trace(EXAMPLE_TRACE).host()["name"].tolist()
            ['cudaLaunchKernel']
        """
        return self.events[self.events["device"].isna()]

    def find(self, text: str, kinds: str | tuple[str, ...] | list[str] | None = None) -> pd.DataFrame:
        """The rows whose name contains ``text`` (case-sensitive), in time order; ``kinds`` keeps only those kinds.

        Example:
            >>> from asynclab.trace import load_trace; load_trace(EXAMPLE_TRACE).find("Launch")["kind"].tolist()
            ['launch']
            >>> from asynclab.trace import load_trace; len(load_trace(EXAMPLE_TRACE).find("k", kinds="compute"))
            1
        """
        import pandas as pd

        ev = self.events
        keep = pd.Series(name_matches(ev["name"], re.escape(text)), index=ev.index)
        if kinds is not None:
            wanted = (kinds,) if isinstance(kinds, str) else tuple(kinds)
            unknown = [k for k in wanted if k not in KINDS]
            if unknown:
                raise ValueError(f"unknown kind(s) {unknown}; the kinds are {', '.join(KINDS)}")
            keep &= ev["kind"].isin(wanted)
        return ev[keep]

    def lanes(self) -> list[str]:
        """Lane labels in drawing order: GPU lanes by device then stream, then the host threads that
        launched work (main thread first). A trace without launches lists its CPU threads instead.

        Example:
            >>> from asynclab.trace import load_trace; load_trace(EXAMPLE_TRACE).lanes()
            ['GPU 0 · stream 7 (default)', 'CPU · main thread']
        """
        if self._lanes is None:
            self._lanes = _lane_order(self.events, self.meta)
        return list(self._lanes)

    def window(self, start_us: float | None = None, end_us: float | None = None, *,
               annotation: str | None = None, occurrence: int | None = None, rank: int | None = None,
               clip: bool = True) -> "Trace":
        """A new Trace restricted to a time range, given in µs or by an annotation's name.

        Events that overlap the range are kept. With ``clip=True`` (the default) their start/end are
        clipped to the range (and ``dur_us`` recomputed) so that metrics measure only the window;
        times stay on the original axis (µs from the trace's first event). ``annotation`` takes the
        range from the ``record_function`` (host and GPU) annotations of that name: from the first
        one's start to the last one's end, or only the ``occurrence``-th one (0-based, host first); with
        ``rank``, only that rank's annotations count (the window still keeps every rank's events).
        ``launch`` keeps pointing at the original index labels; it becomes <NA> when the launch row
        falls outside the window.

        Example:
            >>> from asynclab.trace import load_trace; load_trace(EXAMPLE_TRACE).window(0, 3).events["dur_us"].tolist()  # kernel [1, 6) clipped to [1, 3)
            [2.0, 2.0]
        """
        ev = self.events
        if annotation is not None:
            if start_us is not None or end_us is not None:
                raise TraceError(f"{self.source}: give either a time range or an annotation, not both")
            start_us, end_us = self.annotation_range(annotation, occurrence, rank)
        elif rank is not None:
            raise TraceError(f"{self.source}: rank picks an annotation's range: give annotation= with it")
        lo = float(ev["start_us"].min()) if len(ev) else 0.0
        hi = float(ev["end_us"].max()) if len(ev) else 0.0
        s = lo if start_us is None else float(start_us)
        e = hi if end_us is None else float(end_us)
        if not (np.isfinite(s) and np.isfinite(e)):
            raise TraceError(f"{self.source}: window bounds must be finite numbers")
        if s > e:
            raise TraceError(f"{self.source}: window start ({s:g} µs) is after its end ({e:g} µs)")
        st = ev["start_us"].to_numpy()
        en = ev["end_us"].to_numpy()
        # events that overlap the range, and instants inside it (an event that only touches an edge is outside)
        keep = ((st < e) & (en > s)) | ((st == en) & (st >= s) & (st <= e))
        sub = ev[keep].copy()
        if clip and len(sub):
            a = np.maximum(sub["start_us"].to_numpy(), s)
            b = np.minimum(sub["end_us"].to_numpy(), e)
            sub["start_us"] = a
            sub["end_us"] = b
            sub["dur_us"] = b - a
        if len(sub):
            la = sub["launch"]
            gone = la.notna() & ~la.isin(sub.index)
            if gone.any():
                import pandas as pd

                sub.loc[gone, "launch"] = pd.NA
        meta = dict(self.meta)
        meta["window"] = (s, e)
        meta["window_clipped"] = bool(clip)
        return Trace(sub, meta, self.source)

    def annotation_range(self, annotation: str, occurrence: int | None = None,
                         rank: int | None = None) -> tuple[float, float]:
        """(start_us, end_us) of the annotation(s) called ``annotation`` (see :meth:`window`), of one ``rank``
        only when given (in a trace of several ranks, each rank has its own ``ProfilerStep#N``).

        Example:
            >>> from asynclab.trace import load_trace; t = load_trace({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "fwd",
            ...     "pid": 1, "tid": 1, "ts": 5, "dur": 10}]})
            >>> t.annotation_range("fwd")
            (0.0, 10.0)
        """
        ev = self.events
        if rank is not None:
            ranks = sorted(int(r) for r in ev["rank"].dropna().unique()) if "rank" in ev else []
            if rank not in ranks:
                raise TraceError(f"{self.source}: no rank {rank!r} here (ranks: "
                                 f"{', '.join(map(str, ranks)) if ranks else 'none, a trace of one process'})")
            ev = ev[ev["rank"] == rank]
        is_ann = ev["kind"].isin(("annotation", "gpu_annotation"))
        rows = ev[is_ann & (ev["name"] == annotation)]
        if not len(rows):
            names = list(dict.fromkeys(ev.loc[is_ann, "name"].astype(str)))
            hint = f" (annotations here: {', '.join(names[:6])}{', ...' if len(names) > 6 else ''})" if names \
                else " (the trace has no record_function annotations)"
            raise TraceError(f"{self.source}: no annotation named {annotation!r}{hint}")
        if occurrence is not None:
            host = rows[rows["kind"] == "annotation"]
            pick = host if len(host) else rows
            if not -len(pick) <= occurrence < len(pick):
                raise TraceError(f"{self.source}: annotation {annotation!r} occurs {len(pick)} time(s); "
                                 f"occurrence {occurrence} does not exist")
            r = pick.iloc[occurrence]
            return float(r["start_us"]), float(r["end_us"])
        return float(rows["start_us"].min()), float(rows["end_us"].max())

    def span_us(self) -> float:
        """Time from the first event's start to the last event's end, in µs.

        Example:
            >>> from asynclab.trace import load_trace; load_trace(EXAMPLE_TRACE).span_us()
            6.0
        """
        if self._table is not None and hasattr(self._table, "span_us"):
            return self._table.span_us()
        ev = self.events
        return float(ev["end_us"].max() - ev["start_us"].min()) if len(ev) else 0.0


def _stream_sort_key(s: str) -> tuple:
    try:
        v = int(s)
        return (0, v if v >= 0 else float("inf"), "")
    except (TypeError, ValueError):
        pass
    try:
        return (0, int(str(s), 16), "") if str(s).lower().startswith("0x") else (1, 0, str(s))
    except ValueError:
        return (1, 0, str(s))


def _lane_order(ev: pd.DataFrame, meta: dict[str, Any]) -> list[str]:
    """Lanes rank by rank (a trace of one rank has one group), each rank's GPU lanes before its host lanes."""
    if not len(ev):
        return []
    ranks = sorted(int(r) for r in ev["rank"].dropna().unique()) if "rank" in ev else []
    if len(ranks) <= 1:
        return _rank_lane_order(ev)
    return [lane for r in ranks for lane in _rank_lane_order(ev[ev["rank"] == r])]


def _rank_lane_order(ev: pd.DataFrame) -> list[str]:
    import pandas as pd

    is_gpu = ev["device"].notna().to_numpy()
    g = ev.loc[is_gpu, ["lane", "device", "stream"]].drop_duplicates("lane")
    g_sorted = sorted(zip(g["device"].astype(int), g["stream"].astype(str), g["lane"]),
                      key=lambda r: (r[0], _stream_sort_key(r[1])))
    out = [r[2] for r in g_sorted]
    h = ev.loc[~is_gpu]
    host_lanes: list[str] = []
    for kinds in (("launch",), ("cpu_op", "annotation", "python")):
        sub = h[h["kind"].isin(kinds)]
        sub = sub[pd.to_numeric(sub["pid"], errors="coerce").notna()]
        if len(sub):
            first = sub.groupby("lane", sort=False)["start_us"].min().sort_values()
            host_lanes = list(first.index)
            break
    host_lanes.sort(key=lambda s: ("CPU · main thread" not in s,))
    return out + host_lanes


def fmt_us(us: float) -> str:
    """A duration in µs in the unit that reads best.

    Example:
        >>> fmt_us(1500.0), fmt_us(12.0)
        ('1.500 ms', '12.0 µs')
    """
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} µs"


#: A two-event trace (a launch and its kernel) for examples.
EXAMPLE_TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 2,
     "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 1}},
]}
