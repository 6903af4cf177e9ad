"""Pure-attention dynamics: one verb, `solve(field, solver, tokens, ...)` → `Solution`; `simulate` its paper spelling.

    field    = Field(rule, scores, value, manifold)      what moves the tokens: who attends to whom and how
    solver   = Euler.layers(α) | Euler(dt) | RK4(dt) | Renormalised(dt) | Adaptive(rtol, atol)   how time advances
    solve(field, solver, tokens, steps=..., save=Save(...), mask=...)  →  Solution(tokens, times, steps, ...)
    simulate(tokens, rule, alpha=, layers=, A=, mask=, save=)  =  solve(Field(rule, Bilinear(A)), Euler.layers(α), ...)

Public files, in order of dependence:

- `inputs`: what callers pass turned into checked tensors (`as_floating`, `validate_A`, `validate_alpha`).
- `manifolds`: where the tokens live, the `Manifold` protocol (velocity, retract, check, pad, ...), `Flat()` (R^d)
  and `Sphere()` (S^{d−1}); a new manifold is one class.
- `masks`: which tokens exist and who may attend to whom, `Tokens(present)`, `Pairs(allowed)`, `Causal(window)`
  and their intersection `a & b`; a rule sees a pair mask as `allowed`, a −inf bias on the scores it forbids.
- `dedup`: identical tokens merged into one with a multiplicity (`deduplicate` → `Deduplicated`).
- `rules`: the attention rules as small immutable objects, `Hardmax(tie_rtol)` (`default_tie_rtol` by dtype),
  `Softmax(beta)`, `Localmax`, `Unnormalised`, and the registry `RULES` the CLI and the explorer read; a new rule is
  one class.
- `step`: scores, the attention matrix and one layer (`attention_step`) for any rule.
- `field`: the vector field, `Field(rule, scores, value, manifold)`, scores `Bilinear(A)`, `QK(Q, K)`,
  `Rescaled(scores, V)` or any `Scores`.
- `solvers`: `Euler(dt)` (`Euler.layers(α)` = the paper's layer), `RK4`, `Renormalised`, `Adaptive`; γ = α/(1+α)
  (`layer_step`) and 1 − γ = 1/(1+α) (`layer_contraction`) are computed here and nowhere else in the library
  (tests/test_architecture.py), the step z + γ(T − z) (`euler_update`) here for every engine, check and experiment
  in Python; the compiled kernels, which cannot call it, repeat its operations in order on the γ_k it gives them.
- `positional`: positional biases, `ALiBi(slope, per_length)` and `Positional(rule, bias)`; the lost-in-the-middle
  model on the circle (`lost_in_the_middle`, `circle_flow`) and its closed-form retrieval profile.
- `normalisation`: how a residual stream adds and normalises each layer, as solvers: `PostLN`, `PreLN`, `PeriLN`,
  `NGPT`, `MixLN` (`SCHEMES` by name).
- `save`: `Save`, what a run keeps. `solution`: `Solution`, the one result (tokens, times, steps, the field and
  solver that made them, P when kept). `flow`: `solve`. `simulator`: `simulate`.

The engines are private (`hardmax.dynamics._engines`): the reference loop over `solver.step` serves every case;
the compiled numba kernel and the compact hardmax path serve the paper's layers (identical tokens merged, leaders
skipped, ties exact by rule (★)), tested bit for bit against the reference; one chooser picks, and
`Solution.engine` says which ran.

The dynamics (Alcalde, Fantuzzi, Zuazua 2024, eq. 1.1) for tokens z_1..z_n in R^d:

    z_i^{k+1} = z_i^k + γ_k (Σ_j P_ij z_j^k − z_i^k),        γ_k = α_k / (1 + α_k)

    hardmax:  P_ij = w_j 1[j ∈ C_i] / Σ_{l ∈ C_i} w_l,   C_i = argmax_j ⟨A z_i^k, z_j^k⟩  (all ties kept)
    softmax:  P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l exp(β⟨A z_i, z_l⟩)

Identical tokens (repeated words, padding) are merged once, before the first layer, into one token with
multiplicity w_j (`deduplicate`): they have the same attention set and the same update at every layer, so they
stay identical forever, and merging makes their ties exact whatever the floating-point reduction order.
Geometry and theorem checks live in `hardmax.theory`; pictures in `hardmax.plots`.
"""

from __future__ import annotations

from hardmax.dynamics.dedup import Deduplicated, deduplicate
from hardmax.dynamics.field import QK, Bilinear, Field, Flat, Manifold, Rescaled, Scores, Sphere
from hardmax.dynamics.flow import solve
from hardmax.dynamics.inputs import as_floating, as_tensor, validate_A, validate_alpha
from hardmax.dynamics.masks import Causal, Intersection, Mask, Pairs, Tokens
from hardmax.dynamics.normalisation import NGPT, SCHEMES, MixLN, PeriLN, PostLN, PreLN
from hardmax.dynamics.positional import ALiBi, Positional
from hardmax.dynamics.rules import (
           RULES,
           AttentionRule,
           Hardmax,
           Localmax,
           Softmax,
           Unnormalised,
           default_tie_rtol,
           rule_from_dict,
           rule_to_dict,
)
from hardmax.dynamics.save import Save
from hardmax.dynamics.simulator import simulate
from hardmax.dynamics.solution import Solution
from hardmax.dynamics.solvers import RK4, Adaptive, Euler, Renormalised
from hardmax.dynamics.step import HARDMAX, attention_matrix, attention_step, scores

__all__ = ["HARDMAX", "NGPT", "QK", "RK4", "RULES", "SCHEMES", "ALiBi", "Adaptive", "AttentionRule", "Bilinear",
           "Causal", "Deduplicated", "Euler", "Field", "Flat", "Hardmax", "Intersection", "Localmax", "Manifold",
           "Mask", "MixLN", "Pairs", "PeriLN", "Positional", "PostLN", "PreLN", "Renormalised",
           "Rescaled", "Save", "Scores", "Softmax", "Solution", "Sphere", "Tokens", "Unnormalised", "as_floating",
           "as_tensor", "attention_matrix", "attention_step", "deduplicate", "default_tie_rtol", "rule_from_dict",
           "rule_to_dict", "scores", "simulate", "solve", "validate_A", "validate_alpha"]
