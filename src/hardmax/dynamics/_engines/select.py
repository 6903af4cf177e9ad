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

from hardmax.dynamics._engines.ties import TIE_FRAME, Frames, coarse_tolerance, query_size, refine
from hardmax.dynamics.dedup import hash_rows, take_rows


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
                    tie_rtol: float, frames: Frames | None, A: Tensor | None = None,
                    rows: Tensor | None = None) -> Tensor:
    """(batch, r, m) bool: C_i of r rows from their scores s (batch, r, m) against keys (batch, m, d), rule (★).

    One pass keeps the keys within the coarse tolerance `tol` (batch, 1) of the row's maximum; the rows
    with several (near-ties, and followers close to their leader) are decided by `ties.refine`. Rows are keys:
    row i is key i, or key rows[b, i] when `rows` (batch, r) is given.
    """
    members = (s >= (s.amax(dim=-1) - tol).unsqueeze(-1)) & row_present.unsqueeze(-1)
    # Counted as bytes into int32: a bool sum widens to int64 first and runs ~5x slower on a CPU.
    multi = members.view(torch.uint8).sum(-1, dtype=torch.int32) >= 2
    if bool(multi.any()):
        b, i = multi.nonzero(as_tuple=True)
        members[b, i] = refine(members[b, i], s[b, i], queries[b, i], size[b, 0], keys, frames, b, tie_rtol,
                               rows=i if rows is None else rows[b, i], A=A)
    return members


def foreign_anchor(candidates: Tensor, frames: Frames, b: Tensor, label: Tensor) -> Tensor:
    """(T,) bool: rows in a frame (label (T,) ≥ 0) with a candidate (T, m) at a fixed position in another frame.

    Their decision depends on the row itself, not only on its position: rule (★) splits such a row's gaps against
    anchored keys at its own origin and offset (`ties._split_at_origin`). b: (T,) each row's sequence."""
    fixed = frames.fixed()[b] & (frames.label[b] != label.unsqueeze(1))
    return (label >= 0) & (candidates & fixed).any(1)


def position_bits(pos: Tensor) -> Tensor:
    """(..., d) int64: the bits of each coordinate of positions pos (..., d), float32 or float64 (equal bits: the
    same position; 0.0 and -0.0 differ)."""
    return pos.view(torch.int64) if pos.dtype == torch.float64 else pos.view(torch.int32).long()


def same_kind(kind: Tensor) -> tuple[Tensor, Tensor]:
    """Rows of kind (T, c) int64 grouped by value: one row of each group (G,) and each row's group (T,) in 0..G.

    By a hash of each row (a sort of T numbers, not of T rows), confirmed by value: a row whose kind is not its
    group's (a collision) gets a group of its own."""
    T = kind.shape[0]
    every = torch.arange(T, device=kind.device)
    if T == 0:
        return every, every
    _, inverse = torch.unique(hash_rows(kind.unsqueeze(0))[0], return_inverse=True)
    one = torch.empty(int(inverse.max()) + 1, dtype=torch.long, device=kind.device).scatter_(0, inverse, every)
    collided = (kind[one[inverse]] != kind).any(1).nonzero().squeeze(1)
    if len(collided):
        inverse[collided] = len(one) + torch.arange(len(collided), device=kind.device)
        one = torch.cat([one, collided])
    return one, inverse


def select(s: Tensor, keys: Tensor, queries: Tensor, weights: Tensor, row_present: Tensor, tie_rtol: float,
            frames: Frames | None = None, A: Tensor | None = None) -> Rows:
    """Hardmax targets of the first r keys from their scores s (batch, r, m) against keys (batch, m, d).

    Row i's own score is s[:, i, i] (rows are the first r keys). queries (batch, r, d) are the rows'
    A z_i; row_present (batch, r). With `frames` (the keys' frames, see `ties`), a row that follows a
    single token of another frame moves into that frame, and its target is expressed in its frame.
    """
    size = query_size(keys, weights > 0, A)
    tol = coarse_tolerance(size, keys, weights > 0, tie_rtol)
    members = sets_from_scores(s, keys, queries, size, row_present, tol, tie_rtol, frames, A)
    diagonal = s.diagonal(dim1=1, dim2=2)
    own = diagonal.clone()
    diagonal.fill_(-math.inf)
    other = s.amax(dim=-1)
    diagonal.copy_(own)
    plan = Following.of(members, keys, weights, row_present, frames)
    return Rows(plan.targets(keys, frames), plan.leader, own, other, plan.frames)


