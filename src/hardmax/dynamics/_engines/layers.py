"""Hardmax over several layers with the leaders' rows skipped after the first layer."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from hardmax.dynamics._engines.select import (
    Following,
    Rows,
    foreign_anchor,
    hardmax_rows,
    position_bits,
    same_kind,
    sets_from_scores,
)
from hardmax.dynamics._engines.ties import Frames, coarse_tolerance, query_size, refine
from hardmax.dynamics.dedup import take_rows
from hardmax.dynamics.rules import default_tie_rtol
from hardmax.dynamics.solvers import euler_update, layer_step


class CompactRun(NamedTuple):
    """A hardmax trajectory in compact form: layer 1 in full, then only the rows that may still move.

    Attributes:
        first: (batch, m, d) tokens after layer 1.
        order: (batch, m) a permutation of each sequence that puts its followers first.
        followers: (batch,) number of followers (present tokens that are not leaders after layer 1).
        later: (layers - 1, batch, f, d) tokens order[:, :f] at layers 2..K, f = followers.max();
            every other token stays where it is after layer 1.
    """

    first: Tensor
    order: Tensor
    followers: Tensor
    later: Tensor

    def layer(self, k: int) -> Tensor:
        """(batch, m, d) tokens after layer k ≥ 1."""
        f = self.later.shape[2]
        if k == 1 or f == 0:
            return self.first
        where = self.order[:, :f].unsqueeze(-1).expand(-1, -1, self.first.shape[-1])
        return self.first.scatter(1, where, self.later[k - 2])


def _anchor(frames: Frames, leader: Tensor, labels: Tensor) -> Frames:
    """Give every leader still in the absolute frame a frame of its own, with origin its position."""
    new = leader & (frames.label < 0)
    origin = torch.where(new.unsqueeze(-1), frames.offset, frames.origin)
    offset = torch.where(new.unsqueeze(-1), torch.zeros((), dtype=frames.offset.dtype, device=frames.offset.device),
                         frames.offset)
    return Frames(origin, offset, torch.where(new, labels, frames.label))


def _layer(rows: Rows, gamma, present: Tensor, labels: Tensor) -> Frames:
    """The rows' frames after one layer: offset + γ (target − offset), then leaders anchored."""
    moved = euler_update(rows.frames.offset, rows.target, gamma, present)
    return _anchor(Frames(rows.frames.origin, moved, rows.frames.label), rows.leader, labels)


def leaders_hold(z: Tensor, frames: Frames, weights: Tensor, A: Tensor | None, tie_rtol: float,
                  b: Tensor, i: Tensor) -> bool:
    """Whether each token (b, i) still has C_i = {i} by rule (★), its row computed in full."""
    return bool(_held(z, frames, weights, A, tie_rtol, b, i).all())


def _held(z: Tensor, frames: Frames, weights: Tensor, A: Tensor | None, tie_rtol: float,
          b: Tensor, i: Tensor, size: Tensor | None = None, tol: Tensor | None = None) -> Tensor:
    """(T,) bool: C_i = {i} by rule (★) for the tokens (b, i) (T,), each row computed in full. size, tol:
    (batch, 1) W and the coarse tolerance of each sequence when known (`query_size`, `coarse_tolerance`)."""
    present = weights > 0
    if size is None:
        size = query_size(z, present, A)
        tol = coarse_tolerance(size, z, present, tie_rtol)
    q = z[b, i] if A is None else z[b, i] @ A
    # The rows' scores from one product per sequence (its rows in places 0, 1, … of a padded block), not from a
    # copy of every key per row.
    place, counts = _places(b, z.shape[0])
    queries = q.new_zeros(z.shape[0], int(counts.max()), z.shape[-1])
    queries[b, place] = q
    s = (queries @ z.transpose(-1, -2))[b, place].masked_fill_(~present[b], -math.inf)  # (T, m)
    candidates = s >= (s.amax(-1) - tol[b, 0]).unsqueeze(-1)
    members = refine(candidates, s, q, size[b, 0], z, frames, b, tie_rtol, rows=i, A=A)
    return (members.sum(-1) == 1) & members[torch.arange(b.shape[0], device=b.device), i]


def _places(group: Tensor, groups: int) -> tuple[Tensor, Tensor]:
    """Each element's place 0, 1, … among the elements of its group (in order), and each group's size (groups,).
    group: (T,) int64 in 0..groups."""
    counts = torch.bincount(group, minlength=groups)
    order = torch.argsort(group, stable=True)
    place = torch.empty_like(group)
    place[order] = torch.arange(group.shape[0], device=group.device) - (torch.cumsum(counts, 0) - counts)[group[order]]
    return place, counts


