"""Lesson 05's DataLoader experiment: a small CNN trained from a ``DataLoader``, plain against pinned memory with
``non_blocking`` copies."""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

from asynclab.course.experiments import annotate as _annotate
from asynclab.gpu.timing import wall_ms
from asynclab.course.experiments import record_gpu_trace as _record_trace
from asynclab.course.experiments import gpu_or_note
from asynclab.lessons.copy_overlap import NO_GPU, MiB

__all__ = ["dataloader"]


class _Batches(torch.utils.data.Dataset):
    """``count`` ready-made batches of images and labels, as a loader with ``batch_size=None`` serves them."""

    def __init__(self, count: int, batch: int, size: int):
        gen = torch.Generator().manual_seed(0)
        self.images = torch.randn(count, batch, 3, size, size, generator=gen)
        self.labels = torch.randint(0, 10, (count, batch), generator=gen)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[i], self.labels[i]


def _small_cnn() -> torch.nn.Module:
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(64, 10))


def dataloader(device: Any = None, steps: int = 24, batch: int = 256, size: int = 64, workers: int = 0,
               path_plain: str | Path | None = None, path_pinned: str | Path | None = None) -> dict[str, Any]:
    """Train a small CNN from a ``DataLoader``, plain against ``pin_memory=True`` with ``non_blocking=True``.

    Both loaders serve the same ``steps`` batches of ``batch`` 3x``size``x``size`` images with ``workers``
    worker processes. Plain: ``pin_memory=False`` and ``.to(device)``. Pinned: ``pin_memory=True`` and
    ``.to(device, non_blocking=True)``. The step time is host wall-clock over the steps after the first
    few (median of per-step times, the GPU synchronized only at the end). With paths, a few steps of each
    are profiled and the GPU's idle time per step is read from the trace.

    With ``workers=0`` (the default) the loader pins each batch in the training loop's own thread, so
    the pinned step includes that copy into pinned memory; the trace gives its time per step.

    Returns ``{"plain": {"step_ms", "idle_ms_per_step", "copy_ms_per_step", "pin_ms_per_step"}, "pinned": {...}, "batch_mib",
    "steps", "workers", "device"}``.

    Example:
        >>> dataloader("cpu")["plain"] is None
        True
    """
    dev, cpu = gpu_or_note(device, NO_GPU, plain=None, pinned=None, batch_mib=batch * 3 * size * size * 4 / MiB,
                           steps=steps, workers=workers)
    if cpu is not None:
        return cpu
    data = _Batches(steps, batch, size)
    results: dict[str, Any] = {}
    with torch.cuda.device(dev):
        for name, pinned, path in (("plain", False, path_plain), ("pinned", True, path_pinned)):
            torch.manual_seed(0)
            model = _small_cnn().to(dev)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            loader = torch.utils.data.DataLoader(data, batch_size=None, shuffle=False, num_workers=workers,
                                                 pin_memory=pinned, persistent_workers=workers > 0)

            def train_step(images: torch.Tensor, labels: torch.Tensor) -> None:
                images = images.to(dev, non_blocking=pinned)
                labels = labels.to(dev, non_blocking=pinned)
                loss = torch.nn.functional.cross_entropy(model(images), labels)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

            def epoch(timed: bool) -> list[float]:
                times, t0 = [], time.perf_counter()
                for images, labels in loader:
                    with _annotate("step"):
                        train_step(images, labels)
                    times.append(wall_ms(t0))
                    t0 = time.perf_counter()
                torch.cuda.synchronize()
                return times

            epoch(False)  # workers started, kernels loaded, the allocator warm
            times = epoch(True)
            skip = min(4, len(times) // 2)
            stats = {"step_ms": statistics.median(times[skip:]), "idle_ms_per_step": None, "copy_ms_per_step": None,
                     "pin_ms_per_step": None}
            if path is not None:
                stats.update(_loader_trace_stats(_record_trace(path, lambda: epoch(False)), len(data)))
            results[name] = stats
            del loader
    return {**results, "batch_mib": batch * 3 * size * size * 4 / MiB, "steps": steps, "workers": workers,
            "device": str(dev)}


def _loader_trace_stats(trace: Any, steps: int) -> dict[str, float]:
    """Per step, from a trace of one epoch: GPU idle time (first to last GPU work), H2D copy time, host time pinning."""
    from asynclab.trace.analysis.metrics import idle_gaps

    copies = trace.gpu().query("kind == 'h2d'")
    pins = trace.find("aten::pin_memory", kinds="cpu_op")
    return {"idle_ms_per_step": float(idle_gaps(trace)["dur_us"].sum()) / 1e3 / steps,
            "copy_ms_per_step": float(copies["dur_us"].sum()) / 1e3 / steps,
            "pin_ms_per_step": float(pins["dur_us"].sum()) / 1e3 / steps}


# -- everything, as the recording script runs it ----------------------------------------------------------------------
