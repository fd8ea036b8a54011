"""Load one trace per rank as a single Trace: ranks from distributedInfo, clocks aligned, lanes named by rank."""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from asynclab.trace.read.events import TraceError, TraceWarning
from asynclab.trace.read.file import gc_paused, load_file
from asynclab.trace.read.model import Trace
from asynclab.trace.read.table import EventColumns

__all__ = ["load_ranks", "rank_files", "step_window"]

_SUFFIXES = (".json", ".json.gz")


def rank_files(folder: str | os.PathLike) -> list[Path]:
    """The trace files (``*.json``, ``*.json.gz``) directly inside ``folder``, sorted by name.

    Example:
        >>> rank_files("/no/such/folder")
        Traceback (most recent call last):
        ...
        asynclab.trace.read.events.TraceError: /no/such/folder: no such folder
    """
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise TraceError(f"{folder}: no such folder")
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(_SUFFIXES))
    if not files:
        raise TraceError(f"{folder}: the folder holds no trace files (*.json or *.json.gz)")
    return files


def load_ranks(sources: str | os.PathLike | Iterable[str | os.PathLike]) -> Trace:
    """One Trace from a folder of per-rank trace files, or a list of their paths.

    Each file's rank is its ``distributedInfo.rank`` (torch.profiler writes it under torch.distributed);
    files without one take their place in sorted order, which ``meta["rank_source"]`` then says. Clocks
    are aligned on each file's absolute time (``baseTimeNanoseconds`` + ts, or epoch µs), so that a send
    on rank 0 and its receive on rank 1 line up; times are µs from the earliest rank's first event.
    With more than one rank, lanes read "rank 1 · GPU 1 · stream 7" and ``launch`` keeps pointing at
    the same rank's launch rows. A broken file raises a one-line :class:`TraceError` naming it; two
    files claiming one rank, or a file whose clock cannot be placed, are errors too; a rank missing
    from ``world_size`` is a warning.

    Example:
        >>> doc = lambda r: {"distributedInfo": {"rank": r, "world_size": 2}, "baseTimeNanoseconds": 10**18,
        ...     "traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv", "pid": r,
        ...                      "tid": 20, "ts": 5 + r, "dur": 3, "args": {"device": r, "stream": 20}}]}
        >>> import json, tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> for r in (0, 1): _ = (d / f"rank{r}.json").write_text(json.dumps(doc(r)))
        >>> t = load_ranks(d)
        >>> t.events[["rank", "lane", "start_us"]].values.tolist()
        [[0, 'rank 0 · GPU 0 · stream 20', 0.0], [1, 'rank 1 · GPU 1 · stream 20', 1.0]]
    """
    paths, label = _paths(sources)
    with gc_paused():
        traces = [load_file(p) for p in paths]
    if len(traces) > 1:
        for t in traces:
            if "damage" in t.meta:  # one rank cut short would show a run that never happened
                raise TraceError(f"{t.source}: the trace {t.meta['damage']}; every rank file of a run must be "
                                 f"complete (load this file on its own to see what it holds)")
    ranks, how = _ranks(traces)
    offsets = _clock_offsets(traces)
    meta = _merged_meta(traces, ranks, offsets, how, label)
    _warn_missing(traces, ranks, label)
    _warn_unrelated(traces, ranks, offsets, how, label)
    return Trace(_Merged(traces, ranks, offsets), meta, label)


class _Merged:
    """The ranks' event tables as one, merged when the Trace's events are first read (:attr:`Trace.events`)."""

    def __init__(self, traces: list[Trace], ranks: list[int], offsets: list[float]):
        self.traces, self.ranks, self.offsets = traces, ranks, offsets

    def __len__(self) -> int:
        return sum(len(t) for t in self.traces)

    def frame(self) -> "pd.DataFrame":
        return _merged(self.traces, self.ranks, self.offsets).frame()


