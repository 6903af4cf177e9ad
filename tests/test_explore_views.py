"""Tests of `hardmax.explore.views`: what the pages show equals the library's own calls (simulate, attention sets,
the Figure 2 limits, explain and project_review on trained runs, CRATE's blocks, every registered rule), the
presets, and the Python a view offers reproducing its run.

The trained runs and the live server the API tests ask are conftest.py's `explore_runs` and `explore_client`
(built once per session); helpers in explore_server.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from explore_server import SQUARE, post_json

import hardmax
from hardmax.explore.frames import decode_array, decode_path
from hardmax.explore.views import presets

pytestmark = pytest.mark.usefixtures("one_thread")


def test_simulate_equals_the_library(explore_client, rng):
    tokens = rng.standard_normal((20, 2)).tolist()
    A = [[2.0, 0.5], [0.5, 1.0]]
    code, answer = post_json(explore_client, "/api/simulate", {"tokens": tokens, "alpha": 0.7, "layers": 60, "A": A})
    assert code == 200, answer
    trajectory = hardmax.simulate(np.array(tokens), alpha=0.7, layers=60, A=np.array(A))
    assert np.array_equal(decode_path(answer["path"], 60), trajectory.tokens.numpy())
    clusters = hardmax.find_clusters(trajectory)
    assert answer["labels"] == clusters.labels.tolist()
    assert answer["leader_since"] == hardmax.leader_layers(trajectory).tolist()
    report = hardmax.check_theorem(trajectory)
    assert answer["theorem"]["passed"] == report.passed is True
    assert [c["status"] for c in answer["theorem"]["checks"]] == [c.status for c in report.checks]
    K = hardmax.polytope(trajectory.final[hardmax.leader_layers(trajectory) >= 0])
    assert np.allclose(np.array(answer["vertices"]), K.vertices, atol=1e-12)


def test_the_python_it_offers_reproduces_the_run(explore_client, rng, capsys):
    tokens = rng.standard_normal((7, 3)).tolist()
    code, answer = post_json(explore_client, "/api/simulate", {"tokens": tokens, "alpha": 0.3, "layers": 25,
                                                               "rule": "softmax", "beta": 3.5})
    assert code == 200, answer
    scope: dict = {}
    exec(answer["python"], scope)  # the "Copy as Python" text
    assert np.array_equal(scope["trajectory"].tokens.numpy(), decode_path(answer["path"], 25))
    assert answer["theorem"] is None and answer["rule"] == "softmax"


def test_the_figure2_limits_on_S(explore_client):
    code, answer = post_json(explore_client, "/api/simulate", {"tokens": SQUARE, "layers": 200})
    assert code == 200
    final = decode_path(answer["path"], 200)[-1]
    assert answer["path"]["shape"][0] < 201  # converged to the last bit: the standing-still layers are implied
    assert np.allclose(final[4:], [[1.0, 0.0], [-1.0, 0.0]], atol=1e-9)  # projections of 0 on the sides
    assert sorted(map(tuple, answer["limit"])) == [(-1.0, 0.0), (1.0, 0.0)]
    assert answer["leader_since"] == [0, 0, 0, 0, -1, -1]


def test_attention_view_is_the_engines_rule(explore_client):
    code, answer = post_json(explore_client, "/api/attention", {"tokens": SQUARE})
    assert code == 200
    sets = hardmax.attention_sets(torch.tensor(SQUARE, dtype=torch.float64))
    assert answer["sets"] == [np.nonzero(r)[0].tolist() for r in sets.numpy()]
    assert answer["sets"][4] == [0, 3]  # the exact tie, both kept
    code, soft = post_json(explore_client, "/api/attention", {"tokens": SQUARE, "rule": "softmax", "beta": 2.0})
    P = hardmax.attention_matrix(torch.tensor([SQUARE], dtype=torch.float64), rule=hardmax.Softmax(beta=2.0))[0]
    for i, row in enumerate(soft["weights"]):
        for j, w in row:
            assert w == pytest.approx(float(P[i, j]), rel=1e-12)


def test_layers_zero_is_the_input(explore_client):
    code, answer = post_json(explore_client, "/api/simulate", {"tokens": SQUARE, "layers": 0})
    assert code == 200, answer
    assert np.array_equal(decode_path(answer["path"], 0), np.array([SQUARE]))


@pytest.mark.parametrize("name", ["d2", "d4"])
def test_review_equals_explain(explore_client, explore_runs, name):
    from hardmax.explain import explain_text, project_review
    from hardmax.training import load_run, predict

    text = "A wonderful film, the story was superb but the ending boring. Brilliant cast!"
    code, answer = post_json(explore_client, "/api/review", {"run": name, "text": text})
    assert code == 200, answer
    run = load_run(explore_runs / name)
    expected = explain_text(run, text)
    assert answer["label"] == expected.label and answer["words"] == expected.words
    assert answer["probability"]["hardmax"] == pytest.approx(expected.probability, rel=1e-12)
    assert answer["leaders"] == expected.leaders and answer["decisive"] == expected.decisive_leaders(2.0)
    assert answer["summary"] == expected.summary()
    assert np.array_equal(decode_array(answer["points"]), project_review(expected, run.model).points)
    assert len(answer["sets"]) == run.model.config.layers + 1
    final_sets = hardmax.attention_sets(expected.trace.tokens[-1, 0].double(), A=run.model.A)
    assert answer["sets"][-1] == [np.nonzero(r)[0].tolist() for r in final_sets.numpy()]
    assert all([i] == answer["sets"][-1][i] for i in expected.leaders)
    from hardmax.data import encode_texts
    data = run.data_config
    enc = encode_texts([text], run.vocab, max_len=data.max_len, truncation=data.truncation, **data.clean_options())
    soft = torch.sigmoid(predict(run.model, enc.ids, enc.mask, rule=None)[0]).item()
    assert answer["probability"]["softmax"] == pytest.approx(soft, rel=1e-6)  # float32 logits
    X = expected.trace.tokens[0, 0].double()
    v = run.model.decoder.weight.detach()[0].double()
    sign = 1 if expected.label == "positive" else -1
    assert answer["svm"]["selected"] == int(torch.argmax(sign * (X @ v)))
    assert len(answer["rate"]["rate"]) == run.model.config.layers + 1
    layer_logits = np.array(answer["layer_logits"])  # each word's decoder logit at every layer
    assert np.allclose(layer_logits[-1], expected.word_logits, atol=1e-5)
    Zk = expected.trace.tokens[:, 0].double().numpy()
    w, b = run.model.decoder.weight.detach()[0].double().numpy(), float(run.model.decoder.bias.detach())
    assert np.allclose(layer_logits, Zk @ w + b, atol=1e-9)


def test_a_one_word_review(explore_client, explore_runs):
    from hardmax.explain import explain_text
    from hardmax.training import load_run

    code, answer = post_json(explore_client, "/api/review", {"run": "d2", "text": "great great great"})
    assert code == 200, answer
    assert answer["svm"] is None and answer["words"] == ["great"] and answer["multiplicity"] == [3]
    assert answer["label"] == explain_text(load_run(explore_runs / "d2"), "great great great").label


def test_crate_review_shows_blocks(explore_client):
    code, answer = post_json(explore_client, "/api/review", {"run": "crate", "text": "a wonderful superb film"})
    assert code == 200, answer
    assert answer["kind"] == "crate" and len(answer["crate"]["sparsity"]) == answer["layers"] > 0
    assert all(0 <= s <= 1 for s in answer["crate"]["sparsity"])


def test_presets_are_figure2():
    found = presets()
    assert np.array_equal(np.array(found["dyadic_square"]["tokens"]), hardmax.figure2_configurations()["square"])
    assert len(found) == 9 and found["square_with_a_follower"]["tokens"][:4] == [[1, 1], [-1, 1], [-1, -1], [1, -1]]


def test_leader_history_is_recomputed_after_an_in_place_change():
    trajectory = hardmax.simulate(np.array(SQUARE), alpha=0.5, layers=8)
    before = hardmax.leader_layers(trajectory).tolist()
    assert before == [0, 0, 0, 0, -1, -1]
    with torch.no_grad():
        trajectory.tokens[:, 4] = torch.tensor([3.0, 3.0], dtype=torch.float64)  # token 4 now leads at every layer
    assert hardmax.leader_layers(trajectory).tolist()[4] == 0


# every rule of the registry (hardmax.dynamics.RULES) reaches the playground, issue #40
def _parameters(name: str) -> dict:
    """A valid value for each required parameter of the registered rule `name` (0.5: β, θ and the like)."""
    from hardmax.dynamics.rules import rule_parameters

    return {p: 0.5 for p, required in rule_parameters(name).items() if required}


@pytest.mark.parametrize("name", list(hardmax.dynamics.RULES))
def test_every_registered_rule_runs_in_the_playground(explore_client, name):
    """/api/simulate and /api/attention build any rule of RULES from the request (rule_from_dict) and run it on
    simulate's torch engine: the path is the library's, the rule named back, its Python reproduces it."""
    body = {"tokens": SQUARE, "alpha": 0.5, "layers": 12, "rule": name, **_parameters(name)}
    code, answer = post_json(explore_client, "/api/simulate", body)
    assert code == 200, answer
    rule = hardmax.dynamics.rule_from_dict({"rule": name, **_parameters(name)})
    expected = hardmax.simulate(np.array(SQUARE), rule, alpha=0.5, layers=12, A=np.eye(2)).tokens.numpy()
    assert answer["rule"] == name
    assert np.array_equal(decode_path(answer["path"], 12), expected)
    assert float(np.abs(expected[-1] - expected[0]).max()) > 1e-3  # the tokens moved
    assert (answer["theorem"] is None) == (name != "hardmax")  # Theorem 2.1 is hardmax's
    scope: dict = {}
    exec(answer["python"], scope)
    assert np.array_equal(scope["trajectory"].tokens.numpy(), expected)
    code, seen = post_json(explore_client, "/api/attention", {"tokens": SQUARE, "rule": name, **_parameters(name)})
    assert code == 200, seen
    assert len(seen["sets" if name == "hardmax" else "weights"]) == len(SQUARE)