#: The most layers `hardmax_run` computes ahead of their attention sets' decision.
AHEAD = 256
#: The most scores (layers ahead × batch × distinct follower rows × tokens) one batched decision of layers run ahead
#: may hold, and an eighth of the most sets (× followers instead of distinct rows, bools): 2^21, 16 MiB of float64
#: scores, some 150 MiB of working memory in all (`simulator.simulation_bytes`).
AHEAD_SCORES = 1 << 21
# Sets settle and rows come to share positions (the followers converged onto their leaders to rounding: some 80
# layers in float64 at α = 1/2) only in long runs: shorter ones (the classifier's 8 layers) are decided layer by
# layer, and the decisions of a run's first layers do not look for shared rows.
_SETTLED = 16


class _Distinct(NamedTuple):
    """The distinct rows of N states of f rows each: rows at one position (the same bits) in one frame, once.

    Attributes:
        slot: (N, f) each row's place among its state's distinct rows.
        rows: (N, width) the row standing for each place (padding: row 0).
        present: (N, width) a present row stands there (not padding, not absent rows).
        width: the most distinct rows of a state.
    """

    slot: Tensor
    rows: Tensor
    present: Tensor
    width: int

    @staticmethod
    def of(pos: Tensor, label: Tensor, present: Tensor, alone: Tensor | None = None) -> _Distinct:
        """Distinct rows of positions pos (N, f, d) with frame labels and presence (N, f); rows flagged `alone`
        (N, f) get a place of their own."""
        N, f, _ = pos.shape
        if f == 0:
            return _Distinct(label.new_zeros(N, 0), label.new_zeros(N, 0), present[:, :0], 0)
        index = torch.arange(f, device=pos.device).expand(N, f)
        state = torch.arange(N, device=pos.device).unsqueeze(1).expand(N, f)
        own = torch.full_like(index, -1) if alone is None else torch.where(alone, index, -1)
        kind = torch.cat([state.unsqueeze(-1), torch.where(present, label, -2).unsqueeze(-1),
                          torch.where(present, own, -1).unsqueeze(-1),
                          torch.where(present.unsqueeze(-1), position_bits(pos), 0)], -1)
        one, inverse = same_kind(kind.view(N * f, -1))
        # Places within each state, in the order of the groups' states.
        group_state = torch.div(one, f, rounding_mode="floor")
        place, counts = _places(group_state, N)
        width = int(counts.max())
        rows = torch.zeros(N, width, dtype=torch.long, device=pos.device)
        rows[group_state, place] = one % f
        taken = torch.zeros(N, width, dtype=torch.bool, device=pos.device)
        taken[group_state, place] = present.reshape(-1)[one]
        return _Distinct(place[inverse].view(N, f), rows, taken, width)

    def state(self) -> Tensor:
        """(N · width,) the state of each place."""
        N, width = self.rows.shape
        return torch.arange(N, device=self.rows.device).repeat_interleave(width)

    def batch(self) -> Tensor:
        """(N, 1) the state of each row, for indexing (N, width) by slot."""
        return torch.arange(self.slot.shape[0], device=self.slot.device).unsqueeze(1)

    def shared(self) -> Tensor:
        """(N, f) bool: rows whose place stands for more than one row."""
        N, width = self.rows.shape
        many = torch.zeros(N, width, dtype=torch.long, device=self.rows.device)
        many.scatter_add_(1, self.slot, torch.ones_like(self.slot))
        return many.gather(1, self.slot) > 1


