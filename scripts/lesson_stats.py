#!/usr/bin/env python3
r"""Text and hands-on figures of each lesson notebook, and the limits they are held to.

    python3 scripts/lesson_stats.py [--json] [--long N] [--check] [--baseline PATH] [--notebooks DIR]

Prints one row per lesson (notebooks/NN_*.ipynb): words, sentences, mean and longest sentence, sentences over 45
words, GPU code lines, hidden experiments, predictions (with a guess cell, with a folded answer), stated and
estimated minutes. `--json` prints the same as JSON; `--long N` also prints every sentence over N words with its
cell index; `--check` prints one line per broken limit instead of the table, and exits 1 if there is one;
`--baseline PATH` writes the figures to PATH, the ratchet that tests/course/test_lesson_stats.py holds the lessons
to.

Definitions:

- Prose = the text of markdown cells, without fenced code blocks (``` ... ```), without HTML tags (keep the text
  inside them), without table rows (lines starting with `|`), without image/link URLs (keep link text), without
  headings' leading `#`. The first markdown cell's table (objectives etc.) is excluded as a table.
- "Main line" prose = prose outside `<details> ... </details>` blocks and outside optional appendices (`## Appendix`). "Going deeper" boxes are
  `<details><summary>...</summary> ... </details>` in markdown.
- Words: whitespace-separated tokens containing at least one letter or digit, in main-line prose.
- Sentences: split all prose (main line and boxes) into sentences at `.`, `?`, `!` followed by whitespace and an
  upper-case letter/digit/quote/backtick/`(`, or by end of paragraph; also a new bullet (`- `, `* `, `1. `) or a new
  paragraph starts a new sentence, and a colon followed by a newline. Do not split inside inline code spans
  (`...`), or at "e.g.", "i.e.", "vs.", "Fig.", "et al.", decimals like 3.5. Sentence length = words in it. Report
  mean sentence length and the longest sentence (its length; with `--long N` print every sentence over N words with
  its cell index).
- GPU code lines: lines of code cells (not tagged `remove-cell`) that touch the GPU: match `cuda`, `.to(`, `Stream`,
  `Event`, `synchronize`, `non_blocking`, `pin_memory`, `record_stream`, `wait_stream`, `wait_event`, `_sleep`,
  `torch.mm`, `@`, `matmul` etc. Keep the pattern list in one constant (here: `GPU_PATTERNS`).
- Hidden experiments: calls in code cells of the form `run.measure("name"...)`, `run.explore("name"...)`,
  `run.measure_cpu("name"...)`, `run.reference("name")`, `run.reference_trace("name")` with a string literal first
  argument: count distinct names, except the lesson's named exceptions (`EXCEPTIONS`: experiments that run in
  fresh processes, whose page names them and shows the script they run). `run.measure(fn, ...)` with a function
  defined in the cell is not hidden.
- Predictions: markdown cells containing `**Predict` (bold Predict). A prediction "has a guess cell" when one of the
  next two cells is a code cell whose source contains a line assigning a name that starts with `guess` (regex
  `^\s*guess\w*\s*=`, multiline). It "has a folded answer" when the first code cell after the guess cell that uses
  that guess name has the tag `hide-output` AND cell metadata `jupyter.outputs_hidden == True`.
- Stated time: the minutes in the first markdown cell's "**Time**" row ("about 40 minutes" → 40). Estimated time =
  main-line words / 120 + 1 minute per code cell not tagged remove-cell, except guess cells (cells that only
  assign guesses); optional appendices (from a `## Appendix` heading to the next `## ` heading) are not in the main
  line. Print both.

Limits (the target; the constants below): mean sentence length <= 18 words, no sentence over 45 words, lesson 00 at
most 900 main-line words, estimated time <= stated time and stated time <= 45 minutes, every prediction has a
guess cell and a folded answer, and no experiment is run by name unless `EXCEPTIONS` names it for that lesson.

Details of the reading, where the definitions leave a choice:

- A heading, a `<summary>` line and each bullet are sentences of their own; bullet markers are not words.
- Images are dropped with their alt text (a badge's "Open in Colab" is not prose); a link keeps its text.
- `<code>...</code>` reads as an inline code span. Emphasis marks are not text: a closing `*`, `_`, quote or
  bracket may sit between the `.`, `?` or `!` and the whitespace, and an opening `*` or `_` before the
  next sentence's first character. So a bold run-in label ends a sentence: "**Predict.** How long?" is two, the
  label a sentence of one word.
- A `<details>` block ends at its cell's end if it is not closed there.
- GPU patterns are matched in code with its comments and string literals blanked, save a device string such as
  `"cuda"` or `"cuda:1"`; `@` is the matrix-product operator only, not a decorator.
- A guess assignment is `guess...=` but not `guess... ==`; the folded answer is looked for with any guess name
  the guess cell assigns.
- The stated time is the first number in the Time row ("about 40 minutes; the two optional appendices about 15
  more" -> 40). The mean is rounded to 0.01 word, the estimated time to 0.1 minute.

The ratchet (`ratchet_failures`): a lesson passes a limit when it meets it, or when its figure is no higher than in
the baseline: the mean, the sentences over 45 words, the longest sentence, lesson 00's words, the predictions
without a guess cell and without a folded answer, the hidden experiments, the estimated and the stated minutes.
`--check` holds every lesson to the limits themselves, with no baseline.
"""
from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"

