"""`hardmax.dynamics.masks`: who may attend to whom. Every rule under a causal, windowed or pair mask against a slow
loop written from its equation token by token; hardmax's exact ties (★) restricted to the allowed keys against
rational arithmetic; token 1 of a causal sequence never moves; padding with a pair mask; a token with no allowed
key does not move and nothing is NaN; an all-True pair mask is no mask, bit for bit; the fast engines route a pair
mask to the reference loop or refuse it, never ignore it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from engines import solve_on

from hardmax.dynamics import (
    RK4,
    Bilinear,
    Causal,
    Euler,
    Field,
    Hardmax,
    Intersection,
    Localmax,
    Pairs,
    Renormalised,
    Save,
    Softmax,
    Sphere,
    Tokens,
    Unnormalised,
    attention_matrix,
    attention_step,
    simulate,
    solve,
)
from hardmax.dynamics._engines import kernel as compiled

RULES = [Hardmax(), Softmax(beta=2.0), Localmax(theta=0.3), Unnormalised(beta=0.1)]
IDS = ["hardmax", "softmax", "localmax", "unnormalised"]
GAMMA = 0.5 / 1.5  # Euler.layers(0.5): the paper's layer z + γ (T − z)


# --------------------------------------------------------------------------------------------
# slow references, token by token, from the equations of `hardmax.dynamics.masks`
# --------------------------------------------------------------------------------------------


def slow_layer(rule, z: list, present: list, allowed: list, gamma):
    """One layer z_i + γ (Σ_j P_ij z_j − z_i) of one sequence, each P_ij from its definition over the keys
    K_i = {j : allowed[i][j], present[j]}; a token with no key, or absent, stays. Works in floats or Fractions."""
    n, d = len(z), len(z[0])
    out = [list(row) for row in z]
    for i in range(n):
        keys = [j for j in range(n) if allowed[i][j] and present[j]]
        if not present[i] or not keys:
            continue
        s = {j: sum(z[i][k] * z[j][k] for k in range(d)) for j in keys}
        top = max(s.values())
        if isinstance(rule, Hardmax):
            chosen = [j for j in keys if s[j] == top]
            P = {j: Fraction(1, len(chosen)) if isinstance(top, Fraction) else 1 / len(chosen) for j in chosen}
        elif isinstance(rule, Localmax):
            chosen = [j for j in keys if s[j] >= top - rule.theta]
            P = {j: 1 / len(chosen) for j in chosen}
        elif isinstance(rule, Softmax):
            e = {j: math.exp(rule.beta * (s[j] - top)) for j in keys}
            P = {j: e[j] / sum(e.values()) for j in keys}
        else:  # Unnormalised: the mean over the keys the token sees
            P = {j: math.exp(rule.beta * s[j]) / len(keys) for j in keys}
        target = [sum(P[j] * z[j][k] for j in P) for k in range(d)]
        out[i] = [z[i][k] + gamma * (target[k] - z[i][k]) for k in range(d)]
    return out


def slow_sets(z: list, present: list, allowed: list) -> list[set]:
    """Hardmax attention sets C_i = argmax over the allowed keys, every maximiser kept (exact in Fractions)."""
    n, d = len(z), len(z[0])
    sets = []
    for i in range(n):
        keys = [j for j in range(n) if allowed[i][j] and present[j]]
        if not present[i] or not keys:
            sets.append(set())
            continue
        s = {j: sum(z[i][k] * z[j][k] for k in range(d)) for j in keys}
        sets.append({j for j in keys if s[j] == max(s.values())})
    return sets


def causal(n: int, window: int | None = None) -> list:
    return [[j <= i and (window is None or i - j < window) for j in range(n)] for i in range(n)]


def slow_run(rule, z: torch.Tensor, present, allowed: list, layers: int) -> torch.Tensor:
    """(layers + 1, n, d) of one sequence by `slow_layer`, in Python floats."""
    path = [z.tolist()]
    for _ in range(layers):
        path.append(slow_layer(rule, path[-1], present, allowed, GAMMA))
    return torch.tensor(path, dtype=torch.float64)


def tokens(batch: int, n: int, d: int, scale: float = 1.0, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(batch, n, d, generator=g, dtype=torch.float64)


# --------------------------------------------------------------------------------------------
# every rule under a causal mask equals its slow loop
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_causal_solve_equals_the_slow_loop_for_every_rule(rule):
    z = tokens(2, 6, 3, scale=0.6)
    run = solve(Field(rule), Euler.layers(0.5), z, steps=4, mask=Causal())
    # the compiled causal paths: hardmax's kernel and the softmax flows; the other rules on the reference loop
    assert run.engine == {"Hardmax": "causal", "Softmax": "softmax"}.get(type(rule).__name__, "reference")
    for b in range(2):
        want = slow_run(rule, z[b], [True] * 6, causal(6), 4)
        torch.testing.assert_close(run.tokens[:, b], want, rtol=0, atol=1e-12)
    # the mask matters: without it the tokens go elsewhere
    free = solve_on("reference", Field(rule), Euler.layers(0.5), z, steps=4)
    assert (free.final - run.final).abs().max() > 1e-3


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_causal_with_padding_equals_the_slow_loop(rule):
    """Causal() & Tokens(present): padding (left and inside) is no key and does not move; the rest is causal."""
    z = tokens(2, 6, 3, scale=0.6, seed=1)
    present = torch.tensor([[False, True, True, False, True, True], [True, True, True, True, True, False]])
    mask = Causal() & Tokens(present)
    run = solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=mask)
    for b in range(2):
        want = slow_run(rule, z[b], present[b].tolist(), causal(6), 3)
        torch.testing.assert_close(run.tokens[:, b], want, rtol=0, atol=1e-12)
    assert torch.equal(run.tokens[:, ~present], z[~present].expand(4, -1, -1))  # padding as given
    assert torch.equal(run.mask, present) and run.pairs == Causal()
    # the other order of the intersection, and a plain presence tensor in it, are the same mask
    again = solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Tokens(present) & Causal())
    assert torch.equal(again.tokens, run.tokens)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_a_sliding_window_equals_the_slow_loop(rule):
    z = tokens(1, 7, 2, scale=0.7, seed=2)[0]
    run = solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Causal(window=3))
    torch.testing.assert_close(run.tokens, slow_run(rule, z, [True] * 7, causal(7, 3), 3), rtol=0, atol=1e-12)
    # a window as long as the sequence is the causal mask, bit for bit
    assert torch.equal(solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Causal(window=7)).tokens,
                       solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Causal()).tokens)


@pytest.mark.parametrize("rule", RULES[:3], ids=IDS[:3])
def test_a_window_of_one_moves_nothing(rule):
    """Causal(window=1): each token sees only itself, so P = I and ż = z − z = 0 exactly."""
    z = tokens(2, 5, 3, seed=3)
    run = solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Causal(window=1), save=Save(attention=True))
    assert torch.equal(run.final, z)
    assert torch.equal(run.attention[0], torch.eye(5, dtype=z.dtype).expand(2, 5, 5))


def test_a_per_sequence_pair_mask_equals_each_sequence_alone():
    """Pairs((batch, n, n)): each sequence its own restriction, sliced with the chunks of the loop."""
    z = tokens(3, 5, 2, scale=0.8, seed=4)
    g = torch.Generator().manual_seed(5)
    allowed = torch.rand(3, 5, 5, generator=g) < 0.6
    for rule in RULES:
        whole = solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Pairs(allowed))
        for b in range(3):
            alone = solve(Field(rule), Euler.layers(0.5), z[b], steps=3, mask=Pairs(allowed[b]))
            torch.testing.assert_close(whole.tokens[:, b], alone.tokens, rtol=0, atol=1e-15)
            want = slow_run(rule, z[b], [True] * 5, allowed[b].tolist(), 3)
            torch.testing.assert_close(alone.tokens, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rules_take_allowed_on_their_differentiable_path_too(rule):
    """rule.targets with allowed (the autograd path: softmax by fused attention) equals the no-grad loop's."""
    z = tokens(2, 6, 3, scale=0.6, seed=6)
    allowed = Causal().pair_mask(z.shape)
    w = torch.ones(2, 6, dtype=z.dtype)
    P = rule.matrix(z, w, None, allowed)
    torch.testing.assert_close(rule.targets(z, w, None, allowed), P @ z, rtol=0, atol=1e-13)
    assert not bool(P.masked_select(~allowed.expand(2, 6, 6)).any())  # no weight where i may not attend j
    y = z.clone().requires_grad_(True)
    grad = solve(Field(rule), Euler.layers(0.5), y, steps=2, mask=Causal())
    plain = solve(Field(rule), Euler.layers(0.5), z, steps=2, mask=Causal())
    torch.testing.assert_close(grad.tokens.detach(), plain.tokens, rtol=0, atol=1e-13)


