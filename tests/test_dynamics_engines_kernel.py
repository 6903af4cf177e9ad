"""Tests of `hardmax.dynamics._engines.kernel`, the compiled CPU engine behind `simulate_on("compiled", )`.

The kernel must give the torch engine's trajectory (the reference for autograd, CUDA and softmax),
which test_dynamics.py checks against the slow oracles: here, IMDb-shaped batches in both dtypes, its
own deduplication (hash collisions, signed zeros, padding copies of real tokens), the leader check
that hands a review over to full layers, threads, and the `backend` argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference
import torch
from engines import simulate_on

from hardmax.dynamics import Hardmax, Save, Softmax, default_tie_rtol, simulate
from hardmax.dynamics._engines import kernel


def imdb_like(rng: np.random.Generator, batch: int, n: int, d: int, dtype=np.float64):
    """(batch, n, d) embeddings of Zipf-distributed word ids with end padding, and the (batch, n) mask."""
    vocab = rng.standard_normal((200, d)).astype(dtype)
    p = 1.0 / np.arange(1, 201)
    ids = rng.choice(200, size=(batch, n), p=p / p.sum())
    lengths = rng.integers(1, n + 1, size=batch)
    mask = np.arange(n) < lengths[:, None]
    ids = np.where(mask, ids, 0)  # padding: the embedding of id 0, like the classifier's PAD row
    return np.ascontiguousarray(vocab[ids]), mask


def spd(rng: np.random.Generator, d: int, dtype=np.float64) -> np.ndarray:
    M = rng.standard_normal((d, d))
    A = np.eye(d) + 0.3 * M @ M.T / d
    return ((A + A.T) / 2).astype(dtype)


def both(z, mask, **kwargs):
    """(kernel, torch engine) trajectories of the same call."""
    z, mask = torch.from_numpy(z), torch.from_numpy(mask)
    return (simulate_on("compiled", z, mask=mask, **kwargs).tokens,
            simulate_on("torch", z, mask=mask, **kwargs).tokens)


@pytest.mark.parametrize("dtype, atol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("with_A", [False, True], ids=["A=I", "A SPD"])
@pytest.mark.parametrize("seed", range(3))
def test_kernel_equals_torch_engine_on_imdb_shaped_batches(seed, with_A, dtype, atol):
    rng = np.random.default_rng(seed)
    z, mask = imdb_like(rng, batch=40, n=48, d=16 if seed else 2, dtype=dtype)
    A = spd(rng, z.shape[-1], dtype) if with_A else None
    alpha = rng.uniform(0.2, 3.0, size=8).tolist()
    fast, engine = both(z, mask, alpha=alpha, layers=8, A=A)
    assert fast.dtype == engine.dtype == torch.from_numpy(z).dtype
    torch.testing.assert_close(fast, engine, rtol=0, atol=atol)


def test_kernel_matches_the_per_token_oracle():
    rng = np.random.default_rng(7)
    z, mask = imdb_like(rng, batch=6, n=20, d=3)
    A = spd(rng, 3)
    got = simulate_on("compiled", z, alpha=[0.5, 1.5, 0.9, 2.0, 0.7], layers=5, A=A, mask=mask).tokens
    for b in range(6):
        want, _ = reference.simulate(z[b], alpha=[0.5, 1.5, 0.9, 2.0, 0.7], layers=5, A=A, mask=mask[b])
        np.testing.assert_allclose(got[:, b].numpy(), want, rtol=0, atol=1e-12)


def test_hash_collisions_never_merge_distinct_tokens(monkeypatch):
    """With every multiplier 0 all rows hash alike: the value check alone must keep them apart."""
    rng = np.random.default_rng(3)
    z, mask = imdb_like(rng, batch=12, n=30, d=4)
    honest = simulate_on("compiled", z, alpha=1.0, layers=4, mask=mask).tokens
    monkeypatch.setattr(kernel, "hash_multipliers", lambda d: np.zeros(d, dtype=np.uint64))
    colliding = simulate_on("compiled", z, alpha=1.0, layers=4, mask=mask).tokens
    assert torch.equal(colliding, honest)
    torch.testing.assert_close(colliding, simulate_on("torch", z, alpha=1.0, layers=4, mask=mask).tokens,
                               rtol=0, atol=1e-12)


def test_signed_zeros_are_one_token():
    """(-0.0, 1) and (0.0, 1) are the same point: merged, they tie exactly with each other."""
    z = np.array([[0.0, 1.0], [-0.0, 1.0], [0.5, 0.5], [0.9, -0.2]])
    plus = np.array([[0.0, 1.0], [0.0, 1.0], [0.5, 0.5], [0.9, -0.2]])
    # Merged or not, the two copies score alike; so check the merge itself, not only the run.
    slot, distinct, weights = np.empty(4, np.int64), np.empty((4, 2)), np.empty(4)
    m = kernel.deduplicate_review(z, z.view(np.uint64), np.ones(4, bool), kernel.hash_multipliers(2), slot, distinct,
                                  weights)
    assert m == 3 and slot.tolist() == [0, 0, 1, 2] and weights[:3].tolist() == [2, 1, 1]
    got = simulate_on("compiled", z, alpha=1.0, layers=3).tokens
    assert torch.equal(got[1:], simulate_on("compiled", plus, alpha=1.0, layers=3).tokens[1:])
    want, _ = reference.simulate(plus, alpha=1.0, layers=3)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-15)


def test_padding_copies_of_real_tokens_neither_count_nor_move():
    z = np.array([[1.0, 0.0], [1.0, 0.0], [0.2, 0.9], [0.3, 0.3]])
    mask = np.array([True, False, True, True])
    got = simulate_on("compiled", z, alpha=2.0, layers=4, mask=mask).tokens
    assert torch.equal(got[:, 1], torch.from_numpy(z[1]).expand(5, 2))  # masked: never moves
    want, _ = reference.simulate(z, alpha=2.0, layers=4, mask=mask)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_followers_never_unseat_their_leaders_at_any_tolerance(dtype):
    """Rule (★) decides a follower against its leader from their difference (an offset in the
    leader's frame), so even a coarse tolerance never makes it tie with its leader: no review is
    handed over to full layers, and the trajectory is the torch engine's."""
    rng = np.random.default_rng(1)
    z = rng.standard_normal((1, 12, 2)).astype(dtype)
    layers, rtol = 12, 0.05
    gammas = np.full(layers, 0.5, dtype)
    out = np.empty((layers + 1, *z.shape), dtype)
    assert kernel.hardmax_trajectory(z, np.ones((1, 12), bool), None, gammas, rtol, out, 1).broke.tolist() == [0]
    torch_engine = simulate_on("torch", torch.from_numpy(z), Hardmax(rtol), alpha=1.0, layers=layers)
    np.testing.assert_allclose(out, torch_engine.tokens.numpy(), rtol=0, atol=1e-12 if dtype == np.float64 else 1e-5)
    default = default_tie_rtol(torch.from_numpy(z).dtype)
    assert kernel.hardmax_trajectory(z, np.ones((1, 12), bool), None, gammas, default, out, 1).broke.tolist() == [0]


def test_threads_do_not_change_the_result():
    rng = np.random.default_rng(5)
    z, mask = imdb_like(rng, batch=64, n=40, d=8, dtype=np.float32)
    gammas = np.full(6, 0.4, np.float32)
    runs = []
    for threads in (1, 2):
        out = np.empty((7, *z.shape), np.float32)
        kernel.hardmax_trajectory(z, mask, None, gammas, 1e-5, out, threads)
        runs.append(out)
    assert np.array_equal(runs[0], runs[1])


@pytest.mark.parametrize("stored", [(0, 6), (6,), (0, 2, 4, 6), (3,)])
def test_only_the_stored_layers_are_written_and_they_are_the_full_trajectorys(stored):
    """`stored` writes out[s] = layer stored[s] and nothing else (out starts as NaN everywhere)."""
    rng = np.random.default_rng(8)
    z, mask = imdb_like(rng, batch=40, n=30, d=4, dtype=np.float32)
    A = spd(rng, 4, np.float32)
    gammas = np.full(6, 0.5, np.float32)
    full = np.empty((7, *z.shape), np.float32)
    kernel.hardmax_trajectory(z, mask, A, gammas, 1e-5, full, 2)
    part = np.full((len(stored), *z.shape), np.nan, np.float32)
    kernel.hardmax_trajectory(z, mask, A, gammas, 1e-5, part, 2, stored=stored)
    assert np.array_equal(part, full[list(stored)])
    with pytest.raises(ValueError, match="out must have shape"):
        kernel.hardmax_trajectory(z, mask, A, gammas, 1e-5, full, 2, stored=stored)


@pytest.mark.parametrize("stored", [(3, 3), (-1,), (2, 1), (0, 7)])
def test_stored_layers_must_increase_within_the_depth(stored):
    z, mask = imdb_like(np.random.default_rng(8), batch=2, n=5, d=2)
    out = np.empty((len(stored), *z.shape))
    with pytest.raises(ValueError, match="stored must be strictly increasing layers in 0..6"):
        kernel.hardmax_trajectory(z, mask, None, np.full(6, 0.5), 1e-9, out, 1, stored=stored)


def test_peak_is_the_largest_real_coordinate_and_nan_marks_non_finite_reviews():
    rng = np.random.default_rng(9)
    z, mask = imdb_like(rng, batch=5, n=12, d=3)
    mask[:, -1] = False  # every review has padding
    z[1, ~mask[1]] = 1e9  # padding does not count towards the peak...
    z[2, -1, 0] = np.nan  # ...but a NaN or inf anywhere, padding included, marks the review
    z[3, 0, 2] = -np.inf
    out = np.empty((3, *z.shape))
    run = kernel.hardmax_trajectory(z, mask, None, np.full(2, 0.5), 1e-9, out, 1)
    want = np.where(mask[..., None], np.abs(z), 0).max(axis=(1, 2))
    assert np.array_equal(run.peak[[0, 1, 4]], want[[0, 1, 4]])
    assert np.isnan(run.peak[[2, 3]]).all()
    with pytest.raises(ValueError, match="tokens contain NaN or inf"):  # simulate refuses them
        simulate_on("compiled", z, mask=mask, alpha=1.0, layers=2)
    z[2, -1, 0] = 0.0
    z[3, 0, 2] = 0.0
    with pytest.raises(ValueError, match="tokens contain NaN or inf"):  # in padding only, too
        simulate_on("compiled", np.where(mask[..., None], z, np.inf), mask=mask, alpha=1.0, layers=2)


def test_a_review_whose_scores_overflow_never_stops_the_reviews_after_it():
    """One worker (threads = 1) runs the reviews in order. A review at 2^64 (its float32 scores overflow)
    used to raise a division by zero inside the parallel loop, which silently ended that worker's
    remaining reviews; `simulate` skips it in the kernel and runs it scaled."""
    z = np.zeros((3, 4, 2), np.float32)
    z[0, 0, 1] = 2.0 ** 64
    z[1, :2] = [[1.0, 0.5], [0.25, 1.0]]
    z[2, 3, 1] = 2.0 ** 63
    mask = np.zeros((3, 4), bool)
    mask[:, 0] = True
    mask[1, 1] = True
    out = np.full((4, *z.shape), -7.0, np.float32)
    kernel.hardmax_trajectory(z, mask, None, np.full(3, 0.5, np.float32), 1e-5, out, 1)  # every review computed
    assert (out[:, 1:] != -7.0).all()
    out[:] = -7.0
    run = kernel.hardmax_trajectory(z, mask, None, np.full(3, 0.5, np.float32), 1e-5, out, 1, safe_exponent=20)
    assert (out[1:, 0] == -7.0).all() and (out[:, 1:] != -7.0).all() and run.peak[0] == 2.0 ** 64  # layer 0 only
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        got, want = both(z, mask, alpha=1.0, layers=3)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(got, want)


def test_zero_layers_and_fully_masked_reviews():
    rng = np.random.default_rng(2)
    z, mask = imdb_like(rng, batch=3, n=6, d=2)
    mask[1] = False
    assert torch.equal(simulate_on("compiled", z, alpha=1.0, layers=0, mask=mask).tokens[0],
                       torch.from_numpy(z))
    traj = simulate_on("compiled", z, alpha=1.0, layers=3, mask=mask).tokens
    assert torch.equal(traj[:, 1], torch.from_numpy(z[1]).expand(4, 6, 2))


@pytest.mark.parametrize("kwargs, message", [
    ({"rule": Softmax(1.0)}, "hardmax attention only"),
    ({"save": Save(attention=True)}, "attention matrices"),
    ({"grad": True}, "gradients"),
])
def test_compiled_engine_refuses_what_it_cannot_run(kwargs, message):
    z = torch.randn(5, 2, dtype=torch.float64, requires_grad=kwargs.pop("grad", False))
    with pytest.raises(ValueError, match=message):
        simulate_on("compiled", z, alpha=1.0, layers=2, **kwargs)


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="engine must be one of"):
        simulate_on("cuda", np.ones((3, 2)), alpha=1.0, layers=1)


