"""Learner answers to the exercises, run as a notebook would run them: each in a fresh process, after the set-up.

Two sources of answers:

- the corpus, ``tests/answers/<exercise>.py``: cells written the way learners write them, each headed
  ``# %% right: ...``, ``# %% wrong: ...`` or ``# %% wrong "words the verdict must say": ...``, and
  ``# %% limit: ...`` for an answer that is right on a GPU but reaches past what the simulated GPU covers, and
  ``# %% raises "error text": ...`` for one whose code raises that error on a GPU too (the verdict says so);
- the published solutions: every ``<details><summary>Solution</summary>`` code block of every notebook,
  followed by the exercise's ``al.check(...)`` line when the block has none. They must be right.

A cell runs after its lesson's set-up (the notebook's code cells up to ``al.start`` and every import line before
the exercise), in a process forked from a server that has imported torch and nothing else of the run. Every
``al.check`` call in a cell is recorded, so a cell can check twice (a stream reused across checks).
"""
from __future__ import annotations

import json
import multiprocessing
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "answers"
NOTEBOOKS = ROOT / "notebooks"
_HEADER = re.compile(r'^# %% (right|wrong|limit|raises)(?: "([^"]+)")?: (.+)$')
_IMPORT = re.compile(r"^(import \S+|from \S+ import .+)$")


@dataclass(frozen=True)
class Answer:
    """One cell of learner code, what it must get, and the set-up it runs after."""

    exercise: str  # "03.wait_stream_fix"
    expect: str  # "right", "wrong", "limit" or "raises"
    says: str | None  # words the verdict must contain
    name: str
    code: str
    setup: str

    @property
    def id(self) -> str:
        return f"{self.exercise}: {self.expect}: {self.name}"


def _cells(notebook: Path) -> list[dict]:
    return json.loads(notebook.read_text())["cells"]


