"""Tests of `hardmax.dynamics`: the engine against slow oracles, exact tie cases, invariants, inputs.

- Reference: `simulate` == `reference.simulate` (per-token loops, float64) on random configurations.
- Exact: rational configurations against `reference.simulate_exact` (Fractions, exact ties), with the
  first layer also checked against values computed by hand.
- Invariants (hypothesis): hull nesting, fixed leaders, growing leader set, permutation / batch /
  scale equivariance, determinism.
- Inputs: dtypes, devices, layers = 0, and a ValueError naming the problem for every bad input.
- Parts with files of their own: test_dynamics_dedup.py (identical tokens merged), test_dynamics_rules.py (the
  rules and their bad parameters), test_dynamics_inputs.py, test_dynamics_step.py, test_dynamics_solvers.py,
  test_dynamics_save.py, test_dynamics_field.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction as F
from types import SimpleNamespace

import numpy as np
import pytest
import reference
import torch
from engines import simulate_on
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import linprog

from hardmax.dynamics import Hardmax, Save, Softmax, default_tie_rtol, simulate

# The two hardmax engines behind `simulate`: batched torch ops, and the compiled per-review kernel.
HARDMAX_BACKENDS = ("torch", "compiled")


def make_rule(attention: str, beta: float | None = None, tie_rtol: float | None = None):
    """The rule object of a parametrised attention name."""
    return Hardmax(tie_rtol) if attention == "hardmax" else Softmax(beta)


def random_spd(rng: np.random.Generator, d: int) -> np.ndarray:
    """A random (d, d) SPD matrix with eigenvalues ≥ 0.5, exactly symmetric."""
    M = rng.standard_normal((d, d))
    A = M @ M.T / d + 0.5 * np.eye(d)
    return (A + A.T) / 2


def random_configuration(rng: np.random.Generator, batch: int, n: int, d: int):
    """(batch, n, d) Gaussian tokens, about a third of them copies of others, and a (batch, n) mask.

    Some copies are masked while their twins are real, and every sequence keeps a real token.
    """
    z = rng.standard_normal((batch, n, d))
    for b in range(batch):
        k = n // 3
        z[b, rng.integers(0, n, size=k)] = z[b, rng.integers(0, n, size=k)]
    mask = rng.random((batch, n)) < 0.75
    mask[np.arange(batch), rng.integers(0, n, size=batch)] = True
    return z, mask


# --------------------------------------------------------------------------------------------
# Reference: the fast engine equals the slow per-token loops.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attention, beta", [("hardmax", None), ("softmax", 0.5), ("softmax", 3.0)])
@pytest.mark.parametrize("batched", [False, True], ids=["n,d", "batch,n,d"])
@pytest.mark.parametrize("seed", range(4))
def test_matches_reference(seed, batched, attention, beta):
    rng = np.random.default_rng(seed)
    batch, n, d, layers = (3 if batched else 1), int(rng.integers(2, 13)), int(rng.integers(1, 5)), 6
    z, mask = random_configuration(rng, batch, n, d)
    A = random_spd(rng, d) if seed % 2 else None
    alpha = rng.uniform(0.1, 4.0, size=layers).tolist() if seed < 2 else 0.7
    traj = simulate(z if batched else z[0], make_rule(attention, beta=beta), alpha=alpha, layers=layers, A=A,
                    mask=torch.from_numpy(mask if batched else mask[0]), save=Save(attention=True))
    got_tokens = traj.tokens.numpy().reshape(layers + 1, batch, n, d)
    got_weights = traj.attention[:-1].numpy().reshape(layers, batch, n, n)  # P at each saved state: the last too
    # Without weights, hardmax takes the compact torch path (follower rows only after layer 1) or the
    # compiled kernel.
    plain = [simulate_on(backend, z if batched else z[0], make_rule(attention, beta=beta), alpha=alpha,
                         layers=layers, A=A, mask=torch.from_numpy(mask if batched else mask[0]))
             .tokens.numpy().reshape(got_tokens.shape)
             for backend in (HARDMAX_BACKENDS if attention == "hardmax" else ("torch",))]
    for b in range(batch):
        want_tokens, want_weights = reference.simulate(z[b], alpha=alpha, layers=layers, A=A, attention=attention,
                                                       beta=beta, mask=mask[b])
        np.testing.assert_allclose(got_tokens[:, b], want_tokens, rtol=0, atol=1e-12)
        for path in plain:
            np.testing.assert_allclose(path[:, b], want_tokens, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got_weights[:, b], want_weights, rtol=0, atol=1e-12)


def test_fully_masked_sequence_is_left_alone(rng):
    z, _ = random_configuration(rng, 2, 5, 3)
    mask = np.array([[True] * 5, [False] * 5])
    for attention, beta in [("hardmax", None), ("softmax", 1.0)]:
        traj = simulate(z, make_rule(attention, beta=beta), alpha=1.0, layers=3, mask=torch.from_numpy(mask),
                        save=Save(attention=True))
        assert torch.equal(traj.tokens[:, 1], torch.from_numpy(z[1]).expand(4, 5, 3))
        assert not traj.attention[:, 1].any()
        plain = simulate(z, make_rule(attention, beta=beta), alpha=1.0, layers=3, mask=torch.from_numpy(mask))
        assert torch.equal(plain.tokens[:, 1], torch.from_numpy(z[1]).expand(4, 5, 3))


# --------------------------------------------------------------------------------------------
# Exact cases: rational inputs, where ties are exact, against the Fraction oracle.
# --------------------------------------------------------------------------------------------


def as_floats(rows) -> np.ndarray:
    """Rows of rationals (int, Fraction or "p/q") as a float64 array."""
    return np.array([[float(F(x)) for x in row] for row in rows])


def run_exact(tokens, *, alpha, layers, A=None, mask=None):
    """Simulate in float64 and check against the exact oracle; return (trajectory, exact path)."""
    exact = reference.simulate_exact(tokens, alpha=alpha, layers=layers, A=A, mask=mask)
    alphas = [float(F(a)) for a in alpha] if isinstance(alpha, list) else float(F(alpha))
    kwargs = dict(alpha=alphas, layers=layers, A=None if A is None else as_floats(A),
                  mask=None if mask is None else torch.tensor(mask))
    traj = simulate(as_floats(tokens), **kwargs, save=Save(attention=True))
    np.testing.assert_allclose(traj.tokens.numpy(), reference.as_float(exact), rtol=0, atol=1e-12)
    # Without weights, hardmax takes the compact torch path (leaders' rows skipped after layer 1) or
    # the compiled kernel.
    for backend in HARDMAX_BACKENDS:
        compact = simulate_on(backend, as_floats(tokens), **kwargs)
        np.testing.assert_allclose(compact.tokens.numpy(), reference.as_float(exact), rtol=0, atol=1e-12)
    return traj, exact


# Two leaders a, b and a follower c with ⟨c, a⟩ = ⟨c, b⟩. In the second set the tie is exact only in
# rationals: the float64 scores of c (29/210 both) differ in the last bit, so the engine needs its tolerance.
TIED = {
    "dyadic": (["1", "0"], ["0", "1"], ["1/4", "1/4"]),
    "decimal": (["1/5", "1/2"], ["1/2", "-1/5"], ["1/3", "1/7"]),
}


@pytest.mark.parametrize("case, A", [("dyadic", None), ("dyadic", [[2, 1], [1, 2]]), ("decimal", None)],
                         ids=["dyadic-I", "dyadic-A", "decimal-I"])
def test_equidistant_follower_moves_to_the_midpoint(case, A):
    a, b, c = TIED[case]
    traj, exact = run_exact([a, b, c], alpha=1, layers=4, A=A)
    mid = [(F(x) + F(y)) / 2 for x, y in zip(a, b, strict=True)]
    assert exact[1][2] == [F(x) + (m - F(x)) / 2 for x, m in zip(c, mid, strict=True)]  # γ = 1/2
    assert exact[1][:2] == exact[0][:2]  # the leaders stay
    np.testing.assert_array_equal(traj.attention[0, 2].numpy(), [0.5, 0.5, 0.0])


def test_tie_tolerance_is_relative_to_the_score_scale():
    def follower_row(z, tie_rtol=None):  # the attention row of token 2
        return simulate(z, Hardmax(tie_rtol), alpha=1.0, layers=1, save=Save(attention=True)).attention[0, 2].tolist()

    decimal = as_floats(TIED["decimal"])
    assert follower_row(decimal) == [0.5, 0.5, 0.0]
    # b = (0, 1 + δ): rule (★) compares the gap ⟨c, b − a⟩ = δ/4 with tie_rtol · W · ‖|a| + |b|‖, W the
    # largest ‖z_j‖ = 1 + δ: a tie exactly when tie_rtol ≳ δ/(4√2), at any scale.
    delta = 1e-10
    near = np.array([[1.0, 0.0], [0.0, 1.0 + delta], [0.25, 0.25]])
    threshold = delta / (4 * np.sqrt(2))
    assert follower_row(near, tie_rtol=1.2 * threshold) == [0.5, 0.5, 0.0]
    assert follower_row(near, tie_rtol=0.8 * threshold) == [0.0, 1.0, 0.0]
    assert follower_row(near * 1e6, tie_rtol=1.2 * threshold) == [0.5, 0.5, 0.0]  # scale-free
    assert follower_row(near) == [0.0, 1.0, 0.0]  # 1e-10 is far above the default 64 eps


@pytest.mark.parametrize("case", TIED)
def test_duplicated_leader_counts_twice(case):
    a, b, c = TIED[case]
    traj, exact = run_exact([a, a, b, c], alpha=1, layers=4)
    target = [(2 * F(x) + F(y)) / 3 for x, y in zip(a, b, strict=True)]  # (2a + b)/3, not (a + b)/2
    assert exact[1][3] == [F(x) + (t - F(x)) / 2 for x, t in zip(c, target, strict=True)]
    np.testing.assert_allclose(traj.attention[0, 3].numpy(), [1 / 3, 1 / 3, 1 / 3, 0], rtol=0, atol=1e-15)
    assert torch.equal(traj.tokens[:, 0], traj.tokens[:, 1])


def test_padding_copies_of_real_tokens_do_not_count():
    a, b, c = TIED["dyadic"]
    tokens, mask = [a, b, c, a, a, c], [True, True, True, False, False, False]
    traj, exact = run_exact(tokens, alpha=1, layers=3, mask=mask)
    assert exact[1][2] == [F(3, 8), F(3, 8)]  # c + ((a + b)/2 − c)/2, the padding copies of a ignored
    np.testing.assert_array_equal(traj.attention[0, 2].numpy(), [0.5, 0.5, 0, 0, 0, 0])
    # Padding does not move, although its real twin c does.
    assert torch.equal(traj.tokens[:, 3:], traj.tokens[:1, 3:].expand(4, 3, 2))
    assert not traj.attention[:, 3:].any() and not traj.attention[:, :, 3:].any()


def test_zero_token_attends_everyone():
    a, b, c = TIED["dyadic"]
    traj, exact = run_exact([["0", "0"], a, b, c, a], alpha="1/2", layers=3, mask=[True] * 4 + [False])
    mean = [sum(F(row[r]) for row in (a, b, c)) / 4 for r in range(2)]  # the zero token counts itself
    assert exact[1][0] == [m / 3 for m in mean]  # γ = (1/2)/(3/2) = 1/3
    np.testing.assert_array_equal(traj.attention[0, 0].numpy(), [0.25, 0.25, 0.25, 0.25, 0.0])


RATIONAL_A = {
    1: [[[1]], [[3]]],
    2: [[[1, 0], [0, 1]], [[2, 1], [1, 2]], [[1, 0], [0, 3]], [[2, -1], [-1, 1]]],
    3: [[[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[2, 1, 0], [1, 2, 1], [0, 1, 2]],
        [[1, 0, 0], [0, 2, 0], [0, 0, 3]]],
}


@st.composite
def integer_configurations(draw):
    """Small integer tokens (ties everywhere), rational A and α: few layers, so that rounding stays
    far below the tie tolerance and every tie the oracle sees is a tie for the engine."""
    n, d, layers = draw(st.integers(1, 6)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    tokens = draw(st.lists(st.lists(st.integers(-3, 3), min_size=d, max_size=d), min_size=n, max_size=n))
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    A = draw(st.sampled_from(RATIONAL_A[d]))
    rationals = st.sampled_from(["1/2", "1", "3"])
    alpha = draw(st.one_of(rationals, st.lists(rationals, min_size=layers, max_size=layers)))
    return dict(tokens=tokens, alpha=alpha, layers=layers, A=A, mask=mask)


@given(integer_configurations())
def test_integer_configurations_match_exact_oracle(config):
    run_exact(**config)


# --------------------------------------------------------------------------------------------
# Repeated tokens: tied whatever the floating-point order, counted with multiplicity.
# --------------------------------------------------------------------------------------------


def test_copies_keep_identical_trajectories_float32(rng):
    d, counts = 3, [1, 7, 30, 2, 11, 1, 5]
    distinct = rng.standard_normal((len(counts), d)) * rng.uniform(0.1, 2.0, size=(len(counts), 1))
    group = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    z = torch.from_numpy(distinct[group].astype(np.float32))
    A = random_spd(rng, d)
    traj = simulate(z, alpha=0.8, layers=6, A=A, save=Save(attention=True))
    assert traj.tokens.dtype == torch.float32
    for g in range(len(counts)):
        copies = traj.tokens[:, group == g]
        assert torch.equal(copies, copies[:, :1].expand_as(copies))
        # Every copy receives the same attention from everyone: it is tied with its twins.
        columns = traj.attention[:, :, group == g]
        assert torch.equal(columns, columns[:, :, :1].expand_as(columns))
    # With multiplicities, float32 follows the float64 oracle run on the same (rounded) data.
    want, _ = reference.simulate(z.double().numpy(), alpha=0.8, layers=6, A=A.astype(np.float32),
                                 tie_rtol=default_tie_rtol(torch.float32))
    np.testing.assert_allclose(traj.tokens.double().numpy(), want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_copies_count_with_multiplicity_float32(seed):
    """A follower c tied between a (k copies) and b moves towards (k a + b)/(k + 1)."""
    rng = np.random.default_rng(seed)
    d, k = 3, 5
    A = random_spd(rng, d)
    c = 0.1 * rng.standard_normal(d)
    w = A @ c

    def on_level_set(x):  # ⟨A c, x⟩ = 1
        return w / (w @ w) + x - (x @ w) / (w @ w) * w

    a, b = on_level_set(rng.standard_normal(d)), on_level_set(rng.standard_normal(d))
    z = np.array([a] * k + [b, c], dtype=np.float32)
    traj = simulate(torch.from_numpy(z), alpha=1.0, layers=1, A=A, save=Save(attention=True))
    np.testing.assert_allclose(traj.attention[0, -1].numpy(), [1 / (k + 1)] * (k + 1) + [0], rtol=1e-6, atol=0)
    target = (k * z[0].astype(np.float64) + z[k]) / (k + 1)
    np.testing.assert_allclose(traj.tokens[1, -1].numpy(), (c + target) / 2, rtol=1e-5, atol=1e-6)


def test_repeated_leader_stays_put_bitwise():
    # One point, three copies: nobody moves. Averaging the copies would give (3 z)/3 ≠ z in the last bit.
    z = torch.tensor([[0.1, 0.7]] * 3, dtype=torch.float64)
    traj = simulate(z, alpha=3.0, layers=1)
    assert torch.equal(traj.tokens[1], z)


# --------------------------------------------------------------------------------------------
# Invariants (hypothesis).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    tokens: np.ndarray  # (n, d) float64
    mask: np.ndarray  # (n,) bool, at least one True
    A: np.ndarray | None  # (d, d) SPD or None
    alpha: float
    layers: int

    def run(self, rule=None, **kwargs):
        return simulate(self.tokens, rule or Hardmax(), alpha=self.alpha, layers=self.layers, A=self.A,
                        mask=torch.from_numpy(self.mask), **kwargs)


# A half-integer grid makes exact ties and repeated tokens common; 6 decimals keep generic positions
# away from magnitudes where the tie scale ||z||^2 would underflow.
GRID = st.integers(-4, 4).map(lambda k: k / 2)
GENERIC = st.floats(-3, 3).map(lambda x: round(x, 6))


@st.composite
def configurations(draw, n=None, d=None):
    n = draw(st.integers(1, 7)) if n is None else n
    d = draw(st.integers(1, 3)) if d is None else d
    coordinate = draw(st.sampled_from([GRID, GENERIC]))
    tokens = np.array(draw(st.lists(coordinate, min_size=n * d, max_size=n * d))).reshape(n, d)
    mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    mask[draw(st.integers(0, n - 1))] = True
    seed = draw(st.none() | st.integers(0, 2**32 - 1))
    A = None if seed is None else random_spd(np.random.default_rng(seed), d)
    return Config(tokens, mask, A, draw(st.floats(0.05, 20.0)), draw(st.integers(1, 5)))


@given(configurations())
def test_tokens_stay_in_the_previous_convex_hull(config):
    path = config.run().tokens.numpy()[:, config.mask]
    m = path.shape[1]
    for k in range(config.layers):
        vertices = np.vstack([path[k].T, np.ones((1, m))])  # Σ λ_j z_j = point, Σ λ_j = 1, λ ≥ 0
        for point in path[k + 1]:
            lp = linprog(np.zeros(m), A_eq=vertices, b_eq=np.append(point, 1.0), bounds=(0, None))
            assert lp.status == 0, f"layer {k + 1}: {point} is outside the hull of layer {k}"


def leaders(tokens: torch.Tensor, weights: torch.Tensor, mask: np.ndarray) -> set[int]:
    """Real tokens that attend only to copies of themselves (C_i = {copies of i})."""
    out = set()
    for i in np.flatnonzero(mask):
        support = weights[i] > 0
        if (tokens[support] == tokens[i]).all():
            out.add(int(i))
    return out


@given(configurations())
def test_leaders_never_move(config):
    traj = config.run(save=Save(attention=True))
    for k in range(config.layers):
        for i in leaders(traj.tokens[k], traj.attention[k], config.mask):
            path = traj.tokens[k:, i]
            assert torch.equal(path, path[:1].expand_as(path)), f"leader {i} moved after layer {k}"


@given(configurations())
def test_leader_set_never_shrinks(config):
    traj = config.run(save=Save(attention=True))
    found = [leaders(traj.tokens[k], traj.attention[k], config.mask) for k in range(config.layers)]
    for k in range(config.layers - 1):
        assert found[k] <= found[k + 1], f"layer {k + 1} lost leaders {found[k] - found[k + 1]}"


@given(st.data(), configurations(), st.sampled_from([("hardmax", None), ("softmax", 2.0)]))
def test_permutation_equivariance_is_exact(data, config, attention_beta):
    attention, beta = attention_beta
    perm = np.array(data.draw(st.permutations(range(len(config.tokens)))))
    base = config.run(make_rule(attention, beta), save=Save(attention=True))
    permuted = simulate(config.tokens[perm], make_rule(attention, beta=beta), alpha=config.alpha,
                        layers=config.layers, A=config.A,
                        mask=torch.from_numpy(config.mask[perm]), save=Save(attention=True))
    assert torch.equal(permuted.tokens, base.tokens[:, perm])
    assert torch.equal(permuted.attention, base.attention[:, perm][:, :, perm])


@st.composite
def batches(draw):
    n, d = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    return draw(st.lists(configurations(n=n, d=d), min_size=1, max_size=4))


@given(batches(), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_batch_equals_each_sequence_alone(configs, layers, seed):
    d = configs[0].tokens.shape[1]
    A = random_spd(np.random.default_rng(seed), d)
    tokens, mask = np.stack([c.tokens for c in configs]), np.stack([c.mask for c in configs])
    together = simulate(tokens, alpha=0.9, layers=layers, A=A, mask=torch.from_numpy(mask), save=Save(attention=True))
    for b, c in enumerate(configs):
        alone = simulate(c.tokens, alpha=0.9, layers=layers, A=A, mask=torch.from_numpy(c.mask),
                         save=Save(attention=True))
        assert torch.equal(together.tokens[:, b], alone.tokens)
        assert torch.equal(together.attention[:, b], alone.attention)


@given(configurations(), st.sampled_from([("hardmax", None), ("softmax", 1.5)]))
def test_two_runs_are_bitwise_equal(config, attention_beta):
    attention, beta = attention_beta
    first, second = (config.run(make_rule(attention, beta), save=Save(attention=True)) for _ in range(2))
    assert torch.equal(first.tokens, second.tokens) and torch.equal(first.attention, second.attention)


@given(configurations(), st.integers(-30, 30))
def test_scaling_by_a_power_of_two_commutes(config, exponent):
    """Scores, tie scale, means and steps are homogeneous: 2^k-scaled tokens give the 2^k-scaled run.

    Equal up to rounding, not bitwise: distinct tokens are processed in the order of a hash of their
    bits, which scaling changes, so a tied mean may be summed in another order."""
    scale = 2.0**exponent
    scaled = simulate(config.tokens * scale, alpha=config.alpha, layers=config.layers, A=config.A,
                      mask=torch.from_numpy(config.mask))
    expected = config.run().tokens * scale
    torch.testing.assert_close(scaled.tokens, expected, rtol=1e-12, atol=1e-300)


def test_float32_ties_survive_large_tokens():
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.6]])  # three leaders: nobody moves
    scaled = simulate(z * 2.0**33, alpha=1.0, layers=1)
    assert torch.equal(scaled.tokens[1], z * 2.0**33)


# --------------------------------------------------------------------------------------------
# Softmax → hardmax, chunking, returned weights.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 3])
def test_softmax_tends_to_hardmax(seed):
    rng = np.random.default_rng(seed)
    z, A = rng.standard_normal((8, 3)), random_spd(rng, 3)
    hard = simulate(z, alpha=1.0, layers=3, A=A).tokens
    # The premise: along the hardmax path, every top score beats the runner-up by a margin.
    for x in hard[:-1].numpy():
        s = np.sort(x @ A @ x.T, axis=1)
        assert (s[:, -1] - s[:, -2]).min() > 0.05
    betas = [10.0, 30.0, 100.0, 300.0, 1e3, 1e4]
    errors = [float((simulate(z, Softmax(beta), alpha=1.0, layers=3, A=A).tokens - hard)
                    .abs().max()) for beta in betas]
    assert errors == sorted(errors, reverse=True), errors
    assert errors[0] > 1e-3 and errors[-1] <= 1e-12, errors


@pytest.mark.parametrize("attention, beta", [("hardmax", None), ("softmax", 2.0)])
def test_chunk_size_does_not_change_results(rng, attention, beta):
    from hardmax.dynamics._engines import paper
    z, mask = random_configuration(rng, 7, 12, 3)
    for b in range(7):  # sequences with 1..7 distinct tokens, so chunks get different widths
        z[b, b + 1 :] = z[b, 0]
    A, mask = random_spd(rng, 3), torch.from_numpy(mask)
    rule, alphas = make_rule(attention, beta=beta), torch.full((4,), 0.6, dtype=torch.float64)
    runs = [paper.run(torch.from_numpy(z), mask, rule, alphas, torch.from_numpy(A), tuple(range(5)), True, "torch",
                      chunk_size=size) for size in (1, 3, 256, 1000)]
    runs = [SimpleNamespace(tokens=out, attention=att) for out, att in runs]
    if attention == "hardmax":  # without weights, hardmax takes the compact (leader-skipping) path
        for size in (1, 3, 256):
            compact, _ = paper.run(torch.from_numpy(z), mask, rule, alphas, torch.from_numpy(A), tuple(range(5)), False,
                                   "torch", chunk_size=size)
            torch.testing.assert_close(compact, runs[0].tokens, rtol=0, atol=1e-13)
    for run in runs[1:]:
        if attention == "hardmax":
            assert torch.equal(run.tokens, runs[0].tokens) and torch.equal(run.attention, runs[0].attention)
        else:  # the softmax reductions run over padded rows whose width depends on the chunk
            torch.testing.assert_close(run.tokens, runs[0].tokens, rtol=0, atol=1e-13)
            torch.testing.assert_close(run.attention, runs[0].attention, rtol=0, atol=1e-13)


@given(configurations(), st.sampled_from([("hardmax", None), ("softmax", 1.5)]))
def test_returned_weights_are_the_ones_applied(config, attention_beta):
    """The weights (attention_weights) and the step (attention_step) take separate code paths."""
    attention, beta = attention_beta
    traj = config.run(make_rule(attention, beta), save=Save(attention=True))
    gamma = (traj.alpha / (1 + traj.alpha))[:, None, None]
    z, P = traj.tokens[:-1], traj.attention[:-1]
    stepped = torch.where(torch.from_numpy(config.mask)[:, None], z + gamma * (P @ z - z), z)
    torch.testing.assert_close(traj.tokens[1:], stepped, rtol=0, atol=1e-12)


@pytest.mark.parametrize("attention, beta", [("hardmax", None), ("softmax", 1.0)])
@pytest.mark.parametrize("batched", [False, True], ids=["n,d", "batch,n,d"])
def test_returned_weights(rng, batched, attention, beta):
    z, mask = random_configuration(rng, 3, 9, 2)
    z, mask = (z, torch.from_numpy(mask)) if batched else (z[0], torch.from_numpy(mask[0]))
    traj = simulate(z, make_rule(attention, beta=beta), alpha=1.0, layers=5, mask=mask, save=Save(attention=True))
    assert traj.attention.shape == (6, *mask.shape, mask.shape[-1])  # P at each saved state, 0..5
    assert traj.attention.dtype == traj.tokens.dtype
    real = mask
    rows = traj.attention.sum(-1)
    torch.testing.assert_close(rows[:, real], torch.ones_like(rows[:, real]), rtol=0, atol=1e-12)
    assert not rows[:, ~real].any()
    assert not traj.attention.transpose(-1, -2)[:, ~real].any()  # masked columns
    assert (traj.attention >= 0).all()
    assert simulate(z, make_rule(attention, beta=beta), alpha=1.0, layers=5, mask=mask).attention is None


# --------------------------------------------------------------------------------------------
# Types, shapes, layers = 0.
# --------------------------------------------------------------------------------------------

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("attention, beta", [("hardmax", None), ("softmax", 1.0)])
def test_dtype_and_device_are_kept(generator, dtype, device, attention, beta):
    z = torch.randn(2, 5, 3, generator=generator).to(dtype=dtype, device=device)
    traj = simulate(z, make_rule(attention, beta=beta), alpha=[0.5, 1.0], layers=2, save=Save(attention=True))
    for t in (traj.tokens, traj.attention, traj.alpha, traj.A):
        assert t.dtype == dtype and t.device == z.device
    assert traj.tokens.shape == (3, 2, 5, 3) and traj.mask.shape == (2, 5)
    assert torch.equal(traj.tokens[0], z)


@pytest.mark.parametrize("tokens, dtype", [
    (np.zeros((3, 2)), torch.float64),
    (np.zeros((3, 2), dtype=np.int64), torch.float64),
    ([[0, 1], [1, 0]], torch.float64),
    ([[0.0, 1.0], [1.0, 0.0]], torch.float64),
    (np.zeros((3, 2), dtype=np.float32), torch.float32),  # already floating: kept
])
def test_numpy_input_becomes_float64(tokens, dtype):
    traj = simulate(tokens, alpha=1.0, layers=1)
    assert isinstance(traj.tokens, torch.Tensor) and traj.tokens.dtype == dtype


@pytest.mark.parametrize("mask", [np.array([True, True, False]), [True, True, False]], ids=["numpy", "list"])
def test_boolean_mask_from_numpy_or_list(mask):
    traj = simulate(Z, alpha=1.0, layers=2, mask=mask)
    assert torch.equal(traj.mask, torch.tensor([True, True, False]))


def test_trajectory_records_its_parameters():
    traj = simulate(Z, Softmax(3), alpha=[0.5, 2.0], layers=2, A=2 * np.eye(2))
    assert traj.alpha.tolist() == [0.5, 2.0] and torch.equal(traj.A, 2 * torch.eye(2, dtype=torch.float64))
    assert (traj.rule, traj.layers, traj.steps) == (Softmax(3.0), 2, (0, 1, 2))
    assert torch.equal(traj.mask, torch.ones(3, dtype=torch.bool))
    assert torch.equal(traj.final, traj.tokens[-1]) and torch.equal(traj.after(1), traj.tokens[1])
    hard = simulate(Z, alpha=0.5, layers=3)
    assert hard.alpha.tolist() == [0.5] * 3 and hard.rule == Hardmax() and hard.attention is None
    assert hard.rule.rtol(torch.float64) == default_tie_rtol(torch.float64) == 64 * torch.finfo(torch.float64).eps


@pytest.mark.parametrize("shape", [(4, 2), (3, 4, 2)])
def test_zero_layers_returns_the_initial_tokens(generator, shape):
    z = torch.randn(*shape, generator=generator, dtype=torch.float64)
    traj = simulate(z, alpha=1.0, layers=0, save=Save(attention=True))
    assert traj.layers == 0 and traj.tokens.shape == (1, *shape)
    assert torch.equal(traj.tokens[0], z) and torch.equal(traj.final, z)
    assert traj.attention.shape == (1, *shape[:-1], shape[-2]) and traj.alpha.shape == (0,)  # P of the input


# --------------------------------------------------------------------------------------------
# Bad inputs: a ValueError that names the problem.
# --------------------------------------------------------------------------------------------

Z = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.2]])
NAN_A, INF_Z = np.eye(2), Z.copy()
NAN_A[0, 1] = NAN_A[1, 0] = np.nan
INF_Z[1, 0] = np.inf

BAD_INPUTS = {
    "A not symmetric": (dict(A=[[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
    "A indefinite": (dict(A=[[1.0, 0.0], [0.0, -1.0]]), "positive definite"),
    "A singular": (dict(A=[[1.0, 0.0], [0.0, 0.0]]), "positive definite"),
    "A wrong size": (dict(A=np.eye(3)), r"A must have shape \(2, 2\)"),
    "A NaN": (dict(A=NAN_A), "A contains NaN"),
    "alpha zero": (dict(alpha=0.0), "alpha must be finite and > 0"),
    "alpha negative": (dict(alpha=-1.0), "alpha must be finite and > 0"),
    "alpha NaN": (dict(alpha=float("nan")), "alpha must be finite and > 0"),
    "alpha inf": (dict(alpha=float("inf")), "alpha must be finite and > 0"),
    "alpha one bad layer": (dict(alpha=[1.0, -0.5]), "alpha must be finite and > 0"),
    "alpha wrong length": (dict(alpha=[1.0, 1.0, 1.0]), "one value per layer"),
    "tokens NaN": (dict(tokens=np.where(Z == 0, np.nan, Z)), "tokens contain NaN"),
    "tokens inf": (dict(tokens=INF_Z), "tokens contain NaN or inf"),
    "tokens 1-D": (dict(tokens=np.zeros(3)), r"tokens must have shape \(n, d\) or \(batch, n, d\)"),
    "tokens 4-D": (dict(tokens=np.zeros((1, 2, 3, 2))), r"tokens must have shape \(n, d\)"),
    "tokens empty": (dict(tokens=np.zeros((0, 2))), "with n, d ≥ 1"),
    "tokens of dimension 0": (dict(tokens=np.zeros((3, 0))), "with n, d ≥ 1"),
    "tokens empty sequences": (dict(tokens=np.zeros((2, 0, 2))), "with n, d ≥ 1"),
    "tokens not an array": (dict(tokens={"z": 1}), "tokens must be a torch tensor or a NumPy array"),
    "layers negative": (dict(layers=-1), "layers must be an integer"),
    "layers float": (dict(layers=2.0), "layers must be an integer"),
    "layers bool": (dict(layers=True), "layers must be an integer"),
    "layers string": (dict(layers="2"), "layers must be an integer"),
    "rule a string": (dict(rule="softmax"), "rule must be an attention rule"),
    "rule a class": (dict(rule=Softmax), "rule must be an attention rule"),
    "save not a Save": (dict(save="final"), "save must be a hardmax.dynamics.Save"),
    "half precision": (dict(tokens=torch.tensor(Z, dtype=torch.float16)), "cannot resolve ties"),
    "bfloat16": (dict(tokens=torch.tensor(Z, dtype=torch.bfloat16)), "cannot resolve ties"),
    "softmax scores overflow": (dict(tokens=torch.tensor(Z, dtype=torch.float32) * 1e20, rule=Softmax(1.0)),
                                "beyond the range"),
    "mask too short": (dict(mask=torch.ones(2, dtype=torch.bool)), r"mask must have shape \(3,\)"),
    "mask batched for one sequence": (dict(mask=torch.ones(1, 3, dtype=torch.bool)),
                                      r"mask must have shape \(3,\)"),
    "mask for a batch": (dict(tokens=np.stack([Z, Z]), mask=torch.ones(3, dtype=torch.bool)),
                         r"mask must have shape \(2, 3\)"),
    "mask of ints": (dict(mask=np.ones(3, dtype=np.int64)), "mask must be boolean"),
    "mask of floats": (dict(mask=torch.ones(3)), "mask must be boolean"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_raises_value_error(name):
    changes, message = BAD_INPUTS[name]
    kwargs = dict(tokens=Z, alpha=1.0, layers=2) | changes
    with pytest.raises(ValueError, match=message):
        simulate(kwargs.pop("tokens"), **kwargs)


KNOWN_GAPS = {
    "alpha ≤ 0 with zero layers": dict(alpha=-1.0, layers=0),
    "alpha NaN with zero layers": dict(alpha=float("nan"), layers=0),
    "complex tokens": dict(tokens=torch.tensor(Z, dtype=torch.complex128)),
    "complex A": dict(A=np.eye(2) * (1 + 1j)),
}
# A batch of no sequences, (0, n, d), is no gap since issue #23 (item 19): it is a valid empty run, so that a
# classifier answers an empty batch with empty logits (test_dynamics_simulator.py::test_a_batch_of_no_sequences_...).


@pytest.mark.parametrize("name", KNOWN_GAPS)
def test_known_gaps_in_validation(name):
    kwargs = dict(tokens=Z, alpha=1.0, layers=2) | KNOWN_GAPS[name]
    with pytest.raises(ValueError):
        simulate(kwargs.pop("tokens"), **kwargs)


# --------------------------------------------------------------------------------------------
# The leader-skipping runner (hardmax_layers) used by simulate and the classifier.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_hardmax_layers_equals_layer_by_layer_steps(seed):
    """Skipping the leaders' rows after layer 1 changes nothing: same result as attention_step K times."""
    from hardmax.dynamics import attention_step, deduplicate
    from hardmax.dynamics._engines.layers import hardmax_layers

    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(5, 30, 3, generator=g, dtype=torch.float64)
    tokens[:, 10:14] = tokens[:, :4]  # duplicates
    mask = torch.rand(5, 30, generator=g) > 0.2
    dedup = deduplicate(tokens, mask)
    alphas = torch.rand(7, generator=g, dtype=torch.float64) + 0.2
    A = torch.eye(3, dtype=torch.float64) + 0.3 * torch.ones(3, 3, dtype=torch.float64)
    fast = hardmax_layers(dedup.tokens, dedup.multiplicity, alphas, A=A)
    z = dedup.tokens
    slow = [z]
    for a in alphas:
        z = attention_step(z, dedup.multiplicity, alpha=a, A=A)
        slow.append(z)
    torch.testing.assert_close(fast, torch.stack(slow), rtol=0, atol=1e-13)
    last = hardmax_layers(dedup.tokens, dedup.multiplicity, alphas, A=A, keep_path=False)
    assert torch.equal(last[0], fast[-1])


