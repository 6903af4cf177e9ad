"""Theory of the hardmax dynamics: attention sets, leaders, clusters, the polytope K, the set S, Theorem 2.1.

Everything here *reads* configurations and trajectories produced by `hardmax.dynamics`; nothing here moves
tokens. Attention sets are computed with the engine's own tie rule (`dynamics.attention_weights` on
deduplicated tokens), so theory and dynamics always agree on who attends to whom. Pictures live in
`hardmax.plots`.

Theorem 2.1 (Alcalde, Fantuzzi, Zuazua 2024). Let α > 0, A symmetric positive definite, and z_1^0..z_n^0
nonzero distinct tokens. Under z_i ← z_i + α/(1+α)(mean_{j∈C_i} z_j − z_i), C_i = argmax_j ⟨A z_i, z_j⟩:
  1. every token converges;
  2. the leaders (tokens with C_i = {i}) reach, in finitely many layers, distinct vertices of a convex
     polytope K, and stay there;
  3. every other token converges to a vertex of K or to a point of S, where (the definition used here)
         S = { p_F : F a face of K (any dimension, K included), p_F ∈ F },
         p_F = argmin { ‖x‖_A : x ∈ aff(F) },   ‖x‖_A² = ⟨A x, x⟩,
     the A-norm projection of the origin onto the affine hull of F. Vertices are in S (0-faces).

Numerical conventions (why there are tolerances at all):
  * R = max_i ‖z_i^0‖ per sequence. Every later token lies in conv(Z^0), so R bounds all norms.
  * `atol` (default sqrt(eps)·R, 1.5e-8·R in float64) is the distance below which two points are the same.
    The engine ties scores within 64 eps, so a follower that has converged to its leader ends up tied with
    it and the two keep merging to the last bit; exact equality cannot tell "converged" from "distinct".
  * A token is a *leader* when every token of its attention set lies within `atol` of it (so identical
    tokens can be leaders, and a leader stays one when a converged follower sits on top of it).
  * The dynamics never reaches the origin: ‖z_i^k‖_A is nondecreasing (checked by `check_theorem`), which
    is why the origin — in S whenever 0 ∈ K and K is full-dimensional — is never a limit of nonzero tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import nnls
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import ConvexHull, QhullError, cKDTree
from torch import Tensor

from hardmax.dynamics import Trajectory, attention_weights, deduplicate, default_tie_rtol, validate_A

__all__ = [
    "Clusters",
    "Polytope",
    "TheoremReport",
    "attention_sets",
    "check_theorem",
    "figure2_configurations",
    "find_clusters",
    "find_leaders",
    "leader_layers",
    "limit_set",
    "polytope",
]

FIGURE2_ALPHA = 0.5  # step parameter of the paper's Figure 2 (A = identity)
_CHUNK_ENTRIES = 1 << 22  # attention entries (sequences × m × m) processed at once


# --------------------------------------------------------------------------------------------
# Snapshots: attention sets and leaders of one configuration.
# --------------------------------------------------------------------------------------------


def _flatten(tokens, mask) -> tuple[Tensor, Tensor, tuple[int, ...]]:
    """Tokens (..., n, d) -> (B, n, d) floating tensor, mask -> (B, n) bool, and the leading shape."""
    z = tokens if isinstance(tokens, Tensor) else torch.as_tensor(np.asarray(tokens, dtype=np.float64))
    if not z.is_floating_point():
        z = z.to(torch.float64)
    if z.dim() < 2 or z.shape[-1] == 0:
        raise ValueError(f"tokens must have shape (..., n, d) with d ≥ 1, got {tuple(z.shape)}")
    lead, (n, d) = tuple(z.shape[:-2]), z.shape[-2:]
    zb = z.reshape(-1, n, d)
    if mask is None:
        real = torch.ones(zb.shape[:2], dtype=torch.bool, device=z.device)
    else:
        m = mask if isinstance(mask, Tensor) else torch.as_tensor(np.asarray(mask))
        if m.dtype != torch.bool or tuple(m.shape) != (*lead, n):
            raise ValueError(f"mask must be a bool array of shape {(*lead, n)}, got {m.dtype} {tuple(m.shape)}")
        real = m.reshape(-1, n).to(z.device)
    return zb, real, lead


def _score_matrix(A, d: int, dtype: torch.dtype, device) -> Tensor | None:
    """A as the engine uses it: None for the identity (so scores are computed exactly as in `simulate`)."""
    A_t = validate_A(A, d, dtype, device)
    return None if torch.equal(A_t, torch.eye(d, dtype=dtype, device=device)) else A_t


def _scale(z: Tensor, real: Tensor) -> Tensor:
    """(B,) R = max ‖z_i‖ over real tokens, at least the smallest normal number."""
    norms = torch.where(real, z.norm(dim=-1), torch.zeros((), dtype=z.dtype, device=z.device))
    return norms.amax(dim=-1).clamp(min=torch.finfo(z.dtype).tiny)


def _default_atol(z: Tensor, real: Tensor, atol: float | None) -> Tensor:
    """(B,) same-point tolerance: `atol` if given, else sqrt(eps)·R per sequence."""
    if atol is not None:
        if not atol >= 0:
            raise ValueError(f"atol must be ≥ 0, got {atol}")
        return torch.full(z.shape[:1], float(atol), dtype=z.dtype, device=z.device)
    return math.sqrt(torch.finfo(z.dtype).eps) * _scale(z, real)


def _pairs(dd, values: Tensor) -> Tensor:
    """Map (B, m, m) values between distinct tokens to (B, n, n) values between original tokens."""
    n = dd.index.shape[1]
    rows = dd.expand(values)  # (B, n, m)
    return torch.gather(rows, 2, dd.index.unsqueeze(1).expand(-1, n, -1))


def _snapshot(z: Tensor, real: Tensor, A: Tensor | None, tie_rtol: float, same: Tensor):
    """Leaders (B, n) bool and attention targets mean_{j∈C_i} z_j (B, n, d) of configurations z (B, n, d)."""
    dd = deduplicate(z, real)
    # Sequences with few distinct tokens (converged layers) go together, so the m × m work stays small.
    counts = dd.index.amax(dim=1) + 1
    order = torch.argsort(counts, stable=True)
    leader = torch.empty(z.shape[:2], dtype=torch.bool, device=z.device)
    target = torch.empty_like(z)
    step = max(1, _CHUNK_ENTRIES // max(1, z.shape[1] ** 2))
    for rows in torch.split(order, step):
        m = int(counts[rows].max())
        u, w = dd.tokens[rows, :m], dd.weights[rows, :m]
        p = attention_weights(u, w, A=A, tie_rtol=tie_rtol)  # (b, m, m), the engine's tie rule
        ties = p > 0
        b, i, j = ties.nonzero(as_tuple=True)
        # Attention sets are tiny (usually one token), so measure only the pairs that are tied.
        gap = (u[b, j] - u[b, i]).norm(dim=-1)
        spread = torch.zeros(len(rows) * m, dtype=z.dtype, device=z.device)
        spread = spread.scatter_reduce(0, b * m + i, gap, reduce="amax").view(-1, m)
        lead = ties.any(-1) & (spread <= same[rows].unsqueeze(-1))
        index = dd.index[rows]
        leader[rows] = torch.gather(lead, 1, index) & real[rows]
        target[rows] = torch.gather(p @ u, 1, index.unsqueeze(-1).expand(-1, -1, z.shape[2]))
    return leader, target


def attention_sets(tokens, *, A=None, mask=None, tie_rtol: float | None = None) -> Tensor:
    """Hardmax attention sets C_i = argmax_j ⟨A z_i, z_j⟩, with the engine's tie rule.

    Args:
        tokens: (..., n, d) tokens, e.g. (n, d) or (batch, n, d); NumPy array or tensor.
        A: (d, d) symmetric positive definite, None for the identity.
        mask: (..., n) bool, True for real tokens; masked tokens neither attend nor are attended to.
        tie_rtol: tie tolerance of `dynamics.default_tie_rtol` (the default) or as passed to `simulate`.

    Returns:
        (..., n, n) bool, entry [i, j] True when j ∈ C_i. Identical tokens are in or out together; rows of
        masked tokens are all False.
    """
    z, real, lead = _flatten(tokens, mask)
    n, d = z.shape[-2:]
    A_used = _score_matrix(A, d, z.dtype, z.device)
    rtol = default_tie_rtol(z.dtype) if tie_rtol is None else tie_rtol
    dd = deduplicate(z, real)
    ties = attention_weights(dd.tokens, dd.weights, A=A_used, tie_rtol=rtol) > 0
    return _pairs(dd, ties).reshape(*lead, n, n)


def find_leaders(tokens, *, A=None, mask=None, tie_rtol: float | None = None,
                 atol: float | None = None) -> Tensor:
    """Leaders of one configuration: tokens whose attention set contains only (copies of) themselves.

        i is a leader  ⇔  C_i ⊆ { j : ‖z_j − z_i‖ ≤ atol }

    Args:
        tokens, A, mask, tie_rtol: as in `attention_sets`.
        atol: distance under which tokens count as identical; default sqrt(eps)·max_i ‖z_i‖ per sequence;
            0 gives exact identity. A follower that has converged onto its leader is, in one snapshot,
            a copy of it; `leader_layers` uses the history to tell the two apart.

    Returns:
        (..., n) bool.
    """
    z, real, lead = _flatten(tokens, mask)
    A_used = _score_matrix(A, z.shape[-1], z.dtype, z.device)
    rtol = default_tie_rtol(z.dtype) if tie_rtol is None else tie_rtol
    leader, _ = _snapshot(z, real, A_used, rtol, _default_atol(z, real, atol))
    return leader.reshape(*lead, z.shape[1])


# --------------------------------------------------------------------------------------------
# Trajectories: leader history, leader layers, clusters.
# --------------------------------------------------------------------------------------------


def _path(trajectory: Trajectory) -> tuple[Tensor, Tensor, bool]:
    """(L, B, n, d) positions, (B, n) real mask, and whether the trajectory was unbatched."""
    t = trajectory.tokens
    single = t.dim() == 3
    path = t.unsqueeze(1) if single else t
    return path, trajectory.mask.reshape(path.shape[1], path.shape[2]), single


def _history(trajectory: Trajectory, same: Tensor) -> tuple[Tensor, Tensor]:
    """Leaders (L, B, n) bool and attention targets (L, B, n, d) at every layer.

    A token is a leader at layer k when it is a snapshot leader and, unless it already led at layer k−1,
    it does not sit within `same` of a token that led at layer k−1: a follower that converges onto a
    leader becomes numerically a copy of it, but in exact arithmetic it never reaches it.
    """
    path, real, _ = _path(trajectory)
    L, B, n, d = path.shape
    A_used = _score_matrix(trajectory.A, d, path.dtype, path.device)
    # Converged sequences stop moving (to the last bit) long before the last layer: evaluate only the
    # (layer, sequence) pairs whose tokens changed, and carry the others forward.
    moved = torch.ones(L, B, dtype=torch.bool, device=path.device)
    moved[1:] = (path[1:] != path[:-1]).flatten(2).any(-1)
    todo = moved.flatten().nonzero(as_tuple=True)[0]
    flat = path.reshape(L * B, n, d)
    real_f, same_f = real.repeat(L, 1), same.repeat(L)
    snap = torch.zeros(L * B, n, dtype=torch.bool, device=path.device)
    targets = torch.empty_like(flat)
    snap[todo], targets[todo] = _snapshot(flat[todo], real_f[todo], A_used, trajectory.tie_rtol, same_f[todo])
    snap, targets = snap.view(L, B, n), targets.view(L, B, n, d)
    for k in range(1, L):
        still = ~moved[k]
        snap[k, still], targets[k, still] = snap[k - 1, still], targets[k - 1, still]
    leaders = torch.empty_like(snap)
    leaders[0] = snap[0]
    for k in range(1, L):
        new = snap[k] & ~leaders[k - 1]
        if new.any():
            # Drop candidates sitting on a token that already led (a converged follower, not a leader).
            b, i = new.nonzero(as_tuple=True)
            for bb in b.unique().tolist():
                cand = i[b == bb]
                old = leaders[k - 1, bb].nonzero(as_tuple=True)[0]
                if len(old):
                    dist = (path[k, bb, cand, None] - path[k, bb, None, old]).norm(dim=-1)
                    new[bb, cand[(dist <= same[bb]).any(-1)]] = False
        leaders[k] = (snap[k] & leaders[k - 1]) | new
    return leaders, targets


def _stable_from(flags: Tensor) -> Tensor:
    """First layer k with flags[k:] all True, -1 when flags[-1] is False. flags: (L, ...) bool."""
    L = flags.shape[0]
    trailing = torch.cumprod(flags.flip(0).to(torch.int64), dim=0).sum(0)
    return torch.where(trailing > 0, L - trailing, torch.full_like(trailing, -1))


def leader_layers(trajectory: Trajectory, *, atol: float | None = None) -> Tensor:
    """First layer from which each token is a leader at every layer up to the last.

    Args:
        trajectory: hardmax `Trajectory` from `simulate`.
        atol: same-point distance (see `find_leaders`); default sqrt(eps)·max_i ‖z_i^0‖ per sequence.

    Returns:
        (..., n) int64: k such that the token leads at layers k..K, or -1 when it does not lead at layer K
        (followers, and masked tokens). Followers that converge onto a leader do not inherit its
        leadership (see `_history`); tokens identical from the start lead together.
    """
    path, real, single = _path(trajectory)
    leaders, _ = _history(trajectory, _default_atol(path[0], real, atol))
    layers = _stable_from(leaders)
    return layers[0] if single else layers


@dataclass(frozen=True)
class Clusters:
    """Tokens grouped by final position (`find_clusters`).

    Attributes:
        labels: (..., n) int64 cluster of each token, numbered by first appearance; -1 for masked tokens.
        centers: (c, d) mean final position of each cluster (a list of such tensors for a batch).
        leader: (..., n) int64 index of a token that leads at the last layer and sits in the token's
            cluster (the smallest such index), or -1 when the cluster has no leader — a limit in S that is
            not a vertex of K, such as the projection of the origin onto an edge.
    """

    labels: Tensor
    centers: Tensor | list[Tensor]
    leader: Tensor


def _components(points: np.ndarray, radius: float) -> np.ndarray:
    """Single-linkage clusters at `radius`, labelled 0, 1, ... by first appearance. points: (n, d)."""
    n = len(points)
    pairs = cKDTree(points).query_pairs(r=radius, output_type="ndarray") if n else np.zeros((0, 2), int)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, raw = connected_components(graph, directed=False)
    _, first = np.unique(raw, return_index=True)
    relabel = np.empty(len(first), dtype=np.int64)
    relabel[np.argsort(np.argsort(first))] = np.arange(len(first))
    return relabel[raw]


def find_clusters(trajectory: Trajectory, *, atol: float | None = None) -> Clusters:
    """Group tokens whose final positions coincide up to the unfinished convergence.

    Two tokens share a cluster when a chain of tokens links them with steps of at most
    atol + 2 max_i ρ_i, where ρ_i = ‖z_i^K − z_i^{K−1}‖ / α_K estimates the distance of token i to its
    limit: once a token follows a fixed target x*, z^K − x* = (z^{K−1} − x*)/(1+α), so
    ‖z^K − x*‖ = ‖z^K − z^{K−1}‖/α exactly.

    Args:
        trajectory: hardmax `Trajectory`. atol: same-point distance, default sqrt(eps)·max_i ‖z_i^0‖.

    Returns:
        `Clusters`.
    """
    path, real, single = _path(trajectory)
    same = _default_atol(path[0], real, atol)
    leaders, _ = _history(trajectory, same)
    final_leader = leaders[-1].cpu().numpy()
    final = path[-1].detach().cpu().to(torch.float64).numpy()
    if trajectory.layers > 0:
        step = (path[-1] - path[-2]).norm(dim=-1).cpu().to(torch.float64).numpy()
        residual = step / float(trajectory.alpha[-1])
    else:
        residual = np.zeros(final.shape[:2])
    real_np = real.cpu().numpy()
    labels = np.full(real_np.shape, -1, dtype=np.int64)
    owner = np.full(real_np.shape, -1, dtype=np.int64)
    centers = []
    for b in range(final.shape[0]):
        idx = np.nonzero(real_np[b])[0]
        radius = float(same[b]) + 2.0 * float(residual[b, idx].max(initial=0.0))
        lab = _components(final[b, idx], radius)
        labels[b, idx] = lab
        centers.append(torch.as_tensor(np.stack([final[b, idx[lab == c]].mean(0) for c in range(lab.max() + 1)])
                                       if len(idx) else np.zeros((0, final.shape[-1])),
                                       dtype=path.dtype))
        for c in range(lab.max(initial=-1) + 1):
            members = idx[lab == c]
            leading = members[final_leader[b, members]]
            owner[b, members] = leading.min() if len(leading) else -1
    labels_t, owner_t = torch.as_tensor(labels), torch.as_tensor(owner)
    if single:
        return Clusters(labels=labels_t[0], centers=centers[0], leader=owner_t[0])
    return Clusters(labels=labels_t, centers=centers, leader=owner_t)


# --------------------------------------------------------------------------------------------
# Geometry: the polytope K and the set S (NumPy float64, SciPy).
# --------------------------------------------------------------------------------------------


def _affine_frame(points: np.ndarray, atol: float) -> tuple[np.ndarray, np.ndarray]:
    """Center c (d,) and orthonormal basis Q (d, r) of the affine hull of points (m, d), up to `atol`.

    A principal direction counts when the points spread more than `atol` along it (the width, not the
    singular value, so the rule does not depend on how many points there are).
    """
    center = points.mean(axis=0)
    centered = points - center
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    widths = np.abs(centered @ vt.T).max(axis=0)
    return center, vt[widths > atol].T


def _project_origin(V: np.ndarray, A: np.ndarray, atol: float) -> np.ndarray:
    """A-norm projection of the origin onto aff(V): argmin ‖x‖_A over x = Σ λ_j v_j, Σ λ_j = 1.

    Null-space method for this equality-constrained least-squares problem: write x = c + Q t with Q an
    orthonormal basis of the directions of aff(V); the KKT system reduces to (Qᵀ A Q) t = −Qᵀ A c, whose
    matrix is SPD. The answer is unique even when the v_j are affinely dependent (λ is not).
    """
    c, Q = _affine_frame(V, atol)
    if Q.shape[1] == 0:
        return c
    t = np.linalg.solve(Q.T @ A @ Q, -(Q.T @ (A @ c)))
    return c + Q @ t


def _hull_distance(p: np.ndarray, V: np.ndarray) -> float:
    """Distance from p (d,) to conv(V), V (m, d), by NNLS with the constraint Σλ = 1 as a heavy row."""
    weight = 1e3 * max(1.0, float(np.abs(V).max()), float(np.abs(p).max()))
    M = np.vstack([V.T, np.full((1, len(V)), weight)])
    lam, _ = nnls(M, np.append(p, weight))
    return float(np.linalg.norm(V.T @ (lam / lam.sum()) - p)) if lam.sum() > 0 else math.inf


@dataclass(frozen=True)
class Polytope:
    """A convex polytope K = conv(points).

    Attributes:
        vertices: (v, d) float64 vertices, in lexicographic order.
        faces: vertex indices of every nonempty face, all dimensions (vertices, edges, ..., K itself),
            sorted by size then lexicographically.
        dim: affine dimension of K (0 for a point).
    """

    vertices: np.ndarray
    faces: tuple[tuple[int, ...], ...]
    dim: int


def polytope(points, *, atol: float | None = None, max_faces: int = 20_000) -> Polytope:
    """Convex hull of points with its whole face lattice.

    Works in the affine hull of the points (so collinear points, a segment in R^3, or d = 1 are fine):
    dimension 0 and 1 are handled directly, affinely independent points are a simplex (every subset of
    vertices is a face), anything else goes to qhull (`scipy.spatial.ConvexHull`), whose facets are merged
    by equation and closed under intersection (every face is an intersection of facets).

    Args:
        points: (m, d) array or tensor, m ≥ 1.
        atol: flatness tolerance, default sqrt(eps)·max ‖p‖.
        max_faces: raise above this many faces (a simplex with 20 vertices has 2^20 − 1).

    Raises:
        ValueError: on empty/non-finite input, more faces than `max_faces`, or a non-simplex polytope of
            affine dimension > 8 (qhull's output explodes there; `check_theorem` needs no face lattice).
    """
    P = np.asarray(points.detach().cpu() if isinstance(points, Tensor) else points, dtype=np.float64)
    if P.ndim != 2 or len(P) == 0 or P.shape[1] == 0 or not np.isfinite(P).all():
        raise ValueError(f"points must be a finite (m, d) array with m, d ≥ 1, got shape {P.shape}")
    P = np.unique(P, axis=0)
    tol = math.sqrt(np.finfo(np.float64).eps) * max(float(np.abs(P).max()), 1e-300) if atol is None else atol
    center, Q = _affine_frame(P, tol)
    r = Q.shape[1]
    Y = (P - center) @ Q
    if r == 0:
        keep, facets = np.array([0]), []
    elif r == 1:
        keep = np.array([np.argmin(Y[:, 0]), np.argmax(Y[:, 0])])
        facets = [frozenset({0}), frozenset({1})]
    elif len(P) == r + 1:
        keep, facets = np.arange(len(P)), None
    else:
        if r > 8:
            raise ValueError(f"polytope of affine dimension {r} with {len(P)} points: qhull is impractical "
                             "there; check_theorem certifies Theorem 2.1 without the face lattice")
        hull = ConvexHull(Y)
        keep = hull.vertices
        slot = {int(v): a for a, v in enumerate(keep)}
        on = np.abs(hull.equations[:, :-1] @ Y[keep].T + hull.equations[:, -1:]) <= tol
        facets = list({frozenset(slot[int(v)] for v in keep[row]) for row in on})
    order = np.lexsort(P[keep].T[::-1])
    vertices = P[keep][order]
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    n_v = len(vertices)
    if facets is None:  # simplex: every nonempty subset of vertices is a face
        if 2**n_v - 1 > max_faces:
            raise ValueError(f"a simplex with {n_v} vertices has {2**n_v - 1} faces, more than "
                             f"max_faces={max_faces}")
        faces = {frozenset(np.nonzero([(mask >> i) & 1 for i in range(n_v)])[0].tolist())
                 for mask in range(1, 2**n_v)}
    else:
        facets = [frozenset(int(rank[i]) for i in f) for f in facets]
        faces = set(facets) | {frozenset(range(n_v))}
        frontier = set(facets)
        while frontier:
            new = {f & g for f in frontier for g in facets} - faces - {frozenset()}
            faces |= new
            frontier = new
            if len(faces) > max_faces:
                raise ValueError(f"polytope has more than max_faces={max_faces} faces")
    ordered = tuple(sorted((tuple(sorted(f)) for f in faces), key=lambda f: (len(f), f)))
    return Polytope(vertices=vertices, faces=ordered, dim=r)


def limit_set(K: Polytope, A=None, *, atol: float | None = None, max_faces: int = 20_000) -> np.ndarray:
    """The set S of Theorem 2.1: A-norm projections of the origin onto the affine hulls of the faces of K
    that lie in their face.

        S = { p_F : F face of K, p_F ∈ F },   p_F = argmin_{x ∈ aff F} ⟨A x, x⟩

    Every vertex is in S (a 0-face projects onto itself); the face K itself contributes the origin when
    K is full-dimensional and contains it (a point the dynamics never reaches from nonzero tokens).

    Args:
        K: a `Polytope`. A: (d, d) SPD, None for the identity.
        atol: membership/duplicate tolerance, default sqrt(eps)·max ‖v‖.
        max_faces: raise ValueError when K has more faces (one small solve per face).

    Returns:
        (s, d) float64, distinct points in lexicographic order.
    """
    V = K.vertices
    d = V.shape[1]
    if len(K.faces) > max_faces:
        raise ValueError(f"K has {len(K.faces)} faces, more than max_faces={max_faces}; "
                         "check_theorem certifies limits face by face without enumerating them")
    A_np = validate_A(A, d, torch.float64, "cpu").numpy()
    tol = math.sqrt(np.finfo(np.float64).eps) * max(float(np.abs(V).max()), 1e-300) if atol is None else atol
    found = []
    for face in K.faces:
        F = V[list(face)]
        p = _project_origin(F, A_np, tol)
        if _hull_distance(p, F) <= tol:
            found.append(p)
    S = np.array(found).reshape(-1, d)
    if len(S) == 0:
        return S
    labels = _components(S, tol)
    S = np.stack([S[labels == c][0] for c in range(labels.max() + 1)])
    return S[np.lexsort(S.T[::-1])]


# --------------------------------------------------------------------------------------------
# check_theorem
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TheoremReport:
    """Numerical evidence for Theorem 2.1 on a trajectory (`check_theorem`); aggregated over a batch.

    `passed` is the conjunction of the six `*_ok` checks; `hypotheses_ok` is informative only.
    Distances are absolute (same units as the tokens) unless said otherwise.
    """

    passed: bool
    sequences: int
    layers: int
    atol: float                       # largest same-point tolerance used
    failed_sequences: tuple[int, ...]
    failures: tuple[str, ...]         # one line per failed (sequence, check)
    # (1) every token ends on a vertex of K or a point of S
    limits_ok: bool
    tokens_checked: int
    tokens_off: int
    limit_excess: float               # worst dist(z_i^K, certified point) / tol_i; ≤ 1 passes
    # (2) leaders stop moving after finitely many layers
    leaders_fixed_ok: bool
    leader_drift: float               # max ‖z_i^k − z_i^{k_i}‖ over final leaders i, k ≥ leader layer k_i
    last_leader_layer: int
    settle_window: int                # the last leader layer must be ≤ layers − settle_window
    leaders_lost: int                 # tokens that led at some layer but not at the last
    # (3) the hull shrinks
    hull_ok: bool
    hull_excess: float                # largest growth of conv(Z^k) found (support function / qhull)
    hull_exact: bool                  # qhull containment verified for every sequence
    # (4) followers converge at rate 1/(1+α) per layer
    rate_ok: bool
    rate_measured: float              # geometric mean of ‖z^{k+1} − x*‖ / ‖z^k − x*‖ over samples
    rate_expected: float              # geometric mean of 1/(1+α_k) over the same samples
    rate_error: float                 # max |ratio_k (1+α_k) − 1|
    rate_samples: int
    # (5) leaders sit on distinct vertices of K
    vertices_ok: bool
    leaders: int                      # distinct leader positions (vertices of K), summed over sequences
    leader_defects: int
    # extra: ‖z_i^k‖_A is nondecreasing (why the origin is never a limit)
    norms_ok: bool
    norm_decrease: float
    # informative: the theorem assumes nonzero distinct initial tokens
    hypotheses_ok: bool

    def table(self) -> str:
        """A markdown table: check, value, expected, pass."""
        def mark(ok: bool) -> str:
            return "yes" if ok else "NO"

        rate = (f"{self.rate_measured:.6g} (max rel. error {self.rate_error:.1e}, {self.rate_samples} samples)"
                if self.rate_samples else "no samples")
        rows = [
            ("1. tokens end on vertices of K or points of S",
             f"{self.tokens_off} of {self.tokens_checked} off (worst {self.limit_excess:.2g} × tol)",
             "0 off", self.limits_ok),
            ("2. leaders fixed after finitely many layers",
             f"drift {self.leader_drift:.1e}, last leader layer {self.last_leader_layer}, lost {self.leaders_lost}",
             f"drift ≤ atol, layer ≤ {self.layers - self.settle_window}, lost 0", self.leaders_fixed_ok),
            ("3. hull shrinks: conv(Z^{k+1}) ⊆ conv(Z^k)",
             f"growth {self.hull_excess:.1e} ({'qhull + support' if self.hull_exact else 'support function'})",
             "≤ atol", self.hull_ok),
            ("4. follower rate per layer", rate, f"1/(1+α) = {self.rate_expected:.6g}", self.rate_ok),
            ("5. leaders on distinct vertices of K", f"{self.leaders} leaders, {self.leader_defects} defects",
             "0 defects", self.vertices_ok),
            ("‖z_i‖_A nondecreasing", f"max decrease {self.norm_decrease:.1e}", "≤ atol", self.norms_ok),
            ("hypotheses: nonzero distinct tokens", mark(self.hypotheses_ok), "(informative)", True),
        ]
        lines = [f"Theorem 2.1 on {self.sequences} sequence(s), {self.layers} layers, atol {self.atol:.1e}: "
                 f"{'PASSED' if self.passed else 'FAILED'}",
                 "", "| check | value | expected | pass |", "| --- | --- | --- | --- |"]
        lines += [f"| {c} | {v} | {e} | {mark(ok)} |" for c, v, e, ok in rows]
        lines += [f"- {f}" for f in self.failures]
        return "\n".join(lines)


_RATE_RTOL = 1e-3       # allowed |ratio·(1+α) − 1| for a follower of a fixed target
_RATE_FLOOR = 1e3       # rate samples need ‖z − x*‖ ≥ _RATE_FLOOR · atol, far above rounding
_SUPPORT_DIRECTIONS = 32


@dataclass
class _Seq:
    """Per-sequence results of `check_theorem` (internal)."""

    checked: int = 0
    off: int = 0
    excess: float = 0.0
    drift: float = 0.0
    last_leader: int = 0
    lost: int = 0
    hull: float = 0.0
    exact: bool = False
    log_ratio: float = 0.0
    log_expected: float = 0.0
    rate_error: float = 0.0
    samples: int = 0
    leaders: int = 0
    defects: int = 0
    norm_decrease: float = 0.0
    hypotheses: bool = True


def _limits_check(out: _Seq, Z, T, leader_final, V, A, alpha, atol, R, diam) -> None:
    """(1): certify z_i^K ∈ vertices(K) ∪ S within tol_i = atol (1 + 1/min α) + ρ_i for each follower i.

    ρ_i = diam(Z^0) · Π_{k=k_i}^{K-1} 1/(1+α_k), where k_i is the layer from which the token's attention
    target mean_{C_i} z_j stayed fixed (within atol): from then on z^k − x* shrinks by exactly 1/(1+α_k)
    per layer. The point is certified by the exposed face F = {v ∈ V : ⟨A z, v⟩ ≥ max − τ}: either z is
    within tol of a vertex, or p = A-projection of 0 onto aff(F) lies in conv(F) and within tol of z.
    """
    K = len(alpha)
    followers = np.nonzero(~leader_final)[0]
    out.checked = len(leader_final)
    if len(followers) == 0 or K == 0:
        return
    changed = np.linalg.norm(T[:K] - T[K - 1], axis=-1)[:, followers] > atol  # (K, f)
    settle = np.where(changed.any(0), K - np.argmax(changed[::-1], axis=0), 0)
    log_decay = np.concatenate([np.cumsum(np.log1p(alpha)[::-1])[::-1], [0.0]])  # Σ_{k≥j} log(1+α_k)
    tol = atol * (1 + 1 / alpha.min()) + diam * np.exp(-log_decay[settle])
    z = Z[K, followers]
    if len(V) == 0:
        out.off, out.excess = len(followers), math.inf
        return
    to_vertex = np.linalg.norm(z[:, None, :] - V[None], axis=-1).min(axis=1)
    excess = to_vertex / tol
    a_norm = float(np.linalg.eigvalsh(A).max())
    cache: dict[tuple[int, ...], tuple[np.ndarray, float]] = {}
    for t in np.nonzero(excess > 1)[0]:
        s = V @ (A @ z[t])
        face = tuple(np.nonzero(s >= s.max() - 2 * a_norm * R * tol[t])[0])
        if len(face) < 2:
            continue
        if face not in cache:
            p = _project_origin(V[list(face)], A, atol)
            cache[face] = (p, _hull_distance(p, V[list(face)]))
        p, outside = cache[face]
        if outside <= atol:
            excess[t] = min(excess[t], np.linalg.norm(z[t] - p) / tol[t])
    out.off = int((excess > 1).sum())
    out.excess = float(excess.max())


def _hull_check(out: _Seq, Z, A, atol, exact: bool) -> None:
    """(3): conv(Z^{k+1}) ⊆ conv(Z^k) for every k.

    Always: the support function h_k(c) = max_j ⟨c, z_j^k⟩ may not grow, h_{k+1}(c) ≤ h_k(c) + atol‖c‖, for
    32 fixed random directions c and for the n directions c = A z_i^k (those that decide attention).
    With `exact`: every z_j^{k+1} lies within atol of conv(Z^k), from qhull's facet inequalities in the
    affine hull of Z^k (layers where nothing moved are skipped).
    """
    L, n, d = Z.shape
    C = np.random.default_rng(0).normal(size=(_SUPPORT_DIRECTIONS, d))
    C /= np.linalg.norm(C, axis=1, keepdims=True)
    h = (Z @ C.T).max(axis=1)  # (L, M)
    growth = float((h[1:] - h[:-1]).max(initial=0.0))
    step = max(1, _CHUNK_ENTRIES // max(1, n * n))
    for s in range(0, L - 1, step):
        e = min(s + step, L - 1)
        Q = Z[s:e] @ A  # directions A z_i^k, k = s..e-1
        now = (Q @ Z[s:e].transpose(0, 2, 1)).max(-1)
        nxt = (Q @ Z[s + 1:e + 1].transpose(0, 2, 1)).max(-1)
        norm = np.linalg.norm(Q, axis=-1)
        ok = norm > 0
        if ok.any():
            growth = max(growth, float(((nxt - now)[ok] / norm[ok]).max()))
    if exact:
        for k in range(L - 1):
            if np.array_equal(Z[k + 1], Z[k]):
                continue
            growth = max(growth, _outside_hull(np.unique(Z[k], axis=0), Z[k + 1], atol))
    out.hull, out.exact = growth, exact


def _outside_hull(P: np.ndarray, X: np.ndarray, atol: float) -> float:
    """Largest distance-like violation of X (n, d) outside conv(P), from qhull halfspaces (≤ 0 inside)."""
    # Directions thinner than atol/8 are dropped: points there are within atol/8 of the affine hull.
    c, Q = _affine_frame(P, atol / 8)
    off = float(np.linalg.norm((X - c) - (X - c) @ Q @ Q.T, axis=1).max())
    Y, Yx = (P - c) @ Q, (X - c) @ Q
    r = Q.shape[1]
    if r == 0:
        return off
    if r == 1:
        return max(off, float((Yx[:, 0] - Y[:, 0].max()).max()), float((Y[:, 0].min() - Yx[:, 0]).max()))
    try:
        eq = ConvexHull(Y).equations
    except QhullError:  # nearly flat within a few atol: joggle (perturbs by ~1e-11 relative)
        eq = ConvexHull(Y, qhull_options="QJ").equations
    return max(off, float((Yx @ eq[:, :-1].T + eq[:, -1]).max()))


def _rate_check(out: _Seq, Z, T, leader_final, alpha, atol) -> None:
    """(4): for a follower whose target x* (mean of its attention set) is fixed, the exact law is
    z^{k+1} − x* = (z^k − x*)/(1+α_k). Measured on settled layers while ‖z − x*‖ ≥ 1e3·atol.
    """
    K = len(alpha)
    followers = np.nonzero(~leader_final)[0]
    if K == 0 or len(followers) == 0:
        return
    x_star = T[K - 1, followers]
    changed = np.linalg.norm(T[:K, followers] - x_star, axis=-1) > atol  # (K, f)
    settle = np.where(changed.any(0), K - np.argmax(changed[::-1], axis=0), 0)
    e = np.linalg.norm(Z[:, followers] - x_star, axis=-1)  # (K+1, f)
    layer = np.arange(K)[:, None]
    valid = (layer >= settle) & (e[1:] >= _RATE_FLOOR * atol)
    if not valid.any():
        return
    ratio = (e[1:] / np.where(e[:-1] > 0, e[:-1], 1.0))[valid]
    expected = np.broadcast_to(1.0 / (1.0 + alpha[:, None]), valid.shape)[valid]
    out.samples = int(valid.sum())
    out.log_ratio = float(np.log(ratio).sum())
    out.log_expected = float(np.log(expected).sum())
    out.rate_error = float(np.abs(ratio / expected - 1).max())


def _check_sequence(Z, T, leaders, alpha, A, atol: float, exact: bool) -> _Seq:
    """All checks on one sequence: Z (L, n, d) real tokens, T (L, n, d) targets, leaders (L, n)."""
    out = _Seq()
    L, n, _ = Z.shape
    K = L - 1
    if n == 0:
        return out
    R = float(np.linalg.norm(Z[0], axis=1).max())
    diam = float(np.linalg.norm(Z[0][:, None] - Z[0][None], axis=-1).max())
    out.hypotheses = bool((np.linalg.norm(Z[0], axis=1) > 0).all() and len(np.unique(Z[0], axis=0)) == n)
    final = leaders[K]
    # (2) leaders stop moving
    first = _stable_from(torch.as_tensor(leaders)).numpy()
    for i in np.nonzero(final)[0]:
        out.drift = max(out.drift, float(np.linalg.norm(Z[first[i]:, i] - Z[first[i], i], axis=-1).max()))
    out.last_leader = int(first[final].max(initial=0))
    out.lost = int((leaders.any(0) & ~final).sum())
    # (5) leader positions: distinct, and each strictly exposed by its own direction A v
    idx = np.nonzero(final)[0]
    groups = _components(Z[K, idx], atol)
    V = np.array([Z[K, idx[groups == g][0]] for g in range(groups.max(initial=-1) + 1)]).reshape(-1, Z.shape[2])
    out.leaders = len(V)
    for g in range(len(V)):
        members = Z[0, idx[groups == g]]
        out.defects += int(not (members == members[0]).all())  # distinct leaders merged
    if len(V) > 1:
        s = (V @ A) @ V.T
        rivals = np.where(np.eye(len(V), dtype=bool), -np.inf, s).max(axis=1)
        out.defects += int((np.diag(s) - rivals <= 0).sum())
    # (1), (3), (4), norms
    _limits_check(out, Z, T, final, V, A, alpha, atol, R, diam)
    _hull_check(out, Z, A, atol, exact)
    _rate_check(out, Z, T, final, alpha, atol)
    norms = np.sqrt(np.maximum(np.einsum("lnd,de,lne->ln", Z, A, Z), 0.0))
    out.norm_decrease = float((norms[:-1] - norms[1:]).max(initial=0.0))
    return out


def check_theorem(trajectory: Trajectory, *, atol: float | None = None,
                  exact_hull: bool | None = None) -> TheoremReport:
    """Check Theorem 2.1 numerically on a hardmax trajectory; masked tokens are ignored.

    Checks, per sequence (K = layers, k_i = leader layer from `leader_layers`, V = final leader
    positions, vertices of K = conv(V)):
      1. every token ends within tol_i of a vertex of K or a point of S, tol_i = atol (1 + 1/min α)
         + diam(Z^0) Π_{k ≥ settle_i} 1/(1+α_k) (the unfinished part of the geometric convergence,
         from the layer settle_i where the token's attention target stopped changing); points of S are
         certified through the face of K exposed by A z_i — no face enumeration;
      2. final leaders do not move from their leader layer on (drift ≤ atol), no token stops leading,
         and the leader set is the same for the last ceil(K/4) layers;
      3. the hull shrinks: the support function does not grow along 32 random directions and the
         directions A z_i^k (all d); qhull containment of Z^{k+1} in conv(Z^k) as well when `exact_hull`;
      4. a follower of a fixed target x* obeys ‖z^{k+1} − x*‖ = ‖z^k − x*‖/(1+α_k) to 1e-3;
      5. distinct leaders sit at distinct points, each a strict maximiser of its own ⟨A v, ·⟩ over V;
      +  ‖z_i^k‖_A never decreases (by more than atol·‖A‖^½).

    Args:
        trajectory: hardmax `Trajectory` from `simulate`, unbatched or batched.
        atol: same-point distance, default sqrt(eps)·max_i ‖z_i^0‖ per sequence.
        exact_hull: qhull containment at every layer; default when d ≤ 3, or d ≤ 5 and n ≤ 64.

    Returns:
        `TheoremReport` (print `.table()`).

    Raises:
        ValueError: for a softmax trajectory (the theorem is about hardmax attention).
    """
    if trajectory.attention != "hardmax":
        raise ValueError(f"Theorem 2.1 is about hardmax attention, got a {trajectory.attention} trajectory")
    path, real, _ = _path(trajectory)
    L, B, n, d = path.shape
    same = _default_atol(path[0], real, atol)
    leaders, targets = _history(trajectory, same)
    if exact_hull is None:
        exact_hull = d <= 3 or (d <= 5 and n <= 64)
    Z_all = path.detach().cpu().to(torch.float64).numpy()
    T_all = targets.detach().cpu().to(torch.float64).numpy()
    lead_all = leaders.cpu().numpy()
    real_np = real.cpu().numpy()
    A = trajectory.A.detach().cpu().to(torch.float64).numpy()
    alpha = trajectory.alpha.detach().cpu().to(torch.float64).numpy()
    window = max(1, math.ceil((L - 1) / 4)) if L > 1 else 0
    sqrt_a = math.sqrt(float(np.linalg.eigvalsh(A).max()))
    seqs, failures, failed = [], [], []
    for b in range(B):
        idx = np.nonzero(real_np[b])[0]
        tol = float(same[b])
        s = _check_sequence(Z_all[:, b, idx], T_all[:, b, idx], lead_all[:, b, idx], alpha, A, tol, exact_hull)
        seqs.append(s)
        problems = [
            (s.off > 0, f"{s.off} token(s) end off vertices ∪ S (worst {s.excess:.3g} × tol)"),
            (s.drift > tol, f"a leader drifts by {s.drift:.3g} after its leader layer"),
            (s.lost > 0, f"{s.lost} token(s) stop leading"),
            (s.last_leader > L - 1 - window, f"a leader emerges at layer {s.last_leader} of {L - 1}"),
            (s.hull > tol, f"the hull grows by {s.hull:.3g}"),
            (s.samples > 0 and s.rate_error > _RATE_RTOL, f"follower rate off by {s.rate_error:.3g} (relative)"),
            (s.defects > 0, f"{s.defects} leader(s) not at distinct vertices of K"),
            (s.norm_decrease > tol * sqrt_a, f"an A-norm decreases by {s.norm_decrease:.3g}"),
        ]
        bad = [f"sequence {b}: {msg}" for flag, msg in problems if flag]
        failures += bad
        if bad:
            failed.append(b)
    tols = same.cpu().to(torch.float64).numpy()
    samples = sum(s.samples for s in seqs)
    limits_ok = all(s.off == 0 for s in seqs)
    fixed_ok = all(s.drift <= t and s.lost == 0 and s.last_leader <= L - 1 - window for s, t in zip(seqs, tols))
    hull_ok = all(s.hull <= t for s, t in zip(seqs, tols))
    rate_ok = all(s.samples == 0 or s.rate_error <= _RATE_RTOL for s in seqs)
    vertices_ok = all(s.defects == 0 for s in seqs)
    norms_ok = all(s.norm_decrease <= t * sqrt_a for s, t in zip(seqs, tols))
    return TheoremReport(
        passed=limits_ok and fixed_ok and hull_ok and rate_ok and vertices_ok and norms_ok,
        sequences=B, layers=L - 1, atol=float(tols.max(initial=0.0)),
        failed_sequences=tuple(failed), failures=tuple(failures),
        limits_ok=limits_ok, tokens_checked=sum(s.checked for s in seqs), tokens_off=sum(s.off for s in seqs),
        limit_excess=max((s.excess for s in seqs), default=0.0),
        leaders_fixed_ok=fixed_ok, leader_drift=max((s.drift for s in seqs), default=0.0),
        last_leader_layer=max((s.last_leader for s in seqs), default=0), settle_window=window,
        leaders_lost=sum(s.lost for s in seqs),
        hull_ok=hull_ok, hull_excess=max((s.hull for s in seqs), default=0.0), hull_exact=bool(exact_hull),
        rate_ok=rate_ok,
        rate_measured=math.exp(sum(s.log_ratio for s in seqs) / samples) if samples else math.nan,
        rate_expected=math.exp(sum(s.log_expected for s in seqs) / samples) if samples
        else float(np.exp(-np.log1p(alpha).mean())) if len(alpha) else math.nan,
        rate_error=max((s.rate_error for s in seqs), default=0.0), rate_samples=samples,
        vertices_ok=vertices_ok, leaders=sum(s.leaders for s in seqs),
        leader_defects=sum(s.defects for s in seqs),
        norms_ok=norms_ok, norm_decrease=max((s.norm_decrease for s in seqs), default=0.0),
        hypotheses_ok=all(s.hypotheses for s in seqs),
    )


# --------------------------------------------------------------------------------------------
# The paper's Figure 2 configurations (α = FIGURE2_ALPHA, A = identity).
# --------------------------------------------------------------------------------------------


def figure2_configurations() -> dict[str, np.ndarray]:
    """Four small 2-D configurations in the spirit of the paper's Figure 2 (α = 0.5, A = I).

    Dyadic coordinates, so scores and ties are exact in floating point. Known answers are in
    tests/problems.py.
      * "triangle": leaders (2, 0), (−1, 2), (−1, −2); 11 interior tokens, each attending to one vertex
        from the start, so each converges to that vertex.
      * "emerging_leader": (2, 0) first attends to (2.5, 1); that token runs to the leader (0, 8), and
        after one layer (13/6, 1/3) attends only to itself: a leader that was not one at layer 0.
      * "square": leaders (±1, ±1) and 7 interior tokens, each converging to the vertex it sees first.
      * "non_leader_clusters": the square plus (±1/2, 0), exactly tied between two vertices; they
        converge to (±1, 0), the projections of the origin onto the vertical sides (points of S, not
        vertices).

    Returns:
        name -> (n, 2) float64 tokens.
    """
    square = [[1, 1], [-1, 1], [-1, -1], [1, -1]]
    return {
        "triangle": np.array([[2, 0], [-1, 2], [-1, -2], [1, 0.25], [0.5, -0.5], [-0.5, 1], [-0.5, -1],
                              [0.25, 0.75], [0.75, 0.5], [-0.25, -0.5], [0, 1.25], [1.25, -0.5],
                              [-0.75, 0.25], [0.5, 1]], dtype=np.float64),
        "emerging_leader": np.array([[0, 8], [-4, 0], [2, 0], [2.5, 1], [-1, 1]], dtype=np.float64),
        "square": np.array(square + [[0.5, 0.25], [-0.25, 0.625], [-0.375, -0.75], [0.75, -0.125],
                                     [0.125, 0.875], [-0.875, -0.25], [0.25, -0.625]], dtype=np.float64),
        "non_leader_clusters": np.array(square + [[0.5, 0], [-0.5, 0]], dtype=np.float64),
    }
