"""Load any torch.profiler Chrome trace (.json / .json.gz, a profiler, or a dict) into one event table."""
from __future__ import annotations

import gc
import json
import os
import re
import tempfile
import warnings
import zlib
from contextlib import contextmanager
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:  # optional, only used when installed
    import orjson as _orjson  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    _orjson = None

__all__ = [
    "Trace",
    "TraceError",
    "TraceWarning",
    "load_trace",
    "KINDS",
    "GPU_KINDS",
    "WORK_KINDS",
    "COPY_KINDS",
]

#: Every value the ``kind`` column can take.
KINDS = (
    "compute", "h2d", "d2h", "d2d", "p2p", "memset", "sync",
    "launch", "cpu_op", "annotation", "gpu_annotation", "python", "other",
)
#: Kinds of rows that live on a GPU (``device`` is set, ``stream`` is set).
GPU_KINDS = frozenset({"compute", "h2d", "d2h", "d2d", "p2p", "memset", "sync", "gpu_annotation"})
#: Kinds that keep a GPU stream busy (what the metrics count as work; sync waits and annotations are not).
WORK_KINDS = ("compute", "h2d", "d2h", "d2d", "p2p", "memset")
#: Memory-copy kinds.
COPY_KINDS = ("h2d", "d2h", "d2d", "p2p")

#: CUDA's legacy default stream shows up as stream 7 in kineto traces of NVIDIA GPUs.
DEFAULT_CUDA_STREAM = "7"
#: Some kineto versions put cuda_sync rows at tid = stream + this offset.
SYNC_TID_OFFSET = 1_000_000

_CAT_KIND = {
    "kernel": "compute",
    "gpu_memcpy": "copy", "memcpy": "copy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_sync": "sync",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_runtime": "launch", "cuda_driver": "launch", "runtime": "launch", "driver": "launch",
    "hip_runtime": "launch", "hip_driver": "launch",
    "privateuse1_runtime": "launch", "privateuse1_driver": "launch",
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "annotation",
    "python_function": "python", "python": "python",
}

_COLUMNS = (
    "kind", "name", "device", "stream", "lane", "pid", "tid", "start_us", "end_us", "dur_us",
    "correlation", "bytes", "src_device", "dst_device", "launch",
)


class TraceError(ValueError):
    """A file or object that cannot be read as a trace; the message names the source and the problem."""


class TraceWarning(UserWarning):
    """Something in a trace was skipped or recovered (truncated file, malformed events)."""


