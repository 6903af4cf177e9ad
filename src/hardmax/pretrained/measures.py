"""The three views of attention, per layer and head, each one batched function of a `Record`, and their streaming
sum over many batches.

    clustering(record)   pairwise cosines of each layer's tokens (histogram, mean), clusters at a cosine threshold,
                         effective rank; per head the hardmax sets C_i = argmax_j s_ij (ties kept), leaders
                         (C_i = {i}), the most selected tokens, the softmax mass on C_i, the entropy of P_i
    selection(record)    per head the score margin s_{i,α_i} − max_{j ≠ α_i} s_ij between the selected token and the
                         runner-up (the Att-SVM of one head: `hardmax.pretrained.svm`)
    coding(record, U)    R(X_ℓ, ε) of each layer's attention input (tokens normalised to the unit sphere), CRATE's
                         compression R^c(X_ℓ | U_ℓ) over the heads' value subspaces, ΔR = R − R^c, the sparsity of the
                         MLP activations (fraction ≤ 0, and exactly 0)

Each returns sums and counts (`+` adds two batches), so `inspect` streams any number of texts in constant memory.
Geshkovski et al., "A mathematical perspective on Transformers" (the cosine histograms, ALBERT); Tarzanagh et al.,
"Transformers as Support Vector Machines"; Yu et al., "White-box transformers via sparse rate reduction" (CRATE).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from hardmax.measures import coding_rate
from hardmax.pretrained.families import HeadWeights
from hardmax.pretrained.recording import Record
from hardmax.theory import cluster_counts

__all__ = ["Clustering", "Coding", "Selection", "ViewConfig", "clustering", "coding", "selection",
           "value_subspaces"]


@dataclass(frozen=True, kw_only=True)
class ViewConfig:
    """Settings of the three views."""

    bins: int = 40  # bins of the pairwise-cosine histogram on [−1, 1]
    threshold: float = 0.9  # tokens at cosine ≥ threshold (a chain of them, diameter within it) are one cluster
    eps: float = 0.5  # the coding rate's distortion ε, for tokens on the unit sphere

    def __post_init__(self):
        if not isinstance(self.bins, int) or not 2 <= self.bins <= 1000:
            raise ValueError(f"bins must be an integer from 2 to 1000, got {self.bins!r}")
        if not -1 < self.threshold < 1:
            raise ValueError(f"threshold must be a cosine in (−1, 1), got {self.threshold!r}")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise ValueError(f"eps must be a finite number > 0, got {self.eps!r}")


class _Sums:
    """Sums and counts that add field by field (tensors, ints, floats)."""

    def __add__(self, other):
        if other is None:
            return self
        return type(self)(**{f.name: _add(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)})

    __radd__ = __add__


def _add(a, b):
    if isinstance(a, Tensor):
        return a + b.to(a.device)
    if isinstance(a, int | float):
        return a + b
    return a  # settings: the same in every batch


@dataclass(frozen=True)
class Clustering(_Sums):
    """Clustering view, summed over texts (index 0 of the layer axis is the embeddings, ℓ the output of layer ℓ).

    Attributes:
        histogram: (L+1, bins) int64 counts of the pairwise cosines of distinct real tokens of a text.
        cosine: (L+1,) Σ over texts of the text's mean pairwise cosine. clusters: (L+1,) Σ of its cluster count.
        rank: (L+1,) Σ of its effective rank exp(−Σ_k p_k log p_k), p = σ/Σσ of its normalised tokens.
        texts: texts summed. rows: (L, H) real query rows. leaders: (L, H) rows with C_i = {i}.
        set_size: (L, H) Σ |C_i|. mass: (L, H) Σ Σ_{j∈C_i} P_ij. entropy: (L, H) Σ −Σ_j P_ij log P_ij (nats).
        selected: (L, H, V) int64 how often each vocabulary id was a row's first selected token.
    """

    histogram: Tensor
    cosine: Tensor
    clusters: Tensor
    rank: Tensor
    texts: int
    rows: Tensor
    leaders: Tensor
    set_size: Tensor
    mass: Tensor
    entropy: Tensor
    selected: Tensor


@dataclass(frozen=True)
class Selection(_Sums):
    """Selection view, summed: margin (L, H) Σ of s_{i,α_i} − s_{i,runner-up} over rows with a runner-up (count:
    rows), smallest (L, H) the smallest margin seen (0: a tie)."""

    margin: Tensor
    rows: Tensor
    smallest: Tensor

    def __add__(self, other):
        if other is None:
            return self
        return Selection(margin=self.margin + other.margin, rows=self.rows + other.rows,
                         smallest=torch.minimum(self.smallest, other.smallest))

    __radd__ = __add__


@dataclass(frozen=True)
class Coding(_Sums):
    """Coding-rate view, summed over texts (layer ℓ: its attention input X_ℓ, tokens normalised).

    Attributes:
        rate: (L,) Σ R(X_ℓ, ε). compression: (L,) Σ R^c(X_ℓ | U_ℓ). texts: texts summed.
        inactive: (L,) Σ over real tokens of the fraction of MLP activations ≤ 0; zero: of those exactly 0;
        tokens: real tokens summed.
    """

    rate: Tensor
    compression: Tensor
    texts: int
    inactive: Tensor
    zero: Tensor
    tokens: int


def _unit(x: Tensor) -> Tensor:
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)


def clustering(record: Record, config: ViewConfig | None = None, vocabulary: int | None = None) -> Clustering:
    """The clustering view of one batch (see `Clustering`): hidden states (L+1, B, n, d) and each head's scores.

    Cosines cos_ij = ⟨h_i, h_j⟩ / (‖h_i‖ ‖h_j‖) over distinct real tokens of a text; clusters counted by
    `hardmax.theory.cluster_counts` on the normalised tokens at distance √(2 − 2·threshold); C_i = {j : s_ij =
    max_k s_ik} over the keys i may attend to (exact ties kept); P the model's attention weights.
    `vocabulary`: the size of the selected-token counts (default: largest id + 1 of the batch).
    """
    config = ViewConfig() if config is None else config
    mask = record.mask
    B, n = mask.shape
    u = _unit(record.hidden)  # (L+1, B, n, d), in the model's dtype
    depth = u.shape[0]
    cos = u @ u.transpose(-1, -2)  # (L+1, B, n, n)
    pairs = mask[:, :, None] & mask[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=mask.device)
    bins = config.bins
    index = ((cos + 1) * (bins / 2)).long().clamp_(0, bins - 1)
    index = index + (torch.arange(depth, device=cos.device) * bins).view(-1, 1, 1, 1)
    # the pairs that are not (padding, i = j) go to one extra bin, dropped: no gather of the pairs
    index.masked_fill_(~pairs, depth * bins)
    histogram = torch.bincount(index.flatten(), minlength=depth * bins + 1)[:-1].view(depth, bins)
    npairs = pairs.sum((-2, -1)).clamp_min(1)  # (B,)
    cosine = ((cos * pairs).sum((-2, -1)) / npairs).sum(-1)
    tol = math.sqrt(2 - 2 * config.threshold)
    # the chord distances of unit tokens from their cosines (|u_i − u_j|² = 2 − 2 cos_ij): no second n × n product
    chord = (2 - 2 * cos).clamp_min_(0).sqrt_()
    clusters = cluster_counts(u, tol, mask.expand(depth, B, n), distances=chord).sum(-1).double()
    del chord
    # σ_k² are the eigenvalues of the Gram matrix of the real tokens, which is cos on them (n × n: cheaper than an
    # SVD). Padding gets the eigenvalue −1 (clamped to 0 below) rather than a block of zeros: LAPACK's eigensolver
    # takes seconds on a degenerate zero block (27 s for one batch of MiniLM here, 0.06 s with −1).
    both = mask[:, :, None] & mask[:, None, :]
    gram = torch.where(both, cos, 0) - torch.diag_embed((~mask).to(cos.dtype))
    sv = torch.linalg.eigvalsh(gram).double().clamp_min(0).sqrt()  # (L+1, B, n)
    p = sv / sv.sum(-1, keepdim=True)
    rank = torch.exp(-torch.special.xlogy(p, p).sum(-1)).sum(-1)
    heads = _heads(record)
    V = int(record.ids.max()) + 1 if vocabulary is None else int(vocabulary)
    L, H = record.layers, record.heads
    real = mask[:, None, :]  # (B, 1, n) real query rows
    slot = ((torch.arange(L, device=mask.device).view(L, 1, 1, 1) * H
             + torch.arange(H, device=mask.device).view(1, 1, H, 1)) * V + heads.first)  # (L, B, H, n)
    selected = torch.bincount(slot[real.expand(L, *heads.first.shape[1:])], minlength=L * H * V)
    return Clustering(histogram=histogram, cosine=cosine.double(), clusters=clusters, rank=rank, texts=B,
                      rows=heads.rows, leaders=heads.leaders, set_size=heads.set_size, mass=heads.mass,
                      entropy=heads.entropy, selected=selected.view(L, H, V))


@dataclass(frozen=True)
class _Heads:
    """What one pass over each layer's (B, H, n, n) scores gives both head views (sums over real query rows, (L, H)
    float64): rows, leaders, Σ |C_i|, Σ P mass on C_i, Σ entropy, Σ margin and its rows, the smallest margin; first
    (L, B, H, n) int64, the id of each row's first selected token."""

    rows: Tensor
    leaders: Tensor
    set_size: Tensor
    mass: Tensor
    entropy: Tensor
    margin: Tensor
    margin_rows: Tensor
    smallest: Tensor
    first: Tensor


_HEADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Record -> _Heads: one pass serves both views


def _heads(record: Record) -> _Heads:
    """The head measures of a record, computed once (one layer's scores at a time: memory is one (B, H, n, n)
    tensor) and kept while the record lives."""
    if record in _HEADS:
        return _HEADS[record]
    mask = record.mask
    L, H = record.layers, record.heads
    rows = torch.zeros(L, H, dtype=torch.float64, device=mask.device)
    leaders, set_size, mass, entropy, margin, margin_rows = (torch.zeros_like(rows) for _ in range(6))
    smallest = torch.full_like(rows, math.inf)
    first_ids = []
    real = mask[:, None, :]  # (B, 1, n) real query rows
    allowed = record.allowed
    for layer in range(L):
        s = record.scores(layer)
        top2, where = s.topk(min(2, s.shape[-1]), dim=-1)  # (B, H, n, 2): the largest score and the runner-up
        top = top2[..., :1]
        C = (s == top) & allowed  # C_i = argmax_j s_ij, ties kept
        del s
        size = C.view(torch.uint8).sum(-1, dtype=torch.int32)  # (a bool sum widens every entry to int64 first)
        own = C.diagonal(dim1=-2, dim2=-1)  # (B, H, n): i ∈ C_i
        # the first selected key: topk returns a maximal index, not always the first of a tie; C's first True is
        first = C.to(torch.uint8).argmax(-1, keepdim=True) if bool((size > 1).any()) else where[..., :1]
        P = record.per_layer["attention"][layer]  # the model's weights, in its dtype; sums accumulated in float64
        rows[layer] = real.sum((0, 2))
        leaders[layer] = ((size == 1) & own & real).sum((0, 2))
        set_size[layer] = (size * real).sum((0, 2))
        # every key of C_i has the same score, so the same weight: Σ_{j ∈ C_i} P_ij = |C_i| P_{i, first}
        mass[layer] = (P.gather(-1, first).squeeze(-1) * size).mul_(real).double().sum((0, 2))
        entropy[layer] = torch.special.entr(P).sum(-1).mul_(real).double().sum((0, 2))
        if top2.shape[-1] == 2:
            gap = (top2[..., 0] - top2[..., 1]).double()
            ok = real & torch.isfinite(gap)
            margin[layer] = torch.where(ok, gap, 0).sum((0, 2))
            margin_rows[layer] = ok.sum((0, 2))
            smallest[layer] = torch.where(ok, gap, math.inf).amin((0, 2))
        first_ids.append(record.ids.gather(1, first.flatten(1)).view(first.shape[:-1]))
    heads = _Heads(rows=rows, leaders=leaders, set_size=set_size, mass=mass, entropy=entropy, margin=margin,
                   margin_rows=margin_rows, smallest=smallest, first=torch.stack(first_ids))
    _HEADS[record] = heads
    return heads


