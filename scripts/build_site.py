"""Build the book of the course (Jupyter Book 1) from the committed notebooks' stored outputs; nothing executes.

    python3 scripts/build_site.py build/site      # what `make site` runs; open build/site/index.html

The book's sources are laid out in ``build/site-src`` as the repository lays them out (``notebooks/``, ``docs/``,
``CONTRIBUTING.md``), so that each lesson page's Colab button and every link agree with the repository's, and the
pages no file holds are generated: the landing page (the lesson map from the registry, the README's account of what
runs where), the command reference (from the argument parser) and the Python API (from the docstrings).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

sys.path.insert(0, str(ROOT / "scripts"))

import book_pages  # noqa: E402
from asynclab.course import launch  # noqa: E402
from asynclab.course import registry  # noqa: E402

#: Files copied into the book as they are in the repository; links from them to anything else go to the repository.
PAGES = ("docs/instructors.md", "docs/predicted.md", "CONTRIBUTING.md")
#: The modules the API page documents, in the order a reader meets them.
#: The API page's sections, one per module a learner reaches: every module that holds a name of ``al.<name>`` is here
#: (tests/test_site.py holds it), with the experiment-cell harness, the devices and the simulated card beside them.
API_MODULES = ("trace", "trace.read.events", "trace.draw.timeline", "trace.analysis.metrics", "trace.analysis.diagnose",
               "trace.analysis.findings", "gpu.timing", "gpu.devices", "gpu.record", "trace.read.ranks", "gpu.parallel",
               "trace.pipeline.schedules", "gpu.hardware", "lessons", "course.begin", "course.lessonrun", "course.cells",
               "course.experiments", "course.registry", "course.notebooks", "sim.simulate", "grading.checks",
               "course.reference", "course.launch", "grading.classroom")
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s#]+)(#[^)\s]*)?\)")


def readme_section(heading: str) -> str:
    """The README's text under ``## heading`` (up to the next ``## ``), its links made to work from the book's root
    (a link to a page the book has stays in the book).

    Example:
        >>> "make test" in readme_section("Get it and run it") and "git clone" in readme_section("Get it and run it")
        True
    """
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if match is None:
        raise SystemExit(f"build_site: README.md has no section '## {heading}'")
    return book_links(match.group(1).strip(), ROOT / "README.md", set(PAGES))


def book_links(text: str, source: Path, pages: set[str]) -> str:
    """Keep a relative link that reaches a page or image of the book; send any other to the repository on GitHub.

    Example:
        >>> book_links("[x](tests/NBVAL_POLICY.md)", ROOT / "README.md", set())
        '[x](https://github.com/asynclab/asynclab/blob/main/tests/NBVAL_POLICY.md)'
    """
    def fix(match: re.Match) -> str:
        opening, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        if re.match(r"^[a-z]+:", target):
            return match.group(0)
        path = (source.parent / target).resolve().relative_to(ROOT).as_posix()
        if path in pages or path.startswith(("notebooks/", "figures/")):
            return match.group(0)
        kind = "tree" if (ROOT / path).is_dir() else "blob"
        return f"{opening}{launch.repository()}/{kind}/main/{path}{anchor})"

    return _LINK.sub(fix, text)


def lesson_map() -> str:
    """The lesson map as a Markdown table, from the registry: page, question, GPUs, reference, launch links."""
    rows = ["| # | lesson | GPUs for live runs | reference recorded on | open alone |", "|---|---|---|---|---|"]
    for item in registry.written():
        rows.append(f"| {item.number} | [{item.title}](notebooks/{item.notebook}) | {item.gpus} | "
                    f"{item.reference_gpu or 'nothing to record'} | [Colab]({launch.colab_url(item.notebook)}) · "
                    f"[Kaggle]({launch.kaggle_url(item.notebook)}) |")
    return "\n".join(rows)


def landing_page() -> str:
    """The book's first page: what the course is, the lesson map, what runs where, where to go next."""
    intro = (ROOT / "README.md").read_text().split("\n## ", 1)[0].split("\n", 1)[1].strip()
    return "\n\n".join([
        "# asynclab", book_links(intro, ROOT / "README.md", set()),
        "## Lessons", lesson_map(),
        "## What runs where", readme_section("What runs where"),
        "## Run it yourself", readme_section("Get it and run it"),
        "## More",
        "- [The `asynclab` command](cli.md) and [the Python API](api.md)\n"
        "- [Predicted against recorded](docs/predicted.md): the lessons' cells on the simulated card of their recordings\n"
        "- [The instructor's guide](docs/instructors.md): labs, machines, grading with nbgrader\n"
        "- [Contributing a lesson](CONTRIBUTING.md)\n"
        f"- [The repository]({launch.repository()}), with the workflows a course user copies in "
        f"[`.github/workflows`]({launch.repository()}/tree/main/.github/workflows)",
    ]) + "\n"


