"""CUDA graphs on a simulated GPU: ``torch.cuda.CUDAGraph`` and ``torch.cuda.graph``, captured and replayed."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from asynclab.sim.cuda import Stream, StreamContext
from asynclab.sim.running import active
from asynclab.sim.limits import unknown_attribute

__all__ = ["CUDAGraph", "graph"]


class CUDAGraph:
    """A stand-in for ``torch.cuda.CUDAGraph``: the work and stream calls queued while it is captured, launched
    again, in their order and on the memory they used, by each ``replay()`` (for one launch of the host's).

    Example:
        >>> import torch
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     x = torch.ones(2, device="cuda")
        ...     g = CUDAGraph()
        ...     with graph(g):
        ...         y = x * 3
        ...     _ = x.fill_(2.0)
        ...     g.replay()
        ...     y.tolist()
        [6.0, 6.0]
    """

    def __init__(self, keep_graph: bool = False) -> None:
        self._actions: list[tuple] | None = None
        self._stream: Stream | None = None

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        sim = active()
        if sim.capture is not None:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        self._stream = sim.current()
        sim.capture = []

    def capture_end(self) -> None:
        sim = active()
        self._actions, sim.capture = sim.capture, None

    def replay(self) -> None:
        if self._actions is None:
            raise RuntimeError("Called CUDAGraph::replay without a preceding successful capture.")
        active().replay(self._actions, self._stream)

    def reset(self) -> None:
        self._actions = None

    def pool(self) -> tuple[int, int]:
        """An opaque handle, as PyTorch's: another graph captured with ``pool=`` it shares this one's memory."""
        return (id(self), 0)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        import torch.cuda.graphs

        raise unknown_attribute(torch.cuda.graphs.CUDAGraph, "CUDAGraph", name, "write it with capture_begin, "
                                "capture_end, replay or torch.cuda.graph")


@contextlib.contextmanager
def graph(cuda_graph: CUDAGraph, pool: Any = None, stream: Stream | None = None,
          capture_error_mode: str = "global") -> Iterator[None]:
    """A stand-in for ``torch.cuda.graph``: the host waits for the GPU, then the block is captured into
    ``cuda_graph`` on a side stream (``stream``, or one of its own), as PyTorch captures it."""
    sim = active()
    sim.synchronize()
    with StreamContext(stream if stream is not None else Stream()):
        cuda_graph.capture_begin(pool, capture_error_mode)
        try:
            yield
        finally:
            cuda_graph.capture_end()
