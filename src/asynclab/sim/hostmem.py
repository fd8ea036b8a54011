"""Pinned host memory as PyTorch's caching host allocator keeps it: which memory is pinned, and which pin needs new pages."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from asynclab.sim.tensors import memory_of, storage_of

__all__ = ["PinnedMemory", "block_size"]


def block_size(nbytes: int) -> int:
    """The bytes of the pinned block that holds ``nbytes``: the next power of two, as PyTorch's caching host allocator
    rounds a request (``c10::llvm::PowerOf2Ceil``).

    Example:
        >>> block_size(1000), block_size(4096), block_size(0)
        (1024, 4096, 1)
    """
    return 1 << max(0, int(nbytes) - 1).bit_length()


@dataclass
class _Block:
    nbytes: int  # what the tensor asked for
    size: int  # the block's bytes
    holder: torch.Tensor  # a plain tensor on the block's memory: the simulation's own reference to it
    storage: torch.UntypedStorage  # its storage, kept: the count of its users is then the same in every PyTorch
    used_until: float  # when the last copy that reads or writes it ends (ms)


class PinnedMemory:
    """The page-locked host memory of a simulated process, as PyTorch's CachingHostAllocator (ATen's
    ``CachingHostAllocator.h``) keeps it. A pin takes a block of the next power of two bytes. Once no tensor reaches a
    block any more and the copies that used it have ended, the block waits in the cache, and a later pin of the same
    block size takes it back; else the driver allocates and page-locks new memory (``cudaHostAlloc``), which costs the
    host time (:class:`asynclab.sim.simulate.HostCosts` prices it). ``torch._C._host_emptyCache()`` gives the cached
    blocks back.

    Example:
        >>> mem = PinnedMemory()
        >>> a = torch.zeros(1000)
        >>> mem.pin(a.detach(), now=0.0)  # bytes the driver pins for it: a new block of 4 KiB
        4096
        >>> mem.holds(a[10:]), mem.holds(torch.zeros(4))
        (True, False)
        >>> del a
        >>> mem.pin(torch.zeros(900), now=1.0)  # 3600 bytes: the cached block of 4 KiB, no new pages
        0
    """

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}  # the blocks in use, by the address of their memory
        self._cache: list[tuple[int, float]] = []  # the free blocks: (bytes, when its last copy ends)

    def pin(self, host: torch.Tensor, now: float) -> int:
        """Register ``host``'s memory as pinned, allocated at the host's time ``now`` (ms); the bytes of the new block
        the driver page-locks for it, or 0 where a cached block serves it. ``host`` is the simulation's own tensor on
        the memory, kept while the block is in use: the program's tensors are others on the same memory, and the block
        is free once none of them is left."""
        storage = storage_of(host)
        size = block_size(storage.nbytes())
        self._reclaim()
        ready = next((i for i, (s, until) in enumerate(self._cache) if s == size and until <= now), None)
        if ready is not None:
            self._cache.pop(ready)
        self._blocks[storage.data_ptr()] = _Block(storage.nbytes(), size, host, storage, now)
        return 0 if ready is not None else size

    def holds(self, host: torch.Tensor) -> bool:
        """Whether ``host``'s memory is pinned: a tensor of a pin, a view of one, or another tensor on its memory
        (``from_numpy`` of its ``numpy()``, a ``set_`` onto its storage)."""
        return self._block_of(host) is not None

    def used(self, host: torch.Tensor, until: float) -> None:
        """A copy between ``host`` (pinned) and a GPU ends at ``until`` (ms): its block is not reused before then (the
        allocator records an event on the copy's stream and queries it)."""
        block = self._block_of(host)
        if block is not None:
            block.used_until = max(block.used_until, until)

    def empty_cache(self) -> int:
        """``torch._C._host_emptyCache()``: the cached blocks go back to the driver; how many there were."""
        self._reclaim()
        count = len(self._cache)
        self._cache.clear()
        return count

    def _reclaim(self) -> None:
        """Blocks that no tensor but the simulation's own reaches any more go to the cache."""
        for address, block in list(self._blocks.items()):
            if torch._C._storage_Use_Count(block.storage._cdata) <= 2:  # the holder's and the kept storage's own
                del self._blocks[address]
                self._cache.append((block.size, block.used_until))

    def _block_of(self, host: torch.Tensor) -> _Block | None:
        address = memory_of(host)
        return next((b for start, b in self._blocks.items() if start <= address < start + b.nbytes), None)

