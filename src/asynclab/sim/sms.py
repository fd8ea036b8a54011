"""The SMs of simulated GPUs: which kernels run on them when, on what share, at what speed. No torch: a kernel here is
its share of the SMs, its time alone, whether it is memory-bound and its stream's priority; the figures
(``SM_DRAW``) and the host threads' horizon are the simulated GPU's (:class:`asynclab.sim.device.SimGPU`), which
holds one :class:`SMs`.
"""
from __future__ import annotations

import bisect
import math
from typing import Any, NamedTuple

__all__ = ["SMs", "Stretch"]


class Stretch(NamedTuple):
    """A stretch of a kernel on a GPU's SMs: when, on what share of them at what speed (as a share of its speed alone),
    whether memory-bound, its stream's priority, and from when its blocks hold their SMs to its end (a wave of blocks
    of a known time, a matrix product: its start; other kernels, whose blocks are taken as short: never)."""

    start: float
    end: float
    sms: float
    memory: bool
    speed: float
    priority: int
    held_since: float

    def holds_from(self, ready: float, priority: int) -> bool:
        """Whether it keeps its SMs from a kernel of ``priority`` ready at ``ready``: one as or more urgent does; a
        less urgent one only where its blocks hold their SMs to its end and it runs at ``ready`` (the waves that come
        next wait for the urgent blocks).

        Example:
            >>> wave, other = Stretch(0.0, 0.2, 1.0, False, 1.0, 0, 0.0), Stretch(0.0, 0.2, 1.0, False, 1.0, 0, math.inf)
            >>> wave.holds_from(0.1, -1), other.holds_from(0.1, -1), other.holds_from(0.1, 0)
            (True, False, True)
        """
        return self.priority <= priority or self.held_since <= ready


