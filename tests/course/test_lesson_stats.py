"""The lessons' text and hands-on figures (scripts/lesson_stats.py, whose docstring defines them) are held to the
course's limits with a ratchet: a lesson passes a limit when it meets it, or when it is no worse than its figure in
tests/course/lesson_stats_baseline.json. A lesson that improves may lower its baseline
(``python scripts/lesson_stats.py --baseline tests/course/lesson_stats_baseline.json``); one that gets worse fails.
The other tests show that the figures and the ratchet can fail."""
import doctest
import json
import sys
from pathlib import Path

import nbformat
import nbformat.v4 as v4
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import lesson_stats as ls  # noqa: E402

BASELINE = Path(__file__).with_name("lesson_stats_baseline.json")


@pytest.fixture(scope="module")
def stats():
    return ls.all_stats()


# ------------------------------------------------------------------------------------------------ the ratchet itself
def test_no_lesson_is_worse_than_its_baseline(stats):
    failures = ls.ratchet_failures(stats, ls.read_baseline(BASELINE))
    assert not failures, ("\n".join(failures) + "\n(python scripts/lesson_stats.py --long 45 lists the long "
                                                "sentences; the limits are in its constants)")


def test_a_real_lesson_made_worse_fails(tmp_path):
    source = ls.lesson_notebooks()["04"]
    nb = nbformat.read(source, as_version=4)
    nb.cells.append(v4.new_markdown_cell("**Predict.** " + " ".join(["Word"] * 60) + "."))
    nbformat.write(nb, tmp_path / source.name)
    failures = ls.ratchet_failures(ls.all_stats(tmp_path), ls.read_baseline(BASELINE))
    assert any(f.startswith("04 ") and "sentences over 45 words" in f for f in failures), failures
    assert any(f.startswith("04 ") and "without a guess cell" in f for f in failures), failures


def test_the_baseline_holds_every_lesson_and_figure():
    baseline = ls.read_baseline(BASELINE)
    assert set(baseline) == set(ls.lesson_notebooks())
    for lesson, row in baseline.items():
        assert set(ls.FIGURES) <= set(row), lesson


def test_the_docstring_examples():
    result = doctest.testmod(ls)
    assert result.attempted > 10 and result.failed == 0


# ------------------------------------------------------------------------------------------------------- sentences
@pytest.mark.parametrize("text, sentences", [
    ("It ran in 3.5 ms. Then it stopped.", ["It ran in 3.5 ms.", "Then it stopped."]),
    ("Call `torch.cuda.synchronize()`. Then read `t.item()`.",
     ["Call `torch.cuda.synchronize()`.", "Then read `t.item()`."]),
    ("Write `x = a. B = c` as one line.", ["Write `x = a. B = c` as one line."]),
    ("Use a side stream, e.g. The copy stream.", ["Use a side stream, e.g. The copy stream."]),
    ("One stream, i.e. The default one.", ["One stream, i.e. The default one."]),
    ("Eager vs. Graph replay.", ["Eager vs. Graph replay."]),
    ("See Fig. 3 for it.", ["See Fig. 3 for it."]),
    ("Smith et al. Found it.", ["Smith et al. Found it."]),
    ("Is it? Yes! It is.", ["Is it?", "Yes!", "It is."]),
    ("It waits. (Lesson 04 says why.) Then 2 kernels run.",
     ["It waits.", "(Lesson 04 says why.)", "Then 2 kernels run."]),
    ('It said "might be synchronous." `cudaMemcpyAsync` waited.',
     ['It said "might be synchronous."', "`cudaMemcpyAsync` waited."]),
    ("The first paragraph\n\nthe second", ["The first paragraph", "the second"]),
    ("Three kinds:\n- live;\n- recorded\n1. one\n* two", ["Three kinds:", "live;", "recorded", "one", "two"]),
    ("In code:\nthe rest", ["In code:", "the rest"]),
    ("a ratio: 3 to 1", ["a ratio: 3 to 1"]),
    ("version 2. then it ran", ["version 2. then it ran"]),
    ("**Predict.** How long? **Measure.** The cell.", ["**Predict.**", "How long?", "**Measure.**", "The cell."]),
    ("*Note.* _Then_ this.", ["*Note.*", "_Then_ this."]),
    ("It is done. **Check** the claim.", ["It is done.", "**Check** the claim."]),
    ("A soft\nwrapped line.", ["A soft wrapped line."]),
])
def test_split_sentences(text, sentences):
    assert ls.split_sentences(ls.prose(text)) == sentences


def test_sentence_length_counts_words_and_the_longest_is_found():
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("Short one. " + "Word " * 50 + "end.\n\n" + "Two words.")])
    stats = ls.lesson_stats(nb)
    assert (stats["sentences"], stats["longest"], stats["over45"]) == (3, 51, 1)
    assert stats["mean"] == round((2 + 51 + 2) / 3, 2)


