"""The API reference, generated from the package itself: one page per module that declares `__all__`.

Every name listed in an `__all__` is public. Each public object is documented once, on the page of its
*home*: the shortest module path that exports it, below the top-level `hardmax` (so `Hardmax` is documented
on `hardmax.dynamics`, `RANK_RTOL` on `hardmax.svm`, not on the files that define them). Every other module
that lists it names it too (an entry with the first line of its documentation and a link to the home), so
that `hardmax.simulate`, `hardmax.dynamics.simulate` and `hardmax.dynamics.simulator.simulate` all resolve.
The `hardmax` page is the index of the top-level names.

Reported as Sphinx warnings (the docs are built with warnings as errors, so each fails the build): a module
without `__all__`, a public class or function without a docstring, a public method or property without one,
a public constant without a ``#:`` comment, and a public name that ends without an entry in the built
reference. Pages are written under docs/api/ (not tracked) when the builder starts; only changed pages are
rewritten.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "hardmax"
# Architecture order (docs/architecture.md "Modules"): the reference's table of contents follows it.
ORDER = ("hardmax", "hardmax.dynamics", "hardmax.theory", "hardmax.measures", "hardmax.svm", "hardmax.models",
         "hardmax.data", "hardmax.training", "hardmax.explain", "hardmax.plots", "hardmax.experiments",
         "hardmax.explore", "hardmax.cli", "hardmax.io", "hardmax.inputs", "hardmax.memory", "hardmax.tables",
         "hardmax.progress", "hardmax.lazy", "hardmax.version")


@dataclass
class Entry:
    """One public object: its name, the object, the modules that list it, and its home among them."""

    name: str
    obj: object
    modules: list[str] = field(default_factory=list)

    @property
    def home(self) -> str:
        below = [m for m in self.modules if m != PACKAGE] or self.modules
        return min(below, key=lambda m: (m.count("."), len(m), m))


def all_modules() -> list:
    """Every module of the package with no private part in its name (`hardmax.dynamics._engines.kernel` is private:
    its package is), the package first."""
    package = importlib.import_module(PACKAGE)
    return [package] + [importlib.import_module(info.name)
                        for info in pkgutil.walk_packages(package.__path__, PACKAGE + ".")
                        if not any(part.startswith("_") for part in info.name.split("."))]


def missing_all(modules: list) -> list[str]:
    """Modules that do not say what they make public (every non-private module must declare `__all__`)."""
    return [m.__name__ for m in modules if not hasattr(m, "__all__")]


def public_modules() -> list:
    """The package's modules that declare `__all__` (the public surface), the package first."""
    return [m for m in all_modules() if hasattr(m, "__all__")]


def public_entries(modules: list) -> dict[tuple[str, int], Entry]:
    """(name, id(object)) -> Entry, over every `__all__` of `modules`."""
    entries: dict[tuple[str, int], Entry] = {}
    for module in modules:
        for name in module.__all__:
            obj = getattr(module, name)
            entry = entries.setdefault((name, id(obj)), Entry(name, obj))
            entry.modules.append(module.__name__)
    return entries


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isroutine(obj):
        return "function"
    return "data"


def data_doc(entry: Entry) -> str:
    """A constant's ``#:`` comment or docstring after its assignment in a module listing it, or in a submodule
    of a package listing it ("" when there is none)."""
    candidates = list(entry.modules)
    for module_name in entry.modules:
        module = importlib.import_module(module_name)
        if hasattr(module, "__path__"):
            candidates += [info.name for info in pkgutil.iter_modules(module.__path__, module_name + ".")
                           if not info.name.rsplit(".", 1)[-1].startswith("_")]
    for module_name in candidates:
        try:
            docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        except Exception:  # noqa: BLE001 - a module without source: nothing to find there
            continue
        for key, lines in docs.items():
            if key == ("", entry.name) and "".join(lines).strip():
                return "\n".join(lines).strip()
    return ""


def _has_doc(obj: object) -> bool:
    """A docstring of its own (or inherited from a base class), not one Python or torch wrote for it: a
    dataclass's generated "Name(field: type, ...)", or nn.Module.forward's generic text."""
    doc = (inspect.getdoc(obj) or "").strip()
    name = getattr(obj, "__name__", "")
    return bool(doc) and not (inspect.isclass(obj) and doc.startswith(f"{name}(")) and \
        not doc.startswith("Define the computation performed at every call")


def undocumented(entry: Entry) -> bool:
    if _kind(entry.obj) == "data":
        return not data_doc(entry)
    return not _has_doc(entry.obj)


