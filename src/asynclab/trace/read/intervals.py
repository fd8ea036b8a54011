"""Interval arithmetic on numpy arrays: unions, lengths and intersections of [start, end) sets, with no Python loops over events."""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

__all__ = ["union", "union_length", "coverage", "intersection_length", "spans"]


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into sorted, disjoint ones (touching intervals are merged).

    Example:
        >>> s, e = union(np.array([5.0, 0.0]), np.array([12.0, 10.0]))
        >>> s.tolist(), e.tolist()
        ([0.0], [12.0])
    """
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def union_length(starts: Iterable[float], ends: Iterable[float]) -> float:
    """Total length covered by a set of intervals (overlaps counted once).

    Example:
        >>> union_length([0, 5, 20], [10, 12, 25])
        17.0
    """
    s, e = union(np.asarray(list(starts), float), np.asarray(list(ends), float))
    return float((e - s).sum())


def coverage(groups: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sweep over the unions of several groups: (segment boundaries, number of groups active in each
    segment [t_i, t_{i+1})).

    Example:
        >>> t, n = coverage([(np.array([0.0]), np.array([10.0])), (np.array([5.0]), np.array([20.0]))])
        >>> t.tolist(), n.tolist()
        ([0.0, 5.0, 10.0, 20.0], [1, 2, 1])
    """
    starts = [u[0] for u in groups]
    ends = [u[1] for u in groups]
    t = np.concatenate(starts + ends) if groups else np.zeros(0)
    if not len(t):
        return t, np.zeros(0, dtype=np.int64)
    d = np.concatenate([np.ones(sum(len(s) for s in starts), dtype=np.int64),
                        -np.ones(sum(len(e) for e in ends), dtype=np.int64)])
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    return t, np.cumsum(d)[:-1]


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two disjoint, sorted interval sets.

    Example:
        >>> intersection_length((np.array([0.0]), np.array([10.0])), (np.array([5.0]), np.array([20.0])))
        5.0
    """
    if not len(a[0]) or not len(b[0]):
        return 0.0
    t = np.concatenate([a[0], a[1], b[0], b[1]])
    da = np.concatenate([np.ones(len(a[0])), -np.ones(len(a[1])), np.zeros(len(b[0]) + len(b[1]))])
    db = np.concatenate([np.zeros(len(a[0]) + len(a[1])), np.ones(len(b[0])), -np.ones(len(b[1]))])
    order = np.argsort(t, kind="stable")
    t, da, db = t[order], da[order], db[order]
    ca, cb = np.cumsum(da)[:-1], np.cumsum(db)[:-1]
    seg = np.diff(t)
    return float(seg[(ca > 0) & (cb > 0)].sum())




def spans(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The union of a table's ``[start_us, end_us)`` rows.

    Example:
        >>> s, e = spans(pd.DataFrame({"start_us": [0.0, 5.0], "end_us": [10.0, 12.0]}))
        >>> s.tolist(), e.tolist()
        ([0.0], [12.0])
    """
    return union(df["start_us"].to_numpy(np.float64), df["end_us"].to_numpy(np.float64))