@pytest.mark.parametrize("backend", HARDMAX_BACKENDS)
@pytest.mark.parametrize("seed", range(4))
def test_leader_skipping_matches_the_per_token_oracle(seed, backend):
    """Followers skipped after layer 1 and leaders checked only when a follower nears their row
    maximum give the per-token oracle's trajectory (frames change positions in the last bits only)."""
    rng = np.random.default_rng(seed)
    tokens = rng.standard_normal((12, 2))
    run = simulate_on(backend, tokens, alpha=1.0, layers=12)
    expected, _ = reference.simulate(tokens, alpha=1.0, layers=12)
    np.testing.assert_allclose(run.tokens.numpy(), expected, rtol=0, atol=1e-12)


def test_a_follower_converging_to_its_leader_never_unseats_it():
    """Rule (★) within a frame is scale-free: a follower approaching its leader along a line keeps
    the same ratio gap / bound, so with the default tolerance the leader keeps its place however close
    the follower comes (60 layers). A coarse tolerance (0.5: a cosine below 1/2 counts as a tie) does
    unseat leaders: the runner hands over to full layers, with the same result. A token on the
    leader's exposed face ties with it."""
    from hardmax.dynamics._engines.layers import full_layers, hardmax_layers, hardmax_run, leaders_hold
    from hardmax.dynamics._engines.ties import Frames

    rng = np.random.default_rng(1)
    tokens = torch.from_numpy(rng.standard_normal((1, 12, 2)))
    weights = torch.ones(1, 12, dtype=torch.float64)
    alphas = torch.ones(60, dtype=torch.float64)
    assert hardmax_run(tokens, weights, alphas, None, default_tie_rtol(torch.float64)) is not None
    assert hardmax_run(tokens, weights, alphas, None, 0.5) is None
    torch.testing.assert_close(hardmax_layers(tokens, weights, alphas, tie_rtol=0.5),
                               full_layers(tokens, weights, alphas, None, 0.5), rtol=0, atol=0)
    zero = torch.zeros(1, dtype=torch.long)
    face = torch.tensor([[[1.0, 0.0], [1.0, 0.5], [-1.0, 0.0]]], dtype=torch.float64)  # (1, 0.5) on ℓ's face x = 1
    inside = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [-1.0, 0.0]]], dtype=torch.float64)
    w3 = torch.ones(1, 3, dtype=torch.float64)
    assert not leaders_hold(face, Frames.absolute(face), w3, None, 1e-12, zero, zero)
    assert leaders_hold(inside, Frames.absolute(inside), w3, None, 1e-12, zero, zero)