# --------------------------------------------------------------------------------------------
# The Trace object
# --------------------------------------------------------------------------------------------
class Trace:
    """The events of one torch.profiler trace as a table, plus the trace's metadata.

    ``events`` is a pandas DataFrame, one row per complete event (Chrome ``ph == "X"``),
    sorted by start time; its index (0..n-1 after loading) is what ``launch`` refers to.

    ==============  =========  ===============================================================
    column          dtype      meaning
    ==============  =========  ===============================================================
    kind            str        one of :data:`KINDS`: compute, h2d, d2h, d2d, p2p, memset, sync
                               (GPU rows); launch (CUDA/HIP runtime and driver calls), cpu_op,
                               annotation (``record_function`` on the host), gpu_annotation,
                               python, other
    name            str        event name (kernel name, ``aten::mm``, ``cudaLaunchKernel``...)
    device          Int64      GPU index for GPU rows, <NA> for host rows
    stream          string     stream id as text for GPU rows ("7"), <NA> for host rows;
                               cuda_sync rows at tid = stream + 1,000,000 are mapped back;
                               syncs not tied to a stream (the host waiting for the device
                               or an event) have stream "-1", lane "GPU n · host syncs"
    lane            str        lane label in words: "GPU 0 · stream 7 (default)",
                               "CPU · main thread", "CPU · thread 1234"
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
    ==============  =========  ===============================================================

    ``meta`` holds the top-level trace fields (``baseTimeNanoseconds``, ``deviceProperties``,
    ``distributedInfo``, ``schemaVersion``...), plus ``source``, ``t0_us`` (raw ``ts`` of the
    first event), ``time_base`` ("epoch" or "baseTimeNanoseconds"), ``platform`` ("cuda",
    "rocm" or "cpu"), thread/process names, and, when they apply, ``recovered_events``
    (truncated file), ``skipped_events`` and ``window``.

    Example:
        >>> t = load_trace({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k",
        ...     "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7}}]})
        >>> t.lanes()
        ['GPU 0 · stream 7 (default)']
    """

    def __init__(self, events: pd.DataFrame, meta: dict[str, Any] | None = None, source: str = "<trace>"):
        self.events = events
        self.meta = dict(meta or {})
        self.source = str(source)
        self._lanes: list[str] | None = None

    # -- basic protocol -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        ev = self.events
        devs = self.devices
        n_gpu_lanes = int(ev.loc[ev["device"].notna(), "lane"].nunique()) if len(ev) else 0
        span = float(ev["end_us"].max() - ev["start_us"].min()) if len(ev) else 0.0
        name = os.path.basename(self.source) or self.source
        gpus = f"{len(devs)} GPU{'s' if len(devs) != 1 else ''}" + (f" {tuple(devs)}" if devs else "")
        win = ""
        if "window" in self.meta:
            a, b = self.meta["window"]
            win = f", window {a:.1f}–{b:.1f} µs"
        return (f"<Trace {name!r}: {len(ev):,} events, {gpus}, {n_gpu_lanes} GPU lane"
                f"{'s' if n_gpu_lanes != 1 else ''}, span {_fmt_us(span)}{win}>")

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def devices(self) -> list[int]:
        """Sorted GPU indices that have events.

        Example:
            >>> load_trace(_EXAMPLE).devices
            [0]
        """
        d = self.events["device"].dropna().unique()
        return sorted(int(x) for x in d)

    def gpu(self) -> pd.DataFrame:
        """The GPU rows (kernels, copies, memsets, syncs, GPU annotations).

        Example:
            >>> len(load_trace(_EXAMPLE).gpu())
            1
        """
        return self.events[self.events["device"].notna()]

    def host(self) -> pd.DataFrame:
        """The host rows (launches, CPU ops, annotations, python, other).

        Example:
            >>> load_trace(_EXAMPLE).host()["name"].tolist()
            ['cudaLaunchKernel']
        """
        return self.events[self.events["device"].isna()]

    def find(self, text: str, kinds: str | tuple[str, ...] | list[str] | None = None) -> pd.DataFrame:
        """The rows whose name contains ``text`` (case-sensitive), in time order; ``kinds`` keeps only those kinds.

        Example:
            >>> load_trace(_EXAMPLE).find("Launch")["kind"].tolist()
            ['launch']
            >>> len(load_trace(_EXAMPLE).find("k", kinds="compute"))
            1
        """
        ev = self.events
        keep = ev["name"].astype(str).str.contains(text, regex=False)
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
            >>> load_trace(_EXAMPLE).lanes()
            ['GPU 0 · stream 7 (default)', 'CPU · main thread']
        """
        if self._lanes is None:
            self._lanes = _lane_order(self.events, self.meta)
        return list(self._lanes)

    def window(self, start_us: float | None = None, end_us: float | None = None, *,
               annotation: str | None = None, occurrence: int | None = None, clip: bool = True) -> "Trace":
        """A new Trace restricted to a time range, given in µs or by an annotation's name.

        Events that overlap the range are kept. With ``clip=True`` (the default) their start/end are
        clipped to the range (and ``dur_us`` recomputed) so that metrics measure only the window;
        times stay on the original axis (µs from the trace's first event). ``annotation`` takes the
        range from the ``record_function`` (host and GPU) annotations of that name: from the first
        one's start to the last one's end, or only the ``occurrence``-th one (0-based, host first).
        ``launch`` keeps pointing at the original index labels; it becomes <NA> when the launch row
        falls outside the window.

        Example:
            >>> load_trace(_EXAMPLE).window(0, 3).events["dur_us"].tolist()  # kernel [1, 6) clipped to [1, 3)
            [2.0, 2.0]
        """
        ev = self.events
        if annotation is not None:
            if start_us is not None or end_us is not None:
                raise TraceError(f"{self.source}: give either a time range or an annotation, not both")
            start_us, end_us = self.annotation_range(annotation, occurrence)
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
        keep = (st < e) & (en > s) | ((st >= s) & (st <= e))
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
                sub.loc[gone, "launch"] = pd.NA
        meta = dict(self.meta)
        meta["window"] = (s, e)
        meta["window_clipped"] = bool(clip)
        return Trace(sub, meta, self.source)

    def annotation_range(self, annotation: str, occurrence: int | None = None) -> tuple[float, float]:
        """(start_us, end_us) of the annotation(s) called ``annotation`` (see :meth:`window`).

        Example:
            >>> t = load_trace({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "fwd",
            ...     "pid": 1, "tid": 1, "ts": 5, "dur": 10}]})
            >>> t.annotation_range("fwd")
            (0.0, 10.0)
        """
        ev = self.events
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
            >>> load_trace(_EXAMPLE).span_us()
            6.0
        """
        ev = self.events
        return float(ev["end_us"].max() - ev["start_us"].min()) if len(ev) else 0.0


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------
def load_trace(source: Any) -> Trace:
    """Load a torch.profiler Chrome trace into a :class:`Trace`.

    ``source`` is a path (``str``/``Path``, ``.json`` or ``.json.gz``; gzip is detected from the
    content), a ``torch.profiler.profile`` object (exported to a temporary file), a parsed ``dict``
    or a bare ``list`` of events. Timestamps are normalised to µs from the first event, whatever the
    PyTorch version wrote (integer µs since the epoch up to 2.3, fractional µs relative to
    ``baseTimeNanoseconds`` from 2.4).

    Bad input raises :class:`TraceError` (a ``ValueError``) with one line naming the file and the
    problem. Recoverable damage only warns (:class:`TraceWarning`): a truncated file loads its
    complete events; malformed events (``ts``/``dur`` not numbers, negative ``dur``) are skipped.
    Nothing in the file is ever executed.

    Example:
        >>> t = load_trace({"traceEvents": [
        ...     {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
        ...      "ts": 100, "dur": 4, "args": {"correlation": 9}},
        ...     {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
        ...      "ts": 110, "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 9}}]})
        >>> t.events[["kind", "start_us", "launch"]].values.tolist()
        [['launch', 0.0, <NA>], ['compute', 10.0, 0]]
    """
    if isinstance(source, Trace):
        return source
    with _gc_paused():
        return _load(source)


@contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector: parsing creates millions of objects and no cycles, and
    gen-2 collections over them would otherwise double the time json parsing takes."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _load(source: Any) -> Trace:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        name = str(source)
        data = _read_bytes(path, name)
        doc, recovered = _parse_bytes(data, name)
        meta = {"source": str(path)}
    elif isinstance(source, (dict, list)):
        name = "<dict>" if isinstance(source, dict) else "<list>"
        doc, recovered, meta = source, None, {"source": name}
    elif hasattr(source, "export_chrome_trace"):
        return _load_profiler(source)
    else:
        raise TraceError(f"{type(source).__name__}: not a trace (expected a path, a dict, or a torch.profiler.profile)")
    return _from_document(doc, name, meta, recovered)


def _load_profiler(prof: Any) -> Trace:
    fd, tmp = tempfile.mkstemp(prefix="asynclab_trace_", suffix=".json")
    os.close(fd)
    try:
        try:
            prof.export_chrome_trace(tmp)
        except Exception as e:  # the profiler has no data, or was never started
            raise TraceError(f"<profiler>: could not export the trace ({type(e).__name__}: {e})") from None
        t = load_trace(tmp)
    finally:
        try:
            os.remove(tmp)
        except OSError:
            pass
    t.source = "<profiler>"
    t.meta["source"] = "<profiler>"
    return t


def _read_bytes(path: Path, name: str) -> bytes:
    try:
        if path.is_dir():
            raise TraceError(f"{name}: is a directory, not a trace file")
        if not path.exists():
            raise TraceError(f"{name}: no such file")
        with open(path, "rb") as fh:
            raw = fh.read()
    except TraceError:
        raise
    except PermissionError:
        raise TraceError(f"{name}: cannot read the file (permission denied)") from None
    except OSError as e:
        raise TraceError(f"{name}: cannot read the file ({e.strerror or e})") from None
    if not raw:
        raise TraceError(f"{name}: the file is empty")
    is_gz = raw[:2] == b"\x1f\x8b"
    if not is_gz and name.lower().endswith(".gz"):
        raise TraceError(f"{name}: the name ends in .gz but the content is not gzip data")
    if is_gz:
        raw = _gunzip(raw, name)
        if not raw.strip():
            raise TraceError(f"{name}: the gzip data decompresses to nothing")
    return raw


def _gunzip(raw: bytes, name: str) -> bytes:
    """Decompress gzip data in chunks, so that a cut-off or damaged file still yields what precedes
    the damage (the JSON parser then recovers the complete events)."""
    chunk = 1 << 18
    parts: list[bytes] = []
    pos, n = 0, len(raw)
    damage: str | None = None
    while pos < n and raw[pos:pos + 2] == b"\x1f\x8b":  # one gzip member after another
        d = zlib.decompressobj(wbits=31)
        while not d.eof and pos < n:
            piece = raw[pos:pos + chunk]
            try:
                parts.append(d.decompress(piece))
            except zlib.error as e:
                damage = str(e)
                break
            pos += len(piece) - (len(d.unused_data) if d.eof else 0)
        if damage is not None:
            break
        if not d.eof:  # cut off: keep what was decoded
            try:
                parts.append(d.flush())
            except zlib.error:
                pass
            break
    out = b"".join(parts)
    if not out:
        if damage is not None:
            raise TraceError(f"{name}: corrupt gzip data ({damage})")
        raise TraceError(f"{name}: the gzip data is cut off before any content")
    return out


_TRACE_EVENTS_RE = re.compile(r'"traceEvents"\s*:\s*\[')
_WS_RE = re.compile(r"\s*")


