"""Tests of `hardmax.dynamics._engines.ties`: the staged refinement of near-ties against every pair, and the engines
held to each other where the tokens cluster (issue #25).

`refine` decides a row's candidates against a champion first, certifies clusters converged to rounding from
their raw scores, and tries only what is left against every candidate. None of that may change a verdict:
the reference here is rule (★) on every pair of candidates, the way `refine` used to compute it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from engines import simulate_on
from hypothesis import given, settings
from hypothesis import strategies as st

from hardmax.dynamics import simulate
from hardmax.dynamics._engines.ties import (
    TIE_FRAME,
    Frames,
    _beats,
    _first,
    _Keys,
    _Split,
    coarse_tolerance,
    query_size,
    refine,
)


def every_pair(candidates, scores, queries, size, keys, frames, b, tie_rtol, rows=None, A=None):
    """(T, m) bool: rule (★) on every pair of candidates; the largest raw score when none is unbeaten."""
    T, m = candidates.shape
    c = int(candidates.sum(1).max())
    idx = _first(candidates, c)
    valid = candidates.gather(1, idx)
    cand = _Keys.gather(idx, keys, frames, b)
    split = None
    if frames is not None and rows is not None:
        framed = frames.label[b, rows] >= 0
        if bool(framed.any()):
            split = _Split(frames.origin[b, rows], frames.offset[b, rows], rows, framed, A)
    beats = _beats(cand, cand, queries, size, tie_rtol, split)  # (T, c, c) [t, l, j]
    keep_c = valid & ~(valid.unsqueeze(2) & beats).any(dim=1)
    none = ~keep_c.any(dim=1)
    top = torch.where(valid, scores.gather(1, idx), -math.inf).argmax(dim=1)
    keep_c[none, top[none]] = True
    return torch.zeros_like(candidates).scatter_(1, idx, keep_c)


def clustered(rng: np.random.Generator, m: int, d: int, spread: float, dtype) -> np.ndarray:
    """m keys in a few clusters whose members differ by `spread` relative: scores within rounding of each other."""
    centres = rng.standard_normal((3, d))
    which = rng.integers(0, 3, m)
    return (centres[which] * (1 + spread * rng.standard_normal((m, 1)))
            + spread * rng.standard_normal((m, d))).astype(dtype)


def near_ties(seed: int, d: int, dtype, framed: bool, with_A: bool, spread: float):
    """A batch of rows with many coarse candidates, with or without frames, as `sets_from_scores` sees them."""
    rng = np.random.default_rng(seed)
    batch, m = 2, 40
    keys = torch.from_numpy(np.stack([clustered(rng, m, d, spread, dtype) for _ in range(batch)]))
    A = None
    if with_A:
        M = rng.standard_normal((d, d))
        A = torch.from_numpy(M @ M.T / d + np.eye(d)).to(keys.dtype)
    frames = None
    if framed:
        # Some keys in a leader's frame (origin the leader, a small offset), some leaders (offset 0), some in a
        # tie frame of their own, the rest absolute.
        label = torch.from_numpy(rng.integers(-1, 4, (batch, m)))
        own_tie = torch.from_numpy(rng.uniform(size=(batch, m)) < 0.1)
        label = torch.where(own_tie, TIE_FRAME + torch.arange(m), label)
        leader = torch.from_numpy(rng.uniform(size=(batch, m)) < 0.15) & (label >= 0) & ~own_tie
        origin = torch.where((label >= 0).unsqueeze(-1), keys[:, :1].expand(-1, m, -1), torch.zeros_like(keys))
        offset = torch.where((label >= 0).unsqueeze(-1), keys - origin, keys)
        offset = torch.where(leader.unsqueeze(-1), torch.zeros_like(offset), offset)
        frames = Frames(origin, offset, label)
        keys = frames.positions()
    present = torch.ones(batch, m, dtype=torch.bool)
    queries = keys if A is None else keys @ A
    s = torch.bmm(queries, keys.transpose(-1, -2))
    rtol = 64 * torch.finfo(keys.dtype).eps
    size = query_size(keys, present, A)
    tol = coarse_tolerance(size, keys, present, rtol)
    candidates = s >= (s.amax(-1) - tol).unsqueeze(-1)
    several = candidates.sum(-1) >= 2
    b, i = several.nonzero(as_tuple=True)
    return (candidates[b, i], s[b, i], queries[b, i], size[b, 0], keys, frames, b, rtol, i, A)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), d=st.sampled_from([2, 3, 16]), double=st.booleans(), framed=st.booleans(),
       with_A=st.booleans(), spread=st.sampled_from([0.0, 1e-17, 1e-15, 4e-15, 1e-14, 3e-14, 1e-13, 1e-9]))
def test_refine_decides_every_row_as_every_pair_does(seed, d, double, framed, with_A, spread):
    """Champion, certificate and the rows left: the same sets as (★) on every pair, with and without frames, for
    clusters converged to rounding (spread 0 .. 1e-17), near it (1e-15, 1e-13) and apart (1e-9)."""
    dtype = np.float64 if double else np.float32
    args = near_ties(seed, d, dtype, framed, with_A, spread * (1 if double else 1e8))
    if len(args[0]) == 0:
        return
    candidates, scores, queries, size, keys, frames, b, rtol, rows, A = args
    got = refine(candidates, scores, queries, size, keys, frames, b, rtol, rows=rows, A=A)
    want = every_pair(candidates, scores, queries, size, keys, frames, b, rtol, rows=rows, A=A)
    assert torch.equal(got, want)


def test_refine_tries_every_pair_when_the_tolerance_is_too_small_to_certify():
    """Below (2d + 4) eps the certificate never applies; the sets are still those of every pair."""
    candidates, scores, queries, size, keys, frames, b, _, rows, A = near_ties(3, 2, np.float64, False, False, 1e-16)
    for rtol in (0.0, 4 * np.finfo(np.float64).eps):
        got = refine(candidates, scores, queries, size, keys, frames, b, rtol, rows=rows, A=A)
        assert torch.equal(got, every_pair(candidates, scores, queries, size, keys, frames, b, rtol, rows=rows, A=A))


@pytest.mark.parametrize("d, with_A, dtype", [(2, False, torch.float64), (3, True, torch.float64),
                                              (2, True, torch.float32), (16, False, torch.float64)])
def test_engines_agree_over_hundreds_of_layers_of_clustering(d, with_A, dtype):
    """The kernel (rows at one position decided once, champions) and the torch engine (staged refinement) run a
    configuration into clusters and far past the layers where followers round onto their leaders."""
    rng = np.random.default_rng(d)
    z = torch.from_numpy(rng.standard_normal((2, 70, d))).to(dtype)
    A = None
    if with_A:
        M = rng.standard_normal((d, d))
        A = torch.from_numpy(M @ M.T / d + np.eye(d)).to(dtype)
    kwargs = dict(alpha=0.5, layers=300, A=A)
    fast = simulate_on("compiled", z, **kwargs).tokens
    slow = simulate_on("torch", z, **kwargs).tokens
    scale = float(z.abs().max())
    assert torch.allclose(fast, slow, rtol=0, atol=(1e-12 if dtype == torch.float64 else 1e-5) * scale)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), d=st.sampled_from([2, 3, 16]), double=st.booleans(), with_A=st.booleans(),
       spread=st.sampled_from([0.0, 1e-16, 1e-15, 4e-15, 1e-14, 3e-14, 1e-13]))
def test_the_certificate_never_keeps_a_candidate_that_some_pair_beats(seed, d, double, with_A, spread):
    """`_surely_unbeaten` on its own (in `refine` the champion usually decides first): every key it certifies
    is unbeaten by every candidate under (★), and on a cluster converged to rounding it certifies keys."""
    from hardmax.dynamics._engines.ties import _surely_unbeaten

    dtype = np.float64 if double else np.float32
    args = near_ties(seed, d, dtype, False, with_A, spread * (1 if double else 1e8))
    candidates, scores, queries, size, keys, frames, b, rtol, rows, A = args
    if len(candidates) == 0:
        return
    idx = _first(candidates, int(candidates.sum(1).max()))
    valid = candidates.gather(1, idx)
    cand = _Keys.gather(idx, keys, None, b)
    raw = torch.where(valid, scores.gather(1, idx), -math.inf)
    sure = _surely_unbeaten(raw, cand.pos, valid, size, rtol)
    beaten = (valid.unsqueeze(2) & _beats(cand, cand, queries, size, rtol, None)).any(dim=1)
    assert not (sure & beaten).any()
    if spread == 0.0:
        assert sure.any()


@pytest.mark.parametrize("seed", [0, 4, 5, 8])
def test_a_leader_unseated_within_a_wide_tolerance_reruns_the_layer_with_every_row(seed):
    """With tie_rtol = 0.05 a follower comes within the tolerance of its leader's own score: the kernel sees it
    only after the layer's rows (their scores give the leaders' reach), computes that layer again with every
    row, and from there on every row at every layer; the result is the torch engine's."""
    from hardmax.dynamics import Hardmax
    from hardmax.dynamics._engines import kernel

    z = np.random.default_rng(seed).standard_normal((1, 12, 2))
    out = np.empty((41, 1, 12, 2))
    assert kernel.hardmax_trajectory(z, np.ones((1, 12), bool), None, np.full(40, 1 / 3), 0.05, out, 1).broke[0]
    kwargs = dict(alpha=0.5, layers=40, rule=Hardmax(0.05))
    fast = simulate_on("compiled", torch.from_numpy(z), **kwargs).tokens
    slow = simulate_on("torch", torch.from_numpy(z), **kwargs).tokens
    assert torch.allclose(fast, slow, rtol=0, atol=1e-14)


