"""The package's layout as a contract: layers that import only downward, no import cycles, no private names imported
across modules, and a trace toolkit at the bottom that imports neither torch nor anything above it. Read from the source (imports inside
functions included), so that a hidden import counts as much as a visible one."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import asynclab

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "asynclab"

#: The layers, bottom up: a module imports only from its own layer and those below it. The trace toolkit at the
#: bottom imports no torch; the GPUs (the machine's own and the simulated one) sit on it, then the course, then
#: grading, then the lessons and the command line.
LAYERS = [("asynclab.trace",), ("asynclab.gpu", "asynclab.sim"), ("asynclab.course",), ("asynclab.grading",),
          ("asynclab.lessons", "asynclab.cli", "asynclab")]


def layer_of(module: str) -> int:
    """The layer a module belongs to (its longest matching package prefix).

    Example:
        >>> layer_of("asynclab.trace.analysis.metrics"), layer_of("asynclab.sim.ops"), layer_of("asynclab.cli")
        (0, 1, 4)
    """
    best = max((p for ps in LAYERS for p in ps if module == p or module.startswith(p + ".")), key=len)
    return next(i for i, ps in enumerate(LAYERS) if best in ps)


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


def test_no_import_cycle():
    found = cycles(_edges())
    assert found == [], found


def test_every_module_imports_only_its_layer_and_those_below():
    upward = sorted((m, t) for m, targets in _edges().items() for t in targets
                    if layer_of(t) > layer_of(m) and t != "asynclab")  # the package's face: __version__, no imports
    assert upward == []


def test_the_package_imports_its_modules_by_their_names_of_today():
    """Short aliases (asynclab.metrics) are for learners' code, not the package's."""
    stale = sorted((m, mod) for m in MODULES for mod, name in _imports(m) if mod.startswith("asynclab.")
                   and mod not in MODULES and f"{mod}.{name}" not in MODULES)
    assert stale == []


@pytest.mark.parametrize("short", sorted(asynclab.ALIASES))
def test_a_short_name_is_an_alias_of_the_module_where_it_lives(short):
    home = importlib.import_module(f"asynclab.{asynclab.ALIASES[short]}")
    assert importlib.import_module(f"asynclab.{short}") is home
    assert callable(getattr(asynclab, short)) or getattr(asynclab, short) is home


def test_only_the_short_names_are_aliases():
    """The flat names of before the layers that no lesson uses are retired: each module has its name and at most one
    short alias."""
    for retired in ("traceio", "tracebuild", "tracemodel", "simcuda", "simdevice", "simops", "hostreads", "idle"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"asynclab.{retired}")
        with pytest.raises(AttributeError):
            getattr(asynclab, retired)
    assert len(set(asynclab.ALIASES.values())) == len(asynclab.ALIASES)


def test_an_alias_leaves_the_function_of_that_name_in_place():
    import asynclab.diagnose  # noqa: F401 - as a learner may write it
    import asynclab.record  # noqa: F401

    assert callable(asynclab.diagnose) and callable(asynclab.record)


def test_no_private_name_is_imported_from_another_module():
    private = [(m, mod, name) for m in MODULES for mod, name in _imports(m)
               if mod.startswith("asynclab") and name and name.startswith("_") and not name.startswith("__")]
    assert private == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) == 0))
def test_the_trace_toolkit_imports_neither_torch_nor_anything_above_it(module):
    outside = {mod for mod, _ in _imports(module)
               if mod.split(".")[0] == "torch" or (mod.startswith("asynclab") and layer_of(mod) > 0)}
    assert outside == set(), f"{module} imports {sorted(outside)}"


#: Module names whose attributes only asynclab.sim.patches may assign.
_PATCHED_ROOTS = {"torch", "time", "timeit", "threading"}


def _patches_made(source: str) -> list[str]:
    """Assignments to an attribute of torch, time, timeit or threading (``time.sleep = ...``) and ``setattr`` calls on
    them, in a module's source."""
    def rooted(node: ast.AST) -> bool:
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in _PATCHED_ROOTS

    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        found += [ast.unparse(t) for t in targets if isinstance(t, ast.Attribute) and rooted(t.value)]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and node.args \
                and rooted(node.args[0]):
            found.append(ast.unparse(node))
    return found


def test_the_patch_finder_finds_assignments_and_setattr():
    source = "import time, torch\ntime.sleep = f\nsetattr(torch.cuda, 'x', 1)\nself.rate = 2\n"
    assert _patches_made(source) == ["time.sleep", "setattr(torch.cuda, 'x', 1)"]


def test_torch_and_the_standard_library_are_patched_in_one_module():
    made = {m: _patches_made(path.read_text()) for m, path in MODULES.items() if m != "asynclab.sim.patches"}
    assert {m: found for m, found in made.items() if found} == {}


# -- sizes, constants and run-time state -----------------------------------------------------------------------------
#: The longest a module and a class may be (lines, docstrings included): past these a reader can't hold one in mind.
MODULE_LINES, CLASS_LINES = 700, 350


def test_no_module_is_over_700_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert long == {}


