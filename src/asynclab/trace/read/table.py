"""Build the event table from raw trace columns, one step per function (vectorised; no per-row DataFrame work).

The columns are built with numpy alone; pandas is imported, and the DataFrame made, only when the table is first read
(:class:`EventColumns`), so that loading a trace does not pay for importing pandas."""
from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np

from asynclab.trace.read.events import (
    COPY_KINDS, DEFAULT_CUDA_STREAM, GPU_KINDS, SYNC_TID_OFFSET, TraceError, TraceWarning, comm_kernel, copy_kind,
    kind_of_cat,
)
from asynclab.trace.read.io import RawEvents

#: The kinds of the rows that run on a GPU, a copy of unknown direction among them.
GPU_OR_COPY = (*GPU_KINDS, "copy")

__all__ = ["build_table", "build_columns", "EventColumns", "COLUMNS"]

#: The event table's columns, in order.
COLUMNS = (
    "kind", "name", "device", "stream", "lane", "pid", "tid", "start_us", "end_us", "dur_us",
    "correlation", "bytes", "src_device", "dst_device", "launch", "rank", "blocks",
)


def build_table(raw: RawEvents, name: str, meta: dict[str, Any]) -> "pd.DataFrame":
    """The event table of one trace (see :class:`asynclab.trace.Trace`), filling ``meta`` as it goes.

    Example:
        >>> from asynclab.trace.read.io import from_document
        >>> raw = from_document({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv",
        ...     "pid": 0, "tid": 20, "ts": 5, "dur": 3, "args": {"device": 0, "stream": 20}}]}, "<dict>")
        >>> build_table(raw, "<dict>", {})[["kind", "lane", "start_us"]].values.tolist()
        [['comm', 'GPU 0 · stream 20', 0.0]]
    """
    return build_columns(raw, name, meta).frame()


class EventColumns:
    """The event table's columns as numpy arrays; :meth:`frame` makes the DataFrame (importing pandas then).

    Example:
        >>> from asynclab.trace.read.io import from_document
        >>> raw = from_document({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
        ...     "ts": 5, "dur": 3, "args": {"device": 0, "stream": 7}}]}, "<dict>")
        >>> cols = build_columns(raw, "<dict>", {})
        >>> len(cols), cols.span_us(), cols.frame()["lane"].tolist()
        (1, 3.0, ['GPU 0 · stream 7 (default)'])
    """

    def __init__(self, cols: dict[str, np.ndarray], lane: np.ndarray, launch: np.ndarray, rank: float):
        self.cols, self.lane, self.launch, self.rank = cols, lane, launch, rank

    def __len__(self) -> int:
        return len(self.cols["start"])

    def span_us(self) -> float:
        """Time from the first event's start to the last event's end, in µs (as :meth:`Trace.span_us`)."""
        return float(self.cols["end"].max() - self.cols["start"].min()) if len(self) else 0.0

    def frame(self) -> "pd.DataFrame":
        """The event table (:data:`COLUMNS`, in that order)."""
        return _frame(self.cols, self.lane, self.launch, self.rank)


