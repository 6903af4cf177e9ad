"""Input checks of the theory functions: the refusals of `hardmax.dynamics.inputs` (shared with `simulate`), and
what only the theory needs (a `Solution` where one is needed, finite tolerances), one ValueError each.

A theory function reads what the simulator wrote, so it refuses what the simulator refuses: non-numeric,
complex, NaN or infinite tokens, empty batches, precisions that cannot resolve ties (float16, bfloat16),
a tensor where a `Solution` is needed, and tolerances that are not finite and ≥ 0. The tie tolerance
is checked by `hardmax.dynamics.Hardmax`, the score matrix A by `hardmax.dynamics.validate_A`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import Solution
from hardmax.dynamics.inputs import as_floating

__all__ = ["as_tokens", "check_atol", "check_trajectory"]

def as_tokens(tokens, name: str = "tokens") -> Tensor:
    """`tokens` (..., n, d) as a real floating tensor, after the checks above.

    Tensors keep their dtype (integers become float64); arrays and nested lists become float64.

    Raises:
        ValueError: non-numeric, ragged, complex, half-precision, NaN/inf, fewer than 2 dimensions, or
            an empty batch, token set or dimension.
    """
    if isinstance(tokens, Solution):
        raise ValueError(f"{name} must be one configuration (..., n, d), got a Solution; pass "
                         "trajectory.final or trajectory.after(k)")
    z = as_floating(tokens, name, integers=torch.float64)
    if z.dim() < 2 or z.numel() == 0:
        raise ValueError(f"{name} must have shape (..., n, d) with at least one sequence, token and "
                         f"dimension, got {tuple(z.shape)}")
    # NaN and ±inf survive a sum (inf − inf is NaN), so a finite sum proves every entry finite in one pass
    # without a mask; only a sum that overflowed looks at the entries (15x faster on a 2.4 MB trajectory).
    if not bool(torch.isfinite(z.sum())) and not bool(torch.isfinite(z).all()):
        raise ValueError(f"{name} contain NaN or inf")
    return z


def check_trajectory(trajectory) -> Solution:
    """`trajectory` itself, after checking that it is a `Solution` with finite, non-empty positions.

    Raises:
        ValueError: a tensor or array instead of a `Solution`, a solution under a pair mask (the leader rule and
            Theorem 2.1 are about full attention: every token sees every token), or positions that `as_tokens`
            refuses.
    """
    if not isinstance(trajectory, Solution):
        raise ValueError(f"expected a hardmax.dynamics.Solution (the result of simulate), got "
                         f"{type(trajectory).__name__}; for one configuration of tokens use find_leaders or "
                         "attention_sets")
    if trajectory.pairs is not None:
        raise ValueError(f"this solution ran under a pair mask ({type(trajectory.pairs).__name__}): leaders, their "
                         "layers and Theorem 2.1 are about full attention (every token sees every token); the "
                         "causal checks are in hardmax.theory's causal module")
    as_tokens(trajectory.tokens, "the trajectory's tokens")
    return trajectory


def check_atol(atol: float | None) -> float | None:
    """`atol` as a float (None kept: the default tolerance), or ValueError unless it is finite and ≥ 0."""
    if atol is None:
        return None
    if isinstance(atol, bool) or not isinstance(atol, int | float | np.integer | np.floating) \
            or not (math.isfinite(atol) and atol >= 0):
        raise ValueError(f"atol must be a finite number ≥ 0 or None, got {atol!r}")
    return float(atol)
