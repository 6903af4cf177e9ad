"""A compiled CPU kernel for hardmax trajectories: one review at a time, every layer, no temporaries.

The torch engine (`step`, `layers`) runs each layer as a dozen batched tensor ops over the whole
(batch, m, m) score tensor; on a CPU most of its time goes to those memory passes and to per-op
dispatch, not to arithmetic. This kernel does the same computation review by review, compiled with
numba, so that everything of one review stays in cache: it checks and measures the review (its peak
coordinate, for `simulate`'s scale-free runs), merges identical tokens (padding dropped), computes
layer 1 in full, then only the followers' rows, and writes the stored layers directly (the others
never leave the review's scratch memory). Reviews run in parallel (`prange`). `solve` (and `simulate`,
its paper spelling) runs it through `paper` as engine "compiled", which the chooser (`_engines.choose`)
takes first for the paper's hardmax layers on a CPU, float32/64, at most a token mask, no gradient and
no attention matrix (`using("compiled")` forces it); the reference loop stays the reference (autograd,
CUDA, any rule) and the tests hold the two to each other.

The rule is the torch step's, to the letter (see `select.select` and `ties`):

    s_ij = ⟨A z_i, z_j⟩ over present j (weight w_j > 0),  own_i = s_ii,  other_i = max_{j ≠ i} s_ij,
    tol_i = tie_rtol · ||z_i||_A · max_j ||z_j||_A,       C_i = {j : s_ij ≥ max(own_i, other_i) − tol_i},
    target_i = z_j if C_i = {j}, else Σ_{j ∈ C_i} w_j z_j / Σ_{j ∈ C_i} w_j,
    z_i ← z_i + γ_k (target_i − z_i)  for present i (absent tokens do not move).

After layer 1 only followers (present tokens with C_i ≠ {i}) are recomputed; a leader keeps its place
while no score in its row reaches its own minus its tolerance (the scores against followers are
read from the followers' rows, s_fℓ = s_ℓf since A is symmetric; those against other leaders are
fixed). Where a leader could lose its place, the review continues with every row computed.

What the theorem predicts keeps a layer cheap as the tokens cluster (issue #25). Followers converge onto
their limits until their positions round to the limit's: rows at one position with one frame label have
the same scores and candidates, so each such group gets one score row and, as a rule, one decision
(`_group_rows`). Near-ties inside a cluster (its members' scores are equal to rounding) are refined against
a champion first, the candidate that beats a top raw score by the most: a row costs O(candidates), not
O(candidates²). Neither changes a verdict: each is the same (★) test, tried in another order or once for
identical inputs; the trajectories are bit for bit those of the kernel before them. A group's score row is
used while it is in cache (the leaders' reach, then its rows' decisions) and never stored: a review's scratch
is O(n·d), not an n × n matrix, which at n = 3,200 (82 MB of scores) made every layer memory-bound.

Dot products are summed over the d coordinates in order. On the test batches that reproduces the
torch engine bit for bit, but a BLAS may sum differently, so a score can differ from torch's in the
last bit; identical tokens are merged before the first layer, so their ties are exact anyway.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from hardmax._numba import numba, parallel
from hardmax.dynamics._engines.ties import TIE_FRAME

# NumPy's error model: a float division by zero gives inf/NaN as in NumPy instead of raising. Raised in a
# `prange` body, an exception ends that worker's remaining reviews silently (seen: reviews left unwritten),
# and Python's model also costs a zero test per division.
_JIT = dict(cache=True, error_model="numpy")
# The per-row helpers (`_row_weights`, `_scores`, `_decide`, `_target`) are inlined into the layer loops
# (numba's IR inlining): called per row, their ~40 array arguments cost more than a follower's whole row of
# scores (measured: 500 layers of 200 moving tokens 32 -> 25 ms, the snapshots of their 501 layers 21 -> 13 ms;
# the first compilation ~7 s longer, once, cached after).
_INLINE = dict(inline="always", **_JIT)


# the threading layer (work-queue: no spinning workers) is chosen where numba is imported, and the parallel kernels
# run one at a time on a given thread count: hardmax._numba.parallel


@numba.njit(**_JIT)
def _mix(h):
    """The splitmix64 finaliser of a uint64 hash (scalars only: the call compiles away)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@numba.njit(**_JIT)
def deduplicate_review(z, bits, mask, multipliers, slot, distinct, weights):
    """Merge identical real rows of one review (value equality: -0.0 == 0.0).

    z: (n, d) tokens; bits: (n, d) the same memory as unsigned integers; mask: (n,) bool, True for real
    tokens; multipliers: (d,) odd uint64 constants of the hash. Writes slot (n,) the distinct-token
    index of each real token (-1 for masked ones, which neither attend nor are attended to), distinct
    (≥ m, d) the distinct tokens in order of first appearance and weights (≥ m,) their
    multiplicities. Returns m, the number of distinct real tokens.

    An open-addressing hash table of the rows: a linear hash of their bits (independent products,
    so it vectorises), then a splitmix64 finaliser; every hit is confirmed by comparing the values,
    so a collision costs a probe, never a wrong merge.
    """
    n, d = z.shape
    size = 16
    while size < 2 * n:
        size *= 2
    table = np.full(size, -1, np.int64)  # distinct-token index stored in each bucket, -1 = empty
    hashes = np.empty(size, np.uint64)
    m = 0
    for t in range(n):
        slot[t] = -1
        if not mask[t]:
            continue
        h = np.uint64(0)
        for k in range(d):
            b = np.uint64(bits[t, k]) if z[t, k] != 0 else np.uint64(0)  # -0.0 and 0.0: the same point
            h += b * multipliers[k]
        h = _mix(h)
        bucket = np.int64(h & np.uint64(size - 1))
        while True:
            g = table[bucket]
            if g < 0:  # a new distinct token
                table[bucket] = m
                hashes[bucket] = h
                for k in range(d):
                    distinct[m, k] = z[t, k]
                weights[m] = 1
                slot[t] = m
                m += 1
                break
            if hashes[bucket] == h:
                same = True
                for k in range(d):
                    if distinct[g, k] != z[t, k]:
                        same = False
                        break
                if same:
                    weights[g] += 1
                    slot[t] = g
                    break
            bucket = (bucket + 1) & (size - 1)
    return m


