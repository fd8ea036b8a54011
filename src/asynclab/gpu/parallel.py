"""``Parallel``: an ``nn.Module`` that runs independent branches on their own CUDA side streams (the forum thread "How can l run two blocks in parallel?")."""
from __future__ import annotations

from typing import Any, Iterator

import torch
from torch import nn

from asynclab.trace.read.events import a_type


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside a branch's output (a tensor, or lists, tuples and dicts of them)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


class Parallel(nn.Module):
    """Run ``branches`` on the same inputs, each on its own side stream, and return their outputs as a tuple.

    What it does on a GPU, in order:

    1. each branch's stream waits for the caller's current stream (the inputs were made there);
    2. each branch runs under ``torch.cuda.stream(its stream)``, so its kernels are queued there;
    3. the caller's stream waits for every branch's stream, so whatever the caller queues next sees
       finished outputs;
    4. every output tensor gets ``record_stream(caller's stream)``: the outputs were allocated on the
       branches' streams, and without it the caching allocator could hand their memory to the next
       allocation on a branch stream while the caller's stream still reads it.

    Autograd runs each backward kernel on the stream its forward kernel ran on and synchronizes the
    streams where gradients meet, so gradients equal those of running the branches one after another.
    On the CPU (or with CPU inputs) the branches simply run one after another. The streams are made
    once per device and reused: PyTorch hands side streams out of a fixed pool (lesson 03, appendix B).

    Whether it is faster depends on the branches: only kernels that leave most of the GPU idle can
    overlap, and each branch still costs the host its launches (lesson 03 measures both cases).

    It can be captured in a CUDA graph (``torch.cuda.graph``), which removes those launches: run it once
    before the capture, so that its streams exist, and the fork and join above become parallel branches
    of the graph (:func:`asynclab.lessons.streams.experiments.captured` does both; lesson 03, section 7).

    Example:
        >>> par = Parallel(nn.Linear(4, 2), nn.Linear(4, 3))
        >>> a, b = par(torch.ones(5, 4))
        >>> a.shape, b.shape
        (torch.Size([5, 2]), torch.Size([5, 3]))
    """

    def __init__(self, *branches: nn.Module):
        super().__init__()
        if not branches:
            raise ValueError("Parallel needs at least one branch, e.g. Parallel(block1, block2)")
        for i, branch in enumerate(branches):
            if not callable(branch):
                raise TypeError(f"branch {i} is {a_type(branch)}, not a module or function")
        self.branches = nn.ModuleList(b if isinstance(b, nn.Module) else _Wrapped(b) for b in branches)
        self._streams: dict[int, list[torch.cuda.Stream]] = {}

    def streams(self, device: torch.device | int | str) -> list[torch.cuda.Stream]:
        """The side streams the branches run on for ``device``, one per branch (made on first use).

        Example:
            >>> Parallel(nn.Identity()).streams("cuda:0")  # doctest: +SKIP
            [<torch.cuda.Stream device=cuda:0 cuda_stream=0x...>]
        """
        index = torch.device(device).index if not isinstance(device, int) else device
        index = torch.cuda.current_device() if index is None else index
        if index not in self._streams:
            with torch.cuda.device(index):
                self._streams[index] = [torch.cuda.Stream() for _ in self.branches]
        return self._streams[index]

    def forward(self, *inputs: Any) -> tuple[Any, ...]:
        first = next(_tensors(list(inputs)), None)
        if first is None or first.device.type != "cuda":
            return tuple(branch(*inputs) for branch in self.branches)
        caller = torch.cuda.current_stream(first.device)
        streams = self.streams(first.device)
        outputs = []
        for branch, stream in zip(self.branches, streams):
            stream.wait_stream(caller)
            with torch.cuda.stream(stream):
                outputs.append(branch(*inputs))
        for stream in streams:
            caller.wait_stream(stream)
        for out in outputs:
            for t in _tensors(out):
                if t.device.type == "cuda":
                    t.record_stream(caller)
        return tuple(outputs)

    def extra_repr(self) -> str:
        return f"{len(self.branches)} branches, one side stream each on a GPU"


class _Wrapped(nn.Module):
    """A plain function as a branch."""

    def __init__(self, fn: Any):
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: Any) -> Any:
        return self.fn(*inputs)


__all__ = ["Parallel"]
