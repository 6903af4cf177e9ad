"""CONTRIBUTING.md's recipes, followed as written, from this file, with nothing in src/ touched: a new attention rule
(`Sparsemax`), a new solver (`Heun`, order 2), new scores (`Rotating`) and a value matrix V each reach `solve`
(against a slow loop written from its equation), `check_flow` (the claims whose hypotheses hold are tested, the
others say "not tested") and the flow figure (a PNG). The manifold recipe has its own file,
tests/test_dynamics_manifolds.py. If a recipe needs a step these toys do not take, CONTRIBUTING.md must say so."""

from __future__ import annotations

import ast
import inspect
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from test_dynamics_flow import ref_velocity as flow_velocity

from hardmax.dynamics import (
    RK4,
    RULES,
    AttentionRule,
    Bilinear,
    Causal,
    Euler,
    Field,
    Flat,
    Hardmax,
    Rescaled,
    Save,
    Scores,
    Softmax,
    Solution,
    Sphere,
    simulate,
    solve,
)
from hardmax.plots.flows import flow_figure
from hardmax.theory.flows import check_flow

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"
NOT_TESTED = "not tested"


# --------------------------------------------------------------------------------------------
# the toys, as CONTRIBUTING.md writes them
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sparsemax:
    """Sparsemax attention (Martins & Astudillo 2016): P_i = argmin_{p ∈ Δ} ‖p − β s_i‖², token j counted w_j times.

    P_ij = w_j max(β s_ij − τ_i, 0), the threshold τ_i such that Σ_j w_j max(β s_ij − τ_i, 0) = 1: a sparse row.
    """

    beta: float
    row_stochastic: ClassVar[bool] = True        # rows sum to 1: check_flow tests the nested hulls

    def __post_init__(self):
        b = self.beta
        if isinstance(b, bool) or not isinstance(b, int | float) or not (math.isfinite(b) and b > 0):
            raise ValueError(f"sparsemax attention needs a finite beta > 0, got {b!r}")

    def matrix(self, tokens, multiplicity, A, allowed=None):  # (batch, m, d), (batch, m), (d, d) | None,
        # (batch or 1, m, m) bool | None -> (batch, m, m)
        queries = tokens if A is None else tokens @ A
        s = self.beta * (queries @ tokens.transpose(-1, -2))
        w = multiplicity.unsqueeze(-2).expand_as(s)
        if allowed is not None:  # a key row i may not see weighs nothing in row i
            w = torch.where(allowed, w, torch.zeros((), dtype=w.dtype))
        s = torch.where(w > 0, s, torch.finfo(s.dtype).min)  # absent keys sort last and weigh nothing
        order = torch.argsort(s, dim=-1, descending=True)
        s_sorted, w_sorted = s.gather(-1, order), w.gather(-1, order)
        count, total = w_sorted.cumsum(-1), (w_sorted * s_sorted).cumsum(-1)
        support = (w_sorted > 0) & (1 + count * s_sorted > total)  # a prefix of the sorted keys
        last = (support.sum(-1, keepdim=True) - 1).clamp(min=0)
        tau = (total.gather(-1, last) - 1) / count.gather(-1, last).clamp(min=torch.finfo(s.dtype).tiny)
        p = w * (s - tau).clamp(min=0)
        return torch.where((multiplicity > 0).unsqueeze(-1), p, torch.zeros((), dtype=p.dtype, device=p.device))

    def targets(self, tokens, multiplicity, A, allowed=None):  # -> (batch, m, d): Σ_j P_ij z_j
        return self.matrix(tokens, multiplicity, A, allowed) @ tokens


@dataclass(frozen=True)
class Heun:
    """Heun's method (explicit trapezoid), retracted onto the manifold; order 2."""

    dt: float
    order = 2

    def steps(self, count, dtype, device):       # (count,) step sizes
        return torch.full((count,), self.dt, dtype=dtype, device=device)

    def step(self, field, t, z, w, dt):          # (batch, n, d) -> (batch, n, d)
        k1 = field.velocity(t, z, w)
        k2 = field.velocity(t + dt, z + dt * k1, w)
        return field.manifold.retract(z + dt / 2 * (k1 + k2))


