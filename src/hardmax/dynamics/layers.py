"""Hardmax over several layers with the leaders' rows skipped after the first layer."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from hardmax.dynamics.dedup import take_rows
from hardmax.dynamics.select import Rows, hardmax_rows, move, score_bias, select
from hardmax.dynamics.ties import Frames, coarse_tolerance, default_tie_rtol, query_size, refine

__all__ = ["CompactRun", "full_layers", "hardmax_layers", "hardmax_run", "leaders_hold"]


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
    moved = move(rows.frames.offset, rows.target, gamma, present)
    return _anchor(Frames(rows.frames.origin, moved, rows.frames.label), rows.leader, labels)


def leaders_hold(z: Tensor, frames: Frames, weights: Tensor, A: Tensor | None, tie_rtol: float,
                  b: Tensor, i: Tensor) -> bool:
    """Whether each token (b, i) still has C_i = {i} by rule (★), its row computed in full."""
    q = z[b, i] if A is None else z[b, i] @ A
    present = weights > 0
    s = torch.baddbmm(score_bias(present[b], z.dtype), q.unsqueeze(1), z[b].transpose(-1, -2)).squeeze(1)
    size = query_size(z[b], present[b], A)
    tol = coarse_tolerance(size, z[b], present[b], tie_rtol).squeeze(1)
    candidates = s >= (s.amax(-1) - tol).unsqueeze(-1)
    members = refine(candidates, s, q, size.squeeze(1), z, frames, b, tie_rtol, rows=i, A=A)
    return bool((members.sum(-1) == 1).all() and members[torch.arange(b.shape[0], device=b.device), i].all())


def hardmax_run(tokens: Tensor, weights: Tensor, alphas: Tensor, A: Tensor | None,
                tie_rtol: float) -> CompactRun | None:
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
    """
    layers = alphas.shape[0]
    batch, m, d = tokens.shape
    present = weights > 0
    labels = torch.arange(m, device=tokens.device).expand(batch, m)
    first = hardmax_rows(tokens, weights, A, tie_rtol, Frames.absolute(tokens))
    frames = _layer(first, alphas[0] / (1 + alphas[0]), present, labels)
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
    labels = labels.gather(1, order)
    w, p = weights.gather(1, order), present.gather(1, order)
    bias = score_bias(p, tokens.dtype)
    row_present, lead_present = p[:, :f], p[:, f:]
    # A leader's own score and its best score on another token at layer 1.
    lead_own, lead_other = first.own.gather(1, order)[:, f:], first.other.gather(1, order)[:, f:]
    later = z.new_empty(layers - 1, batch, f, d)
    for k in range(1, layers):
        rows = z[:, :f]
        # Absent rows get zero queries: their scores are then 0 (or -inf), harmless in the check below.
        queries = torch.where(row_present.unsqueeze(-1), rows if A is None else rows @ A, 0.0)
        s = torch.baddbmm(bias, queries, z.transpose(-1, -2))  # (batch, f, m)
        if m > f:
            # A leader stays a leader while no other score in its row comes near its own: the
            # followers' (read from their rows) and the other leaders' (fixed). Near ones are decided
            # in full by rule (★).
            reach = torch.maximum(s[:, :, f:].amax(1), lead_other)
            near = lead_present & (reach >= lead_own - coarse_tolerance(query_size(z, p, A), z, p, tie_rtol))
            if bool(near.any()):
                b, i = near.nonzero(as_tuple=True)
                if not leaders_hold(z, frames, w, A, tie_rtol, b, i + f):
                    return None
        selected = select(s, z, queries, w, row_present, tie_rtol, frames, A)
        moved = _layer(selected, alphas[k] / (1 + alphas[k]), row_present, labels[:, :f])
        frames = Frames(*(torch.cat((new, old[:, f:]), 1) for new, old in zip(moved, frames, strict=True)))
        z = torch.cat((moved.positions(), z[:, f:]), 1)
        later[k - 1] = z[:, :f]
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
        frames = _layer(rows, alpha / (1 + alpha), present, labels)
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
