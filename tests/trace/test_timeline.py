"""Tests for asynclab.trace.draw.timeline: lanes, colours, sub-lanes, windows, arrows, aggregation, files."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from asynclab.trace.draw.timeline import KIND_COLORS, Timeline, draw_timeline  # noqa: E402
from asynclab.trace import TraceError, load_trace  # noqa: E402
from tracegen import TraceBuilder, big_trace_events, simple_trace  # noqa: E402

FIX = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def n_bars(tl: Timeline, kind: str) -> int:
    return len(tl.collections[kind].get_paths()) if kind in tl.collections else 0


def bar_extents(tl: Timeline, kind: str) -> list[tuple[float, float]]:
    out = []
    for p in tl.collections[kind].get_paths():
        xs = p.vertices[:, 0]
        out.append((float(xs.min()), float(xs.max())))
    return sorted(out)


def test_small_trace_every_event_is_a_bar():
    t = load_trace(simple_trace().to_dict())
    tl = draw_timeline(t)
    assert isinstance(tl, Timeline)
    assert tl.lanes == ["GPU 0 · stream 7 (default)", "GPU 0 · stream 13", "CPU · main thread"]
    assert [x.get_text() for x in tl.ax.get_yticklabels()] == tl.lanes
    assert (n_bars(tl, "compute"), n_bars(tl, "h2d"), n_bars(tl, "d2h"), n_bars(tl, "launch")) == (3, 1, 1, 5)
    assert tl.unit == "µs"
    assert bar_extents(tl, "compute") == [(13.0, 33.0), (23.0, 38.0), (43.0, 53.0)]
    assert tl.ax.get_xlim()[0] <= 0 < tl.ax.get_xlim()[0] + 1
    legend = [t.get_text() for t in tl.ax.get_legend().get_texts()]
    assert legend[:3] == ["compute kernel", "copy host → GPU", "copy GPU → host"]
    assert "launch (host)" in legend
    face = tl.collections["h2d"].get_facecolor()[0]
    assert np.allclose(face[:3], matplotlib.colors.to_rgb(KIND_COLORS["h2d"]))


def test_draws_into_given_axes():
    fig, (ax1, ax2) = plt.subplots(2, 1)
    tl = draw_timeline(simple_trace().to_dict(), ax=ax2, title="mine")
    assert tl.ax is ax2 and tl.fig is fig
    assert ax2.get_title(loc="left") == "mine"
    assert not ax1.collections


def test_overlapping_events_go_to_sub_lanes_not_dropped():
    b = TraceBuilder()
    b.kernel(0, 10, name="k1")
    b.kernel(5, 10, name="k2")
    b.kernel(7, 2, name="k3")
    b.kernel(20, 5, name="k4")
    tl = draw_timeline(load_trace(b.to_dict()), host=False)
    assert tl.sublanes == {"GPU 0 · stream 7 (default)": 3}
    assert n_bars(tl, "compute") == 4
    # k1 and k4 share the first sub-lane, k2 and k3 the next ones
    tops = sorted({round(float(p.vertices[:, 1].min()), 3) for p in tl.collections["compute"].get_paths()})
    assert len(tops) == 3
    assert "[3 rows]" in tl.ax.get_yticklabels()[0].get_text()


def test_rounding_overlaps_do_not_make_sub_lanes():
    b = TraceBuilder()
    b.kernel(0, 10.0005, name="k1")  # ends 0.5 ns after k2 starts: ns -> µs rounding noise
    b.kernel(10, 5, name="k2")
    tl = draw_timeline(load_trace(b.to_dict()))
    assert tl.sublanes["GPU 0 · stream 7 (default)"] == 1


def test_short_kernels_stay_visible():
    b = TraceBuilder()
    b.kernel(0, 10_000, name="long")
    b.kernel(20_000, 0.01, name="tiny", stream=13)
    tl = draw_timeline(load_trace(b.to_dict()), width_px=1000)
    assert tl.unit == "ms"
    px_ms = (20_000.01 / 1000) / 1000  # one pixel, in ms
    (x0, x1), = [e for e in bar_extents(tl, "compute") if e[0] > 15]
    assert x1 - x0 >= px_ms * 0.99


def test_dense_trace_is_aggregated_and_keeps_rare_kinds():
    d = big_trace_events(100_000, seed=1)
    t = load_trace(d)
    n_gpu = int(t.events["device"].notna().sum())
    tl = draw_timeline(t, width_px=800)
    bars = sum(n_bars(tl, k) for k in tl.collections)
    assert bars < n_gpu / 10  # 20,000 GPU events, 800 pixels
    assert n_bars(tl, "h2d") > 0 and n_bars(tl, "d2h") > 0  # copies among dense kernels still show
    assert tl.n_events == int(t.events["kind"].isin(["compute", "h2d", "d2h", "launch", "cpu_op"]).sum())


def test_time_units_follow_the_span():
    for dur, unit in ((100, "µs"), (50_000, "ms"), (5_000_000, "s")):
        b = TraceBuilder()
        b.kernel(0, dur)
        assert draw_timeline(load_trace(b.to_dict())).unit == unit


def test_window_by_time_starts_at_zero():
    t = load_trace(simple_trace().to_dict())
    tl = draw_timeline(t, start_us=20, end_us=45)
    assert tl.t0_us == 20.0
    assert bar_extents(tl, "compute") == [(0.0, 13.0), (3.0, 18.0), (23.0, 25.0)]
    assert "window" in tl.ax.get_title(loc="left")
    with pytest.raises(TraceError, match="after its end"):
        draw_timeline(t, start_us=50, end_us=10)


def test_window_by_annotation():
    tl = draw_timeline(FIX / "pt24_base_time.json", annotation="backward")
    assert tl.t0_us == 41.0
    assert bar_extents(tl, "compute")[0] == (2.0, 12.0)  # B [43,53)
    rec = draw_timeline(FIX / "recorded" / "h100_overlap.json.gz", annotation="copy_and_compute", occurrence=1)
    one = load_trace(FIX / "recorded" / "h100_overlap.json.gz").window(annotation="copy_and_compute", occurrence=1)
    assert rec.t0_us == one.meta["window"][0] and rec.n_events > 5
    with pytest.raises(TraceError, match="no annotation named"):
        draw_timeline(FIX / "pt24_base_time.json", annotation="nope")


def test_arrows_from_launch_to_gpu_start():
    t = load_trace(simple_trace().to_dict())
    tl = draw_timeline(t, arrows=True)
    segs = tl.collections["arrows"].get_segments()
    assert len(segs) == 5
    starts = sorted((float(s[0][0]), float(s[1][0])) for s in segs)
    assert starts == [(0.0, 3.0), (5.0, 13.0), (8.0, 43.0), (12.0, 23.0), (30.0, 48.0)]
    host_y = tl.ax.get_yticks()[2]
    assert all(abs(s[0][1] - host_y) < 1e-9 for s in segs)
    capped = draw_timeline(t, arrows=True, max_arrows=2)
    assert len(capped.collections["arrows"].get_segments()) == 2
    assert "arrows" not in draw_timeline(t).collections


def test_cuda_graph_arrows_fan_out():
    tl = draw_timeline(FIX / "cuda_graph.json", arrows=True)
    segs = tl.collections["arrows"].get_segments()
    assert len(segs) == 5 and len({float(s[0][0]) for s in segs}) == 1


def test_host_false_and_multi_gpu():
    t = load_trace(FIX / "p2p_2gpu.json.gz")
    tl = draw_timeline(t, host=False)
    assert tl.lanes == ["GPU 0 · stream 7 (default)", "GPU 1 · stream 7 (default)"]
    assert "launch" not in tl.collections
    assert n_bars(tl, "p2p") + n_bars(tl, "d2d") == 2


def test_sync_rows_and_host_sync_calls():
    hidden = draw_timeline(FIX / "cuda_sync_offset.json")
    assert "GPU 0 · host syncs" not in hidden.lanes  # by default: the host lane's synchronize calls show it
    assert n_bars(hidden, "sync") == 2
    tl = draw_timeline(FIX / "cuda_sync_offset.json", host_syncs=True)
    assert n_bars(tl, "sync") == 3
    assert n_bars(tl, "host_sync") == 2  # cudaStreamSynchronize, cudaDeviceSynchronize
    assert "GPU 0 · host syncs" in tl.lanes
    # a sync wait overlapping a kernel goes to a thin strip under the lane, not to a sub-lane
    assert tl.sublanes["GPU 0 · stream 13"] == 1
    kernel_bottom = max(float(p.vertices[:, 1].max()) for p in tl.collections["compute"].get_paths()
                        if p.vertices[:, 0].min() >= 13)
    strip_tops = [float(p.vertices[:, 1].min()) for p in tl.collections["sync"].get_paths()
                  if p.vertices[:, 0].max() < 20]
    assert len(strip_tops) == 2 and min(strip_tops) > kernel_bottom


def test_cpu_only_trace_draws_cpu_ops():
    b = TraceBuilder()
    b.cpu_op(0, 10, "aten::linear")
    b.cpu_op(2, 5, "aten::mm")  # nested: merged on the host lane
    tl = draw_timeline(load_trace(b.to_dict()))
    assert tl.lanes == ["CPU · main thread"]
    assert bar_extents(tl, "cpu_op") == [(0.0, 10.0)]


def test_savefig_png_and_svg(tmp_path):
    tl = draw_timeline(simple_trace().to_dict(), arrows=True)
    png = Path(tl.savefig(tmp_path / "t.png"))
    svg = Path(tl.savefig(tmp_path / "t.svg"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    assert b"<svg" in svg.read_bytes()[:500]
    with pytest.raises(ValueError, match="unsupported output format '.jpg'"):
        tl.savefig(tmp_path / "t.jpg")
    with pytest.raises(ValueError, match="does not exist"):
        tl.savefig(tmp_path / "nope" / "t.png")


def test_empty_window_still_draws():
    t = load_trace(simple_trace().to_dict())
    tl = draw_timeline(t, start_us=33.5, end_us=37.5, host=False)
    assert tl.n_events == 1  # C [23,38) overlaps
    tl2 = draw_timeline(t, start_us=38.5, end_us=42.5, host=False)
    assert tl2.n_events == 0



def test_nested_annotations_stack_and_the_window_annotation_is_not_drawn():
    b = TraceBuilder()
    b.annotation(0, 100, "outer")
    b.annotation(10, 50, "inner")
    b.launch(12, 2, corr=1)
    b.kernel(20, 30, corr=1)
    full = draw_timeline(b.to_dict())
    brackets = full.collections["annotations"]
    heights = sorted({round(float(seg[0][1]), 3) for seg in brackets[: len(brackets) // 3]})
    assert len(heights) == 2  # two levels: the inner bracket does not draw over the outer one
    win = draw_timeline(b.to_dict(), annotation="outer")
    assert len(win.collections["annotations"]) == 3  # one bracket (3 segments): "inner" only


def test_gpu_lanes_with_nothing_to_draw_are_left_out():
    b = TraceBuilder()
    b.launch(0, 2, corr=1)
    b.kernel(5, 10, corr=1)
    b.gpu_annotation(0, 50, "step", stream=13)
    tl = draw_timeline(b.to_dict())
    assert not any("stream 13" in lane for lane in tl.lanes)


def test_legend_lists_only_kinds_drawn_in_the_window():
    b = TraceBuilder()
    b.launch(0, 2, corr=1)
    b.kernel(3, 10, corr=1)
    b.memcpy(13, 5, direction="HtoD")  # starts exactly where the window ends: not in it
    b.memset(1, 2)  # ends exactly where the window starts... and before it
    b.kernel(20, 5, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL", stream=20)
    t = load_trace(b.to_dict())
    tl = draw_timeline(t, start_us=3, end_us=13)
    labels = [x.get_text() for x in tl.ax.get_legend().get_texts()]
    assert "compute kernel" in labels
    assert not any("H2D" in x or "memset" in x or "NCCL" in x for x in labels), labels
    full = [x.get_text() for x in draw_timeline(t).ax.get_legend().get_texts()]
    assert "NCCL kernel" in full and "copy host → GPU" in full
    plt.close("all")


def test_labels_name_the_bars_they_fit():
    from asynclab.trace.pipeline.schedules import simulate_trace

    trace = simulate_trace("1f1b", 2, 4)
    tl = draw_timeline(trace, labels=True)
    texts = sorted(t.get_text() for t in tl.collections["labels"])
    assert texts == sorted(f"{k}{i}" for k in "FB" for i in range(4) for _ in range(2))  # every op, on both GPUs
    assert "labels" not in draw_timeline(trace).collections
    narrow = draw_timeline(simulate_trace("gpipe", 2, 64), labels=True)  # 128 ops a GPU: too narrow for names
    assert len(narrow.collections["labels"]) == 0
    plt.close("all")


def _tiny_beside_long() -> dict:
    """A long kernel, and far from it a 0.1 µs one: at 700 px the short one is a fraction of a pixel."""
    b = TraceBuilder()
    b.launch(0, 2, corr=1)
    b.launch(3, 2, corr=2)
    b.kernel(5, 900, corr=1, name="long")
    b.kernel(2000, 0.1, corr=2, name="tiny")
    return b.to_dict()


def test_short_work_is_widened_into_free_space_and_the_legend_says_so():
    from asynclab.trace.draw.marks import MIN_BAR_PX

    tl = draw_timeline(_tiny_beside_long(), host=False, width_px=700)
    widths = sorted(b - a for a, b in bar_extents(tl, "compute"))
    px = widths[-1] / 900 * 2000.1 / 700  # a pixel in the axis' unit (the long kernel is 900 µs)
    assert widths[0] == pytest.approx(MIN_BAR_PX * px, rel=0.01)
    assert tl.widened == 1
    legend = [t.get_text() for t in tl.ax.get_legend().get_texts()]
    assert f"short work widened to {MIN_BAR_PX:g} px" in legend
    plain = draw_timeline(simple_trace().to_dict())
    assert plain.widened == 0
    assert not any("widened" in t.get_text() for t in plain.ax.get_legend().get_texts())


def test_widening_never_covers_a_neighbour():
    from asynclab.trace.draw.marks import widen

    s, e, w = widen(np.array([0, 0, 0]), np.array([0.0, 1.0, 1.3]), np.array([0.1, 1.2, 5.0]), 2.0)
    assert w.tolist() == [True, True, False]
    assert e[0] <= s[1] + 1e-9 and e[1] <= s[2] + 1e-9  # grew only into the gaps
    assert e[0] == pytest.approx(0.55) and s[0] == pytest.approx(-0.95)  # the gap to a growing neighbour is shared


def test_labels_hide_when_their_bar_becomes_too_narrow():
    from asynclab.trace.pipeline.schedules import simulate_trace

    tl = draw_timeline(simulate_trace("1f1b", 2, 4), labels=True)
    tl.fig.canvas.draw()
    assert all(t.get_visible() for t in tl.collections["labels"])
    left, right = tl.ax.get_xlim()
    tl.ax.set_xlim(left, left + 20 * (right - left))  # as a shared, longer x axis does
    tl.fig.canvas.draw()
    assert not any(t.get_visible() for t in tl.collections["labels"])


def test_pipeline_forwards_and_backwards_are_coloured_apart():
    from asynclab.trace.pipeline.schedules import simulate_trace

    tl = draw_timeline(simulate_trace("zb-h1", 2, 4, t_b=1.0, t_w=1.0), labels=True)
    assert {"forward", "backward", "weight_grad"} <= set(tl.collections) and "compute" not in tl.collections
    legend = [t.get_text() for t in tl.ax.get_legend().get_texts()]
    assert legend == ["forward (F)", "backward (B)", "weight gradient (W)"]
    inks = {t.get_text()[0]: t.get_color() for t in tl.collections["labels"]}
    assert inks["B"] == "white"  # names stay readable on the dark backward bars


def test_callout_points_at_the_named_event():
    tl = draw_timeline(simple_trace().to_dict(), callout=("C", "this one"))
    (ann,) = tl.collections["callouts"]
    assert ann.get_text() == "this one"
    assert ann.xy[0] == pytest.approx((23 + 38) / 2 - 0.0, abs=1.0)  # the middle of kernel C, x from the trace start
    assert tl.ax.get_yticklabels()[1].get_text() == "GPU 0 · stream 13"
    at_time = draw_timeline(simple_trace().to_dict(), callout=(40.0, "here"))
    assert at_time.collections["callouts"][0].xy[0] == pytest.approx(40.0)
    with pytest.raises(ValueError, match="no drawn event"):
        draw_timeline(simple_trace().to_dict(), callout="nothing of that name")


def test_callouts_the_trace_carries_are_drawn_where_their_event_is():
    t = load_trace(simple_trace().to_dict())
    t.meta["callouts"] = [("B", "kernel B"), ("missing", "not in this trace")]
    tl = draw_timeline(t)
    assert [a.get_text() for a in tl.collections["callouts"]] == ["kernel B"]
    assert "callouts" not in draw_timeline(t, start_us=0, end_us=20).collections  # B is outside the window


def test_findings_sit_in_a_strip_above_the_lanes_and_behind_the_work():
    from asynclab.trace.analysis.diagnose import diagnose

    trace = load_trace(FIX / "diagnose" / "launch_bound-bad.json.gz")
    tl = draw_timeline(trace, diagnosis=diagnose(trace))
    bars = min(c.get_zorder() for k, c in tl.collections.items() if k in KIND_COLORS)
    gpu_top = min(tl.ax.get_yticks()[i] - tl.sublanes[lane] / 2 for i, lane in enumerate(tl.lanes) if "GPU" in lane)
    ours = {id(c) for c in tl.collections.values()}
    shading = [c for c in tl.ax.collections if id(c) not in ours and type(c).__name__ == "PolyCollection"]
    assert shading
    for c in shading:
        ys = np.concatenate([p.vertices[:, 1] for p in c.get_paths()])
        if c.get_zorder() >= bars:  # drawn over the bars' level: only in the strip above the GPU lanes
            assert ys.max() <= gpu_top + 1e-9
        else:
            assert c.get_alpha() is not None and c.get_alpha() <= 0.2


def test_the_range_a_window_was_cut_by_is_drawn_when_one_occurrence_was_picked():
    from asynclab.course import reference

    trace = reference.trace(0, "two_streams")
    one = draw_timeline(trace, annotation="copy_and_compute", occurrence=1)
    assert "copy_and_compute" in [t.get_text() for t in one.ax.texts]
    every = draw_timeline(trace, annotation="copy_and_compute")
    assert "copy_and_compute" not in [t.get_text() for t in every.ax.texts]


def test_png_is_sharp_for_a_phone_and_small(tmp_path):
    from PIL import Image

    path = draw_timeline(simple_trace().to_dict()).savefig(tmp_path / "t.png")
    with Image.open(path) as img:
        assert img.size[0] >= 1200 and img.mode == "P"  # 200 dpi, at most 256 colours
    assert Path(path).stat().st_size < 250_000


def test_work_window_covers_the_work_drawn_not_the_events_that_draw_nothing():
    """Issue 62: the profiler's span, a ProfilerStep that runs on idle and the script's Python function stretch the
    trace to 60 ms around 2 ms of work; the work window is what draw_timeline draws: the launches, the kernels and the
    "forward" bracket (host=False: the kernels alone), and the picture of it is filled by its bars."""
    from asynclab.trace.draw.timeline import work_window

    tr = load_trace(FIX / "sparse_work.json")
    start, end, note = work_window(tr)
    assert (start, end) == (36_005.0, 37_930.0)
    assert note.startswith("left out 36.005 ms before the work drawn and 22.070 ms after, where only"), note
    assert work_window(tr, host=False)[:2] == (36_040.0, 37_930.0)
    tl = draw_timeline(tr.window(start, end))
    xs = np.array([x for kind in ("compute", "launch") for x in bar_extents(tl, kind)])
    lo, hi = tl.ax.get_xlim()
    assert (xs.max() - xs.min()) / (hi - lo) > 0.95
    assert work_window(simple_trace().to_dict()) is None and work_window(FIX / "pt24_base_time.json") is None
