"""Two simulated GPUs for exercise checkers: streams per GPU and PyTorch's barrier around a copy between them."""
from __future__ import annotations

from asynclab.simcuda import Simulation, default_stream_of
from asynclab.simgpu import SimTensor, trace_of

__all__ = ["PeerSim"]


class PeerSim(Simulation):
    """Two simulated GPUs standing in for ``torch.cuda``: each has a default stream and a current stream, and
    :meth:`send` copies GPU 0's tensor to GPU 1 the way PyTorch does (aten/src/ATen/native/cuda/Copy.cu).

    The copy runs on the *sender's* current stream. Before it starts, that stream waits for the receiver's
    current stream; when it ends, the receiver's current stream waits for it. So whatever is queued later
    on the receiver's current stream runs after the whole copy. As measured on 2x H200 (lesson 06), a copy
    issued on GPU 0's default stream also holds later work on GPU 1's default stream (CUDA's legacy
    default streams). Learner code uses the real API
    (``torch.cuda.Stream(device)``, ``torch.cuda.stream(s)``, ``torch.cuda.device(i)``,
    ``torch.cuda.current_stream(i)``, ``wait_stream``, ``Event``) and the checker's ``send`` and
    ``multiply``; :meth:`trace` gives what ran as a Trace.

    Example:
        >>> with PeerSim(copy_ms=3.0, multiply_ms=1.0) as sim:
        ...     import torch
        ...     y = sim.send()                   # both GPUs on their default streams
        ...     z = sim.multiply()               # on GPU 1's default stream: waits for the whole copy
        >>> z.ready_at
        4.0
    """

    devices = 2

    def __init__(self, copy_ms: float = 3.0, multiply_ms: float = 1.0) -> None:
        super().__init__()
        self.copy_ms, self.multiply_ms = copy_ms, multiply_ms
        self.ran: list[tuple[str, str, int, int, float, float]] = []  # (cat, name, device, stream, start, end)

    def send(self) -> SimTensor:
        """``y1.copy_(x0)``: GPU 0's tensor to GPU 1, on GPU 0's current stream, fenced by both current streams."""
        copy_stream, receiver = self.current(0), self.current(1)
        # the sender waits for the receiver's stream
        start = max(self.ready(copy_stream), self.ready(receiver), self.host)
        end = start + self.copy_ms
        self.set_ready(copy_stream, end)
        self.set_ready(receiver, max(self.ready(receiver), end))  # and the receiver's stream waits for the copy
        if copy_stream is default_stream_of(0):  # the legacy default streams: GPU 1's waits too
            self.set_ready(default_stream_of(1), max(self.ready(default_stream_of(1)), end))
        self.ran.append(("gpu_memcpy", "Memcpy PtoP (Device -> Device)", 0, self.number(copy_stream), start, end))
        return SimTensor(None, end, True, device=1)  # y1: on the receiver

    def multiply(self) -> SimTensor:
        """A matrix product on GPU 1's current stream, whichever device is current (as ``with device(1)`` inside)."""
        return self.kernel([], self.multiply_ms, name="multiply (GPU 1)", device=1)

    def kernel(self, reads: list[SimTensor], ms: float, name: str = "kernel", device: int | None = None) -> SimTensor:
        """Queue a kernel on the current stream of ``device`` (default: the current device); it reads ``reads``
        (stale if they are not ready)."""
        stream = self.current(device)
        start = max(self.ready(stream), self.host)
        self.set_ready(stream, start + ms)
        self.ran.append(("kernel", name, stream.device_index, self.number(stream), start, start + ms))
        return SimTensor(None, start + ms, all(t.right and start >= t.ready_at for t in reads), device=stream.device_index)

    def trace(self):
        """What ran on the two simulated GPUs as a :class:`asynclab.trace.Trace`."""
        return trace_of(self.ran, "nothing ran on the simulated GPUs")
