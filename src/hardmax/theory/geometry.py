"""The polytope K, its face lattice, and the set S of Theorem 2.1 (NumPy float64, SciPy).

Everything works in the affine hull of the points, so degenerate sets (collinear points, a segment in
R^3, d = 1) need no special casing by callers. `polytope` and `limit_set` enumerate faces and are meant for
small polytopes (pictures, tests); `check_theorem` certifies points of S one exposed face at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

# SciPy is imported inside the functions that use it: importing it costs 0.4 s, which `hardmax evaluate`
# and `explain` (they need only `find_leaders`) should not pay.
from hardmax.dynamics import validate_A
from hardmax.theory.inputs import as_tokens, check_atol

__all__ = ["Facets", "HullTest", "Polytope", "components", "hull_distance", "limit_set", "polytope", "project_origin"]


def components(points: np.ndarray, radius: float) -> np.ndarray:
    """Single-linkage clusters at `radius`, labelled 0, 1, ... by first appearance. points: (n, d)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    n = len(points)
    pairs = cKDTree(points).query_pairs(r=radius, output_type="ndarray") if n else np.zeros((0, 2), int)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, raw = connected_components(graph, directed=False)
    _, first = np.unique(raw, return_index=True)
    relabel = np.empty(len(first), dtype=np.int64)
    relabel[np.argsort(np.argsort(first))] = np.arange(len(first))
    return relabel[raw]


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


def project_origin(V: np.ndarray, A: np.ndarray, atol: float) -> np.ndarray:
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


def _project_origins(F: np.ndarray, A: np.ndarray, atol: float) -> np.ndarray:
    """`project_origin` of g faces of m points each at once: F (g, m, d) -> (g, d), the same arithmetic batched
    (one SVD, product and solve per face, as NumPy's stacked linear algebra does them); the faces are batched by
    the directions their affine frame keeps (`_affine_frame`'s widths above atol)."""
    center = F.mean(axis=1)  # (g, d)
    centered = F - center[:, None]
    _, _, vt = np.linalg.svd(centered, full_matrices=False)  # (g, min(m, d), d)
    keep = np.abs(centered @ np.swapaxes(vt, 1, 2)).max(axis=1) > atol  # (g, min(m, d)): `_affine_frame`'s widths
    out = np.empty_like(center)
    patterns, which = np.unique(keep, axis=0, return_inverse=True)
    for p, pattern in enumerate(patterns):
        rows = np.nonzero(which.reshape(-1) == p)[0]
        if not pattern.any():  # points: the projection is the point
            out[rows] = center[rows]
            continue
        Q = np.swapaxes(vt[rows][:, pattern], 1, 2)  # (r, d, k) orthonormal directions of each face
        Qt = np.swapaxes(Q, 1, 2)
        c = center[rows]
        t = np.linalg.solve(Qt @ A @ Q, -(Qt @ (A @ c[..., None])))  # (r, k, 1)
        out[rows] = c + (Q @ t)[..., 0]
    return out


def _inside_simplices(F: np.ndarray, P: np.ndarray, tol: float) -> np.ndarray:
    """(g,) bool: a point q of the face F[g] (m, d) lies within tol of P[g], for faces of m ≤ d + 1 points — then
    `hull_distance(P[g], F[g]) ≤ tol` holds and need not be asked. q = Σ λ_j F_j / Σ λ_j with λ the barycentric
    coordinates of P[g] in the face (Σ λ_j F_j = p, Σ λ_j = 1 in the least-squares sense, by a batched
    pseudo-inverse), accepted when every λ_j ≥ 1e-6 (inside, not on the boundary) and ‖q − p‖ ≤ tol is measured;
    False otherwise (the NNLS decides)."""
    g, m, d = F.shape
    if m > d + 1 or g == 0:
        return np.zeros(g, dtype=bool)
    M = np.concatenate([np.swapaxes(F, 1, 2), np.ones((g, 1, m))], axis=1)  # (g, d + 1, m)
    b = np.concatenate([P, np.ones((g, 1))], axis=1)[..., None]  # (g, d + 1, 1)
    lam = (np.linalg.pinv(M) @ b)[..., 0]  # (g, m)
    inside = np.isfinite(lam).all(axis=1) & (lam >= 1e-6).all(axis=1)
    q = (lam[:, :, None] * F).sum(axis=1) / np.where(inside, lam.sum(axis=1), 1.0)[:, None]  # points of the faces
    return inside & (np.linalg.norm(q - P, axis=1) <= tol)


