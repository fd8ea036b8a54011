"""CUDA graphs on a simulated GPU: ``torch.cuda.CUDAGraph`` and ``torch.cuda.graph``, captured and replayed."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from asynclab.sim.cuda import Stream, StreamContext
from asynclab.sim.running import RUNNING, active
from asynclab.sim.limits import unknown_attribute

__all__ = ["CUDAGraph", "graph", "launch"]


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
        launch(active(), self._actions, self._stream)

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


def launch(gpu: Any, actions: list[tuple], captured_on: Stream) -> None:
    """Launch a captured CUDA graph: its work and stream calls again, in their order, what was captured on
    ``captured_on`` now on the current stream; the host pays one launch (``cudaGraphLaunch``), its kernels none.

    Example:
        >>> import torch
        >>> from asynclab.sim.device import SimGPU
        >>> with SimGPU() as gpu:
        ...     x = torch.zeros(4, device="cuda")
        ...     g = torch.cuda.CUDAGraph()
        ...     with torch.cuda.graph(g):
        ...         _ = x.add_(1)
        ...     g.replay(); g.replay()
        ...     x.tolist()
        [2.0, 2.0, 2.0, 2.0]
    """
    here = gpu.current(captured_on.device_index)
    where = lambda s: here if s is captured_on else s  # noqa: E731
    gpu.launches.append(("cudaGraphLaunch", gpu.host, gpu.host + gpu.LAUNCH_MS, next(RUNNING.order)))
    gpu.host += gpu.LAUNCH_MS
    for kind, *rest in actions:
        if kind == "work":
            name, stream, ms, at_start, kw = rest
            gpu.queue(name, where(stream), ms, at_start, launched=False, **kw)
        elif kind == "wait_stream":
            gpu.set_ready(where(rest[0]), max(gpu.ready(where(rest[0])), gpu.ready(where(rest[1]))))
        elif kind == "record":
            gpu.record(rest[0], where(rest[1]))
        elif gpu.recorded(rest[1]) is not None:  # wait_event
            gpu.set_ready(where(rest[0]), max(gpu.ready(where(rest[0])), gpu.recorded(rest[1])))
