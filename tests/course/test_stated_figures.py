"""The figures a lesson's prose states from a recording are the recording's: each is made from its lesson's reference
(``results.json``, recorded with scripts/record_extras.py) and must appear in the notebook's markdown as written.
Re-record a probe and this test names every sentence that now states an old number."""
import json
from pathlib import Path

import pytest

from asynclab.course import reference

ROOT = Path(__file__).resolve().parents[2]


def _ms(us: float) -> str:
    return f"{us / 1e3:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def _markdown(notebook: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _stated() -> list[tuple[str, str, str]]:
    """(notebook, probe, the text its figure must appear as)."""
    a = reference.results("01")
    rb, qm = a["run_ahead_bound"], a["queued_memory"]
    t = reference.results("02")["event_pair_gaps"]
    s = reference.results("03")
    p, g = s["priority_beside"]["beside"], s["gemm_grid"]
    e = reference.results("04")
    ec, bs = e["empty_cache_wait"], e["blocking_sync_cpu"]
    pa = reference.results("05")["pageable_async_return"]
    small = [t for mib, t in zip(pa["sizes_mib"], pa["returned_ms"]) if mib <= 2]
    big = [t for mib, t in zip(pa["sizes_mib"], pa["returned_ms"]) if mib >= 4]
    m = reference.results("06")
    c, race = m["cpu_route_parts"], m["producer_race"]
    return [
        ("01_async_dispatch", "run_ahead_bound", f"({rb['queued']:,} on an NVIDIA H200"),
        ("01_async_dispatch", "queued_memory", f"{qm['temporaries']} temporaries of {qm['mib_each']} MiB each"),
        ("01_async_dispatch", "queued_memory", f"grew by only {qm['peak_growth_mib']:.0f} MiB"),
        ("02_timing", "event_pair_gaps", f"a pair read {t['idle_add_us']:.1f} µs on an idle GPU"),
        ("02_timing", "event_pair_gaps", f"it read {t['queued_add_us']:.1f} µs"),
        ("02_timing", "event_pair_gaps", f"read {t['idle_mm_us'] - t['queued_mm_us']:.0f} µs more than the queued one"),
        ("03_streams", "priority_beside", f"ended {_ms(p['product']['normal'])} after its launch at normal priority"),
        ("03_streams", "priority_beside", f"and {_ms(p['product']['high'])} at high priority"),
        ("03_streams", "priority_beside", f"it ended {_ms(p['elementwise']['normal'])} (normal) against "
                                          f"{_ms(p['elementwise']['high'])} (high)"),
        ("03_streams", "gemm_grid", f"a grid of {g['kernels']['8192']['blocks']} blocks on the card's {g['sms']} SMs"),
        ("04_events", "empty_cache_wait", f"`empty_cache()` took {ec['cached_ms']:.1f} ms with 1 GiB cached"),
        ("04_events", "empty_cache_wait", f"and {ec['empty_ms']:.2f} ms with nothing cached"),
        ("04_events", "blocking_sync_cpu", f"used {bs['default_cpu_ms']:.1f} ms of CPU with the default event, and "
                                           f"{bs['blocking_cpu_ms']:.1f} ms with `Event(blocking=True)`"),
        ("05_copy_overlap", "pageable_async_return", f"returned in {min(small):.2f}–{max(small):.2f} ms up to 2 MiB"),
        ("05_copy_overlap", "pageable_async_return", f"({big[0]:.1f} ms at 4 MiB)"),
        ("06_multi_gpu_p2p", "cpu_route_parts", f"the whole line took {c['whole_ms']:.0f} ms"),
        ("06_multi_gpu_p2p", "cpu_route_parts", f"`src0.cpu()` alone {c['cpu_fresh_ms']:.0f} ms"),
        ("06_multi_gpu_p2p", "cpu_route_parts", f"already existed {c['d2h_reused_pageable_ms']:.0f} ms"),
        ("06_multi_gpu_p2p", "cpu_route_parts", f"to GPU 1 {c['h2d_pageable_ms']:.0f} ms"),
        ("06_multi_gpu_p2p", "producer_race", f"copied {race['wrong_without_wait']:,} of {race['elements']:,} elements wrong"),
    ]


@pytest.mark.parametrize("notebook, probe, says", _stated(), ids=lambda v: v if len(v) < 40 else v[:40])
def test_the_lesson_states_the_recorded_figure(notebook, probe, says):
    assert says in _markdown(notebook), f"{notebook} should say {says!r} (from {probe} in its reference)"


def test_each_probe_names_its_card():
    for lesson, probe in [("01", "run_ahead_bound"), ("01", "queued_memory"), ("02", "event_pair_gaps"),
                          ("04", "empty_cache_wait"), ("04", "blocking_sync_cpu"), ("05", "pageable_async_return"),
                          ("03", "priority_beside"), ("03", "gemm_grid"), ("06", "cpu_route_parts"),
                          ("06", "producer_race")]:
        assert "NVIDIA H200" in reference.results(lesson)[probe]["recorded_on"]


def test_a_changed_figure_is_caught():
    assert f"copied 1 of {2 ** 24:,} elements wrong" not in _markdown("06_multi_gpu_p2p")
