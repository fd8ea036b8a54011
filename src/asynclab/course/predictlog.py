"""The predicted table's collector: each figure and claim a cell shows on the simulated card, beside its recording,
appended as one JSON line to the file that ``ASYNCLAB_PREDICTED_LOG`` names (``scripts/predicted_table.py`` sets it).

Only a cell that still runs its original code is logged (its recording ran the same code), and only where the
environment variable is set: a learner's run writes nothing.
"""
from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["LOG_ENV", "number", "log_figure", "log_claim", "log_refused", "read"]

#: Names the file (JSON lines) that collects the predicted figures and claims of the cells run on the simulated card.
LOG_ENV = "ASYNCLAB_PREDICTED_LOG"


def number(value: Any) -> bool:
    """Whether ``value`` is a figure the table can compare: a finite int or float, not a bool.

    Example:
        >>> number(2), number(1.5), number(True), number("x"), number(float("nan"))
        (True, True, False, False, False)
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and abs(value) != float("inf")


def _append(row: dict[str, Any]) -> bool:
    path = os.environ.get(LOG_ENV)
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(row, sort_keys=True) + "\n")
    return True


def _logged(measured: Any) -> bool:
    """A run on the simulated card of a cell's original code, with its recording: the runs the table compares."""
    return bool(measured.predicted and measured.same_code and measured.reference and not measured.failed)


def _where(measured: Any) -> dict[str, Any]:
    return {"lesson": measured.lesson, "cell": measured.name, "where": measured.where,
            "gpu": (measured.reference or {}).get("gpu")}


def log_figure(measured: Any, what: str, predicted: Any, recorded: Any, unit: str) -> bool:
    """Log a numeric figure of ``measured`` (a :class:`asynclab.course.cells.Measured`) and the recording's: True
    when a line was written (the log is set, the run is a prediction of the original code, both are numbers).

    Example:
        >>> import tempfile
        >>> from asynclab.course.cells import Measured
        >>> m = Measured({"a": 2.0}, {}, {}, None, "simulated H200 (predicted)", "c",
        ...              {"gpu": "NVIDIA H200", "ms": {"a": 2.5}, "fingerprint": "c"}, True, name="cell_a", lesson="02")
        >>> os.environ[LOG_ENV] = tempfile.mktemp()
        >>> log_figure(m, "a's time", 2.0, 2.5, "ms"), log_figure(m, "a's name", "a", "a", "")
        (True, False)
        >>> row = read(os.environ.pop(LOG_ENV))[0]
        >>> row["cell"], row["what"], row["predicted"], row["recorded"], row["gpu"]
        ('cell_a', "a's time", 2.0, 2.5, 'NVIDIA H200')
        >>> log_figure(m, "a's time", 2.0, 2.5, "ms")  # no log named: nothing written
        False
    """
    if not (_logged(measured) and number(predicted) and number(recorded)):
        return False
    return _append({"kind": "figure", **_where(measured), "what": what, "predicted": float(predicted),
                    "recorded": float(recorded), "unit": unit})


def log_claim(measured: Any, statement: str, predicted: bool, recorded: bool) -> bool:
    """Log a claim's verdict on ``measured`` (predicted) and on its recording, as PASS or DIFFERS.

    Example:
        >>> import tempfile
        >>> from asynclab.course.cells import Measured
        >>> m = Measured({"a": 2.0}, {}, {}, None, "simulated H200 (predicted)", "c",
        ...              {"gpu": "NVIDIA H200", "ms": {"a": 2.5}, "fingerprint": "c"}, True, name="cell_a", lesson="02")
        >>> os.environ[LOG_ENV] = tempfile.mktemp()
        >>> log_claim(m, "a is short", False, True)
        True
        >>> {k: v for k, v in read(os.environ.pop(LOG_ENV))[0].items() if k in ("predicted", "recorded")}
        {'predicted': 'DIFFERS', 'recorded': 'PASS'}
    """
    if not _logged(measured):
        return False
    verdict = {True: "PASS", False: "DIFFERS"}
    return _append({"kind": "claim", **_where(measured), "what": statement, "predicted": verdict[bool(predicted)],
                    "recorded": verdict[bool(recorded)]})


def log_refused(lesson: str, cell: str, reason: str) -> bool:
    """Log a cell that runs nothing on the simulated card here, with the reason it gives.

    Example:
        >>> import tempfile
        >>> os.environ[LOG_ENV] = tempfile.mktemp()
        >>> log_refused("01", "async_error", "an experiment by name: it runs on a GPU only")
        True
        >>> read(os.environ.pop(LOG_ENV))[0]["kind"]
        'refused'
    """
    return _append({"kind": "refused", "lesson": lesson, "cell": cell, "reason": reason})


def read(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a log, in the order they were written; a row written twice (a figure shown by two cells' lines,
    a re-run cell) is kept once, where it first came.

    Example:
        >>> import tempfile
        >>> os.environ[LOG_ENV] = tempfile.mktemp()
        >>> log_refused("01", "x", "why"), log_refused("01", "x", "why")
        (True, True)
        >>> len(read(os.environ.pop(LOG_ENV)))
        1
    """
    rows, seen = [], set()
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            key = (row["kind"], row["lesson"], row["cell"], row.get("what"))
            if key not in seen:
                seen.add(key)
                rows.append(row)
    return rows
