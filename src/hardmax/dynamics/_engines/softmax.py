"""Softmax flows compiled: the particle systems' attention (SA, USA on the sphere; R^d), one sequence per core.

    ż_i = V (Σ_j P_ij z_j − z_i)            (R^d)            P_ij = w_j e^{s_ij} / Σ_l w_l e^{s_il},
    ẋ_i = P⊥_{x_i} (V Σ_j P_ij x_j)          (the sphere)     s_ij = β ⟨A z_i, z_j⟩ over the keys i may see

stepped by Euler (z ← R(z + dt ż)) or the classical RK4 (stages unretracted, the step retracted), R the manifold's
retraction — the reference loop's arithmetic (`solvers`, `manifolds`), with the loop's many batched tensor passes
replaced by one pass of a sequence's n × n scores in cache (n ≲ 10³, the particle papers' sizes). Where one shift
serves every row (tokens on or near the sphere with A = a·I, a ≥ 0: s_ij ≤ √(s_ii s_jj) ≤ c = max_i s_ii, and no
row's own e^{s_ii − c} underflows), the weights e^{s_ij − c} are one symmetric matrix and each pair costs one
exponential, for both rows; a batch of many such sequences runs W = 64 of them side by side in the vector lanes
(`_groups`: every innermost loop over the lanes), 2–5× one sequence per core, in the tokens' dtype throughout (float32
lanes: a float32 exponential, `_exp32`, and twice the lanes per vector: 2× float64's). Agrees with the reference loop
to rounding (exponentials and sums in another order), which the tests hold it to; never bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange, types
from numba.extending import overload

from hardmax._numba import numba, parallel
from hardmax.dynamics._engines.kernel import _INLINE, _JIT


@numba.njit(**_INLINE)
def _queries(z, A, identity, q):
    """q (n, d) = z A (row vectors: s_ij = ⟨q_i, z_j⟩), summed over c in order."""
    n, d = z.shape
    if identity:
        for i in range(n):
            for k in range(d):
                q[i, k] = z[i, k]
        return
    for i in range(n):
        for k in range(d):
            q[i, k] = z[i, 0] * A[0, k]
        for c in range(1, d):
            for k in range(d):
                q[i, k] += z[i, c] * A[c, k]


_LOG2E = 1.4426950408889634
_LN2_HI = 0.693145751953125  # ln 2 in two parts (Cody and Waite): t · _LN2_HI is exact for the t that occur
_LN2_LO = 1.42860682030941723212e-6
_MAGIC = 6755399441055744.0  # 2^52 + 2^51: t + _MAGIC holds the integer t in its low bits
_MAGIC_BITS = 4843621399236968448  # the bits of _MAGIC


@numba.njit(**_INLINE)
def _reduced(x):
    """(e^r, t + 2^52 + 2^51) for x ≤ 0 written x = t ln 2 + r, t = round(x / ln 2) (Cody and Waite), e^r by its
    Taylor polynomial to degree 13 (|r| ≤ ln 2 / 2: error below 1e-17); below −708, x is taken as −708."""
    v = max(x, -708.0)
    t = np.floor(v * _LOG2E + 0.5)
    r = (v - t * _LN2_HI) - t * _LN2_LO
    return 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
        1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (
            1.0 / 39916800 + r * (1.0 / 479001600 + r * (1.0 / 6227020800))))))))))))), t + _MAGIC


@numba.njit(**_INLINE)
def _exp(x, out, bits, ints, count):
    """out[:count] = e^{x[:count]} (x ≤ 0, float64) to 1 ulp, in three loops that vectorise (no libm call): e^r and t
    from `_reduced`, 2^t written into the exponent bits (ints: bits viewed as int64, made once by the caller: a view
    per call costs more than the exponentials). Below −708 the result is e^{−708} (the callers weigh those keys ~0
    or 0)."""
    for j in range(count):
        out[j], bits[j] = _reduced(x[j])
    for j in range(count):
        ints[j] = ((ints[j] - _MAGIC_BITS) + 1023) << 52
    for j in range(count):
        out[j] = out[j] * bits[j]


# The same exponential in float32 (the lanes path's float32 flows): constants typed float32 (a float64 one would turn
# every lane's arithmetic to float64), ln 2 split for float32, 2^t written into float32's exponent (bias 127, 23 bits).
_LOG2E_32 = np.float32(_LOG2E)
_LN2_HI_32 = np.float32(0.693359375)  # 355/512: t · _LN2_HI_32 is exact for |t| < 2^15
_LN2_LO_32 = np.float32(-2.12194440e-4)
_MAGIC_32 = np.float32(12582912.0)  # 2^23 + 2^22
_MAGIC_BITS_32 = np.int32(1262485504)  # the bits of _MAGIC_32
_FLOOR_32 = np.float32(-87.0)  # e^{−87} ≈ 1.6e-38, still a normal float32
_HALF_32 = np.float32(0.5)
_TAYLOR_32 = tuple(np.float32(1.0 / math.factorial(k)) for k in range(8))


@numba.njit(**_INLINE)
def _reduced32(x):
    """`_reduced` in float32: (e^r, t + 2^23 + 2^22) for x = t ln 2 + r ≤ 0, e^r by its Taylor polynomial to degree 7
    (|r| ≤ ln 2 / 2: truncation below 1e-8, under float32's half ulp); below −87, x is taken as −87."""
    v = max(x, _FLOOR_32)
    t = np.floor(v * _LOG2E_32 + _HALF_32)
    r = (v - t * _LN2_HI_32) - t * _LN2_LO_32
    c = _TAYLOR_32
    return c[0] + r * (c[1] + r * (c[2] + r * (c[3] + r * (c[4] + r * (c[5] + r * (c[6] + r * c[7])))))), t + _MAGIC_32


@numba.njit(**_INLINE)
def _exp32(x, out, bits, ints, count):
    """out[:count] = e^{x[:count]} (x ≤ 0, float32) to 2 ulp, as `_exp` (ints: bits viewed as int32). Below −87 the
    result is e^{−87}."""
    for j in range(count):
        out[j], bits[j] = _reduced32(x[j])
    for j in range(count):
        ints[j] = ((ints[j] - _MAGIC_BITS_32) + np.int32(127)) << np.int32(23)
    for j in range(count):
        out[j] = out[j] * bits[j]


def _exp_any(x, out, bits, ints, count):
    """`_exp` or `_exp32` by the dtype of x (compiled code only: chosen when numba types the call)."""
    raise NotImplementedError("compiled code only")


@overload(_exp_any, inline="always")
def _exp_any_typed(x, out, bits, ints, count):
    if x.dtype == types.float32:
        return lambda x, out, bits, ints, count: _exp32(x, out, bits, ints, count)
    return lambda x, out, bits, ints, count: _exp(x, out, bits, ints, count)


def _int_view(bits):
    """bits viewed as integers of its width (compiled code only)."""
    raise NotImplementedError("compiled code only")


@overload(_int_view)
def _int_view_typed(bits):
    if bits.dtype == types.float32:
        return lambda bits: bits.view(np.int32)
    return lambda bits: bits.view(np.int64)


@numba.njit(**_INLINE)
def _velocity(z, A, identity, beta, V, has_V, sphere, weight, lo, symmetric, q, zT, TT, total, x, w, bits, ints,
              out):
    """out (n, d) = ż at z (n, d): softmax targets T_i = Σ_j P_ij z_j over the keys j ∈ [lo[i], i] (causal) or every
    j (lo[i] < 0), weighed by weight_j (1 present, 0 absent), then the manifold's velocity; an absent token does not
    move. symmetric: one shift serves every row (see the module): each pair's weight is computed once. Scratch: zT,
    TT (d, n), total (n,), x, w, bits (n,), all float64; every inner loop runs over keys j and vectorises."""
    n, d = z.shape
    _queries(z, A, identity, q)
    for i in range(n):
        total[i] = 0.0
        for k in range(d):
            zT[k, i] = z[i, k]
            TT[k, i] = 0.0
    if symmetric:  # e^{s_ij − c}, one shift c = max_i s_ii ≥ every s_ij: one exponential per pair, both rows
        c = -np.inf
        for i in range(n):
            if weight[i] > 0:
                own = 0.0
                for k in range(d):
                    own += q[i, k] * z[i, k]
                c = max(c, beta * own)
        for i in range(n):
            if weight[i] == 0:
                continue
            count = n - i  # keys i, i + 1, ..., n − 1 (the pairs j < i were counted by row j)
            for j in range(count):
                x[j] = q[i, 0] * zT[0, i + j]
            for k in range(1, d):
                qk = q[i, k]
                for j in range(count):
                    x[j] += qk * zT[k, i + j]
            for j in range(count):
                x[j] = beta * x[j] - c
            _exp(x, w, bits, ints, count)
            for j in range(count):
                w[j] *= weight[i + j]
            row = 0.0
            for j in range(count):
                row += w[j]
            total[i] += row
            for j in range(1, count):
                total[i + j] += w[j]
            for k in range(d):
                acc = 0.0
                for j in range(count):
                    acc += w[j] * zT[k, i + j]
                TT[k, i] += acc
                zik = z[i, k]
                for j in range(1, count):
                    TT[k, i + j] += w[j] * zik
    else:
        for i in range(n):
            if weight[i] == 0:
                continue
            first = 0 if lo[i] < 0 else lo[i]
            count = (n if lo[i] < 0 else i + 1) - first
            for j in range(count):
                x[j] = q[i, 0] * zT[0, first + j]
            for k in range(1, d):
                qk = q[i, k]
                for j in range(count):
                    x[j] += qk * zT[k, first + j]
            m = -np.inf
            for j in range(count):
                x[j] = beta * x[j]
                if weight[first + j] > 0 and x[j] > m:
                    m = x[j]
            for j in range(count):
                x[j] = x[j] - m
            _exp(x, w, bits, ints, count)
            row = 0.0
            for j in range(count):
                w[j] *= weight[first + j]
                row += w[j]
            total[i] = row
            for k in range(d):
                acc = 0.0
                for j in range(count):
                    acc += w[j] * zT[k, first + j]
                TT[k, i] = acc
    for i in range(n):
        if weight[i] == 0:
            for k in range(d):
                out[i, k] = 0.0
            continue
        for k in range(d):  # T_i, then the drift V T (sphere) or V (T − z) (R^d)
            x[k] = TT[k, i] / total[i] - (0.0 if sphere else z[i, k])
        for k in range(d):
            if has_V:
                acc = 0.0
                for c2 in range(d):
                    acc += V[k, c2] * x[c2]
                out[i, k] = acc
            else:
                out[i, k] = x[k]
        if sphere:  # P⊥_x: drift − ⟨drift, x⟩ x
            dot = 0.0
            for k in range(d):
                dot += out[i, k] * z[i, k]
            for k in range(d):
                out[i, k] = out[i, k] - dot * z[i, k]


@numba.njit(**_INLINE)
def _axpy(out, x, h, k):
    """out = x + h k elementwise (C-contiguous arrays of one shape): an Euler step or an RK4 stage."""
    o, a, b = out.reshape(out.size), x.reshape(x.size), k.reshape(k.size)
    for j in range(o.size):
        o[j] = a[j] + h * b[j]


@numba.njit(**_INLINE)
def _retract(z, sphere, present):
    """z back on the manifold: x / ‖x‖ on the sphere (present tokens), nothing in R^d."""
    if not sphere:
        return
    n, d = z.shape
    for i in range(n):
        if present[i]:
            v = 0.0
            for k in range(d):
                v += z[i, k] * z[i, k]
            norm = np.sqrt(v)
            for k in range(d):
                z[i, k] = z[i, k] / norm


@numba.njit(**_JIT)
def _sequence(z, A, identity, beta, V, has_V, sphere, present, lo, symmetric, dts, rk4, slots, out):
    """Every step of one sequence z (n, d), the saved ones to out[slots[k]] (out (s, n, d))."""
    n, d = z.shape
    x = z.copy()
    q = np.empty((n, d), np.float64)
    zT = np.empty((d, n), np.float64)
    TT = np.empty((d, n), np.float64)
    total = np.empty(n, np.float64)
    keys = np.empty(max(n, d), np.float64)
    w = np.empty(n, np.float64)
    bits = np.empty(n, np.float64)
    ints = bits.view(np.int64)
    weight = np.empty(n, np.float64)
    for i in range(n):
        weight[i] = 1.0 if present[i] else 0.0
    k1 = np.empty((n, d), z.dtype)
    k2 = np.empty((n, d), z.dtype)
    k3 = np.empty((n, d), z.dtype)
    k4 = np.empty((n, d), z.dtype)
    y = np.empty((n, d), z.dtype)
    steps = dts.shape[0]
    for step in range(steps + 1):
        s = slots[step]
        if s >= 0:
            for i in range(n):
                for k in range(d):
                    out[s, i, k] = x[i, k]
        if step == steps:
            break
        dt = dts[step]
        _velocity(x, A, identity, beta, V, has_V, sphere, weight, lo, symmetric, q, zT, TT, total,
                      keys, w, bits, ints, k1)
        if rk4:
            half = dt / 2
            _axpy(y, x, half, k1)
            _velocity(y, A, identity, beta, V, has_V, sphere, weight, lo, symmetric, q, zT, TT, total,
                      keys, w, bits, ints, k2)
            _axpy(y, x, half, k2)
            _velocity(y, A, identity, beta, V, has_V, sphere, weight, lo, symmetric, q, zT, TT, total,
                      keys, w, bits, ints, k3)
            _axpy(y, x, dt, k3)
            _velocity(y, A, identity, beta, V, has_V, sphere, weight, lo, symmetric, q, zT, TT, total,
                      keys, w, bits, ints, k4)
            sixth = dt / 6
            for i in range(n):
                for k in range(d):
                    x[i, k] = x[i, k] + sixth * (((k1[i, k] + 2 * k2[i, k]) + 2 * k3[i, k]) + k4[i, k])
        else:
            _axpy(x, x, dt, k1)
        _retract(x, sphere, present)


@numba.njit(parallel=True, **_JIT)
def _sequences(z, A, identity, which, beta, V, has_V, sphere, present, lo, symmetric, dts, rk4, slots, out):
    """`_sequence` of every sequence b of z (batch, n, d), one per worker, with its own A[which[b]] ((k, d, d) stacked),
    present[b] (n,) and symmetric[b]; out[:, b] (s, n, d) gets the steps k at slots[k] ≥ 0.

    ż_i = V (T_i − z_i) in R^d, P⊥_{z_i}(V T_i) on the sphere, T_i = Σ_j P_ij z_j, P_ij ∝ e^{β ⟨A z_i, z_j⟩} over the
    present keys j ∈ [lo[i], i] (every j where lo[i] < 0); Euler or RK4 steps dts (steps,). Sequences share nothing
    but the read-only inputs, so the order of workers does not matter."""
    for b in prange(z.shape[0]):
        _sequence(z[b], A[which[b]], identity, beta, V, has_V, sphere, present[b], lo,
                  symmetric[b], dts, rk4, slots, out[:, b])


# --------------------------------------------------------------------------------------------
# Many sequences: W of them side by side in the vector lanes
# --------------------------------------------------------------------------------------------

#: Sequences per group of the lanes path, a compile-time constant so that every innermost loop (over the lanes) has
#: a fixed trip count and vectorises whole. Measured here (AVX-512, one core, RK4 on S², batches of 256): W = 8 was
#: 1.5× *slower* than a sequence per core (loops of 8 pay their setup and alias checks each time), W = 32 2×, W = 64
#: 3.4× faster at n = 32 (2.4× at n = 64, 1.9× at n = 128 … 1,024, 5.5× at n = 16); W = 128 no better than 64.
W = 64

#: The largest n · d the lanes take: a group keeps seven (n, d, W) arrays in the tokens' dtype (the state, four RK4
#: stages, a stage's tokens, the targets), 58 MiB at this size in float64; past it one sequence per core (O(n d)
#: scratch) runs instead.
LANES_MAX_ND = 16_384


#: The widest tokens one sequence per core takes: its scores are loops over the d coordinates, vectorised over the
#: keys, while the reference loop's scores are one batched product (BLAS). Measured here (one RK4 step on S², one
#: sequence, 2 threads): at d = 32–64 the compiled engine is 1.2–1.6× faster (n = 2,048–4,096), at d = 128 the
#: reference loop is 5× faster (n = 1,024 and 4,096), at d = 1,024 12× (75 s against 6 s, n = 4,096).
MAX_WIDTH = 64


#: A batch shorter than W still runs in the lanes (one group, its spare lanes repeating the last sequence) when each
#: thread would have at least this many sequences of its own on one sequence per core: (n at most, sequences), in
#: float64; float32 needs half (twice the lanes per vector). Measured here (one core, RK4 on S², one group of 64
#: lanes against one sequence per core): the group costs as much as 11, 18, 27, 35 and 32 float64 sequences at
#: n = 16, 32, 64, 128, 256, and 5, 8, 12, 15, 14 float32 ones; on 2 threads the same per thread (n = 128, 20
#: float32 sequences: the lanes 0.68x as fast, 36 of them 1.22x; n = 32, 50 float32 sequences on one core: 6.2x).
LANES_SHORT_BATCH = ((16, 12), (32, 20), (64, 28), (None, 36))


def lanes_used(batch: int, n: int, d: int, symmetric: bool, threads: int = 1, itemsize: int = 8) -> bool:
    """Whether `softmax_flow` (lanes=None) runs W sequences side by side: the symmetric case, n · d ≤ LANES_MAX_ND,
    and a batch of at least W, or a shorter one whose single padded group costs less than its sequences spread over
    `threads` one per core (`LANES_SHORT_BATCH`; itemsize: the tokens' bytes, 4 for float32)."""
    if not symmetric or n * d > LANES_MAX_ND:
        return False
    if batch >= W:
        return True
    least = next(count for most, count in LANES_SHORT_BATCH if most is None or n <= most)
    least = -(-least // 2) if itemsize <= 4 else least
    return -(-batch // max(1, threads)) >= least


def scratch_bytes(batch: int, n: int, d: int, symmetric: bool, threads: int, itemsize: int = 8) -> float:
    """The engine's working memory besides the saved states: per thread a group's seven (n, d, W) arrays, or one
    sequence's nine (n, d) arrays (never an n × n matrix: the scores of a row are made and used one row at a time);
    counted in float64 (float32 lanes take half)."""
    lanes = lanes_used(batch, n, d, symmetric, threads, itemsize)
    per_thread = 7.0 * n * d * W + 2.0 * n * W if lanes else 10.0 * n * d + 8.0 * n
    return max(1, threads) * per_thread * 8


@numba.njit(**_INLINE)
def _dot_lanes(a, i, b, j, x):
    """x (W,) = ⟨a_i, b_j⟩ in each lane, a and b (n, d, W), summed over the coordinates in order."""
    for w in range(W):
        x[w] = a[i, 0, w] * b[j, 0, w]
    for k in range(1, a.shape[1]):
        for w in range(W):
            x[w] += a[i, k, w] * b[j, k, w]


@numba.njit(**_JIT)  # not inlined: one call does a whole group's n² pairs, and four inlined copies compile 4× longer
def _velocity_lanes(z, a, V, has_V, weight, T, total, c, x, e, bits, ints, out):
    """out (n, d, W) = ẋ on the sphere of W sequences z (n, d, W) side by side, each with its scores a_w ⟨x_i, x_j⟩
    (A = a_w I, a_w ≥ 0) and every key visible: ẋ_i = P⊥_{x_i}(V T_i), T_i = Σ_j P_ij x_j, weights e^{a(⟨x_i, x_j⟩) − c}
    with one shift c_w = max_i a_w |x_i|² per sequence, one exponential per pair for both rows (the module's
    symmetric case), key j weighed by weight (n, W) (1 present, 0 absent); an absent token does not move. Scratch:
    T (n, d, W), total (n, W), c, x, e, bits (W,), every array in z's dtype (float32 flows run in float32 throughout,
    twice the lanes per vector). Every innermost loop runs over the W lanes."""
    n, d = z.shape[0], z.shape[1]
    for w in range(W):
        c[w] = -np.inf
    for i in range(n):
        _dot_lanes(z, i, z, i, x)
        for w in range(W):
            own = a[w] * x[w]
            if weight[i, w] > 0 and own > c[w]:
                c[w] = own
    for i in range(n):
        for w in range(W):
            total[i, w] = 0
        for k in range(d):
            for w in range(W):
                T[i, k, w] = 0
    for i in range(n):
        for j in range(i, n):
            _dot_lanes(z, i, z, j, x)
            for w in range(W):
                x[w] = a[w] * x[w] - c[w]
            _exp_any(x, e, bits, ints, W)  # the W lanes: a constant trip count once inlined
            if j == i:
                for w in range(W):
                    e[w] *= weight[i, w]
                    total[i, w] += e[w]
                for k in range(d):
                    for w in range(W):
                        T[i, k, w] += e[w] * z[i, k, w]
            else:
                for w in range(W):
                    x[w] = e[w] * weight[j, w]  # row i's weight of key j
                    e[w] = e[w] * weight[i, w]  # row j's weight of key i
                    total[i, w] += x[w]
                    total[j, w] += e[w]
                for k in range(d):
                    for w in range(W):
                        T[i, k, w] += x[w] * z[j, k, w]
                        T[j, k, w] += e[w] * z[i, k, w]
    for i in range(n):
        for k in range(d):  # T_i, then the drift V T
            for w in range(W):
                T[i, k, w] = T[i, k, w] / total[i, w]
        for k in range(d):
            if has_V:
                for w in range(W):
                    x[w] = V[k, 0] * T[i, 0, w]
                for c2 in range(1, d):
                    for w in range(W):
                        x[w] += V[k, c2] * T[i, c2, w]
                for w in range(W):
                    out[i, k, w] = x[w]
            else:
                for w in range(W):
                    out[i, k, w] = T[i, k, w]
        _dot_lanes(out, i, z, i, x)  # P⊥_x: drift − ⟨drift, x⟩ x, times the weight (0: an absent token stays)
        for k in range(d):
            for w in range(W):
                out[i, k, w] = (out[i, k, w] - x[w] * z[i, k, w]) * weight[i, w]


@numba.njit(**_JIT)
def _group(z, first, count, a, V, has_V, present, dts, rk4, slots, out, numbers):
    """Every step of the sequences z[first : first + count] (count ≤ W), side by side in the lanes (the lanes past
    count repeat the last sequence and are dropped), the saved ones to out[slots[k]] (out (s, batch, n, d)); a
    (batch,), V, dts and numbers (1, 2, 6) in z's dtype, in which every lane computes (no literal in the arithmetic:
    a float64 one would widen float32 lanes)."""
    n, d = z.shape[1], z.shape[2]
    x = np.empty((n, d, W), z.dtype)
    weight = np.empty((n, W), z.dtype)
    lane_a = np.empty(W, z.dtype)
    for w in range(W):
        b = first + min(w, count - 1)
        lane_a[w] = a[b]
        for i in range(n):
            weight[i, w] = 1 if present[b, i] else 0
            for k in range(d):
                x[i, k, w] = z[b, i, k]
    T = np.empty((n, d, W), z.dtype)
    total = np.empty((n, W), z.dtype)
    c = np.empty(W, z.dtype)
    s1 = np.empty(W, z.dtype)
    e = np.empty(W, z.dtype)
    bits = np.empty(W, z.dtype)
    ints = _int_view(bits)
    k1 = np.empty((n, d, W), z.dtype)
    k2 = np.empty((n, d, W), z.dtype)
    k3 = np.empty((n, d, W), z.dtype)
    k4 = np.empty((n, d, W), z.dtype)
    y = np.empty((n, d, W), z.dtype)
    one, two, six = numbers[0], numbers[1], numbers[2]
    steps = dts.shape[0]
    for step in range(steps + 1):
        s = slots[step]
        if s >= 0:
            for w in range(count):
                for i in range(n):
                    for k in range(d):
                        out[s, first + w, i, k] = x[i, k, w]
        if step == steps:
            break
        dt = dts[step]
        _velocity_lanes(x, lane_a, V, has_V, weight, T, total, c, s1, e, bits, ints, k1)
        if rk4:
            half = dt / two
            _axpy(y, x, half, k1)
            _velocity_lanes(y, lane_a, V, has_V, weight, T, total, c, s1, e, bits, ints, k2)
            _axpy(y, x, half, k2)
            _velocity_lanes(y, lane_a, V, has_V, weight, T, total, c, s1, e, bits, ints, k3)
            _axpy(y, x, dt, k3)
            _velocity_lanes(y, lane_a, V, has_V, weight, T, total, c, s1, e, bits, ints, k4)
            sixth = dt / six
            for i in range(n):
                for k in range(d):
                    for w in range(W):  # (2 k = k + k exactly)
                        x[i, k, w] = x[i, k, w] + sixth * (((k1[i, k, w] + (k2[i, k, w] + k2[i, k, w]))
                                                            + (k3[i, k, w] + k3[i, k, w])) + k4[i, k, w])
        else:
            _axpy(x, x, dt, k1)
        for i in range(n):  # back on the sphere (present tokens; an absent one is divided by 1)
            _dot_lanes(x, i, x, i, s1)
            for w in range(W):
                s1[w] = np.sqrt(s1[w]) * weight[i, w] + (one - weight[i, w])
            for k in range(d):
                for w in range(W):
                    x[i, k, w] = x[i, k, w] / s1[w]


@numba.njit(parallel=True, **_JIT)
def _groups(z, a, V, has_V, present, dts, rk4, slots, out, numbers):
    """`_group` of every group of W consecutive sequences of z (batch, n, d) (the last one may be short), one group
    per worker: a (batch,) each sequence's β·c (A = c·I), out (s, batch, n, d) the steps k at slots[k] ≥ 0."""
    batch = z.shape[0]
    groups = (batch + W - 1) // W
    for g in prange(groups):
        _group(z, g * W, min(W, batch - g * W), a, V, has_V, present, dts, rk4, slots, out, numbers)


def softmax_flow(z: np.ndarray, present: np.ndarray, A: np.ndarray | None, beta: float, V: np.ndarray | None,
                 sphere: bool, window: int | None, causal: bool, dts: np.ndarray, rk4: bool, stored: tuple[int, ...],
                 threads: int, lanes: bool | None = None) -> np.ndarray:
    """(len(stored), batch, n, d) the softmax flow from z (batch, n, d) float32/float64 with present (batch, n); A
    (d, d), (batch, d, d) or None (identity); V (d, d) or None; causal with an optional window; dts (steps,) the
    steps of Euler (rk4 False) or RK4. lanes: W sequences side by side in the vector lanes (the symmetric case
    only; None: `lanes_used`), or one sequence per core (False)."""
    batch, n, d = z.shape
    dtype = z.dtype
    steps = dts.shape[0]
    slots = np.full(steps + 1, -1, np.int64)
    slots[list(stored)] = np.arange(len(stored))
    out = np.empty((len(stored), batch, n, d), dtype)
    identity = A is None
    A3 = np.eye(d, dtype=dtype)[None] if A is None else np.ascontiguousarray(A, dtype=dtype).reshape(-1, d, d)
    which = np.arange(batch, dtype=np.int64) if A3.shape[0] > 1 else np.zeros(batch, np.int64)  # each one's A
    lo = np.full(n, -1, np.int64)
    if causal:
        lo = np.maximum(np.arange(n) - (n if window is None else window) + 1, 0).astype(np.int64)
    # every row's maximum is its own score: tokens on the sphere, A = c·I (c ≥ 0), every key visible
    scalar = identity or all(np.array_equal(a, a[0, 0] * np.eye(d)) and a[0, 0] >= 0 for a in A3)
    symmetric = np.full(batch, bool(sphere and scalar and not causal), np.bool_)
    V2 = np.eye(d, dtype=dtype) if V is None else np.ascontiguousarray(V, dtype=dtype)
    # many sequences of the symmetric case (the phase diagrams: thousands of n = 32): W of them side by side in the
    # vector lanes, where one sequence's rows are loops too short to vectorise well (a batch of at least W, or one
    # that fills enough of a group: `lanes_used`)
    use_lanes = ((lanes_used(batch, n, d, True, threads, dtype.itemsize) if lanes is None else bool(lanes))
                 and bool(symmetric.all()))
    with parallel(threads):
        if use_lanes:
            a = np.float64(beta) * (np.ones(batch) if identity else A3[which, 0, 0].astype(np.float64))
            _groups(np.ascontiguousarray(z), a.astype(dtype), V2, V is not None,
                    np.ascontiguousarray(present, dtype=np.bool_), np.ascontiguousarray(dts, dtype=dtype), rk4,
                    slots, out, np.array([1, 2, 6], dtype))
        else:
            _sequences(np.ascontiguousarray(z), A3, identity, which, float(beta), V2, V is not None, sphere,
                       np.ascontiguousarray(present, dtype=np.bool_), lo, symmetric,
                       np.ascontiguousarray(dts, dtype=dtype), rk4, slots, out)
    return out
