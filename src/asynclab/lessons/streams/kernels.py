"""Lesson 03's spin-blocks kernel: Triton blocks that each spin a set time, launched as a PyTorch operator."""
from __future__ import annotations

from typing import Any

import torch

from asynclab.sim.running import in_check
from asynclab.sim.limits import SimulationLimit
from asynclab.sim.ops import operator_rule

__all__ = ["SpinBlocks", "spin_blocks_op", "blocks_per_sm_by_threads", "triton_kernel"]

_KERNEL = None
_OP = None


def triton_kernel() -> Any:
    """A Triton kernel whose every block spins for ``ns`` nanoseconds of the GPU's global timer.

    Each block takes the same time wherever and whenever it runs, so a grid's time is the number of
    *waves* it needs times that: the block count is the only thing that changes.
    """
    global _KERNEL
    if _KERNEL is None:
        import triton
        import triton.language as tl

        @triton.jit
        def spin_blocks(out_ptr, ns):
            start = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                              is_pure=False, pack=1)
            now = start
            while now - start < ns:
                now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                                is_pure=False, pack=1)
            tl.store(out_ptr + tl.program_id(0), now - start)

        _KERNEL = spin_blocks
    return _KERNEL


def blocks_per_sm_by_threads(warps: int) -> int:
    """How many blocks of ``warps`` warps an SM of 2048 threads holds at once, by threads alone.

    Example:
        >>> blocks_per_sm_by_threads(32), blocks_per_sm_by_threads(4)
        (2, 16)
    """
    return max(1, min(32, 2048 // (32 * warps)))


def spin_blocks_op() -> Any:
    """The operator ``asynclab::spin_blocks(out, ns, blocks, warps)`` (``torch.library.custom_op``; None before
    PyTorch 2.4, which has no such extension point): on a GPU it launches :func:`triton_kernel` with ``blocks``
    blocks of ``warps`` warps, each spinning ``ns`` ns and writing how long it spun into ``out``. A simulated GPU
    runs it as the waves of blocks that the GPU holds at once, each ``ns`` long.

    Example:
        >>> op = spin_blocks_op()
        >>> op is None or op._qualname == "asynclab::spin_blocks"  # None before PyTorch 2.4
        True
    """
    global _OP
    if _OP is None and hasattr(torch.library, "custom_op"):
        @torch.library.custom_op("asynclab::spin_blocks", mutates_args=("out",), device_types="cuda")
        def spin_blocks(out: torch.Tensor, ns: int, blocks: int, warps: int) -> None:
            triton_kernel()[(blocks,)](out, ns, num_warps=warps)

        operator_rule(torch.ops.asynclab.spin_blocks.default)(_simulated)
        _OP = spin_blocks
    return _OP


def _simulated(gpu: Any, call: Any) -> None:
    """The spin-blocks kernel on a simulated GPU (its rule: ``call`` an :class:`asynclab.sim.ops.OperatorCall`): its
    blocks in waves of as many as the SMs hold at once (by threads), each wave ``ns`` long; the last wave's empty SMs
    are left to kernels queued after it."""
    given = {**dict(zip(("out", "ns", "blocks", "warps"), call.args)), **call.kwargs}
    out, ms, blocks = given["out"], given["ns"] / 1e6, int(given["blocks"])
    wave = gpu.SM_COUNT * blocks_per_sm_by_threads(int(given["warps"]))
    full, rest = divmod(blocks, wave)
    waves = ((1.0, ms),) * full + (((rest / wave, ms),) if rest else ())
    written = out.elem[:min(blocks, out.numel())]
    gpu.queue("spin_blocks", gpu.current(out.device.index), ms * len(waves),
              lambda: (lambda: written.fill_(given["ns"])) if gpu.computes else None, waves=waves,
              writes=(out.elem,))


class SpinBlocks:
    """Launch the spin-blocks kernel with a chosen grid on the current stream, and say how many blocks fit at once.

    On a simulated GPU (no Triton needed) the blocks that fit on an SM are counted by threads alone.

    Example:
        >>> k = SpinBlocks("cuda", block_us=200)  # doctest: +SKIP
        >>> k(k.wave + 1)  # two waves: the second holds one block  # doctest: +SKIP
    """

    def __init__(self, device: Any, block_us: float = 200.0, warps: int = 32):
        from asynclab.gpu.devices import resolve_device

        self.device = resolve_device(device)
        if self.device.type != "cuda":
            raise ValueError(f"the spin-blocks kernel needs a CUDA GPU, got {self.device}")
        self.ns, self.warps = int(block_us * 1e3), warps
        self.out = torch.empty(1 << 20, dtype=torch.int64, device=self.device)
        self.sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.op = spin_blocks_op()
        if in_check():
            if self.op is None:
                raise SimulationLimit("the simulated GPU runs the spin-blocks kernel with PyTorch 2.4 or later")
            self.kernel = None
            self.blocks_per_sm, self.occupancy_source = blocks_per_sm_by_threads(warps), "threads per SM (simulated)"
        else:
            try:
                self.kernel = triton_kernel()
            except ImportError:
                raise RuntimeError("the tail-effect experiment needs Triton (pip install triton)") from None
            compiled = self.kernel[(1,)](self.out, self.ns, num_warps=warps)
            torch.cuda.synchronize(self.device)
            self.blocks_per_sm, self.occupancy_source = _blocks_per_sm(compiled, warps * 32)
        self.wave = self.sms * self.blocks_per_sm

    def __call__(self, blocks: int) -> None:
        if not 1 <= blocks <= self.out.numel():
            raise ValueError(f"blocks must be 1..{self.out.numel()}, got {blocks}")
        if self.op is not None:
            self.op(self.out, self.ns, blocks, self.warps)
        else:
            self.kernel[(blocks,)](self.out, self.ns, num_warps=self.warps)


def _blocks_per_sm(compiled: Any, threads: int) -> tuple[int, str]:
    """How many blocks of this compiled kernel one SM holds at once: the CUDA driver's occupancy calculator,
    or (without ``cuda.bindings``) the same limits worked out from the kernel's registers and threads."""
    try:
        from cuda.bindings import driver

        err, n = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(driver.CUfunction(compiled.function), threads,
                                                                   int(compiled.metadata.shared))
        if err == driver.CUresult.CUDA_SUCCESS and n > 0:
            return int(n), "cuOccupancyMaxActiveBlocksPerMultiprocessor"
    except Exception:  # noqa: BLE001 - fall back to the arithmetic below
        pass
    regs = max(1, int(getattr(compiled, "n_regs", 32)))
    by_regs = 65536 // (((regs * 32 + 255) // 256) * 256 * (threads // 32))
    return int(max(1, min(blocks_per_sm_by_threads(threads // 32), by_regs))), "threads and registers per SM"
