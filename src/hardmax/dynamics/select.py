"""Hardmax selection: the attention sets C_i by rule (★), the targets, leaders, and the move of a layer.

The machinery behind `rules.Hardmax` (one layer, positions only) and `layers` (several layers, with
frames): scores with absent keys masked, the coarse one-max pass, refinement of near-ties by
`ties.refine`, and the targets Σ_j P_ij z_j (in a row's frame when frames are carried). These are the
engine's parts, listed and documented for whoever works on the engine; a user's entry points are the rule
objects and `simulate` that `hardmax.dynamics` exports.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from hardmax.dynamics.dedup import take_rows
from hardmax.dynamics.ties import TIE_FRAME, Frames, coarse_tolerance, query_size, refine

__all__ = ["Rows", "hardmax_rows", "hardmax_sets", "hardmax_targets", "move", "score_bias", "select",
           "sets_from_scores"]


class Rows(NamedTuple):
    """What `select` finds for the first r tokens (the rows) of a batch.

    Attributes:
        target: (batch, r, d) Σ_j P_ij z_j, in the row's frame when frames are given.
        leader: (batch, r) bool, C_i = {i}: a single maximiser, itself.
        own: (batch, r) the row's own score s_ii. other: (batch, r) max_{j ≠ i} s_ij.
        frames: the rows' frames after following a token of another frame (None: no frames).
    """

    target: Tensor  # (batch, r, d) Σ_j P_ij z_j, in the row's frame when frames are given
    leader: Tensor  # (batch, r) bool: C_i = {i} (a single maximiser, itself)
    own: Tensor  # (batch, r) s_ii
    other: Tensor  # (batch, r) max_{j ≠ i} s_ij (the best score of another token)
    frames: Frames | None  # the rows' frames after following a token of another frame (None: no frames)


def score_bias(present: Tensor, dtype: torch.dtype) -> Tensor:
    """(batch, 1, m) additive score bias: 0 for present keys, -inf for absent ones."""
    return torch.where(present, 0.0, -math.inf).to(dtype).unsqueeze(-2)


def sets_from_scores(s: Tensor, keys: Tensor, queries: Tensor, size: Tensor, row_present: Tensor, tol: Tensor,
                    tie_rtol: float, frames: Frames | None, A: Tensor | None = None) -> Tensor:
    """(batch, r, m) bool: C_i of the first r keys from their scores s (batch, r, m), rule (★) of `ties`.

    One pass keeps the keys within the coarse tolerance `tol` (batch, r) of the row's maximum; the rows
    with several (near-ties, and followers close to their leader) are decided by `ties.refine`.
    """
    members = (s >= (s.amax(dim=-1) - tol).unsqueeze(-1)) & row_present.unsqueeze(-1)
    # Counted as bytes into int32: a bool sum widens to int64 first and runs ~5x slower on a CPU.
    multi = members.view(torch.uint8).sum(-1, dtype=torch.int32) >= 2
    if bool(multi.any()):
        b, i = multi.nonzero(as_tuple=True)
        members[b, i] = refine(members[b, i], s[b, i], queries[b, i], size[b, 0], keys, frames, b, tie_rtol,
                               rows=i, A=A)
    return members


def select(s: Tensor, keys: Tensor, queries: Tensor, weights: Tensor, row_present: Tensor, tie_rtol: float,
            frames: Frames | None = None, A: Tensor | None = None) -> Rows:
    """Hardmax targets of the first r keys from their scores s (batch, r, m) against keys (batch, m, d).

    Row i's own score is s[:, i, i] (rows are the first r keys). queries (batch, r, d) are the rows'
    A z_i; row_present (batch, r). With `frames` (the keys' frames, see `ties`), a row that follows a
    single token of another frame moves into that frame, and its target is expressed in its frame.
    """
    r, m = s.shape[1:]
    rows_z = keys[:, :r]
    size = query_size(keys, weights > 0, A)
    tol = coarse_tolerance(size, keys, weights > 0, tie_rtol)
    members = sets_from_scores(s, keys, queries, size, row_present, tol, tie_rtol, frames, A)
    diagonal = s.diagonal(dim1=1, dim2=2)
    own = diagonal.clone()
    diagonal.fill_(-math.inf)
    other = s.amax(dim=-1)
    diagonal.copy_(own)
    # One product gives both the number of members and the sum of their indices (the index itself
    # when there is one); small integers, so exact in any floating dtype.
    count_and_index = torch.stack([torch.ones(m, dtype=s.dtype, device=s.device),
                                   torch.arange(m, dtype=s.dtype, device=s.device)], dim=1)  # (m, 2)
    count, index = (members.to(s.dtype) @ count_and_index).unbind(-1)
    rows = torch.arange(r, device=s.device)
    single = row_present & (count == 1)
    arg = torch.where(single, index.long(), rows)  # a valid index everywhere
    leader = single & (arg == rows)
    tied = row_present & (count >= 2)
    if frames is None:
        target = take_rows(keys, arg)
        if bool(tied.any()):
            b, i = tied.nonzero(as_tuple=True)
            p = members[b, i] * weights[b]
            target[b, i] = (p.unsqueeze(1) @ keys[b]).squeeze(1) / p.sum(-1, keepdim=True)
        return Rows(target, leader, own, other, None)
    origin, offset, label = (x[:, :r] for x in frames)
    j_label = label.new_empty(0) if r == 0 else frames.label.gather(1, arg)
    j_origin = take_rows(frames.origin, arg)
    # Following one token of another frame: move into that frame (the token's leader's), so that the
    # distance to the leader is carried as an offset with full relative precision.
    move_in = single & ~leader & (j_label >= 0) & (j_label != label)
    origin = torch.where(move_in.unsqueeze(-1), j_origin, origin)
    offset = torch.where(move_in.unsqueeze(-1), rows_z - j_origin, offset)
    label = torch.where(move_in, j_label, label)
    same = (j_label == label) & (label >= 0)
    target = torch.where(same.unsqueeze(-1), take_rows(frames.offset, arg), take_rows(keys, arg) - origin)
    if bool(tied.any()):
        b, i = tied.nonzero(as_tuple=True)
        p = members[b, i] * weights[b]  # (T, m)
        k_same = (frames.label[b] == label[b, i].unsqueeze(1)) & (label[b, i] >= 0).unsqueeze(1)
        rel = torch.where(k_same.unsqueeze(-1), frames.offset[b], keys[b] - origin[b, i].unsqueeze(1))
        target[b, i] = (p.unsqueeze(1) @ rel).squeeze(1) / p.sum(-1, keepdim=True)
        # A row tied between tokens at fixed positions (leaders: in a frame, offset 0) has a fixed target t:
        # it moves into a frame of its own with origin t, so that its distance to t is an offset that keeps
        # full relative precision however small it gets (see `ties.refine` for the decision it allows).
        fixed = frames.fixed()  # (batch, m)
        itself = torch.arange(m, device=s.device) == i.unsqueeze(1)  # (T, m): a row in its own set moves
        to_tie = ~(members[b, i] & (~fixed[b] | itself)).any(-1)  # (T,)
        if bool(to_tie.any()):
            b, i, p = b[to_tie], i[to_tie], p[to_tie]
            t = (p.unsqueeze(1) @ keys[b]).squeeze(1) / p.sum(-1, keepdim=True)  # (T', d) absolute
            own_label = TIE_FRAME + i
            stay = ((label[b, i] == own_label) & (origin[b, i] == t).all(-1)).unsqueeze(-1)
            origin[b, i] = torch.where(stay, origin[b, i], t)
            offset[b, i] = torch.where(stay, offset[b, i], rows_z[b, i] - t)
            label[b, i] = own_label
            target[b, i] = 0
    return Rows(target, leader, own, other, Frames(origin, offset, label))


def hardmax_rows(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float,
                  frames: Frames | None = None) -> Rows:
    """Hardmax targets of every token, which tokens are leaders, and each row's own and best other score.

    tokens are positions; with `frames`, targets come in each row's (possibly new) frame.
    """
    queries = tokens if A is None else tokens @ A
    present = weights > 0
    s = torch.baddbmm(score_bias(present, tokens.dtype), queries, tokens.transpose(-1, -2))  # (batch, m, m)
    return select(s, tokens, queries, weights, present, tie_rtol, frames, A)


def hardmax_targets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float) -> Tensor:
    """(batch, m, d) hardmax targets Σ_j P_ij z_j of every token."""
    return hardmax_rows(tokens, weights, A, tie_rtol).target


def hardmax_sets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float) -> Tensor:
    """(batch, m, m) bool attention sets C_i of every present token (rule (★) of `ties`)."""
    queries = tokens if A is None else tokens @ A
    present = weights > 0
    s = torch.baddbmm(score_bias(present, tokens.dtype), queries, tokens.transpose(-1, -2))
    size = query_size(tokens, present, A)
    tol = coarse_tolerance(size, tokens, present, tie_rtol)
    return sets_from_scores(s, tokens, queries, size, present, tol, tie_rtol, None)


def move(tokens: Tensor, target: Tensor, gamma, present: Tensor) -> Tensor:
    """(batch, m, d) `tokens` moved towards `target`: z + γ (target − z) where `present` (batch, m), else z."""
    return torch.where(present.unsqueeze(-1), tokens + gamma * (target - tokens), tokens)
