"""Theory of the hardmax dynamics: attention sets, leaders, clusters, the polytope K, the set S, Theorem 2.1.

Everything here *reads* configurations and trajectories produced by `hardmax.dynamics`; nothing here moves
tokens. Attention sets are computed with the engine's own tie rule (`dynamics.attention_matrix` on
deduplicated tokens), so theory and dynamics always agree on who attends to whom. Pictures live in
`hardmax.plots`.

    leaders.py    attention sets, leaders, leader layers, clusters (torch, batched)
    geometry.py   the polytope K, its faces and the set S (NumPy float64, SciPy qhull / NNLS)
    check.py      check_theorem -> TheoremReport: a tuple of named `Check`s (passed / failed / not tested)
    support.py    the support growth of a trajectory's hull along directions (compiled, torch fallback)
    figure2.py    the paper's Figure 2 configurations
    flows.py      the particle-system papers' claims on a `Solution` of `solve` (check_flow -> FlowReport),
                  batched cluster counts, the interaction energy E_β

Theorem 2.1 (Alcalde, Fantuzzi, Zuazua 2024). Let α > 0, A symmetric positive definite, and z_1^0..z_n^0
nonzero distinct tokens. Under z_i ← z_i + α/(1+α)(mean_{j∈C_i} z_j − z_i), C_i = argmax_j ⟨A z_i, z_j⟩:
  1. every token converges;
  2. the leaders (tokens with C_i = {i}) reach, in finitely many layers, distinct vertices of a convex
     polytope K, and stay there;
  3. every other token converges to a vertex of K or to a point of S, where (the tight set used here)
         S = { p_F : F a face of K, p_F ∈ F, p_F ≠ 0, ⟨A p_F, v − p_F⟩ ≤ 0 for every vertex v } ∪ vertices,
         p_F = argmin { ‖x‖_A : x ∈ aff(F) },   ‖x‖_A² = ⟨A x, x⟩,
     the A-norm projections of the origin onto the affine hulls of faces that some token can reach: never
     the origin (‖z_i‖_A never decreases) and only where p_F lies on the face ⟨A p_F, ·⟩ exposes.

Numerical conventions (why there are tolerances at all):
  * R = max_i ‖z_i^0‖ per sequence. Every later token lies in conv(Z^0), so R bounds all norms.
  * `atol` is the distance below which two points are the same; default sqrt(2 tie_rtol cond(A))·R, the
    engine's resolution (1.7e-7·R in float64 with A = I): the tie rule compares scores to tie_rtol = 64 eps,
    and the score margins of two leaders at distance δ can be as small as λ_min δ²/2. It also means that a
    follower that has converged onto its leader ends up tied with it and merges with it to the last bit;
    exact equality cannot tell "converged" from "distinct".
  * A token is a *leader* when every token of its attention set lies within `atol` of it (so identical
    tokens can be leaders, and a leader stays one when a converged follower sits on top of it).
  * Points of S that are not vertices are reached only through exact ties. The engine decides ties by
    rule (★) of `hardmax.dynamics._engines.ties` and carries followers as offsets from their leader, so a
    follower converging to a vertex never tips a tie it takes no part in (tests/test_exactness.py).
    A snapshot of positions alone cannot tell a follower that converged to the last bit from its
    leader: there it is a copy (`leader_layers` uses the history).
  * The dynamics never reaches the origin: ‖z_i^k‖_A is nondecreasing (checked by `check_theorem`), which
    is why S excludes it.
"""

from hardmax.theory.check import Check, TheoremReport, check_theorem
from hardmax.theory.figure2 import FIGURE2_ALPHA, FIGURE2_SEED, figure2_configurations, paper_figure2_configurations
from hardmax.theory.flows import FlowReport, check_flow, cluster_counts, energy
from hardmax.theory.geometry import Polytope, limit_set, polytope
from hardmax.theory.leaders import Clusters, attention_sets, find_clusters, find_leaders, leader_layers

__all__ = [
    "FIGURE2_ALPHA",
    "FIGURE2_SEED",
    "Clusters",
    "Polytope",
    "Check",
    "FlowReport",
    "TheoremReport",
    "attention_sets",
    "check_flow",
    "check_theorem",
    "cluster_counts",
    "energy",
    "figure2_configurations",
    "paper_figure2_configurations",
    "find_clusters",
    "find_leaders",
    "leader_layers",
    "limit_set",
    "polytope",
]
