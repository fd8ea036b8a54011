"""Classroom labs: the nbgrader course built from the notebooks, graded on a machine without a GPU."""
import copy
import os
import subprocess
import sys
import json
import re
from pathlib import Path

import pytest

from asynclab.grading import classroom
from asynclab.course.registry import LESSONS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def _graded(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]


def test_every_exercise_becomes_a_solution_cell_and_a_locked_graded_check(tmp_path):
    paths = classroom.write_source(tmp_path, NOTEBOOKS)
    assert (tmp_path / "nbgrader_config.py").is_file()
    assert len(paths) == sum(x.has("exercises") for x in LESSONS)
    for path in paths:
        nb = json.loads(path.read_text())
        text = json.dumps(nb)
        assert "<summary>Solution</summary>" not in text, path.name
        solutions = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
        graded = _graded(nb)
        assert len(solutions) == len(graded) >= 1, path.name
        for cell in solutions:
            assert "### BEGIN SOLUTION" in "".join(cell["source"]) and "### END SOLUTION" in "".join(cell["source"])
        for cell in graded:
            source = "".join(cell["source"])
            assert cell["metadata"]["nbgrader"]["locked"] and "al.check(" in source and "assert verdict.right" in source


def test_a_notebook_without_an_answer_for_an_exercise_is_refused():
    nb = json.loads((NOTEBOOKS / "07_pipeline_bubbles.ipynb").read_text())
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"]).replace("<summary>Solution</summary>", "<summary>Hint</summary>")
    with pytest.raises(classroom.ClassroomError, match="07.step_time has no code solution"):
        classroom.source_notebook(nb)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    pytest.importorskip("nbgrader")
    root = tmp_path_factory.mktemp("classroom")
    return root, classroom.examples(root, NOTEBOOKS, ["07", "03"])


def test_solved_examples_score_full_marks_and_shipped_ones_zero(course):
    _, rows = course
    assert {r["lesson"] for r in rows} == {"07_pipeline_bubbles", "03_streams"}
    for r in rows:
        assert r["score"] == (r["max_score"] if r["student"] == "solved" else 0.0), r
        assert r["max_score"] == 2.0
    assert "07_pipeline_bubbles  solved      2 / 2" in classroom.table(rows)


