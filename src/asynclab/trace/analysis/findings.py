"""The catalogue of asynchrony mistakes `asynclab diagnose` names: each kind's why, fix and the lesson that teaches it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asynclab.trace.analysis.kinds import FINDING_KINDS

__all__ = ["Finding", "Kind", "CATALOGUE", "HOST_BOUND_KINDS", "kind"]


@dataclass(frozen=True)
class Kind:
    """One kind of finding: what it means (``why``), what to do (``fix``) and where the course teaches it."""

    name: str
    why: str
    fix: str
    lesson: str


CATALOGUE: dict[str, Kind] = {k.name: Kind(k.name, k.why, k.fix, k.lesson) for k in FINDING_KINDS}

#: Kinds whose time is host time in the trace: the profiler's own per-op overhead makes them read high.
HOST_BOUND_KINDS = tuple(k.name for k in FINDING_KINDS if k.host_bound)


def kind(name: str) -> Kind:
    """The catalogue entry of a finding kind.

    Example:
        >>> kind("host_sync").lesson
        '01 §5 Hidden sync points'
    """
    try:
        return CATALOGUE[name]
    except KeyError:
        raise ValueError(f"no finding kind {name!r} (kinds: {', '.join(CATALOGUE)})") from None


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