@numba.njit(**_INLINE)
def _scores(rows, count, q, zT, m, S):
    """S[p, j] = ⟨q_i, z_j⟩ for the first `count` rows i = rows[p] and every j < m.

    Summed over k in order; zT (d, m) holds the tokens transposed so that the innermost loop, over j,
    is contiguous and vectorises.
    """
    d = q.shape[1]
    for p in range(count):
        i = rows[p]
        qi = q[i, 0]
        for j in range(m):
            S[p, j] = qi * zT[0, j]
        for k in range(1, d):
            qi = q[i, k]
            for j in range(m):
                S[p, j] += qi * zT[k, j]


@numba.njit(**_JIT)
def _row_parts(i, org, off, A, Aabs, identity, qt, qo):
    """qt = A·org[i], qo = A·off[i] (into the scratch arrays); returns ‖|A||org[i]|‖, ‖|A||off[i]|‖."""
    d = org.shape[1]
    ts2 = org[0, 0] * 0
    os2 = ts2
    for k in range(d):
        if identity:
            qt[k] = org[i, k]
            qo[k] = off[i, k]
            at = abs(org[i, k])
            ao = abs(off[i, k])
        else:
            qt[k] = 0
            qo[k] = 0
            at = ts2 * 0
            ao = ts2 * 0
            for c in range(d):
                qt[k] += org[i, c] * A[c, k]
                qo[k] += off[i, c] * A[c, k]
                at += abs(org[i, c]) * Aabs[c, k]
                ao += abs(off[i, c]) * Aabs[c, k]
        ts2 += at * at
        os2 += ao * ao
    return np.sqrt(ts2), np.sqrt(os2)


@numba.njit(**_JIT)
def _anchored_beats(i, l, j, zc, off, org, qt, qo, t_size, o_size, wn, rtol):
    """`ties._split_at_origin` for one pair of anchored keys l, j of row i (a key at a fixed position, or the
    row itself: fixed part F and moving part M). Returns 1 (l beats j), 0 (it does not), or −1 when the
    steady part ⟨A t, F_l − F_j⟩ is beyond (★)'s bound and the ordinary rule decides."""
    d = zc.shape[1]
    steady = zc[0, 0] * 0  # sums in the tokens' dtype, as the rest of the kernel
    moving = steady
    spread2 = steady
    dm2 = steady
    mix2 = steady
    for k in range(d):
        fl = org[i, k] if l == i else zc[l, k]
        fj = org[i, k] if j == i else zc[j, k]
        ml = off[i, k] if l == i else 0.0
        mj = off[i, k] if j == i else 0.0
        df = fl - fj
        dm = ml - mj
        steady += qt[k] * df
        moving += qt[k] * dm + qo[k] * (df + dm)
        sp = abs(fl) + abs(fj)
        spread2 += sp * sp
        dm2 += dm * dm
        mix2 += (sp + abs(dm)) * (sp + abs(dm))
    if abs(steady) > rtol * wn * np.sqrt(spread2):
        return -1
    return 1 if moving > rtol * (t_size * np.sqrt(dm2) + o_size * np.sqrt(mix2)) else 0


@numba.njit(**_INLINE)
def _listed(m, member, cand):
    """Stage 2': cand[:c] the c candidates in increasing order (when there are several); returns c."""
    c = 0
    for j in range(m):
        if member[j]:
            cand[c] = j
            c += 1
    return c


@numba.njit(**_INLINE)
def _champion(srow, best, c, cand, qi, zc, off, lab, zero):
    """Stage 3 of `_decide`: (top, lead) among the c candidates.

    top: the place of the first candidate with the best raw score (−1 when none: scores that overflowed to NaN).
    lead: the place of the champion, the candidate that beats cand[max(top, 0)] by the largest gap ⟨A z_i, z_j −
    z_t⟩ (offset − offset within a frame): the row's true maximiser when rounding made a converging cluster's raw
    scores equal. Invariant: the choice only orders the tests of stage 5, never their verdicts."""
    d = zc.shape[1]
    top = -1
    for p in range(c):
        if srow[cand[p]] == best:
            top = p
            break
    lead = max(top, 0)
    most = zero
    t = cand[lead]
    for p in range(c):
        j = cand[p]
        gap = zero
        if lab[j] >= 0 and lab[j] == lab[t]:
            for k in range(d):
                gap += qi[k] * (off[j, k] - off[t, k])
        else:
            for k in range(d):
                gap += qi[k] * (zc[j, k] - zc[t, k])
        if gap > most:
            most = gap
            lead = p
    return top, lead


@numba.njit(**_INLINE)
def _champion_frame(c, cand, lead, lab, off, qi, tau, member, zero):
    """Stage 4 of `_decide`: the champion h = cand[lead] against the candidates of its own frame, both ways at
    once (the gap of "j beats h" is exactly minus that of "h beats j": IEEE subtraction and products are symmetric
    in sign, the sum runs in the same order, and the bound is the same).

    Returns (h, home, champion_beaten): h, its frame label (−1: none), and whether a candidate of its frame beats
    it. Invariant: member[j] is True exactly for the candidates h beats (False for every other candidate)."""
    d = off.shape[1]
    h = cand[lead]
    home = lab[h]
    champion_beaten = False
    for p in range(c):
        j = cand[p]
        member[j] = False
        if p == lead or home < 0 or lab[j] != home:
            continue
        gap = zero
        bound = zero
        for k in range(d):
            delta = off[h, k] - off[j, k]
            gap += qi[k] * delta
            bound += abs(delta) * abs(delta)
        if gap != zero:
            reach = tau * np.sqrt(bound)
            if gap > reach:
                member[j] = True
            elif -gap > reach:
                champion_beaten = True
    return h, home, champion_beaten


