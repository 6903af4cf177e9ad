"""`hardmax.dynamics.solve` (`flow`): each model against a slow loop written from its equation, closed forms,
invariances, and the paper's layer to the last bit. Its parts have their own files: test_dynamics_field.py,
test_dynamics_solvers.py (the measured orders among them), test_dynamics_save.py, test_dynamics_rules.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from engines import solve_on
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from hardmax.dynamics import (
    QK,
    RK4,
    Adaptive,
    Bilinear,
    Euler,
    Field,
    Hardmax,
    Localmax,
    Renormalised,
    Rescaled,
    Save,
    Softmax,
    Sphere,
    Unnormalised,
    simulate,
    solve,
)

# --------------------------------------------------------------------------------------------
# slow references, one token at a time, from the equations
# --------------------------------------------------------------------------------------------


def ref_weights(z: np.ndarray, A: np.ndarray, rule) -> np.ndarray:
    """P (n, n) of one sequence, entry by entry."""
    n = len(z)
    P = np.zeros((n, n))
    for i in range(n):
        s = [float(z[i] @ A @ z[j]) for j in range(n)]
        for j in range(n):
            if isinstance(rule, Softmax):
                P[i, j] = math.exp(rule.beta * s[j]) / sum(math.exp(rule.beta * x) for x in s)
            elif isinstance(rule, Unnormalised):
                P[i, j] = math.exp(rule.beta * s[j]) / n
            elif isinstance(rule, Localmax):
                near = [x >= max(s) - rule.theta for x in s]
                P[i, j] = near[j] / sum(near)
            elif isinstance(rule, Hardmax):
                best = [x == max(s) for x in s]
                P[i, j] = best[j] / sum(best)
    return P


def ref_velocity(z: np.ndarray, A: np.ndarray, V: np.ndarray, rule, sphere: bool, weights=None) -> np.ndarray:
    """(n, d) flat: V(Σ_j P_ij z_j − z_i); sphere: P⊥_{z_i}(V Σ_j P_ij z_j), one token at a time; P from
    `weights(z, A, rule)` (default `ref_weights`)."""
    P = (ref_weights if weights is None else weights)(z, A, rule)
    out = np.zeros_like(z)
    for i in range(len(z)):
        target = sum(P[i, j] * z[j] for j in range(len(z)))
        if sphere:
            drift = V @ target
            out[i] = drift - (drift @ z[i]) * z[i]
        else:
            out[i] = V @ (target - z[i])
    return out


def ref_solve(z, A_of_t, V, rule, sphere: bool, method: str, dt: float, steps: int) -> np.ndarray:
    z = np.array(z, dtype=np.float64)
    t = 0.0
    path = [z.copy()]
    for _ in range(steps):
        def f(tt, y):
            return ref_velocity(y, A_of_t(tt), V, rule, sphere)
        if method == "euler":
            z = z + dt * f(t, z)
        elif method == "rk4":
            k1 = f(t, z)
            k2 = f(t + dt / 2, z + dt / 2 * k1)
            k3 = f(t + dt / 2, z + dt / 2 * k2)
            k4 = f(t + dt, z + dt * k3)
            z = z + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        elif method == "renormalise":
            P = ref_weights(z, A_of_t(t), rule)
            z = z + dt * np.stack([V @ sum(P[i, j] * z[j] for j in range(len(z))) for i in range(len(z))])
        if sphere:
            z = z / np.linalg.norm(z, axis=1, keepdims=True)
        t += dt
        path.append(z.copy())
    return np.stack(path)


def _sphere_tokens(n, d, seed, batch=None):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*((batch,) if batch else ()), n, d, dtype=torch.float64, generator=g)
    return torch.nn.functional.normalize(z, dim=-1)


def _random(shape, seed):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


CASES = [
    # (name, rule, scores, value, sphere, solver)
    ("softmax V QK flat euler", Softmax(0.7), "qk", "random", False, Euler(0.05)),
    ("softmax V flat rk4", Softmax(1.3), "spd", "random", False, RK4(0.1)),
    ("localmax flat euler", Localmax(0.4), "identity", None, False, Euler(0.2)),
    ("SA sphere rk4", Softmax(3.0), "identity", None, True, RK4(0.1)),
    ("SA sphere V euler", Softmax(2.0), "spd", "random", True, Euler(0.05)),
    ("USA sphere rk4", Unnormalised(2.0), "identity", None, True, RK4(0.1)),
    ("SA sphere renormalise", Softmax(4.0), "identity", None, True, Renormalised(0.1)),
    ("hardmax sphere euler", Hardmax(), "identity", None, True, Euler(0.1)),
    ("hardmax flat V rk4", Hardmax(), "spd", "random", False, RK4(0.05)),
    ("rescaled 2023 rk4", Softmax(1.0), "rescaled", "random", False, RK4(0.02)),
]


@pytest.mark.parametrize("name,rule,scores,value,sphere,solver", CASES, ids=[c[0] for c in CASES])
def test_each_model_matches_a_slow_loop_from_its_equation(name, rule, scores, value, sphere, solver):
    n, d, steps = 6, 3, 12
    z = _sphere_tokens(n, d, 1) if sphere else _random((n, d), 1)
    V = None if value is None else 0.5 * _random((d, d), 2) + torch.eye(d, dtype=torch.float64)
    Vn = np.eye(d) if V is None else V.numpy()
    Q, K = _random((d, d), 3), _random((d, d), 4)
    spd = (lambda m: m @ m.T / d + torch.eye(d, dtype=torch.float64))(_random((d, d), 5))
    if scores == "qk":
        sc, A_of_t = QK(Q, K), (lambda t: (Q.T @ K).numpy())
    elif scores == "spd":
        sc, A_of_t = Bilinear(spd), (lambda t: spd.numpy())
    elif scores == "rescaled":
        from scipy.linalg import expm

        sc = Rescaled(Bilinear(), V)
        A_of_t = lambda t: expm(t * Vn).T @ expm(t * Vn)  # noqa: E731
    else:
        sc, A_of_t = Bilinear(), (lambda t: np.eye(d))
    field = Field(rule, scores=sc, value=V, manifold=Sphere() if sphere else Field(rule).manifold)
    got = solve(field, solver, z, steps=steps)
    method = {Euler: "euler", RK4: "rk4", Renormalised: "renormalise"}[type(solver)]
    want = ref_solve(z.numpy(), A_of_t, Vn, rule, sphere, method, solver.dt, steps)
    np.testing.assert_allclose(got.tokens.numpy(), want, rtol=0, atol=1e-11)
    np.testing.assert_allclose(got.times.numpy(), np.arange(steps + 1) * solver.dt, rtol=1e-12)


@pytest.mark.parametrize("rule", [Hardmax(), Softmax(2.0)], ids=["hardmax", "softmax"])
@pytest.mark.parametrize("store", [Save(), Save(every=3), Save.final()], ids=["all", "every3", "final"])
def test_the_papers_layer_is_simulate_to_the_last_bit(rule, store):
    z = _random((4, 7, 2), 7).round(decimals=1)  # repeats and exact ties among them
    A = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[1, 5:] = False
    for alpha in (0.5, [0.3, 1.0, 2.0, 0.7, 0.5, 0.5, 1.5, 0.2, 0.9, 4.0]):
        got = solve(Field(rule, scores=Bilinear(A)), Euler.layers(alpha), z, steps=10, save=store, mask=mask)
        want = simulate(z, rule, alpha=alpha, layers=10, A=A, mask=mask, save=store)
        assert torch.equal(got.tokens, want.tokens)
        gammas = torch.as_tensor(alpha, dtype=torch.float64).expand(10)
        assert torch.allclose(got.times, torch.cat([torch.zeros(1, dtype=torch.float64),
                                                    torch.cumsum(gammas / (1 + gammas), 0)])[list(got.steps)])
        assert torch.equal(got.times, want.times) and got.engine == want.engine  # the same call


def test_the_general_loop_agrees_with_the_fast_engines_on_the_papers_layer():
    z = _random((5, 9, 3), 11)
    fast = simulate(z, alpha=0.5, layers=15)
    slow = solve(Field(Hardmax()), Euler(1 / 3), z, steps=15)
    np.testing.assert_allclose(slow.tokens.numpy(), fast.tokens.numpy(), rtol=0, atol=1e-13)
    forced = solve_on("reference", Field(Hardmax()), Euler.layers(0.5), z, steps=15)
    assert forced.engine == "reference" and solve(Field(Hardmax()), Euler.layers(0.5), z, steps=15).engine == "compiled"
    np.testing.assert_allclose(forced.tokens.numpy(), fast.tokens.numpy(), rtol=0, atol=1e-13)


def test_engines_say_which_cases_they_serve():
    z = _random((3, 2), 1)
    assert solve(Field(Hardmax()), Euler.layers(1.0), z, steps=2).engine == "compiled"
    softmax = Field(Softmax(2.0), scores=Bilinear(torch.eye(2) * 2))
    assert solve(softmax, Euler.layers(1.0), z, steps=2).engine == "torch"
    assert solve(Field(Hardmax()), Euler.layers(1.0), z, steps=2, save=Save(attention=True)).engine == "torch"
    for field, solver in ((Field(Hardmax()), Euler(0.1)), (Field(Hardmax()), RK4(0.1)),
                          (Field(Localmax(0.1)), Euler.layers(1.0))):
        assert solve(field, solver, z, steps=2).engine == "reference"
    assert solve(Field(Softmax(1.0), value=2 * torch.eye(2)), Euler.layers(1.0), z, steps=2).engine == "softmax"
    assert solve(Field(Hardmax(), manifold=Sphere()), Euler.layers(1.0), _sphere_tokens(3, 2, 1), steps=2).engine \
        == "reference"
    with pytest.raises(ValueError, match="engine 'torch' cannot run this case: only Euler.layers"):
        solve_on("torch", Field(Hardmax()), RK4(0.1), z, steps=2)
    with pytest.raises(ValueError, match="engine 'compiled' cannot run this case: it runs hardmax attention only"):
        solve_on("compiled", Field(Softmax(1.0)), Euler.layers(1.0), z, steps=2)
    with pytest.raises(ValueError, match="engine must be one of"):
        solve_on("gpu", Field(Hardmax()), RK4(0.1), z, steps=2)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), d=st.integers(2, 5), beta=st.floats(0.0, 12.0),
       solver=st.sampled_from([Euler(0.2), RK4(0.2), Renormalised(0.2)]))
def test_the_norm_stays_one_at_every_step_on_the_sphere(seed, d, beta, solver):
    z = _sphere_tokens(7, d, seed)
    out = solve(Field(Unnormalised(beta) if beta < 1 else Softmax(beta), manifold=Sphere()), solver, z, steps=40)
    assert float((out.tokens.norm(dim=-1) - 1).abs().max()) <= 4 * torch.finfo(torch.float64).eps


def _angle(sol):
    x = sol.tokens.numpy()  # atan2 keeps its precision near 0, where arccos loses half the digits
    a, b = x[:, 0], x[:, 1]
    return np.abs(np.arctan2(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0], (a * b).sum(-1)))


@pytest.mark.parametrize("beta", [0.0, 1.0, 5.0])
def test_two_tokens_on_the_circle_follow_their_angle_equation(beta):
    """θ' = −e^{β cos θ} sin θ (USA) and θ' = −2 sin θ e^{β cos θ} / (e^β + e^{β cos θ}) (SA); at β = 0 both are
    θ' = −sin θ, whose solution is tan(θ/2) = tan(θ0/2) e^{−t}."""
    theta0, t1 = 2.0, 4.0
    z = torch.tensor([[1.0, 0.0], [math.cos(theta0), math.sin(theta0)]], dtype=torch.float64)
    cases = [(Unnormalised(beta), lambda th: math.sin(th) * math.exp(beta * math.cos(th)))]
    if beta > 0:
        cases.append((Softmax(beta), lambda th: 2 * math.sin(th) * math.exp(beta * math.cos(th))
                      / (math.exp(beta) + math.exp(beta * math.cos(th)))))
    for rule, rate in cases:
        sol = solve(Field(rule, manifold=Sphere()), RK4(0.001), z, t1=t1, save=Save(every=500))
        ode = solve_ivp(lambda t, th, rate=rate: [-rate(th[0])], (0, t1), [theta0], t_eval=sol.times.numpy(),
                        rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(_angle(sol), ode.y[0], rtol=0, atol=1e-9)
        if beta == 0.0:
            np.testing.assert_allclose(np.tan(_angle(sol) / 2), math.tan(theta0 / 2) * np.exp(-sol.times.numpy()),
                                       rtol=1e-9)


@pytest.mark.parametrize("sphere", [True, False])
def test_rotations_commute_with_the_flow(sphere):
    d = 3
    z = _sphere_tokens(8, d, 3, batch=2) if sphere else _random((2, 8, d), 3)
    R, _ = torch.linalg.qr(_random((d, d), 4))
    field = Field(Softmax(2.5), manifold=Sphere()) if sphere else Field(Localmax(0.3))
    a = solve(field, RK4(0.05), z, steps=60).tokens @ R.T
    b = solve(field, RK4(0.05), z @ R.T, steps=60).tokens
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-12)


