"""The engines held to each other, in one place (`hardmax.dynamics._engines`).

    reference  the loop over `solver.step`: serves every case; every fast path is tested against it here
    compiled   the numba kernel (the paper's hardmax layers on a CPU)     bit for bit the torch fast path
    torch      the compact hardmax path / the paper's softmax layers       to rounding the reference loop

What each promises: the two fast paths of the paper's layers give the same trajectory to the last bit (the same
rule (★), the same frames, the same arithmetic); both give the reference loop's trajectory to rounding and the same
attention sets (the loop decides ties by rule (★) on positions, the fast paths on differences carried in frames,
which is what keeps them exact at any depth: `tests/test_exactness.py`). The chooser's table, `using`, and the
services the other packages may import are checked here too. Per-engine tests: `test_dynamics_engines_kernel.py`,
`test_dynamics_engines_ties.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engines import simulate_on, solve_on

from hardmax.dynamics import (
    RK4,
    Bilinear,
    Causal,
    Euler,
    Field,
    Hardmax,
    Pairs,
    Renormalised,
    Save,
    Softmax,
    Sphere,
    Tokens,
    simulate,
    solve,
)
from hardmax.dynamics._engines import NAMES, Case, choose, serves, using


def _configuration(seed: int, batch: int, n: int, d: int, dtype=torch.float64, grid: bool = False):
    """Random tokens (batch, n, d), a token mask with some padding, and an SPD A; on a half-integer grid (`grid`)
    ties and repeated tokens are common."""
    rng = np.random.default_rng(seed)
    z = rng.integers(-3, 4, size=(batch, n, d)) / 2 if grid else rng.standard_normal((batch, n, d))
    mask = rng.random((batch, n)) < 0.85
    mask[:, 0] = True
    M = rng.standard_normal((d, d))
    A = M @ M.T / d + 0.5 * np.eye(d)
    return (torch.tensor(z, dtype=dtype), torch.from_numpy(mask), torch.tensor((A + A.T) / 2, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("grid", [False, True], ids=["generic", "ties"])
@pytest.mark.parametrize("seed", range(4))
def test_the_fast_paths_are_one_trajectory_bit_for_bit(seed, grid, dtype):
    z, mask, A = _configuration(seed, 6, 11, 3, dtype, grid)
    alpha = [0.5, 1.5, 0.7, 2.0, 0.9, 1.0, 0.3, 4.0]
    compiled = simulate_on("compiled", z, alpha=alpha, layers=8, A=A, mask=mask)
    compact = simulate_on("torch", z, alpha=alpha, layers=8, A=A, mask=mask)
    assert (compiled.engine, compact.engine) == ("compiled", "torch")
    assert torch.equal(compiled.tokens, compact.tokens)


@pytest.mark.parametrize("grid", [False, True], ids=["generic", "ties"])
@pytest.mark.parametrize("seed", range(4))
def test_every_fast_path_agrees_with_the_reference_loop(seed, grid):
    z, mask, A = _configuration(seed, 5, 9, 2, torch.float64, grid)
    reference = simulate_on("reference", z, alpha=0.8, layers=12, A=A, mask=mask, save=Save(attention=True))
    assert reference.engine == "reference"
    for engine in ("compiled", "torch"):
        fast = simulate_on(engine, z, alpha=0.8, layers=12, A=A, mask=mask)
        torch.testing.assert_close(fast.tokens, reference.tokens, rtol=0, atol=1e-12)
    compact = simulate_on("torch", z, alpha=0.8, layers=12, A=A, mask=mask, save=Save(attention=True))
    # the same attention sets at every layer (P's support), the weights to rounding
    assert torch.equal(compact.attention > 0, reference.attention > 0)
    torch.testing.assert_close(compact.attention, reference.attention, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_the_paper_softmax_layers_agree_with_the_reference_loop(seed):
    z, mask, A = _configuration(seed, 4, 8, 3)
    rule = Softmax(beta=2.5)
    fast = simulate_on("torch", z, rule, alpha=0.6, layers=10, A=A, mask=mask, save=Save(every=3, attention=True))
    slow = simulate_on("reference", z, rule, alpha=0.6, layers=10, A=A, mask=mask, save=Save(every=3, attention=True))
    assert fast.steps == slow.steps == (0, 3, 6, 9, 10)
    torch.testing.assert_close(fast.tokens, slow.tokens, rtol=0, atol=1e-12)
    torch.testing.assert_close(fast.attention, slow.attention, rtol=0, atol=1e-12)


def test_gradients_agree_between_the_fast_path_and_the_reference_loop():
    z, mask, A = _configuration(7, 3, 6, 2)
    grads = []
    for engine in ("torch", "reference"):
        leaf = z.clone().requires_grad_(True)
        alpha = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
        run = simulate_on(engine, leaf, Softmax(1.5), alpha=alpha, layers=5, A=A, mask=mask)
        (run.final ** 2).sum().backward()
        grads.append((leaf.grad, alpha.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-10, atol=1e-12)


def test_the_chooser_picks_the_first_engine_that_serves_a_case():
    flat = Field(Hardmax())
    case = Case(flat, Euler.layers(1.0), None, "cpu", torch.float64, False, False)
    assert choose(case) == "compiled"
    assert choose(case._replace(attention=True)) == "torch"
    assert choose(case._replace(grad=True)) == "torch"
    assert choose(case._replace(device="cuda")) == "torch"
    assert choose(case._replace(pairs=Causal())) == "causal"
    assert choose(case._replace(pairs=Causal(), field=Field(Softmax(1.0)))) == "softmax"
    assert choose(case._replace(pairs=Causal(), field=Field(Softmax(1.0)), attention=True)) == "reference"
    assert choose(case._replace(pairs=Pairs(torch.ones(3, 3, dtype=torch.bool)))) == "reference"
    assert choose(case._replace(solver=RK4(0.1))) == "reference"
    assert choose(case._replace(field=Field(Hardmax(), manifold=Sphere()))) == "reference"
    assert choose(case._replace(field=Field(Softmax(1.0)))) == "torch"
    assert all(serves("reference", case._replace(solver=s)) == "" for s in (Euler(0.1), RK4(0.1)))
    assert set(NAMES) == {"compiled", "causal", "torch", "softmax", "reference", "adaptive"}


def test_using_forces_an_engine_and_refuses_one_that_cannot_serve_the_case():
    z = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with using("reference"):
        assert simulate(z, alpha=0.5, layers=3).engine == "reference"
    assert simulate(z, alpha=0.5, layers=3).engine == "compiled"  # the block ended
    with pytest.raises(ValueError, match="^engine 'compiled' cannot run this case: it runs hardmax attention only$"):
        solve_on("compiled", Field(Softmax(1.0)), Euler.layers(0.5), z, steps=2)
    with pytest.raises(ValueError, match="^engine 'torch' cannot run this case: a pair mask"):
        solve_on("torch", Field(Hardmax()), Euler.layers(0.5), z, steps=2, mask=Causal())
    with pytest.raises(ValueError, match="^engine must be one of"):
        with using("numba"):
            pass


def test_a_causal_mask_runs_on_the_causal_kernel_or_the_reference_loop_for_every_rule():
    z = torch.randn(2, 6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for rule, engine in ((Hardmax(), "causal"), (Softmax(2.0), "softmax")):
        run = solve(Field(rule, Bilinear(None)), Euler.layers(0.5), z, steps=4, mask=Causal())
        assert run.engine == engine and run.pairs == Causal()
        assert torch.equal(run.tokens[:, :, 0], z[:, 0].expand(5, 2, 3))  # token 1 sees only itself


# --------------------------------------------------------------------------------------------
# The causal kernel: the paper's hardmax layers under Causal(window) (issue #43's exact causal path)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("grid", [False, True], ids=["generic", "ties"])
@pytest.mark.parametrize("window", [None, 1, 4])
@pytest.mark.parametrize("seed", range(3))
def test_the_causal_kernel_is_the_reference_loop_bit_for_bit(seed, window, grid, dtype):
    z, mask, A = _configuration(seed, 4, 13, 2, dtype, grid)
    for scores in (None, A):
        for pairs in (Causal(window=window), Causal(window=window) & Tokens(mask)):
            fast = simulate(z, alpha=[0.5, 2.0, 0.8, 1.0, 0.3, 1.5], layers=6, A=scores, mask=pairs)
            slow = simulate_on("reference", z, alpha=[0.5, 2.0, 0.8, 1.0, 0.3, 1.5], layers=6, A=scores, mask=pairs)
            assert (fast.engine, slow.engine) == ("causal", "reference")
            assert torch.equal(fast.tokens, slow.tokens)


def test_the_causal_kernel_against_the_oracles():
    import reference as oracle

    for seed in range(4):  # random tokens: the float64 oracle (a per-token loop of the equation), many layers
        z, _, A = _configuration(seed, 1, 9, 2)
        run = simulate(z[0], alpha=0.5, layers=40, A=A, mask=Causal(window=None if seed % 2 else 5))
        want, _ = oracle.simulate(z[0].numpy(), alpha=0.5, layers=40, A=A.numpy(), causal=True,
                                  window=None if seed % 2 else 5)
        np.testing.assert_allclose(run.tokens.numpy(), want, rtol=0, atol=1e-12)
    # exact ties (a half-integer grid, dyadic α): the Fraction oracle, where ties are equalities
    tokens = [[1, 1], [1, -1], [-1, 1], [0, 0], [1, 0], [-1, -1], [0, 1], [1, 1]]
    exact = oracle.simulate_exact(tokens, alpha=1, layers=30, causal=True)
    run = simulate(torch.tensor(tokens, dtype=torch.float64), alpha=1.0, layers=30, mask=Causal())
    np.testing.assert_allclose(run.tokens.numpy(), oracle.as_float(exact), rtol=0, atol=1e-12)
    assert torch.equal(run.tokens[:, 0], run.tokens[0, 0].expand(31, 2))  # token 1 sees only itself


def test_the_causal_kernel_serves_only_its_case():
    z = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert simulate(z, alpha=0.5, layers=2, mask=Causal()).engine == "causal"
    assert simulate(z, Softmax(1.0), alpha=0.5, layers=2, mask=Causal()).engine == "softmax"
    assert simulate(z, alpha=0.5, layers=2, mask=Causal(), save=Save(attention=True)).engine == "reference"
    allowed = torch.ones(6, 6, dtype=torch.bool).tril()
    assert simulate(z, alpha=0.5, layers=2, mask=Pairs(allowed)).engine == "reference"  # the same pairs, spelled
    assert torch.equal(simulate(z, alpha=0.5, layers=5, mask=Pairs(allowed)).tokens,
                       simulate(z, alpha=0.5, layers=5, mask=Causal()).tokens)
    with pytest.raises(ValueError, match="engine 'causal' cannot run this case: it runs the causal mask"):
        solve_on("causal", Field(Hardmax()), Euler.layers(0.5), z, steps=2)


# --------------------------------------------------------------------------------------------
# The compiled softmax flows (issue #43: the softmax flows at the speed of the hardware)
# --------------------------------------------------------------------------------------------


def _sphere(batch: int, n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(batch, n, d, dtype=torch.float64, generator=g), dim=-1)


SOFTMAX_CASES = {
    "sphere, one β per sequence, RK4": (lambda: Field(Softmax(1.0), Bilinear(
        torch.linspace(0, 6, 4, dtype=torch.float64).view(-1, 1, 1) * torch.eye(3, dtype=torch.float64)),
        manifold=Sphere()), RK4(0.1), lambda: _sphere(4, 9, 3, 0), None),
    "sphere, V, Euler": (lambda: Field(Softmax(2.0), value=torch.tensor(
        [[1.0, 0.5, 0], [0, 1, 0], [0, 0, -0.5]], dtype=torch.float64), manifold=Sphere()), Euler(0.05),
        lambda: _sphere(3, 7, 3, 1), None),
    "R^d, A, RK4": (lambda: Field(Softmax(0.7), Bilinear(torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64))),
                    RK4(0.1), lambda: torch.randn(3, 9, 2, dtype=torch.float64, generator=torch.Generator()
                                                  .manual_seed(2)), None),
    "R^d, causal, the paper's layers": (lambda: Field(Softmax(1.5)), Euler.layers(0.5),
                                        lambda: torch.randn(2, 8, 2, dtype=torch.float64,
                                                            generator=torch.Generator().manual_seed(3)), Causal()),
    "sphere, causal window, padding": (lambda: Field(Softmax(3.0), manifold=Sphere()), RK4(0.1),
                                       lambda: _sphere(2, 8, 3, 4), Causal(window=3) & Tokens(torch.tensor(
                                           [[1, 1, 0, 1, 1, 1, 1, 0], [1] * 8], dtype=torch.bool))),
    "sphere, padding": (lambda: Field(Softmax(4.0), manifold=Sphere()), RK4(0.2), lambda: _sphere(2, 8, 3, 5),
                        torch.tensor([[1, 1, 0, 1, 1, 1, 1, 0], [1] * 8], dtype=torch.bool)),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", list(SOFTMAX_CASES))
def test_the_compiled_softmax_flows_agree_with_the_reference_loop(case, dtype):
    field, solver, tokens, mask = SOFTMAX_CASES[case]
    z = tokens().to(dtype)
    if field().manifold.unit_sphere:
        z = torch.nn.functional.normalize(z, dim=-1)
    fast = solve(field(), solver, z, steps=40, mask=mask, save=Save(every=7))
    slow = solve_on("reference", field(), solver, z, steps=40, mask=mask, save=Save(every=7))
    assert (fast.engine, slow.engine) == ("softmax", "reference") and fast.steps == slow.steps
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(fast.tokens, slow.tokens, rtol=0, atol=tol)
    present = fast.mask  # padding stays as given
    assert torch.equal(fast.tokens[:, ~present], z[~present].expand(len(fast.steps), -1, -1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rk4, value", [(True, False), (False, True)])
def test_many_sphere_sequences_side_by_side_in_the_lanes_are_the_reference_loop(dtype, rk4, value):
    """A batch of at least W sequences of the symmetric case (A = β_b I per sequence, the sphere, every key) runs W
    of them side by side in the vector lanes (the last group padded): the reference loop's states to rounding, as the
    one-sequence-per-core path, padding included; the lanes past the batch are dropped."""
    from hardmax.dynamics._engines.softmax import W, softmax_flow

    batch = W + 7  # a full group and a partial one
    z = _sphere(batch, 6, 3, 9).to(dtype)
    present = torch.ones(batch, 6, dtype=torch.bool)
    present[3, 2] = present[W + 5, [0, 4]] = False
    A = torch.linspace(0, 8, batch, dtype=torch.float64).view(-1, 1, 1) * torch.eye(3, dtype=torch.float64)
    V = torch.tensor([[1.0, 0.5, 0], [0, 1, 0], [0, 0, -0.5]], dtype=torch.float64) if value else None
    field = Field(Softmax(1.5), Bilinear(A.to(dtype)), value=None if V is None else V.to(dtype), manifold=Sphere())
    solver = RK4(0.1) if rk4 else Euler(0.05)
    fast = solve(field, solver, z, steps=30, mask=present, save=Save(every=6))
    slow = solve_on("reference", field, solver, z, steps=30, mask=present, save=Save(every=6))
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    assert fast.engine == "softmax"
    torch.testing.assert_close(fast.tokens, slow.tokens, rtol=0, atol=tol)
    dts = np.full(30, 0.1 if rk4 else 0.05, dtype=z.numpy().dtype)
    kept = tuple(range(0, 31, 6))
    args = (z.numpy(), present.numpy(), A.to(dtype).numpy(), 1.5, None if V is None else V.to(dtype).numpy(), True,
            None, False, dts, rk4, kept, 2)
    lanes, rows = softmax_flow(*args, lanes=True), softmax_flow(*args, lanes=False)
    np.testing.assert_allclose(lanes, rows, rtol=0, atol=tol)
    np.testing.assert_array_equal(lanes, fast.tokens.numpy())  # solve took the lanes (batch ≥ W)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_short_batch_that_fills_enough_of_a_group_runs_in_the_lanes_each_sequence_as_in_a_full_batch(dtype):
    """A batch shorter than W runs in one padded group of lanes when that costs less than its sequences one per core
    (`lanes_used`: a sweep's cell of 50 starts ran 2.5x slower than the same starts in one batch): each of its
    sequences bit for bit as inside a batch of several groups (a lane never reads another), the reference loop's to
    rounding; a batch too short for a group, or spread over threads enough, keeps one sequence per core."""
    from hardmax.dynamics._engines.softmax import LANES_SHORT_BATCH, W, lanes_used, softmax_flow

    itemsize = 4 if dtype == torch.float32 else 8
    least = dict(LANES_SHORT_BATCH)[16] // (2 if itemsize == 4 else 1)
    assert lanes_used(least, 8, 3, True, 1, itemsize) and not lanes_used(least - 1, 8, 3, True, 1, itemsize)
    assert not lanes_used(least, 8, 3, True, 2, itemsize) and lanes_used(2 * least, 8, 3, True, 2, itemsize)
    assert lanes_used(W, 2048, 8, True, 64, itemsize) and not lanes_used(W - 1, 2048, 8, False, 1, itemsize)
    assert dict(LANES_SHORT_BATCH)[None] // (2 if itemsize == 4 else 1) < W  # past n = 64 a short group still pays
    big = _sphere(2 * W + 9, 8, 3, 11).to(dtype)
    short = big[W + 3:W + 3 + 40]  # 40 sequences from the middle of the second group
    present = torch.ones(2 * W + 9, 8, dtype=torch.bool)
    A = torch.linspace(0, 6, 2 * W + 9, dtype=torch.float64).view(-1, 1, 1) * torch.eye(3, dtype=torch.float64)
    dts = np.full(40, 0.1, dtype=big.numpy().dtype)
    kept = (0, 20, 40)

    def run(z, rows, lanes=None):
        return softmax_flow(z.numpy(), present[rows].numpy(), A[rows].to(dtype).numpy(), 1.0, None, True, None,
                            False, dts, True, kept, 1, lanes=lanes)

    alone, inside = run(short, slice(W + 3, W + 43)), run(big, slice(None))[:, W + 3:W + 43]
    np.testing.assert_array_equal(alone, inside)
    np.testing.assert_array_equal(alone, run(short, slice(W + 3, W + 43), lanes=True))
    field = Field(Softmax(1.0), Bilinear(A[W + 3:W + 43].to(dtype)), manifold=Sphere())
    slow = solve_on("reference", field, RK4(0.1), short, steps=40, save=Save(every=20))
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    np.testing.assert_allclose(alone, slow.tokens.numpy(), rtol=0, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_lanes_exponentials_are_within_two_ulp_in_their_dtype(dtype):
    """The softmax engine's vectorised exponentials (`_exp`, and `_exp32` for float32 lanes, which compute in float32
    throughout) against e^x in float64 on a dense grid of the arguments they take (x ≤ 0, a hair above 0 from
    rounding), down to their floors (−708, −87), below which they return the floor's value."""
    import numba

    from hardmax.dynamics._engines.softmax import _exp_any, _int_view

    @numba.njit
    def exp(x):
        out, bits = np.empty_like(x), np.empty_like(x)
        _exp_any(x, out, bits, _int_view(bits), x.size)
        return out

    floor = -87.0 if dtype == np.float32 else -708.0
    x = np.concatenate([np.linspace(floor, 0, 400_001), [1e-7, 1e-4, -1e-30, -0.0]]).astype(dtype)
    got = exp(x)
    assert got.dtype == dtype
    exact = np.exp(x.astype(np.float64))
    ulp = np.abs(got - exact) / np.spacing(exact.astype(dtype)).astype(np.float64)
    assert ulp.max() <= 2, (ulp.max(), x[ulp.argmax()])
    assert exp(np.array([floor - 50, -np.inf], dtype)).tolist() == [exp(np.array([floor], dtype))[0]] * 2