def _parse_bytes(data: bytes, name: str) -> tuple[Any, str | None]:
    """Parse JSON; on failure try to recover a truncated trace. Returns (document, damage or None)."""
    head = data[:4096].lstrip()
    if not head:
        raise TraceError(f"{name}: the file contains only whitespace")
    if b"\x00" in data[:4096] and not (data[:2] in (b"\xff\xfe", b"\xfe\xff")):
        raise TraceError(f"{name}: binary data, not a JSON trace")
    try:
        if _orjson is not None:
            try:
                return _orjson.loads(data), None
            except _orjson.JSONDecodeError:
                pass  # fall through to the stdlib for its error message and NaN support
        return json.loads(data), None
    except UnicodeDecodeError:
        raise TraceError(f"{name}: not text (binary data?), not a JSON trace") from None
    except RecursionError:
        raise TraceError(f"{name}: not a trace (JSON nested too deeply)") from None
    except json.JSONDecodeError as e:
        err = e
    # outside the except block, so that no JSON traceback hangs on what we raise
    if head[:1] not in (b"{", b"["):
        raise TraceError(f"{name}: not JSON ({err.msg}: line {err.lineno}, column {err.colno})")
    return _recover(data, name, err)


def _recover(data: bytes, name: str, err: json.JSONDecodeError) -> tuple[Any, str]:
    """Salvage the complete events of a truncated (or damaged) trace."""
    text = data.decode("utf-8", errors="replace")
    dec = json.JSONDecoder()
    where = f"line {err.lineno}, column {err.colno}"
    start = _WS_RE.match(text, 0).end()
    header: dict[str, Any] = {}
    if text[start] == "{":
        m = _TRACE_EVENTS_RE.search(text)
        if m is None:
            raise TraceError(f"{name}: invalid JSON ({err.msg}: {where})") from None
        # read the top-level "key": value pairs written before traceEvents (metadata)
        i = start + 1
        while True:
            i = _WS_RE.match(text, i).end()
            if i >= m.start():
                break
            try:
                key, i = dec.raw_decode(text, i)
                i = _WS_RE.match(text, i).end()
                if text[i] != ":":
                    break
                i = _WS_RE.match(text, i + 1).end()
                if i >= m.start():
                    break
                val, i = dec.raw_decode(text, i)
                if isinstance(key, str):
                    header[key] = val
                i = _WS_RE.match(text, i).end()
                if text[i] == ",":
                    i += 1
            except (json.JSONDecodeError, IndexError, RecursionError):
                break
        pos = m.end()
    elif text[start] == "[":
        pos = start + 1
    else:  # pragma: no cover - guarded by the caller
        raise TraceError(f"{name}: not JSON ({err.msg}: {where})")
    events: list[Any] = []
    n = len(text)
    closed = False
    while True:
        pos = _WS_RE.match(text, pos).end()
        if pos >= n:
            break
        if text[pos] == "]":
            closed = True
            break
        try:
            obj, pos = dec.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            break
        events.append(obj)
        pos = _WS_RE.match(text, pos).end()
        if pos < n and text[pos] == ",":
            pos += 1
        elif pos < n and text[pos] == "]":
            closed = True
            break
        else:
            break
    n_ev = sum(1 for e in events if isinstance(e, dict))
    if n_ev == 0:
        raise TraceError(f"{name}: truncated or invalid JSON ({err.msg}: {where}); "
                         f"no complete event could be recovered")
    what = "is damaged after its event list" if closed else f"is truncated or damaged at {where}"
    if text[start] == "[":
        return events, what
    header["traceEvents"] = events
    return header, what


def _from_document(doc: Any, name: str, meta: dict[str, Any], recovered: str | None) -> Trace:
    if isinstance(doc, dict):
        if "traceEvents" not in doc:
            keys = ", ".join(list(map(str, doc.keys()))[:5]) or "none"
            raise TraceError(f"{name}: JSON but not a torch.profiler trace (no 'traceEvents' key; keys: {keys})")
        raw = doc["traceEvents"]
        if not isinstance(raw, list):
            raise TraceError(f"{name}: 'traceEvents' is a {type(raw).__name__}, not a list of events")
        for k, v in doc.items():
            if k != "traceEvents":
                meta.setdefault(k, v)
    elif isinstance(doc, list):
        raw = doc
    else:
        raise TraceError(f"{name}: JSON but not a trace (a {type(doc).__name__} at the top level)")
    try:
        events, meta = _build(raw, name, meta)
    except TraceError:
        if recovered is None:
            raise
        raise TraceError(f"{name}: the trace {recovered}, and no complete event precedes the damage") from None
    if recovered is not None:
        meta["recovered_events"] = len(events)
        meta["damage"] = recovered
        warnings.warn(f"{name}: the trace {recovered}; loaded the {len(events):,} complete events before it",
                      TraceWarning, stacklevel=4)
    return Trace(events, meta, meta.get("source", name))


# --------------------------------------------------------------------------------------------
# Building the table (vectorised; no per-row DataFrame work)
# --------------------------------------------------------------------------------------------
def _num(values: list) -> np.ndarray:
    """List of JSON scalars -> float64 array; anything that is not a number becomes NaN."""
    try:
        a = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        a = pd.to_numeric(pd.Series(values, dtype=object).map(_scalar_or_nan), errors="coerce").to_numpy(np.float64)
    return a