def test_student_versions_hold_no_solution_code(course):
    root, _ = course
    for lesson in ("07_pipeline_bubbles", "03_streams"):
        source = json.loads((root / "source" / lesson / f"{lesson}.ipynb").read_text())
        released = (root / "release" / lesson / f"{lesson}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in released and "raise NotImplementedError()" in released
        for cell in source["cells"]:
            text = "".join(cell["source"])
            if "### BEGIN SOLUTION" in text:
                hint, body = text.split("### BEGIN SOLUTION\n")[0], text.split("### BEGIN SOLUTION\n")[1].split("### END SOLUTION")[0]
                for line in body.splitlines():
                    # every real line of the solution (not a bare `return y`, nor a line the starting point shows too)
                    if len(line.strip()) > 12 and line.strip() not in hint:
                        assert json.dumps(line)[1:-1] not in released, (lesson, line)


def _with_answer(nb: dict, exercise: str, code: str | None) -> dict:
    """The source notebook with one exercise's answer cell replaced by ``code`` (None: the cell deleted)."""
    out = copy.deepcopy(nb)
    slug = f"{exercise.replace('.', '_')}_answer"
    cells = []
    for cell in out["cells"]:
        if cell.get("id") == slug:
            if code is None:
                continue
            cell["source"] = code.splitlines(True)
        cells.append(cell)
    out["cells"] = cells
    return out


def test_bad_submissions_cost_their_own_points_and_stop_nothing(course):
    root, _ = course
    lesson = "07_pipeline_bubbles"
    source = json.loads((root / "source" / lesson / f"{lesson}.ipynb").read_text())
    bad = {
        "raises": _with_answer(source, "07.step_time", "def predict(p, m, t_f, t_b):\n    return 1 / 0\npredict(1, 1, 1, 1)"),
        "never_returns": _with_answer(source, "07.step_time", "while True:\n    pass"),
        "deleted_cell": _with_answer(source, "07.step_time", None),
        "prints_right": _with_answer(source, "07.step_time", "def predict(p, m, t_f, t_b):\n    return m * (t_f + t_b)\n"
                                                              "print('Right: 12 random pipelines')"),
    }
    for student, nb in bad.items():
        classroom.submit(root, lesson, student, json.dumps(nb).encode())
    classroom.submit(root, lesson, "not_json", b"{this is not a notebook")
    classroom.submit(root, lesson, "good", root / "source" / lesson / f"{lesson}.ipynb")
    grades = classroom.grade(root, lesson, [*bad, "not_json", "good"], timeout_s=20)
    assert grades["good"]["score"] == 2.0  # graded in the same run, after every bad one
    for student in bad:  # the broken exercise scores zero; the other one still counts
        assert grades[student]["score"] == 1.0, (student, grades[student]["log"][-500:])
    assert grades["not_json"]["score"] == 0.0 and not grades["not_json"]["ok"]
    assert "not_json" in grades["not_json"]["log"] or "JSON" in grades["not_json"]["log"]


#: The wrong answer to 03.wait_stream_fix that every hostile submission starts from: no side stream, no waits.
_NO_STREAMS = "def on_side_stream(work, x):\n    return work(x)\n"

#: Submissions that try to score without a right answer, each as the answer cell of 03.wait_stream_fix (03.which_gain
#: left unanswered, as shipped): each must score 0.
HOSTILE = {
    "rebinds_al_check": _NO_STREAMS + "import asynclab.grading.checks\n"
                        "al.check = lambda *a, **k: asynclab.grading.checks.Verdict(True, 'fine')\n",
    "replaces_checks_check": _NO_STREAMS + "import asynclab.grading.checks as c\nc.check = lambda *a, **k: c.Verdict(True, 'fine')\n",
    "rewrites_the_registry": _NO_STREAMS + "import asynclab.grading.checks as c\nc.check('00.replayed_lessons', 0)\n"
                             "for k in list(c._EXERCISES):\n    c._EXERCISES[k] = lambda *a, **kw: c.Verdict(True, 'fine')\n",
    "marks_its_result_right": "def on_side_stream(work, x):\n    y = work(x)\n    y.right, y.ready_at = True, 0.0\n"
                              "    return y\n",
    "patches_the_simulator": _NO_STREAMS + "import asynclab.sim.cuda as s\ns.Stream.query = lambda self: True\n"
                             "import asynclab.sim.simulation as t\nt.Simulation.reached = lambda self, t: True\n",
    "prints_right": _NO_STREAMS + "print('Right: both races are closed')\n",
    "swallows_errors": "def on_side_stream(work, x):\n    try:\n        return work(x)\n    except Exception:\n"
                       "        return x\n",
    "exits_the_kernel": _NO_STREAMS + "import os\nos._exit(0)\n",
}


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_a_tampering_answer_is_graded_not_right(student):
    from asynclab.grading.fresh import check_in_fresh_process, setup_code

    source = classroom.source_notebook(json.loads((NOTEBOOKS / "03_streams.ipynb").read_text()))
    at = next(i for i, c in enumerate(source["cells"]) if c.get("id") == "03_wait_stream_fix_answer")
    for call in ('al.check("03.wait_stream_fix", on_side_stream)', 'al.check("03.which_gain", {"two big matmuls"})'):
        grade = check_in_fresh_process(setup_code(source["cells"], at), HOSTILE[student], call, timeout_s=120)
        assert not grade.right, (student, call, grade)


#: 03.wait_stream_fix's published solution: right, as long as nothing else in the cell tampers.
_SOLVED = ("side = torch.cuda.Stream()\n\ndef on_side_stream(work, x):\n    caller = torch.cuda.current_stream()\n"
           "    side.wait_stream(caller)\n    with torch.cuda.stream(side):\n        y = work(x)\n"
           "    caller.wait_stream(side)\n    y.record_stream(caller)\n    return y\n")


@pytest.mark.parametrize("patch", ["import time\ntime.perf_counter = lambda: 0.0\n",
                                   "import threading\nthreading.Thread.run = lambda self: None\n",
                                   # a stand-in that says it wraps the original, as PyTorch's own guard does
                                   "import functools\ntorch.cuda.synchronize = functools.wraps(torch.cuda.synchronize)"
                                   "(lambda *a, **k: None)\n"])
def test_changing_what_the_simulation_patches_is_tampering(patch):
    """The tamper check watches every name of the table of patches (asynclab.sim.patches), not only torch's."""
    from asynclab.grading.fresh import check_in_fresh_process, setup_code

    source = classroom.source_notebook(json.loads((NOTEBOOKS / "03_streams.ipynb").read_text()))
    at = next(i for i, c in enumerate(source["cells"]) if c.get("id") == "03_wait_stream_fix_answer")
    call = 'al.check("03.wait_stream_fix", on_side_stream)'
    assert check_in_fresh_process(setup_code(source["cells"], at), _SOLVED, call, timeout_s=120).right
    grade = check_in_fresh_process(setup_code(source["cells"], at), patch + _SOLVED, call, timeout_s=120)
    assert not grade.right and "changed the course's or PyTorch's own code" in grade.message, grade


def test_an_answer_that_imports_torch_compile_is_not_tampering():
    """Importing torch._dynamo (torch.compile in an answer) wraps torch.manual_seed in PyTorch's own guard: not the
    answer's doing, and the grading process no longer imports it up front to hide that."""
    from asynclab.grading.fresh import check_in_fresh_process, setup_code

    source = classroom.source_notebook(json.loads((NOTEBOOKS / "03_streams.ipynb").read_text()))
    at = next(i for i, c in enumerate(source["cells"]) if c.get("id") == "03_wait_stream_fix_answer")
    call = 'al.check("03.wait_stream_fix", on_side_stream)'
    grade = check_in_fresh_process(setup_code(source["cells"], at), "import torch._dynamo\n" + _SOLVED, call,
                                   timeout_s=120)
    assert grade.right, grade


def _released_and_solved(root: Path, lesson: str) -> tuple[dict, str]:
    """The student version of a lesson as released, and the source's solution to 03.wait_stream_fix."""
    source = json.loads((root / "source" / lesson / f"{lesson}.ipynb").read_text())
    released = json.loads((root / "release" / lesson / f"{lesson}.ipynb").read_text())
    return released, next("".join(c["source"]) for c in source["cells"] if c.get("id") == "03_wait_stream_fix_answer")


def test_tampering_scores_zero_and_honest_partial_answers_keep_their_points(course):
    """In nbgrader itself: a submission that rebinds al.check, one that edits its graded cell, and an honest one with
    one exercise right of two."""
    root, _ = course
    lesson = "03_streams"
    released, solved = _released_and_solved(root, lesson)
    edited = _with_answer(released, "03.wait_stream_fix", _NO_STREAMS)
    for cell in edited["cells"]:  # a locked graded cell edited: nbgrader puts the instructor's back
        if cell.get("id") == "03_wait_stream_fix_check":
            cell["source"] = "print('Right')\n"
    subs = {"rebinds_al_check": _with_answer(released, "03.wait_stream_fix", HOSTILE["rebinds_al_check"]),
            "edits_the_graded_cell": edited, "honest_half": _with_answer(released, "03.wait_stream_fix", solved)}
    for student, nb in subs.items():
        classroom.submit(root, lesson, student, json.dumps(nb).encode())
    grades = classroom.grade(root, lesson, list(subs), timeout_s=60)
    assert grades["rebinds_al_check"]["score"] == 0.0, grades["rebinds_al_check"]["checks"]
    assert grades["edits_the_graded_cell"]["score"] == 0.0
    assert grades["honest_half"]["score"] == 1.0, grades["honest_half"]["checks"]


def test_nbgraders_own_autograde_command_grades_in_a_fresh_process(course):
    """`nbgrader autograde` run by hand in the course folder (as formgrader's button runs it), not through asynclab:
    the course's nbgrader_config.py regrades each exercise in a fresh process, so the three ways a notebook could
    score in its own kernel (rebinding al.check, replacing checks.check, rewriting the registry) score zero, and a
    solved exercise keeps its point."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook

    root, _ = course
    lesson = "03_streams"
    released, solved = _released_and_solved(root, lesson)
    subs = {f"cli_{name}": _with_answer(released, "03.wait_stream_fix", HOSTILE[name])
            for name in ("rebinds_al_check", "replaces_checks_check", "rewrites_the_registry")}
    subs["cli_honest_half"] = _with_answer(released, "03.wait_stream_fix", solved)
    for student, nb in subs.items():
        classroom.submit(root, lesson, student, json.dumps(nb).encode())
    nbgrader = shutil.which("nbgrader", path=str(Path(sys.executable).parent))
    for student in subs:
        done = subprocess.run([nbgrader, "autograde", lesson, "--student", student, "--force"], cwd=root,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(lesson, s).score for s in subs}
    assert scores == {"cli_rebinds_al_check": 0.0, "cli_replaces_checks_check": 0.0,
                      "cli_rewrites_the_registry": 0.0, "cli_honest_half": 1.0}, scores


def test_the_instructors_guide_lists_the_lessons_from_the_registry():
    guide = (ROOT / "docs" / "instructors.md").read_text()
    assert classroom.lesson_table(NOTEBOOKS) in guide, "regenerate the table with asynclab.grading.classroom.lesson_table"
    assert "docs/instructors.md" in (ROOT / "README.md").read_text()


def _solved(student_nb: dict, source_nb: dict) -> dict:
    """The student's notebook with each solution cell answered as the source notebook's solution answers it."""
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in source_nb["cells"]
               if c["metadata"].get("nbgrader", {}).get("solution")}
    for cell in student_nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return student_nb


def test_nbgraders_whole_flow_through_an_exchange(tmp_path):
    """The instructor's flow as the guide tells it, each step nbgrader's own command, from a folder that is not the
    repository: source, generate, release; a student whose only course settings are the guide's nbgrader_config.py
    fetches and submits; collect; grade; export the grades."""
    import os
    import shutil
    import subprocess
    import sys

    pytest.importorskip("nbgrader")
    bin_dir = Path(sys.executable).parent
    nbgrader, asynclab = shutil.which("nbgrader", path=str(bin_dir)), shutil.which("asynclab", path=str(bin_dir))
    if nbgrader is None or asynclab is None:
        pytest.skip("nbgrader's and asynclab's commands are not installed beside this Python")
    lesson = "07_pipeline_bubbles"
    course, student, exchange = tmp_path / "course", tmp_path / "student", tmp_path / "exchange"
    student.mkdir(), exchange.mkdir()
    env = dict(os.environ, ASYNCLAB_COURSE_ID="lab-test", ASYNCLAB_EXCHANGE=str(exchange),
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    # the student's machine: its own home, whose Jupyter config folder holds the guide's nbgrader_config.py
    home = tmp_path / "home"
    student_config = home / ".jupyter" / "nbgrader_config.py"
    student_config.parent.mkdir(parents=True)
    student_config.write_text(_guides_student_config().replace('"asynclab"', '"lab-test"')
                              .replace('"/srv/nbgrader/exchange"', json.dumps(str(exchange))))
    student_env = {k: v for k, v in env.items() if not k.startswith(("ASYNCLAB_", "JUPYTER"))}
    student_env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(student_config.parent))

    def run(*cmd: str, cwd: Path, as_student: bool = False) -> str:
        done = subprocess.run(cmd, cwd=cwd, env=student_env if as_student else env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    run(asynclab, "classroom", "source", str(course), cwd=tmp_path)
    run(nbgrader, "generate_assignment", lesson, cwd=course)
    run(nbgrader, "release_assignment", lesson, cwd=course)
    assert f"lab-test {lesson}" in run(nbgrader, "list", cwd=student, as_student=True)
    run(nbgrader, "fetch_assignment", lesson, cwd=student, as_student=True)
    fetched = student / lesson / f"{lesson}.ipynb"
    source = json.loads((course / "source" / lesson / f"{lesson}.ipynb").read_text())
    fetched.write_text(json.dumps(_solved(json.loads(fetched.read_text()), source)))
    run(nbgrader, "submit", lesson, cwd=student, as_student=True)
    log = run(nbgrader, "collect", lesson, cwd=course)
    collected = list((course / "submitted").glob(f"*/{lesson}/{lesson}.ipynb"))
    assert len(collected) == 1, log
    student_id = collected[0].parents[1].name
    graded = run(asynclab, "classroom", "grade", str(course), lesson, cwd=course)
    assert f"{student_id}: 2 / 2" in graded, graded
    assert "allow_errors" not in graded and "without encryption" not in graded
    run(nbgrader, "export", cwd=course)  # the guide's export: grades.csv in the course folder
    import csv

    rows = list(csv.DictReader((course / "grades.csv").open()))
    assert [(r["assignment"], r["student_id"], float(r["score"]), float(r["max_score"])) for r in rows] == \
        [(lesson, student_id, 2.0, 2.0)], rows


def _guides_student_config() -> str:
    """The nbgrader_config.py that docs/instructors.md gives each student's machine."""
    guide = (ROOT / "docs" / "instructors.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", guide, re.S) if "c.Exchange.root" in b]
    assert len(blocks) == 1, "the guide gives one nbgrader_config.py for the students' machines"
    assert 'course_id = "asynclab"' in blocks[0] and 'root = "/srv/nbgrader/exchange"' in blocks[0], blocks[0]
    return blocks[0]


