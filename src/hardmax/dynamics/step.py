"""The attention step: scores, the attention matrix, and one layer of (1.1) for a batch.

This is the definition of the attention layer: `simulate` and the sentiment classifier
(`hardmax.models`) both run it, so what is trained is exactly what is analysed. (`simulate`'s
default CPU engine for hardmax, `kernel`, is a compiled copy of `_select`'s rule, tested against it.)
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from hardmax.dynamics.dedup import take_rows
from hardmax.dynamics.ties import Frames, coarse_tolerance, query_size, refine

Attention = Literal["hardmax", "softmax"]
ATTENTIONS: tuple[str, ...] = ("hardmax", "softmax")


def default_tie_rtol(dtype: torch.dtype) -> float:
    """Relative tolerance for ties between distinct tokens: 64 machine epsilons.

    Two scores s_ij, s_il count as tied when they differ by at most
    ``tie_rtol * ||z_i||_A * max_j ||z_j||_A`` (the Cauchy-Schwarz bound on |s_ij|), which is the
    scale of the rounding error of a d-term dot product. float32: 7.6e-6, float64: 1.4e-14.
    """
    return 64.0 * torch.finfo(dtype).eps


def scores(tokens: Tensor, A: Tensor | None = None) -> Tensor:
    """Attention scores s_ij = ⟨A z_i, z_j⟩.

    Args:
        tokens: (batch, n, d). A: (d, d) symmetric positive definite, None for the identity.
    Returns:
        (batch, n, n).
    """
    queries = tokens if A is None else tokens @ A
    return queries @ tokens.transpose(-1, -2)


def _key_bias(weights: Tensor) -> Tensor:
    """(batch, 1, m) additive bias: log-multiplicity, -inf for absent tokens (weight 0)."""
    return torch.log(weights).unsqueeze(-2)


def attention_weights(
    tokens: Tensor,
    weights: Tensor | None = None,
    *,
    A: Tensor | None = None,
    attention: Attention = "hardmax",
    beta: float | Tensor | None = None,
    tie_rtol: float | None = None,
) -> Tensor:
    """The attention matrix P of one layer (see the module docstring).

    Args:
        tokens: (batch, m, d). weights: (batch, m) multiplicities, 0 = absent (padding); None = all 1.
        A: (d, d) SPD or None (identity). attention: "hardmax" or "softmax". beta: inverse temperature
        (softmax only). tie_rtol: tie tolerance (hardmax only), default `default_tie_rtol`.
    Returns:
        (batch, m, m), rows of present tokens sum to 1 and put the weight w_j on token j; rows of
        absent tokens are 0.
    """
    if weights is None:
        weights = torch.ones(tokens.shape[:-1], dtype=tokens.dtype, device=tokens.device)
    real = weights > 0
    if attention == "hardmax":
        rtol = default_tie_rtol(tokens.dtype) if tie_rtol is None else tie_rtol
        p = _hardmax_sets(tokens, weights, A, rtol) * weights.unsqueeze(-2)
        p = p / p.sum(-1, keepdim=True).clamp(min=torch.finfo(tokens.dtype).tiny)
    elif attention == "softmax":
        if beta is None:
            raise ValueError("softmax attention needs an inverse temperature beta > 0")
        logits = beta * scores(tokens, A) + _key_bias(weights)
        p = torch.softmax(logits, dim=-1)
    else:
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
    return torch.where(real.unsqueeze(-1), p, torch.zeros((), dtype=p.dtype, device=p.device))


class _Rows(NamedTuple):
    target: Tensor  # (batch, r, d) Σ_j P_ij z_j, in the row's frame when frames are given
    leader: Tensor  # (batch, r) bool: C_i = {i} (a single maximiser, itself)
    own: Tensor  # (batch, r) s_ii
    other: Tensor  # (batch, r) max_{j ≠ i} s_ij (the best score of another token)
    frames: Frames | None  # the rows' frames after following a token of another frame (None: no frames)


def _score_bias(present: Tensor, dtype: torch.dtype) -> Tensor:
    """(batch, 1, m) additive score bias: 0 for present keys, -inf for absent ones."""
    return torch.where(present, 0.0, -math.inf).to(dtype).unsqueeze(-2)


def _attention_sets(s: Tensor, keys: Tensor, queries: Tensor, size: Tensor, row_present: Tensor, tol: Tensor,
                    tie_rtol: float, frames: Frames | None) -> Tensor:
    """(batch, r, m) bool: C_i of the first r keys from their scores s (batch, r, m), rule (★) of `ties`.

    One pass keeps the keys within the coarse tolerance `tol` (batch, r) of the row's maximum; the rows
    with several (near-ties, and followers close to their leader) are decided by `ties.refine`.
    """
    members = (s >= (s.amax(dim=-1) - tol).unsqueeze(-1)) & row_present.unsqueeze(-1)
    multi = members.sum(-1) >= 2
    if bool(multi.any()):
        b, i = multi.nonzero(as_tuple=True)
        members[b, i] = refine(members[b, i], s[b, i], queries[b, i], size[b, 0], keys, frames, b, tie_rtol)
    return members


def _select(s: Tensor, keys: Tensor, queries: Tensor, weights: Tensor, row_present: Tensor, tie_rtol: float,
            frames: Frames | None = None, A: Tensor | None = None) -> _Rows:
    """Hardmax targets of the first r keys from their scores s (batch, r, m) against keys (batch, m, d).

    Row i's own score is s[:, i, i] (rows are the first r keys). queries (batch, r, d) are the rows'
    A z_i; row_present (batch, r). With `frames` (the keys' frames, see `ties`), a row that follows a
    single token of another frame moves into that frame, and its target is expressed in its frame.
    """
    r, m = s.shape[1:]
    rows_z = keys[:, :r]
    size = query_size(keys, weights > 0, A)
    tol = coarse_tolerance(size, keys, weights > 0, tie_rtol)
    members = _attention_sets(s, keys, queries, size, row_present, tol, tie_rtol, frames)
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
        return _Rows(target, leader, own, other, None)
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
    return _Rows(target, leader, own, other, Frames(origin, offset, label))


def _hardmax_rows(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float,
                  frames: Frames | None = None) -> _Rows:
    """Hardmax targets of every token, which tokens are leaders, and each row's own and best other score.

    tokens are positions; with `frames`, targets come in each row's (possibly new) frame.
    """
    queries = tokens if A is None else tokens @ A
    present = weights > 0
    s = torch.baddbmm(_score_bias(present, tokens.dtype), queries, tokens.transpose(-1, -2))  # (batch, m, m)
    return _select(s, tokens, queries, weights, present, tie_rtol, frames, A)


def _hardmax_targets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float) -> Tensor:
    """(batch, m, d) hardmax targets Σ_j P_ij z_j of every token."""
    return _hardmax_rows(tokens, weights, A, tie_rtol).target


def _hardmax_sets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float) -> Tensor:
    """(batch, m, m) bool attention sets C_i of every present token (rule (★) of `ties`)."""
    queries = tokens if A is None else tokens @ A
    present = weights > 0
    s = torch.baddbmm(_score_bias(present, tokens.dtype), queries, tokens.transpose(-1, -2))
    size = query_size(tokens, present, A)
    tol = coarse_tolerance(size, tokens, present, tie_rtol)
    return _attention_sets(s, tokens, queries, size, present, tol, tie_rtol, None)


def _move(tokens: Tensor, target: Tensor, gamma, present: Tensor) -> Tensor:
    return torch.where(present.unsqueeze(-1), tokens + gamma * (target - tokens), tokens)


def attention_step(
    tokens: Tensor,
    weights: Tensor | None = None,
    *,
    alpha: float | Tensor,
    A: Tensor | None = None,
    attention: Attention = "hardmax",
    beta: float | None = None,
    tie_rtol: float | None = None,
) -> Tensor:
    """One layer: z_i + γ (Σ_j P_ij z_j − z_i), γ = α/(1+α), for every present token.

    This is the hot path shared by `simulate` and the classifier. Arguments are not validated here
    (`simulate` and the models validate once). Absent tokens (weight 0) do not move.

    Args:
        tokens: (batch, m, d). weights: (batch, m) multiplicities (0 = absent), None = all present.
        alpha: scalar or 0-dim tensor > 0 (a tensor keeps autograd). beta: a Python float (the fused
        softmax kernel takes its scale as a number). Other arguments as in `attention_weights`.
    Returns:
        (batch, m, d), the tokens after the layer.
    """
    gamma = alpha / (1 + alpha)
    if weights is None:
        weights = torch.ones(tokens.shape[:-1], dtype=tokens.dtype, device=tokens.device)
    if attention == "hardmax":
        target = _hardmax_targets(tokens, weights, A, default_tie_rtol(tokens.dtype) if tie_rtol is None else tie_rtol)
    elif attention == "softmax":
        if beta is None:
            raise ValueError("softmax attention needs an inverse temperature beta > 0")
        queries = tokens if A is None else tokens @ A
        # log w_j turns a merged token back into its w_j copies; log 0 = -inf removes absent keys.
        # PyTorch's fused attention computes softmax(β q kᵀ + bias) v without materialising it twice,
        # forward and backward (several times faster than the three-op version on CPU).
        target = F.scaled_dot_product_attention(
            queries.unsqueeze(1), tokens.unsqueeze(1), tokens.unsqueeze(1),
            attn_mask=_key_bias(weights).unsqueeze(1), scale=float(beta),
        ).squeeze(1)
    else:
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
    return _move(tokens, target, gamma, weights > 0)