def _num_by_unique(values: np.ndarray) -> np.ndarray:
    """Object array of text -> float64 array (NaN where not a number), converting each distinct value once."""
    if not len(values):
        return np.zeros(0)
    codes, uniq = pd.factorize(values)
    return _num([_scalar_or_nan(u) for u in uniq] + [np.nan])[codes]


def _scalar_or_nan(v: Any) -> Any:
    return v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else np.nan


def _times(values: list) -> tuple[np.ndarray, bool]:
    """ts list -> (float64 array, all_integer). Integer µs since the epoch are kept exact."""
    try:
        a = np.array(values)
    except (TypeError, ValueError):  # pragma: no cover - ragged nested lists
        a = np.array(values, dtype=object)
    if a.dtype.kind in "iu":
        return a, True
    if a.dtype.kind == "f":
        return a, False
    return _num(values), False


def _int_array(f: np.ndarray) -> pd.arrays.IntegerArray:
    mask = ~np.isfinite(f)
    vals = np.where(mask, 0, f).astype(np.int64)
    return pd.arrays.IntegerArray(vals, mask)


def _str_take(values: list) -> np.ndarray:
    """List of JSON scalars -> object array of str (None -> "")."""
    try:
        codes, uniq = pd.factorize(np.array(values, dtype=object), use_na_sentinel=True)
    except TypeError:  # unhashable values (lists/dicts)
        codes, uniq = pd.factorize(np.array([_to_str(v) for v in values], dtype=object))
    table = np.array([_to_str(u) for u in uniq] + [""], dtype=object)
    return table[codes]


def _to_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _copy_kind(name: str) -> str | None:
    n = name.replace(" ", "").lower()
    if "htod" in n or "hosttodevice" in n or "h2d" in n:
        return "h2d"
    if "dtoh" in n or "devicetohost" in n or "d2h" in n:
        return "d2h"
    if "ptop" in n or "peertopeer" in n or "p2p" in n:
        return "p2p"
    if "dtod" in n or "devicetodevice" in n or "d2d" in n:
        return "d2d"
    return None


def _kind_of_cat(cat: Any) -> str:
    if not isinstance(cat, str):
        return "other"
    return _CAT_KIND.get(cat.lower(), "other")


def _split(raw: list) -> tuple[list, list]:
    """Complete events ("X"; an event without "ph" counts as one) and metadata events ("M")."""
    try:  # fast path: every entry is an object
        return [e for e in raw if e.get("ph", "X") == "X"], [e for e in raw if e.get("ph") == "M"]
    except AttributeError:
        pass
    X: list = []
    M: list = []
    for e in raw:
        if type(e) is dict:
            ph = e.get("ph", "X")
            if ph == "X":
                X.append(e)
            elif ph == "M":
                M.append(e)
    return X, M


_FIELDS = itemgetter("ts", "dur", "cat", "name", "pid", "tid")


def _columns(X: list) -> tuple[Any, ...]:
    """(ts, dur, cat, name, pid, tid, args) as sequences; one pass when every event has the six fields."""
    try:
        ts, dur, cat, names, pid, tid = zip(*[_FIELDS(e) for e in X])
    except (KeyError, ValueError):
        ts = [e.get("ts") for e in X]
        dur = [e.get("dur") for e in X]
        cat = [e.get("cat") for e in X]
        names = [e.get("name") for e in X]
        pid = [e.get("pid") for e in X]
        tid = [e.get("tid") for e in X]
    args = [e.get("args") for e in X]
    return ts, dur, cat, names, pid, tid, args