class _Followers(NamedTuple):
    """The part of a compact run that stays fixed after layer 1: f follower rows first, then the leaders.

    Shapes: weights, present, labels (batch, m); lead_own, lead_other (batch, m − f) each leader's own score and
    best score on another leader at layer 1. absent: whether some token is absent (its scores are then −inf)."""

    f: int
    weights: Tensor
    present: Tensor
    labels: Tensor
    absent: bool
    lead_own: Tensor
    lead_other: Tensor
    A: Tensor | None
    tie_rtol: float

    def decide(self, z: Tensor, frames: Frames, grouped: bool = True) -> tuple[Tensor, Tensor, int]:
        """The followers' attention sets at K states at once, and whether every leader holds there.

        z: (K, batch, m, d) positions, frames: (K, batch, m[, d]). Returns members (K, batch, f, m) bool by
        rule (★), and held (K,) bool: no leader's row lets another token in (those that come near are decided
        in full; `hardmax_run` falls back to full layers where one does not hold), and the most distinct rows of a
        state (below).

        With `grouped`, each state's distinct rows are scored and decided once and their sets spread to every row.
        Tokens converge onto their leaders until their positions round onto them (their offsets still differ), so
        late in a run whole clusters of rows sit at one position. Rows at one position (the same bits) in one frame
        have the same queries, scores and candidates, and rule (★) compares candidate keys only, so their sets are
        the same, except where the row itself enters (`select.foreign_anchor`): such rows are decided one by one.
        """
        K, batch, m, d = z.shape
        f, A = self.f, self.A
        z = z.reshape(K * batch, m, d)
        frames = Frames(*(x.reshape(K * batch, *x.shape[2:]) for x in frames))
        present, weights = self.present.repeat(K, 1), self.weights.repeat(K, 1)
        size = query_size(z, present, A)
        tol = coarse_tolerance(size, z, present, self.tie_rtol)
        distinct = _Distinct.of(z[:, :f], frames.label[:, :f], present[:, :f]) if grouped else None
        sets, s = self._sets(z, frames, present, size, tol, distinct)
        if distinct is not None and distinct.width < f:
            # A row whose decision depends on the row itself (not only its position) is decided on its own.
            alone = distinct.shared() & foreign_anchor(
                sets.flatten(0, 1), frames, distinct.state(), frames.label.gather(1, distinct.rows).flatten()
            ).view(distinct.rows.shape)[distinct.batch(), distinct.slot]
            if bool(alone.any()):
                distinct = _Distinct.of(z[:, :f], frames.label[:, :f], present[:, :f], alone)
                sets, s = self._sets(z, frames, present, size, tol, distinct)
        held = torch.ones(K * batch, dtype=torch.bool, device=z.device)
        if m > f:
            # A leader stays a leader while no other score in its row comes near its own: the followers' (read
            # from their rows, s_fℓ = s_ℓf up to rounding, which the coarse tolerance covers) and the other
            # leaders' (fixed). Near ones are decided in full by rule (★).
            reach = torch.maximum(s[:, :, f:].amax(1), self.lead_other.repeat(K, 1))
            near = present[:, f:] & (reach >= self.lead_own.repeat(K, 1) - tol)
            if bool(near.any()):
                b, i = near.nonzero(as_tuple=True)
                held[b[~_held(z, frames, weights, A, self.tie_rtol, b, i + f, size, tol)]] = False
        if distinct is None:
            return sets.view(K, batch, f, m), held.view(K, batch).all(1), f
        members = sets.gather(1, distinct.slot.unsqueeze(-1).expand(-1, -1, m))  # (K batch, f, m)
        return members.view(K, batch, f, m), held.view(K, batch).all(1), distinct.width

    def _sets(self, z: Tensor, frames: Frames, present: Tensor, size: Tensor, tol: Tensor,
              distinct: _Distinct | None) -> tuple[Tensor, Tensor]:
        """The sets (N, width, m) of the distinct rows (None: of every follower row, width f) and their scores
        (N, width, m) (N = K · batch)."""
        A, f = self.A, self.f
        rows = z[:, :f] if distinct is None else take_rows(z, distinct.rows)
        row_present = present[:, :f] if distinct is None else distinct.present
        # Absent rows get zero queries: their scores are then 0 (or -inf), harmless in the leaders' check.
        queries = torch.where(row_present.unsqueeze(-1), rows if A is None else rows @ A, 0.0)
        s = queries @ z.transpose(-1, -2)
        if self.absent:
            s = s.masked_fill_(~present.unsqueeze(1), -math.inf)
        sets = sets_from_scores(s, z, queries, size, row_present, tol, self.tie_rtol, frames, A,
                                rows=None if distinct is None else distinct.rows)
        return sets, s

    def follow(self, z: Tensor, frames: Frames, members: Tensor, gamma) -> tuple[Tensor, Frames, Following]:
        """One layer of the followers with attention sets `members` (batch, f, m): positions and frames after it,
        and the plan of the sets."""
        f = self.f
        plan = Following.of(members, z, self.weights, self.present[:, :f], frames)
        moved = _layer(Rows(plan.targets(z, frames), plan.leader, None, None, plan.frames), gamma,
                       self.present[:, :f], self.labels[:, :f])
        frames = Frames(*(torch.cat((new, old[:, f:]), 1) for new, old in zip(moved, frames, strict=True)))
        return torch.cat((moved.positions(), z[:, f:]), 1), frames, plan

    def again(self, z: Tensor, frames: Frames, plan: Following, gammas: Tensor) -> list[tuple[Tensor, Frames]]:
        """len(gammas) more layers with the sets of `plan`, when it moves no frame: only the offsets move. The
        same arithmetic as `follow` (the targets, `move`, the positions), none of its bookkeeping. Returns the
        positions and frames after each."""
        f = self.f
        origin, framed = frames.origin[:, :f], (frames.label[:, :f] >= 0).unsqueeze(-1)
        present = self.present[:, :f].unsqueeze(-1)
        fixed_z, fixed_offset = z[:, f:], frames.offset[:, f:]
        states = []
        for gamma in gammas:
            old = frames.offset[:, :f]
            offset = euler_update(old, plan.targets(z, frames), gamma)
            if self.absent:
                offset = torch.where(present, offset, old)
            z = torch.cat((torch.where(framed, origin + offset, offset), fixed_z), 1)
            frames = frames._replace(offset=torch.cat((offset, fixed_offset), 1))
            states.append((z, frames))
        return states


