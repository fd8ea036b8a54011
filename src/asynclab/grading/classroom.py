"""Classroom labs: an nbgrader course built from the notebooks, each exercise a solution cell and a graded check cell."""
from __future__ import annotations

import ast
import copy
import json
import re
from pathlib import Path
from typing import Any

#: Seconds nbgrader lets one cell run when it grades (the slowest exercise check takes seconds; a cell that never
#: returns is stopped here, and scores zero).
CELL_TIMEOUT_S = 300

_SOLUTION = re.compile(r"<details><summary>Solution</summary>.*?</details>\n*", re.S)
_CODE = re.compile(r"```python\n(.*?)```", re.S)

#: nbgrader's settings for the course folder: the course's name and exchange (an instructor's to change, or to set with
#: the environment variables), the cell timeout, and kernels that talk to nbgrader over local sockets.
NBGRADER_CONFIG = f'''\
# nbgrader settings for an asynclab course folder (written by `asynclab classroom source`); run nbgrader here.
import os

c = get_config()  # noqa: F821
# the course's name and the exchange folder students fetch from and submit to: edit them, or set the variables
c.CourseDirectory.course_id = os.environ.get("ASYNCLAB_COURSE_ID", "asynclab")
c.Exchange.root = os.environ.get("ASYNCLAB_EXCHANGE", "/srv/nbgrader/exchange")
c.Execute.timeout = {CELL_TIMEOUT_S}  # a cell that runs longer is stopped, and its exercise scores zero
c.Execute.interrupt_on_timeout = True
if os.name == "posix":  # the grading kernels talk to nbgrader over local sockets, not unencrypted TCP
    import atexit
    import shutil
    import tempfile

    sockets = tempfile.mkdtemp(prefix="asynclab-kernels-")
    atexit.register(shutil.rmtree, sockets, ignore_errors=True)  # the folder goes when nbgrader exits
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = os.path.join(sockets, "kernel")
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# nbgrader's autograde (the command and formgrader's button) grades each exercise again in a fresh process, after the
# submission has run: nothing a notebook rebinds, prints or patches changes a grade
from asynclab.grading.autograde import autograde_preprocessors  # noqa: E402
from nbgrader.converters import Autograde  # noqa: E402

c.Autograde.autograde_preprocessors = autograde_preprocessors(
    Autograde.class_traits()["autograde_preprocessors"].default())
'''


def course_notebooks() -> Path:
    """The course's notebooks, as the package carries them (in a clone, the repository's ``notebooks/``).

    Example:
        >>> (course_notebooks() / "03_streams.ipynb").is_file()
        True
    """
    return Path(__file__).resolve().parents[1] / "notebooks"


class ClassroomError(ValueError):
    """A notebook does not have the shape the classroom builder reads (an exercise without its check, ...)."""


def _check_call(code: str) -> ast.Call | None:
    """The last ``al.check(...)`` call of a cell, if any."""
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "al.check"]
    return max(calls, key=lambda n: n.lineno) if calls else None


def answer_code(exercise: str, starter: str, solution: str) -> str:
    """The solution written so that the starter's ``al.check(...)`` line grades it: the solution's own check call
    is dropped, and where it checks an expression, the starter's variable is set to that expression.

    Example:
        >>> answer_code("03.which_gain", 'my_answer = set()\\nal.check("03.which_gain", my_answer)',
        ...             'al.check("03.which_gain", {"four spin kernels"})')
        "my_answer = {'four spin kernels'}"
    """
    want, got = _check_call(starter), _check_call(solution)
    if want is None:
        raise ClassroomError(f"exercise {exercise}: its cell has no al.check(...) line")
    lines = solution.rstrip("\n").splitlines()
    if got is None:
        return "\n".join(lines)
    keep = [line for i, line in enumerate(lines, 1) if not got.lineno <= i <= got.end_lineno]
    for mine, theirs in zip(want.args[1:], got.args[1:]):
        if ast.unparse(mine) != ast.unparse(theirs):
            if not isinstance(mine, ast.Name):
                raise ClassroomError(f"exercise {exercise}: cannot assign the solution's {ast.unparse(theirs)} "
                                     f"to the cell's {ast.unparse(mine)}")
            keep.append(f"{mine.id} = {ast.unparse(theirs)}")
    return "\n".join(keep)


