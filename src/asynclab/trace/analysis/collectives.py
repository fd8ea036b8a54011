"""Communication kernels across ranks: each collective matched with its peers, and what kind of traffic a kernel is."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from asynclab.trace.read.events import name_matches

__all__ = ["latest_peer_start", "is_point_to_point", "late_rank", "P2P_OPS"]

#: Host ops that launch a pipeline's point-to-point traffic (send/receive), not a collective.
P2P_OPS = re.compile(r"(?:c10d::(?:send|recv)|nccl:(?:send|recv)\b|batch_isend_irecv)")
_COLLECTIVE_OPS = re.compile(r"(?:all_?to_?all|all_?gather|all_?reduce|reduce_?scatter|broadcast|c10d::reduce|"
                             r"gather|scatter|barrier)", re.I)


def latest_peer_start(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """For communication kernels (index labels ``rows``), when the last rank started the same collective.

    Collectives are issued in the same order on every rank, so the n-th kernel of one name on one rank
    meets the n-th of that name on the others. A kernel that starts before its peers waits for them.
    NaN where the trace has one rank or the kernel has no peer.

    Example:
        >>> ev = pd.DataFrame({"kind": ["comm"] * 4, "name": ["AllReduce"] * 4, "rank": [0, 0, 1, 1],
        ...                    "start_us": [0.0, 50.0, 8.0, 51.0]})
        >>> latest_peer_start(ev, np.array([0, 1])).tolist()
        [8.0, 51.0]
    """
    out = np.full(len(rows), np.nan)
    if "rank" not in events or not len(rows):
        return out
    rank = events["rank"]
    at = np.flatnonzero((events["kind"].to_numpy(dtype=object) == "comm") & rank.notna().to_numpy(dtype=bool))
    if len(at) < 2:
        return out
    comm_rank = rank.to_numpy(dtype=np.float64, na_value=np.nan)[at]
    if len(np.unique(comm_rank)) < 2:
        return out
    order = at[np.argsort(events["start_us"].to_numpy(np.float64)[at], kind="stable")]  # the kernels in time order
    start = events["start_us"].to_numpy(np.float64)[order]
    name = pd.factorize(events["name"].to_numpy(dtype=object)[order])[0]
    per_rank = pd.factorize(rank.to_numpy(dtype=np.float64, na_value=np.nan)[order])[0]
    seq = _cumcount(name * (int(per_rank.max()) + 1) + per_rank)  # the n-th kernel of its name on its rank
    key = pd.factorize(name * (len(order) + 1) + seq)[0]  # a collective: the n-th kernel of one name on every rank
    latest = np.full(int(key.max()) + 1, -np.inf)
    np.maximum.at(latest, key, start)
    hit = pd.Index(events.index.to_numpy()[order]).get_indexer(rows)
    known = hit >= 0
    out[known] = latest[key[hit[known]]]
    return out


def _cumcount(group: np.ndarray) -> np.ndarray:
    """Each element's place among the earlier elements of its group (``groupby().cumcount()`` of integer codes).

    Example:
        >>> _cumcount(np.array([3, 1, 3, 3, 1])).tolist()
        [0, 0, 1, 2, 1]
    """
    order = np.argsort(group, kind="stable")
    g = group[order]
    first = np.r_[0, np.flatnonzero(g[1:] != g[:-1]) + 1]
    runs = np.diff(np.r_[first, len(g)])
    out = np.empty(len(group), dtype=np.int64)
    out[order] = np.arange(len(g)) - np.repeat(first, runs)
    return out


def is_point_to_point(events: pd.DataFrame, host: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Whether each communication kernel (index labels ``rows``) is a pipeline's send or receive.

    A SendRecv kernel serves both: a stage's send/receive, and all-to-all or gather traffic. The host op
    that launched it tells them apart; a SendRecv or Recv kernel whose launch is in no known op counts as
    point-to-point, any other kernel as a collective.

    Example:
        >>> ev = pd.DataFrame({"name": ["ncclDevKernel_SendRecv", "cudaLaunchKernel"], "launch": [1, None],
        ...                    "tid": [None, 5], "start_us": [20.0, 10.0]})
        >>> host = pd.DataFrame({"kind": ["cpu_op"], "name": ["nccl:all_to_all"], "tid": [5],
        ...                      "start_us": [9.0], "end_us": [12.0]})
        >>> is_point_to_point(ev, host, np.array([0])).tolist()
        [False]
    """
    names = events["name"].reindex(rows).astype(str).to_numpy()
    out = np.array([("SendRecv" in n or "Recv" in n) for n in names], dtype=bool)
    ops = host[(host["kind"] == "cpu_op").to_numpy(dtype=bool)]
    ops = ops[name_matches(ops["name"], r"nccl|c10d|isend|irecv")]
    if ops.empty:
        return out
    for i in np.flatnonzero(out):
        li = events.at[rows[i], "launch"]
        if pd.isna(li) or int(li) not in events.index:
            continue
        at, tid = float(events.at[int(li), "start_us"]), events.at[int(li), "tid"]
        around = ops[(ops["tid"] == tid) & (ops["start_us"] <= at) & (ops["end_us"] >= at)]["name"].astype(str)
        if around.str.contains(P2P_OPS).any():
            continue
        if around.str.contains(_COLLECTIVE_OPS).any():
            out[i] = False
    return out


def late_rank(waits: pd.Series, ranks: list) -> int | None:
    """The rank the others waited for: the one that spent least time waiting in collectives.

    ``waits`` is the time each rank waited (by rank); ranks absent from it did not wait at all.

    Example:
        >>> late_rank(pd.Series({0: 3.5}), [0, 1])
        1
    """
    if len(ranks) < 2:
        return None
    full = waits.reindex(ranks, fill_value=0.0)
    return int(full.idxmin())
