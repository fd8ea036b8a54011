"""Where the simulated card's prediction of a cell's figure or claim misses the cell's recording, and why: what the
cost model leaves out. docs/predicted.md quotes these reasons; tests/course/test_predicted.py holds each to its miss."""
from __future__ import annotations

from typing import Any

__all__ = ["TARGET", "MISSES", "key", "is_miss"]

#: How close a predicted figure must come to the recorded one: its ratio (predicted / recorded) within these bounds.
TARGET = (0.75, 1.25)

#: The figures and claims the prediction misses, by (lesson, cell, what: the figure's label or the claim's
#: statement), each with what the model leaves out. Each was checked by an experiment (see the tests).
MISSES: dict[tuple[str, str, str], str] = {}


def key(row: dict[str, Any]) -> tuple[str, str, str]:
    """A row's key in :data:`MISSES`: (lesson, cell, what).

    Example:
        >>> key({"lesson": "02", "cell": "spread", "what": "max > p95"})
        ('02', 'spread', 'max > p95')
    """
    return row["lesson"], row["cell"], row["what"]


def is_miss(row: dict[str, Any]) -> bool:
    """Whether a row of docs/predicted.json misses: a figure whose ratio is outside :data:`TARGET` (or has none), a
    claim whose predicted verdict is not the recording's.

    Example:
        >>> is_miss({"kind": "figure", "ratio": 1.3}), is_miss({"kind": "figure", "ratio": 0.8})
        (True, False)
        >>> is_miss({"kind": "claim", "predicted": "PASS", "recorded": "DIFFERS"})
        True
    """
    if row["kind"] == "claim":
        return row["predicted"] != row["recorded"]
    if row["kind"] == "figure":
        ratio = row.get("ratio")
        return ratio is None or not TARGET[0] <= ratio <= TARGET[1]
    return False