# The limits (the target every lesson is brought to).
MAX_MEAN_SENTENCE = 18  # words, mean over all prose
MAX_SENTENCE = 45  # words, no sentence longer
MAX_WELCOME_WORDS = 900  # main-line words of lesson 00
MAX_STATED_MINUTES = 45
WORDS_PER_MINUTE = 120
MINUTES_PER_CODE_CELL = 1

GPU_PATTERNS = (
    r"(?i:cuda)",  # torch.cuda.*, .cuda(), a "cuda" device string, CUDA_LAUNCH_BLOCKING
    r"\.to\(", r"Stream", r"Event", r"synchroniz", r"non_blocking", r"pin_memory", r"is_pinned",
    r"record_stream", r"wait_stream", r"wait_event", r"_sleep",
    r"\btorch\.(?:mm|bmm|addmm)\b", r"matmul",
    r"^\s*[^@\s].*@",  # the matrix-product operator (a decorator starts its line)
    r"\.cpu\(", r"\.item\(",  # a copy to the host, a sync
    r"(?i:nccl)", r"\bdist\.", r"\b(?:all_reduce|all_gather|isend|irecv|batch_isend_irecv)\b",
)
GPU_LINE = re.compile("|".join(f"(?:{p})" for p in GPU_PATTERNS))
HIDDEN_CALL = re.compile(
    r"""\brun\.(?:measure_cpu|measure|explore|reference_trace|reference)\(\s*[rRuU]?(["'])(.+?)\1""")
#: The experiments a lesson may run by name (lesson -> name -> why): each runs in fresh processes, so its code is a
#: script, not a cell; the page names it and prints the script it runs. Anywhere else the name counts as hidden.
EXCEPTIONS: dict[str, dict[str, str]] = {
    "01": {"async_error": "a kernel that faults leaves its process's CUDA context unusable: it runs in fresh ones"},
    "04": {"sanitizer": "the CUDA sanitizer is switched on when a process starts (TORCH_CUDA_SANITIZER=1)"},
    "07": {"torch_pipelining": "torchrun starts a fresh process per GPU, one rank each",
           "work_wait": "an NCCL all-reduce between ranks, under torchrun in the same processes"},
}
DEVICE_STRING = re.compile(r"""^[rRuU]?(["'])cuda(?::\d+)?\1$""")
GUESS = re.compile(r"^\s*(guess\w*)\s*=(?!=)", re.M)
PREDICT = "**Predict"
ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "fig.", "al.", "cf.")
FIGURES = ("words", "sentences", "mean", "longest", "over45", "gpu_lines", "hidden", "predictions", "with_guess",
           "folded", "stated_min", "est_min")