def _build(raw: list, name: str, meta: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    if not raw:
        raise TraceError(f"{name}: the trace has no events (traceEvents is empty)")
    X, M = _split(raw)
    if not X and not M and not any(type(e) is dict for e in raw):
        raise TraceError(f"{name}: not a trace: the event list holds no event objects "
                         f"(found {type(raw[0]).__name__} values)")
    if not X:
        raise TraceError(f"{name}: the trace has no complete events (only metadata, flows or instant events)")
    _read_metadata(M, meta)

    # ---- raw columns ---------------------------------------------------------------------------
    ts_raw, dur_raw, cat, names, pid_raw, tid_raw, args = _columns(X)
    ts, ts_int = _times(ts_raw)
    dur = _num(dur_raw)
    tsf = ts.astype(np.float64) if ts_int else ts
    bad = ~np.isfinite(tsf) | ~np.isfinite(dur) | (dur < 0)
    n_bad = int(bad.sum())
    if n_bad:
        i = int(np.flatnonzero(bad)[0])
        if n_bad == len(X):
            raise TraceError(f"{name}: no valid events: every complete event has a bad 'ts' or 'dur' "
                             f"(e.g. {_why_bad(ts_raw[i], dur_raw[i])})")
        why = _why_bad(ts_raw[i], dur_raw[i])
        warnings.warn(f"{name}: skipped {n_bad:,} malformed event(s) of {len(X):,} "
                      f"(e.g. {_short(names[i])}: {why})", TraceWarning, stacklevel=5)
        keep = np.flatnonzero(~bad)
        ts = ts[keep]
        dur = dur[keep]
        cat, names, pid_raw, tid_raw, args = ([col[j] for j in keep] for col in (cat, names, pid_raw, tid_raw, args))
        meta["skipped_events"] = n_bad
    pid = _str_take(pid_raw)
    tid = _str_take(tid_raw)
    n = len(ts)

    # ---- time normalisation --------------------------------------------------------------------
    t0 = ts.min()
    start = (ts - t0).astype(np.float64)
    end = start + dur
    t0f = float(t0)
    meta["t0_us"] = t0f
    base_ns = meta.get("baseTimeNanoseconds")
    if isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool):
        meta["time_base"] = "baseTimeNanoseconds"
        meta["t0_epoch_us"] = base_ns / 1000.0 + t0f
    else:
        meta["time_base"] = "epoch" if t0f > 1e14 else "unknown"
        meta["t0_epoch_us"] = t0f if t0f > 1e14 else None

    # ---- kinds ---------------------------------------------------------------------------------
    cat_codes, cat_uniq = pd.factorize(np.array(cat, dtype=object))
    cat_kinds = np.array([_kind_of_cat(c) for c in cat_uniq] + ["other"], dtype=object)
    kind = cat_kinds[cat_codes]
    name_arr = np.array([n_ if isinstance(n_, str) else _to_str(n_) for n_ in names], dtype=object)

    copy_idx = np.flatnonzero(kind == "copy")
    gpu_mask = np.isin(kind, list(GPU_KINDS) + ["copy"])
    gpu_idx = np.flatnonzero(gpu_mask)
    g_args = [args[i] for i in gpu_idx]
    g_args = [a if type(a) is dict else {} for a in g_args]

    dev_arg = _num([a.get("device") for a in g_args])
    corr_g = _num([a.get("correlation") for a in g_args])
    # copy endpoints and sizes: only copies and memsets carry them
    mem_pos = np.flatnonzero(np.isin(kind[gpu_idx], ("copy", "memset")))
    m_args = [g_args[i] for i in mem_pos]

    def marg(key: str, alt: str | None = None) -> np.ndarray:
        out = np.full(len(gpu_idx), np.nan)
        if len(mem_pos):
            vals = [a.get(key) for a in m_args] if alt is None else [a.get(key, a.get(alt)) for a in m_args]
            out[mem_pos] = _num(vals)
        return out

    from_dev = marg("fromDevice")
    to_dev = marg("toDevice")
    in_dev = marg("inDevice")
    bytes_g = marg("bytes", "Bytes")

    pid_num = _num_by_unique(pid[gpu_idx])
    device_g = np.where(np.isfinite(dev_arg), dev_arg, pid_num)
    device_g = np.where(np.isfinite(device_g), device_g, np.where(np.isfinite(in_dev), in_dev, from_dev))
    if len(gpu_idx) and not np.isfinite(device_g).all():
        # a GPU row whose device we cannot tell: read digits from the pid ("GPU 1")
        miss = ~np.isfinite(device_g)
        device_g[miss] = [_digits(p) for p in pid[gpu_idx][miss]]
        device_g = np.where(np.isfinite(device_g), device_g, 0.0)

    # memcpy direction: name first, then args
    if len(copy_idx):
        c_codes, c_uniq = pd.factorize(name_arr[copy_idx])
        c_kind = np.array([_copy_kind(str(u)) or "" for u in c_uniq], dtype=object)[c_codes]
        pos = np.searchsorted(gpu_idx, copy_idx)
        fd, td = from_dev[pos], to_dev[pos]
        cross = np.isfinite(fd) & np.isfinite(td) & (fd != td)
        c_kind = np.where(cross & ((c_kind == "d2d") | (c_kind == "")), "p2p", c_kind)
        same = np.isfinite(fd) & np.isfinite(td) & (fd == td)
        c_kind = np.where(same & (c_kind == ""), "d2d", c_kind)
        c_kind = np.where(c_kind == "", "other", c_kind)
        kind[copy_idx] = c_kind
        # "other" copies stay GPU rows (they happened on a device)

    # streams: the GPU row's tid ("7"; old kineto wrote "stream 7")
    stream_g = _strip_stream_prefix(tid[gpu_idx])
    kind_g = kind[gpu_idx]
    sync_pos = np.flatnonzero(kind_g == "sync")
    if len(sync_pos):
        s_arg = _num([g_args[p].get("stream") for p in sync_pos])
        t_num = _num_by_unique(stream_g[sync_pos])
        fixed = []
        for sa, tn, raw_t in zip(s_arg, t_num, stream_g[sync_pos]):
            if np.isfinite(sa):
                fixed.append(str(int(sa)) if sa >= 0 else "-1")
            elif np.isfinite(tn) and tn >= SYNC_TID_OFFSET:
                fixed.append(str(int(tn - SYNC_TID_OFFSET)))
            else:
                fixed.append(raw_t)
        stream_g[sync_pos] = np.array(fixed, dtype=object)

    # copy endpoints
    src_g = np.full(len(gpu_idx), np.nan)
    dst_g = np.full(len(gpu_idx), np.nan)
    if len(gpu_idx):
        has_fd = np.isfinite(from_dev)
        has_td = np.isfinite(to_dev)
        src_g = np.where(np.isin(kind_g, ("d2h", "d2d", "p2p")), device_g, np.nan)
        dst_g = np.where(np.isin(kind_g, ("h2d", "d2d", "p2p")), device_g, np.nan)
        src_g = np.where(has_fd, from_dev, src_g)
        dst_g = np.where(has_td, to_dev, dst_g)
        src_g = np.where(kind_g == "h2d", np.nan, src_g)
        dst_g = np.where(kind_g == "d2h", np.nan, dst_g)
        is_mem = np.isin(kind_g, COPY_KINDS + ("memset", "other"))
        bytes_g = np.where(is_mem, bytes_g, np.nan)

    # launch rows: correlation
    launch_idx = np.flatnonzero(kind == "launch")
    corr_l = _num([(args[i].get("correlation") if type(args[i]) is dict else None) for i in launch_idx])

    # platform
    platform = "cpu"
    if len(gpu_idx) or len(launch_idx):
        platform = "cuda"
        if len(launch_idx):
            l_codes, l_uniq = pd.factorize(name_arr[launch_idx])
            if any(str(u).startswith("hip") for u in l_uniq):
                platform = "rocm"
        props = meta.get("deviceProperties")
        if isinstance(props, list) and any("gcnArch" in str(p) or "AMD" in str(p) for p in props[:8]):
            platform = "rocm"
    meta["platform"] = platform

    # ---- assemble full-length columns ------------------------------------------------------------
    device = np.full(n, np.nan)
    device[gpu_idx] = device_g
    correlation = np.full(n, np.nan)
    correlation[gpu_idx] = corr_g
    correlation[launch_idx] = corr_l
    nbytes = np.full(n, np.nan)
    nbytes[gpu_idx] = bytes_g
    src = np.full(n, np.nan)
    src[gpu_idx] = src_g
    dst = np.full(n, np.nan)
    dst[gpu_idx] = dst_g
    stream = np.full(n, None, dtype=object)
    stream[gpu_idx] = stream_g

    # ---- order by time (stable) ----------------------------------------------------------------
    order = np.argsort(start, kind="stable")
    if n > 1 and (np.diff(order) < 0).any():
        start, end, dur = start[order], end[order], dur[order]
        kind, name_arr, pid, tid = kind[order], name_arr[order], pid[order], tid[order]
        device, correlation, nbytes, src, dst, stream = (device[order], correlation[order], nbytes[order],
                                                         src[order], dst[order], stream[order])
    is_gpu = np.isfinite(device)

    # ---- lanes ---------------------------------------------------------------------------------
    lane, main_key = _lane_labels(kind, is_gpu, device, stream, pid, tid, start, meta)
    meta["main_thread"] = main_key

    # ---- launch <-> GPU by correlation ---------------------------------------------------------
    launch = np.full(n, np.nan)
    l_rows = np.flatnonzero((kind == "launch") & np.isfinite(correlation))
    g_rows = np.flatnonzero(is_gpu & np.isfinite(correlation))
    if len(l_rows) and len(g_rows):
        lc = pd.Index(correlation[l_rows])
        first = ~lc.duplicated(keep="first")
        lc_u = lc[first]
        l_rows_u = l_rows[first]
        hit = lc_u.get_indexer(correlation[g_rows])
        ok = hit >= 0
        launch[g_rows[ok]] = l_rows_u[hit[ok]]

    df = pd.DataFrame({
        "kind": kind,
        "name": name_arr,
        "device": _int_array(device),
        "stream": pd.array(stream, dtype="string"),
        "lane": lane,
        "pid": pid,
        "tid": tid,
        "start_us": start,
        "end_us": end,
        "dur_us": dur.astype(np.float64),
        "correlation": _int_array(correlation),
        "bytes": _int_array(nbytes),
        "src_device": _int_array(src),
        "dst_device": _int_array(dst),
        "launch": _int_array(launch),
    }, copy=False)
    meaningful = (df["kind"] != "other").any()
    if not meaningful:
        raise TraceError(f"{name}: the trace has no GPU or host activity (only {len(df):,} bookkeeping events)")
    return df, meta


