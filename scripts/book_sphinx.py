"""The book's own Sphinx extension: every inline script of a page written once, and long inline code that can break
after its dots and slashes.

Sphinx 7.4 (the newest Jupyter Book 1 accepts) lists an inline script that an extension adds after the HTML builder
started twice on every page: once as it was added (file name ``None``) and once more when it writes the pages, from its
registry (file name ``""``); the two do not compare equal, so both stay. sphinx-thebe adds its settings so, and the
second ``const THEBE_JS_URL = ...`` is a SyntaxError in the browser ("Identifier 'THEBE_JS_URL' has already been
declared") on every page. This extension keeps the first of each script a page lists.

Inline code stays on one line in Sphinx's style; on a phone a long name (`torch.distributed.pipelining` in a heading)
then made the page wider than the window. The book's style lets it wrap, and the extension gives it places to break
first: after each dot or slash between two words (``<wbr>``, which copying the text leaves out).
"""
from __future__ import annotations

import re
from typing import Any

_INLINE_CODE = re.compile(r'(<span class="pre">)([^<]{16,})(</span>)')
_BREAK_AFTER = re.compile(r"(?<=\w)([./])(?=\w)")


def _key(script: Any) -> tuple:
    """What makes two of a page's scripts the same: file (``None`` and ``""`` both mean inline), priority, attributes
    (an inline script's body among them)."""
    attributes = getattr(script, "attributes", {})
    return (getattr(script, "filename", script) or "", getattr(script, "priority", 500),
            tuple(sorted((k, str(v)) for k, v in attributes.items())))


def each_script_once(scripts: list) -> list:
    """The scripts in their order, each one once.

    Example:
        >>> from sphinx.builders.html._assets import _JavaScript
        >>> body = 'const THEBE_JS_URL = "x"'
        >>> page = [_JavaScript("a.js"), _JavaScript("", body=body), _JavaScript(None, body=body), _JavaScript("a.js")]
        >>> [(s.filename, s.attributes.get("body")) for s in each_script_once(page)]
        [('a.js', None), ('', 'const THEBE_JS_URL = "x"')]
    """
    seen: set[tuple] = set()
    kept = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            kept.append(script)
    return kept


def breakable_code(html: str) -> str:
    """The page's HTML with a ``<wbr>`` after each dot or slash between two words of its longer inline code.

    Example:
        >>> breakable_code('<code><span class="pre">torch.distributed.pipelining</span></code> and x.y')
        '<code><span class="pre">torch.<wbr>distributed.<wbr>pipelining</span></code> and x.y'
    """
    return _INLINE_CODE.sub(lambda m: m[1] + _BREAK_AFTER.sub(r"\1<wbr>", m[2]) + m[3], html)


def _page(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    scripts = context.get("script_files")
    if scripts:
        scripts[:] = each_script_once(scripts)
    if isinstance(context.get("body"), str):
        context["body"] = breakable_code(context["body"])


def setup(app: Any) -> dict:
    # after every other extension has added its page scripts (they run at the default priority, 500)
    app.connect("html-page-context", _page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
