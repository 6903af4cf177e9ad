"""Tests of `hardmax.dynamics.simulator`: what `simulate` stores, gradients through it, and inputs at the
edges (extreme scales, half precision, memory layouts), fuzzed against the reference loop.

The dynamics themselves (rules, ties, engines) are tested in test_dynamics, test_kernel and test_exactness.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import reference
import torch
from engines import save_of, simulate_on
from hypothesis import given
from hypothesis import strategies as st

from hardmax.dynamics import Hardmax, Save, Softmax, attention_step, simulate

SQUARE = np.array([[1.0, 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0.25]])


def loop(tokens: torch.Tensor, rule, *, alpha, layers: int, A=None, mask=None) -> torch.Tensor:
    """The reference loop of `attention_step` (every token, no deduplication), batched (B, n, d)."""
    w = torch.ones(tokens.shape[:-1], dtype=tokens.dtype) if mask is None else mask.to(tokens.dtype)
    z = tokens
    for k in range(layers):
        a = alpha[k] if isinstance(alpha, torch.Tensor) and alpha.dim() else alpha
        z = attention_step(z, w, alpha=a, rule=rule, A=A)
    return z


# --------------------------------------------------------------------------------------------
# store
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["torch", "compiled"])
@pytest.mark.parametrize("store, stored", [("all", tuple(range(8))), ("final", (0, 7)), (3, (0, 3, 6, 7)),
                                           (7, (0, 7)), (10, (0, 7))])
def test_store_keeps_the_asked_layers_of_the_full_trajectory(engine, store, stored):
    z = torch.from_numpy(np.random.default_rng(1).standard_normal((300, 9, 3)))
    full = simulate_on(engine, z, alpha=0.7, layers=7)
    part = simulate_on(engine, z, alpha=0.7, layers=7, save=save_of(store))
    assert part.steps == stored and part.tokens.shape == (len(stored), 300, 9, 3)
    assert torch.equal(part.tokens, full.tokens[list(stored)])
    assert torch.equal(part.final, full.final) and torch.equal(part.after(stored[1]), full.tokens[stored[1]])
    assert part.complete == (store == "all")


def test_store_in_blocks_when_only_some_layers_are_kept(monkeypatch):
    # A small block size forces several blocks; the stored layers must not depend on it.
    from hardmax.dynamics._engines import paper

    monkeypatch.setattr(paper, "_BLOCK_BYTES", 2_000)
    z = torch.from_numpy(np.random.default_rng(2).standard_normal((50, 6, 2)))
    want = simulate(z, alpha=0.5, layers=5).tokens[[0, 5]]
    assert torch.equal(simulate(z, alpha=0.5, layers=5, save=Save.final()).tokens, want)


def test_a_layer_that_is_not_stored_is_refused_by_name():
    run = simulate(SQUARE, alpha=0.5, layers=6, save=Save.final())
    with pytest.raises(ValueError, match=r"step 3 is not saved \(saved: 0, 6\)"):
        run.after(3)
    with pytest.raises(ValueError, match="every layer"):
        from hardmax.theory import check_theorem

        check_theorem(run)


# --------------------------------------------------------------------------------------------
# gradients
# --------------------------------------------------------------------------------------------


def test_softmax_gradients_are_those_of_the_reference_loop_and_of_finite_differences():
    """The issue's example: X (5, 2), softmax β = 2, 3 layers: gradients were silently zero."""
    X = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    (simulate(X, Softmax(2.0), alpha=0.5, layers=3).final ** 2).sum().backward()
    want = torch.autograd.grad((loop(X[None], Softmax(2.0), alpha=0.5, layers=3) ** 2).sum(), X)[0]
    assert X.grad.abs().max() > 1  # not silently zero
    torch.testing.assert_close(X.grad, want, rtol=1e-12, atol=1e-12)
    torch.autograd.gradcheck(lambda x: simulate(x, Softmax(2.0), alpha=0.5, layers=3).final, (X.detach().clone()
                             .requires_grad_(),))