class SMs:
    """The SMs of a simulated GPU's devices: the stretches of the kernels on each device's SMs, and when a new kernel
    starts and ends beside them. ``gpu`` gives the figure ``SM_DRAW`` and the host threads' ``horizon`` (the
    stretches that end before it are forgotten)."""

    def __init__(self, gpu: Any) -> None:
        self.gpu = gpu
        self.stretches: dict[int, list[Stretch]] = {}  # device -> the stretches of the kernels on its SMs
        self._ends: dict[int, list[float]] = {}  # device -> its stretches' ends, where they come in order of end

    def drawn(self, share: float) -> float:
        """The share of the memory's bandwidth that kernels holding ``share`` of the SMs draw together: an SM draws up
        to ``SM_DRAW`` times its even share while few are busy, and together they draw no more than the whole: the
        time per byte is what the SMs can draw plus what is left of the memory's own time.

        Example:
            >>> from asynclab.sim.device import SimGPU
            >>> gpu = SimGPU()
            >>> gpu.SM_DRAW = 2.0
            >>> [round(gpu.sms.drawn(f), 2) for f in (0.0, 0.125, 0.5, 1.0)]
            [0.0, 0.22, 0.67, 1.0]
        """
        return self.gpu.SM_DRAW * share / (1.0 + (self.gpu.SM_DRAW - 1.0) * share) if share > 0 else 0.0

    def speed(self, sms: float, memory: bool, running: list) -> float:
        """How fast a kernel goes on the share ``sms`` of the SMs, beside the ``running`` stretches of other kernels
        (:class:`Stretch`), as a share of its speed on the whole GPU: a
        compute-bound kernel in proportion to its SMs; a memory-bound one as fast as its SMs draw, within what is left
        of the bandwidth that all the memory-bound kernels' SMs draw together once the others have drawn theirs (the
        kernels launched before it go on as they were)."""
        if not memory:
            return sms
        others = [k for k in running if k.memory]
        left = self.drawn(sms + sum(k.sms for k in others)) - sum(k.speed for k in others)
        return max(0.0, min(self.drawn(sms), left))

    def on_sms(self, device: int, ready: float, ms: float, fill: float, memory: bool = False, priority: int = 0,
               holds: bool = False) -> tuple[float, float]:
        """When a kernel ready at ``ready`` that runs ``ms`` alone on a share ``fill`` of the SMs of ``device`` starts
        and ends, beside the kernels queued before it: as a GPU hands out SMs to blocks in the order kernels were
        launched, it runs on what those leave free (no faster than alone), and starts once some SMs are free. A
        ``memory``-bound kernel shares the memory's bandwidth with the memory-bound kernels beside it (:meth:`drawn`).
        A GPU hands SMs to the blocks of a stream of more urgent ``priority`` (a lower number) first, as the blocks
        running on them end (:meth:`Stretch.holds_from`); the kernels it takes them from are not slowed here (a GPU slows them by
        the share it takes, while it runs: little, for the short kernels priorities are for). ``holds``: its blocks
        hold their SMs until it ends (a wave of :meth:`in_waves`; a matrix product, whose kernels on an H100 keep their
        blocks on the SMs for the whole product: behind a bf16 product of 8192 x 8192, a kernel on a high-priority
        stream waited 1.23 ms, one on a normal stream 1.22).

        Example:
            >>> from asynclab.sim.device import SimGPU
            >>> sms = SimGPU().sms
            >>> sms.on_sms(0, 0.0, 2.0, 1.0), sms.on_sms(0, 0.0, 2.0, 1.0)   # both fill the GPU: one after the other
            ((0.0, 2.0), (2.0, 4.0))
            >>> sms.on_sms(0, 10.0, 1.0, 0.5), sms.on_sms(0, 10.0, 1.0, 0.25)  # room for both: side by side
            ((10.0, 11.0), (10.0, 11.0))
        """
        past = min(ready, self.gpu.threads.horizon)
        stretches, ends = self._since(device, past)
        after = stretches[bisect.bisect_right(ends, ready):] if ends is not None else \
            [k for k in stretches if k.end > ready]
        later = [k for k in after if k.holds_from(ready, priority)]
        alone = self.speed(fill, memory, [])
        t, work, start, mine = ready, ms * alone, None, []
        for edge in sorted({e for k in later for e in (k.start, k.end) if e > ready}) + [float("inf")]:
            running = [k for k in later if k.start <= t < k.end]
            sms = min(fill, max(0.0, 1.0 - sum(k.sms for k in running)))
            speed = self.speed(sms, memory, running) if sms > 1e-9 else 0.0
            if speed > 1e-9:
                start = t if start is None else start
                until = min(edge, t + work / speed)
                mine.append((t, until, sms, memory, speed, priority))
                work -= speed * (until - t)
                if until < edge or work <= 1e-12 * ms:
                    break
            t = edge
        stretches.extend(Stretch(*k, start if holds else float("inf")) for k in mine)
        if ends is not None:  # still in order of end (one stream's kernels, say)? then the next call bisects
            if ends and mine[0][1] < ends[-1]:
                del self._ends[device]
            else:
                ends.extend(k[1] for k in mine)
        return start, mine[-1][1]

    def _since(self, device: int, past: float) -> tuple[list[Stretch], list[float] | None]:
        """The stretches of ``device`` that end after ``past`` (those before are forgotten), in the order they came,
        and their ends where these come in order (else None): a search then finds where those after a time begin."""
        stretches, ends = self.stretches.get(device, []), self._ends.get(device)
        if ends is not None:
            gone = bisect.bisect_right(ends, past)
            del stretches[:gone], ends[:gone]
        else:
            stretches = [k for k in stretches if k.end > past]
            if all(a.end <= b.end for a, b in zip(stretches, stretches[1:])):
                ends = self._ends[device] = [k.end for k in stretches]
        self.stretches[device] = stretches
        return stretches, ends

    def in_waves(self, device: int, ready: float, waves: tuple, memory: bool = False,
                 priority: int = 0) -> tuple[float, float]:
        """When a kernel of ``waves`` ((share of the SMs, ms) of each) ready at ``ready`` starts and ends: each wave
        after the one before it, on what the kernels queued before it leave (:meth:`on_sms`).

        Example:
            >>> from asynclab.sim.device import SimGPU
            >>> sms = SimGPU().sms
            >>> sms.in_waves(0, 0.0, ((1.0, 0.2), (0.25, 0.2)))  # a full wave, then a quarter of the SMs
            (0.0, 0.4)
            >>> sms.on_sms(0, 0.0, 0.2, 0.75)  # another stream's kernel fills the rest of the second wave
            (0.2, 0.4)
        """
        start, t = None, ready
        for fill, ms in waves:
            s, t = self.on_sms(device, t, ms, fill, memory, priority, holds=True)
            start = s if start is None else start
        return start, t