def test_softmax_on_the_sphere_follows_hardmax_as_beta_grows():
    z = _sphere_tokens(6, 3, 9, batch=3)
    hard = solve(Field(Hardmax(), manifold=Sphere()), Euler(0.01), z, steps=100).tokens
    gaps = [float((solve(Field(Softmax(b), manifold=Sphere()), Euler(0.01), z, steps=100).tokens - hard).abs().max())
            for b in (50.0, 500.0, 5000.0)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-3, gaps


def test_padding_neither_moves_nor_attracts():
    z = _random((2, 6, 2), 13)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    sol = solve(Field(Softmax(1.0)), RK4(0.1), z, steps=10, mask=mask)
    assert torch.equal(sol.tokens[:, 1, 4:], z[1, 4:].expand(11, 2, 2))
    alone = solve(Field(Softmax(1.0)), RK4(0.1), z[1, :4], steps=10)
    np.testing.assert_allclose(sol.tokens[:, 1, :4].numpy(), alone.tokens.numpy(), rtol=0, atol=1e-14)


def test_gradients_flow_through_the_general_loop():
    z = _random((5, 2), 14).requires_grad_(True)
    solve(Field(Softmax(1.0)), RK4(0.1), z, steps=5).final.square().sum().backward()
    assert z.grad is not None and bool(torch.isfinite(z.grad).all()) and float(z.grad.abs().sum()) > 0
    A = torch.eye(2, dtype=torch.float64).requires_grad_(True)  # the scores' and the value's matrices too
    V = torch.eye(2, dtype=torch.float64).requires_grad_(True)
    out = solve(Field(Softmax(1.0), scores=Bilinear(A), value=V), RK4(0.1), z.detach(), steps=5).final
    out.square().sum().backward()
    assert A.grad is not None and V.grad is not None and float(A.grad.abs().sum()) > 0


def test_padding_on_the_sphere_and_sequences_of_padding_only():
    z = _sphere_tokens(5, 3, 15, batch=3)
    z[1, 3:] = 0.0  # padding may be anything, zeros included
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1, 3:] = False
    mask[2] = False  # a sequence of padding only
    for solver in (Euler(0.1), RK4(0.1), Renormalised(0.1)):
        sol = solve(Field(Softmax(2.0), manifold=Sphere()), solver, z, steps=10, mask=mask)
        assert bool(torch.isfinite(sol.tokens).all())
        assert torch.equal(sol.tokens[:, 1, 3:], z[1, 3:].expand(11, 2, 3)) and torch.equal(sol.tokens[:, 2],
                                                                                           z[2].expand(11, 5, 3))
        alone = solve(Field(Softmax(2.0), manifold=Sphere()), solver, z[1, :3], steps=10)
        np.testing.assert_allclose(sol.tokens[:, 1, :3].numpy(), alone.tokens.numpy(), rtol=0, atol=1e-14)
    flat = solve(Field(Softmax(1.0)), RK4(0.1), _random((2, 4, 2), 3), steps=3,
                 mask=torch.tensor([[True] * 4, [False] * 4]))
    assert bool(torch.isfinite(flat.tokens).all())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_runs_every_solver_as_the_cpu_does():
    z = _sphere_tokens(7, 3, 21, batch=5)
    for field, solver in ((Field(Softmax(3.0), manifold=Sphere()), RK4(0.05)),
                          (Field(Unnormalised(2.0), manifold=Sphere()), Renormalised(0.05)),
                          (Field(Localmax(0.3), value=torch.eye(3) * 0.5), Euler(0.1)),
                          (Field(Hardmax(), manifold=Sphere()), Euler(0.1)),
                          (Field(Softmax(1.0), manifold=Sphere()), Adaptive(rtol=1e-9, atol=1e-11)),
                          (Field(Softmax(1.0), scores=Rescaled(Bilinear(), torch.eye(3) * 0.5),
                                 value=torch.eye(3) * 0.5), Adaptive(rtol=1e-9, atol=1e-11))):
        kwargs = {"t1": 2.0} if isinstance(solver, Adaptive) else {"steps": 40}
        cpu = solve(field, solver, z, **kwargs).tokens
        gpu = solve(field, solver, z.cuda(), **kwargs).tokens
        assert gpu.device.type == "cuda"
        np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=0, atol=1e-9)
    from hardmax.theory import check_flow

    assert check_flow(solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), z.cuda(), steps=50,
                            save=Save(every=10))).passed
    A = (2.0 * torch.eye(3, dtype=torch.float64)).expand(5, 3, 3).cuda()  # the field's matrices on the GPU too
    assert check_flow(solve(Field(Softmax(1.0), scores=Bilinear(A), manifold=Sphere()), RK4(0.1), z.cuda(),
                            steps=50, save=Save(every=10))).passed
    V = torch.eye(2, dtype=torch.float64).cuda()
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    assert check_flow(solve(field, RK4(0.01), _random((6, 2), 1).cuda() * 4, t1=6.0, save=Save(every=50))).passed


