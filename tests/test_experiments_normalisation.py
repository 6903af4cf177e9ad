"""`hardmax.experiments.normalisation`: `compare_normalisations` on a tiny case (every scheme from the same unit
starts, saved every few layers, Post-LN's tokens staying unit) and `NormalisationComparison`'s collapse layer and
check on hand-made comparisons. The paper's ordering on a real run, and the schemes themselves, are
test_dynamics_normalisation.py's."""

from __future__ import annotations

import math

import pytest
import torch

from hardmax.experiments.normalisation import NormalisationComparison, compare_normalisations

SCHEMES = ("post-ln", "pre-ln", "peri-ln", "ngpt", "mix-ln")


def test_every_scheme_runs_from_the_same_starts():
    c = compare_normalisations(starts=2, n=5, d=3, layers=20, every=10, early=2)
    assert c.layers.tolist() == [0.0, 10.0, 20.0] and c.early == 2
    assert tuple(c.cosine) == tuple(c.radius) == tuple(c.speed) == SCHEMES
    for scheme in SCHEMES:
        assert c.cosine[scheme].shape == c.radius[scheme].shape == (3,)
        assert c.cosine[scheme][0] == pytest.approx(float(c.cosine["post-ln"][0]))  # the same starts
        assert c.radius[scheme][0] == pytest.approx(1.0)  # unit tokens
        assert c.speed[scheme] > 0 and float(c.cosine[scheme].max()) <= 1 + 1e-12
    assert torch.allclose(c.radius["post-ln"], torch.ones(3, dtype=torch.float64), atol=1e-12)


def _comparison(speed: dict[str, float], collapse: dict[str, int | None]) -> NormalisationComparison:
    layers = torch.tensor([0.0, 10.0, 20.0, 30.0], dtype=torch.float64)
    cosine = {s: torch.tensor([0.1, 0.5, 0.9, 0.95], dtype=torch.float64) for s in speed}
    for s, at in collapse.items():
        if at is not None:
            cosine[s][layers >= at] = 0.995
    return NormalisationComparison(layers=layers, cosine=cosine, radius={s: torch.ones(4) for s in speed},
                                   speed=speed, early=5)


def test_collapse_layer_is_the_first_saved_layer_past_the_threshold():
    c = _comparison({s: 1.0 for s in SCHEMES}, {"post-ln": 10, "ngpt": 30, "pre-ln": None})
    assert c.collapse_layer("post-ln") == 10 and c.collapse_layer("ngpt") == 30
    assert c.collapse_layer("pre-ln") == math.inf  # never within the horizon


def test_check_holds_the_papers_ordering():
    speed = {"post-ln": 1.0, "pre-ln": 0.8, "peri-ln": 1.5, "ngpt": 1.4, "mix-ln": 1.0}
    good = _comparison(speed, {"post-ln": 10, "ngpt": 20, "pre-ln": 30, "peri-ln": None})
    check = good.check()
    assert check.name == "normalisation_speed" and check.passed, check.value
    assert check.numbers["early_peri-ln"] == 1.5 and check.numbers["collapse_peri-ln"] == math.inf
    slow_peri = _comparison(speed | {"peri-ln": 0.9}, {"post-ln": 10, "ngpt": 20, "pre-ln": 30, "peri-ln": None})
    late_post = _comparison(speed, {"post-ln": 30, "ngpt": 20, "pre-ln": 30, "peri-ln": None})
    for bad in (slow_peri, late_post):
        check = bad.check()
        assert check.status == "failed" and check.messages == (check.value,)
