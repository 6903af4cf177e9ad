"""Support growth of a trajectory's convex hull: how far conv(Z^{k+1}) reaches beyond conv(Z^k) along directions.

For a direction c, the support function of layer k is h_k(c) = max_j ⟨c, z_j^k⟩. Each token moves to a convex
combination of the tokens (the layer's P is row-stochastic), so conv(Z^{k+1}) ⊆ conv(Z^k) and
h_{k+1}(c) ≤ h_k(c) for every c. `support_growth` measures

    growth = max(0, max_k max_c (h_{k+1}(c) − h_k(c)) / ‖c‖),

over the layers given, for two sets of directions: fixed unit directions C (m, d) shared by all layers, and
the n directions c = A z_i^k of layer k (those that decide who attends to whom); zero directions are skipped.

A compiled kernel computes it layer by layer with no n × n temporaries (the layers in parallel). Its reference,
direction by direction in NumPy, is `support_growth` in tests/reference.py; the two sum dot products in different
orders, so they agree to rounding, not to the bit.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from hardmax._numba import numba, parallel

__all__ = ["support_growth"]


def support_growth(Z: np.ndarray, layers: np.ndarray, A: np.ndarray, C: np.ndarray, *, threads: int = 1) -> float:
    """max(0, max over k in `layers`, over the directions c of C and A z_i^k, of (h_{k+1}(c) − h_k(c)) / ‖c‖).

    Args:
        Z: (L, n, d) float64 positions of n tokens over L layers. layers: (K,) int, each k with k + 1 < L.
        A: (d, d) the score matrix (symmetric). C: (m, d) unit directions. threads: workers of the kernel.
    Returns:
        the largest growth, ≥ 0 (0 when `layers` is empty).
    """
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    layers = np.ascontiguousarray(layers, dtype=np.int64)
    if len(layers) == 0:
        return 0.0
    A = np.ascontiguousarray(A, dtype=np.float64)
    identity = bool(np.array_equal(A, np.eye(A.shape[0])))
    out = np.zeros(len(layers))
    with parallel(threads):
        _growth(Z, layers, A, identity, np.ascontiguousarray(C, dtype=np.float64), out)
    return float(max(0.0, out.max()))


@numba.njit(inline="always", cache=True, error_model="numpy", fastmath=True)
def _peak(q, X, row):
    """max_j ⟨q, x_j⟩ over the columns of X (d, n): the row of scores summed coordinate by coordinate, then its
    maximum with four running maxima (a single one is a chain of dependent comparisons, 2-3x slower)."""
    d, n = X.shape
    for j in range(n):
        row[j] = q[0] * X[0, j]
    for k in range(1, d):
        for j in range(n):
            row[j] += q[k] * X[k, j]
    b0 = b1 = b2 = b3 = -np.inf
    j = 0
    while j + 4 <= n:
        s0, s1, s2, s3 = row[j], row[j + 1], row[j + 2], row[j + 3]
        b0 = s0 if s0 > b0 else b0
        b1 = s1 if s1 > b1 else b1
        b2 = s2 if s2 > b2 else b2
        b3 = s3 if s3 > b3 else b3
        j += 4
    while j < n:
        b0 = row[j] if row[j] > b0 else b0
        j += 1
    return max(max(b0, b1), max(b2, b3))


@numba.njit(parallel=True, cache=True, error_model="numpy")
def _growth(Z, layers, A, identity, C, out):
    """out[t] = max over the directions of layer k = layers[t] of (h_{k+1}(c) − h_k(c)) / ‖c‖ (−inf: none)."""
    _, n, d = Z.shape
    for t in prange(len(layers)):
        k = layers[t]
        now = np.ascontiguousarray(Z[k].T)  # (d, n): the inner loops run over tokens, contiguous
        nxt = np.ascontiguousarray(Z[k + 1].T)
        row = np.empty(n)
        q = np.empty(d)
        best = -np.inf
        for c in range(C.shape[0]):
            best = max(best, _peak(C[c], nxt, row) - _peak(C[c], now, row))
        for i in range(n):
            size = 0.0
            for a in range(d):
                if identity:
                    q[a] = Z[k, i, a]
                else:
                    v = 0.0
                    for b in range(d):
                        v += Z[k, i, b] * A[b, a]
                    q[a] = v
                size += q[a] * q[a]
            if size > 0:
                best = max(best, (_peak(q, nxt, row) - _peak(q, now, row)) / np.sqrt(size))
        out[t] = best
