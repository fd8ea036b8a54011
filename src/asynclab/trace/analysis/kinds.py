"""Every kind of finding `asynclab diagnose` names, in one table: how the diagnosis finds it (its classifier, in
:mod:`asynclab.trace.analysis.idle`), whether the replay predicts what its fix saves (its what-if, a transform of
:data:`asynclab.trace.analysis.whatif.TRANSFORMS` under the same name), what it means and what to do (its text, with
the lesson that teaches it), whether its time is host time, and its colour in a timeline's findings strip.
:data:`asynclab.trace.analysis.findings.CATALOGUE`, :data:`~asynclab.trace.analysis.findings.HOST_BOUND_KINDS` and
:data:`asynclab.trace.draw.palette.FINDING_COLORS` are read from it; this module imports nothing."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FindingKind", "FINDING_KINDS"]


@dataclass(frozen=True)
class FindingKind:
    """One kind of finding: its ``name``; where the diagnosis finds it (``found_by``: the classifier of
    :mod:`asynclab.trace.analysis.idle` and what it looks for); whether the replay predicts its fix (``replayed``:
    it has a transform in :data:`asynclab.trace.analysis.whatif.TRANSFORMS`, else it keeps the idle time it
    explains); what it means (``why``), what to do (``fix``), where the course teaches it (``lesson``); whether its
    time is host time in the trace (``host_bound``: the profiler's own per-op overhead makes it read high); and its
    colour in the findings strip (``colour``; None: not drawn there)."""

    name: str
    found_by: str
    replayed: bool
    why: str
    fix: str
    lesson: str
    host_bound: bool
    colour: str | None


#: The finding kinds, in the order the catalogue lists them.
FINDING_KINDS: tuple[FindingKind, ...] = (
    FindingKind(
        "host_sync",
        found_by="idle_pieces: the GPU ran dry while the host sat in a blocking call (a sync, a read-back)",
        replayed=True,
        why="the host waited for the GPU to finish, so the GPU then starved until the host launched the next work",
        fix="read results back once, after the loop (accumulate on the GPU; log every N steps)",
        lesson="01 §5 Hidden sync points",
        host_bound=True,
        colour="#D55E00"),  # vermillion (Okabe-Ito)
    FindingKind(
        "launch_bound",
        found_by="idle_pieces: the GPU waited for launches the host issued no faster than it ran them",
        replayed=True,
        why="the GPU waited for the host's launches: its kernels are shorter than the host's time to issue each one, "
            "so the host never gets ahead",
        fix="launch fewer, bigger kernels: capture the step as a CUDA graph (torch.cuda.graph, or "
            "torch.compile(mode='reduce-overhead')), or use a larger batch",
        lesson="03 §8 CUDA graphs: when the launches are the bottleneck",
        host_bound=True,
        colour="#F0E442"),  # yellow (Okabe-Ito)
    FindingKind(
        "pageable_copy",
        found_by="idle_pieces: a synchronous host-to-device copy from pageable memory",
        replayed=True,
        why="a host-to-device copy from pageable memory is staged through a bounce buffer and blocks the host",
        fix="copy from pinned memory with non_blocking=True (DataLoader(pin_memory=True))",
        lesson="05 §1 Bandwidth: pageable against pinned",
        host_bound=False,
        colour="#EE7733"),  # orange (Tol vibrant)
    FindingKind(
        "exposed_copy",
        found_by="idle_pieces: a copy ran with nothing computing beside it",
        replayed=True,
        why="a copy ran with no compute beside it: it was queued on the compute stream, or nothing was ready to run",
        fix="copy the next batch on a side stream one step ahead (wait_stream, then record_stream)",
        lesson="05 §4 Overlap: a copy/compute pipeline",
        host_bound=False,
        colour="#DDCC77"),  # sand (Tol muted)
    FindingKind(
        "small_copies",
        found_by="idle_pieces: many tiny host-to-device copies per step",
        replayed=True,
        why="many tiny host-to-device copies each pay a launch and, without non_blocking, a wait for the GPU",
        fix="build the values into one tensor on the host and copy it once (or make them on the GPU)",
        lesson="05 §2 What `non_blocking=True` really does",
        host_bound=True,
        colour="#999933"),  # olive (Tol muted)
    FindingKind(
        "dataloader_stall",
        found_by="idle_pieces: the host was in a DataLoader's __next__ while the GPU waited",
        replayed=True,
        why="the GPU was idle while the training process loaded the next batch",
        fix="load in worker processes: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True)",
        lesson="05 §6 A real input pipeline: `DataLoader` with `pin_memory=True`",
        host_bound=True,
        colour="#AA4499"),  # purple (Tol muted)
    FindingKind(
        "exposed_comm",
        found_by="idle_pieces: a collective ran with nothing computing beside it",
        replayed=False,
        why="communication ran with no compute beside it",
        fix="overlap it with compute: bucketed all-reduce during backward (DDP), or communication on its own stream",
        lesson="06 §5 What to do in your own code",
        host_bound=False,
        colour="#117733"),  # green (Tol muted)
    FindingKind(
        "rank_skew",
        found_by="idle_pieces: a collective waited for its latest rank to join (collectives.latest_peer_start)",
        replayed=True,
        why="a collective waited for a late rank: it cannot finish until every rank has joined, so the ranks that "
            "came early sat in it",
        fix="find what the late rank does that the others don't (logging, checkpoints, evaluation, uneven data) and "
            "even it out or move it off the step",
        lesson="06 §5 What to do in your own code",
        host_bound=False,
        colour=None),  # not drawn: its time is another rank's
    FindingKind(
        "pipeline_bubble",
        found_by="idle_pieces: a point-to-point receive waited for another stage",
        replayed=False,
        why="a stage on one GPU waited for a stage on another: with p stages and m micro-batches a pipeline idles "
            "(p-1)/(m+p-1) of the step",
        fix="split the batch into micro-batches (GPipe, 1F1B: torch.distributed.pipelining)",
        lesson="07 §3 GPipe: how many micro-batches?",
        host_bound=False,
        colour="#56B4E9"),  # sky blue (Okabe-Ito)
    FindingKind(
        "alloc_churn",
        found_by="idle_pieces: cudaMalloc/cudaFree in a steady step",
        replayed=True,
        why="cudaMalloc/cudaFree ran in steady-state steps; cudaFree waits for the whole GPU",
        fix="let the caching allocator keep its memory: no torch.cuda.empty_cache() in the loop",
        lesson="04 §4 The caching allocator and `record_stream`",
        host_bound=True,
        colour="#000000"),  # black
    FindingKind(
        "underfilled_gpu",
        found_by="underfilled_pieces: long kernels alone with fewer thread blocks than SMs (idle.thin)",
        replayed=True,
        why="kernels long enough to matter ran alone with fewer thread blocks than the GPU has SMs, leaving the rest "
            "of the GPU empty",
        fix="run independent work beside them on other streams (asynclab.Parallel), batch it into one kernel, or "
            "capture it as a CUDA graph",
        lesson="03 §3 When streams help: kernels that leave the GPU idle",
        host_bound=False,
        colour="#332288"),  # indigo (Tol muted)
    FindingKind(
        "stream_wait",
        found_by="idle_pieces: a stream with work ready waited on another stream's event",
        replayed=True,
        why="a stream with work ready idled on another stream's event while nothing computed",
        fix="record the event earlier, or start the awaited work a step ahead; remove waits that guard nothing",
        lesson="03 §2 Side streams, and the waits they need",
        host_bound=False,
        colour="#BBCC33"),  # pear (Tol light)
)
