"""The explorer's pretrained page: POST /api/pretrained against the library, bad requests as one line, and the page
in headless Chromium (offline: any request off the local server fails the test)."""

from __future__ import annotations

import pytest
import torch
from explore_server import Client, LiveServer
from pretrained_models import build

from hardmax.explore import create_app
from hardmax.pretrained import inspect, load, record

TEXT = "the movie was boring and a waste of time , i loved the music"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build("bert", tmp_path_factory.mktemp("explore-pretrained"))


@pytest.fixture(scope="module")
def server(model_dir):
    with LiveServer(create_app(None, pretrained=model_dir)) as live:
        yield live


def test_the_view_is_the_librarys(server, model_dir):
    answer = Client(server.url).post("/api/pretrained", json={"text": TEXT, "layer": 2, "head": 3})
    assert answer.status_code == 200, answer.text
    view = answer.json()
    p = load(model_dir)
    library = inspect(p, [TEXT], max_length=p.max_positions).to_dict()
    assert [sorted(row) for row in view["layers"]] == [sorted(row) for row in library["layers"]]
    for got, want in zip(view["layers"], library["layers"], strict=True):
        assert got == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert [h["top_tokens"] for h in view["heads"]] == [h["top_tokens"] for h in library["heads"]]
    r = record(p, [TEXT])
    assert view["tokens"] == r.tokens[0]
    expected = torch.stack([r.scores(a)[0].argmax(-1) for a in range(p.layers)])
    assert view["selections"] == expected.tolist()
    assert view["head_run"]["layer"] == 2 and view["head_run"]["head"] == 3
    assert view["head_run"]["positive_definite"] is False


@pytest.mark.parametrize("body, status, message", [
    ({"text": "  "}, 400, "the text is empty"),
    ({"text": "a", "colour": 1}, 400, "unknown key(s) 'colour'"),
    ({"text": "a", "layer": 9}, 400, "layer must be from 1 to 2"),
    ({"text": "a", "head": True}, 400, "head must be a small integer"),
    ({"text": "a" * 20_001}, 413, "at most 20,000"),
])
def test_bad_requests_are_one_line(server, body, status, message):
    answer = Client(server.url).post("/api/pretrained", json=body)
    assert answer.status_code == status and message in answer.json()["error"]
    assert "\n" not in answer.json()["error"]


def test_a_model_that_cannot_load_is_the_requests_error(tmp_path):
    with LiveServer(create_app(None, pretrained=tmp_path / "missing")) as live:
        answer = Client(live.url).post("/api/pretrained", json={"text": "a text"})
    assert answer.status_code == 400 and "no such model directory" in answer.json()["error"]


@pytest.mark.slow
def test_the_page_shows_the_layers_and_heads(server, model_dir):
    pytest.importorskip("playwright")
    from playwright.sync_api import sync_playwright
    from test_explore_browser import ARGS, CHROMIUM

    p = load(model_dir)
    library = inspect(p, [TEXT], max_length=p.max_positions)
    r = record(p, [TEXT])
    outside, errors = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1300, "height": 860})

        def guard(route):
            url = route.request.url
            if url.startswith((server.url + "/", "data:")):
                route.continue_()
            else:
                outside.append(url)
                route.abort()

        context.route("**/*", guard)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/pretrained")
        page.fill("#text", TEXT)
        page.click("#inspect")
        page.wait_for_function("() => window.explorer.view() !== null && window.explorer.idle()", timeout=60_000)
        rows = page.eval_on_selector_all("#layers tr[data-layer]", "rows => rows.map(r => r.dataset.layer)")
        assert rows == [str(layer) for layer in range(p.layers + 1)]
        cosines = page.eval_on_selector_all("#layers td[data-key=mean_cosine]",
                                            "cells => cells.map(c => c.textContent)")
        assert cosines == [f"{row['mean_cosine']:.3f}" for row in library.layer_rows()]
        words = page.eval_on_selector_all("#heads td[data-head]", "cells => cells.map(c => c.textContent)")
        assert words == [h[0][0] if h else "" for row in library.top_tokens for h in row]
        page.click("#heads td[data-layer='2'][data-head='1']")
        selects = page.eval_on_selector_all("#sentence span", "s => s.map(x => Number(x.dataset.selects))")
        assert selects == r.scores(1)[0, 1].argmax(-1).tolist()
        assert page.text_content("#message") == ""
        context.close()
        browser.close()
    assert outside == [], f"requests left the machine: {outside}"
    assert errors == [], f"JavaScript errors: {errors}"
