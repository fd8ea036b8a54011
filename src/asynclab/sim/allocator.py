"""The books of PyTorch's caching allocator on simulated GPUs: a pool of free blocks per device and stream, the bytes
allocated to tensors and reserved by the pools (and their peaks), and how often it asked the driver for memory. No
torch: a block is whatever memory the simulated GPU (:class:`asynclab.sim.device.SimGPU`) hands it, counted by its
``numel()`` bytes.
"""
from __future__ import annotations

import bisect
from typing import Any, Callable

__all__ = ["CachingAllocator"]


class CachingAllocator:
    """Free blocks by (device, stream), each pool sorted by size and then by when it was freed; ``now()`` is the host's
    time, ``order()`` the next number of the simulation's sequence (what keeps blocks of one size in order).

    Example:
        >>> books = CachingAllocator(now=lambda: 0.0, order=iter(range(100)).__next__)
        >>> pool = books.pool(0, "s")
        >>> books.fitting(pool, 1024) is None
        True
        >>> books.count(0, 4096, reserved=4096); books.stat("allocated", 0), books.stat("reserved", 0, peak=True)
        (4096, 4096)
    """

    def __init__(self, now: Callable[[], float], order: Callable[[], int]) -> None:
        self.now, self.order = now, order
        self.pools: dict[tuple, list[tuple]] = {}  # (device, stream) -> free blocks by size (size, order, bytes, from)
        self.mallocs = 0  # blocks the caching allocator asked the driver for (cudaMalloc)
        self.bytes: dict[tuple[str, int], int] = {}  # ("allocated" or "reserved", device) -> bytes now, and at peak:
        self.peaks: dict[tuple[str, int], int] = {}  # torch.cuda.memory_allocated() and its kin

    def pool(self, device: int, stream: Any) -> list[tuple]:
        """The free blocks of ``stream`` on ``device``."""
        return self.pools.setdefault((device, stream), [])

    def fitting(self, pool: list, need: int) -> int | None:
        """Where in ``pool`` (free blocks sorted by size, then by when they were freed) the smallest block that is
        free now and holds ``need`` bytes, without wasting more than half of it, lies; None if there is none."""
        i = bisect.bisect_left(pool, (need,))
        while i < len(pool) and pool[i][0] <= 2 * max(need, 512):
            if pool[i][3] <= self.now():
                return i
            i += 1
        return None

    def freed(self, base: Any, device: int, stream: Any, free_at: float) -> None:
        """A block no tensor uses goes back to its stream's pool, free from ``free_at``."""
        self.count(device, -base.numel())
        bisect.insort(self.pool(device, stream), (base.numel(), self.order(), base, free_at))

    def count(self, device: int, allocated: int, reserved: int = 0) -> None:
        """Bytes allocated and reserved on ``device`` change by ``allocated`` and ``reserved``."""
        for kind, change in (("allocated", allocated), ("reserved", reserved)):
            now = self.bytes[kind, device] = self.bytes.get((kind, device), 0) + change
            self.peaks[kind, device] = max(self.peaks.get((kind, device), 0), now)

    def stat(self, kind: str, device: int, peak: bool = False) -> int:
        """Bytes of ``kind`` ("allocated" or "reserved") on ``device``, now or at their peak."""
        return (self.peaks if peak else self.bytes).get((kind, device), 0)

    def reset_peak(self, device: int) -> None:
        """The peaks of ``device`` start again from what is in use now."""
        for kind in ("allocated", "reserved"):
            self.peaks[kind, device] = self.bytes.get((kind, device), 0)

    def cached_blocks(self) -> int:
        """How many free blocks the pools hold now (what ``empty_cache`` gives back)."""
        return sum(1 for pool in self.pools.values() for *_, free_at in pool if free_at <= self.now())

    def empty(self) -> None:
        """The free blocks go back to the driver."""
        now = self.now()
        for (device, _), pool in self.pools.items():
            self.count(device, 0, reserved=-sum(size for size, *_, t in pool if t <= now))
            pool[:] = [entry for entry in pool if entry[3] > now]
