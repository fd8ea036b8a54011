"""`asynclab diagnose`: the asynchrony mistakes in a training trace, ranked by the time each loses per step."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from asynclab.trace.analysis.thresholds import (FIRST_SHARE, FOLD_SHARE, MIN_SHARE, OUTLIER_FACTOR, PACE,
                                                SMALL_COPY_BYTES)
from asynclab.trace.analysis.collectives import late_rank
from asynclab.trace.read.events import WORK_KINDS, TraceError, name_matches
from asynclab.trace.analysis.findings import Finding
from asynclab.trace.analysis.idle import GpuView, Pieces, idle_pieces, underfilled_pieces
from asynclab.trace.analysis.metrics import gpus_with_work, rows_on_gpu, profiler_steps, as_trace
from asynclab.trace.analysis.savings import Savings, outlier_steps, predict_savings_of_ranks, startup_end
from asynclab.trace.analysis.whatif import NEEDS_FIRST, REPLAYED_KINDS, pinned_default
from asynclab.trace import Trace

__all__ = ["diagnose", "Diagnosis", "FOLD_SHARE"]

_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
_LIBRARY = re.compile(r"(^|/)(torch/|asynclab/(?!lessons/)|site-packages/|dist-packages/|threading\.py|multiprocessing/|"
                      r"<frozen)|/lib/python3")


@dataclass
class Diagnosis:
    """What :func:`diagnose` found: the step, its idle time, and the findings, the largest saving first.

    A finding's ``lost_ms_per_step`` (and ``share`` of ``step_ms``) is what its fix saves a step by replay: the
    steps' host threads and GPU streams read as a dependency graph, changed as the fix would change them and
    replayed (:mod:`asynclab.trace.analysis.whatif`). ``step_ms`` is the replayed step without the profiler's own cost (the
    units of every prediction), ``profiled_ms`` the same steps as recorded, ``fixed_ms`` the replayed step with each
    replayed finding's fix and ``all_fixed_ms`` with all of them (less the time the kinds not replayed claim). No
    finding claims more than the step, nor do they together. The kinds of several ranks but rank_skew (exposed_comm,
    pipeline_bubble) are not replayed: they claim the time they explain, in the step's units.

    The idle time is still fully accounted for, as attribution rather than prediction: each finding's
    ``idle_ms_per_step`` is the profiled idle time it explains, and those of every kind but ``underfilled_gpu``
    (time the GPU was busy but mostly empty) plus ``unexplained_ms_per_step`` add up to ``idle_ms_per_step``.
    The text view prints that sum on one line (``GPU idle 4.632 ms/step = launch_bound 1.056 + ... + unexplained
    idle 3.317``): a finding's ms/step beside its name is its saving, which is not its part of the idle.
    Outlier steps (``outliers``) and CUDA start-up are named in ``notes`` and left out. Views: ``text()``
    (``str(d)``), ``what_if()``, ``table()`` (a DataFrame), ``as_dict()`` / ``to_json()`` and the notebook's HTML.
    """

    trace: str
    steps: list[int]
    step_ms: float
    idle_ms_per_step: float
    unexplained_ms_per_step: float
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    pieces: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    profiled_ms: float = 0.0
    fixed_ms: dict[str, float] = field(default_factory=dict)
    all_fixed_ms: float = 0.0
    outliers: list[int] = field(default_factory=list)
    device: str = "GPU"  # what the trace's accelerators are called ("MTIA" in an MTIA trace)

    def finding(self, kind: str) -> Finding | None:
        """The finding of one kind, or None."""
        return next((f for f in self.findings if f.kind == kind), None)

    def share(self, kind: str) -> float:
        """The share of the step lost to one kind (0.0 when it was not found)."""
        f = self.finding(kind)
        return f.share if f else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"trace": self.trace, "steps": self.steps, "step_ms": round(self.step_ms, 4),
                "idle_ms_per_step": round(self.idle_ms_per_step, 4),
                "unexplained_ms_per_step": round(self.unexplained_ms_per_step, 4),
                "profiled_ms": round(self.profiled_ms, 4), "outliers": self.outliers,
                "what_if": {"fixed_ms": {k: round(v, 4) for k, v in self.fixed_ms.items()},
                            "all_fixed_ms": round(self.all_fixed_ms, 4)},
                "findings": [f.as_dict() for f in self.findings], "notes": self.notes}

    def what_if(self) -> str:
        """The replayed step after each replayed finding's fix, and after all of them, in words.

        Example:
            >>> print(diagnose("tests/fixtures/diagnose/host_sync-bad.json.gz").what_if().splitlines()[0])
            ... # doctest: +ELLIPSIS
            replayed step (no profiler): ... ms (profiled ... ms)
        """
        lines = [f"replayed step (no profiler): {self.step_ms:.3f} ms (profiled {self.profiled_ms:.3f} ms)"]
        for kind, ms in sorted(self.fixed_ms.items(), key=lambda kv: kv[1]):
            lines.append(f"  fix {kind:16s} -> {ms:8.3f} ms  (saves {self.step_ms - ms:.3f} ms, "
                         f"{_pct((self.step_ms - ms) / self.step_ms if self.step_ms else 0)})")
        lines.append(f"  all fixes above      -> {self.all_fixed_ms:8.3f} ms")
        rest = [f.kind for f in self.findings if f.kind not in self.fixed_ms]
        if rest:
            lines.append(f"  not replayed: {', '.join(rest)} (their share is the time they explain)")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1, ensure_ascii=False)

    def table(self) -> pd.DataFrame:
        """One row per finding: kind, lost_ms_per_step, share, where (op, line, kernel), fix, lesson."""
        rows = [{"kind": f.kind, "lost_ms_per_step": f.lost_ms_per_step, "share": f.share,
                 "where": _where_text(f.where), "fix": f.fix, "lesson": f.lesson} for f in self.findings]
        return pd.DataFrame(rows, columns=["kind", "lost_ms_per_step", "share", "where", "fix", "lesson"])

    def text(self, fold: float = FOLD_SHARE) -> str:
        """The findings in words, largest first; those under ``fold`` of the step are counted in one line."""
        head = (f"{os.path.basename(self.trace) or self.trace}: {len(self.steps)} step{'s' if len(self.steps) != 1 else ''}, "
                f"{self.step_ms:.3f} ms each without the profiler ({self.profiled_ms:.3f} profiled), {self.device} idle {self.idle_ms_per_step:.3f} ms a step "
                f"({_pct(self.idle_ms_per_step / self.profiled_ms if self.profiled_ms else 0)} of the profiled step)")
        lines = [head]
        shown = [f for f in self.findings if f.share >= fold]
        for f in shown:
            lines += [f"{f.kind:16s} {f.lost_ms_per_step:8.3f} ms/step  {_pct(f.share):>4s}  {_where_text(f.where)}",
                      f"{'':16s} why: {f.why}", f"{'':16s} fix: {f.fix}", f"{'':16s} lesson {f.lesson}"]
        folded = [f for f in self.findings if f.share < fold]
        if folded:
            lines.append(f"{len(folded)} smaller finding{'s' if len(folded) > 1 else ''} under {_pct(fold)} of the "
                         f"step each: {', '.join(f.kind for f in folded)} (--json lists them)")
        if not shown:
            lines.append(f"nothing loses {_pct(fold)} of the step or more")
        lines += self._idle_sum()
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _idle_sum(self) -> list[str]:
        """The idle time as the sum the README promises: the idle each finding explains, plus the unexplained, and how
        that differs from a finding's saving. The figures are rounded so that they add up as printed (the rounding's
        rest, at most a few µs, goes to the largest part). ``underfilled_gpu`` is busy time, not idle: not in the sum.

        Example:
            >>> d = Diagnosis("t.json", [1], 10.0, 4.0, 1.5, [Finding("host_sync", 3.5, 0.35, idle_ms_per_step=2.5)])
            >>> print("\\n".join(d._idle_sum()))  # doctest: +NORMALIZE_WHITESPACE
            GPU idle 4.000 ms/step = host_sync 2.500 + unexplained idle 1.500
                (the idle each finding explains; its ms/step above is what its fix saves, replayed: more than that
                idle where the fix also shortens the host's time, less where other work would fill the gap)
        """
        parts = [[f.kind, round(f.idle_ms_per_step, 3)] for f in self.findings if f.kind != "underfilled_gpu"]
        parts.append(["unexplained idle", round(self.unexplained_ms_per_step, 3)])
        largest = max(parts, key=lambda p: p[1])
        largest[1] = max(largest[1] + round(self.idle_ms_per_step, 3) - sum(ms for _, ms in parts), 0.0)
        terms = [f"{kind} {ms:.3f}" for kind, ms in parts]
        lines = [f"{self.device} idle {self.idle_ms_per_step:.3f} ms/step = " + " + ".join(terms)]
        if len(parts) > 1:
            lines.append(f"{'':4s}(the idle each finding explains; its ms/step above is what its fix saves, replayed: "
                         f"more than that idle where the fix also shortens the host's time, less where other work "
                         f"would fill the gap)")
        return lines

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.text()) + "</pre>"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _where_text(where: dict[str, Any]) -> str:
    parts = [str(where[k]) for k in ("op", "line", "kernel") if where.get(k)]
    if where.get("late_rank") is not None:
        parts.insert(0, f"waiting for rank {where['late_rank']}")
    return " · ".join(parts)


# --------------------------------------------------------------------------------------------
# steps and views
# --------------------------------------------------------------------------------------------
def _steps(tr: Trace, rank: Any, work: pd.DataFrame, steps: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Columns step, start_us, end_us, host_end_us, dur_us: the ProfilerStep#N ranges of a rank, cut where the next
    begins (the last ends with its host range or its GPU work, whichever is later; host_end_us and dur_us are the
    host range's end and length), or the GPU's own ranges of the steps where it runs them more than a step behind the
    host or sets the pace (:func:`_gpu_step_starts`; then dur_us is the GPU range's length); one step 0 for the whole
    trace when it has none, after CUDA start-up (and a note naming the start-up, or None). ``steps``: the trace's
    :func:`profiler_steps`."""
    mine = steps[steps["rank"].isna()] if pd.isna(rank) else steps[(steps["rank"] == rank).fillna(False)]
    if mine.empty:
        lo, hi = float(work["start_us"].min()), float(work["end_us"].max())
        ev = tr.events
        same = ev["rank"].isna() if pd.isna(rank) else (ev["rank"] == rank).fillna(False)
        cut, note = startup_end(ev[same.to_numpy(dtype=bool) & ev["device"].isna().to_numpy(dtype=bool)], lo, hi)
        lo = max(lo, cut)
        return pd.DataFrame({"step": [0], "start_us": [lo], "end_us": [hi], "host_end_us": [hi],
                             "dur_us": [hi - lo]}), note
    starts, host_ends = mine["start_us"].to_numpy(np.float64), mine["end_us"].to_numpy(np.float64)
    on_gpu = _gpu_step_starts(tr, rank, work, mine)
    if on_gpu is not None:  # the GPU runs the steps more than a step behind the host: its own step ranges
        starts = on_gpu
    ends = np.append(starts[1:], np.nan)
    later = work[work["start_us"] >= starts[-1]]
    ends[-1] = max(float(host_ends[-1]), float(later["end_us"].max()) if len(later) else starts[-1])
    return pd.DataFrame({"step": mine["step"].astype(int).to_numpy(), "start_us": starts, "end_us": ends,
                         "host_end_us": host_ends,
                         "dur_us": mine["dur_us"].to_numpy(np.float64) if on_gpu is None else ends - starts}), None


def _gpu_step_starts(tr: Trace, rank: Any, work: pd.DataFrame, mine: pd.DataFrame) -> np.ndarray | None:
    """When the GPU runs the first step after the host has begun the second (its queue holds steps from before: a
    host far ahead, a rank that waits for a late one), or takes :data:`PACE` times longer from each step to the next
    than the host (it sets the pace, and the host's last step holds its wait for the GPU, no outlier), where the GPU
    began each step (the start of its ``ProfilerStep#N`` range on the GPU, which PyTorch records beside the host's);
    None otherwise, or where the trace has no such range for every step."""
    if len(mine) < 2 or work.empty:
        return None
    ev = tr.events
    same = ev["rank"].isna() if pd.isna(rank) else (ev["rank"] == rank).fillna(False)
    gpu = ev[same.to_numpy(dtype=bool) & (ev["kind"] == "gpu_annotation").to_numpy(dtype=bool)
             & ev["device"].isin(work["device"].unique()).to_numpy(dtype=bool)]
    gpu = gpu[name_matches(gpu["name"], "^ProfilerStep#")]
    first = gpu.groupby("name", sort=False)["start_us"].min()
    names = "ProfilerStep#" + mine["step"].astype(int).astype(str)
    if not names.isin(first.index).all():
        return None
    at = first.loc[names].to_numpy(np.float64)
    behind = at[0] > mine["start_us"].iloc[1]
    slower = bool(np.all(np.diff(at) > PACE * np.diff(mine["start_us"].to_numpy(np.float64))))  # it sets the pace
    if not ((behind or slower) and np.all(np.diff(at) > 0)):
        return None
    return at


def _view(tr: Trace, rank: Any, dev: int, lo: float, hi: float, n_steps: int, work: pd.DataFrame) -> GpuView:
    """The view of one GPU's steps from ``lo`` to ``hi``; ``work``: its rows of :data:`WORK_KINDS`."""
    ev = tr.events
    work = work[(work["end_us"] > lo) & (work["start_us"] < hi)].sort_values("start_us", kind="stable")
    same_rank = ev["rank"].isna() if pd.isna(rank) else (ev["rank"] == rank).fillna(False)
    host = ev[same_rank.to_numpy(dtype=bool) & ev["device"].isna().to_numpy(dtype=bool)]
    others = ev[same_rank.to_numpy(dtype=bool) & (ev["kind"] == "compute").to_numpy(dtype=bool)
                & (ev["device"] != dev).fillna(False).to_numpy(dtype=bool)]
    others = others[(others["end_us"] > lo) & (others["start_us"] < hi)]
    return GpuView(work, host, others, ev, lo, hi, n_steps)


def _sms(tr: Trace, dev: int | None) -> int | None:
    """The SM count of GPU ``dev`` (None: the fewest of the trace's GPUs), None where the trace does not give it."""
    counts = [p["numSms"] for p in tr.meta.get("deviceProperties") or []
              if isinstance(p, dict) and (dev is None or p.get("id") == dev) and isinstance(p.get("numSms"), int)]
    return min(counts) if counts else None


# --------------------------------------------------------------------------------------------
# where: the op, the Python line and the kernel behind a finding
# --------------------------------------------------------------------------------------------
class _Context:
    """Looks up, for a host moment on a thread, the outermost op and the innermost line of user code."""

    def __init__(self, host: pd.DataFrame):
        self.by_tid: dict[Any, tuple] = {}
        loader = (host["kind"] == "annotation").to_numpy(dtype=bool, copy=True)
        loader[loader] = name_matches(host["name"][loader], "DataLoader")
        ctx = host.loc[host["kind"].isin(("cpu_op", "python")).to_numpy(dtype=bool) | loader,
                       ["kind", "name", "tid", "start_us", "end_us"]]  # the columns read
        ctx = ctx.assign(kind=ctx["kind"].where(ctx["kind"] == "python", "cpu_op"))  # a DataLoader's range is an op
        for tid, g in ctx.sort_values("start_us", kind="stable").groupby("tid", sort=False):
            s, e = g["start_us"].to_numpy(np.float64), g["end_us"].to_numpy(np.float64)
            reach = max(1e3, float(np.percentile(e - s, 99)))  # rows longer than this are looked at one by one
            self.by_tid[tid] = (g["kind"].to_numpy(dtype=object), g["name"].to_numpy(dtype=object), s, e,
                                reach, np.flatnonzero(e - s > reach))
        self.has_stacks = bool((ctx["kind"] == "python").any())

    def _around(self, tid: Any, t: float) -> np.ndarray:
        """Positions (in start order) of the thread's rows that were running at ``t``."""
        kind, name, s, e, reach, long = self.by_tid[tid]
        lo, hi = np.searchsorted(s, t - reach, "left"), np.searchsorted(s, t, "right")
        near = lo + np.flatnonzero(e[lo:hi] >= t)
        return np.union1d(near, long[(s[long] <= t) & (e[long] >= t)])

    def at(self, tid: Any, t: float) -> tuple[str | None, str | None]:
        if tid not in self.by_tid:
            return None, None
        kind, name, s = self.by_tid[tid][:3]
        m = self._around(tid, t)
        ops = m[kind[m] == "cpu_op"]
        op = str(name[ops[np.argmin(s[ops])]]) if len(ops) else None
        line = None
        for i in m[kind[m] == "python"][::-1]:  # innermost first (later start)
            hit = _FRAME.match(str(name[i]))
            if hit and not _LIBRARY.search(hit["file"]):
                line = f"{hit['file']}:{hit['line']} ({hit['func']})"
                break
        return op, line


def _where(pieces: pd.DataFrame, ev: pd.DataFrame, ctx: _Context, per_step_us: float) -> dict[str, Any]:
    """The op, line and kernel that carry most of a kind's time (from its 30 longest pieces), and the steps where
    it matters: those with at least a tenth of its mean time per step (``per_step_us``)."""
    top = pieces.nlargest(30, "dur")
    ops: dict[str, float] = {}
    lines: dict[str, float] = {}
    kernels: dict[str, float] = {}
    for row in top.itertuples(index=False):
        tid, at = row.tid, row.at
        if row.row >= 0 and row.row in ev.index:
            r = ev.loc[row.row]
            if pd.notna(r["device"]):
                kernels[str(r["name"])] = kernels.get(str(r["name"]), 0.0) + row.dur
                if tid is None and pd.notna(r["launch"]) and int(r["launch"]) in ev.index:
                    launch = ev.loc[int(r["launch"])]
                    tid, at = launch["tid"], float(launch["start_us"])
            else:
                tid = r["tid"] if tid is None else tid
        op, line = ctx.at(tid, at) if tid is not None else (None, None)
        if op is None and row.row >= 0 and row.row in ev.index and pd.isna(ev.at[row.row, "device"]):
            op = str(ev.at[row.row, "name"])  # a runtime call outside any op: torch.cuda.synchronize()
        if op:
            ops[op] = ops.get(op, 0.0) + row.dur
        if line:
            lines[line] = lines.get(line, 0.0) + row.dur
    where: dict[str, Any] = {}
    for key, votes in (("op", ops), ("line", lines), ("kernel", kernels)):
        if votes:
            where[key] = _short(max(votes, key=votes.get))
    if "_SingleProcessDataLoaderIter" in str(where.get("op", "")):
        where["loader"] = "num_workers=0: the batches are made in the training process"
    by_step = pieces.groupby("step")["dur"].sum()
    steps = sorted(int(s) for s in by_step.index[by_step >= 0.1 * per_step_us])
    where.update(steps=steps, count=int(len(pieces)))
    return where


def _short(s: str, n: int = 90) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


# --------------------------------------------------------------------------------------------
# diagnose
# --------------------------------------------------------------------------------------------
class _GpuHost(NamedTuple):
    """What the summary of a diagnosis reads of one GPU besides its pieces: its host's rows (``host``), the numbers
    of all its steps (``step_numbers``), the steps themselves (a DataFrame with ``step``, ``start_us``, ``end_us``,
    ``dur_us``), the outlier steps (``outliers``), the start-up note (``startup``, None if none) and its ``rank``."""

    host: pd.DataFrame
    step_numbers: list[int]
    steps: pd.DataFrame
    outliers: list[int]
    startup: str | None
    rank: Any


def _gpu_pieces(tr: Trace, rank: Any, dev: int, step: int | None,
                all_steps: pd.DataFrame) -> tuple[pd.DataFrame, float, int, _GpuHost]:
    """The pieces of one GPU's steady steps (a DataFrame), their span (µs) and number, and its :class:`_GpuHost`
    (its host, steps, all of them, outlier steps and start-up note); ``all_steps``: the trace's :func:`profiler_steps`."""
    all_work = rows_on_gpu(tr, rank, dev, WORK_KINDS)
    steps, startup = _steps(tr, rank, all_work, all_steps)
    if step is not None:
        if step not in set(steps["step"]):
            raise TraceError(f"{tr.source}: no step {step} (steps: {', '.join(map(str, steps['step'])) or 'none'})")
        steps = steps[steps["step"] == step]
    outliers = outlier_steps(steps)
    steady = steps[~steps["step"].isin(outliers)]
    lo, hi, n = float(steps["start_us"].min()), float(steps["end_us"].max()), len(steady)
    view = _view(tr, rank, dev, lo, hi, n, all_work)
    tiny = view.work[(view.work["kind"] == "h2d") & (view.work["bytes"] <= SMALL_COPY_BYTES).fillna(False)]
    p = Pieces.concat([idle_pieces(view, len(tiny) / len(steps)), underfilled_pieces(view, _sms(tr, dev))])
    df = pd.DataFrame({"kind": p.kind, "start": p.start, "dur": p.dur, "row": p.row, "at": p.at, "tid": p.tid})
    df = df[df["dur"] > 0]
    pos = np.searchsorted(steps["start_us"].to_numpy(np.float64), df["start"].to_numpy(np.float64), side="right") - 1
    df["step"] = steps["step"].to_numpy()[np.clip(pos, 0, len(steps) - 1)]
    df = df[~df["step"].isin(outliers)]
    df["rank"], df["device"] = rank, dev
    span = float((steady["end_us"] - steady["start_us"]).sum())
    return df, span, n, _GpuHost(view.host, list(steps["step"]), steps, outliers, startup, rank)


def diagnose(trace: Any, step: int | None = None) -> Diagnosis:
    """Name the asynchrony mistakes in a trace, with the time each loses per step, where, why and the fix.

    ``trace`` is a :class:`~asynclab.trace.Trace` or anything :func:`~asynclab.trace.load_trace` takes (a
    file, a folder of rank files, a profiler). Steps are its ``ProfilerStep#N`` ranges (the whole trace
    is one step without them); ``step`` analyses one of them. Every stretch in which a GPU computes
    nothing is given a cause; what no rule explains is ``unexplained_ms_per_step``.

    Example:
        >>> d = diagnose("tests/fixtures/diagnose/host_sync-bad.json.gz")  # loss.item() every step
        >>> d.findings[0].kind, d.findings[0].where["op"]
        ('host_sync', 'aten::item')
    """
    tr = as_trace(trace)
    gpus = gpus_with_work(tr)
    if not gpus:
        if tr.meta.get("damage"):
            raise TraceError(f"{tr.source}: truncated: {tr.meta.get('recovered_events', 0):,} events read, the GPU's may "
                             f"be missing (the profiler writes them after the host's; record the run again and let "
                             f"the export finish)")
        raise TraceError(f"{tr.source}: the trace has no GPU activity to diagnose (record it with "
                         f"ProfilerActivity.CUDA on a machine with a GPU)")
    frames, spans, counts, hosts = [], [], [], []
    all_steps = profiler_steps(tr)  # once for every GPU
    for rank, dev in gpus:
        df, span, n, host = _gpu_pieces(tr, rank, dev, step, all_steps)
        frames.append(df)
        spans.append(span)
        counts.append(n)
        hosts.append(host)
    pieces = pd.concat(frames, ignore_index=True)
    return _summarise(tr, pieces, spans, counts, hosts)


def _summarise(tr: Trace, pieces: pd.DataFrame, spans: list[float], counts: list[int],
               hosts: list[_GpuHost]) -> Diagnosis:
    n_gpu = len(spans)
    profiled_ms = float(np.mean([s / c for s, c in zip(spans, counts)])) / 1e3
    scale = 1.0 / (1e3 * n_gpu * float(np.mean(counts)))
    idle = pieces[pieces["kind"] != "underfilled_gpu"]
    ctx = _Context(_unique_rows(pd.concat([h.host for h in hosts])) if len(hosts) > 1 else hosts[0].host)
    kinds = [k for k in pieces["kind"].unique() if k not in ("unexplained", "profiler")]
    replays = _replays(tr, hosts, kinds)
    step_ms = float(np.mean([r.step_ms for r in replays]))
    unit = step_ms / float(np.mean([r.profiled_ms for r in replays]))  # profiled to unprofiled, as replayed
    findings = []
    for kind, g in pieces.groupby("kind", sort=False):
        if kind in ("unexplained", "profiler"):
            continue
        attributed = float(g["dur"].sum()) * scale
        if kind in REPLAYED_KINDS:
            lost = float(np.mean([r.saving_ms(kind) for r in replays]))
        else:  # no replay: the time it explains, in the units of the step without the profiler
            lost = attributed * unit
        if lost < MIN_SHARE * step_ms:
            continue
        where = _where(g, tr.events, ctx, attributed / scale / max(1, len(set(g["step"]))))
        if kind == "rank_skew" and "rank" in tr.events:
            ranks = sorted(int(r) for r in tr.events["rank"].dropna().unique())
            where["late_rank"] = late_rank(g.groupby("rank")["dur"].sum(), ranks)
        findings.append(Finding(kind, lost, lost / step_ms if step_ms else 0.0, where, attributed))
    _cap(findings, step_ms)
    findings = _in_fix_order(sorted(findings, key=lambda f: -f.lost_ms_per_step))
    steps = sorted({int(s) for h in hosts for s in h.step_numbers})
    explained = sum(f.idle_ms_per_step for f in findings if f.kind != "underfilled_gpu")
    idle_ms = float(idle["dur"].sum()) * scale
    fixes = {k: float(np.mean([r.fixed_ms.get(k, r.step_ms) for r in replays])) for k in
             [f.kind for f in findings if f.kind in REPLAYED_KINDS]}
    outliers = sorted({o for h in hosts for o in h.outliers})
    notes = _notes(tr, findings, steps, ctx, hosts, replays) + _needs_first_notes(findings, replays)
    rest = pieces[pieces["kind"] == "unexplained"]
    if idle_ms - explained >= FOLD_SHARE * profiled_ms and len(rest):
        named = _where_text({k: v for k, v in _where(rest, tr.events, ctx, 0.0).items() if k in ("op", "line")})
        if named:
            notes.append(f"the unexplained idle time ({idle_ms - explained:.3f} ms/step) is mostly while the host "
                         f"was in {named}")
    not_replayed = sum(f.lost_ms_per_step for f in findings if f.kind not in REPLAYED_KINDS)
    all_fixed = max(float(np.mean([r.all_fixed_ms for r in replays])) - not_replayed, 0.0)
    return Diagnosis(tr.source, steps, step_ms, idle_ms, idle_ms - explained, findings, notes, pieces,
                     profiled_ms=float(np.mean([r.profiled_ms for r in replays])), fixed_ms=fixes, all_fixed_ms=all_fixed, outliers=outliers,
                     device="MTIA" if tr.meta.get("platform") == "mtia" else "GPU")


def _unique_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows.drop_duplicates()``, without comparing every column of every row: a row seen before under its label
    (another GPU of the same process) goes first, then only the rows that share a start and an end are compared.

    Example:
        >>> rows = pd.DataFrame({"start_us": [0.0, 0.0, 1.0, 0.0], "end_us": [1.0, 1.0, 2.0, 1.0], "name": list("aaba")},
        ...                     index=[0, 1, 2, 0])
        >>> _unique_rows(rows).index.tolist(), rows.drop_duplicates().index.tolist()
        ([0, 2], [0, 2])
    """
    rows = rows[~rows.index.duplicated()]
    maybe = rows.duplicated(["start_us", "end_us"], keep=False).to_numpy()
    if not maybe.any():
        return rows
    dup = np.zeros(len(rows), dtype=bool)
    dup[maybe] = rows[maybe].duplicated().to_numpy()
    return rows[~dup]


def _replays(tr: Trace, hosts: list[_GpuHost], kinds: list[str]) -> list[Savings]:
    """The replay of each rank (a process's GPUs share one), the ranks replayed together."""
    by_rank: dict[int, tuple] = {}
    for h in hosts:
        key = -1 if pd.isna(h.rank) else int(h.rank)
        if key in by_rank:  # another GPU of the same process: its steps end when the later GPU's work does
            steps = by_rank[key][1].copy()
            steps["end_us"] = np.maximum(steps["end_us"].to_numpy(np.float64), h.steps["end_us"].to_numpy(np.float64))
            by_rank[key] = (h.rank, steps)
        else:
            by_rank[key] = (h.rank, h.steps)
    return predict_savings_of_ranks(tr.events, list(by_rank.values()), kinds, _sms(tr, None),
                                    profiled=not tr.meta.get("simulated"),
                                    pinned=pinned_default(tr.meta.get("deviceProperties")))


def _in_fix_order(findings: list[Finding]) -> list[Finding]:
    """The findings by what they save, except that a fix that needs others first comes after those of them that save
    :data:`FIRST_SHARE` of the step or more (fixed first, they matter in their own right).

    Example:
        >>> order = _in_fix_order([Finding("launch_bound", 3.0, 0.3, {}), Finding("host_sync", 1.0, 0.1, {})])
        >>> [f.kind for f in order]
        ['host_sync', 'launch_bound']
    """
    out = list(findings)
    for f in findings:
        first = [i for i, g in enumerate(out) if g.kind in NEEDS_FIRST.get(f.kind, ()) and g.share >= FIRST_SHARE]
        if first and out.index(f) < max(first):
            out.remove(f)
            out.insert(max(first), f)  # max(first) is now the last of them: f goes right after it
    return out


def _needs_first_notes(findings: list[Finding], replays: list[Savings]) -> list[str]:
    """A note for each finding whose saving was counted after the fixes it needs first."""
    notes = []
    for f in findings:
        first = list(dict.fromkeys(k for r in replays for k in r.after.get(f.kind, ())))
        if first:
            notes.append(f"{f.kind}'s saving is what its fix adds once {', '.join(first)} {'is' if len(first) == 1 else 'are'} "
                         f"fixed: a CUDA graph cannot capture a step in which the host waits for the GPU")
    return notes


def _cap(findings: list[Finding], step_ms: float) -> None:
    """Findings together never claim more than the step: scaled down together where they would."""
    total = sum(f.lost_ms_per_step for f in findings)
    if total > step_ms > 0:
        for f in findings:
            f.lost_ms_per_step *= step_ms / total
            f.share = f.lost_ms_per_step / step_ms


def _notes(tr: Trace, findings: list[Finding], steps: list[int], ctx: _Context, hosts: list[_GpuHost],
           replays: list[Savings]) -> list[str]:
    notes = []
    for note in dict.fromkeys(h.startup for h in hosts if h.startup):
        notes.append(note)
    if steps == [0] and profiler_steps(tr).empty:
        notes.append("the trace has no ProfilerStep#N ranges, so it is diagnosed as one step (record with "
                     "torch.profiler's schedule and call prof.step() each step)")
    for h in hosts:
        if h.outliers:
            dur = h.steps.set_index("step")["dur_us"] / 1e3
            told = ", ".join(f"{o} ({dur[o]:.1f} ms)" for o in h.outliers)
            notes.append(f"outlier step{'s' if len(h.outliers) > 1 else ''} {told}: over {OUTLIER_FACTOR:g}x the "
                         f"median of the others ({dur.drop(h.outliers).median():.1f} ms), shown here and not averaged in")
            break
    per_op = float(np.mean([r.per_op_us for r in replays]))
    profiled = float(np.mean([r.profiled_ms for r in replays]))
    step = float(np.mean([r.step_ms for r in replays]))
    if tr.meta.get("simulated"):
        notes.append(f"a simulated trace: no profiler ran, so nothing is taken out of the host's time; the step "
                     f"replayed: {step:.3f} ms, against {profiled:.3f} ms simulated")
    else:
        notes.append(f"predictions are in the step without the profiler: its own cost, estimated at {per_op:.2f} µs "
                     f"per recorded op, Python call and runtime call (the 10th percentiles of the time from an op's "
                     f"start to its first nested op's, from its last nested op's end to its own and between two nested "
                     f"ops, summed), is taken out of the host's time and the step replayed: {step:.3f} ms, against "
                     f"{profiled:.3f} ms profiled")
    if not ctx.has_stacks:
        notes.append("no Python stacks in the trace: record with with_stack=True to see file and line")
    if tr.events.loc[tr.events["kind"] == "compute", "blocks"].isna().all():
        notes.append("the trace gives no kernel grid sizes, so underfilled_gpu is not judged")
    return notes
