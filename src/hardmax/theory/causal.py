"""What still holds under causal attention (token i sees the tokens j ≤ i), measured on a `Solution`, and the causal
papers' claims as checks.

    check_causal(solution)        -> FlowReport of named `Check`s (passed / failed / not tested), below
    renyi_centres(x, delta)       -> RenyiCentres: the strong and the greedy Rényi centres of a start (KPR 2024, Sec. 5)

The checks, each "not tested" where its hypotheses fail (never a vacuous pass):

- first_token: token 1 sees only itself, so its velocity is V(z − z) = 0 (R^d), P⊥_x(x) = 0 (sphere): it never moves
  (to rounding), whatever the rule. Applies to every pair mask in which token 1 sees nothing but itself (or nothing).
- prefix_hulls: with a row-stochastic rule, V = I in R^d and a mask inside the causal triangle (token i sees only
  j ≤ i), token i's target is a convex combination of z_1..z_i, so every prefix hull conv{z_1(t), ..., z_i(t)} is
  nested in time — the causal form of the nested-hull claim (for each of the n prefixes, not only the whole set).
  Measured by the support functions h_i(u, t) = max_{j≤i} ⟨u, z_j(t)⟩ along fixed directions u (the coordinate
  axes both ways and 62 random ones), which must never increase beyond rounding: a necessary condition of
  nested hulls that a time-reversed or doctored trajectory fails.
- leaders_fixed: causal hardmax (any A), the full triangle: a token that is a leader at some saved state (C_i = {i}:
  its own score beats every earlier token's) never moves afterwards. Why it holds under causality: the earlier
  tokens stay in the hull of their prefix at that state, and ⟨A z_i, ·⟩ is maximised over that hull at one of its
  tokens, whose score is below z_i's own. Measured: the largest later move of every leader found at (up to 64)
  saved states. Under a sliding window the argument fails (a key's own keys leave the window) and so does the
  claim: leaders are overtaken and move ("not tested" there; tests/test_theory_causal.py measures it).
- single_cluster: Karagodin, Polyanskiy, Rigollet (NeurIPS 2024, arXiv 2411.04990, Thm 4.1): causal softmax
  self-attention on the sphere with V = I and *arbitrary* key and query matrices (any scores QᵀK) converges to
  one cluster — every token to x_1, which never moves — from almost every start. Passed where every token is within
  tol of x_1 and the state has slowed (speed ≤ tol); failed only at an equilibrium (velocity zero to rounding) with
  a token away from x_1 (an antipodal start, a set of measure zero); "not tested" while the tokens still move
  (the metastable clusters the paper's Rényi centres describe).

Under causality the theorems of full attention (Theorem 2.1's polytope, the energy, the 2023 rescaled claims) do
not apply: `check_flow` reports them as "not tested"; this module says what holds instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from hardmax.dynamics import Hardmax, Solution
from hardmax.dynamics.rules import row_stochastic
from hardmax.theory.check import Check
from hardmax.theory.flows import FlowReport

__all__ = ["RenyiCentres", "check_causal", "renyi_centres"]

_LEADER_STATES = 64  # saved states at which check_causal finds the leaders (evenly spaced)


def check_causal(solution: Solution, *, tol: float | None = None) -> FlowReport:
    """Check what still holds under causal attention on `solution` (module docstring).

    Args:
        solution: from `solve` or `simulate` under `Causal()`, `Causal(window=w)` or a lower-triangular `Pairs`,
            with several saved states; (saved, n, d) or (saved, batch, n, d), no padding.
        tol: distance at which two points are the same for single_cluster (None: the manifold's
            `cluster_tolerance` of the initial diameter).
    Returns:
        `FlowReport` with the checks first_token, prefix_hulls, leaders_fixed, single_cluster; `numbers` hold what
        was measured (largest moves, support growth, distances to x_1).
    Raises:
        ValueError: a solution with no pair mask (nothing causal to check), or with padding.
    """
    if solution.pairs is None:
        raise ValueError("check_causal checks a solution under a pair mask such as Causal(); use check_flow for "
                         "full attention")
    Z = solution.tokens.detach().cpu().to(torch.float64)
    mask = solution.mask.cpu()
    if Z.dim() == 3:
        Z, mask = Z.unsqueeze(1), mask.unsqueeze(0)
    if not bool(mask.all()):
        raise ValueError("check_causal checks sequences without padding; pass the real tokens only")
    saved, batch, n, d = Z.shape
    allowed = solution.pairs.pair_mask((batch, n, d)).cpu()
    double = solution.tokens.dtype == torch.float64
    scale = max(1.0, float(Z[0].abs().amax()))
    rounding = (1e3 * torch.finfo(torch.float64).eps if double else 1e-4) * scale
    if not bool(torch.isfinite(Z).all()):
        why = "the saved states are not finite"
        return FlowReport(checks=tuple(Check(name, "", "not tested", why, "") for name in
                                       ("first_token", "prefix_hulls", "leaders_fixed", "single_cluster")),
                          sequences=batch, saved=saved)
    lower = bool((~allowed | torch.ones(n, n, dtype=torch.bool).tril()).all())
    checks = (_first_token(Z, allowed, rounding), _prefix_hulls(solution, Z, lower, rounding),
              _leaders_fixed(solution, Z, allowed, lower, rounding),
              _single_cluster(solution, Z, allowed, tol, double))
    return FlowReport(checks=checks, sequences=batch, saved=saved)


def _first_token(Z: Tensor, allowed: Tensor, bound: float) -> Check:
    claim = "the first token sees only itself (or nothing): it never moves"
    if bool(allowed[:, 0, 1:].any()):
        return Check("first_token", claim, "not tested", "token 1 may attend to later tokens", "")
    moved = float((Z[:, :, 0] - Z[:1, :, 0]).norm(dim=-1).amax())
    ok = moved <= bound
    return Check("first_token", claim, "passed" if ok else "failed", f"largest move {moved:.3g}",
                 f"≤ {bound:.2g} (rounding)", () if ok else (f"the first token moved by {moved:.3g}",),
                 {"largest_move": moved})


def _directions(d: int) -> Tensor:
    """(2d + 62, d) unit directions: ± the coordinate axes and 62 fixed random ones (seeded: the check is
    deterministic)."""
    g = torch.Generator().manual_seed(0)
    eye = torch.eye(d, dtype=torch.float64)
    rand = torch.randn(62, d, generator=g, dtype=torch.float64)
    return torch.cat([eye, -eye, rand / rand.norm(dim=-1, keepdim=True)])


def _prefix_hulls(solution: Solution, Z: Tensor, lower: bool, bound: float) -> Check:
    claim = "every prefix hull conv{z_1..z_i} is nested in time (support functions never grow)"
    field = solution.field
    value = field.value
    identity = value is None or bool(torch.equal(value.cpu().to(torch.float64),
                                                 torch.eye(value.shape[0], dtype=torch.float64)))
    why = ("tokens not in R^d" if not field.manifold.euclidean else "V ≠ I" if not identity else
           "the rule's rows are not convex combinations" if not row_stochastic(field.rule) else
           "the mask lets a token see later ones" if not lower else "one saved state" if Z.shape[0] < 2 else None)
    if why is not None:
        return Check("prefix_hulls", claim, "not tested", why, "")
    u = _directions(Z.shape[-1])
    h = torch.cummax(Z @ u.T, dim=2).values  # (saved, batch, n, directions): h_i(u, t) over the prefix i
    growth = float((h[1:] - h[:-1]).amax())
    ok = growth <= bound
    messages = () if ok else tuple(f"sequence {b}: a prefix hull grew by {float(g):.3g}" for b, g in
                                   enumerate((h[1:] - h[:-1]).amax((0, 2, 3))) if g > bound)[:5]
    return Check("prefix_hulls", claim, "passed" if ok else "failed", f"largest support growth {growth:.3g}",
                 f"≤ {bound:.2g} (rounding)", messages, {"support_growth": growth})


def _leaders_fixed(solution: Solution, Z: Tensor, allowed: Tensor, lower: bool, bound: float) -> Check:
    claim = "under causal hardmax a leader (C_i = {i}) never moves again"
    field = solution.field
    saved, batch, n, d = Z.shape
    full = allowed.shape[0] == 1 and bool(torch.equal(allowed[0], torch.ones(n, n, dtype=torch.bool).tril()))
    if not isinstance(field.rule, Hardmax) or not field.manifold.euclidean or not full:
        # a window breaks the argument: a key's own keys leave the window (measured: leaders do move there)
        return Check("leaders_fixed", claim, "not tested", "not causal hardmax in R^d" if full else
                     "the mask is not the full causal triangle (a window hides the keys' keys)", "")
    states = sorted(set(torch.linspace(0, saved - 1, min(saved, _LEADER_STATES)).round().long().tolist()))
    restricted = field.restricted(allowed)
    ones = torch.ones(batch, n, dtype=torch.float64)
    worst, leaders = 0.0, 0
    # the largest move after each state: a reverse running maximum of |z(s) − z(k)| over s ≥ k, per state k
    for k in states:  # at most 64 states: each one attention matrix of the batch
        with torch.no_grad():
            P = restricted.attention(float(solution.times[k]), Z[k], ones)
        lead = P.diagonal(dim1=-2, dim2=-1) == 1  # C_i = {i}
        leaders += int(lead.sum())
        moves = (Z[k:] - Z[k]).norm(dim=-1).amax(0)  # (batch, n)
        if bool(lead.any()):
            worst = max(worst, float(moves[lead].amax()))
    ok = worst <= bound
    return Check("leaders_fixed", claim, "passed" if ok else "failed",
                 f"{leaders} leader(s) found at {len(states)} states; largest later move {worst:.3g}",
                 f"≤ {bound:.2g} (rounding)", () if ok else (f"a leader moved by {worst:.3g}",),
                 {"leaders": float(leaders), "largest_move": worst})


def _single_cluster(solution: Solution, Z: Tensor, allowed: Tensor, tol: float | None, double: bool) -> Check:
    claim = "causal SA on the sphere, V = I, any QᵀK: every token converges to x_1 (KPR 2024, Thm 4.1)"
    field = solution.field
    value = field.value
    identity = value is None or bool(torch.equal(value.cpu().to(torch.float64),
                                                 torch.eye(value.shape[0], dtype=torch.float64)))
    n = Z.shape[2]
    causal = bool(torch.equal(allowed[0], torch.ones(n, n, dtype=torch.bool).tril())) and allowed.shape[0] == 1
    from hardmax.dynamics import Softmax

    why = ("not on the unit sphere" if not field.manifold.unit_sphere else "V ≠ I" if not identity else
           "not softmax attention" if type(field.rule) is not Softmax else
           "the mask is not the full causal triangle" if not causal else None)
    if why is not None:
        return Check("single_cluster", claim, "not tested", why, "")
    tol = field.manifold.cluster_tolerance(2.0) if tol is None else float(tol)
    final = Z[-1]
    dist = (final - final[:, :1]).norm(dim=-1).amax(-1)  # (batch,) farthest token from x_1
    restricted = field.restricted(allowed)
    with torch.no_grad():
        v = restricted.velocity(float(solution.times[-1]), final, None)
    speed = v.norm(dim=-1).amax(-1)
    rest = speed <= (1e3 * torch.finfo(torch.float64).eps if double else 1e-5)
    passed = (dist <= tol) & (speed <= tol)
    failed = (dist > tol) & rest
    numbers = {"farthest_from_x1": float(dist.amax()), "converged": float(passed.double().mean())}
    value_text = f"{int(passed.sum())}/{len(dist)} converged to x_1 (farthest {float(dist.amax()):.3g})"
    if bool(failed.any()):
        messages = tuple(f"sequence {b}: at rest with a token {float(dist[b]):.3g} from x_1"
                         for b in failed.nonzero().flatten().tolist()[:5])
        return Check("single_cluster", claim, "failed", value_text, f"within {tol:g} of x_1", messages, numbers)
    if not bool(passed.all()):
        return Check("single_cluster", claim, "not tested", value_text + "; the others still move",
                     f"within {tol:g} of x_1", (), numbers)
    return Check("single_cluster", claim, "passed", value_text, f"within {tol:g} of x_1", (), numbers)


@dataclass(frozen=True)
class RenyiCentres:
    """The Rényi centres of a start (KPR 2024, Sec. 5), (batch, n) bool each.

    Attributes:
        strong: x_k farther than δ from every earlier token: ‖x_k − x_j‖ > δ for all j < k (x_1 always).
        greedy: the Rényi parking sequence: x_1, then each x_k farther than δ from every earlier *centre*.
        delta: δ.
    """

    strong: Tensor
    greedy: Tensor
    delta: float


def renyi_centres(tokens, delta: float) -> RenyiCentres:
    """The strong and greedy Rényi centres of `tokens` (n, d) or (batch, n, d) at separation δ > 0.

    KPR take δ = 4 β^{−1/2}: a strong centre's attention to every earlier token is at most e^{−βδ²/2} = e^{−8} of
    its attention to itself (on the sphere ⟨x_k, x_j⟩ = 1 − ‖x_k − x_j‖²/2), so it barely moves for a long time
    (their Lemma 5.1), and the later tokens near it gather there. The greedy sequence is a parking process, decided
    token after token (one batched step per token: the decision of x_k needs those of x_1..x_{k−1}).
    """
    x = torch.as_tensor(tokens).detach().to(torch.float64)
    if x.dim() not in (2, 3):
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d), got {tuple(x.shape)}")
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a finite number > 0, got {delta!r}")
    single = x.dim() == 2
    x = x.unsqueeze(0) if single else x
    batch, n, _ = x.shape
    far = torch.cdist(x, x) > delta  # (batch, n, n)
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)
    strong = (far | ~earlier).all(-1)
    greedy = torch.zeros(batch, n, dtype=torch.bool)
    greedy[:, 0] = True
    for k in range(1, n):  # the parking process is sequential in k; each step is batched
        greedy[:, k] = (far[:, k, :k] | ~greedy[:, :k]).all(-1)
    if single:
        strong, greedy = strong[0], greedy[0]
    return RenyiCentres(strong=strong, greedy=greedy, delta=float(delta))