def _classes(source: str) -> dict[str, int]:
    """Each class of a module's source (nested ones too, by their dotted name) and its length in lines."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                out[prefix + child.name] = child.end_lineno - child.lineno + 1
                visit(child, prefix + child.name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, prefix + child.name + ".")
    visit(ast.parse(source), "")
    return out


def test_the_class_measure_counts_each_class_and_nested_ones():
    source = "class A:\n    x = 1\n\n    class B:\n        y = 2\n\ndef f():\n    class C:\n        pass\n"
    assert _classes(source) == {"A": 5, "A.B": 2, "f.C": 2}


def test_no_class_is_over_350_lines():
    long = {f"{m}.{c}": n for m, p in MODULES.items() for c, n in _classes(p.read_text()).items() if n > CLASS_LINES}
    assert long == {}


def _constants(source: str) -> dict[str, str]:
    """A module's constants: its top-level names in capitals (``GPU_GAP_US = 5.0``), with their values' source."""
    out = {}
    for node in ast.parse(source).body:
        pairs = ([(t, node.value) for t in node.targets] if isinstance(node, ast.Assign)
                 else [(node.target, node.value)] if isinstance(node, ast.AnnAssign) and node.value else [])
        out |= {t.id: ast.unparse(v) for t, v in pairs
                if isinstance(t, ast.Name) and t.id.isupper() and not t.id.startswith("_")}
    return out


def duplicated_constants(constants: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Constants defined in two modules, by name: the modules that define each. The lessons' own settings
    (``LESSON``, ``EXPERIMENTS``, ``LATE_MS``...) are each lesson's and may share a name across lessons; a lesson's
    constant that a module of the library defines with the same value is a duplicate.

    Example:
        >>> duplicated_constants({"asynclab.trace.a": {"GAP_US": "5.0"}, "asynclab.trace.b": {"GAP_US": "5.0"},
        ...                       "asynclab.lessons.x.e": {"LESSON": "'01'"}, "asynclab.lessons.y.e": {"LESSON": "'02'"}})
        {'GAP_US': ['asynclab.trace.a', 'asynclab.trace.b']}
    """
    def lesson(m: str) -> bool:
        return m.startswith("asynclab.lessons.")

    out = {}
    for name in sorted({n for values in constants.values() for n in values}):
        where = sorted(m for m, values in constants.items() if name in values)
        library = [m for m in where if not lesson(m)]
        values = {constants[m][name] for m in library}
        copied = [m for m in where if lesson(m) and constants[m][name] in values]
        if len(library) > 1 or (library and copied):
            out[name] = sorted(library + copied)
    return out


def test_no_constant_is_defined_in_two_modules():
    constants = {m: _constants(p.read_text()) for m, p in MODULES.items()}
    assert duplicated_constants(constants) == {}


#: Calls that make a container (or a per-thread or per-call state) a module may keep and change at run time.
_MUTABLE_CALLS = {"list", "dict", "set", "defaultdict", "OrderedDict", "deque", "Counter", "count", "local",
                  "WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}
_MUTATORS = {"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update", "add", "discard",
             "setdefault", "appendleft", "move_to_end"}


def changed_at_run_time(source: str) -> list[str]:
    """The module-level containers a module changes at run time: a top-level name bound to a list, dict or set (or a
    counter, a ``threading.local``, an instance of one of its classes) that a function appends to, assigns into,
    advances or rebinds (``global``), and an instance of one of its classes whose methods change it.

    Example:
        >>> changed_at_run_time("_SEEN = []\\nRULES = {}\\nFIXED = {'a': 1}\\nclass R:\\n    pass\\nNOW = R()\\n"
        ...                     "def f(x):\\n    _SEEN.append(x)\\n    RULES[x] = 1\\n    NOW.stack[-1] = x\\n"
        ...                     "    return FIXED[x]\\n")
        ['NOW', 'RULES', '_SEEN']
        >>> changed_at_run_time("class Running:\\n    def __init__(self):\\n        self.stack = []\\n"
        ...                     "    def push(self, x):\\n        self.stack.append(x)\\nRUNNING = Running()\\n")
        ['RUNNING']
    """
    tree = ast.parse(source)
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}

    def mutable(value: ast.AST) -> bool:
        if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
            return True
        func = value.func if isinstance(value, ast.Call) else None
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return name in _MUTABLE_CALLS or name in classes

    top = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
           and mutable(node.value) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
           if isinstance(t, ast.Name)}
    def root(node: ast.AST) -> str | None:  # RUNNING for RUNNING.stack[-1]: the name a chain of parts starts from
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) and node.id in top else None

    changed = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
               and getattr(getattr(node.value, "func", None), "id", None) in _changing_classes(tree)
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            changed |= top & set(node.names)
        elif isinstance(node, ast.Call):
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr in _MUTATORS and root(func.value):
                changed.add(root(func.value))
            if getattr(func, "id", None) == "next" and args and root(args[0]):
                changed.add(root(args[0]))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            changed |= {root(t) for t in targets if isinstance(t, (ast.Subscript, ast.Attribute)) and root(t)}
    return sorted(changed)


def _changing_classes(tree: ast.Module) -> set[str]:
    """The module's classes whose methods (``__init__`` aside) change their instance: assign to ``self.x``, into it,
    or call a mutator on it (``self.stack.append``). A module-level instance of one is state changed at run time."""
    def changes_self(node: ast.AST) -> bool:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            return any(isinstance(t, (ast.Attribute, ast.Subscript)) and _rooted_in(t, "self") for t in targets)
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS
                and _rooted_in(node.func.value, "self"))

    return {c.name for c in tree.body if isinstance(c, ast.ClassDef)
            and any(changes_self(n) for f in c.body if isinstance(f, ast.FunctionDef) and f.name != "__init__"
                    for n in ast.walk(f))}


def _rooted_in(node: ast.AST, name: str) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and node.id == name


#: The most module-level containers the package may change at run time: its registries (exercises, operator rules,
#: tensor methods) and the one object that says which simulation is running.
RUN_TIME_CONTAINERS = 5


def test_few_module_level_containers_change_at_run_time():
    found = [f"{m}.{name}" for m, p in MODULES.items() for name in changed_at_run_time(p.read_text())]
    assert len(found) <= RUN_TIME_CONTAINERS, found