@pytest.mark.parametrize("make,message", [
    (lambda: solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), torch.ones(3, 2), steps=1), "norm 1"),
    (lambda: solve(Field(Softmax(1.0), value=torch.eye(3)), RK4(0.1), torch.ones(3, 2), steps=1), r"\(2, 2\)"),
    (lambda: solve(Field(Softmax(1.0)), Renormalised(0.1), torch.ones(3, 2), steps=1), "sphere"),
    (lambda: solve(Field(Softmax(1.0)), RK4(0.3), torch.ones(3, 2), t1=1.0), "whole number"),
    (lambda: solve(Field(Softmax(1.0)), Adaptive(), torch.ones(3, 2)), "t1 > 0"),
    (lambda: solve(Field(Softmax(1.0)), RK4(0.1), torch.ones(3, 2), steps=1, save=Save(times=(1.0,))),
     "adaptive"),
    (lambda: solve(Field(Softmax(1.0)), RK4(0.1), torch.tensor([[math.nan, 1.0]]), steps=1), "NaN"),
    (lambda: solve(Field(Softmax(1.0), scores=Bilinear(torch.eye(2).expand(3, 2, 2))), RK4(0.1),
                   torch.ones(2, 4, 2), steps=1), "one per sequence"),
    (lambda: solve(Field(Softmax(1.0)), RK4(0.1), torch.ones(3, 2), t1=math.inf), "finite time"),
    (lambda: solve(Field(Softmax(1.0)), Adaptive(), torch.ones(3, 2), t1=1.0, save=Save(every=3)), "fixed steps"),
    (lambda: solve(Field(Softmax(1.0)), Adaptive(), torch.ones(3, 2), steps=4), "chooses its own steps"),
    (lambda: solve(Field(Softmax(1.0)), Adaptive(), torch.ones(3, 2), t1=2.0, save=Save(times=(1.0,))),
     "not the last"),
    (lambda: solve(Field(Unnormalised(800.0), manifold=Sphere()), RK4(0.1), _sphere_tokens(3, 2, 0), steps=1),
     "beyond the range"),
])
def test_bad_input_gets_a_one_line_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


