"""hardmax.pretrained.recording: the attention recomputed from the recorded scores is the model's in float32, and
texts longer than the model's positions (or `max_length`) are truncated and said (TruncationWarning) or refused. The
tiny models are conftest.py's `pretrained_dirs`; that `record` equals the model's outputs for every family is in
test_pretrained_loader.py."""

from __future__ import annotations

import warnings

import pytest
import torch
from pretrained_models import TEXTS

from hardmax.pretrained import TruncationWarning, load, record


def test_recomputed_attention_matches_the_model_in_float32(pretrained_dirs):
    p = load(pretrained_dirs["bert"])
    r = record(p, TEXTS)
    for layer in range(p.layers):
        P = torch.softmax(r.scores(layer), -1).nan_to_num(0)
        assert float(((P - r.attention[layer]) * r.mask[:, None, :, None]).abs().max()) < 1e-6


def test_long_texts_are_truncated_and_said(pretrained_dirs):
    p = load(pretrained_dirs["bert"])
    long = " ".join(["the movie"] * 40)
    with pytest.warns(TruncationWarning, match="1 of 2 texts were longer than 32 tokens"):
        r = record(p, [long, "i loved it"])
    assert r.truncated.tolist() == [True, False] and r.mask.shape[1] == 32
    with pytest.warns(TruncationWarning):
        r = record(p, [long], max_length=8)
    assert r.mask.shape[1] == 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert record(p, ["i loved it"]).truncated.tolist() == [False]
    with pytest.raises(ValueError, match="max_length must be from 2 to the model's 32 positions"):
        record(p, ["i loved it"], max_length=100)
