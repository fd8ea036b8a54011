"""The lessons' experiments on the simulated H100 against their recorded references (a fast subset of
docs/predicted.md): what runs does run, what cannot says why, every claim gets the reference's PASS or DIFFERS, and
every headline figure is within 25% of the recorded one; a miss is an xfail that says which figure and why."""
from __future__ import annotations

from pathlib import Path

import pytest

from asynclab.course import misses, predicted

#: The experiments this test runs, per lesson: every one the simulation runs in seconds, and those it refuses.
#: Left out: lesson 01's d2l_benchmark (its claims time numpy on this machine's own CPU), and lesson 07's gpipe (most
#: of a minute; scripts/predicted_table.py runs it).
FAST = {
    "01": ["host_runs_ahead", "launch_overhead", "overhead_bound", "hidden_syncs", "sync_debug_blind_spots",
           "async_error", "cpu_is_synchronous"],
    "02": ["warmup_cost", "timers_side_by_side", "spread", "sync_every_iteration", "synchronize_scope",
           "event_pitfalls"],
    "03": ["branches", "missing_wait", "spin_kernels", "matmuls", "parallel_module", "cuda_graphs", "tail_effect",
           "stream_pool"],
    "04": ["event_api", "race", "allocator_reuse", "event_timer_modes", "sanitizer"],
    "05": ["bandwidth", "bidirectional", "non_blocking", "pageable_sizes", "pin_cost", "pipeline", "copy_streams",
           "early_read", "source_mutation", "dataloader"],
    "06": ["latency", "matrix"],
    "07": ["one_stage", "naive", "asker", "memory", "torch_pipelining", "work_wait"],
    "08": ["fix_one_at_a_time"],
}
#: The experiments that cannot run on the simulated GPU, and a word of the reason they must give.
CANNOT = {("01", "async_error"): "subprocess",
          ("01", "cpu_is_synchronous"): "CPU experiment", ("04", "sanitizer"): "subprocess",
          ("07", "torch_pipelining"): "subprocess", ("07", "work_wait"): "subprocess"}

#: Figures and claims the prediction misses, and why (asynclab.course.misses, which docs/predicted.md quotes).
MISSES, CLAIM_MISSES = misses.FIGURE_MISSES, misses.CLAIM_MISSES

_CACHE: dict[str, dict] = {}


def predictions(lesson: str) -> dict:
    """The lesson's fast experiments on the simulated H100, run once per session."""
    if lesson not in _CACHE:
        _CACHE[lesson] = predicted.predict(lesson, FAST[lesson])
    return _CACHE[lesson]


def _cases(kind: str) -> list:
    out = []
    for lesson, keys in FAST.items():
        if kind == "figures":
            for key, path in predicted.HEADLINE_FIGURES[lesson]:
                if key in keys and (lesson, key) not in CANNOT:
                    name = (lesson, key, ".".join(map(str, path)))
                    marks = [pytest.mark.xfail(strict=True, reason=MISSES[name])] if name in MISSES else []
                    out.append(pytest.param(*name, marks=marks, id="-".join(name)))
        else:
            for claim in predicted.CLAIMS:
                if claim.lesson == lesson and claim.experiment in keys and (lesson, claim.experiment) not in CANNOT:
                    name = (lesson, claim.experiment, claim.statement)
                    marks = [pytest.mark.xfail(strict=True, reason=CLAIM_MISSES[name])] if name in CLAIM_MISSES else []
                    out.append(pytest.param(*name, marks=marks, id=f"{lesson}-{claim.experiment}-{claim.statement[:30]}"))
    return out


@pytest.mark.parametrize("lesson", sorted(FAST))
def test_the_runnable_experiments_run_and_the_others_say_why(lesson):
    preds = predictions(lesson)
    for key in FAST[lesson]:
        pred = preds[key]
        if (lesson, key) in CANNOT:
            assert not pred.ran and CANNOT[lesson, key] in pred.limit, (key, pred.limit)
        else:
            assert pred.ran and isinstance(pred.results, dict), (key, pred.limit)
            assert pred.label == "simulated H100 (predicted)"


@pytest.mark.parametrize("lesson, experiment, statement", _cases("claims"))
def test_each_claim_gets_the_references_verdict(lesson, experiment, statement):
    row = next(r for r in predicted.claim_rows(lesson, predictions(lesson))
               if r["experiment"] == experiment and r["claim"] == statement)
    assert row["recorded"] in ("PASS", "DIFFERS")
    assert row["predicted"] == row["recorded"], row


@pytest.mark.parametrize("lesson, experiment, figure", _cases("figures"))
def test_each_headline_figure_is_within_25_percent(lesson, experiment, figure):
    row = next(r for r in predicted.figure_rows(lesson, predictions(lesson))
               if r["experiment"] == experiment and r["figure"] == figure)
    assert row["recorded"] is not None and row["predicted"] is not None, row
    low, high = misses.TARGET
    assert low <= row["ratio"] <= high, f"{figure}: predicted {row['predicted']:.4g}, recorded {row['recorded']:.4g}"


DOC = Path(__file__).parents[2] / "docs" / "predicted.md"


def _doc_rows() -> list[dict]:
    """The rows of the book's table (docs/predicted.md), as figure_rows and claim_rows give them."""
    lesson, rows = None, []
    for line in DOC.read_text().splitlines():
        if line.startswith("## Lesson "):
            lesson = line.split()[2].rstrip(":")
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) != 5 or cells[0] == "experiment":
            continue
        if cells[4] in ("yes", "no"):
            rows.append({"lesson": lesson, "experiment": cells[0], "claim": cells[1], "recorded": cells[2],
                         "predicted": cells[3]})
        else:
            rows.append({"lesson": lesson, "experiment": cells[0], "figure": cells[1],
                         "ratio": None if cells[4] == "—" else float(cells[4])})
    return rows


def test_every_miss_in_the_books_table_says_why():
    """Each figure and claim of docs/predicted.md that misses has its reason (asynclab.course.misses), printed under its
    lesson's tables; and each reason names something that still misses there."""
    rows = _doc_rows()
    missed = misses.misses(rows)
    assert missed and all(why for _, why in missed), [what for what, why in missed if not why]
    text = DOC.read_text()
    assert all(f"- {what}: {why}" in text for what, why in missed)
    still = {(r["lesson"], r["experiment"], r.get("figure", r.get("claim"))) for r in rows if misses.misses([r])}
    assert set(misses.FIGURE_MISSES) | set(misses.CLAIM_MISSES) <= still, (set(misses.FIGURE_MISSES) | set(misses.CLAIM_MISSES)) - still
