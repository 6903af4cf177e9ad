"""Seeded random tokens for the dynamics tests: Gaussian in R^d, or on the unit sphere, float64, each from its own
generator (so that a test's tokens do not depend on what ran before it)."""

from __future__ import annotations

import torch


def gaussian(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """(*shape) standard normal float64 entries from a generator seeded with `seed`."""
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def on_sphere(n: int, d: int, seed: int, batch: int | None = None) -> torch.Tensor:
    """([batch,] n, d) float64 tokens of norm 1: `gaussian` rows normalised."""
    return torch.nn.functional.normalize(gaussian(((batch,) if batch else ()) + (n, d), seed), dim=-1)
