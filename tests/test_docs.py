"""The documentation's machinery (docs/_ext): the API reference covers every public name once, flags the
undocumented ones, and renders every public docstring as written without a reStructuredText error; the site
loads nothing from another host (check_offline.py), and the CLI reference (docs/cli.md, read from the parser)
shows every option's help whole.
The full build (`make docs`, warnings as errors, the gallery executed) runs in `make test` after pytest."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
docutils_core = pytest.importorskip("docutils.core", reason="the docs extra (pip install -e '.[docs]')")
hardmax_api = pytest.importorskip("hardmax_api", reason="the docs extra (pip install -e '.[docs]')")
check_offline = importlib.import_module("check_offline")


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



# --------------------------------------------------------------------------------------------
# Issue #39 item 17: the site renders its equations offline and loads nothing from another host.
# --------------------------------------------------------------------------------------------


CLEAN_PAGE = r"""<!doctype html><html><head>
<link rel="stylesheet" href="_static/site.css?v=1">
<link rel="canonical" href="https://hardmax.example.org/index.html">
<link rel="next" title="Next" href="next.html"><link rel="search" href="search.html">
<script defer="defer" src="_static/mathjax/tex-chtml.js"></script>
<script>window.MathJax = {"options": {"processHtmlClass": "math"}}</script>
<style>body { background: url("_static/bg.png") } /* url(https://in.a.comment/x.png) */</style>
<!-- <script src="https://cdn.example.com/commented-out.js"></script> -->
</head><body>
<p>Tokens move towards <span class="math">\(A z_i\)</span>; see <a href="https://arxiv.org/abs/2407.01602">the
paper</a> and <a href="//example.org/x">a protocol-relative link</a>.</p>
<img src="data:image/png;base64,AAAA" alt=""><img src="_static/fig.png" srcset="_static/fig.png 1x, fig@2x.png 2x">
<form action="https://example.org/search"></form>
</body></html>
"""
CLEAN_FILES = {
    "_static/site.css": '@import "other.css";\n.x { background: url(data:image/svg+xml;base64,AA) }\n'
                        '@font-face { src: url("fonts/a.woff2") format("woff2") }\n',
    "_static/other.css": "p { color: black }\n",
    # MathJax names a CDN for fallbacks it computes at run time: a string, not a load.
    "_static/mathjax/tex-chtml.js": 'var u = "https://cdn.jsdelivr.net/npm/speech-rule-engine@4/lib/mathmaps";\n',
    "_static/fonts/a.woff2": "", "_static/bg.png": "", "_static/fig.png": "", "fig@2x.png": "",
}


def _site(tmp_path: Path, page: str = CLEAN_PAGE, **files: str) -> Path:
    site = tmp_path / "html"
    for name, text in {"index.html": page, **CLEAN_FILES, **files}.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text, encoding="utf-8")
    return site


def test_a_site_that_loads_only_its_own_files_passes(tmp_path, capsys):
    site = _site(tmp_path)
    assert check_offline.main([str(site)]) == 0
    assert "load nothing from another host" in capsys.readouterr().out
    assert check_offline.foreign_or_missing(site) == ([], 4)  # the page, two stylesheets, a script


@pytest.mark.parametrize("where, text, url", [
    ("index.html", '<script src="https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"></script>',
     "https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"),  # Sphinx's own default
    ("index.html", '<link rel="stylesheet" href="//fonts.googleapis.com/css?family=Lato">',
     "//fonts.googleapis.com/css?family=Lato"),
    ("index.html", '<LINK REL="Preload" as="font" href="HTTPS://cdn.example.com/f.woff2">', "HTTPS://cdn.example.com/f.woff2"),
    ("index.html", '<img srcset="_static/fig.png 1x, https://img.example.com/fig@2x.png 2x">',
     "https://img.example.com/fig@2x.png"),
    ("index.html", '<iframe src="https://www.youtube.com/embed/x"></iframe>', "https://www.youtube.com/embed/x"),
    ("index.html", "<div style=\"background-image: url('https://img.example.com/bg.png')\"></div>",
     "https://img.example.com/bg.png"),
    ("index.html", "<style>@import url(https://fonts.googleapis.com/css2?family=Inter);</style>",
     "https://fonts.googleapis.com/css2?family=Inter"),
    ("index.html", "<style>@import 'http://example.com/a.css';</style>", "http://example.com/a.css"),
    ("index.html", '<script type="module">import {x} from "https://esm.sh/x";</script>', "https://esm.sh/x"),
    ("index.html", '<video poster="https://img.example.com/p.png"></video>', "https://img.example.com/p.png"),
    ("index.html", '<object data="//example.com/x.svg"></object>', "//example.com/x.svg"),
    ("index.html", '<svg><image href="https://img.example.com/a.png"/></svg>', "https://img.example.com/a.png"),
    ("_static/site.css", "@font-face { src: url( 'https://fonts.gstatic.com/a.woff2' ) }",
     "https://fonts.gstatic.com/a.woff2"),
    ("_static/mathjax/tex-chtml.js", 'x=1;import("https://cdn.example.com/mod.js")', "https://cdn.example.com/mod.js"),
])
def test_a_load_from_another_host_fails_naming_the_file_and_the_url(tmp_path, capsys, where, text, url):
    if where == "index.html":
        site = _site(tmp_path, CLEAN_PAGE.replace("</body>", text + "\n</body>"))
    else:
        site = _site(tmp_path, **{where: CLEAN_FILES[where] + text + "\n"})
    assert check_offline.main([str(site)]) == 1
    err = capsys.readouterr().err
    assert f"{where}: loads {url} (" in err and err.count(": loads ") == 1, err


def test_a_local_load_missing_from_the_build_fails(tmp_path, capsys):
    page = CLEAN_PAGE.replace("_static/mathjax/tex-chtml.js", "_static/mathjax/tex-mml-chtml.js")
    assert check_offline.main([str(_site(tmp_path, page))]) == 1
    assert "index.html: loads _static/mathjax/tex-mml-chtml.js (<script src>), which is not in the build" in (
        capsys.readouterr().err)


def test_no_site_is_an_error(tmp_path, capsys):
    assert check_offline.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("check_offline: error: no .html page under ")


def test_the_build_runs_the_offline_check():
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("\nbuild-docs:")[1].split("\n\n")[0]
    build, check = recipe.index("sphinx-build"), recipe.index("docs/_ext/check_offline.py docs/_build/html")
    assert build < check


def _chromium() -> str | None:
    named = os.environ.get("HARDMAX_CHROMIUM")
    return named or next((found for name in ("chromium", "chromium-browser", "google-chrome")
                          if (found := shutil.which(name))), None)


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """A one-page site built with the documentation's own configuration (less the gallery and the API pages)."""
    pytest.importorskip("sphinx-mathjax-offline", reason="the docs extra (pip install -e '.[docs]')")
    from sphinx.cmd.build import build_main

    source = tmp_path_factory.mktemp("docs-source")
    (source / "conf.py").write_text(
        "import runpy\n"
        f"_docs = runpy.run_path({str(ROOT / 'docs' / 'conf.py')!r})\n"
        "globals().update({k: v for k, v in _docs.items() if k.islower() and not k.startswith(('_', 'sphinx_gallery'))"
        " and k not in ('exclude_patterns', 'templates_path', 'os', 'sys', 'Path')})\n"
        "extensions = [e for e in extensions if e not in ('sphinx_gallery.gen_gallery', 'hardmax_api')]\n",
        encoding="utf-8")
    (source / "index.md").write_text("# Leaders\n\nTokens move towards the largest projection on $A z_i$:\n\n"
                                      "$$\\dot z_i = \\sum_j P_{ij} A z_j$$\n\nSee [the paper](https://arxiv.org/abs/"
                                      "2407.01602).\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("docs-html")
    assert build_main(["-E", "-W", "-q", "-b", "html", str(source), str(out)]) == 0
    return out


def test_the_documentation_serves_its_math_renderer_itself(small_site, capsys):
    page = (small_site / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page)
    assert scripts == ["_static/mathjax/tex-chtml.js"] and (small_site / scripts[0]).is_file()
    assert check_offline.main([str(small_site)]) == 0, capsys.readouterr().err


def test_the_equations_render_with_no_network(small_site):
    browser = _chromium()
    if browser is None:
        if os.environ.get("HARDMAX_REQUIRE_BROWSER") == "1":
            pytest.fail("this test needs Chromium: apt-get install chromium (or set HARDMAX_CHROMIUM)", pytrace=False)
        pytest.skip("needs Chromium: apt-get install chromium (or set HARDMAX_CHROMIUM)")
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--disable-background-networking", "--disable-component-update", "--no-first-run",
             f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",  # no host resolves
             "--virtual-time-budget=10000", "--dump-dom", (small_site / "index.html").as_uri()],
            capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<mjx-container") == 2 and 'jax="CHTML"' in dom  # the inline and the display equation
    assert "\\(A z_i\\)" not in dom


