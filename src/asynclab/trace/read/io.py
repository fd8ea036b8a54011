"""Read a trace file into raw event columns: gzip, a typed JSON fast path, the stdlib fallback, truncated-file recovery."""
from __future__ import annotations

import json
import mmap
import os
import re
import typing
import zlib
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from asynclab.trace.read.events import TraceError, a_type

try:  # the fast path; without msgspec every file takes the stdlib path
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - msgspec is a dependency
    _msgspec = None

__all__ = ["RawEvents", "read_file", "from_document"]


@dataclass
class RawEvents:
    """A trace's complete events (Chrome ``ph == "X"``) as the parser gave them, plus everything else the model needs.

    ``events`` holds typed structs (``typed``: the fast path) or dicts (the stdlib path); read their fields with
    :meth:`values`, :meth:`coded` and :meth:`floats`, their ``args`` with :meth:`arg`. ``meta_events`` are the metadata
    (``ph == "M"``) events as dicts, ``header`` the document's top-level fields other than ``traceEvents``, and
    ``damage`` says what a truncated file lost (or None).

    Example:
        >>> raw = from_document({"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2,
        ...                                       "args": {"device": 0}}]}, "<dict>")
        >>> raw.values("name"), raw.arg("device", [0])
        (['k'], [0])
    """

    events: list
    meta_events: list = field(default_factory=list)
    header: dict = field(default_factory=dict)
    damage: str | None = None
    typed: bool = False
    #: the memory map the typed events' raw ``args`` point into, closed by :meth:`release`
    mapped: Any = field(default=None, repr=False)

    def release(self) -> None:
        """Let go of the events and close the file's memory map (their ``args`` read it): call it once the table is
        built.

        Example:
            >>> raw = from_document([{"ph": "X", "name": "k"}], "<list>")
            >>> raw.release(); len(raw)
            0
        """
        self.events = []
        if self.mapped is not None:
            _unmap(self.mapped)
            self.mapped = None

    def __len__(self) -> int:
        return len(self.events)

    def _field(self, key: str) -> Any:
        """The events' ``key`` field, one after another (None where an event has none)."""
        if self.typed:
            return map(attrgetter(key), self.events)
        return map(dict.get, self.events, repeat(key))

    def values(self, key: str) -> list:
        """Every event's ``key`` field (None where absent)."""
        return list(self._field(key))

    def coded(self, *keys: str) -> list[tuple[np.ndarray, list]]:
        """Each of the events' ``keys`` fields as codes and the distinct values, in order of first appearance
        (unhashable ones as their text); codes index the values. The fields are read together, in one pass.

        Example:
            >>> raw = from_document([{"name": "a", "pid": 1}, {"name": "b", "pid": 1}, {"name": "a"}], "<list>")
            >>> [(codes.tolist(), values) for codes, values in raw.coded("name", "pid")]
            [([0, 1, 0], ['a', 'b']), ([0, 0, 1], [1, None])]
        """
        n = len(self.events)
        rows = map(attrgetter(*keys), self.events) if self.typed else zip(*map(self._field, keys))
        if len(keys) == 1 and self.typed:
            rows = zip(rows)
        first: dict = {}
        try:  # each combination's first position, in C: its code is its rank among the first positions
            at = np.fromiter(map(first.setdefault, rows, range(n)), np.intp, n)
        except TypeError:  # a list or a dict where a name belongs: each field on its own, as text
            return [_factorize([v if isinstance(v, (str, int, float)) or v is None else str(v)
                               for v in self._field(key)]) for key in keys]
        combo = np.searchsorted(np.fromiter(first.values(), np.intp, len(first)), at)
        out = []
        for j in range(len(keys)):  # a field's values, in order of the combinations' first appearance
            codes, values = _factorize([c[j] for c in first])
            out.append((codes[combo], values))
        return out

    def floats(self, key: str) -> np.ndarray | None:
        """Every event's ``key`` field as float64 where every one is a float (the typed reader's times), else None.

        Example:
            >>> from_document([{"ts": 1.5}, {"ts": 2}], "<list>").floats("ts") is None
            True
        """
        if not self.typed:
            return None
        try:
            return np.fromiter(self._field(key), np.float64, len(self.events))
        except (TypeError, ValueError):
            return None

    def arg(self, key: str, rows: Any, alt: str | None = None) -> list:
        """The value of ``args[key]`` (else ``args[alt]``) for the events at positions ``rows``; None where absent."""
        (values,) = self.args_of(rows, key) if alt is None else [list(map(_first, *self.args_of(rows, key, alt)))]
        return values

    def args_of(self, rows: Any, *keys: str) -> list[list]:
        """``[arg(key, rows) for key in keys]``, reading each event's args once."""
        picked = map(self.events.__getitem__, np.asarray(rows, dtype=np.int64).tolist())
        if self.typed:  # each event's args are its raw JSON, decoded here for these rows only
            sub = _typed_args(list(map(attrgetter("args"), picked)))
            return [list(map(attrgetter(key), sub)) for key in keys]
        sub = [a if type(a) is dict else _EMPTY for a in map(dict.get, picked, repeat("args"))]
        return [[a.get(key) for a in sub] for key in keys]

    def keep(self, rows: Any) -> None:
        """Keep only the events at positions ``rows`` (in that order)."""
        self.events = list(map(self.events.__getitem__, np.asarray(rows, dtype=np.int64).tolist()))


