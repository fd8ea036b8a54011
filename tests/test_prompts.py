"""An exercise's prompt states its checker's own numbers, taken from the checker's constants: the two cannot drift."""
import json
import re
from pathlib import Path

import pytest

from asynclab.lessons.copy_overlap import exercises as copy_overlap
from asynclab.lessons.multi_gpu_p2p import exercises as multi_gpu_p2p

ROOT = Path(__file__).resolve().parent.parent

#: (notebook, exercise heading, what the prompt must say, computed from the checker's constant).
STATED = [
    ("05_copy_overlap", "Exercise 1", f"needs at least {copy_overlap.MIN_HIDDEN:.0%}"),
    ("06_multi_gpu_p2p", "Exercise 1", f"at least {multi_gpu_p2p.MIN_OVERLAP:.0%} of it"),
    ("06_multi_gpu_p2p", "Exercise 2", f"accepts {multi_gpu_p2p.TOLERANCE:.0%} either side"),
]


def _prompt(notebook: str, heading: str) -> str:
    """The markdown of the exercise ``heading`` (from its heading to the next one)."""
    text = "\n".join("".join(c["source"]) for c in json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())
                     ["cells"] if c["cell_type"] == "markdown")
    found = re.search(rf"### {heading} ·(.*?)(?=\n### |\n## |\Z)", text, re.S)
    assert found, f"{notebook}: no '### {heading} ·' heading"
    return found.group(1)


@pytest.mark.parametrize("notebook, heading, says", STATED, ids=[f"{n}-{h}" for n, h, _ in STATED])
def test_the_prompt_states_the_checkers_number(notebook, heading, says):
    prompt = _prompt(notebook, heading)
    assert says in prompt, f"{notebook} {heading} should say {says!r}"


def test_no_prompt_states_a_percentage_its_checker_does_not_use():
    for notebook, heading, says in STATED:
        stated = set(re.findall(r"\d+%", _prompt(notebook, heading)))
        assert stated <= set(re.findall(r"\d+%", says)) | {"100%"}, (notebook, heading, stated)
