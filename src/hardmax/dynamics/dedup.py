"""Deduplication: identical tokens become one token with a multiplicity weight.

Identical tokens (repeated words, padding) have the same attention set and the same update at every
layer, so they stay identical forever; merging them once, before the first layer, makes their ties
exact whatever the floating-point reduction order, and is what makes the engines fast.

Public: `deduplicate(tokens, mask, keys)` → `Deduplicated(tokens, multiplicity, index)`, called by the engines, the
leader rule (`theory.leaders`) and the classifiers (word ids as keys). The row helpers `take_rows` and `hash_rows`
are shared with the engines (`_engines.select`, `_engines.layers`); what merges identical tokens inside the
compiled kernel is its own (`_engines.kernel.deduplicate_review`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Deduplicated", "deduplicate"]


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
        multiplicity: (batch, m) multiplicity of each distinct token among the *real* tokens; 0 for unused
            slots and for masked (padding) tokens, which neither attend nor are attended to.
        index: (batch, n) int64, position in `tokens` of each original token (original = tokens[index]).
    """

    tokens: Tensor
    multiplicity: Tensor
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
            weights[rows, :width], weights[rows, width:] = part.multiplicity, 0.0
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
    grouped = _group(tokens, real, hash_rows(keys), keys, verify=True, keys_are_tokens=own_keys)
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
    m = int(group_sorted[:, -1].max().item()) + 1 if batch > 0 and n > 0 else n  # no sequences: width kept
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
    return Deduplicated(tokens=distinct, multiplicity=weights, index=index)


def _mix(x: Tensor) -> Tensor:
    """A splitmix64-style finaliser on int64 (wrap-around arithmetic)."""
    x = (x ^ (x >> 30)) * -4658895280553007687  # 0xbf58476d1ce4e5b9 as a signed int64
    x = (x ^ (x >> 27)) * -7723592293110705685  # 0x94d049bb133111eb
    return x ^ (x >> 31)


def hash_rows(keys: Tensor) -> Tensor:
    """(batch, n) int64 hash of each row of keys (batch, n, k): the keys as integers (a float's bits,
    read as 32-bit or 16-bit integers), dotted with fixed odd 64-bit multipliers (int64 wrap-around),
    then mixed.

    Integer arithmetic, so equal rows get equal hashes whatever the order of the sum. Different rows
    can collide (a linear hash has structured collisions); `deduplicate` detects that and regroups
    (`select.same_kind` too).
    """
    # Floats are read as their bits (float64 as two 32-bit halves); integers are used as they are.
    if keys.is_floating_point():
        keys = keys.view(torch.int16 if keys.element_size() == 2 else torch.int32)
    bits = keys.long()
    k = bits.shape[-1]
    multipliers = _mix(torch.arange(1, k + 1, device=keys.device) * -7046029254386353131) | 1
    if bits.device.type == "cpu":
        return _mix(bits @ multipliers)  # int64 matrix-vector product: one pass over the keys
    return _mix((bits * multipliers).sum(-1))