_FENCE = re.compile(r"^\s*```")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][^>]*>", re.S)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_END = re.compile(r"""[.?!][*_"'”’)\]]*\s+(?=[*_]*["'“‘`(A-Z0-9])""")
_COLON_NEWLINE = re.compile(r":[*_]*[ \t]*\n")


# ---------------------------------------------------------------------------------------------------------- prose
def split_details(markdown: str) -> tuple[str, str]:
    """(main line, boxes): the markdown outside and inside ``<details>`` blocks.

    >>> split_details("Main.\\n<details><summary>Deeper</summary>\\n\\nBox.\\n</details>\\nMore.")
    ('Main.\\n\\nMore.', '<details><summary>Deeper</summary>\\n\\nBox.\\n</details>')
    """
    main, boxes, depth, pos = [], [], 0, 0
    for m in re.finditer(r"<details\b[^>]*>|</details>", markdown):
        (boxes if depth else main).append(markdown[pos:m.start()])
        if m.group().startswith("</"):
            if depth:
                boxes.append(m.group())
            depth = max(depth - 1, 0)
        else:
            boxes.append(m.group())
            depth += 1
        pos = m.end()
        if not depth:
            boxes.append("\n\n")
    (boxes if depth else main).append(markdown[pos:])
    return "\n\n".join(s.strip("\n") for s in main if s.strip()), "".join(boxes).strip()


def prose(markdown: str) -> str:
    """Markdown's prose: no fenced code, tables, tags (their text kept), images, URLs or heading marks.

    Headings, summaries and bullets become paragraphs of their own.

    >>> prose("## A [link](http://x) `c`\\n| a | b |\\n<b>bold</b> ![img](i.png)\\n```\\ncode\\n```")
    'A link `c`\\n\\nbold'
    """
    text = re.sub(r"</?code>", "`", markdown)
    text = re.sub(r"</summary>|<details\b[^>]*>|</details>|<br\s*/?>|</?p>", "\n\n", text)
    text = _LINK.sub(r"\1", _IMAGE.sub("", _strip_tags(text)))
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append("")
        elif fenced or line.lstrip().startswith("|"):
            out.append("")
        elif re.match(r"\s*#+\s", line):
            out += ["", re.sub(r"^\s*#+\s+", "", line).strip(), ""]
        elif _BULLET.match(line):
            out += ["", _BULLET.sub("", line)]
        else:
            out.append(re.sub(r"^\s*>\s?", "", line))
    return re.sub(r"\n\s*\n\s*", "\n\n", "\n".join(out)).strip()


def _strip_tags(text: str) -> str:
    """``text`` without its HTML tags and comments, save those inside inline code spans."""
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]
    return _TAG.sub(lambda m: m.group() if any(a <= m.start() < b for a, b in spans) else "", text)


def count_words(text: str) -> int:
    """Whitespace-separated tokens with at least one letter or digit.

    >>> count_words("The `x @ w` product · takes 3.5 ms — **twice**.")
    8
    """
    return sum(1 for token in text.split() if any(ch.isalnum() for ch in token))


def _masked(paragraph: str) -> str:
    """``paragraph`` with the ``.?!:`` inside inline code spans replaced, so that no split falls there."""
    return _CODE_SPAN.sub(lambda m: re.sub(r"[.?!:]", "\0", m.group()), paragraph)


def _abbreviation_before(masked: str, end: int) -> bool:
    """Whether the word that ends at ``end`` (its last character is the ``.``) is an abbreviation."""
    word = masked[:end + 1].split()[-1].lower().lstrip("*_(\"'“‘")
    return word in ABBREVIATIONS


def split_sentences(text: str) -> list[str]:
    """The sentences of prose (as :func:`prose` gives it); see the module's docstring for the rules.

    >>> split_sentences("It ran in 3.5 ms. Then it stopped.")
    ['It ran in 3.5 ms.', 'Then it stopped.']
    >>> split_sentences("Call `torch.cuda.synchronize()`. Then e.g. this, vs. That one.")
    ['Call `torch.cuda.synchronize()`.', 'Then e.g. this, vs. That one.']
    """
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        masked, cuts = _masked(paragraph), [0]
        for m in _END.finditer(masked):
            if not _abbreviation_before(masked, m.start()):
                cuts.append(m.end())
        cuts += [m.end() for m in _COLON_NEWLINE.finditer(masked)]
        cuts = sorted(set(cuts)) + [len(paragraph)]
        for start, end in zip(cuts, cuts[1:]):
            sentence = " ".join(paragraph[start:end].split())
            if count_words(sentence):
                sentences.append(sentence)
    return sentences


# ----------------------------------------------------------------------------------------------------------- code
def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _visible_code(cells) -> list:
    return [c for c in cells if c["cell_type"] == "code" and "remove-cell" not in _tags(c)]


