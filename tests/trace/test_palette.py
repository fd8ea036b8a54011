"""The timelines' palette: every pair of legend colours in each lesson figure looks different, to every reader."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from asynclab.course import reference  # noqa: E402
from asynclab.trace import load_trace  # noqa: E402
from asynclab.trace.analysis.diagnose import diagnose  # noqa: E402
from asynclab.trace.draw.palette import FINDING_COLORS, KIND_COLORS, closest_pair, lch, over_white  # noqa: E402
from asynclab.trace.pipeline.schedules import simulate_trace  # noqa: E402
from asynclab.trace.draw.timeline import draw_timeline  # noqa: E402

#: CIE76 ΔE that every two legend colours of one figure keep at least: for normal vision, and as a reader
#: with deuteranopia sees them (Machado et al. 2009).
MIN_DELTA_E = 20.0
MIN_DELTA_E_DEUTERANOPIA = 10.0
#: Two colours of one hue (within this many degrees, both with chroma over 20) read as "the same colour, lighter"
#: unless their lightness differs by at least MIN_LIGHTNESS_STEP: two reds, an orange and a peach.
SAME_HUE_DEG = 20.0
MIN_LIGHTNESS_STEP = 25.0


def hue_clash(colors: dict) -> tuple[float, str, str] | None:
    """The pair of one hue whose lightness differs least, if it differs by less than MIN_LIGHTNESS_STEP."""
    worst = None
    names = list(colors)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (la, ca, ha), (lb, cb, hb) = lch(colors[a]), lch(colors[b])
            dh = abs((ha - hb + 180) % 360 - 180)
            if ca > 20 and cb > 20 and dh <= SAME_HUE_DEG and abs(la - lb) < MIN_LIGHTNESS_STEP:
                if worst is None or abs(la - lb) < worst[0]:
                    worst = (abs(la - lb), a, b)
    return worst


def _ref(lesson, name, **kw):
    return lambda: (reference.trace(lesson, name), kw)


def _window(lesson, name, annotation, before_us=0.0, length_us=None, occurrence=None, **kw):
    def make():
        tr = reference.trace(lesson, name)
        start, end = tr.annotation_range(annotation, occurrence=occurrence) if occurrence else \
            tr.window(annotation=annotation).meta["window"]
        return tr, {"start_us": start - before_us, "end_us": start + length_us if length_us else end, **kw}
    return make


def _sim(schedule, p, m, **kw):
    return lambda: (simulate_trace(schedule, p, m, **kw), {"labels": True})


def _diagnosed(lesson, name, annotation):
    def make():
        tr = reference.trace(lesson, name)
        return tr, {"annotation": annotation, "diagnosis": diagnose(tr)}
    return make


def _ranks(lesson, names, step):
    def make():
        from asynclab.trace.read.ranks import step_window
        tr = load_trace([reference.trace_path(lesson, n) for n in names])
        return step_window(tr, step), {"host": False}
    return make


#: Every timeline figure the lessons draw, panel by panel, as the notebooks draw them (notebooks/NN_*.ipynb).
FIGURES = {
    "00_reading_a_timeline": [_ref(0, "two_streams", annotation="copy_and_compute", occurrence=1, arrows=True)],
    "01_host_runs_ahead": [_ref(1, "host_runs_ahead", arrows=True)],
    "01_launch_overhead": [_ref(1, "launch_overhead", annotation=a, arrows=True)
                           for a in ("eager: 50 x add_", "graph replay: 50 x add_")],
    "02_timer_windows": [_ref(2, "timers", arrows=True)],
    "02_sync_every_iteration": [_window(2, "sync_every_iteration", a, length_us=600)
                                for a in ("sync every call", "one sync at the end")],
    "03_one_stream": [_ref(3, "branches", annotation="one stream")],
    "03_two_streams": [_ref(3, "branches", annotation="two streams")],
    "03_missing_wait": [_ref(3, "missing_wait", annotation=a) for a in ("no wait", "wait_stream")],
    "03_spin_kernels": [_ref(3, "spin_kernels")],
    "03_matmuls": [_ref(3, "matmuls", annotation=a) for a in ("big, 2 streams", "tiny, 8 streams")],
    "03_tail_fill": [_ref(3, "tail_fill")],
    "03_parallel": [_ref(3, "parallel", annotation=a) for a in ("small: Parallel", "big: Parallel")],
    "03_priority": [_ref(3, "priority")],
    "03_cuda_graphs": [_ref(3, "graphs", annotation=a) for a in ("tiny: eager", "tiny: graph of Parallel",
                                                                "MobileNetV2: eager", "MobileNetV2: graph")],
    "04_event_api": [_ref(4, "event_api", annotation="the event API")],
    "04_race": [_ref(4, "race", annotation=a) for a in ("no wait", "wait_event", "synchronize")],
    "04_allocator_reuse": [_ref(4, "allocator_reuse", annotation=a) for a in ("nothing", "record_stream")],
    "04_cross_device": [_ref(4, "cell_cross_device", annotation=a) for a in ("no wait", "wait_event")],
    "04_who_waited": [_ref(4, "cell_who_waited", annotation="five streams", arrows=True)],
    "05_bidirectional": [_ref(5, "bidirectional", annotation="H2D and D2H at once")],
    "05_non_blocking": [_ref(5, "non_blocking", annotation=a) for a in (
        "pageable, non_blocking=False", "pageable, non_blocking=True", "pinned, non_blocking=False",
        "pinned, non_blocking=True")],
    "05_pipeline_pinned": [_ref(5, "pipeline_pinned", annotation="pinned, overlapped")],
    "05_pipeline_pageable": [_ref(5, "pipeline_pageable", annotation="pageable, overlapped")],
    "05_copy_streams": [_ref(5, "copy_streams", host=False)],
    "05_early_read": [_ref(5, "early_read")],
    "05_source_mutation": [_ref(5, "source_mutation", annotation=a) for a in ("unfixed", "fixed")],
    "05_dataloader": [_window(5, f"dataloader_{n}", "step", occurrence=8, length_us=12_000)
                      for n in ("plain", "pinned")],
    "06_fully_parallel": [_ref(6, "cell_stream_setups", annotation=f"send {a}, recv {b}", host=False)
                          for a, b in (("default", "default"), ("side", "default"), ("default", "side"), ("side", "side"))],
    "06_bandwidth": [_ref(6, "cell_p2p_bandwidth")],
    "07_naive": [_ref(7, "naive", annotation="naive step")],
    "07_asker_detached": [_ref(7, "cell_asker_his_size", annotation="m=4"),
                          _ref(7, "cell_asker_gpu_bound", annotation="m=4", host=False)],
    "07_asker": [_ref(7, "asker", annotation=a, host=False) for a in ("chunk_by_chunk", "forwards_first")],
    "07_gpipe_measured_vs_simulated": [_ref(7, "gpipe_m4", annotation="gpipe m=4", host=False), _sim("gpipe", 2, 4)],
    "07_1f1b_orders": [_sim("1f1b", 2, 8), _sim("1f1b", 2, 8, one_loop=True)],
    "07_schedules": [_sim("gpipe", 4, 8), _sim("1f1b", 4, 8), _sim("interleaved", 4, 8, v=2),
                     _sim("zb-h1", 4, 8, t_b=1.0, t_w=1.0)],
    "07_torch_1f1b": [_ranks(7, ["pipelining_1f1b_rank0", "pipelining_1f1b_rank1"], "ProfilerStep#3")],
    "08_diagnosed_step": [_diagnosed(8, "stage0", "ProfilerStep#2")],
    "08_fixed_step": [_diagnosed(8, "stage3", "ProfilerStep#2")],
}


def legend_colors(fig) -> dict[str, tuple]:
    """Label -> colour (RGBA, as shown over white) of every filled legend entry in the figure's axes."""
    out = {}
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        for handle, text in zip(leg.legend_handles, leg.get_texts()):
            if not hasattr(handle, "get_facecolor") or type(handle).__name__ == "Line2D":
                continue
            rgba = tuple(handle.get_facecolor())
            if rgba[3] == 0:  # a note (e.g. "short work widened to 4 px"), not a colour
                continue
            out[text.get_text().rsplit(" ", 1)[0] if text.get_text().endswith("%") else text.get_text()] = rgba
    return out


