"""hardmax.pretrained.inspection: `inspect` streamed batch by batch sums to what one batch gives, and its layer rows,
Markdown table and JSON, on conftest.py's `pretrained_model` (BERT, GPT-2, ALBERT)."""

from __future__ import annotations

import pytest
import torch
from pretrained_models import TEXTS

from hardmax.pretrained import inspect


def test_streaming_batches_equals_one_batch(pretrained_model):
    one = inspect(pretrained_model, TEXTS, batch_size=len(TEXTS))
    many = inspect(pretrained_model, TEXTS * 2, batch_size=1)
    for view in ("clustering", "selection", "coding"):
        a, b = getattr(one, view), getattr(many, view)
        for name in ("cosine", "rank", "leaders", "mass", "margin", "rate", "compression", "inactive"):
            if hasattr(a, name):
                assert torch.allclose(2 * getattr(a, name), getattr(b, name), atol=1e-9), name
    rows = many.layer_rows()
    assert len(rows) == pretrained_model.layers + 1 and rows[0]["layer"] == 0 and "rate" in rows[1]
    assert rows[1]["delta_rate"] == pytest.approx(rows[1]["rate"] - rows[1]["compression"])
    table = many.markdown()
    assert "| layer | mean_cosine |" in table and many.to_dict()["texts"] == 2 * len(TEXTS)