def blank_comments_and_strings(source: str, keep_strings: bool = False) -> str:
    """``source`` with comments (and, unless ``keep_strings``, string literals other than a device string) blanked.

    >>> blank_comments_and_strings('x.to("cuda")  # to the GPU\\nprint("wait_event")')
    'x.to("cuda")\\nprint(            )'
    """
    lines = [("" if ln.lstrip().startswith(("%", "!")) else ln) for ln in source.split("\n")]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return "\n".join("" if ln.lstrip().startswith("#") else ln for ln in lines)
    chars = [list(ln) for ln in lines]
    for tok in tokens:
        string = tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1)
        if tok.type == tokenize.COMMENT or (string and not keep_strings and not DEVICE_STRING.match(tok.string)):
            (r0, c0), (r1, c1) = tok.start, tok.end
            for row in range(r0, r1 + 1):
                line = chars[row - 1]
                lo, hi = (c0 if row == r0 else 0), (c1 if row == r1 else len(line))
                line[lo:hi] = [" "] * (hi - lo)
    return "\n".join("".join(c).rstrip() for c in chars)


def gpu_lines(source: str) -> int:
    """Lines of a code cell's source that touch the GPU (``GPU_PATTERNS``), comments and strings left out.

    >>> gpu_lines('y = x @ w\\ntorch.cuda.synchronize()\\nprint("Event")  # an Event\\n@decorator\\ndef f(): pass')
    2
    """
    return sum(1 for line in blank_comments_and_strings(source).splitlines() if GPU_LINE.search(line))


def hidden_experiments(sources: list[str], lesson: str | None = None) -> set[str]:
    """The names of the experiments that code cells run by name (``run.measure("name")`` and its kin), less the
    named exceptions of ``lesson`` (``EXCEPTIONS``).

    >>> sorted(hidden_experiments(['run.measure("a") or run.measure_cpu("a")', 'run.reference_trace("b")',
    ...                            'run.measure(step, rows=2)']))
    ['a', 'b']
    >>> sorted(hidden_experiments(['run.reference("work_wait")', 'run.measure("asker_detached")'], lesson="07"))
    ['asker_detached']
    >>> hidden_experiments(['run.reference("work_wait")'], lesson="06")  # an exception of lesson 07's only
    {'work_wait'}
    """
    names = set()
    for source in sources:
        names |= {m.group(2) for m in HIDDEN_CALL.finditer(blank_comments_and_strings(source, keep_strings=True))}
    return names - set(EXCEPTIONS.get(lesson or "", {}))


def predictions(cells) -> list[dict]:
    """Each prediction's markdown cell, whether a guess cell follows, and whether its answer is folded.

    >>> import nbformat.v4 as v4
    >>> check = v4.new_code_cell("print(guess_ms - 3)", metadata={"tags": ["hide-output"],
    ...                                                       "jupyter": {"outputs_hidden": True}})
    >>> predictions([v4.new_markdown_cell("**Predict.** How long?"), v4.new_code_cell("guess_ms = 0"), check])
    [{'cell': 0, 'guess': True, 'folded': True}]
    """
    out = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown" or PREDICT not in cell["source"]:
            continue
        guess_at = next((j for j in range(i + 1, min(i + 3, len(cells)))
                         if cells[j]["cell_type"] == "code" and GUESS.search(cells[j]["source"])), None)
        folded = False
        if guess_at is not None:
            names = "|".join(GUESS.findall(cells[guess_at]["source"]))
            user = next((c for c in cells[guess_at + 1:]
                         if c["cell_type"] == "code" and re.search(rf"\b(?:{names})\b", c["source"])), None)
            folded = (user is not None and "hide-output" in _tags(user)
                      and user.get("metadata", {}).get("jupyter", {}).get("outputs_hidden") is True)
        out.append({"cell": i, "guess": guess_at is not None, "folded": folded})
    return out


def stated_minutes(first_markdown: str) -> int | None:
    """The minutes of the "**Time**" row of a lesson's first markdown cell.

    >>> stated_minutes("| **Time** | about 40 minutes; the appendices about 15 more |")
    40
    """
    m = re.search(r"^\s*\|\s*\*\*Time\*\*\s*\|[^\d\n]*(\d+)", first_markdown, re.M)
    return int(m.group(1)) if m else None