class Following(NamedTuple):
    """What the attention sets C_i (batch, r, m) of the first r keys make of one layer, apart from the positions.

    `of` derives it from the sets and the keys' frames; `targets` then gives Σ_j P_ij z_j (in each row's frame)
    for any positions of the keys. While the sets, the keys' frame labels and origins, and which keys sit at a
    fixed position stay as they were, a later layer's targets are `targets` of its positions: the same
    arithmetic, without deciding the sets again (`layers.hardmax_run` runs layers ahead that way).

    Attributes:
        arg: (batch, r) the single member of each row's set (the row itself where there are several).
        flat: (batch · r,) arg as places in the flat (batch · m) axis of the keys.
        leader: (batch, r) bool, C_i = {i}.
        same: (batch, r) bool, the single member lives in the row's frame (its offset is the target).
        tied: (2, T) rows (b, i) with several members; weights (T, m) their members' weights,
            total (T, 1) the weights' sum, shared (T, m) which keys live in the row's frame.
        anchored: (T',) rows (flat) tied between fixed keys only: target 0 in the tie's own frame.
        frames: the rows' frames after this layer's moves (None: no frames).
    """

    arg: Tensor
    flat: Tensor
    leader: Tensor
    same: Tensor | None
    tied: Tensor
    weights: Tensor
    total: Tensor
    shared: Tensor | None
    anchored: Tensor | None
    frames: Frames | None

    @staticmethod
    def of(members: Tensor, keys: Tensor, weights: Tensor, row_present: Tensor, frames: Frames | None) -> Following:
        """The plan of sets `members` (batch, r, m) for keys (batch, m, d) with weights (batch, m) and frames."""
        r, m = members.shape[1:]
        # One product gives both the number of members and the sum of their indices (the index itself
        # when there is one); small integers, so exact in any floating dtype.
        count_and_index = torch.stack([torch.ones(m, dtype=keys.dtype, device=keys.device),
                                       torch.arange(m, dtype=keys.dtype, device=keys.device)], dim=1)  # (m, 2)
        count, index = (members.to(keys.dtype) @ count_and_index).unbind(-1)
        rows = torch.arange(r, device=keys.device)
        single = row_present & (count == 1)
        arg = torch.where(single, index.long(), rows)  # a valid index everywhere
        leader = single & (arg == rows)
        tied = row_present & (count >= 2)
        b, i = tied.nonzero(as_tuple=True)
        p = members[b, i] * weights[b]  # (T, m)
        total = p.sum(-1, keepdim=True)
        rows_tied = torch.stack([b, i])
        places = (arg + torch.arange(arg.shape[0], device=keys.device).unsqueeze(1) * m).reshape(-1)
        if frames is None:
            return Following(arg, places, leader, None, rows_tied, p, total, None, None, None)
        rows_z = keys[:, :r]
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
        shared = (frames.label[b] == label[b, i].unsqueeze(1)) & (label[b, i] >= 0).unsqueeze(1)
        flat = b * r + i
        anchored = flat[:0]
        if len(flat):
            # A row tied between tokens at fixed positions (leaders: in a frame, offset 0) has a fixed target t:
            # it moves into a frame of its own with origin t, so that its distance to t is an offset that keeps
            # full relative precision however small it gets (see `ties.refine` for the decision it allows).
            fixed = frames.fixed()  # (batch, m)
            itself = torch.arange(m, device=keys.device) == i.unsqueeze(1)  # (T, m): a row in its own set moves
            to_tie = ~(members[b, i] & (~fixed[b] | itself)).any(-1)  # (T,)
            if bool(to_tie.any()):
                b, i, q = b[to_tie], i[to_tie], p[to_tie]
                t = (q.unsqueeze(1) @ keys[b]).squeeze(1) / total[to_tie]  # (T', d) absolute
                own_label = TIE_FRAME + i
                stay = ((label[b, i] == own_label) & (origin[b, i] == t).all(-1)).unsqueeze(-1)
                origin[b, i] = torch.where(stay, origin[b, i], t)
                offset[b, i] = torch.where(stay, offset[b, i], rows_z[b, i] - t)
                label[b, i] = own_label
                anchored = flat[to_tie]
        return Following(arg, places, leader, same, rows_tied, p, total, shared, anchored,
                         Frames(origin, offset, label))

    def targets(self, keys: Tensor, frames: Frames | None) -> Tensor:
        """(batch, r, d) Σ_j P_ij z_j of the rows for keys at positions `keys` (batch, m, d) in `frames` (the keys'
        frames before the layer; their offsets are read, the rows' own frames are the plan's): in the row's frame,
        the member's offset where it shares it, else its position minus the row's origin."""
        batch, r = self.arg.shape
        m, d = keys.shape[1:]

        def members(x: Tensor) -> Tensor:  # x[b, arg[b, i]]: (batch, r, d)
            return x.reshape(batch * m, d).index_select(0, self.flat).view(batch, r, d)

        b, i = self.tied
        if self.frames is None:
            target = members(keys)
            if len(b):
                target[b, i] = (self.weights.unsqueeze(1) @ keys[b]).squeeze(1) / self.total
            return target
        origin = self.frames.origin
        target = torch.where(self.same.unsqueeze(-1), members(frames.offset), members(keys) - origin)
        if len(b):
            rel = torch.where(self.shared.unsqueeze(-1), frames.offset[b], keys[b] - origin[b, i].unsqueeze(1))
            target[b, i] = (self.weights.unsqueeze(1) @ rel).squeeze(1) / self.total
            if len(self.anchored):
                target.view(batch * r, d)[self.anchored] = 0
        return target


