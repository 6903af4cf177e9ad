"""The built site loads nothing from another host (`make build-docs` runs this after sphinx-build).

A reader offline, behind a firewall or opening `docs/_build/html` from a laptop sees the same pages: every
script, stylesheet, image, frame, font and media file that a page makes the browser load comes from the build.
Links (`<a href>`, `<link rel="next">`, a form's action) are navigation, not loads, and may point anywhere.

What is read: every `.html` file (its loading elements and attributes: `src`, `srcset`, `poster`, `data`,
`<link href>` of any rel beyond the navigation ones, SVG's `href`; its inline `<style>` and `style=""`; its
inline scripts' module imports), every `.css` file (`url(...)`, `@import`) and every `.js` file's module imports
(`import ... from "..."`, `import("...")`, `importScripts("...")`). A URL that a script builds at run time is
beyond a static reading (MathJax names a CDN for a speech-rule fallback that a browser with its own
`sre/mathmaps` never uses): those are the browser test's to find.

A load is foreign when it names a network scheme (`http:`, `https:`, `ftp:`, `ws:`, `wss:`) or is
protocol-relative (`//host/...`). A local load in HTML or CSS must also exist in the build: a MathJax script
tag that points at a missing `_static` file leaves the equations as source just the same.

    python docs/_ext/check_offline.py docs/_build/html

exits 0 (one line: how many files were read), 1 with one line per problem (`file: loads URL (how)`), 2 when
the folder holds no page.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["Load", "foreign_or_missing", "loads_of_css", "loads_of_html", "loads_of_js", "main"]

# rel values that only describe a relation (navigation, metadata): such a <link> fetches nothing.
NAVIGATION_RELS = frozenset({
    "alternate", "author", "bookmark", "canonical", "contents", "copyright", "external", "first", "glossary",
    "help", "home", "index", "last", "license", "me", "next", "nofollow", "noopener", "noreferrer", "opener",
    "prev", "previous", "search", "start", "tag", "top", "up", "chapter", "section", "subsection", "appendix",
})
# (element, attribute) pairs whose URL the browser fetches when it renders the page.
LOADING_ATTRIBUTES = {
    "script": ("src", "href", "xlink:href"), "img": ("src", "srcset"), "source": ("src", "srcset"),
    "video": ("src", "poster"), "audio": ("src",), "track": ("src",), "iframe": ("src",), "frame": ("src",),
    "embed": ("src",), "object": ("data",), "input": ("src",), "image": ("href", "xlink:href"),
    "use": ("href", "xlink:href"), "feimage": ("href", "xlink:href"), "body": ("background",),
    "table": ("background",), "td": ("background",), "th": ("background",),
}
NETWORK = re.compile(r"^\s*(?:(?:https?|ftp|wss?):|//)", re.IGNORECASE)
NOT_A_FILE = re.compile(r"^\s*(?:$|#|[a-z][a-z0-9+.-]*:)", re.IGNORECASE)  # data:, blob:, about:, mailto: ...
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)""", re.IGNORECASE)
CSS_IMPORT = re.compile(r"""@import\s+(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
JS_IMPORTS = (
    re.compile(r"""(?:^|[;\s})])(?:import|export)\s*(?:[\w$*{}\s,]+?\s*from\s*)?(["'])([^"'\n]+)\1""", re.MULTILINE),
    re.compile(r"""\bimport\s*\(\s*(["'`])([^"'`\n]+)\1"""),
    re.compile(r"""\bimportScripts\s*\(\s*(["'`])([^"'`\n]+)\1"""),
)


@dataclass(frozen=True)
class Load:
    """One URL that a file of the site makes the browser fetch.

    Attributes:
        file: the file that names it (a page, a stylesheet, a script).
        url: as written.
        how: what loads it, e.g. `<script src>`, `css url()`, `js import`.
    """

    file: Path
    url: str
    how: str

    @property
    def foreign(self) -> bool:
        """Whether the URL is on another host (a network scheme, or protocol-relative)."""
        return bool(NETWORK.match(self.url))


def loads_of_css(text: str, file: Path, how: str = "css") -> list[Load]:
    """The `url(...)` and `@import "..."` references of a stylesheet (comments skipped)."""
    text = CSS_COMMENT.sub("", text)
    found = [Load(file, next(g for g in m.groups() if g is not None), f"{how} url()") for m in CSS_URL.finditer(text)]
    found += [Load(file, m.group(1) or m.group(2) or "", f"{how} @import") for m in CSS_IMPORT.finditer(text)]
    return found


def loads_of_js(text: str, file: Path, how: str = "js") -> list[Load]:
    """The module imports of a script: static `import`/`export ... from`, `import(...)`, `importScripts(...)`."""
    return [Load(file, m.group(2), f"{how} import") for pattern in JS_IMPORTS for m in pattern.finditer(text)]


class _PageReader(HTMLParser):
    def __init__(self, file: Path):
        super().__init__(convert_charrefs=True)
        self.file = file
        self.loads: list[Load] = []
        self._inline: str | None = None  # "style" or "script" while inside one without src
        self._buffer: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = {name: value or "" for name, value in attrs}
        if "style" in values:
            self.loads += loads_of_css(values["style"], self.file, "style attribute")
        if tag == "link":
            rels = set(values.get("rel", "").lower().split())
            if rels - NAVIGATION_RELS and values.get("href"):
                self.loads.append(Load(self.file, values["href"], f"<link rel={' '.join(sorted(rels))}>"))
        for name in LOADING_ATTRIBUTES.get(tag, ()):
            if name not in values or (tag == "input" and values.get("type", "").lower() != "image"):
                continue
            urls = ([part.split()[0] for part in values[name].split(",") if part.split()] if name == "srcset"
                    else [values[name]])
            self.loads += [Load(self.file, url, f"<{tag} {name}>") for url in urls]
        if tag in ("style", "script") and "src" not in values:
            self._inline, self._buffer = tag, []

    def handle_data(self, data):
        if self._inline:
            self._buffer.append(data)

    def handle_endtag(self, tag):
        if tag == self._inline:
            text = "".join(self._buffer)
            self.loads += (loads_of_css(text, self.file, "<style>") if tag == "style"
                           else loads_of_js(text, self.file, "<script>"))
            self._inline = None


def loads_of_html(text: str, file: Path) -> list[Load]:
    """Every URL a page makes the browser fetch (not its links): elements, inline styles and module scripts."""
    reader = _PageReader(file)
    reader.feed(text)
    reader.close()
    return reader.loads


def _local_target(load: Load, site: Path) -> Path | None:
    """The file a local load names, or None when it names no file (data:, #fragment, a scheme)."""
    if NOT_A_FILE.match(load.url):
        return None
    path = unquote(urlsplit(load.url.strip()).path)
    if not path:
        return None
    return (site / path.lstrip("/")) if path.startswith("/") else (load.file.parent / path)


def foreign_or_missing(site: Path) -> tuple[list[str], int]:
    """Read every .html, .css and .js file under `site`: the problems, one line each, and how many files were read.

    A problem is a foreign load (`file: loads URL (how)`) or, in a page or a stylesheet, a local load whose file
    is not in the build (`file: loads URL (how), which is not in the build`).
    """
    site = site.resolve()
    problems: list[str] = []
    files = sorted(p for p in site.rglob("*") if p.suffix in (".html", ".css", ".js") and p.is_file())
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        reader = {".html": loads_of_html, ".css": loads_of_css, ".js": loads_of_js}[file.suffix]
        for load in reader(text, file):
            shown = file.relative_to(site)
            if load.foreign:
                problems.append(f"{shown}: loads {load.url} ({load.how})")
            elif file.suffix != ".js" and (target := _local_target(load, site)) is not None and not target.exists():
                problems.append(f"{shown}: loads {load.url} ({load.how}), which is not in the build")
    return problems, len(files)


def main(argv: list[str] | None = None) -> int:
    """`check_offline.py SITE`: 0 when the site loads only its own files, 1 with the problems, 2 without a site."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: check_offline.py SITE (the built html folder, e.g. docs/_build/html)", file=sys.stderr)
        return 2
    site = Path(args[0])
    if not site.is_dir() or not any(site.rglob("*.html")):
        print(f"check_offline: error: no .html page under {site}: build the site first", file=sys.stderr)
        return 2
    problems, read = foreign_or_missing(site)
    if problems:
        print(f"check_offline: {len(problems)} load(s) from another host or missing from the build under {site} "
              "(a reader offline would not get them):", file=sys.stderr)
        print("\n".join(f"  {line}" for line in problems), file=sys.stderr)
        return 1
    print(f"check_offline: {read} files under {site} load nothing from another host")
    return 0


if __name__ == "__main__":
    sys.exit(main())
