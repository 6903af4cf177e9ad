"""`hardmax.theory.flows`: batched cluster counts against a graph library, the energy's closed forms, and
`check_flow` passing, failing and saying "not tested" where it should."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from hardmax.dynamics import RK4, Bilinear, Euler, Field, Hardmax, Rescaled, Save, Softmax, Solution, Sphere, solve
from hardmax.theory import check_flow, cluster_counts, energy


def _reference_clusters(points: np.ndarray, tol: float) -> int:
    """`cluster_counts`' definition, one token at a time: connected components of |z_i − z_j| ≤ tol; a component
    wider than tol split into balls of radius tol/2 about its first remaining token."""
    dist = np.linalg.norm(points[:, None] - points[None], axis=-1)
    count, labels = connected_components(dist <= tol, directed=False)
    total = 0
    for c in range(count):
        members = list(np.nonzero(labels == c)[0])
        if dist[np.ix_(members, members)].max() <= tol:
            total += 1
            continue
        while members:
            seed = members[0]
            members = [j for j in members if dist[seed, j] > tol / 2]
            total += 1
    return total


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 12), tol=st.floats(0.05, 1.5))
def test_cluster_counts_are_the_reference_and_connected_components_when_narrow(seed, n, tol):
    rng = np.random.default_rng(seed)
    z = rng.integers(-3, 4, size=(5, n, 2)) * 0.5  # repeats and chains at exactly the tolerance
    mask = rng.random((5, n)) < 0.8
    got = cluster_counts(torch.from_numpy(z), tol, torch.from_numpy(mask))
    for b in range(5):
        real = z[b][mask[b]]
        if len(real) == 0:
            assert int(got[b]) == 0
            continue
        assert int(got[b]) == _reference_clusters(real, tol)
        dist = np.linalg.norm(real[:, None] - real[None], axis=-1)
        components, labels = connected_components(dist <= tol, directed=False)
        narrow = all(dist[np.ix_(labels == c, labels == c)].max() <= tol for c in range(components))
        assert int(got[b]) >= components and (int(got[b]) == components or not narrow)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 40),
       tol=st.sampled_from([0.5, 1.0, 1.5, 2.0]) | st.floats(0.05, 1.5),  # distances at exactly tol and tol/2
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_the_compiled_counts_are_the_batched_rounds(seed, n, tol, dtype):
    """On the CPU `cluster_counts` counts in a compiled kernel (`_count_clusters`); other devices run the batched
    rounds (`_rounds`): on the same distances and graph, the same counts — clusters of repeated points, chains at
    exactly the tolerance, wide components, padding, both dtypes."""
    from hardmax.theory.flows import _clusters, _rounds

    rng = np.random.default_rng(seed)
    z = torch.from_numpy(rng.integers(-3, 4, size=(7, n, 2)) * 0.5 + rng.normal(0, 1e-3, (7, n, 2))).to(dtype)
    z[::3] = torch.from_numpy(rng.integers(-3, 4, size=(3, n, 2)) * 0.5).to(dtype)  # exact repeats and distances
    m = torch.from_numpy(rng.random((7, n)) < 0.8)
    dist = torch.cdist(z, z)
    near = (dist <= tol) & m.unsqueeze(1) & m.unsqueeze(2)
    near.diagonal(dim1=1, dim2=2).copy_(m)
    assert torch.equal(_clusters(z, m, tol), _rounds(near, m, tol, dist))


@pytest.mark.parametrize("n", [800, 300, 2000])
def test_tokens_spread_on_a_circle_are_not_one_cluster(n):
    """Issue #39 (2): a chain of neighbours closer than tol is one component but no cluster."""
    angle = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
    circle = torch.stack([angle.cos(), angle.sin(), torch.zeros_like(angle)], dim=-1)
    got = int(cluster_counts(circle, 1e-2))
    assert got >= min(n, 2 * math.pi / 1e-2 * 0.9)  # about one cluster per tol of arc, certainly not one
    gathered = circle[:1] + 1e-4 * circle  # 800 tokens within 2e-4 of a point: one cluster
    assert int(cluster_counts(gathered, 1e-2)) == 1


def test_an_interval_of_values_is_not_one_hyperplane():
    values = torch.linspace(-1, 1, 1500, dtype=torch.float64).reshape(1500, 1)
    assert int(cluster_counts(values, 2e-3)) >= 2 / 2e-3 * 0.9
    three = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64).repeat_interleave(500).reshape(1500, 1)
    assert int(cluster_counts(three + 1e-5 * torch.randn(1500, 1, dtype=torch.float64), 2e-3)) == 3


