"""The long-context experiment (Chen, Lin, Polyanskiy, Rigollet 2026): the cell's numbers against a direct
computation and the exact simplex's closed form, the crossing locator against tables whose crossings are known, the
sweep task's row against the experiment's, and the paper's limits."""

from __future__ import annotations

import concurrent.futures
import math

import numpy as np
import pytest
import torch

from hardmax.dynamics import RK4, Field, Save, Softmax, Sphere, solve
from hardmax.experiments.long_context import (
           annealed_gamma,
           crossing,
           long_context_cell,
           paper_gamma,
           simplex_cell,
           simplex_gamma,
           simplex_tokens,
           transition,
)
from hardmax.sweep import TASKS, cells, read_table, sweep


def _pairwise_mean_cosine(z: torch.Tensor) -> float:
    u = torch.nn.functional.normalize(z, dim=-1)
    G = u @ u.T
    n = len(u)
    return float((G.sum() - G.diagonal().sum()) / (n * (n - 1)))


def test_simplex_tokens_are_unit_with_pairwise_cosine_rho():
    y = simplex_tokens(10, 11, 0.3)
    G = y @ y.T
    assert torch.allclose(G.diagonal(), torch.ones(10, dtype=torch.float64), atol=1e-15)
    off = G[~torch.eye(10, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, 0.3), atol=1e-15)
    z = simplex_tokens(400, 50, 0.5, seed=1)  # the almost simplex: ρ + (1 − ρ) N(0, 1/(d − 1)) roughly
    Gz = z @ z.T
    assert torch.allclose(Gz.diagonal(), torch.ones(400, dtype=torch.float64), atol=1e-14)
    spread = Gz[~torch.eye(400, dtype=torch.bool)]
    assert abs(float(spread.mean()) - 0.5) < 0.005
    assert float(spread.std()) == pytest.approx(0.5 / math.sqrt(49), rel=0.05)
    assert torch.equal(z, simplex_tokens(400, 50, 0.5, seed=1))
    assert not torch.equal(z, simplex_tokens(400, 50, 0.5, seed=2))


@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_one_layer_is_the_papers_layer_computed_directly(alpha):
    n, d, gamma, rho = 48, 16, 2.2, 0.4
    cell = long_context_cell(n=n, gamma=gamma, rho=rho, d=d, alpha=alpha, seed=5)
    y = simplex_tokens(n, d, rho, seed=5)
    beta = gamma * math.log(n)
    A = torch.softmax(beta * y @ y.T, dim=-1)
    out = alpha * y + A @ y  # x' = α x + Σ_j A_ij y_j (|x_i| = 1)
    c_in, c_out = _pairwise_mean_cosine(y), _pairwise_mean_cosine(out)
    assert cell.beta == pytest.approx(beta, rel=1e-15)
    assert cell.cosine_in == pytest.approx(c_in, abs=1e-13)
    assert cell.cosine_out == pytest.approx(c_out, abs=1e-12)
    assert cell.angle_ratio == pytest.approx(math.acos(c_out) / math.acos(c_in), abs=1e-12)
    assert cell.self_attention == pytest.approx(float(A.diagonal().mean()), abs=1e-13)
    assert cell.engine == "softmax"  # the compiled softmax flows ran the layer


def test_the_flow_is_the_sphere_flow_solved_directly():
    n, d, gamma = 40, 12, 2.5
    cell = long_context_cell(n=n, gamma=gamma, d=d, time=2.0, dt=0.25, seed=3)
    y = simplex_tokens(n, d, 0.5, seed=3)
    run = solve(Field(Softmax(gamma * math.log(n)), manifold=Sphere()), RK4(0.25), y, steps=8, save=Save.final())
    assert cell.cosine_out == pytest.approx(_pairwise_mean_cosine(run.final), abs=1e-12)


