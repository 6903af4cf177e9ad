"""`hardmax.experiments.frank_wolfe`: Alcalde–Geshkovski–Ruiz-Balet's claims on hardmax as Frank–Wolfe.

Closed forms (a token's distance to its vertex is exactly Π(1 − γ_k) of its start; a symmetric pair under A = −I
shrinks by exactly 1 − 2γ_k), the layer against `simulate` (A ≻ 0) and the Fraction oracle (semidefinite A, ties),
the reports' verdicts on cases whose answer is known, and the one-line errors on bad input.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest
import reference
import torch

from hardmax.dynamics import simulate
from hardmax.experiments.frank_wolfe import (
    contraction_rate,
    dominance_cells,
    escape_times,
    hardmax_layers,
    voronoi_check,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread

F64 = torch.float64
SQUARE = [[1, 0], [0, 1], [-1, 0], [0, -1]]  # a square whose every vertex is its own maximiser (A = I)


def _exact(tokens, A, alpha, layers) -> torch.Tensor:
    return torch.tensor(reference.as_float(reference.simulate_exact(tokens, alpha=alpha, layers=layers, A=A)))


# --- the layer ---------------------------------------------------------------------------------------------------

def test_psd_distance_to_the_vertex_is_exactly_one_minus_gamma_to_the_k_on_a_straight_line():
    # α = 1, γ = ½: dyadic numbers, so float64 is exact and the closed form z_k = v + 2^{-k} (z_0 − v) holds bit for bit
    z = torch.tensor([*SQUARE, [0.5, 0.125], [-0.25, 0.5]], dtype=F64)
    path = hardmax_layers(z, torch.eye(2, dtype=F64), alpha=1.0, layers=40)
    k = torch.arange(41, dtype=F64).reshape(-1, 1)
    for token, vertex in ((4, 0), (5, 1)):
        expected = z[vertex] + 0.5**k * (z[token] - z[vertex])
        assert torch.equal(path[:, token], expected)
    assert torch.equal(path[:, :4], z[:4].expand(41, 4, 2))  # the vertices never move


def test_a_tied_token_goes_straight_to_the_middle_of_its_edge_as_the_fraction_oracle_says():
    # (1/4, 1/4) is on the boundary of the cells of (1, 0) and (0, 1): both are kept, the target is their mean
    tokens = [*SQUARE, [Fraction(1, 4), Fraction(1, 4)]]
    exact = reference.simulate_exact(tokens, alpha=1, layers=6)
    assert exact[1][4] == [Fraction(3, 8), Fraction(3, 8)] and exact[6][4] == [Fraction(1, 2) - Fraction(1, 256)] * 2
    path = hardmax_layers(torch.tensor([[float(x) for x in row] for row in tokens], dtype=F64), torch.eye(2),
                          alpha=1.0, layers=6)
    assert torch.equal(path, _exact(tokens, None, 1, 6))


@pytest.mark.parametrize("A", [[[1, 0], [0, 0]], [[-1, 0], [0, -2]], [[0, 0], [0, -1]], [[1, 0], [0, -1]]])
def test_the_layer_matches_the_fraction_oracle_for_semidefinite_and_indefinite_A(A):
    tokens = [[3, 1], [-2, 1], [1, -3], [Fraction(1, 2), Fraction(1, 3)], [-1, -1], [0, 2]]
    path = hardmax_layers(torch.tensor([[float(x) for x in r] for r in tokens], dtype=F64), A, alpha=1.0, layers=12)
    assert torch.allclose(path, _exact(tokens, A, 1, 12), rtol=0, atol=1e-12)


def test_the_layer_is_simulate_where_A_is_positive_definite(generator):
    z = torch.randn(6, 12, 3, generator=generator, dtype=F64)
    A = torch.tensor([[2.0, 0.5, 0], [0.5, 1, 0.2], [0, 0.2, 0.5]], dtype=F64)
    alpha = [0.5 + 0.01 * k for k in range(150)]
    solution = simulate(z, alpha=alpha, layers=150, A=A)
    assert solution.engine == "compiled"
    assert torch.allclose(hardmax_layers(z, A, alpha=alpha, layers=150), solution.tokens, rtol=0, atol=1e-12)
    assert hardmax_layers(z[0], A, alpha=0.5, layers=3).shape == (4, 12, 3)  # (n, d) in, (layers + 1, n, d) out


def test_dominance_cells_by_hand():
    z = torch.tensor([[0.5, 0.1], [0.1, -0.5], [-0.3, 0.29]], dtype=F64)
    v = torch.tensor(SQUARE, dtype=F64)
    assert dominance_cells(z, v, torch.eye(2)).tolist() == [0, 3, 2]
    assert dominance_cells(z, v, torch.diag(torch.tensor([1.0, 4.0]))).tolist() == [0, 3, 1]  # ⟨A z, v⟩ weighs y
    identity = hardmax_layers(z, torch.eye(2), alpha=0.5, layers=2)
    assert torch.equal(hardmax_layers(z, None, alpha=0.5, layers=2), identity)  # None: the identity


# --- A ⪰ 0: the Voronoi picture ----------------------------------------------------------------------------------

def test_voronoi_holds_to_rounding_over_a_thousand_layers_on_the_compiled_engine():
    report = voronoi_check(sequences=24, layers=1000)
    assert report.engine == "compiled" and report.own_cells == 1.0
    assert report.vertex_move == 0.0 and report.cells_kept == 1.0
    assert report.off_line < 1e-14 and report.rate_error < 1e-14
    assert report.factor == pytest.approx((2 / 3) ** 1000, rel=1e-9)
    assert report.check().passed


def test_voronoi_with_a_schedule_follows_the_product_of_one_minus_gamma_and_another_A():
    alpha = [0.2 * (k + 1) for k in range(60)]  # γ_k → 1: super-exponential, as the first abstract says
    report = voronoi_check(A=[[1.5, 0.4], [0.4, 0.8]], sequences=16, alpha=alpha, layers=60)
    assert report.check().passed
    assert report.factor == pytest.approx(math.prod(1 / (1 + a) for a in alpha), rel=1e-12)


def test_without_their_own_cells_vertices_move_and_the_check_says_so():
    report = voronoi_check(sequences=48, layers=50, own_cells=False)
    assert 0 < report.own_cells < 0.5  # most random convex hexagons have a vertex outside its own cell
    assert report.moved_without > 0.9  # and then that vertex moves: the hypothesis is needed
    assert report.check().passed  # the polygons that satisfy it still do everything the paper says
    doctored = dataclasses.replace(report, vertex_move=1e-6)
    assert not doctored.check().passed and doctored.check().messages


def test_a_singular_A_runs_the_module_layer_and_no_triangle_has_every_vertex_in_its_own_cell():
    with pytest.raises(ValueError, match="own cell"):
        voronoi_check(A=[[1, 0], [0, 0]], vertices=3, sequences=2, layers=5)
    report = voronoi_check(A=[[1, 0], [0, 0]], vertices=3, sequences=8, layers=20, own_cells=False)
    assert report.engine == "layers" and report.own_cells == 0.0 and not report.check().passed


# --- A ⪯ 0: contraction ------------------------------------------------------------------------------------------

def test_a_symmetric_pair_contracts_to_the_origin_by_exactly_one_minus_two_gamma():
    z = torch.tensor([[[1.0, 0.5], [-1.0, -0.5]], [[0.0, 2.0], [0.0, -2.0]]], dtype=F64)
    result = contraction_rate(tokens=z, alpha=0.5, layers=80)  # γ = 1/3: the spread × 1/3, the energy × 1/9
    k = torch.arange(81, dtype=F64)
    expected = 3.0 ** -k * z[:, 0].norm(dim=-1).median()
    assert torch.allclose(result.spread, expected, rtol=1e-12, atol=0)
    assert result.holds == "geometric" and result.ratio == pytest.approx(1 / 9, rel=1e-9)
    checks = result.check()
    assert all(c.passed for c in checks.values()), [c.value for c in checks.values()]


def test_with_steps_one_over_k_the_pair_contracts_as_a_power_and_the_linear_claim_fails():
    # γ_k = 1/(k + 3) (α_k = 1/(k + 2)): spread_k = ‖x_k‖ = 2 / ((k + 1)(k + 2)), the energy ~ k^{-4}
    z = torch.tensor([[[0.6, 0.8], [-0.6, -0.8]]], dtype=F64)
    result = contraction_rate(tokens=z, alpha=[1 / (k + 2) for k in range(3000)], layers=3000)
    k = torch.arange(3001, dtype=F64)
    assert torch.allclose(result.spread, 2 / ((k + 1) * (k + 2)), rtol=1e-10, atol=0)
    assert result.holds == "sublinear" and result.power == pytest.approx(-4, abs=0.15)
    checks = result.check()
    assert not checks["linear_rate"].passed and checks["sublinear_rate"].passed and checks["origin"].passed


def test_with_slowly_shrinking_steps_neither_rate_holds_nor_one_cluster_forms():
    # γ_k = 1/(8(k + 2)): the spread ~ k^{-1/4}, the energy ~ k^{-1/2}: slower than O(1/k)
    z = torch.tensor([[[0.6, 0.8], [-0.6, -0.8]]], dtype=F64)
    gamma = [1 / (8 * (k + 2)) for k in range(2000)]
    result = contraction_rate(tokens=z, alpha=[g / (1 - g) for g in gamma], layers=2000)
    assert result.holds == "sublinear" and result.power == pytest.approx(-0.5, abs=0.05)
    checks = result.check()
    assert not checks["single_cluster"].passed and not checks["sublinear_rate"].passed
    assert not checks["linear_rate"].passed and checks["origin"].passed  # the symmetric pair's centre is 0


def test_random_tokens_collapse_geometrically_but_not_at_the_origin():
    result = contraction_rate(sequences=16, layers=200)
    checks = result.check()
    assert checks["single_cluster"].passed and result.holds == "geometric"
    assert 0.5 < result.ratio < 0.8  # measured: ≈ 0.66 per layer on the energy gap at γ = 1/3
    assert checks["linear_rate"].passed and checks["sublinear_rate"].passed
    assert not checks["origin"].passed and float(result.limit.min()) > 1e-4  # the first abstract's "at the origin"


# --- finite β: escape times ----------------------------------------------------------------------------------------

def test_escape_from_exact_vertices_is_the_symmetric_polygons_recurrence():
    for vertices, alpha in ((5, 1.0), (6, 0.25)):
        result = escape_times(spread=0.0, sequences=1, vertices=vertices, alpha=alpha)
        assert torch.equal(result.layers, result.polygon), (result.layers, result.polygon)


def test_escape_times_grow_exponentially_in_beta():
    result = escape_times()
    assert result.check().passed, result.check().value
    assert (result.layers <= result.polygon).all()  # a spread start leaves sooner than the exact polygon
    assert 0.45 < result.slope < result.gap and abs(result.corrected - result.gap) < 0.1
    flat = dataclasses.replace(result, layers=torch.tensor([5.0, 5, 6, 5], dtype=F64))
    assert not flat.check().passed and not dataclasses.replace(result, r2=0.9).check().passed
    never = escape_times(betas=(16.0, 32.0), max_layers=50, chunk=20)
    assert torch.isinf(never.layers).all() and math.isnan(never.slope) and not never.check().passed


# --- bad input -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("call", "message"), [
    (lambda: hardmax_layers(torch.zeros(2, 3, 2), [[1, 2], [0, 1]], alpha=1, layers=1), "symmetric"),
    (lambda: hardmax_layers(torch.zeros(2, 3, 2), torch.eye(3), alpha=1, layers=1), r"shape \(2, 2\)"),
    (lambda: hardmax_layers(torch.zeros(2, 3, 2), torch.eye(2), alpha=0, layers=1), "alpha"),
    (lambda: hardmax_layers(torch.zeros(2, 3, 2), torch.eye(2), alpha=[1, 1], layers=3), "one per layer"),
    (lambda: hardmax_layers(torch.zeros(2, 3, 2), torch.eye(2), alpha=1, layers=-1), "layers"),
    (lambda: hardmax_layers(torch.zeros(2), torch.eye(2), alpha=1, layers=1), "tokens"),
    (lambda: hardmax_layers(torch.full((3, 2), math.nan), torch.eye(2), alpha=1, layers=1), "NaN"),
    (lambda: dominance_cells(torch.zeros(3, 2), torch.zeros(4, 3), torch.eye(2)), "share d"),
    (lambda: voronoi_check(A=-torch.eye(2)), "positive semidefinite"),
    (lambda: voronoi_check(vertices=2), "vertices"),
    (lambda: voronoi_check(sequences=0), "sequences"),
    (lambda: contraction_rate(A=torch.eye(2)), "negative semidefinite"),
    (lambda: contraction_rate(tokens=torch.zeros(3, 2)), "tokens"),
    (lambda: escape_times(betas=(2.0,)), "betas"),
    (lambda: escape_times(radius=0.7), "radius"),
])
def test_bad_input_is_one_line_naming_the_problem(call, message):
    with pytest.raises(ValueError, match=message) as error:
        call()
    assert "\n" not in str(error.value)
