"""Tests of `hardmax.explore.assets`: `STATIC` is the package's own folder of the pages' files, and holds every
script and style sheet a page names (served from /static/, never a CDN)."""

from __future__ import annotations

import re
from pathlib import Path

import hardmax.explore
from hardmax.explore.assets import STATIC

PAGES = ("playground", "classifier", "pretrained")


def test_static_is_the_packages_folder_of_the_pages():
    assert STATIC == Path(hardmax.explore.__file__).parent / "static" and STATIC.is_dir()
    assert {f"{page}.html" for page in PAGES} <= {p.name for p in STATIC.iterdir()}


def test_every_asset_a_page_names_is_shipped_and_none_is_remote():
    for page in PAGES:
        html = (STATIC / f"{page}.html").read_text(encoding="utf-8")
        named = re.findall(r'(?:src|href)="([^"]*)"', html)
        assets = [n.removeprefix("/static/") for n in named if n.startswith("/static/")]
        assert any(a.endswith(".js") for a in assets) and "explore.css" in assets, page
        assert all((STATIC / a).is_file() for a in assets), (page, assets)
        assert not [n for n in named if n.startswith(("http:", "https:", "//"))], page
