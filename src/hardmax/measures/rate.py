"""Coding rates of token sets: R, the per-class rate Rc, the rate reduction ΔR = R − Rc, and CRATE's
subspace rate R^c(Z | U).

    R(Z, ε) = ½ logdet(I_d + d/(N ε²) ZᵀZ)          Z: N samples (rows) in R^d, ε the distortion

is the number of nats needed to code the N samples up to a mean squared distortion ε² (Yu, Chan, You,
Song, Ma, "Learning diverse and discriminative representations via the principle of maximal coding
rate reduction", NeurIPS 2020, eq. (5); CRATE: Yu et al., "White-box transformers via sparse rate
reduction", NeurIPS 2023, eq. (2)).

Numerics, and why they differ from the mcr2 reference code:
- logdet through the Cholesky factor of the SPD matrix I + cG (every eigenvalue ≥ 1), computed in
  float64 whatever the input dtype: the reference calls `torch.logdet` in float32, which returns NaN
  when a class is nearly rank deficient.
- G is the smaller of the d×d form ZᵀZ and the N×N form ZZᵀ (logdet(I + cZᵀZ) = logdet(I + cZZᵀ)).
- Per-class Gram matrices are accumulated class by class from the samples sorted by label, in
  chunks of rows: memory O(Nd + kd²). The reference builds a dense (k, N, N) membership tensor.

ε is the distortion, not ε²: the mcr2 reference code passes ε² under the name `eps` (its default
eps=0.5 is ε² = 0.5 here, i.e. eps=√0.5).

Every function returns float64 tensors and keeps autograd (the loss in `hardmax.measures.loss`
differentiates through them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["RateReduction", "class_coding_rate", "coding_rate", "rate_reduction", "subspace_coding_rate"]

# float64 elements per chunk of rows cast from the input (8 MiB): bounds the extra memory of the
# float64 accumulation for any N, and the copy is still in the last-level cache when the matmul reads
# it (64 MiB chunks made R of 25,000 token sets 1.5-2x slower).
_CHUNK_ELEMENTS = 1 << 20


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps (the distortion ε) must be a finite number > 0, got {eps!r}")
    return float(eps)


def _check_tokens(Z, name: str = "Z", min_dim: int = 2) -> Tensor:
    if not isinstance(Z, Tensor):
        raise ValueError(f"{name} must be a torch tensor, got {type(Z).__name__}")
    if not Z.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {Z.dtype}")
    if Z.dim() < min_dim:
        raise ValueError(f"{name} must have shape (..., N, d), got {tuple(Z.shape)}")
    if Z.shape[-1] == 0:
        raise ValueError(f"{name} has dimension d = 0: nothing to code")
    return Z


def _check_finite(Z: Tensor, mask: Tensor | None, name: str = "Z") -> None:
    values = Z if mask is None else Z[mask]
    if not bool(torch.isfinite(values).all()):
        raise ValueError(f"{name} contains NaN or inf")


def _check_gram(G: Tensor, Z: Tensor, mask: Tensor | None, name: str = "Z") -> None:
    """Raise unless the Gram matrices G (..., m, m) are finite.

    A NaN or inf among the samples that count always shows on the diagonal (a sum of squares), so this
    O(B·m) test replaces a pass over every sample; the full check then names the cause.
    """
    if not bool(torch.isfinite(torch.diagonal(G, dim1=-2, dim2=-1)).all()):
        _check_finite(Z, mask, name)
        raise ValueError(f"{name} has samples too large to code in float64 (their squares overflow)")


def _check_mask(mask, shape: torch.Size, device) -> Tensor | None:
    if mask is None:
        return None
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor of shape {tuple(shape)}, got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)}")
    try:
        return torch.broadcast_to(mask.to(device), shape)
    except RuntimeError:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not match the samples {tuple(shape)}") from None


def _check_labels(labels, n: int, num_classes: int | None) -> tuple[Tensor, int]:
    if not isinstance(labels, Tensor) or labels.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise ValueError(f"labels must be an integer tensor of shape ({n},), got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)}")
    if labels.dim() != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},) (one per sample), got {tuple(labels.shape)}")
    labels = labels.long()
    if int(labels.min()) < 0:
        raise ValueError(f"labels must be ≥ 0, got {int(labels.min())}")
    top = int(labels.max()) + 1
    if num_classes is None:
        num_classes = top
    elif top > num_classes:
        raise ValueError(f"labels go up to {top - 1} but num_classes = {num_classes}")
    return labels, num_classes


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------


def _logdet_identity_plus(G: Tensor, c: Tensor) -> Tensor:
    """logdet(I + c G) (...,) for SPD-plus-identity matrices, G (..., m, m) float64, c (...) float64."""
    M = c[..., None, None] * G
    M.diagonal(dim1=-2, dim2=-1).add_(1.0)  # I + cG without an identity tensor per set
    L, info = torch.linalg.cholesky_ex(M)
    if bool((info != 0).any()):  # cannot happen for finite input: every eigenvalue is ≥ 1
        raise ValueError("I + c·ZᵀZ is not positive definite: the samples are too large to code in float64")
    return 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)


def _as_float64(z: Tensor, buffer: list) -> Tensor:
    """z in float64; without autograd the copy goes into one reused buffer (no page faults per chunk)."""
    if z.requires_grad or z.dtype == torch.float64:
        return z.double()
    if not buffer or buffer[0].numel() < z.numel() or buffer[0].device != z.device:
        buffer[:] = [torch.empty(z.numel(), dtype=torch.float64, device=z.device)]
    return buffer[0][:z.numel()].view(z.shape).copy_(z)


def _gram(Z: Tensor, scale: Tensor | None, small: bool) -> Tensor:
    """Gram matrices in float64 of B sets Z (B, n, d): ZᵀZ (B, d, d), or ZZᵀ (B, n, n) when `small`.

    The float64 copy is made a chunk of sets (and, for long sets, of rows) at a time, so it never costs
    more than `_CHUNK_ELEMENTS` extra elements. Rows are multiplied by `scale` (B, n) float64, √weight,
    and rows of scale 0 are zeroed whatever they hold (a zero row adds nothing to ZᵀZ and a factor 1 to
    det(I + cZZᵀ)).
    """
    B, n, d = Z.shape
    sets = max(1, _CHUNK_ELEMENTS // max(1, n * d))
    rows = n if n * d <= _CHUNK_ELEMENTS else max(1, _CHUNK_ELEMENTS // d)
    buffer: list = []
    out = []
    for s in range(0, B, sets):
        G = None
        for r in range(0, n, rows):
            z = _as_float64(Z[s:s + sets, r:r + rows], buffer)
            if scale is not None:
                w = scale[s:s + sets, r:r + rows, None]
                z = torch.where(w > 0, z * w, 0.0)
            g = z @ z.mT if small else z.mT @ z
            G = g if G is None else G + g
        out.append(G)
    return out[0] if len(out) == 1 else torch.cat(out)


def _class_grams(Z: Tensor, labels: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
    """(k, d, d) float64 Gram matrices Z_jᵀZ_j of the classes and their sizes (k,), without any
    N×N or (k, N) membership matrix: rows are visited class by class in chunks of sorted indices."""
    N, d = Z.shape
    counts = torch.bincount(labels, minlength=num_classes)
    order = torch.argsort(labels, stable=True)
    step = max(1, _CHUNK_ELEMENTS // d)
    buffer: list = []
    grams = []
    starts = [0, *torch.cumsum(counts, 0).tolist()]
    for j in range(num_classes):  # a loop over classes (k), never over samples
        G = torch.zeros(d, d, dtype=torch.float64, device=Z.device)
        for s in range(starts[j], starts[j + 1], step):
            z = _as_float64(Z.index_select(0, order[s:min(s + step, starts[j + 1])]), buffer)
            G = G + z.mT @ z
        grams.append(G)
    return torch.stack(grams), counts


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def coding_rate(Z: Tensor, eps: float, *, mask: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
    """Coding rate R(Z, ε) = ½ logdet(I + d/(N ε²) ZᵀZ) of each set of samples, in nats.

    Args:
        Z: (..., N, d) float tensor: sets of N samples (rows) in R^d; leading dimensions are a batch of
            independent sets (e.g. one token set per review).
        eps: the distortion ε > 0 (not ε²; the mcr2 reference code's `eps` is ε²).
        mask: (..., N) bool, True for real samples; N in the formula counts the real ones of each set.
            None = every sample is real.
        weights: (..., N) multiplicity of each sample (≥ 0, 0 = absent), e.g. the copies of a merged
            token: the set counts sample i w_i times (ZᵀZ → Σ w_i z_i z_iᵀ, N → Σ w_i). None = all 1.
    Returns:
        (...) float64, R of each set (autograd kept).
    Raises:
        ValueError: eps ≤ 0, NaN/inf samples, an empty set (no real sample), a non-float Z, a mask of
            the wrong shape or dtype.

    The logdet is that of the smaller Gram form (d×d or N×N), through a float64 Cholesky factor.
    Paper: Yu et al. 2020 (MCR²), eq. (5).
    """
    eps = _check_eps(eps)
    Z = _check_tokens(Z)
    mask = _check_mask(mask, Z.shape[:-1], Z.device)
    if weights is not None:
        if not isinstance(weights, Tensor) or weights.shape != Z.shape[:-1] or not weights.is_floating_point():
            raise ValueError(f"weights must be a float tensor of shape {tuple(Z.shape[:-1])}")
        if not bool(((weights >= 0) & torch.isfinite(weights)).all()):
            raise ValueError("weights must be finite and ≥ 0")
        present = weights > 0
        mask = present if mask is None else mask & present
    *lead, n, d = Z.shape
    if n == 0:
        raise ValueError("Z is an empty set (N = 0 samples): its coding rate is undefined")
    flat = Z.reshape(-1, n, d)
    scale = None
    if weights is not None:
        scale = torch.where(mask, weights.double(), 0.0).reshape(-1, n)
        counts = scale.sum(-1)
        scale = scale.sqrt()
    elif mask is not None:
        scale = mask.reshape(-1, n).double()
        counts = scale.sum(-1)
    else:
        counts = torch.full((flat.shape[0],), n, dtype=torch.float64, device=Z.device)
    if bool((counts == 0).any()):
        raise ValueError("a set has no real sample (its mask is all False): its coding rate is undefined")
    G = _gram(flat, scale, small=n < d)
    _check_gram(G, Z, mask)
    c = d / (counts * eps**2)
    return (0.5 * _logdet_identity_plus(G, c)).reshape(lead)


def class_coding_rate(Z: Tensor, labels: Tensor, eps: float, *, num_classes: int | None = None) -> Tensor:
    """Rate of the classes coded separately, Rc = Σ_j N_j/(2N) logdet(I + d/(N_j ε²) Z_jᵀZ_j).

    Args:
        Z: (N, d) samples. labels: (N,) integer class of each sample, in [0, num_classes).
        eps: the distortion ε > 0 (not ε²). num_classes: k (default: max label + 1); empty classes add 0.
    Returns:
        0-dim float64 tensor.

    Paper: Yu et al. 2020 (MCR²), eq. (6).
    """
    return rate_reduction(Z, labels, eps, num_classes=num_classes).class_rate


@dataclass(frozen=True)
class RateReduction:
    """The parts of ΔR (0-dim float64 tensors with autograd, except `counts`).

    Attributes:
        rate: R(Z, ε) of all samples together (expansion). class_rate: Rc (compression).
        reduction: ΔR = R − Rc ≥ 0. counts: (k,) int64 number of samples of each class.
    """

    rate: Tensor
    class_rate: Tensor
    reduction: Tensor
    counts: Tensor


def rate_reduction(Z: Tensor, labels: Tensor, eps: float, *, num_classes: int | None = None) -> RateReduction:
    """Rate reduction ΔR(Z, Π, ε) = R(Z, ε) − Rc(Z, ε | Π) between the classes given by `labels`.

    ΔR = 0 when every class spans the same set of directions in the same proportions, and is large
    when the classes lie in mutually orthogonal subspaces and each is compressible.

    Args:
        Z: (N, d) samples (rows). labels: (N,) integer class per sample.
        eps: the distortion ε > 0 (not ε²). num_classes: k (default: max label + 1).
    Returns:
        `RateReduction` (rate, class_rate, reduction, counts).

    Cost: one pass over the samples (the total Gram matrix is the sum of the class ones), memory
    O(Nd + kd²). Paper: Yu et al. 2020 (MCR²), eq. (7).
    """
    eps = _check_eps(eps)
    Z = _check_tokens(Z)
    if Z.dim() != 2:
        raise ValueError(f"Z must have shape (N, d) (one sample per row), got {tuple(Z.shape)}")
    N, d = Z.shape
    if N == 0:
        raise ValueError("Z is an empty set (N = 0 samples): its rate reduction is undefined")
    _check_finite(Z, None)
    labels, k = _check_labels(labels, N, num_classes)
    grams, counts = _class_grams(Z, labels.to(Z.device), k)
    nonempty = counts > 0
    c_j = d / (counts[nonempty].double() * eps**2)
    logdets = _logdet_identity_plus(grams[nonempty], c_j)
    class_rate = (counts[nonempty].double() / (2 * N) * logdets).sum()
    if N < d:  # the N×N form is smaller
        rate = coding_rate(Z, eps)
    else:
        rate = 0.5 * _logdet_identity_plus(grams.sum(0), torch.tensor(d / (N * eps**2), dtype=torch.float64,
                                                                    device=Z.device))
    return RateReduction(rate=rate, class_rate=class_rate, reduction=rate - class_rate, counts=counts)


def subspace_coding_rate(Z: Tensor, U: Tensor, eps: float, *, mask: Tensor | None = None,
                         weights: Tensor | None = None) -> Tensor:
    """CRATE's compression term R^c(Z | U_1..U_K) = Σ_k R(Z U_k, ε), with U_k ∈ R^{d×p}.

    Each term codes the projections U_kᵀ z_i ∈ R^p, so its constant is p/(N ε²) (CRATE eq. (8)).

    Args:
        Z: (..., N, d) sets of samples. U: (K, d, p) the subspace bases (or (d, p) for K = 1).
        eps: the distortion ε > 0 (not ε²). mask: (..., N) bool, True for real samples. weights: (..., N)
        multiplicities, as in `coding_rate`.
    Returns:
        (...) float64.

    Paper: Yu et al. 2023 (CRATE), Section 2, R^c(Z; U_[K]).
    """
    Z = _check_tokens(Z)
    if not isinstance(U, Tensor) or not U.is_floating_point() or U.dim() not in (2, 3):
        raise ValueError(f"U must be a float tensor of shape (K, d, p) or (d, p), got "
                         f"{tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__}")
    if U.dim() == 2:
        U = U.unsqueeze(0)
    if U.shape[1] != Z.shape[-1] or U.shape[2] == 0:
        raise ValueError(f"U must have shape (K, {Z.shape[-1]}, p ≥ 1) to project samples of dimension "
                         f"{Z.shape[-1]}, got {tuple(U.shape)}")
    projected = torch.einsum("...nd,kdp->...knp", Z, U.to(Z.dtype))
    if mask is not None:
        mask = _check_mask(mask, Z.shape[:-1], Z.device).unsqueeze(-2).expand(projected.shape[:-1])
    if weights is not None:
        if not isinstance(weights, Tensor) or weights.shape != Z.shape[:-1]:
            raise ValueError(f"weights must be a float tensor of shape {tuple(Z.shape[:-1])}")
        weights = weights.unsqueeze(-2).expand(projected.shape[:-1])
    return coding_rate(projected, eps, mask=mask, weights=weights).sum(-1)
