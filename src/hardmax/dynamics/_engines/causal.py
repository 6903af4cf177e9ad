"""The paper's hardmax layers under causal (decoder) attention, compiled: exact ties, every row every layer.

    C_i = argmax_{j ∈ K_i} ⟨A z_i, z_j⟩ (every tie kept),  K_i = {j ≤ i present, i − j < window},
    z_i ← z_i + γ_k (mean_{j ∈ C_i} z_j − z_i)

The rule is the reference loop's to the letter (`select.hardmax_sets` with the causal pair mask): W = max_j ‖ |A|
|z_j| ‖ and the coarse tolerance over every present token, the candidates within it of the row's best visible
score, and rule (★) on positions (no frames), by the bidirectional kernel's own `_decide` (its stages, with every
key in the absolute frame and the certificate of `ties._surely_unbeaten`). What the fast path of full attention
does is not done here, because causality breaks it: identical tokens at different places see different keys (no
merging), and a leader's row is not the transpose of its followers' (no skipping of leaders' rows). What makes it
fast is the compiled row: scores of the visible keys only (the triangle, half the square), summed in order over d,
decided and stepped in cache, and the rows of one review spread over the cores (one review) or the reviews (a
batch). Positions match the reference loop bit for bit (ties of two tokens included; the means of three or more
tied tokens are summed in index order, the loop's matrix product may sum them otherwise).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from hardmax._numba import numba, parallel
from hardmax.dynamics._engines.kernel import _JIT, _decide, _row_weights


@numba.njit(**_JIT)
def _prepare(z, mask, A, identity, zc, q, Aabs, wi):
    """Stage "inputs": the present tokens, in order, into zc (m, d) (padding dropped: it neither attends nor is a
    key); returns m and their places (m,) in the review."""
    n, d = z.shape
    place = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if mask[i]:
            for k in range(d):
                zc[m, k] = z[i, k]
            place[m] = i
            m += 1
    return m, place


@numba.njit(**_JIT)
def _layer_scale(zc, m, q, A, Aabs, identity, wi, coarse):
    """Stage "scores", its inputs: every query q_i = A z_i, W = max_j ‖ |A| |z_j| ‖ and the coarse tolerance
    coarse · W · max_j ‖z_j‖ over the m present tokens (as `ties.query_size` and `ties.coarse_tolerance`)."""
    d = zc.shape[1]
    wmax = zc[0, 0] * 0
    largest = zc[0, 0] * 0
    for i in range(m):
        w = _row_weights(i, zc, q, A, Aabs, identity, wi)
        v = zc[i, 0] * zc[i, 0]
        for k in range(1, d):
            v += zc[i, k] * zc[i, k]
        norm = np.sqrt(v)
        if i == 0 or w > wmax:
            wmax = w
        if i == 0 or norm > largest:
            largest = norm
    return wmax, coarse * wmax * largest


@numba.njit(**_JIT)
def _rows(first, stride, m, zc, zT, q, place, window, A, Aabs, identity, wmax, tol, rtol, g, new):
    """Rows first, first + stride, ... of one layer: each row's visible scores, its set C_i by rule (★) and its step,
    into new (m, d). zT (d, m): the tokens transposed, so that a row's scores run over contiguous memory (and
    vectorise). Scratch of its own (the rows of a layer may run on several cores at once)."""
    d = zc.shape[1]
    srow = np.empty(m, zc.dtype)
    member = np.empty(m, np.bool_)
    cand = np.empty(m, np.int64)
    sure = np.empty(m, np.bool_)
    lab = np.full(m, -1, np.int64)  # every key in the absolute frame: (★) on positions, as the reference loop
    fixed = np.zeros(m, np.bool_)
    org = np.zeros((1, d), zc.dtype)
    qt = np.empty(d, zc.dtype)
    qo = np.empty(d, zc.dtype)
    target = np.empty(d, zc.dtype)
    lowest = np.full(1, -np.inf, zc.dtype)[0]
    lo = 0
    for i in range(first, m, stride):
        if window > 0:  # the present keys j with place[i] − place[j] < window (places increase with j)
            while place[i] - place[lo] >= window:
                lo += 1
        # The visible keys lo..i only (the triangle): the decision runs on that window of the arrays, its indices
        # relative to lo (a key outside it would have score −inf: never a candidate, never in a maximum).
        width = i - lo + 1
        qi = q[i, 0]
        for j in range(width):
            srow[j] = qi * zT[0, lo + j]
        for k in range(1, d):  # summed over k in order, as every engine's scores
            qi = q[i, k]
            for j in range(width):
                srow[j] += qi * zT[k, lo + j]
        keys = zc[lo:i + 1]
        _, _, count, single, _ = _decide(i - lo, srow, keys, keys, lab, fixed, width, q[i], wmax, tol, rtol, member,
                                         cand, lowest, org, A, Aabs, identity, qt, qo, sure, True)
        if count == 1:
            for k in range(d):
                target[k] = keys[single, k]
        else:
            total = zc[0, 0] * 0
            for k in range(d):
                target[k] = 0
            for j in range(width):
                if member[j]:
                    total += 1
                    for k in range(d):
                        target[k] += keys[j, k]
            for k in range(d):
                target[k] = target[k] / total
        for k in range(d):  # `solvers.euler_update`: z + γ (T − z)
            new[i, k] = zc[i, k] + g * (target[k] - zc[i, k])


@numba.njit(parallel=True, **_JIT)
def _layer_spread(start, m, zc, zT, q, place, window, A, Aabs, identity, wmax, tol, rtol, g, new, blocks):
    """One layer of one review, rows start.. spread over `blocks` workers (row i to worker i mod blocks: the
    triangle's rows grow with i, interleaving balances them)."""
    for t in prange(blocks):
        _rows(start + t, blocks, m, zc, zT, q, place, window, A, Aabs, identity, wmax, tol, rtol, g, new)


@numba.njit(**_JIT)
def _review(z, mask, A, identity, gammas, rtol, window, slots, out, spread, blocks):
    """Every layer of one review z (n, d), mask (n,): layer k to out[slots[k]] when slots[k] ≥ 0 (padding as given).
    spread: the rows of each layer over `blocks` workers (one review), else one after another (a batch)."""
    n, d = z.shape
    zc = np.empty((n, d), z.dtype)
    new = np.empty((n, d), z.dtype)
    zT = np.empty((d, n), z.dtype)
    q = z.copy() if identity else np.empty((n, d), z.dtype)
    Aabs = np.abs(A)
    wi = np.empty(d, z.dtype)
    m, place = _prepare(z, mask, A, identity, zc, q, Aabs, wi)
    if identity:
        q = zc  # A = I: the query is the token itself
    coarse = 2 * (rtol + d * np.finfo(z.dtype).eps)
    layers = gammas.shape[0]
    # The frozen prefix: rows 0..frozen-1 did not move in the last layer. A row sees only keys before it, so while
    # W and the tolerance stay the same, such a row has the same scores, set and target as in the last layer: it
    # does not move again, and is not computed (the same result without the work: once a prefix of the tokens has
    # converged to the last bit, its rows cost nothing).
    frozen = 0
    last_w = zc[0, 0] * 0
    last_tol = zc[0, 0] * 0
    for layer in range(layers + 1):
        s = slots[layer]
        if s >= 0:
            for i in range(n):
                for k in range(d):
                    out[s, i, k] = z[i, k]
            for p in range(m):
                for k in range(d):
                    out[s, place[p], k] = zc[p, k]
        if layer == layers or m == 0:
            continue
        wmax, tol = _layer_scale(zc, m, q, A, Aabs, identity, wi, coarse)
        if layer == 0 or wmax != last_w or tol != last_tol:
            frozen = 0
        last_w = wmax
        last_tol = tol
        for p in range(frozen, m):
            for k in range(d):
                zT[k, p] = zc[p, k]
        if spread:
            _layer_spread(frozen, m, zc, zT, q, place, window, A, Aabs, identity, wmax, tol, rtol, gammas[layer], new,
                          blocks)
        else:
            _rows(frozen, 1, m, zc, zT, q, place, window, A, Aabs, identity, wmax, tol, rtol, gammas[layer], new)
        moved = m
        for p in range(frozen, m):
            for k in range(d):
                if new[p, k] != zc[p, k] and moved == m:
                    moved = p
                zc[p, k] = new[p, k]
        frozen = moved


@numba.njit(parallel=True, **_JIT)
def _reviews(z, mask, A, identity, gammas, rtol, window, slots, out):
    """`_review` of every review b of z (batch, n, d), mask (batch, n), one per worker (a batch at least as large as
    the threads): out[:, b] (s, n, d) gets its layers k at slots[k] ≥ 0; each review's rows run one after another."""
    for b in prange(z.shape[0]):
        _review(z[b], mask[b], A, identity, gammas, rtol, window, slots, out[:, b], False, 1)


def causal_trajectory(z: np.ndarray, mask: np.ndarray, A: np.ndarray | None, gammas: np.ndarray, tie_rtol: float,
                      window: int | None, stored: tuple[int, ...], threads: int) -> np.ndarray:
    """(len(stored), batch, n, d) the paper's hardmax layers under a causal mask (window w: the w most recent
    tokens, itself included; None: every earlier one), from z (batch, n, d) float32/float64 with mask (batch, n)
    True for real tokens, A (d, d) or None (the identity), gammas (layers,) the steps γ_k (`Euler.steps`)."""
    batch, n, d = z.shape
    layers = gammas.shape[0]
    slots = np.full(layers + 1, -1, np.int64)
    slots[list(stored)] = np.arange(len(stored))
    out = np.empty((len(stored), batch, n, d), z.dtype)
    identity = A is None
    A = np.eye(d, dtype=z.dtype) if A is None else np.ascontiguousarray(A, dtype=z.dtype)
    z = np.ascontiguousarray(z)
    mask = np.ascontiguousarray(mask, dtype=np.bool_)
    gammas = np.ascontiguousarray(gammas, dtype=z.dtype)
    w = 0 if window is None else int(window)
    with parallel(threads):
        if batch >= threads or batch == 0:
            _reviews(z, mask, A, identity, gammas, tie_rtol, w, slots, out)
        else:
            blocks = max(1, min(threads, numba.config.NUMBA_NUM_THREADS))
            for b in range(batch):
                _review(z[b], mask[b], A, identity, gammas, tie_rtol, w, slots, out[:, b], blocks > 1, blocks)
    return out