def hardmax_run(tokens: Tensor, weights: Tensor, alphas: Tensor, A: Tensor | None,
                tie_rtol: float, ahead: int = AHEAD) -> CompactRun | None:
    """len(alphas) ≥ 1 hardmax layers, computing only the followers' rows after layer 1.

    Leaders never move (C_i = {i} makes the update zero), and stay leaders as long as no other token
    enters their attention set. Layer 1 is computed in full; each sequence is then reordered followers
    first, and later layers compute the follower rows only (against every token). Those scores also
    show whether a follower came near a leader's row maximum (s_fℓ = s_ℓf since A is symmetric, up to
    rounding: the coarse tolerance covers it); such a leader's row is then decided in full by rule (★).
    Where a leader loses its place, this returns None and the caller computes every layer in full,
    so the result is always that of the full computation (the follower rows' scores come from a
    smaller matrix product, so they may round differently in the last bit). Positions are carried
    in frames (see `ties`): followers of a leader as offsets from it.

    Layers run ahead of their decision. Once the tokens settle, a layer's attention sets are mostly its
    predecessor's: the run then computes up to `ahead` layers with the sets held (a few elementwise operations a
    layer: `Following.targets`, the move), decides the sets of all those layers in one batched pass, and keeps
    the layers up to the first whose sets (or fixed keys) differ, from where it goes on. Every kept layer is one
    the layer-by-layer run computes, bit for bit: its sets were decided at its own positions, its arithmetic is
    the same. The span doubles while the guesses hold and falls back to what held, so a sequence whose sets
    change at every layer runs layer by layer (ahead=1 always does); the memory of a decision bounds it
    (`AHEAD_SCORES`).
    """
    layers = alphas.shape[0]
    batch, m, d = tokens.shape
    present = weights > 0
    labels = torch.arange(m, device=tokens.device).expand(batch, m)
    first = hardmax_rows(tokens, weights, A, tie_rtol, Frames.absolute(tokens))
    frames = _layer(first, layer_step(alphas[0]), present, labels)
    z1 = frames.positions()
    follower = present & ~first.leader
    counts = follower.sum(1)
    f = int(counts.max()) if layers > 1 and batch > 0 else 0
    if f == 0:
        order = torch.arange(m, device=tokens.device).expand(batch, m)
        return CompactRun(z1, order, counts, z1.new_empty(max(layers - 1, 0), batch, 0, d))
    order = torch.argsort((~follower).to(torch.uint8), dim=1, stable=True)  # followers first
    z = take_rows(z1, order)
    frames = Frames(take_rows(frames.origin, order), take_rows(frames.offset, order), frames.label.gather(1, order))
    p = present.gather(1, order)
    run = _Followers(f, weights.gather(1, order), p, labels.gather(1, order), not bool(p.all()),
                     first.own.gather(1, order)[:, f:], first.other.gather(1, order)[:, f:], A, tie_rtol)
    gammas = layer_step(alphas)
    later = z.new_empty(layers - 1, batch, f, d)
    if layers < _SETTLED:
        ahead = 1  # a short run (the classifier's 8 layers): its sets change at almost every layer
    span, k = 1, 1  # layers run at once; layers done (z, frames: after layer k)
    members, held, distinct = run.decide(z.unsqueeze(0), Frames(*(x.unsqueeze(0) for x in frames)), grouped=False)
    members, held = members[0], bool(held[0])
    while k < layers:
        if not held:
            return None
        before = frames
        z, frames, plan = run.follow(z, frames, members, gammas[k])
        # The sets held compute the next layers only after a layer that moved no frame (then neither would they).
        steady = ahead > 1 and torch.equal(frames.label, before.label) and torch.equal(frames.origin, before.origin)
        ahead_now = min(span, layers - k) if steady else 1
        states = [(z, frames), *run.again(z, frames, plan, gammas[k + 1:k + ahead_now])]
        kept = ahead_now
        checked = ahead_now - (k + ahead_now == layers)  # the last layer's sets are never needed
        if checked:
            # (checked, batch, m, d): layers k+1, …; one layer as a view, not a copy
            zs = torch.stack([state[0] for state in states[:checked]]) if checked > 1 else z.unsqueeze(0)
            framed = (Frames(*(torch.stack(x) for x in zip(*(state[1] for state in states[:checked]), strict=True)))
                      if checked > 1 else Frames(*(x.unsqueeze(0) for x in frames)))
            sets, holds, distinct = run.decide(zs, framed, grouped=k >= _SETTLED)
            if ahead > 1:
                # A layer computed with held sets is the layer-by-layer one while the sets, and which keys sit at a
                # fixed position (a tie between fixed keys is followed in its own frame), are those it was run with.
                differs = (sets != members).flatten(1).any(1)
                if ahead_now > 1:
                    differs |= (framed.fixed()[..., :f] != before.fixed()[:, :f]).flatten(1).any(1)
                differs = differs.tolist()
                kept = next((j + 1 for j, x in enumerate(differs[:ahead_now - 1]) if x), ahead_now)
                # The scores of a decision are (layers, batch, distinct rows, m), the sets (layers, batch, f, m).
                limit = max(1, min(ahead, AHEAD_SCORES // max(1, batch * distinct * m),
                                   8 * AHEAD_SCORES // (batch * f * m)))
                span = min(2 * span, limit) if steady and not any(differs) else max(1, min(kept, limit))
            if not all(holds[:min(kept, checked)].tolist()):
                return None
            if k + kept < layers:
                members, held = sets[kept - 1], True
        for j in range(kept):
            later[k - 1 + j] = states[j][0][:, :f]
        z, frames = states[kept - 1]
        k += kept
    return CompactRun(z1, order, counts, later)


def full_layers(tokens: Tensor, weights: Tensor, alphas: Tensor, A: Tensor | None, tie_rtol: float,
                 keep_path: bool = True) -> Tensor:
    """Every layer computed in full: (layers + 1, batch, m, d), or (1, batch, m, d) without keep_path."""
    present = weights > 0
    labels = torch.arange(tokens.shape[1], device=tokens.device).expand(tokens.shape[:2])
    frames = Frames.absolute(tokens)
    path = [tokens]
    for alpha in alphas:
        rows = hardmax_rows(path[-1], weights, A, tie_rtol, frames)
        frames = _layer(rows, layer_step(alpha), present, labels)
        z = frames.positions()
        path = [*path, z] if keep_path else [z]
    return torch.stack(path)


def hardmax_layers(tokens: Tensor, multiplicity: Tensor, alphas: Tensor, *, A: Tensor | None = None,
                   tie_rtol: float | None = None, keep_path: bool = True) -> Tensor:
    """Run len(alphas) hardmax layers; the same result as calling `attention_step` layer by layer.

    After the first layer only the followers' rows are computed (leaders never move); where a
    leader could lose its place the layers are computed in full instead (see `hardmax_run`).

    Args:
        tokens: (batch, m, d); multiplicity: (batch, m) (0 = absent); alphas: (layers,).
        tie_rtol: as in `Hardmax(tie_rtol)`.
    Returns:
        (layers + 1, batch, m, d) every layer if keep_path, else (1, batch, m, d) the last one.
    """
    rtol = default_tie_rtol(tokens.dtype) if tie_rtol is None else tie_rtol
    weights = multiplicity
    layers = alphas.shape[0]
    if layers == 0:
        return tokens.unsqueeze(0)
    run = hardmax_run(tokens, weights, alphas, A, rtol)
    if run is None:
        return full_layers(tokens, weights, alphas, A, rtol, keep_path)
    if keep_path:
        return torch.stack([tokens, *(run.layer(k) for k in range(1, layers + 1))])
    return run.layer(layers).unsqueeze(0)
