"""A wheel built from the repository carries the explorer's pages: installed on its own, it serves both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hardmax.explore.assets import STATIC

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

SERVE = """
import sys, threading, urllib.request
sys.path.insert(0, {tests!r})
import hardmax
from hardmax.explore import create_app
from explore_server import LiveServer
assert hardmax.__file__.startswith({site!r}), hardmax.__file__
with LiveServer(create_app(None)) as live:
    for path in ("/playground", "/classifier", "/static/playground.js", "/static/classifier.js",
                 "/static/plane.js", "/static/explore.css", "/api/presets"):
        with urllib.request.urlopen(live.url + path, timeout=60) as r:
            assert r.status == 200 and len(r.read()) > 100, path
print("served")
"""


def test_the_wheel_serves_both_pages(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("hardmax-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assets = {f"hardmax/explore/static/{p.name}" for p in STATIC.iterdir() if p.suffix in (".html", ".js", ".css")}
    assert assets and assets <= names, sorted(assets - names)
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                                str(site), str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(site)}
    served = subprocess.run([sys.executable, "-c", SERVE.format(tests=str(ROOT / "tests"), site=str(site))],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert served.returncode == 0 and "served" in served.stdout, served.stderr[-2000:]
