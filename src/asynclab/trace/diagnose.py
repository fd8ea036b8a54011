"""`asynclab diagnose`: the asynchrony mistakes in a training trace, ranked by the time each loses per step."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from asynclab.trace.collectives import late_rank
from asynclab.trace.events import WORK_KINDS, TraceError
from asynclab.trace.findings import HOST_BOUND_KINDS, Finding
from asynclab.trace.idle import SMALL_COPY_BYTES, GpuView, Pieces, idle_pieces, underfilled_pieces
from asynclab.trace.metrics import gpus_with_work, rows_on_gpu, profiler_steps, as_trace
from asynclab.trace import Trace

__all__ = ["diagnose", "Diagnosis", "FOLD_SHARE"]

#: The text view folds findings under this share of the step into one line.
FOLD_SHARE = 0.02
_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>.+)$")
_LIBRARY = re.compile(r"(^|/)(torch/|asynclab/(?!lessons/)|site-packages/|dist-packages/|threading\.py|multiprocessing/|"
                      r"<frozen)|/lib/python3")


@dataclass
class Diagnosis:
    """What :func:`diagnose` found: per-step time, idle time, and the findings, largest loss first.

    ``findings`` holds every finding however small; ``unexplained_ms_per_step`` is the idle time no
    finding explains, so the findings whose kind counts idle time (all but ``underfilled_gpu``, which is
    time the GPU was busy but mostly empty) plus it add up to ``idle_ms_per_step``. Views: ``text()``
    (``str(d)``), ``table()`` (a DataFrame), ``as_dict()`` / ``to_json()`` and the notebook's HTML.
    """

    trace: str
    steps: list[int]
    step_ms: float
    idle_ms_per_step: float
    unexplained_ms_per_step: float
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    pieces: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

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
                "findings": [f.as_dict() for f in self.findings], "notes": self.notes}

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
                f"{self.step_ms:.3f} ms each, GPU idle {self.idle_ms_per_step:.3f} ms a step "
                f"({_pct(self.idle_ms_per_step / self.step_ms if self.step_ms else 0)})")
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
        lines.append(f"unexplained idle {self.unexplained_ms_per_step:.3f} ms/step")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

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
def _steps(tr: Trace, rank: Any, work: pd.DataFrame) -> pd.DataFrame:
    """Columns step, start_us, end_us: the ProfilerStep#N ranges of a rank, cut where the next begins (the
    last ends with its host range or its GPU work, whichever is later); one step 0 for the whole trace
    when it has none."""
    steps = profiler_steps(tr)
    mine = steps[steps["rank"].isna()] if pd.isna(rank) else steps[(steps["rank"] == rank).fillna(False)]
    if mine.empty:
        return pd.DataFrame({"step": [0], "start_us": [float(work["start_us"].min())],
                             "end_us": [float(work["end_us"].max())]})
    starts = mine["start_us"].to_numpy(np.float64)
    ends = np.append(starts[1:], np.nan)
    later = work[work["start_us"] >= starts[-1]]
    ends[-1] = max(float(mine["end_us"].iloc[-1]), float(later["end_us"].max()) if len(later) else starts[-1])
    return pd.DataFrame({"step": mine["step"].astype(int).to_numpy(), "start_us": starts, "end_us": ends})


def _view(tr: Trace, rank: Any, dev: int, lo: float, hi: float, n_steps: int) -> GpuView:
    ev = tr.events
    work = rows_on_gpu(tr, rank, dev, WORK_KINDS)
    work = work[(work["end_us"] > lo) & (work["start_us"] < hi)].sort_values("start_us", kind="stable")
    same_rank = ev["rank"].isna() if pd.isna(rank) else (ev["rank"] == rank).fillna(False)
    host = ev[same_rank.to_numpy(dtype=bool) & ev["device"].isna().to_numpy(dtype=bool)]
    others = ev[same_rank.to_numpy(dtype=bool) & (ev["kind"] == "compute").to_numpy(dtype=bool)
                & (ev["device"] != dev).fillna(False).to_numpy(dtype=bool)]
    others = others[(others["end_us"] > lo) & (others["start_us"] < hi)]
    return GpuView(work, host, others, ev, lo, hi, n_steps)


def _sms(tr: Trace, dev: int) -> int | None:
    for p in tr.meta.get("deviceProperties") or []:
        if isinstance(p, dict) and p.get("id") == dev and isinstance(p.get("numSms"), int):
            return p["numSms"]
    return None


# --------------------------------------------------------------------------------------------
# where: the op, the Python line and the kernel behind a finding
# --------------------------------------------------------------------------------------------
class _Context:
    """Looks up, for a host moment on a thread, the outermost op and the innermost line of user code."""

    def __init__(self, host: pd.DataFrame):
        self.by_tid: dict[Any, tuple] = {}
        loader = (host["kind"] == "annotation") & host["name"].astype(str).str.contains("DataLoader")
        ctx = host[host["kind"].isin(("cpu_op", "python")) | loader]
        ctx = ctx.assign(kind=ctx["kind"].where(ctx["kind"] == "python", "cpu_op"))  # a DataLoader's range is an op
        for tid, g in ctx.groupby("tid", sort=False):
            self.by_tid[tid] = (g["kind"].to_numpy(dtype=object), g["name"].to_numpy(dtype=object),
                                g["start_us"].to_numpy(np.float64), g["end_us"].to_numpy(np.float64))
        self.has_stacks = bool((ctx["kind"] == "python").any())

    def at(self, tid: Any, t: float) -> tuple[str | None, str | None]:
        if tid not in self.by_tid:
            return None, None
        kind, name, s, e = self.by_tid[tid]
        m = (s <= t) & (e >= t)
        ops = np.flatnonzero(m & (kind == "cpu_op"))
        op = str(name[ops[np.argmin(s[ops])]]) if len(ops) else None
        line = None
        for i in np.flatnonzero(m & (kind == "python"))[::-1]:  # innermost first (later start)
            hit = _FRAME.match(str(name[i]))
            if hit and not _LIBRARY.search(hit["file"]):
                line = f"{hit['file']}:{hit['line']} ({hit['func']})"
                break
        return op, line


def _where(pieces: pd.DataFrame, ev: pd.DataFrame, ctx: _Context) -> dict[str, Any]:
    """The op, line and kernel that carry most of a kind's time (from its 30 longest pieces)."""
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
    steps = sorted({int(s) for s in pieces.loc[pieces["dur"] > 0, "step"]})
    where.update(steps=steps, count=int(len(pieces)))
    return where