def build_columns(raw: RawEvents, name: str, meta: dict[str, Any]) -> EventColumns:
    """The columns of :func:`build_table`, without the DataFrame (nor pandas), filling ``meta`` as it goes.

    Example:
        >>> from asynclab.trace.read.io import from_document
        >>> raw = from_document({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
        ...     "ts": 5, "dur": 3}]}, "<dict>")
        >>> build_columns(raw, "<dict>", {}).cols["kind"].tolist()
        ['cpu_op']
    """
    if not len(raw) and not raw.meta_events:
        raise TraceError(f"{name}: the trace has no complete events (only metadata, flows or instant events)")
    if not len(raw):
        raise TraceError(f"{name}: the trace has no complete events (only metadata, flows or instant events)")
    _read_metadata(raw.meta_events, meta)
    ts, dur = _valid_times(raw, name, meta)
    start, end = _normalise_times(ts, dur, meta)
    cat_c, name_c, pid_c, tid_c = raw.coded("cat", "name", "pid", "tid")
    kind, names, cats = _classify(cat_c, name_c)
    cat_kinds = [kind_of_cat(c) for c in cats[1]]  # a row's kind before a GPU row's is refined: a host row's kind
    launches = np.flatnonzero(_of_kind(cats[0], cat_kinds, ("launch",)))
    (pid_code, pid_texts), (tid_code, tid_texts) = _texts(pid_c), _texts(tid_c)
    gpu = _gpu_columns(raw, (kind, np.flatnonzero(_of_kind(cats[0], cat_kinds, GPU_OR_COPY))), names,
                       (pid_code, pid_texts), (tid_code, tid_texts))
    meta["platform"] = _platform(cats, names, gpu["idx"], launches, meta)
    cols = _full_columns(len(start), kind, gpu, (launches, _num(raw.arg("correlation", launches))))
    cols.update(kind=kind, name=names, start=start, end=end, dur=dur, pid_code=pid_code, tid_code=tid_code,
                cat_code=cats[0])
    cols = _in_time_order(cols)
    cols.update(pid=pid_texts[cols["pid_code"]], tid=tid_texts[cols["tid_code"]])
    is_gpu = np.isfinite(cols["device"])
    lane, main_key = _lane_labels((cols["cat_code"], cat_kinds), is_gpu, cols["device"], cols["stream"],
                                  (cols["pid_code"], pid_texts), (cols["tid_code"], tid_texts), cols["start"], meta)
    meta["main_thread"] = main_key
    launch = _link_launches(_of_kind(cols["cat_code"], cat_kinds, ("launch",)), cols["correlation"], is_gpu)
    if not (cols["kind"] != "other").any():
        raise TraceError(f"{name}: the trace has no GPU or host activity (only {len(lane):,} bookkeeping events)")
    return EventColumns(cols, lane, launch, _rank_of(meta))


# --------------------------------------------------------------------------------------------
# Step 1: valid times
# --------------------------------------------------------------------------------------------
def _valid_times(raw: RawEvents, name: str, meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``ts`` and ``dur`` as arrays, after dropping (with a warning) events whose times are not numbers."""
    ts = raw.floats("ts")
    ts = _times(raw.values("ts"))[0] if ts is None else ts
    dur = raw.floats("dur")
    dur = _num(raw.values("dur")) if dur is None else dur
    tsf = ts.astype(np.float64) if ts.dtype.kind in "iu" else ts
    bad = ~np.isfinite(tsf) | ~np.isfinite(dur) | (dur < 0)
    n_bad = int(bad.sum())
    if not n_bad:
        return ts, dur
    i = int(np.flatnonzero(bad)[0])
    why = _why_bad(raw.values("ts")[i], raw.values("dur")[i])
    if n_bad == len(ts):
        raise TraceError(f"{name}: no valid events: every complete event has a bad 'ts' or 'dur' (e.g. {why})")
    warnings.warn(f"{name}: skipped {n_bad:,} malformed event(s) of {len(ts):,} "
                  f"(e.g. {_short(raw.values('name')[i])}: {why})", TraceWarning, stacklevel=6)
    keep = np.flatnonzero(~bad)
    raw.keep(keep)
    meta["skipped_events"] = n_bad
    return ts[keep], dur[keep]


def _times(values: list) -> tuple[np.ndarray, bool]:
    """ts list -> (float64 or int64 array, all_integer). Integer µs since the epoch are kept exact."""
    if values and type(values[0]) is float:  # the typed reader's floats: one pass, no type discovery
        try:
            return np.fromiter(values, np.float64, len(values)), False
        except (TypeError, ValueError):  # a value of another type: numpy's discovery below
            pass
    try:
        a = np.array(values)
    except (TypeError, ValueError):  # pragma: no cover - ragged nested lists
        a = np.array(values, dtype=object)
    if a.dtype.kind in "iu":
        return a, True
    if a.dtype.kind == "f":
        return a, False
    return _num(values), False


def _why_bad(ts: Any, dur: Any) -> str:
    t = _num([ts])[0]
    d = _num([dur])[0]
    if ts is None:
        return "no 'ts'"
    if not np.isfinite(t):
        return f"ts={_short(ts)} is not a number"
    if dur is None:
        return "no 'dur'"
    if not np.isfinite(d):
        return f"dur={_short(dur)} is not a number"
    return f"dur={_short(dur)} is negative"


# --------------------------------------------------------------------------------------------
# Step 2: one time axis
# --------------------------------------------------------------------------------------------
def _normalise_times(ts: np.ndarray, dur: np.ndarray, meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Start and end in µs from the first event; ``meta`` learns the first event's absolute time."""
    t0 = ts.min()
    start = (ts - t0).astype(np.float64)
    t0f = float(t0)
    meta["t0_us"] = t0f
    base_ns = meta.get("baseTimeNanoseconds")
    if isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool):
        meta["time_base"] = "baseTimeNanoseconds"
        meta["t0_epoch_us"] = base_ns / 1000.0 + t0f
    else:
        meta["time_base"] = "epoch" if t0f > 1e14 else "unknown"
        meta["t0_epoch_us"] = t0f if t0f > 1e14 else None
    return start, start + dur