def test_cluster_counts_keep_the_batch_shape_and_bound_memory():
    z = torch.zeros(3, 4, 5, 2)
    z[..., 0] = torch.arange(5.0)
    assert cluster_counts(z, 0.5).shape == (3, 4) and bool((cluster_counts(z, 0.5) == 5).all())
    assert bool((cluster_counts(z, 1.0) == 5).all())  # a chain of neighbours 1 apart is no cluster of diameter 1
    assert bool((cluster_counts(z, 4.0) == 1).all())


def test_the_energy_of_one_point_and_at_beta_zero():
    x = torch.nn.functional.normalize(torch.randn(4, 3, dtype=torch.float64), dim=-1)
    same = x[:1].expand(4, 3)
    for beta in (0.5, 2.0, 7.0):
        assert math.isclose(float(energy(same, beta)), math.exp(beta) / (2 * beta), rel_tol=1e-13)
    assert math.isclose(float(energy(x, 0.0)), float(x.mean(0).square().sum()) / 2, rel_tol=1e-13)
    assert math.isclose(float(energy(x, 1e-9)) - 1 / (2e-9), float(energy(x, 0.0)), abs_tol=1e-6)


def _fake(tokens, field) -> Solution:
    tokens = torch.as_tensor(tokens, dtype=torch.float64)
    return Solution(tokens=tokens, times=torch.arange(len(tokens), dtype=torch.float64), field=field,
                    solver=Euler(1.0), mask=torch.ones(tokens.shape[1:-1], dtype=torch.bool))


def test_sa_on_the_sphere_passes_its_claims():
    z = torch.nn.functional.normalize(torch.randn(30, 8, 3, dtype=torch.float64,
                                                  generator=torch.Generator().manual_seed(0)), dim=-1)
    sol = solve(Field(Softmax(1.0), scores=Bilinear(2.0 * torch.eye(3, dtype=torch.float64)), manifold=Sphere()),
                RK4(0.1), z, steps=400, save=Save(every=20))
    report = check_flow(sol)
    assert report.passed
    assert {c.name: c.status for c in report.checks} == {
        "finite": "passed", "norms": "passed", "hull": "not tested", "polytope": "not tested",
        "hyperplanes": "not tested", "boolean": "not tested", "single_cluster": "passed", "energy": "passed"}
    assert "| check |" in report.table()


def test_a_settled_antipodal_pair_fails_the_single_cluster_claim():
    """x and −x are an equilibrium of SA (a start of measure zero): settled in two clusters, so the check fails."""
    x = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]], dtype=torch.float64)
    sol = solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), x, steps=20, save=Save(every=10))
    check = check_flow(sol)["single_cluster"]
    assert check.status == "failed" and "2 clusters" in check.messages[0]


def test_time_reversed_flows_fail_the_energy_and_hull_claims():
    z = torch.nn.functional.normalize(torch.randn(8, 3, dtype=torch.float64), dim=-1)
    sol = solve(Field(Softmax(3.0), manifold=Sphere()), RK4(0.1), z, steps=50, save=Save(every=5))
    assert check_flow(_fake(sol.tokens.flip(0), sol.field))["energy"].status == "failed"
    flat = solve(Field(Softmax(1.0)), RK4(0.1), torch.randn(10, 2, dtype=torch.float64), steps=50, save=Save(every=5))
    assert check_flow(flat)["hull"].status == "passed"
    assert check_flow(_fake(flat.tokens.flip(0), flat.field))["hull"].status == "failed"


def _at_rest(monkeypatch):
    """Make every state an equilibrium of its field (velocity 0), so that the verdict logic can be exercised on
    states a true theorem never reaches."""
    monkeypatch.setattr(Field, "velocity", lambda self, t, z, w: torch.zeros_like(z))


def test_the_2023_polytope_claim(monkeypatch):
    V = torch.eye(2, dtype=torch.float64)
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    z = torch.rand(12, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 10 - 5
    sol = solve(field, RK4(0.01), z, t1=8.0, save=Save(every=50))
    assert check_flow(sol)["polytope"].status == "passed"
    square = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [0.2, 0.1]], dtype=torch.float64)
    moving = _fake(square.expand(3, 5, 2), field)  # the inner token still moves towards ∂K: not judged
    assert check_flow(moving)["polytope"].status == "not tested"
    origin = _fake(torch.cat([square[:4], torch.zeros(1, 2, dtype=torch.float64)]).expand(3, 5, 2), field)
    assert check_flow(origin)["polytope"].status == "passed"  # a token may converge to 0
    _at_rest(monkeypatch)
    report = check_flow(moving)["polytope"]
    assert report.status == "failed" and "at rest" in report.messages[0]
    segment = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [0.5, 0.0]], dtype=torch.float64)  # flat: no 2-D hull
    assert check_flow(_fake(segment.expand(3, 3, 2), field))["polytope"].status == "failed"
    assert check_flow(_fake(segment[:2].expand(3, 2, 2), field))["polytope"].status == "passed"


