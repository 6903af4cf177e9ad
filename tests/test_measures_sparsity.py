"""Tests of `hardmax.measures.sparsity`: `zero_fraction` on known tensors, masks, and NaN or inf among the
real tokens refused.
"""

from __future__ import annotations

import pytest
import torch

from hardmax.measures import zero_fraction


def test_zero_fraction():
    Z = torch.tensor([[[0.0, 1.0], [0.0, 0.0], [5.0, 5.0]]])
    assert zero_fraction(Z).tolist() == [pytest.approx(0.5)]
    assert zero_fraction(Z, mask=torch.tensor([[True, False, True]])).tolist() == [pytest.approx(0.25)]


def test_zero_fraction_refuses_nan_and_inf_among_real_tokens():
    with pytest.raises(ValueError, match="NaN or inf"):
        zero_fraction(torch.full((3, 4), float("nan")))
    with pytest.raises(ValueError, match="NaN or inf"):
        zero_fraction(torch.tensor([[[0.0, float("inf")], [0.0, 0.0]]]))
    # padding may hold anything
    Z = torch.tensor([[[0.0, 1.0], [float("nan"), 0.0]]])
    assert zero_fraction(Z, mask=torch.tensor([[True, False]])).tolist() == [pytest.approx(0.5)]
