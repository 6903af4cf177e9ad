"""Standalone views: one HTML file with the page's script and style inlined and its data embedded.

`standalone_html(page, data)` is what the page's Export button downloads and what a notebook shows:
it opens from file:// with the network off (no server, no CDN), plays the layers back and shows every
overlay; edits need the server (`hardmax explore`). `view(trajectory)` wraps a `Solution` for Jupyter:

    import hardmax
    from hardmax.explore import view
    view(hardmax.simulate(tokens, alpha=0.5, layers=30))    # renders inline (_repr_html_); .save("run.html")
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from hardmax.explore.assets import STATIC

if TYPE_CHECKING:
    from hardmax.dynamics import Solution

__all__ = ["View", "script_json", "standalone_html", "view"]

Page = Literal["playground", "classifier"]


# Characters JSON may hold in its strings that HTML's parser reads inside a <script> ("</script>", "<!--" and
# "<script" change where the script ends), and the line separators older JavaScript refuses in a string literal.
_SCRIPT_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                                 "\u2029": "\\u2029"})


def script_json(value) -> str:
    """`value` as JSON safe to embed in an HTML <script> element (and in an attribute): every <, >, & and U+2028/9
    written as a \\uXXXX escape, which is the same JSON. NaN and infinities are refused (ValueError)."""
    return json.dumps(value, allow_nan=False).translate(_SCRIPT_ESCAPES)


def _script_source(source: str) -> str:
    # JavaScript inlined in <script>: "<" before "!--", "script" or "/script" written \x3C (the same character in a
    # string, a template or a regular expression; a comment does not mind), so nothing in it ends or bends the element
    return re.sub(r"<(?=!--|/?script)", r"\\x3C", source, flags=re.IGNORECASE)


def _style_source(source: str) -> str:
    # CSS inlined in <style>: "</style" written "<\/style" (an escaped "/" is the same character in CSS)
    return re.sub(r"</(?=style)", r"<\\/", source, flags=re.IGNORECASE)


def _inline(page_html: str) -> str:
    def script(match: re.Match) -> str:
        return "<script>\n" + _script_source((STATIC / match.group(1)).read_text(encoding="utf-8")) + "\n</script>"

    def style(match: re.Match) -> str:
        return "<style>\n" + _style_source((STATIC / match.group(1)).read_text(encoding="utf-8")) + "\n</style>"

    page_html = re.sub(r'<script src="/static/([\w.-]+)"></script>', script, page_html)
    return re.sub(r'<link rel="stylesheet" href="/static/([\w.-]+)">', style, page_html)


def standalone_html(page: Page, data: dict, *, state: str = "") -> str:
    """The page `page` ("playground" or "classifier") as one self-contained HTML document showing `data`
    (a `views.playground_view` / `trajectory_view` or `views.review_view` record); `state`: the URL fragment
    of the view (layer, overlays) it opens with. Text from either (a review's words, the state) is embedded as
    `script_json`: it cannot end the script or open markup, whatever it holds."""
    if page not in ("playground", "classifier"):
        raise ValueError(f"page must be 'playground' or 'classifier', got {page!r}")
    text = _inline((STATIC / f"{page}.html").read_text(encoding="utf-8"))
    embedded = f"<script>window.HARDMAX_EMBEDDED = {script_json({'data': data, 'state': state})};</script>\n"
    return text.replace("<!-- embedded -->", embedded, 1)


@dataclass(frozen=True)
class View:
    """A standalone playground view of one trajectory: shown inline by Jupyter, or saved as an HTML file."""

    html: str

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width: 100%; height: 640px; '
                'border: 1px solid #ddd" sandbox="allow-scripts allow-downloads"></iframe>')

    def save(self, path: str | Path) -> Path:
        """Write the view to `path` (atomically); it opens in any browser, offline."""
        from hardmax.io import write_text

        return write_text(path, self.html)


def view(trajectory: Solution) -> View:
    """The playground's view of a single-sequence `Solution` (`simulate` of (n, d) tokens), without a server:
    leaders, K, S, clusters and the Theorem 2.1 check of a hardmax run, playback through the layers."""
    from hardmax.explore.views import trajectory_view

    return View(html=standalone_html("playground", trajectory_view(trajectory, attention=True)))
