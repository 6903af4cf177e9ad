"""Reference rates shared by the tests of `hardmax.measures` (test_measures_*.py): the textbook formula in
float64 and the issue's orthogonal-subspace configuration.
"""

from __future__ import annotations

import torch


def reference_rate(Z: torch.Tensor, eps: float) -> float:
    """The textbook formula, ½ logdet(I + d/(N ε²) ZᵀZ), in float64 with slogdet (slow, obviously right)."""
    Z = Z.double()
    N, d = Z.shape
    sign, logdet = torch.linalg.slogdet(torch.eye(d, dtype=torch.float64) + d / (N * eps**2) * Z.T @ Z)
    assert sign > 0
    return 0.5 * float(logdet)


def reference_class_rate(Z: torch.Tensor, labels: torch.Tensor, eps: float) -> float:
    N = Z.shape[0]
    return sum(Z[labels == j].shape[0] / N * reference_rate(Z[labels == j], eps) for j in labels.unique().tolist())