def test_the_compiled_softmax_flows_serve_their_cases_only():
    z = _sphere(2, 5, 3, 6)
    assert solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), z, steps=2).engine == "softmax"
    assert solve(Field(Softmax(1.0)), Euler.layers(0.5), z, steps=2).engine == "torch"  # the paper's: exact merges
    assert solve(Field(Softmax(1.0), manifold=Sphere()), RK4(0.1), z, steps=2,
                 save=Save(attention=True)).engine == "reference"
    assert solve(Field(Softmax(1.0), manifold=Sphere()), Renormalised(0.1), z, steps=2).engine == "reference"
    with pytest.raises(ValueError, match="engine 'softmax' cannot run this case: it runs Softmax"):
        solve_on("softmax", Field(Hardmax(), manifold=Sphere()), RK4(0.1), z, steps=2)


def test_the_compiled_softmax_flows_name_where_the_states_stopped_being_finite():
    z = torch.randn(2, 6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    with pytest.raises(FloatingPointError, match="stopped being finite at step"):
        solve(Field(Softmax(1.0), value=torch.tensor([[40.0, 0], [0, 40.0]], dtype=torch.float64)), RK4(1.0), z,
              steps=200)


def test_the_softmax_engine_leaves_wide_single_sequences_to_blas_and_needs_no_n_squared_memory():
    """One sequence of wide tokens (d > MAX_WIDTH) runs on the reference loop, whose scores are one batched product;
    many sequences that fit the lanes stay compiled whatever d; the engine's memory is O(n d) per thread."""
    from hardmax.dynamics._engines.softmax import LANES_MAX_ND, MAX_WIDTH, W, scratch_bytes

    field = Field(Softmax(1.0), manifold=Sphere())
    for batch, n, d, engine in ((1, 16, MAX_WIDTH, "softmax"), (1, 16, MAX_WIDTH + 1, "reference"),
                                (W, 8, LANES_MAX_ND // 8, "softmax"), (W, 8, LANES_MAX_ND // 8 + 1, "reference")):
        z = _sphere(batch, n, d, 3)
        assert solve(field, RK4(0.1), z, steps=1).engine == engine, (batch, n, d)
    # linear in n and d (no n × n matrix budgeted: 4,096 tokens of width 1,024 asked 24 GB)
    assert scratch_bytes(1, 4096, 64, True, 2) == 2 * scratch_bytes(1, 2048, 64, True, 2)
    assert scratch_bytes(1, 4096, 1024, True, 2) < 2**30