def test_hardmax_gradients_in_tokens_alpha_and_A_match_finite_differences():
    """Where attention sets do not change under small perturbations (generic tokens), hardmax is
    piecewise linear in the tokens and smooth in α; central differences check both."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(2, 6, 3, dtype=torch.float64, generator=g)
    alpha = torch.tensor([0.5, 1.5, 0.8], dtype=torch.float64)
    A = torch.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 1.5]], dtype=torch.float64)
    torch.autograd.gradcheck(lambda x, a: simulate(x, alpha=a, layers=3, A=A).final,
                             (X.clone().requires_grad_(), alpha.clone().requires_grad_()))
    # A only chooses the attention sets (piecewise constant in A): hardmax has no gradient in A.
    A_leaf, X_leaf = A.clone().requires_grad_(), X.clone().requires_grad_()
    simulate(X_leaf, alpha=alpha, layers=3, A=A_leaf).final.sum().backward()
    assert A_leaf.grad is None and X_leaf.grad is not None


def test_hardmax_gradient_of_a_follower_is_the_closed_form():
    """One follower f of leader v: f_K = v + (f_0 − v)/(1+α)^K, so ∂f_K/∂f_0 = (1+α)^−K I and
    ∂f_K/∂α = −K (f_0 − v)(1+α)^−K−1."""
    z = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [1.0, 0.5]], dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    final = simulate(z, alpha=alpha, layers=4).final
    final[2, 0].backward()
    assert z.grad[2].tolist() == pytest.approx([1.5 ** -4, 0.0], abs=1e-15)
    assert z.grad[0].tolist() == pytest.approx([1 - 1.5 ** -4, 0.0], abs=1e-15)
    assert float(alpha.grad) == pytest.approx(-4 * (1.0 - 2.0) * 1.5 ** -5, abs=1e-14)


def test_the_compiled_engine_refuses_gradients_and_no_grad_mode_uses_it():
    X = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="does not compute gradients"):
        simulate_on("compiled", X, alpha=1.0, layers=2)
    with torch.no_grad():
        run = simulate_on("compiled", X, alpha=1.0, layers=2)
    assert not run.tokens.requires_grad


# --------------------------------------------------------------------------------------------
# extreme scales, dtypes, layouts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["torch", "compiled"])
@pytest.mark.parametrize("dtype, exponents", [(torch.float32, (-120, -60, 60, 100)),
                                              (torch.float64, (-1000, -540, 500, 1000))])
def test_hardmax_is_scale_free_at_extreme_scales(engine, dtype, exponents):
    """Scaling every token by 2^e scales the trajectory by 2^e exactly: no crash (norms ≥ 1e20 crashed
    the kernel), no frozen tokens, no wrong limits for tiny tokens."""
    z = torch.tensor(SQUARE, dtype=dtype)
    base = simulate_on(engine, z, alpha=0.5, layers=30).tokens
    for e in exponents:
        scaled = simulate_on(engine, torch.ldexp(z, torch.tensor(e)), alpha=0.5, layers=30).tokens
        assert torch.equal(torch.ldexp(scaled, torch.tensor(-e)), base), e


def test_reviews_of_very_different_scales_in_one_batch():
    z = torch.tensor(np.stack([SQUARE * 1e-30, SQUARE, SQUARE * 1e30]), dtype=torch.float32)
    final = simulate(z, alpha=0.5, layers=30).final
    unit = simulate(torch.tensor(SQUARE, dtype=torch.float32), alpha=0.5, layers=30).final
    for b, c in enumerate((1e-30, 1.0, 1e30)):
        torch.testing.assert_close(final[b] / c, unit, rtol=1e-6, atol=0)


@pytest.mark.parametrize("engine", ["torch", "compiled"])
@pytest.mark.parametrize("dtype, real, pad", [(torch.float32, -100, 33), (torch.float32, 100, -140),
                                              (torch.float64, -1000, 30), (torch.float64, 1000, -1000)])
def test_padding_of_another_scale_stays_as_given_in_a_scaled_review(engine, dtype, real, pad):
    """A review run scaled (its real tokens beyond 2^±20) keeps its padding exactly as given at every layer:
    the padding, scaled with the review, used to overflow to inf or vanish, and the compiled engine then
    returned uninitialised memory for the review's later layers (found in review)."""
    z = torch.ldexp(torch.tensor(SQUARE, dtype=dtype), torch.tensor(real))
    padding = torch.ldexp(torch.tensor([[0.75, -1.5], [3.0, 0.5]], dtype=dtype), torch.tensor(pad))
    tokens = torch.cat([z, padding])
    mask = torch.tensor([True] * len(SQUARE) + [False, False])
    got = simulate_on(engine, tokens, alpha=0.5, layers=12, mask=mask).tokens
    unit = simulate_on(engine, torch.tensor(SQUARE, dtype=dtype), alpha=0.5, layers=12).tokens
    assert torch.equal(got[:, len(SQUARE):], padding.expand(13, 2, 2))
    assert torch.equal(torch.ldexp(got[:, :len(SQUARE)], torch.tensor(-real)), unit)