@pytest.mark.parametrize(("alpha", "time"), [(0.0, 0.0), (1.0, 0.0), (0.0, 2.0)])
@pytest.mark.parametrize("gamma", [1.0, 2.0, 3.0])
def test_the_exact_simplex_through_solve_is_the_closed_form(alpha, time, gamma):
    n = 24
    cell = long_context_cell(n=n, gamma=gamma, d=n + 1, alpha=alpha, time=time, dt=0.05)
    ratio, self_mass = simplex_cell(n, gamma, alpha=alpha, time=time, dt=1e-3)
    assert cell.angle_ratio == pytest.approx(ratio, abs=1e-6)
    assert cell.self_attention == pytest.approx(self_mass, abs=1e-13)


def test_crossing_on_tables_with_known_crossings():
    g = np.linspace(1.0, 3.0, 11)
    ramp = np.clip(g - 1.5, 0.0, 1.0)  # crosses 0.5 at 2.0 and 0.25 at 1.75 (between grid points)
    assert crossing(g, ramp) == pytest.approx(2.0, abs=1e-12)
    assert crossing(g, ramp, 0.25) == pytest.approx(1.75, abs=1e-12)
    shuffled = np.random.default_rng(0).permutation(11)
    assert crossing(g[shuffled], ramp[shuffled], 0.25) == pytest.approx(1.75, abs=1e-12)
    logistic = 1 / (1 + np.exp(-(np.linspace(0, 4, 401) - 2.37) / 0.1))
    assert crossing(np.linspace(0, 4, 401), logistic) == pytest.approx(2.37, abs=1e-3)
    assert math.isnan(crossing(g, np.full(11, 0.2)))
    assert math.isnan(crossing(g, np.full(11, 0.8)))
    with pytest.raises(ValueError, match="level must lie in"):
        crossing(g, ramp, 1.0)
    with pytest.raises(ValueError, match="one length"):
        crossing(g, ramp[:-1])


def _synthetic_rows(ns, centre):
    """Rows whose seed-averaged angle ratio is the ramp 0.5 + (γ − centre(n)), clipped: γ_c(n) = centre(n)."""
    rows = []
    for n in ns:
        for gamma in np.round(np.arange(1.0, 3.01, 0.1), 2):
            for seed, shift in ((0, 0.1), (1, -0.1)):
                value = float(np.clip(0.5 + gamma - centre(n), 0, 1) + shift)
                rows.append({"task": "long_context", "n": n, "gamma": float(gamma), "rho": 0.5, "d": 64,
                             "alpha": 0.0, "time": 0.0, "seed": seed, "angle_ratio": value,
                             "self_attention": value, "error": None})
    return rows


def test_transition_locates_a_known_critical_curve():
    ns = [64, 256, 1024]
    centre = {n: 2.0 + 1.0 / math.log(n) for n in ns}
    rows = _synthetic_rows(ns, centre.get)
    rows.append({"task": "long_context", "n": 64, "gamma": 9.0, "error": "boom"})  # a failed cell is skipped
    found = transition(rows)
    assert found.ns == tuple(ns)
    assert found.gamma == pytest.approx([centre[n] for n in ns], abs=1e-9)
    assert found.gamma_paper == 2.0
    assert found.gamma_simplex == pytest.approx([simplex_gamma(n) for n in ns])
    assert all(math.isnan(a) for a in found.gamma_annealed)
    assert "| 1,024 |" in found.table()
    other = [{**r, "d": 32} for r in _synthetic_rows(ns, lambda n: 2.5)]
    with pytest.raises(ValueError, match="several values of d"):
        transition(rows + other)
    assert transition(rows + other, where={"d": 32}).gamma == pytest.approx([2.5] * 3, abs=1e-9)
    with pytest.raises(ValueError, match="no long_context rows"):
        transition(rows, where={"d": 7})
    fig = found.figure()
    assert len(fig.axes) == 2


