"""Tests of `hardmax.explore.requests`: what the explorer accepts, refused in one line (`RequestError`, 400) or
as too large (`TooLarge`, 413), directly and through the API; rules and their parameters checked by the registry,
the rules endpoint (`rule_catalogue`), and the playground's causal requests.

The trained runs and the live server the API tests ask are conftest.py's `explore_runs` and `explore_client`
(built once per session); helpers in explore_server.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from explore_server import SQUARE, Client, LiveServer, post_json

import hardmax
from hardmax.explore import Limits, create_app
from hardmax.explore.requests import PlaygroundRequest, RequestError, TooLarge

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("body, status, words", [
    ({"tokens": SQUARE, "A": [[1.0, 0.0], [0.0, -1.0]]}, 400, "positive definite"),
    ({"tokens": SQUARE, "A": [[1.0, 0.5], [0.0, 1.0]]}, 400, "symmetric"),
    ({"tokens": SQUARE, "alpha": 0}, 400, "alpha"),
    ({"tokens": SQUARE, "alpha": "1"}, 400, "alpha must be a number"),
    ({"tokens": SQUARE, "layers": 2.5}, 400, "layers must be an integer"),
    ({"tokens": SQUARE, "layers": 301}, 413, "at most 300"),
    ({"tokens": [[0.1 * i, 1.0] for i in range(51)]}, 413, "at most 50"),
    ({"tokens": [[0.1 * i, 1.0] for i in range(40)], "layers": 200}, 413, "positions"),
    ({"tokens": []}, 400, "non-empty"),
    ({"tokens": [[1.0, 2.0], [1.0]]}, 400, "row 1"),
    ({"tokens": [[1.0, 2.0, 3.0, 4.0]]}, 400, "dimension 2 or 3"),
    ({"tokens": [[1e300, 0.0]]}, 413, "beyond"),
    ({"tokens": SQUARE, "rule": "maxout"}, 400, "rule"),
    ({"tokens": SQUARE, "rule": "softmax", "beta": -1}, 400, "beta"),
    ({"tokens": SQUARE, "path": "/etc/passwd"}, 400, "unknown field"),
    ({"tokens": [[10**400, 0.0], [0.0, 1.0]]}, 413, "too large a number"),
    ({"tokens": SQUARE, "\ud800" * 3: 1}, 400, "unknown field"),
    ({"tokens": SQUARE, **{f"k{i}": 1 for i in range(50)}}, 400, "and 45 more"),
    ([1, 2], 400, "JSON object"),
])
def test_bad_requests_get_one_line(explore_client, body, status, words):
    code, answer = post_json(explore_client, "/api/simulate", body)
    assert code == status, answer
    assert words in answer["error"] and "\n" not in answer["error"]


def test_request_objects_refuse_directly():
    with pytest.raises(TooLarge):
        PlaygroundRequest.from_json({"tokens": SQUARE, "layers": 10}, Limits(points=10))
    with pytest.raises(RequestError, match="positive definite"):
        PlaygroundRequest.from_json({"tokens": SQUARE, "A": [[0.0, 0.0], [0.0, 0.0]]}, Limits())
    with pytest.raises(ValueError, match="Limits.tokens"):
        Limits(tokens=0)


@pytest.mark.parametrize("body, status, words", [
    ({"rule": "localmax"}, 400, "rule localmax needs theta"),
    ({"rule": "localmax", "theta": -1}, 400, "theta > 0"),  # the rule's own check, one line
    ({"rule": "localmax", "theta": "0.3"}, 400, "theta must be a number"),
    ({"rule": "localmax", "theta": 1e9}, 413, "theta must be at most"),
    ({"rule": "unnormalised", "beta": 1e9}, 413, "beta must be at most"),
    ({"rule": "hardmax", "theta": 0.3}, 400, "rule hardmax takes no theta"),
    ({"rule": "softmax", "beta": 1.0, "theta": 0.3}, 400, "takes no theta (its parameters: beta)"),
    ({"rule": ["softmax"]}, 400, "rule must be one of"),
])
def test_a_rule_parameter_is_checked_by_the_registry(explore_client, body, status, words):
    code, answer = post_json(explore_client, "/api/simulate", {"tokens": SQUARE, **body})
    assert code == status, answer
    assert words in answer["error"] and "\n" not in answer["error"]


def test_an_unknown_rule_names_the_registered_ones(explore_client):
    for url in ("/api/simulate", "/api/attention"):
        code, answer = post_json(explore_client, url, {"tokens": SQUARE, "rule": "maxout"})
        assert code == 400 and "maxout" in answer["error"] and "\n" not in answer["error"]
        assert answer["error"].startswith("rule must be one of " + ", ".join(hardmax.dynamics.RULES))


def test_the_rules_endpoint_lists_the_registry(monkeypatch):
    """GET /api/rules answers every rule of RULES (no hand-kept list) with its parameters and the bounds the
    server enforces; a rule registered later is listed, and a foreign Host is refused as for every route."""
    from dataclasses import dataclass

    from hardmax.dynamics.rules import RULES, Softmax, rule_parameters

    @dataclass(frozen=True)
    class Toy(Softmax):
        gain: float = 2.5

    monkeypatch.setitem(RULES, "toy", Toy)
    limits = Limits(beta=50.0, parameter=7.0)
    with LiveServer(create_app(None, limits)) as server:
        client = Client(server.url)
        response = client.get("/api/rules")
        assert response.status_code == 200
        listed = {r["name"]: r["parameters"] for r in response.json()["rules"]}
        refused = client._open(__import__("urllib.request").request.Request(
            server.url + "/api/rules", headers={"Host": "evil.example"}))
    assert list(listed) == list(RULES)
    for name, parameters in listed.items():
        assert {p["name"]: p["required"] for p in parameters} == rule_parameters(name)
    assert listed["softmax"] == [{"name": "beta", "required": True, "default": None, "low": 0.0, "high": 50.0}]
    assert listed["localmax"] == [{"name": "theta", "required": True, "default": None, "low": -7.0, "high": 7.0}]
    assert listed["hardmax"] == [{"name": "tie_rtol", "required": False, "default": None, "low": -7.0, "high": 7.0}]
    assert listed["toy"] == [{"name": "beta", "required": True, "default": None, "low": 0.0, "high": 50.0},
                             {"name": "gain", "required": False, "default": 2.5, "low": -7.0, "high": 7.0}]
    assert refused.status_code == 400


def test_the_playground_runs_causal_attention_and_says_what_it_does_not_show():
    """Issue #43: the playground's causal switch — simulate(..., mask=Causal()) on the server, the first token
    never moves, no hardmax scene or Theorem 2.1 check (they are about full attention), and the attention
    requests see the tokens before each one only."""
    from hardmax.explore.requests import AttentionRequest, Limits, PlaygroundRequest, RequestError
    from hardmax.explore.views import attention_view, playground_view

    body = {"tokens": [[1.0, 0.2], [0.1, 1.0], [-1.0, 0.3], [0.4, -1.0], [0.2, 0.1]], "alpha": 0.5, "layers": 12,
            "A": [[1.0, 0.0], [0.0, 1.0]], "rule": "hardmax", "causal": True}
    request = PlaygroundRequest.from_json(body, Limits())
    view = playground_view(request)
    path = np.asarray(__import__("hardmax.explore.frames", fromlist=["decode_array"]).decode_array(view["path"]))
    assert view["causal"] and view["theorem"] is None and "causal attention" in view["note"]
    np.testing.assert_array_equal(path[:, 0], np.repeat(path[:1, 0], len(path), axis=0))  # token 1 stays
    assert "mask=hardmax.dynamics.Causal()" in request.python()
    full = playground_view(PlaygroundRequest.from_json({**body, "causal": False}, Limits()))
    assert not full["causal"] and full["theorem"] is not None
    sets = attention_view(AttentionRequest.from_json({k: body[k] for k in ("tokens", "A", "rule", "causal")},
                                                     Limits()))["sets"]
    assert sets[0] == [0] and all(max(s) <= i for i, s in enumerate(sets))
    with pytest.raises(RequestError, match="causal must be true or false"):
        PlaygroundRequest.from_json({**body, "causal": 1}, Limits())