# --------------------------------------------------------------------------------------------
# hardmax: the tie rule (★) among the allowed keys, against exact rational arithmetic
# --------------------------------------------------------------------------------------------

# Tokens 1 = (0.1, 0.7) and 2 = (0.5, 0.5) have the same norm, so any query along (1, 2) ⊥ (z_1 − z_2) ties them
# exactly, and tokens 3 and 4 start on that line and move along it towards their mean (0.3, 0.6): an exact tie at
# every layer, which floating point does not see exactly (0.1 + 2·0.7 and 0.5 + 2·0.5 round differently).
# Token 5 = (1, 2) would beat both for every query on the line, but a causal mask hides it from tokens 3 and 4.
TIED = [("0.1", "0.7"), ("0.5", "0.5"), ("0.1", "0.2"), ("0.2", "0.4"), ("1", "2")]


def test_hardmax_causal_ties_match_exact_rational_arithmetic():
    exact = [[Fraction(x) for x in row] for row in TIED]
    n, layers = len(exact), 6
    z = torch.tensor([[float(x) for x in row] for row in exact], dtype=torch.float64)
    run = solve(Field(Hardmax()), Euler.layers(0.5), z, steps=layers, mask=Causal(), save=Save(attention=True))
    mask = causal(n)
    path = [exact]
    for _ in range(layers):
        path.append(slow_layer(Hardmax(), path[-1], [True] * n, mask, Fraction(1, 3)))
    for k in range(layers + 1):
        sets = [set(torch.nonzero(row).flatten().tolist()) for row in run.attention[k] > 0]
        assert sets == slow_sets(path[k], [True] * n, mask), f"layer {k}"
        want = torch.tensor([[float(x) for x in row] for row in path[k]], dtype=torch.float64)
        torch.testing.assert_close(run.tokens[k], want, rtol=0, atol=1e-15)
    assert slow_sets(path[layers], [True] * n, mask)[2] == {0, 1}  # still the exact tie at the last layer
    # without the mask token 5 takes tokens 3 and 4: the restriction is what made the tie
    free = solve_on("reference", Field(Hardmax()), Euler.layers(0.5), z, steps=1, save=Save(attention=True))
    assert bool(free.attention[0, 2, 4] == 1) and bool(free.attention[0, 3, 4] == 1)


