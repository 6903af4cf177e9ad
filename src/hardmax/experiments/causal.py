"""Causal attention's papers reproduced: clustering for arbitrary key-query matrices and the Rényi centres.

    causal_clustering(...)   -> Check: KPR 2024 Theorem 4.1 over random K, Q (V = I): every token converges to x_1
    causal_figure2(...)      -> CausalFigure2: KPR 2024 Figure 2 (n = 200, d = 2, β = 64, K = Q = V = I₂) with its
                                strong Rényi centres (δ = 4 β^{−1/2}) and their check (`.check()`)

Karagodin, Polyanskiy, Rigollet, "Clustering in causal attention masking", NeurIPS 2024, arXiv 2411.04990. Their
model (CSA) is causal softmax self-attention on the sphere, ẋ_k = P⊥_{x_k}(Σ_{j≤k} e^{β⟨Q x_k, K x_j⟩} V x_j / Z_k):
`Field(Softmax(β), Bilinear(QᵀK), manifold=Sphere())` under `mask=Causal()`. One `solve` per experiment, every
sequence (and every random K, Q) in one batch; the claims are read by `hardmax.theory.causal`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from hardmax.dynamics import RK4, Bilinear, Causal, Field, Save, Softmax, Solution, Sphere, solve
from hardmax.theory import cluster_counts
from hardmax.theory.causal import RenyiCentres, check_causal, renyi_centres
from hardmax.theory.check import Check

__all__ = ["CausalFigure2", "causal_clustering", "causal_figure2"]


def causal_clustering(*, matrices: int = 16, starts: int = 4, n: int = 24, d: int = 3, beta: float = 1.0,
                      t1: float = 200.0, dt: float = 0.1, seed: int = 0) -> Check:
    """KPR 2024, Theorem 4.1 as a check: causal SA on S^{d−1} with V = I and random key and query matrices.

    K, Q have iid N(0, 1/d) entries (A = QᵀK: not symmetric, indefinite); `starts` uniform starts per pair, every
    (K, Q, start) one sequence of one batch (one A per sequence). The claim: every token converges to x_1.

    Returns:
        The `single_cluster` check of `check_causal` (its `numbers`: the farthest token from x_1, the fraction
        converged). About 1 s on a laptop core with the defaults.
    """
    g = torch.Generator().manual_seed(seed)
    Q = torch.randn(matrices, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    K = torch.randn(matrices, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    A = (Q.transpose(-1, -2) @ K).repeat_interleave(starts, 0)  # (matrices · starts, d, d)
    x = torch.nn.functional.normalize(torch.randn(matrices * starts, n, d, generator=g, dtype=torch.float64), dim=-1)
    solution = solve(Field(Softmax(beta), Bilinear(A), manifold=Sphere()), RK4(dt), x, t1=t1, mask=Causal(),
                     save=Save(every=max(1, round(t1 / dt) // 20)))
    return check_causal(solution)["single_cluster"]


@dataclass(frozen=True)
class CausalFigure2:
    """KPR 2024 Figure 2 reproduced: the solution and its Rényi centres, measured at every saved time.

    Attributes:
        solution: (saved, n, 2) tokens on the circle. centres: the strong and greedy Rényi centres of the start.
        strong_move, greedy_move, median_move: (saved,) the largest distance a strong centre, a greedy centre has
            moved from its start, and the median token's distance from its start.
        clusters: (saved,) clusters of diameter ≤ `tol` (`cluster_counts`). tol: that diameter.
    """

    solution: Solution
    centres: RenyiCentres
    strong_move: Tensor
    greedy_move: Tensor
    median_move: Tensor
    clusters: Tensor
    tol: float

    def check(self, until: float = 150.0) -> Check:
        """The figure's claim up to time `until` (the caption's t = 150): the strong Rényi centres stay put (each
        within δ/4 of its start) while the other clusters merge (fewer clusters at `until` than at t = 25)."""
        times = self.solution.times
        upto = int((times <= until + 1e-9).sum())
        early = int(torch.argmin((times - 25.0).abs()))
        moved = float(self.strong_move[:upto].amax())
        bound = self.centres.delta / 4
        merged = int(self.clusters[early]) > int(self.clusters[upto - 1])
        ok = moved <= bound and merged
        value = (f"strong centres moved ≤ {moved:.3g} (δ = {self.centres.delta:g}); clusters "
                 f"{int(self.clusters[early])} at t = {float(times[early]):g} → {int(self.clusters[upto - 1])} at "
                 f"t = {float(times[upto - 1]):g}; "
                 f"median token moved {float(self.median_move[upto - 1]):.3g}")
        return Check("renyi_centres", "strong Rényi centres stay put while other clusters merge (KPR 2024, Fig. 2)",
                     "passed" if ok else "failed", value, f"moves ≤ δ/4 = {bound:g}, fewer clusters",
                     () if ok else (value,), {"strong_move": moved, "clusters_early": float(self.clusters[early]),
                                              "clusters_late": float(self.clusters[upto - 1])})


def causal_figure2(*, n: int = 200, beta: float = 64.0, t1: float = 300.0, dt: float = 0.05, every: int = 50,
                   seed: int = 0, tol: float = 0.05) -> CausalFigure2:
    """KPR 2024 Figure 2: n tokens uniform on S¹, causal SA with K = Q = V = I₂ at β, RK4; the Rényi centres of the
    start at δ = 4 β^{−1/2}. About 2 s on a laptop core with the defaults (6,000 RK4 steps of 200 tokens)."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.rand(n, generator=g, dtype=torch.float64) * (2 * math.pi)
    x = torch.stack([theta.cos(), theta.sin()], -1)
    solution = solve(Field(Softmax(beta), manifold=Sphere()), RK4(dt), x, t1=t1, mask=Causal(), save=Save(every=every))
    centres = renyi_centres(x, 4.0 / math.sqrt(beta))
    move = (solution.tokens - solution.tokens[0]).norm(dim=-1)  # (saved, n)
    return CausalFigure2(solution=solution, centres=centres, strong_move=move[:, centres.strong].amax(-1),
                         greedy_move=move[:, centres.greedy].amax(-1), median_move=move.median(-1).values,
                         clusters=cluster_counts(solution.tokens, tol), tol=tol)
