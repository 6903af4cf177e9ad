"""Sparsity of token sets: the fraction of exact zeros (what CRATE's ISTA step produces through its ReLU)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["zero_fraction"]


def zero_fraction(Z: Tensor, *, mask: Tensor | None = None) -> Tensor:
    """Fraction of exactly-zero coordinates of the real tokens of each set.

    Args:
        Z: (..., N, d) tokens. mask: (..., N) bool, True for real tokens (None = all real).
    Returns:
        (...) float64 in [0, 1]; the non-zero fraction is 1 minus it.
    Raises:
        ValueError: a non-tensor, d = 0, a mask of the wrong shape, a set without real tokens, or NaN/inf
            among the real tokens (a NaN is neither zero nor a measured non-zero; padding may hold anything).

    Paper: Yu et al. 2023 (CRATE), Section 3 (sparsity of the ISTA output, measured as ‖Z‖₀ / (dN)).
    """
    if not isinstance(Z, Tensor) or Z.dim() < 2:
        raise ValueError(f"Z must be a tensor of shape (..., N, d), got {getattr(Z, 'shape', type(Z).__name__)}")
    if Z.shape[-1] == 0:
        raise ValueError("Z has dimension d = 0: no coordinates to count")
    if mask is None:
        mask = torch.ones(Z.shape[:-1], dtype=torch.bool, device=Z.device)
    elif not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != Z.shape[:-1]:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(Z.shape[:-1])}")
    mask = mask.to(Z.device)
    real = mask.sum(-1).double()
    if bool((real == 0).any()):
        raise ValueError("a set has no real token: its sparsity is undefined")
    if (Z.is_floating_point() or Z.is_complex()) and bool((~torch.isfinite(Z) & mask.unsqueeze(-1)).any()):
        raise ValueError("Z contains NaN or inf")
    zeros = ((Z == 0) & mask.unsqueeze(-1)).sum((-2, -1)).double()
    return zeros / (real * Z.shape[-1])