def test_hardmax_ties_exclude_a_key_the_mask_forbids():
    """A pair mask that hides one of two exactly tied keys leaves the other alone; hiding the better key of
    a near pair leaves the worse as the maximiser."""
    z = torch.tensor([[float(x) for x in row] for row in TIED], dtype=torch.float64)
    allowed = torch.tensor(causal(5))
    allowed[2, 0] = False  # token 3 may not attend to token 1
    P = Hardmax().matrix(z.unsqueeze(0), torch.ones(1, 5, dtype=z.dtype), None, allowed.unsqueeze(0))[0]
    assert P[2].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert P[3].tolist() == [0.5, 0.5, 0.0, 0.0, 0.0]  # unchanged row: the tie (★) keeps


# --------------------------------------------------------------------------------------------
# token 1 under causal attention; a token with no allowed key
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", [Euler.layers(0.5), RK4(0.2)], ids=["layers", "rk4"])
@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_the_first_token_never_moves_under_causal_attention(rule, solver):
    """Token 1 sees only itself: P_11 = 1 (unnormalised: e^{β s_11}, a multiple of itself that the sphere's
    projection removes). In R^d exactly; on the sphere to the rounding of the retraction."""
    z = tokens(3, 5, 3, scale=0.5, seed=7)
    if not isinstance(rule, Unnormalised):  # in R^d the unnormalised field scales even a lone token
        run = solve(Field(rule), solver, z, steps=5, mask=Causal())
        assert torch.equal(run.tokens[:, :, 0], z[:, 0].expand(6, -1, -1))
        assert (run.final[:, 1:] - z[:, 1:]).abs().max() > 1e-3  # the others do move
    x = z / z.norm(dim=-1, keepdim=True)
    run = solve(Field(rule, manifold=Sphere()), solver, x, steps=5, mask=Causal())
    torch.testing.assert_close(run.tokens[:, :, 0], x[:, 0].expand(6, -1, -1), rtol=0, atol=1e-15)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_a_token_with_no_allowed_key_does_not_move_and_nothing_is_nan(rule):
    """Token 3 may attend to nobody (a row of False); token 5 only to padding: their rows of P are 0, they stay,
    nothing is NaN (values or gradients), and the others still attend to token 3."""
    z = tokens(1, 5, 3, scale=0.6, seed=8)
    allowed = torch.ones(5, 5, dtype=torch.bool)
    allowed[2] = False
    allowed[4] = False
    allowed[4, 3] = True  # token 5 may attend only to token 4, which is padding
    present = torch.tensor([[True, True, True, False, True]])
    mask = Pairs(allowed) & Tokens(present)
    for solver in (Euler.layers(0.5), RK4(0.2)):
        run = solve(Field(rule), solver, z, steps=4, mask=mask, save=Save(attention=True))
        assert bool(torch.isfinite(run.tokens).all()) and bool(torch.isfinite(run.attention).all())
        for i in (2, 3, 4):
            assert torch.equal(run.tokens[:, 0, i], z[0, i].expand(5, -1))
        assert not bool(run.attention[:, 0, [2, 3, 4]].any())
        assert bool((run.attention[0, 0, [0, 1], 2] > 0).any()) or isinstance(rule, Hardmax | Localmax)
    sphere = z / z.norm(dim=-1, keepdim=True)
    for solver in (Euler(0.2), Renormalised(0.2)):
        run = solve(Field(rule, manifold=Sphere()), solver, sphere, steps=3, mask=mask)
        torch.testing.assert_close(run.tokens[:, 0, 2], sphere[0, 2].expand(4, -1), rtol=0, atol=1e-15)
    # the rule itself, with gradients: rows 0, finite, and finite gradients
    y = z.clone().requires_grad_(True)
    w = present.to(z.dtype)
    P = rule.matrix(y, w, None, allowed.unsqueeze(0))
    T = rule.targets(y, w, None, allowed.unsqueeze(0))
    assert bool(torch.isfinite(P).all()) and bool(torch.isfinite(T).all())
    assert not bool(P[0, [2, 3, 4]].any())
    (P.sum() + T.sum()).backward()
    assert bool(torch.isfinite(y.grad).all())
    # the paper's layer, attention_step: the same tokens stay
    moved = attention_step(z, w, alpha=0.5, rule=rule, allowed=allowed.unsqueeze(0))
    assert torch.equal(moved[0, [2, 3, 4]], z[0, [2, 3, 4]])
    assert bool(torch.isfinite(attention_matrix(z, w, rule=rule, allowed=allowed.unsqueeze(0))).all())