@pytest.mark.parametrize("seed", range(12))
def test_refine_is_every_pair_whatever_a_sound_certificate_certifies(seed, monkeypatch):
    """The stages must not depend on which unbeaten keys the certificate happens to certify: here it certifies a
    random subset of the keys every pair keeps (sound by construction), the champion included or not."""
    import hardmax.dynamics._engines.ties as ties

    args = near_ties(seed, 2 + seed % 2, np.float64, False, seed % 3 == 0, [0.0, 1e-15, 4e-15, 1e-14][seed % 4])
    candidates, scores, queries, size, keys, frames, b, rtol, rows, A = args
    want = every_pair(*args[:8], rows=rows, A=A)
    compact = want.gather(1, _first(candidates, int(candidates.sum(1).max())))
    chosen = torch.from_numpy(np.random.default_rng(seed).uniform(size=tuple(compact.shape)) < 0.5)
    monkeypatch.setattr(ties, "_surely_unbeaten", lambda raw, pos, valid, size, tie_rtol: valid & compact & chosen)
    assert torch.equal(refine(candidates, scores, queries, size, keys, frames, b, rtol, rows=rows, A=A), want)


def test_a_lone_candidate_left_that_is_not_the_champion_is_still_tried_against_every_pair(monkeypatch):
    """(★)'s bound grows with the keys' sizes, so a small key l can beat j where the champion h (the largest raw
    score, a large key) cannot. With h and l certified, j is the only key left, and only l beats it."""
    import hardmax.dynamics._engines.ties as ties

    keys = torch.tensor([[[0.0, 1e-3], [1e-13, 1e-3], [1e-9, 1e3]]], dtype=torch.float64)  # j, l, h
    queries = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    scores = (keys[0] @ queries[0]).unsqueeze(0)
    candidates = torch.ones(1, 3, dtype=torch.bool)
    size, b, rtol = torch.tensor([1e3], dtype=torch.float64), torch.zeros(1, dtype=torch.long), 64 * 2.0**-52
    want = every_pair(candidates, scores, queries, size, keys, None, b, rtol)
    assert want.tolist() == [[False, True, True]]  # l beats j; nobody beats l or h
    monkeypatch.setattr(ties, "_surely_unbeaten", lambda raw, pos, valid, size, tie_rtol: valid & want)
    assert torch.equal(refine(candidates, scores, queries, size, keys, None, b, rtol), want)