def _factorize(values: list) -> tuple[np.ndarray, list]:
    """Each value's code and the distinct values, in order of first appearance.

    Example:
        >>> codes, uniq = _factorize(["a", "b", "a", None])
        >>> codes.tolist(), uniq
        ([0, 1, 0, 2], ['a', 'b', None])
    """
    seen: dict = {}
    codes = [seen.setdefault(v, len(seen)) for v in values]
    return np.array(codes, dtype=np.intp), list(seen)


_EMPTY: dict = {}


def _typed_args(raws: list) -> list:
    """The typed events' raw ``args`` as structs of the fields the model reads, in one decode; an ``args`` that is
    not a JSON object reads as empty (as the stdlib path reads it).

    Example:
        >>> raw = _parse_typed(b'[{"ph": "X", "ts": 1, "dur": 2, "args": {"device": 3, "x": [1]}}, {"ph": "X"}]')
        >>> [a.device for a in _typed_args([e.args for e in raw.events])]
        [3, None]
        >>> [a.device for a in _typed_args([_msgspec.Raw(b'"text"'), _msgspec.Raw(b'{"device": 1}')])]
        [None, 1]
    """
    try:
        return _ARGS_LIST.decode(b"[" + b",".join(raws) + b"]")
    except _NOT_TYPED:
        return [_one_args(r) for r in raws]


def _one_args(raw: Any) -> Any:
    try:
        return _ARGS.decode(raw)
    except _NOT_TYPED:
        return _NO_ARGS


def _first(a: Any, b: Any) -> Any:
    return a if a is not None else b


# --------------------------------------------------------------------------------------------
# Reading the bytes
# --------------------------------------------------------------------------------------------
def read_file(path: Path, name: str) -> RawEvents:
    """Read, decompress and parse one trace file; every problem is a one-line :class:`TraceError` naming it.

    Example:
        >>> read_file(Path("/no/such.json"), "/no/such.json")
        Traceback (most recent call last):
        ...
        asynclab.trace.read.events.TraceError: /no/such.json: no such file
    """
    data = _read_bytes(path, name)
    mapped = data if isinstance(data, mmap.mmap) else None
    try:
        fast = _parse_typed(data)
        if fast is not None:  # its events' raw args read the map: RawEvents.release closes it
            fast.mapped, mapped = mapped, None
            return fast
        doc, damage = _parse_bytes(bytes(data), name)
    finally:
        if mapped is not None:
            _unmap(mapped)
    return from_document(doc, name, damage)


def _unmap(data: mmap.mmap) -> None:
    try:
        data.close()
    except BufferError:  # pragma: no cover - a view of it still lives: it closes when that goes
        pass


#: A file of this many bytes or more is mapped into memory rather than read into a copy (a 90 MB trace loads about
#: 0.1 s sooner); a smaller one is read, so that a trace rewritten while it loads cannot pull pages from under it.
MAP_FROM_BYTES = 16 << 20


def _contents(fh: Any) -> bytes | mmap.mmap:
    """An open file's contents: mapped into memory where it is large and the system allows it, else read."""
    try:
        if os.fstat(fh.fileno()).st_size >= MAP_FROM_BYTES:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a pipe, a file system that does not map
        pass
    return fh.read()


def _read_bytes(path: Path, name: str) -> bytes | mmap.mmap:
    try:
        if path.is_dir():
            raise TraceError(f"{name}: is a directory, not a trace file")
        if not path.exists():
            raise TraceError(f"{name}: no such file")
        with open(path, "rb") as fh:
            raw = _contents(fh)
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


