"""Tests of `hardmax.models.base`: what every word classifier shares — the ids and mask checked once
(one-line ValueErrors, the default mask, empty batches for both classifiers) and the rule as an object.
"""

from __future__ import annotations

import pytest
import torch
from corpus import PAD
from models_cases import ATTENTION, VOCAB, make_model, random_batch

from hardmax import ModelConfig
from hardmax.dynamics import Hardmax, Softmax


def test_default_mask_is_ids_not_pad(generator):
    model = make_model(beta=2.0)
    ids, mask = random_batch(generator)
    torch.testing.assert_close(model(ids), model(ids, mask), rtol=0, atol=0)


def bad_inputs():
    ids = torch.tensor([[2, 3, 4, PAD], [5, 6, PAD, PAD]])
    mask = ids != PAD
    return [
        ("1-D ids", ids[0], None, "shape"),
        ("3-D ids", ids.unsqueeze(-1), None, "shape"),
        ("float ids", ids.float(), mask, "integer"),
        ("id too large", ids.masked_fill(ids == 6, VOCAB), mask, r"ids must lie in \[0, 30\)"),
        ("negative id", ids.masked_fill(ids == 6, -1), mask, r"ids must lie in"),
        ("int mask", ids, mask.long(), "mask must be a bool"),
        ("mask of the wrong shape", ids, mask[:, :3], "mask must be a bool"),
        ("empty review", ids, mask & torch.tensor([[True], [False]]), "at least one real"),
    ]


@pytest.mark.parametrize("case", bad_inputs(), ids=lambda c: c[0])
@pytest.mark.parametrize("method", ["forward", "trace"])
def test_bad_inputs_raise(case, method):
    _, ids, mask, message = case
    model = make_model()
    call = model if method == "forward" else model.trace
    with pytest.raises(ValueError, match=message):
        call(ids, mask)


def test_all_padding_review_without_mask_raises():
    model = make_model()
    with pytest.raises(ValueError, match="at least one real"):
        model(torch.tensor([[2, 3], [PAD, PAD]]))


def test_unknown_attention_raises(generator):
    model = make_model(beta=2.0)
    ids, mask = random_batch(generator)
    for bad in ("sparsemax", "hardmax", Hardmax):  # strings and rule classes are not rules
        with pytest.raises(ValueError, match="rule must be an attention rule"):
            model(ids, mask, rule=bad)


@pytest.mark.parametrize("layer", ["hardmax", "crate"])
@pytest.mark.parametrize("attention", ["softmax", "hardmax"])
def test_an_empty_batch_gives_empty_logits(layer, attention):
    # Issue #23, item 19: both classifiers crashed on model(torch.zeros(0, 4, dtype=torch.long)).
    from hardmax.models import CrateBlocks, build_model

    model = build_model(ModelConfig(vocab_size=10, d=4, crate=CrateBlocks() if layer == "crate" else None))
    ids = torch.zeros(0, 4, dtype=torch.long)
    assert model(ids, rule=ATTENTION[attention]).shape == (0,)
    with torch.no_grad():  # the hardmax inference path (simulate's compiled engine)
        assert model(ids, rule=ATTENTION[attention]).shape == (0,)
    assert model.trace(ids, rule=ATTENTION[attention]).logits.shape == (0,)


def test_the_rules_by_name_are_the_training_softmax_and_exact_hardmax():
    model = make_model(beta=2.0)
    softmax = model.rule_named("softmax")
    assert isinstance(softmax, Softmax) and softmax.beta == model.inverse_temperature == 2.0
    assert isinstance(model.rule_named("hardmax"), Hardmax)
    assert model.rule_of(None) == softmax and model.rule_of(ATTENTION["hardmax"]) is ATTENTION["hardmax"]
    with pytest.raises(ValueError, match="attention must be 'softmax' or 'hardmax', got 'sparsemax'"):
        model.rule_named("sparsemax")