def _exercise_cells(cells: list[dict]) -> list[tuple[int, str, str | None]]:
    """``(cell index, exercise name, solution code or None)`` for every exercise cell (a cell that calls al.check)."""
    found = []
    for i, cell in enumerate(cells):
        text = "".join(cell["source"])
        if cell["cell_type"] != "code" or "al.check(" not in text:
            continue
        name = ast.literal_eval(_check_call(text).args[0])
        solution = None
        for later in cells[i + 1:]:
            body = "".join(later["source"])
            if later["cell_type"] == "code":
                break
            blocks = [_CODE.findall(m.group(0)) for m in _SOLUTION.finditer(body)]
            if blocks:
                solution = "\n".join(blocks[0]) or None
                break
        found.append((i, name, solution))
    return found


def _instructor_answers() -> dict[str, str]:
    """The answers of exercises whose lesson publishes no code for them (``CLASSROOM_ANSWERS`` of each lesson)."""
    from asynclab.course import registry as lessons

    answers: dict[str, str] = {}
    for item in lessons.LESSONS:
        if item.has("exercises"):
            answers.update(getattr(item.module("exercises"), "CLASSROOM_ANSWERS", {}))
    return answers


def _grading(cell_id: str, points: int | None, solution: bool) -> dict[str, Any]:
    meta = {"grade": points is not None, "grade_id": cell_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def source_notebook(notebook: dict) -> dict:
    """The instructor's nbgrader source version of a course notebook.

    Each exercise cell becomes a solution cell (the starting point as comments, the solution between nbgrader's
    ``### BEGIN SOLUTION`` and ``### END SOLUTION``) and a locked, graded cell that re-runs the check and asserts
    its verdict; the ``<details>`` solutions are removed from the text.

    Example:
        >>> import json
        >>> from asynclab.course.registry import lesson
        >>> nb = json.loads((lesson(7).package_dir.parents[3] / "notebooks" / lesson(7).notebook).read_text())  # doctest: +SKIP
        >>> "BEGIN SOLUTION" in json.dumps(source_notebook(nb))  # doctest: +SKIP
        True
    """
    nb = copy.deepcopy(notebook)
    extra = _instructor_answers()
    cells = nb["cells"]
    out: list[dict] = []
    exercises = {i: (name, sol) for i, name, sol in _exercise_cells(cells)}
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            cell["source"] = _SOLUTION.sub("", "".join(cell["source"])).splitlines(True)
        if i not in exercises:
            out.append(cell)
            continue
        name, solution = exercises[i]
        starter = "".join(cell["source"])
        if solution is None and name not in extra:
            raise ClassroomError(f"exercise {name} has no code solution in its notebook and no CLASSROOM_ANSWERS entry")
        code = extra[name] if solution is None else answer_code(name, starter, solution)
        check = ast.unparse(_check_call(starter))
        hint = "\n".join(f"# {line}" if line else "#" for line in starter.splitlines() if not line.startswith("al.check("))
        slug = name.replace(".", "_")
        out.append({"cell_type": "code", "execution_count": None, "id": f"{slug}_answer", "outputs": [],
                    "metadata": {"nbgrader": _grading(f"{slug}_answer", None, True)},
                    "source": (f"# Exercise {name}: your answer. The lesson's starting point:\n{hint}\n"
                               f"### BEGIN SOLUTION\n{code}\n### END SOLUTION\n").splitlines(True)})
        out.append({"cell_type": "code", "execution_count": None, "id": f"{slug}_check", "outputs": [],
                    "metadata": {"nbgrader": _grading(f"{slug}_check", 1, False)},
                    "source": (f"# graded: the checker runs your answer again (the grade comes from a fresh process)\n"
                               f"verdict = {check}\nprint(verdict)\n"
                               "assert verdict.right, verdict.message\n").splitlines(True)})
    nb["cells"] = out
    return nb


def write_source(root: str | Path, notebooks: str | Path) -> list[Path]:
    """Write an nbgrader course folder: ``root/source/NN_name/NN_name.ipynb`` for every lesson with exercises, and
    ``root/nbgrader_config.py``. Returns the notebooks written.

    Example:
        >>> paths = write_source("/tmp/course", "notebooks")  # doctest: +SKIP
    """
    from asynclab.course import registry as lessons

    root, notebooks = Path(root), Path(notebooks)
    written = []
    for item in lessons.written():
        if not item.has("exercises"):
            continue
        path = notebooks / item.notebook
        try:
            nb = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ClassroomError(f"{path}: cannot read the notebook ({err})") from None
        out = root / "source" / item.folder / item.notebook
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(source_notebook(nb), indent=1, ensure_ascii=False) + "\n")
        written.append(out)
    (root / "nbgrader_config.py").write_text(NBGRADER_CONFIG)
    return written


