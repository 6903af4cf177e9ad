"""Tests of `hardmax.theory.geometry`: `polytope` (the face lattice of K) and `limit_set` (S).

Known shapes (square, cube, degenerate and embedded sets), LP face tests and full KKT systems as slow
references, a brute force over vertex subsets, scale freedom from 1e-300 to 1e300, the face-lattice budget.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from problems import Problem
from scipy.optimize import linprog
from theory_cases import PROBLEMS, SQUARE, run

from hardmax.theory import leader_layers, limit_set, polytope

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.mark.parametrize("problem", [p for p in PROBLEMS if p.limit_set is not None], ids=lambda p: p.name)
def test_limit_set_of_final_polytope(problem: Problem):
    trajectory = run(problem)
    leaders = trajectory.final.numpy()[leader_layers(trajectory).numpy() >= 0]
    S = limit_set(polytope(leaders), problem.A)
    np.testing.assert_allclose(S, problem.limit_set, atol=1e-12)
    # Every token converges into S (vertices included).
    gap = np.linalg.norm(trajectory.final.numpy()[:, None] - S[None], axis=-1).min(1)
    assert gap.max() < 1e-12


CUBE = np.array(list(itertools.product([-1.0, 1.0], repeat=3)))


def face_sizes(K) -> list[int]:
    return sorted(len(f) for f in K.faces)


def test_polytope_square_with_interior_and_duplicate_points():
    K = polytope(np.concatenate([SQUARE, [[0.2, 0.3], [1, 0], [1, 1]]]))
    assert K.dim == 2 and K.vertices.dtype == np.float64
    np.testing.assert_array_equal(K.vertices, [[-1, -1], [-1, 1], [1, -1], [1, 1]])
    assert K.faces == ((0,), (1,), (2,), (3,), (0, 1), (0, 2), (1, 3), (2, 3), (0, 1, 2, 3))


def test_polytope_cube_merges_triangulated_facets():
    K = polytope(torch.tensor(CUBE))  # tensors are accepted too
    assert K.dim == 3 and len(K.vertices) == 8
    assert face_sizes(K) == [1] * 8 + [2] * 12 + [4] * 6 + [8]


@pytest.mark.parametrize(("points", "dim", "vertices"), [
    (np.array([[0, 1], [1, 1], [2, 1], [-1, 1]], float), 1, [[-1, 1], [2, 1]]),       # collinear in 2-D
    (np.array([[1, 0, 1], [1, 0, -1], [1, 0, 0.5]], float), 1, [[1, 0, -1], [1, 0, 1]]),  # segment in 3-D
    (np.array([[-1.0], [2.0], [0.5]]), 1, [[-1], [2]]),                                # d = 1
    (np.array([[3.0, 3.0], [3.0, 3.0]]), 0, [[3, 3]]),                                 # a point
])
def test_polytope_degenerate(points, dim, vertices):
    K = polytope(points)
    assert K.dim == dim
    np.testing.assert_array_equal(K.vertices, vertices)
    assert K.faces == (((0,),) if dim == 0 else ((0,), (1,), (0, 1)))


def test_polytope_square_in_a_plane_of_r3_and_simplex():
    K = polytope(np.concatenate([SQUARE, np.ones((4, 1))], axis=1))
    assert K.dim == 2 and face_sizes(K) == [1] * 4 + [2] * 4 + [4]
    simplex = polytope(np.concatenate([np.zeros((1, 4)), np.eye(4)]))
    assert simplex.dim == 4 and len(simplex.faces) == 2**5 - 1


def test_polytope_faces_match_an_lp_reference(rng):
    """A vertex subset F is a face iff some c has ⟨c, v⟩ = t on F and ≤ t − 1 off F (an LP)."""
    for d, m in [(2, 9), (3, 10), (3, 6)]:
        K = polytope(rng.normal(size=(m, d)))
        V = K.vertices
        reference = set()
        for size in range(1, len(V) + 1):
            for F in itertools.combinations(range(len(V)), size):
                out = [i for i in range(len(V)) if i not in F]
                # variables (c, t): equalities on F, inequalities off F
                A_eq = np.hstack([V[list(F)], -np.ones((len(F), 1))])
                A_ub = np.hstack([V[out], -np.ones((len(out), 1))]) if out else None
                res = linprog(np.zeros(d + 1), A_ub=A_ub, b_ub=-np.ones(len(out)) if out else None,
                              A_eq=A_eq, b_eq=np.zeros(len(F)), bounds=[(None, None)] * (d + 1))
                if res.status == 0:
                    reference.add(F)
        assert set(K.faces) == reference


def test_polytope_refuses_huge_face_lattices(rng):
    with pytest.raises(ValueError, match="max_faces"):
        polytope(rng.normal(size=(20, 19)))  # a simplex: 2^20 − 1 faces
    with pytest.raises(ValueError, match="impractical"):
        polytope(rng.normal(size=(30, 16)))
    with pytest.raises(ValueError, match="max_faces"):
        limit_set(polytope(CUBE), max_faces=10)
    for bad in (np.zeros((0, 2)), np.array([[np.nan, 0.0]]), np.zeros(3)):
        with pytest.raises(ValueError):
            polytope(bad)


def test_limit_set_known_shapes():
    # Square: vertices and midpoints of the sides; not the origin (the projection onto aff K = R², inside
    # K, but no nonzero token reaches it: ‖z‖_A never decreases).
    expected = [[-1, -1], [-1, 0], [-1, 1], [0, -1], [0, 1], [1, -1], [1, 0], [1, 1]]
    np.testing.assert_allclose(limit_set(polytope(SQUARE)), expected, atol=1e-15)
    # Cube: the centres of its 26 proper faces (vertices, edges, squares), not of the cube itself.
    centres = [p for p in itertools.product([-1, 0, 1], repeat=3) if any(p)]
    np.testing.assert_allclose(limit_set(polytope(CUBE)), np.array(centres), atol=1e-15)
    # A triangle away from the origin: only one side's projection lands inside it.
    S = limit_set(polytope(np.array([[1, 1], [3, 1], [2, 3]], float)))
    np.testing.assert_allclose(S, [[1, 1], [2, 3], [2.8, 1.4], [3, 1]], atol=1e-14)
    # Non-identity A: min x1² + 4 x2² on x1 + x2 = 2 is (1.6, 0.4), not the Euclidean (1, 1).
    S = limit_set(polytope(np.array([[2, 0], [0, 2]], float)), np.diag([1.0, 4.0]))
    np.testing.assert_allclose(S, [[0, 2], [1.6, 0.4], [2, 0]], atol=1e-14)
    # d = 1 and a single point.
    np.testing.assert_allclose(limit_set(polytope(np.array([[-1.0], [2.0]]))), [[-1], [2]], atol=1e-15)
    np.testing.assert_array_equal(limit_set(polytope(np.array([[3.0, -3.0]]))), [[3, -3]])
    with pytest.raises(ValueError, match="positive definite"):
        limit_set(polytope(SQUARE), -np.eye(2))


def _reference_limit_set(K, A) -> np.ndarray:
    """Slow and plain: full KKT system [2 G, 1; 1ᵀ, 0] by least squares, membership by an LP."""
    found = []
    for face in K.faces:
        V = K.vertices[list(face)]
        m = len(V)
        G = V @ A @ V.T
        kkt = np.block([[2 * G, np.ones((m, 1))], [np.ones((1, m)), np.zeros((1, 1))]])
        lam = np.linalg.lstsq(kkt, np.append(np.zeros(m), 1.0), rcond=None)[0][:m]
        p = V.T @ lam
        res = linprog(np.zeros(m), A_eq=np.vstack([V.T, np.ones((1, m))]), b_eq=np.append(p, 1.0),
                      bounds=[(0, None)] * m)
        # Tight S: the vertices, and points that are not the origin and are self-consistent.
        if m == 1 or (res.status == 0 and np.linalg.norm(p) > 1e-9 and ((K.vertices - p) @ (A @ p)).max() <= 1e-9):
            found.append(p)
    S = np.unique(np.round(np.array(found).reshape(-1, K.vertices.shape[1]), 9), axis=0)
    return S


def _brute_force_limit_set(V: np.ndarray, A: np.ndarray) -> np.ndarray:
    """The vertices, and for every subset of two or more vertices the A-projection of 0 onto its affine
    hull (plain KKT solve), kept when it lies in K (LP over all vertices), is not the origin and is
    self-consistent."""
    found = list(V)
    for size in range(2, len(V) + 1):
        for subset in itertools.combinations(range(len(V)), size):
            W = V[list(subset)]
            m = len(W)
            kkt = np.block([[2 * W @ A @ W.T, np.ones((m, 1))], [np.ones((1, m)), np.zeros((1, 1))]])
            p = W.T @ np.linalg.lstsq(kkt, np.append(np.zeros(m), 1.0), rcond=None)[0][:m]
            inside = linprog(np.zeros(len(V)), A_eq=np.vstack([V.T, np.ones((1, len(V)))]), b_eq=np.append(p, 1.0),
                             bounds=[(0, None)] * len(V)).status == 0
            if inside and np.linalg.norm(p) > 1e-9 and ((V - p) @ (A @ p)).max() <= 1e-9:
                found.append(p)
    return np.unique(np.round(np.array(found), 9), axis=0)


ISSUE_3D = np.array([[1, 0, 1], [1, 0, -1], [1, 1, 0], [-1, 0, 0], [-0.5, -1, 0], [-0.5, 0.5, 1]], dtype=np.float64)


@pytest.mark.parametrize("name", ["square", "cube", "triangle", "issue_3d", "random_2d", "random_3d"])
def test_limit_set_equals_a_brute_force_over_vertex_subsets(name, rng):
    shapes = {"square": (SQUARE, np.eye(2)), "cube": (CUBE, np.eye(3)),
              "triangle": (np.array([[1, 1], [3, 1], [2, 3]], float), np.diag([1.0, 3.0])),
              "issue_3d": (ISSUE_3D, np.eye(3)),
              "random_2d": (rng.normal(size=(7, 2)), np.array([[2.0, 0.5], [0.5, 1.0]])),
              "random_3d": (rng.normal(size=(7, 3)), np.eye(3))}
    points, A = shapes[name]
    K = polytope(points)
    S = limit_set(K, A)
    np.testing.assert_allclose(np.unique(np.round(S, 9), axis=0), _brute_force_limit_set(K.vertices, A), atol=1e-9)
    assert (np.linalg.norm(S, axis=1) > 0).all()  # never the origin


def test_a_limit_on_the_relative_boundary_of_its_face_is_in_S():
    """The issue's example: (1, 0, 0) lies on the boundary of the face x = 1 and is a limit (the
    follower (1/2, −1/10, 0) converges to it, exact arithmetic in test_exactness), so it is in S."""
    S = limit_set(polytope(ISSUE_3D))
    assert np.linalg.norm(S - np.array([1.0, 0.0, 0.0]), axis=1).min() < 1e-12


def test_limit_set_matches_a_kkt_and_lp_reference(rng):
    for d, m in [(2, 7), (3, 9), (3, 5), (2, 3)]:
        M = rng.normal(size=(d, d))
        A = M @ M.T + 0.5 * np.eye(d)
        K = polytope(rng.normal(size=(m, d)) + rng.normal(size=d) * (d == 3))
        np.testing.assert_allclose(np.unique(np.round(limit_set(K, A), 9), axis=0), _reference_limit_set(K, A),
                                   atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_facets_through_moved_vertices_only_certify_points_of_the_hull(seed):
    """`HullTest.through` is an inner test: whatever the moves, a point it finds inside is inside conv(P now)."""
    from scipy.spatial import Delaunay

    from hardmax.theory.geometry import HullTest

    rng = np.random.default_rng(seed)
    d = 2 + seed % 2
    P = rng.standard_normal((25, d))
    test = HullTest.of(P, 1e-9)
    certified = 0
    for step in range(40):
        # inward, as the dynamics moves them, with now and then a jolt that may change the hull's structure
        P = P - 0.02 * (P - P.mean(0)) + (0.05 if step % 10 == 9 else 0.001) * rng.standard_normal(P.shape)
        facets = test.through(P)
        if facets is None:
            continue
        X = P.mean(0) + 1.5 * rng.standard_normal((200, d)) * P.std(0)
        inside = (X @ facets.normal.T + facets.offset).max(axis=1) <= 0
        assert (Delaunay(P).find_simplex(X[inside]) >= 0).all()
        certified += int(inside.sum())
    assert certified > 0


@pytest.mark.parametrize("scale", [1e-300, 1e-30, 1.0, 1e30, 1e300])
def test_polytope_is_scale_free(scale):
    """The face lattice of c·P is that of P, down to 1e-300 and up to 1e300 (qhull sees unit points)."""
    P = np.array([[1.0, 1, 0], [1, -1, 0], [-1, 1, 0], [-1, -1, 0], [0, 0, 1], [0.1, 0.2, 0.3]])
    reference = polytope(P)
    K = polytope(P * scale)
    assert K.faces == reference.faces and K.dim == reference.dim == 3
    np.testing.assert_allclose(K.vertices, reference.vertices * scale, rtol=1e-15)


def test_limit_set_batched_faces_agree_with_face_by_face_projections():
    """`limit_set` projects faces of one size together (`_project_origins`) and skips the NNLS for a projection
    inside a simplex face: every point of S is the face-by-face `project_origin` of some face, inside it, and
    every face-by-face projection that passes the conditions is in S."""
    from hardmax.theory.geometry import _project_origins, hull_distance, project_origin

    rng = np.random.default_rng(7)
    for d in (2, 3):
        points = rng.normal(size=(14, d))
        M = rng.normal(size=(d, d))
        A = M @ M.T + 0.5 * np.eye(d)
        K = polytope(points)
        S = limit_set(K, A)
        tol = math.sqrt(np.finfo(np.float64).eps) * float(np.abs(K.vertices).max())
        expected = []
        for face in K.faces:
            F = K.vertices[list(face)]
            p = F[0] if len(face) == 1 else project_origin(F, A, tol)
            batched = _project_origins(F[None], A, tol)[0]
            assert np.allclose(batched, p, rtol=0, atol=1e-12)
            if len(face) == 1 or (np.linalg.norm(p) > tol and ((K.vertices - p) @ (A @ p)).max()
                                  <= tol * np.linalg.norm(A @ p) and hull_distance(p, F) <= tol):
                expected.append(p)
        assert len(S) == len(np.unique(np.round(np.array(expected) / tol), axis=0))
        assert all(np.abs(S - p).max(axis=1).min() <= 1e-9 for p in expected)


def test_a_projection_accepted_without_the_nnls_is_within_tol_of_its_face():
    from hardmax.theory.geometry import _inside_simplices, hull_distance

    rng = np.random.default_rng(11)
    for d, m in ((2, 2), (3, 2), (3, 3), (3, 4), (4, 3)):
        F = rng.normal(size=(200, m, d))
        F[:100, -1] = F[:100, 0] + 1e-9 * rng.normal(size=(100, d))  # thin faces: near-coincident vertices
        lam = rng.dirichlet(np.ones(m), size=200) - rng.choice([0.0, 0.3], size=(200, 1)) * np.eye(m)[0]
        P = np.einsum("gm,gmd->gd", lam / lam.sum(1, keepdims=True), F)
        tol = 1e-8
        accepted = _inside_simplices(F, P, tol)
        assert accepted.any()
        assert all(hull_distance(P[g], F[g]) <= tol for g in np.nonzero(accepted)[0])
