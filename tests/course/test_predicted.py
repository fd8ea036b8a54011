"""The predicted table (docs/predicted.md, docs/predicted.json, written by scripts/predicted_table.py from the notebooks'
cells run without a GPU) against the recordings: every miss has its reason and every reason a miss; the table is
current (a fast subset of cells run again gives the same rows); and each reason is held to its miss by an experiment
that shows the cause."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from asynclab.course import misses, predictlog

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import predicted_table  # noqa: E402

ROWS = json.loads((ROOT / "docs" / "predicted.json").read_text())

#: A fast subset of the cells, run again through the collector: (notebook, how many of its first cells).
SUBSET = [("02_timing.ipynb", 10), ("04_events.ipynb", 12)]


def test_every_miss_has_its_reason_and_every_reason_a_miss():
    missed = {misses.key(r) for r in ROWS if misses.is_miss(r)}
    assert missed - set(misses.MISSES) == set(), "misses without a reason in asynclab.course.misses"
    assert set(misses.MISSES) - missed == set(), "reasons that name no current miss"
    page = (ROOT / "docs" / "predicted.md").read_text()
    assert all(why in page for why in misses.MISSES.values())


def test_every_row_compares_the_card_of_its_recording():
    shown = [r for r in ROWS if r["kind"] in ("figure", "claim")]
    assert shown and all(r["gpu"] == "NVIDIA H200" and r["where"] == "simulated H200 (predicted)" for r in shown)


def test_every_cell_not_predicted_says_why():
    refused = [r for r in ROWS if r["kind"] == "refused"]
    named = {(n, c) for n, cells in predicted_table.EXCEPTIONS.items() for c in cells}
    assert named <= {(r["lesson"], r["cell"]) for r in refused}
    assert all(len(r["reason"]) > 20 for r in refused)


def test_the_table_is_current(tmp_path):
    """A fast subset of cells, run again without a GPU, logs the rows docs/predicted.json holds (within 1%)."""
    log = tmp_path / "log.jsonl"
    log.write_text("")
    for notebook, upto in SUBSET:
        predicted_table.execute(ROOT / "notebooks" / notebook, log, upto=upto)
    fresh = predicted_table.with_ratios(predictlog.read(log))
    stored = {(r["kind"], misses.key(r)): r for r in ROWS}
    again = [r for r in fresh if r["kind"] in ("figure", "claim")]
    assert len(again) >= 10
    for row in again:
        old = stored.get((row["kind"], misses.key(row)))
        assert old is not None, f"not in docs/predicted.json: {misses.key(row)}"
        if row["kind"] == "claim":
            assert (row["predicted"], row["recorded"]) == (old["predicted"], old["recorded"]), misses.key(row)
        else:
            assert row["recorded"] == pytest.approx(old["recorded"], rel=1e-9), misses.key(row)
            assert row["predicted"] == pytest.approx(old["predicted"], rel=0.01), misses.key(row)