def test_subnormal_tokens_beside_ordinary_padding():
    """Real tokens near float32's subnormals (two leaders: they never move) and padding of order 1."""
    z = np.ones((1, 3, 2), np.float32)
    z[0, :2] = [[1e-39, 2e-39], [2e-39, 1e-39]]
    mask = np.array([[True, True, False]])
    for engine in ("torch", "compiled"):
        got = simulate_on(engine, z, mask=mask, alpha=1.0, layers=2).tokens
        assert torch.equal(got, torch.from_numpy(z).expand(3, 1, 3, 2)), engine


@pytest.mark.parametrize("layout", ["fortran", "transposed view", "strided slice", "numpy fortran"])
def test_memory_layouts_give_the_same_trajectory(layout):
    z = np.random.default_rng(4).standard_normal((3, 7, 2))
    want = simulate(z, alpha=0.8, layers=5).tokens
    if layout == "fortran":
        x = torch.from_numpy(np.asfortranarray(z))
    elif layout == "transposed view":
        x = torch.from_numpy(z.transpose(0, 2, 1).copy()).transpose(1, 2)
    elif layout == "strided slice":
        x = torch.from_numpy(np.repeat(z, 2, axis=1))[:, ::2]
    else:
        x = np.asfortranarray(z)
    assert not (isinstance(x, torch.Tensor) and x.is_contiguous()) or layout == "numpy fortran"
    for engine in ("torch", "compiled"):
        assert torch.equal(simulate_on(engine, x, alpha=0.8, layers=5).tokens, want)


# --------------------------------------------------------------------------------------------
# fuzz: shapes, dtypes, scales, layouts, masks, against the reference loop
# --------------------------------------------------------------------------------------------


@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 3), st.sampled_from([torch.float32, torch.float64]),
       st.integers(-100, 100), st.booleans(), st.data())
def test_fuzz_engines_against_the_reference(batch, n, d, dtype, exponent, fortran, data):
    """Tokens on the grid k/4 (exact ties and duplicates are common) times 2^exponent (≈ 1e-30 … 1e30),
    random masks, C or Fortran order: both engines equal the float64 reference, scaled; float64
    gradients of the torch engine equal those of the reference loop."""
    grid = data.draw(st.lists(st.integers(-8, 8), min_size=batch * n * d, max_size=batch * n * d))
    z = np.array(grid, dtype=np.float64).reshape(batch, n, d) / 4
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=batch * n, max_size=batch * n))).reshape(batch, n)
    layers, alpha = 6, 0.5
    scale = 2.0 ** exponent
    x = torch.tensor(z * scale, dtype=dtype)
    if fortran:
        x = torch.from_numpy(np.asfortranarray(x.numpy()))
    rtol = Hardmax().rtol(dtype)
    for engine in ("torch", "compiled"):
        got = simulate_on(engine, x, alpha=alpha, layers=layers, mask=torch.from_numpy(mask)).tokens
        for b in range(batch):
            want, _ = reference.simulate(z[b], alpha=alpha, layers=layers, mask=mask[b], tie_rtol=rtol)
            np.testing.assert_allclose(got[:, b].double().numpy() / scale, want, rtol=0,
                                       atol=1e-12 if dtype == torch.float64 else 1e-5)
    if dtype == torch.float64 and abs(exponent) < 20:
        leaf = torch.tensor(z * scale, requires_grad=True)
        m = torch.from_numpy(mask)
        simulate(leaf, Softmax(1.0), alpha=alpha, layers=3, mask=m).final.sum().backward()
        other = torch.tensor(z * scale, requires_grad=True)
        loop(other, Softmax(1.0), alpha=alpha, layers=3, mask=m).sum().backward()
        torch.testing.assert_close(leaf.grad, other.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("engine", ["auto", "torch"])
@pytest.mark.parametrize("rule", [Hardmax(), Softmax(beta=2.0)])
def test_a_batch_of_no_sequences_is_an_empty_run(engine, rule):
    keep = isinstance(rule, Softmax)
    run = simulate_on(engine, torch.zeros(0, 3, 2), rule, alpha=1.0, layers=4, save=Save(attention=keep))
    assert run.tokens.shape == (5, 0, 3, 2) and run.mask.shape == (0, 3)
    assert run.attention is None if not keep else run.attention.shape == (5, 0, 3, 3)  # P at each saved state


@pytest.mark.parametrize("alpha", [True, np.bool_(True), [True, True], torch.tensor(True)])
def test_a_bool_alpha_is_refused_like_a_bool_layers(alpha):
    with pytest.raises(ValueError, match="alpha must be"):
        simulate(torch.randn(3, 2), alpha=alpha, layers=2)


def test_the_memory_estimate_counts_what_is_stored_without_building_it(monkeypatch):
    from hardmax.dynamics._engines.paper import simulation_bytes

    one = simulation_bytes(1, 6, 2, 10**9, 10**9 + 1, 8)
    assert one > 10**9 * 6 * 2 * 8  # every stored layer
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "256M")
    with pytest.raises(MemoryError, match=r"10,000,000 layers"):  # (more layers than MAX_STEPS: refused first)
        simulate(torch.randn(6, 2, dtype=torch.float64), alpha=0.5, layers=10**7)
    with pytest.raises(ValueError, match="save must be a hardmax.dynamics.Save"):  # named before any size
        simulate(torch.randn(6, 2), alpha=0.5, layers=10**7, save="some")
    assert simulate(torch.randn(6, 2), alpha=0.5, layers=10**5, save=Save.final()).tokens.shape == (2, 6, 2)


