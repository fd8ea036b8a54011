"""Tests for asynclab.trace.pipeline.schedules: each simulated schedule against its closed form, and drawn as a Trace."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from asynclab.trace.analysis.metrics import bubble_fraction  # noqa: E402
from asynclab.trace.pipeline.schedules import bubble_formula, schedule_ops, simulate, simulate_trace  # noqa: E402
from asynclab.trace.draw.timeline import draw_timeline  # noqa: E402

SHAPES = [(2, 1), (2, 4), (4, 8), (3, 9), (4, 32), (8, 16)]


def idle_of_ideal(ops, work_per_device):
    return (max(op.end for op in ops) - work_per_device) / work_per_device


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", SHAPES)
def test_gpipe_and_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(schedule, p, m):
    t_f, t_b = 1.0, 2.0
    ops = simulate(schedule, p, m, t_f, t_b)
    assert max(op.end for op in ops) == pytest.approx((m + p - 1) * (t_f + t_b))
    assert bubble_fraction(simulate_trace(schedule, p, m, t_f, t_b)).mean == pytest.approx((p - 1) / (m + p - 1))
    assert bubble_formula(schedule, p, m)["of_total"] == pytest.approx((p - 1) / (m + p - 1))
    assert bubble_formula(schedule, p, m)["of_ideal"] == pytest.approx((p - 1) / m)  # Megatron's way


@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (3, 9), (8, 16), (4, 32)])
def test_interleaved_bubble_is_p_minus_1_over_v_m_of_ideal(p, m, v):
    t_f, t_b = 1.0, 2.0
    ops = simulate("interleaved", p, m, t_f, t_b, v=v)
    assert idle_of_ideal(ops, m * (t_f + t_b)) == pytest.approx((p - 1) / (v * m))
    assert len(ops) == 2 * p * m * v and {op.chunk for op in ops} == set(range(v))


@pytest.mark.parametrize("t_b", [1.0, 2.0])
@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (3, 9), (8, 16)])
def test_zb_h1_cuts_the_bubble_as_the_zero_bubble_paper_derives(p, m, t_b):
    t_f = t_w = 1.0
    ops = simulate("zb-h1", p, m, t_f, t_b, t_w)
    idle = max(op.end for op in ops) - m * (t_f + t_b + t_w)
    assert idle == pytest.approx((p - 1) * (t_f + t_b - t_w))
    one_f_one_b = max(op.end for op in simulate("1f1b", p, m, t_f, t_b + t_w)) - m * (t_f + t_b + t_w)
    assert one_f_one_b == pytest.approx((p - 1) * (t_f + t_b + t_w)) and idle < one_f_one_b


def test_every_op_respects_its_dependencies():
    for schedule, kw in [("gpipe", {}), ("1f1b", {}), ("interleaved", {"v": 2}), ("zb-h1", {"t_w": 1.0}),
                         ("1f1b", {"one_loop": True}), ("interleaved", {"v": 2, "one_loop": True})]:
        p, m = 4, 8
        ops = simulate(schedule, p, m, **kw)
        v = kw.get("v", 1)
        end = {(op.kind, op.micro, op.chunk * p + op.device): op.end for op in ops}
        start = {(op.kind, op.micro, op.chunk * p + op.device): op.start for op in ops}
        for (kind, micro, stage), s in start.items():
            if kind == "F" and stage > 0:
                assert s >= end[("F", micro, stage - 1)] - 1e-9
            if kind == "B":
                assert s >= end[("F", micro, stage)] - 1e-9
                if stage < p * v - 1:
                    assert s >= end[("B", micro, stage + 1)] - 1e-9
            if kind == "W":
                assert s >= end[("B", micro, stage)] - 1e-9
        for d in range(p):  # one op at a time per device
            mine = sorted((op.start, op.end) for op in ops if op.device == d)
            assert all(a[1] <= b[0] + 1e-9 for a, b in zip(mine, mine[1:]))


def test_1f1b_order_and_trace_drawing():
    assert schedule_ops("1f1b", 2, 3)[1] == [("F", 0, 0), ("B", 0, 0), ("F", 1, 0), ("B", 1, 0), ("F", 2, 0),
                                               ("B", 2, 0)]
    trace = simulate_trace("interleaved", 4, 8, v=2)
    assert trace.devices == [0, 1, 2, 3] and "interleaved p=4 m=8 v=2" in repr(trace)
    tl = draw_timeline(trace)
    assert tl.lanes == [f"GPU {d} · stream 7 (default)" for d in range(4)]
    plt.close("all")


def test_one_loop_runs_every_stage_in_the_first_stages_order():
    # p=2, m=3, t_f=1, t_b=2, by hand. GPU 0: F0 [0,1] F1 [1,2]; GPU 1: F0 [1,2] F1 [2,3] B0 [3,5];
    # GPU 0: B0 [5,7] F2 [7,8]; GPU 1: F2 [8,9] B1 [9,11]; GPU 0: B1 [11,13]; GPU 1: B2 [11,13]; GPU 0: B2 [13,15]
    ops = simulate("1f1b", 2, 3, one_loop=True)
    assert max(op.end for op in ops) == 15.0
    assert [op.name for op in sorted(ops, key=lambda o: o.start) if op.device == 1] == ["F0", "F1", "B0", "F2", "B1", "B2"]
    # GPipe issues one order to every stage anyway; 1F1B's own orders are faster than one loop's
    assert simulate("gpipe", 3, 6, one_loop=True) == simulate("gpipe", 3, 6)
    for p, m in [(2, 8), (4, 8), (4, 16)]:
        assert max(o.end for o in simulate("1f1b", p, m, one_loop=True)) > max(o.end for o in simulate("1f1b", p, m))
    assert "one loop" in simulate_trace("1f1b", 2, 3, one_loop=True).source
    with pytest.raises(ValueError, match="one_loop must be True or False"):
        simulate("1f1b", 2, 3, one_loop="yes")


@pytest.mark.parametrize("args,needle", [
    (("pipedream", 2, 4), "schedule must be one of"),
    (("gpipe", 0, 4), "p (stages) must be a positive integer"),
    (("gpipe", 2, 2.5), "m (micro-batches) must be a positive integer"),
    (("interleaved", 4, 6), "multiple of p"),
])
def test_bad_arguments_say_what_is_wrong(args, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        simulate(*args)
    with pytest.raises(ValueError, match="give t_w > 0"):
        simulate("zb-h1", 2, 4)
    with pytest.raises(ValueError, match="interleaved schedule only"):
        simulate("gpipe", 2, 4, v=2)