def test_a_mask_that_allows_nothing_moves_nothing():
    z = tokens(2, 4, 3, seed=9)
    for rule in RULES:
        run = solve(Field(rule), Euler.layers(0.5), z, steps=3, mask=Pairs(torch.zeros(4, 4, dtype=torch.bool)))
        assert torch.equal(run.final, z)


# --------------------------------------------------------------------------------------------
# an all-True pair mask is no mask; a plain bool tensor is token presence
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_an_all_true_pair_mask_is_the_unmasked_solve_bit_for_bit(rule):
    z = tokens(3, 6, 3, scale=0.5, seed=10)
    present = torch.ones(3, 6, dtype=torch.bool)
    present[1, 4:] = False
    everyone = Pairs(torch.ones(6, 6, dtype=torch.bool))
    for solver in (Euler.layers(0.5), RK4(0.1)):
        for mask, pairs in ((None, everyone), (present, everyone & Tokens(present))):
            plain = solve_on("reference", Field(rule), solver, z, steps=4, mask=mask, save=Save(attention=True))
            paired = solve(Field(rule), solver, z, steps=4, mask=pairs, save=Save(attention=True))
            assert paired.engine == "reference"
            assert torch.equal(plain.tokens, paired.tokens) and torch.equal(plain.attention, paired.attention)
    for dtype in (torch.float32, torch.float64):
        w = present.to(dtype)
        y = z.to(dtype)
        every = torch.ones(1, 6, 6, dtype=torch.bool)
        assert torch.equal(rule.matrix(y, w, None), rule.matrix(y, w, None, every))
        assert torch.equal(rule.targets(y, w, None), rule.targets(y, w, None, every))


