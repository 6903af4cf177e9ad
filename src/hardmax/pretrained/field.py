"""A real head as a particle system: layer ℓ's head h (or all its heads summed) as a `hardmax.dynamics.Field`, run
with `solve` as if the layer were shared across many layers (the ALBERT experiment of Geshkovski, Letrouit,
Polyanskiy, Rigollet, "A mathematical perspective on Transformers", 2023).

The head maps x ↦ W_O^h Σ_j P_ij (W_V^h x_j + b_V^h), P_i = softmax_j(scaling · ⟨W_Q^h x_i + b_Q^h, W_K^h x_j + b_K^h⟩).
Its tokens are the layer's attention inputs scaled to the unit sphere, x_i = h_i / ρ (ρ: their mean norm), with a
constant coordinate appended, z_i = (x_i, 1) ∈ S^{d−1} × {1} (`AffineSphere`), so that the biases stay in:

    scores   s_ij = z_iᵀ Q̃ᵀ K̃ z_j,  Q̃ = [ρ W_Q^h | b_Q^h], K̃ = [ρ W_K^h | b_K^h]   (`QK(Q̃, K̃)`, `Softmax(scaling)`)
    value    Ṽ = [[W_O^h W_V^h, W_O^h b_V^h / ρ], [0, 0]]:  Ṽ Σ_j P_ij z_j = (head's contribution)_i / ρ
    step     `Renormalised(dt)`: x ← (x + dt Ṽ Σ_j P_ij z_j) / ‖…‖, the residual connection and the layer norm's
             projection; dt = 1 is the layer itself (what the tests check against the model's forward pass).

Exact for tokens whose norms equal ρ (a layer norm with unit gain and no bias makes them so); otherwise
`HeadField.norm_spread` says how far the scale of the tokens is from one ρ. The clustering theorems assume
A = sym(Q̃ᵀK̃) positive definite: a head's A has rank ≤ 2 d_h < d, never positive definite; `HeadField.definite`
says so (and the signature of A), and nothing here claims the theorem applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import QK, Causal, Field, Renormalised, Save, Softmax, Tokens, solve
from hardmax.dynamics.solution import Solution
from hardmax.pretrained.loader import Pretrained
from hardmax.pretrained.recording import Record

__all__ = ["AffineSphere", "HeadField", "HeadRun", "head_contribution", "head_field", "run_head"]


@dataclass(frozen=True)
class AffineSphere:
    """Tokens z = (x, 1) with x on the unit sphere S^{d−1} (d + 1 coordinates, the last one constant): the affine
    maps of a real head (biases) act on them as matrices. Velocity P⊥_x of the first d coordinates of V·target,
    0 on the last; retraction x / ‖x‖ with the last coordinate reset to 1."""

    name = "the unit sphere S^{d−1} × {1} (tokens with a constant coordinate)"
    min_dimension = 3
    euclidean = False
    unit_sphere = False
    renormalisable = True

    def velocity(self, z: Tensor, target: Tensor, V: Tensor | None) -> Tensor:
        """(batch, n, d+1): P⊥_x (V target)[:d], and 0 for the constant coordinate."""
        u = target if V is None else target @ V.transpose(-1, -2)
        x, ux = z[..., :-1], u[..., :-1]
        tangent = ux - (ux * x).sum(-1, keepdim=True) * x
        return torch.cat([tangent, torch.zeros_like(u[..., -1:])], -1)

    def retract(self, z: Tensor) -> Tensor:
        """(..., d+1): the first d coordinates normalised, the last set to 1."""
        x = z[..., :-1]
        return torch.cat([x / torch.linalg.vector_norm(x, dim=-1, keepdim=True), torch.ones_like(z[..., -1:])], -1)

    def check(self, z: Tensor) -> None:
        """A one-line ValueError unless ‖x‖ = 1 and the last coordinate is 1 (to 1e3 eps)."""
        tol = 1e3 * torch.finfo(z.dtype).eps
        norms = torch.linalg.vector_norm(z[..., :-1].detach(), dim=-1)
        if not bool(((norms - 1).abs() <= tol).all() and ((z[..., -1] - 1).abs() <= tol).all()):
            raise ValueError("tokens must be (x, 1) with ‖x‖ = 1")

    def pad(self, z: Tensor, mask: Tensor) -> Tensor:
        """Padding at (e_1, 1)."""
        e = torch.zeros(z.shape[-1], dtype=z.dtype, device=z.device)
        e[0] = e[-1] = 1
        return torch.where(mask.unsqueeze(-1), z, e)

    def cluster_tolerance(self, size: float) -> float:
        """1e-2, as on the sphere."""
        return 1e-2


@dataclass(frozen=True, eq=False)
class _Heads:
    """Several softmax heads summed: targets Σ_h Ṽ_h Σ_j P^h_ij z_j + b (already through the values; the field's
    value is the identity). Q, K: (H, d_h, D); V: (H, D, D); bias: (D,)."""

    Q: Tensor
    K: Tensor
    V: Tensor
    bias: Tensor
    beta: float

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, n, n) the heads' attention matrices averaged (for pictures; the dynamics use `targets`)."""
        return self._attention(tokens, multiplicity, allowed).mean(1)

    def _attention(self, z, w, allowed):
        q = torch.einsum("hed,bnd->bhne", self.Q.to(z), z)
        k = torch.einsum("hed,bnd->bhne", self.K.to(z), z)
        s = self.beta * q @ k.transpose(-1, -2) + torch.log(w)[:, None, None, :]
        if allowed is not None:
            s = s.masked_fill(~allowed[:, None], -math.inf)
        return torch.softmax(s, -1).nan_to_num(0.0)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, n, D) Σ_h Ṽ_h Σ_j P^h_ij z_j + bias."""
        P = self._attention(tokens, multiplicity, allowed)
        t = P @ tokens[:, None]  # (b, H, n, D)
        return torch.einsum("hed,bhnd->bne", self.V.to(tokens), t) + self.bias.to(tokens)


@dataclass(frozen=True, eq=False)
class HeadField:
    """A real head (or a layer's heads summed) as a field, with the tokens of one text.

    Attributes:
        field: the `Field` (`Softmax(scaling)` with `QK(Q̃, K̃)` and value Ṽ for one head; all heads: their sum).
        tokens: (n, d+1) the text's attention inputs as (h_i / ρ... normalised, 1). mask: (n,) bool real tokens.
        words: the text's token strings. layer: 1-based. head: 0-based, None for all heads summed.
        radius: ρ. norm_spread: max_i |‖h_i‖/ρ − 1| over real tokens (0: the field is the head exactly).
        definite: whether A = sym(Q̃ᵀK̃) is positive definite (the clustering theorems' assumption).
        signature: (positive, negative, zero) eigenvalue counts of sym(Q̃ᵀK̃) (zero: |λ| ≤ 1e-9 · max|λ|).
        causal: decoder attention (GPT-2).
    """

    field: Field
    tokens: Tensor
    mask: Tensor
    words: list[str]
    layer: int
    head: int | None
    radius: float
    norm_spread: float
    definite: bool
    signature: tuple[int, int, int]
    causal: bool


def _augmented(pretrained: Pretrained, layer: int, head: int | None, radius: float, dtype):
    """Q̃, K̃ (H', d_h, d+1), Ṽ (H', d+1, d+1), the output bias over ρ (d+1,), scaling: of head `head` (or all)."""
    w = pretrained.family.weights(pretrained.family.layers(pretrained.model)[layer - 1], pretrained.heads)
    pick = slice(None) if head is None else slice(head, head + 1)
    Wq, bq, Wk, bk = (t[pick].to(dtype) for t in (w.Wq, w.bq, w.Wk, w.bk))
    Wv, bv, Wo = (t[pick].to(dtype) for t in (w.Wv, w.bv, w.Wo))
    Q = torch.cat([radius * Wq, bq[..., None]], -1)
    K = torch.cat([radius * Wk, bk[..., None]], -1)
    top = torch.cat([Wo @ Wv, (Wo @ bv[..., None]) / radius], -1)  # (H', d, d+1)
    V = torch.cat([top, torch.zeros_like(top[:, :1])], -2)
    bias = torch.cat([w.bo.to(dtype) / radius, w.bo.new_zeros(1, dtype=dtype)])
    return Q, K, V, bias, w.scaling


def head_field(pretrained: Pretrained, record: Record, layer: int, head: int | None = None, *, text: int = 0,
               radius: float | None = None) -> HeadField:
    """Layer `layer`'s head `head` (None: all heads summed, with the output bias) as a field on the text `text` of
    `record` (see the module's docstring for the equations).

    Args:
        layer: 1..L. head: 0..H−1 or None. text: which text of the record gives the tokens.
        radius: ρ, the scale of the tokens (None: the mean norm of the text's real attention inputs).
    """
    L, H = pretrained.layers, pretrained.heads
    if not 1 <= layer <= L:
        raise ValueError(f"layer must be from 1 to {L}, got {layer}")
    if head is not None and not 0 <= head < H:
        raise ValueError(f"head must be from 0 to {H - 1} (or None for all heads), got {head}")
    if not 0 <= text < record.mask.shape[0]:
        raise ValueError(f"text must be from 0 to {record.mask.shape[0] - 1}, got {text}")
    mask = record.mask[text]
    h = record.inputs[layer - 1, text].double()
    norms = torch.linalg.vector_norm(h, dim=-1)
    rho = float(norms[mask].mean()) if radius is None else float(radius)
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"radius must be a finite number > 0, got {radius!r}")
    Q, K, V, bias, scaling = _augmented(pretrained, layer, head, rho, torch.float64)
    x = h / norms.clamp_min(1e-300).unsqueeze(-1)
    tokens = torch.cat([x, torch.ones_like(x[:, :1])], -1)
    if head is None:
        field = Field(_Heads(Q.cpu(), K.cpu(), V.cpu(), bias.cpu(), scaling), manifold=AffineSphere())
    else:
        field = Field(Softmax(scaling), QK(Q[0].cpu(), K[0].cpu()), value=V[0].cpu(), manifold=AffineSphere())
    A = torch.einsum("hed,hef->df", Q, K)
    lam = torch.linalg.eigvalsh(0.5 * (A + A.T))
    zero = lam.abs() <= 1e-9 * lam.abs().max()
    signature = (int(((lam > 0) & ~zero).sum()), int(((lam < 0) & ~zero).sum()), int(zero.sum()))
    words = record.tokens[text] + [""] * int((~mask).sum())
    return HeadField(field=field, tokens=tokens.cpu(), mask=mask.cpu(), words=words, layer=layer, head=head,
                     radius=rho, norm_spread=float((norms[mask] / rho - 1).abs().max()),
                     definite=signature[1] == 0 and signature[2] == 0, signature=signature, causal=record.causal)


def head_contribution(pretrained: Pretrained, record: Record, layer: int, head: int | None = None) -> Tensor:
    """(B, n, d) what head `head` of layer `layer` (1-based; None: all heads and the output bias) adds to the
    residual stream in the model's forward pass: W_O^h Σ_j P_ij v_j^h, from the model's own attention weights P and
    values v (the `Record`)."""
    w = pretrained.family.weights(pretrained.family.layers(pretrained.model)[layer - 1], pretrained.heads)
    P = record.per_layer["attention"][layer - 1]
    context = P @ record.per_layer["values"][layer - 1]  # (B, H, n, d_h)
    out = torch.einsum("hdk,bhnk->bhnd", w.Wo.to(context), context)
    return out[:, head] if head is not None else out.sum(1) + w.bo.to(out)


@dataclass(frozen=True, eq=False)
class HeadRun:
    """A real head run as a particle system.

    Attributes:
        head: the `HeadField`. solution: `solve`'s `Solution` ((saved, n, d+1) tokens).
        clusters: one dict per cluster of the final tokens (cosine ≥ threshold, chained): its `words`, and `around`,
            the word whose starting point is nearest the cluster's final centre. selections: the words the real head
            selects most in this text (argmax of its scores per query, special tokens included), with counts.
    """

    head: HeadField
    solution: Solution
    clusters: list[dict]
    selections: list[tuple[str, int]]

    def to_dict(self) -> dict:
        """Plain JSON values: the field's description, the clusters, the model's selections."""
        h = self.head
        return {"layer": h.layer, "head": h.head, "radius": h.radius, "norm_spread": h.norm_spread,
                "positive_definite": h.definite, "signature": list(h.signature), "steps": self.solution.steps[-1],
                "clusters": self.clusters, "selections": [list(s) for s in self.selections],
                "note": None if h.definite else "A = sym(Q̃ᵀK̃) is not positive definite: the clustering theorems "
                "(which assume it) do not apply; the run shows what this head does when iterated"}


def _components(x: Tensor, threshold: float) -> np.ndarray:
    from scipy.sparse.csgraph import connected_components

    adjacency = (x @ x.T >= threshold).numpy()
    return connected_components(adjacency, directed=False)[1]


def run_head(head: HeadField, *, steps: int = 100, dt: float = 1.0, threshold: float = 0.99,
             save_every: int = 1) -> HeadRun:
    """Run the head as if the layer were shared across `steps` layers: `solve(field, Renormalised(dt), tokens)`.

    Returns:
        `HeadRun` with the clusters of the final tokens (cosine ≥ `threshold`), the words they gather around, and
        the real head's selections in the same text.
    """
    mask = Tokens(head.mask.unsqueeze(0))
    if head.causal:
        mask = Causal() & mask
    sol = solve(head.field, Renormalised(dt), head.tokens.unsqueeze(0), steps=steps, save=Save(every=save_every),
                mask=mask)
    real = head.mask.nonzero().flatten()
    final = sol.tokens[-1, 0, real, :-1]
    start = head.tokens[real, :-1]
    labels = _components(final, threshold)
    clusters = []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        centre = final[members].mean(0)
        around = int(members[int((start[members] @ centre).argmax())])
        clusters.append({"size": len(members), "words": [head.words[int(real[m])] for m in members],
                         "around": head.words[int(real[around])]})
    clusters.sort(key=lambda c: -c["size"])
    # the real head's own selections on the text: argmax_j of its scores for each real query
    z = head.tokens.to(torch.float64)
    P = head.field.attention(0.0, z.unsqueeze(0), head.mask.to(z.dtype).unsqueeze(0))[0]
    if head.causal:
        P = P.tril()
    chosen = P[real].argmax(-1)
    words, counts = np.unique([head.words[int(j)] for j in chosen], return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return HeadRun(head=head, solution=sol, clusters=clusters,
                   selections=[(str(words[k]), int(counts[k])) for k in order[:10]])
