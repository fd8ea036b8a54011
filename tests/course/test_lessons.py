"""The lesson map and each notebook's set-up cell."""
from pathlib import Path

import pytest

from asynclab.course import lessonrun

from asynclab.course import registry as lessons
from asynclab.gpu.hardware import GPU, Hardware

ROOT = Path(__file__).resolve().parents[2]
ONE = Hardware(gpus=(GPU(0, "G", 1.0, 1, "9.0"),))


def test_every_ready_lesson_has_its_notebook_and_back():
    ready = {item.notebook for item in lessons.LESSONS if item.ready}
    on_disk = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert ready == on_disk


def test_how_it_runs_per_mode():
    assert lessons.how_it_runs(lessons.lesson(1), Hardware()) == "replays the NVIDIA H100 reference"
    assert lessons.how_it_runs(lessons.lesson(1), ONE) == "runs live here, on G"
    assert lessons.how_it_runs(lessons.lesson(7), ONE) == "replays the 2x NVIDIA H100 reference"
    assert lessons.how_it_runs(lessons.lesson(0), Hardware()) == "runs here"


def test_lesson_lookup():
    assert lessons.lesson("02").name == "timing"
    with pytest.raises(ValueError, match="no lesson '9'"):
        lessons.lesson("9")


def test_lesson_map_has_a_row_per_lesson():
    text = lessons.lesson_map(Hardware())
    assert len(text.splitlines()) == 1 + len(lessons.LESSONS)


def test_start_prints_report_and_plan(capsys):
    run = lessonrun.start(0)
    out = capsys.readouterr().out
    assert out.startswith("asynclab hardware report") and "lesson 00: runs here" in out
    assert run.live is False


def test_every_ready_lesson_has_the_same_anatomy():
    """notebook, experiments, exercises and reference, all found under the lesson's one short name."""
    import json

    from asynclab.grading import checks

    from asynclab.course import reference

    for item in lessons.LESSONS:
        if not item.ready:
            continue
        assert (ROOT / "notebooks" / item.notebook).is_file()
        assert item.has("exercises"), item.name
        assert reference.available(item.number), item.name
        assert reference.lesson_dir(item.number) == ROOT / "src" / "asynclab" / "lessons" / item.name / "reference"
        if item.gpus:
            assert item.has("experiments"), item.name
            gpu = reference.meta(item.number)["gpus"][0]["name"]
            assert item.reference_gpu.split()[-1] in gpu, (item.name, gpu)  # the lesson map tells the truth
        if int(item.number) >= 3:
            head = json.loads((item.reference_dir / "results.json").read_text())["headline"]
            assert head and all(v is not None for v in head.values()), item.name
        module = item.module("exercises")
        names = [n for n, fn in checks._EXERCISES.items() if fn.__module__ == module.__name__]
        assert names and all(n.startswith(item.number + ".") for n in names), item.name


def test_lesson_lookup_by_any_of_its_names():
    item = lessons.lesson(3)
    assert lessons.lesson("03") is lessons.lesson("streams") is lessons.lesson("03_streams") is item
    assert item.module("experiments").__name__ == "asynclab.lessons.streams.experiments"
    with pytest.raises(ValueError, match="has no experiments module yet"):
        lessons.lesson(0).module("experiments")
    with pytest.raises(ValueError, match="parts are"):
        item.module_name("data")


def test_two_gpus_without_peer_access_run_live_and_say_what_changes():
    """Kaggle's two T4s and many PCIe machines: lessons 06-07 run live, and say that copies go through host memory."""
    t4 = GPU(0, "Tesla T4", 15.0, 40, "7.5")
    no_peer = Hardware(gpus=(t4, t4), p2p=((True, False), (False, True)))
    peer = Hardware(gpus=(t4, t4), p2p=((True, True), (True, True)))
    for number in (6, 7):
        run = lessonrun.LessonRun(lessons.lesson(number), no_peer)
        assert run.live and run.device == "cuda" and not run.peer_access
        assert lessonrun.NO_PEER_ACCESS in str(run) and "through host memory" in str(run)
        assert lessonrun.NO_PEER_ACCESS not in str(lessonrun.LessonRun(lessons.lesson(number), peer))
    assert lessonrun.NO_PEER_ACCESS not in str(lessonrun.LessonRun(lessons.lesson(5), no_peer))  # one GPU is enough