# ------------------------------------------------------------------------------------------------- words and prose
@pytest.mark.parametrize("text, words", [
    ("", 0),
    ("one two  three\nfour", 4),
    ("a · b — 3 `x @ w`", 5),
    ("GPU's 4096² x-ray (µs) → ✓ ...", 4),
])
def test_count_words(text, words):
    assert ls.count_words(text) == words


def test_prose_leaves_out_code_tables_tags_urls_and_heading_marks():
    markdown = ("# 01 · Title\n\n[![Open in Colab](https://b.svg)](https://colab)\n\nRead [the notes](https://x.org) "
                "and <b>this</b>.\n\n| | |\n|---|---|\n| **Time** | about 30 minutes |\n\n```python\nx = 1\n```\n"
                "> Quoted `<b>kept</b>`.")
    assert ls.prose(markdown) == "01 · Title\n\nRead the notes and this.\n\nQuoted `<b>kept</b>`."


def test_main_line_words_leave_out_going_deeper_boxes_but_sentences_count_them():
    markdown = ("Main line here.\n\n<details><summary>Going deeper: more</summary>\n\nIn the box. Two.\n</details>\n\n"
                "After it.")
    main, boxes = ls.split_details(markdown)
    assert ls.count_words(ls.prose(main)) == 5
    stats = ls.lesson_stats(v4.new_notebook(cells=[v4.new_markdown_cell(markdown)]))
    assert stats["words"] == 5 and stats["sentences"] == 5  # main, summary, two in the box, after


def test_stated_and_estimated_minutes():
    first = "# 02 · T\n\n| | |\n|---|---|\n| **You will** | learn 3 things |\n| **Time** | about 40 minutes |"
    cells = [v4.new_markdown_cell(first), v4.new_markdown_cell("word " * 240),
             v4.new_code_cell("setup()", metadata={"tags": ["remove-cell"]}), v4.new_code_cell("x = 1"),
             v4.new_code_cell("y = 2")]
    stats = ls.lesson_stats(v4.new_notebook(cells=cells))
    assert stats["stated_min"] == 40
    assert stats["words"] == 2 + 240  # the title's "02" and "T"; the table is left out
    assert stats["est_min"] == round(242 / 120 + 2, 1)  # two code cells count, the remove-cell does not
    assert ls.stated_minutes("| **Time** | about 40 minutes; the two optional appendices about 15 more |") == 40
    assert ls.stated_minutes("no table") is None


# ------------------------------------------------------------------------------------------------------------ code
@pytest.mark.parametrize("source, lines", [
    ("y = x @ w", 1),
    ("@torch.no_grad()\ndef f(x):\n    return x", 0),
    ('x = torch.ones(3, device="cuda")', 1),
    ('x = torch.ones(3, device="cpu")', 0),
    ('print("wait_event and synchronize")  # torch.cuda', 0),
    ("s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    y = x.to('cuda:1', non_blocking=True)", 3),
    ("e.record(); s.wait_event(e)\nt.record_stream(s)\nh = t.pin_memory()\ntorch.cuda._sleep(10)", 4),
    ("%timeit torch.mm(a, b)\nz = torch.mm(a, b)", 1),
    ("def f(:\n    torch.cuda.synchronize()", 1),  # not Python: matched line by line
])
def test_gpu_lines(source, lines):
    assert ls.gpu_lines(source) == lines


def test_gpu_lines_skip_remove_cell():
    nb = v4.new_notebook(cells=[v4.new_code_cell("x.cuda()", metadata={"tags": ["remove-cell"]}),
                                v4.new_code_cell("x.cuda()\ny = 1")])
    assert ls.lesson_stats(nb)["gpu_lines"] == 1


def test_hidden_experiments_are_runs_by_name_only():
    sources = ['live = run.measure("d2l", verbose=False) or run.measure_cpu("d2l")',
               "ref = run.reference('race')\ntrace = run.reference_trace('race')",
               'mine = run.explore("branches", rows=64)',
               'page = run.measure({"serial": serial}, setup, name="pipeline")',
               "got = run.measure(step, rows=2)",
               '# run.measure("in_a_comment")']
    assert ls.hidden_experiments(sources) == {"d2l", "race", "branches"}


# ----------------------------------------------------------------------------------------------------- predictions
def _answer(source="print(guess_ms)", tags=("hide-output",), hidden=True):
    meta = {"tags": list(tags)}
    if hidden is not None:
        meta["jupyter"] = {"outputs_hidden": hidden}
    return v4.new_code_cell(source, metadata=meta)