# -------------------------------------------------------------------------------------------------------- lessons
def lesson_sentences(cells) -> list[tuple[int, str]]:
    """(cell index, sentence) for every sentence of a notebook's prose, main line and boxes.

    >>> box = "<details><summary>Box</summary>Deep.</details>"
    >>> lesson_sentences([{"cell_type": "markdown", "source": "Main. Line.\\n" + box}])
    [(0, 'Main.'), (0, 'Line.'), (0, 'Box'), (0, 'Deep.')]
    """
    out = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            main, boxes = split_details(cell["source"])
            out += [(i, s) for part in (main, boxes) for s in split_sentences(prose(part))]
    return out


def lesson_stats(nb, lesson: str | None = None) -> dict:
    """A notebook's figures (``FIGURES``), from an nbformat notebook (or its JSON as a dict); ``lesson`` ("07") says
    whose named exceptions (``EXCEPTIONS``) the hidden experiments leave out, and ``hidden_names`` lists the others.

    >>> import nbformat.v4 as v4
    >>> nb = v4.new_notebook(cells=[v4.new_markdown_cell("# T\\n\\n| **Time** | about 5 minutes |\\n\\nOne two."),
    ...                             v4.new_code_cell("x.cuda()")])
    >>> {k: v for k, v in lesson_stats(nb).items() if k in ("words", "sentences", "gpu_lines", "est_min")}
    {'words': 3, 'sentences': 2, 'gpu_lines': 1, 'est_min': 1.0}
    """
    cells = [{"cell_type": c["cell_type"], "source": _source(c), "metadata": c.get("metadata", {})}
             for c in nb["cells"]]
    markdown = [c["source"] for c in cells if c["cell_type"] == "markdown"]
    main = main_line(cells)
    words = sum(count_words(prose(split_details(c["source"])[0])) for c in main if c["cell_type"] == "markdown")
    lengths = [count_words(s) for _, s in lesson_sentences(cells)]
    code = _visible_code(cells)
    preds = predictions(cells)
    hidden = hidden_experiments([c["source"] for c in cells if c["cell_type"] == "code"], lesson)
    return {
        "words": words, "sentences": len(lengths),
        "mean": round(sum(lengths) / len(lengths), 2) if lengths else 0.0,
        "longest": max(lengths, default=0), "over45": sum(n > MAX_SENTENCE for n in lengths),
        "gpu_lines": sum(gpu_lines(c["source"]) for c in code),
        "hidden": len(hidden), "hidden_names": sorted(hidden),
        "predictions": len(preds), "with_guess": sum(p["guess"] for p in preds),
        "folded": sum(p["folded"] for p in preds),
        "stated_min": stated_minutes(markdown[0]) if markdown else None,
        "est_min": round(words / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * sum(
            not only_guesses(c["source"]) for c in _visible_code(main)), 1),
    }


APPENDIX = re.compile(r"^## Appendix\b", re.M)


def main_line(cells: list) -> list:
    """The cells of the lesson's main line: all but its optional appendices (from a ``## Appendix`` heading up to the
    next ``## `` heading that is not one), which the stated time leaves out.

    >>> cells = [{"cell_type": "markdown", "source": s} for s in ("## 1 · A", "## Appendix A · B", "x", "## Exercises")]
    >>> [c["source"] for c in main_line(cells)]
    ['## 1 · A', '## Exercises']
    """
    out, inside = [], False
    for cell in cells:
        if cell["cell_type"] == "markdown" and re.search(r"^## ", cell["source"], re.M):
            inside = bool(APPENDIX.search(cell["source"]))
        if not inside:
            out.append(cell)
    return out


def only_guesses(source: str) -> bool:
    """A guess cell: it only assigns guesses (``guess_x = None  # ...`` lines). Writing a guess is part of reading
    its prompt, so it takes no minute of its own in the estimate.

    >>> only_guesses("guess_a = None  # ms"), only_guesses("print(guess_a)")
    (True, False)
    """
    lines = [line for line in source.splitlines() if line.strip() and not line.strip().startswith("#")]
    return bool(lines) and all(GUESS.match(line) for line in lines)


def _source(cell) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def lesson_notebooks(directory: Path = NOTEBOOKS) -> dict[str, Path]:
    """The lesson notebooks of ``directory`` by lesson number ("00" ... "08").

    >>> lesson_notebooks()["00"].name
    '00_welcome.ipynb'
    """
    return {p.name[:2]: p for p in sorted(Path(directory).glob("[0-9][0-9]_*.ipynb"))}


