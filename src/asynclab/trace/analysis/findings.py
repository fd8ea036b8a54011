"""The catalogue of asynchrony mistakes `asynclab diagnose` names: each kind's why, fix and the lesson that teaches it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Finding", "Kind", "KINDS", "HOST_BOUND_KINDS", "kind"]


@dataclass(frozen=True)
class Kind:
    """One kind of finding: what it means (``why``), what to do (``fix``) and where the course teaches it."""

    name: str
    why: str
    fix: str
    lesson: str


KINDS: dict[str, Kind] = {k.name: k for k in [
    Kind("host_sync", "the host waited for the GPU to finish, so the GPU then starved until the host launched "
         "the next work", "read results back once, after the loop (accumulate on the GPU; log every N steps)",
         "01 §5 Hidden sync points"),
    Kind("launch_bound", "the GPU waited for the host's launches: its kernels are shorter than the host's time "
         "to issue each one, so the host never gets ahead", "launch fewer, bigger kernels: capture the step as a "
         "CUDA graph (torch.cuda.graph, or torch.compile(mode='reduce-overhead')), or use a larger batch",
         "03 §8 CUDA graphs: when the launches are the bottleneck"),
    Kind("pageable_copy", "a host-to-device copy from pageable memory is staged through a bounce buffer and "
         "blocks the host", "copy from pinned memory with non_blocking=True (DataLoader(pin_memory=True))",
         "05 §1 Bandwidth: pageable against pinned"),
    Kind("exposed_copy", "a copy ran with no compute beside it: it was queued on the compute stream, or "
         "nothing was ready to run", "copy the next batch on a side stream one step ahead (wait_stream, then "
         "record_stream)", "05 §4 Overlap: a copy/compute pipeline"),
    Kind("small_copies", "many tiny host-to-device copies each pay a launch and, without non_blocking, a "
         "wait for the GPU", "build the values into one tensor on the host and copy it once (or make them on "
         "the GPU)", "05 §2 What `non_blocking=True` really does"),
    Kind("dataloader_stall", "the GPU was idle while the training process loaded the next batch",
         "load in worker processes: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True)",
         "05 §6 A real input pipeline: `DataLoader` with `pin_memory=True`"),
    Kind("exposed_comm", "communication ran with no compute beside it", "overlap it with compute: bucketed "
         "all-reduce during backward (DDP), or communication on its own stream", "06 §5 What to do in your "
         "own code"),
    Kind("rank_skew", "a collective waited for a late rank: it cannot finish until every rank has joined, so "
         "the ranks that came early sat in it", "find what the late rank does that the others don't (logging, "
         "checkpoints, evaluation, uneven data) and even it out or move it off the step", "06 §5 What to do in "
         "your own code"),
    Kind("pipeline_bubble", "a stage on one GPU waited for a stage on another: with p stages and m "
         "micro-batches a pipeline idles (p-1)/(m+p-1) of the step", "split the batch into micro-batches "
         "(GPipe, 1F1B: torch.distributed.pipelining)", "07 §3 GPipe: how many micro-batches?"),
    Kind("alloc_churn", "cudaMalloc/cudaFree ran in steady-state steps; cudaFree waits for the whole GPU",
         "let the caching allocator keep its memory: no torch.cuda.empty_cache() in the loop",
         "04 §4 The caching allocator and `record_stream`"),
    Kind("underfilled_gpu", "kernels long enough to matter ran alone with fewer thread blocks than the GPU "
         "has SMs, leaving the rest of the GPU empty", "run independent work beside them on other streams "
         "(asynclab.Parallel), batch it into one kernel, or capture it as a CUDA graph",
         "03 §3 When streams help: kernels that leave the GPU idle"),
    Kind("stream_wait", "a stream with work ready idled on another stream's event while nothing computed",
         "record the event earlier, or start the awaited work a step ahead; remove waits that guard "
         "nothing", "03 §2 Side streams, and the waits they need"),
]}

#: Kinds whose time is host time in the trace: the profiler's own per-op overhead makes them read high.
HOST_BOUND_KINDS = ("host_sync", "launch_bound", "small_copies", "dataloader_stall", "alloc_churn")


def kind(name: str) -> Kind:
    """The catalogue entry of a finding kind.

    Example:
        >>> kind("host_sync").lesson
        '01 §5 Hidden sync points'
    """
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"no finding kind {name!r} (kinds: {', '.join(KINDS)})") from None


@dataclass
class Finding:
    """One mistake found in a trace: its kind, what fixing it would save per step, and where it happens.

    ``lost_ms_per_step`` and ``share`` are the saving its fix would bring (by replay, see
    :class:`asynclab.trace.analysis.diagnose.Diagnosis`); ``idle_ms_per_step`` is the profiled GPU idle time it explains.

    ``where`` holds ``op`` (the aten op or runtime call), ``kernel`` (the GPU work around it), ``line``
    (the innermost Python line of the learner's code, when the trace has stacks), ``steps`` (the steps
    it occurs in) and ``count`` (occurrences).

    Example:
        >>> f = Finding("host_sync", lost_ms_per_step=2.0, share=0.25)
        >>> f.as_dict()["lesson"]
        '01 §5 Hidden sync points'
    """

    kind: str
    lost_ms_per_step: float
    share: float
    where: dict[str, Any] = field(default_factory=dict)
    idle_ms_per_step: float = 0.0

    @property
    def why(self) -> str:
        return kind(self.kind).why

    @property
    def fix(self) -> str:
        return kind(self.kind).fix

    @property
    def lesson(self) -> str:
        return kind(self.kind).lesson

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lost_ms_per_step": round(self.lost_ms_per_step, 4),
                "share": round(self.share, 4), "idle_ms_per_step": round(self.idle_ms_per_step, 4),
                "where": self.where, "why": self.why, "fix": self.fix,
                "lesson": self.lesson}