def _predictions(*cells):
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("**Predict.** How long will it take?"), *cells])
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)  # a notebook as read from a file
    return ls.predictions(nb.cells)


@pytest.mark.parametrize("cells, guess, folded", [
    ([v4.new_code_cell("guess_ms = 3"), _answer()], True, True),
    ([v4.new_markdown_cell("Write it down."), v4.new_code_cell("x = 1\nguess_ms = None  # ms"), _answer()], True, True),
    ([v4.new_markdown_cell("a"), v4.new_markdown_cell("b"), v4.new_code_cell("guess_ms = 3"), _answer()], False, False),
    ([v4.new_code_cell("guess = 3"), _answer("check(guess)")], True, True),
    ([v4.new_code_cell("guess_ms == 3"), _answer()], False, False),
    ([v4.new_code_cell("my_guess = 3"), _answer("print(my_guess)")], False, False),
    ([v4.new_code_cell("guess_ms = 3")], True, False),
    ([v4.new_code_cell("guess_ms = 3"), _answer(tags=())], True, False),
    ([v4.new_code_cell("guess_ms = 3"), _answer(hidden=None)], True, False),
    ([v4.new_code_cell("guess_ms = 3"), _answer(hidden=False)], True, False),
    ([v4.new_code_cell("guess_ms = 3"), _answer(tags=("nbval-ignore-output",)), _answer()], True, False),
    ([v4.new_code_cell("guess_ms = 3"), v4.new_code_cell("other = 1"), _answer()], True, True),
])
def test_guess_cell_and_folded_answer(cells, guess, folded):
    assert _predictions(*cells) == [{"cell": 0, "guess": guess, "folded": folded}]


def test_predictions_are_counted_per_cell():
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("**Predict.** One. **Predict** two."),
                                v4.new_markdown_cell("*Predict* is not bold; **Measure.**"),
                                v4.new_markdown_cell("**Predict which**"), v4.new_code_cell("guess = 1"),
                                _answer("guess")])
    stats = ls.lesson_stats(nb)
    assert (stats["predictions"], stats["with_guess"], stats["folded"]) == (2, 1, 1)


# ------------------------------------------------------------------------------------- the ratchet on made-up figures
OVER = {"notebook": "01_x", "words": 1000, "sentences": 100, "mean": 20.0, "longest": 60, "over45": 2, "gpu_lines": 3,
        "hidden": 5, "predictions": 3, "with_guess": 1, "folded": 1, "stated_min": 50, "est_min": 60.0}
WITHIN = dict(OVER, words=800, mean=15.0, longest=40, over45=0, hidden=0, with_guess=3, folded=3, stated_min=40,
              est_min=30.0)


def test_a_lesson_as_bad_as_its_baseline_passes_and_a_better_one_too():
    assert ls.ratchet_failures({"00": OVER, "01": OVER}, {"00": OVER, "01": OVER}) == []
    better = dict(OVER, mean=19.9, longest=50, over45=1, words=999, hidden=4, with_guess=2, folded=2, est_min=55.0,
                  stated_min=45)
    assert ls.ratchet_failures({"00": better}, {"00": OVER}) == []


@pytest.mark.parametrize("change, label", [
    ({"mean": 20.01}, "mean sentence length"),
    ({"over45": 3}, "sentences over 45 words"),
    ({"longest": 61}, "longest sentence"),
    ({"words": 1001}, "main-line words"),
    ({"est_min": 60.1}, "estimated minutes"),
    ({"stated_min": 55}, "stated minutes"),
    ({"with_guess": 0}, "predictions without a guess cell"),
    ({"folded": 0}, "predictions without a folded answer"),
    ({"predictions": 4}, "predictions without a guess cell"),
    ({"hidden": 6}, "hidden experiments"),
    ({"stated_min": None}, "stated minutes"),
])
def test_a_lesson_worse_than_its_baseline_fails(change, label):
    failures = ls.ratchet_failures({"00": dict(OVER, **change)}, {"00": OVER})
    assert failures and all(f.startswith("00 (01_x): ") for f in failures)
    assert any(label in f and "worse than its baseline" in f for f in failures), failures


def test_worse_but_within_the_limit_passes():
    assert ls.ratchet_failures({"00": dict(WITHIN, mean=17.9, longest=45, words=900, est_min=40.0)},
                               {"00": WITHIN}) == []


def test_the_word_limit_is_lesson_00s_only():
    assert ls.ratchet_failures({"03": dict(WITHIN, words=5000)}, {"03": WITHIN}) == []
    assert ls.ratchet_failures({"00": dict(WITHIN, words=901)}, {"00": WITHIN}) != []