@dataclass(frozen=True, eq=False)
class Rotating:
    """Scores z_iᵀ A(t) z_j with A(t) a rotation by ω t in the first two coordinates (softmax rules)."""

    omega: float
    d: int = 2                                   # the tokens' dimension (A's size is the scores' own)

    def matrix(self, t, like):                   # (d, d) A(t) in like's dtype and device (like may be empty)
        c, s = math.cos(self.omega * t), math.sin(self.omega * t)
        A = torch.eye(self.d, dtype=like.dtype, device=like.device)
        A[:2, :2] = torch.tensor([[c, -s], [s, c]], dtype=like.dtype)
        return A

    symmetric = False                            # hardmax refuses non-symmetric scores (one-line error)

    def rows(self, rows):                        # the scores of a slice of sequences (batched A: slice it)
        return self


# --------------------------------------------------------------------------------------------
# slow references, one token at a time, from the equations
# --------------------------------------------------------------------------------------------


def ref_sparsemax(scores: list[float]) -> list[float]:
    """argmin_{p ∈ Δ} ‖p − scores‖²: p_j = max(scores_j − τ, 0) with Σ_j p_j = 1, the threshold τ by bisection."""
    lo, hi = max(scores) - 1.0, max(scores)  # Σ_j max(s_j − lo, 0) ≥ 1 ≥ Σ_j max(s_j − hi, 0) = 0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(max(s - mid, 0.0) for s in scores) > 1 else (lo, mid)
    return [max(s - (lo + hi) / 2, 0.0) for s in scores]


def ref_weights(z: np.ndarray, A: np.ndarray, rule) -> np.ndarray:
    """(n, n) P of one sequence, row by row: every token its own (repeated tokens are separate copies)."""
    n = len(z)
    scores = [[float(z[i] @ A @ z[j]) for j in range(n)] for i in range(n)]
    if isinstance(rule, Sparsemax):
        return np.array([ref_sparsemax([rule.beta * s for s in row]) for row in scores])
    assert isinstance(rule, Softmax)
    rows = [[math.exp(rule.beta * (s - max(row))) for s in row] for row in scores]
    return np.array([[e / sum(row) for e in row] for row in rows])


def ref_velocity(z: np.ndarray, A: np.ndarray, V: np.ndarray, rule, sphere: bool) -> np.ndarray:
    """(n, d) the field from this file's weights (Sparsemax among them), by test_flow's one-token-at-a-time loop."""
    return flow_velocity(z, A, V, rule, sphere, weights=ref_weights)


def ref_solve(z, A_of_t, V, rule, method: str, dt: float, steps: int, sphere: bool = False) -> np.ndarray:
    """(steps + 1, n, d) Euler, Heun or RK4 steps of `ref_velocity` (A(t) at each stage's time), normalised on the
    sphere."""
    z = np.array(z, dtype=np.float64)
    V = np.eye(z.shape[1]) if V is None else np.asarray(V)
    def f(t, y):
        return ref_velocity(y, A_of_t(t), V, rule, sphere)
    t, path = 0.0, [z]
    for _ in range(steps):
        if method == "euler":
            z = z + dt * f(t, z)
        elif method == "heun":
            k1 = f(t, z)
            k2 = f(t + dt, z + dt * k1)
            z = z + dt / 2 * (k1 + k2)
        else:
            k1 = f(t, z)
            k2 = f(t + dt / 2, z + dt / 2 * k1)
            k3 = f(t + dt / 2, z + dt / 2 * k2)
            k4 = f(t + dt, z + dt * k3)
            z = z + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if sphere:
            z = z / np.linalg.norm(z, axis=1, keepdims=True)
        t += dt
        path.append(z)
    return np.stack(path)


def ref_layers(z: np.ndarray, A: np.ndarray, rule, alpha: float, layers: int) -> np.ndarray:
    """(layers + 1, n, d) the paper's layers z_i ← z_i + γ(Σ_j P_ij z_j − z_i), γ = α/(1+α), from the definition."""
    gamma = alpha / (1 + alpha)
    path = [np.array(z, dtype=np.float64)]
    for _ in range(layers):
        x = path[-1]
        P = ref_weights(x, A, rule)
        path.append(np.stack([x[i] + gamma * (sum(P[i, j] * x[j] for j in range(len(x))) - x[i])
                              for i in range(len(x))]))
    return np.stack(path)


