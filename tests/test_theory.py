"""Tests of `hardmax.theory`.

Known answers (tests/problems.py: the Figure 2 configurations, exact ties with multiplicities, d = 1, a
non-identity A, a segment in R^3); geometry on known shapes and against slow reference solutions (LP
face tests, full KKT systems); agreement with the engine's attention matrices; invariants under
permutation (hypothesis); Theorem 2.1 on hundreds of random configurations; and doctored trajectories,
each of which must make its check fail.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
import reference
import torch
from hypothesis import given
from hypothesis import strategies as st
from problems import Problem, problems
from scipy.optimize import linprog

import hardmax.theory as theory
from hardmax.dynamics import Euler, Save, Softmax, simulate
from hardmax.theory import (
    FIGURE2_ALPHA,
    attention_sets,
    check_theorem,
    figure2_configurations,
    find_clusters,
    find_leaders,
    leader_layers,
    limit_set,
    paper_figure2_configurations,
    polytope,
)

PROBLEMS = problems()


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


def run(problem: Problem, layers: int | None = None, **kwargs):
    return simulate(problem.tokens, alpha=problem.alpha, layers=problem.layers if layers is None else layers,
                    A=problem.A, **kwargs)


def by_name(name: str) -> Problem:
    return next(p for p in PROBLEMS if p.name == name)


def partition(labels) -> set[frozenset[int]]:
    """The grouping of token indices induced by labels (any hashable per token)."""
    groups: dict = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, set()).add(i)
    return {frozenset(g) for g in groups.values()}


# --------------------------------------------------------------------------------------------
# Known answers
# --------------------------------------------------------------------------------------------


def test_figure2_configurations_are_dyadic_2d_float64():
    configs = figure2_configurations()
    assert list(configs) == ["triangle", "emerging_leader", "square", "non_leader_clusters"]
    assert FIGURE2_ALPHA == 0.5
    for tokens in configs.values():
        assert tokens.dtype == np.float64 and tokens.ndim == 2 and tokens.shape[1] == 2
        assert np.array_equal(tokens * 8, np.round(tokens * 8))  # exact in binary: ties are exact
        assert len(np.unique(tokens, axis=0)) == len(tokens) and (np.abs(tokens).sum(1) > 0).all()


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_limits_leaders_and_attention_sets(problem: Problem):
    trajectory = run(problem)
    scale = np.abs(problem.tokens).max()
    np.testing.assert_allclose(trajectory.final.numpy(), problem.limits, rtol=0, atol=1e-12 * scale)
    assert tuple(leader_layers(trajectory).tolist()) == problem.leader_layers
    assert find_leaders(problem.tokens, A=problem.A).tolist() == [k == 0 for k in problem.leader_layers]
    if problem.attention_sets is not None:
        C = attention_sets(problem.tokens, A=problem.A).numpy()
        assert tuple(tuple(np.nonzero(row)[0].tolist()) for row in C) == problem.attention_sets


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_clusters(problem: Problem):
    clusters = find_clusters(run(problem))
    assert clusters.labels.dtype == torch.int64 and clusters.leader.dtype == torch.int64
    assert partition(clusters.labels.tolist()) == partition(map(tuple, problem.limits))
    assert tuple(clusters.leader.tolist()) == problem.cluster_leader
    # Labels count by first appearance, so centers line up with the first token of each cluster.
    first = [clusters.labels.tolist().index(c) for c in range(len(clusters.centers))]
    np.testing.assert_allclose(clusters.centers.numpy(), problem.limits[first], atol=1e-12)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_theorem_holds_on_known_answers(problem: Problem):
    report = check_theorem(run(problem))
    assert report.passed, report.table()
    assert report.hypotheses_ok == (problem.name != "ties_with_multiplicity")  # it has a duplicate
    vertices = {tuple(problem.limits[i]) for i, k in enumerate(problem.leader_layers) if k >= 0}
    assert report["vertices"].numbers["leaders"] == len(vertices)
    if report["rate"].numbers["samples"]:
        assert report["rate"].numbers["measured"] == pytest.approx(1 / (1 + problem.alpha), rel=1e-6)


@pytest.mark.parametrize("problem", [p for p in PROBLEMS if p.limit_set is not None], ids=lambda p: p.name)
def test_limit_set_of_final_polytope(problem: Problem):
    trajectory = run(problem)
    leaders = trajectory.final.numpy()[leader_layers(trajectory).numpy() >= 0]
    S = limit_set(polytope(leaders), problem.A)
    np.testing.assert_allclose(S, problem.limit_set, atol=1e-12)
    # Every token converges into S (vertices included).
    gap = np.linalg.norm(trajectory.final.numpy()[:, None] - S[None], axis=-1).min(1)
    assert gap.max() < 1e-12


def test_ties_counted_with_multiplicity():
    """(1/2, 1/2) ties with all four tokens; its first target is (5/8, 3/8) because (1,0) counts twice."""
    problem = by_name("ties_with_multiplicity")
    step = run(problem, layers=1).tokens[1, 3].numpy()
    np.testing.assert_allclose(step, [13 / 24, 11 / 24], rtol=0, atol=1e-15)
    leaders = find_leaders(problem.tokens).tolist()
    assert leaders == [True, True, True, False]  # identical tokens lead together


def test_attention_sets_match_the_engine_at_every_layer(rng):
    """Theory and dynamics agree on who attends to whom (ties, duplicates and padding included)."""
    cases = [(p.tokens, p.A, None) for p in PROBLEMS]
    z = rng.integers(-4, 5, size=(3, 12, 2)) / 4.0  # dyadic: many exact ties and duplicates
    cases.append((z, None, rng.random((3, 12)) < 0.8))
    for tokens, A, mask in cases:
        trajectory = simulate(tokens, alpha=0.5, layers=12, A=A, mask=mask, save=Save(attention=True))
        for k in range(12):
            C = attention_sets(trajectory.tokens[k], A=A, mask=mask)
            assert torch.equal(C, trajectory.attention[k] > 0), (k, tokens)


@given(st.integers(1, 9), st.integers(1, 3), st.data())
def test_engine_step_moves_tokens_towards_their_attention_sets(n: int, d: int, data):
    """z^{k+1} = z^k + γ (mean_{j ∈ C_i} z_j^k − z^k) with C_i from `attention_sets`: the engine's fast
    path (gather for a single maximiser) and the theory's tie rule agree, duplicates counted."""
    tokens = np.array(data.draw(st.lists(st.lists(st.integers(-4, 4), min_size=d, max_size=d),
                                         min_size=n, max_size=n)), dtype=np.float64) / 4
    trajectory = simulate(tokens, alpha=0.5, layers=30)
    gamma = 0.5 / 1.5
    scale = max(1.0, float(np.abs(tokens).max()))
    for k in range(30):
        z = trajectory.tokens[k]
        C = attention_sets(z).to(z.dtype)
        target = (C @ z) / C.sum(-1, keepdim=True)
        expected = z + gamma * (target - z)
        assert torch.allclose(trajectory.tokens[k + 1], expected, rtol=0, atol=1e-14 * scale), k


