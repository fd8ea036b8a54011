"""Every experiment cell's code is the code its recording ran: the fingerprint in ``reference/cells.json`` matches the
functions the cell passes to ``run.measure`` or ``run.query`` (with the notebook's functions they call), read from the
notebook."""
from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from asynclab.course import cells, registry
from asynclab.course.lessonrun import LessonRun
from asynclab.gpu import hardware

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _defs(sources: list[str]) -> dict[str, str]:
    """The notebook's top-level functions as they stand after running these cells in order: name -> source."""
    out: dict[str, str] = {}
    for text in sources:
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef):
                out[node.name] = ast.get_source_segment(text, node)
    return out


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _dicts(sources: list[str]) -> dict[str, ast.Dict]:
    """The dict literals the cells so far assign to a name (``variants = {"a": a, ...}``), the last one winning."""
    found = {}
    for text in sources:
        for node in ast.parse(text).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                found.update({t.id: node.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _roles(literal: ast.Dict, dicts: dict[str, ast.Dict]) -> dict[str, str]:
    """``{role: function name}`` of a dict of workloads, with ``**other`` spread from a dict literal named earlier."""
    roles = {}
    for key, value in zip(literal.keys, literal.values):
        if key is None:  # {**other, ...}
            assert _name(value) in dicts, f"write {ast.unparse(value)!r} as a dict literal of functions in a cell above"
            roles.update(_roles(dicts[value.id], dicts))
        else:
            roles[key.value] = _name(value)
    return roles


def measure_calls(sources: list[str]) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """``(name, role -> function name, the notebook's functions at that cell)`` for each ``run.measure(code, ...)``
    with code of the cell (not an experiment's name), and each ``run.query(fn, name=...)``."""
    found = []
    for i, text in enumerate(sources):
        for node in ast.walk(ast.parse(text)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("measure", "query")
                    and node.args and not isinstance(node.args[0], ast.Constant)):
                continue
            first = node.args[0]
            literal = _dicts(sources[: i + 1]).get(_name(first)) if _name(first) else first
            try:
                roles = _roles(literal, _dicts(sources[: i + 1])) if isinstance(literal, ast.Dict) else {first.id: first.id}
            except (AssertionError, AttributeError):  # held against its recording below, where it fails by name
                roles = {"unreadable": f"write {ast.unparse(first)!r} as a dict literal of functions named in a cell"}
            keywords = {k.arg: k.value for k in node.keywords}
            setup = node.args[1] if len(node.args) > 1 else keywords.get("setup")
            if setup is not None and _name(setup):
                roles["setup"] = setup.id
            name = keywords["name"].value if "name" in keywords else next(iter(roles.values()))
            found.append((name, roles, _defs(sources[: i + 1])))
    return found


def _function_code(source: str):
    module = compile(source, "<cell>", "exec")
    return next(k for k in module.co_consts if hasattr(k, "co_names"))


def cell_fingerprint(roles: dict[str, str], defs: dict[str, str]) -> str:
    """What :func:`asynclab.course.cells.fingerprint` gives for these functions, from their sources alone."""
    sources = {role: defs[fn] for role, fn in roles.items()}
    named = set(roles.values())
    todo = list(named)
    while todo:
        fn = todo.pop()
        for used in sorted(cells.global_names(_function_code(defs[fn]))):
            if used in defs and used not in named:
                named.add(used)
                sources[f"uses {used}"] = defs[used]
                todo.append(used)
    return cells.source_fingerprint(sources)


def _lesson(path: Path):
    return registry.lesson(path.name[:2])


CASES = [(path, call) for path in NOTEBOOKS for call in measure_calls(_code_cells(path))]


def test_lessons_have_experiment_cells():
    assert {path.name[:2] for path, _ in CASES} >= {"01", "03", "05"}


@pytest.mark.parametrize("path,call", CASES, ids=[f"{p.name[:2]}-{c[0]}" for p, c in CASES])
def test_each_experiment_cell_matches_its_recording(path, call):
    name, roles, defs = call
    assert "unreadable" not in roles, f"{path.name}: cell {name!r}: {roles.get('unreadable')}"
    recording = cells.recorded(_lesson(path).reference_dir, name)
    assert recording is not None, f"{path.name}: cell {name!r} has no recording; record it on a GPU " \
                                  f"(scripts/gpu_check.sh --record --refresh {path.as_posix()})"
    assert recording["fingerprint"] == cell_fingerprint(roles, defs), (
        f"{path.name}: cell {name!r} differs from the code its recording ran: record it again on a GPU")
    assert recording["gpu"].startswith("NVIDIA"), recording["gpu"]
    assert not recording["ms"] or (_lesson(path).reference_dir / f"cell_{name}.json.gz").is_file()  # a query: no trace


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name[:2] for p in NOTEBOOKS])
def test_every_recording_has_its_cell(path):
    folder = _lesson(path).reference_dir
    recorded = json.loads((folder / cells.CELLS_FILE).read_text()) if (folder / cells.CELLS_FILE).is_file() else {}
    used = {name for name, _, _ in measure_calls(_code_cells(path))}
    assert set(recorded) <= used, f"{path.name}: recordings of no cell: {sorted(set(recorded) - used)}"


