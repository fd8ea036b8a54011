"""Tests for asynclab.grading.refusal: the schedule simulator refuses to answer while an exercise checker runs a
learner's function, in every thread, and answers again afterwards; the simulator keeps no state for it."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from asynclab.grading.refusal import Refused, refusing
from asynclab.trace.pipeline import schedules
from asynclab.trace.pipeline.schedules import bubble_formula, simulate, simulate_trace


def test_a_refusal_reaches_every_thread_and_counts_what_was_caught():
    """A checker's refusal holds in a learner's worker threads too, and a refusal the learner caught still counts."""
    with ThreadPoolExecutor(max_workers=1) as pool, refusing("work it out") as refusal:
        with pytest.raises(Refused, match="work it out"):
            pool.submit(simulate, "gpipe", 2, 2).result()
        try:
            bubble_formula("gpipe", 2, 2)
        except Refused:
            pass
    assert refusal.asked == 2
    assert simulate("gpipe", 2, 2)  # answers again once the checker is done


def test_a_function_taken_beforehand_is_refused_too_and_refusals_nest():
    sim = simulate_trace  # taken before the checker ran
    with refusing("outer") as outer:
        with refusing("inner") as inner:
            with pytest.raises(Refused, match="inner"):
                sim("gpipe", 2, 2)
        with pytest.raises(Refused, match="outer"):
            schedules.schedule_ops("1f1b", 2, 3)
    assert (outer.asked, inner.asked) == (1, 1)
    assert len(sim("gpipe", 2, 2).events) == 8


def test_the_simulator_keeps_no_state_changed_at_run_time():
    """No module-level list or dict in the toolkit's simulator: the refusal lives in grading."""
    assert not [name for name, value in vars(schedules).items()
                if isinstance(value, (list, dict, set)) and name != "__all__" and not name.startswith("__")]
