"""Pinned memory on the simulated GPU as PyTorch's caching host allocator keeps it: which pin needs new pages, and what
a new block costs the host of al.simulate."""
from __future__ import annotations

import pytest
import torch

import asynclab as al
from asynclab.sim.hostmem import PinnedMemory, block_size
from asynclab.sim.simulate import predictor

MiB = 1 << 20


def test_a_block_is_reused_only_once_no_tensor_holds_it_and_only_by_its_size():
    mem = PinnedMemory()
    a = torch.zeros(MiB // 4)
    assert mem.pin(a.detach(), now=0.0) == MiB  # the simulation keeps a tensor of its own on the memory
    view = a[10:]
    del a
    b = torch.zeros(MiB // 4)
    assert mem.pin(b.detach(), now=1.0) == MiB  # a view holds the first block
    del view
    c = torch.zeros(2 * MiB // 4)
    assert mem.pin(c.detach(), now=2.0) == 2 * MiB  # another size: another bucket
    assert mem.pin(torch.zeros(MiB // 4 - 100), now=3.0) == 0  # rounded up to 1 MiB: the first block, freed
    assert mem.holds(b[5:]) and mem.holds(c) and not mem.holds(torch.zeros(4))


def test_a_block_waits_for_the_copies_that_used_it():
    mem = PinnedMemory()
    a = torch.zeros(1000)
    mem.pin(a.detach(), now=0.0)
    mem.used(a, until=5.0)
    del a
    assert mem.pin(torch.zeros(1000), now=4.0) == block_size(4000)  # its copy has not ended: a new block
    assert mem.pin(torch.zeros(1000), now=6.0) == 0


def test_empty_cache_gives_the_free_blocks_back():
    mem = PinnedMemory()
    mem.pin(torch.zeros(1000), now=0.0)  # its tensor is gone at once
    assert mem.empty_cache() == 1
    assert mem.pin(torch.zeros(1000), now=1.0) == 4096


def _pins(fresh_each_time: bool) -> float:
    """The host's time (ms) of four pins of 64 MiB on the simulated H100, the cache emptied before each or not."""
    with predictor() as gpu:
        start = gpu.host
        for _ in range(4):
            if fresh_each_time:
                torch._C._host_emptyCache()
            x = torch.empty(64 * MiB, dtype=torch.uint8).pin_memory()
            del x
        return gpu.host - start


@pytest.mark.skipif(not hasattr(torch._C, "_host_emptyCache"), reason="this PyTorch has no _host_emptyCache")
def test_the_predictor_prices_new_pinned_blocks_and_not_cached_ones():
    f = al.sim.figures.card_figures("H100")
    fresh = f["host_alloc_us"] / 1e3 + 64 * MiB / (f["host_alloc_gbps"] * 1e6)
    cached, emptied = _pins(False), _pins(True)
    assert emptied - cached == pytest.approx(3 * fresh, rel=1e-6)  # the first pin of each run is new either way
    assert cached < 1.5 * fresh


def test_a_pinned_loop_pays_for_new_pages_once():
    def step():
        batch = torch.randn(256, 1024).pin_memory()  # a new batch each step, freed when the next comes
        return batch.to("cuda", non_blocking=True).sum()

    t = al.simulate(step, steps=4, warmup=1)
    first = al.simulate(step, steps=1, warmup=0).meta["simulated"]["step_ms"][0]
    steady = t.meta["simulated"]["step_ms"]
    assert max(steady) < first - 0.4  # the fresh block (1 MiB: 0.45 ms and its pages) was paid in the warm-up alone
