"""The explorer in a real headless Chromium (Playwright): both pages, edits, playback, export, offline.

Chromium: $HARDMAX_CHROMIUM, or `chromium` / `chromium-browser` / `google-chrome` on the PATH (Debian:
`apt-get install chromium`). Without one these tests skip, saying so, unless HARDMAX_REQUIRE_BROWSER=1
(`.ci/run` sets it, after installing Chromium), where they fail. Every page may reach only the local server:
any other request is blocked and recorded, and each test asserts that none was made. HARDMAX_SCREENSHOTS=DIR
keeps the screenshots (docs/explore.md's pictures, results/figures/explore-*.png, come from there).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from explore_server import LiveServer, train_runs

import hardmax
from hardmax.explore import create_app
from hardmax.explore.frames import FRAME_TYPE

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]


def _chromium() -> str | None:
    named = os.environ.get("HARDMAX_CHROMIUM")
    if named:
        return named
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


CHROMIUM = _chromium()
if CHROMIUM is None or not __import__("importlib").util.find_spec("playwright"):
    message = ("browser tests need Chromium and Playwright: apt-get install chromium (or set HARDMAX_CHROMIUM) and "
               "pip install -e '.[dev]'")
    if os.environ.get("HARDMAX_REQUIRE_BROWSER") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("explore-browser")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("HARDMAX_IMDB", raising=False)
        mp.setenv("HARDMAX_CACHE", str(root / "cache"))
        return train_runs(root, root / "cache", (("d2", ("--d", "2")),))


@pytest.fixture(scope="module")
def server(runs):
    with LiveServer(create_app(runs)) as live:
        yield live


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server, tmp_path):
    """A page whose requests may go only to the local server (or stay inside the page: data:, blob:, file:)."""
    context = browser.new_context(viewport={"width": 1300, "height": 860}, accept_downloads=True)
    outside, errors = [], []

    def guard(route):
        url = route.request.url
        if url.startswith((server.url + "/", "data:", "blob:", "file://")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.outside, page.base = outside, server.url
    yield page
    context.close()
    assert outside == [], f"requests left the machine: {outside}"
    assert errors == [], f"JavaScript errors: {errors}"


def _idle(page) -> None:
    page.wait_for_function("() => window.explorer && window.explorer.idle()", timeout=60_000)


def _screenshot(page, name: str, tmp_path: Path) -> None:
    """Screenshot the page, and check that its plane is not blank: at least 0.3 % of the plane's pixels are
    drawn (not its white background) in several colours. The page's screenshot is kept under
    $HARDMAX_SCREENSHOTS."""
    from PIL import Image

    path, plane = tmp_path / f"{name}.png", tmp_path / f"{name}-plane.png"
    page.screenshot(path=str(path))
    page.locator("#plane").screenshot(path=str(plane))
    pixels = np.asarray(Image.open(plane).convert("RGB")).reshape(-1, 3)
    drawn = pixels[(pixels < 235).any(axis=1)]
    assert len(drawn) > 0.003 * len(pixels), f"{name}: the plane is blank ({len(drawn)} pixels drawn)"
    assert len(np.unique(drawn // 32, axis=0)) >= 3, f"{name}: the plane is drawn in fewer than 3 colours"
    keep = os.environ.get("HARDMAX_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / f"explore-{name}.png")


def _set(page, selector: str, value: str) -> None:
    page.fill(selector, value)
    page.dispatch_event(selector, "change")


def _shown(page) -> dict:
    """What the page shows: per token its final position, limit cluster and leader layer; the verdict."""
    rows = page.eval_on_selector_all("#token-table tr[data-i]", """rows => rows.map(r => ({
        final: JSON.parse(r.dataset.final), label: Number(r.dataset.label), since: Number(r.dataset.leaderSince)}))""")
    return {"rows": rows, "verdict": page.get_attribute("#verdict", "data-passed")}


def _library(state: dict):
    tokens = np.array(state["tokens"], dtype=np.float64)
    rule = hardmax.Softmax(beta=10 ** state["betaLog"]) if state["rule"] == "softmax" else hardmax.Hardmax()
    return hardmax.simulate(tokens, rule, alpha=state["alpha"], layers=state["layers"], A=np.array(state["A"]))


def _assert_matches_library(page) -> None:
    state = page.evaluate("() => JSON.parse(JSON.stringify(window.explorer.state))")
    trajectory = _library(state)
    shown = _shown(page)
    final = np.array([r["final"] for r in shown["rows"]])
    assert np.allclose(final, trajectory.final.numpy(), rtol=0, atol=1e-9)
    assert [r["since"] for r in shown["rows"]] == hardmax.leader_layers(trajectory).tolist()
    assert [r["label"] for r in shown["rows"]] == hardmax.find_clusters(trajectory).labels.tolist()
    assert shown["verdict"] == str(hardmax.check_theorem(trajectory).passed).lower()


def test_playground_edits_play_and_agree_with_the_library(page, tmp_path):
    page.goto(page.base + "/playground")
    _idle(page)
    page.click("#clear")
    box = page.locator("#plane").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    for dx, dy in ((150, 120), (-160, 110), (-140, -150), (170, -130), (30, 20), (-40, -10), (10, 70)):
        page.mouse.click(cx + dx, cy + dy)
    _idle(page)
    assert page.locator("#token-table tr[data-i]").count() == 7
    before = page.evaluate("() => window.explorer.state.tokens[4]")
    first = page.locator('#plane [data-i="4"]').bounding_box()
    page.mouse.move(first["x"] + first["width"] / 2, first["y"] + first["height"] / 2)
    page.mouse.down()
    page.mouse.move(first["x"] + first["width"] / 2 + 40, first["y"] + first["height"] / 2 - 30, steps=5)
    page.mouse.up()
    _idle(page)
    after = page.evaluate("() => window.explorer.state.tokens[4]")
    assert after[0] > before[0] and after[1] > before[1]  # dragged right and up (the plane's y points up)
    shown = page.eval_on_selector('#token-table tr[data-i="4"]', "r => r.cells[1].textContent")
    assert [float(x) for x in shown.split(",")] == pytest.approx(after, rel=1e-3)  # the table shows the new start
    _set(page, "#alpha", "0.8")
    _set(page, "#layers", "60")
    _set(page, "#A-0-1", "0.25")  # the mirrored entry follows: A stays symmetric
    assert page.input_value("#A-1-0") == "0.25"
    with page.expect_response(lambda r: r.url.endswith("/api/simulate")) as answered:
        page.select_option("#rule", "softmax")
    _idle(page)
    assert answered.value.headers["content-type"] == FRAME_TYPE  # the page reads the binary frames it asks for
    assert page.get_attribute("#verdict", "data-passed") == ""  # Theorem 2.1 is about hardmax
    page.select_option("#rule", "hardmax")
    page.check("#show-attention")
    _idle(page)
    page.click("#play")
    page.wait_for_selector("body[data-played=end]", timeout=60_000)
    assert page.input_value("#layer") == "60"
    _assert_matches_library(page)
    state = page.evaluate("() => window.explorer.state")
    assert state["A"] == [[1, 0.25], [0.25, 1]] and state["alpha"] == 0.8 and len(state["tokens"]) == 7
    page.eval_on_selector("#layer", "e => { e.value = 1; e.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => window.explorer.attention()[1] !== undefined")
    sets = page.evaluate("() => window.explorer.attention()[1].sets")
    expected = hardmax.attention_sets(_library(state).tokens[1])
    assert sets == [np.nonzero(row)[0].tolist() for row in expected.numpy()]
    assert page.locator("#plane line.attention").count() > 0
    _screenshot(page, "playground", tmp_path)
    # the whole state is in the URL: a fresh page from the link shows the same run
    link = page.url
    page.goto(page.base + "/classifier")
    page.goto(link)
    _idle(page)
    _assert_matches_library(page)
    assert page.evaluate("() => window.explorer.state.k") == 1


def test_playground_refuses_a_non_spd_A_and_an_oversized_run(page, tmp_path):
    page.goto(page.base + "/playground")
    _idle(page)
    _set(page, "#A-0-0", "-1")
    _idle(page)
    assert "positive definite" in page.inner_text("#message")
    _screenshot(page, "non-spd", tmp_path)  # the last run stays drawn under the message
    _set(page, "#A-0-0", "1")
    _idle(page)
    assert page.inner_text("#message") == ""
    _set(page, "#random-n", "400")
    page.click("#random")
    _set(page, "#layers", "2000")
    _idle(page)
    assert "positions" in page.inner_text("#message")


def test_playground_in_3d_and_presets(page, tmp_path):
    page.goto(page.base + "/playground")
    _idle(page)
    page.select_option("#random-d", "3")
    _set(page, "#random-n", "25")
    page.click("#random")
    _idle(page)
    _assert_matches_library(page)
    before = page.evaluate("() => window.explorer.state.yaw")
    box = page.locator("#plane").bounding_box()
    page.mouse.move(box["x"] + 30, box["y"] + 30)
    page.mouse.down()
    page.mouse.move(box["x"] + 130, box["y"] + 60, steps=4)
    page.mouse.up()
    assert page.evaluate("() => window.explorer.state.yaw") != before and "cam=" in page.url
    _screenshot(page, "playground-3d", tmp_path)
    # a long 3-D run (more points than a spread argument may hold) is drawn, and turns about its own centre
    far = (np.random.default_rng(5).standard_normal((100, 3)) + 10.0).round(6).tolist()
    page.goto(page.base + "/playground#t=" + ";".join(",".join(map(str, p)) for p in far) + "&L=1500&k=1500")
    _idle(page)
    assert page.get_attribute("#verdict", "data-passed") in ("true", "false") and page.inner_text("#message") == ""
    inside = "() => [...document.querySelectorAll('#plane .token')].filter(e => { const b = e.getBBox(); " \
             "const r = document.querySelector('#plane').getBoundingClientRect(); return b.x >= 0 && b.y >= 0 && " \
             "b.x <= r.width && b.y <= r.height; }).length"
    assert page.evaluate(inside) == 100
    box = page.locator("#plane").bounding_box()
    page.mouse.move(box["x"] + 20, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + 180, box["y"] + 40, steps=4)
    page.mouse.up()
    assert page.evaluate(inside) == 100
    page.select_option("#preset", "dyadic_non_leader_clusters")
    _idle(page)
    rows = _shown(page)["rows"]
    assert np.allclose([r["final"] for r in rows][4:], [[0.5 + 0.5, 0.0], [-1.0, 0.0]], atol=1e-9)


def _open_offline(browser, saved: Path):
    """An exported file opened from file:// in a context with the network off; every other request is recorded
    and blocked. Returns (context, the requests made elsewhere, the page once drawn)."""
    offline = browser.new_context(offline=True)
    outside: list[str] = []
    offline.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                  else (outside.append(route.request.url), route.abort()))
    view = offline.new_page()
    view.goto(saved.as_uri())
    view.wait_for_selector("body[data-state=ready]")
    return offline, outside, view


def test_export_opens_offline_from_a_file(page, tmp_path, browser):
    page.goto(page.base + "/playground")
    _idle(page)
    with page.expect_download() as download:
        page.click("#export")
    saved = tmp_path / "export.html"
    download.value.save_as(saved)
    expected = _shown(page)
    offline, outside, view = _open_offline(browser, saved)
    shown = _shown(view)
    assert shown["rows"] == expected["rows"] and shown["verdict"] == expected["verdict"]
    view.check("#show-attention")  # the export carries every layer's attention sets
    view.eval_on_selector("#layer", "e => { e.value = 0; e.dispatchEvent(new Event('input')); }")
    assert view.locator("#plane line.attention").count() > 0
    view.click("#play")
    view.wait_for_selector("body[data-played=end]", timeout=30_000)
    _screenshot(view, "playground-export", tmp_path)
    offline.close()
    assert outside == []


def test_classifier_shows_what_explain_says(page, runs, tmp_path):
    from hardmax.explain import explain_text
    from hardmax.training import load_run

    text = "A wonderful film with a superb cast, but the ending was boring and the plot dreadful."
    page.goto(page.base + "/classifier#run=d2&text=" + __import__("urllib.parse").parse.quote(text))
    _idle(page)
    page.wait_for_selector("#label")
    expected = explain_text(load_run(runs / "d2"), text)
    assert page.inner_text("#label") == expected.label
    assert float(page.get_attribute("#prediction", "data-hardmax")) == pytest.approx(expected.probability, abs=1e-12)
    shown = page.eval_on_selector_all("#words span.leader", "s => s.map(e => Number(e.dataset.i))")
    assert shown == sorted(expected.leaders) or set(shown) == set(expected.leaders)
    assert page.locator("#plane .token").count() == len(expected.words)
    followers = sum(len([j for j in members if j != leader]) for leader, members in expected.follows.items())
    assert page.locator("#plane line.follow").count() == followers
    page.hover('#words span[data-i="0"]')
    assert page.locator("#plane polyline.trail").count() == 1
    _screenshot(page, "classifier", tmp_path)
    page.fill("#text", "")
    page.click("#explain")
    _idle(page)
    assert "empty" in page.inner_text("#message")
    with page.expect_download() as download:
        page.fill("#text", text)
        page.click("#explain")
        _idle(page)
        page.click("#export")
    saved = tmp_path / "review.html"
    download.value.save_as(saved)
    data = json.loads(saved.read_text().split("window.HARDMAX_EMBEDDED = ", 1)[1].split(";</script>", 1)[0])
    assert data["data"]["leaders"] == expected.leaders
    offline, outside, view = _open_offline(page.context.browser, saved)
    assert view.inner_text("#label") == expected.label
    assert view.eval_on_selector_all("#words span.leader", "s => s.map(e => Number(e.dataset.i))") == shown
    assert view.locator("#plane .token").count() == len(expected.words)
    _screenshot(view, "classifier-export", tmp_path)
    offline.close()
    assert outside == []


@pytest.mark.parametrize("width", [1300, 1000])
def test_the_side_panel_never_scrolls_sideways(page, width):
    """Both pages' side panels fit their width at 1300 and 1000 px, the classifier's explanation and coding-rate
    chart included, before and after a resize (before: the explanation's long lines scrolled the panel sideways)."""
    from urllib.parse import quote

    text = ("A wonderful film with a superb cast and a brilliant, moving story, but the ending was boring, the plot "
            "dreadful and the dialogue awful; still wonderful music, great acting and a superb, brilliant finale. ") * 3
    measure = """() => { const a = document.querySelector('aside'), d = document.documentElement;
        const charts = [...document.querySelectorAll('aside svg.chart')].filter((c) => c.getBoundingClientRect().width);
        return {panel: [a.scrollWidth, a.clientWidth], page: [d.scrollWidth, d.clientWidth],
                charts: charts.map((c) => c.getBoundingClientRect().right - a.getBoundingClientRect().right)}; }"""
    page.set_viewport_size({"width": width, "height": 860})
    for url in ("/classifier#run=d2&text=" + quote(text), "/playground"):
        page.goto(page.base + url)
        _idle(page)
        for size in (width, width - 137):
            page.set_viewport_size({"width": size, "height": 860})
            page.wait_for_timeout(100)
            shown = page.evaluate(measure)
            assert shown["panel"][0] <= shown["panel"][1], (url, size, shown)
            assert shown["page"][0] <= shown["page"][1], (url, size, shown)
            assert all(overhang <= 0.5 for overhang in shown["charts"]), (url, size, shown)
        page.set_viewport_size({"width": width, "height": 860})
    assert page.evaluate("() => document.querySelectorAll('aside svg.chart').length") == 0  # (the playground has none)


def test_an_export_with_markup_in_its_text_still_opens(browser, tmp_path):
    """Text that holds "<!--<script>" (the view's Python, its state) leaves an export working: it opens offline at
    the layer its state names and shows the text as it is (before: the page rendered nothing)."""
    from hardmax.explore import standalone_html
    from hardmax.explore.views import trajectory_view

    trajectory = hardmax.simulate(np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.25], [0.2, 0.1]]), alpha=0.5, layers=6)
    python = "# <!--<script> </script> & \u2028 -->"
    saved = tmp_path / "markup.html"
    saved.write_text(standalone_html("playground", trajectory_view(trajectory, python=python, attention=True),
                                     state="k=2&note=<!--<script>"), encoding="utf-8")
    offline, outside, view = _open_offline(browser, saved)
    try:
        assert view.evaluate("() => window.explorer.state.k") == 2
        assert view.input_value("#python") == python
    finally:
        offline.close()
    assert outside == []