def test_the_2023_hyperplanes_claim(monkeypatch):
    V = torch.tensor([[0.64709742, 0.81911926], [0.61210449, 0.63263484]], dtype=torch.float64)
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    z = torch.rand(3, 15, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 10 - 5
    report = check_flow(solve(field, RK4(0.01), z, t1=8.0, save=Save(every=50)))
    assert report["hyperplanes"].status == "passed" and report["polytope"].status == "not tested"
    phi = torch.linalg.eig(V.T)[1][:, 0].real
    phi = phi / phi.norm()
    four = _fake(torch.stack([c * phi for c in (-2.0, -1.0, 1.0, 2.0)]).expand(3, 4, 2), field)
    assert check_flow(four)["hyperplanes"].status == "not tested"  # four hyperplanes, still moving
    _at_rest(monkeypatch)
    assert check_flow(four)["hyperplanes"].status == "failed"


def test_metastable_clusters_are_not_judged_and_beta_below_zero_is_not_tested():
    z = torch.nn.functional.normalize(torch.randn(40, 16, 3, dtype=torch.float64,
                                                  generator=torch.Generator().manual_seed(5)), dim=-1)
    sol = solve(Field(Softmax(9.0), manifold=Sphere()), RK4(0.1), z, t1=30.0, save=Save(every=50))
    check = check_flow(sol)["single_cluster"]
    assert check.status != "failed" and "metastable" in check.value
    negative = solve(Field(Softmax(1.0), scores=Bilinear(-torch.eye(3, dtype=torch.float64)), manifold=Sphere()),
                     RK4(0.1), z[:2], steps=5, save=Save(every=5))
    report = check_flow(negative)
    assert report["energy"].status == "not tested" and report["single_cluster"].status == "not tested"
    assert report.verdict == "NOT TESTED" and "NOT TESTED" in report.table()


def test_energy_below_zero_beta():
    x = torch.nn.functional.normalize(torch.randn(5, 3, dtype=torch.float64), dim=-1)
    g = x @ x.T
    assert math.isclose(float(energy(x, -2.0)), float(torch.exp(-2.0 * g).sum()) / (2 * -2.0 * 25), rel_tol=1e-12)


@pytest.mark.parametrize("field", [Field(Hardmax()), Field(Softmax(1.0), value=-torch.eye(2))])
def test_claims_that_do_not_apply_are_not_tested(field):
    sol = solve(field, Euler(0.1), torch.randn(6, 2, dtype=torch.float64), steps=10, save=Save(every=5))
    report = check_flow(sol)
    for name in ("norms", "polytope", "hyperplanes", "boolean", "single_cluster", "energy"):
        assert report[name].status == "not tested"


def test_the_one_dimensional_attention_claim():
    V = torch.ones(1, 1, dtype=torch.float64)
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    z = torch.rand(2, 8, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 10 - 5
    with_p = solve(field, RK4(0.01), z, t1=8.0, save=Save(every=100, attention=True))
    assert check_flow(with_p)["boolean"].status == "passed"
    assert check_flow(solve(field, RK4(0.01), z, t1=1.0, save=Save(every=50)))["boolean"].status == "not tested"
    early = solve(field, RK4(0.01), z, t1=0.2, save=Save(every=10, attention=True))  # fractional, moving
    assert check_flow(early)["boolean"].status == "not tested"


def test_check_flow_refuses_padding():
    z = torch.randn(2, 5, 2, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    sol = solve(Field(Softmax(1.0)), RK4(0.1), z, steps=4, mask=mask, save=Save(every=2))
    with pytest.raises(ValueError, match="without padding"):
        check_flow(sol)


def test_spread_tokens_after_one_small_step_pass_no_cluster_claim():
    """Issue #39 (2): 800 tokens evenly spread on a great circle of S², one Euler step of 1e-3: not one cluster."""
    angle = torch.arange(800, dtype=torch.float64) * (2 * math.pi / 800)
    circle = torch.stack([angle.cos(), angle.sin(), torch.zeros_like(angle)], dim=-1)
    sol = solve(Field(Softmax(1.0), manifold=Sphere()), Euler(1e-3), circle, steps=1)
    check = check_flow(sol)["single_cluster"]  # the even circle is an equilibrium: at rest in many clusters
    assert check.status != "passed" and "100 %" not in check.value


def test_an_interval_of_hyperplane_coordinates_is_not_passed():
    """Issue #39 (2): 1,500 tokens whose ⟨φ, z⟩ span [−1, 1] do not lie on at most three hyperplanes."""
    V = torch.tensor([[2.0, 0.0], [0.0, 1.0]], dtype=torch.float64)  # φ = e_1
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    z = torch.stack([torch.linspace(-1, 1, 1500, dtype=torch.float64), torch.zeros(1500, dtype=torch.float64)], -1)
    check = check_flow(_fake(z.expand(2, 1500, 2), field))["hyperplanes"]
    assert check.status != "passed"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hull_growth_between_any_directions_fails(seed):
    """Issue #39 (3): a token leaving the previous hull by 1,000× the tolerance fails, whatever its direction."""
    g = torch.Generator().manual_seed(seed)
    for d in (2, 3, 5, 8):
        before = torch.randn(40, d, dtype=torch.float64, generator=g)
        tol = 1e-3 * float(torch.cdist(before, before).amax())
        direction = torch.randn(d, dtype=torch.float64, generator=g)
        direction /= direction.norm()
        after = before.clone()
        top = int((before @ direction).argmax())
        after[top] = before[top] + 1000 * 1e-2 * tol * direction  # outside by ~10 tol along a random direction
        report = check_flow(_fake(torch.stack([before, after]), Field(Softmax(1.0))))["hull"]
        assert report.status == "failed", (d, report.value)
        assert check_flow(_fake(torch.stack([before, before * 0.9]), Field(Softmax(1.0))))["hull"].status == "passed"


@pytest.mark.slow
def test_a_start_in_convex_position_is_not_a_limit():
    """Issue #39 (4): at t = 0.001 tokens in convex position are on ∂K trivially: not judged."""
    V = torch.eye(2, dtype=torch.float64)
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    for n in (5, 12, 40):
        angle = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
        z = 3 * torch.stack([angle.cos(), angle.sin()], dim=-1)
        early = solve(field, RK4(0.001), z, steps=1)
        assert check_flow(early)["polytope"].status == "not tested"
        late = solve(field, RK4(0.01), z, t1=12.0, save=Save(every=100))
        assert check_flow(late)["polytope"].status == "passed"


def test_saved_states_that_are_not_finite_fail():
    """Issue #39 (5): NaN or inf saved states are a failed `finite` check, never passed or "not tested"."""
    z = torch.randn(4, 6, 2, dtype=torch.float64)
    z[2:, 0, 0] = math.inf
    z[3, 1, 1] = math.nan
    report = check_flow(_fake(z, Field(Softmax(1.0))))
    assert not report.passed and report.verdict == "FAILED"
    assert report["finite"].status == "failed" and "saved state 2" in report["finite"].messages[0]
    assert all(c.status == "not tested" for c in report.checks if c.name != "finite")


def test_check_flow_under_a_pair_mask_tests_only_what_holds_there():
    """Under Causal(): the first token never moves (checked exactly), the states are finite, and every claim of full
    attention is "not tested" with the reason — never "passed"; the CLI's --causal reports the same."""
    from hardmax.dynamics import Causal, Pairs

    z = torch.nn.functional.normalize(torch.randn(3, 7, 3, dtype=torch.float64,
                                                  generator=torch.Generator().manual_seed(4)), dim=-1)
    run = solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), z, steps=30, mask=Causal(), save=Save(every=5))
    report = check_flow(run)
    status = {c.name: c.status for c in report.checks}
    assert status.pop("finite") == "passed" and status.pop("first_token") == "passed"
    assert set(status.values()) == {"not tested"} and report.passed
    broken = dataclasses.replace(run, tokens=run.tokens.clone().index_fill_(2, torch.tensor([0]), 0.5))
    broken.tokens[1:, :, 0] += 1e-6  # the first token moved: failed, never passed
    assert next(c for c in check_flow(broken).checks if c.name == "first_token").status == "failed"
    pairs = solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), z, steps=5,
                  mask=Pairs(torch.ones(7, 7, dtype=torch.bool).tril()))
    assert "first_token" not in {c.name for c in check_flow(pairs).checks}
