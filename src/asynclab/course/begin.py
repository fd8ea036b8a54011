"""The first call of every notebook, light to import: while PyTorch loads (seconds on a laptop), the learner reads
what is loading instead of a silent cell."""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["start"]


def start(number: str | int) -> Any:
    """Say what loads when PyTorch is not loaded yet, then inspect the hardware and print the lesson's plan
    (:func:`asynclab.course.lessonrun.start`).

    Example:
        >>> run = start(0)  # doctest: +ELLIPSIS
        asynclab hardware report
        ...
        >>> run.lesson.name
        'welcome'
    """
    if "torch" not in sys.modules:
        print("loading PyTorch and this lesson's helpers (a few seconds on a laptop) ...", flush=True)
    from asynclab.course.lessonrun import start as begin_lesson

    return begin_lesson(number)