# --------------------------------------------------------------------------------------------
# Step 3: kinds
# --------------------------------------------------------------------------------------------
#: Device rows of an MTIA trace (category ``mtia_ccp_events``) that are not work, or not a kernel: by name.
_MTIA_ROWS = {"dma_request": "copy", "event_wait": "sync"}


def _classify(cat: tuple[np.ndarray, list], name: tuple[np.ndarray, list]) -> tuple[np.ndarray, np.ndarray,
                                                                                  tuple[np.ndarray, list]]:
    """(kind, name, category) columns: the kind from the category, then copies by direction and kernels by what they
    do; the category as its codes and distinct values (:meth:`RawEvents.coded`)."""
    cat_codes, cat_uniq = cat
    kind = np.array([kind_of_cat(c) for c in cat_uniq], dtype=object)[cat_codes]
    name_codes, texts = _texts(name)
    names = texts[name_codes]
    if "mtia_ccp_events" in cat_uniq:
        mtia = np.flatnonzero(cat_codes == cat_uniq.index("mtia_ccp_events"))
        kind[mtia] = [_MTIA_ROWS.get(n, "compute") for n in names[mtia]]
    kernels = np.flatnonzero(kind == "compute")
    if len(kernels):
        codes = name_codes[kernels]
        is_comm = np.zeros(len(texts), dtype=bool)
        used = np.unique(codes)
        is_comm[used] = [comm_kernel(texts[c]) for c in used]
        kind[kernels[is_comm[codes]]] = "comm"
    return kind, names, (cat_codes, cat_uniq)