@numba.njit(**_INLINE)
def _certify(c, cand, srow, best, zc, rtol, wn, qt, sure, zero):
    """Stage 4' of `_decide` (positions only: no token has a frame): sure[p] when `ties._surely_unbeaten`'s bound
    best − s_ij ≤ (tie_rtol − (2d + 4) eps) W ‖|z_j| + μ‖ · 0.999 (μ: the candidates' smallest |coordinates|)
    proves that no candidate beats cand[p] under (★). Invariant: a certified candidate is one stage 5 would keep;
    a converged cluster whose members all stay then costs O(c), not O(c²). qt (d,): scratch."""
    d = zc.shape[1]
    margin = rtol - (2 * d + 4) * np.finfo(zc.dtype).eps
    floor = (2 * d + 8) * np.finfo(zc.dtype).tiny / np.finfo(zc.dtype).eps  # no certificate near underflow
    for k in range(d):
        qt[k] = abs(zc[cand[0], k])
        for p in range(1, c):
            qt[k] = min(qt[k], abs(zc[cand[p], k]))
    for p in range(c):
        j = cand[p]
        size = zero
        for k in range(d):
            size += (abs(zc[j, k]) + qt[k]) * (abs(zc[j, k]) + qt[k])
        reach = (margin * 0.999) * wn * np.sqrt(size)
        sure[p] = margin > 0 and best - srow[j] <= reach and reach >= floor


@numba.njit(**_INLINE)
def _verdicts(i, c, cand, member, lead, champion_beaten, certify, sure, h, home, zc, off, org, lab, fixed, qi,
              A, Aabs, identity, qt, qo, wn, rtol, tau, zero):
    """Stage 5 of `_decide`: every candidate j stays unless another candidate l beats it by (★) — on differences
    of tokens (offset − offset within a frame, scale |z_l − z_j|; else position − position, scale |z_l| + |z_j|),
    anchored keys in different frames by `_anchored_beats` — pairwise as in `ties.refine`, the pairs stages 4 and
    4' decided skipped. The tests are written out inline: a call per pair costs ten times the arithmetic.

    Returns (count, single, shared): |C_i| counted once per distinct token, its member when there is one, and
    whether the decision holds for every row at the same position with the same frame label. Invariant: member[j]
    is True exactly for the members of C_i on return (read through cand, so an earlier flag changes nothing)."""
    d = zc.shape[1]
    framed = lab[i] >= 0
    ready = False  # qt, qo, t_size, o_size of a framed row (`_row_parts`), computed when a pair needs them
    t_size = 0.0
    o_size = 0.0
    count = 0
    single = -1
    shared = True
    for p in range(c):
        j = cand[p]
        beaten = member[j] or (p == lead and champion_beaten)
        decided = beaten or (certify and sure[p])  # a certified key stays without its pairs
        for r in range(0 if decided else c):
            if r == p:
                continue
            l = cand[r]
            if home >= 0 and (l == h or p == lead) and lab[l] == lab[j]:
                continue  # a pair of the champion's frame with the champion: decided in stage 4
            if framed and lab[l] != lab[j]:
                shared = False
            if framed and lab[l] != lab[j] and (l == i or fixed[l]) and (j == i or fixed[j]):
                # Anchored keys (the row itself, or at a fixed position) in different frames: the split.
                # (Pairs in one frame are differenced offset − offset already.)
                if not ready:
                    t_size, o_size = _row_parts(i, org, off, A, Aabs, identity, qt, qo)
                    ready = True
                verdict = _anchored_beats(i, l, j, zc, off, org, qt, qo, t_size, o_size, wn, rtol)
                if verdict >= 0:
                    if verdict == 1:
                        beaten = True
                        break
                    continue
            # gap > rtol W ‖scale‖ with a bound ≥ 0: a gap ≤ 0 never beats, so the bound is computed only
            # for a positive gap (the same verdict).
            same = lab[j] >= 0 and lab[j] == lab[l]
            gap = zero
            if same:
                for k in range(d):
                    gap += qi[k] * (off[l, k] - off[j, k])
            else:
                for k in range(d):
                    gap += qi[k] * (zc[l, k] - zc[j, k])
            if not gap > zero:
                continue
            bound = zero
            if same:
                for k in range(d):
                    size = abs(off[l, k] - off[j, k])
                    bound += size * size
            else:
                for k in range(d):
                    size = abs(zc[l, k]) + abs(zc[j, k])
                    bound += size * size
            if gap > tau * np.sqrt(bound):
                beaten = True
                break
        member[j] = not beaten
        if not beaten:
            count += 1
            single = j
    return count, single, shared