def undocumented_members(cls: type) -> list[str]:
    """Public methods and properties a class defines itself without a docstring (inherited ones count)."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if (inspect.isfunction(function) or isinstance(value, property)) and not _has_doc(getattr(cls, name)):
            found.append(name)
    return found


def _title(text: str, underline: str = "=") -> list[str]:
    return [text, underline * len(text), ""]


def module_page(module, entries: list[Entry]) -> str:
    name = module.__name__
    homed = [e for e in entries if e.home == name]
    elsewhere = [e for e in entries if e.home != name]
    lines = _title(f"``{name}``") + [f".. automodule:: {name}", "   :no-members:", "", f".. currentmodule:: {name}", ""]
    if homed:
        lines += [".. autosummary::", "   :nosignatures:", ""] + [f"   {e.name}" for e in homed] + [""]
    for e in homed:
        kind = _kind(e.obj)
        if kind in ("class", "exception"):
            lines += [f".. auto{kind}:: {name}.{e.name}", "   :members:", "   :show-inheritance:", ""]
        elif kind == "function":
            lines += [f".. autofunction:: {name}.{e.name}", ""]
        else:
            lines += _data_lines(name, e)
    if elsewhere:
        lines += _title("Also exported here", "-") + ["The objects documented at their homes, under these names too.",
                                                       ""]
        for e in elsewhere:
            lines += _alias_lines(name, e)
    return "\n".join(lines) + "\n"


_DIRECTIVES = {"class": "py:class", "exception": "py:exception", "function": "py:function", "data": "py:data"}


def _alias_lines(module: str, entry: Entry) -> list[str]:
    """`module.name` as a name of its own (an anchor and an inventory entry, so that `hardmax.simulate`
    resolves) for the object documented at its home: the first line of its documentation and a link there."""
    doc = data_doc(entry) if _kind(entry.obj) == "data" else (inspect.getdoc(entry.obj) or "")
    summary, _ = _escape(doc.strip().split("\n\n", 1)[0].replace("\n", " ")) if doc.strip() else ("", 0)
    return [f".. {_DIRECTIVES[_kind(entry.obj)]}:: {entry.name}", f"   :module: {module}", "   :no-index-entry:", "",
            f"   {summary} Documented at :py:obj:`{entry.home}.{entry.name}`.", ""]


def _data_lines(module: str, entry: Entry) -> list[str]:
    """A constant as a py:data entry `module.name`: its value when short, and its ``#:`` documentation."""
    value = repr(entry.obj)
    lines = [f".. py:data:: {entry.name}", f"   :module: {module}"]
    if len(value) <= 80 and "\n" not in value:
        lines.append(f"   :value: {value}")
    return lines + [""] + ["   " + line for line in data_doc(entry).splitlines()] + [""]


def top_page(package, entries: dict[tuple[str, int], Entry]) -> str:
    lines = _title("``hardmax``") + [f".. automodule:: {PACKAGE}", "   :no-members:", "",
                                      "Every top-level name, with the module that documents it:", "",
                                      ".. list-table::", "   :header-rows: 1", "", "   * - name", "     - home", ""]
    listed = [entries[(n, id(getattr(package, n)))] for n in package.__all__]
    for entry in listed:
        if entry.home != PACKAGE:
            lines += [f"   * - :py:obj:`hardmax.{entry.name}`", f"     - :py:mod:`{entry.home}`"]
    lines += [""]
    for entry in listed:
        if entry.home == PACKAGE:
            lines += _data_lines(PACKAGE, entry)
        else:
            lines += _alias_lines(PACKAGE, entry)
    return "\n".join(lines) + "\n"


