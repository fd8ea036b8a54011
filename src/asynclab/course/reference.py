"""Packaged references: results, metadata and profiler traces recorded on real GPUs, by lesson."""
from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from pathlib import Path
from typing import Any, Mapping

from asynclab.course import registry as lessons

#: Largest trace a reference may ship (compressed), and the whole reference set (section 7 of the guide).
MAX_TRACE_BYTES = 1_000_000
MAX_TOTAL_BYTES = 10_000_000

TRACE_SUFFIX = ".json.gz"


class ReferenceNotFound(FileNotFoundError):
    """A lesson's reference (or one of its files) is not in the package: it has not been recorded yet."""


def folder_name(lesson: str | int) -> str:
    """A lesson's ``NN_name``, from ``1``, ``"01"``, ``"async_dispatch"`` or ``"01_async_dispatch"``.

    Example:
        >>> folder_name(1), folder_name("timing"), folder_name("02_timing")
        ('01_async_dispatch', '02_timing', '02_timing')
    """
    return lessons.lesson(lesson).folder


def lesson_dir(lesson: str | int, root: str | os.PathLike | None = None) -> Path:
    """The folder that holds (or will hold) a lesson's reference: the lesson's own ``reference/`` in the
    package, or ``<root>/NN_name`` when a root is given (a recording into another folder).

    Example:
        >>> lesson_dir(1).relative_to(lessons.lesson(1).package_dir).as_posix()
        'reference'
        >>> lesson_dir(1, root="/tmp/refs").as_posix()
        '/tmp/refs/01_async_dispatch'
    """
    item = lessons.lesson(lesson)
    return item.reference_dir if root is None else Path(root) / item.folder


def _need(path: Path, lesson: str | int, what: str) -> Path:
    if not path.is_file():
        name = folder_name(lesson)
        if not path.parent.is_dir():
            raise ReferenceNotFound(f"lesson {name}: the reference has not been recorded yet (no folder {path.parent}); "
                                    f"record it on a GPU with: python3 scripts/record_references.py "
                                    f"--lessons {name[:2]}")
        raise ReferenceNotFound(f"lesson {name}: the reference has no {what} ({path.name}): it has not been "
                                f"recorded yet, or the recording was incomplete")
    return path


def _read_json(path: Path, lesson: str | int, what: str) -> dict[str, Any]:
    _need(path, lesson, what)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def available(lesson: str | int, root: str | os.PathLike | None = None) -> bool:
    """True when the lesson's reference results are packaged.

    Example:
        >>> available(7, root="/nonexistent")
        False
    """
    return (lesson_dir(lesson, root) / "results.json").is_file()


