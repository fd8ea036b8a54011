"""Two simulated GPUs for exercise checkers: streams per GPU and PyTorch's barrier around a copy between them."""
from __future__ import annotations

import contextlib
from typing import Any

from asynclab.simgpu import SimEvent, SimStream, SimTensor, _StandsInForCuda

__all__ = ["PeerSim"]


def _index(device: Any) -> int:
    """A device given as 1, "cuda:1" or torch.device("cuda", 1), as its index."""
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    index = None if isinstance(device, str) else getattr(device, "index", None)
    if index is not None:
        return int(index)
    text = str(device)
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise ValueError(f"the simulated GPUs are 0 and 1 ('cuda:0', 'cuda:1'), not {device!r}")


class PeerSim(_StandsInForCuda):
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

    POLL_MS = 0.5

    def __init__(self, copy_ms: float = 3.0, multiply_ms: float = 1.0) -> None:
        self.copy_ms, self.multiply_ms = copy_ms, multiply_ms
        self.host = 0.0
        self.defaults = [self._stream(d, "default", 7) for d in (0, 1)]
        self.streams = list(self.defaults)
        self.current_of = list(self.defaults)
        self.device = 0
        self.ran: list[tuple[str, str, int, int, float, float]] = []  # (cat, name, device, stream, start, end)
        super().__init__()

    def _stream(self, device: int, name: str, number: int) -> SimStream:
        stream = SimStream(self, f"GPU {device} {name}", number)
        stream.device = device
        return stream

    @property
    def current(self) -> SimStream:
        """The current stream of the current device (what an event records on by default)."""
        return self.current_of[self.device]

    def send(self) -> SimTensor:
        """``y1.copy_(x0)``: GPU 0's tensor to GPU 1, on GPU 0's current stream, fenced by both current streams."""
        copy_stream, receiver = self.current_of[0], self.current_of[1]
        start = max(copy_stream.ready, receiver.ready, self.host)  # the sender waits for the receiver's stream
        end = start + self.copy_ms
        copy_stream.ready = end
        receiver.ready = max(receiver.ready, end)  # and the receiver's stream waits for the copy
        if copy_stream is self.defaults[0]:  # the legacy default streams: GPU 1's waits too
            self.defaults[1].ready = max(self.defaults[1].ready, end)
        self.ran.append(("gpu_memcpy", "Memcpy PtoP (Device -> Device)", 0, copy_stream.number, start, end))
        return SimTensor(end, True, stream=None)

    def multiply(self) -> SimTensor:
        """A matrix product on GPU 1's current stream, whichever device is current (as ``with device(1)`` inside)."""
        return self.kernel([], self.multiply_ms, name="multiply (GPU 1)", device=1)

    def kernel(self, reads: list[SimTensor], ms: float, name: str = "kernel", device: int | None = None) -> SimTensor:
        """Queue a kernel on the current stream of ``device`` (default: the current device); it reads ``reads``
        (stale if they are not ready)."""
        device = self.device if device is None else device
        stream = self.current_of[device]
        start = max(stream.ready, self.host)
        stream.ready = start + ms
        self.ran.append(("kernel", name, device, stream.number, start, stream.ready))
        return SimTensor(stream.ready, all(t.right and start >= t.ready_at for t in reads))

    def trace(self):
        """What ran on the two simulated GPUs as a :class:`asynclab.trace.Trace`."""
        from asynclab.trace import load_trace

        if not self.ran:
            raise ValueError("nothing ran on the simulated GPUs")
        events = [{"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": stream, "ts": start * 1e3,
                   "dur": (end - start) * 1e3,
                   "args": {"device": dev, "stream": stream, **({"fromDevice": 0, "toDevice": 1} if cat == "gpu_memcpy"
                                                                else {})}}
                  for cat, name, dev, stream, start, end in self.ran]
        return load_trace({"traceEvents": events})

    def __enter__(self) -> "PeerSim":
        sim = self

        def new_stream(device=None, priority=0, **kwargs) -> SimStream:
            d = sim.device if device is None else _index(device)
            stream = sim._stream(d, f"side {len(sim.streams)}", 9 + 4 * len(sim.streams))
            sim.streams.append(stream)
            return stream

        @contextlib.contextmanager
        def use(stream: SimStream | None):
            if stream is None:
                yield None
                return
            before_device, before_stream = sim.device, sim.current_of[stream.device]
            sim.device, sim.current_of[stream.device] = stream.device, stream
            try:
                yield stream
            finally:
                sim.device, sim.current_of[stream.device] = before_device, before_stream

        @contextlib.contextmanager
        def on(device):
            before = sim.device
            sim.device = _index(device)
            try:
                yield
            finally:
                sim.device = before

        def synchronize(device=None) -> None:
            mine = [s for s in sim.streams if device is None and s.device == sim.device or
                    device is not None and s.device == _index(device)]
            sim.host = max([sim.host] + [s.ready for s in mine])

        fakes = {"is_available": lambda: True, "device_count": lambda: 2, "Stream": new_stream, "stream": use,
                 "device": on, "current_device": lambda: sim.device,
                 "current_stream": lambda device=None: sim.current_of[sim.device if device is None else _index(device)],
                 "default_stream": lambda device=None: sim.defaults[sim.device if device is None else _index(device)],
                 "Event": lambda *a, **k: SimEvent(sim, *a, **k), "synchronize": synchronize}
        self._install(fakes)
        return self
