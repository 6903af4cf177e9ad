"""Sphinx configuration of the hardmax documentation (`make docs`; CI builds it with warnings as errors).

Sphinx because the tools scientific Python readers know are Sphinx's: autodoc for a reference written from
the docstrings, sphinx-gallery for examples that run at build time and download as scripts and notebooks,
sphinx-argparse for a CLI reference read from the parser itself, MyST for the Markdown pages.

The equations are rendered by MathJax served from the site itself (`sphinx-mathjax-offline`, MathJax 3.2.2
copied into `_static/mathjax/`): Sphinx's default loads MathJax from a CDN, so a site read offline, behind a
firewall or from a laptop's `docs/_build/html` showed `\\(A z_i\\)` as source on the front page and every view
page. It was chosen over `sphinxcontrib-katex`, whose wheel ships KaTeX's script but not its stylesheet and fonts
(those load from a CDN, and prerendering needs Node at build time), and over `sphinx.ext.imgmath`, which needs
a LaTeX installation.
`make build-docs` then runs `docs/_ext/check_offline.py`: the build fails if any page, stylesheet or script
makes the browser load anything from another host, or names a local file that is not in the build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")
# The gallery runs each example from its own folder: a relative $HARDMAX_IMDB is read from where the build started.
if os.environ.get("HARDMAX_IMDB") and not Path(os.environ["HARDMAX_IMDB"]).is_absolute():
    os.environ["HARDMAX_IMDB"] = str(Path(os.environ["HARDMAX_IMDB"]).resolve())


from hardmax.version import __version__  # noqa: E402

project = "hardmax"
author = "hardmax developers"
copyright = "2026, hardmax developers"  # noqa: A001 - Sphinx's name
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax from _static, never from a CDN (above)
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "sphinx_gallery.gen_gallery",
    "hardmax_api",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json", "sg_execution_times.rst",
                    "auto_examples/sg_execution_times.rst",  # not written any more (below); an old build's copy
                    "reports/_*.md",  # drafts of a report (docs/reports/_name.md), not pages
                    "claims/*.md"]  # the sections of dynamics.md's "results as checks", one file per paper
templates_path = ["_templates"]

# `name` in a docstring is code, not a cross-reference to guess at.
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False  # the pages are written by hardmax_api
add_module_names = False

# The MathJax that sphinx-mathjax-offline copies into the build (it sets this too; said here so that the page's
# script tag never falls back to Sphinx's CDN default if that extension changes).
mathjax_path = "mathjax/tex-chtml.js"

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# A link to a file that is not a page (a JSON result, a script) becomes a download; a broken one warns.
# Every public name is an anchor under each module that exports it (`hardmax.Solution`, `hardmax.dynamics.
# Solution`, ...: one object), so a bare `Solution` in a signature has several equal targets; Sphinx
# links the first and would warn "more than one target found". Nothing else is in this category.
suppress_warnings = ["ref.python"]

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py$",  # every example runs at build time
    "ignore_pattern": r"(^|/)_",      # helpers shared by examples
    "abort_on_example_error": True,
    "run_stale_examples": True,  # every build runs every example, against the library as it is now
    "only_warn_on_example_error": False,
    "download_all_examples": True,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "show_memory": False,
    "image_scrapers": ("figure_scraper.figure_scraper",),  # pyplot's figures and the Figures hardmax.plots returns
    # The build's timing table is for whoever builds, and its page loads jQuery and DataTables from CDNs.
    "write_computation_times": False,
    "capture_repr": (),  # a cell ending in `fig` shows the figure in a notebook, not "<Figure ...>" here
}

html_theme = "furo"
html_title = f"hardmax {version}"
html_static_path: list[str] = []
html_show_sourcelink = False