# --------------------------------------------------------------------------------------------
# Issue #39 item 16: the CLI reference (docs/cli.md, read from the parser; `hardmax COMMAND --help`)
# shows every help whole: a config field's comment continued on the next lines is one help.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Commented:
    """Comment layouts that `field_help` reads (module level: its source is read back)."""

    rule: str = "hardmax"  # attention rule (softmax and
    # unnormalised take --beta); anything else is solved
    solver: str = "layers"  # layers: the paper's
    # layer; euler: --layers steps
    # of --dt, three lines in all
    aligned: int = 1  # a comment aligned
                      # Under itself goes on, whatever its first letter
    bracket: int = 2  # a bracket left open (see
    # Below) goes on too
    # Section: a heading after a complete comment belongs to no field
    plain: int = 3  # a plain one
    before: int = 4  # the one before a field that needs a block
    # what the block says about
    # the next field
    after: int = 5
    apart: int = 6  # a blank line ends a comment

    # a block above a field without a comment of its own
    above: int = 7
    last: int = 8  # the last field
    # goes on before a method

    def method(self) -> int:
        """Nothing here is a help."""
        # not a help
        return self.last


def test_a_comment_continued_on_the_next_lines_is_read_whole():
    from hardmax.cli.options import field_help

    assert dict(field_help(Commented)) == {
        "rule": "attention rule (softmax and unnormalised take --beta); anything else is solved",
        "solver": "layers: the paper's layer; euler: --layers steps of --dt, three lines in all",
        "aligned": "a comment aligned Under itself goes on, whatever its first letter",
        "bracket": "a bracket left open (see Below) goes on too",
        "plain": "a plain one",
        "before": "the one before a field that needs a block",
        "after": "what the block says about the next field",
        "apart": "a blank line ends a comment",
        "above": "a block above a field without a comment of its own",
        "last": "the last field goes on before a method",
    }


