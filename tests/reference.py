"""Slow, obviously-correct oracles for the dynamics (1.1), written from the paper, not from the library.

Everything here works on one sequence at a time with explicit loops over tokens, so each line can be
checked against the equation:

    z_i ← z_i + α/(1+α) (Σ_j P_ij z_j − z_i)
    hardmax: P_ij = 1/|C_i| for j ∈ C_i = argmax_j ⟨A z_i, z_j⟩ (every tie kept, copies counted apart)
    softmax: P_ij = exp(β⟨A z_i, z_j⟩) / Σ_l exp(β⟨A z_i, z_l⟩)

Masked tokens (mask False) are left out of every C_i and every softmax sum, and do not move.

- `simulate`, `attention_matrix`: float64 NumPy, ties by the library's documented rule (★) on positions
  (one layer, no frames): j ∈ C_i unless another token l beats it,
  ⟨A z_i, z_l − z_j⟩ > tie_rtol · W · ‖ |z_l| + |z_j| ‖, W = max_j ‖ |A| |z_j| ‖.
- `simulate_exact`: `fractions.Fraction` arithmetic for rational inputs, where ties are exact.

References for the compiled routines that have no other path in the library (numba is a dependency, so
each compiled routine is held to one plain version, here, not to a fallback in the source):

- `rate_samples`: reference for `hardmax.theory.check._rate_samples`, by whole-array NumPy operations.
- `support_growth`: reference for `hardmax.theory.support.support_growth`, direction by direction.

Nothing here imports hardmax: this is the oracle the library is tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

DEFAULT_TIE_RTOL = 64 * float(np.finfo(np.float64).eps)


def _real(n: int, mask) -> list[bool]:
    return [True] * n if mask is None else [bool(m) for m in mask]


def attention_matrix(
    tokens: np.ndarray,
    A: np.ndarray | None = None,
    *,
    attention: str = "hardmax",
    beta: float | None = None,
    mask=None,
    tie_rtol: float = DEFAULT_TIE_RTOL,
    causal: bool = False,
    window: int | None = None,
) -> np.ndarray:
    """(n, n) attention matrix P of one layer for one sequence of (n, d) tokens.

    Rows of masked tokens and columns of masked tokens are zero. `causal`: row i sees the keys j ≤ i only (and,
    with a `window` w, those with i − j < w); W is still the largest over every real token.
    """
    z = np.asarray(tokens, dtype=np.float64)
    n, d = z.shape
    A = np.eye(d) if A is None else np.asarray(A, dtype=np.float64)
    real = _real(n, mask)
    keys = [j for j in range(n) if real[j]]
    P = np.zeros((n, n))
    if not keys:
        return P
    for i in range(n):
        if not real[i]:
            continue
        query = A @ z[i]
        # Every copy of a token gets the very same score: same vectors, same operations.
        seen = [j for j in keys if _sees(i, j, causal, window)]
        s = {j: float(query @ z[j]) for j in seen}
        if attention == "hardmax":
            # Rule (★) on positions: j is in C_i unless some l beats it,
            # ⟨A z_i, z_l − z_j⟩ > tie_rtol · W · ‖ |z_l| + |z_j| ‖, W = max_j ‖ |A||z_j| ‖.
            size = max(float(np.linalg.norm(np.abs(A) @ np.abs(z[j]))) for j in keys)
            members = [
                j for j in seen
                if not any(float(query @ (z[l] - z[j]))
                           > tie_rtol * size * float(np.linalg.norm(np.abs(z[l]) + np.abs(z[j])))
                           for l in seen)
            ]
            if not members:  # rounding beat every candidate: the largest score
                members = [max(seen, key=lambda j: s[j])]
            for j in members:
                P[i, j] = 1.0 / len(members)
        elif attention == "softmax":
            top = max(s.values())
            e = {j: math.exp(beta * (s[j] - top)) for j in seen}
            total = sum(e.values())
            for j in seen:
                P[i, j] = e[j] / total
        else:
            raise ValueError(f"unknown attention {attention!r}")
    return P


def _sees(i: int, j: int, causal: bool, window: int | None) -> bool:
    """Whether row i may attend to key j: always without `causal`; else j ≤ i (and i − j < window)."""
    return not causal or (j <= i and (window is None or i - j < window))


def step(tokens: np.ndarray, P: np.ndarray, alpha: float, mask=None) -> np.ndarray:
    """One layer: z_i + α/(1+α)(Σ_j P_ij z_j − z_i) for real tokens; masked tokens stay."""
    z = np.asarray(tokens, dtype=np.float64)
    n, d = z.shape
    real = _real(n, mask)
    gamma = alpha / (1 + alpha)
    out = z.copy()
    for i in range(n):
        if not real[i]:
            continue
        target = np.zeros(d)
        for j in range(n):
            if P[i, j] != 0:
                target += P[i, j] * z[j]
        out[i] = z[i] + gamma * (target - z[i])
    return out


def _alphas(alpha, layers: int) -> list:
    if isinstance(alpha, Sequence | np.ndarray) and not isinstance(alpha, str):
        assert len(alpha) == layers
        return list(alpha)
    return [alpha] * layers


def simulate(
    tokens: np.ndarray,
    *,
    alpha,
    layers: int,
    A: np.ndarray | None = None,
    attention: str = "hardmax",
    beta: float | None = None,
    mask=None,
    tie_rtol: float = DEFAULT_TIE_RTOL,
    causal: bool = False,
    window: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run (1.1) on one (n, d) sequence in float64 (`causal`, `window`: as in `attention_matrix`).

    Returns:
        (tokens, weights): (layers + 1, n, d) positions and (layers, n, n) attention matrices.
    """
    z = np.asarray(tokens, dtype=np.float64)
    path, weights = [z], []
    for a in _alphas(alpha, layers):
        P = attention_matrix(path[-1], A, attention=attention, beta=beta, mask=mask, tie_rtol=tie_rtol, causal=causal,
                             window=window)
        weights.append(P)
        path.append(step(path[-1], P, float(a), mask))
    n = z.shape[0]
    return np.stack(path), np.stack(weights) if weights else np.zeros((0, n, n))


