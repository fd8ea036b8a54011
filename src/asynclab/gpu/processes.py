"""Fresh Python processes run side by side: the lessons' runs that need a CUDA context of their own."""
from __future__ import annotations

import subprocess
import sys
from typing import Mapping, NamedTuple


class Finished(NamedTuple):
    """What one process left: its exit status and its whole output."""

    returncode: int
    stdout: str
    stderr: str


def side_by_side(runs: Mapping[str, tuple[list[str], Mapping[str, str]]], timeout_s: float = 120.0,
                 what: str = "run") -> dict[str, Finished]:
    """Start every ``name: (argv, env)`` at once and wait for all: each spends most of its time starting up
    (Python, torch, a CUDA context), so two take about as long as one. ``argv`` follows ``sys.executable``.

    Raises ``RuntimeError`` naming the run that took over ``timeout_s`` (all are killed then).

    Example:
        >>> import os
        >>> done = side_by_side({"a": (["-c", "print(1)"], os.environ), "b": (["-c", "print(2)"], os.environ)})
        >>> done["a"].stdout, done["b"].returncode
        ('1\\n', 0)
    """
    procs = {name: subprocess.Popen([sys.executable, *argv], env=dict(env), text=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE) for name, (argv, env) in runs.items()}
    out: dict[str, Finished] = {}
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for p in procs.values():
                p.kill()
            raise RuntimeError(f"the {what} ({name}) took over {timeout_s:g} s") from None
        out[name] = Finished(proc.returncode, stdout, stderr)
    return out