@numba.njit(**_INLINE)
def _decide(i, srow, zc, off, lab, fixed, m, qi, wn, tol, rtol, member, cand, lowest,
            org, A, Aabs, identity, qt, qo, sure, certify):
    """The attention set C_i from row i's scores srow (m,), rule (★) of `ties`, into member (m,) bool.

    qi (d,): A z_i; wn: W = max_j ‖ |A| |z_j| ‖ (`ties.query_size`); tol: the coarse tolerance.
    A row in a frame (origin org[i], offset off[i]) decides pairs of anchored keys (at fixed positions, or
    itself) by `_anchored_beats`. qt, qo: (d,) scratch for A·org[i] and A·off[i]. With `certify` (positions
    only: no token has a frame), candidates that `ties._surely_unbeaten`'s bound certifies are kept without
    their pairs (sure: (m,) scratch).

    Stages: 1 the row's maxima s_ii and max_{j≠i} s_ij and 2 the keys within the coarse tolerance of the best (the
    common path, written out below: one key is the usual answer, and these two passes are most of a row's decision;
    as inlined functions their array arguments cost the whole kernel 1–2 %, measured), then, for several keys,
    functions inlined by numba: 2' `_listed` (the keys in order), 3 `_champion` (the likely maximiser, tried first),
    4 `_champion_frame` (its own frame, both ways at once) and 4' `_certify` (keys provably unbeaten), 5
    `_verdicts` (the remaining pairs by (★)); if rounding left no candidate unbeaten, the largest raw score stays.
    Whether some l beats j does not depend on the order the l are tried in: the stages order the tests so that a
    row usually costs O(candidates), not O(candidates²), and never change a verdict.

    Returns (own, other, count, single, shared): s_ii, max_{j≠i} s_ij, |C_i| counted once per distinct token,
    its member when there is one, and whether the decision holds for every row at the same position with the
    same frame label (it does unless a pair of keys in different frames was met in a framed row).
    """
    # Stage 1: the row's maxima. Four running maxima, not one: a single one is a chain of dependent compares
    # (latency-bound); the maximum does not depend on the order. srow is as given afterwards.
    own = srow[i]
    srow[i] = lowest
    o0 = o1 = o2 = o3 = lowest
    head = m - m % 4
    for j in range(0, head, 4):
        o0 = max(o0, srow[j])
        o1 = max(o1, srow[j + 1])
        o2 = max(o2, srow[j + 2])
        o3 = max(o3, srow[j + 3])
    for j in range(head, m):
        o0 = max(o0, srow[j])
    other = max(max(o0, o1), max(o2, o3))
    srow[i] = own
    # Stage 2: the keys j with s_ij ≥ best − tol (every key beyond the tolerance is out of C_i), member[j] True
    # exactly for them, in one pass that vectorises; `where`, the sum of their indices, is the key when there is one.
    best = own if own > other else other
    threshold = best - tol
    count = 0
    where = 0
    for j in range(m):
        hit = srow[j] >= threshold
        member[j] = hit
        count += hit
        where += j * hit
    if count == 1:
        return own, other, 1, where, True
    if count == 0:  # no candidate: scores that overflowed to inf or NaN (the caller scales or refuses the review)
        return own, other, 0, -1, True
    c = _listed(m, member, cand)
    zero = zc[0, 0] * 0  # sums in the tokens' dtype
    top, lead = _champion(srow, best, c, cand, qi, zc, off, lab, zero)
    tau = rtol * wn
    h, home, champion_beaten = _champion_frame(c, cand, lead, lab, off, qi, tau, member, zero)
    if certify:
        _certify(c, cand, srow, best, zc, rtol, wn, qt, sure, zero)
    count, single, shared = _verdicts(i, c, cand, member, lead, champion_beaten, certify, sure, h, home, zc, off,
                                      org, lab, fixed, qi, A, Aabs, identity, qt, qo, wn, rtol, tau, zero)
    if count == 0 and top >= 0:  # rounding left no candidate unbeaten: keep the largest raw score
        member[cand[top]] = True
        single = cand[top]
        count = 1
    return own, other, count, single, shared


@numba.njit(**_INLINE)
def _target(i, count, single, member, zc, off, org, lab, fixed, w, g, new_off, new_org, new_lab, target):
    """Row i's offset after the layer, in its frame after the layer, into new_off/new_org/new_lab.

    A row that follows one token of another frame moves into that frame (see `ties`); the target is
    the member (or the weighted mean of the members) expressed in the row's frame.
    """
    m, d = zc.shape
    li = lab[i]
    for k in range(d):
        new_org[i, k] = org[i, k]
        new_off[i, k] = off[i, k]
    if count == 1:
        if single == i:  # a leader: no move
            new_lab[i] = li
            return
        j = single
        if lab[j] >= 0 and lab[j] != li:
            li = lab[j]
            for k in range(d):
                new_org[i, k] = org[j, k]
                new_off[i, k] = zc[i, k] - org[j, k]
        same = lab[j] == li and li >= 0
        for k in range(d):
            target[k] = off[j, k] if same else zc[j, k] - new_org[i, k]
    else:
        # Tied between tokens at fixed positions only (leaders: framed, offset 0): the target t is fixed,
        # and the row moves into a frame of its own with origin t (`select.select`, `ties.TIE_FRAME`).
        all_fixed = True
        for j in range(m):
            if member[j] and not (j != i and fixed[j]):
                all_fixed = False
                break
        total = w[0] * 0
        for k in range(d):
            target[k] = 0
        for j in range(m):
            if member[j]:
                same = lab[j] == li and li >= 0
                total += w[j]
                for k in range(d):  # t in absolute coordinates for a tie frame, else in the row's frame
                    rel = zc[j, k] if all_fixed else (off[j, k] if same else zc[j, k] - new_org[i, k])
                    target[k] += w[j] * rel
        for k in range(d):
            target[k] = target[k] / total
        if all_fixed:
            stay = li == TIE_FRAME + i
            for k in range(d):
                if org[i, k] != target[k]:
                    stay = False
            if not stay:
                for k in range(d):
                    new_org[i, k] = target[k]
                    new_off[i, k] = zc[i, k] - target[k]
            li = TIE_FRAME + i
            for k in range(d):
                target[k] = 0
    new_lab[i] = li
    for k in range(d):
        new_off[i, k] = new_off[i, k] + g * (target[k] - new_off[i, k])