def simulate_exact(tokens, *, alpha, layers: int, A=None, mask=None, causal: bool = False,
                   window: int | None = None) -> list[list[list[Fraction]]]:
    """Run hardmax (1.1) in exact rational arithmetic; ties are exact equalities of scores.

    Args:
        tokens: n rows of d rationals (int, Fraction or str like "1/3").
        alpha: a rational α > 0 or one per layer. A: d×d rationals (symmetric positive definite), None = I.
        mask: n booleans, True for real tokens; None = all real.
        causal, window: row i attends to the keys j ≤ i only (with a window w: i − j < w).
    Returns:
        layers + 1 lists of n rows of d Fractions.
    """
    z = [[Fraction(x) for x in row] for row in tokens]
    n, d = len(z), len(z[0])
    A = [[Fraction(int(r == c)) for c in range(d)] for r in range(d)] if A is None else [
        [Fraction(x) for x in row] for row in A
    ]
    real = _real(n, mask)
    path = [z]
    for a in _alphas(alpha, layers):
        a = Fraction(a)
        gamma = a / (1 + a)
        z = path[-1]
        new = [list(row) for row in z]
        for i in range(n):
            if not real[i]:
                continue
            query = [sum(A[r][c] * z[i][c] for c in range(d)) for r in range(d)]
            s = {j: sum(query[r] * z[j][r] for r in range(d)) for j in range(n)
                 if real[j] and _sees(i, j, causal, window)}
            top = max(s.values())
            members = [j for j in s if s[j] == top]
            mean = [sum(z[j][r] for j in members) / len(members) for r in range(d)]
            new[i] = [z[i][r] + gamma * (mean[r] - z[i][r]) for r in range(d)]
        path.append(new)
    return path


def as_float(path: list[list[list[Fraction]]]) -> np.ndarray:
    """(layers + 1, n, d) float64 array of an exact path."""
    return np.array([[[float(x) for x in row] for row in layer] for layer in path], dtype=np.float64)


def simulate_exact_integer(tokens, *, alpha, layers: int, A=None) -> list[np.ndarray]:
    """`simulate_exact` for long runs: the same arithmetic on integers over one common denominator.

    Fractions reduce by a gcd after every operation, which dominates at depth (denominators grow like
    (1+α)^k). Here every coordinate of layer k is N/D_k with one integer D_k for all tokens:

        z_i' = z_i + γ (mean_{j∈C_i} z_j − z_i),  γ = a/b
             = ((b − a) |C_i| N_i + a Σ_{j∈C_i} N_j) / (b |C_i| D_k),

    brought to D_{k+1} = b L D_k with L = lcm(1..n) (every |C_i| divides it). Scores compare as integers
    ⟨A N_i, N_j⟩ (the common factor 1/D_k² does not change an argmax), A's rationals brought to one
    denominator too. Ties are exact integer equalities. Returns the float64 positions of every layer.
    """
    rows = [[Fraction(x) for x in row] for row in tokens]
    n, d = len(rows), len(rows[0])
    A = [[Fraction(int(r == c)) for c in range(d)] for r in range(d)] if A is None else [
        [Fraction(x) for x in row] for row in A
    ]
    a_den = math.lcm(*(x.denominator for row in A for x in row))
    A_int = [[int(x * a_den) for x in row] for row in A]
    D = math.lcm(*(x.denominator for row in rows for x in row))
    N = [[int(x * D) for x in row] for row in rows]
    L = math.lcm(*range(1, n + 1))
    alphas = [Fraction(x) for x in _alphas(alpha, layers)]
    path = [np.array([[float(Fraction(x, D)) for x in row] for row in N])]
    for a in alphas:
        g = a / (1 + a)
        ga, gb = g.numerator, g.denominator
        queries = [[sum(A_int[r][c] * N[i][c] for c in range(d)) for r in range(d)] for i in range(n)]
        new = []
        for i in range(n):
            s = [sum(queries[i][r] * N[j][r] for r in range(d)) for j in range(n)]
            top = max(s)
            members = [j for j in range(n) if s[j] == top]
            c = len(members)
            scale = L // c
            new.append([((gb - ga) * c * N[i][r] + ga * sum(N[j][r] for j in members)) * scale for r in range(d)])
        N, D = new, D * gb * L
        path.append(np.array([[float(Fraction(x, D)) for x in row] for row in N]))
    return path