def test_a_changed_cell_no_longer_matches():
    sources = _code_cells(ROOT / "notebooks" / "05_copy_overlap.ipynb")
    name, roles, defs = next(c for c in measure_calls(sources) if c[0] == "pipeline")
    before = cell_fingerprint(roles, defs)
    changed = dict(defs, overlapped=defs["overlapped"].replace("x = x @ s.eye", "x = x @ s.eye @ s.eye"))
    assert changed["overlapped"] != defs["overlapped"]
    assert cell_fingerprint(roles, changed) != before
    comment = dict(defs, overlapped=defs["overlapped"].replace("# two GPU buffers", "# 2 buffers"))
    assert cell_fingerprint(roles, comment) == before  # a comment is not code
    _, page_roles, page_defs = next(c for c in measure_calls(sources) if c[0] == "pipeline_pageable")
    helper = dict(page_defs, setup=page_defs["setup"].replace("multiplications=3", "multiplications=4"))
    assert cell_fingerprint(page_roles, helper) != cell_fingerprint(page_roles, page_defs)  # setup_pageable calls setup


def test_the_harness_and_this_test_agree(tmp_path):
    text = ("import torch\n\ndef setup(n=4):\n    return torch.ones(n)\n\ndef helper(x):\n    return x * 2\n\n"
            "def work(x):  # a comment\n    return helper(x).sum()\n\ndef wrapped():\n    return setup(n=8)\n\n"
            "wave = lambda m: m  # a notebook's lambda, whose name is also an attribute below\n\n"
            "@torch.no_grad()\ndef decorated():\n    return helper(setup().wave)\n")
    module_path = tmp_path / "cellmod.py"
    module_path.write_text(text)
    spec = importlib.util.spec_from_file_location("cellmod", module_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    defs = _defs([text])
    assert cells.fingerprint({"w": mod.work}, mod.setup) == cell_fingerprint({"w": "work", "setup": "setup"}, defs)
    assert cells.fingerprint({"w": mod.work}, mod.wrapped) == cell_fingerprint({"w": "work", "setup": "wrapped"}, defs)
    assert cells.fingerprint({"w": mod.work}, mod.setup) != cells.fingerprint({"w": mod.helper}, mod.setup)
    # a decorated setup still reaches its helpers; an attribute (.wave) is not the notebook's function of that name
    assert cells.fingerprint({"w": mod.work}, mod.decorated) == cell_fingerprint({"w": "work", "setup": "decorated"}, defs)


# -- the harness: bad input, our limits, and the simulated run -----------------------------------------------------
def _setup():
    return torch.ones(1024, 1024, device="cuda")


def _square(x):
    return (x @ x).sum().item()


@pytest.mark.parametrize("what,setup,kwargs,message", [
    (123, None, {}, "measure needs a function, or a dict of name -> function"),
    ({"a": 1}, None, {}, "measure needs a function, or a dict of name -> function"),
    ({"a": _square}, 3, {}, "setup must be a function that builds what the code needs, not int"),
    ({"a": _square}, _setup, {"repeats": 0}, "repeats must be 1 to 100 and warmup 0 to 10"),
    ({"a": _square}, _setup, {"chunks": 4}, "measure takes no parameter 'chunks' with code of your own"),
])
def test_bad_input_gets_one_line(what, setup, kwargs, message):
    run = LessonRun(registry.lesson(5), hardware.Hardware())
    with pytest.raises((TypeError, ValueError), match=message.replace("(", r"\(").replace(")", r"\)")):
        run.measure(what, setup, name="t", **kwargs)


def test_a_call_the_simulation_does_not_cover_is_said_in_one_line_not_blamed_on_the_learner(capsys):
    def reaches_past(x):
        x @ x
        torch.cuda.Stream().device_type  # noqa: B018 - a stream attribute the model lacks (a name a GPU stream has)

    m = LessonRun(registry.lesson(5), hardware.Hardware()).measure({"a": reaches_past}, _setup, name="t")
    assert m.failed.startswith("not predicted here: the simulated GPU does not cover stream.device_type")
    assert str(m) == m.failed and "\n" not in m.failed
    m.claim("a claim", lambda m: True, lambda m: "")
    assert capsys.readouterr().out.startswith("n/a: a claim [not predicted here")
    assert m.failed in m.answer(1, "a", "a's time")


def test_code_that_queues_no_gpu_work_gets_one_line():
    m = cells.run_cell({"nothing": lambda x: None}, _setup, live=False, repeats=1)
    assert m.failed == "nothing to time: the code queued no work on the GPU"


def test_the_simulated_run_computes_values_when_asked_and_labels_itself():
    m = cells.run_cell({"square": _square}, _setup, live=False, card="H200", repeats=2, values=True)
    assert m.where == "simulated H200 (predicted)" and m.predicted
    assert m.returned["square"] == 1024.0 ** 3 and len(m.times["square"]) == 2
    assert m.trace.window(annotation="square").events["kind"].eq("compute").any()


def test_a_recording_beside_a_changed_cell_says_so(tmp_path):
    m = cells.run_cell({"square": _square}, _setup, live=False, repeats=1)
    cells.write_recording(tmp_path, "sq", m, "NVIDIA H200")
    recording = cells.recorded(tmp_path, "sq")
    assert recording["fingerprint"] == m.code and recording["gpu"] == "NVIDIA H200"
    assert cells.fingerprint({"square": _square}, _setup) != cells.fingerprint({"square": _setup}, _square)


def test_a_fingerprint_is_the_same_on_every_python():
    """Recorded on the GPU machine's Python, checked on CI's and a learner's: a syntax-tree dump that changes between
    Python versions (3.12 adds ``type_params``, 3.13 drops empty fields) would change it. The value is fixed here."""
    sources = {"setup": 'def setup(n=4, *, k=None):\n    return [f"{n!r}" for _ in range(k or n)]',
               "work": "async def work(s):\n    return s"}
    assert cells.source_fingerprint(sources) == "38b598fd686d9750"


def test_a_long_simulation_says_what_it_runs_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr(cells.SimulationProgress, "AFTER_S", 0.0)  # every run is "long"
    m = cells.run_cell({"square": _square}, _setup, live=False, repeats=2, warmup=1)
    err = capsys.readouterr().err
    assert "simulating 'square' (1 of 4) on the simulated H100" in err and "simulating 'square' (4 of 4)" in err
    assert err.rstrip().splitlines()[-1].lstrip("\r").startswith("simulated in ")
    assert m.ms["square"] > 0


def test_a_short_simulation_prints_nothing(capsys):
    cells.run_cell({"square": _square}, _setup, live=False, repeats=1, warmup=0)
    assert capsys.readouterr().err == ""


def test_a_settled_workload_is_simulated_no_further_but_one_that_varies_is():
    """On the simulated card, once two repeats took the same time and returned the same value, the remaining repeats
    are those (not simulated again); a workload whose time changes from repeat to repeat runs every repeat."""
    calls = {"steady": 0, "growing": 0}

    def setup():
        return torch.ones(1024, 1024, device="cuda")

    def steady(x):
        calls["steady"] += 1
        x @ x

    def growing(x):  # one more product each time: no two repeats alike
        calls["growing"] += 1
        for _ in range(calls["growing"]):
            x @ x

    m = cells.run_cell({"steady": steady, "growing": growing}, setup, live=False, repeats=6, warmup=1)
    assert calls == {"steady": 1 + 2 + 1, "growing": 1 + 6 + 1}  # warm-up, repeats run, the profiled run
    assert len(m.times["steady"]) == len(m.times["growing"]) == 6
    assert len(set(m.times["growing"])) == 6 and m.times["steady"][2:] == [m.times["steady"][1]] * 4