# --------------------------------------------------------------------------------------------
# The typed fast path: decode only the fields the event model reads
# --------------------------------------------------------------------------------------------
if _msgspec is not None:
    class _Args(_msgspec.Struct, gc=False, frozen=True):
        device: Any = None
        stream: Any = None
        correlation: Any = None
        bytes: Any = None
        Bytes: Any = None
        fromDevice: Any = None
        toDevice: Any = None
        inDevice: Any = None
        size: Any = None
        direction: Any = None
        grid: Any = None

    _NO_ARGS = _Args()

    class _MetaArgs(_msgspec.Struct, gc=False, frozen=True):
        """A metadata event's args: a process's or thread's name, a process's labels (fewer fields decode faster)."""
        name: Any = None
        labels: Any = None

    _NO_META_ARGS = _MetaArgs()

    class _Complete(_msgspec.Struct, gc=False, tag_field="ph", tag="X"):
        """A complete event ("X"): the fields the event model reads; the rest of the JSON is skipped."""
        cat: "str | None" = None
        name: "str | None" = None
        pid: "int | str | None" = None
        tid: "int | str | None" = None
        ts: "float | None" = None  # integer µs since the epoch stay exact in a float64 (< 2**53)
        dur: "float | None" = None
        args: _msgspec.Raw = _msgspec.Raw(b"{}")  # decoded only for the rows that read it (:func:`_typed_args`)

    class _Metadata(_msgspec.Struct, gc=False, tag_field="ph", tag="M"):
        name: "str | None" = None
        pid: "int | str | None" = None
        tid: "int | str | None" = None
        args: _MetaArgs = _NO_META_ARGS

    # every other phase (flows, instants, counters, async and object events) is decoded as an empty struct
    _OTHER_PHASES = ("s", "f", "t", "i", "I", "B", "E", "C", "b", "e", "n", "P", "O", "N", "D", "R", "c", "(", ")")
    _Other = [_msgspec.defstruct(f"_Phase{i}", [], tag_field="ph", tag=ph, gc=False)
              for i, ph in enumerate(_OTHER_PHASES)]
    _Event = typing.Union[tuple([_Complete, _Metadata] + _Other)]

    _HEADER = _msgspec.json.Decoder(dict[str, _msgspec.Raw])
    _ARGS = _msgspec.json.Decoder(_Args)
    _ARGS_LIST = _msgspec.json.Decoder(list[_Args])
    _EVENTS = _msgspec.json.Decoder(list[_Event])

    #: The top-level fields torch.profiler (and asynclab's simulated GPU) write beside ``traceEvents``: a document
    #: with only these is read in one pass; any other field sends it to the two passes that keep every field.
    HEADER_FIELDS = ("schemaVersion", "deviceProperties", "distributedInfo", "traceName", "baseTimeNanoseconds",
                     "trace_id", "displayTimeUnit", "cuda_driver_version", "cuda_runtime_version", "cupti_version",
                     "hip_runtime_version", "roctracer_version", "with_stack", "with_flops", "with_modules",
                     "record_shapes", "profile_memory", "simulated")
    _Document = _msgspec.defstruct(
        "_Document", [("traceEvents", list[_Event])]
        + [(f, "_msgspec.Raw | _msgspec.UnsetType", _msgspec.UNSET) for f in HEADER_FIELDS],
        forbid_unknown_fields=True, gc=False, module=__name__)
    _DOCUMENT = _msgspec.json.Decoder(_Document)

_NOT_TYPED = None if _msgspec is None else (_msgspec.DecodeError, _msgspec.ValidationError)


def _parse_typed(data: bytes) -> RawEvents | None:
    """Decode a well-formed trace straight into typed events, skipping the args the model never reads.

    Returns None for anything unusual (bad JSON, a truncated file, a value of an unexpected type): the
    stdlib path then reads the file again and gives the precise error, warning or recovery.
    """
    if _msgspec is None:
        return None
    try:
        head = data[:64].lstrip()
        if head[:1] == b"[":
            events, header = _EVENTS.decode(data), {}
        elif head[:1] == b"{":
            events, header = _document(data)
        else:
            return None
    except _NOT_TYPED:
        return None
    if not events:  # let the stdlib path name the problem
        return None
    return _from_typed(events, header)


def _document(data: bytes) -> tuple[list, dict]:
    """The events and header fields of a JSON object: in one pass where it has only the fields torch.profiler writes
    (:data:`HEADER_FIELDS`), else in two (the fields, then the events); no ``traceEvents``: a ValidationError."""
    try:
        doc = _DOCUMENT.decode(data)
    except _msgspec.ValidationError as e:
        if "unknown field" not in str(e):
            raise
        top = _HEADER.decode(data)
        if "traceEvents" not in top:
            raise _msgspec.ValidationError("no traceEvents") from None
        return _EVENTS.decode(top.pop("traceEvents")), {k: _msgspec.json.decode(v) for k, v in top.items()}
    header = {f: _msgspec.json.decode(v) for f in HEADER_FIELDS if (v := getattr(doc, f)) is not _msgspec.UNSET}
    return doc.traceEvents, header