@pytest.mark.parametrize("d, with_A, dtype", [(2, False, torch.float64), (3, True, torch.float64),
                                              (2, False, torch.float32), (16, True, torch.float64)])
def test_compiled_snapshots_are_the_torch_tie_rules(d, with_A, dtype):
    """`check_theorem`'s snapshots (leaders and attention targets of every layer, positions only) from the
    compiled kernel equal those of the torch tie rule, on trajectories that cluster, with masks and exact ties
    (Figure 2's dyadic configurations)."""
    import hardmax.theory.leaders as leaders
    from hardmax.theory.figure2 import figure2_configurations

    rng = np.random.default_rng(d)
    z = rng.standard_normal((3, 40, d))
    z[0, 20:] = z[0, :20] * 0.5  # scaled copies: ties of directions
    A = None
    if with_A:
        M = rng.standard_normal((d, d))
        A = torch.from_numpy(M @ M.T / d + np.eye(d)).to(dtype)
    mask = torch.from_numpy(rng.uniform(size=(3, 40)) < 0.9)
    paths = [simulate(torch.from_numpy(z).to(dtype), alpha=0.5, layers=120, A=A, mask=mask).tokens]
    if d == 2:
        paths += [simulate(torch.from_numpy(c).to(dtype)[None], alpha=0.5, layers=60).tokens
                  for c in figure2_configurations().values()]
    for path in paths:
        flat = path.reshape(-1, *path.shape[-2:])
        real = (mask.repeat(path.shape[0], 1) if flat.shape[1] == 40 else
                torch.ones(flat.shape[:2], dtype=torch.bool))
        same = torch.full(flat.shape[:1], 1e-7 if dtype == torch.float64 else 4e-3, dtype=dtype)
        A_used = A if (A is not None and flat.shape[1] == 40) else None
        rtol = 64 * torch.finfo(dtype).eps
        fast = leaders._snapshot(flat, real, A_used, rtol, same)
        slow = leaders._snapshot_torch(flat, real, A_used, rtol, same)
        assert torch.equal(fast[0], slow[0])
        scale = float(flat.abs().max())
        assert torch.allclose(fast[1], slow[1], rtol=0, atol=(1e-12 if dtype == torch.float64 else 1e-5) * scale)


