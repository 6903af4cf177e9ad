"""Tests of `hardmax.models.config`: `ModelConfig`'s one-line refusals and its round trip through a dict.
"""

from __future__ import annotations

import math

import pytest
from models_cases import VOCAB

from hardmax import ModelConfig


@pytest.mark.parametrize("changes, message", [
    ({"vocab_size": 1}, "vocab_size"),
    ({"d": 0}, "d ≥ 1"),
    ({"layers": -1}, "layers ≥ 0"),
    ({"alpha_init": 0.0}, "alpha_init"),
    ({"alpha_init": -1.0}, "alpha_init"),
    ({"alpha_init": math.nan}, "alpha_init"),
    ({"alpha_init": math.inf}, "alpha_init"),
    ({"beta": 0.0}, "beta"),
    ({"beta": -2.0}, "beta"),
    ({"beta": math.inf}, "beta"),
    ({"A_eps": 0.0}, "A_eps"),
    ({"pad_id": 30}, "pad_id"),
    ({"pad_id": -1}, "pad_id"),
])
def test_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{"vocab_size": VOCAB, **changes})


@pytest.mark.parametrize("std", [-1.0, math.nan])
def test_config_validates_embedding_std(std):
    with pytest.raises(ValueError, match="embedding_std"):
        ModelConfig(vocab_size=VOCAB, embedding_std=std)


def test_config_round_trips_through_dict():
    config = ModelConfig(vocab_size=VOCAB, d=2, learn_A=True, beta=10.0)
    assert ModelConfig(**config.to_dict()) == config
