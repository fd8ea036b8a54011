"""What the simulated GPU does not cover, refused with one clear :class:`SimulationLimit` instead of reaching a real
driver: fresh Python processes, torch.distributed (CUDA graphs it runs: asynclab.sim.graphs)."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import torch  # noqa: F401 - torch.cuda and torch.distributed are patched by their import paths

from asynclab.sim import patches
from asynclab.sim.limits import SimulationLimit

__all__ = ["refusals"]


def _refuse(call: str, instead: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise SimulationLimit(call, instead)
    return refused


def _python_refused(popen: Any) -> Any:
    """``subprocess.Popen`` that refuses a fresh Python process (an experiment run in one has a real GPU of its own)
    and runs any other command (a library that looks for a shared library with ``ldconfig``)."""
    def start(args: Any, *rest: Any, **kwargs: Any) -> Any:
        first = str(args[0] if isinstance(args, (list, tuple)) else args).split()[0]
        if first == sys.executable or Path(first).name.startswith("python"):
            raise SimulationLimit("a fresh Python process (subprocess)", "not simulated")
        return popen(args, *rest, **kwargs)
    return start


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """While a simulation runs, what the simulated GPU does not cover raises :class:`SimulationLimit` instead of
    reaching a real driver: fresh Python processes, torch.distributed.

    Example:
        >>> with refusals():
        ...     try:
        ...         torch.distributed.init_process_group("nccl")
        ...     except SimulationLimit as err:
        ...         print(err.call)
        torch.distributed (NCCL)
    """
    stand_ins = {"subprocess": {"Popen": _python_refused(subprocess.Popen)},
                 "torch.distributed": {"init_process_group": _refuse("torch.distributed (NCCL)", "not simulated")}}
    assert {path: tuple(names) for path, names in stand_ins.items()} == patches.REFUSED
    with contextlib.ExitStack() as stack:
        for path, names in stand_ins.items():
            here = {name: fn for name, fn in names.items() if hasattr(patches.owner_of(path), name)}
            stack.enter_context(patches.patched(path, here))
        yield