def _random(shape, seed):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _sphere(shape, seed):
    return torch.nn.functional.normalize(_random(shape, seed), dim=-1)


def _identity(d):
    return lambda t: np.eye(d)


def _statuses(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def _renders(sol, path: Path, **kwargs) -> None:
    fig = flow_figure(sol, (0, -1), **kwargs)
    fig.savefig(path)
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 2_000
    assert [ax.get_title() for ax in fig.axes[:2]] == ["t = 0", f"t = {float(sol.times[-1]):.3g}"]


def _nested_hulls(tokens: torch.Tensor) -> float:
    """The largest growth, over 256 directions u, of the support function max_i ⟨u, z_i⟩ from one saved state to
    the next ((saved, batch, n, 2) tokens): ≤ 0 when the convex hulls are nested."""
    u = torch.nn.functional.normalize(_random((256, 2), 1), dim=-1)
    support = (tokens @ u.T).amax(-2)
    return float((support[1:] - support[:-1]).max())


SPD = torch.tensor([[1.5, 0.3], [0.3, 0.8]], dtype=torch.float64)
V2 = torch.tensor([[1.0, 0.4], [-0.3, 0.7]], dtype=torch.float64)


# --------------------------------------------------------------------------------------------
# a new attention rule: Sparsemax
# --------------------------------------------------------------------------------------------


class TestNewRule:
    """"How to add an attention rule": one class with `matrix` and `targets`; `simulate`, `solve`, the JSON
    spelling (once registered in RULES), `check_flow` and the flow figure take it."""

    def test_it_is_an_attention_rule_with_a_one_line_error_for_bad_parameters(self):
        assert isinstance(Sparsemax(2.0), AttentionRule)
        for bad in (0.0, -1.0, math.inf, True, "2"):
            with pytest.raises(ValueError, match="sparsemax attention needs a finite beta > 0") as info:
                Sparsemax(bad)
            assert "\n" not in str(info.value)

    def test_its_rows_are_the_projection_onto_the_simplex_and_sparse(self):
        z = _random((2, 9, 3), 0)
        P = Sparsemax(3.0).matrix(z, torch.ones(2, 9, dtype=torch.float64), None)
        for b in range(2):
            np.testing.assert_allclose(P[b].numpy(), ref_weights(z[b].numpy(), np.eye(3), Sparsemax(3.0)),
                                       rtol=0, atol=1e-12)
        torch.testing.assert_close(P.sum(-1), torch.ones(2, 9, dtype=torch.float64), rtol=0, atol=1e-12)
        assert bool((P == 0).any()) and bool(((P > 0).sum(-1) > 1).any())  # sparse, and not hardmax

    def test_simulate_runs_it_as_its_definition_with_repeated_tokens_and_padding(self):
        """simulate merges repeated tokens into one with a multiplicity w_j; the reference keeps every copy, so
        this holds the rule's weighting by w_j to the definition."""
        z = _random((3, 7, 2), 2)
        z[0, 4] = z[0, 5] = z[0, 1]  # one token three times
        z[1, 6] = z[1, 0]
        mask = torch.ones(3, 7, dtype=torch.bool)
        mask[2, 5:] = False
        traj = simulate(z, Sparsemax(beta=2.0), alpha=0.5, layers=6, A=SPD, mask=mask)
        assert traj.tokens.shape == (7, 3, 7, 2)
        for b in range(3):
            ref = ref_layers(z[b, mask[b]].numpy(), SPD.numpy(), Sparsemax(2.0), alpha=0.5, layers=6)
            np.testing.assert_allclose(traj.tokens[:, b][:, mask[b]].numpy(), ref, rtol=0, atol=1e-12)
        assert float((traj.tokens[-1] - z)[mask].abs().max()) > 0.1  # the tokens moved
        # permutation equivariance: permuting the tokens permutes the trajectory
        perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
        moved = simulate(z[:2, perm], Sparsemax(beta=2.0), alpha=0.5, layers=6, A=SPD).tokens
        torch.testing.assert_close(moved, traj.tokens[:, :2][:, :, perm], rtol=0, atol=1e-12)

    @pytest.mark.parametrize("sphere", [False, True])
    def test_solve_runs_it_as_its_equation(self, sphere):
        z = _sphere((2, 6, 3), 3) if sphere else _random((2, 6, 3), 3)
        field = Field(Sparsemax(1.5), manifold=Sphere() if sphere else Flat())
        sol = solve(field, RK4(0.1), z, steps=15)
        assert sol.engine == "reference"  # only the paper's field has a fast path
        assert solve(field, Euler.layers(1.0), z, steps=2).engine == "reference"
        for b in range(2):
            ref = ref_solve(z[b].numpy(), _identity(3), None, Sparsemax(1.5), "rk4", 0.1, 15, sphere=sphere)
            np.testing.assert_allclose(sol.tokens[:, b].numpy(), ref, rtol=0, atol=1e-12)

    def test_a_pair_mask_restricts_each_row_to_its_keys(self):
        """With `allowed=` (the recipe's signature) the rule runs under `Causal()`: row i is sparsemax over the keys
        j ≤ i, by the definition; without it, `solve` refuses the pair mask in one line and runs token masks."""
        z = _random((2, 6, 2), 8)
        sol = solve(Field(Sparsemax(2.0)), Euler(0.2), z, steps=5, mask=Causal())
        for b in range(2):
            x, path = z[b].numpy(), [z[b].numpy()]
            for _ in range(5):
                P = np.zeros((6, 6))
                for i in range(6):
                    P[i, :i + 1] = ref_sparsemax([2.0 * float(x[i] @ x[j]) for j in range(i + 1)])
                x = x + 0.2 * (P @ x - x)
                path.append(x)
            np.testing.assert_allclose(sol.tokens[:, b].numpy(), np.stack(path), rtol=0, atol=1e-12)
        assert torch.equal(sol.tokens[:, :, 0], z[:, 0].expand(6, 2, 2))  # the first token sees only itself
        token_masks_only = dataclass(frozen=True)(type("TokenMasksOnly", (Sparsemax,), {
            "matrix": lambda self, tokens, multiplicity, A: Sparsemax.matrix(self, tokens, multiplicity, A),
            "targets": lambda self, tokens, multiplicity, A: self.matrix(tokens, multiplicity, A) @ tokens}))
        with pytest.raises(ValueError, match="need an allowed= argument") as info:
            solve(Field(token_masks_only(2.0)), Euler(0.2), z, steps=5, mask=Causal())
        assert "\n" not in str(info.value)
        present = torch.ones(2, 6, dtype=torch.bool)
        present[1, 4:] = False
        torch.testing.assert_close(solve(Field(token_masks_only(2.0)), Euler(0.2), z, steps=5, mask=present).tokens,
                                   solve(Field(Sparsemax(2.0)), Euler(0.2), z, steps=5, mask=present).tokens,
                                   rtol=0, atol=0)

    def test_its_json_spelling_is_one_registration_in_RULES(self, monkeypatch):
        traj = simulate(_random((5, 2), 4), Sparsemax(2.0), alpha=1.0, layers=3)
        with pytest.raises(ValueError, match=r"Sparsemax is not a registered rule .*add it to RULES") as info:
            traj.to_dict()
        assert "\n" not in str(info.value)
        monkeypatch.setitem(RULES, "sparsemax", Sparsemax)
        record = json.loads(json.dumps(traj.to_dict()))
        assert record["rule"] == {"rule": "sparsemax", "beta": 2.0}
        back = Solution.from_dict(record)
        assert back.rule == Sparsemax(2.0) and torch.equal(back.tokens, traj.tokens)

    def test_check_flow_and_the_flow_figure_take_it(self, tmp_path):
        z = _random((3, 8, 2), 5)
        sol = solve(Field(Sparsemax(2.0)), Euler(0.2), z, steps=40, save=Save(every=5))
        report = check_flow(sol)
        statuses = _statuses(report)
        assert report.passed and statuses.pop("finite") == "passed"
        # the hull claim holds for any row-stochastic rule (measured here): check_flow tests it because the class
        # declares row_stochastic = True (hardmax.dynamics.rules); a rule that declares nothing is "not tested"
        assert _nested_hulls(sol.tokens) <= 1e-12
        assert statuses.pop("hull") == "passed"
        undeclared = dataclass(frozen=True)(type("Undeclared", (Sparsemax,), {"row_stochastic": False}))
        assert check_flow(solve(Field(undeclared(2.0)), Euler(0.2), z, steps=40, save=Save(every=5)))[
            "hull"].status == NOT_TESTED
        assert set(statuses.values()) == {NOT_TESTED}  # flat, no rescaled scores, not SA/USA: nothing else applies
        _renders(sol, tmp_path / "sparsemax.png", title="sparsemax attention")


# --------------------------------------------------------------------------------------------
# a new solver: Heun
# --------------------------------------------------------------------------------------------


class TestNewSolver:
    """"A fixed-step solver is steps(count, dtype, device) and step(...)": `solve` steps it, with steps= or t1=,
    batched, on any manifold, with gradients; its measured order is its declared `order`."""

    @pytest.mark.parametrize("sphere", [False, True])
    def test_solve_steps_it_as_its_equation(self, sphere):
        z = _sphere((3, 5, 2), 6) if sphere else _random((3, 5, 2), 6)
        field = Field(Softmax(1.3), scores=Bilinear(SPD), value=V2, manifold=Sphere() if sphere else Flat())
        sol = solve(field, Heun(0.1), z, steps=20)
        assert sol.tokens.shape == (21, 3, 5, 2) and sol.times[-1].item() == pytest.approx(2.0, abs=1e-12)
        for b in range(3):
            ref = ref_solve(z[b].numpy(), lambda t: SPD.numpy(), V2.numpy(), Softmax(1.3), "heun", 0.1, 20, sphere)
            np.testing.assert_allclose(sol.tokens[:, b].numpy(), ref, rtol=0, atol=1e-12)
        if sphere:
            assert float((sol.tokens.norm(dim=-1) - 1).abs().max()) <= 1e-14  # retracted at every step

    def test_the_measured_order_of_convergence_is_its_declared_order(self):
        z = _random((6, 3), 5) * 0.5
        V = torch.eye(3, dtype=torch.float64) + 0.3 * _random((3, 3), 6)
        field = Field(Softmax(1.0), scores=Bilinear(_random((3, 3), 7)), value=V)
        exact = solve(field, RK4(1e-3), z, t1=1.0, save=Save.final()).final  # error ~1e-15
        dts = [0.2, 0.1, 0.05, 0.025]
        errors = [float((solve(field, Heun(dt), z, t1=1.0, save=Save.final()).final - exact).abs().max())
                  for dt in dts]
        slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
        assert abs(slope - Heun.order) < 0.2, (slope, errors)

    def test_the_recipes_call_runs_with_gradients(self):
        tokens = _random((5, 2), 8).requires_grad_()
        sol = solve(Field(Softmax(2.0), scores=Rotating(0.5)), Heun(0.05), tokens, t1=10.0)
        assert len(sol.times) == 201 and sol.times[-1].item() == pytest.approx(10.0, abs=1e-12)
        sol.final.square().sum().backward()
        grad = tokens.grad
        assert grad is not None and bool(torch.isfinite(grad).all()) and float(grad.abs().max()) > 0

    def test_check_flow_and_the_flow_figure_take_it(self, tmp_path):
        z = _sphere((4, 8, 3), 9)
        sol = solve(Field(Softmax(2.0), manifold=Sphere()), Heun(0.1), z, t1=40.0, save=Save(every=20))
        report = check_flow(sol)
        assert _statuses(report) == {
            "finite": "passed", "norms": "passed", "hull": NOT_TESTED, "polytope": NOT_TESTED,
            "hyperplanes": NOT_TESTED, "boolean": NOT_TESTED, "single_cluster": "passed", "energy": "passed"}
        _renders(sol, tmp_path / "heun.png", title="SA on the sphere, Heun")


# --------------------------------------------------------------------------------------------
# new scores: Rotating
# --------------------------------------------------------------------------------------------


def rotation(omega: float, d: int):
    """A(t) of `Rotating`, from its definition."""
    def A(t):
        out = np.eye(d)
        c, s = math.cos(omega * t), math.sin(omega * t)
        out[:2, :2] = [[c, -s], [s, c]]
        return out
    return A


class TestNewScores:
    """"New scores are an object with matrix(t, like), symmetric and rows(slice)": the field asks them for A(t) at
    each stage's time; hardmax refuses them when not symmetric; A's size is checked against the tokens'."""

    def test_they_are_scores_and_hardmax_refuses_them(self):
        assert isinstance(Rotating(0.5), Scores)
        with pytest.raises(ValueError, match="hardmax attention needs symmetric scores") as info:
            Field(Hardmax(), scores=Rotating(0.5))
        assert "\n" not in str(info.value)
        with pytest.raises(ValueError, match=r"A must be \(2, 2\) to match tokens of dimension 2, got \(3, 3\)"):
            solve(Field(Softmax(1.0), scores=Rotating(0.5, d=3)), RK4(0.1), _random((4, 2), 0), steps=1)

    @pytest.mark.parametrize("method, solver", [("euler", Euler(0.1)), ("rk4", RK4(0.1)), ("heun", Heun(0.1))])
    def test_solve_asks_them_at_every_stages_time(self, method, solver):
        z = _random((2, 6, 3), 10)
        sol = solve(Field(Softmax(2.0), scores=Rotating(0.8, d=3)), solver, z, steps=25)
        for b in range(2):
            ref = ref_solve(z[b].numpy(), rotation(0.8, 3), None, Softmax(2.0), method, 0.1, 25)
            np.testing.assert_allclose(sol.tokens[:, b].numpy(), ref, rtol=0, atol=1e-12)
        fixed = solve(Field(Softmax(2.0)), solver, z, steps=25)
        assert float((fixed.final - sol.final).abs().max()) > 1e-3  # the rotation changes the flow

    def test_check_flow_and_the_flow_figure_take_them(self, tmp_path):
        sol = solve(Field(Softmax(2.0), scores=Rotating(0.5)), RK4(0.1), _random((3, 8, 2), 11), steps=60,
                    save=Save(every=6))
        report = check_flow(sol)
        # V = I in R^d with a row-stochastic rule: the hull claim applies whatever the scores; the claims of
        # A = β I or of the 2023 rescaled scores do not
        assert _statuses(report) == {
            "finite": "passed", "norms": NOT_TESTED, "hull": "passed", "polytope": NOT_TESTED,
            "hyperplanes": NOT_TESTED, "boolean": NOT_TESTED, "single_cluster": NOT_TESTED, "energy": NOT_TESTED}
        assert report.verdict == "PASSED"
        _renders(sol, tmp_path / "rotating.png", title="softmax with rotating scores")


# --------------------------------------------------------------------------------------------
# a value matrix V
# --------------------------------------------------------------------------------------------


class TestValueMatrix:
    """"A value matrix is `Field(rule, value=V)`": the manifold's velocity applies it (R^d: V(Σ_j P_ij z_j − z_i);
    the sphere: P⊥(V Σ_j P_ij x_j)); with `Rescaled(scores, V)` it is the 2023 paper's flow, whose claims
    `check_flow` tests; a V of the wrong size is a one-line error."""

    @pytest.mark.parametrize("sphere", [False, True])
    def test_solve_applies_it_as_the_equation_says(self, sphere):
        z = _sphere((2, 6, 2), 12) if sphere else _random((2, 6, 2), 12)
        manifold = Sphere() if sphere else Flat()
        sol = solve(Field(Softmax(1.0), value=V2, manifold=manifold), Euler(0.05), z, steps=30)
        for b in range(2):
            ref = ref_solve(z[b].numpy(), _identity(2), V2.numpy(), Softmax(1.0), "euler", 0.05, 30, sphere)
            np.testing.assert_allclose(sol.tokens[:, b].numpy(), ref, rtol=0, atol=1e-12)
        plain = solve(Field(Softmax(1.0), manifold=manifold), Euler(0.05), z, steps=30)
        assert float((plain.final - sol.final).abs().max()) > 1e-2
        V = V2.clone().requires_grad_()  # a V that requires grad gets a gradient
        solve(Field(Softmax(1.0), value=V, manifold=manifold), Euler(0.05), z, steps=30).final.square().sum().backward()
        assert V.grad is not None and bool(torch.isfinite(V.grad).all()) and float(V.grad.abs().max()) > 0

    def test_a_value_of_the_wrong_size_is_one_line(self):
        with pytest.raises(ValueError, match=r"value must be \(2, 2\) to match tokens of dimension 2") as info:
            solve(Field(Softmax(1.0), value=torch.eye(3)), Euler(0.1), _random((4, 2), 0), steps=1)
        assert "\n" not in str(info.value)
        with pytest.raises(ValueError, match="value must be one"):
            Field(Softmax(1.0), value=torch.ones(2, 2, 2))

    def test_check_flow_tests_the_claims_of_its_value(self, tmp_path):
        z = _random((3, 8, 2), 13)
        skew = check_flow(solve(Field(Softmax(1.0), value=V2), RK4(0.1), z, steps=30, save=Save(every=10)))
        assert skew["hull"].status == NOT_TESTED and "V = I" in skew["hull"].value  # V ≠ I: hulls need not nest
        eye = check_flow(solve(Field(Softmax(1.0), value=torch.eye(2, dtype=torch.float64)), RK4(0.1), z, steps=30,
                               save=Save(every=10)))
        assert eye["hull"].status == "passed"  # V given as the identity is V = I
        # the 2023 paper's field: V with a simple positive dominant eigenvalue, scores rescaled by it
        V = torch.tensor([[0.64709742, 0.81911926], [0.61210449, 0.63263484]], dtype=torch.float64)
        start = torch.rand(2, 12, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 10 - 5
        sol = solve(Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V), RK4(0.01), start, t1=8.0,
                    save=Save(every=50))
        report = check_flow(sol)
        assert report["hyperplanes"].status == "passed" and report["polytope"].status == NOT_TESTED
        assert report.verdict == "PASSED"
        _renders(sol, tmp_path / "value.png", title="the 2023 rescaled flow")


# --------------------------------------------------------------------------------------------
# the recipes name every place a new rule or solver must be added by hand
# --------------------------------------------------------------------------------------------


def _recipe_methods(title: str, cls: str) -> dict[str, list[str]]:
    """The parameters of each method of class `cls` in the recipe's Python block: {method: [names, ...]}."""
    blocks = re.findall(r"```python\n(.*?)```", _section(title), re.S)
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                return {f.name: [a.arg for a in f.args.args] for f in node.body if isinstance(f, ast.FunctionDef)
                        and not f.name.startswith("__")}
    raise AssertionError(f"no class {cls} in the recipe {title!r}")


def test_the_rule_recipe_spells_the_protocol():
    """The recipe's `Sparsemax` (and this file's) take the parameters of `AttentionRule`'s methods, `allowed=`
    included, and the recipe says what a rule without it runs and which engine runs any rule."""
    protocol = {name: list(inspect.signature(getattr(AttentionRule, name)).parameters)
                for name in ("matrix", "targets")}
    assert _recipe_methods("How to add an attention rule", "Sparsemax") == protocol
    assert {name: list(inspect.signature(getattr(Sparsemax, name)).parameters) for name in protocol} == protocol
    text = " ".join(_section("How to add an attention rule").split())
    assert "without it runs token masks only" in text or "no `allowed=` runs token masks only" in text
    assert "the reference loop (`_engines/reference.py`" in text and "torch engine runs any rule" not in text


def _section(title: str) -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


@pytest.mark.parametrize("recipe, spelling, home, also", [
    ("How to add an attention rule", '"localmax"', "dynamics/rules.py", ()),  # the page's menu: from /api/rules
    ("How to add a vector field, a manifold or a solver", '"rk4"', None, ()),
])
def test_the_recipes_name_every_hand_kept_list(recipe, spelling, home, also):
    """A file of src/ that spells every rule's (or solver's) name as a string keeps a list a new one must join:
    the recipe names it, so that following the recipe reaches the CLI and the explorer too."""
    src = ROOT / "src" / "hardmax"
    files = sorted(str(path.relative_to(src)) for path in src.rglob("*")
                   if path.suffix in (".py", ".js", ".html") and spelling in path.read_text(encoding="utf-8"))
    assert files, f"no file spells {spelling}: the test no longer finds the lists"
    files = [f for f in files if f != home] + [f for f in also if (src / f).is_file()]
    text = _section(recipe)
    missing = [f for f in files if f not in text]
    assert not missing, f"{recipe!r} does not name {missing}, which list every name"
    assert re.search(r"tests/test_contributing_recipes\.py", text)


@pytest.mark.parametrize("spelling", ['"localmax"', "'localmax'", '"unnormalised"', "'unnormalised'"])
def test_the_rules_are_listed_once_in_the_registry(spelling):
    """Issue #40: the CLI, the explorer's requests and check_flow reach the rules through RULES (and what each rule
    class declares), so no Python file of src/ but the registry's spells a rule's name."""
    src = ROOT / "src" / "hardmax"
    files = sorted(str(path.relative_to(src)) for path in src.rglob("*.py") if spelling in path.read_text("utf-8"))
    assert files in ([], ["dynamics/rules.py"]), files


class TestARegisteredRuleReachesTheCLIAndTheExplorer:
    """Registered in RULES from this file (the recipe's one step), a rule is `hardmax simulate --rule NAME` (its
    parameters the options of their names) and the explorer's /api/simulate, with no other file edited."""

    @pytest.fixture
    def toy(self, monkeypatch):
        monkeypatch.setitem(RULES, "toy", Sparsemax)
        return "toy"

    def test_hardmax_simulate_runs_it(self, toy, tmp_path, capsys):
        from hardmax.cli import main

        argv = ["simulate", "--random", "6", "--rule", toy, "--beta", "2", "--solver", "euler", "--dt", "0.2",
                "--layers", "10", "--no-gif", "--out", str(tmp_path)]
        assert main(argv) == 0, capsys.readouterr().err
        tokens = np.random.default_rng(0).standard_normal((6, 2))  # --random's tokens (seed 0)
        expected = solve(Field(Sparsemax(2.0)), Euler(0.2), tokens, steps=10, save=Save()).tokens.numpy()
        np.testing.assert_array_equal(np.load(tmp_path / "solution.npy"), expected)
        assert float(np.abs(expected[-1] - expected[0]).max()) > 1e-3
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["config"]["rule"] == toy and report["config"]["beta"] == 2.0
        assert report["claims"]["tokens"][[c["name"] for c in report["claims"]["tokens"]].index("hull")][
            "status"] == "passed"  # it declares row_stochastic

    @pytest.mark.parametrize("argv, message", [
        (["--rule", "toy"], "--rule toy needs --beta (--beta goes with --rule softmax, unnormalised or toy)"),
        (["--rule", "toy", "--beta", "2", "--theta", "1"], "--theta is for --rule localmax"),
        (["--rule", "toy", "--beta", "-1"], "sparsemax attention needs a finite beta > 0"),
        (["--rule", "toys"], "--rule must be one of hardmax, softmax, localmax, unnormalised, toy, got 'toys'"),
    ])
    def test_hardmax_simulate_checks_its_options(self, toy, capsys, argv, message):
        from hardmax.cli import main

        assert main(["simulate", "--random", "4", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err

    def test_a_parameter_without_an_option_is_one_line(self, monkeypatch, capsys):
        from hardmax.cli import main

        @dataclass(frozen=True)
        class Gamma(Sparsemax):
            gamma: float  # required, and no option of hardmax simulate is named gamma

        monkeypatch.setitem(RULES, "gamma", Gamma)
        assert main(["simulate", "--random", "4", "--rule", "gamma", "--beta", "1"]) == 2
        err = capsys.readouterr().err
        assert "--rule gamma needs a parameter gamma that hardmax simulate has no option for" in err, err
        assert err.count("\n") == 1

    def test_the_explorer_runs_it(self, toy):
        from explore_server import Client, LiveServer

        from hardmax.explore import Limits, create_app
        from hardmax.explore.frames import decode_path

        square = [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [0.5, 0.0]]
        with LiveServer(create_app(None, Limits(tokens=20, layers=50))) as server:
            client = Client(server.url)
            answer = client.post("/api/simulate", json={"tokens": square, "rule": toy, "beta": 2.0, "layers": 10})
            assert answer.status_code == 200, answer.text
            answer = answer.json()
            unknown = client.post("/api/simulate", json={"tokens": square, "rule": "toys"})
            assert unknown.status_code == 400 and unknown.json()["error"] == (
                "rule must be one of hardmax, softmax, localmax, unnormalised, toy, got 'toys'")
        expected = simulate(np.array(square), Sparsemax(2.0), alpha=0.5, layers=10, A=np.eye(2)).tokens.numpy()
        np.testing.assert_array_equal(decode_path(answer["path"], 10), expected)
        assert answer["rule"] == toy and answer["theorem"] is None
        scope: dict = {}
        exec(answer["python"], scope)  # its "Copy as Python": rule_from_dict of its registered spelling
        np.testing.assert_array_equal(scope["trajectory"].tokens.numpy(), expected)
