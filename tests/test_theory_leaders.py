"""Tests of `hardmax.theory.leaders`: `find_leaders`, `attention_sets`, `leader_layers`, `find_clusters`.

Known answers (tests/problems.py: the Figure 2 configurations, exact ties with multiplicities, d = 1, a
non-identity A); agreement with the engine's attention matrices at every layer; masks; batched = one by one;
permutation equivariance (hypothesis); the compiled leader recurrence against the torch one.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from problems import Problem
from theory_cases import PROBLEMS, SQUARE_WITH_A_POINT, by_name, run

import hardmax.theory as theory
from hardmax.dynamics import Save, simulate
from hardmax.theory import attention_sets, check_theorem, find_clusters, find_leaders, leader_layers

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


def partition(labels) -> set[frozenset[int]]:
    """The grouping of token indices induced by labels (any hashable per token)."""
    groups: dict = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, set()).add(i)
    return {frozenset(g) for g in groups.values()}


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


@pytest.mark.parametrize("tie_rtol", [float("nan"), -1e-3, 1.0, 5.0])
@pytest.mark.parametrize("function", ["find_leaders", "attention_sets"])
def test_invalid_tie_rtol_is_refused(tie_rtol, function):
    with pytest.raises(ValueError, match="tie_rtol"):
        getattr(theory, function)(torch.tensor(SQUARE_WITH_A_POINT, dtype=torch.float64), tie_rtol=tie_rtol)


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
