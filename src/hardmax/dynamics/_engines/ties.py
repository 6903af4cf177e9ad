"""The hardmax tie rule: which scores are equal, decided from differences of tokens, at any depth.

C_i = argmax_j ⟨A z_i, z_j⟩ keeps every maximiser. In floating point two scores of an exact tie differ
by rounding, so a tolerance is unavoidable; the question is what it is relative to. Comparing the
scores s_ij and s_il themselves loses all precision once z_j and z_l are close: a follower converging
to its leader v becomes "tied" with v for every query once ⟨A z_i, z_f − v⟩ drops below the rounding
of a score (after ~78 layers in float64 and ~28 in float32 at α = 1/2), then counts as a second copy
of v and tips every exact tie v takes part in. The rule here decides a near-tie from the *difference*
of the two candidates instead, whose rounding error is relative to their distance, not to their norms:

    j ∈ C_i  ⟺  no candidate l beats j:
    ⟨A z_i, z_l − z_j⟩ > tie_rtol · W · ‖r_lj‖,   W = max_j ‖ |A| |z_j| ‖                          (★)

with r_lj = |z_l − z_j| (entrywise) when l and j live in the same frame (below) and their difference
is taken offset − offset, and r_lj = |z_l| + |z_j| otherwise (what the rounding of two positions
scales with), and W the largest query (a query coordinate that should be 0, as the mean of a
symmetric tie, carries rounding of the size of the tokens averaged). The right-hand side bounds the
rounding of the dot product, of A z_i and of the positions, so an exact tie stays a tie; within a
frame it scales with the distance of the two candidates, so a strict inequality stays strict however
close they come. Pairwise, not only against the maximiser: a follower is then always compared with
its own leader, in their frame.

The second half of the design is *frames*. A token that follows a leader (C_i = {ℓ}, or a token that
already lives in ℓ's frame) is stored as ``origin + offset`` with origin
= ℓ's position, frozen when ℓ became a leader. Its offset shrinks like (1+α)^-k with full relative
precision, so z_f − ℓ (the offset itself) never rounds to 0 even when z_f rounds to ℓ, and (★) keeps
the follower out of every tie it takes no part in. Candidates in the same frame are differenced
offset − offset; others position − position.

A row tied between tokens at fixed positions (leaders) has a fixed target t, the mean of their
positions; it is given a frame of its own with origin t (`TIE_FRAME`), so that its distance to t is an
offset too. Between such keys and itself, a framed row splits its gap into a part that is the same at
every layer and one that shrinks with its offset, and decides the first with (★) and, when that is an
exact tie, the second against a bound proportional to the offset (`_split_at_origin`). This is what a
follower converging to a point on the boundary of a face needs: its gap to a vertex of the face's
boundary shrinks like (1+α)^-k and would fall under (★)'s bound after ~72 float64 layers, and the limit
point itself ties its own score with the face's vertices (S points are A-projections of the origin).

Only rows whose scores come within a coarse, Cauchy–Schwarz tolerance of their maximum are refined
with (★); every other row is decided by the one max of its scores, so the common case costs nothing.
The refinement (`refine`) gives every pair's verdicts without trying every pair: a champion first, a
certificate from the raw scores for positions-only snapshots, (★)'s antisymmetry, and every pair only for
what is left (issue #25: a cluster converged to rounding used to cost O(c²) per row and layer).

Used by `step` (one layer, no frames: every offset is the position) and `layers` (frames carried
over layers); `kernel` is a compiled copy of the same rule.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

# Frame labels from here on are tie frames: TIE_FRAME + the row's index (one frame per row), origin the
# fixed target of a tie between tokens at fixed positions. Below it, a frame is a leader's (its label).
TIE_FRAME = 1 << 40


class Frames(NamedTuple):
    """Positions of tokens as origin + offset (see the module docstring).

    Attributes:
        origin: (batch, m, d) the frame's origin: the position its leader had when it became one; 0
            for tokens in the absolute frame.
        offset: (batch, m, d) position − origin.
        label: (batch, m) int64 frame id, the leader's token label; −1 for the absolute frame.
    """

    origin: Tensor
    offset: Tensor
    label: Tensor

    @staticmethod
    def absolute(tokens: Tensor) -> Frames:
        """The absolute frame of `tokens` (batch, m, d): origin 0, offset the positions, label −1."""
        return Frames(torch.zeros_like(tokens), tokens, torch.full(tokens.shape[:-1], -1, dtype=torch.long,
                                                                    device=tokens.device))

    def fixed(self) -> Tensor:
        """(batch, m) bool: tokens at a fixed position, leaders (in a frame, offset exactly 0)."""
        return (self.label >= 0) & (self.offset == 0).all(-1)

    def positions(self) -> Tensor:
        """(batch, m, d) origin + offset (the absolute frame's positions exactly)."""
        return torch.where((self.label >= 0).unsqueeze(-1), self.origin + self.offset, self.offset)


def abs_queries(tokens: Tensor, A: Tensor | None) -> Tensor:
    """(batch, r, d) |A| |z_i| (entrywise absolute values)."""
    return tokens.abs() if A is None else tokens.abs() @ A.abs()


def query_size(tokens: Tensor, present: Tensor, A: Tensor | None) -> Tensor:
    """(batch, 1) W = max_j ‖ |A| |z_j| ‖ over present tokens: the rounding scale of any query.

    Not the row's own ‖ |A| |z_i| ‖: a token whose coordinates should be 0 (the mean of a symmetric tie,
    a token at the origin) carries rounding of the size of the tokens it was averaged from.
    """
    size = torch.where(present, abs_queries(tokens, A).norm(dim=-1), 0.0)
    return size.amax(dim=-1, keepdim=True) if size.shape[-1] else size.new_zeros(size.shape[0], 1)


def coarse_tolerance(size: Tensor, tokens: Tensor, present: Tensor, tie_rtol: float) -> Tensor:
    """(batch, r) a tolerance on raw scores that admits every j that (★) could keep.

    (★)'s bound is at most tie_rtol W ‖|z_l| + |z_j|‖ ≤ 2 tie_rtol W max_j ‖z_j‖, and the scores' own
    rounding is below d·eps·W max ‖z_j‖ per score, so 2 (tie_rtol + d·eps) W max_j ‖z_j‖ is a
    superset bound. size: (batch, r) or (batch, 1) W (`query_size`).
    """
    d = tokens.shape[-1]
    eps = torch.finfo(tokens.dtype).eps
    norms = torch.where(present, tokens.norm(dim=-1), 0.0)
    largest = norms.amax(dim=-1, keepdim=True) if norms.shape[-1] else norms.new_zeros(norms.shape[0], 1)
    return 2 * (tie_rtol + d * eps) * size * largest


class _Keys(NamedTuple):
    """Some candidate keys of each of T rows, gathered: idx (T, k) key index; pos (T, k, d) position; with
    frames, off (T, k, d) offset, lab (T, k) frame label, fixed (T, k) at a fixed position (a leader)."""

    idx: Tensor
    pos: Tensor
    off: Tensor | None
    lab: Tensor | None
    fixed: Tensor | None

    @staticmethod
    def gather(idx: Tensor, keys: Tensor, frames: Frames | None, b: Tensor) -> _Keys:
        batch, m, d = keys.shape
        flat = b.unsqueeze(1) * m + idx  # (T, k): the keys' places in the flat (batch · m) axis, no (T, m) copy

        def rows(x: Tensor) -> Tensor:
            return x.reshape(batch * m, *x.shape[2:])[flat]

        if frames is None:
            return _Keys(idx, rows(keys), None, None, None)
        return _Keys(idx, rows(keys), rows(frames.offset), rows(frames.label), rows(frames.fixed()))

    def of_rows(self, r: Tensor) -> _Keys:
        """These keys for the rows r (R,) only."""
        return _Keys(*(None if x is None else x[r] for x in self))

    def take(self, at: Tensor) -> _Keys:
        """The keys at places `at` (T, k') of these."""
        def pick(x):
            return None if x is None else x.gather(1, at.unsqueeze(-1).expand(-1, -1, x.shape[-1]) if x.dim() == 3
                                                   else at)
        return _Keys(*(pick(x) for x in self))


class _Split(NamedTuple):
    """What `_split_at_origin` needs of T rows in frames: origin t and offset o (T, d), the row's key (T,),
    whether it is framed (T,), and A (None: identity)."""

    origin: Tensor
    offset: Tensor
    rows: Tensor
    framed: Tensor
    A: Tensor | None

    def of_rows(self, r: Tensor) -> _Split:
        """The split for the rows r (R,) only."""
        return _Split(self.origin[r], self.offset[r], self.rows[r], self.framed[r], self.A)


def _beats(L: _Keys, J: _Keys, queries: Tensor, size: Tensor, tie_rtol: float, split: _Split | None) -> Tensor:
    """(T, P, Q) bool, [t, p, q]: key L[t, p] beats key J[t, q] in row t by rule (★).

    ⟨A z_i, z_l − z_j⟩ > tie_rtol · W ‖r‖ (W = `query_size`), with z_l − z_j taken offset − offset and
    r = |o_l − o_j| when l and j share a frame, else r = |z_l| + |z_j| (positions carry rounding of that size).
    Norms, not Σ_k w_k r_k: a query coordinate that should be 0 carries rounding of the size of the whole
    query. Rows in a frame compare keys at fixed positions and themselves by `_split_at_origin`.
    """
    T, d = queries.shape
    lp, jp = L.pos.unsqueeze(2), J.pos.unsqueeze(1)
    delta = lp - jp  # [t, l, j] = z_l − z_j
    scale = lp.abs() + jp.abs()  # what rounding of the positions scales with
    if L.lab is not None:
        same = ((L.lab.unsqueeze(2) == J.lab.unsqueeze(1)) & (L.lab >= 0).unsqueeze(2)).unsqueeze(-1)
        delta = torch.where(same, L.off.unsqueeze(2) - J.off.unsqueeze(1), delta)
        scale = torch.where(same, delta.abs(), scale)
    gap = (queries.view(T, 1, 1, d) * delta).sum(-1)
    bound = tie_rtol * size.view(T, 1, 1) * scale.norm(dim=-1)
    beats = gap > bound
    if split is not None:
        beats = _split_at_origin(beats, L, J, split, size, tie_rtol)
    return beats


def _gaps(keys: _Keys, top: _Keys, queries: Tensor) -> Tensor:
    """(T, k) ⟨A z_i, z_j − z_top⟩ for the keys j of each row against one key top (T, 1), differenced as (★)
    does (offset − offset in a shared frame)."""
    delta = keys.pos - top.pos
    if keys.lab is not None:
        same = ((keys.lab == top.lab) & (keys.lab >= 0)).unsqueeze(-1)
        delta = torch.where(same, keys.off - top.off, delta)
    return (queries.unsqueeze(1) * delta).sum(-1)


def _surely_unbeaten(raw: Tensor, pos: Tensor, valid: Tensor, size: Tensor, tie_rtol: float) -> Tensor:
    """(T, c) bool: candidates j (positions only, no frames) that no candidate l can beat by (★), from raw scores.

    With p the computed raw scores (T, c) of the same queries q and positions, and u = eps/2, the gap (★)
    computes satisfies G_lj ≤ (p_l − p_j) + (√2 γ_d + γ_{d+1}) ‖q‖ N_lj, N_lj = ‖|z_l| + |z_j|‖ (γ_k = k u /
    (1 − k u): the rounding of a d-term dot product and of the differences, and ‖z_l‖ + ‖z_j‖ ≤ √2 N_lj), while
    its bound is tie_rtol W N_lj up to a few units of rounding, ‖q‖ ≤ W, and N_lj ≥ ‖|z_j| + μ‖ with μ the
    candidates' smallest |coordinates|. So

        max_l p_l − p_j ≤ (tie_rtol − (2d + 4) eps) · W ‖|z_j| + μ‖ · 0.999

    means no l beats j: the verdict of every pair, without the pairs. A cluster of tokens converging to rounding
    (raw scores equal to a few eps, all kept) is then decided in O(c) instead of O(c²). Never true when
    tie_rtol is below (2d + 4) eps, nor near underflow (every pair is then tried). valid: (T, c) the real
    candidates.
    """
    d = pos.shape[-1]
    margin = tie_rtol - (2 * d + 4) * torch.finfo(pos.dtype).eps
    # Raw scores from TF32 matrix products (a CUDA setting for float32) round far beyond γ_d: no certificate then.
    tf32 = pos.is_cuda and pos.dtype == torch.float32 and torch.get_float32_matmul_precision() != "highest"
    if margin <= 0 or tf32:
        return torch.zeros(raw.shape, dtype=torch.bool, device=raw.device)
    best = raw.amax(dim=1, keepdim=True)
    smallest = torch.where(valid.unsqueeze(-1), pos.abs(), math.inf).amin(dim=1, keepdim=True)  # (T, 1, d): μ
    reach = (margin * 0.999) * size.view(-1, 1) * (pos.abs() + smallest).norm(dim=-1)
    # The bound assumes no underflow: where the reach is within (2d + 8)/eps of the smallest normal number, the
    # rounding of subnormal gaps is not relative any more, and every pair is tried.
    info = torch.finfo(pos.dtype)
    return valid & ((best - raw) <= reach) & (reach >= (2 * d + 8) * info.tiny / info.eps)


def _first(flags: Tensor, width: int) -> Tensor:
    """(T, width) the places of each row's first `width` True flags (T, k), in order (then False places)."""
    return torch.sort(flags.to(torch.uint8), dim=1, descending=True, stable=True).indices[:, :width]


def refine(candidates: Tensor, scores: Tensor, queries: Tensor, size: Tensor, keys: Tensor, frames: Frames | None,
           b: Tensor, tie_rtol: float, rows: Tensor | None = None, A: Tensor | None = None) -> Tensor:
    """(T, m) bool: the attention sets of T rows with several coarse candidates, decided by (★).

    A candidate j is kept unless another candidate l beats it (`_beats`). Pairwise, not only against the
    maximiser, so that a follower is always compared with its own leader (precisely, in their frame) and never
    only with a leader of another frame, whose difference would round its offset away. Should rounding leave
    no candidate unbeaten, the largest raw score is kept.

    Whether some l beats j does not depend on the order the l are tried in, so this tries first the one most
    likely to: the champion, the candidate that beats a top raw score by the most (the row's true maximiser
    when rounding has made the raw scores of a converging cluster equal). Only the candidates the champion does
    not beat (the champion itself, and true ties) are then tried against every candidate: O(T c) work where
    every pair would be O(T c²), with the same verdicts.

    Args:
        candidates: (T, m) bool, keys within the coarse tolerance of the row's maximum (present only).
        scores: (T, m) the rows' raw scores. queries: (T, d) A z_i. size: (T,) W of the row's sequence.
        keys: (batch, m, d) positions of the keys; frames: their frames (None: all absolute).
        b: (T,) each row's sequence. rows: (T,) each row's index among the keys (rows are keys), needed
            with frames for the split. A: the score matrix (None: identity).
    """
    T, m = candidates.shape
    c = int(candidates.sum(1).max())
    idx = _first(candidates, c)  # (T, c) the candidates of each row, in key order
    valid = candidates.gather(1, idx)
    cand = _Keys.gather(idx, keys, frames, b)
    split = None
    if frames is not None and rows is not None:
        framed = frames.label[b, rows] >= 0  # (T,)
        if bool(framed.any()):
            split = _Split(frames.origin[b, rows], frames.offset[b, rows], rows, framed, A)
    raw = torch.where(valid, scores.gather(1, idx), -math.inf)
    top = raw.argmax(dim=1, keepdim=True)  # (T, 1): the first largest raw score
    champion = torch.where(valid, _gaps(cand, cand.take(top), queries), -math.inf).argmax(dim=1, keepdim=True)
    beaten = valid & _beats(cand.take(champion), cand, queries, size, tie_rtol, split)[:, 0]  # (T, c)
    left = valid & ~beaten  # the champion (never beaten by itself), true ties, and what rounding keeps apart
    # (★) is antisymmetric: the gap of "j beats l" is exactly minus that of "l beats j" (IEEE differences and
    # products are symmetric in sign) and the bound is the same and ≥ 0, so a candidate the champion beats does
    # not beat it. A row whose champion beat every other candidate is decided: the champion alone. (Before the
    # certificate: a certified key is unbeaten, but it may still beat the champion.)
    alone = left.sum(1) == 1
    if frames is None:
        left &= ~_surely_unbeaten(raw, cand.pos, valid, size, tie_rtol)
    left &= ~alone.unsqueeze(1)
    keep_c = valid & ~beaten & ~left  # decided: the champion alone, or unbeaten for sure
    # What is left elsewhere (true ties, what rounding keeps apart) is tried against every candidate.
    counts = left.sum(1)
    r = (counts > 0).nonzero().squeeze(1)
    if len(r) > 0:
        u = int(counts[r].max())
        at = _first(left[r], u)  # (R, u)
        unsure = left[r].gather(1, at)
        part = cand.of_rows(r)
        beaten_too = (valid[r].unsqueeze(2) & _beats(part, part.take(at), queries[r], size[r], tie_rtol,
                                                     None if split is None else split.of_rows(r))).any(dim=1)
        keep_c[r] = keep_c[r].scatter(1, at, (unsure & ~beaten_too) | keep_c[r].gather(1, at))
    none = ~keep_c.any(dim=1)
    if bool(none.any()):
        keep_c[none, top[none, 0]] = True
    keep = torch.zeros_like(candidates)
    return keep.scatter_(1, idx, keep_c)


def _split_at_origin(beats: Tensor, L: _Keys, J: _Keys, split: _Split, size: Tensor, tie_rtol: float) -> Tensor:
    """(★) for a row in a frame (position t + o) between *anchored* keys: keys at fixed positions (leaders:
    in a frame, offset 0) and the row itself.

    Each anchored key is a fixed part F plus a moving part M (a leader: its position and 0; the row: t and
    o), so with δ_F = F_l − F_j and δ_M = M_l − M_j the gap splits as

        ⟨A z_i, z_l − z_j⟩ = ⟨A t, δ_F⟩ + [⟨A t, δ_M⟩ + ⟨A o, δ_F + δ_M⟩],

    a part that is the same at every layer and one that shrinks with o. When the first is within (★)'s
    bound it is an exact tie at the origin, and the second decides, against a bound proportional to ‖o‖:
    tie_rtol (‖|A||t|‖ ‖δ_M‖ + ‖|A||o|‖ ‖|F_l| + |F_j| + |δ_M|‖). So a follower converging to its frame's
    origin (a leader, or the fixed target of a tie between leaders, which lies on the leaders' face and ties
    its own score with theirs) keeps every strict inequality among leaders and itself at any depth, and an
    exact tie at the origin stays one while the moving part is 0. Other pairs keep `beats`.

    Shapes: beats (T, P, Q) [t, l, j] for keys L (T, P) and J (T, Q); size (T,) W.
    """
    T, d = beats.shape[0], L.pos.shape[-1]
    origin, offset, A = split.origin, split.offset, split.A

    itself_l, itself_j = (keys.idx == split.rows.unsqueeze(1) for keys in (L, J))  # (T, k): the row itself
    anchored_l, anchored_j = L.fixed | itself_l, J.fixed | itself_j
    # Pairs in one frame are already differenced offset − offset (relative precision); the split is for the
    # others. Rows that follow a leader with candidates in its frame only (the common case) have none.
    other_frames = L.lab.unsqueeze(2) != J.lab.unsqueeze(1)
    pair = anchored_l.unsqueeze(2) & anchored_j.unsqueeze(1) & other_frames & split.framed.view(T, 1, 1)
    if not bool(pair.any()):
        return beats

    def parts(keys: _Keys, itself: Tensor):
        F = torch.where(itself.unsqueeze(-1), origin.unsqueeze(1), keys.pos)  # (T, k, d)
        M = torch.where(itself.unsqueeze(-1), offset.unsqueeze(1), torch.zeros_like(keys.pos))
        return F, M

    F_l, M_l = parts(L, itself_l)
    F_j, M_j = parts(J, itself_j)
    dF = F_l.unsqueeze(2) - F_j.unsqueeze(1)  # [t, l, j] = F_l − F_j
    dM = M_l.unsqueeze(2) - M_j.unsqueeze(1)
    q_t = origin if A is None else origin @ A
    q_o = offset if A is None else offset @ A
    steady = (q_t.view(T, 1, 1, d) * dF).sum(-1)
    moving = (q_t.view(T, 1, 1, d) * dM).sum(-1) + (q_o.view(T, 1, 1, d) * (dF + dM)).sum(-1)
    spread = F_l.abs().unsqueeze(2) + F_j.abs().unsqueeze(1)
    t_size = (origin.abs() if A is None else origin.abs() @ A.abs()).norm(dim=-1).view(T, 1, 1)
    o_size = (offset.abs() if A is None else offset.abs() @ A.abs()).norm(dim=-1).view(T, 1, 1)
    steady_bound = tie_rtol * size.view(T, 1, 1) * spread.norm(dim=-1)
    moving_bound = tie_rtol * (t_size * dM.norm(dim=-1) + o_size * (spread + dM.abs()).norm(dim=-1))
    at_origin = pair & (steady.abs() <= steady_bound)
    return torch.where(at_origin, moving > moving_bound, beats)
