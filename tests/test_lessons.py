"""The lesson map and each notebook's set-up cell."""
from pathlib import Path

import pytest

from asynclab import lessons
from asynclab.hardware import GPU, Hardware

ROOT = Path(__file__).resolve().parents[1]
ONE = Hardware(gpus=(GPU(0, "G", 1.0, 1, "9.0"),))


def test_every_ready_lesson_has_its_notebook_and_back():
    ready = {item.notebook for item in lessons.LESSONS if item.ready}
    on_disk = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert ready == on_disk


def test_how_it_runs_per_mode():
    assert lessons.how_it_runs(lessons.lesson(1), Hardware()) == "replays the NVIDIA H100 reference"
    assert lessons.how_it_runs(lessons.lesson(1), ONE) == "runs live on your GPU"
    assert lessons.how_it_runs(lessons.lesson(7), ONE) == "replays the 2x NVIDIA H200 reference"
    assert lessons.how_it_runs(lessons.lesson(0), Hardware()) == "runs here"


def test_lesson_lookup():
    assert lessons.lesson("02").slug == "timing"
    with pytest.raises(ValueError, match="no lesson '9'"):
        lessons.lesson("9")


def test_lesson_map_has_a_row_per_lesson():
    text = lessons.lesson_map(Hardware())
    assert len(text.splitlines()) == 1 + len(lessons.LESSONS)


def test_start_prints_report_and_plan(capsys):
    run = lessons.start(0)
    out = capsys.readouterr().out
    assert out.startswith("asynclab hardware report") and "lesson 00: runs here" in out
    assert run.live is False
