"""The documentation's machinery (docs/_ext): the API reference covers every public name once, flags the
undocumented ones, and renders every public docstring as written without a reStructuredText error.
The full build (`make docs`, warnings as errors, the gallery executed) runs in `make test` after pytest."""

from __future__ import annotations

import importlib
import inspect
import io
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
docutils_core = pytest.importorskip("docutils.core", reason="the docs extra (pip install -e '.[docs]')")
hardmax_api = pytest.importorskip("hardmax_api", reason="the docs extra (pip install -e '.[docs]')")


def _rst_problems(text: str) -> str:
    stream = io.StringIO()
    docutils_core.publish_doctree(text, settings_overrides={"warning_stream": stream, "report_level": 2,
                                                             "halt_level": 5})
    return stream.getvalue()


def test_plain_text_is_escaped_and_indentation_kept():
    lines = ["Scores |s_ij| and *weights* w_i.", "Args:", "    x: the tokens, (n, d)", "        continued.",
             "back at the margin"]
    out = hardmax_api.plain_to_rst(lines)
    assert out[0] == r"Scores \|s_ij\| and \*weights\* w_i."
    assert _rst_problems("\n".join(out)) == ""
    assert _rst_problems("\n".join(lines)) != ""  # as written, reStructuredText would have complained


def test_code_lists_and_doctests_pass_unchanged():
    lines = ["Uses `a*b|c` and ``x|y``:", "", "  * first item, long", "    and wrapped", "  * second item",
             "  + another kind of list", "", ">>> 2 * 3", "6", ">>> [1,", "...  2]", "[1, 2]", "after"]
    out = hardmax_api.plain_to_rst(lines)
    assert out[0] == "Uses `a*b|c` and ``x|y``:"
    assert "  * first item, long" in out and "    and wrapped" in out
    assert out[out.index("  * second item") + 1] == ""  # a different kind of list starts after a blank line
    assert out[out.index(">>> 2 * 3"):out.index(">>> 2 * 3") + 5] == [">>> 2 * 3", "6", ">>> [1,", "...  2]", "[1, 2]"]
    assert _rst_problems("\n".join(out)) == ""


@pytest.mark.parametrize("lines, shown", [
    (["calls `f(*args,", "**kwargs)` twice"], "calls f(*args,\n**kwargs) twice"),  # a span over two lines
    (["A \\ B and C\\D"], "A \\ B and C\\D"),
    (["the W_ matrix and [1]_ too"], "the W_ matrix and [1]_ too"),
    (["calls __init__ and x_i"], "calls __init__ and x_i"),
    (["Example with *stars*::", "", "    code * here", "", "after"], "Example with *stars*:\n\ncode * here\n\nafter"),
    (["- item", "text at the margin"], "item\n\ntext at the margin"),
    (["named `Check`s and x`y`"], "named Checks and xy"),  # spans inside words
])
def test_text_is_shown_as_written(lines, shown):
    text = "\n".join(hardmax_api.plain_to_rst(lines))
    assert _rst_problems(text) == ""
    assert docutils_core.publish_doctree(text).astext() == shown


def _public_docstrings():
    for module in hardmax_api.public_modules():
        yield module.__name__, inspect.getdoc(module) or ""
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isroutine(obj):
                yield f"{module.__name__}.{name}", inspect.getdoc(obj) or ""


def test_every_public_docstring_renders_without_an_error():
    problems = {name: found for name, doc in _public_docstrings()
                if (found := _rst_problems("\n".join(hardmax_api.plain_to_rst(doc.splitlines()))))}
    assert not problems, "\n".join(f"{k}: {v}" for k, v in problems.items())


def test_every_public_name_is_documented_and_has_one_home():
    modules = hardmax_api.public_modules()
    names = {m.__name__ for m in modules}
    assert {"hardmax", "hardmax.dynamics", "hardmax.theory", "hardmax.svm", "hardmax.measures",
            "hardmax.explain", "hardmax.experiments.svm"} <= names
    entries = hardmax_api.public_entries(modules)
    assert not [f"{e.home}.{e.name}" for e in entries.values() if hardmax_api.undocumented(e)]
    hardmax = importlib.import_module("hardmax")
    simulate = entries[("simulate", id(hardmax.simulate))]
    assert simulate.home == "hardmax.dynamics" and "hardmax" in simulate.modules  # below the top level
    assert entries[("__version__", id(hardmax.__version__))].home == "hardmax.version"
    assert sum(len(e.modules) for e in entries.values()) == sum(len(m.__all__) for m in modules)


