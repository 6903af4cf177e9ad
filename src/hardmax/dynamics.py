"""Pure-attention dynamics: the attention step and `simulate` over layers.

This module is the single implementation of the attention layer. The particle simulator
(`simulate`) and the sentiment classifier (`hardmax.models`) both call `attention_step`, so what
is trained is exactly what is analysed.

The dynamics (Alcalde, Fantuzzi, Zuazua 2024, eq. 1.1) for tokens z_1..z_n in R^d:

    z_i^{k+1} = z_i^k + γ_k (Σ_j P_ij z_j^k − z_i^k),        γ_k = α_k / (1 + α_k)

    hardmax:  P_ij = w_j 1[j ∈ C_i] / Σ_{l ∈ C_i} w_l,   C_i = argmax_j ⟨A z_i^k, z_j^k⟩  (all ties kept)
    softmax:  P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l exp(β⟨A z_i, z_l⟩)

Identical tokens (repeated words, padding) are merged once, before the first layer, into one
token with multiplicity w_j: they have the same attention set and the same update at every layer,
so they stay identical forever, and merging makes their ties exact whatever the floating-point
reduction order. It is also what makes the engine fast (IMDb reviews have many repeats).
Geometry and theorem checks live in `hardmax.theory`; pictures in `hardmax.plots`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

Attention = Literal["hardmax", "softmax"]
ATTENTIONS: tuple[str, ...] = ("hardmax", "softmax")

__all__ = [
    "Attention",
    "Deduplicated",
    "Trajectory",
    "attention_step",
    "attention_weights",
    "deduplicate",
    "default_tie_rtol",
    "hardmax_layers",
    "scores",
    "simulate",
]


def default_tie_rtol(dtype: torch.dtype) -> float:
    """Relative tolerance for ties between distinct tokens: 64 machine epsilons.

    Two scores s_ij, s_il count as tied when they differ by at most
    ``tie_rtol * ||z_i||_A * max_j ||z_j||_A`` (the Cauchy-Schwarz bound on |s_ij|), which is the
    scale of the rounding error of a d-term dot product. float32: 7.6e-6, float64: 1.4e-14.
    """
    return 64.0 * torch.finfo(dtype).eps


# --------------------------------------------------------------------------------------------
# Deduplication: identical tokens become one token with a multiplicity weight.
# --------------------------------------------------------------------------------------------


def take_rows(values: Tensor, index: Tensor, lead: int = 0) -> Tensor:
    """values[..., b, index[b, i], :] for every b, i: (*lead_dims, batch, m, d) -> (*lead_dims, batch, r, d).

    The same as `torch.gather` along the token axis, but selects whole d-vectors through one flat
    `index_select`, which copies contiguous rows and is several times faster on CPU.
    """
    batch, m = values.shape[lead], values.shape[lead + 1]
    flat = values.reshape(*values.shape[:lead], batch * m, *values.shape[lead + 2:])
    offsets = torch.arange(batch, device=index.device).unsqueeze(-1) * m
    out = flat.index_select(lead, (index + offsets).reshape(-1))
    return out.reshape(*values.shape[:lead], batch, index.shape[1], *values.shape[lead + 2:])


@dataclass(frozen=True)
class Deduplicated:
    """Distinct tokens of each sequence, with multiplicities.

    Attributes:
        tokens: (batch, m, d) distinct tokens, m = the largest number of distinct tokens in the batch;
            unused slots are zero.
        weights: (batch, m) multiplicity of each distinct token among the *real* tokens; 0 for unused
            slots and for masked (padding) tokens, which neither attend nor are attended to.
        index: (batch, n) int64, position in `tokens` of each original token (original = tokens[index]).
    """

    tokens: Tensor
    weights: Tensor
    index: Tensor

    def expand(self, values: Tensor, lead: int = 0) -> Tensor:
        """Map per-distinct-token values (*lead_dims, batch, m, *rest) to (*lead_dims, batch, n, *rest).

        `lead` is the number of axes before the batch axis (1 for a (layers + 1, batch, m, d) path).
        """
        return take_rows(values, self.index, lead)


def deduplicate(tokens: Tensor, mask: Tensor | None = None, keys: Tensor | None = None, *,
                block: int = 1024) -> Deduplicated:
    """Group identical rows of each sequence (exact equality, no tolerance).

    Args:
        tokens: (batch, n, d) floating tokens.
        mask: (batch, n) bool, True for real tokens; None means all real. Masked tokens are kept
            apart from real ones and get weight 0.
        keys: optional (batch, n) or (batch, n, k) tensor that identifies equal tokens more cheaply
            (e.g. word ids, when tokens are embeddings of them). Equal keys must mean equal tokens.
        block: sequences grouped at a time; the hash and its checks make several temporaries the
            size of `tokens`, and small ones are reused by the allocator instead of faulted in anew.

    Returns:
        `Deduplicated`, real distinct tokens first (in an arbitrary but deterministic order), then
        masked ones, then unused slots.
    """
    batch, n, d = tokens.shape
    if batch > block:
        distinct, weights = torch.empty_like(tokens), tokens.new_empty(batch, n)
        index, m = torch.empty(batch, n, dtype=torch.long, device=tokens.device), 0
        for start in range(0, batch, block):
            rows = slice(start, start + block)
            part = deduplicate(tokens[rows], None if mask is None else mask[rows],
                               None if keys is None else keys[rows], block=block)
            width = part.tokens.shape[1]
            distinct[rows, :width], distinct[rows, width:] = part.tokens, 0.0
            weights[rows, :width], weights[rows, width:] = part.weights, 0.0
            index[rows], m = part.index, max(m, width)
        return Deduplicated(distinct[:, :m], weights[:, :m], index)
    own_keys = keys is None
    if own_keys:
        # +0.0 turns -0.0 into 0.0 so that the two zeros (equal points) share a group.
        keys = tokens.detach() + 0.0
    elif keys.dim() == 2:
        keys = keys.unsqueeze(-1)
    real = torch.ones(batch, n, dtype=torch.bool, device=tokens.device) if mask is None else mask
    if keys.shape[-1] == 1 and not keys.is_floating_point():
        return _group(tokens, real, keys[..., 0].long(), keys, verify=False)  # word ids: exact keys
    # Group by a hash of each key. Equal keys always share a hash; different keys that collide are
    # caught by checking every token against its group, and then grouped exactly (lexicographically).
    grouped = _group(tokens, real, _hash_rows(keys), keys, verify=True, keys_are_tokens=own_keys)
    return grouped if grouped is not None else _group(tokens, real, None, keys, verify=False)


def _group(tokens: Tensor, real: Tensor, sort_key: Tensor | None, keys: Tensor, verify: bool,
           keys_are_tokens: bool = False) -> Deduplicated | None:
    """Group tokens whose sort keys (batch, n) are equal, or whose keys are equal when sort_key is None.

    With verify, return None unless every token's key equals its group's key (no hash collision).
    """
    batch, n, d = tokens.shape
    device = tokens.device
    if sort_key is None:  # exact: lexicographic order of the key rows (stable sorts, last column first)
        order = torch.arange(n, device=device).expand(batch, n)
        for column in reversed(range(keys.shape[-1])):
            column_keys = torch.gather(keys[..., column], 1, order)
            order = torch.gather(order, 1, torch.sort(column_keys, dim=1, stable=True).indices)
    else:
        order = torch.sort(sort_key, dim=1, stable=True).indices
    # Real tokens first (stable), so a real token never shares a group with a masked one.
    order = torch.gather(order, 1, torch.sort((~real).gather(1, order).to(torch.uint8), dim=1,
                                              stable=True).indices)
    sorted_real = torch.gather(real, 1, order)
    new_group = torch.ones(batch, n, dtype=torch.bool, device=device)
    if sort_key is None:
        sorted_keys = take_rows(keys, order)
        new_group[:, 1:] = (sorted_keys[:, 1:] != sorted_keys[:, :-1]).any(-1)
    else:
        sorted_hash = torch.gather(sort_key, 1, order)
        new_group[:, 1:] = sorted_hash[:, 1:] != sorted_hash[:, :-1]
    new_group[:, 1:] |= sorted_real[:, 1:] != sorted_real[:, :-1]
    group_sorted = torch.cumsum(new_group, dim=1) - 1  # (batch, n) group id of each sorted position
    m = int(group_sorted[:, -1].max().item()) + 1 if n > 0 else 0
    index = torch.empty_like(group_sorted).scatter_(1, order, group_sorted)
    weights = torch.zeros(batch, m, dtype=tokens.dtype, device=device)
    weights.scatter_add_(1, index, real.to(tokens.dtype))
    # Every member of a group is the same point, so scatter (any writer wins) is exact.
    distinct = tokens.new_zeros(batch, m, d).scatter_(1, index.unsqueeze(-1).expand(-1, -1, d), tokens)
    if verify:
        # (== treats -0.0 and 0.0 as equal, so the tokens themselves can be compared with the keys.)
        group_keys = distinct.detach() if keys_are_tokens else \
            keys.new_zeros(batch, m, keys.shape[-1]).scatter_(1, index.unsqueeze(-1).expand_as(keys), keys)
        if not torch.equal(take_rows(group_keys, index), keys):
            return None
    return Deduplicated(tokens=distinct, weights=weights, index=index)


def _mix(x: Tensor) -> Tensor:
    """A splitmix64-style finaliser on int64 (wrap-around arithmetic)."""
    x = (x ^ (x >> 30)) * -4658895280553007687  # 0xbf58476d1ce4e5b9 as a signed int64
    x = (x ^ (x >> 27)) * -7723592293110705685  # 0x94d049bb133111eb
    return x ^ (x >> 31)


def _hash_rows(keys: Tensor) -> Tensor:
    """(batch, n) int64 hash of each row of keys (batch, n, k): the keys' bits, read as 32-bit (or
    16-bit) integers, dotted with fixed odd 64-bit multipliers (int64 wrap-around), then mixed.

    Integer arithmetic, so equal rows get equal hashes whatever the order of the sum. Different rows
    can collide (a linear hash has structured collisions); `deduplicate` detects that and regroups.
    """
    if keys.element_size() == 2:
        bits = keys.view(torch.int16)
    elif keys.element_size() in (4, 8):
        bits = keys.view(torch.int32) if keys.is_floating_point() or keys.dtype == torch.int32 else keys
    else:
        bits = keys
    bits = bits.long()
    k = bits.shape[-1]
    multipliers = _mix(torch.arange(1, k + 1, device=keys.device) * -7046029254386353131) | 1
    if bits.device.type == "cpu":
        return _mix(bits @ multipliers)  # int64 matrix-vector product: one pass over the keys
    return _mix((bits * multipliers).sum(-1))


# --------------------------------------------------------------------------------------------
# The attention step.
# --------------------------------------------------------------------------------------------


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
        queries = tokens if A is None else tokens @ A
        s = queries @ tokens.transpose(-1, -2) + torch.where(real, 0.0, -math.inf).unsqueeze(-2)
        tol = _tie_tolerance(queries, tokens, real, rtol)  # the step's own tolerance
        p = (s >= s.amax(dim=-1, keepdim=True) - tol.unsqueeze(-1)) * weights.unsqueeze(-2)
        p = p / p.sum(-1, keepdim=True).clamp(min=torch.finfo(tokens.dtype).tiny)
    elif attention == "softmax":
        if beta is None:
            raise ValueError("softmax attention needs an inverse temperature beta > 0")
        logits = beta * scores(tokens, A) + _key_bias(weights)
        p = torch.softmax(logits, dim=-1)
    else:
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
    return torch.where(real.unsqueeze(-1), p, torch.zeros((), dtype=p.dtype, device=p.device))


def _tie_tolerance(queries: Tensor, tokens: Tensor, present: Tensor, tie_rtol: float) -> Tensor:
    """(batch, m) tie_rtol · ||z_i||_A · max_j ||z_j||_A over present tokens (0 for absent ones).

    sqrt(a)·sqrt(b) rather than sqrt(a·b): the product overflows float32 for norms above ~4e9.
    """
    norms = torch.sqrt(torch.where(present, (queries * tokens).sum(-1), 0.0).clamp(min=0))
    return tie_rtol * norms * norms.amax(dim=-1, keepdim=True)


class _Rows(NamedTuple):
    target: Tensor  # (batch, r, d) Σ_j P_ij z_j
    leader: Tensor  # (batch, r) bool: C_i = {i} (a single maximiser, itself)
    own: Tensor  # (batch, r) s_ii
    other: Tensor  # (batch, r) max_{j ≠ i} s_ij (the best score of another token)


def _score_bias(present: Tensor, dtype: torch.dtype) -> Tensor:
    """(batch, 1, m) additive score bias: 0 for present keys, -inf for absent ones."""
    return torch.where(present, 0.0, -math.inf).to(dtype).unsqueeze(-2)


def _select(s: Tensor, keys: Tensor, queries: Tensor, weights: Tensor, tol: Tensor, row_present: Tensor) -> _Rows:
    """Hardmax targets of the first r tokens from their scores s (batch, r, m) against keys (batch, m, d).

    Row i's own score is s[:, i, i] (rows are the first r keys). Only cheap passes over s: the best
    score of another token (one max), then, in place, which scores reach the row's maximum minus the
    tolerance; their count says whether C_i has one member, and a matrix-vector product with
    0..m-1 says which. The few rows with several members (genuine ties) are recomputed with the full
    rule, so the result is the same as building P. queries (batch, r, d) are the rows' A z_i; tol
    (batch, r) their tie tolerances; row_present (batch, r). Overwrites s.
    """
    batch, r, m = s.shape
    diagonal = s.diagonal(dim1=1, dim2=2)
    own = diagonal.clone()
    diagonal.fill_(-math.inf)
    other = s.amax(dim=-1)
    threshold = torch.maximum(own, other) - tol  # (batch, r): members reach it
    own_member = own >= threshold
    members = s.ge_(threshold.unsqueeze(-1))  # 1.0 where j ≠ i is in C_i
    others = members.sum(-1)
    single_other = row_present & (others == 1) & ~own_member
    leader = row_present & (others == 0) & own_member
    tied = row_present & (others + own_member.to(s.dtype) >= 2)
    rows = torch.arange(r, device=s.device)
    index = (members @ torch.arange(m, dtype=s.dtype, device=s.device)).long()
    arg = torch.where(single_other, index, rows)  # a valid index everywhere; rows keep themselves otherwise
    target = take_rows(keys, arg)
    if bool(tied.any()):
        b, i = tied.nonzero(as_tuple=True)
        k = keys[b]  # (ties, m, d)
        row = torch.baddbmm(_score_bias(weights[b] > 0, keys.dtype), queries[b, i].unsqueeze(1),
                            k.transpose(-1, -2)).squeeze(1)
        in_c = row >= row.amax(dim=-1, keepdim=True) - tol[b, i].unsqueeze(-1)
        p = in_c * weights[b]
        target[b, i] = (p.unsqueeze(1) @ k).squeeze(1) / p.sum(-1, keepdim=True)
    return _Rows(target, leader, own, other)


def _hardmax_rows(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float) -> _Rows:
    """Hardmax targets of every token, which tokens are leaders, and each row's own and best other score."""
    queries = tokens if A is None else tokens @ A
    present = weights > 0
    s = torch.baddbmm(_score_bias(present, tokens.dtype), queries, tokens.transpose(-1, -2))  # (batch, m, m)
    return _select(s, tokens, queries, weights, _tie_tolerance(queries, tokens, present, tie_rtol), present)


