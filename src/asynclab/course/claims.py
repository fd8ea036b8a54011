"""A lesson's claims, checked on the data on screen: strict on recorded data, reporting on live and predicted data."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ClaimFailed", "Claim", "claim"]


class ClaimFailed(AssertionError):
    """A lesson's claim does not hold on reference data: the course itself is wrong."""


@dataclass(frozen=True)
class Claim:
    """The outcome of checking one claim."""

    statement: str
    ok: bool
    live: bool
    evidence: str
    source: str = ""

    def __str__(self) -> str:
        source = self.source or ("live" if self.live else "reference")
        if self.ok:
            return f"PASS ({source}): {self.statement} [{self.evidence}]"
        return f"DIFFERS ({source}): {self.statement} [{self.evidence}]"


def claim(statement: str, ok: bool, *, evidence: str, live: bool, why_it_may_differ: str = "",
          source: str = "") -> None:
    """State a lesson's claim and check it on the data on screen.

    On reference data (``live=False``) a failed claim raises :class:`ClaimFailed`: a lesson must never
    print a claim its own data does not support. On live data it prints what differed and why a
    classroom GPU may legitimately differ. ``source`` names the data in the line where "live" or "reference" would
    not say it (``"predicted"``: the simulated card's). It returns nothing, so a notebook cell that ends with a
    claim shows only the printed line (nbval compares it; a trailing ``;`` would not hide a value).

    Example:
        >>> claim("the synced time is larger", 0.72 > 0.41, evidence="0.72 ms vs 0.41 ms", live=False)
        PASS (reference): the synced time is larger [0.72 ms vs 0.41 ms]
        >>> claim("the synced time is larger", 0.3 > 0.41, evidence="0.3 ms vs 0.41 ms", live=True)
        DIFFERS (live): the synced time is larger [0.3 ms vs 0.41 ms]
    """
    result = Claim(statement, bool(ok), live, evidence, source)
    if not result.ok and not live:
        raise ClaimFailed(f"claim fails on the reference data: {statement} [{evidence}]")
    print(result)
    if not result.ok and why_it_may_differ:
        print(f"  why this machine may differ: {why_it_may_differ}")