# --------------------------------------------------------------------------------------------
# References for compiled routines.
# --------------------------------------------------------------------------------------------


def _dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Σ_c x[..., c] y[..., c], summed over the coordinates in order: (..., d), (..., d) -> (...)."""
    total = x[..., 0] * y[..., 0]
    for c in range(1, x.shape[-1]):
        total += x[..., c] * y[..., c]
    return total


def rate_samples(D, steps, T, followers, gamma, atol: float, floor: float) -> tuple[int, float, float, float]:
    """Reference for `hardmax.theory.check._rate_samples`, by whole-array NumPy operations.

    A sample is a follower i and a pair of its moves (Δ_{k−1}, Δ_k), k ≥ 1, with a fixed target
    (‖T^k − T^{k−1}‖ ≤ atol), ‖Δ_k‖ ≥ floor, pointing the same way (⟨Δ_k, Δ_{k−1}⟩ ≥ (1 − 1e-6) ‖Δ_k‖ ‖Δ_{k−1}‖);
    its ratio ‖Δ_k‖ / ‖Δ_{k−1}‖ is expected to be (γ_k / γ_{k−1})(1 − γ_{k−1}).

    Args:
        D: (K, n, d) the moves Δ_k. steps: (K, n) their lengths. T: (K + 1, n, d) the snapshot targets.
        followers: (f,) int. gamma: (K,) γ_k.
    Returns:
        (samples, Σ log ratio, Σ log expected over the samples, max |ratio / expected − 1|); zeros without samples.
    """
    # Pairs of moves (k − 1, k) with a follower moving at k: a sample needs ‖Δ_k‖ ≥ floor > 0, so the layers
    # that stood still (most of a converged run) are left out; the samples and their order are the same.
    moves = steps[:, followers]  # (K, f): ‖Δ_k‖
    k = np.nonzero((moves[1:] > 0).any(axis=1))[0] + 1  # layers k ≥ 1 with a move (one of length 0 is no sample)
    size, size_before = moves[k], moves[k - 1]
    dot = _dot(D[1:], D[:-1])[k - 1][:, followers]
    change = T[1:-1] - T[:-2]  # T^k − T^{k−1}
    fixed = (np.sqrt(_dot(change, change))[k - 1] <= atol)[:, followers]  # (pairs, f)
    valid = fixed & (size >= floor) & (dot >= (1 - 1e-6) * size * size_before)
    count = valid.sum(axis=1)  # samples per pair of layers
    if not count.any():
        return 0, 0.0, 0.0, 0.0
    expected = (gamma[k] / gamma[k - 1]) * (1 - gamma[k - 1])  # (pairs,): one value per pair of layers
    ratio = size / np.where(size_before > 0, size_before, 1.0)
    return (int(count.sum()), float(np.log(ratio, out=np.zeros_like(ratio), where=valid).sum()),
            float((count[count > 0] * np.log(expected[count > 0])).sum()),  # pairs with samples only
            float(np.abs(ratio / expected[:, None] - 1, out=np.zeros_like(ratio), where=valid).max()))


def support_growth(Z: np.ndarray, layers, A: np.ndarray, C: np.ndarray) -> float:
    """Reference for `hardmax.theory.support.support_growth`, one direction at a time.

    max(0, max over k in `layers`, over the directions c of C and c = A z_i^k, of (h_{k+1}(c) − h_k(c)) / ‖c‖),
    h_k(c) = max_j ⟨c, z_j^k⟩; zero directions are skipped. Z: (L, n, d), layers: k with k + 1 < L,
    A: (d, d), C: (m, d).
    """
    Z = np.asarray(Z, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    growth = 0.0
    for k in layers:
        directions = list(np.asarray(C, dtype=np.float64)) + [A @ z for z in Z[k]]  # A symmetric: ⟨A z_i, z_j⟩
        for c in directions:
            size = float(np.linalg.norm(c))
            if size > 0:
                growth = max(growth, (float((Z[k + 1] @ c).max()) - float((Z[k] @ c).max())) / size)
    return growth
