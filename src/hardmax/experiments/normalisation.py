"""Normalisation as speed regulation (Karagodin, Ge, Polyanskiy, Rigollet, NeurIPS 2025): the schemes compared.

    compare_normalisations(...) -> NormalisationComparison: the mean cosine similarity of the token directions layer
                                   by layer under Post-LN, Pre-LN, Peri-LN, nGPT and Mix-LN from the same starts,
                                   and `.check()`: the paper's ordering of clustering speed

The schemes are the solvers of `hardmax.dynamics.normalisation`; each runs one `solve` of the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hardmax.dynamics import Field, Save, Softmax, solve
from hardmax.dynamics.normalisation import NGPT, MixLN, PeriLN, PostLN, PreLN, layer_norm
from hardmax.theory.check import Check

__all__ = ["NormalisationComparison", "compare_normalisations"]


@dataclass(frozen=True)
class NormalisationComparison:
    """The schemes' clustering speed from one batch of starts.

    Attributes:
        layers: (saved,) the layer of each saved state.
        cosine: {scheme: (saved,) the mean over starts and pairs of ⟨θ_i, θ_j⟩}: 1 is one cluster (collapse).
        radius: {scheme: (saved,) the mean token norm ‖x_k‖} (1 for Post-LN and nGPT; growing for Pre- and Peri-LN).
        speed: {scheme: the mean distance ‖θ_k(t) − θ_k(0)‖ / t the directions covered in the first `early` layers}.
        early: those layers. collapse: the mean cosine taken for collapse.
    """

    layers: Tensor
    cosine: dict[str, Tensor]
    radius: dict[str, Tensor]
    speed: dict[str, float]
    early: int
    collapse: float = 0.99

    def collapse_layer(self, scheme: str) -> float:
        """The first saved layer whose mean cosine is ≥ `collapse` (inf: not within the horizon)."""
        hit = (self.cosine[scheme] >= self.collapse).nonzero()
        return float(self.layers[int(hit[0])]) if len(hit) else float("inf")

    def check(self) -> Check:
        """The paper's comparison as a check: in the first layers the directions move faster under Peri-LN and nGPT
        (speed 1/‖a‖ > 1 while attention averages spread tokens) than under Post-LN, and Post-LN at least as fast as
        Pre-LN (whose speed 1/r decays); in depth Post-LN and nGPT collapse (mean cosine ≥ 0.99) while Pre-LN and
        Peri-LN resist: they collapse later, if at all within the horizon."""
        e = self.speed
        c = {s: self.collapse_layer(s) for s in self.cosine}
        early_ok = min(e["peri-ln"], e["ngpt"]) > e["post-ln"] >= e["pre-ln"]
        late_ok = max(c["post-ln"], c["ngpt"]) < min(c["pre-ln"], c["peri-ln"])
        value = (f"speed over the first {self.early} layers: " + ", ".join(f"{s} {v:.3f}" for s, v in e.items())
                 + "; collapse at layer " + ", ".join(f"{s} {v:g}" for s, v in c.items()))
        ok = early_ok and late_ok
        return Check("normalisation_speed", "normalisation regulates speed: Peri-LN, nGPT > Post-LN ≥ Pre-LN early; "
                     "Post-LN, nGPT collapse first in depth (KGPR 2025)", "passed" if ok else "failed", value,
                     "that order", () if ok else (value,),
                     {**{f"early_{s}": v for s, v in e.items()}, **{f"collapse_{s}": v for s, v in c.items()}})


def compare_normalisations(*, starts: int = 32, n: int = 32, d: int = 16, beta: float = 4.0, dt: float = 0.1,
                           layers: int = 2000, switch: int = 20, alpha: float = 1.0, every: int = 10,
                           early: int = 5, seed: int = 0,
                           dtype: torch.dtype = torch.float64) -> NormalisationComparison:
    """Run the five schemes from the same `starts` × n unit tokens in R^d (softmax at β on the normalised tokens, V =
    I) for `layers` layers of size dt; about 2 s with the defaults on a laptop core."""
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(starts, n, d, generator=g, dtype=torch.float64), dim=-1).to(dtype)
    field = Field(Softmax(beta))
    schemes = {"post-ln": PostLN(dt), "pre-ln": PreLN(dt), "peri-ln": PeriLN(dt), "ngpt": NGPT(dt, alpha),
               "mix-ln": MixLN(dt, switch)}
    cosine, radius, speed, steps = {}, {}, {}, None
    for name, scheme in schemes.items():
        sol = solve(field, scheme, x, steps=layers, save=Save(every=every))
        first = solve(field, scheme, x, steps=early, save=Save.final())
        moved = torch.linalg.vector_norm(layer_norm(first.final) - x, dim=-1).mean()
        speed[name] = float(moved) / (early * dt)
        theta = layer_norm(sol.tokens)
        cosine[name] = (theta @ theta.transpose(-1, -2)).mean((-1, -2, -3)).to(torch.float64)
        radius[name] = torch.linalg.vector_norm(sol.tokens, dim=-1).mean((-1, -2)).to(torch.float64)
        steps = sol.steps
    return NormalisationComparison(layers=torch.tensor(steps, dtype=torch.float64), cosine=cosine, radius=radius,
                                   speed=speed, early=early)
