"""The book of the course (make site), built from the stored outputs and checked in a real browser (headless Chromium).

Screenshots of the pages checked are saved under build/site-check/. The browser tests need Chromium and Playwright (the
site extra); without them they are skipped, and say so, unless ASYNCLAB_REQUIRE_BROWSER=1 (the tests workflow sets it
where it has installed Chromium), which makes a missing browser a failure.
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asynclab.course.registry import LESSONS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import check_pages  # noqa: E402

SHOTS = ROOT / "build" / "site-check"
CHROMIUM = check_pages.find_chromium()
CHROMIUM_ARGS = check_pages.CHROMIUM_ARGS
#: Two lesson pages with timelines: one lesson on one GPU, one on two.
LESSON_PAGES = ("03_streams", "07_pipeline_bubbles")


def _build_site_module():
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "scripts" / "build_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Where the test builds the book: under build/, not a private temporary folder, because linkchecker run as root
#: reads files as the user nobody.
WORK = ROOT / "build" / "site-test"


@pytest.fixture(scope="module")
def site() -> Path:
    pytest.importorskip("jupyter_book", reason="the site extra is not installed (pip install -e '.[site]')")
    _build_site_module().build(WORK / "site")
    return WORK / "site"


@pytest.fixture(scope="module")
def served(site):
    """The site on a local HTTP server: ``(base URL, site folder)``."""
    with check_pages.serve(site) as base:
        yield base, site


def _no_browser(reason: str) -> None:
    if os.environ.get("ASYNCLAB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, and ASYNCLAB_REQUIRE_BROWSER=1 asks for the browser tests")
    pytest.skip(f"{reason}: the book's pages were not checked in a browser (no overflow, console or output check)")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        _no_browser("no Chromium here (on Debian: apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        _no_browser("no Playwright here (the site extra: pip install -e '.[site]')")
    import playwright.sync_api as playwright
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_the_site_has_every_page(site):
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {"index.html", "cli.html", "api.html", "search.html", "docs/instructors.html", "CONTRIBUTING.html"} <= pages
    assert {f"notebooks/{x.folder}.html" for x in LESSONS} <= pages
    api = (site / "api.html").read_text()
    assert "load_trace" in api and "draw_timeline" in api and "bubble_fraction" in api  # from the docstrings
    assert "asynclab timeline" in (site / "cli.html").read_text()


def test_lesson_pages_carry_both_launch_links_from_the_one_repository_url(site):
    from asynclab.course import launch

    for item in LESSONS:
        page = (site / "notebooks" / f"{item.folder}.html").read_text()
        assert launch.colab_url(item.notebook) in page, item.folder  # the book's launch button and the badge
        assert launch.kaggle_url(item.notebook).replace("&", "&amp;") in page or launch.kaggle_url(item.notebook) in page


def test_lesson_pages_and_search_show_no_test_scaffolding(site):
    """nbval's markers are cell tags, and the platform's install cell is left out of the pages and of search."""
    for item in LESSONS:
        page = (site / "notebooks" / f"{item.folder}.html").read_text()
        text = re.sub(r"<[^>]+>", " ", page)  # what a reader sees (a cell's tags are only its class names)
        assert "nbval" not in text.lower(), item.folder
        assert "COLAB_RELEASE_TAG" not in page and "install this course's package" not in page, item.folder
    index = (site / "searchindex.js").read_text()
    assert "COLAB_RELEASE_TAG" not in index and "NBVAL" not in index


def test_the_landing_page_links_every_lesson(served, browser):
    base, _ = served
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/index.html")
    links = page.eval_on_selector_all("article a[href]", "els => els.map(a => a.getAttribute('href'))")
    for item in LESSONS:
        assert f"notebooks/{item.folder}.html" in links, item.folder
    assert page.locator("h2", has_text="What runs where").count() == 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "index.png"))
    page.close()


@pytest.mark.parametrize("name", LESSON_PAGES)
def test_a_lesson_page_shows_its_timelines_and_hides_its_solutions(served, browser, name):
    base, _ = served
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/notebooks/{name}.html")
    images = page.locator("div.cell_output img")
    assert images.count() >= 3, f"{name}: {images.count()} output images"
    page.wait_for_load_state("load")
    widths = page.eval_on_selector_all("div.cell_output img", "els => els.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 0 for w in widths), f"{name}: images that did not load: {widths}"
    solution = page.locator("details", has=page.locator("summary", has_text="Solution")).first
    code = solution.locator("pre").first
    assert solution.evaluate("d => d.open") is False and not code.is_visible()
    solution.locator("summary").click()
    assert solution.evaluate("d => d.open") is True and code.is_visible()
    images.first.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.close()


@pytest.mark.parametrize("item", [x for x in LESSONS if x.ready], ids=lambda x: x.notebook)
def test_each_answer_to_a_prediction_is_folded_until_opened(served, browser, item):
    """A cell tagged hide-output (the answer to a prediction) shows its code and folds its output behind a toggle, in
    the book as in JupyterLab (whose metadata says the same: the notebook test holds the two together)."""
    nb = json.loads((ROOT / "notebooks" / f"{item.notebook}").read_text(encoding="utf-8"))
    folded = [c for c in nb["cells"] if "hide-output" in c.get("metadata", {}).get("tags", []) and c.get("outputs")]
    for cell in nb["cells"]:
        if "hide-output" in cell.get("metadata", {}).get("tags", []):
            assert cell["metadata"].get("jupyter", {}).get("outputs_hidden") is True, (item.notebook, cell["id"])
    if not folded:
        pytest.skip(f"{item.notebook}: no folded answer with stored outputs")
    base, _ = served
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/notebooks/{item.notebook.removesuffix('.ipynb')}.html")
    cells = page.locator("div.cell.tag_hide-output")
    with_output = [cells.nth(i) for i in range(cells.count()) if cells.nth(i).locator("div.cell_output").count()]
    assert len(with_output) == len(folded), f"{item.notebook}: {len(with_output)} folded cells shown, {len(folded)} in the notebook"
    for cell in with_output:
        output = cell.locator("div.cell_output").first
        assert cell.locator("div.cell_input").first.is_visible() and not output.is_visible()
    first = with_output[0]
    first.locator("summary").first.click()
    assert first.locator("div.cell_output").first.is_visible()
    page.close()


#: Lesson pages whose stored figures predate the narrower drawing, and why they cannot be redrawn yet.
#: Lessons whose stored figures were drawn before the current figure size, until a GPU re-executes them: none now.
NOT_REDRAWN: dict[str, str] = {}


@pytest.mark.parametrize("item", LESSONS, ids=[x.folder for x in LESSONS])
def test_every_figure_is_shown_near_its_drawn_size_with_alt_text(served, browser, item):
    """At 1280 px, each figure is shown at 75% of its drawn width or more (its smallest text stays readable), its alt
    text describes it, and clicking it opens it full size; at 390 px (a phone) the page is screenshotted too."""
    base, _ = served
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/notebooks/{item.folder}.html")
    page.wait_for_load_state("load")
    shown = page.eval_on_selector_all("div.cell_output img", """els => els.map(i => ({
        drawn: i.naturalWidth, shown: i.getBoundingClientRect().width, alt: i.getAttribute('alt') || '',
        link: i.closest('a') ? i.closest('a').getAttribute('href') : null}))""")
    assert shown, item.folder
    for fig in shown:
        assert len(fig["alt"].split()) >= 4 and not re.fullmatch(r"[0-9a-f]{16,}\.png", fig["alt"]), fig
        assert fig["link"] and fig["link"].endswith(".png"), fig
        if item.folder not in NOT_REDRAWN:
            assert fig["shown"] >= 0.75 * fig["drawn"], (item.folder, fig)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("div.cell_output img").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"{item.folder}-1280.png"))
    page.close()
    phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True, device_scale_factor=2)
    phone.goto(f"{base}/notebooks/{item.folder}.html")
    phone.wait_for_load_state("load")
    phone.locator("div.cell_output img").first.scroll_into_view_if_needed()
    phone.screenshot(path=str(SHOTS / f"{item.folder}-390.png"))
    phone.close()


def test_a_lesson_page_opens_its_traces_in_perfetto(served, browser):
    """The button opens ui.perfetto.dev and, once it answers PONG, posts the trace's bytes (Perfetto's documented
    protocol); here the Perfetto window is a stand-in that records what it is sent."""
    base, _ = served
    page = browser.new_page()
    page.add_init_script("""
        window.__posted = [];
        window.open = (url) => { window.__opened = url;
            return {postMessage: (message, origin) => window.__posted.push({message, origin})}; };""")
    page.goto(f"{base}/notebooks/03_streams.html")
    buttons = page.locator("ul.asynclab-traces button.asynclab-perfetto")
    assert buttons.count() >= 3
    downloads = page.eval_on_selector_all("ul.asynclab-traces a[download]", "els => els.map(a => a.href)")
    assert len(downloads) == buttons.count()
    # every figure drawn from a reference trace has its buttons right under it (the cell after the figure's), the
    # folded answers opened as a reader opens them
    folds = page.locator("div.cell.tag_hide-output details.below-input > summary")
    for i in range(folds.count()):
        folds.nth(i).click()
    beside = page.evaluate("""(() => {
        const imgs = [...document.querySelectorAll('div.cell_output img')].map(i => i.getBoundingClientRect().bottom);
        return [...document.querySelectorAll('p.asynclab-beside')].map(p => {
            const top = p.getBoundingClientRect().top;
            const above = imgs.filter(b => b <= top + 1);
            return {buttons: p.querySelectorAll('button.asynclab-perfetto').length,
                    gap: above.length ? top - Math.max(...above) : null};
        }); })()""")
    assert len(beside) >= 8 and all(b["buttons"] >= 1 and b["gap"] is not None and b["gap"] < 120 for b in beside), beside
    buttons.first.click()
    page.wait_for_function("window.__posted.some(p => p.message === 'PING')")
    assert page.evaluate("window.__opened") == "https://ui.perfetto.dev"
    page.evaluate("window.dispatchEvent(new MessageEvent('message', {data: 'PONG', origin: 'https://ui.perfetto.dev'}))")
    page.wait_for_function("window.__posted.some(p => p.message && p.message.perfetto)")
    sent = page.evaluate("""(() => { const p = window.__posted.find(p => p.message && p.message.perfetto);
        return {bytes: p.message.perfetto.buffer.byteLength, origin: p.origin, name: p.message.perfetto.fileName}; })()""")
    assert sent["bytes"] > 1000 and sent["origin"] == "https://ui.perfetto.dev" and sent["name"].endswith(".json.gz")
    page.close()


@pytest.mark.parametrize("item", [x for x in LESSONS if x.ready and x.gpus], ids=lambda x: x.notebook)
def test_every_figure_drawn_from_a_reference_trace_gets_perfetto_buttons_beside_it(item):
    """The book puts a line of Perfetto buttons right after each figure whose cell draws a reference trace."""
    import json

    import book_pages
    from asynclab.course import reference

    nb = json.loads((ROOT / "notebooks" / item.notebook).read_text())
    names = reference.trace_names(item.number)
    drawn = [c for c in nb["cells"] if book_pages.has_image(c) and "reference_trace(" in "".join(c["source"])]
    count = book_pages.with_perfetto_beside(nb, item.number, names)
    assert count >= len(drawn), (count, len(drawn))
    for i, cell in enumerate(nb["cells"][:-1]):
        if book_pages.has_image(cell) and "reference_trace(" in "".join(cell["source"]):
            assert "asynclab-perfetto" in "".join(nb["cells"][i + 1]["source"]), (item.notebook, i)


def test_search_finds_a_lesson(served, browser):
    base, _ = served
    page = browser.new_page()
    page.goto(f"{base}/search.html?q=wait_stream")
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(timeout=15000)
    hrefs = results.locator("a").evaluate_all("els => els.map(a => a.getAttribute('href'))")
    assert any("03_streams" in h for h in hrefs), hrefs
    page.close()


def _linkchecker(start: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "linkchecker"
    if not exe.exists():
        pytest.skip("linkchecker is not installed (the site extra)")
    return subprocess.run([str(exe), "--no-status", "--no-warnings", str(start)], capture_output=True, text=True,
                          timeout=300)


def test_internal_links_resolve(site):
    done = _linkchecker(site / "index.html")
    assert done.returncode == 0, done.stdout[-3000:]
    assert int(re.search(r"(\d+) links? in", done.stdout).group(1)) > 100, done.stdout[-500:]  # it followed the links
    broken = WORK / "broken"
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(site, broken)
    index = broken / "index.html"
    index.write_text(index.read_text().replace("</article>", '<a href="notebooks/99_missing.html">x</a></article>'))
    done = _linkchecker(index)
    assert done.returncode != 0 and "99_missing" in done.stdout, "the link check cannot fail"


def test_every_page_has_each_script_once_one_search_field_and_an_icon(site):
    """Sphinx 7.4 wrote each inline script added after its builder started twice, and a second
    ``const THEBE_JS_URL`` is a SyntaxError on every page (scripts/book_sphinx.py); the theme's header bar added a
    second search field; without an icon, browsers asked for /favicon.ico and got a 404."""
    assert (site / "_static" / "favicon.ico").stat().st_size > 0
    for page in check_pages.pages(site):
        html = (site / page).read_text()
        inline = [body for body in re.findall(r"<script>(.*?)</script>", html, re.S) if body.strip()]
        assert len(inline) == len(set(inline)), (page, [b for b in inline if inline.count(b) > 1][:1])
        assert html.count("const THEBE_JS_URL") <= 1, page
        assert html.count('class="btn search-button-field') <= 1, page
        icon = re.search(r'<link rel="icon" href="([^"]+)"', html)
        favicon = (site / "_static" / "favicon.ico").resolve()
        assert icon and (site / page).parent.joinpath(icon.group(1)).resolve() == favicon, page


#: The pages screenshotted at both widths (build/site-check/NAME-WIDTH.png, and NAME-WIDTH-figure.png at the first
#: figure or table): the landing page and lessons with one-GPU and two-GPU timelines and long headings.
CHECKED_SHOTS = ("index", "notebooks/03_streams", "notebooks/05_copy_overlap", "notebooks/07_pipeline_bubbles",
                 "notebooks/08_your_step")


def test_every_page_fits_a_phone_logs_no_error_and_shows_no_machine_details(served, browser):
    """Every page at 390 px (a phone) and 1280 px: no wider than the window, no JavaScript or console error, no cell
    output with a warning, a traceback or a path of the machine that ran it (scripts/check_pages.py)."""
    base, site = served
    pages = check_pages.pages(site)
    assert {"index.html", "notebooks/07_pipeline_bubbles.html", "docs/instructors.html"} <= set(pages)
    problems = check_pages.check(browser, base, pages, shots=SHOTS, shoot=CHECKED_SHOTS)
    assert not problems, "\n".join(problems)
    assert (SHOTS / "notebooks_07_pipeline_bubbles-390.png").is_file()


def test_the_page_check_finds_each_problem(tmp_path, browser):
    """A page wider than a phone, a script error, a missing file and an output with a warning and a machine path are
    each reported; the same page at 1280 px is wide enough."""
    (tmp_path / "bad.html").write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width"><link rel="icon" href="data:,">'
        '</head><body><article><div class="cell_output"><pre>/home/me/x.py:3: UserWarning: careful</pre></div>'
        '<div style="width: 600px">a wide box</div><img src="missing.png" alt="x">'
        '<script>const twice = 1;</script><script>const twice = 2;</script></article></body></html>')
    with check_pages.serve(tmp_path) as base:
        problems = check_pages.check(browser, base, ["bad.html"])
    text = "\n".join(problems)
    assert "bad.html at 390 px: 608 px wide in a 390 px window, because of article > div" in text, text
    assert not [p for p in problems if p.startswith("bad.html at 1280 px") and "px wide" in p], text
    assert "JavaScript error" in text and "twice" in text, text
    assert "HTTP 404: /missing.png" in text, text
    assert "an output shows a warning" in text and "an output shows a machine path" in text, text


def test_a_known_stored_output_is_allowed_only_as_it_is():
    """The allow-list takes out exactly the known stored warning: anything else in that output is still reported,
    and an entry that matches nothing is reported so that it is removed."""
    page = "notebooks/08_your_step.html"
    known = ("/opt/torch/.venv/lib/python3.12/site-packages/torch/cuda/__init__.py:1270: UserWarning: Synchronization "
             "debug mode is a prototype feature and does not yet detect all synchronizing operations (Triggered "
             "internally at /pytorch/torch/csrc/cuda/Module.cpp:1003.)\n"
             "  torch._C._cuda_set_sync_debug_mode(debug_mode)\n")
    allowed = {page: re.compile(  # the entry lesson 08 had until its GPU refresh took the warning out
        r"\S*/site-packages/torch/cuda/__init__\.py:\d+: UserWarning: Synchronization debug mode is a prototype "
        r"feature and does not yet detect all synchronizing operations \(Triggered internally at \S+\)\n"
        r"\s*torch\._C\._cuda_set_sync_debug_mode\(debug_mode\)\n?")}
    assert check_pages.output_problems(page, [known + "Not yet: every=4: 17 host reads"], allowed) == []
    assert check_pages.output_problems(page, [known + "/home/me/step.py:9: UserWarning: other"], allowed)
    assert "matches nothing now" in check_pages.output_problems(page, ["Right: every=4"], allowed)[0]
    assert check_pages.output_problems(page, [known])  # with no entry, the warning is reported


def _table(markdown: str, heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table under ``## heading``, header first, without the rule."""
    section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.S | re.M)
    assert section, heading
    lines = [line for line in section.group(1).splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if not line.startswith("|---")]