#: The columns of an EventColumns that the event table is made of.
_MERGED = ("kind", "name", "device", "stream", "pid", "tid", "start", "end", "dur", "correlation", "bytes", "src", "dst",
           "blocks")


def _merged(traces: list[Trace], ranks: list[int], offsets: list[float]) -> EventColumns:
    """The ranks' columns as one table, rank by rank, clocks shifted, then in time order (stable); lanes named by rank
    when there are several, ``launch`` pointing at the same launch row in its new place."""
    parts: dict[str, list] = {k: [] for k in (*_MERGED, "lane", "launch", "rank")}
    pos = 0
    for i in np.argsort(ranks, kind="stable"):
        t = traces[i].table
        n = len(t)
        for k in _MERGED:
            parts[k].append(t.cols[k])
        parts["start"][-1] = t.cols["start"] + offsets[i]
        parts["end"][-1] = t.cols["end"] + offsets[i]
        lane = t.lane
        if len(traces) > 1:
            named = {x: f"rank {ranks[i]} · {x}" for x in set(lane.tolist())}
            lane = np.array(list(map(named.__getitem__, lane.tolist())), dtype=object)
        parts["lane"].append(lane)
        parts["launch"].append(t.launch + pos)
        parts["rank"].append(np.full(n, float(ranks[i])))
        pos += n
    cols = {k: np.concatenate(v) for k, v in parts.items()}
    order = np.argsort(cols["start"], kind="stable")
    cols = {k: v[order] for k, v in cols.items()}
    new_of_old = np.empty(len(order), np.int64)
    new_of_old[order] = np.arange(len(order))
    launch = cols.pop("launch")
    ok = np.isfinite(launch)
    launch[ok] = new_of_old[launch[ok].astype(np.int64)]
    return EventColumns(cols, cols.pop("lane"), launch, cols.pop("rank"))


def step_window(trace: Trace, annotation: str) -> Trace:
    """One step of a run of several ranks: from when the last rank starts ``annotation`` to when the last one
    ends it, with every rank's events.

    Each rank has its own ``ProfilerStep#N``, and the ranks start a step at different times. The union of
    their ranges (``trace.window(annotation=...)``) also holds the end of the step before on a rank that
    finished it late, while the others wait for it. A step that starts with a barrier (``dist.barrier()``)
    truly begins when the last rank arrives; this window starts there. A trace of one rank gives that
    rank's range.

    Example:
        >>> ann = lambda r, ts, dur: {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": r,
        ...                          "tid": 1, "ts": ts, "dur": dur}
        >>> doc = lambda r, ts, dur: {"distributedInfo": {"rank": r, "world_size": 2}, "baseTimeNanoseconds": 0,
        ...                           "traceEvents": [ann(r, ts, dur)]}
        >>> import json, tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> for r, ts in ((0, 110), (1, 100)): _ = (d / f"rank{r}.json").write_text(json.dumps(doc(r, ts, 50)))
        >>> t = load_ranks(d)
        >>> t.window(annotation="ProfilerStep#1").meta["window"], step_window(t, "ProfilerStep#1").meta["window"]
        ((0.0, 60.0), (10.0, 60.0))
    """
    ranks = sorted(int(r) for r in trace.events["rank"].dropna().unique()) if "rank" in trace.events else []
    if len(ranks) <= 1:
        return trace.window(annotation=annotation)
    ranges = [trace.annotation_range(annotation, rank=r) for r in ranks]
    return trace.window(max(s for s, _ in ranges), max(e for _, e in ranges))


def _paths(sources: Any) -> tuple[list[Path], str]:
    if isinstance(sources, (str, os.PathLike)):
        return rank_files(sources), str(sources)
    paths = [Path(p).expanduser() for p in sources]
    if not paths:
        raise TraceError("no trace files given")
    seen: set[Path] = set()
    for p in paths:
        if p.resolve() in seen:
            raise TraceError(f"{p}: given twice")
        seen.add(p.resolve())
    label = str(paths[0]) if len(paths) == 1 else f"{paths[0]} + {len(paths) - 1} more"
    return paths, label