def _configurations_that_settle():
    """(name, tokens (batch, m, d), weights (batch, m), alphas, A): runs whose attention sets settle, with exact ties,
    ties between leaders (followers in a tie's own frame), masks, duplicates, float32 offsets that underflow to 0
    (followers turning into fixed keys), an SPD A and a coarse tolerance that unseats leaders mid-run."""
    rng = np.random.default_rng(11)
    lattice = torch.tensor([[x, y] for x in range(-2, 3) for y in range(-2, 3) if (x, y) != (0, 0)],
                           dtype=torch.float64) / 2
    square = torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0], [0, 0.3], [0.2, -0.7]],
                          dtype=torch.float64)
    g = rng.standard_normal((3, 3))
    A = torch.from_numpy(np.eye(3) + 0.5 * g @ g.T)
    batch = torch.from_numpy(rng.standard_normal((6, 25, 2)))
    batch[:, 10:14] = batch[:, :4]  # duplicates (several copies: weights below)
    weights = torch.from_numpy((rng.random((6, 25)) > 0.2) * rng.integers(1, 3, (6, 25))).to(torch.float64)
    one = torch.ones
    turns = np.random.default_rng(11)  # a follower turns leader at layer 11 (anchored: its followers move in)
    turns.integers(5, 40), turns.integers(2, 4)
    turning = torch.from_numpy(turns.standard_normal((1, 9, 2)))
    return [
        ("a follower turns leader", turning, one(1, 9, dtype=torch.float64), float(turns.uniform(0.2, 2)), None, 150),
        ("gaussian", torch.from_numpy(rng.standard_normal((1, 80, 2))), one(1, 80, dtype=torch.float64), 0.5, None,
         300),
        ("lattice", lattice[None], one(1, 24, dtype=torch.float64), 0.3, None, 300),
        ("square", square[None], one(1, 8, dtype=torch.float64), 0.5, None, 400),
        ("float32", torch.from_numpy(rng.standard_normal((1, 40, 2))).float(), one(1, 40), 1.0, None, 150),
        # offsets underflow to 0: followers become fixed keys, tie with their leaders and unseat them
        ("float32 to underflow", torch.from_numpy(rng.standard_normal((1, 40, 2))).float(), one(1, 40), 1.0, None, 400),
        ("A", torch.from_numpy(rng.standard_normal((2, 40, 3))), one(2, 40, dtype=torch.float64), 0.7, A, 200),
        ("batch with masks", batch, weights, 1.0, None, 100),
    ]


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0], marks=[pytest.mark.slow] if c[0] == "gaussian" else [])
                                  for c in _configurations_that_settle()])  # gaussian: 80 tokens, 300 layers
