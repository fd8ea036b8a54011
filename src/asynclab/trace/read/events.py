"""The event model's vocabulary: event kinds, how trace categories and names map to them, and the loading errors."""
from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = [
    "KINDS", "GPU_KINDS", "WORK_KINDS", "COPY_KINDS", "COMPUTE_KINDS", "TraceError", "TraceWarning",
    "a_type", "comm_kernel", "name_matches", "STEP_ANNOTATION",
]

#: The range :func:`asynclab.gpu.record.record` (and the simulated GPU's recorder) puts around each profiled call, so
#: that ``trace.window(annotation=STEP_ANNOTATION, occurrence=i)`` zooms on step i.
STEP_ANNOTATION = "asynclab.step"

#: Every value the ``kind`` column can take.
KINDS = (
    "compute", "comm", "h2d", "d2h", "d2d", "p2p", "memset", "sync",
    "launch", "cpu_op", "annotation", "gpu_annotation", "python", "other",
)
#: Kinds of rows that live on a GPU (``device`` is set, ``stream`` is set).
GPU_KINDS = frozenset({"compute", "comm", "h2d", "d2h", "d2d", "p2p", "memset", "sync", "gpu_annotation"})
#: Kinds that keep a GPU stream busy (what the metrics count as work; sync waits and annotations are not).
WORK_KINDS = ("compute", "comm", "h2d", "d2h", "d2d", "p2p", "memset")
#: Memory-copy kinds.
COPY_KINDS = ("h2d", "d2h", "d2d", "p2p")
#: Kernels that compute (every kernel that is not communication).
COMPUTE_KINDS = ("compute",)

#: CUDA's legacy default stream shows up as stream 7 in kineto traces of NVIDIA GPUs.
DEFAULT_CUDA_STREAM = "7"
#: Some kineto versions put cuda_sync rows at tid = stream + this offset.
SYNC_TID_OFFSET = 1_000_000

CAT_KIND = {
    "kernel": "compute",
    "gpu_memcpy": "copy", "memcpy": "copy",
    "gpu_memset": "memset", "memset": "memset",
    "cuda_sync": "sync",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_runtime": "launch", "cuda_driver": "launch", "runtime": "launch", "driver": "launch",
    "hip_runtime": "launch", "hip_driver": "launch",
    "mtia_runtime": "launch", "mtia_ccp_events": "compute",  # MTIA: copies and waits among its device rows by name
    "xpu_runtime": "launch", "xpu_driver": "launch",
    "privateuse1_runtime": "launch", "privateuse1_driver": "launch",
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "annotation",
    "python_function": "python", "python": "python",
}

# NCCL and RCCL name their device kernels ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), ncclKernel_...,
# and older releases ncclAllReduceRingLLKernel_...; RCCL keeps NCCL's names (and adds rccl prefixes).
_COMM_RE = re.compile(r"^\s*(?:void\s+)?(?:nccl|rccl)", re.IGNORECASE)


class TraceError(ValueError):
    """A file or object that cannot be read as a trace; the message names the source and the problem."""


class TraceWarning(UserWarning):
    """Something in a trace was skipped or recovered (truncated file, malformed events)."""


def comm_kernel(name: str) -> bool:
    """True for a NCCL/RCCL communication kernel (all-reduce, all-gather, reduce-scatter, broadcast, send/recv).

    Example:
        >>> comm_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
        True
        >>> comm_kernel("void at::native::vectorized_elementwise_kernel<4>")
        False
    """
    return bool(_COMM_RE.match(name))


def kind_of_cat(cat: Any) -> str:
    """The kind a trace category maps to ("copy" for memcpys, whose direction the name tells).

    Example:
        >>> kind_of_cat("kernel"), kind_of_cat("gpu_memcpy"), kind_of_cat(None)
        ('compute', 'copy', 'other')
    """
    if not isinstance(cat, str):
        return "other"
    return CAT_KIND.get(cat.lower(), "other")


def copy_kind(name: str) -> str | None:
    """A memcpy's direction from its name, or None when the name does not say.

    Example:
        >>> copy_kind("Memcpy HtoD (Pinned -> Device)"), copy_kind("Memcpy PtoP (Device -> Device)")
        ('h2d', 'p2p')
    """
    n = name.replace(" ", "").replace("_", "").lower()  # MTIA's direction arg: "HOST_TO_DEVICE"
    if "htod" in n or "hosttodevice" in n or "h2d" in n:
        return "h2d"
    if "dtoh" in n or "devicetohost" in n or "d2h" in n:
        return "d2h"
    if "ptop" in n or "peertopeer" in n or "p2p" in n:
        return "p2p"
    if "dtod" in n or "devicetodevice" in n or "d2d" in n:
        return "d2d"
    return None


def a_type(value: Any) -> str:
    """The type of ``value`` with its article, for error messages.

    Example:
        >>> a_type(3), a_type([1]), a_type(None)
        ('an int', 'a list', 'None')
    """
    if value is None:
        return "None"
    name = getattr(type(value), "stands_for", type(value).__name__)  # a stand-in names what it stands for
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def name_matches(names: pd.Series, pattern: str | re.Pattern) -> np.ndarray:
    """Which of ``names`` (a column of event names) the regular expression ``pattern`` finds, as a boolean array: each
    distinct name is searched once (a trace has hundreds of thousands of rows and a few hundred names); a missing
    name matches nothing.

    Example:
        >>> import pandas as pd
        >>> name_matches(pd.Series(["cudaMemcpy", "cudaLaunchKernel", None, "cudaMemcpy"]), "Memcpy").tolist()
        [True, False, False, True]
    """
    import pandas as pd  # here, so that loading a trace does not import pandas

    codes, uniques = pd.factorize(np.asarray(names, dtype=object))  # as objects: a third faster than a str Series
    found = re.compile(pattern).search
    hit = np.array([bool(found(str(u))) for u in uniques] + [False], dtype=bool)
    return hit[codes]