def test_what_runs_where_is_for_learners_and_contributing_says_what_tests_each_place():
    """The README's table (the book's landing page shows it) says what runs where; what tests each of its claims is in
    CONTRIBUTING.md, one row per place, none left out."""
    readme = _table((ROOT / "README.md").read_text(), "What runs where")
    tests = _table((ROOT / "CONTRIBUTING.md").read_text(), "What tests each place the course runs")
    assert readme[0] == ["where", "runs live", "replays its reference"]
    assert not any("tests/" in cell or "test_" in cell for row in readme for cell in row)
    places = [row[0] for row in readme[1:]]
    assert len(places) >= 5 and [row[0] for row in tests[1:]] == places
    assert all(len(row) == 2 and len(row[1]) > 20 for row in tests[1:]), tests
    assert "what tests it" in tests[0][1]


def test_the_api_page_has_a_section_for_every_module_behind_al():
    """Every module that holds a name of ``al.<name>`` (``asynclab._HOME``) or is one of its short names
    (``asynclab.ALIASES``) has its section on the API page, and every section names a module that imports."""
    import asynclab

    sections = set(_build_site_module().API_MODULES)
    behind = set(asynclab._HOME.values()) | set(asynclab.ALIASES.values())
    assert not behind - sections, f"add to build_site.API_MODULES: {sorted(behind - sections)}"
    for name in sections:
        assert importlib.util.find_spec(f"asynclab.{name}") is not None, name