def _pair_scores(tokens: Tensor, queries: Tensor, present: Tensor,
                 allowed: Tensor | None) -> tuple[Tensor, Tensor]:
    """(scores (batch, m, m), rows (batch, m)): s_ij = ⟨A z_i, z_j⟩, −inf at absent keys and, with `allowed`
    (batch or 1, m, m) bool, where i may not attend to j; rows: the present tokens with at least one key left. The
    coarse pass and (★) then see the allowed keys only (a −inf score is never a candidate), and a row with no key
    has no candidate: no attention set, its own position as its target."""
    s = torch.baddbmm(score_bias(present, tokens.dtype), queries, tokens.transpose(-1, -2))  # (batch, m, m)
    if allowed is None:
        return s, present
    s = s.masked_fill(~allowed, -math.inf)
    return s, present & ~torch.isneginf(s.amax(-1))


def hardmax_rows(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float,
                  frames: Frames | None = None, allowed: Tensor | None = None) -> Rows:
    """Hardmax targets of every token, which tokens are leaders, and each row's own and best other score.

    tokens are positions; with `frames`, targets come in each row's (possibly new) frame. `allowed` (batch or 1,
    m, m) bool restricts row i to the keys j with allowed[i, j] (None: every key); a row left with none keeps its
    own position as its target.
    """
    queries = tokens if A is None else tokens @ A
    s, rows = _pair_scores(tokens, queries, weights > 0, allowed)
    return select(s, tokens, queries, weights, rows, tie_rtol, frames, A)


def hardmax_targets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float,
                    allowed: Tensor | None = None) -> Tensor:
    """(batch, m, d) hardmax targets Σ_j P_ij z_j of every token (`allowed`: as in `hardmax_rows`)."""
    return hardmax_rows(tokens, weights, A, tie_rtol, allowed=allowed).target


def hardmax_sets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float,
                 allowed: Tensor | None = None) -> Tensor:
    """(batch, m, m) bool attention sets C_i of every present token (rule (★) of `ties`), among the keys
    `allowed` (batch or 1, m, m) bool lets row i see (None: every key); a row with no key has the empty set."""
    queries = tokens if A is None else tokens @ A
    present = weights > 0
    s, rows = _pair_scores(tokens, queries, present, allowed)
    size = query_size(tokens, present, A)
    tol = coarse_tolerance(size, tokens, present, tie_rtol)
    return sets_from_scores(s, tokens, queries, size, rows, tol, tie_rtol, None)