def notebook_of(exercise: str) -> Path:
    """The notebook of an exercise (``"03.x"`` -> ``notebooks/03_*.ipynb``)."""
    found = sorted(NOTEBOOKS.glob(f"{exercise.split('.')[0]}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"no single notebook for exercise {exercise}: {found}")
    return found[0]


def setup(notebook: Path, before: int | None = None) -> str:
    """The set-up a learner's kernel has when they reach cell ``before``: the code cells up to the one that calls
    ``al.start``, and every import line of the code cells after it."""
    cells = _cells(notebook)[:before]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    start = next(i for i, cell in enumerate(code) if "al.start(" in cell)  # the install cell, then the set-up
    imports = [line for cell in code[start + 1:] for line in cell.splitlines() if _IMPORT.match(line)]
    return "\n".join([*code[:start + 1], *dict.fromkeys(imports)])


def corpus(path: Path) -> list[Answer]:
    """The answers in one corpus file."""
    exercise = path.stem
    notebook = notebook_of(exercise)
    answers, head, lines = [], None, []

    def close() -> None:
        if head is not None:
            answers.append(Answer(exercise, head[0], head[1], head[2], "\n".join(lines).strip() + "\n",
                                  setup(notebook)))

    for line in path.read_text().splitlines():
        match = _HEADER.match(line)
        if match:
            close()
            head, lines = match.groups(), []
        elif line.startswith("# %%"):
            raise ValueError(f"{path.name}: a header must read '# %% right|wrong|limit [\"words\"]: name', not {line!r}")
        elif head is not None:
            lines.append(line)
    close()
    return answers


def solutions(notebook: Path) -> list[Answer]:
    """Every published solution of a notebook, with the check it answers."""
    cells, found, check = _cells(notebook), [], None
    for i, cell in enumerate(cells):
        text = "".join(cell["source"])
        if cell["cell_type"] == "code":
            checks = [line for line in text.splitlines() if line.startswith("al.check(")]
            check = checks[-1] if checks else check
            continue
        if "<summary>Solution</summary>" not in text:
            continue
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            code = block if "al.check(" in block else f"{block}\n{check}\n"
            exercise = re.search(r'al\.check\("([^"]+)"', code).group(1)
            found.append(Answer(exercise, "right", None, f"the solution in cell {i}", code, setup(notebook, i)))
    return found


def all_answers() -> list[Answer]:
    """The whole corpus and every notebook's solutions."""
    answers = [a for path in sorted(CORPUS.glob("*.py")) for a in corpus(path)]
    return answers + [a for nb in sorted(NOTEBOOKS.glob("*.ipynb")) for a in solutions(nb)]


def _run(answer: Answer) -> list[tuple[bool, str]] | str:
    """In the fresh process: run the set-up, then the answer; every verdict of al.check, or the error."""
    import contextlib
    import io
    import linecache

    import asynclab as al

    verdicts = []
    check = al.check

    def recording(*args, **kwargs):
        verdict = check(*args, **kwargs)
        verdicts.append((verdict.right, verdict.message))
        return verdict

    name = f"<answer {answer.id}>"
    linecache.cache[name] = (len(answer.code), None, answer.code.splitlines(True), name)
    namespace: dict = {}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(answer.setup, "<set-up>", "exec"), namespace)
            al.check = recording
            exec(compile(answer.code, name, "exec"), namespace)
    except Exception as err:  # noqa: BLE001 - reported as the answer's outcome
        return f"the cell raised {type(err).__name__}: {err}"
    finally:
        al.check = check
    return verdicts


#: Exercises whose checkers time work (wall clock, or overlap read off a trace): their answers run one at a time,
#: after the others, so that the answers running beside them do not load the machine (or the GPU) they measure.
#: The others' races are made certain by spin kernels, so they may share a GPU.
TIMED = {"00.cpu_timers_agree", "02.event_timer", "05.overlap_loop", "06.overlap_copy", "06.both_ways"}


#: What each answer's process has imported before it starts (it is forked from a process that imported these): what
#: every answer's notebook imports, and what the first check imports, once (torch._dynamo, which the meta kernels of
#: a few operators import, costs an answer without a GPU about 1 s, as a notebook's first check pays it once). Not
#: the lessons' checkers: an answer's process loads its own lesson, as a notebook does.
PRELOAD = ["torch", "torch._dynamo", "IPython", "matplotlib.pyplot", "pandas", "asynclab", "asynclab.grading.checks",
           "asynclab.grading.hostreads", "asynclab.course.lessonrun", "asynclab.sim.simulate"]


def _preload() -> list[str]:
    """:data:`PRELOAD`, less torch._dynamo on PyTorch before 2.4: there a process forked after that import cannot
    reach torch.cuda ("Cannot re-initialize CUDA in forked subprocess"), which a machine without a GPU must."""
    import torch

    old = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 4)
    return [m for m in PRELOAD if not (old and m == "torch._dynamo")]