def test_the_exact_simplex_critical_gamma_tends_to_the_papers():
    rho = 0.5
    for n in (64, 4096):  # the self-attention's crossing of 1/2: e^β = (n − 1) e^{βρ}
        assert simplex_gamma(n, rho=rho, statistic="self_attention") == pytest.approx(
            math.log(n - 1) / ((1 - rho) * math.log(n)), rel=1e-9)
    # one layer's λ = 1/2 tends to 1/(1 − ρ) as n grows, slowly (a gap of about 0.87 / log n)
    gaps = [abs(simplex_gamma(2**k, rho=rho) - paper_gamma(rho)) for k in (6, 10, 14, 20, 40)]
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 0.035
    assert paper_gamma(0.75) == 4.0


def test_below_the_critical_gamma_one_layer_collapses_above_it_is_near_identity():
    n, d = 2048, 64
    low = long_context_cell(n=n, gamma=1.2, d=d, seed=1)
    high = long_context_cell(n=n, gamma=3.0, d=d, seed=1)
    assert low.angle_ratio < 0.25 and low.self_attention < 0.05
    assert high.angle_ratio > 0.95 and high.self_attention > 0.9


def test_the_annealed_estimate_predicts_the_self_attention_at_finite_d():
    n, d, rho = 1024, 32, 0.5
    g = annealed_gamma(n, d, rho)
    assert g > simplex_gamma(n, rho=rho, statistic="self_attention") + 0.05  # finite d moves the transition up
    cell = long_context_cell(n=n, gamma=g, d=d, rho=rho, seed=0)
    assert cell.self_attention == pytest.approx(0.5, abs=0.03)
    assert annealed_gamma(64, 65, rho) == pytest.approx(math.log(63) / (0.5 * math.log(64)))


def test_the_sweep_task_row_is_the_experiments():
    task = TASKS["long_context"]
    cell = cells(task, [{"n": 32, "gamma": 2.0, "d": 8, "seed": 3, "alpha": 0.5}])[0]
    row = task.function(**cell)
    direct = long_context_cell(n=32, gamma=2.0, d=8, seed=3, alpha=0.5)
    assert row == {"beta": direct.beta, "angle_ratio": direct.angle_ratio, "self_attention": direct.self_attention,
                   "cosine_in": direct.cosine_in, "cosine_out": direct.cosine_out, "engine": direct.engine}


def test_a_sweep_locates_the_transition(tmp_path):
    grid = {"n": [32, 64], "gamma": [1.0, 1.5, 2.0, 2.5, 3.0], "d": [33, 65]}
    grid = [c for c in cells(TASKS["long_context"], grid) if c["d"] == c["n"] + 1]  # the exact simplex
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        sweep("long_context", grid, out=tmp_path, executor=ex, progress=False)
    rows = read_table(tmp_path).to_pylist()
    assert len(rows) == 10 and all(r["error"] is None for r in rows)
    for n, d in ((32, 33), (64, 65)):
        found = transition(rows, where={"n": n, "d": d})
        g = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
        exact = [simplex_cell(n, x)[0] for x in g]
        assert found.gamma[0] == pytest.approx(crossing(g, exact), abs=1e-9)


def test_bad_input_is_refused_in_one_line():
    for kwargs, message in (({"n": 1, "gamma": 1.0}, "n must be an integer ≥ 2"),
                            ({"n": 8, "gamma": 1.0, "rho": 1.0}, "rho must lie in"),
                            ({"n": 8, "gamma": -1.0}, "gamma must be"),
                            ({"n": 8, "gamma": 1.0, "d": 2}, "d must be an integer ≥ 3"),
                            ({"n": 8, "gamma": 1.0, "time": -1.0}, "time must be"),
                            ({"n": 8, "gamma": 1.0, "alpha": -0.5}, "alpha must be"),
                            ({"n": 8, "gamma": 1.0, "time": 1.0, "dt": 0.0}, "dt must be")):
        with pytest.raises(ValueError, match=message):
            long_context_cell(**kwargs)
    with pytest.raises(ValueError, match="statistic must be one of"):
        transition([], statistic="entropy")
    with pytest.raises(ValueError, match="statistic must be one of"):
        simplex_gamma(64, statistic="entropy")