def all_stats(directory: Path = NOTEBOOKS) -> dict[str, dict]:
    """Every lesson's figures, keyed by lesson number, each with its ``notebook`` name.

    >>> all_stats(Path("/nonexistent"))  # a folder without lessons; the lessons' are {"00": {"notebook": ...}, ...}
    {}
    """
    return {lesson: {"notebook": path.stem, **lesson_stats(json.loads(path.read_text()), lesson)}
            for lesson, path in lesson_notebooks(directory).items()}


# --------------------------------------------------------------------------------------------- limits and ratchet
class Check:
    """One limit: ``figure(row) <= limit(row)``; ``only`` names the one lesson it applies to; a ``ratchet_only``
    check has no limit of the course's, only the ratchet (never worse than the baseline), and ``--check`` skips it;
    ``detail(row)`` adds what a broken limit is made of (the hidden experiments' names)."""

    def __init__(self, name, label, figure, limit, only=None, ratchet_only=False, detail=None):
        self.name, self.label, self.figure, self.limit = name, label, figure, limit
        self.only, self.ratchet_only, self.detail = only, ratchet_only, detail

    def applies(self, lesson: str) -> bool:
        """Whether the check applies to ``lesson`` ("00" ... "08")."""
        return self.only is None or self.only == lesson

    def meets(self, row: dict) -> bool:
        """Whether a lesson's figures meet the limit (a missing figure or limit does not)."""
        value, limit = self.figure(row), self.limit(row)
        return value is not None and limit is not None and value <= limit


CHECKS = (
    Check("mean", "mean sentence length", lambda r: r["mean"], lambda r: MAX_MEAN_SENTENCE),
    Check("over45", f"sentences over {MAX_SENTENCE} words", lambda r: r["over45"], lambda r: 0),
    Check("longest", "longest sentence (words)", lambda r: r["longest"], lambda r: MAX_SENTENCE),
    Check("words", "main-line words", lambda r: r["words"], lambda r: MAX_WELCOME_WORDS, only="00"),
    Check("est_min", "estimated minutes (limit: the stated)", lambda r: r["est_min"], lambda r: r["stated_min"]),
    Check("stated_min", "stated minutes", lambda r: r["stated_min"], lambda r: MAX_STATED_MINUTES),
    Check("no_guess", "predictions without a guess cell", lambda r: r["predictions"] - r["with_guess"], lambda r: 0),
    Check("no_fold", "predictions without a folded answer", lambda r: r["predictions"] - r["folded"], lambda r: 0),
    Check("hidden", "hidden experiments (run by name, not named in EXCEPTIONS)", lambda r: r["hidden"], lambda r: 0,
          detail=lambda r: ", ".join(r.get("hidden_names") or [])),
)


def _name(lesson: str, row: dict) -> str:
    return f"{lesson} ({row['notebook']})" if row.get("notebook") else lesson


def limit_violations(stats: dict[str, dict]) -> list[str]:
    """One line per limit a lesson breaks (ratchet-only checks left out).

    >>> row = {"mean": 19.5, "over45": 0, "longest": 30, "words": 100, "est_min": 20, "stated_min": 30,
    ...        "predictions": 1, "with_guess": 1, "folded": 1, "hidden": 1, "hidden_names": ["race"]}
    >>> for line in limit_violations({"02": row}):
    ...     print(line)
    02: mean sentence length 19.5 > 18
    02: hidden experiments (run by name, not named in EXCEPTIONS) 1 > 0: race
    """
    out = []
    for lesson, row in stats.items():
        for check in CHECKS:
            if check.applies(lesson) and not check.ratchet_only and not check.meets(row):
                detail = check.detail(row) if check.detail else ""
                out.append(f"{_name(lesson, row)}: {check.label} {check.figure(row)} > {check.limit(row)}"
                           + (f": {detail}" if detail else ""))
    return out


def ratchet_failures(stats: dict[str, dict], baseline: dict[str, dict]) -> list[str]:
    """One line per check a lesson fails: it breaks the limit AND is worse than its baseline figure.

    A lesson without a baseline must meet every limit.

    >>> base = {"01": {"mean": 20.0, "over45": 2, "longest": 60, "words": 0, "est_min": 30, "stated_min": 30,
    ...                "predictions": 2, "with_guess": 0, "folded": 0, "hidden": 4}}
    >>> ratchet_failures({"01": dict(base["01"], mean=19.0)}, base)
    []
    >>> ratchet_failures({"01": dict(base["01"], longest=61)}, base)
    ['01: longest sentence (words) 61 > 45, and worse than its baseline 60']
    """
    out = []
    for lesson, row in stats.items():
        base = baseline.get(lesson)
        for check in CHECKS:
            if not check.applies(lesson) or check.meets(row):
                continue
            value = check.figure(row)
            was = check.figure(base) if base is not None else None
            if value is None or was is None or value > was:
                against = "no baseline" if was is None else f"worse than its baseline {was}"
                out.append(f"{_name(lesson, row)}: {check.label} {value} > {check.limit(row)}, and {against}")
    return out


