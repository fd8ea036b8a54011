"""Learner answers get the verdict they deserve, each run in a fresh process as a notebook runs it (tests/answers.py).

Without a GPU the checkers run the answers on simulated GPUs; with one, on the GPU (lesson 06's with two).
"""
import collections

import pytest
import torch

import answers

ALL = answers.all_answers()
ON_GPU = torch.cuda.is_available()


@pytest.fixture(scope="module")
def outcomes():
    return answers.run_all(ALL)


@pytest.mark.parametrize("answer", ALL, ids=[a.id for a in ALL])
def test_answer_gets_its_verdict(answer, outcomes):
    here = answers.on_this_torch(answer)
    if isinstance(here, str):
        pytest.skip(here)
    problem = answers.judge(here, outcomes[answer.id], ON_GPU)
    assert problem is None, f"{answer.id}\n{answer.code}\n-> {problem}"


def test_every_exercise_with_a_function_answer_has_a_corpus():
    from asynclab.grading.checks import load_all

    registered = load_all()
    takes_function = {"01.no_sync_loop", "02.event_timer", "03.wait_stream_fix", "04.event_wait_fix",
                      "05.overlap_loop", "05.d2h_read", "06.overlap_copy", "07.step_time", "07.pick_m"}
    assert takes_function <= set(registered)
    counts = collections.Counter((a.exercise, a.expect) for a in ALL if not a.name.startswith("the solution"))
    for exercise in sorted(takes_function):
        assert counts[exercise, "right"] >= 10 and counts[exercise, "wrong"] >= 10, (exercise, counts)


def test_every_published_solution_is_tested():
    solved = {a.exercise for a in ALL if a.name.startswith("the solution")}
    assert {"03.wait_stream_fix", "04.event_wait_fix", "05.overlap_loop", "05.d2h_read", "06.overlap_copy",
            "07.step_time", "07.pick_m", "02.event_timer", "01.no_sync_loop"} <= solved


def test_the_corpus_format_is_enforced(tmp_path, monkeypatch):
    bad = tmp_path / "03.wait_stream_fix.py"
    bad.write_text("# %% rihgt: typo\nx = 1\n")
    with pytest.raises(ValueError, match="a header must read"):
        answers.corpus(bad)


def test_judge_fails_what_it_should():
    answer = answers.Answer("03.x", "wrong", "stale", "demo", "", "")
    assert answers.judge(answer, [(True, "fine")], False).startswith("expected wrong")
    assert "should say" in answers.judge(answer, [(False, "other")], False)
    assert answers.judge(answer, [(False, "it was stale")], False) is None
    assert "blames the learner" in answers.judge(answer, [(False, "your function raised X")], False)
    assert answers.judge(answer, [], False) == "the cell called al.check no times"
    limit = answers.Answer("03.x", "limit", None, "demo", "", "")
    assert answers.judge(limit, [(True, "fine")], True) is None
    assert answers.judge(limit, [(False, "the simulated GPU does not cover x")], False) is None
    assert answers.judge(limit, [(True, "fine")], False).startswith("expected the simulation's limit")
