"""Sphinx configuration of the hardmax documentation (`make docs`; CI builds it with warnings as errors).

Sphinx because the tools scientific Python readers know are Sphinx's: autodoc for a reference written from
the docstrings, sphinx-gallery for examples that run at build time and download as scripts and notebooks,
sphinx-argparse for a CLI reference read from the parser itself, MyST for the Markdown pages.
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
    "sphinx.ext.viewcode",
    "sphinxarg.ext",
    "sphinx_gallery.gen_gallery",
    "hardmax_api",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json", "sg_execution_times.rst"]
templates_path = ["_templates"]

# `name` in a docstring is code, not a cross-reference to guess at.
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False  # the pages are written by hardmax_api
add_module_names = False

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# A link to a file that is not a page (a JSON result, a script) becomes a download; a broken one warns.
# Every public name is an anchor under each module that exports it (`hardmax.Trajectory`, `hardmax.dynamics.
# Trajectory`, ...: one object), so a bare `Trajectory` in a signature has several equal targets; Sphinx
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
    "capture_repr": (),  # a cell ending in `fig` shows the figure in a notebook, not "<Figure ...>" here
}

html_theme = "furo"
html_title = f"hardmax {version}"
html_static_path: list[str] = []
html_show_sourcelink = False

