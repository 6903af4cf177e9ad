"""hardmax.pretrained.svm: `head_svm` solves a real head's Att-SVM from the head's own selections (max-margin
optimum, its own W feasible after scaling), on conftest.py's `pretrained_model` (BERT, GPT-2, ALBERT)."""

from __future__ import annotations

import pytest
import torch
from pretrained_models import TEXTS

from hardmax.pretrained import head_svm, record


@pytest.mark.parametrize("space", ["head", "model"])
def test_head_svm_is_solved_from_the_heads_own_selections(pretrained_model, space):
    r = record(pretrained_model, TEXTS)
    result = head_svm(pretrained_model, r, 2, 1, queries=20, space=space)
    assert result.own_margin > 0 and not result.infeasible
    svm = result.svm
    assert svm.status.startswith("optimal") and svm.gap < 1e-6
    real = torch.isfinite(svm.margins)
    assert float(svm.margins[real].min()) == pytest.approx(1, abs=1e-6)  # the max-margin solution's active margin
    assert -1 <= result.correlation <= 1
    # the head's own W separates its own selections: W / own_margin is feasible, so the optimum is no larger
    assert svm.objective <= float(result.W.norm()) / result.own_margin * (1 + 1e-6)
    positions = r.mask.nonzero()[:20, 1]
    assert result.queries == int((positions >= 1).sum() if pretrained_model.family.causal else 20)