def _cli_helps():
    from hardmax.cli.app import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return [(command, action) for command, parser in commands.items() for action in parser._actions
            if action.dest != "help" and action.help and action.help != argparse.SUPPRESS]


SHOWN_DEFAULT = re.compile(r" \((?:default: [^()]*|on by default; this flag turns it off)\)$")
DANGLING = {"a", "an", "and", "as", "at", "but", "by", "each", "every", "for", "from", "if", "in", "into", "is",
            "its", "nor", "of", "on", "or", "per", "than", "that", "the", "their", "to", "via", "when", "which",
            "whose", "with"}


def _unfinished(help_text: str) -> str | None:
    """What shows that a help was cut mid-sentence, or None."""
    text = SHOWN_DEFAULT.sub("", help_text.replace("%%", "%")).rstrip()
    for opening, closing in ("()", "[]", "{}"):
        if text.count(opening) != text.count(closing):
            return f"unbalanced {opening}{closing}"
    if text.count('"') % 2 or text.count("`") % 2:
        return "a quote left open"
    last = text.split()[-1]
    if last[-1] in ",;:(/-–—" or last.lower() in DANGLING:
        return f"ends with {last!r}"
    return None


def test_every_option_of_every_command_has_a_whole_help():
    helps = _cli_helps()
    assert {command for command, _ in helps} >= {"simulate", "particles", "train", "reproduce", "svm", "explore"}
    cut = [f"hardmax {command} {'/'.join(a.option_strings) or a.dest}: {why}: {a.help!r}"
           for command, a in helps if (why := _unfinished(a.help))]
    assert not cut, "\n".join(cut)


