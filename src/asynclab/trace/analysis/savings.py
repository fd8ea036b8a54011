"""What each finding's fix saves a step, by replay: steady steps only (outliers and start-up set apart), profiler's cost out."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from asynclab.trace.analysis.thresholds import (FIRST_SHARE, GPU_GAP_US, MIN_SHARE, OUTLIER_FACTOR, PINNED_BYTES_PER_US,
                                                STARTUP_US, STEADY_RESOLUTION)
from asynclab.trace.read.events import name_matches
from asynclab.trace.analysis.replay import build_graph, host_at, replay, replay_together, replayed_span, span_ends
from asynclab.trace.analysis.whatif import (NEEDS_FIRST, REPLAYED_KINDS, context, fixed, profiler_free,
                                            rank_skew_cuts)

__all__ = ["Savings", "MIN_SHARE", "predict_savings", "predict_savings_of_ranks", "outlier_steps", "profiler_cost_per_op", "startup_end",
           "OUTLIER_FACTOR", "STARTUP_US", "STEADY_RESOLUTION"]

_STARTUP = r"(?:Ctx|Init|SetDevice|GetDevice|DeviceGet|Free|Malloc|Register|ModuleLoad|Primary)"


@dataclass
class Savings:
    """The replay's answer for one trace: the replayed step unchanged and with each fix (ms, profiler's cost out).

    ``step_ms`` is the replayed steady step, ``fixed_ms`` maps a finding kind to the replayed step with its fix and
    ``all_fixed_ms`` is the step with every fix applied; ``profiled_ms`` is the same steps as recorded;
    ``outliers`` the steps left out; ``per_op_us`` the profiler's estimated cost per recorded op; ``after`` the
    fixes each fix's saving is counted after (those it needs first, :data:`~asynclab.trace.analysis.whatif.NEEDS_FIRST`).
    """

    step_ms: float
    profiled_ms: float
    fixed_ms: dict[str, float]
    all_fixed_ms: float
    outliers: list[int] = field(default_factory=list)
    per_op_us: float = 0.0
    after: dict[str, tuple] = field(default_factory=dict)  # a fix's saving counted once these are fixed

    def saving_ms(self, kind: str) -> float:
        """What fixing ``kind`` saves a step (ms), never less than 0 nor more than the step."""
        return float(min(max(self.step_ms - self.fixed_ms.get(kind, self.step_ms), 0.0), self.step_ms))


def outlier_steps(steps: pd.DataFrame) -> list[int]:
    """Steps (numbers) whose host time (``dur_us``) is over :data:`OUTLIER_FACTOR` times the median of the others'.

    Example:
        >>> outlier_steps(pd.DataFrame({"step": [1, 2, 3], "dur_us": [4.4, 7.3, 19.6]}))
        [3]
    """
    if len(steps) < 3:
        return []
    d = steps["dur_us"].to_numpy(np.float64)
    out = []
    for i, n in enumerate(steps["step"].to_numpy()):
        if d[i] > OUTLIER_FACTOR * float(np.median(np.delete(d, i))):
            out.append(int(n))
    return out


def profiler_cost_per_op(host: pd.DataFrame) -> float:
    """The profiler's own cost per recorded op (µs), from the three places it shows around ops nested in an op: the
    10th percentiles (one op's record, with next to nothing to do between) of the time from an op's start to its first
    nested op's start (entering), from its last nested op's end to its own end (leaving) and from one nested op's end to
    the next one's start (between), summed; 0 where no op nests.

    Six training steps recorded on an NVIDIA H100 in 30 profiled runs (with and without stacks, with and without CUDA
    activity), each step also timed without the profiler, lost 0.3 to 1.8 times this per recorded row (median 1.1);
    the entering time alone is about a third of it.

    Example:
        >>> h = pd.DataFrame({"kind": ["cpu_op"] * 3, "tid": [1] * 3, "start_us": [0.0, 1.0, 5.0],
        ...                   "end_us": [10.0, 4.0, 8.0]})
        >>> profiler_cost_per_op(h)   # entering 1, leaving 2, between 1
        4.0
    """
    ops = host[host["kind"] == "cpu_op"]
    enter, leave, between = [], [], []
    for _, g in ops.groupby("tid", sort=False):
        s, e = g["start_us"].to_numpy(np.float64), g["end_us"].to_numpy(np.float64)
        o = np.lexsort((-e, s))
        s, e = s[o], e[o]
        nested = s[1:] < e[:-1]
        enter.append((s[1:] - s[:-1])[nested])
        opened = np.maximum.accumulate(e)[:-1]          # the latest end of any op started so far
        inside = ~nested & (np.r_[-np.inf, opened[:-1]] > s[1:])
        between.append((s[1:] - e[:-1])[inside])
        o = np.lexsort((-s, e))
        s, e = s[o], e[o]
        last = s[1:] <= s[:-1]                           # the next op to end holds this one: its last nested op
        leave.append((e[1:] - e[:-1])[last])
    parts = [np.concatenate(x) if x else np.zeros(0) for x in (enter, leave, between)]
    if not len(parts[0]):
        return 0.0
    return float(sum(np.percentile(x, 10) for x in parts if len(x)))


def startup_end(host: pd.DataFrame, lo: float, hi: float) -> tuple[float, str | None]:
    """Where CUDA start-up ends in a trace with no steps: after the runtime calls of :data:`STARTUP_US` or more that
    start before the first GPU work (``lo``) or are start-up calls (context, device, the allocator's first calls),
    as long as GPU work (up to ``hi``) follows; and a note naming them. (-inf, None) where there are none.

    Example:
        >>> h = pd.DataFrame({"kind": ["launch"], "name": ["cudaFree"], "start_us": [10.0], "end_us": [6e6]})
        >>> startup_end(h, 0.0, 7e6)[0]
        6000000.0
    """
    calls = host[(host["kind"] == "launch") & (host["end_us"] - host["start_us"] >= STARTUP_US)]
    calls = calls[(calls["start_us"] < lo) | name_matches(calls["name"], _STARTUP)]
    calls = calls[calls["end_us"] < hi]
    if calls.empty:
        return -np.inf, None
    names = ", ".join(f"{n} {d / 1e3:.0f} ms" for n, d in
                      zip(calls["name"].astype(str), calls["end_us"] - calls["start_us"]))
    return float(calls["end_us"].max()), (f"CUDA start-up ({names}) is named as start-up, not a mistake of the "
                                          f"loop, and the step is diagnosed from its end")


def _segments(steps: pd.DataFrame, outliers: list[int]) -> list[tuple[float, float, float, int]]:
    """(lo, hi, host end, number of steps) of each run of consecutive steps that are not outliers."""
    segs, run = [], []
    rows = list(steps.itertuples(index=False))
    for k, r in enumerate(rows + [None]):
        if r is not None and int(r.step) not in outliers:
            run.append(r)
            continue
        if run:
            last = run[-1]
            host_hi = float(last.host_end_us) if r is None else float(r.start_us)
            segs.append((float(run[0].start_us), float(last.end_us), host_hi, len(run)))
        run = []
    return segs


def predict_savings(events: pd.DataFrame, rank: Any, steps: pd.DataFrame, kinds: list[str]) -> Savings:
    """Replay one rank's steady steps unchanged and with the fix of each of ``kinds`` (those the replay knows).

    ``steps`` has columns step, start_us, end_us (the analysed range of each step) and host_end_us (where its
    ``ProfilerStep#N`` range ends on the host) and, optionally, dur_us (its host time, for outliers).

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.metrics import profiler_steps
        >>> tr = load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz")
        >>> st = profiler_steps(tr)
        >>> st = st.assign(host_end_us=st["end_us"], end_us=list(st["start_us"].iloc[1:]) + [st["end_us"].max()])
        >>> s = predict_savings(tr.events, pd.NA, st, ["host_sync"])
        >>> 0 < s.saving_ms("host_sync") < s.step_ms
        True
    """
    return predict_savings_of_ranks(events, [(rank, steps)], kinds)[0]


@dataclass
class _Rank:
    """One rank's graph without the profiler's cost, what its fixes look up, its steady segments and steps."""

    graph: Any
    ctx: dict
    segs: list
    n: int
    lo: float
    hi: float
    outliers: list
    per_op: float
    profiled_ms: float


def _rank(events: pd.DataFrame, rank: Any, steps: pd.DataFrame, sms: int | None, from_profiler: bool = True,
          pinned: float = PINNED_BYTES_PER_US) -> _Rank:
    outliers = outlier_steps(steps) if "dur_us" in steps else []
    segs = _segments(steps, outliers) or _segments(steps, [])
    outliers = outliers if _segments(steps, outliers) else []
    g = build_graph(events, rank)
    same = events["rank"].isna() if pd.isna(rank) else (events["rank"] == rank).fillna(False)
    per_op = profiler_cost_per_op(events[same.to_numpy(dtype=bool) & events["device"].isna().to_numpy(dtype=bool)]) \
        if from_profiler else 0.0
    n = sum(s[3] for s in segs)
    lo, hi = min(s[0] for s in segs), max(s[1] for s in segs)
    profiled = sum(b - a for a, b, _, _ in segs) / n / 1e3
    return _Rank(profiler_free(g, per_op, lo, hi), context(g, steps, sms, pinned), segs, n, lo, hi, outliers, per_op,
                 profiled)


def _joint_steps(ranks: list[_Rank], kinds: list[str] | None) -> list[float]:
    """The replayed step (ms) of each rank with the fixes of ``kinds`` (None: unchanged), the ranks replayed
    together (:func:`_joint`), each steady segment as one of a run of steps like it (:func:`_steady`)."""
    graphs = [r.graph if kinds is None else fixed(r.graph, kinds, r.lo, r.hi, r.ctx) for r in ranks]
    results = _joint(graphs, [None] * len(graphs))
    steady = [_steady(g, res, r.segs) for g, res, r in zip(graphs, results, ranks)]
    if any(floor is not None for floor, _ in steady):
        results = _joint(graphs, [floor for floor, _ in steady])
    return [sum(replayed_span(g, res, lo, hi, host_hi, lag) for (lo, hi, host_hi, _), lag in zip(r.segs, lags))
            / r.n / 1e3 for g, res, r, (_, lags) in zip(graphs, results, ranks, steady)]


def _joint(graphs: list, floors: list) -> list[tuple]:
    """The ranks' graphs replayed together (with their ``floors``, see :func:`replay`): a collective ends after its
    last rank joined it, as replayed (:func:`~asynclab.trace.analysis.replay.replay_together`)."""
    if len(graphs) == 1:
        return [replay(graphs[0], None, floors[0])]
    return replay_together(graphs, floors)


def _steady(g: Any, result: tuple, segs: list) -> tuple[np.ndarray | None, list[float]]:
    """How far the GPU runs behind the host at the end of each steady segment (its lag, µs), and the floor under
    the segment's GPU work that the same lag at its start sets (None where no work would start later): a step
    follows a step like it, so a step whose GPU work ends after its host left it starts with the GPU that far
    behind, still busy with the step before (the first profiled step in a trace followed steps that were not). A
    rank whose collectives wait for other ranks keeps the trace's start: its GPU's lag is theirs to set; so does a
    segment the host left before its GPU work began (the span is then the GPU's). A floor that would move the
    segment's first work by no more than the GPU's own gaps between queued work (:data:`GPU_GAP_US`), or than
    :data:`STEADY_RESOLUTION` of the segment, is not replayed.

    Example:
        >>> from asynclab.trace import load_trace
        >>> from asynclab.trace.analysis.replay import build_graph
        >>> g = build_graph(load_trace("tests/fixtures/diagnose/host_sync-bad.json.gz").events, pd.NA)
        >>> floor, lags = _steady(g, replay(g), [(g.h_start[0], g.h_end[-1], None, 1)])
        >>> floor is None, lags
        (True, [0.0])
    """
    if g.g_peer_start is not None and np.isfinite(g.g_peer_start).any():  # its lag is its peers' doing, not its own
        return None, [0.0] * len(segs)
    floor, lags = np.full(len(g.g_start), np.nan), []
    for lo, hi, host_hi, _ in segs:
        _, host_end, gpu_end = span_ends(g, result, lo, hi, host_hi)
        lag = max(0.0, gpu_end - host_end) if host_hi is None or host_hi > lo else 0.0  # else: the GPU's span
        lags.append(lag)
        inside = (g.g_start >= lo) & (g.g_start < hi)
        at = host_at(g, result, lo) + lag
        least = max(GPU_GAP_US, STEADY_RESOLUTION * (hi - lo))
        if lag > 0 and inside.any() and float(np.nanmin(result[2][inside])) < at - least:  # else: moves too little
            floor[inside] = at
    return (floor if np.isfinite(floor).any() else None), lags


def _saves(base: list[float], fixed_ms: list[float]) -> bool:
    """Whether a fix saves :data:`MIN_SHARE` of the step or more, over the ranks (what they save over their steps).

    Example:
        >>> _saves([10.0, 10.0], [9.0, 10.0]), _saves([10.0], [10.2])
        (True, False)
    """
    return sum(b - f for b, f in zip(base, fixed_ms)) >= MIN_SHARE * sum(base)


def _share(base: list[float], fixed_ms: list[float]) -> float:
    """The share of the step a fix saves, over the ranks."""
    return float(np.mean([(b - f) / b if b > 0 else 0.0 for b, f in zip(base, fixed_ms)]))


def predict_savings_of_ranks(events: pd.DataFrame, ranks: list[tuple[Any, pd.DataFrame]],
                             kinds: list[str], sms: int | None = None, profiled: bool = True,
                             pinned: float = PINNED_BYTES_PER_US) -> list[Savings]:
    """:func:`predict_savings` for the ranks of one run, replayed together (a collective waits for its last rank);
    ``sms``: the GPUs' SM count, which the fix of ``underfilled_gpu`` needs; ``profiled``: False for a trace no
    profiler recorded (a simulated one), whose host time has no profiler's cost to take out; ``pinned``: the rate
    (bytes/µs) of a pinned copy where the trace has none to measure it from, which the fix of ``pageable_copy`` needs.

    Returns one :class:`Savings` a rank, in the order given (:func:`predict_savings` shows one rank's steps).

    Example:
        >>> predict_savings_of_ranks(pd.DataFrame(), [], ["host_sync"])  # no ranks, nothing replayed
        []
    """
    rs = [_rank(events, rank, steps, sms, profiled, pinned) for rank, steps in ranks]
    if "rank_skew" in kinds:
        for r, cuts in zip(rs, rank_skew_cuts([r.graph for r in rs])):
            r.ctx["skew_cuts"] = cuts
    todo = [k for k in kinds if k in REPLAYED_KINDS]
    base = _joint_steps(rs, None)
    replayed = {(): base}

    def step_with(fixes: tuple) -> list[float]:
        key = tuple(sorted(fixes))
        if key not in replayed:
            replayed[key] = _joint_steps(rs, sorted(fixes, key=lambda f: f in NEEDS_FIRST))  # those needed first
        return replayed[key]

    fixed_ms = {k: step_with((k,)) for k in todo}
    needs = {k: tuple(f for f in NEEDS_FIRST.get(k, ()) if f in todo and _share(base, fixed_ms[f]) >= FIRST_SHARE)
             for k in todo}
    for k, first in needs.items():  # a fix that needs others first saves what it adds to them: the step less that
        if first:
            before, after = step_with(first), step_with(first + (k,))
            fixed_ms[k] = [b - (x - y) for b, x, y in zip(base, before, after)]
    saving = [k for k in todo if _saves(base, fixed_ms[k])]  # a fix that saves nothing is no fix: it stays out
    all_fixed = step_with(tuple(saving)) if saving else base
    return [Savings(base[i], r.profiled_ms, {k: v[i] for k, v in fixed_ms.items()}, min(all_fixed[i], base[i]),
                    r.outliers, r.per_op, {k: v for k, v in needs.items() if v}) for i, r in enumerate(rs)]