# --------------------------------------------------------------------------------------------
# Step 4: the GPU rows' device, stream, copy endpoints and sizes
# --------------------------------------------------------------------------------------------
def _gpu_columns(raw: RawEvents, kinds: tuple[np.ndarray, np.ndarray], names: np.ndarray,
                 pid: tuple[np.ndarray, np.ndarray], tid: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    """Columns for the GPU rows only (position ``idx`` in the trace): ``kinds`` is every row's kind and the GPU rows'
    positions; copies get their direction in the kind. ``pid`` and ``tid``: each row's code and the distinct texts
    (:func:`_texts`)."""
    kind, idx = kinds
    mem = idx[_among(kind[idx], ("copy", "memset"))]
    mem_pos = np.searchsorted(idx, mem)

    mem_cols = []
    *numbers, direction = raw.args_of(mem, "fromDevice", "toDevice", "inDevice", "bytes", "Bytes", "size", "direction")
    for values in numbers:
        col = np.full(len(idx), np.nan)
        col[mem_pos] = _num(values)
        mem_cols.append(col)
    from_dev, to_dev, in_dev, nbytes, nbytes_alt, size = mem_cols
    nbytes = np.where(np.isfinite(nbytes), nbytes, np.where(np.isfinite(nbytes_alt), nbytes_alt, size))
    dev_arg, corr, grid, stream_arg = raw.args_of(idx, "device", "correlation", "grid", "stream")
    pid_code, pids, tid_code, tids = pid[0][idx], pid[1], tid[0][idx], tid[1]
    device = _device_of(_num(dev_arg), _num_by_unique(pids)[pid_code], in_dev, from_dev, pids[pid_code])
    _copy_directions(kind, names, idx, mem_pos, from_dev, to_dev, direction)
    kind_g = kind[idx]
    stream = _streams(kind_g, _strip_stream_prefix(tids)[tid_code], _num(stream_arg))
    src, dst = _copy_endpoints(kind_g, device, from_dev, to_dev)
    nbytes = np.where(_among(kind_g, COPY_KINDS + ("memset", "other")), nbytes, np.nan)
    return {"idx": idx, "device": device, "stream": stream, "src": src, "dst": dst, "bytes": nbytes,
            "correlation": _num(corr), "blocks": _blocks(grid)}


def _blocks(grids: list) -> np.ndarray:
    """Thread blocks of each kernel from its ``grid`` arg ([x, y, z]); NaN where the trace has none.

    Example:
        >>> _blocks([[8, 2, 1], None, [1, 1]]).tolist()
        [16.0, nan, nan]
    """
    fast = _blocks_of_int_grids(grids)
    if fast is not None:
        return fast
    try:  # the common case in one pass: every grid a list of three integers, or absent
        out = np.fromiter((g[0] * g[1] * g[2] if type(g) is list and len(g) == 3 else -1 for g in grids),
                          dtype=np.int64, count=len(grids)).astype(np.float64)
        out[out < 0] = np.nan
        return out
    except (TypeError, ValueError, OverflowError):  # a grid of other values: judged one by one
        return np.array([float(g[0] * g[1] * g[2]) if type(g) is list and len(g) == 3
                         and all(type(v) is int and v >= 0 for v in g) else np.nan for g in grids])


def _blocks_of_int_grids(grids: list) -> np.ndarray | None:
    """:func:`_blocks` in numpy where every grid that is a list holds three integers from 0 to 2**21 (their product fits
    an int64), as kineto writes them; else None.

    Example:
        >>> _blocks_of_int_grids([[8, 2, 1], None, [4, 1, 1]]).tolist(), _blocks_of_int_grids([[8, -2, 1]])
        ([16.0, nan, 4.0], None)
    """
    at = [i for i, g in enumerate(grids) if type(g) is list]
    try:
        a = np.array([grids[i] for i in at]) if at else np.zeros((0, 3), dtype=np.int64)
    except ValueError:  # lists of different lengths
        return None
    if a.dtype.kind not in "iub" or a.ndim != 2 or a.shape[1] != 3 or (len(a) and (a.min() < 0 or a.max() >= 1 << 21)):
        return None
    out = np.full(len(grids), np.nan)
    out[at] = (a[:, 0].astype(np.int64) * a[:, 1] * a[:, 2]).astype(np.float64)
    return out


def _device_of(dev_arg, pid_num, in_dev, from_dev, pids) -> np.ndarray:
    """args.device, else the numeric pid, else the memset/copy's device; last, digits in the pid ("GPU 1")."""
    device = np.where(np.isfinite(dev_arg), dev_arg, pid_num)
    device = np.where(np.isfinite(device), device, np.where(np.isfinite(in_dev), in_dev, from_dev))
    if len(device) and not np.isfinite(device).all():
        miss = ~np.isfinite(device)
        device[miss] = [_digits(p) for p in pids[miss]]
        device = np.where(np.isfinite(device), device, 0.0)
    return device


def _copy_directions(kind, names, idx, mem_pos, from_dev, to_dev, direction) -> None:
    """Set each memcpy's kind (h2d, d2h, d2d, p2p) from its name, then from its ``direction`` arg (MTIA's
    "HOST_TO_DEVICE"), then from its endpoints; else "other"."""
    copies = np.flatnonzero(kind == "copy")
    if not len(copies):
        return
    c_codes, c_uniq = _factorize(names[copies])
    c_kind = np.array([copy_kind(str(u)) or "" for u in c_uniq], dtype=object)[c_codes]
    said = dict(zip(idx[mem_pos], direction))
    c_kind = np.array([k or copy_kind(str(said.get(i) or "")) or "" for k, i in zip(c_kind, copies)], dtype=object)
    pos = np.searchsorted(idx, copies)
    fd, td = from_dev[pos], to_dev[pos]
    cross = np.isfinite(fd) & np.isfinite(td) & (fd != td)
    c_kind = np.where(cross & ((c_kind == "d2d") | (c_kind == "")), "p2p", c_kind)
    same = np.isfinite(fd) & np.isfinite(td) & (fd == td)
    c_kind = np.where(same & (c_kind == ""), "d2d", c_kind)
    kind[copies] = np.where(c_kind == "", "other", c_kind)  # "other" copies stay GPU rows


def _streams(kind_g, stream, s_arg) -> np.ndarray:
    """The GPU rows' stream as text: args.stream where the row has one (a sync row's -1 for the device), else the
    tid (a sync row's less the sync offset)."""
    has = np.isfinite(s_arg)
    if has.any():
        stream = stream.copy()
        codes, uniq = _factorize(s_arg[has])
        stream[has] = np.array([str(int(v)) if v >= 0 else "-1" for v in uniq], dtype=object)[codes]
    sync_pos = np.flatnonzero((kind_g == "sync") & ~has)
    if not len(sync_pos):
        return stream
    t_num = _num_by_unique(stream[sync_pos])
    late = np.isfinite(t_num) & (t_num >= SYNC_TID_OFFSET)
    stream[sync_pos[late]] = [str(int(t - SYNC_TID_OFFSET)) for t in t_num[late]]
    return stream


def _copy_endpoints(kind_g, device, from_dev, to_dev) -> tuple[np.ndarray, np.ndarray]:
    """(src_device, dst_device) of each GPU row: NaN for host memory and for rows that are not copies."""
    src = np.where(_among(kind_g, ("d2h", "d2d", "p2p")), device, np.nan)
    dst = np.where(_among(kind_g, ("h2d", "d2d", "p2p")), device, np.nan)
    src = np.where(np.isfinite(from_dev), from_dev, src)
    dst = np.where(np.isfinite(to_dev), to_dev, dst)
    return np.where(kind_g == "h2d", np.nan, src), np.where(kind_g == "d2h", np.nan, dst)


def _platform(cats: tuple[np.ndarray, list], names, gpu_idx, launch_idx, meta) -> str:
    """"cuda", "rocm" (HIP launches or AMD device properties), "mtia" (MTIA runtime calls) or "cpu" (no GPU
    activity at all), from the GPU rows' and the launches' positions."""
    if not len(gpu_idx) and not len(launch_idx):
        return "cpu"
    if len(launch_idx) and any(str(u).startswith("hip") for u in set(names[launch_idx].tolist())):
        return "rocm"
    cat_codes, cat_uniq = cats
    if len(launch_idx) and "mtia_runtime" in {cat_uniq[c] for c in np.unique(cat_codes[launch_idx])}:
        return "mtia"
    props = meta.get("deviceProperties")
    if isinstance(props, list) and any("gcnArch" in str(p) or "AMD" in str(p) for p in props[:8]):
        return "rocm"
    return "cuda"


# --------------------------------------------------------------------------------------------
# Step 5: full-length columns, in time order
# --------------------------------------------------------------------------------------------
def _full_columns(n: int, kind, gpu: dict[str, np.ndarray], launches) -> dict[str, np.ndarray]:
    idx = gpu["idx"]
    cols: dict[str, np.ndarray] = {}
    for key in ("device", "correlation", "bytes", "src", "dst", "blocks"):
        col = np.full(n, np.nan)
        col[idx] = gpu[key]
        cols[key] = col
    l_idx, l_corr = launches
    cols["correlation"][l_idx] = l_corr
    stream = np.full(n, None, dtype=object)
    stream[idx] = gpu["stream"]
    cols["stream"] = stream
    return cols


def _in_time_order(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every column reordered by start time (stable), unless the events already are."""
    start = cols["start"]
    order = np.argsort(start, kind="stable")
    if len(start) > 1 and (np.diff(order) < 0).any():
        return {k: v[order] for k, v in cols.items()}
    return cols


def _link_launches(is_launch, correlation, is_gpu) -> np.ndarray:
    """For each GPU row, the position of the host launch with the same correlation id (NaN without one)."""
    launch = np.full(len(is_launch), np.nan)
    l_rows = np.flatnonzero(is_launch & np.isfinite(correlation))
    g_rows = np.flatnonzero(is_gpu & np.isfinite(correlation))
    if len(l_rows) and len(g_rows):
        uniq, first = np.unique(correlation[l_rows], return_index=True)  # each id's first launch (a stable sort)
        want = correlation[g_rows]
        at = np.minimum(np.searchsorted(uniq, want), len(uniq) - 1)
        ok = uniq[at] == want
        launch[g_rows[ok]] = l_rows[first[at[ok]]]
    return launch


def _rank_of(meta: dict[str, Any]) -> float:
    info = meta.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return float(rank) if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else np.nan


def _frame(cols: dict[str, np.ndarray], lane, launch, rank: float) -> "pd.DataFrame":
    import pandas as pd

    n = len(cols["start"])
    return pd.DataFrame({
        "kind": cols["kind"],
        "name": cols["name"],
        "device": _int_array(cols["device"]),
        "stream": pd.array(cols["stream"], dtype="string"),
        "lane": lane,
        "pid": cols["pid"],
        "tid": cols["tid"],
        "start_us": cols["start"],
        "end_us": cols["end"],
        "dur_us": cols["dur"].astype(np.float64),
        "correlation": _int_array(cols["correlation"]),
        "bytes": _int_array(cols["bytes"]),
        "src_device": _int_array(cols["src"]),
        "dst_device": _int_array(cols["dst"]),
        "launch": _int_array(launch),
        "rank": _int_array(np.full(n, rank)),
        "blocks": _int_array(cols["blocks"]),
    }, copy=False)


# --------------------------------------------------------------------------------------------
# Step 6: lanes
# --------------------------------------------------------------------------------------------
#: The stream id some profilers write for work whose stream they did not record (-1 as an unsigned 32-bit number).
UNKNOWN_STREAM = "4294967295"


def _gpu_label(dev: int, stream: str, platform: str) -> str:
    device = f"MTIA {dev}" if platform == "mtia" else f"GPU {dev}"
    if stream == "-1":
        return f"{device} · host syncs"
    if stream == UNKNOWN_STREAM:  # -1 written as an unsigned 32-bit number: the profiler did not know the stream
        return f"{device} · unknown stream"
    if platform == "cuda" and stream == DEFAULT_CUDA_STREAM:
        return f"{device} · stream {stream} (default)"
    return f"{device} · stream {stream}"


def _gpu_lanes(device, stream, platform) -> np.ndarray:
    s_codes, s_uniq = _factorize(stream)
    key = device.astype(np.int64) * (len(s_uniq) + 1) + s_codes
    k_codes, k_uniq = _factorize(key)
    labels = []
    for k in k_uniq:
        d, sc = divmod(int(k), len(s_uniq) + 1)
        labels.append(_gpu_label(d, str(s_uniq[sc]), platform))
    return np.array(labels, dtype=object)[k_codes]


def _main_thread(kh, start_h, k_codes, pairs) -> int | None:
    """The host thread with the earliest launch; without launches, the one with the earliest CPU op."""
    numeric = np.array([_is_number(p) for p, _ in pairs], dtype=bool)[k_codes]
    for want in (("launch",), ("cpu_op", "annotation", "python")):
        cand = np.flatnonzero(_of_kind(*kh, want) & numeric)
        if len(cand):
            return int(k_codes[cand[np.argmin(start_h[cand])]])
    return None


def _host_lanes(kh, pid_h, tid_h, start_h, meta) -> tuple[np.ndarray, str | None]:
    """The host rows' lanes, from their kinds (their categories' codes and each category's kind), pids and tids (each
    as codes and their texts) and starts."""
    (p_codes, p_uniq), (t_codes, t_uniq) = pid_h, tid_h
    key = p_codes.astype(np.int64) * (len(t_uniq) + 1) + t_codes
    k_codes, k_uniq = _factorize(key)
    pairs = [(str(p_uniq[k // (len(t_uniq) + 1)]), str(t_uniq[k % (len(t_uniq) + 1)])) for k in k_uniq]
    main_code = _main_thread(kh, start_h, k_codes, pairs)
    # CPU threads: those with launches, CPU ops, annotations or python rows (not bookkeeping such
    # as kineto's "overhead" rows at pid -1 or the "Spans" rows)
    has_cpu = np.zeros(len(pairs), dtype=bool)
    has_cpu[np.unique(k_codes[_of_kind(*kh, ("launch", "cpu_op", "annotation", "python"))])] = True
    multi = len({pairs[c][0] for c in np.flatnonzero(has_cpu)}) > 1
    tnames = meta.get("thread_names", {})
    pnames = meta.get("process_names", {})
    labels = []
    seen: set[str] = set()
    main: str | None = None
    for c, (p, t) in enumerate(pairs):
        if c == main_code:
            lab = "CPU · main thread" + (f" (pid {p})" if multi else "")
            main = f"{p}/{t}"
        elif has_cpu[c]:
            body = tnames.get((p, t)) or f"thread {t}"
            lab = f"CPU · {body}" if not multi else f"CPU · pid {p} · {body}"
        elif _is_number(p):
            lab = f"{pnames.get(p) or f'pid {p}'} · thread {t}"
        else:
            lab = f"{p} · {t}" if t else (p or "other")
        if lab in seen:
            lab = f"{lab} [{p}/{t}]"
        seen.add(lab)
        labels.append(lab)
    return np.array(labels, dtype=object)[k_codes], main


def _lane_labels(kinds, is_gpu, device, stream, pid, tid, start, meta) -> tuple[np.ndarray, str | None]:
    """Each row's lane; ``kinds``: the rows' categories' codes and each category's kind (a host row's kind)."""
    lane = np.empty(len(is_gpu), dtype=object)
    gi = np.flatnonzero(is_gpu)
    if len(gi):
        lane[gi] = _gpu_lanes(device[gi], stream[gi], meta.get("platform", "cuda"))
    hi = np.flatnonzero(~is_gpu)
    main = None
    if len(hi):
        lane[hi], main = _host_lanes((kinds[0][hi], kinds[1]), (pid[0][hi], pid[1]), (tid[0][hi], tid[1]), start[hi],
                                     meta)
    return lane, main


def _read_metadata(M: list, meta: dict[str, Any]) -> None:
    pnames: dict[str, str] = {}
    plabels: dict[str, str] = {}
    tnames: dict[tuple[str, str], str] = {}
    for e in M:
        a = e.get("args") if isinstance(e, dict) else None
        if not isinstance(a, dict):
            continue
        nm = e.get("name")
        p = _to_str(e.get("pid"))
        if nm == "process_name" and isinstance(a.get("name"), str):
            pnames[p] = a["name"]
        elif nm == "process_labels" and isinstance(a.get("labels"), str):
            plabels[p] = a["labels"]
        elif nm == "thread_name" and isinstance(a.get("name"), str):
            tnames[(p, _to_str(e.get("tid")))] = a["name"]
    meta["process_names"] = pnames
    meta["process_labels"] = plabels
    meta["thread_names"] = tnames


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------
def _of_kind(cat_codes: np.ndarray, cat_kinds: list, wanted: Any) -> np.ndarray:
    """Which rows' category has a kind among ``wanted``, from the rows' category codes and each category's kind (a
    test of a few small integers, where testing the kind's text row by row is a Python call each).

    Example:
        >>> _of_kind(np.array([0, 1, 1, 2]), ["cpu_op", "kernel", "launch"], ("launch", "cpu_op")).tolist()
        [True, False, False, True]
    """
    return np.isin(cat_codes, [i for i, k in enumerate(cat_kinds) if k in wanted])


def _among(values: np.ndarray, wanted: Any) -> np.ndarray:
    """``np.isin`` for arrays of text, by hashing (numpy sorts object arrays, which is slower)."""
    return np.fromiter(map(frozenset(wanted).__contains__, values), bool, len(values))


def _num(values: list) -> np.ndarray:
    """List of JSON scalars -> float64 array; anything that is not a number becomes NaN (text that reads as a number
    becomes that number).

    Example:
        >>> _num([1, None, 2.5]).tolist(), _num([1, "2", "x", True]).tolist()
        ([1.0, nan, 2.5], [1.0, 2.0, nan, nan])
    """
    try:
        return np.fromiter(values, np.float64, len(values))
    except (TypeError, ValueError):
        pass
    try:  # the common damage: absent values (None) among numbers
        return np.fromiter(map(_number_or_none, values), np.float64, len(values))
    except TypeError:
        import pandas as pd

        return pd.to_numeric(pd.Series(values, dtype=object).map(_scalar_or_nan),
                             errors="coerce").to_numpy(np.float64)


def _number_or_none(v: Any) -> float | int:
    """An int or float as it is, None as NaN; anything else a TypeError."""
    if type(v) is float or type(v) is int:
        return v
    if v is None:
        return np.nan
    raise TypeError(type(v).__name__)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, list]:
    """Each value's code and the distinct values, in order of first appearance (``pandas.factorize`` of values that
    are never missing: text, or finite numbers).

    Example:
        >>> codes, uniq = _factorize(np.array(["b", "a", "b"], dtype=object))
        >>> n_codes, n_uniq = _factorize(np.array([5, 3, 5]))
        >>> codes.tolist(), uniq, n_codes.tolist(), n_uniq
        ([0, 1, 0], ['b', 'a'], [0, 1, 0], [5, 3])
    """
    n = len(values)
    if values.dtype.kind in "iu" and n and 0 <= values.min() and values.max() < 4 * n + 1024:  # small codes
        first = np.full(int(values.max()) + 1, n, np.intp)
        np.minimum.at(first, values, np.arange(n))
        present = np.flatnonzero(first < n)
        uniq = present[np.argsort(first[present], kind="stable")]
        rank = np.empty(len(first), np.intp)
        rank[uniq] = np.arange(len(uniq))
        return rank[values], uniq.tolist()
    if values.dtype.kind in "iuf":
        uniq, first, inv = np.unique(values, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty(len(order), np.intp)
        rank[order] = np.arange(len(order))
        return rank[inv.reshape(-1)], uniq[order].tolist()
    seen: dict = {}
    at = np.fromiter(map(seen.setdefault, values.tolist(), range(n)), np.intp, n)
    return np.searchsorted(np.fromiter(seen.values(), np.intp, len(seen)), at), list(seen)


def _num_by_unique(values: np.ndarray) -> np.ndarray:
    """Object array of text -> float64 array (NaN where not a number), converting each distinct value once."""
    if not len(values):
        return np.zeros(0)
    codes, uniq = _factorize(values)
    return _num([_scalar_or_nan(u) for u in uniq])[codes]


def _scalar_or_nan(v: Any) -> Any:
    return v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else np.nan


def _int_array(f: np.ndarray) -> "pd.arrays.IntegerArray":
    import pandas as pd

    mask = ~np.isfinite(f)
    vals = np.where(mask, 0, f).astype(np.int64)
    return pd.arrays.IntegerArray(vals, mask)


def _texts(coded: tuple[np.ndarray, list]) -> tuple[np.ndarray, np.ndarray]:
    """A field's codes and values (:meth:`RawEvents.coded`) as codes of its distinct texts and those texts (None -> "";
    1 and "1" are one text).

    Example:
        >>> codes, texts = _texts((np.array([0, 1, 2, 0]), [1, "1", None]))
        >>> codes.tolist(), texts.tolist()
        ([0, 0, 1, 0], ['1', ''])
    """
    codes, uniq = coded
    t_codes, texts = _factorize(np.array([_to_str(u) for u in uniq], dtype=object))
    return t_codes[codes], np.asarray(texts, dtype=object)


def _to_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


_STREAM_PREFIX = re.compile(r"^\s*stream\s*[:#]?\s*", re.IGNORECASE)


def _strip_stream_prefix(tids: np.ndarray) -> np.ndarray:
    """"stream 7" -> "7" (PyTorch 1.x wrote GPU tids that way); other values unchanged."""
    if not len(tids):
        return tids.copy()
    codes, uniq = _factorize(tids)
    fixed = [(_STREAM_PREFIX.sub("", u) or u) if isinstance(u, str) else "" if u is None else u for u in uniq]
    return np.array(fixed, dtype=object)[codes]


def _digits(s: str) -> float:
    m = re.search(r"\d+", str(s))
    return float(m.group()) if m else np.nan


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 30 else r[:27] + "..."


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except (TypeError, ValueError):
        return False