def test_auto_falls_back_to_the_torch_engine_where_the_kernel_does_not_apply():
    z = np.random.default_rng(0).standard_normal((6, 2))
    with_weights = simulate(z, alpha=1.0, layers=3, save=Save(attention=True))  # torch engine
    assert with_weights.attention is not None
    torch.testing.assert_close(with_weights.tokens, simulate(z, alpha=1.0, layers=3).tokens, rtol=0, atol=1e-15)


@pytest.mark.slow
def test_threads_may_call_the_parallel_kernels_at_once():
    """numba's work-queue layer aborts the whole process when two threads launch parallel kernels at once
    ("Concurrent access has been detected"): the explorer's server computes two requests at a time. Every
    parallel kernel runs under `hardmax._numba.parallel` (one lock); here four threads simulate and check runs
    concurrently, in a child process (an abort would kill the test runner), and get what one thread gets."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        from concurrent.futures import ThreadPoolExecutor
        import torch, hardmax
        from hardmax.plots.scene import make_scene

        def work(seed):
            z = torch.randn(120, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
            run = hardmax.simulate(z, alpha=0.05, layers=150)
            make_scene(run, 2)
            return hardmax.check_theorem(run).passed, hardmax.leader_layers(run).tolist(), run.final.tolist()

        alone = [work(seed) for seed in range(6)]
        with ThreadPoolExecutor(4) as pool:
            for _ in range(2):
                assert list(pool.map(work, range(6))) == alone
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