def test_layers_run_ahead_are_the_layer_by_layer_layers(case):
    """Layers computed with the attention sets held and verified afterwards in one batched decision are the
    layer-by-layer run's, bit for bit, and the run hands over to full layers exactly where it does; it does
    run ahead (far fewer decisions than layers), or the test would check nothing."""
    from hardmax.dynamics._engines import layers as L

    _, tokens, weights, alpha, A, depth = case
    alphas = torch.full((depth,), alpha, dtype=tokens.dtype)
    rtol = default_tie_rtol(tokens.dtype)
    A = None if A is None else A.to(tokens.dtype)
    one_by_one = L.hardmax_run(tokens, weights, alphas, A, rtol, ahead=1)
    calls = []
    decide = L._Followers.decide

    def counted(self, z, frames, **grouping):
        calls.append(z.shape[0])
        return decide(self, z, frames, **grouping)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(L._Followers, "decide", counted)
        ahead = L.hardmax_run(tokens, weights, alphas, A, rtol)
    assert (ahead is None) == (one_by_one is None)
    if ahead is not None:
        assert torch.equal(ahead.first, one_by_one.first) and torch.equal(ahead.later, one_by_one.later)
        assert torch.equal(ahead.order, one_by_one.order)
        assert sum(calls) >= depth - 1  # every layer's sets decided (some twice: after a guess that failed)
        assert len(calls) < depth / 4, calls  # in blocks
    # A coarse tolerance unseats a leader somewhere in a block: the same hand-over to full layers.
    assert (L.hardmax_run(tokens, weights, alphas, A, 0.5) is None) == (
        L.hardmax_run(tokens, weights, alphas, A, 0.5, ahead=1) is None)


