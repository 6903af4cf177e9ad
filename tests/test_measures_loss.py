"""Tests of `hardmax.measures.loss`: `MCR2Loss`'s value and gradients (gradcheck) and a short training that
increases the rate reduction.
"""

from __future__ import annotations

import pytest
import torch
from measures_cases import reference_class_rate, reference_rate

from hardmax.measures import MCR2Loss, subspace_coding_rate


def test_mcr2_loss_value_and_gradcheck():
    g = torch.Generator().manual_seed(7)
    Z = torch.randn(12, 4, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 1, 2] * 4)
    loss_fn = MCR2Loss(eps=0.5, gamma=1.0, normalize=False)
    result = loss_fn(Z, labels)
    assert result.loss.item() == pytest.approx(-(reference_rate(Z.detach(), 0.5)
                                                 - reference_class_rate(Z.detach(), labels, 0.5)), rel=1e-12)
    assert result.reduction.item() == pytest.approx(-result.loss.item(), rel=1e-12)
    assert torch.autograd.gradcheck(lambda z: loss_fn(z, labels).loss, (Z,))
    normalized = MCR2Loss(eps=0.5, gamma=2.0)
    assert torch.autograd.gradcheck(lambda z: normalized(z, labels).loss, (Z,))
    # the subspace and batched rates are differentiable too
    U = torch.randn(2, 4, 2, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda z: subspace_coding_rate(z.reshape(3, 4, 4), U, 0.5).sum(), (Z,))


def test_mcr2_loss_training_increases_reduction():
    g = torch.Generator().manual_seed(8)
    Z = torch.randn(60, 6, generator=g, requires_grad=True)
    labels = torch.arange(3).repeat(20)
    loss_fn = MCR2Loss(eps=0.5)
    before = loss_fn(Z, labels).reduction.item()
    optimizer = torch.optim.SGD([Z], lr=0.5)
    for _ in range(50):
        optimizer.zero_grad()
        loss_fn(Z, labels).loss.backward()
        optimizer.step()
    assert loss_fn(Z, labels).reduction.item() > 2 * before + 0.1