def write_baseline(stats: dict[str, dict], path: Path) -> None:
    """Write the figures as the ratchet's baseline (JSON, one entry per lesson); :func:`read_baseline` reads it.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "baseline.json"
    >>> write_baseline({"00": {"mean": 12.5}}, path)
    >>> read_baseline(path)
    {'00': {'mean': 12.5}}
    """
    doc = {"about": "Each lesson's figures from scripts/lesson_stats.py --baseline: tests/course/test_lesson_stats.py "
                    "fails a lesson that breaks a limit and is worse than this. Lower a figure here as a lesson "
                    "improves (run the script again); never raise one.",
           "lessons": stats}
    Path(path).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def read_baseline(path: Path) -> dict[str, dict]:
    """The lessons' figures of a baseline file written by :func:`write_baseline` (example there)."""
    return json.loads(Path(path).read_text())["lessons"]


# ---------------------------------------------------------------------------------------------------------- output
COLUMNS = (("lesson", "lesson", "{}"), ("words", "words", "{}"), ("sentences", "sent", "{}"),
           ("mean", "mean", "{:.1f}"), ("longest", "longest", "{}"), ("over45", ">45", "{}"),
           ("gpu_lines", "gpu", "{}"), ("hidden", "hidden", "{}"), ("predictions", "pred", "{}"),
           ("with_guess", "guess", "{}"), ("folded", "folded", "{}"), ("stated_min", "stated", "{}"),
           ("est_min", "est", "{:.1f}"))


def format_table(stats: dict[str, dict]) -> str:
    """The fixed-width table, one row per lesson.

    >>> print(format_table({"00": dict.fromkeys(FIGURES, 1)}).splitlines()[0])
    lesson  words  sent  mean  longest  >45  gpu  hidden  pred  guess  folded  stated  est
    """
    rows = [[head for _, head, _ in COLUMNS]]
    for lesson, row in stats.items():
        row = {"lesson": lesson, **row}
        rows.append(["-" if row[key] is None else fmt.format(row[key]) for key, _, fmt in COLUMNS])
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)


def long_sentences(directory: Path, over: int) -> list[str]:
    """``lesson cell N (words): sentence`` for every sentence over ``over`` words.

    >>> long_sentences(Path("/nonexistent"), 45)  # a folder without lessons
    []
    """
    out = []
    for lesson, path in lesson_notebooks(directory).items():
        cells = [dict(c, source=_source(c)) for c in json.loads(path.read_text())["cells"]]
        out += [f"{lesson} cell {i} ({count_words(s)} words): {s}" for i, s in lesson_sentences(cells)
                if count_words(s) > over]
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module's docstring); returns the exit status.

    >>> main(["--check", "--notebooks", "/nonexistent"])  # no lessons, so no broken limit
    every lesson within the limits
    0
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--long", type=int, metavar="N", help="also print every sentence over N words, with its cell")
    p.add_argument("--check", action="store_true", help="print each broken limit; exit 1 if there is one")
    p.add_argument("--baseline", type=Path, metavar="PATH", help="write the figures to PATH as the ratchet's baseline")
    p.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="the folder of the lesson notebooks")
    args = p.parse_args(argv)
    stats = all_stats(args.notebooks)
    if args.json or not args.check:
        print(json.dumps(stats, indent=1, ensure_ascii=False) if args.json else format_table(stats))
    if args.long is not None:
        print(f"\nsentences over {args.long} words:")
        print("\n".join(long_sentences(args.notebooks, args.long)) or "none")
    if args.baseline:
        write_baseline(stats, args.baseline)
        print(f"wrote {args.baseline}", file=sys.stderr)
    if args.check:
        broken = limit_violations(stats)
        print("\n".join(broken) if broken else "every lesson within the limits")
        return 1 if broken else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