def test_a_regrade_gets_what_the_notebooks_earlier_cells_defined_for_the_answer():
    """06.both_ways's solution reads ``one_way_ms``, which a lesson cell defined after al.start (from section 3's
    bandwidth cell, which comes along with what it reads)."""
    from asynclab.grading.fresh import setup_code

    cells = json.loads((NOTEBOOKS / "06_multi_gpu_p2p.ipynb").read_text())["cells"]
    at = next(i for i, c in enumerate(cells) if 'al.check("06.both_ways"' in "".join(c["source"]))
    answer = "predicted_ms = 2 * one_way_ms"
    setup = setup_code(cells, at, needs=answer)
    assert 'one_way_ms = bw.ms["one way"]' in setup and 'name="p2p_bandwidth"' in setup
    assert "al.check(" not in setup.split("al.start(")[1]  # no other exercise's cell comes along
    namespace: dict = {}
    exec(compile(setup + "\n" + answer, "<regrade>", "exec"), namespace)  # noqa: S102 - the course's own cells
    assert namespace["predicted_ms"] > 0


@pytest.mark.skipif(os.name != "posix", reason="the grading kernels use local sockets only on POSIX")
def test_the_config_s_socket_folder_goes_when_nbgrader_exits(tmp_path):
    """nbgrader reads nbgrader_config.py at every command: the folder it makes for its kernels' sockets is removed
    when that command exits, so a term of grading leaves nothing behind in the temporary folder."""
    (tmp_path / "tmp").mkdir()
    run = ("from traitlets.config import Config\n"
           "c = Config()\n"
           f"exec(compile(open({str(tmp_path / 'nbgrader_config.py')!r}).read(), 'nbgrader_config.py', 'exec'),"
           " {'get_config': lambda: c, '__name__': 'config'})\n"
           "import os; print(os.path.isdir(os.path.dirname(c.KernelManager.ip)))\n")
    (tmp_path / "nbgrader_config.py").write_text(classroom.NBGRADER_CONFIG)
    proc = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "True"  # it was there while nbgrader ran
    assert not list((tmp_path / "tmp").iterdir())