def test_the_rule_menu_and_its_parameters_come_from_the_server(page):
    """The rule menu lists every rule of RULES (from GET /api/rules); localmax shows a θ row and its run is drawn
    with θ sent; back to softmax shows β's slider again."""
    from hardmax.dynamics.rules import RULES

    page.goto(page.base + "/playground")
    _idle(page)
    assert page.eval_on_selector_all("#rule option", "os => os.map(o => o.value)") == list(RULES)
    with page.expect_request(lambda r: r.url.endswith("/api/simulate")) as asked:
        page.select_option("#rule", "localmax")
    _idle(page)
    assert page.is_visible("#param-row-theta") and not page.is_visible("#beta-row")
    assert page.input_value("#param-theta") == "0.1"
    assert json.loads(asked.value.post_data)["theta"] == 0.1
    assert page.get_attribute("body", "data-state") == "ready"
    assert page.locator("#token-table tr[data-i]").count() > 0 and page.locator("#plane .token").count() > 0
    page.select_option("#rule", "softmax")
    _idle(page)
    assert page.is_visible("#beta-row") and page.locator("#param-row-theta").count() == 0
    assert page.get_attribute("body", "data-state") == "ready"


def test_the_causal_switch_runs_decoder_attention(page):
    """Issue #43: the playground's causal switch sends causal: true, the server runs Causal() attention, the page says
    that the hardmax scene and Theorem 2.1 are about full attention; the address keeps the switch; off again gives
    the theorem's table back."""
    page.goto(page.base + "/playground")
    _idle(page)
    with page.expect_request(lambda r: r.url.endswith("/api/simulate")) as asked:
        page.check("#causal")
    _idle(page)
    assert json.loads(asked.value.post_data)["causal"] is True
    assert page.get_attribute("body", "data-state") == "ready"
    assert "causal attention" in page.text_content("#note")
    assert "c=1" in page.evaluate("() => location.hash")
    page.reload()
    _idle(page)
    assert page.is_checked("#causal")
    with page.expect_request(lambda r: r.url.endswith("/api/simulate")) as asked:
        page.uncheck("#causal")
    _idle(page)
    assert json.loads(asked.value.post_data)["causal"] is False and "causal attention" not in page.text_content("#note")
