"""`check_theorem`: numerical evidence for Theorem 2.1 on a hardmax trajectory, as a `TheoremReport`.

Each check can fail (the tests feed it doctored trajectories); the tolerances are stated in
`check_theorem` and derived in the comments next to the code that uses them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from hardmax._numba import numba
from hardmax.dynamics import Solution
from hardmax.dynamics.solvers import euler_update, layer_step
from hardmax.tables import markdown_table
from hardmax.theory.geometry import HullTest, components, hull_distance, project_origin
from hardmax.theory.leaders import (
    leader_history,
    scaled_path,
    stable_from,
)
from hardmax.theory.support import support_growth

__all__ = ["Check", "Status", "TheoremReport", "check_theorem"]

#: The outcome of a `Check`: "not tested" when there was nothing to measure (never reported as passed).
Status = Literal["passed", "failed", "not tested"]


@dataclass(frozen=True)
class Check:
    """One claim of Theorem 2.1 checked on a trajectory.

    Attributes:
        name: short key ("limits", "leaders_fixed", "hull", "rate", "vertices", "norms").
        claim: what the theorem says, in words.
        status: "passed", "failed", or "not tested" (nothing to measure: never reported as passed).
        value: what was measured, in words. expected: what passing means.
        messages: one line per failed sequence ("sequence b: ..."); empty unless failed.
        numbers: the measured quantities (aggregated over the batch), for programs.
    """

    name: str
    claim: str
    status: Status
    value: str
    expected: str
    messages: tuple[str, ...] = ()
    numbers: Mapping[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether the check passed ("not tested" is not passed)."""
        return self.status == "passed"