_STREAM_PREFIX = re.compile(r"^\s*stream\s*[:#]?\s*", re.IGNORECASE)


def _strip_stream_prefix(tids: np.ndarray) -> np.ndarray:
    """"stream 7" -> "7" (PyTorch 1.x wrote GPU tids that way); other values unchanged."""
    if not len(tids):
        return tids.copy()
    codes, uniq = pd.factorize(tids)
    fixed = [(_STREAM_PREFIX.sub("", u) or u) if isinstance(u, str) else u for u in uniq]
    return np.array(fixed + [""], dtype=object)[codes]


def _digits(s: str) -> float:
    m = re.search(r"\d+", str(s))
    return float(m.group()) if m else np.nan


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 30 else r[:27] + "..."


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


def _read_metadata(M: list[dict], meta: dict[str, Any]) -> None:
    pnames: dict[str, str] = {}
    plabels: dict[str, str] = {}
    tnames: dict[tuple[str, str], str] = {}
    for e in M:
        a = e.get("args")
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


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except (TypeError, ValueError):
        return False


def _gpu_label(dev: int, stream: str, platform: str) -> str:
    if stream == "-1":
        return f"GPU {dev} · host syncs"
    if platform != "rocm" and stream == DEFAULT_CUDA_STREAM:
        return f"GPU {dev} · stream {stream} (default)"
    return f"GPU {dev} · stream {stream}"