@numba.njit(**_INLINE)
def _row_weights(i, zc, q, A, Aabs, identity, wi):
    """q[i] = A z_i (summed over c in order) and wi = |A| |z_i|; returns ‖wi‖."""
    d = zc.shape[1]
    if identity:
        for k in range(d):
            wi[k] = abs(zc[i, k])
    else:
        for k in range(d):
            q[i, k] = zc[i, 0] * A[0, k]
            wi[k] = abs(zc[i, 0]) * Aabs[0, k]
        for c in range(1, d):
            zi = zc[i, c]
            for k in range(d):
                q[i, k] += zi * A[c, k]
                wi[k] += abs(zi) * Aabs[c, k]
    v = wi[0] * wi[0]
    for k in range(1, d):
        v += wi[k] * wi[k]
    return np.sqrt(v)


@numba.njit(**_JIT)
def _peak(z, mask, out, where):
    """The largest |coordinate| of the real tokens of one review z (n, d), and whether every coordinate
    (padding included) is finite; layer 0 is copied to out[where] in the same pass (where ≥ 0), so the
    check costs no extra pass over the tokens."""
    n, d = z.shape
    peak = 0.0  # float64 holds every float32 or float64 |coordinate| exactly; no z[0, 0] in an empty review
    finite = True
    for t in range(n):
        top = 0.0
        for k in range(d):
            v = z[t, k]
            if where >= 0:
                out[where, t, k] = v
            a = abs(v)
            finite &= a < np.inf
            top = max(top, a)
        if mask[t]:
            peak = max(peak, top)
    return peak, finite


@numba.njit(**_JIT)
def _write(out, where, z, slot, zc):
    """out[where] (n, d) = every token's position: its distinct token zc[slot[t]], padding z[t] as given."""
    n, d = z.shape
    for t in range(n):
        s = slot[t]
        if s >= 0:
            for k in range(d):
                out[where, t, k] = zc[s, k]
        else:
            for k in range(d):
                out[where, t, k] = z[t, k]


@numba.njit(**_JIT)
def _group_rows(rows, count, zc, zbits, lab, multipliers, table, hashes, group, reps, start, ordered):
    """Group rows[:count] by position (value equality) and frame label: P groups, written as reps[:P] (each
    group's first row), start[:P + 1] and ordered[:count] (the rows' places in rows, group by group).

    Rows at one position have the same scores, hence the same candidates, and (`_decide`'s `shared`) usually
    the same attention set: followers that have converged onto their leader to the last bit of their position
    (their offsets still differ) are decided once per group. Returns P. table (≥ 2 count, a power of two),
    hashes: the hash table's scratch; zbits: zc's memory as unsigned integers.
    """
    size = table.shape[0]
    for b in range(size):
        table[b] = -1
    P = 0
    d = zc.shape[1]
    for p in range(count):
        i = rows[p]
        h = np.uint64(lab[i]) * np.uint64(0x9E3779B97F4A7C15)
        for k in range(d):
            h += (np.uint64(zbits[i, k]) if zc[i, k] != 0 else np.uint64(0)) * multipliers[k]  # -0.0 == 0.0
        h = _mix(h)
        bucket = np.int64(h & np.uint64(size - 1))
        while True:
            g = table[bucket]
            if g < 0:
                table[bucket] = P
                hashes[bucket] = h
                reps[P] = i
                group[p] = P
                P += 1
                break
            if hashes[bucket] == h and lab[reps[g]] == lab[i]:
                same = True
                for k in range(d):
                    same = same and zc[reps[g], k] == zc[i, k]
                if same:
                    group[p] = g
                    break
            bucket = (bucket + 1) & (size - 1)
    for g in range(P + 1):
        start[g] = 0
    for p in range(count):
        start[group[p] + 1] += 1
    for g in range(P):
        start[g + 1] += start[g]
    for p in range(count):  # start[g] runs through group g, then is restored below
        ordered[start[group[p]]] = p
        start[group[p]] += 1
    for g in range(P, 0, -1):
        start[g] = start[g - 1]
    start[0] = 0
    return P


@numba.njit(**_JIT)
def _ungrouped(rows, count, reps, start, ordered):
    """`_group_rows` with every row a group of its own: returns count."""
    for p in range(count):
        reps[p] = rows[p]
        start[p] = p
        ordered[p] = p
    start[count] = count
    return count


