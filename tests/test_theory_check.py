"""Tests of `hardmax.theory.check`: `check_theorem` and its `TheoremReport`.

Theorem 2.1 on the known answers of tests/problems.py, on hundreds of random and dyadic configurations;
doctored trajectories, each of which must make its check fail (limits, hull, rate); the exact hull check
against folded, flattened and sharp hulls; the step witness and the compiled rate samples; NaN never passes;
the report's table and JSON.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import reference
import torch
from hypothesis import given
from hypothesis import strategies as st
from problems import Problem
from theory_cases import PROBLEMS, SQUARE, by_name, run

import hardmax.theory as theory
from hardmax.dynamics import Euler, Softmax, simulate
from hardmax.theory import check_theorem, find_clusters, leader_layers

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_theorem_holds_on_known_answers(problem: Problem):
    report = check_theorem(run(problem))
    assert report.passed, report.table()
    assert report.hypotheses_ok == (problem.name != "ties_with_multiplicity")  # it has a duplicate
    vertices = {tuple(problem.limits[i]) for i, k in enumerate(problem.leader_layers) if k >= 0}
    assert report["vertices"].numbers["leaders"] == len(vertices)
    if report["rate"].numbers["samples"]:
        assert report["rate"].numbers["measured"] == pytest.approx(1 / (1 + problem.alpha), rel=1e-6)


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


@given(st.integers(1, 8), st.integers(1, 3), st.floats(0.2, 2.0), st.data())
def test_theorem_on_dyadic_configurations(n: int, d: int, alpha: float, data):
    """Exact ties, duplicates and zero tokens included (the theorem excludes the last two; the check
    holds anyway)."""
    tokens = np.array(data.draw(st.lists(st.lists(st.integers(-4, 4), min_size=d, max_size=d),
                                         min_size=n, max_size=n)), dtype=np.float64) / 4
    report = check_theorem(simulate(tokens, alpha=alpha, layers=layers_for(alpha)))
    assert report.passed, report.table()


def doctor(trajectory, edit) -> object:
    """The trajectory with its tokens edited in place by `edit`, or run with 1.2 α where `edit` is "alpha"."""
    if edit == "alpha":
        return dataclasses.replace(trajectory, solver=Euler.layers(trajectory.alpha * 1.2))
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
    report = check_theorem(doctor(trajectory, edit))
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
    report = check_theorem(doctor(trajectory, edit))
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