def test_estimated_time_is_held_to_the_stated_time():
    assert ls.ratchet_failures({"02": dict(WITHIN, est_min=40.1)}, {"02": WITHIN}) != []
    assert ls.limit_violations({"02": dict(WITHIN, est_min=40.1)}) == [
        "02 (01_x): estimated minutes (limit: the stated) 40.1 > 40"]


def test_a_lesson_without_a_baseline_must_meet_every_limit():
    assert ls.ratchet_failures({"09": WITHIN}, {}) == []
    failures = ls.ratchet_failures({"09": dict(WITHIN, mean=18.5)}, {})
    assert failures == ["09 (01_x): mean sentence length 18.5 > 18, and no baseline"]


def test_limit_violations_name_each_broken_limit():
    assert ls.limit_violations({"00": WITHIN}) == []
    broken = ls.limit_violations({"00": OVER})
    assert len(broken) == 9 and any("hidden experiments" in line for line in broken)


# ------------------------------------------------------------------------------------ named exceptions, and the rest
def _lesson_running(folder: Path, name: str, *calls: str) -> None:
    first = "# 07 · T\n\n| | |\n|---|---|\n| **Time** | about 10 minutes |\n\nA short text."
    _write(folder, name, v4.new_markdown_cell(first), *[v4.new_code_cell(call) for call in calls])


def test_named_exceptions_pass_the_check_and_are_not_counted(tmp_path, capsys):
    _lesson_running(tmp_path, "07_x.ipynb", 'tp = run.reference("torch_pipelining")',
                    'live = run.measure("torch_pipelining")\nww = run.reference("work_wait")')
    assert ls.all_stats(tmp_path)["07"]["hidden"] == 0
    assert ls.main(["--check", "--notebooks", str(tmp_path)]) == 0
    assert "every lesson within the limits" in capsys.readouterr().out


@pytest.mark.parametrize("lesson, call", [
    ("07", 'det = run.reference("asker_detached")'),  # a name no lesson lists
    ("06", 'ww = run.reference("work_wait")'),  # lesson 07's exception, in another lesson
])
def test_a_hidden_experiment_not_named_as_an_exception_fails_the_check(tmp_path, capsys, lesson, call):
    exception = 'tp = run.reference("torch_pipelining")' if lesson == "07" else "x = 1"  # counted in 07 only
    _lesson_running(tmp_path, f"{lesson}_x.ipynb", exception, call)
    assert ls.main(["--check", "--notebooks", str(tmp_path)]) == 1
    name = call.split('"')[1]
    assert f"{lesson} ({lesson}_x): hidden experiments (run by name, not named in EXCEPTIONS) 1 > 0: {name}" \
        in capsys.readouterr().out


def test_every_exception_is_run_by_name_in_its_lesson(stats):
    """An exception no lesson runs any more is taken off the list, so that the list stays the page's truth."""
    for lesson, names in ls.EXCEPTIONS.items():
        path = ls.lesson_notebooks()[lesson]
        sources = [ls._source(c) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert set(names) <= ls.hidden_experiments(sources), (lesson, set(names) - ls.hidden_experiments(sources))
        assert all(why for why in names.values())


# ---------------------------------------------------------------------------------------------------- command line
def _write(folder: Path, name: str, *cells) -> None:
    nbformat.write(v4.new_notebook(cells=list(cells)), folder / name)


def test_the_command_line(tmp_path, capsys):
    first = "# 00 · Hello\n\n| | |\n|---|---|\n| **Time** | about 10 minutes |\n\nA short text. It ends here."
    _write(tmp_path, "00_hello.ipynb", v4.new_markdown_cell(first), v4.new_code_cell("x = 1"))
    assert ls.main(["--check", "--notebooks", str(tmp_path)]) == 0
    assert "every lesson within the limits" in capsys.readouterr().out

    long = " ".join(["word"] * 50) + "."
    _write(tmp_path, "01_long.ipynb", v4.new_markdown_cell(first + "\n\n" + long), v4.new_code_cell("x.cuda()"))
    assert ls.main(["--check", "--long", "45", "--notebooks", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "01 cell 0 (50 words): word word" in out
    assert "01 (01_long): sentences over 45 words 1 > 0" in out and "01 (01_long): longest sentence" in out

    baseline = tmp_path / "baseline.json"
    assert ls.main(["--json", "--baseline", str(baseline), "--notebooks", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert ls.read_baseline(baseline) == printed
    assert printed["01"]["gpu_lines"] == 1 and printed["00"]["stated_min"] == 10


def test_the_table_has_a_row_per_lesson(stats):
    lines = ls.format_table(stats).splitlines()
    assert lines[0].split() == [head for _, head, _ in ls.COLUMNS]
    assert [line.split()[0] for line in lines[1:]] == sorted(ls.lesson_notebooks())
