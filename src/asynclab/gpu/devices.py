"""The machine's devices as experiments and timers use them: which device, the current one, waiting for it, its count
and its native 16-bit type."""
from __future__ import annotations

import contextlib
from typing import Any

import torch

__all__ = ["resolve_device", "on_device", "sync", "sync_all", "gpu_count", "native_half", "dtype_name"]


def resolve_device(device: Any = None) -> torch.device:
    """The device to run on: the current CUDA device for None (the CPU without one); ``"cuda"`` is ``cuda:<current>``;
    a GPU asked for on a machine without one is an error (one line).

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device} asked for, but torch sees no CUDA GPU on this machine")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def on_device(dev: torch.device):
    """``torch.cuda.device(dev)`` on a GPU (so "current device" means ``dev``), nothing on the CPU.

    Example:
        >>> with on_device(torch.device("cpu")):
        ...     pass
    """
    return torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext()


def sync(device: torch.device) -> None:
    """``torch.cuda.synchronize(device)`` on a GPU, nothing on the CPU (which is already synchronous)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sync_all() -> None:
    """Wait for every GPU (``torch.cuda.synchronize`` waits for the current one only)."""
    for i in range(gpu_count()):
        torch.cuda.synchronize(i)


def gpu_count() -> int:
    """How many CUDA GPUs torch sees (0 without CUDA).

    Example:
        >>> gpu_count() >= 0
        True
    """
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def native_half(device: Any) -> torch.dtype:
    """The 16-bit type a device computes natively: bf16 from compute capability 8.0 (and on the CPU), fp16 below
    (Colab's and Kaggle's T4s are 7.5, where bf16 would be emulated, slowly).

    Example:
        >>> native_half("cpu")
        torch.bfloat16
    """
    dev = torch.device(device)
    if dev.type == "cuda" and torch.cuda.get_device_capability(dev) < (8, 0):
        return torch.float16
    return torch.bfloat16


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``.

    Example:
        >>> dtype_name(torch.bfloat16)
        'bfloat16'
    """
    return str(dtype).replace("torch.", "")