@numba.njit(**_JIT)
def _review(z, bits, mask, multipliers, A, identity, gammas, rtol, slots, out):
    """Layers 1.. of one review: z (n, d), mask (n,); layer k is written to out[slots[k]] (out (s, n, d))
    when slots[k] ≥ 0 (layer 0 is `_peak`'s). Returns 1 if a leader lost its place (the review then
    finished with every row computed), else 0.

    The review's tokens are merged once (`deduplicate_review`), then each layer runs the stages: the scores'
    inputs of the rows that moved (block "refresh" below; the leaders have not moved), rows grouped by position and
    frame (`_group_rows`), per group one score row (`_scores`) and the candidate sets (`_decide`), the step into
    new frames (`_target`), the leaders' places checked (`_decide` on a leader's row that came near), the frames
    committed (block "commit": fixed[i] says whether token i sits at its frame's origin); after layer 1 the
    followers and leaders are listed and only the followers' rows are computed. The per-row stages are functions
    inlined by numba; the per-layer blocks are written out here (as inlined functions they cost the kernel 1.5 %,
    measured). The scratch arrays below are allocated once per review (O(n·d), no n × n matrix)."""
    n, d = z.shape
    layers = gammas.shape[0]
    slot = np.empty(n, np.int64)
    off = np.empty((n, d), z.dtype)
    w = np.empty(n, z.dtype)
    m = deduplicate_review(z, bits, mask, multipliers, slot, off, w)
    if layers == 0 or m == 0:  # nothing moves (no real token: every slot is −1, so `_write` copies z)
        for layer in range(layers):
            if slots[layer + 1] >= 0:
                _write(out, slots[layer + 1], z, slot, off)
        return 0
    # Frames (see `ties`): position = origin + offset for a token in a leader's frame (label ≥ 0),
    # offset alone in the absolute frame (label −1).
    zc = off[:m].copy()
    org = np.zeros((m, d), z.dtype)
    lab = np.full(m, -1, np.int64)
    new_off = np.empty((m, d), z.dtype)
    new_org = np.empty((m, d), z.dtype)
    new_lab = np.empty(m, np.int64)
    Aabs = np.abs(A)
    eps = np.finfo(z.dtype).eps
    coarse = 2 * (rtol + d * eps)
    uT = np.empty((d, m), z.dtype)
    q = zc if identity else np.empty((m, d), z.dtype)
    wi = np.empty(d, z.dtype)
    wnorm = np.empty(m, z.dtype)
    norm = np.empty(m, z.dtype)
    row = np.empty((1, m), z.dtype)
    one = np.empty(1, np.int64)
    member = np.empty(m, np.bool_)
    cand = np.empty(m, np.int64)
    sure = np.empty(m, np.bool_)
    fixed = np.zeros(m, np.bool_)  # at a fixed position: in a frame with offset 0 (`ties.Frames.fixed`)
    target = np.empty(d, z.dtype)
    qt = np.empty(d, z.dtype)
    qo = np.empty(d, z.dtype)
    own = np.empty(m, z.dtype)
    other = np.empty(m, z.dtype)
    leader = np.zeros(m, np.bool_)
    reach = np.empty(m, z.dtype)
    everyone = np.arange(m)
    followers = np.empty(m, np.int64)
    leaders_list = np.empty(m, np.int64)
    nl = 0
    lowest = np.full(1, -np.inf, z.dtype)[0]
    zbits = zc.view(bits.dtype)
    size = 16
    while size < 2 * m:
        size *= 2
    table = np.empty(size, np.int64)
    hashes = np.empty(size, np.uint64)
    group = np.empty(m, np.int64)
    reps = np.empty(m, np.int64)
    start = np.empty(m + 1, np.int64)
    ordered = np.empty(m, np.int64)
    grouping = False
    f = 0
    full = True  # layer 1 computes every row
    broke = 0
    for layer in range(layers):
        g_step = gammas[layer]
        redo = True
        while redo:  # once, or twice when a leader loses its place (the layer then again with every row)
            redo = False
            rows = everyone if full else followers
            count = m if full else f
            # Refresh: the rows that may have moved since the last layer (all of them at first, then the
            # followers): their column of uT, query q_i = A z_i, weight ‖ |A| |z_i| ‖ and norm; W and the tolerance.
            for p in range(count):
                i = rows[p]
                for k in range(d):
                    uT[k, i] = zc[i, k]
                wnorm[i] = _row_weights(i, zc, q, A, Aabs, identity, wi)
                v = zc[i, 0] * zc[i, 0]
                for k in range(1, d):
                    v += zc[i, k] * zc[i, k]
                norm[i] = np.sqrt(v)
            largest = norm[0]
            wmax = wnorm[0]
            for i in range(1, m):
                if norm[i] > largest:
                    largest = norm[i]
                if wnorm[i] > wmax:
                    wmax = wnorm[i]
            tol = coarse * wmax * largest
            # Groups of rows at one position with one frame label: one score row each, for reps[g]. Tokens are
            # distinct at layer 1 and rows come to share a position only as they converge, so grouping is tried
            # every 8 layers and kept while it finds groups (every row its own group otherwise: the same verdicts).
            if full or layer % 8 == 0 or grouping:
                P = _group_rows(rows, count, zc, zbits, lab, multipliers, table, hashes, group, reps, start,
                                ordered) if layer > 0 else _ungrouped(rows, count, reps, start, ordered)
                grouping = P < count
            else:
                P = _ungrouped(rows, count, reps, start, ordered)
            if not full:
                for p in range(nl):
                    j = leaders_list[p]
                    reach[j] = other[j]
            for g in range(P):
                # The group's score row, used while it is in cache: the leaders' reach, then the rows' decisions.
                one[0] = reps[g]
                _scores(one, 1, q, uT, m, row)
                srow = row[0]
                if not full:
                    for p in range(nl):
                        j = leaders_list[p]
                        if srow[j] > reach[j]:
                            reach[j] = srow[j]
                shared = False
                for t in range(start[g], start[g + 1]):
                    i = rows[ordered[t]]
                    if not shared:  # the group's first row, or every row of a group whose decision is its own
                        own_i, other_i, c, single, shared = _decide(i, srow, zc, off, lab, fixed, m, q[i], wmax,
                                                                    tol, rtol, member, cand, lowest,
                                                                    org, A, Aabs, identity, qt, qo, sure, False)
                    if layer == 0:  # (tokens are distinct at layer 0: every group is one row)
                        own[i] = own_i
                        other[i] = other_i
                        leader[i] = c == 1 and single == i
                    _target(i, c, single, member, zc, off, org, lab, fixed, w, g_step, new_off, new_org, new_lab,
                            target)
                    if c == 1 and single == i and new_lab[i] < 0:  # a leader gets a frame of its own
                        new_lab[i] = i
                        for k in range(d):
                            new_org[i, k] = new_off[i, k]
                            new_off[i, k] = 0
            if not full:
                # A leader stays one while no score in its row comes near its own: its best score on another token
                # at layer 1, or on a follower now (s_fl = s_lf up to rounding, which the coarse tolerance covers).
                # A near one has its row decided in full by rule (★); should it lose its place, the layer is
                # computed again with every row, and so is every layer after it.
                for p in range(nl):
                    j = leaders_list[p]
                    if reach[j] >= own[j] - tol:
                        one[0] = j
                        _scores(one, 1, q, uT, m, row)
                        _, _, c, single, _ = _decide(j, row[0], zc, off, lab, fixed, m, q[j], wmax, tol,
                                                     rtol, member, cand, lowest,
                                                     org, A, Aabs, identity, qt, qo, sure, False)
                        if c != 1 or single != j:
                            broke = 1
                if broke:
                    full = True
                    redo = True
        # Commit: the rows' new frames (label, offset, origin: `_target` wrote them) become the layer's, and their
        # positions zc = origin + offset (in a frame) or offset (absolute); fixed[i]: offset exactly 0 in a frame.
        for p in range(count):
            i = rows[p]
            lab[i] = new_lab[i]
            for k in range(d):
                off[i, k] = new_off[i, k]
                org[i, k] = new_org[i, k]
                zc[i, k] = org[i, k] + off[i, k] if lab[i] >= 0 else off[i, k]
            still = lab[i] >= 0
            for k in range(d):
                still = still and off[i, k] == 0
            fixed[i] = still
        if slots[layer + 1] >= 0:
            _write(out, slots[layer + 1], z, slot, zc)
        if layer == 0 and layers > 1:  # the followers (C_i ≠ {i}) and the leaders, in increasing order
            for i in range(m):
                if not leader[i]:
                    followers[f] = i
                    f += 1
                else:
                    leaders_list[nl] = i
                    nl += 1
            full = False
    return broke