@pytest.mark.parametrize("help_text, cut", [
    ("attention rule (softmax and (default: hardmax)", True),
    ("Figure 2's tokens: the authors' notebook (random", True),
    ("the step of every layer (default: 0.5)", False), ("a file of the (default: none)", True),
    ("the paper's code does not lower-case (on by default; this flag turns it off)", False),
    ('literal "2,0;0,1 (default: none)', True), ("steps of the solver, one of", True),
])
def test_the_cut_criterion(help_text, cut):
    assert (_unfinished(help_text) is not None) == cut


SECTION_HEADINGS = ("Your own table", "Candidates trained per d")  # comment blocks over several fields


def test_every_comment_line_of_a_config_reaches_a_help():
    """No line of a field's comment is lost: each whole-line comment among a config's fields is in a help."""
    from hardmax.cli.options import field_help
    from hardmax.data import DataConfig
    from hardmax.experiments.dynamics import SimulateConfig
    from hardmax.experiments.pipeline import ReproduceConfig
    from hardmax.models import ModelConfig
    from hardmax.training import TrainConfig

    known = {c.__name__: c for c in (SimulateConfig, DataConfig, TrainConfig, ModelConfig, ReproduceConfig)}
    classes = {a.dest.split(".")[0] for _, a in _cli_helps() if "." in a.dest}  # options generated from a config
    assert classes and classes <= set(known), f"a config new to the CLI: add it here: {classes - set(known)}"
    lost = []
    for name in classes:
        cls = known[name]
        helps = " | ".join(field_help(cls).values())
        body = inspect.getsource(cls).split("\n    def ")[0].splitlines()
        heading = False
        for line in body:
            stripped = line.strip()
            if not stripped.startswith("#"):
                heading = False
                continue
            words = stripped.lstrip("#").strip()
            heading = heading or words.startswith(SECTION_HEADINGS)
            if not heading and words not in helps:
                lost.append(f"{name}: {words}")
    assert not lost, "\n".join(lost)
    simulate = {a.dest: a.help for command, a in _cli_helps() if command == "simulate"}
    assert simulate["SimulateConfig.rule"] == ("attention rule: a name in hardmax.dynamics.RULES, its parameters "
                                               "given by the options of the same name (--beta, --theta); anything "
                                               "but the paper's hardmax layer is solved by `solve` (default: "
                                               "hardmax)")
    assert simulate["SimulateConfig.solver"].startswith("layers: the paper's layer (α); euler / rk4 / renormalised")
    assert simulate["SimulateConfig.configurations"].endswith("or the library's dyadic variants (exact ties, known "
                                                              "limits) (default: paper)")


def test_every_option_help_is_plain_restructuredtext():
    """docs/cli.md shows each help through sphinx-argparse, which reads it as reStructuredText: a help must render
    there without a message (`|x|` is a substitution, `*x*` emphasis), or the warnings-as-errors build fails."""
    import docutils.core
    import docutils.nodes

    broken = []
    for command, action in _cli_helps():
        settings = {"report_level": 2, "halt_level": 5, "warning_stream": False}
        doctree = docutils.core.publish_doctree(action.help, settings_overrides=settings)
        messages = [m.astext() for m in doctree.findall(lambda node: isinstance(
            node, docutils.nodes.system_message | docutils.nodes.problematic))]
        if messages:
            broken.append(f"hardmax {command} {'/'.join(action.option_strings) or action.dest}: {messages[0]}")
    assert not broken, "\n".join(broken)


def test_every_gallery_example_underlines_its_title_whole():
    """A gallery example's title is underlined at least its length (docutils' "Title underline too short" fails the
    docs build, which runs last in CI)."""
    for path in sorted((ROOT / "examples").glob("plot_*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        title, underline = lines[1], lines[2]
        assert set(underline) == {"="} and len(underline) >= len(title), f"{path.name}: {title!r}"