# Issue #39 (5): a field that overflows after t = 0 is named, never returned as NaN or inf.
@pytest.mark.parametrize("case", ["unnormalised", "rk4_big_step", "rescaled"])
def test_states_that_stop_being_finite_are_named(case):
    g = torch.Generator().manual_seed(7)
    z = torch.randn(2, 6, 3, dtype=torch.float64, generator=g)
    if case == "unnormalised":
        field, solver, steps = Field(Unnormalised(5.0)), Euler(0.1), 200
    elif case == "rk4_big_step":
        field, solver, steps = Field(Softmax(1.0), value=3 * torch.eye(3, dtype=torch.float64)), RK4(10.0), 200
    else:
        V = 100 * torch.eye(3, dtype=torch.float64)
        field, solver, steps = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V), RK4(0.1), 200
    with pytest.raises(FloatingPointError, match=r"stopped being finite at step [\d,]+ of 200 \(t = "):
        solve(field, solver, z, steps=steps, save=Save.final())


def test_the_step_named_is_the_first_that_is_not_finite():
    field = Field(Unnormalised(5.0))
    z = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    with pytest.raises(FloatingPointError) as error:
        solve(field, Euler(0.1), z, steps=300)
    bad = int(str(error.value).split("at step ")[1].split(" ")[0].replace(",", ""))
    before = solve(field, Euler(0.1), z, steps=bad - 1, save=Save.final())  # one step less is finite
    assert bool(torch.isfinite(before.final).all())


