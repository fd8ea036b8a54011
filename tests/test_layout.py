"""The package's layout as a contract: no import cycles, no private names imported across modules, and a trace
toolkit at the bottom that imports neither torch nor anything above it. Read from the source (imports inside
functions included), so that a hidden import counts as much as a visible one."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "asynclab"

#: The trace toolkit: reading, the event table, ranks, metrics, the timeline, schedules, idle time, diagnosis.
TOOLKIT = {"events", "traceio", "tracebuild", "tracemodel", "tracefile", "ranks", "trace", "intervals", "metrics",
           "timeline", "schedules", "idle", "findings", "collectives", "diagnose"}
#: The one cycle left: the simulated GPU's tensor, its operators and its methods (the next step of the layout
#: gives the simulator one registry of operator rules, which cuts it).
KNOWN_CYCLES = [{"asynclab.simdevice", "asynclab.simops", "asynclab.simmethods"}]


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str) -> list[tuple[str, str | None]]:
    """(imported module, name) for every import of the module, at any depth; name None for ``import x``."""
    out = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
    return out


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for mod, name in _imports(m):
            target = f"{mod}.{name}" if name and f"{mod}.{name}" in MODULES else mod
            if target in MODULES and target != m:
                edges[m].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative).

    Example:
        >>> sorted(map(sorted, cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})))
        [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_but_the_one_the_next_step_cuts():
    found = cycles(_edges())
    assert sorted(map(sorted, found)) == sorted(map(sorted, KNOWN_CYCLES)), found


def test_no_private_name_is_imported_from_another_module():
    private = [(m, mod, name) for m in MODULES for mod, name in _imports(m)
               if mod.startswith("asynclab") and name and name.startswith("_") and not name.startswith("__")]
    assert private == []


@pytest.mark.parametrize("module", sorted(TOOLKIT))
def test_the_trace_toolkit_imports_neither_torch_nor_anything_above_it(module):
    outside = {mod for mod, _ in _imports(f"asynclab.{module}")
               if mod.split(".")[0] == "torch" or (mod.startswith("asynclab.") and mod.split(".")[1] not in TOOLKIT)}
    assert outside == set(), f"asynclab.{module} imports {sorted(outside)}"
