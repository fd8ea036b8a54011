"""nbgrader's own ``autograde`` (the command and formgrader's button) grading each exercise in a fresh process."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float

from asynclab.grading.classroom import CELL_TIMEOUT_S, fresh_grades

__all__ = ["FreshRegrade", "autograde_preprocessors"]


class FreshRegrade(NbGraderPreprocessor):
    """After nbgrader has run a submission, each graded check cell's outputs become what the exercise's check says
    in a fresh Python process (:func:`asynclab.grading.classroom.fresh_grades`): the instructor's set-up, the
    student's answer cell, the checker bound before the answer. A wrong answer leaves an error output, which
    nbgrader scores zero; a right one a line of text, which scores the cell's points. So nothing a notebook rebinds,
    prints or patches changes a grade, whichever way the instructor grades.
    """

    timeout = Float(CELL_TIMEOUT_S, help="seconds one exercise's check may run in its fresh process").tag(config=True)

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        info = resources["nbgrader"]
        root = Path(str(info["db_url"]).removeprefix("sqlite:///")).parent
        source_path = root / "source" / info["assignment"] / f"{info['notebook']}.ipynb"
        if not source_path.is_file():  # not an asynclab course folder: nothing to regrade
            return nb, resources
        source = json.loads(source_path.read_text())
        answers = {c.get("id"): c.source for c in nb.cells if c.cell_type == "code"}
        grades = fresh_grades(source, answers, self.timeout)
        for cell in nb.cells:
            grade = grades.get(cell.get("id"))
            if grade is not None:
                cell.outputs = [_output(grade)]
        return nb, resources


def _output(grade: Any) -> dict:
    """The output nbgrader reads a check cell's score from: an error (zero) or a line of text (its points)."""
    from nbformat.v4 import new_output

    text = f"{'Right' if grade.right else 'Not yet'} (graded in a fresh process): {grade.message}"
    if grade.right:
        return new_output("stream", name="stdout", text=text + "\n")
    return new_output("error", ename="NotRight", evalue=text, traceback=[text])


def autograde_preprocessors(defaults: list) -> list:
    """nbgrader's autograde steps with :class:`FreshRegrade` right after the one that runs the notebook.

    Example:
        >>> autograde_preprocessors(["a.Execute", "a.SaveAutoGrades"])
        ['a.Execute', 'asynclab.grading.autograde.FreshRegrade', 'a.SaveAutoGrades']
    """
    names = [d if isinstance(d, str) else f"{d.__module__}.{d.__name__}" for d in defaults]
    at = next((i + 1 for i, n in enumerate(names) if n.endswith(".Execute")), len(names))
    return [*names[:at], f"{__name__}.FreshRegrade", *names[at:]]