def run_all(answers: list[Answer], processes: int | None = None, progress=None) -> dict[str, list[tuple[bool, str]] | str]:
    """Run every answer in a fresh process of its own; ``{answer id: its verdicts or its error}``.
    ``progress(answer, outcome)`` is called as each one ends."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_preload())
    parallel = processes or min(4, multiprocessing.cpu_count())
    outcomes = {}
    def done(answer: Answer, outcome) -> None:
        outcomes[answer.id] = outcome
        if progress is not None:
            progress(answer, outcome)

    others = [a for a in answers if a.exercise not in TIMED]
    with ctx.Pool(parallel, maxtasksperchild=1) as pool:  # leaving the block ends a process still stuck in an answer
        for a, pending in [(a, pool.apply_async(_run, (a,))) for a in others]:
            done(a, _outcome(pending))
    for a in (a for a in answers if a.exercise in TIMED):
        pool = ctx.Pool(1)  # one process at a time, each one gone before the next starts: nothing else runs beside it
        try:
            done(a, _outcome(pool.apply_async(_run, (a,))))
        finally:
            pool.terminate()
            pool.join()
    return outcomes


#: Seconds an answer may run (a check takes seconds): one that hangs is reported, and the others go on.
ANSWER_TIMEOUT_S = 180


def _outcome(pending) -> list[tuple[bool, str]] | str:
    try:
        return pending.get(timeout=ANSWER_TIMEOUT_S)
    except multiprocessing.TimeoutError:
        return f"the answer did not finish within {ANSWER_TIMEOUT_S} s (a check that hangs)"


def on_this_torch(answer: Answer) -> Answer | str:
    """The answer with the verdict it deserves on this PyTorch, or why this PyTorch cannot judge it (it lacks the
    feature the answer uses)."""
    import torch

    for feature, name, release in (("torch.Event(", "Event", "2.4"), ("torch.accelerator", "accelerator", "2.6")):
        if feature in answer.code and not hasattr(torch, name):
            return f"the answer uses torch.{name}, which needs PyTorch {release} or newer (this is {torch.__version__})"
    if ".as_subclass(" in answer.code and torch.__version__ < "2.4":
        return (f"PyTorch {torch.__version__} makes a new tensor type of a simulated GPU tensor without asking it "
                "(as_subclass), so the simulated GPU cannot keep it: the check says it cannot judge this here")
    if "torch.compile" in answer.code and not hasattr(torch.compiler, "set_stance"):
        return (f"PyTorch {torch.__version__} cannot run a compiled function as the Python it compiles "
                "(torch.compiler.set_stance, 2.6 and later): the check says it cannot judge this here")
    pins = ('to("cpu", non_blocking=True)', "pin_memory=True", ".pin_memory()")
    if answer.exercise in ("01.no_sync_loop", "08.quiet_logger") and any(p in answer.code for p in pins) \
            and torch.__version__ < "2.4":  # these two checks count host reads under a dispatch mode
        return (f"PyTorch {torch.__version__} makes a new tensor type of a copy to pinned memory while the check counts "
                "host reads (as_subclass under a dispatch mode): the check says it cannot judge this here")
    return answer


def judge(answer: Answer, outcome: list[tuple[bool, str]] | str, on_gpu: bool) -> str | None:
    """What is wrong with an answer's outcome (None: it got the verdict it deserves)."""
    if isinstance(outcome, str):
        return outcome
    if not outcome:
        return "the cell called al.check no times"
    expect = "right" if answer.expect == "limit" and on_gpu else answer.expect
    for right, message in outcome:
        if expect == "raises":
            if right or "your function raised" not in message or (answer.says or "") not in message:
                return f"expected the error a GPU raises ({answer.says}), got: {'Right' if right else 'Not yet'}: {message}"
            continue
        if "your function raised" in message:
            return f"a verdict blames the learner for code that runs on a GPU: {message}"
        if expect == "limit":
            if right or "simulated GPU does not cover" not in message:
                return f"expected the simulation's limit, got: {'Right' if right else 'Not yet'}: {message}"
        elif right != (expect == "right"):
            return f"expected {expect}, got: {'Right' if right else 'Not yet'}: {message}"
        if answer.says and expect == "wrong" and answer.says not in message:
            return f"the verdict should say {answer.says!r}: {message}"
    return None


def main() -> int:
    """``python3 tests/answers.py [EXERCISE ...]``: run the answers (all, or those of the exercises named) and print
    each one's outcome as it ends; exit status 1 if any got a verdict it does not deserve."""
    import sys
    import time

    import torch

    on_gpu, wanted = torch.cuda.is_available(), set(sys.argv[1:])
    chosen = [a for a in all_answers() if not wanted or a.exercise in wanted]
    bad, t0 = [], time.perf_counter()

    def show(answer: Answer, outcome) -> None:
        here = on_this_torch(answer)
        skipped = here if isinstance(here, str) else None
        problem = None if skipped else judge(here, outcome, on_gpu)
        bad.extend([answer.id] if problem else [])
        mark = "skip" if skipped else "FAIL" if problem else "ok  "
        print(f"{time.perf_counter() - t0:6.0f} s  {mark} {answer.id}" +
              (f"\n         {problem or skipped}" if problem or skipped else ""), flush=True)

    run_all(chosen, progress=show)
    print(f"{len(chosen) - len(bad)} of {len(chosen)} answers got the verdict they deserve"
          f" ({'on ' + torch.cuda.get_device_name() if on_gpu else 'simulated GPUs'})")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
