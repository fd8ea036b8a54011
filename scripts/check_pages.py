"""Check every page of the built book in a real browser (headless Chromium, driven by Playwright), as a phone and as a
desktop shows it:

- no page is wider than the window (``document.scrollingElement.scrollWidth <= innerWidth``);
- no page logs a JavaScript error, or fails to load one of its own files;
- no output of a notebook cell shows a warning, a traceback or a path of the machine that ran it;
- no figure is drawn so small that its smallest text is under 7 px high (a figure's box scrolls sideways instead);
- on the desktop, no cell's printed output (a verdict, a claim, a diagnosis, a table) scrolls sideways.

    python3 scripts/check_pages.py build/site                       # after `make site`; exits 1 on a problem
    python3 scripts/check_pages.py build/site --shots build/site-check --shoot index notebooks/07_pipeline_bubbles

Screenshots (``--shots``) are taken of the pages named with ``--shoot`` at each width: ``NAME-WIDTH.png`` (the top of
the page) and ``NAME-WIDTH-figure.png`` (its first figure, or else its first table). The book's pages link a few
images from other sites (the Colab and Kaggle badges); the check answers those requests itself with a blank image, so
that it runs without a network and judges only the book's own files.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The window widths checked: a phone (390 px, as an iPhone 12 to 15 reports) and a desktop.
WIDTHS = (390, 1280)
#: Flags for a closed network: no background connections, no first-run or sync traffic.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: What no cell output may show: a warning, a traceback, a path of the machine that ran the notebook.
LEAKS = {
    "a warning": re.compile(r"\b[A-Z]\w*Warning\b:|^\s*warnings\.warn\(", re.M),
    # Python's (an exception's output shows it too); not a stack a lesson prints on purpose (the CUDA sanitizer's)
    "a traceback": re.compile(r"Traceback \(most recent call last\)"),
    "a machine path": re.compile(r"/(?:site-packages|dist-packages)/|(?<![\w.])/(?:home|usr|opt|root|Users|tmp)/"),
}
#: Stored outputs that show one of LEAKS and may stay until the notebook is re-executed where that output can be
#: refreshed, each with its reason. An entry that no longer matches anything is itself reported, so that it is removed.
KNOWN_STORED_OUTPUT: dict[str, re.Pattern] = {}  # none now: lesson 08's sync-debug warning went with its GPU refresh
#: A figure's smallest text, in the image's own pixels: 9 pt (the timelines' MIN_FONT_PT) at the 100 dpi that notebooks
#: store figures at; and the least a reader must see of it, in CSS px.
FIGURE_TEXT_PX = 9.0 * 100 / 72
MIN_TEXT_PX = 7.0
#: Each figure image of a page: its file, its width as drawn (CSS px) and its own width (px).
_FIGURES = """els => els.filter(e => e.naturalWidth >= 300).map(e => [e.src.split("/").pop(),
  e.getBoundingClientRect().width, e.naturalWidth])"""
#: The start of each printed output (or table in one) that is wider than its box, so scrolls sideways.
_SCROLLING = """els => els.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim().slice(0, 60))"""
#: A blank image, the answer to a page's requests to other sites.
_BLANK_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
#: Finds the element that makes a page wider than the window: the deepest one whose hiding narrows the page.
_WIDEST = """() => {
  const page = document.scrollingElement, base = page.scrollWidth;
  let el = document.body, path = [];
  for (;;) {
    let found = null;
    for (const child of el.children) {
      const display = child.style.display;
      child.style.display = "none";
      const width = page.scrollWidth;
      child.style.display = display;
      if (width < base) { found = child; break; }
    }
    if (!found) break;
    el = found;
    path.push(el.tagName.toLowerCase() + (el.className && typeof el.className === "string"
              ? "." + el.className.trim().split(/\\s+/).join(".") : ""));
  }
  return {path: path.slice(-3).join(" > "), text: (el.textContent || "").trim().slice(0, 80)};
}"""


def find_chromium() -> str | None:
    """The Chromium to drive: ``$CHROMIUM`` if set, else ``chromium`` or ``chromium-browser`` on PATH (Debian's package
    ``chromium``); None when there is none."""
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve the folder ``site`` on a local port, quietly, for as long as the block runs; yields its base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def pages(site: Path) -> list[str]:
    """Every page of the built book, as paths relative to its root (``index.html``, ``notebooks/03_streams.html``)."""
    skip = ("_static/", "_sources/", "_images/", "_build/")
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not p.relative_to(site).as_posix().startswith(skip))


def output_problems(page: str, texts: list[str], allowed: dict[str, re.Pattern] | None = None) -> list[str]:
    """What the cell outputs ``texts`` of ``page`` show that a reader should not see, after the known stored outputs
    allowed for that page are taken out; and an allowance that matched nothing.

    Example:
        >>> for line in output_problems("a.html", ["PASS: 3.9x faster", "/usr/lib/x.py:3: UserWarning: careful"]):
        ...     print(line)
        a.html: an output shows a warning: /usr/lib/x.py:3: UserWarning: careful
        a.html: an output shows a machine path: /usr/lib/x.py:3: UserWarning: careful
        >>> output_problems("a.html", ["fine"], {"a.html": re.compile("gone")})
        ['a.html: the allowance for a known stored output matches nothing now: remove it from KNOWN_STORED_OUTPUT']
    """
    allowed = KNOWN_STORED_OUTPUT if allowed is None else allowed
    known = allowed.get(page)
    problems, used = [], False
    for text in texts:
        if known is not None:
            text, count = known.subn("", text)
            used = used or count > 0
        for what, pattern in LEAKS.items():
            found = pattern.search(text)
            if found:
                start = text.rfind("\n", 0, found.start()) + 1
                end = text.find("\n", found.end())
                line = text[start:end if end >= 0 else None].strip()
                problems.append(f"{page}: an output shows {what}: {line[:160]}")
    if known is not None and not used:
        problems.append(f"{page}: the allowance for a known stored output matches nothing now: remove it from "
                        "KNOWN_STORED_OUTPUT")
    return problems


def small_figures(where: str, figures: list[list[Any]]) -> list[str]:
    """The figures (``[file, drawn width, own width]``) whose smallest text is drawn under :data:`MIN_TEXT_PX`.

    Example:
        >>> small_figures("a.html at 390 px", [["t.png", 340.0, 741], ["u.png", 420.0, 741]])
        ['a.html at 390 px: figure t.png is drawn 340 px wide of its 741: its smallest text 5.7 px high (7 or more)']
    """
    out = []
    for name, drawn, own in figures:
        text = FIGURE_TEXT_PX * drawn / own
        if text < MIN_TEXT_PX - 0.05:
            out.append(f"{where}: figure {name} is drawn {drawn:.0f} px wide of its {own}: its smallest text "
                       f"{text:.1f} px high ({MIN_TEXT_PX:g} or more)")
    return out


def check_page(context: Any, base: str, page: str, width: int, shots: Path | None = None) -> list[str]:
    """Load one page in a browser context whose window is ``width`` px wide; its problems (empty if none), each one
    line naming the page and the width. With ``shots``, screenshots of it go there."""
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(f"JavaScript error: {err}"))
    tab.on("console", lambda msg: errors.append(f"console error: {msg.text}") if msg.type == "error" else None)
    tab.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url[len(base):]}") if r.status >= 400 else None)
    try:
        tab.goto(f"{base}/{page}", wait_until="load")
        tab.wait_for_timeout(200)  # the theme's scripts run after load
        where = f"{page} at {width} px"
        problems = [f"{where}: {e}" for e in errors]
        # a phone's browser zooms out to fit a page wider than the screen, and innerWidth then grows with it: the
        # window is the width asked for, or innerWidth where that is less
        wide, inner = tab.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        window = min(width, inner)
        if wide > window:
            culprit = tab.evaluate(_WIDEST)
            problems.append(f"{where}: {wide} px wide in a {window} px window, because of {culprit['path']} "
                            f"({culprit['text']!r})")
        problems += small_figures(where, tab.eval_on_selector_all("div.cell_output img", _FIGURES))
        if width == WIDTHS[-1]:  # the text of the outputs is the same at any width
            texts = tab.eval_on_selector_all("div.cell_output", "els => els.map(e => e.innerText)")
            problems += output_problems(page, texts)
            wide = tab.eval_on_selector_all("div.cell_output div.output pre, div.cell_output span.asynclab-rows",
                                            _SCROLLING)
            problems += [f"{where}: a printed output scrolls sideways: {text!r}" for text in wide]
        if shots is not None:
            name = page.removesuffix(".html").replace("/", "_")
            tab.screenshot(path=str(shots / f"{name}-{width}.png"))
            figure = tab.locator("div.cell_output img").first
            if not figure.count():
                figure = tab.locator("article table").first
            if figure.count():
                figure.scroll_into_view_if_needed()
                tab.screenshot(path=str(shots / f"{name}-{width}-figure.png"))
        return problems
    finally:
        tab.close()


def check(browser: Any, base: str, names: list[str], widths: tuple[int, ...] = WIDTHS,
          shots: Path | None = None, shoot: tuple[str, ...] = ()) -> list[str]:
    """Check the pages ``names`` of the book served at ``base`` at each width, with a Playwright ``browser``; every
    problem found, one line each. Pages whose name (without ``.html``) is in ``shoot`` are screenshotted into
    ``shots``."""
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    origin = base.rstrip("/") + "/"
    problems = []
    for width in widths:
        phone = width < 600
        context = browser.new_context(viewport={"width": width, "height": 844 if phone else 900}, is_mobile=phone,
                                      has_touch=phone, device_scale_factor=2 if phone else 1)
        # the book's pages link badges from other sites: answered here with a blank image, so that the check runs
        # without a network and judges the book's own files only
        context.route(lambda url: not url.startswith(origin),
                      lambda route: route.fulfill(status=200, content_type="image/svg+xml", body=_BLANK_SVG))
        try:
            for page in names:
                into = shots if page.removesuffix(".html") in shoot else None
                problems += check_page(context, base, page, width, into)
        finally:
            context.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("site", type=Path, help="the built book (build/site)")
    parser.add_argument("--shots", type=Path, help="a folder for screenshots of the pages named with --shoot")
    parser.add_argument("--shoot", nargs="*", default=[], metavar="PAGE",
                        help="pages to screenshot, as paths without .html (index, notebooks/03_streams)")
    parser.add_argument("--widths", nargs="*", type=int, default=list(WIDTHS), help="window widths in px (390 1280)")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        parser.error(f"{args.site} holds no built book (index.html): run `make site` first")
    chromium = find_chromium()
    if chromium is None:
        print("check_pages: no Chromium here (on Debian: apt-get install chromium; or set CHROMIUM=/path/to/it)",
              file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    names = pages(args.site)
    with serve(args.site) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            problems = check(browser, base, names, tuple(args.widths), args.shots, tuple(args.shoot))
        finally:
            browser.close()
    for line in problems:
        print(line)
    print(f"check_pages: {len(names)} pages at {', '.join(f'{w} px' for w in args.widths)}: "
          f"{len(problems) or 'no'} problem{'' if len(problems) == 1 else 's'}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