def _hardmax_targets(tokens: Tensor, weights: Tensor, A: Tensor | None, tie_rtol: float) -> Tensor:
    """(batch, m, d) hardmax targets Σ_j P_ij z_j of every token."""
    return _hardmax_rows(tokens, weights, A, tie_rtol).target


def _move(tokens: Tensor, target: Tensor, gamma, present: Tensor) -> Tensor:
    return torch.where(present.unsqueeze(-1), tokens + gamma * (target - tokens), tokens)


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
    the result is always that of `attention_step` applied layer by layer.
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
    moved = tokens + gamma * (target - tokens)
    return torch.where((weights > 0).unsqueeze(-1), moved, tokens)


# --------------------------------------------------------------------------------------------
# simulate
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trajectory:
    """The result of `simulate`.

    Attributes:
        tokens: (layers + 1, *input_shape) positions at layers 0..layers (batch axis kept as given).
        alpha: (layers,) step parameter α_k of each layer.
        A: (d, d) the score matrix used.
        attention: "hardmax" or "softmax". beta: inverse temperature (softmax) or None.
        mask: (*input_shape[:-1]) bool, True for real tokens.
        tie_rtol: tolerance used for ties (hardmax).
        weights: (layers, *input_shape[:-1], n) attention matrix of each layer if requested, else None.
    """

    tokens: Tensor
    alpha: Tensor
    A: Tensor
    attention: str
    beta: float | None
    mask: Tensor
    tie_rtol: float
    weights: Tensor | None = None

    @property
    def layers(self) -> int:
        return self.tokens.shape[0] - 1

    @property
    def final(self) -> Tensor:
        """(*input_shape) positions after the last layer."""
        return self.tokens[-1]


