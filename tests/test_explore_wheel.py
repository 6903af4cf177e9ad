"""A wheel built from the repository carries the explorer's pages: installed into a fresh virtual environment,
its `hardmax explore` serves both pages and stops on Ctrl-C.

The fresh environment gets the wheel itself (no editable install, no source tree on the path) and, to stay
offline and fast, finds the wheel's dependencies (torch, numba, ...) in the test's own environment through a
.pth file placed after its own site-packages.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

from hardmax.explore.assets import STATIC

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


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

    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=False)
    python = fresh / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # after site itself
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                "--no-index", str(wheel)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    where = subprocess.run([str(python), "-c", "import hardmax.explore; print(hardmax.explore.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr[-2000:]

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen([str(fresh / "bin" / "hardmax"), "explore", "--runs", str(tmp_path), "--port", "0",
                               "--no-browser"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        found = re.search(r"(http://\S+)/playground", line)
        assert found, line + server.stderr.read()[-2000:] if server.poll() is not None else line
        for path in ("/playground", "/classifier", "/static/playground.js", "/static/classifier.js",
                     "/static/plane.js", "/static/explore.css", "/api/presets", "/api/runs"):
            with urllib.request.urlopen(found.group(1) + path, timeout=60) as r:
                assert r.status == 200 and len(r.read()) > 10, path
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