def hull_distance(p: np.ndarray, V: np.ndarray) -> float:
    """Distance from p (d,) to conv(V), V (m, d), by NNLS with the constraint Σλ = 1 as a heavy row."""
    from scipy.optimize import nnls

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
    from scipy.spatial import ConvexHull

    points = as_tokens(points, "points")  # real, finite, non-empty
    if points.dim() != 2:
        raise ValueError(f"points must be a finite (m, d) array with m, d ≥ 1, got shape {tuple(points.shape)}")
    atol = check_atol(atol)
    P = np.unique(points.detach().cpu().to(torch.float64).numpy(), axis=0)
    tol = math.sqrt(np.finfo(np.float64).eps) * max(float(np.abs(P).max()), 1e-300) if atol is None else atol
    # The face lattice does not depend on the scale: qhull works on points scaled by a power of two
    # (exact) to a largest coordinate in [0.5, 1), so that 1e300 or 1e-300 neither overflows nor underflows.
    scale = math.ldexp(1.0, math.frexp(float(np.abs(P).max()))[1]) if np.abs(P).max() > 0 else 1.0
    P_unit, tol_unit = P / scale, tol / scale
    center, Q = _affine_frame(P_unit, tol_unit)
    r = Q.shape[1]
    Y = (P_unit - center) @ Q
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
        on = np.abs(hull.equations[:, :-1] @ Y[keep].T + hull.equations[:, -1:]) <= tol_unit
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
        faces = {frozenset(i for i in range(n_v) if mask >> i & 1) for mask in range(1, 2**n_v)}
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
    """The set S of Theorem 2.1, tight: the points some token with these leaders can converge to.

        S = { p_F : F face of K, p_F ∈ F, p_F ≠ 0, ⟨A p_F, v − p_F⟩ ≤ 0 for every vertex v },
        p_F = argmin_{x ∈ aff F} ⟨A x, x⟩

    Every vertex is in S (a 0-face projects onto itself; a vertex of K = conv(leaders) is a leader, its
    own strict maximiser; vertices of other polytopes are kept too). The two extra conditions are
    necessary for a limit p of a token z_i → p that is not a leader: ‖z_i‖_A never decreases, so p ≠ 0;
    and the face p lies on must be the set of maximisers of ⟨A p, ·⟩ over K (the token's attention set
    near p), i.e. ⟨A p, v − p⟩ ≤ 0 for every vertex v. Without them the projection of 0 onto K itself
    (the origin, whenever 0 ∈ K) and projections onto faces that ⟨A p, ·⟩ does not expose would be
    listed although nothing reaches them.

    Args:
        K: a `Polytope`. A: (d, d) SPD, None for the identity.
        atol: membership/duplicate tolerance, default sqrt(eps)·max ‖v‖; a point counts as the origin
            when ‖p‖ ≤ atol, and as self-consistent when ⟨A p, v − p⟩ ≤ atol ‖A p‖ for every vertex v.
        max_faces: raise ValueError when K has more faces (one small solve per face).

    Returns:
        (s, d) float64, distinct points in lexicographic order.

    Paper: Theorem 2.1 (the limits of the tokens that are not leaders).

    Example: the square's S is its 4 vertices and the midpoints of its 4 sides, never the origin.

    >>> import torch, hardmax
    >>> square = hardmax.polytope(torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1]], dtype=torch.float64))
    >>> hardmax.limit_set(square).tolist()
    [[-1.0, -1.0], [-1.0, 0.0], [-1.0, 1.0], [0.0, -1.0], [0.0, 1.0], [1.0, -1.0], [1.0, 0.0], [1.0, 1.0]]
    """
    V = K.vertices
    d = V.shape[1]
    if len(K.faces) > max_faces:
        raise ValueError(f"K has {len(K.faces)} faces, more than max_faces={max_faces}; "
                         "check_theorem certifies limits face by face without enumerating them")
    A_np = validate_A(A, d, torch.float64, "cpu").numpy()
    tol = math.sqrt(np.finfo(np.float64).eps) * max(float(np.abs(V).max()), 1e-300) if atol is None else atol
    # S does not depend on the scale of V or of A: both are scaled by powers of two (exact) to entries of
    # order 1, so that scores of vertices at 1e160 or 1e-160 neither overflow nor underflow, then S back.
    e = math.frexp(float(np.abs(V).max()))[1] if np.abs(V).max() > 0 else 0
    V, tol = np.ldexp(V, -e), math.ldexp(tol, -e)
    A_np = np.ldexp(A_np, -math.frexp(float(np.abs(A_np).max()))[1])
    found = [V[face[0]] for face in K.faces if len(face) == 1]  # a vertex is its own projection
    by_size: dict[int, list[tuple[int, ...]]] = {}
    for face in K.faces:
        if len(face) > 1:
            by_size.setdefault(len(face), []).append(face)
    for faces in by_size.values():  # the faces of one size projected together
        index = np.array(faces)
        P = _project_origins(V[index], A_np, tol)  # (g, d)
        AP = P @ A_np.T
        # the cheap conditions first: most faces' projections are not exposed, and the NNLS is not needed then
        exposed = (np.linalg.norm(P, axis=1) > tol) & \
            (np.einsum("gvd,gd->gv", V[None] - P[:, None], AP).max(axis=1) <= tol * np.linalg.norm(AP, axis=1))
        inside = _inside_simplices(V[index], P, tol) & exposed  # a point of its face within tol: no NNLS needed
        found += [P[g] for g in np.nonzero(exposed)[0] if inside[g] or hull_distance(P[g], V[index[g]]) <= tol]
    S = np.array(found).reshape(-1, d)
    if len(S) == 0:
        return S
    labels = components(S, tol)
    S = np.stack([S[labels == c][0] for c in range(labels.max() + 1)])
    # Sort on a grid of step tol, so that rounding noise (−1e-17 vs 0) does not reorder points.
    return np.ldexp(S[np.lexsort(np.round(S / max(tol, np.finfo(np.float64).tiny)).T[::-1])], e)


