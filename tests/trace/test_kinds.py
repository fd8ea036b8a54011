"""Tests for asynclab.trace.analysis.kinds: the one table of finding kinds, and the modules that read it."""
import pytest

pytest.importorskip("pandas")

from asynclab.trace.analysis import idle, whatif  # noqa: E402
from asynclab.trace.analysis.findings import CATALOGUE as KINDS, HOST_BOUND_KINDS  # noqa: E402
from asynclab.trace.analysis.kinds import FINDING_KINDS  # noqa: E402
from asynclab.trace.draw.palette import FINDING_COLORS  # noqa: E402


def test_each_kind_is_in_the_table_once_and_the_catalogue_reads_it():
    names = [k.name for k in FINDING_KINDS]
    assert len(names) == len(set(names)) and list(KINDS) == names
    assert all((KINDS[k.name].why, KINDS[k.name].fix, KINDS[k.name].lesson) == (k.why, k.fix, k.lesson)
               for k in FINDING_KINDS)
    assert HOST_BOUND_KINDS == tuple(k.name for k in FINDING_KINDS if k.host_bound)


def test_the_table_says_which_kinds_the_replay_fixes():
    assert {k.name for k in FINDING_KINDS if k.replayed} == set(whatif.TRANSFORMS) == set(whatif.REPLAYED_KINDS)


def test_the_table_names_a_public_classifier_of_idle_and_gives_each_drawn_kind_its_colour():
    for k in FINDING_KINDS:
        assert callable(getattr(idle, k.found_by.split(":")[0])), k.name
    assert FINDING_COLORS == {k.name: k.colour for k in FINDING_KINDS if k.colour is not None}
    assert "rank_skew" not in FINDING_COLORS