def _lane_labels(kind, is_gpu, device, stream, pid, tid, start, meta) -> tuple[np.ndarray, str | None]:
    n = len(kind)
    lane = np.empty(n, dtype=object)
    platform = meta.get("platform", "cuda")
    gi = np.flatnonzero(is_gpu)
    if len(gi):
        s_codes, s_uniq = pd.factorize(stream[gi])
        key = device[gi].astype(np.int64) * (len(s_uniq) + 1) + s_codes
        k_codes, k_uniq = pd.factorize(key)
        labels = []
        for k in k_uniq:
            d, sc = divmod(int(k), len(s_uniq) + 1)
            labels.append(_gpu_label(d, str(s_uniq[sc]), platform))
        lane[gi] = np.array(labels, dtype=object)[k_codes]
    hi = np.flatnonzero(~is_gpu)
    main: str | None = None
    if len(hi):
        p_codes, p_uniq = pd.factorize(pid[hi])
        t_codes, t_uniq = pd.factorize(tid[hi])
        key = p_codes.astype(np.int64) * (len(t_uniq) + 1) + t_codes
        k_codes, k_uniq = pd.factorize(key)
        pairs = [(str(p_uniq[k // (len(t_uniq) + 1)]), str(t_uniq[k % (len(t_uniq) + 1)])) for k in k_uniq]
        # main thread: the one with the earliest launch; without launches, the earliest CPU op
        kh = kind[hi]
        main_code = None
        for want in (("launch",), ("cpu_op", "annotation", "python")):
            cand = np.flatnonzero(np.isin(kh, want) & np.array([_is_number(pairs[c][0]) for c in range(len(pairs))],
                                                                dtype=bool)[k_codes])
            if len(cand):
                main_code = int(k_codes[cand[np.argmin(start[hi][cand])]])
                break
        # CPU threads: those with launches, CPU ops, annotations or python rows (not bookkeeping such
        # as kineto's "overhead" rows at pid -1 or the "Spans" rows)
        has_cpu = np.zeros(len(pairs), dtype=bool)
        has_cpu[np.unique(k_codes[np.isin(kh, ("launch", "cpu_op", "annotation", "python"))])] = True
        cpu_pids = {pairs[c][0] for c in np.flatnonzero(has_cpu)}
        multi = len(cpu_pids) > 1
        tnames = meta.get("thread_names", {})
        pnames = meta.get("process_names", {})
        labels = []
        seen: set[str] = set()
        for c, (p, t) in enumerate(pairs):
            if c == main_code:
                lab = "CPU · main thread" + (f" (pid {p})" if multi else "")
                main = f"{p}/{t}"
            elif has_cpu[c]:
                tn = tnames.get((p, t))
                body = tn if tn else f"thread {t}"
                lab = f"CPU · {body}" if not multi else f"CPU · pid {p} · {body}"
            elif _is_number(p):
                lab = f"{pnames.get(p) or f'pid {p}'} · thread {t}"
            else:
                lab = f"{p} · {t}" if t else (p or "other")
            if lab in seen:
                lab = f"{lab} [{p}/{t}]"
            seen.add(lab)
            labels.append(lab)
        lane[hi] = np.array(labels, dtype=object)[k_codes]
    return lane, main


def _lane_order(ev: pd.DataFrame, meta: dict[str, Any]) -> list[str]:
    if not len(ev):
        return []
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
    host_lanes.sort(key=lambda s: (not s.startswith("CPU · main thread"),))
    return out + host_lanes


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.1f} µs"


_EXAMPLE = {"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 2,
     "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 5,
     "args": {"device": 0, "stream": 7, "correlation": 1}},
]}