@pytest.mark.parametrize("case", ["gaussian", "float32", "lattice", "A"])
def test_rows_at_one_position_are_decided_once_with_the_same_sets(case):
    """Scoring and refining one row per position and frame (the clusters converged to rounding) gives every
    row's own sets: the same trajectory as every row on its own, for followers, ties between leaders (rows whose
    decision depends on the row itself), float32 and an SPD A."""
    from hardmax.dynamics._engines import layers

    _, tokens, _, alpha, A, depth = next(c for c in _configurations_that_settle() if c[0] == case)
    A = None if A is None else A.to(tokens.dtype)
    distinct = layers._Distinct.of

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(layers._Distinct, "of",
                      staticmethod(lambda pos, label, present, alone=None: distinct(pos, label, present,
                                                                                    torch.ones_like(present))))
        every_row = simulate_on("torch", tokens, alpha=alpha, layers=depth, A=A).tokens
    shared = []
    real = layers.same_kind

    def seen(kind):
        one, inverse = real(kind)
        shared.append(len(kind) - len(one))
        return one, inverse

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(layers, "same_kind", seen)
        once = simulate_on("torch", tokens, alpha=alpha, layers=depth, A=A).tokens
    assert torch.equal(once, every_row)
    assert max(shared) > 0  # rows were grouped