def _api(root: Path, timeout_s: int | None = None):
    """nbgrader's API on a course folder, with the folder's nbgrader_config.py (and ``timeout_s`` if given)."""
    import os
    import sys

    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])  # alembic
    config = Config()
    exec(compile((root / "nbgrader_config.py").read_text(), str(root / "nbgrader_config.py"), "exec"),
         {"get_config": lambda: config})
    config.CourseDirectory.root = str(root)
    if timeout_s is not None:
        config.Execute.timeout = config.FreshRegrade.timeout = timeout_s
    return NbGraderAPI(config=config)


def submit(root: str | Path, assignment: str, student: str, notebook: str | bytes) -> Path:
    """Put ``notebook`` (a path to copy, or the file's bytes) into ``root/submitted/<student>/<assignment>/``, as
    nbgrader's collect step would.

    Example:
        >>> submit("/tmp/course", "07_pipeline_bubbles", "ada", "/tmp/ada.ipynb")  # doctest: +SKIP
    """
    root = Path(root)
    folder = root / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{assignment}.ipynb"
    out.write_bytes(notebook if isinstance(notebook, bytes) else Path(notebook).read_bytes())
    (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    return out


def grade(root: str | Path, assignment: str, students: list[str], timeout_s: int | None = None) -> dict[str, dict]:
    """``nbgrader autograde`` each student's submission of ``assignment`` (which, with the course folder's
    nbgrader_config.py, grades every exercise again in a fresh process: :mod:`asynclab.grading.autograde`), then read
    the gradebook: ``{student: {"score", "max_score", "ok", "log", "checks"}}``.
    A submission nbgrader cannot grade scores zero, with nbgrader's reason in ``log``; it never stops the others.

    Example:
        >>> grade("/tmp/course", "07_pipeline_bubbles", ["ada"])  # doctest: +SKIP
        {'ada': {'score': 2.0, 'max_score': 2.0, 'ok': True, 'log': '...'}}
    """
    from nbgrader.api import Gradebook, MissingEntry

    root = Path(root)
    api = _api(root, timeout_s)
    out = {}
    for student in students:
        result = api.autograde(assignment, student, force=True, create=True)
        out[student] = {"ok": bool(result["success"]), "log": (result.get("log", "") + result.get("error", ""))[-4000:]}
    for student in students:
        out[student]["checks"] = _fresh_checks(root, assignment, student)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        max_score = gb.find_assignment(assignment).max_score
        for student in students:
            try:
                score = gb.find_submission(assignment, student).score
            except MissingEntry:
                score = 0.0
            out[student].update(score=float(score), max_score=float(max_score))
    return out


def _fresh_checks(root: Path, assignment: str, student: str) -> dict[str, Any]:
    """What the fresh-process regrade said of each check cell of an autograded submission (its outputs, written by
    :class:`asynclab.grading.autograde.FreshRegrade`): ``{check cell id: Grade}``; none where nbgrader could not grade."""
    from asynclab.grading.fresh import Grade

    path = root / "autograded" / student / assignment / f"{assignment}.ipynb"
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    checks = {}
    for cell in cells:
        text = "".join("".join(o.get("text", "")) or o.get("evalue", "") for o in cell.get("outputs", []))
        if str(cell.get("id", "")).endswith("_check") and "(graded in a fresh process): " in text:
            verdict, message = text.split(" (graded in a fresh process): ", 1)
            checks[cell["id"]] = Grade(verdict.endswith("Right"), message.strip())
    return checks


def _graded_cells(source: dict) -> list[tuple[str, str, float, str, int]]:
    """``(check cell id, answer cell id, points, check call, index of the answer cell)`` of a source notebook."""
    cells, found = source["cells"], []
    for i, cell in enumerate(cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade") or not str(cell.get("id", "")).endswith("_check"):
            continue
        answer = cell["id"][: -len("_check")] + "_answer"
        at = next((j for j, c in enumerate(cells) if c.get("id") == answer), None)
        call = _check_call("".join(cell["source"]))
        if at is not None and call is not None:
            found.append((cell["id"], answer, float(meta.get("points", 0)), ast.unparse(call), at))
    return found


def fresh_grades(source: dict, answers: dict[str, str], timeout_s: float = CELL_TIMEOUT_S) -> dict[str, Any]:
    """Each exercise of a submission graded in a fresh Python process: the set-up from the instructor's ``source``
    notebook, then the student's answer (``answers``: answer cell id -> its code), then the checker, bound before the
    answer runs. Returns ``{check cell id: Grade}``; a missing answer cell scores zero.

    Example:
        >>> fresh_grades({"cells": []}, {})
        {}
    """
    from concurrent.futures import ThreadPoolExecutor

    from asynclab.grading.fresh import Grade, check_in_fresh_process, setup_code

    graded = _graded_cells(source)
    # each answer's set-up, read here in one thread (Python 3.11's parser can fail when threads parse at once)
    jobs = {check_id: (setup_code(source["cells"], at, needs=f"{answers[answer_id]}\n{call}"), answers[answer_id], call)
            for check_id, answer_id, _, call, at in graded if answer_id in answers}

    def one(check_id: str) -> Grade:
        if check_id not in jobs:
            return Grade(False, "the answer cell is missing from the submission")
        return check_in_fresh_process(*jobs[check_id], timeout_s)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([g[0] for g in graded], pool.map(one, [g[0] for g in graded])))


def examples(root: str | Path, notebooks: str | Path, lessons: list[str] | None = None) -> list[dict]:
    """The whole flow on two example submissions per lesson: write the source, ``nbgrader generate_assignment``,
    submit the solved source (student ``solved``) and the student version as released (student ``as_shipped``),
    autograde both. Returns one row per lesson and student, read from the gradebook.

    Example:
        >>> rows = examples("build/classroom", "notebooks", ["07"])  # doctest: +SKIP
        >>> [(r["student"], r["score"]) for r in rows]  # doctest: +SKIP
        [('solved', 2.0), ('as_shipped', 0.0)]
    """
    from asynclab.course import registry

    root = Path(root)
    write_source(root, notebooks)
    chosen = [registry.lesson(x) for x in lessons] if lessons else [x for x in registry.written() if x.has("exercises")]
    api = _api(root)
    rows = []
    for item in chosen:
        made = api.generate_assignment(item.folder, force=True)
        if not made["success"]:
            raise ClassroomError(f"nbgrader generate_assignment {item.folder} failed: {made.get('error', '')[-300:]}")
        submit(root, item.folder, "solved", root / "source" / item.folder / item.notebook)
        submit(root, item.folder, "as_shipped", root / "release" / item.folder / item.notebook)
        for student, r in grade(root, item.folder, ["solved", "as_shipped"]).items():
            rows.append({"lesson": item.folder, "student": student, "score": r["score"], "max_score": r["max_score"]})
    return rows


def table(rows: list[dict]) -> str:
    """Gradebook rows as a text table.

    Example:
        >>> print(table([{"lesson": "07_pipeline_bubbles", "student": "solved", "score": 2.0, "max_score": 2.0}]))
        lesson               student     score
        07_pipeline_bubbles  solved      2 / 2
    """
    lines = [f"{'lesson':<20} {'student':<11} score"]
    lines += [f"{r['lesson']:<20} {r['student']:<11} {r['score']:g} / {r['max_score']:g}" for r in rows]
    return "\n".join(lines)


def lesson_table(notebooks: str | Path) -> str:
    """The instructor's table of lessons, read from the registry and each notebook's own header (its time and
    prerequisites), so that it is never typed twice.

    Example:
        >>> print(lesson_table("notebooks").splitlines()[0])  # doctest: +SKIP
        | # | lesson | time | prerequisites | GPUs for live runs | graded exercises |
    """
    from asynclab.course import registry as lessons

    rows = ["| # | lesson | time | prerequisites | GPUs for live runs | graded exercises |", "|---|---|---|---|---|---|"]
    for item in lessons.written():
        nb = json.loads((Path(notebooks) / item.notebook).read_text())
        header = dict(re.findall(r"^\| \*\*(.+?)\*\* \| (.+?) \|$", "".join(nb["cells"][0]["source"]), re.M))
        graded = len(_exercise_cells(nb["cells"]))
        rows.append(f"| {item.number} | {item.title} | {header.get('Time', '?')} | {header.get('Prerequisites', '?')} "
                    f"| {item.gpus} | {graded} |")
    return "\n".join(rows)