def test_snapshot_leaders_versus_leader_layers():
    """In one snapshot a follower that converged onto its leader is a copy of it; the history is not."""
    trajectory = run(by_name("figure2_square"))
    snapshot = find_leaders(trajectory.final)
    assert snapshot.all()  # every follower sits on its vertex to the last bits
    assert (leader_layers(trajectory) >= 0).tolist() == [True] * 4 + [False] * 7
    # The engine keeps followers as offsets from their leader; their positions round onto the vertex,
    # so even exact identity (atol=0) sees one point, merged with multiplicity: a leader.
    assert find_leaders(trajectory.final, atol=0.0).all()


def test_masked_tokens_are_ignored():
    problem = by_name("figure2_non_leader_clusters")
    n = len(problem.tokens)
    junk = np.array([[50.0, 50.0], [0.0, 0.0], [1.0, 1.0]])  # far out, the origin, on a vertex
    tokens = np.concatenate([problem.tokens[:3], junk, problem.tokens[3:]])
    mask = np.array([True] * 3 + [False] * 3 + [True] * (n - 3))
    trajectory = simulate(tokens, alpha=problem.alpha, layers=problem.layers, mask=mask)
    np.testing.assert_allclose(trajectory.final.numpy()[mask], problem.limits, rtol=0, atol=1e-12)
    layers = leader_layers(trajectory).numpy()
    assert tuple(layers[mask]) == problem.leader_layers and (layers[~mask] == -1).all()
    clusters = find_clusters(trajectory)
    assert (clusters.labels.numpy()[~mask] == -1).all() and (clusters.leader.numpy()[~mask] == -1).all()
    assert len(clusters.centers) == 6
    C = attention_sets(tokens, mask=mask).numpy()
    assert not C[~mask].any() and not C[:, ~mask].any()
    assert not find_leaders(tokens, mask=mask).numpy()[~mask].any()
    assert check_theorem(trajectory).passed


def test_batched_equals_one_by_one(rng):
    z = rng.normal(size=(3, 10, 2))
    mask = np.ones((3, 10), dtype=bool)
    mask[1, 7:] = False
    batch = simulate(z, alpha=0.8, layers=60, mask=mask)
    layers, clusters = leader_layers(batch), find_clusters(batch)
    for b in range(3):
        one = simulate(z[b], alpha=0.8, layers=60, mask=mask[b])
        assert torch.equal(leader_layers(one), layers[b])
        assert torch.equal(find_clusters(one).labels, clusters.labels[b])
        assert torch.equal(find_clusters(one).leader, clusters.leader[b])
        assert torch.allclose(find_clusters(one).centers, clusters.centers[b])
        assert torch.equal(find_leaders(z[b], mask=mask[b]), find_leaders(z, mask=mask)[b])
    assert check_theorem(batch).passed


# --------------------------------------------------------------------------------------------
# Geometry: polytope and limit_set
# --------------------------------------------------------------------------------------------

SQUARE = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=np.float64)
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


# --------------------------------------------------------------------------------------------
# Theorem 2.1 on random configurations
# --------------------------------------------------------------------------------------------

KINDS = ("gauss", "cube", "shifted", "anchors", "mirror")


