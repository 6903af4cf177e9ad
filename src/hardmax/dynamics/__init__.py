"""Pure-attention dynamics: the attention step and `simulate` over layers.

The attention layer has one definition, `step`. The particle simulator (`simulate`) and the
sentiment classifier (`hardmax.models`) both run it, so what is trained is exactly what is analysed;
`kernel` is a compiled CPU copy of its hardmax rule, for speed, that the tests hold to it. Files, in
order of dependence:

- `dedup`: identical tokens merged into one token with a multiplicity (exact grouping).
- `ties`: the tie rule (★) (near-ties decided from differences of tokens) and frames (followers carried
  as offsets from their leader), so ties are exact at any depth.
- `select`: hardmax selection: attention sets by (★), targets, leaders (the machinery of `Hardmax`).
- `rules`: the attention rules as small immutable objects, `Hardmax(tie_rtol)` and `Softmax(beta)`; a
  new rule is a new class with `matrix` and `targets` (`AttentionRule`).
- `step`: scores, the attention matrix and one layer (`attention_step`) for any rule.
- `layers`: several hardmax layers with the leaders' rows skipped after layer 1 (`hardmax_layers`).
- `kernel`: the same hardmax rule compiled with numba, one review per core at a time: `simulate`'s
  default on a CPU when no gradient or attention matrix is needed (3-4× the torch engine); the torch
  step stays the reference, and the tests hold the two to each other.
- `simulator`: `simulate(tokens, rule, *, alpha, layers, A, mask, store, engine)` (input validation,
  the choice of engine, what is stored) and the `Trajectory`: the paper's layers, on the fast engines.
- `manifolds`: where the tokens live, the `Manifold` protocol (velocity, retract, check, pad; min_dimension;
  what the checks and pictures ask: euclidean, unit_sphere, renormalisable, cluster_tolerance), with `Flat()`
  (R^d) and `Sphere()` (S^{d−1}); a new manifold is one class with these members, and nothing else changes.
- `masks`: which tokens exist and who may attend to whom, `Tokens(present)`, `Pairs(allowed)`, `Causal(window)`
  and their intersection `a & b`; a plain bool mask still means token presence; a rule sees a pair mask as
  `allowed` (batch or 1, n, n), a −inf bias on the scores it forbids; a token with no allowed key does not move.
- `field`: the vector field of every attention dynamics, `Field(rule, scores, value, manifold)`, with
  scores `Bilinear(A)`, `QK(Q, K)`, `Rescaled(scores, V)` and any `Manifold`.
- `solvers`: `Euler(dt)` (`Euler.layers(α)` = the paper's layer), `RK4(dt)`, `Renormalised(dt)` (the sphere
  codes' step-then-normalise), `Adaptive(rtol, atol)` (torchdiffeq).
- `save`: `Save`, what a run keeps (`solve`'s, and `simulate(save=...)` in place of store= / keep_attention=).
- `flow`: `solve(field, solver, tokens, *, steps | t1, save, mask, engine)` → `Solution` (tokens and their
  times); `engine_for` says which engine serves a case: the paper's field with `Euler.layers` runs on
  `simulate`'s engines, everything else (a pair mask among them) as one batched loop.

The dynamics (Alcalde, Fantuzzi, Zuazua 2024, eq. 1.1) for tokens z_1..z_n in R^d:

    z_i^{k+1} = z_i^k + γ_k (Σ_j P_ij z_j^k − z_i^k),        γ_k = α_k / (1 + α_k)

    hardmax:  P_ij = w_j 1[j ∈ C_i] / Σ_{l ∈ C_i} w_l,   C_i = argmax_j ⟨A z_i^k, z_j^k⟩  (all ties kept)
    softmax:  P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l exp(β⟨A z_i, z_l⟩)

Identical tokens (repeated words, padding) are merged once, before the first layer, into one
token with multiplicity w_j: they have the same attention set and the same update at every layer,
so they stay identical forever, and merging makes their ties exact whatever the floating-point
reduction order. It is also what makes the engine fast (IMDb reviews have many repeats).
Geometry and theorem checks live in `hardmax.theory`; pictures in `hardmax.plots`.
"""

from __future__ import annotations

from hardmax.dynamics.dedup import Deduplicated, deduplicate, take_rows
from hardmax.dynamics.field import QK, Bilinear, Field, Flat, Manifold, Rescaled, Scores, Sphere
from hardmax.dynamics.flow import SOLVE_ENGINES, Solution, engine_for, solve
from hardmax.dynamics.inputs import as_floating, as_tensor
from hardmax.dynamics.layers import hardmax_layers
from hardmax.dynamics.masks import Causal, Intersection, Mask, Pairs, Tokens
from hardmax.dynamics.rules import (
                                    RULES,
                                    AttentionRule,
                                    Hardmax,
                                    Localmax,
                                    Softmax,
                                    Unnormalised,
                                    rule_from_dict,
                                    rule_to_dict,
)
from hardmax.dynamics.save import Save
from hardmax.dynamics.select import score_bias
from hardmax.dynamics.simulator import ENGINES, Engine, Store, Trajectory, simulate, validate_A, validate_alpha
from hardmax.dynamics.solvers import RK4, Adaptive, Euler, Renormalised
from hardmax.dynamics.step import HARDMAX, attention_matrix, attention_step, scores
from hardmax.dynamics.ties import default_tie_rtol

__all__ = [
    "ENGINES",
    "SOLVE_ENGINES",
    "QK",
    "RK4",
    "Adaptive",
    "Bilinear",
    "Causal",
    "Euler",
    "Field",
    "Flat",
    "Intersection",
    "Localmax",
    "Manifold",
    "Mask",
    "Pairs",
    "Renormalised",
    "Rescaled",
    "Save",
    "Scores",
    "Solution",
    "Sphere",
    "Tokens",
    "Unnormalised",
    "solve",
    "engine_for",
    "HARDMAX",
    "RULES",
    "AttentionRule",
    "Deduplicated",
    "Engine",
    "Hardmax",
    "Softmax",
    "Store",
    "Trajectory",
    "as_floating",
    "as_tensor",
    "attention_matrix",
    "attention_step",
    "deduplicate",
    "default_tie_rtol",
    "hardmax_layers",
    "rule_from_dict",
    "rule_to_dict",
    "score_bias",
    "scores",
    "simulate",
    "take_rows",
    "validate_A",
    "validate_alpha",
]
