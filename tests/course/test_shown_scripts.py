"""An experiment that runs in a fresh process (``torchrun``) cannot sit in a cell; its page shows the code that
process runs. The page prints that code from its source (``inspect.getsource``), so what it shows is what runs; a
copy pasted into markdown could drift, so there is none."""
import json
from pathlib import Path

import pytest

from asynclab.lessons.pipeline_bubbles import stages

ROOT = Path(__file__).resolve().parents[1].parent

SHOWN = [("07_pipeline_bubbles", stages.pipeline), ("07_pipeline_bubbles", stages.work_wait)]


def _sources(notebook: str, kind: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == kind]


def _prints(sources: list[str], fn) -> bool:
    return any(f"print(inspect.getsource(stages.{fn.__name__}))" in s for s in sources)


@pytest.mark.parametrize("notebook, fn", SHOWN, ids=lambda v: getattr(v, "__name__", v))
def test_the_page_prints_the_script_that_runs(notebook, fn):
    code = _sources(notebook, "code")
    assert any("from asynclab.lessons.pipeline_bubbles import stages" in s for s in code), notebook
    assert _prints(code, fn), f"{notebook}: no cell prints stages.{fn.__name__}, the code its processes run"
    assert not any(f"def {fn.__name__}(" in s for s in _sources(notebook, "markdown")), (
        f"{notebook}: a copy of stages.{fn.__name__} in markdown: the cell that prints it is the one to keep")


def test_a_page_without_the_printing_cell_is_caught():
    code = [s.replace("inspect.getsource(stages.work_wait)", "'...'") for s in _sources("07_pipeline_bubbles", "code")]
    assert _prints(code, stages.pipeline) and not _prints(code, stages.work_wait)