def random_tokens(rng: np.random.Generator, kind: str, batch: int, n: int, d: int) -> np.ndarray:
    """Random configurations with different geometry; "mirror" is symmetric under x_d ↦ −x_d, so the
    tokens on the mirror tie exactly and converge to points of S that are not vertices."""
    if kind == "gauss":
        return rng.normal(size=(batch, n, d))
    if kind == "cube":
        return rng.uniform(-1, 1, size=(batch, n, d))
    if kind == "shifted":  # all tokens on one side of the origin
        return 0.5 * rng.normal(size=(batch, n, d)) + 2 * rng.normal(size=(batch, 1, d))
    if kind == "anchors":  # a few far tokens, many near the origin (many followers even in 16-D)
        z = 0.3 * rng.normal(size=(batch, n, d))
        z[:, : max(1, n // 8)] *= 6
        return z
    half = (n + 1) // 3
    y = rng.uniform(-1, 1, size=(batch, half, d))
    on = rng.uniform(-1, 1, size=(batch, n - 2 * half, d))
    on[..., -1] = 0
    return np.concatenate([y, y * np.append(np.ones(d - 1), -1), on], axis=1)


def random_spd(rng: np.random.Generator, d: int, mirror: bool) -> np.ndarray:
    M = rng.normal(size=(d, d))
    A = M @ M.T / d + 0.2 * np.eye(d)
    if mirror:  # keep the mirror symmetry: no coupling between x_d and the rest
        A[-1, :-1] = A[:-1, -1] = 0
    return A


def layers_for(alpha: float) -> int:
    """Enough layers for (1+α)^{-K} ≈ e^{-36} ≈ 2e-16, within [60, 200]."""
    return int(min(200, max(60, math.ceil(36 / math.log1p(alpha)))))


@pytest.mark.parametrize("d", [1, 2, 3, 5, 16])
def test_theorem_on_random_configurations(d: int):
    """60 sequences per dimension (n ∈ {3, 8, 24}, five geometries, batches of 4), α ∈ [0.2, 2], random
    SPD A half of the time, plus one sequence of 256 tokens."""
    rng = np.random.default_rng(1000 + d)
    followers = off_vertex = 0
    cases = [(n, kind, 4) for n in (3, 8, 24) for kind in KINDS if not (kind == "mirror" and d == 1)]
    cases.append((256, "anchors" if d > 3 else "cube", 1))
    for n, kind, batch in cases:
        alpha = float(rng.uniform(0.2, 2.0))
        A = random_spd(rng, d, kind == "mirror") if rng.random() < 0.5 else None
        trajectory = simulate(random_tokens(rng, kind, batch, n, d), alpha=alpha, layers=layers_for(alpha), A=A)
        report = check_theorem(trajectory)
        assert report.passed, f"d={d} n={n} {kind} α={alpha:.3f} A={'random' if A is not None else 'I'}\n" + \
            report.table()
        clusters = find_clusters(trajectory)
        followers += int((leader_layers(trajectory) < 0).sum())
        off_vertex += int((clusters.leader < 0).sum())
    assert followers > 50  # the check had work to do
    if d >= 2:
        assert off_vertex > 0  # some tokens converge to points of S that are not vertices (mirror)


def test_unfinished_convergence_is_allowed_for_by_the_tolerance():
    """After 8 layers the followers are still far from their limits, yet within the stated tolerance."""
    problem = by_name("figure2_triangle")
    trajectory = run(problem, layers=8)
    distance = np.linalg.norm(trajectory.final.numpy() - problem.limits, axis=1).max()
    assert distance > 1e-3
    report = check_theorem(trajectory)
    assert report.passed, report.table()
    assert 1e-9 < report["limits"].numbers["excess"] <= 1


@given(st.integers(2, 7), st.integers(1, 3), st.data())
def test_permutation_equivariance(n: int, d: int, data):
    """Relabelling tokens relabels attention sets, leaders, leader layers and clusters (dyadic tokens:
    exact ties and duplicates are common)."""
    tokens = np.array(data.draw(st.lists(st.lists(st.integers(-4, 4), min_size=d, max_size=d),
                                         min_size=n, max_size=n)), dtype=np.float64) / 4
    perm = np.array(data.draw(st.permutations(range(n))))
    C, Cp = attention_sets(tokens), attention_sets(tokens[perm])
    assert torch.equal(Cp, C[perm][:, perm])
    assert torch.equal(find_leaders(tokens[perm]), find_leaders(tokens)[perm])
    trajectory, permuted = simulate(tokens, alpha=0.5, layers=40), simulate(tokens[perm], alpha=0.5, layers=40)
    assert torch.equal(leader_layers(permuted), leader_layers(trajectory)[perm])
    assert partition(find_clusters(permuted).labels.tolist()) == \
        partition(find_clusters(trajectory).labels[perm].tolist())


@given(st.integers(1, 8), st.integers(1, 3), st.floats(0.2, 2.0), st.data())
def test_theorem_on_dyadic_configurations(n: int, d: int, alpha: float, data):
    """Exact ties, duplicates and zero tokens included (the theorem excludes the last two; the check
    holds anyway)."""
    tokens = np.array(data.draw(st.lists(st.lists(st.integers(-4, 4), min_size=d, max_size=d),
                                         min_size=n, max_size=n)), dtype=np.float64) / 4
    report = check_theorem(simulate(tokens, alpha=alpha, layers=layers_for(alpha)))
    assert report.passed, report.table()


# --------------------------------------------------------------------------------------------
# Doctored trajectories: every check must be able to fail
# --------------------------------------------------------------------------------------------


def doctor(trajectory, edit) -> object:
    tokens = trajectory.tokens.clone()
    edit(tokens)
    return dataclasses.replace(trajectory, tokens=tokens)


def _set(index, value):
    def edit(tokens):
        tokens[index] = torch.as_tensor(value, dtype=tokens.dtype)
    return edit


DOCTORED = {
    # name: (problem, edit of the (L, n, d) tokens or a field replacement, the check that must fail)
    "token_off_S": ("figure2_non_leader_clusters", _set((-1, 4), [1.0, 0.2]), "limits"),
    "token_outside_K": ("figure2_square", _set((-1, 5), [-1.5, 1.0]), "limits"),
    "leader_moves": ("figure2_square", _set((slice(60, None), 0), [0.9, 0.9]), "leaders_fixed"),
    "hull_grows": ("figure2_triangle", lambda t: t[-1].mul_(1.05), "hull"),
    "wrong_alpha": ("figure2_square", "alpha", "rate"),
    "leaders_merge": ("figure2_emerging_leader", lambda t: t[10:, 1].copy_(t[10:, 0]), "vertices"),
    "norm_shrinks": ("figure2_triangle", lambda t: t[60:, 3].mul_(0.5), "norms"),
}


@pytest.mark.parametrize("name", list(DOCTORED))
def test_doctored_trajectories_fail(name: str):
    problem_name, edit, check = DOCTORED[name]
    trajectory = run(by_name(problem_name), layers=80)
    assert check_theorem(trajectory).passed
    if edit == "alpha":
        bad = dataclasses.replace(trajectory, solver=Euler.layers(trajectory.alpha * 1.2))
    else:
        bad = doctor(trajectory, edit)
    report = check_theorem(bad)
    assert not report.passed and report[check].status == "failed", report.table()
    assert report.failed_sequences == (0,) and report.failures
    assert "| failed |" in report.table()


ISSUE_DOCTORED = {
    # name: (edit of the (L, n, d) tokens of figure2_non_leader_clusters, or "alpha"; the check that must fail)
    "wrong_alpha": ("alpha", "rate"),
    "token_moved_by_0.1": (lambda t: t[-1, 4].add_(torch.tensor([0.0, 0.1], dtype=t.dtype)), "limits"),
    # the issue's tipped tie: (1/2, 0) ending at (1, 0.59) instead of (1, 0), converged there
    "tipped_tie": (lambda t: t[-3:, 4].copy_(torch.tensor([1.0, 0.59], dtype=t.dtype)), "limits"),
    "token_at_origin": (lambda t: t[-3:, 5].zero_(), "limits"),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", list(ISSUE_DOCTORED))
def test_doctored_trajectories_fail_the_right_check_in_both_dtypes(name, dtype):
    """The issue's doctored runs: each fails the named check, in float32 as in float64 (the tolerance
    follows the token's measured convergence, not the diameter)."""
    problem = by_name("figure2_non_leader_clusters")
    trajectory = simulate(torch.tensor(problem.tokens, dtype=dtype), alpha=problem.alpha, layers=40)
    assert check_theorem(trajectory).passed
    edit, check = ISSUE_DOCTORED[name]
    if edit == "alpha":
        bad = dataclasses.replace(trajectory, solver=Euler.layers(trajectory.alpha * 1.2))
    else:
        bad = doctor(trajectory, edit)
    report = check_theorem(bad)
    assert not report.passed and report[check].status == "failed", report.table()


def test_a_check_without_samples_is_not_tested_not_passed():
    """Leaders only: no follower, so the rate check has no sample and says so."""
    report = check_theorem(simulate(SQUARE, alpha=0.5, layers=5))
    assert report["rate"].numbers["samples"] == 0 and report["rate"].status == "not tested"
    assert "| 4. follower rate per layer | no samples |" in report.table()
    assert "not tested" in report.table().splitlines()[7]


def test_exact_hull_check_sees_a_point_just_outside_an_edge():
    """Move one token 1e-4 beyond the edge from (2, 0) to (−1, 2) of the triangle, at the last layer."""
    trajectory = run(by_name("figure2_triangle"), layers=60)
    normal = np.array([2.0, 3.0]) / math.sqrt(13)  # outward normal of that edge, which passes (8/13, 12/13)
    bad = doctor(trajectory, _set((-1, 7), np.array([8 / 13, 12 / 13]) + 1e-4 * normal))
    report = check_theorem(bad, exact_hull=True)
    hull = report["hull"]
    assert hull.numbers["exact"] and hull.status == "failed" and hull.numbers["growth"] == pytest.approx(1e-4, rel=1e-3)
    assert not check_theorem(bad, exact_hull=False)["hull"].numbers["exact"]


@pytest.mark.parametrize("d", [2, 3])
def test_exact_hull_check_sees_a_late_escape_of_a_slow_run(d):
    """α = 0.05: the hull's vertices move at every layer, so the check tests most layers against the last hull's
    facets drawn through the vertices' current positions (`HullTest.through`); a token put 1e-4 R outside
    conv(Z^119) at layer 120 is still caught, and measured exactly."""
    from scipy.spatial import ConvexHull

    z = np.random.default_rng(d).standard_normal((30, d))
    trajectory = simulate(z, alpha=0.05, layers=150)
    before = trajectory.tokens[119].numpy()
    hull = ConvexHull(before)
    facet, R = hull.simplices[0], float(np.linalg.norm(z, axis=1).max())
    normal = hull.equations[0, :-1]
    mover = next(i for i in range(30) if i not in hull.vertices)
    bad = doctor(trajectory, _set((120, mover), before[facet].mean(0) + 1e-4 * R * normal))
    report = check_theorem(bad, exact_hull=True)
    assert report["hull"].status == "failed"
    assert report["hull"].numbers["growth"] == pytest.approx(1e-4 * R, rel=1e-3)
    assert check_theorem(trajectory, exact_hull=True)["hull"].passed


def _hand_made(frames) -> object:
    """A trajectory whose layers are the given (L, n, d) positions (what a doctored run looks like)."""
    Z = np.asarray(frames, dtype=np.float64)
    return dataclasses.replace(simulate(Z[0], alpha=0.5, layers=len(Z) - 1), tokens=torch.tensor(Z))


def test_hull_check_is_not_fooled_by_a_folded_hull():
    """A kite whose far corner moves onto another corner: the old hull's edges through it fold onto the new
    triangle's sides (every vertex still inside every edge's line, yet they bound a quadrant); a token then leaves
    the triangle by 0.01 across its long side, and is caught (review of the kept-hull test)."""
    a, b, c, d, e = np.array([[0, 0], [2, 0], [3, 3], [0, 2], [0.5, 0.5]], dtype=np.float64) + 2.0
    Z0 = np.stack([a, b, c, d, e])
    Z1 = Z0.copy()
    Z1[2] = a
    Z2 = Z1.copy()
    Z2[4] = (b + d) / 2 + 0.01 * np.array([1.0, 1.0]) / math.sqrt(2)
    hull = check_theorem(_hand_made([Z0, Z1, Z2]), exact_hull=True)["hull"]
    assert hull.status == "failed" and hull.numbers["growth"] == pytest.approx(0.01, rel=1e-6)


def test_hull_check_is_not_fooled_by_a_flattened_hull():
    """A square pyramid whose apex drops into its base: every facet of the old hull lies in one plane; a token
    leaving the new hull in that plane is caught."""
    Z0 = np.array([[0, 0, 0], [2, 0, 0], [2, 2, 0], [0, 2, 0], [1, 1, 1], [1, 1, 0.3]], dtype=np.float64) + 2.0
    Z1 = Z0.copy()
    Z1[4] = np.array([1, 1, 0]) + 2.0
    Z2 = Z1.copy()
    Z2[5] = np.array([1, -0.1, 0]) + 2.0
    assert check_theorem(_hand_made([Z0, Z1, Z2]), exact_hull=True)["hull"].status == "failed"


def test_hull_check_sees_a_point_beyond_a_sharp_edge():
    """Beyond the sharp edge of a thin blade a facet's distance is a sliver of the true one; the support test in
    the directions A z_i sees it (it runs with the exact test too)."""
    Z0 = np.array([[-1, 2, 0], [1, 2, 0], [0, 1, 1e-3], [0, 1, -1e-3], [0, 1.5, 0]], dtype=np.float64)
    atol = check_theorem(_hand_made([Z0, Z0])).atol
    Z1 = Z0.copy()
    Z1[4] = [0, 2 + 100 * atol, 0]
    hull = check_theorem(_hand_made([Z0, Z1]), exact_hull=True)["hull"]
    assert hull.status == "failed" and hull.numbers["growth"] == pytest.approx(100 * atol, rel=1e-3)


def test_leader_history_is_recomputed_after_a_write_through_numpy():
    """The checks share one leader history per trajectory; a write through a NumPy view (which torch's version
    counter does not see) must not leave them a stale one."""
    trajectory = run(by_name("figure2_square"), layers=30)
    assert check_theorem(trajectory).passed
    trajectory.tokens.numpy()[-1, 5] = [-1.5, 1.0]  # a token outside K at the last layer
    fresh = check_theorem(dataclasses.replace(trajectory, tokens=trajectory.tokens.clone()))
    again = check_theorem(trajectory)
    assert [c.status for c in again.checks] == [c.status for c in fresh.checks] and not again.passed


def test_checks_of_a_trajectory_made_in_inference_mode():
    with torch.inference_mode():
        trajectory = simulate(SQUARE, alpha=0.5, layers=10)
    assert check_theorem(trajectory).passed and leader_layers(trajectory).tolist()[:4] == [0, 0, 0, 0]


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


def test_wrong_alpha_fails_only_the_rate_check():
    trajectory = run(by_name("figure2_square"), layers=80)
    report = check_theorem(dataclasses.replace(trajectory, solver=Euler.layers(trajectory.alpha * 1.2)))
    assert report["rate"].status == "failed"
    assert all(report[name].passed for name in ("limits", "leaders_fixed", "hull", "vertices"))
    assert report["rate"].numbers["measured"] == pytest.approx(2 / 3, rel=1e-6)
    assert report["rate"].numbers["expected"] == pytest.approx(1 / 1.6, rel=1e-12)  # α = 0.5 · 1.2


def test_a_leader_emerging_at_the_last_layer_is_not_settled():
    report = check_theorem(run(by_name("figure2_emerging_leader"), layers=1))
    assert report["leaders_fixed"].status == "failed" and report["leaders_fixed"].numbers["last_leader_layer"] == 1
    assert check_theorem(run(by_name("figure2_emerging_leader"), layers=8)).passed


def test_failed_sequence_is_named_in_a_batch(rng):
    z = rng.uniform(-1, 1, size=(3, 12, 2))
    trajectory = simulate(z, alpha=0.5, layers=80)
    bad = doctor(trajectory, lambda t: t[-1, 1].mul_(1.5))
    report = check_theorem(bad)
    assert report.failed_sequences == (1,) and all(f.startswith("sequence 1:") for f in report.failures)
    assert check_theorem(trajectory).failed_sequences == ()


def test_report_table_and_softmax_refused():
    report = check_theorem(run(by_name("figure2_square")))
    table = report.table()
    assert table.splitlines()[0].endswith("PASSED")
    assert "| check | value | expected | status |" in table and table.count("\n|") == 9  # header, rule, 7 rows
    softmax = simulate(SQUARE, Softmax(1.0), alpha=0.5, layers=3)
    with pytest.raises(ValueError, match="hardmax"):
        check_theorem(softmax)


def test_float32_trajectory():
    z = np.random.default_rng(5).normal(size=(2, 20, 3))
    report = check_theorem(simulate(torch.tensor(z, dtype=torch.float32), alpha=0.7, layers=80))
    assert report.passed, report.table()
    assert report.atol > 1e-5  # sqrt(eps) of float32, times R


# --------------------------------------------------------------------------------------------
# Input validation (issue #12, item 5): what simulate refuses, the theory functions refuse too.
# --------------------------------------------------------------------------------------------

_SQUARE = [[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0], [0.5, 0.0]]


def _with(value, at=(0, 0)):
    z = torch.tensor(_SQUARE, dtype=torch.float64)
    z[at] = value
    return z


@pytest.mark.parametrize("tokens, message", [
    (_with(float("nan")), "NaN or inf"),
    (_with(float("inf")), "NaN or inf"),
    (torch.tensor(_SQUARE, dtype=torch.complex128), "must be real"),
    (np.array(_SQUARE, dtype=np.complex64), "must be real"),
    (np.array([["a", "b"]]), "must be numeric"),
    (torch.zeros(0, 5, 2), "at least one sequence"),
    (torch.zeros(3, 0, 2), "at least one sequence"),
    (torch.tensor(_SQUARE, dtype=torch.float16), "cannot resolve ties"),
    (torch.tensor(_SQUARE, dtype=torch.bfloat16), "cannot resolve ties"),
    (torch.tensor(_SQUARE).to(torch.float8_e5m2), "cannot resolve ties"),
    (torch.ones(5), "shape"),
])
@pytest.mark.parametrize("function", ["find_leaders", "attention_sets", "polytope"])
def test_snapshot_functions_refuse_what_simulate_refuses(tokens, message, function):
    with pytest.raises(ValueError, match=message):
        getattr(theory, function)(tokens)


def test_finite_tokens_whose_sum_overflows_are_accepted_and_one_nan_among_them_refused():
    """The finiteness check sums first (NaN and inf survive a sum); a sum that overflows looks at every entry."""
    from hardmax.theory.inputs import as_tokens

    big = torch.full((4, 3, 2), 1e308, dtype=torch.float64)
    assert not torch.isfinite(big.sum())
    assert as_tokens(big) is not None
    for bad in (float("nan"), float("inf"), -float("inf")):
        z = big.clone()
        z[2, 1, 0] = bad
        with pytest.raises(ValueError, match="NaN or inf"):
            as_tokens(z)
    z = torch.tensor([[1e308, 0.0], [-1e308, float("inf")]])  # +inf among values that cancel
    with pytest.raises(ValueError, match="NaN or inf"):
        as_tokens(z)


@pytest.mark.parametrize("tie_rtol", [float("nan"), -1e-3, 1.0, 5.0])
@pytest.mark.parametrize("function", ["find_leaders", "attention_sets"])
def test_invalid_tie_rtol_is_refused(tie_rtol, function):
    with pytest.raises(ValueError, match="tie_rtol"):
        getattr(theory, function)(torch.tensor(_SQUARE, dtype=torch.float64), tie_rtol=tie_rtol)


@pytest.mark.parametrize("atol", [-1.0, float("nan"), float("inf")])
def test_invalid_atol_is_refused(atol):
    z = torch.tensor(_SQUARE, dtype=torch.float64)
    run = simulate(z, alpha=0.5, layers=3)
    for call in (lambda: find_leaders(z, atol=atol), lambda: polytope(z, atol=atol),
                 lambda: leader_layers(run, atol=atol), lambda: find_clusters(run, atol=atol),
                 lambda: check_theorem(run, atol=atol)):
        with pytest.raises(ValueError, match="atol must be a finite number ≥ 0"):
            call()


@pytest.mark.parametrize("function", ["check_theorem", "leader_layers", "find_clusters"])
def test_trajectory_functions_refuse_tensors_and_softmax(function):
    z = torch.tensor(_SQUARE, dtype=torch.float64)
    with pytest.raises(ValueError, match="expected a hardmax.dynamics.Solution"):
        getattr(theory, function)(z)
    with pytest.raises(ValueError, match="expected a hardmax.dynamics.Solution"):
        getattr(theory, function)(z.numpy())
    soft = simulate(z, Softmax(beta=2.0), alpha=0.5, layers=3)
    with pytest.raises(ValueError, match="hardmax"):
        getattr(theory, function)(soft)
    run = simulate(z, alpha=0.5, layers=3)
    broken = dataclasses.replace(run, tokens=run.tokens.clone().index_fill_(1, torch.tensor([2]), float("nan")))
    with pytest.raises(ValueError, match="NaN or inf"):
        getattr(theory, function)(broken)


@pytest.mark.parametrize("scale", [1e-300, 1e-30, 1.0, 1e30, 1e300])
def test_polytope_is_scale_free(scale):
    """The face lattice of c·P is that of P, down to 1e-300 and up to 1e300 (qhull sees unit points)."""
    P = np.array([[1.0, 1, 0], [1, -1, 0], [-1, 1, 0], [-1, -1, 0], [0, 0, 1], [0.1, 0.2, 0.3]])
    reference = polytope(P)
    K = polytope(P * scale)
    assert K.faces == reference.faces and K.dim == reference.dim == 3
    np.testing.assert_allclose(K.vertices, reference.vertices * scale, rtol=1e-15)


def test_the_papers_figure2_configurations_behave_as_the_paper_says():
    """The authors' four configurations (random followers with a fixed seed): the triangle's and the
    square's corners lead and every other token ends on a vertex; (−1/12, 1/12) becomes a leader at
    layer 1;
    (±1/2, 0) end at (±1, 0), points of S that are not vertices."""
    configs = paper_figure2_configurations()
    assert [len(z) for z in configs.values()] == [9, 8, 10, 10]
    np.testing.assert_array_equal(configs["square"], paper_figure2_configurations()["square"])  # seeded
    for name in ("triangle", "square"):
        run = simulate(configs[name], alpha=0.5, layers=30)
        corners = 3 if name == "triangle" else 4
        assert check_theorem(run).passed
        assert bool((leader_layers(run)[:corners] == 0).all())
        ends = run.final.numpy()
        assert np.abs(ends[:, None] - configs[name][None, :corners]).max(-1).min(1).max() < 1e-4
    emerging = simulate(configs["emerging_leader"], alpha=0.5, layers=30)
    assert leader_layers(emerging).tolist() == [0, 1, 0, -1, -1, -1, -1, -1] and check_theorem(emerging).passed
    clusters = simulate(configs["non_leader_clusters"], alpha=0.5, layers=60)
    np.testing.assert_allclose(clusters.final[4:6].numpy(), [[-1.0, 0.0], [1.0, 0.0]], atol=1e-9)
    assert check_theorem(clusters).passed


@pytest.mark.parametrize("scale", [1e-300, 1e-160, 1e160, 1e300])
def test_the_theorem_check_and_trajectory_functions_do_not_depend_on_the_scale(scale):
    # Issue #23, item 14: at 1e160 the check printed FAILED with atol inf and a NaN rate shown as passed.
    tokens = torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0.1]], dtype=torch.float64)
    unit = simulate(tokens, alpha=0.5, layers=30)
    far = simulate(tokens * scale, alpha=0.5, layers=30)
    report, expected = check_theorem(far), check_theorem(unit)
    assert report.passed and [c.status for c in report.checks] == [c.status for c in expected.checks]
    assert math.isclose(report.atol, expected.atol * scale, rel_tol=1e-12)
    assert report["rate"].numbers["measured"] == pytest.approx(expected["rate"].numbers["measured"], rel=1e-9)
    assert torch.equal(theory.leader_layers(far), theory.leader_layers(unit))
    clusters, unit_clusters = theory.find_clusters(far), theory.find_clusters(unit)
    assert torch.equal(clusters.labels, unit_clusters.labels)
    torch.testing.assert_close(clusters.centers / scale, unit_clusters.centers, rtol=1e-12, atol=0)
    K = theory.polytope(far.final[:4])
    np.testing.assert_allclose(theory.limit_set(K) / scale, theory.limit_set(theory.polytope(unit.final[:4])),
                               rtol=1e-12, atol=1e-15)