@numba.njit(parallel=True, **_JIT)
def _reviews(z, bits, mask, multipliers, A, identity, gammas, rtol, safe, slots, out, broke, peak):
    """Every review b of z (batch, n, d) in parallel: layer 0 and the peak by `_peak`, layers 1.. by `_review`.

    out (s, batch, n, d) gets layer k at out[slots[k], b]; peak (batch,) each review's largest |coordinate| (NaN:
    a coordinate is NaN or inf, nothing after layer 0 written); broke (batch,) int8, 1 where a leader lost its
    place. A review whose peak has frexp exponent |e| > safe is left after layer 0 for the caller to run scaled.
    Reviews share nothing but the read-only A, gammas and multipliers, so the order of workers does not matter."""
    for b in prange(z.shape[0]):
        peak[b], finite = _peak(z[b], mask[b], out[:, b], slots[0])
        if not finite:  # reported by the caller; nothing computed on NaN or inf
            peak[b] = np.nan
            continue
        if peak[b] > 0 and abs(math.frexp(peak[b])[1]) > safe:  # the caller runs it scaled
            continue
        broke[b] = _review(z[b], bits[b], mask[b], multipliers, A, identity, gammas, rtol, slots, out[:, b])


@numba.njit(**_JIT)
def _snapshot(z, bits, mask, multipliers, A, identity, rtol, same, leader, target):
    """Leaders and attention targets of one configuration z (n, d), positions only (no frames): the torch
    `theory.leaders._snapshot` of one sequence, compiled. Identical tokens merged; each distinct row's set by
    `_decide` with the certificate; leader[t]: every member of C_t within `same` of z_t (and t real);
    target[t]: Σ_{j ∈ C_t} w_j z_j / Σ w_j (0 for a masked token)."""
    n, d = z.shape
    slot = np.empty(n, np.int64)
    zc_all = np.empty((n, d), z.dtype)
    w = np.empty(n, z.dtype)
    m = deduplicate_review(z, bits, mask, multipliers, slot, zc_all, w)
    for t in range(n):
        leader[t] = False
        for k in range(d):
            target[t, k] = 0
    if m == 0:
        return
    zc = zc_all[:m].copy()
    lab = np.full(m, -1, np.int64)
    fixed = np.zeros(m, np.bool_)
    org = np.zeros((m, d), z.dtype)
    Aabs = np.abs(A)
    q = zc if identity else np.empty((m, d), z.dtype)
    wi = np.empty(d, z.dtype)
    wn = zc[0, 0] * 0
    largest = wn
    uT = np.empty((d, m), z.dtype)
    for i in range(m):
        wn = max(wn, _row_weights(i, zc, q, A, Aabs, identity, wi))
        v = zc[i, 0] * zc[i, 0]
        for k in range(1, d):
            v += zc[i, k] * zc[i, k]
        largest = max(largest, np.sqrt(v))
        for k in range(d):
            uT[k, i] = zc[i, k]
    tol = 2 * (rtol + d * np.finfo(z.dtype).eps) * wn * largest
    row = np.empty((1, m), z.dtype)
    one = np.empty(1, np.int64)
    member = np.empty(m, np.bool_)
    cand = np.empty(m, np.int64)
    sure = np.empty(m, np.bool_)
    qt = np.empty(d, z.dtype)
    qo = np.empty(d, z.dtype)
    lowest = np.full(1, -np.inf, z.dtype)[0]
    lead = np.zeros(m, np.bool_)
    mean = np.zeros((m, d), z.dtype)
    for i in range(m):
        one[0] = i
        _scores(one, 1, q, uT, m, row)
        _, _, c, single, _ = _decide(i, row[0], zc, zc, lab, fixed, m, q[i], wn, tol, rtol, member, cand, lowest,
                                     org, A, Aabs, identity, qt, qo, sure, True)
        total = w[0] * 0
        spread = total
        for j in range(single, single + 1) if c == 1 else range(m):  # one member: no pass over the row
            if c == 1 or member[j]:
                total += w[j]
                gap = total * 0
                for k in range(d):
                    mean[i, k] += w[j] * zc[j, k]
                    gap += (zc[j, k] - zc[i, k]) * (zc[j, k] - zc[i, k])
                spread = max(spread, np.sqrt(gap))
        for k in range(d):
            mean[i, k] = mean[i, k] / total
        lead[i] = total > 0 and spread <= same
    for t in range(n):
        s = slot[t]
        if s >= 0:
            leader[t] = lead[s]
            for k in range(d):
                target[t, k] = mean[s, k]