def _short(s: str, n: int = 90) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


# --------------------------------------------------------------------------------------------
# diagnose
# --------------------------------------------------------------------------------------------
def _gpu_pieces(tr: Trace, rank: Any, dev: int, step: int | None) -> tuple[pd.DataFrame, float, int, Any]:
    """The pieces of one GPU (a DataFrame), its analysed span (µs), its number of steps and its host."""
    all_work = rows_on_gpu(tr, rank, dev, WORK_KINDS)
    steps = _steps(tr, rank, all_work)
    if step is not None:
        if step not in set(steps["step"]):
            raise TraceError(f"{tr.source}: no step {step} (steps: {', '.join(map(str, steps['step'])) or 'none'})")
        steps = steps[steps["step"] == step]
    lo, hi, n = float(steps["start_us"].min()), float(steps["end_us"].max()), len(steps)
    view = _view(tr, rank, dev, lo, hi, n)
    tiny = view.work[(view.work["kind"] == "h2d") & (view.work["bytes"] <= SMALL_COPY_BYTES).fillna(False)]
    p = Pieces.concat([idle_pieces(view, len(tiny) / n), underfilled_pieces(view, _sms(tr, dev))])
    df = pd.DataFrame({"kind": p.kind, "start": p.start, "dur": p.dur, "row": p.row, "at": p.at, "tid": p.tid})
    df = df[df["dur"] > 0]
    pos = np.searchsorted(steps["start_us"].to_numpy(np.float64), df["start"].to_numpy(np.float64), side="right") - 1
    df["step"] = steps["step"].to_numpy()[np.clip(pos, 0, len(steps) - 1)]
    df["rank"], df["device"] = rank, dev
    return df, hi - lo, n, (view.host, list(steps["step"]))


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
        raise TraceError(f"{tr.source}: the trace has no GPU activity to diagnose (record it with "
                         f"ProfilerActivity.CUDA on a machine with a GPU)")
    frames, spans, counts, hosts = [], [], [], []
    for rank, dev in gpus:
        df, span, n, host = _gpu_pieces(tr, rank, dev, step)
        frames.append(df)
        spans.append(span)
        counts.append(n)
        hosts.append(host)
    pieces = pd.concat(frames, ignore_index=True)
    return _summarise(tr, pieces, spans, counts, hosts)