def _from_typed(events: list, header: dict) -> RawEvents:
    X = list(filter(_Complete.__instancecheck__, events))
    M = [{"name": e.name, "pid": e.pid, "tid": e.tid, "args": {"name": e.args.name, "labels": e.args.labels}}
         for e in filter(_Metadata.__instancecheck__, events)]
    return RawEvents(X, meta_events=M, header=header, typed=True)


# --------------------------------------------------------------------------------------------
# The stdlib path: any JSON, precise errors, recovery of truncated files
# --------------------------------------------------------------------------------------------
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
    where = f"line {err.lineno}, column {err.colno}"
    start = _WS_RE.match(text, 0).end()
    header: dict[str, Any] = {}
    if text[start] == "{":
        m = _TRACE_EVENTS_RE.search(text)
        if m is None:
            raise TraceError(f"{name}: invalid JSON ({err.msg}: {where})") from None
        header = _read_header(text, start + 1, m.start())
        pos = m.end()
    elif text[start] == "[":
        pos = start + 1
    else:  # pragma: no cover - guarded by the caller
        raise TraceError(f"{name}: not JSON ({err.msg}: {where})")
    events, closed = _read_events(text, pos)
    if not any(isinstance(e, dict) for e in events):
        raise TraceError(f"{name}: truncated or invalid JSON ({err.msg}: {where}); "
                         f"no complete event could be recovered")
    what = "is damaged after its event list" if closed else f"is truncated or damaged at {where}"
    if text[start] == "[":
        return events, what
    header["traceEvents"] = events
    return header, what


def _read_header(text: str, i: int, stop: int) -> dict[str, Any]:
    """The top-level ``"key": value`` pairs written before ``traceEvents`` (the trace's metadata)."""
    dec = json.JSONDecoder()
    header: dict[str, Any] = {}
    while True:
        i = _WS_RE.match(text, i).end()
        if i >= stop:
            return header
        try:
            key, i = dec.raw_decode(text, i)
            i = _WS_RE.match(text, i).end()
            if text[i] != ":":
                return header
            i = _WS_RE.match(text, i + 1).end()
            if i >= stop:
                return header
            val, i = dec.raw_decode(text, i)
            if isinstance(key, str):
                header[key] = val
            i = _WS_RE.match(text, i).end()
            if text[i] == ",":
                i += 1
        except (json.JSONDecodeError, IndexError, RecursionError):
            return header


def _read_events(text: str, pos: int) -> tuple[list, bool]:
    """The complete JSON values of an event list from ``pos`` on, and whether the list was closed."""
    dec = json.JSONDecoder()
    events: list[Any] = []
    n = len(text)
    while True:
        pos = _WS_RE.match(text, pos).end()
        if pos >= n:
            return events, False
        if text[pos] == "]":
            return events, True
        try:
            obj, pos = dec.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            return events, False
        events.append(obj)
        pos = _WS_RE.match(text, pos).end()
        if pos < n and text[pos] == ",":
            pos += 1
        elif pos < n and text[pos] == "]":
            return events, True
        else:
            return events, False


def from_document(doc: Any, name: str, damage: str | None = None) -> RawEvents:
    """Raw columns from a parsed trace document (a dict with ``traceEvents``, or a bare list of events).

    Example:
        >>> from_document({"traceEvents": {}}, "t.json")
        Traceback (most recent call last):
        ...
        asynclab.trace.read.events.TraceError: t.json: 'traceEvents' is a dict, not a list of events
    """
    header: dict[str, Any] = {}
    if isinstance(doc, dict):
        if "traceEvents" not in doc:
            keys = ", ".join(list(map(str, doc.keys()))[:5]) or "none"
            raise TraceError(f"{name}: JSON but not a torch.profiler trace (no 'traceEvents' key; keys: {keys})")
        raw = doc["traceEvents"]
        if not isinstance(raw, list):
            raise TraceError(f"{name}: 'traceEvents' is {a_type(raw)}, not a list of events")
        header = {k: v for k, v in doc.items() if k != "traceEvents"}
    elif isinstance(doc, list):
        raw = doc
    else:
        raise TraceError(f"{name}: JSON but not a trace ({a_type(doc)} at the top level)")
    if not raw:
        raise TraceError(f"{name}: the trace has no events (traceEvents is empty)")
    X, M = _split(raw)
    if not X and not M and not any(type(e) is dict for e in raw):
        raise TraceError(f"{name}: not a trace: the event list holds no event objects "
                         f"(found {type(raw[0]).__name__} values)")
    return RawEvents(X, meta_events=M, header=header, damage=damage)


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
