"""Pipeline-parallel schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1) simulated op by op, as a Trace."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["SCHEDULES", "Op", "schedule_ops", "simulate", "simulate_trace", "bubble_formula", "ASKED"]

#: The schedules :func:`simulate` knows.
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
#: The audit event (``sys.audit``) each question to the simulator raises, with ``(schedule, p, m, v)``: an exercise
#: checker's audit hook refuses the answer through it while a learner's function runs
#: (:func:`asynclab.grading.refusal.refusing`); the simulator itself keeps no state about it.
ASKED = "asynclab.schedules.asked"


@dataclass(frozen=True)
class Op:
    """One piece of a stage's work: ``kind`` "F" (forward), "B" (backward; for ZB-H1 only the input gradient)
    or "W" (ZB-H1's weight gradient), of micro-batch ``micro`` and model chunk ``chunk``, on ``device``;
    ``start`` and ``end`` in the simulation's time unit."""

    kind: str
    micro: int
    chunk: int
    device: int
    start: float
    end: float

    @property
    def name(self) -> str:
        return f"{self.kind}{self.micro}" + (f".{self.chunk}" if self.chunk else "")


def _check(schedule: str, p: int, m: int, v: int) -> None:
    sys.audit(ASKED, schedule, p, m, v)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {schedule!r}")
    for name, value in (("p (stages)", p), ("m (micro-batches)", m), ("v (chunks per device)", v)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"v (chunks per device) applies to the interleaved schedule only, not {schedule!r}")
    if schedule == "interleaved" and m % p:
        raise ValueError(f"the interleaved schedule needs m (micro-batches) to be a multiple of p (stages): "
                         f"m={m}, p={p}")


def schedule_ops(schedule: str, p: int, m: int, v: int = 1) -> list[list[tuple[str, int, int]]]:
    """The order each device runs its F and B ops in: ``[(kind, micro-batch, chunk), ...]`` per device.

    GPipe: every forward, then every backward. 1F1B (PipeDream-flush): ``p - d - 1`` forwards to warm up,
    then one forward and one backward in turn, then the remaining backwards. Interleaved 1F1B (Megatron-LM):
    the same with ``v`` model chunks per device, in Megatron's order. ZB-H1 keeps 1F1B's order of F and B;
    its W ops are placed by :func:`simulate` into the gaps.

    Example:
        >>> schedule_ops("1f1b", 2, 3)[0]
        [('F', 0, 0), ('F', 1, 0), ('B', 0, 0), ('F', 2, 0), ('B', 1, 0), ('B', 2, 0)]
    """
    _check(schedule, p, m, v)
    out = []
    for d in range(p):
        if schedule == "gpipe":
            out.append([("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)])
            continue
        fwd = [_interleaved_op(k, p, v, forward=True) for k in range(m * v)]
        bwd = [_interleaved_op(k, p, v, forward=False) for k in range(m * v)]
        warm = min(m * v, (p - d - 1) * 2 + (v - 1) * p) if schedule == "interleaved" else min(m, p - d - 1)
        order = [("F", *fwd[k]) for k in range(warm)]
        f, b = warm, 0
        while f < m * v:
            order.append(("F", *fwd[f]))
            f += 1
            order.append(("B", *bwd[b]))
            b += 1
        order += [("B", *bwd[k]) for k in range(b, m * v)]
        out.append(order)
    return out


def _interleaved_op(k: int, p: int, v: int, forward: bool) -> tuple[int, int]:
    """(micro-batch, chunk) of a device's k-th forward (or backward) in Megatron's interleaved order."""
    group = k // (p * v)
    chunk = (k // p) % v
    micro = group * p + k % p
    return micro, chunk if forward else v - 1 - chunk


def _device_orders(schedule: str, p: int, m: int, v: int, times: tuple[float, float, float],
                   one_loop: bool) -> list[list]:
    """Each device's order of F and B ops for :func:`simulate`, its arguments checked (one line each when wrong)."""
    _check(schedule, p, m, v)
    for name, value in zip(("t_f", "t_b", "t_w"), times):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"{name} must be a time of 0 or more, not {value!r}")
    if schedule == "zb-h1" and not times[2] > 0:
        raise ValueError("ZB-H1 splits the backward into B and W: give t_w > 0")
    orders = schedule_ops("1f1b", p, m) if schedule == "zb-h1" else schedule_ops(schedule, p, m, v)
    if not isinstance(one_loop, bool):
        raise ValueError(f"one_loop must be True or False, not {one_loop!r}")
    return [orders[0]] * p if one_loop else orders


def simulate(schedule: str, p: int, m: int, t_f: float = 1.0, t_b: float = 2.0, t_w: float = 0.0,
             v: int = 1, one_loop: bool = False) -> list[Op]:
    """Run a pipeline schedule op by op and return every op with its start and end.

    ``p`` stages on ``p`` devices, ``m`` micro-batches; one stage's forward of one micro-batch takes ``t_f``
    and its backward ``t_b`` (for ZB-H1, ``t_b`` is the input gradient and ``t_w`` the weight gradient,
    which the others count inside ``t_b``). With ``interleaved``, each device holds ``v`` chunks of the
    model, each taking ``t_f / v`` and ``t_b / v``. An op starts when its device is free and its input is
    ready: a forward needs the previous stage's forward of that micro-batch, a backward the next stage's
    backward (the last stage: its own forward), a weight gradient its own backward. Sends between stages
    take no time. ZB-H1 runs 1F1B's F and B ops in 1F1B's order and puts each W into the first gap where it
    delays no F or B (else at the end). With ``t_w == t_f``, the Zero Bubble paper's setting, its idle time is
    the paper's (p-1)(t_f+t_b-t_w); with a shorter W it can be lower, since this placement does not hold W's
    back to 1F1B's memory bound as the paper's handcrafted ZB-H1 does.

    ``one_loop=True`` gives every device the first stage's order: what each GPU's stream gets when one host
    thread issues every stage's work in a single loop (each micro-batch's forward through all stages, then a
    backward through all stages), since a stream runs its work in the order it was issued. GPipe is the same
    either way; 1F1B needs a different order on each stage, and without it the stages take turns.

    Example:
        >>> ops = simulate("gpipe", p=2, m=2)
        >>> max(op.end for op in ops)  # (m + p - 1) x (t_f + t_b)
        9.0
        >>> max(op.end for op in simulate("1f1b", p=2, m=3, one_loop=True))  # 1F1B: 12.0; one stage at a time: 18.0
        15.0
    """
    orders = _device_orders(schedule, p, m, v, (t_f, t_b, t_w), one_loop)
    stages = p * v
    cost = {"F": t_f / v, "B": t_b / v, "W": t_w}
    done: dict[tuple[str, int, int], float] = {}  # (kind, micro, stage) -> end
    nxt, free = [0] * p, [0.0] * p
    pending_w: list[list[int]] = [[] for _ in range(p)]  # ZB-H1: micro-batches whose W is still to run
    ops: list[Op] = []
    total = sum(len(o) for o in orders) + (p * m if schedule == "zb-h1" else 0)

    def deps(kind: str, micro: int, stage: int) -> list[tuple[str, int, int]]:
        if kind == "F":
            return [] if stage == 0 else [("F", micro, stage - 1)]
        if kind == "B":
            return [("F", micro, stage)] + ([] if stage == stages - 1 else [("B", micro, stage + 1)])
        return [("B", micro, stage)]

    def ready(kind: str, micro: int, stage: int) -> tuple[float, bool]:
        """When the op's inputs are ready, and whether that is known (else a lower bound)."""
        times = [(done[k], True) if k in done else (free[k[2] % p] + cost[k[0]], False)
                 for k in deps(kind, micro, stage)]
        return max([0.0] + [t for t, _ in times]), all(known for _, known in times)

    while len(ops) < total:
        for d in sorted(range(p), key=lambda x: free[x]):  # the device that is free first decides first
            main = orders[d][nxt[d]] if nxt[d] < len(orders[d]) else None
            if main is None and not pending_w[d]:
                continue
            t, known = ready(main[0], main[1], main[2] * p + d) if main else (float("inf"), True)
            if main is not None and known and t <= free[d]:
                kind, micro, chunk, start = *main, free[d]
            elif pending_w[d] and free[d] + t_w <= t:  # a W that delays no F or B
                kind, micro, chunk, start = "W", pending_w[d][0], 0, free[d]
            elif main is not None and known:
                kind, micro, chunk, start = *main, t
            else:
                continue  # waits for another device to decide first
            if kind == "W":
                pending_w[d].remove(micro)
            else:
                nxt[d] += 1
            if schedule == "zb-h1" and kind == "B":
                pending_w[d].append(micro)
            free[d] = start + cost[kind]
            done[(kind, micro, chunk * p + d)] = free[d]
            ops.append(Op(kind, micro, chunk, d, start, free[d]))
            break
        else:  # pragma: no cover - every schedule here is deadlock-free
            raise RuntimeError(f"the {schedule} schedule is stuck: check its order")
    return ops


def simulate_trace(schedule: str, p: int, m: int, t_f: float = 1.0, t_b: float = 2.0, t_w: float = 0.0,
                   v: int = 1, unit_us: float = 1000.0, one_loop: bool = False) -> Any:
    """:func:`simulate` as a :class:`asynclab.trace.Trace` (one GPU per stage, times x ``unit_us`` µs), for
    ``draw_timeline`` (``labels=True`` writes each op's name, "F3", "B3", "W3", "F3.1" for chunk 1) and
    ``bubble_fraction``.

    Example:
        >>> from asynclab.trace.analysis.metrics import bubble_fraction
        >>> round(bubble_fraction(simulate_trace("gpipe", p=4, m=8)).mean, 4)  # (p-1)/(m+p-1)
        0.2727
    """
    from asynclab.trace import load_trace

    events = [{"ph": "X", "cat": "kernel", "name": op.name,
               "pid": op.device, "tid": 7, "ts": op.start * unit_us, "dur": (op.end - op.start) * unit_us,
               "args": {"device": op.device, "stream": 7}} for op in simulate(schedule, p, m, t_f, t_b, t_w, v, one_loop)]
    trace = load_trace({"traceEvents": events})
    trace.meta["kind_by_name"] = {"F": "forward", "B": "backward", "W": "weight_grad"}  # coloured apart when drawn
    trace.source = (f"{schedule} p={p} m={m}" + (f" v={v}" if schedule == "interleaved" else "")
                    + (", one loop" if one_loop else ""))
    return trace


def bubble_formula(schedule: str, p: int, m: int, v: int = 1, t_f: float = 1.0, t_b: float = 2.0,
                   t_w: float = 0.0) -> dict[str, float]:
    """The closed forms of the idle ("bubble") time: ``{"of_total", "of_ideal"}``.

    GPipe and 1F1B: (p-1)/(m+p-1) of the step, (p-1)/m of the ideal time (Megatron's way of saying it).
    Interleaved: (p-1)/(v·m) of the ideal time. ZB-H1 (Zero Bubble, Qi et al. 2024): the idle time per device
    shrinks from 1F1B's (p-1)(t_f+t_b+t_w) to (p-1)(t_f+t_b-t_w) (here t_b is the input gradient alone), as
    derived there for t_w = t_f.

    Example:
        >>> bubble_formula("gpipe", p=2, m=4)["of_total"]
        0.2
    """
    _check(schedule, p, m, v)
    work = m * (t_f + t_b + t_w)
    if schedule in ("gpipe", "1f1b"):
        idle = (p - 1) * (t_f + t_b + t_w)
    elif schedule == "interleaved":
        idle = (p - 1) * (t_f + t_b) / v
    else:
        idle = (p - 1) * (t_f + t_b - t_w)
    return {"of_total": idle / (work + idle), "of_ideal": idle / work}