def test_the_paper_spelling_refuses_an_overflowing_rule_too():
    z = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    from hardmax.dynamics import simulate

    with pytest.raises(FloatingPointError, match="stopped being finite at step 2 of 300"):  # the layer that overflowed
        simulate(z, Unnormalised(5.0), alpha=0.5, layers=300)


# Issue #39 (13): inputs that ended in tracebacks or unbounded work are one line each, before any allocation.
@pytest.mark.parametrize("kwargs", [dict(steps=10**9), dict(steps=10**12), dict(t1=1e300), dict(t1=1.0, dt=1e-300),
                                    dict(t1=1e5, dt=1e-3)])
def test_step_counts_beyond_the_bound_are_refused_before_allocating(kwargs):
    import tracemalloc

    dt = kwargs.pop("dt", 0.1)
    tracemalloc.start()
    with pytest.raises(ValueError, match="more than the 10,000,000"):
        solve(Field(Softmax(1.0)), Euler(dt), torch.randn(4, 2, dtype=torch.float64), save=Save.final(), **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2**20


@pytest.mark.parametrize("layers", [10**7 + 1, 10**9, 10**12])
def test_simulate_refuses_layer_counts_beyond_the_bound(layers):
    from hardmax.dynamics import simulate

    z = torch.randn(5, 2, dtype=torch.float64)
    for save in (Save.final(), Save(every=10**6)):
        with pytest.raises(ValueError, match="more than the 10,000,000"):
            simulate(z, alpha=0.5, layers=layers, save=save)


