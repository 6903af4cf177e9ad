"""Hardmax over several layers with the leaders' rows skipped after the first layer."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from hardmax.dynamics.dedup import take_rows
from hardmax.dynamics.step import _hardmax_rows, _hardmax_targets, _move, _score_bias, _select, default_tie_rtol


class _Run(NamedTuple):
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


def _hardmax_run(tokens: Tensor, weights: Tensor, alphas: Tensor, A: Tensor | None, tie_rtol: float) -> _Run | None:
    """len(alphas) ≥ 1 hardmax layers, computing only the followers' rows after layer 1.

    Leaders never move (C_i = {i} makes the update zero), and stay leaders as long as no score in
    their row comes within the tie tolerance of their own. Layer 1 is computed in full; each
    sequence is then reordered followers first, and later layers compute the follower rows only
    (against every token). Those scores also show whether a follower came within the tolerance of a
    leader (s_fℓ = s_ℓf since A is symmetric); the leaders' scores of each other are fixed after
    layer 1 and are rechecked against the tolerance, which follows the largest norm. Where any
    leader could lose its place, this returns None and the caller computes every layer in full, so
    the result is always that of `attention_step` applied layer by layer (the follower rows' scores
    come from a smaller matrix product, so they may round differently in the last bit).
    """
    layers = alphas.shape[0]
    batch, m, d = tokens.shape
    present = weights > 0
    first = _hardmax_rows(tokens, weights, A, tie_rtol)
    z1 = _move(tokens, first.target, alphas[0] / (1 + alphas[0]), present)
    follower = present & ~first.leader
    counts = follower.sum(1)
    f = int(counts.max()) if layers > 1 and batch > 0 else 0
    if f == 0:
        order = torch.arange(m, device=tokens.device).expand(batch, m)
        return _Run(z1, order, counts, z1.new_empty(max(layers - 1, 0), batch, 0, d))
    order = torch.argsort((~follower).to(torch.uint8), dim=1, stable=True)  # followers first
    z = take_rows(z1, order)
    w, p = weights.gather(1, order), present.gather(1, order)
    bias = _score_bias(p, tokens.dtype)
    row_present, lead_present = p[:, :f], p[:, f:]
    fixed = z[:, f:]  # leaders (and absent tokens) from here on
    # A leader's own score and norm, and its best score on another token at layer 1.
    lead_own, lead_other = first.own.gather(1, order)[:, f:], first.other.gather(1, order)[:, f:]
    lead_norm = torch.sqrt(torch.where(lead_present, lead_own, 0.0).clamp(min=0))
    lead_norm_max = lead_norm.amax(1, keepdim=True) if m > f else z.new_zeros(batch, 1)
    later = z.new_empty(layers - 1, batch, f, d)
    in_place = not torch.is_grad_enabled()  # autograd needs z unchanged for the backward pass
    for k in range(1, layers):
        rows = z[:, :f]
        # Absent rows get zero queries: their scores are then 0 (or -inf), harmless in the check below.
        queries = torch.where(row_present.unsqueeze(-1), rows if A is None else rows @ A, 0.0)
        s = torch.baddbmm(bias, queries, z.transpose(-1, -2))  # (batch, f, m)
        norm = torch.sqrt((queries * rows).sum(-1).clamp(min=0))
        norm_max = torch.maximum(lead_norm_max, norm.amax(1, keepdim=True))
        if m > f:
            # A leader stays a leader while every other score in its row stays below its own minus
            # its tolerance: the followers' (read from their rows) and the other leaders' (fixed).
            lead_threshold = lead_own - tie_rtol * lead_norm * norm_max
            reach = torch.maximum(s[:, :, f:].amax(1), lead_other)
            if bool((lead_present & (reach >= lead_threshold)).any()):
                return None
        target = _select(s, z, queries, w, tie_rtol * norm * norm_max, row_present).target
        moved = _move(rows, target, alphas[k] / (1 + alphas[k]), row_present)
        later[k - 1] = moved
        if in_place:
            z[:, :f] = moved
        else:
            z = torch.cat((moved, fixed), 1)
    return _Run(z1, order, counts, later)


def _full_layers(tokens: Tensor, weights: Tensor, alphas: Tensor, A: Tensor | None, tie_rtol: float,
                 keep_path: bool = True) -> Tensor:
    """Every layer computed in full: (layers + 1, batch, m, d), or (1, batch, m, d) without keep_path."""
    present = weights > 0
    path = [tokens]
    for alpha in alphas:
        z = _move(path[-1], _hardmax_targets(path[-1], weights, A, tie_rtol), alpha / (1 + alpha), present)
        path = [*path, z] if keep_path else [z]
    return torch.stack(path)


def hardmax_layers(tokens: Tensor, weights: Tensor, alphas: Tensor, *, A: Tensor | None = None,
                   tie_rtol: float | None = None, keep_path: bool = True) -> Tensor:
    """Run len(alphas) hardmax layers; the same result as calling `attention_step` layer by layer.

    After the first layer only the followers' rows are computed (leaders never move); where a
    leader could lose its place the layers are computed in full instead (see `_hardmax_run`).

    Args:
        tokens: (batch, m, d); weights: (batch, m) multiplicities (0 = absent); alphas: (layers,).
    Returns:
        (layers + 1, batch, m, d) every layer if keep_path, else (1, batch, m, d) the last one.
    """
    rtol = default_tie_rtol(tokens.dtype) if tie_rtol is None else tie_rtol
    layers = alphas.shape[0]
    if layers == 0:
        return tokens.unsqueeze(0)
    run = _hardmax_run(tokens, weights, alphas, A, rtol)
    if run is None:
        return _full_layers(tokens, weights, alphas, A, rtol, keep_path)
    if keep_path:
        return torch.stack([tokens, *(run.layer(k) for k in range(1, layers + 1))])
    return run.layer(layers).unsqueeze(0)