@numba.njit(parallel=True, **_JIT)
def _snapshots(z, bits, mask, multipliers, A, identity, rtol, same, leader, target):
    """`_snapshot` of every configuration b of z (S, n, d) in parallel: leader[b] (n,) and target[b] (n, d) from
    mask[b] (n,) and same[b], the distance within which a set's members count as the token itself."""
    for b in prange(z.shape[0]):
        _snapshot(z[b], bits[b], mask[b], multipliers, A, identity, rtol, same[b], leader[b], target[b])


def hardmax_snapshots(z: np.ndarray, mask: np.ndarray, A: np.ndarray | None, tie_rtol: float, same: np.ndarray,
                      threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Leaders (S, n) bool and attention targets (S, n, d) of S configurations z (S, n, d) by rule (★) on
    positions (no frames), with `same` (S,) the same-point distance of each: what `theory.leaders._snapshot`
    computes, compiled, configurations in parallel. z: C-contiguous float32 or float64; mask (S, n) bool."""
    leader = np.zeros(z.shape[:2], np.bool_)
    target = np.empty_like(z)
    bits = z.view(np.uint32 if z.dtype == np.float32 else np.uint64)
    identity = A is None
    A_arr = np.eye(z.shape[-1], dtype=z.dtype) if A is None else np.ascontiguousarray(A, dtype=z.dtype)
    with parallel(threads):
        _snapshots(z, bits, np.ascontiguousarray(mask), hash_multipliers(z.shape[-1]), A_arr, identity,
                   z.dtype.type(tie_rtol), same.astype(z.dtype), leader, target)
    return leader, target


def hash_multipliers(d: int) -> np.ndarray:
    """(d,) fixed odd 64-bit multipliers of the row hash (a Weyl sequence).

    The torch engine's `dedup.hash_rows` hashes on its own terms; the two need not agree, since each
    confirms every hash hit by comparing values. This one is per review and compiled, for locality."""
    k = np.arange(1, d + 1, dtype=np.uint64)
    return (k * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)


class KernelRun(NamedTuple):
    """What a kernel call reports besides the trajectory.

    broke: (batch,) int8, 1 where a leader lost its place within the tie tolerance (the review was then
        finished with every row computed). peak: (batch,) the largest |coordinate| of each review's real
        tokens, NaN where a coordinate (padding included) is NaN or inf: such a review, and one beyond
        `safe_exponent`, has its layers after 0 left unwritten.
    """

    broke: np.ndarray
    peak: np.ndarray


def hardmax_trajectory(z: np.ndarray, mask: np.ndarray, A: np.ndarray | None, gammas: np.ndarray,
                       tie_rtol: float, out: np.ndarray, threads: int, *,
                       stored: tuple[int, ...] | None = None, safe_exponent: int | None = None) -> KernelRun:
    """Fill out with the hardmax trajectory of z (batch, n, d): out[s] = layer stored[s].

    Args:
        z: C-contiguous float32 or float64 tokens. mask: (batch, n) bool, True for real tokens.
        A: (d, d) SPD in z's dtype, or None for the identity. gammas: (layers,) γ_k = α_k/(1+α_k) in
        z's dtype. tie_rtol: relative tie tolerance. out: (len(stored), batch, n, d), preallocated,
        C-contiguous. threads: workers. stored: increasing layers to write (default all, 0..layers);
        only these are written, the others live in each review's scratch memory. safe_exponent: a
        review whose peak p has frexp exponent |e| > safe_exponent (p ≥ 2^safe_exponent, or 0 < p <
        2^-(safe_exponent+1)) has its layers after 0 left unwritten, for the caller to run scaled; None:
        every review is computed (its scores may then overflow or underflow).
    Returns:
        `KernelRun` (which reviews needed full layers, and each review's peak coordinate).
    """
    if mask.shape != z.shape[:2]:  # a pair mask (batch, n, n) is not a token mask: never read as one
        raise ValueError(f"the compiled kernel takes a token mask of shape {z.shape[:2]}, got {mask.shape}; a pair "
                         "mask (who attends to whom) runs on the reference loop")
    layers = gammas.shape[0]
    stored = tuple(range(layers + 1)) if stored is None else tuple(int(k) for k in stored)
    if any(not 0 <= k <= layers for k in stored) or list(stored) != sorted(set(stored)):
        raise ValueError(f"stored must be strictly increasing layers in 0..{layers}, got {stored}")
    slots = np.full(layers + 1, -1, np.int64)
    slots[list(stored)] = np.arange(len(stored))
    if out.shape != (len(stored), *z.shape):
        raise ValueError(f"out must have shape {(len(stored), *z.shape)}, got {out.shape}")
    bits = z.view(np.uint32 if z.dtype == np.float32 else np.uint64)
    identity = A is None
    A_arr = np.eye(z.shape[-1], dtype=z.dtype) if A is None else np.ascontiguousarray(A, dtype=z.dtype)
    broke = np.zeros(z.shape[0], np.int8)
    peak = np.zeros(z.shape[0], z.dtype)
    with parallel(threads):
        _reviews(z, bits, np.ascontiguousarray(mask), hash_multipliers(z.shape[-1]), A_arr, identity,
                 gammas.astype(z.dtype, copy=False), z.dtype.type(tie_rtol),
                 np.iinfo(np.int64).max if safe_exponent is None else int(safe_exponent), slots, out, broke,
                 peak)
    return KernelRun(broke=broke, peak=peak)
