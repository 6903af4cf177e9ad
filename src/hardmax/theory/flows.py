"""The claims of the particle-system papers as checks on a `Solution`, cluster counts and the interaction energy.

    cluster_counts(tokens, tol)   (..., n, d) -> (...): clusters of diameter ≤ tol, batched (the connected components
                                  of "|z_i − z_j| ≤ tol" when each is that narrow; a wider chain is split, below)
    energy(tokens, beta)          E_β = (1/(2βn²)) Σ_ij e^{β⟨x_i, x_j⟩}   (β = 0: |mean|²/2, its β → 0 limit up to
                                  a constant), the energy USA ascends and SA increases (GLPR, "A mathematical
                                  perspective on Transformers", Sec. 3)
    check_flow(solution)          -> FlowReport of named `Check`s (passed / failed / not tested)

The checks (each says "not tested", never "passed", where its hypotheses do not hold or the horizon is too short).
An asymptotic claim fails only at an equilibrium: when the final state contradicts it while the field's velocity
there is zero to rounding; a state that contradicts it and still moves (metastable clusters, a short horizon) is
"not tested". It passes only on a sequence that has slowed down: every token's speed at the final state is at
most tol per unit of time (or the state is at rest), so a start that happens to satisfy the claim (tokens in
convex position at t = 0.001) is not taken for its limit. Saved states that are not finite (a field that
overflowed) fail the `finite` check and make every other check "not tested".

- finite: every saved state is finite (NaN or inf: the solve overflowed; `solve` itself refuses such runs).

- norms: on the sphere every saved token has norm 1 to rounding.

Which claims apply is asked of the field's manifold (`hardmax.dynamics.Manifold`), never of its class: `euclidean`
(R^d itself: hull, polytope, hyperplanes, boolean), `unit_sphere` (norms, single_cluster, energy) and
`cluster_tolerance` (the default tol); on any other manifold those claims are "not tested". Likewise which claims
a rule meets is asked of what the rule declares (`hardmax.dynamics.rules`), never of its class: `row_stochastic`
(hull) and `particle_model` ("SA": the sphere claims and the 2023 rescaled ones; "USA": the sphere claims).
- hull: with V = I in R^d and a row-stochastic rule, conv(Z(t)) is nested in time: every token of each saved state
  lies in the hull of the previous one, to 1e-2 tol (qhull's facet inequalities in the previous state's affine
  hull for d ≤ 6; the exact distance to the hull by NNLS above): the hull converges to a polytope
  (GLPR 2023 Thm 3.1; localmax, arXiv 2509.15958).
- polytope: V = I, A ≻ 0 and the rescaled scores of the 2023 paper: every token converges to 0 or to a point of
  the boundary of a convex polytope K (GLPR 2023, Theorem 3.1; numerically, to its vertices), measured as the
  distance of each final token to 0 or to the boundary of the final convex hull (in its affine hull when flat).
- hyperplanes: V with a simple positive dominant eigenvalue and the rescaled scores: the coordinates ⟨φ, z_i⟩
  along the dominant left eigenvector φ take at most three values — the tokens cluster towards at most three
  parallel hyperplanes (GLPR 2023, Theorem 4.1).
- boolean: d = 1, V > 0 and the rescaled scores (with `Save(attention=True)`): the attention matrix converges to
  a Boolean matrix, every entry to 0 or 1 (GLPR 2023, the one-dimensional case).
- single_cluster: on the sphere with V = I and A = β I (β ≥ 0): one cluster for β = 0, and for d ≥ 3 for every β,
  from almost every start (GLPR 2025, Theorems 4.1 and 5.x); a sequence still in several clusters when the
  tokens have not settled is "not tested", not failed.
- energy: on the sphere with V = I, A = β I: E_β never decreases along the saved states (USA: gradient ascent; SA:
  a gradient flow for another metric).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from numba import prange
from torch import Tensor

from hardmax._numba import numba, parallel
from hardmax.dynamics import NGPT, SCHEMES, Bilinear, Causal, Field, Manifold, PostLN, Rescaled, Solution
from hardmax.dynamics.rules import particle_model, row_stochastic
from hardmax.tables import markdown_table
from hardmax.theory.check import Check
from hardmax.theory.geometry import HullTest, hull_distance

__all__ = ["FlowReport", "check_flow", "cluster_counts", "energy"]

_QHULL_DIMENSION = 6  # the hull check uses qhull's facets up to this d, the NNLS distance above it
_NNLS_BUDGET = 20_000  # tokens measured by NNLS in one hull check (d > 6); beyond, saved pairs are sampled
_COUNT_BLOCK = 1 << 22  # pairs per block of cluster_counts (32 MiB of labels)


def cluster_counts(tokens: Tensor, tol: float, mask: Tensor | None = None, *,
                   distances: Tensor | None = None) -> Tensor:
    """Number of clusters of each sequence: groups of diameter ≤ tol, batched.

    A cluster is a connected component of the graph |z_i − z_j| ≤ tol whose diameter (its largest pairwise
    distance) is at most tol: tokens that gathered. A component wider than tol is a chain of neighbours, not a
    cluster (800 tokens spread on a circle are one component, not one cluster): it is split greedily into balls
    of radius tol/2 about its first remaining token, each of diameter ≤ tol. The count is therefore exact when
    the clusters are separated by more than tol, and otherwise the size of a partition into groups of diameter
    ≤ tol (an upper bound on the fewest such groups): "k clusters" always means k groups that narrow.

    Args:
        tokens: (..., n, d). tol: distance ≥ 0 below which two tokens are in one cluster.
        mask: (..., n) bool, True for real tokens (None: all).
        distances: (..., n, n) the pairwise distances |z_i − z_j| when the caller has them already (unit tokens:
            √(2 − 2 cos_ij) from their cosines), instead of computing them from `tokens` (then only its shape
            is read).
    Returns:
        (...) int64 counts. On the CPU the components, cliques and balls are compiled, one sequence per worker;
        on other devices labels spread by min over neighbours until nothing changes (at most n batched rounds)
        and a wide component is split in one batched round per ball: either way no Python loop over sequences,
        and the same counts.
    """
    z = torch.as_tensor(tokens)
    shape, n = z.shape[:-2], z.shape[-2]
    z = z.reshape(-1, n, z.shape[-1])
    z = z if z.dtype in (torch.float32, torch.float64) else z.to(torch.float64)
    m = torch.ones(z.shape[:2], dtype=torch.bool, device=z.device) if mask is None else \
        torch.as_tensor(mask, device=z.device).expand(*shape, n).reshape(-1, n)
    D = None if distances is None else torch.as_tensor(distances, device=z.device).reshape(-1, n, n)
    block = max(1, _COUNT_BLOCK // (n * n))  # sequences per block: bounded memory for any batch
    counts = [_clusters(z[s:s + block], m[s:s + block], tol, None if D is None else D[s:s + block])
              for s in range(0, z.shape[0], block)]
    return (torch.cat(counts) if counts else torch.zeros(0, dtype=torch.long, device=z.device)).reshape(shape)


def _clusters(z: Tensor, m: Tensor, tol: float, dist: Tensor | None = None) -> Tensor:
    """(b,) clusters of diameter ≤ tol among real tokens (`cluster_counts`); z (b, n, d), m (b, n), dist (b, n, n)
    their distances (None: computed). On the CPU the graph and its counting are compiled (`_count_clusters`, one
    sequence per worker, 2-3x the batched rounds below, which run on other devices); the same distances and graph,
    the same counts."""
    b, n = m.shape
    dist = torch.cdist(z, z) if dist is None else dist
    near = (dist <= tol) & m.unsqueeze(1) & m.unsqueeze(2)
    near.diagonal(dim1=1, dim2=2).copy_(m)
    if dist.device.type == "cpu" and dist.dtype in (torch.float32, torch.float64) and b * n > 0:
        D = dist.detach().contiguous().numpy()
        out = np.zeros(b, np.int64)
        with parallel(torch.get_num_threads()):
            # tol/2 in the distances' dtype, as the batched rounds compare it
            _count_clusters(near.contiguous().numpy(), m.contiguous().numpy(), D, D.dtype.type(tol / 2),
                            np.empty((3, b, n), np.int64), np.empty((2, b, n), np.bool_), out)
        return torch.from_numpy(out)
    return _rounds(near, m, tol, dist)


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _count_clusters(near, mask, dist, half, ints, flags, out):
    """out[s] (b,) the clusters of sequence s, `_rounds`' counts compiled: near (b, n, n) the graph |z_i − z_j| ≤ tol
    among real tokens (its diagonal: mask (b, n)), dist (b, n, n) the distances, half = tol/2 in their dtype. The
    components by a search from each smallest unlabelled token; one cluster per component whose members each have
    all its members as neighbours (a clique: diameter ≤ tol); a wider one covered by balls of radius tol/2 about
    its first token left, in index order. O(n²) per sequence, one sequence per worker; its scratch given, ints
    (3, b, n) and flags (2, b, n) (no allocation in the workers: a worker thread's allocations shape its heap, and
    the softmax engine's lanes that ran after them in that thread were 45 % slower)."""
    b, n = mask.shape
    for s in prange(b):
        label, stack, size = ints[0, s], ints[1, s], ints[2, s]
        label[:] = -1
        size[:] = 0
        for i in range(n):
            if not mask[s, i] or label[i] >= 0:
                continue
            label[i] = i
            stack[0] = i
            top, members = 1, 0
            while top > 0:
                top -= 1
                k = stack[top]
                members += 1
                for j in range(n):
                    if near[s, k, j] and label[j] < 0:
                        label[j] = i
                        stack[top] = j
                        top += 1
            size[i] = members
        wide, left = flags[0, s], flags[1, s]
        wide[:] = False  # by root: a member with fewer neighbours than the component has members
        for i in range(n):
            if mask[s, i]:
                degree = 0
                for j in range(n):
                    if near[s, i, j]:
                        degree += 1
                if degree < size[label[i]]:
                    wide[label[i]] = True
        count = 0
        left[:] = False
        for i in range(n):
            if mask[s, i]:
                if wide[label[i]]:
                    left[i] = True
                elif label[i] == i:
                    count += 1
        for i in range(n):  # one ball per token still left, about it, in index order
            if left[i]:
                count += 1
                left[i] = False
                for j in range(i + 1, n):
                    if left[j] and dist[s, i, j] <= half:
                        left[j] = False
        out[s] = count


def _rounds(near: Tensor, m: Tensor, tol: float, dist: Tensor) -> Tensor:
    """(b,) `_clusters` in batched rounds (any device): labels spread by min over neighbours, wide components
    covered by one ball per sequence and round. near, dist (b, n, n), m (b, n)."""
    b, n = m.shape
    kind = torch.uint8 if n < 255 else (torch.int16 if n < 32767 else torch.int32)
    big = torch.tensor(n, dtype=kind, device=near.device)
    # Start from each token's first neighbour (final already when clusters are cliques, the usual case), then
    # spread the smallest label over neighbours until nothing changes.
    label = torch.where(m, near.to(torch.uint8).argmax(-1).to(kind), big)
    for _ in range(n):
        new = torch.where(near, label.unsqueeze(1), big).amin(-1)
        new = torch.where(m, torch.minimum(label, new), big)
        if torch.equal(new, label):
            break
        label = new
    roots = (label.long() == torch.arange(n, device=near.device)) & m
    # A component is no wider than tol exactly when it is a clique of the graph: each of its tokens is near all of
    # its members. A token with fewer neighbours than its component has members makes the component wide.
    place = label.long()  # padding's label is n: a slot of its own
    size = torch.zeros(b, n + 1, dtype=torch.int32, device=near.device).scatter_add_(1, place, m.int()).gather(1, place)
    short = (near.sum(-1, dtype=torch.int32) < size) & m
    wide = torch.zeros(b, n + 1, dtype=torch.uint8, device=near.device).scatter_reduce(
        1, place, short.to(torch.uint8), "amax").gather(1, place).bool() & m
    count = (roots & ~wide).sum(-1)
    rows = torch.arange(b, device=near.device)
    left = wide
    while bool(left.any()):  # one ball of radius tol/2 per sequence and round, about its first token left
        has = left.any(-1)
        seed = left.to(torch.uint8).argmax(-1)
        ball = left & (dist[rows, seed] <= tol / 2)
        count += has
        left = left & ~ball
    return count


def energy(tokens: Tensor, beta: float | Tensor) -> Tensor:
    """E_β = (1/(2βn²)) Σ_ij e^{β⟨x_i, x_j⟩} of each sequence; β = 0 gives (1/(2n²)) Σ_ij ⟨x_i, x_j⟩ = |x̄|²/2.

    Args:
        tokens: (..., n, d). beta: a number or a tensor broadcasting against tokens.shape[:-2].
    Returns:
        (...) the energy, in the tokens' dtype.
    """
    z = torch.as_tensor(tokens)
    n = z.shape[-2]
    g = z @ z.transpose(-1, -2)
    b = torch.as_tensor(beta, dtype=z.dtype, device=z.device)
    b_ = b.reshape(*b.shape, 1, 1) if b.dim() else b
    safe = torch.where(b_ != 0, b_, torch.ones_like(b_))
    e = torch.where(b_ != 0, torch.expm1(safe * g) / (2 * safe), g / 2).sum((-1, -2)) / n**2
    return e + torch.where(b != 0, 1 / (2 * torch.where(b != 0, b, torch.ones_like(b))), torch.zeros_like(b))


@dataclass(frozen=True)
class FlowReport:
    """The checks of `check_flow`, with the size of what was checked."""

    checks: tuple[Check, ...]
    sequences: int
    saved: int

    @property
    def passed(self) -> bool:
        """No check failed (as `TheoremReport.passed`); `verdict` also says whether anything was tested."""
        return all(c.status != "failed" for c in self.checks)

    @property
    def verdict(self) -> str:
        """"FAILED", "PASSED" (some claim beyond the norms and finiteness passed) or "NOT TESTED" (nothing
        substantive applied)."""
        if not self.passed:
            return "FAILED"
        substantive = (c for c in self.checks if c.name not in ("norms", "finite"))
        return "PASSED" if any(c.passed for c in substantive) else "NOT TESTED"

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check named {name!r}; checks: {', '.join(c.name for c in self.checks)}")

    def table(self) -> str:
        """Markdown: a line with the verdict, a row per check (claim, value, expected, status), the failure messages."""
        head = (f"Claims of the particle-system papers on {self.sequences} sequence(s), {self.saved} saved states: "
                f"{self.verdict}")
        rows = [(c.claim, c.value, c.expected, c.status) for c in self.checks]
        return "\n".join([head, "", *markdown_table(("check", "value", "expected", "status"), rows),
                          *[f"- {m}" for c in self.checks for m in c.messages]])


#: Each claim `check_flow` reports, by name, in words.
CLAIMS = {
    "finite": "every saved state is finite",
    "norms": "on the sphere, every token keeps norm 1",
    "hull": "V = I in R^d: the convex hull of the tokens is nested in time and converges to a polytope",
    "polytope": "V = I, A ≻ 0 (rescaled, 2023): every token converges to 0 or to the boundary of a convex polytope",
    "hyperplanes": "V with a simple positive dominant eigenvalue (rescaled, 2023): at most three parallel hyperplanes",
    "boolean": "d = 1, V > 0 (rescaled, 2023): the attention matrix becomes Boolean (every P_ij → 0 or 1)",
    "single_cluster": "sphere, V = I: one cluster for β = 0, and for d ≥ 3 for every β (almost every start)",
    "energy": "sphere, V = I: the energy E_β never decreases",
}


def check_flow(solution: Solution, *, tol: float | None = None) -> FlowReport:
    """Check the claims that apply to `solution`'s field (see the module docstring).

    Args:
        solution: from `hardmax.dynamics.solve`, with several saved states (Save(every=k)).
        tol: distance at which two points are the same (None: the manifold's `cluster_tolerance` of the initial
            diameter: 1e-3 of it in R^d, 1e-2 on the sphere).
    Returns:
        `FlowReport`: `report["energy"].status`, `report.table()`.
    Under a pair mask (`Causal()`, `Pairs`) the claims above, theorems of full attention, are "not tested" (the
    reason said); what is checked is that every saved state is finite and, under `Causal`, that the first token,
    which sees only itself, never moved (exactly).

    Raises:
        ValueError: padding.
    """
    double = solution.tokens.dtype == torch.float64  # tolerances of rounding follow the solved dtype
    Z = solution.tokens.detach().cpu().to(torch.float64)
    if Z.dim() == 3:
        Z, mask = Z.unsqueeze(1), solution.mask.cpu().unsqueeze(0)
    else:
        mask = solution.mask.cpu()
    if not bool(mask.all()):
        raise ValueError("check_flow checks sequences without padding; pass the real tokens only")
    field = solution.field
    finite = _finite(Z, solution.times)
    if isinstance(solution.solver, tuple(SCHEMES.values())):  # a residual stream, not the field's flow
        return _normalised(solution, Z, finite)
    if solution.pairs is not None:  # its claims are theorems of full attention
        return _masked(solution, Z, finite)
    if not finite.passed:  # nothing else can be measured on NaN or inf: every other claim is "not tested"
        others = ("norms", "hull", "polytope", "hyperplanes", "boolean", "single_cluster", "energy")
        return FlowReport(checks=(finite, *(Check(name, CLAIMS[name], "not tested", "the saved states are not finite",
                                                  "") for name in others)), sequences=Z.shape[1], saved=Z.shape[0])
    diam = float(torch.cdist(Z[0], Z[0]).amax()) or 1.0
    tol = field.manifold.cluster_tolerance(diam) if tol is None else float(tol)
    settled, velocity = _at_rest(field, Z[-1], float(solution.times[-1]), double)
    slow = settled | (velocity.norm(dim=-1).amax(-1) <= tol)  # every token slowed to tol per unit of time
    checks = (finite, _norms(Z, field.manifold, double), _hull(Z, field, tol), _polytope(Z, field, tol, settled, slow),
              _hyperplanes(Z, field, tol, settled, velocity), _boolean(solution, field, settled, slow),
              _single_cluster(Z, field, tol, settled), _energy(Z, field, double))
    return FlowReport(checks=checks, sequences=Z.shape[1], saved=Z.shape[0])


def _normalised(solution: Solution, Z: Tensor, finite: Check) -> FlowReport:
    """The report of a normalisation scheme's run (`hardmax.dynamics.normalisation`): its layers are not the field's
    flow (Pre-LN and Peri-LN grow the tokens' norms), so the flow's claims are "not tested"; what each scheme
    promises is checked: finiteness, unit tokens after every layer of Post-LN and nGPT, and under `Causal` the first
    token's direction, which sees only itself (a = V θ_1), fixed by every scheme when V = I."""
    scheme = type(solution.solver).__name__
    checks = [finite]
    rounding = (1e3 * torch.finfo(torch.float64).eps if solution.tokens.dtype == torch.float64 else 1e-4)
    if finite.passed and isinstance(solution.solver, PostLN | NGPT) and Z.shape[0] > 1:
        worst = float((Z[1:].norm(dim=-1) - 1).abs().amax())
        ok = worst <= rounding
        checks.append(Check("unit_tokens", f"{scheme} normalises every layer's output: unit tokens after layer 1",
                            "passed" if ok else "failed", f"max |‖x‖ − 1| = {worst:.1e}", f"≤ {rounding:.1e}",
                            () if ok else (f"a token's norm is off 1 by {worst:.2g}",)))
    if (finite.passed and isinstance(solution.pairs, Causal) and solution.field.value is None
            and solution.field.manifold.name == "R^d"):
        first = Z[:, :, 0] / Z[:, :, 0].norm(dim=-1, keepdim=True)
        turned = float((first - first[:1]).abs().amax())
        ok = turned <= rounding
        checks.append(Check("first_direction", "under causal attention the first token sees only itself: its "
                            "direction never turns (the schemes change its norm at most)", "passed" if ok else "failed",
                            f"largest turn {turned:.3g}", f"≤ {rounding:.1e} (rounding)",
                            () if ok else (f"the first token's direction moved by {turned:.3g}",)))
    why = f"a claim of the field's flow; this solution is a {scheme} residual stream, whose layers are not that flow"
    checks += [Check(name, CLAIMS[name], "not tested", why, "") for name in
               ("norms", "hull", "polytope", "hyperplanes", "boolean", "single_cluster", "energy")]
    return FlowReport(checks=tuple(checks), sequences=Z.shape[1], saved=Z.shape[0])


def _masked(solution: Solution, Z: Tensor, finite: Check) -> FlowReport:
    """The report of a solution under a pair mask: finiteness, the first token at rest under `Causal` (it sees only
    itself: its velocity is V(z − z) = 0 in R^d, P⊥_x(x) = 0 on the sphere: zero to rounding), and every claim of
    full attention "not tested"."""
    mask = type(solution.pairs).__name__
    why = f"a theorem of full attention; this solution ran under a pair mask ({mask})"
    checks = [finite]
    if getattr(solution.pairs, "window", False) is not False and finite.passed:  # Causal(window): token 1 sees itself
        moved = float((Z[:, :, 0] - Z[:1, :, 0]).abs().amax())
        scale = max(1.0, float(Z[0, :, 0].abs().amax()))
        bound = (1e3 * torch.finfo(torch.float64).eps if solution.tokens.dtype == torch.float64 else 1e-4) * scale
        ok = moved <= bound
        checks.append(Check("first_token", "under causal attention the first token sees only itself: it never moves",
                            "passed" if ok else "failed", f"largest move {moved:.3g}", f"≤ {bound:.2g} (rounding)",
                            () if ok else (f"the first token moved by {moved:.3g}",)))
    checks += [Check(name, CLAIMS[name], "not tested", why, "") for name in
               ("norms", "hull", "polytope", "hyperplanes", "boolean", "single_cluster", "energy")]
    return FlowReport(checks=tuple(checks), sequences=Z.shape[1], saved=Z.shape[0])


def _finite(Z: Tensor, times: Tensor) -> Check:
    """Every saved state finite; else "failed", naming the first saved state (and its time) that is not."""
    claim = CLAIMS["finite"]
    ok = torch.isfinite(Z).flatten(1).all(1)  # (saved,)
    if bool(ok.all()):
        return Check("finite", claim, "passed", f"{Z.shape[0]} saved states finite", "finite")
    first = int((~ok).nonzero()[0])
    t = float(times[first]) if first < len(times) else math.nan
    message = (f"saved state {first} (t = {t:g}) holds NaN or inf: the field overflowed; use a smaller step, "
               "a shorter time or smaller tokens")
    return Check("finite", claim, "failed", f"NaN or inf from saved state {first} (t = {t:g})", "finite",
                 (message,), {"first": float(first)})


def _at_rest(field: Field, z: Tensor, t: float, double: bool) -> tuple[Tensor, Tensor]:
    """(batch,) whether the field's velocity at the final state z (batch, n, d) is zero to rounding (an
    equilibrium), and that velocity (batch, n, d): a claim holding where what it measures still moves faster
    than tol per unit of time is not taken for the limit's."""
    with torch.no_grad():
        v = field.velocity(t, z, None)
    scale = z.abs().amax((-1, -2)).clamp(min=1.0)
    return v.abs().amax((-1, -2)) <= (1e3 * torch.finfo(torch.float64).eps if double else 1e-5) * scale, v


def _cpu(m: Tensor | None) -> Tensor | None:
    return None if m is None else m.detach().cpu().to(torch.float64)


def _identity_value(field: Field) -> bool:
    v = _cpu(field.value)
    return v is None or bool(torch.equal(v, torch.eye(v.shape[0], dtype=v.dtype)))


def _scaled_identity(field: Field) -> Tensor | None:
    """(batch,) or () β with A = β I, or None when the scores are not of that form."""
    if type(field.scores) is not Bilinear:
        return None
    A = _cpu(field.scores.A)
    if A is None:
        return torch.tensor(1.0, dtype=torch.float64)
    d = A.shape[-1]
    beta = A[..., 0, 0]
    eye = torch.eye(d, dtype=torch.float64)
    scaled = torch.allclose(A, beta.reshape(*beta.shape, 1, 1) * eye, rtol=0, atol=1e-12)
    return beta if scaled else None


def _norms(Z: Tensor, manifold: Manifold, double: bool) -> Check:
    claim = CLAIMS["norms"]
    if not manifold.unit_sphere:
        return Check("norms", claim, "not tested", f"tokens in {manifold.name}", "norm 1")
    worst = float((Z.norm(dim=-1) - 1).abs().amax())
    ok = worst <= (1e3 * torch.finfo(torch.float64).eps if double else 1e-5)
    return Check("norms", claim, "passed" if ok else "failed", f"max |‖x‖ − 1| = {worst:.1e}", "rounding",
                 () if ok else (f"all sequences: max |‖x‖ − 1| = {worst:.1e}",), {"max_error": worst})


def _hull(Z: Tensor, field: Field, tol: float) -> Check:
    claim = CLAIMS["hull"]
    stochastic = row_stochastic(field.rule)
    if not (field.manifold.euclidean and _identity_value(field) and stochastic):
        return Check("hull", claim, "not tested", "the field is not V = I, flat, row-stochastic", "nested hulls")
    allowed = 1e-2 * tol
    saved, batch, n, d = Z.shape
    Zn = Z.numpy()
    # every consecutive pair of saved states of every sequence (a state that did not move is inside its hull)
    pairs = [(s, b) for b in range(batch) for s in range(1, saved) if not np.array_equal(Zn[s, b], Zn[s - 1, b])]
    exact = d <= _QHULL_DIMENSION
    measured = pairs
    if not exact and len(pairs) * n > _NNLS_BUDGET:  # NNLS per token: evenly spaced pairs within the budget
        keep = np.unique(np.linspace(0, len(pairs) - 1, max(1, _NNLS_BUDGET // n)).round().astype(int))
        measured = [pairs[i] for i in keep]
    growth, where = 0.0, None
    for s, b in measured:
        before, now = Zn[s - 1, b], Zn[s, b]
        if exact:  # qhull's facets of conv(Z(t_{s-1})) in its affine hull
            out = HullTest.of(before, allowed).outside(now)
        else:  # the distance of each token to conv(Z(t_{s-1})), by NNLS
            out = max(hull_distance(p, before) for p in now)
        if out > growth:
            growth, where = out, (s, b)
    how = "qhull facets" if exact else "NNLS distances"
    sampled = "" if len(measured) == len(pairs) else f", {len(measured)} of {len(pairs)} pairs sampled"
    ok = growth <= allowed
    messages = () if ok else (f"sequence {where[1]}: a token of saved state {where[0]} lies {growth:.1e} outside "
                              f"the hull of saved state {where[0] - 1}",)
    return Check("hull", claim, "passed" if ok else "failed",
                 f"largest distance of a token outside the previous hull ({how}{sampled}): {growth:.1e}",
                 f"≤ {allowed:.1e}", messages, {"growth": growth, "pairs": float(len(measured))})


def _rescaled_V(field: Field) -> Tensor | None:
    """V of the 2023 paper's field (an SA rule, scores Rescaled(Bilinear(A ≻ 0), V), value V, flat), else None."""
    if not (isinstance(field.scores, Rescaled) and field.manifold.euclidean and field.value is not None
            and particle_model(field.rule) == "SA" and type(field.scores.scores) is Bilinear):
        return None
    V, inner = _cpu(field.value), _cpu(field.scores.scores.A)
    if not torch.equal(_cpu(field.scores.V), V):
        return None
    if inner is not None and (inner.dim() != 2 or not torch.equal(inner, inner.T)
                              or float(torch.linalg.eigvalsh(inner).min()) <= 0):
        return None  # the theorems assume QᵀK symmetric positive definite
    return V


def _boundary_distance(points: np.ndarray) -> np.ndarray:
    """(n,) distance of each point to the boundary of their convex hull, taken in their affine hull (a flat
    configuration is measured in the dimension it spans: a segment's boundary is its two ends)."""
    centre = points.mean(0)
    x = points - centre
    _, sv, vt = np.linalg.svd(x, full_matrices=False)
    rank = int((sv > 1e-9 * max(float(sv[0]) if len(sv) else 0.0, 1e-300)).sum())
    if rank == 0:
        return np.zeros(len(points))  # one point: it is the whole polytope
    y = x @ vt[:rank].T
    if rank == 1:
        return np.minimum(y[:, 0] - y[:, 0].min(), y[:, 0].max() - y[:, 0])
    from scipy.spatial import ConvexHull

    eq = ConvexHull(y).equations  # a·y + b ≤ 0 inside, a unit
    return np.clip(-(y @ eq[:, :-1].T + eq[:, -1]), 0, None).min(1)


def _polytope(Z: Tensor, field: Field, tol: float, settled: Tensor, slow: Tensor) -> Check:
    claim = CLAIMS["polytope"]
    V = _rescaled_V(field)
    if V is None or not torch.equal(V, torch.eye(V.shape[0], dtype=V.dtype)):
        return Check("polytope", claim, "not tested", "not the 2023 paper's field with V = I and A ≻ 0", "")
    distances, messages, judged = [], [], 0
    for b in range(Z.shape[1]):
        final = Z[-1, b].numpy()
        dist = float(np.minimum(_boundary_distance(final), np.linalg.norm(final, axis=1)).max())
        if (dist <= tol and bool(slow[b])) or bool(settled[b]):  # still moving: not judged yet
            judged += 1
            distances.append(dist)
            if dist > tol:
                messages.append(f"sequence {b}: at rest with a token {dist:.2e} from 0 and from the boundary of K")
    if not distances:
        return Check("polytope", claim, "not tested", "every sequence still moving (faster than tol)", f"≤ {tol:.1e}")
    worst = max(distances)
    return Check("polytope", claim, "failed" if messages else "passed",
                 f"farthest token from 0 and ∂K: {worst:.1e} ({judged} of {Z.shape[1]} sequence(s) judged; "
                 "the others still moving)", f"≤ {tol:.1e}", tuple(messages),
                 {"distance": worst, "judged": float(judged)})


def _dominant(V: Tensor) -> Tensor | None:
    """The left eigenvector of V's simple positive dominant eigenvalue, unit length, or None."""
    values, vectors = np.linalg.eig(_cpu(V).numpy().T)
    order = np.argsort(-values.real)
    top = values[order[0]]
    if abs(top.imag) > 1e-12 or top.real <= 0 or (len(values) > 1 and values[order[1]].real >= top.real - 1e-9):
        return None
    phi = vectors[:, order[0]].real
    return torch.from_numpy(phi / np.linalg.norm(phi))


def _hyperplanes(Z: Tensor, field: Field, tol: float, settled: Tensor, velocity: Tensor) -> Check:
    claim = CLAIMS["hyperplanes"]
    V = _rescaled_V(field)
    phi = None if V is None or Z.shape[-1] < 2 else _dominant(V)
    if phi is None:
        return Check("hyperplanes", claim, "not tested",
                     "not the 2023 paper's field with such a V (d ≥ 2)", "")
    coordinates = Z[-1] @ phi  # (batch, n)
    counts = cluster_counts(coordinates.unsqueeze(-1), tol)
    slow = (velocity @ phi).abs().amax(-1) <= tol  # the coordinates ⟨φ, z_i⟩ have slowed (along them may move)
    judged = ((counts <= 3) & slow) | settled  # still moving: not judged yet
    if not bool(judged.any()):
        return Check("hyperplanes", claim, "not tested", "every sequence still moving (faster than tol)", "≤ 3")
    worst = int(counts[judged].max())
    messages = tuple(f"sequence {b}: at rest with {int(counts[b])} distinct values of ⟨φ, z_i⟩"
                     for b in torch.nonzero(settled & (counts > 3)).flatten().tolist())
    return Check("hyperplanes", claim, "failed" if messages else "passed",
                 f"at most {worst} value(s) of ⟨φ, z_i⟩ ({int(judged.sum())} of {len(counts)} sequence(s) judged)",
                 "≤ 3", messages, {"hyperplanes": float(worst)})


def _boolean(solution: Solution, field: Field, settled: Tensor, slow: Tensor) -> Check:
    claim = CLAIMS["boolean"]
    V = _rescaled_V(field)
    if V is None or V.shape != (1, 1) or float(V[0, 0]) <= 0:
        return Check("boolean", claim, "not tested", "not the 2023 paper's field with d = 1 and V > 0", "")
    if solution.attention is None:
        return Check("boolean", claim, "not tested", "no attention matrices saved (Save(attention=True))", "")
    P = solution.attention[-1].detach().cpu().to(torch.float64)
    P = P.unsqueeze(0) if P.dim() == 2 else P
    gap = torch.minimum(P, 1 - P).amax((-1, -2))  # (batch,) the farthest entry from {0, 1}
    allowed = 1e-3
    judged = ((gap <= allowed) & slow) | settled  # still moving: not judged yet
    if not bool(judged.any()):
        return Check("boolean", claim, "not tested", "every sequence still moving (faster than tol)",
                     f"≤ {allowed:.0e}")
    worst = float(gap[judged].max())
    messages = tuple(f"sequence {b}: at rest with an attention weight {float(gap[b]):.2e} from 0 and 1"
                     for b in torch.nonzero(judged & (gap > allowed)).flatten().tolist())
    return Check("boolean", claim, "failed" if messages else "passed",
                 f"largest distance of a weight to {{0, 1}}: {worst:.1e} ({int(judged.sum())} of {len(gap)} judged)",
                 f"≤ {allowed:.0e}", messages, {"gap": worst})


def _sphere_beta(field: Field) -> Tensor | None:
    if not (field.manifold.unit_sphere and _identity_value(field)
            and particle_model(field.rule) in ("SA", "USA")):
        return None
    beta = _scaled_identity(field)
    if beta is None or bool((beta * float(field.rule.beta) < 0).any()):
        return None  # the claims are for β ≥ 0
    return beta * float(field.rule.beta)


def _single_cluster(Z: Tensor, field: Field, tol: float, settled: Tensor) -> Check:
    claim = CLAIMS["single_cluster"]
    beta = _sphere_beta(field)
    if beta is None:
        return Check("single_cluster", claim, "not tested", "not SA or USA on the sphere with A = β I", "1 cluster")
    d = Z.shape[-1]
    beta = beta.expand(Z.shape[1]) if beta.dim() == 0 else beta
    applies = (beta == 0) | torch.tensor(d >= 3)
    counts = cluster_counts(Z[-1], tol)
    single = counts == 1
    judged = applies & (single | settled)  # several clusters still moving: asymptotic claim, not yet judged
    if not bool(judged.any()):
        return Check("single_cluster", claim, "not tested",
                     "no sequence it applies to reached one cluster or came to rest within the horizon "
                     "(several clusters still moving: metastable, or a short horizon)", "1 cluster")
    bad = judged & ~single
    messages = tuple(f"sequence {b}: {int(counts[b])} clusters, at rest (β = {float(beta[b]):g})"
                     for b in torch.nonzero(bad).flatten().tolist()[:20])
    frac = float(single[judged].double().mean())
    return Check("single_cluster", claim, "failed" if messages else "passed",
                 f"{int(judged.sum())} sequence(s) judged, {frac:.0%} in one cluster "
                 f"({int((applies & ~judged).sum())} in several clusters still moving, metastable: not judged)",
                 "1 cluster", messages,
                 {"single": frac, "judged": float(judged.sum())})


def _energy(Z: Tensor, field: Field, double: bool) -> Check:
    claim = CLAIMS["energy"]
    beta = _sphere_beta(field)
    if beta is None:
        return Check("energy", claim, "not tested", "not SA or USA on the sphere with A = β I", "non-decreasing")
    e = energy(Z, beta)  # (saved, batch)
    drop = ((e[:-1] - e[1:]) / e[:-1].abs().clamp(min=1e-300)).amax() if Z.shape[0] > 1 else torch.tensor(0.0)
    drop = float(drop)
    allowed = 1e-9 if double else 1e-5
    ok = drop <= allowed
    return Check("energy", claim, "passed" if ok else "failed",
                 f"largest relative decrease between saved states: {max(drop, 0.0):.1e}", f"≤ {allowed:.0e}",
                 () if ok else (f"all sequences: E_β decreased by {drop:.1e} (relative)",), {"decrease": drop})