def _ranks(traces: list[Trace]) -> tuple[list[int], str]:
    """Each trace's rank, and where the ranks came from ("distributedInfo" or "file order")."""
    known = [_info_rank(t) for t in traces]
    if all(r is None for r in known):
        return list(range(len(traces))), "file order"
    for t, r in zip(traces, known):
        if r is None:
            raise TraceError(f"{t.source}: has no distributedInfo rank, but the other files have one; "
                             f"load it on its own or record it under torch.distributed")
    by_rank: dict[int, str] = {}
    for t, r in zip(traces, known):
        if r in by_rank:
            raise TraceError(f"{t.source}: rank {r} again (also in {by_rank[r]}); give each rank's file once")
        by_rank[r] = t.source
    return [int(r) for r in known], "distributedInfo"


def _info_rank(t: Trace) -> int | None:
    info = t.meta.get("distributedInfo")
    r = info.get("rank") if isinstance(info, dict) else None
    return r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else None


def _clock_offsets(traces: list[Trace]) -> list[float]:
    """µs from the earliest trace's first event to each trace's first event, on the shared clock."""
    if len(traces) == 1:
        return [0.0]
    t0 = []
    for t in traces:
        v = t.meta.get("t0_epoch_us")
        if v is None:
            raise TraceError(f"{t.source}: its clock cannot be placed beside the other ranks' (no "
                             f"baseTimeNanoseconds, and its timestamps are not µs since the epoch)")
        t0.append(float(v))
    first = min(t0)
    return [v - first for v in t0]


def _merged_meta(traces: list[Trace], ranks: list[int], offsets: list[float], how: str, label: str) -> dict:
    first = traces[int(np.argmin(offsets))]
    meta: dict[str, Any] = {
        "source": label,
        "rank_source": how,
        "ranks": {r: {"source": t.source, "offset_us": off, "meta": t.meta}
                  for r, t, off in sorted(zip(ranks, traces, offsets), key=lambda x: x[0])},
        "t0_epoch_us": first.meta.get("t0_epoch_us"),
        "time_base": "aligned across ranks" if len(traces) > 1 else first.meta.get("time_base"),
        "platform": first.meta.get("platform"),
    }
    for key in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "schemaVersion"):
        if key in first.meta:
            meta[key] = first.meta[key]
    if len(traces) == 1:
        meta["main_thread"] = first.meta.get("main_thread")
    return meta


def _warn_missing(traces: list[Trace], ranks: list[int], label: str) -> None:
    sizes = {t.meta["distributedInfo"].get("world_size") for t in traces
             if isinstance(t.meta.get("distributedInfo"), dict)}
    sizes = {s for s in sizes if isinstance(s, int)}
    if len(sizes) == 1:
        world = sizes.pop()
        missing = sorted(set(range(world)) - set(ranks))
        if missing:
            warnings.warn(f"{label}: world size {world}, but no file for rank(s) "
                          f"{', '.join(map(str, missing))}", TraceWarning, stacklevel=3)


def _warn_unrelated(traces: list[Trace], ranks: list[int], offsets: list[float], how: str, label: str) -> None:
    """Warn when the files do not look like one run: ranks guessed from file order, or a rank that ran at
    another time than all the others."""
    if len(traces) < 2:
        return
    if how == "file order":
        warnings.warn(f"{label}: no distributedInfo in the files; ranks are their places in sorted order",
                      TraceWarning, stacklevel=3)
    spans = [(off, off + t.span_us()) for t, off in zip(traces, offsets)]
    for i, (a, b) in enumerate(spans):
        if not any(a < d and c < b for j, (c, d) in enumerate(spans) if j != i):
            warnings.warn(f"{traces[i].source}: rank {ranks[i]} ran at another time than the other ranks "
                          f"(no overlap on the shared clock): are these files from one run?", TraceWarning,
                          stacklevel=3)
            return