def _order(name: str) -> tuple:
    top = ".".join(name.split(".")[:2])
    return (ORDER.index(top) if top in ORDER else len(ORDER), name)


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def generate(app: Sphinx) -> None:
    out = Path(app.srcdir) / "api"
    out.mkdir(exist_ok=True)
    every = all_modules()
    for name in missing_all(every):
        logger.warning(f"module {name} has no __all__: list its public names (or name the module _private)")
    modules = public_modules()
    entries = public_entries(modules)
    for entry in entries.values():
        if undocumented(entry):
            logger.warning(f"undocumented public name {entry.home}.{entry.name}: give it a docstring "
                           f"(a '#:' comment for a constant) or take it out of __all__")
        elif inspect.isclass(entry.obj):
            for member in undocumented_members(entry.obj):
                logger.warning(f"undocumented public member {entry.home}.{entry.name}.{member}: give it a "
                               f"docstring (or a leading underscore)")
    by_module: dict[str, list[Entry]] = {}
    for entry in entries.values():
        for module_name in entry.modules:
            by_module.setdefault(module_name, []).append(entry)
    names = sorted((m.__name__ for m in modules), key=_order)
    wanted = {f"{n}.rst" for n in names} | {"index.rst"}
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for module in modules:
        name = module.__name__
        order = {n: i for i, n in enumerate(module.__all__)}
        listed = sorted(by_module.get(name, []), key=lambda e: order[e.name])
        page = top_page(module, entries) if name == PACKAGE else module_page(module, listed)
        write_if_changed(out / f"{name}.rst", page)
    index = _title("API reference") + [
        "Generated from the docstrings. Every name listed in a module's ``__all__`` is public and has one entry,",
        "on the page of its home (the shortest module path that exports it); the top-level ``hardmax`` page lists",
        "the names importable as ``hardmax.X``.", "", ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {n}" for n in names]
    write_if_changed(out / "index.rst", "\n".join(index) + "\n")


# --------------------------------------------------------------------------------------------
# Docstrings: the package writes them as plain text (equations in Unicode, `names` in backticks, shapes,
# hanging indents), as STYLE.md asks; reStructuredText reads `*`, `|` and a change of indentation as markup.
# This adapter renders the plain text as written: those characters are escaped outside `code`, and a blank
# line is put where the indentation changes, so that an indented line is shown indented, not as an error.
# Doctest examples (from >>> to the next blank line) and literal blocks (after ::) pass unchanged.
# --------------------------------------------------------------------------------------------

_BULLET = re.compile(r"^(\s*)([-*+•]|\d+[.)])\s+")


def _marker(bullet: re.Match) -> str:
    """The kind of a list marker: "1." for any enumeration, else the bullet character."""
    mark = bullet.group(2)
    return "1." if mark[0].isdigit() else mark


def _escape(text: str, ticks: int = 0) -> tuple[str, int]:
    """Escape the characters reStructuredText reads as markup (`*`, `|`, a backslash, a `_` ending a word)
    outside backtick spans. `ticks`: the length of the backtick run that opened a span still open at the
    start of `text` (0: none); returned updated, so that a span may continue on the next line."""
    out, i = [], 0
    while i < len(text):
        run = len(text[i:]) - len(text[i:].lstrip("`"))
        if run:
            after = text[i + run:i + run + 1]
            if ticks == 0:
                ticks = run
                if out and out[-1][-1:].isalnum():  # "the`x`": a span must start a word
                    out.append("\\ ")
                out.append(text[i:i + run])
            elif run == ticks:
                ticks = 0
                out.append(text[i:i + run])
                if after.isalnum():  # "`Check`s": a span must end one (an escaped space shows as nothing)
                    out.append("\\ ")
            else:
                out.append(text[i:i + run])
            i += run
            continue
        char = text[i]
        end_of_word = char == "_" and (i + 1 == len(text) or not (text[i + 1].isalnum() or text[i + 1] == "_"))
        out.append("\\" + char if ticks == 0 and (char in "*|\\" or end_of_word) else char)
        i += 1
    return "".join(out), ticks


def plain_to_rst(lines: list[str]) -> list[str]:
    out: list[str] = []
    prev_indent, prev_blank = 0, True
    item: tuple[int, int, str] | None = None  # the current list item: its marker's indent, its text's, its kind
    literal_indent: int | None = None  # inside a literal block: its introducing line's indentation
    in_doctest = False  # a doctest block (>>> lines and their output) runs to the next blank line
    ticks = 0  # a backtick span open at the end of the previous line (the length of its opening run)
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            out.append(line)
            prev_blank, in_doctest, ticks = True, False, 0
            continue
        if in_doctest:
            out.append(line)
            continue
        if literal_indent is not None:
            if indent > literal_indent:
                out.append(line)
                prev_indent, prev_blank = indent, False
                continue
            literal_indent = None
        doctest = stripped.startswith(">>>")
        bullet = _BULLET.match(line)
        left_list = False  # the line ends a list: a paragraph (or another list) needs a blank line before it
        if item is not None and indent < item[1] and not (bullet and indent == item[0]):
            item, left_list = None, True
        if not prev_blank:
            if doctest:
                blank = True
            elif item is not None and prev_indent <= item[1] and (
                    indent == item[1] or bullet and indent == item[0] and _marker(bullet) == item[2]):
                blank = False  # a list item's next line, or the next item
            elif bullet or left_list:
                blank = True  # a list after a paragraph line, or a paragraph after a list
            else:
                blank = indent != prev_indent
            if blank:
                out.append("")
        if bullet:
            item = (indent, len(bullet.group(0)), _marker(bullet))
        if doctest:
            out.append(line)
            in_doctest = True
            continue
        keep = len(bullet.group(0)) if bullet else indent  # a list's marker is markup, its text is not
        literal_marker = stripped.endswith("::")  # "text::" introduces a literal block: its "::" stays markup
        text, ticks = _escape(line[keep:len(line) - 2] if literal_marker else line[keep:], ticks)
        out.append(line[:keep] + text + ("::" if literal_marker else ""))
        if stripped.endswith("::"):
            literal_indent = indent
        prev_indent, prev_blank = indent, False
    return out


def check_rendered(app: Sphinx, env) -> None:
    """Every name of every `__all__` is an object of the built reference (`module.name` resolves)."""
    objects = env.get_domain("py").objects
    for module in public_modules():
        for name in module.__all__:
            if f"{module.__name__}.{name}" not in objects:
                logger.warning(f"public name {module.__name__}.{name} has no entry in the API reference")


def _process_docstring(app, what, name, obj, options, lines: list[str]) -> None:
    lines[:] = plain_to_rst(lines)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", generate)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("env-check-consistency", check_rendered)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