def test_rows_of_one_kind_are_grouped_by_value_even_when_every_hash_collides(monkeypatch):
    """`select.same_kind` groups by a hash confirmed by value: with a hash that sends every row to one bucket, rows
    of another kind get groups of their own, never a wrong one."""
    from hardmax.dynamics._engines import select as select_module

    kind = torch.tensor([[1, 2], [3, 4], [1, 2], [-5, 0], [3, 4], [1, 2]])
    for colliding in (False, True):
        if colliding:
            monkeypatch.setattr(select_module, "hash_rows", lambda keys: torch.zeros(keys.shape[:2], dtype=torch.long))
        one, inverse = select_module.same_kind(kind)
        assert torch.equal(kind[one[inverse]], kind)  # every row's group has its kind
        if not colliding:
            assert len(one) == 3 and inverse[0] == inverse[2] == inverse[5] and inverse[1] == inverse[4]
    assert len(one) > 3  # the collided rows were split off, not merged
    empty = select_module.same_kind(torch.zeros(0, 2, dtype=torch.long))
    assert len(empty[0]) == len(empty[1]) == 0


def test_rows_share_a_place_only_at_one_position_in_one_frame():
    """The grouping key of rows decided once: the same bits and the same frame; an absent row, a row of another
    frame, another state, -0.0 against 0.0, and a row flagged to be decided alone each get a place of their own."""
    from hardmax.dynamics._engines.layers import _Distinct

    pos = torch.tensor([[[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [0.0, 1.0], [-0.0, 1.0], [3.0, 3.0]],
                        [[1.0, 2.0], [1.0, 2.0], [5.0, 5.0], [5.0, 5.0], [5.0, 5.0], [5.0, 5.0], [5.0, 5.0]]],
                       dtype=torch.float64)
    label = torch.tensor([[4, 4, 9, 4, -1, -1, 4], [4, 4, -1, -1, -1, -1, -1]])
    present = torch.ones(2, 7, dtype=torch.bool)
    present[0, 3] = False
    slots = _Distinct.of(pos, label, present)
    s0, s1 = slots.slot.tolist()
    assert s0[0] == s0[1] and len({s0[0], s0[2], s0[3], s0[4], s0[5], s0[6]}) == 6
    assert s1[0] == s1[1] and len(set(s1[2:])) == 1 and s1[0] != s1[2]
    assert slots.width == 6 and slots.present.sum().item() == 5 + 2
    assert slots.shared().tolist() == [[True, True] + [False] * 5, [True] * 7]
    alone = torch.zeros(2, 7, dtype=torch.bool)
    alone[1, 3] = True
    s1 = _Distinct.of(pos, label, present, alone).slot[1].tolist()
    assert s1[2] == s1[4] and s1[3] != s1[2]
    for r, slot in enumerate(_Distinct.of(pos, label, present).slot):  # each place stands for rows at its position
        assert torch.equal(pos[r][slots.rows[r][slot]], pos[r]) or not present[r].all()


def test_a_row_in_a_frame_with_a_fixed_candidate_of_another_frame_is_decided_alone():
    """foreign_anchor: the rows whose decision depends on their own origin and offset (rule (★)'s split at the
    origin) — framed, with a candidate at a fixed position in another frame."""
    from hardmax.dynamics._engines.select import foreign_anchor
    from hardmax.dynamics._engines.ties import Frames

    offset = torch.tensor([[[0.0, 0.0], [0.1, 0.0], [0.0, 0.0], [0.0, 0.0]]], dtype=torch.float64)
    frames = Frames(torch.ones_like(offset), offset, torch.tensor([[5, 5, 7, -1]]))  # fixed: keys 0 and 2
    candidates = torch.tensor([[True, True, False, False], [True, False, True, False], [False, True, False, True],
                               [True, False, True, False]])
    b = torch.zeros(4, dtype=torch.long)
    label = torch.tensor([5, 5, 5, -1])
    assert foreign_anchor(candidates, frames, b, label).tolist() == [False, True, False, False]


def test_leaders_checked_together_in_any_order_are_checked_one_by_one():
    """The leaders' check scores the rows of several sequences in one product per sequence: rows given in any order
    (sequences interleaved) get the verdicts they get one at a time."""
    from hardmax.dynamics._engines.layers import _held
    from hardmax.dynamics._engines.ties import Frames

    z = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [-1.0, 0.0]], [[1.0, 0.0], [1.0, 0.5], [-1.0, 0.0]]],
                     dtype=torch.float64)  # in the second, (1, 0.5) lies on (1, 0)'s face: not a leader's set alone
    w = torch.ones(2, 3, dtype=torch.float64)
    b, i = torch.tensor([1, 0, 1, 0, 1]), torch.tensor([0, 0, 2, 2, 1])
    together = _held(z, Frames.absolute(z), w, None, 1e-12, b, i).tolist()
    alone = [_held(z, Frames.absolute(z), w, None, 1e-12, b[k:k + 1], i[k:k + 1]).item() for k in range(5)]
    assert together == alone == [False, True, True, True, True]