def _as_tensor(x, name: str, dtype: torch.dtype | None = None, device=None) -> Tensor:
    """A tensor from a tensor, NumPy array, list or number; ValueError for anything non-numeric."""
    if isinstance(x, Tensor):
        t = x
    elif isinstance(x, np.ndarray | Sequence | float | int | np.generic):
        try:
            arr = np.asarray(x)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular numeric array ({e})") from None
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric (bool, int or float), got NumPy dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    else:
        raise ValueError(f"{name} must be a torch tensor or a NumPy array, got {type(x).__name__}")
    if t.is_complex():
        raise ValueError(f"{name} must be real, got complex dtype {t.dtype}")
    if dtype is not None or device is not None:
        t = t.to(dtype=dtype or t.dtype, device=device or t.device)
    return t


def validate_A(A, d: int, dtype: torch.dtype, device) -> Tensor:
    """Return A as a (d, d) tensor, or raise ValueError if it is not symmetric positive definite."""
    if A is None:
        return torch.eye(d, dtype=dtype, device=device)
    A = _as_tensor(A, "A", dtype=dtype, device=device)
    if A.shape != (d, d):
        raise ValueError(f"A must have shape ({d}, {d}) to match tokens of dimension {d}, got {tuple(A.shape)}")
    if not torch.isfinite(A).all():
        raise ValueError("A contains NaN or inf")
    scale = A.abs().max().clamp(min=1)
    if not torch.allclose(A, A.T, rtol=0, atol=1e3 * torch.finfo(dtype).eps * float(scale)):
        raise ValueError("A must be symmetric (A != A.T)")
    smallest = torch.linalg.eigvalsh(A.to(torch.float64)).min().item()
    if smallest <= 0:
        raise ValueError(f"A must be positive definite; its smallest eigenvalue is {smallest:.3g}")
    return A


