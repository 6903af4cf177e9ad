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

Used by `step` (one layer, no frames: every offset is the position) and `layers` (frames carried
over layers); `kernel` is a compiled copy of the same rule.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor


def default_tie_rtol(dtype: torch.dtype) -> float:
    """The default `tie_rtol` of rule (★): 64 machine epsilons (float32: 7.6e-6, float64: 1.4e-14).

    Its right-hand side then bounds the rounding of a d-term dot product of the query with a difference
    of two tokens, with a margin; `Hardmax(tie_rtol=...)` overrides it.
    """
    return 64.0 * torch.finfo(dtype).eps


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


def refine(candidates: Tensor, scores: Tensor, queries: Tensor, size: Tensor, keys: Tensor, frames: Frames | None,
           b: Tensor, tie_rtol: float, rows: Tensor | None = None, A: Tensor | None = None) -> Tensor:
    """(T, m) bool: the attention sets of T rows with several coarse candidates, decided by (★).

    A candidate j is kept unless another candidate l beats it: ⟨A z_i, z_l − z_j⟩ > tie_rtol ·
    W ‖r‖ (W = `query_size`), with r = |o_l − o_j| and z_l − z_j taken offset − offset when l and j share a
    frame, else r = |z_l| + |z_j| (positions carry rounding of that size). Norms, not Σ_k w_k r_k: a
    query coordinate that should be 0 carries rounding of the size of the whole query.
    Pairwise, not only against the maximiser, so that a follower is always compared with its own
    leader (precisely, in their frame) and never only with a leader of another frame, whose
    difference would round its offset away. Should rounding leave no candidate unbeaten, the
    largest raw score is kept.

    Args:
        candidates: (T, m) bool, keys within the coarse tolerance of the row's maximum (present only).
        scores: (T, m) the rows' raw scores. queries: (T, d) A z_i. size: (T,) W of the row's sequence.
        keys: (batch, m, d) positions of the keys; frames: their frames (None: all absolute).
        b: (T,) each row's sequence. rows: (T,) each row's index among the keys (rows are keys), needed
            with frames for the split below. A: the score matrix (None: identity).

    Rows in a frame compare keys at fixed positions and themselves by `_split_at_origin`.
    """
    T, m = candidates.shape
    c = int(candidates.sum(1).max())
    # The (at most c) candidates of each row, in key order.
    idx = torch.sort(candidates.to(torch.uint8), dim=1, descending=True, stable=True).indices[:, :c]  # (T, c)
    valid = candidates.gather(1, idx)
    d = keys.shape[-1]
    take = idx.unsqueeze(-1).expand(-1, -1, d)
    pos = keys[b].gather(1, take)  # (T, c, d)
    delta = pos.unsqueeze(2) - pos.unsqueeze(1)  # [t, l, j] = z_l − z_j
    scale = pos.abs().unsqueeze(2) + pos.abs().unsqueeze(1)  # what rounding of the positions scales with
    if frames is not None:
        off = frames.offset[b].gather(1, take)
        lab = frames.label[b].gather(1, idx)
        same = ((lab.unsqueeze(2) == lab.unsqueeze(1)) & (lab >= 0).unsqueeze(2)).unsqueeze(-1)
        delta = torch.where(same, off.unsqueeze(2) - off.unsqueeze(1), delta)
        scale = torch.where(same, delta.abs(), scale)
    gap = (queries.view(T, 1, 1, d) * delta).sum(-1)
    bound = tie_rtol * size.view(T, 1, 1) * scale.norm(dim=-1)
    beats = gap > bound
    if frames is not None and rows is not None:
        framed = frames.label[b, rows] >= 0  # (T,)
        if bool(framed.any()):
            beats = _split_at_origin(beats, framed, idx, rows, pos, lab, frames, b, size, tie_rtol, A)
    beaten = (valid.unsqueeze(2) & beats).any(dim=1)  # (T, c): some l beats j
    keep_c = valid & ~beaten
    none = ~keep_c.any(dim=1)
    if bool(none.any()):
        best = torch.where(valid, scores.gather(1, idx), -math.inf).argmax(dim=1)
        keep_c[none, best[none]] = True
    keep = torch.zeros_like(candidates)
    return keep.scatter_(1, idx, keep_c)


def _split_at_origin(beats: Tensor, framed: Tensor, idx: Tensor, rows: Tensor, pos: Tensor, lab: Tensor,
                     frames: Frames, b: Tensor, size: Tensor, tie_rtol: float,
                     A: Tensor | None) -> Tensor:
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

    Shapes: beats (T, c, c) [t, l, j]; framed (T,); idx (T, c) candidate keys; rows (T,) the row's key;
    pos (T, c, d) candidates' positions; lab (T, c) their frame labels; size (T,) W.
    """
    T, c, d = pos.shape
    origin, offset = frames.origin[b, rows], frames.offset[b, rows]  # (T, d): t, o
    is_self = idx == rows.unsqueeze(1)  # (T, c)
    fixed = frames.fixed()[b].gather(1, idx) & ~is_self
    anchored = fixed | is_self
    F = torch.where(is_self.unsqueeze(-1), origin.unsqueeze(1), pos)  # (T, c, d)
    M = torch.where(is_self.unsqueeze(-1), offset.unsqueeze(1), torch.zeros_like(pos))
    dF = F.unsqueeze(2) - F.unsqueeze(1)  # [t, l, j] = F_l − F_j
    dM = M.unsqueeze(2) - M.unsqueeze(1)
    q_t = origin if A is None else origin @ A
    q_o = offset if A is None else offset @ A
    steady = (q_t.view(T, 1, 1, d) * dF).sum(-1)
    moving = (q_t.view(T, 1, 1, d) * dM).sum(-1) + (q_o.view(T, 1, 1, d) * (dF + dM)).sum(-1)
    spread = (F.abs().unsqueeze(2) + F.abs().unsqueeze(1))
    t_size = (origin.abs() if A is None else origin.abs() @ A.abs()).norm(dim=-1).view(T, 1, 1)
    o_size = (offset.abs() if A is None else offset.abs() @ A.abs()).norm(dim=-1).view(T, 1, 1)
    steady_bound = tie_rtol * size.view(T, 1, 1) * spread.norm(dim=-1)
    moving_bound = tie_rtol * (t_size * dM.norm(dim=-1) + o_size * (spread + dM.abs()).norm(dim=-1))
    # Pairs in one frame are already differenced offset − offset (relative precision); the split is for the
    # others.
    other_frames = lab.unsqueeze(2) != lab.unsqueeze(1)
    pair = anchored.unsqueeze(2) & anchored.unsqueeze(1) & other_frames & framed.view(T, 1, 1)
    at_origin = pair & (steady.abs() <= steady_bound)
    return torch.where(at_origin, moving > moving_bound, beats)