def draw_figure(panels):
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 3.3 * len(panels)), squeeze=False)
    for ax, make in zip(axes[:, 0], panels):
        trace, kw = make()
        draw_timeline(trace, ax=ax, **kw)
    return fig


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_legend_colours_of_each_lesson_figure_are_far_apart(name):
    fig = draw_figure(FIGURES[name])
    colors = legend_colors(fig)
    assert len(colors) >= 1, name
    d, a, b = closest_pair(colors)
    assert d >= MIN_DELTA_E, f"{name}: {a!r} and {b!r} are ΔE {d:.1f} apart"
    d, a, b = closest_pair(colors, vision="deuteranopia")
    assert d >= MIN_DELTA_E_DEUTERANOPIA, f"{name}, seen with deuteranopia: {a!r} and {b!r} are ΔE {d:.1f} apart"
    assert hue_clash(colors) is None, f"{name}: one hue, lightness too close: {hue_clash(colors)}"


def test_the_checks_catch_the_pairs_readers_could_not_tell_apart():
    """The legend pairs of the old palette that readers confused fail these checks."""
    grey = (0.498, 0.498, 0.498, 0.3)  # the old alloc_churn shading beside the old CPU op grey
    assert closest_pair({"CPU op": "#d0d0d0", "alloc_churn": grey})[0] < MIN_DELTA_E
    assert hue_clash({"GPU waits": "#d62728", "host waits": "#e8877f"}) is not None
    assert hue_clash({"launch_bound": over_white((1.0, 0.498, 0.055), 0.3), "copy host → GPU": "#f28e2b"}) is not None


def test_every_kind_and_finding_has_a_colour_of_its_own():
    kinds = {k: v for k, v in KIND_COLORS.items() if k != "p2p"}  # P2P is drawn as D2D
    assert len(set(kinds.values())) == len(kinds)
    assert len(set(FINDING_COLORS.values())) == len(FINDING_COLORS)
    assert not set(kinds.values()) & set(FINDING_COLORS.values())
    assert KIND_COLORS["forward"] != KIND_COLORS["backward"]