def test_hardmax_layers_keeps_autograd_working():
    """With gradients on, the runner must not write into tensors autograd saved: same values as
    without gradients, and a backward pass that reaches the tokens."""
    from hardmax.dynamics._engines.layers import hardmax_layers

    g = torch.Generator().manual_seed(2)
    tokens = torch.randn(4, 15, 3, generator=g, dtype=torch.float64)
    weights = (torch.rand(4, 15, generator=g) > 0.2).to(torch.float64)
    alphas = torch.full((6,), 0.7, dtype=torch.float64)
    with torch.no_grad():
        expected = hardmax_layers(tokens, weights, alphas)
    leaf = tokens.clone().requires_grad_()
    path = hardmax_layers(leaf, weights, alphas)
    torch.testing.assert_close(path.detach(), expected, rtol=0, atol=0)
    path[-1].sum().backward()
    assert leaf.grad is not None and torch.isfinite(leaf.grad).all() and leaf.grad.abs().sum() > 0


def test_chunks_on_parallel_threads_give_the_same_result():
    """With several torch threads, simulate runs chunks on a thread pool (one intra-op thread each);
    the result must be bitwise the one-thread result, and the thread count must be restored."""
    g = torch.Generator().manual_seed(3)
    tokens = torch.randn(40, 12, 3, generator=g, dtype=torch.float64)
    tokens[:, 6:] = tokens[:, :6]  # duplicates
    mask = torch.rand(40, 12, generator=g) > 0.1
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = simulate_on("torch", tokens, alpha=0.8, layers=5, mask=mask)
        torch.set_num_threads(2)
        parallel = simulate_on("torch", tokens, alpha=0.8, layers=5, mask=mask)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert torch.equal(parallel.tokens, serial.tokens)