def test_an_undocumented_name_is_reported(monkeypatch):
    module = types.ModuleType("hardmax_docs_probe")

    def bare(x):
        return x

    def told(x):
        """Documented."""
        return x

    module.bare, module.told, module.LIMIT = bare, told, 3
    module.__all__ = ["bare", "told", "LIMIT"]
    monkeypatch.setitem(sys.modules, "hardmax_docs_probe", module)
    entries = hardmax_api.public_entries([module])
    flagged = {e.name for e in entries.values() if hardmax_api.undocumented(e)}
    assert flagged == {"bare", "LIMIT"}  # a constant needs a '#:' comment, which this one (no source) lacks


def test_every_module_says_what_it_makes_public_and_every_public_member_is_documented():
    modules = hardmax_api.all_modules()
    assert not hardmax_api.missing_all(modules)
    entries = hardmax_api.public_entries(hardmax_api.public_modules())
    bare = {f"{e.home}.{e.name}.{m}" for e in entries.values() if inspect.isclass(e.obj)
            for m in hardmax_api.undocumented_members(e.obj)}
    assert not bare, sorted(bare)


def test_generated_and_missing_docstrings_are_reported(monkeypatch):
    import dataclasses

    @dataclasses.dataclass
    class Bare:
        x: int

        def shown(self):
            return self.x

        @property
        def size(self):
            """Documented."""
            return 1

    class Told(Bare):
        """Documented; `shown` inherits nothing, so it is still reported."""

    module = types.ModuleType("hardmax_docs_probe2")
    module.Bare, module.Told = Bare, Told
    assert hardmax_api.missing_all([module]) == ["hardmax_docs_probe2"]
    module.__all__ = ["Bare", "Told"]
    monkeypatch.setitem(sys.modules, "hardmax_docs_probe2", module)
    entries = {e.name: e for e in hardmax_api.public_entries([module]).values()}
    assert hardmax_api.undocumented(entries["Bare"])  # the dataclass's generated "Bare(x: int)" is no docstring
    assert not hardmax_api.undocumented(entries["Told"])
    assert hardmax_api.undocumented_members(Bare) == ["shown"]


def test_module_pages_link_re_exports_to_their_home():
    modules = hardmax_api.public_modules()
    entries = hardmax_api.public_entries(modules)
    dynamics = importlib.import_module("hardmax.dynamics")
    page = hardmax_api.module_page(dynamics, [e for e in entries.values() if "hardmax.dynamics" in e.modules])
    assert ".. autofunction:: hardmax.dynamics.simulate" in page and ".. autoclass:: hardmax.dynamics.Hardmax" in page
    top = hardmax_api.top_page(importlib.import_module("hardmax"), entries)
    assert ".. py:function:: simulate\n   :module: hardmax\n" in top and ":py:obj:`hardmax.dynamics.simulate`" in top
    assert ".. py:class:: Hardmax\n   :module: hardmax.dynamics.rules\n" in hardmax_api.module_page(
        importlib.import_module("hardmax.dynamics.rules"),
        [e for e in entries.values() if "hardmax.dynamics.rules" in e.modules])


def test_every_public_name_is_an_entry_under_every_module_that_exports_it():
    """`hardmax.simulate` and `hardmax.dynamics.simulate` both resolve: the home documents the object (autodoc,
    or py:data for a constant), the other modules name it (a py directive with :module:)."""
    modules = hardmax_api.public_modules()
    entries = hardmax_api.public_entries(modules)
    missing = []
    for module in modules:
        name = module.__name__
        listed = [e for e in entries.values() if name in e.modules]
        page = (hardmax_api.top_page(module, entries) if name == "hardmax"
                else hardmax_api.module_page(module, listed))
        missing += [f"{name}.{e.name}" for e in listed
                    if f":: {name}.{e.name}\n" not in page and f":: {e.name}\n   :module: {name}\n" not in page]
    assert not missing, missing[:20]


def test_the_readme_links_to_files_that_exist():
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [markdown or html for markdown, html in re.findall(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"", text)]
    local = [link.split("#")[0] for link in links if not link.startswith(("http://", "https://", "mailto:"))]
    assert local and not [link for link in local if link and not (ROOT / link).exists()]


def test_a_public_name_without_a_built_entry_is_reported(monkeypatch):
    """The build's last check: the inventory Sphinx built is compared with every `__all__`."""
    said = []
    monkeypatch.setattr(hardmax_api.logger, "warning", said.append)

    class Domain:
        objects = {"hardmax.simulate": None}

    class Env:
        def get_domain(self, name):
            assert name == "py"
            return Domain()

    hardmax_api.check_rendered(None, Env())
    assert "public name hardmax.dynamics.simulate has no entry in the API reference" in said
    assert not any("hardmax.simulate has" in line for line in said)