def validate_alpha(alpha, layers: int, dtype: torch.dtype, device) -> Tensor:
    """Return α as a (layers,) tensor, or raise ValueError unless every α_k is finite and > 0."""
    a = _as_tensor(alpha, "alpha", dtype=torch.float64).detach().reshape(-1).cpu()
    if a.numel() == 0:
        raise ValueError("alpha must be a scalar or one value per layer, got an empty array")
    if not torch.isfinite(a).all() or (a <= 0).any():
        bad = a[~(torch.isfinite(a) & (a > 0))][0].item()
        raise ValueError(f"alpha must be finite and > 0, got {bad}")
    if a.numel() == 1:
        a = a.expand(layers)
    elif a.numel() != layers:
        raise ValueError(f"alpha must be a scalar or have one value per layer ({layers}), got {a.numel()} values")
    return a.to(dtype=dtype, device=device)


def simulate(
    tokens,
    *,
    alpha: float | Sequence[float] | Tensor,
    layers: int,
    A=None,
    attention: Attention = "hardmax",
    beta: float | None = None,
    mask=None,
    tie_rtol: float | None = None,
    return_weights: bool = False,
    chunk_size: int = 512,
) -> Trajectory:
    """Run the pure-attention dynamics (1.1) for `layers` layers.

    z_i^{k+1} = z_i^k + α_k/(1+α_k) (mean_{j ∈ C_i} z_j^k − z_i^k),  C_i = argmax_j ⟨A z_i^k, z_j^k⟩,
    with every maximiser kept and counted with multiplicity (softmax: P = softmax(β⟨A z_i, z_j⟩)).

    Args:
        tokens: (n, d) or (batch, n, d), NumPy array (float64 unless already floating) or tensor
            (dtype and device kept).
        alpha: α > 0, a scalar or one value per layer.
        layers: number of layers K ≥ 0.
        A: (d, d) symmetric positive definite matrix; None for the identity.
        attention: "hardmax" (exact, ties kept) or "softmax" (needs `beta`).
        beta: inverse temperature of softmax attention.
        mask: (n,) or (batch, n) bool, True for real tokens. Masked tokens (padding) neither attend nor
            are attended to, and do not move.
        tie_rtol: relative tolerance for ties between distinct tokens, default `default_tie_rtol`.
            Identical tokens are always tied exactly.
        return_weights: also return each layer's (n, n) attention matrix (memory: layers·n² per sequence).
        chunk_size: sequences processed together; chunks are formed from sequences with similar
            numbers of distinct tokens so the working set stays in cache.

    Returns:
        `Trajectory` with `.tokens` of shape (layers + 1, *tokens.shape).

    Raises:
        ValueError: on wrong shapes, NaN/inf tokens, non-SPD or wrongly sized A, α ≤ 0, negative layers,
            an unknown attention, or softmax without β > 0.

    Paper: Alcalde, Fantuzzi, Zuazua, "Clustering in pure-attention hardmax transformers", eq. (1.1).
    """
    z = _as_tensor(tokens, "tokens")
    if not z.is_floating_point():
        # Integer input: NumPy/lists become float64 (NumPy's default), integer tensors torch's default.
        z = z.to(torch.get_default_dtype() if isinstance(tokens, Tensor) else torch.float64)
    if z.dim() not in (2, 3):
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d), got {tuple(z.shape)}")
    if z.numel() == 0:
        raise ValueError(f"tokens must have at least one token of dimension ≥ 1, got {tuple(z.shape)}")
    if not (math.isfinite(z.amax()) and math.isfinite(z.amin())):  # NaN propagates; no temporary
        raise ValueError("tokens contain NaN or inf")
    if isinstance(layers, bool) or not isinstance(layers, int | np.integer) or layers < 0:
        raise ValueError(f"layers must be an integer ≥ 0, got {layers!r}")
    layers = int(layers)
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
    if attention == "softmax":
        if beta is None or not math.isfinite(float(beta)) or float(beta) <= 0:
            raise ValueError(f"softmax attention needs a finite inverse temperature beta > 0, got {beta!r}")
        beta = float(beta)
    elif beta is not None:
        raise ValueError("beta is only used by softmax attention; pass attention='softmax'")
    if tie_rtol is None:
        tie_rtol = default_tie_rtol(z.dtype)
    elif not isinstance(tie_rtol, int | float) or not (0 <= tie_rtol < 1):
        raise ValueError(f"tie_rtol must be a number in [0, 1), got {tie_rtol!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer ≥ 1, got {chunk_size!r}")

    single = z.dim() == 2
    batched = z.unsqueeze(0) if single else z
    batch, n, d = batched.shape
    A_t = validate_A(A, d, z.dtype, z.device)
    alphas = validate_alpha(alpha, layers, z.dtype, z.device)
    if mask is None:
        m_t = torch.ones(batch, n, dtype=torch.bool, device=z.device)
    else:
        m_t = _as_tensor(mask, "mask", device=z.device)
        if m_t.dtype != torch.bool:
            raise ValueError(f"mask must be boolean (True = real token), got dtype {m_t.dtype}")
        expected = (n,) if single else (batch, n)
        if tuple(m_t.shape) != expected:
            raise ValueError(f"mask must have shape {expected}, got {tuple(m_t.shape)}")
        m_t = m_t.reshape(batch, n)
    A_used = None if torch.equal(A_t, torch.eye(d, dtype=z.dtype, device=z.device)) else A_t

    out = torch.empty(layers + 1, batch, n, d, dtype=z.dtype, device=z.device)
    out[0] = batched
    out_w = torch.empty(layers, batch, n, n, dtype=z.dtype, device=z.device) if return_weights else None
    with torch.no_grad():
        dedup = deduplicate(batched, m_t)
        counts = dedup.index.amax(dim=1) + 1  # distinct tokens per sequence
    # Hardmax fast path: chunks return layer 1 in full and later layers for the followers only
    # (`_hardmax_run`); the full trajectory is then written once, with a few large copies.
    compact = attention == "hardmax" and out_w is None and layers > 0
    moving: list[tuple[Tensor, Tensor]] = []  # (flat positions (P,), positions at layers 2..K (layers - 1, P, d))
    in_full: list[tuple[Tensor, Tensor]] = []  # (rows, layers 1..K (layers, rows, n, d)) computed in full

    def run_chunk(rows: Tensor) -> None:
        with torch.no_grad():  # grad mode is thread-local
            width = int(counts[rows].max().item())
            u, w, index = dedup.tokens[rows, :width], dedup.weights[rows, :width], dedup.index[rows]
            if compact:
                run = _hardmax_run(u, w, alphas, A_used, tie_rtol)
                if run is None:
                    path = _full_layers(u, w, alphas, A_used, tie_rtol)
                    in_full.append((rows, take_rows(path[1:], index, lead=1)))
                    return
                out[1].index_copy_(0, rows, take_rows(run.first, index))
                f = run.later.shape[2]
                if f > 0:
                    slot = torch.gather(torch.argsort(run.order, dim=1), 1, index)  # (chunk, n)
                    b, t = (slot < run.followers.unsqueeze(1)).nonzero(as_tuple=True)
                    values = run.later.reshape(layers - 1, -1, d).index_select(1, b * f + slot[b, t])
                    moving.append((rows[b] * n + t, values))
                return
            path = torch.empty(layers + 1, *u.shape, dtype=z.dtype, device=z.device)
            path[0] = u
            part = Deduplicated(u, w, index)
            for k in range(layers):
                if out_w is not None:
                    p = attention_weights(path[k], w, A=A_used, attention=attention, beta=beta,
                                          tie_rtol=tie_rtol)
                    # Spread each distinct token's weight equally over its copies.
                    p = p / w.clamp(min=1).unsqueeze(-2)
                    full = part.expand(p)  # (chunk, n, width): rows expanded
                    out_w[k, rows] = torch.gather(full, 2, index.unsqueeze(1).expand(-1, n, -1))
                path[k + 1] = attention_step(path[k], w, alpha=alphas[k], A=A_used, attention=attention,
                                             beta=beta, tie_rtol=tie_rtol)
            out[1:].index_copy_(1, rows, part.expand(path[1:], lead=1))

    chunks = _chunks_by_size(counts, chunk_size)
    threads = torch.get_num_threads()
    if z.device.type == "cpu" and threads > 1 and len(chunks) > 1:
        # Chunks are independent: run them on `threads` Python threads with one intra-op thread each.
        # Small batched ops scale poorly inside one op (and OpenMP spin-waits when a core is busy);
        # torch releases the GIL, so whole chunks in parallel scale close to linearly.
        torch.set_num_threads(1)
        try:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                list(pool.map(run_chunk, chunks))
        finally:
            torch.set_num_threads(threads)
    else:
        for rows in chunks:
            run_chunk(rows)
    if compact:
        # Later layers are layer 1 again (leaders do not move) except where followers are.
        if layers > 1:
            out[2:] = out[1].expand(layers - 1, batch, n, d)
            if moving:
                positions = torch.cat([positions for positions, _ in moving])
                values = torch.cat([values for _, values in moving], dim=1)
                out[2:].view(layers - 1, batch * n, d).index_copy_(1, positions, values)
        for rows, path in in_full:
            out[1:].index_copy_(1, rows, path)
    if single:
        out = out[:, 0]
        out_w = out_w[:, 0] if out_w is not None else None
        m_t = m_t[0]
    return Trajectory(tokens=out, alpha=alphas, A=A_t, attention=attention, beta=beta, mask=m_t,
                      tie_rtol=float(tie_rtol), weights=out_w)


def _chunks_by_size(counts: Tensor, chunk_size: int) -> list[Tensor]:
    """Split sequence indices into chunks of ≤ chunk_size with similar distinct-token counts."""
    order = torch.argsort(counts, stable=True)
    return list(torch.split(order, max(1, chunk_size)))
