"""Tests of `hardmax.explore.export`: standalone HTML (the API's export self-contained, any text embedded inertly,
inlined assets that cannot end their element) and `view` of a trajectory for notebooks.

The trained runs and the live server the API tests ask are conftest.py's `explore_runs` and `explore_client`
(built once per session); helpers in explore_server.py.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from explore_server import SQUARE

import hardmax
from hardmax.explore import standalone_html, view
from hardmax.explore.frames import decode_array, decode_path

pytestmark = pytest.mark.usefixtures("one_thread")


def test_export_is_self_contained(explore_client):
    response = explore_client.post("/api/export",
                                   json={"page": "playground", "request": {"tokens": SQUARE, "layers": 10}})
    assert response.status_code == 200
    html = response.text
    assert "window.HARDMAX_EMBEDDED" in html and "/static/" not in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing fetched from anywhere
    data = json.loads(re.search(r"window.HARDMAX_EMBEDDED = (.*?);</script>", html, re.S).group(1))["data"]
    trajectory = hardmax.simulate(np.array(SQUARE), alpha=0.5, layers=10)
    assert len(data["attention"]) == data["path"]["shape"][0]  # every stored layer's attention sets
    for k, layer in enumerate(data["attention"]):
        sets = hardmax.attention_sets(trajectory.tokens[k]).numpy()
        assert layer["sets"] == [np.nonzero(row)[0].tolist() for row in sets]
    assert explore_client.post("/api/export", json={"page": "other"}).status_code == 400


def test_view_of_a_trajectory_for_notebooks(tmp_path):
    trajectory = hardmax.simulate(np.array(SQUARE), alpha=0.5, layers=12)
    shown = view(trajectory)
    assert shown._repr_html_().startswith("<iframe srcdoc=")
    path = shown.save(tmp_path / "v.html")
    payload = re.search(r"window.HARDMAX_EMBEDDED = (.*?);</script>", path.read_text(), re.S).group(1)
    data = json.loads(payload)["data"]
    assert np.array_equal(decode_path(data["path"], 12), trajectory.tokens.numpy())
    with pytest.raises(ValueError, match="one sequence"):
        view(hardmax.simulate(np.array([SQUARE]), alpha=0.5, layers=2))
    with pytest.raises(ValueError, match="page"):
        standalone_html("other", {})


def test_views_of_other_trajectories():
    rng = np.random.default_rng(3)
    with pytest.raises(ValueError, match=r"save=Save\(\) \(every layer\)"):
        view(hardmax.simulate(rng.standard_normal((6, 2)), hardmax.Softmax(beta=3.0), alpha=0.5, layers=30,
                              save=hardmax.Save(every=5)))
    Z = rng.standard_normal((12, 5)) * np.array([0.01, 0.01, 5, 5, 5])
    from hardmax.explore.views import trajectory_view

    shown = trajectory_view(hardmax.simulate(Z, hardmax.Softmax(beta=0.5), alpha=0.5, layers=8))
    assert shown["shown"] == 3 and decode_array(shown["path"]).shape[-1] == 3
    assert "principal components" in shown["note"]  # projected, and said so (not the first raw coordinates)
    spread = decode_array(shown["path"])[0].std(axis=0)
    assert spread.min() > 1.0  # the three large directions, not the two tiny ones


def test_an_export_embeds_any_text_inertly():
    """Text in an export's data or state (a review's words, the URL fragment) cannot end its script or open markup:
    <, >, & and U+2028/9 are \\u escapes of the same JSON (before: only "</" was, and "<!--<script>" blanked it)."""
    from html.parser import HTMLParser

    hostile = "<!--<script>x</script><SCRIPT>alert(1)</script >&amp;\u2028\u2029-->"
    data = {"words": [hostile, "ok"], "nested": {"summary": hostile}}
    page = standalone_html("classifier", data, state="k=1&t=" + hostile)
    payload = re.search(r"window.HARDMAX_EMBEDDED = (.*?);</script>", page, re.S).group(1)
    assert not set(payload) & set("<>&\u2028\u2029")
    assert json.loads(payload) == {"data": data, "state": "k=1&t=" + hostile}

    class Scripts(HTMLParser):
        found: list = []

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self.found.append(tag)

    Scripts().feed(page)
    assert len(Scripts.found) == 3  # the embedded data, plane.js and classifier.js: nothing else opened one


def test_inlined_assets_cannot_end_their_element(tmp_path, monkeypatch):
    """A script or a style sheet holding "</script", "<!--", "<script" or "</style" is inlined with those written as
    escapes of the same characters, so the element ends where the file does."""
    from hardmax.explore import export

    (tmp_path / "playground.html").write_text('<head><link rel="stylesheet" href="/static/a.css"></head><body>\n'
                                              '<!-- embedded -->\n<script src="/static/a.js"></script></body>')
    (tmp_path / "a.js").write_text('const s = "<!--<script>"; const t = /<\\/script>/; // </SCRIPT> <Script\n')
    (tmp_path / "a.css").write_text('.x::after { content: "</style><script>"; }\n')
    monkeypatch.setattr(export, "STATIC", tmp_path)
    page = standalone_html("playground", {"x": 1})
    script = page.split("<script>\n", 1)[1].rsplit("\n</script>", 1)[0]
    style = page.split("<style>\n", 1)[1].split("\n</style>", 1)[0]
    assert not re.search(r"(?i)<!--|</?script", script) and not re.search(r"(?i)</style", style)
    assert script == 'const s = "\\x3C!--\\x3Cscript>"; const t = /<\\/script>/; // \\x3C/SCRIPT> \\x3CScript\n'
