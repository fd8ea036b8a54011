"""Grades no notebook can change: each answer is checked again in a fresh Python process, by a checker bound first."""
from __future__ import annotations

import ast
import builtins
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

#: The line a grading process ends its output with, before its result.
MARK = "asynclab-grade:"

_IMPORT = re.compile(r"^(import \S+|from \S+ import .+)$")

#: Seconds one graded check may run (a check takes seconds; an answer that never returns scores zero).
TIMEOUT_S = 300


@dataclass(frozen=True)
class Grade:
    """One exercise's grade: right or not, and the checker's verdict (or why there is none)."""

    right: bool
    message: str


def setup_code(cells: list[dict], before: int | None = None, needs: str = "") -> str:
    """The set-up a learner's kernel has at cell ``before`` of a notebook: its code cells up to the one that calls
    ``al.start``, every import line of the code cells after it (where a checker's types come from), and the earlier
    lesson cells that define what the code ``needs`` uses (an answer that reads a figure the lesson printed), with
    what those cells use in turn. Cells that call ``al.check`` are never among them.

    Example:
        >>> cells = [{"cell_type": "code", "source": "import asynclab as al\\nal.start(3)"},
        ...          {"cell_type": "code", "source": "import torch\\nx = 1"},
        ...          {"cell_type": "code", "source": "y = 2"}]
        >>> print(setup_code(cells, needs="answer = x + 1"))
        import asynclab as al
        al.start(3)
        import torch
        import torch
        x = 1
    """
    code = ["".join(c["source"]) for c in cells[:before] if c["cell_type"] == "code"]
    start = next((i for i, cell in enumerate(code) if "al.start(" in cell), None)
    if start is None:
        raise ValueError("the notebook has no cell that calls al.start(...)")
    imports = [line for cell in code[start + 1:] for line in cell.splitlines() if _IMPORT.match(line)]
    return "\n".join([*code[:start + 1], *dict.fromkeys(imports), *_defining_cells(code[start + 1:], needs)])