def test_a_certified_key_that_beats_the_champion_is_not_ignored():
    """Review of issue #25: with an ill-conditioned A, rounding in the champion's choice can pick a key that a
    certified key beats; the champion must still be tried against it (every pair keeps {1, 2, 3} in row 2)."""
    from hardmax.dynamics import Hardmax, attention_matrix

    z = torch.tensor([[[2.0000000000013407, 0, 0], [2.000000000001816, 0, 0], [1.0, 1e4, 1e4],
                       [2.0031486602982667, 2e8, -200000062.97320592]]], dtype=torch.float64)
    A = torch.diag(torch.tensor([1.0, 5e-9, 5e-9], dtype=torch.float64))
    sets = attention_matrix(z, rule=Hardmax(), A=A) > 0
    assert sets[0, 2].tolist() == [False, True, True, True]


@pytest.mark.parametrize("seed", range(40))
def test_refine_is_every_pair_with_ill_conditioned_A_and_near_underflow(seed):
    """The certificate's rounding bound holds for any SPD A and stops short of underflow (tokens near 2^-537 in
    float64, 2^-75 in float32: the bound's products would otherwise round to 0 while a subnormal gap beats it)."""
    rng = np.random.default_rng(seed)
    d = [2, 3][seed % 2]
    double = seed % 4 < 2
    dtype = torch.float64 if double else torch.float32
    base = rng.standard_normal((2, 30, d))
    base[:, 15:] = base[:, :15] * (1 + 1e-12 * rng.standard_normal((2, 15, 1)))  # near-copies: near-ties
    scale = 2.0 ** (-int(rng.integers(530, 545)) if double else -int(rng.integers(70, 80))) if seed % 3 == 0 else 1.0
    keys = (torch.from_numpy(base) * scale).to(dtype)
    A = torch.diag(torch.from_numpy(10.0 ** rng.uniform(-9, 0, d))).to(dtype) if seed % 3 != 0 else None
    present = torch.ones(2, 30, dtype=torch.bool)
    queries = keys if A is None else keys @ A
    s = torch.bmm(queries, keys.transpose(-1, -2))
    rtol = 64 * torch.finfo(dtype).eps
    size = query_size(keys, present, A)
    candidates = s >= (s.amax(-1) - coarse_tolerance(size, keys, present, rtol)).unsqueeze(-1)
    b, i = (candidates.sum(-1) >= 2).nonzero(as_tuple=True)
    if len(b) == 0:
        return
    args = (candidates[b, i], s[b, i], queries[b, i], size[b, 0], keys, None, b, rtol)
    assert torch.equal(refine(*args, rows=i, A=A), every_pair(*args, rows=i, A=A))