def test_a_plain_bool_tensor_still_means_token_presence():
    z = tokens(2, 4, 2, seed=11)
    present = torch.tensor([[True, True, False, True], [True, False, True, True]])
    plain = solve(Field(Hardmax()), Euler.layers(0.5), z, steps=3, mask=present)
    boxed = solve(Field(Hardmax()), Euler.layers(0.5), z, steps=3, mask=Tokens(present))
    assert torch.equal(plain.tokens, boxed.tokens) and plain.pairs is None and torch.equal(boxed.mask, present)
    assert torch.equal(simulate(z, alpha=0.5, layers=3, mask=Tokens(present)).tokens,
                       simulate(z, alpha=0.5, layers=3, mask=present).tokens)
    with pytest.raises(ValueError, match=r"mask must have shape \(4,\), got \(4, 4\); a mask of who attends to "
                                         r"whom is spelled Pairs\(allowed\)"):
        solve(Field(Hardmax()), Euler.layers(0.5), z[0], steps=1, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"Pairs\(allowed\)"):
        solve(Field(Hardmax()), Euler.layers(0.5), z, steps=1, mask=torch.ones(2, 4, 4, dtype=torch.bool))


# --------------------------------------------------------------------------------------------
# the fast engines route a pair mask to the loop or refuse it: never ignore it
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [Causal(), Causal(window=2), Pairs(torch.tril(torch.ones(5, 5, dtype=torch.bool))),
                                  Causal() & Tokens(torch.ones(5, dtype=torch.bool))],
                         ids=["causal", "window", "pairs", "intersection"])
def test_the_fast_engines_route_or_refuse_a_pair_mask(mask):
    z = tokens(1, 5, 3, seed=12)[0]
    field = Field(Hardmax())
    assert solve(field, Euler.layers(0.5), z, steps=4).engine == "compiled"
    run = solve(field, Euler.layers(0.5), z, steps=4, mask=mask)
    causal = isinstance(mask.pairs, Causal)  # the paper's hardmax under Causal: the causal kernel, the same bits
    assert run.engine == ("causal" if causal else "reference") and run.pairs is not None
    assert torch.equal(run.tokens, solve_on("reference", field, Euler.layers(0.5), z, steps=4, mask=mask).tokens)
    assert not torch.equal(run.tokens, solve(field, Euler.layers(0.5), z, steps=4).tokens)  # not ignored
    for engine in ("torch", "compiled"):  # the fast paths refuse it when forced, saying why
        with pytest.raises(ValueError, match=rf"^engine '{engine}' cannot run this case: a pair mask \(who attends "
                                             r"to whom\) runs on the reference loop"):
            solve_on(engine, field, Euler.layers(0.5), z, steps=4, mask=mask)
    # simulate is solve spelled the paper's way: a pair mask runs there too
    paper = simulate(z, alpha=0.5, layers=4, mask=mask)
    assert paper.engine == run.engine and torch.equal(paper.tokens, run.tokens)
    soft = simulate(z, Softmax(beta=1.0), alpha=0.5, layers=2, mask=mask)
    assert soft.engine == ("softmax" if causal else "reference") and soft.pairs is not None


def test_the_compiled_kernel_refuses_a_pair_mask():
    z = tokens(1, 4, 2, seed=13).numpy()
    out = np.empty((3, 1, 4, 2))
    with pytest.raises(ValueError, match="runs on the reference loop"):
        compiled.hardmax_trajectory(z, np.ones((1, 4, 4), bool), None, np.full(2, 1 / 3), 1e-12, out, 1)


def test_a_rule_without_allowed_runs_token_masks_and_refuses_pair_masks():
    class Mean:  # a rule of one's own, written before pair masks: P uniform over present keys
        def matrix(self, tokens, multiplicity, A):
            p = multiplicity.unsqueeze(-2).expand(*tokens.shape[:-1], tokens.shape[-2])
            return p / p.sum(-1, keepdim=True)

        def targets(self, tokens, multiplicity, A):
            return self.matrix(tokens, multiplicity, A) @ tokens

    z = tokens(1, 4, 2, seed=14)
    present = torch.tensor([[True, True, True, False]])
    assert bool(torch.isfinite(solve(Field(Mean()), Euler(0.1), z, steps=2, mask=present).tokens).all())
    with pytest.raises(ValueError, match=r"^Mean takes no pair mask: its matrix and targets need an allowed= "
                                         r"argument"):
        solve(Field(Mean()), Euler(0.1), z, steps=2, mask=Causal())


