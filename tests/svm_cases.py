"""Att-SVM problems shared by the tests of `hardmax.svm` (test_svm_*.py): a hand example, random
synthetic batches and the issue's example.
"""

from __future__ import annotations

import torch

# The issue's hand-checkable example: tokens (−0.1, 1), (1, 0), (0, 0).
TOKENS = torch.tensor([[-0.1, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)


def _unit(t: torch.Tensor) -> torch.Tensor:
    return t / t.norm(dim=-1, keepdim=True)


def synthetic(S: int, n: int, T: int, d: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = _unit(torch.randn(S, n, T, d, generator=g, dtype=torch.float64))
    z = _unit(torch.randn(S, n, d, generator=g, dtype=torch.float64))
    y = torch.where(torch.rand(S, n, generator=g) > 0.5, 1.0, -1.0).double()
    v = _unit(torch.randn(S, d, generator=g, dtype=torch.float64))
    return X, z, y, v, g


def issue_example():
    # The issue's example: at s = 300 it came back "optimal" with no support token and min margin 1.03.
    torch.manual_seed(0)
    X = torch.randn(3, 4, 5, dtype=torch.float64)
    z = torch.randn(3, 5, dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    return X, z, y, torch.randn(5, dtype=torch.float64), torch.tensor([1, 2, 3])