@dataclass(frozen=True)
class TheoremReport:
    """Numerical evidence for Theorem 2.1 on a trajectory (`check_theorem`), aggregated over a batch.

    Attributes:
        checks: the named checks, in the theorem's order (`report["limits"]`, ...).
        sequences, layers: the size of what was checked. atol: the largest same-point tolerance used.
        hypotheses_ok: whether the initial tokens are nonzero and distinct (informative: the theorem
            assumes it; tokens that start at 0 are left out of the limits check).
    """

    checks: tuple[Check, ...]
    sequences: int
    layers: int
    atol: float
    hypotheses_ok: bool
    passed: bool = field(init=False)  # no check failed ("not tested" does not fail, and is shown as such)

    def __post_init__(self):
        object.__setattr__(self, "passed", all(c.status != "failed" for c in self.checks))

    def __getitem__(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(f"no check named {name!r}; checks: {', '.join(c.name for c in self.checks)}")

    @property
    def failures(self) -> tuple[str, ...]:
        """One line per failed (sequence, check)."""
        return tuple(m for c in self.checks for m in c.messages)

    @property
    def failed_sequences(self) -> tuple[int, ...]:
        """The indices of the sequences that failed a check, sorted."""
        return tuple(sorted({int(m.split(":")[0].split()[1]) for m in self.failures}))

    def to_dict(self) -> dict:
        """The report as plain JSON values, its verdict included (`from_dict` reads it back)."""
        from hardmax.io import to_jsonable

        return {"passed": self.passed, "sequences": self.sequences, "layers": self.layers,
                "atol": to_jsonable(self.atol), "hypotheses_ok": self.hypotheses_ok,
                "checks": [to_jsonable(dataclasses.asdict(c)) for c in self.checks]}

    @classmethod
    def from_dict(cls, record: dict) -> TheoremReport:
        """The report a `to_dict` record describes (numbers JSON could not hold, NaN or inf, come back NaN)."""
        def number(v):
            return math.nan if v is None else float(v)

        checks = tuple(Check(name=c["name"], claim=c["claim"], status=c["status"], value=c["value"],
                             expected=c["expected"], messages=tuple(c["messages"]),
                             numbers={k: number(v) for k, v in c["numbers"].items()}) for c in record["checks"])
        return cls(checks=checks, sequences=int(record["sequences"]), layers=int(record["layers"]),
                   atol=number(record["atol"]), hypotheses_ok=bool(record["hypotheses_ok"]))

    def table(self) -> str:
        """A markdown table: check, value, expected, status."""
        lines = [f"Theorem 2.1 on {self.sequences} sequence(s), {self.layers} layers, atol {self.atol:.1e}: "
                 f"{'PASSED' if self.passed else 'FAILED'}",
                 ""]
        rows = [(f"{i}. {c.claim}", c.value, c.expected, c.status) for i, c in enumerate(self.checks, start=1)]
        rows.append(("hypotheses: nonzero distinct tokens", "yes" if self.hypotheses_ok else "no", "(informative)",
                     "-"))
        lines += markdown_table(("check", "value", "expected", "status"), rows)
        lines += [f"- {f}" for f in self.failures]
        return "\n".join(lines)


_RATE_RTOL = 1e-3       # allowed |ratio·(1+α) − 1| for a follower of a fixed target
_RATE_FLOOR = 1e4       # rate samples need moves ‖Δ‖ ≥ _RATE_FLOOR · eps · R, far above rounding
_SUPPORT_DIRECTIONS = 32
_HULL_BLOCK = 32  # layers tested at once against the facets of a kept hull through the vertices' positions then


@dataclass
class _Seq:
    """Per-sequence results of `check_theorem` (internal)."""

    atol: float
    checked: int = 0
    off: int = 0
    excess: float = 0.0
    drift: float = 0.0
    last_leader: int = 0
    lost: int = 0
    hull: float = 0.0
    log_ratio: float = 0.0
    log_expected: float = 0.0
    rate_error: float = 0.0
    samples: int = 0
    leaders: int = 0
    defects: int = 0
    norm_decrease: float = 0.0
    hypotheses: bool = True

    def failures(self, last_allowed: int, sqrt_a: float) -> dict[str, str]:
        """Check name -> what went wrong, for the checks this sequence fails."""
        found: dict[str, str] = {}
        if self.off > 0:
            found["limits"] = f"{self.off} token(s) end off vertices ∪ S (worst {self.excess:.3g} × tol)"
        if self.drift > self.atol:
            found["leaders_fixed"] = f"a leader drifts by {self.drift:.3g} after its leader layer"
        elif self.lost > 0:
            found["leaders_fixed"] = f"{self.lost} token(s) stop leading"
        elif self.last_leader > last_allowed:
            found["leaders_fixed"] = f"a leader emerges at layer {self.last_leader} (> {last_allowed})"
        if self.hull > self.atol:
            found["hull"] = f"the hull grows by {self.hull:.3g}"
        if self.samples > 0 and self.rate_error > _RATE_RTOL:
            found["rate"] = f"follower rate off by {self.rate_error:.3g} (relative)"
        if self.defects > 0:
            found["vertices"] = f"{self.defects} leader(s) not at distinct vertices of K"
        if self.norm_decrease > self.atol * sqrt_a:
            found["norms"] = f"an A-norm decreases by {self.norm_decrease:.3g}"
        return found


def _dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Σ_c x[..., c] y[..., c]: (..., d), (..., d) -> (...), summed over the coordinates in order, one column at a
    time (a reduction over a short last axis, `einsum`'s or `np.linalg.norm`'s, is 4x slower at d = 2, 3)."""
    total = x[..., 0] * y[..., 0]
    for c in range(1, x.shape[-1]):
        total += x[..., c] * y[..., c]
    return total


def _lengths(x: np.ndarray) -> np.ndarray:
    """Euclidean lengths along the last axis: (..., d) -> (...)."""
    return np.sqrt(_dot(x, x))


def _settle_layers(T: np.ndarray, followers: np.ndarray, atol: float) -> np.ndarray:
    """First layer from which each follower's attention target stayed within atol of its last one.

    T: (K+1, n, d) targets mean_{C_i^k} z_j^k. Returns (f,) int in [0, K−1] (0 when K ≤ 1).
    """
    K = T.shape[0] - 1
    if K <= 1:
        return np.zeros(len(followers), dtype=np.int64)
    changed = (_lengths(T[:K] - T[K - 1]) > atol)[:, followers]  # (K, f)
    return np.where(changed.any(0), K - np.argmax(changed[::-1], axis=0), 0)


def _limits_check(out: _Seq, Z, followers, settle, V, A, alpha, R, diam) -> None:
    """(1): certify z_i^K ∈ vertices(K) ∪ S within tol_i for every follower i.

    tol_i = atol (1 + 1/min α) + min(2 ‖z_i^K − z_i^{K−1}‖ / α_{K−1}, diam Π_{k ≥ settle_i} 1/(1+α_k)):
    the token's own measured convergence, capped by the geometric bound from the layer settle_i its
    target stopped changing. With a fixed target x*, z^K − x* = (z^{K−1} − x*)/(1+α), so ‖z^K − x*‖ is
    exactly ‖z^K − z^{K−1}‖/α (twice that for margin); target jitter ≤ atol per layer adds at most
    atol Σ_k (1+α)^{−k} = atol (1+α)/α. A token within atol of the origin is never certified (the
    A-norm never decreases, so no nonzero token converges to 0); a token that starts at 0 is outside
    the theorem and not certified either way (the hypotheses row reports it).
    The point is certified through the face exposed by A z: F = {v ∈ V : ⟨A z, v⟩ ≥ max − τ}, with
    τ = 2 ‖A‖ R tol_i the score error of a point tol_i away. Either z is within tol_i of a vertex, or
    p = A-projection of 0 onto aff(F) lies in conv(F) (to atol) and within tol_i of z.
    """
    K, atol = len(alpha), out.atol
    out.checked = Z.shape[1]
    if len(followers) == 0 or K == 0:
        return
    if len(V) == 0:
        out.off, out.excess = len(followers), math.inf
        return
    last_step = np.linalg.norm(Z[K, followers] - Z[K - 1, followers], axis=-1)
    log_decay = np.append(np.cumsum(np.log1p(alpha)[::-1])[::-1], 0.0)  # [j] = Σ_{k ≥ j} log(1+α_k)
    remaining = np.minimum(2 * last_step / alpha[K - 1], diam * np.exp(-log_decay[settle]))
    tol = atol * (1 + 1 / alpha.min()) + remaining
    z = Z[K, followers]
    excess = np.linalg.norm(z[:, None, :] - V[None], axis=-1).min(axis=1) / tol
    a_norm = float(np.linalg.eigvalsh(A).max())
    cache: dict[tuple[int, ...], tuple[np.ndarray, float]] = {}
    for t in np.nonzero(excess > 1)[0]:
        s = V @ (A @ z[t])
        face = tuple(np.nonzero(s >= s.max() - 2 * a_norm * R * tol[t])[0])
        if len(face) < 2:
            continue
        if face not in cache:
            p = project_origin(V[list(face)], A, atol)
            cache[face] = (p, hull_distance(p, V[list(face)]))
        p, outside = cache[face]
        if outside <= atol:
            excess[t] = min(excess[t], np.linalg.norm(z[t] - p) / tol[t])
    started_zero = np.linalg.norm(Z[0, followers], axis=-1) <= atol
    excess[(np.linalg.norm(z, axis=-1) <= atol) & ~started_zero] = math.inf  # at the origin: never a limit
    excess[started_zero] = 0.0  # a zero initial token is outside the theorem (the hypotheses row says so)
    out.off = int((excess > 1).sum())
    out.excess = float(excess.max())


def _hull_check(out: _Seq, Z, T, A, alpha, exact: bool, steps: np.ndarray) -> None:
    """(3): conv(Z^{k+1}) ⊆ conv(Z^k) for every k. Z, T: (L, n, d) positions and snapshot targets; steps: (L − 1, n)
    each token's move ‖z^{k+1} − z^k‖.

    A token that did not move is in conv(Z^k). A moved token whose step is the layer's own step towards its
    snapshot target T^k (a mean of tokens of Z^k, computed from the positions, hence a point of conv(Z^k)), within
    slack = 1e-3 atol, ‖z^{k+1} − (z^k + γ_k (T^k − z^k))‖ ≤ slack with a convex step (0 ≤ γ_k ≤ 1), is within
    that residual of a point of conv(Z^k): the witness bounds its distance to the hull, hence its share of the
    support growth along every direction, and the residual enters the growth reported. A layer whose moved tokens
    are all witnessed is certified so; on any other layer (a token off its own step: a damaged trajectory, α < 0,
    another engine's rounding):
    - the support function h_k(c) = max_j ⟨c, z_j^k⟩ may not grow, h_{k+1}(c) ≤ h_k(c) + atol‖c‖, for 32 fixed
      random directions c and for the n directions c = A z_i^k (those that decide attention), any d;
    - with `exact`: every token the witness leaves lies within atol of conv(Z^k), from qhull's facet inequalities
      in the affine hull of Z^k. (A facet distance does not bound the support growth beyond a sharp edge, so the
      two are not redundant.)
    """
    L, n, d = Z.shape
    slack = 1e-3 * out.atol
    gamma = layer_step(alpha)[:, None, None]
    residual = _lengths(Z[1:] - euler_update(Z[:-1], T[:-1], gamma))  # (L − 1, n), every layer at once
    # a convex step only (0 ≤ γ_k ≤ 1, i.e. α_k ≥ 0): with α < 0 the step leaves conv(Z^k) and certifies nothing
    witness = (residual <= slack) & ((gamma >= 0) & (gamma <= 1))[:, :, 0]
    # a certified token is within its residual of conv(Z^k): that bound enters the growth reported
    growth = float(residual[witness & (steps > 0)].max(initial=0.0))
    check = (steps > 0) & ~witness  # (L − 1, n) the moved tokens the witness leaves
    layers = np.nonzero(check.any(axis=1))[0]  # the layers measured (a converged or a witnessed one is not)
    C = np.random.default_rng(0).normal(size=(_SUPPORT_DIRECTIONS, d))
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    growth = max(growth, support_growth(Z, layers, A, C, threads=torch.get_num_threads()))
    if exact and len(layers):
        # conv(Z^{k+1}) = conv(Z^k) when every point stayed inside and the hull's vertices did not move: the hull is
        # then kept, not rebuilt (a converging run changes its hull at a few layers). Up to 1e-3 atol: points
        # converging onto the boundary stay "inside" to rounding, and vertices that drift by less than that in all
        # since the hull was built (followers converging onto a leader at a corner) leave it as it was; the kept
        # hull then differs from conv(Z^k) by less than a thousandth of the tolerance the growth is judged by.
        # A full-dimensional hull (d = 2, 3) whose vertices moved is not rebuilt either while its facets, drawn
        # through the vertices' current positions, still bound a convex polytope holding every moved point: that
        # polytope is conv(vertices now) ⊆ conv(Z^k), so its violation bounds the true one from above; a point
        # outside it (by more than the slack) is measured again against a new hull of Z^k.
        travel = np.zeros((L, n))
        np.cumsum(steps, axis=0, out=travel[1:])  # travel[k]: each token's path length before layer k
        i, test, base, size = 0, None, 0, _HULL_BLOCK
        while i < len(layers):
            k = int(layers[i])
            if test is None:  # a hull of Z^k, and layer k measured against it exactly
                test, base = HullTest.of(Z[k], out.atol), k
                violation = test.outside(Z[k + 1, check[k]])
                growth = max(growth, violation)
                i += 1
                if violation > slack:
                    test = None
            else:  # the kept hull tests a block of layers at once (the block doubles while the hull holds)
                block = layers[i:i + size]
                tested = check[block]
                # the vertices' drift since the hull was built, before each layer of the block
                before = travel[block][:, test.vertices] - travel[base, test.vertices]
                kept = before.max(axis=1) <= slack  # a prefix of the block: the drift only grows
                violation = np.full(len(block), np.inf)
                if kept.any():  # against the hull as it was built
                    violation[kept] = test.violations(Z[block[kept] + 1], tested[kept])
                if test.simplices is not None and not kept.all():  # full-dimensional: its facets through the
                    rest = ~kept  # vertices' positions now, where they moved (lower-dimensional: rebuilt)
                    violation[rest] = test.through_violations(Z[block[rest]], Z[block[rest] + 1], tested[rest])
                bad = np.nonzero(violation > slack)[0]
                j = int(bad[0]) if len(bad) else len(block)
                if j:
                    growth = max(growth, float(violation[:j].max()))
                i += j
                size = min(2 * size, _HULL_BLOCK) if not len(bad) else 2
                if len(bad):  # layer block[j] is measured again against a new hull of its own
                    test = None
    out.hull = growth


def _rate_check(out: _Seq, D, steps, T, followers, alpha, floor: float) -> None:
    """(4): a follower whose target x* (the mean of its attention set) is fixed obeys exactly
    z^{k+1} − x* = (1 − γ_k)(z^k − x*), γ_k = α_k/(1+α_k), so its moves Δ_k = z^{k+1} − z^k = −γ_k (z^k − x*)
    keep their direction and shrink by Δ_{k+1} = (γ_{k+1}/γ_k)(1 − γ_k) Δ_k (1/(1+α) for a constant α).

    Measured on the moves themselves, not against a target recomputed from the positions: a follower
    converging to a point on the boundary of a face is, after enough layers, closer to its face's other
    vertices' level set than a snapshot of positions can resolve, and a snapshot target would then be
    wrong although the engine (which carries the follower as an offset from its fixed target) is right.
    A sample is a pair of consecutive moves of a follower whose snapshot targets T^k, T^{k+1} agree to atol
    and which point the same way (cosine ≥ 1 − 1e-6): a fixed target, whatever its value, since only the
    moves enter the ratio. ‖Δ_{k+1}‖ ≥ floor = 1e4·eps·R (eps of the trajectory's dtype), so that rounding
    (≈ eps R) stays below 1e-3 of the moves compared; not atol, which in float32 (≈ 4e-3 R) would leave
    no sample at all.
    """
    K = len(alpha)
    if K < 2 or len(followers) == 0:
        return
    gamma = layer_step(alpha)  # the kernel below is given γ_k, never α
    samples, log_ratio, log_expected, error = _rate_samples(D, steps, T, np.asarray(followers, np.int64), gamma,
                                                            float(out.atol), float(floor))
    if samples:
        out.samples, out.log_ratio, out.log_expected, out.rate_error = int(samples), log_ratio, log_expected, error


@numba.njit(cache=True, error_model="numpy")
def _rate_samples(D, steps, T, followers, gamma, atol, floor):
    """The rate samples in one pass over the followers' moves, no temporaries: D (K, n, d) the moves Δ_k,
    steps (K, n) their lengths, T (K + 1, n, d) the snapshot targets, followers (f,), gamma (K,) γ_k.
    Returns (samples, Σ log ratio, Σ log expected, max |ratio / expected − 1|) (0 samples: zeros).
    Its reference, by whole-array NumPy operations, is `rate_samples` in tests/reference.py."""
    K, _, d = D.shape
    samples = 0
    log_ratio = 0.0
    log_expected = 0.0
    error = 0.0
    for k in range(1, K):
        expected = (gamma[k] / gamma[k - 1]) * (1 - gamma[k - 1])
        count = 0
        for i in followers:
            size = steps[k, i]
            if not size >= floor:
                continue
            before = steps[k - 1, i]
            dot = D[k, i, 0] * D[k - 1, i, 0]
            change = (T[k, i, 0] - T[k - 1, i, 0]) * (T[k, i, 0] - T[k - 1, i, 0])
            for c in range(1, d):
                dot += D[k, i, c] * D[k - 1, i, c]
                change += (T[k, i, c] - T[k - 1, i, c]) * (T[k, i, c] - T[k - 1, i, c])
            if np.sqrt(change) <= atol and dot >= (1 - 1e-6) * size * before:
                ratio = size / (before if before > 0 else 1.0)
                count += 1
                log_ratio += np.log(ratio)
                off = abs(ratio / expected - 1)
                if off != off or off > error:  # NaN stays (as NumPy's max keeps it): never "passed"
                    error = off
        if count:
            samples += count
            log_expected += count * np.log(expected)
    return samples, log_ratio, log_expected, error


def _check_sequence(Z, T, leaders, alpha, A, atol: float, exact: bool, eps: float) -> _Seq:
    """All checks on one sequence: Z (L, n, d) real tokens, T (L, n, d) targets, leaders (L, n) bool."""
    out = _Seq(atol=atol)
    L, n, d = Z.shape
    K = L - 1
    if n == 0:
        return out
    norms0 = np.linalg.norm(Z[0], axis=1)
    R, diam = float(norms0.max()), float(_lengths(Z[0][:, None] - Z[0][None]).max())
    out.hypotheses = bool((norms0 > 0).all() and len(np.unique(Z[0], axis=0)) == n)
    final = leaders[K]
    # (2) final leaders stay put from their leader layer on; nobody stops leading.
    first = stable_from(torch.as_tensor(leaders)).numpy()
    for i in np.nonzero(final)[0]:
        out.drift = max(out.drift, float(np.linalg.norm(Z[first[i]:, i] - Z[first[i], i], axis=-1).max()))
    out.last_leader = int(first[final].max(initial=0))
    out.lost = int((leaders.any(0) & ~final).sum())
    # (5) distinct leaders at distinct points, each the strict maximiser of its own ⟨A v, ·⟩ over V — an
    # exposed point, hence a vertex, of K = conv(V).
    idx = np.nonzero(final)[0]
    groups = components(Z[K, idx], atol)
    V = np.array([Z[K, idx[groups == g][0]] for g in range(groups.max(initial=-1) + 1)]).reshape(-1, d)
    out.leaders = len(V)
    for g in range(len(V)):
        # Leaders that started apart but end at one point. (Tokens closer than atol from the start are
        # one point to the engine too: they tie, merge and lead together.)
        start = Z[0, idx[groups == g]]
        out.defects += int(np.linalg.norm(start - start[0], axis=1).max() > 2 * atol)
    if len(V) > 1:
        s = (V @ A) @ V.T
        rivals = np.where(np.eye(len(V), dtype=bool), -np.inf, s).max(axis=1)
        out.defects += int((np.diag(s) - rivals <= 0).sum())
    followers = np.nonzero(~final)[0]
    settle = _settle_layers(T, followers, atol)
    _limits_check(out, Z, followers, settle, V, A, alpha, R, diam)
    D = Z[1:] - Z[:-1]  # (K, n, d) each token's moves, and their lengths: for the hull and the rate checks
    steps = _lengths(D)
    _hull_check(out, Z, T, A, alpha, exact, steps)
    _rate_check(out, D, steps, T, followers, alpha, _RATE_FLOOR * eps * R)
    a_norms = np.sqrt(np.maximum(_dot(Z if np.array_equal(A, np.eye(d)) else Z @ A, Z), 0.0))
    out.norm_decrease = float((a_norms[:-1] - a_norms[1:]).max(initial=0.0))
    return out


def check_theorem(trajectory: Solution, *, atol: float | None = None,
                  exact_hull: bool | None = None) -> TheoremReport:
    """Check Theorem 2.1 numerically on a hardmax trajectory; masked tokens are ignored.

    Checks, per sequence (K = layers, leaders as in `leader_layers`, V = positions of the leaders at
    layer K, merged within atol, and K = conv(V)):
      1. every token ends within tol_i of a vertex of K or a point of S, where
         tol_i = atol (1 + 1/min α) + min(2 ‖z_i^K − z_i^{K−1}‖ / α_{K−1}, diam Π_{k≥settle_i} 1/(1+α_k))
         is the unfinished part of the convergence measured on the token itself, capped by the geometric
         bound from the layer its target settled (a token at the origin is never certified). Points of S
         are certified through the face of K exposed by A z_i (A-projection of 0 onto its affine hull,
         inside the face), without enumerating faces;
      2. leaders do not move from their leader layer on (drift ≤ atol), no token stops leading, and the
         leader set is unchanged over the last ceil(K/4) layers;
      3. the hull shrinks. Verified: a moved token whose step is the layer's convex step towards its snapshot
         target (a mean of tokens of Z^k) is within its residual of conv(Z^k); on a layer with a moved token
         that is not, the support function max_j ⟨c, z_j^k⟩ never grows by more than atol ‖c‖ along 32 fixed
         random directions and the n directions A z_i^k, any d, and, when `exact_hull`, every such z_j^{k+1} is
         within atol of conv(Z^k) by qhull's facet inequalities;
      4. on settled layers, ‖z^{k+1} − x*‖ / ‖z^k − x*‖ = 1/(1+α_k) to 1e-3 for followers (x* = target);
         "not tested" (never "passed") when no follower has a settled step far enough above atol;
      5. distinct leaders sit at distinct points, each the strict maximiser of ⟨A v, ·⟩ over V;
      +  ‖z_i^k‖_A never decreases by more than atol ‖A‖^½ (why the origin is never a limit).

    Args:
        trajectory: hardmax `Solution` from `simulate`, unbatched or batched.
        atol: same-point distance, default sqrt(2 tie_rtol cond(A))·max_i ‖z_i^0‖ per sequence (the engine's
            resolution: 1.7e-7 R in float64 with A = I).
        exact_hull: qhull containment at every layer; default when d ≤ 3, or d ≤ 5 and n ≤ 64.

    Returns:
        `TheoremReport`; `.passed`, `.failed_sequences`, `.table()`.

    Raises:
        ValueError: for a softmax trajectory (the theorem is about hardmax attention).

    Paper: Alcalde, Fantuzzi, Zuazua (2024), Theorem 2.1. The theorem is about exact arithmetic; the engine
    decides ties to tie_rtol, which is what `atol` accounts for. In float32 that resolution is coarse
    (atol ≈ 4e-3 R), and limits on exact ties (points of S that are not vertices) can end measurably off S.

    Example:

    >>> import torch, hardmax
    >>> run = hardmax.simulate(hardmax.figure2_configurations()["square"], alpha=0.5, layers=30)
    >>> report = hardmax.check_theorem(run)
    >>> report.passed
    True
    """
    scaled = scaled_path(trajectory, atol)
    trajectory, path, real, same = scaled.trajectory, scaled.path, scaled.real, scaled.same
    exponents, a_exponent = scaled.exponents, scaled.a_exponent
    L, B, n, d = path.shape
    leaders, targets = leader_history(trajectory, same)
    if exact_hull is None:
        exact_hull = d <= 3 or (d <= 5 and n <= 64)
    Z_all = path.detach().cpu().to(torch.float64).numpy()
    T_all = targets.detach().cpu().to(torch.float64).numpy()
    lead_all, real_np = leaders.cpu().numpy(), real.cpu().numpy()
    A = trajectory.A.detach().cpu().to(torch.float64).numpy()
    alpha = trajectory.alpha.detach().cpu().to(torch.float64).numpy()
    window = math.ceil((L - 1) / 4)
    sqrt_a = math.ldexp(math.sqrt(float(np.linalg.eigvalsh(A).max())), a_exponent // 2)  # of the A given
    seqs, failures = [], []
    for b in range(B):
        idx = np.nonzero(real_np[b])[0]
        seq = _check_sequence(Z_all[:, b, idx], T_all[:, b, idx], lead_all[:, b, idx], alpha, A,
                              float(same[b]), exact_hull, torch.finfo(path.dtype).eps)
        if exponents is not None:  # distances back in the trajectory's own units (ratios are scale-free)
            e = int(exponents[b])
            seq.atol, seq.drift, seq.hull = (math.ldexp(v, e) for v in (seq.atol, seq.drift, seq.hull))
            seq.norm_decrease = math.ldexp(seq.norm_decrease, e + a_exponent // 2)
        seqs.append(seq)
        failures.append(seq.failures(L - 1 - window, sqrt_a))
    samples = sum(s.samples for s in seqs)
    expected_rate = float(np.exp(-np.log1p(alpha).mean())) if len(alpha) else math.nan

    def messages(name: str) -> tuple[str, ...]:
        return tuple(f"sequence {b}: {f[name]}" for b, f in enumerate(failures) if name in f)

    def check(name: str, claim: str, value: str, expected: str, numbers: dict, tested: bool = True) -> Check:
        msgs = messages(name)
        broken = sorted(k for k, v in numbers.items() if tested and isinstance(v, float) and math.isnan(v))
        if broken:  # a measurement that came out NaN checked nothing: never reported as passed
            msgs += (f"{', '.join(broken)} measured NaN: not checkable on this trajectory",)
        status: Status = "failed" if msgs else "passed" if tested else "not tested"
        return Check(name, claim, status, value, expected, msgs, numbers)

    off, checked, excess = sum(s.off for s in seqs), sum(s.checked for s in seqs), max(s.excess for s in seqs)
    drift, last, lost = max(s.drift for s in seqs), max(s.last_leader for s in seqs), sum(s.lost for s in seqs)
    growth = max(s.hull for s in seqs)
    measured = math.exp(sum(s.log_ratio for s in seqs) / samples) if samples else math.nan
    expected = math.exp(sum(s.log_expected for s in seqs) / samples) if samples else expected_rate
    rate_error = max(s.rate_error for s in seqs)
    n_leaders, defects = sum(s.leaders for s in seqs), sum(s.defects for s in seqs)
    decrease = max(s.norm_decrease for s in seqs)
    rate_value = (f"{measured:.6g} (max rel. error {rate_error:.1e}, {samples} samples)" if samples
                  else "no samples")
    checks = (
        check("limits", "tokens end on vertices of K or points of S",
              f"{off} of {checked} off (worst {excess:.2g} × tol)", "0 off",
              dict(checked=checked, off=off, excess=excess)),
        check("leaders_fixed", "leaders fixed after finitely many layers",
              f"drift {drift:.1e}, last leader layer {last}, lost {lost}",
              f"drift ≤ atol, layer ≤ {L - 1 - window}, lost 0",
              dict(drift=drift, last_leader_layer=last, lost=lost, window=window)),
        check("hull", "hull shrinks: conv(Z^{k+1}) ⊆ conv(Z^k)",
              f"growth {growth:.1e} ({'step witness, qhull, support' if exact_hull else 'step witness, support'})",
              "≤ atol",
              dict(growth=growth, exact=float(bool(exact_hull)))),
        check("rate", "follower rate per layer", rate_value, f"1/(1+α) = {expected:.6g}",
              dict(measured=measured, expected=expected, error=rate_error, samples=samples), tested=samples > 0),
        check("vertices", "leaders on distinct vertices of K", f"{n_leaders} leaders, {defects} defects",
              "0 defects", dict(leaders=n_leaders, defects=defects)),
        check("norms", "‖z_i‖_A nondecreasing", f"max decrease {decrease:.1e}", "≤ atol",
              dict(decrease=decrease)),
    )
    return TheoremReport(checks=checks, sequences=B, layers=L - 1, atol=max(s.atol for s in seqs),
                         hypotheses_ok=all(s.hypotheses for s in seqs))
