"""An experiment that runs in a fresh process (``torchrun``) cannot sit in a cell; its page shows the code that
process runs. The code shown must be the code that runs: this test holds each copy on the page to its source."""
import inspect
import json
from pathlib import Path

import pytest

from asynclab.lessons.pipeline_bubbles import stages

ROOT = Path(__file__).resolve().parents[1].parent

SHOWN = [("07_pipeline_bubbles", stages.pipeline), ("07_pipeline_bubbles", stages.work_wait)]


def _markdown(notebook: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("notebook, fn", SHOWN, ids=lambda v: getattr(v, "__name__", v))
def test_the_script_on_the_page_is_the_one_that_runs(notebook, fn):
    source = inspect.getsource(fn).rstrip()
    assert f"```python\n{source}\n```" in _markdown(notebook), (
        f"{notebook}: the page's copy of {fn.__module__}.{fn.__name__} differs from the script; paste it again")


def test_a_changed_script_is_caught():
    page = _markdown("07_pipeline_bubbles")
    changed = inspect.getsource(stages.pipeline).rstrip().replace("range(5)", "range(6)")
    assert f"```python\n{changed}\n```" not in page