def results(lesson: str | int, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """The lesson's recorded figures (``results.json``), keyed by experiment function name.

    Example:
        >>> results(1)["host_runs_ahead"]["finish_ms"]  # doctest: +SKIP
        27.6
    """
    return _read_json(lesson_dir(lesson, root) / "results.json", lesson, "results file")


def meta(lesson: str | int, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Where and when the reference was recorded (``meta.json``): GPUs, driver, torch, CUDA, topology, date.

    Example:
        >>> meta(1)["gpus"][0]["name"]  # doctest: +SKIP
        'NVIDIA H100 80GB HBM3'
    """
    return _read_json(lesson_dir(lesson, root) / "meta.json", lesson, "metadata file")


def trace_names(lesson: str | int, root: str | os.PathLike | None = None) -> list[str]:
    """Names of the lesson's packaged traces (file names without ``.json.gz``), sorted.

    Example:
        >>> trace_names(1)  # doctest: +SKIP
        ['host_runs_ahead', 'launch_overhead']
    """
    d = lesson_dir(lesson, root)
    if not d.is_dir():
        return []
    return sorted(p.name[: -len(TRACE_SUFFIX)] for p in d.iterdir() if p.name.endswith(TRACE_SUFFIX))


def trace_path(lesson: str | int, name: str, root: str | os.PathLike | None = None) -> Path:
    """Path of one packaged trace; ``name`` with or without ``.json.gz``.

    Example:
        >>> trace_path(1, "host_runs_ahead").name  # doctest: +SKIP
        'host_runs_ahead.json.gz'
    """
    stem = name[: -len(TRACE_SUFFIX)] if name.endswith(TRACE_SUFFIX) else name
    path = lesson_dir(lesson, root) / f"{stem}{TRACE_SUFFIX}"
    if not path.is_file() and path.parent.is_dir():
        have = trace_names(lesson, root)
        raise ReferenceNotFound(f"lesson {folder_name(lesson)}: no reference trace named {stem!r} "
                                f"(recorded traces: {', '.join(have) if have else 'none'})")
    return _need(path, lesson, f"trace {stem!r}")


def trace(lesson: str | int, name: str, root: str | os.PathLike | None = None):
    """Load one packaged trace as a :class:`asynclab.trace.Trace`.

    Example:
        >>> t = trace(1, "host_runs_ahead")  # doctest: +SKIP
        >>> t.devices  # doctest: +SKIP
        [0]
    """
    from asynclab.trace import load_trace

    return load_trace(trace_path(lesson, name, root))


def _gpu_text(m: Mapping[str, Any]) -> str:
    gpus = list(m.get("gpus") or [])
    if not gpus:
        return "no GPU"
    used = int(m.get("gpus_used") or len(gpus))
    used = max(1, min(used, len(gpus)))
    names = [str(g.get("name", "?")) for g in gpus[:used]]
    if len(set(names)) == 1:
        return names[0] if used == 1 else f"{used}x {names[0]}"
    return " + ".join(names)


def describe(lesson: str | int, root: str | os.PathLike | None = None) -> str:
    """One line saying where the reference was recorded.

    Example:
        >>> describe(1)  # doctest: +SKIP
        'reference recorded on NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, CUDA 13.0, driver 580.95.05, 2026-11-22'
    """
    m = meta(lesson, root)
    parts = [_gpu_text(m), f"torch {m.get('torch', '?')}"]
    if m.get("cuda"):
        parts.append(f"CUDA {m['cuda']}")
    if m.get("driver"):
        parts.append(f"driver {m['driver']}")
    if m.get("date"):
        parts.append(str(m["date"]))
    return "reference recorded on " + ", ".join(parts)


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            shown = ", ".join(_fmt_value(x) for x in v[:4])
            return f"[{shown}{', ...' if len(v) > 4 else ''}] ({len(v)} values)"
        return f"({len(v)} items)"
    if isinstance(v, dict):
        return f"({len(v)} entries)"
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def figures(results_: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Flatten a results dict into ``(experiment, figure, value as text)`` rows; lists of rows with an ``op`` name
    (like ``hidden_syncs``'s) give one row per item.

    Example:
        >>> figures({"timers": {"sync_ms": 1.40625, "n": 8192}})
        [('timers', 'n', '8192'), ('timers', 'sync_ms', '1.406')]
    """
    rows = []
    for exp in sorted(results_):
        body = results_[exp]
        if not isinstance(body, Mapping):
            rows.append((exp, "", _fmt_value(body)))
            continue
        for key in sorted(body):
            v = body[key]
            if isinstance(v, list) and v and all(isinstance(x, Mapping) and "op" in x for x in v):
                for item in v:
                    rest = ", ".join(f"{k}={_fmt_value(item[k])}" for k in sorted(item)
                                     if k not in ("op", "note", "message"))
                    rows.append((exp, f"{key}: {item['op']}", rest))
            else:
                rows.append((exp, key, _fmt_value(v)))
    return rows


def table(lesson: str | int, root: str | os.PathLike | None = None) -> str:
    """The lesson's reference figures as a text table, headed by :func:`describe`'s line.

    Example:
        >>> print(table(1))  # doctest: +SKIP
        reference recorded on NVIDIA H100 80GB HBM3, ...
    """
    rows = figures(results(lesson, root))
    w1 = max([len("experiment")] + [len(r[0]) for r in rows])
    w2 = max([len("figure")] + [len(r[1]) for r in rows])
    lines = [describe(lesson, root), f"{'experiment':<{w1}}  {'figure':<{w2}}  value"]
    lines += [f"{a:<{w1}}  {b:<{w2}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def meta_from_hardware(hw=None, gpus_used: int | None = None) -> dict[str, Any]:
    """The metadata written next to a reference, from :func:`asynclab.gpu.hardware.inventory` (no host name).

    Example:
        >>> from asynclab.gpu.hardware import Hardware
        >>> m = meta_from_hardware(Hardware(gpus=(), torch_version="2.11.0"))
        >>> m["gpu_count"], m["torch"]
        (0, '2.11.0')
    """
    from asynclab import __version__
    from asynclab.gpu import hardware

    hw = hw or hardware.inventory()
    return {
        "gpus": [{"index": g.index, "name": g.name, "memory_gib": round(g.memory_gib, 1), "sm_count": g.sm_count,
                  "capability": g.capability} for g in hw.gpus],
        "gpu_count": hw.gpu_count,
        "gpus_used": gpus_used if gpus_used is not None else hw.gpu_count,
        "driver": hw.driver,
        "torch": hw.torch_version,
        "cuda": hw.cuda_version,
        "p2p": [list(row) for row in hw.p2p],
        "topology": hw.topology,
        "python": hw.python_version,
        "asynclab": __version__,
        "date": _dt.datetime.now(_dt.timezone.utc).date().isoformat(),
    }


def _jsonable(obj: Any) -> Any:
    """``json.dump``'s fallback: numpy scalars and arrays, torch dtypes/devices, paths."""
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if type(obj).__module__ == "torch":  # torch.dtype, torch.device
        return str(obj).replace("torch.", "")
    raise TypeError(f"{type(obj).__name__} is not JSON-serialisable")


def dump_results(data: Any) -> str:
    """A reference's JSON text, as :func:`write` writes it: sorted keys, indent 1, floats as measured.

    Example:
        >>> print(dump_results({"b": 1.5, "a": [1]}), end="")
        {
         "a": [
          1
         ],
         "b": 1.5
        }
    """
    return json.dumps(data, sort_keys=True, indent=1, default=_jsonable, allow_nan=True) + "\n"


def write(lesson: str | int, results: Mapping[str, Any], traces: Mapping[str, str | os.PathLike] | None = None,
          meta: Mapping[str, Any] | None = None, root: str | os.PathLike | None = None,
          replace: bool = True) -> Path:
    """Write a lesson's reference: ``results.json``, ``meta.json`` and the traces, into ``<root>/<lesson>/``.

    ``results`` is written with sorted keys, indent 1, floats as measured. ``meta`` defaults to
    :func:`meta_from_hardware` (with ``gpus_used`` from the lesson map); a given ``meta`` is written as
    is, plus ``date`` and ``lesson`` when it lacks them. ``traces`` maps a name to a ``.json.gz`` file
    (copied to ``<name>.json.gz``). Every trace is checked before anything is written: one over
    :data:`MAX_TRACE_BYTES` or not gzip raises ``ValueError`` and leaves the folder as it was. With
    ``replace`` (the default), traces of an earlier recording that are not in ``traces`` are removed,
    so the folder describes one recording; the recordings of experiment cells (``cells.json``, ``cell_*.json.gz``,
    :mod:`asynclab.course.cells`) stay. Returns the folder.

    Example:
        >>> import tempfile
        >>> d = write(1, {"x": {"ms": 1.5}}, meta={"gpus": []}, root=tempfile.mkdtemp())
        >>> sorted(p.name for p in d.iterdir())
        ['meta.json', 'results.json']
    """
    if not isinstance(results, Mapping):
        raise TypeError(f"results must be a dict, got {type(results).__name__}")
    name = folder_name(lesson)
    out = lesson_dir(lesson, root)
    sources: dict[str, Path] = {}
    for key, src in (traces or {}).items():
        stem = key[: -len(TRACE_SUFFIX)] if key.endswith(TRACE_SUFFIX) else key
        if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
            raise ValueError(f"lesson {name}: bad trace name {key!r} (a plain file name, without folders)")
        p = Path(src)
        if not p.is_file():
            raise FileNotFoundError(f"lesson {name}: trace {stem!r} not found at {p}")
        with open(p, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                raise ValueError(f"lesson {name}: trace {stem!r} ({p}) is not gzip; save traces as .json.gz")
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise ValueError(f"lesson {name}: trace {stem!r} is {size / 1e6:.2f} MB, over the {MAX_TRACE_BYTES / 1e6:g} MB "
                             f"limit; profile fewer iterations")
        sources[stem] = p
    results_text = dump_results(dict(results))  # fails here, before writing, if something is not serialisable

    if meta is None:
        item = lessons.lesson(name[:2])
        m: dict[str, Any] = meta_from_hardware(gpus_used=max(1, item.gpus))
    else:
        m = dict(meta)
        m.setdefault("date", _dt.datetime.now(_dt.timezone.utc).date().isoformat())
    m.setdefault("lesson", name)
    meta_text = dump_results(m)

    out.mkdir(parents=True, exist_ok=True)
    for stem, src in sources.items():
        dst = out / f"{stem}{TRACE_SUFFIX}"
        if src.resolve() != dst.resolve():
            tmp = dst.with_name(dst.name + ".tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
    if replace:
        for old in out.iterdir():
            if old.name.endswith(TRACE_SUFFIX) and old.name[: -len(TRACE_SUFFIX)] not in sources \
                    and not old.name.startswith("cell_"):  # an experiment cell's recording is the notebook's
                old.unlink()
    for fname, text in (("results.json", results_text), ("meta.json", meta_text)):
        tmp = out / (fname + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out / fname)
    return out


__all__ = [
    "MAX_TRACE_BYTES", "MAX_TOTAL_BYTES", "ReferenceNotFound", "folder_name", "lesson_dir", "available",
    "results", "meta", "trace_names", "trace_path", "trace", "describe", "figures", "table", "meta_from_hardware",
    "write", "dump_results",
]