@pytest.mark.parametrize("rule, keep", [(Hardmax(), False), (Hardmax(tie_rtol=1e-9), False), (Softmax(beta=3.0), True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_trajectory_round_trips_through_json(rule, keep, dtype):
    import json

    from hardmax.dynamics import Solution

    z = torch.randn(2, 5, 3, dtype=dtype, generator=torch.Generator().manual_seed(0))
    run = simulate(z, rule, alpha=[0.5, 1.0, 2.0], layers=3, A=torch.diag(torch.tensor([1.0, 2, 3])),
                   mask=torch.tensor([[True] * 5, [True, True, False, True, True]]), save=save_of(2, attention=keep))
    back = Solution.from_dict(json.loads(json.dumps(run.to_dict())))
    assert back.rule == rule and back.steps == run.steps and back.tokens.dtype == dtype
    for name in ("tokens", "alpha", "A", "mask", "attention"):
        a, b = getattr(run, name), getattr(back, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    with pytest.raises(ValueError, match="not a solution record"):
        Solution.from_dict({"dtype": "float64"})
    with pytest.raises(ValueError, match="unknown attention rule"):
        Solution.from_dict({**run.to_dict(), "rule": {"rule": "maxmin"}})


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["Hardmax()", "Softmax(beta=1.0)"])
def test_the_torch_engine_estimate_covers_what_it_allocates(rule):
    """The estimate of the torch engine (every engine on CUDA) covers its peak memory with store='all': measured
    as the growth of a fresh process's peak resident memory (issue #23 review: 3-5x under before)."""
    import subprocess
    import sys

    from hardmax.dynamics._engines.paper import simulation_bytes

    code = f"""
import torch
from hardmax.dynamics import Hardmax, Softmax, simulate
from hardmax.dynamics._engines import using
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))
z = torch.randn(100, 64, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
with using("torch"):
    simulate(z[:2], {rule}, alpha=0.5, layers=3)  # warm-up: libraries and their buffers
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak resident memory (VmHWM) to the current one
before = status("VmRSS:")
with using("torch"):
    simulate(z, {rule}, alpha=0.5, layers=200)
print(status("VmHWM:") - before)
"""
    grown = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                               env={"OMP_NUM_THREADS": "1", "PATH": "",  # the package where the tests found it
                                    **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
                               ).stdout.split()[-1])
    assert grown > 50 * 2**20  # the run did allocate (a trajectory of 78.5 MiB)
    assert grown <= simulation_bytes(100, 64, 8, 200, 201, 8, torch_engine=True)