def _summarise(tr: Trace, pieces: pd.DataFrame, spans: list[float], counts: list[int], hosts: list) -> Diagnosis:
    n_gpu = len(spans)
    step_ms = float(np.mean([s / c for s, c in zip(spans, counts)])) / 1e3
    scale = 1.0 / (1e3 * n_gpu * float(np.mean(counts)))
    idle = pieces[pieces["kind"] != "underfilled_gpu"]
    ctx = _Context(pd.concat([h for h, _ in hosts]).drop_duplicates() if len(hosts) > 1 else hosts[0][0])
    findings = []
    for kind, g in pieces.groupby("kind", sort=False):
        if kind in ("unexplained", "profiler"):
            continue
        lost = float(g["dur"].sum()) * scale
        where = _where(g, tr.events, ctx)
        if kind == "rank_skew" and "rank" in tr.events:
            ranks = sorted(int(r) for r in tr.events["rank"].dropna().unique())
            where["late_rank"] = late_rank(g.groupby("rank")["dur"].sum(), ranks)
        findings.append(Finding(kind, lost, lost / step_ms if step_ms else 0.0, where))
    findings.sort(key=lambda f: -f.lost_ms_per_step)
    steps = sorted({int(s) for _, ss in hosts for s in ss})
    unexplained = float(idle.loc[idle["kind"].isin(("unexplained", "profiler")), "dur"].sum()) * scale
    notes = _notes(tr, findings, steps, ctx)
    own = float(idle.loc[idle["kind"] == "profiler", "dur"].sum()) * scale
    if own >= 0.01 * step_ms:
        notes.append(f"{own:.3f} ms/step of the unexplained idle time is the profiler's own work (torch/profiler "
                     f"on the host), which a run without it does not have")
    return Diagnosis(tr.source, steps, step_ms, float(idle["dur"].sum()) * scale, unexplained, findings, notes,
                     pieces)


def _notes(tr: Trace, findings: list[Finding], steps: list[int], ctx: _Context) -> list[str]:
    notes = []
    if steps == [0] and profiler_steps(tr).empty:
        notes.append("the trace has no ProfilerStep#N ranges, so it is diagnosed as one step (record with "
                     "torch.profiler's schedule and call prof.step() each step)")
    if any(f.kind in HOST_BOUND_KINDS and f.share >= FOLD_SHARE for f in findings):
        notes.append("host time is measured with the profiler on, which adds a few µs to every op: "
                     f"{', '.join(k for k in HOST_BOUND_KINDS if any(f.kind == k for f in findings))} "
                     "may read higher than without it")
    if not ctx.has_stacks:
        notes.append("no Python stacks in the trace: record with with_stack=True to see file and line")
    if tr.events.loc[tr.events["kind"] == "compute", "blocks"].isna().all():
        notes.append("the trace gives no kernel grid sizes, so underfilled_gpu is not judged")
    return notes