def cli_page() -> str:
    """The command reference: every subcommand's ``--help``, as the argument parser prints it."""
    from asynclab.cli import build_parser

    parser = build_parser()
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=78)  # the width a code box shows
    parts = ["# The `asynclab` command", "Printed by `asynclab --help` and `asynclab COMMAND --help`.",
             f"```text\n{parser.format_help()}```"]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in commands.items():
        sub.formatter_class = parser.formatter_class
        parts += [f"## `asynclab {name}`", f"```text\n{sub.format_help()}```"]
    return "\n\n".join(parts) + "\n"


def api_page() -> str:
    """The Python API: each module's docstrings through Sphinx autodoc."""
    import asynclab

    alias = {home: short for short, home in asynclab.ALIASES.items()}
    parts = ["# The Python API", "`import asynclab as al` gives the names below; each module can also be imported "
             "on its own, by where it lives or by its short name (`from asynclab import metrics`). Reading and drawing "
             "a trace never imports torch."]
    for name in API_MODULES:
        also = f" (`al.{alias[name]}`)" if name in alias else ""
        parts.append(f"## `asynclab.{name}`{also}\n\n```{{eval-rst}}\n.. automodule:: asynclab.{name}\n   :members:\n```")
    return "\n\n".join(parts) + "\n"


def config() -> str:
    """Jupyter Book's ``_config.yml``: nothing executes; the launch buttons come from ``[project.urls]``; the book's
    own Sphinx extension (``scripts/book_sphinx.py``) writes each of a page's scripts once."""
    return f"""\
title: asynclab
author: the asynclab authors
only_build_toc_files: true
execute:
  execute_notebooks: "off"
repository:
  url: {launch.repository()}
  branch: main
launch_buttons:
  colab_url: https://colab.research.google.com
html:
  use_repository_button: true
  home_page_in_navbar: false
  favicon: {book_pages.STATIC}/{book_pages.FAVICON}
sphinx:
  extra_extensions: [sphinx.ext.autodoc, sphinx.ext.napoleon]
  local_extensions:
    book_sphinx: {json.dumps(str(ROOT / "scripts"))}
  recursive_update: true
  config:
    # one search field, the sidebar's: the theme's header bar would add a second one on wide screens
    html_theme_options:
      navbar_persistent: []
    # the colour mode the theme's script starts in (without it, it logs an error on every page)
    html_context:
      default_mode: auto
    html_show_copyright: false
    autodoc_member_order: bysource
    nb_merge_streams: true
    myst_heading_anchors: 3
    html_static_path: [{book_pages.STATIC}]
    html_js_files: [asynclab.js]
    html_css_files: [asynclab.css]
"""


def toc() -> str:
    """Jupyter Book's ``_toc.yml``: the lessons in registry order, then the reference and the teaching pages."""
    lessons = "\n".join(f"      - file: notebooks/{item.folder}" for item in registry.written())
    return f"""\
format: jb-book
root: index
parts:
  - caption: Lessons
    chapters:
{lessons}
  - caption: Reference
    chapters:
      - file: cli
      - file: api
      - file: docs/predicted
  - caption: Teaching and contributing
    chapters:
      - file: docs/instructors
      - file: CONTRIBUTING
"""


def sources(folder: Path) -> Path:
    """Lay out the book's sources in ``folder`` (emptied first)."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "notebooks").mkdir(parents=True)
    static = folder / book_pages.STATIC
    book_pages.static_files(static)
    for item in registry.written():
        book_pages.lesson_page(item, ROOT / "notebooks" / item.notebook, folder / "notebooks" / item.notebook, static)
    shutil.copytree(ROOT / "figures", folder / "figures")
    for page in PAGES:
        (folder / page).parent.mkdir(parents=True, exist_ok=True)
        (folder / page).write_text(book_links((ROOT / page).read_text(), ROOT / page, set(PAGES)))
    for name, text in {"index.md": landing_page(), "cli.md": cli_page(), "api.md": api_page(),
                       "_config.yml": config(), "_toc.yml": toc()}.items():
        (folder / name).write_text(text)
    return folder


def build(out: Path) -> Path:
    """Build the book into ``out`` (its sources in ``out``'s sibling ``site-src``); the path of its index page."""
    src = sources(out.parent / "site-src")
    jb = Path(sys.executable).parent / "jupyter-book"
    if not jb.exists():
        raise SystemExit("build_site: Jupyter Book is not installed here: pip install -e '.[site]' (or make setup)")
    done = subprocess.run([str(jb), "build", str(src), "--builder", "html",
                           "--path-output", str(src), "--warningiserror", "--keep-going", "--quiet"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build_site: Jupyter Book failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src / "_build" / "html", out)
    return out / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="build/site", type=Path, help="where the site goes (build/site)")
    index = build(parser.parse_args(argv).out.resolve())
    print(f"build_site: wrote {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