def test_notebooks_keep_the_test_scaffolding_out_of_sight():
    """nbval's markers are cell tags, never text a learner reads; the platform install cell is tagged off the book."""
    import json

    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        assert not [c for c in cells if "NBVAL" in "".join(c["source"]).upper()], path.name
        code = [c for c in cells if c["cell_type"] == "code"]
        assert "".join(code[0]["source"]).startswith("# On Colab or Kaggle"), path.name
        assert "remove-cell" in code[0]["metadata"].get("tags", []), path.name
        assert any("nbval-ignore-output" in c["metadata"].get("tags", []) for c in code), path.name


@pytest.mark.parametrize("number, name, windows", [(3, "missing_wait", ["no wait", "wait_stream"]),
                                                  (4, "race", ["no wait", "wait_event", "synchronize"])])
def test_reference_traces_carry_the_callouts_of_their_figures(number, name, windows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asynclab.trace.draw.timeline import draw_timeline

    trace = lessonrun.LessonRun(lessons.lesson(number), Hardware()).reference_trace(name)
    assert trace.meta["callouts"]
    for window in windows:  # every panel of the figure points at its event
        tl = draw_timeline(trace, annotation=window)
        assert [a.get_text() for a in tl.collections["callouts"]] == [text for _, text in trace.meta["callouts"]]
    plt.close("all")


def test_explore_runs_a_lessons_experiment_with_your_parameters_on_the_simulated_h100(tmp_path, capsys):
    """Without a GPU, ``run.explore`` predicts: the results are labelled, they follow the parameter (fewer chunks hide
    less: the first copy has nothing to hide behind), the trace it saves is the simulated one, and what the
    simulation refuses is said, not raised."""
    import torch

    from asynclab.trace import load_trace

    run = lessonrun.LessonRun(lessons.lesson(5), Hardware())
    few = run.explore("pipeline", chunks=2, chunk_bytes=8 << 20, path=tmp_path / "few.json.gz")
    many = run.explore("pipeline", chunks=8, chunk_bytes=8 << 20, path=tmp_path / "many.json.gz")
    assert few["where"] == many["where"] == "simulated H100 (predicted)"
    assert few["wrong_chunks"] is None  # values are not computed: not a figure it can give
    assert few["hidden_fraction"] < 0.6 and many["hidden_fraction"] > few["hidden_fraction"] + 0.2
    assert load_trace(tmp_path / "few.json.gz").meta["simulated"]["predicted"]
    assert not torch.cuda.is_available() or run.live
    assert lessonrun.LessonRun(lessons.lesson(1), Hardware()).explore("async_error") is None
    assert "not predicted here: async_error the simulation refuses a fresh Python process" in capsys.readouterr().out


def test_explore_predicts_that_branches_stop_gaining_once_their_kernels_fill_the_sms():
    """Lesson 03's Try-it: the same elements in 8 rows (8 of the H100's 132 SMs a kernel) gain from a second stream;
    in 512 rows each kernel fills the SMs, and they gain next to nothing (an H100 measured 1.78x and 1.12x)."""
    run = lessonrun.LessonRun(lessons.lesson(3), Hardware())
    few, many = (run.explore("branches", rows=r, repeats=3) for r in (8, 512))
    assert few["spec"]["batch"] * few["spec"]["features"] == many["spec"]["batch"] * many["spec"]["features"]
    assert few["speedup"] >= 1.5 and many["speedup"] <= 1.25, (few["speedup"], many["speedup"])


def test_explore_says_in_one_line_what_is_wrong_with_a_parameter():
    run = lessonrun.LessonRun(lessons.lesson(3), Hardware())
    with pytest.raises(ValueError, match=r"^branches: rows must be a whole number from 1 to 8388608, not 0$") as err:
        run.explore("branches", rows=0)
    assert len(err.traceback) == 2  # the test, then explore itself, not from deep in the experiment or the simulation
    with pytest.raises(TypeError, match="takes no parameter 'row'; it takes workload, repeats, rows, path"):
        run.explore("branches", row=8)
    with pytest.raises(ValueError, match="chunks must be a whole number of at least 1, not 2.5"):
        lessonrun.LessonRun(lessons.lesson(5), Hardware()).explore("pipeline", chunks=2.5)