@dataclass(frozen=True)
class HullTest:
    """conv(P) of points P (m, d) as a test of other points (`outside`), and the indices of P that span it.

    The affine hull of P up to atol/8 (thinner directions are dropped: points there are within atol/8 of the
    affine hull), then qhull's facet inequalities in it. `vertices`: the indices of P whose positions determine
    the hull (qhull's vertices; every point when the hull is a point or a segment's ends).
    """

    center: np.ndarray
    frame: np.ndarray
    equations: np.ndarray | None
    span: tuple[float, float]
    vertices: np.ndarray
    simplices: np.ndarray | None = None  # (F, d) qhull's facets as indices of P, when the hull is full-dimensional
    orientation: np.ndarray | None = None  # (F,) ±1: each facet's orientation seen from the vertices' centroid

    @staticmethod
    def of(P: np.ndarray, atol: float) -> HullTest:
        """The hull test of points `P` (m, d): their affine hull up to `atol`/8, then qhull's facets in it."""
        from scipy.spatial import ConvexHull, QhullError

        c, Q = _affine_frame(P, atol / 8)
        Y = (P - c) @ Q
        r = Q.shape[1]
        if r == 0:
            return HullTest(c, Q, None, (0.0, 0.0), np.arange(len(P)))
        if r == 1:
            ends = np.array([int(Y[:, 0].argmin()), int(Y[:, 0].argmax())])
            return HullTest(c, Q, None, (float(Y[:, 0].min()), float(Y[:, 0].max())), ends)
        try:
            hull = ConvexHull(Y)
        except QhullError:  # nearly flat within a few atol: joggle (perturbs by ~1e-11 relative)
            hull = ConvexHull(Y, qhull_options="QJ")
        if not (r == P.shape[1] and r in (2, 3)):
            return HullTest(c, Q, hull.equations, (0.0, 0.0), hull.vertices)
        simplices = hull.simplices
        volume = np.linalg.det(P[simplices] - P[hull.vertices].mean(axis=0))  # (F,) signed, seen from the centroid
        return HullTest(c, Q, hull.equations, (0.0, 0.0), hull.vertices, simplices, np.sign(volume))

    def through(self, P: np.ndarray) -> Facets | None:
        """The same facets through the current positions P (n, d) of the same points, when they still bound a
        convex polytope: then that polytope is conv(P[vertices]) ⊆ conv(P), so a point inside it is inside conv(P)
        (an inner test, sound without a new hull). They do when every vertex lies inside every facet's plane, every
        facet keeps its orientation seen from the vertices' centroid with a volume far from 0, and the facets wind
        once around it (total angle 2π, solid angle 4π): a facet structure that folded onto itself or went flat
        is refused. None when the hull was not full-dimensional (d = 2 or 3) or any of that fails."""
        if self.simplices is None:
            return None
        normal, offset, valid = self._facets(P[None])
        return Facets(normal[0], offset[0]) if valid[0] else None

    def violations(self, X: np.ndarray, moved: np.ndarray) -> np.ndarray:
        """`outside` for b sets of points at once: X (b, n, d), of which moved (b, n) are tested; (b,)."""
        c, Q = self.center, self.frame
        Yx = (X - c) @ Q
        worst = np.linalg.norm((X - c) - Yx @ Q.T, axis=-1)  # (b, n) distance off the affine hull
        if Q.shape[1] == 1:
            low, high = self.span
            worst = np.maximum(worst, np.maximum(Yx[..., 0] - high, low - Yx[..., 0]))
        elif Q.shape[1] > 1:
            eq = self.equations
            worst = np.maximum(worst, (Yx @ eq[:, :-1].T + eq[:, -1]).max(axis=-1))
        return np.where(moved, worst, -np.inf).max(axis=1)

    def through_violations(self, P: np.ndarray, X: np.ndarray, moved: np.ndarray) -> np.ndarray:
        """`through` for b configurations at once: P (b, n, d) the points the hull was built on, now; X (b, n, d)
        the points to test; moved (b, n) which of them to test. Returns (b,) the largest violation of the tested
        points against `through(P[i])`, inf where that is None."""
        normal, offset, valid = self._facets(P)
        signed = (X @ normal.transpose(0, 2, 1) + offset[:, None, :]).max(axis=2)  # (b, n)
        worst = np.where(moved, signed, -np.inf).max(axis=1)
        return np.where(valid, worst, np.inf)

    def _facets(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unit outward normals (b, F, d) and offsets (b, F) of the facets through P (b, n, d), and whether they
        bound a convex polytope (b,)."""
        corners = P[:, self.simplices]  # (b, F, d, d)
        if P.shape[-1] == 2:
            edge = corners[:, :, 1] - corners[:, :, 0]
            normal = np.stack([edge[..., 1], -edge[..., 0]], axis=-1)
        else:
            normal = np.cross(corners[:, :, 1] - corners[:, :, 0], corners[:, :, 2] - corners[:, :, 0])
        before = self.equations[:, :-1] @ self.frame.T  # the outward normals when the hull was built (world axes)
        size = np.linalg.norm(normal, axis=-1)  # (b, F)
        scale = np.abs(P).max(axis=(1, 2))
        scale = np.where(scale > 0, scale, 1.0)
        degenerate = (size <= 1e-9 * scale[:, None] ** (P.shape[-1] - 1)).any(axis=1)
        normal = normal * (np.sign((normal * before).sum(-1)) / np.where(size > 0, size, 1.0))[..., None]
        offset = -(normal * corners[:, :, 0]).sum(-1)
        bound = 64 * np.finfo(P.dtype).eps * scale
        spread = (P[:, self.vertices] @ normal.transpose(0, 2, 1) + offset[:, None, :]).max(axis=(1, 2))
        # Seen from the centroid of the vertices: each facet keeps its orientation with a volume far from 0, and
        # together they wind once around it (no fold, no flattening).
        rel = corners - P[:, self.vertices].mean(axis=1)[:, None, None, :]  # (b, F, d, d)
        volume = np.linalg.det(rel)  # (b, F)
        d = P.shape[-1]
        upright = ((np.sign(volume) == self.orientation) & (np.abs(volume) > 1e-9 * scale[:, None] ** d)).all(axis=1)
        if d == 2:
            dot = (rel[..., 0, :] * rel[..., 1, :]).sum(-1)
            angle = np.arctan2(volume * self.orientation, dot)  # signed, in (−π, π]
            full = 2 * np.pi
        else:
            a, b, c = rel[..., 0, :], rel[..., 1, :], rel[..., 2, :]
            na, nb, nc = (np.linalg.norm(x, axis=-1) for x in (a, b, c))
            denominator = (na * nb * nc + (a * b).sum(-1) * nc + (a * c).sum(-1) * nb + (b * c).sum(-1) * na)
            angle = 2 * np.arctan2(volume * self.orientation, denominator)  # solid angle (Van Oosterom–Strackee)
            full = 4 * np.pi
        winds_once = np.abs(angle.sum(axis=1) - full) <= 1e-6 * full
        return normal, offset, ~degenerate & (spread <= bound) & upright & winds_once

    def outside(self, X: np.ndarray) -> float:
        """Largest distance-like violation of X (n, d) outside the hull (≤ 0 inside)."""
        return float(self.violations(X[None], np.ones((1, len(X)), dtype=bool))[0])


@dataclass(frozen=True)
class Facets:
    """A convex polytope as the intersection of halfspaces normal · x + offset ≤ 0 (unit normals)."""

    normal: np.ndarray  # (F, d)
    offset: np.ndarray  # (F,)

    def outside(self, X: np.ndarray) -> float:
        """Largest signed distance of X (n, d) outside the polytope (≤ 0 inside)."""
        return float((X @ self.normal.T + self.offset).max())