def _names(code: str) -> tuple[set[str], set[str]]:
    """(names a piece of code defines, names it reads before or without defining them); empty if it does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set(), set()
    defined: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
    return defined, read - defined - set(dir(builtins))


def _defining_cells(code: list[str], needs: str) -> list[str]:
    """The cells of ``code`` (in order) that define a name ``needs`` reads, and those their own reads need."""
    _, wanted = _names(needs)
    chosen: list[int] = []
    for i in range(len(code) - 1, -1, -1):  # the last definition before the answer is the one it sees
        if "al.check(" in code[i]:
            continue
        defined, read = _names(code[i])
        if defined & wanted:
            chosen.append(i)
            wanted = (wanted - defined) | read
    return [code[i] for i in sorted(chosen)]


def check_in_fresh_process(setup: str, answer: str, check: str, timeout_s: float = TIMEOUT_S) -> Grade:
    """Run ``setup``, then the learner's ``answer``, then the ``al.check(...)`` call ``check`` in a new Python process,
    with the checker bound before the answer runs; the grade that process gives.

    Whatever the answer rebinds (``al.check``, ``asynclab.grading.checks.check``, the registry, torch's functions) cannot
    change the grade: the checker was taken first, and an answer that changed asynclab's or PyTorch's own code is
    graded not right. An answer that exits the process, or never returns, scores zero.

    Example:
        >>> check_in_fresh_process("import asynclab as al", "x = 0",
        ...                        'al.check("00.replayed_lessons", x)').right  # doctest: +SKIP
        False
    """
    job = json.dumps({"setup": setup, "answer": answer, "check": check})
    try:
        done = subprocess.run([sys.executable, "-m", "asynclab.grading.fresh"], input=job, capture_output=True, text=True,
                              timeout=timeout_s, env=dict(os.environ, MPLBACKEND="Agg"))
    except subprocess.TimeoutExpired:
        return Grade(False, f"the check did not finish within {timeout_s:g} s")
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Grade(False, f"the grading process ended without a grade ({tail[:200]})")
    result = json.loads(lines[-1][len(MARK):])
    return Grade(bool(result["right"]), str(result["message"]))


def _snapshot() -> dict[tuple[str, str], Any]:
    """Every function, class and module that asynclab's modules, torch, torch.cuda and torch.Tensor
    hold (their flags and caches change as they work; their code does not), and of all that the simulation patches
    (:data:`asynclab.sim.patches.TABLE`: the clocks, ``time.sleep``, ``timeit``, ``Thread.run``, the waits)."""
    import torch

    from asynclab.sim import patches

    ours = [(name, module) for name, module in list(sys.modules.items())
            if name == "asynclab" or name.startswith("asynclab.")]
    spaces = {name: vars(module) for name, module in ours}
    spaces.update({f"{name}.{key}": vars(value) for name, module in ours for key, value in list(vars(module).items())
                   if isinstance(value, type) and value.__module__ == name})  # their classes' methods too
    spaces.update({"torch": vars(torch), "torch.cuda": vars(torch.cuda), "torch.Tensor": vars(torch.Tensor)})
    watched = {(space, key): value for space, values in spaces.items() for key, value in list(values.items())
               if callable(value) or isinstance(value, type(sys))}
    for path, name in patches.replaced():
        owner = patches.owner_of(path)
        if owner is not None and hasattr(owner, name):
            watched[(path, name)] = getattr(owner, name)
    return watched


def _torchs_own_wrapping(now: Any, before: Any) -> bool:
    """Whether ``now`` is PyTorch's torch.compile guard around ``before`` (``torch._disable_dynamo``, which
    importing ``torch._dynamo`` puts around ``torch.manual_seed``): a check that imports it changes nothing."""
    import torch._compile

    code = getattr(now, "__code__", None)
    return getattr(now, "__wrapped__", None) is before and code is not None \
        and code.co_filename == torch._compile.__file__


def _altered(before: dict[tuple[str, str], Any]) -> list[str]:
    now = _snapshot()
    return sorted(f"{space}.{key}" for (space, key), was in before.items()
                  if now.get((space, key), was) is not was and not _torchs_own_wrapping(now[(space, key)], was))


def _arguments(check: str, namespace: dict) -> tuple[str, list]:
    """The exercise name and the answer values of an ``al.check("NN.name", ...)`` call, evaluated in the answer's
    namespace."""
    call = ast.parse(check, mode="eval").body
    if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant)):
        raise ValueError(f"not a check call: {check}")
    values = [eval(compile(ast.Expression(arg), "<graded>", "eval"), namespace) for arg in call.args[1:]]  # noqa: S307
    return call.args[0].value, values


def _exercise_of(check: str) -> str:
    """The exercise an ``al.check("NN.name", ...)`` call names ("" if it names none).

    Example:
        >>> _exercise_of('al.check("05.overlap_loop", overlapped)')
        '05.overlap_loop'
    """
    try:
        call = ast.parse(check, mode="eval").body
    except SyntaxError:
        return ""
    first = call.args[0] if isinstance(call, ast.Call) and call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""


def _grade_here(job: dict) -> dict[str, Any]:
    """In the grading process: set up, bind the checker, run the answer, check it (see check_in_fresh_process)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(job["setup"], "<set-up>", "exec"), namespace)  # noqa: S102 - the instructor's own set-up
    from asynclab.grading.checks import Verdict, exercises, load_lesson

    load_lesson(_exercise_of(job["check"]).split(".")[0])  # its lesson's checkers, before the answer can touch them
    checkers = exercises()
    before = _snapshot()
    try:
        exec(compile(job["answer"], "<answer>", "exec"), namespace)  # noqa: S102 - the learner's answer
        name, values = _arguments(job["check"], namespace)
    except Exception as err:  # noqa: BLE001
        return {"right": False, "message": f"the answer cell raised {type(err).__name__}: {err}"}
    if name not in checkers:
        return {"right": False, "message": f"no exercise {name!r}"}
    verdict = checkers[name](*values)
    changed = _altered(before)
    if changed:
        return {"right": False, "message": "the answer changed the course's or PyTorch's own code "
                                           f"({', '.join(changed[:3])}); the grade comes from the checker as shipped."}
    if not isinstance(verdict, Verdict):
        return {"right": False, "message": "the checker gave no verdict"}
    return {"right": verdict.right, "message": verdict.message if verdict.judged else str(verdict)}


def main() -> None:
    """``python -m asynclab.grading.fresh`` reads a job (JSON on stdin) and prints its grade, marked, as its last line."""
    job = json.loads(sys.stdin.read())
    result = _grade_here(job)
    sys.stdout.flush()
    os.write(1, f"\n{MARK}{json.dumps(result)}\n".encode())
    os._exit(0)  # nothing the answer left behind (atexit handlers, threads) runs after the grade


if __name__ == "__main__":
    main()