def test_a_measurement_that_is_nan_is_never_passed(monkeypatch):
    import hardmax.theory.check as check

    run = simulate(torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0.1]]), alpha=0.5,
                   layers=30)
    real = check._check_sequence

    def broken(*args, **kwargs):
        out = real(*args, **kwargs)
        out.norm_decrease = math.nan
        return out

    monkeypatch.setattr(check, "_check_sequence", broken)
    report = check_theorem(run)
    assert report["norms"].status == "failed" and not report.passed
    assert "not checkable" in report["norms"].messages[-1]


def test_a_theorem_report_round_trips_through_json():
    import json

    from hardmax.theory import TheoremReport

    run = simulate(torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0.1]], dtype=torch.float64),
                   alpha=0.5, layers=30)
    report = check_theorem(run)
    record = json.loads(json.dumps(report.to_dict()))
    assert record["passed"] is True and [c["name"] for c in record["checks"]] == [c.name for c in report.checks]
    back = TheoremReport.from_dict(record)
    assert back.table() == report.table() and back.passed == report.passed and back.to_dict() == record


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exact_identity_leaders_equal_the_attention_sets_near_ties(dtype):
    """find_leaders(..., atol=0) decides most leaders by their score margin (the screen explain's statistics
    rely on); with planted exact ties, near-ties (one ulp) and copies it must equal the definition from the
    tie rule's attention sets: i leads iff C_i holds only tokens identical to z_i."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(150, 9, 3, generator=g, dtype=dtype)
    z[:16, 1] = z[:16, 0]  # copies
    z[16:32, 1] = z[16:32, 0] * torch.tensor([1.0, 1.0, -1.0], dtype=dtype)  # mirror: equal norms
    z[32:48, 2] = torch.nextafter(z[32:48, 0], torch.full_like(z[32:48, 0], 10.0))  # one ulp apart
    present = torch.rand(150, 9, generator=g) > 0.2
    present[:, :3] = True
    for A in (None, torch.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]], dtype=dtype)):
        sets = theory.attention_sets(z, A=A, mask=present)
        identical = (z.unsqueeze(2) == z.unsqueeze(1)).all(-1)
        expected = present & ~(sets & ~identical).any(-1)
        assert torch.equal(find_leaders(z, A=A, mask=present, atol=0.0), expected)


@pytest.mark.parametrize("seed", range(3))
def test_the_step_witness_certifies_convex_steps_only(seed):
    """A token certified by its own step towards its snapshot target skips the facet test; with α < 0 that step
    leaves the hull (review of the witness), so such layers are measured as if there were no witness: the
    growth is the one measured with the witness disabled (targets NaN)."""
    from hardmax.dynamics import Hardmax
    from hardmax.theory.check import _hull_check, _Seq

    rng = np.random.default_rng(seed)
    for alpha in (-2e-6, -0.3, 0.5):
        d, n = 3, 40
        M = rng.normal(size=(d, d))
        A = torch.tensor(M @ M.T + 0.5 * np.eye(d))
        path = [torch.tensor(rng.normal(size=(1, n, d)))]
        gamma = alpha / (1 + alpha)
        targets = []
        for _ in range(2):
            targets.append(Hardmax().targets(path[-1], torch.ones(1, n, dtype=torch.float64), A))
            path.append(path[-1] + gamma * (targets[-1] - path[-1]))
        Z = torch.cat(path).numpy()  # (3, n, d)
        T = torch.cat([*targets, targets[-1]]).numpy()
        runs = []
        for known in (T, np.full_like(T, np.nan)):
            out = _Seq(atol=1e-6)
            _hull_check(out, Z, known, A.numpy(), np.full(2, alpha), True, np.linalg.norm(Z[1:] - Z[:-1], axis=-1))
            runs.append(out.hull)
        if alpha < 0:
            assert runs[0] == runs[1]
        else:  # convex steps: certified, and within their residual of the hull
            assert runs[0] <= 1e-12 and runs[1] <= 1e-12


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("d", [1, 2, 3, 16])
def test_compiled_leader_recurrence_is_the_torch_one(dtype, d):
    """leaders[k] = snap[k] & (leaders[k−1] | no leader of k−1 within same): the compiled recurrence and the
    batched torch one agree, on snapshots whose new leaders sit just inside, on and just outside `same` of a
    leader (copies of a leader, followers closing in) and on tokens that lose and regain leadership."""
    from hardmax.theory import leaders as module

    rng = np.random.default_rng(d)
    L, B, n = 60, 3, 24
    path = rng.standard_normal((L, B, n, d))
    same = np.array([0.05, 0.2, 0.0])
    # A third of the tokens near token 0 or 1, inside, just inside, just outside and outside `same` (1 % off it:
    # exactly on it, the two sum the squares in different orders and may round either way).
    for k in range(L):
        for b in range(B):
            for i in range(2, n // 3):
                anchor = path[k, b, i % 2]
                step = rng.standard_normal(d)
                path[k, b, i] = anchor + step / np.linalg.norm(step) * same[b] * rng.choice([0.0, 0.5, 0.99, 1.01, 1.5])
    snap = rng.random((L, B, n)) < 0.3
    snap[:, :, :2] = rng.random((L, B, 2)) < 0.9  # tokens 0, 1 lead most of the time
    path_t, same_t = torch.as_tensor(path, dtype=dtype), torch.as_tensor(same, dtype=dtype)
    compiled = module._leaders_in_time(torch.as_tensor(snap), path_t, same_t)
    reference = module._leaders_in_time_torch(torch.as_tensor(snap), path_t, same_t)
    assert torch.equal(compiled, reference)
    became = compiled[1:] & ~compiled[:-1] & torch.as_tensor(snap[1:])
    assert bool(became.any()) and bool((torch.as_tensor(snap) & ~compiled).any())  # both branches taken


@pytest.mark.parametrize("d", [2, 4])
def test_the_hull_is_measured_where_the_step_witness_does_not_hold(d, monkeypatch):
    """Witnessed steps (each moved token on its own convex step towards its snapshot target) certify their layer;
    the support test (and qhull for d ≤ 3) measures only the layers with a token off its step. A token pushed out
    of the hull at one layer is caught there, by both tests where both run."""
    import hardmax.theory.check as module

    asked = []
    measure = module.support_growth
    monkeypatch.setattr(module, "support_growth", lambda Z, layers, *a, **k: asked.append(list(layers)) or
                        measure(Z, layers, *a, **k))
    trajectory = simulate(np.random.default_rng(d).normal(size=(30, d)), alpha=0.05, layers=40)
    report = check_theorem(trajectory)
    assert report.passed and asked == [[]]  # every layer moved, every step witnessed
    tokens = trajectory.tokens.clone()
    tokens[12, 3] = 3 * tokens[11].abs().amax(0)  # outside conv(Z^11)
    asked.clear()
    damaged = check_theorem(dataclasses.replace(trajectory, tokens=tokens))
    assert 11 in asked[0] and not damaged.passed
    hull = next(c for c in damaged.checks if c.name == "hull")
    assert hull.status == "failed" and hull.numbers["growth"] > 1.0


@pytest.mark.parametrize("d", [1, 2, 3])
def test_compiled_rate_samples_are_the_reference_ones(d):
    """The follower-rate samples (pairs of moves with a fixed target, pointing the same way, long enough): the
    compiled one-pass kernel and its whole-array NumPy reference (`reference.rate_samples`) count the same samples
    and the same sums."""
    import hardmax.theory.check as module
    from hardmax.theory.leaders import leader_history, scaled_path

    rng = np.random.default_rng(d)
    for alpha, layers in ((0.05, 120), (0.5, 40), (2.0, 15)):
        trajectory = simulate(rng.normal(size=(40, d)), alpha=alpha, layers=layers)
        scaled = scaled_path(trajectory, None)
        leaders, targets = leader_history(scaled.trajectory, scaled.same)
        Z, T = scaled.path[:, 0].numpy(), targets[:, 0].numpy()
        D = Z[1:] - Z[:-1]
        steps = np.linalg.norm(D, axis=-1)
        followers = np.nonzero(~leaders[-1, 0].numpy())[0]
        gamma = trajectory.alpha.numpy() / (1 + trajectory.alpha.numpy())
        args = (D, steps, T, followers.astype(np.int64), gamma, float(scaled.same[0]), 1e4 * 2.2e-16)
        compiled, expected = module._rate_samples(*args), reference.rate_samples(*args)
        assert compiled[0] == expected[0] > 0
        assert compiled[1:] == pytest.approx(expected[1:], rel=1e-12, abs=1e-300)


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


def test_rate_samples_ignore_the_expected_rate_of_pairs_without_samples():
    """A pair of layers with no sample (here the run stands still at its last layer, where γ = 0 makes the
    expected ratio 0) adds nothing to the expected log-rate: the compiled samples and their reference give the one
    sample's."""
    import hardmax.theory.check as module

    D = np.array([[[1.0, 0.0]], [[0.5, 0.0]], [[0.0, 0.0]]])  # moves Δ_0, Δ_1, Δ_2 of one follower
    steps = np.linalg.norm(D, axis=-1)
    T = np.zeros((4, 1, 2))  # a fixed target
    gamma = np.array([0.5, 0.5, 0.0])
    for measure in (module._rate_samples, reference.rate_samples):
        samples, log_ratio, log_expected, error = measure(D, steps, T, np.array([0]), gamma, 1e-9, 1e-12)
        assert samples == 1 and log_ratio == pytest.approx(math.log(0.5)) and error == pytest.approx(0.0)
        assert log_expected == pytest.approx(math.log(0.5))


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


def test_the_theorem_checks_refuse_a_solution_under_a_pair_mask():
    """Theorem 2.1 and the leader rule are about full attention: a causal run is refused in one line, never checked
    as if every token had seen every token."""
    from hardmax.dynamics import Causal
    from hardmax.theory import check_theorem, find_clusters, leader_layers

    z = torch.tensor([[1.0, 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0]], dtype=torch.float64)
    run = simulate(z, alpha=0.5, layers=10, mask=Causal())
    for check in (check_theorem, leader_layers, find_clusters):
        with pytest.raises(ValueError, match=r"^this solution ran under a pair mask \(Causal\)"):
            check(run)