def selection(record: Record) -> Selection:
    """The selection view of one batch: per head Σ of the margin s_{i,α_i} − s_{i,(2)} between the top two scores of
    each real query row that has at least two keys (a tie gives 0), and the smallest margin."""
    heads = _heads(record)
    return Selection(margin=heads.margin, rows=heads.margin_rows, smallest=heads.smallest)


def value_subspaces(weights: list[HeadWeights]) -> Tensor:
    """(L, H, d, d_h) orthonormal bases U_ℓ^h of the row spaces of the heads' value maps W_V^h (what the head reads
    from a token: CRATE's U_k for a trained model), by QR in float64."""
    W = torch.stack([w.Wv for w in weights]).double()  # (L, H, d_h, d)
    return torch.linalg.qr(W.transpose(-1, -2)).Q


def coding(record: Record, subspaces: Tensor, config: ViewConfig | None = None) -> Coding:
    """The coding-rate view of one batch: R(X_ℓ, ε) and R^c(X_ℓ | U_ℓ) = Σ_h R(U_ℓ^hᵀ X_ℓ, ε) of each text's
    normalised attention inputs X_ℓ (`hardmax.measures.coding_rate`; R^c as `subspace_coding_rate` defines it, all
    heads in one batched call), and the MLP sparsity.
    subspaces: (L, H, d, d_h) from `value_subspaces`."""
    config = ViewConfig() if config is None else config
    mask = record.mask
    u = _unit(record.inputs)
    L = u.shape[0]
    rate = coding_rate(u, config.eps, mask=mask.expand(L, *mask.shape)).sum(-1)
    U = subspaces.to(device=u.device, dtype=u.dtype)
    # R^c(X | U) = Σ_h R(X U_h, ε) (`subspace_coding_rate`'s definition), every layer, text and head in one call
    projected = torch.einsum("lbnd,lhdp->lbhnp", u, U)  # (L, B, H, n, d_h)
    heads = U.shape[1]
    compression = coding_rate(projected, config.eps, mask=mask[None, :, None].expand(L, -1, heads, -1)).sum((1, 2))
    real = mask.to(torch.float64)
    inactive, zero = torch.zeros(L, dtype=torch.float64, device=u.device), torch.zeros(L, dtype=torch.float64,
                                                                                         device=u.device)
    for layer, a in enumerate(record.per_layer["mlp"]):  # (B, n, d_ff); per token, then its real tokens summed
        width = a.shape[-1]  # counted as uint8 sums into int32 (twice the speed of bool sums or count_nonzero)
        inactive[layer] = ((a <= 0).view(torch.uint8).sum(-1, dtype=torch.int32) * real).sum() / width
        zero[layer] = ((a == 0).view(torch.uint8).sum(-1, dtype=torch.int32) * real).sum() / width
    return Coding(rate=rate, compression=compression, texts=mask.shape[0], inactive=inactive, zero=zero,
                  tokens=int(mask.sum()))