# --------------------------------------------------------------------------------------------
# the mask objects
# --------------------------------------------------------------------------------------------


def test_masks_say_how_they_restrict_a_row_of_scores():
    shape = (2, 5, 3)
    i, j = torch.arange(5).view(5, 1), torch.arange(5).view(1, 5)
    assert torch.equal(Causal().pair_mask(shape)[0], j <= i)
    assert torch.equal(Causal(window=2).pair_mask(shape)[0], (j <= i) & (i - j < 2))
    bias = Causal().bias(shape)
    assert bias.shape == (1, 5, 5) and torch.equal(bias[0], torch.where(j <= i, 0.0, -math.inf).double())
    assert Tokens(torch.ones(2, 5, dtype=torch.bool)).bias(shape) is None
    allowed = torch.rand(2, 5, 5) < 0.5
    present = torch.rand(2, 5) < 0.7
    both = Pairs(allowed) & Causal() & Tokens(present)
    assert isinstance(both, Intersection) and len(both.masks) == 3
    assert torch.equal(both.pair_mask(shape), allowed & (j <= i))
    assert torch.equal(both.token_mask(shape), present)
    assert isinstance(both.pairs, Intersection) and len(both.pairs.masks) == 2
    assert Tokens(present).pairs is None and Causal().pairs == Causal()


@pytest.mark.parametrize("make, message", [
    (lambda: Causal(window=0), r"Causal\(window=\.\.\.\) must be an integer ≥ 1 or None"),
    (lambda: Causal(window=2.5), r"Causal\(window=\.\.\.\) must be an integer"),
    (lambda: Pairs(torch.ones(3, 4, dtype=torch.bool)), r"Pairs\(allowed\) must have shape \(n, n\)"),
    (lambda: Pairs(torch.ones(3, 3)), r"Pairs\(allowed\) must be boolean"),
    (lambda: Tokens(np.ones(3, dtype=np.int64)), "mask must be boolean"),
], ids=["window 0", "window float", "pairs not square", "pairs of floats", "tokens of ints"])
def test_bad_masks_are_one_line(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_pair_mask_of_the_wrong_size_is_one_line():
    z = tokens(2, 4, 2, seed=15)
    with pytest.raises(ValueError, match=r"Pairs\(allowed\) must have shape \(4, 4\) or \(2, 4, 4\) for tokens of "
                                         r"shape \(2, 4, 2\), got \(3, 4, 4\)"):
        solve(Field(Softmax(beta=1.0)), Euler(0.1), z, steps=1, mask=Pairs(torch.ones(3, 4, 4, dtype=torch.bool)))
    with pytest.raises(ValueError, match=r"must have shape \(4, 4\) for tokens of shape \(4, 2\)"):
        solve(Field(Softmax(beta=1.0)), Euler(0.1), z[0], steps=1, mask=Pairs(torch.ones(1, 4, 4, dtype=torch.bool)))


def test_solution_records_the_pair_part_and_the_field_given():
    z = tokens(1, 4, 2, seed=16)[0]
    field = Field(Softmax(beta=1.0), Bilinear())
    run = solve(field, Euler(0.1), z, steps=2, mask=Causal(window=2) & Tokens(torch.tensor([1, 1, 1, 0]).bool()))
    assert run.pairs == Causal(window=2) and run.field is field and field.allowed is None
    assert run.mask.tolist() == [True, True, True, False]


def test_check_flow_does_not_read_full_attention_claims_into_a_causal_run():
    """Its claims (one cluster, the energy, the polytope) are theorems of full attention: "not tested" under a pair
    mask, with the reason; never passed on a causal run."""
    from hardmax.theory import check_flow

    z = tokens(1, 4, 2, seed=17)[0]
    run = solve(Field(Hardmax()), Euler.layers(0.5), z, steps=3, mask=Causal())
    claims = {c.name: c for c in check_flow(run).checks}
    for name in ("single_cluster", "energy", "polytope", "hull"):
        assert claims[name].status == "not tested" and "pair mask (Causal)" in claims[name].value
