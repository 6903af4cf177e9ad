"""Tests of `hardmax.svm.selection`: token scores, the optimal selection and local optimality (hand
examples; shapes, masks and labels refused with one-line errors).
"""

from __future__ import annotations

import pytest
import torch
from svm_cases import TOKENS, issue_example

from hardmax.svm import att_svm, descend, is_locally_optimal, optimal_selection, token_scores


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_hand_example_local_selection(norm):
    # Selecting token 1, (1, 0): p = (1, 0), ½‖p‖² = 0.5; support token 2 (margin 1), token 0 has 1.1.
    z = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    svm = att_svm(TOKENS[None], z, [1], norm=norm)
    torch.testing.assert_close(svm.W @ z[0], torch.tensor([1.0, 0.0], dtype=torch.float64), rtol=0, atol=1e-7)
    assert svm.support.tolist() == [[False, False, True]]
    assert svm.margins[0, 0].item() == pytest.approx(1.1, abs=1e-7)
    # γ = vᵀx with v = (0.5, 1): (0.95, 0.5, 0). Token 0 is globally optimal; token 1 beats its only
    # support token (2), so it is locally optimal; token 2 is beaten by its support tokens.
    v, y = torch.tensor([0.5, 1.0], dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    assert optimal_selection(TOKENS[None], y, v).tolist() == [0]
    assert is_locally_optimal(TOKENS[None], z, y, v, [0], norm=norm)
    assert is_locally_optimal(TOKENS[None], z, y, v, [1], norm=norm)
    assert not is_locally_optimal(TOKENS[None], z, y, v, [2], norm=norm)


def test_token_scores_checks_shapes():
    with pytest.raises(ValueError, match="v must be"):
        token_scores(TOKENS[None], [1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="y must be"):
        token_scores(TOKENS[None], [1.0, 1.0], [1.0, 2.0])


def test_an_input_without_real_tokens_is_refused():
    # optimal_selection returned the padding index 0 for an all-False mask row.
    X, _, y, v, _ = issue_example()
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="mask has no real token in input 1"):
        optimal_selection(X, y, v, mask=mask)
    with pytest.raises(ValueError, match="mask has no real token"):
        token_scores(X, y, v, mask=mask)


@pytest.mark.parametrize("labels", [[1.0, 0.0, 1.0], [1.0, -1.0, 0.5], [2.0, 1.0, 1.0]])
def test_labels_must_be_plus_or_minus_one(labels):
    # y = 0 made every token score 0 (optimal_selection then picked token 0 of that input).
    X, z, _, v, sel = issue_example()
    y = torch.tensor(labels, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"y must hold labels \+1 or −1"):
        optimal_selection(X, y, v)
    with pytest.raises(ValueError, match=r"y must hold labels \+1 or −1"):
        is_locally_optimal(X, z, y, v, sel)
    with pytest.raises(ValueError, match=r"y must hold labels \+1 or −1"):
        descend(X[None], z[None], y[None], v[None], torch.zeros(1, 5, 5, dtype=torch.float64))
