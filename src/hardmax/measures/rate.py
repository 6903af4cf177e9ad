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
- Any finite ε > 0 and any finite samples: c = d/(N ε²) is never formed as a float. It is kept as
  q·2^k (q a moderate float, k an integer: ε = m·2^E gives ε⁻² = m⁻²·2^(−2E)), G is scaled by a power of
  two to a largest diagonal entry in [0.5, 1), and logdet(I + aĜ) goes through Cholesky while a ≤ 2^40,
  beyond through the eigenvalues of Ĝ as Σ ln(1 + aλ) = Σ softplus(ln a + ln λ) (no overflow however
  large a is; a that underflows gives 0, correctly). A set whose Gram matrix overflowed or may have lost
  samples to underflow (samples beyond ~1e154 or below ~1e-154) is recomputed with its samples scaled by
  a power of two (exact), so R(sZ, sε) = R(Z, ε) holds for every power of two s that keeps sZ and sε finite.
- Weights enter only through w / Σw (R is scale-free in them): each set's weights are scaled by a power
  of two to a largest weight in [1, 2), so subnormal or huge weights neither under- nor overflow.
  Where c·‖G‖ is beyond ~2^52 the rate of a rank-deficient set is fixed by the rounding of G (the
  problem's conditioning), whichever way the logdet is taken: finite, but not meaningful to many digits.
- Per-class Gram matrices are computed from the rows sorted by class (classes by decreasing size), in
  chunks of about `_CHUNK_ELEMENTS` float64 values holding several small classes or a slice of a large
  one, each class in its smaller form, and reduced to logdets chunk by chunk: work and memory follow the
  classes present (no loop and no allocation per possible class: the counts are those of the classes
  present, whatever the labels' values): O(N) indices and O(chunk) float64. The reference builds a dense (k, N, N)
  membership tensor.

ε is the distortion, not ε²: the mcr2 reference code passes ε² under the name `eps` (its default
eps=0.5 is ε² = 0.5 here, i.e. eps=√0.5).

Every function returns float64 tensors and keeps autograd (the loss in `hardmax.measures.loss`
differentiates through them).
"""

from __future__ import annotations

import bisect
import math
import numbers
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["RateReduction", "check_num_classes", "check_positive", "class_coding_rate", "coding_rate", "rate_reduction",
           "subspace_coding_rate"]

# float64 elements per chunk of rows cast from the input (8 MiB): bounds the extra memory of the
# float64 accumulation for any N, and the copy is still in the last-level cache when the matmul reads
# it (64 MiB chunks made R of 25,000 token sets 1.5-2x slower).
_CHUNK_ELEMENTS = 1 << 20
_LN2 = math.log(2.0)
# I + a·Ĝ (Ĝ's largest diagonal entry in [0.5, 1)) goes through Cholesky while a ≤ 2^40: rounding errors of
# about m·2^-52·a ≪ 1 cannot make it indefinite. Beyond, the eigenvalues of Ĝ, in log space.
_CHOLESKY_LOG_MAX = 40 * _LN2
# A Gram matrix whose largest diagonal entry is below this may have lost samples to underflow (squares
# below 2^-1074); it is recomputed from samples scaled by a power of two, as is one that overflowed.
_GRAM_TINY = 2.0**-900
_LABEL_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"


def check_positive(value, name: str, what: str) -> float:
    """A finite real number > 0 as a float (bool refused; integers too large for a float refused, not raised)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} {what} must be a finite number > 0, got {_short(value)}")
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        number = math.inf
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} {what} must be a finite number > 0, got {_short(value)}")
    return number


def _check_eps(eps) -> float:
    return check_positive(eps, "eps", "(the distortion ε)")


def _eps_scale(eps: float) -> tuple[float, int]:
    """(inv, shift) with ε⁻² = inv·2^shift exactly up to rounding of inv ∈ (1, 4]: no overflow for any ε."""
    m, e = math.frexp(eps)  # ε = m·2^e, m ∈ [0.5, 1)
    return 1.0 / (m * m), -2 * e


def check_num_classes(num_classes) -> int | None:
    """`num_classes` as an int (None passes through); ValueError naming it unless an integer ≥ 1."""
    if num_classes is None:
        return None
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
        raise ValueError(f"num_classes (the number of classes k) must be an integer ≥ 1 or None, got "
                         f"{_short(num_classes)}")
    return int(num_classes)


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
    """labels as int64, checked to be ≥ 0 and < num_classes (when given); the largest label."""
    if not isinstance(labels, Tensor) or labels.dtype not in _LABEL_DTYPES:
        raise ValueError(f"labels must be an integer tensor of shape ({n},), got "
                         f"{getattr(labels, 'dtype', type(labels).__name__)}")
    if labels.dim() != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},) (one per sample), got {tuple(labels.shape)}")
    labels = labels.long()
    low, high = (int(v) for v in torch.aminmax(labels))
    if low < 0:
        raise ValueError(f"labels must be ≥ 0, got {low}")
    if num_classes is not None and high >= num_classes:
        raise ValueError(f"labels must be < num_classes = {num_classes}, got a label {high}")
    return labels, high


def _prepare(Z: Tensor, mask, weights) -> tuple[Tensor, Tensor | None, Tensor]:
    """Sets (B, n, d), their row weights (None, a bool mask or float64 √weight, 0 = absent) and counts (B,).

    Weights are scaled per set by a power of two to a largest weight in [1, 2): R depends on them only
    through w / Σw, and Σw or √w can then neither overflow nor underflow.
    """
    *_, n, d = Z.shape
    mask = _check_mask(mask, Z.shape[:-1], Z.device)
    flat = Z.reshape(-1, n, d)
    if weights is not None:
        if not isinstance(weights, Tensor) or weights.shape != Z.shape[:-1] or not weights.is_floating_point():
            raise ValueError(f"weights must be a float tensor of shape {tuple(Z.shape[:-1])}, got "
                             f"{getattr(weights, 'dtype', type(weights).__name__)} "
                             f"{tuple(getattr(weights, 'shape', ()))}")
        weights = weights.to(Z.device)
        if not bool(((weights >= 0) & torch.isfinite(weights)).all()):
            raise ValueError("weights must be finite and ≥ 0")
        present = weights > 0 if mask is None else (weights > 0) & mask
        w = torch.where(present, weights.double(), 0.0).reshape(-1, n)
        top = w.detach().amax(-1)
        w = _times_pow2(w, (1 - _exponent(top))[:, None])
        counts = w.sum(-1)
        present = w > 0
        return flat, torch.where(present, torch.where(present, w, 1.0).sqrt(), 0.0), counts
    if mask is not None:
        scale = mask.reshape(-1, n)
        return flat, scale, scale.sum(-1, dtype=torch.float64)
    return flat, None, torch.full((flat.shape[0],), float(n), dtype=torch.float64, device=Z.device)


# --------------------------------------------------------------------------------------------
# Powers of two
# --------------------------------------------------------------------------------------------


def _pow2(e: Tensor) -> Tensor:
    """2^e as float64, exactly, for int64 e in [-1022, 1023] (built from the bits, no exp2 rounding)."""
    return ((e + 1023) << 52).view(torch.float64)


def _times_pow2(x: Tensor, e: Tensor) -> Tensor:
    """x·2^e (e int64, broadcast, |e| ≤ 3069): exact unless the result over- or underflows."""
    e = e.long()
    if e.numel() == 0:
        return x
    low, high = (int(v) for v in torch.aminmax(e))
    if -1022 <= low and high <= 1023:  # one factor (the usual case)
        return x if low == high == 0 else x * _pow2(e)
    for _ in range(3):
        part = e.clamp(-1022, 1023)
        x = x * _pow2(part)
        e = e - part
    return x


def _exponent(top: Tensor) -> Tensor:
    """int64 e with top = f·2^e, f ∈ [0.5, 1); 0 where top is 0."""
    return torch.where(top > 0, torch.frexp(top)[1].long(), 0)


# --------------------------------------------------------------------------------------------
# Sets of samples, read in float64 chunks
# --------------------------------------------------------------------------------------------


class _Dense:
    """B sets of n rows: Z (B, n, m) with row weights `scale` (B, n): None, bool (mask) or float64 √weight."""

    def __init__(self, Z: Tensor, scale: Tensor | None):
        self.Z, self.scale, self.shift = Z, scale, None
        self.count, self.m = Z.shape[0], Z.shape[2]

    def length(self, i: int) -> int:
        return self.Z.shape[1]

    def first_shorter(self, m: int) -> int:
        return 0 if self.Z.shape[1] < m else self.count

    def take(self, s: int, e: int, rows: slice, cols: slice) -> tuple[Tensor, Tensor | None]:
        return self.Z[s:e, rows, cols], None if self.scale is None else self.scale[s:e, rows]

    def subset(self, index: Tensor) -> _Dense:
        return _Dense(self.Z.index_select(0, index), None if self.scale is None else self.scale.index_select(0, index))


class _Grouped:
    """Sets made of rows of Z (N, m): set i is rows order[starts[i] : starts[i] + lengths[i]], lengths in
    decreasing order (so that a chunk of consecutive sets has similar lengths)."""

    def __init__(self, Z: Tensor, order: Tensor, starts: Tensor, lengths: Tensor):
        self.Z, self.order, self.starts, self.lengths, self.shift = Z, order, starts, lengths, None
        self.sizes, self.first = lengths.tolist(), starts.tolist()
        self.count, self.m = len(self.sizes), Z.shape[1]

    def length(self, i: int) -> int:
        return self.sizes[i]

    def first_shorter(self, m: int) -> int:
        return bisect.bisect_left(self.sizes, -m + 1, key=lambda size: -size)  # sizes decrease

    def take(self, s: int, e: int, rows: slice, cols: slice) -> tuple[Tensor, Tensor | None]:
        if e - s == 1:  # one set, or a slice of a large one (rows end at its length): a slice of `order`
            index, valid = self.order[self.first[s] + rows.start:self.first[s] + rows.stop], None
        else:
            offsets = torch.arange(rows.start, rows.stop, device=self.Z.device)
            pos = self.starts[s:e, None] + offsets
            valid = offsets < self.lengths[s:e, None] if self.sizes[e - 1] < rows.stop else None  # last: shortest
            index = (pos if valid is None else torch.where(valid, pos, 0)).reshape(-1)
            index = self.order[index]
        z = self.Z[:, cols].index_select(0, index).view(e - s, rows.stop - rows.start, -1)
        return z, valid

    def subset(self, index: Tensor) -> _Grouped:
        return _Grouped(self.Z, self.order, self.starts[index], self.lengths[index])


def _as_float64(z: Tensor, buffer: list) -> Tensor:
    """z in float64; without autograd the copy goes into one reused buffer (no page faults per chunk)."""
    if z.requires_grad or z.dtype == torch.float64:
        return z.double()
    if not buffer or buffer[0].numel() < z.numel() or buffer[0].device != z.device:
        buffer[:] = [torch.empty(z.numel(), dtype=torch.float64, device=z.device)]
    return buffer[0][:z.numel()].view(z.shape).copy_(z)


def _block(source, s: int, e: int, rows: slice, cols: slice, buffer: list) -> Tensor:
    """Rows × cols of sets s:e in float64, each row multiplied by its √weight (absent rows zeroed, whatever
    they hold), and each set by 2^shift when the source is being rescaled."""
    z, w = source.take(s, e, rows, cols)
    z = _as_float64(z, buffer)
    if w is not None:
        z = torch.where(w[..., None], z, 0.0) if w.dtype == torch.bool else torch.where(w[..., None] > 0,
                                                                                        z * w[..., None], 0.0)
    if source.shift is not None:
        z = _times_pow2(z, source.shift[s:e, None, None])
    return z


def _plan(source, form: str | None = None):
    """Chunks (s, e, L, small) of consecutive sets: about `_CHUNK_ELEMENTS` values each, L the longest set
    of the chunk, small: the L×L form ZZᵀ (else the m×m form ZᵀZ; `form` forces "large")."""
    s = 0
    short = source.first_shorter(source.m)  # sets from here on have fewer rows than columns
    while s < source.count:
        L = source.length(s)
        e = min(source.count, s + max(1, _CHUNK_ELEMENTS // max(1, L * source.m)))
        if s < short < e:  # each set in its smaller form: the other is rank deficient
            e = short
        yield s, e, L, (L < source.m if form is None else form == "small")
        s = e


def _gram(source, s: int, e: int, L: int, small: bool, buffer: list) -> Tensor:
    """Gram matrices (e − s, g, g) in float64 of sets s:e: ZZᵀ (g = L, accumulated over blocks of columns)
    when `small`, else ZᵀZ (g = m, accumulated over blocks of rows); padding rows are zero."""
    b, m = e - s, source.m
    G = None
    if small:
        step = max(1, _CHUNK_ELEMENTS // (b * L))
        for c in range(0, m, step):
            z = _block(source, s, e, slice(0, L), slice(c, min(c + step, m)), buffer)
            g = z @ z.mT
            G = g if G is None else G + g
    else:
        step = max(1, _CHUNK_ELEMENTS // (b * m))
        for r in range(0, L, step):
            z = _block(source, s, e, slice(r, min(r + step, L)), slice(0, m), buffer)
            g = z.mT @ z
            G = g if G is None else G + g
    return G


def _max_abs(source, buffer: list) -> Tensor:
    """(count,) largest |weighted coordinate| of each set (NaN if it holds one)."""
    out = []
    for s, e, L, _ in _plan(source, "large"):
        top = None
        step = max(1, _CHUNK_ELEMENTS // ((e - s) * source.m))
        for r in range(0, L, step):
            t = _block(source, s, e, slice(r, min(r + step, L)), slice(0, source.m), buffer).detach().abs()
            t = t.amax((-2, -1))
            top = t if top is None else torch.maximum(top, t)
        out.append(top)
    return torch.cat(out)


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------


def _logdet_identity_plus(G: Tensor, q: Tensor, k: Tensor) -> Tensor:
    """logdet(I + c G) (B,) for G (B, m, m) float64 finite symmetric PSD and c = q·2^k > 0 of any size
    (q (B,) float64 moderate, k (B,) int64)."""
    top = G.detach().diagonal(dim1=-2, dim2=-1).amax(-1)
    e = _exponent(top)
    G = _times_pow2(G, -e[:, None, None])  # Ĝ: largest diagonal entry in [0.5, 1), c·G = a·Ĝ
    k = k + e
    log_a = torch.log(q) + k.double() * _LN2
    eig = log_a > _CHOLESKY_LOG_MAX
    a = _times_pow2(q, torch.where(eig, 0, k))  # eigenvalue sets: a placeholder that Cholesky takes
    M = a[:, None, None] * G
    M.diagonal(dim1=-2, dim2=-1).add_(1.0)  # I + aĜ without an identity tensor per set
    L, info = torch.linalg.cholesky_ex(M)
    failed = info != 0
    if bool(failed.any()):  # not expected for a ≤ 2^40; a garbage factor would give NaN gradients
        M = torch.where(failed[:, None, None], torch.eye(M.shape[-1], dtype=M.dtype, device=M.device), M)
        L, _ = torch.linalg.cholesky_ex(M)
        eig = eig | failed
    out = 2.0 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    if bool(eig.any()):
        index = eig.nonzero().squeeze(1)
        out = out.index_put((index,), _logdet_eigen(G.index_select(0, index), log_a.index_select(0, index)))
    return out


def _logdet_eigen(G: Tensor, log_a: Tensor) -> Tensor:
    """Σ ln(1 + aλ) over the eigenvalues λ of G (B, m, m), a = e^log_a of any size: softplus(ln a + ln λ)."""
    lam = torch.linalg.eigvalsh(G)
    positive = lam > 0  # rounding may leave tiny negative ones: ln(1 + a·0) = 0
    x = log_a[:, None] + torch.log(torch.where(positive, lam, 1.0))
    return torch.where(positive, torch.logaddexp(x, torch.zeros_like(x)), 0.0).sum(-1)


def _logdets(source, q: Tensor, k: Tensor, name: str, *, total: dict | None = None) -> Tensor:
    """logdet(I + c_i G_i) (count,) of every set of `source`, c_i = q_i·2^k_i.

    A set whose Gram matrix is not finite or has a largest diagonal entry below `_GRAM_TINY` is recomputed
    from its samples scaled by a power of two (a NaN or inf among them is reported: it always shows on the
    diagonal). `total`, when given, receives "gram": the sum of the m×m Gram matrices (unscaled) of the
    sets computed in that form, and "small_from": the first set computed in the L×L form (sets are then
    small to the end) or None.
    """
    buffer: list = []
    out, redo = [], []
    for s, e, L, small in _plan(source):
        G = _gram(source, s, e, L, small, buffer)
        if total is not None:
            if small:
                total.setdefault("small_from", s)
            else:
                total["gram"] = G.sum(0) if total.get("gram") is None else total["gram"] + G.sum(0)
        top = G.detach().diagonal(dim1=-2, dim2=-1).amax(-1)
        bad = ~((top >= _GRAM_TINY) & (top < math.inf))
        if bool(bad.any()):
            G = torch.where(bad[:, None, None], 0.0, G)  # recomputed below
            redo.append(bad.nonzero().squeeze(1) + s)
        out.append(_logdet_identity_plus(G, q[s:e], k[s:e]))
    out = torch.cat(out)
    if redo:
        index = torch.cat(redo)
        out = out.index_put((index,), _rescaled_logdets(source.subset(index), q[index], k[index], name, buffer))
    return out


def _rescaled_logdets(source, q: Tensor, k: Tensor, name: str, buffer: list) -> Tensor:
    """`_logdets` of sets whose Gram matrices over- or underflowed: samples scaled by 2^-t per set, t the
    exponent of the set's largest coordinate, so that the Gram matrix is between 1/4 and L on its diagonal."""
    top = _max_abs(source, buffer)
    if not bool(torch.isfinite(top).all()):
        raise ValueError(f"{name} contains NaN or inf")
    t = _exponent(top)
    source.shift = -t
    out = [_logdet_identity_plus(_gram(source, s, e, L, small, buffer), q[s:e], k[s:e] + 2 * t[s:e])
           for s, e, L, small in _plan(source)]
    return torch.cat(out)


def _empty_result(flat: Tensor, lead) -> Tensor:
    """The rates of an empty batch of sets: shape (..., 0, ...), float64, connected to the input's graph."""
    return (flat.sum((-2, -1)).double() * 0.0).reshape(lead)


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def coding_rate(Z: Tensor, eps: float, *, mask: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
    """Coding rate R(Z, ε) = ½ logdet(I + d/(N ε²) ZᵀZ) of each set of samples, in nats.

    Args:
        Z: (..., N, d) float tensor: sets of N samples (rows) in R^d; leading dimensions are a batch of
            independent sets (e.g. one token set per review). An empty batch (a leading dimension 0) gives
            an empty result: each set's rate is independent of the others, so no set means no rate.
        eps: the distortion ε > 0 (not ε²; the mcr2 reference code's `eps` is ε²); any finite value.
        mask: (..., N) bool, True for real samples; N in the formula counts the real ones of each set.
            None = every sample is real.
        weights: (..., N) multiplicity of each sample (≥ 0, 0 = absent), e.g. the copies of a merged
            token: the set counts sample i w_i times (ZᵀZ → Σ w_i z_i z_iᵀ, N → Σ w_i). None = all 1.
            Only w / Σw matters, so any finite weights work, subnormal ones included.
    Returns:
        (...) float64, R of each set (autograd kept).
    Raises:
        ValueError: eps not a finite number > 0, NaN/inf samples, an empty set (N = 0, or no real sample),
            a non-float Z, a mask or weights of the wrong shape or dtype, negative or non-finite weights.

    The logdet is that of the smaller Gram form (d×d or N×N), through a float64 Cholesky factor (or the
    eigenvalues, in log space, when d/(Nε²)·ZᵀZ is beyond 2^40). Paper: Yu et al. 2020 (MCR²), eq. (5).

    Example: three orthonormal tokens in R³ at ε = 1 give ½ · 3 · log 2.

    >>> import torch, hardmax
    >>> round(float(hardmax.coding_rate(torch.eye(3, dtype=torch.float64), eps=1.0)), 6)
    1.039721
    """
    eps = _check_eps(eps)
    Z = _check_tokens(Z)
    *lead, n, d = Z.shape
    if n == 0:
        raise ValueError("Z is an empty set (N = 0 samples): its coding rate is undefined")
    flat, scale, counts = _prepare(Z, mask, weights)
    if flat.shape[0] == 0:
        return _empty_result(flat, lead)
    if bool((counts == 0).any()):
        raise ValueError("a set has no real sample (its mask is all False or its weights all 0): its coding rate "
                         "is undefined")
    inv, shift = _eps_scale(eps)
    k = torch.full_like(counts, shift, dtype=torch.int64)
    return (0.5 * _logdets(_Dense(flat, scale), d / counts * inv, k, "Z")).reshape(lead)


def class_coding_rate(Z: Tensor, labels: Tensor, eps: float, *, num_classes: int | None = None) -> Tensor:
    """Rate of the classes coded separately, Rc = Σ_j N_j/(2N) logdet(I + d/(N_j ε²) Z_jᵀZ_j).

    Args:
        Z: (N, d) samples. labels: (N,) integer class of each sample, in [0, num_classes).
        eps: the distortion ε > 0 (not ε²). num_classes: k ≥ 1 (default: max label + 1); empty classes add 0.
    Returns:
        0-dim float64 tensor.

    Paper: Yu et al. 2020 (MCR²), eq. (6).
    """
    return _rate_reduction(Z, labels, eps, num_classes, need_rate=False)[1]


@dataclass(frozen=True)
class RateReduction:
    """The parts of ΔR (0-dim float64 tensors with autograd, except `classes` and `counts`).

    Attributes:
        rate: R(Z, ε) of all samples together (expansion). class_rate: Rc (compression).
        reduction: ΔR = R − Rc ≥ 0. classes: (c,) int64 the labels present, increasing. counts: (c,) int64 the
        number of samples of each of them (a label absent from the samples has no entry, whatever its value).
    """

    rate: Tensor
    class_rate: Tensor
    reduction: Tensor
    classes: Tensor
    counts: Tensor


def rate_reduction(Z: Tensor, labels: Tensor, eps: float, *, num_classes: int | None = None) -> RateReduction:
    """Rate reduction ΔR(Z, Π, ε) = R(Z, ε) − Rc(Z, ε | Π) between the classes given by `labels`.

    ΔR = 0 when every class spans the same set of directions in the same proportions, and is large
    when the classes lie in mutually orthogonal subspaces and each is compressible.

    Args:
        Z: (N, d) samples (rows), N ≥ 1. labels: (N,) integer class per sample, in [0, num_classes).
        eps: the distortion ε > 0 (not ε²). num_classes: k, an integer ≥ 1 (default: max label + 1).
    Returns:
        `RateReduction` (rate, class_rate, reduction, classes, counts).
    Raises:
        ValueError: as `coding_rate`; labels not integers of shape (N,), negative or ≥ num_classes;
            num_classes not an integer ≥ 1.

    Cost: one pass over the samples (the total Gram matrix is the sum of the class ones), work and memory
    following the classes present, never the label values: O(N) for the sort, chunks of about 8 MiB, the (c,)
    counts of the c classes present (a label of 10⁹ costs what a label of 1 does).
    Paper: Yu et al. 2020 (MCR²), eq. (7).
    """
    rate, class_rate, classes, counts = _rate_reduction(Z, labels, eps, num_classes, need_rate=True)
    return RateReduction(rate=rate, class_rate=class_rate, reduction=rate - class_rate, classes=classes,
                         counts=counts)


def _rate_reduction(Z, labels, eps, num_classes, *,
                    need_rate: bool) -> tuple[Tensor | None, Tensor, Tensor, Tensor]:
    """(R or None when not `need_rate`, Rc, the classes present, their counts)."""
    eps = _check_eps(eps)
    num_classes = check_num_classes(num_classes)
    Z = _check_tokens(Z)
    if Z.dim() != 2:
        raise ValueError(f"Z must have shape (N, d) (one sample per row), got {tuple(Z.shape)}")
    N, d = Z.shape
    if N == 0:
        raise ValueError("Z is an empty set (N = 0 samples): its rate reduction is undefined")
    labels, high = _check_labels(labels, N, num_classes)
    labels = labels.to(Z.device)
    dense = high < 2 * N + 1024  # a count per label value is O(N) memory and needs no sort
    if dense:
        sizes = torch.bincount(labels)
        classes = sizes.nonzero().squeeze(1)
        sizes = sizes[classes]
    else:  # wild labels: only the classes present, by sorting
        classes, inverse, sizes = torch.unique(labels, return_inverse=True, return_counts=True)
    # classes by decreasing size, rows sorted by class in that order: a chunk of `_logdets` then holds
    # several small classes or a part of a large one
    by_size = torch.argsort(sizes, descending=True, stable=True)
    rank = torch.empty(high + 1 if dense else classes.numel(), dtype=torch.int64, device=Z.device)
    rank[classes[by_size] if dense else by_size] = torch.arange(by_size.numel(), device=Z.device)
    order = torch.argsort(rank[labels if dense else inverse], stable=True)
    sizes = sizes[by_size]
    starts = torch.cumsum(sizes, 0) - sizes
    source = _Grouped(Z, order, starts, sizes)
    inv, shift = _eps_scale(eps)
    total: dict = {}
    logdets = _logdets(source, d / sizes.double() * inv, torch.full_like(sizes, shift), "Z",
                       total=total if need_rate and N >= d else None)
    class_rate = (sizes.double() / (2 * N) * logdets).sum()
    counts = torch.empty_like(sizes).index_put_((by_size,), sizes)  # back in the classes' increasing order
    if not need_rate:
        return None, class_rate, classes, counts
    q = torch.tensor([d / N * inv], dtype=torch.float64, device=Z.device)
    k_all = torch.tensor([shift], device=Z.device)
    rate = None
    if N >= d:  # the d×d form: the sum of the class Gram matrices, plus the rows of the classes done N_j×N_j
        G = total.get("gram")
        if G is None:
            G = torch.zeros(d, d, dtype=torch.float64, device=Z.device)
        small_from = total.get("small_from")
        if small_from is not None:
            first = int(starts[small_from])
            rest = _Grouped(Z, order, starts[small_from:small_from + 1], torch.tensor([N - first], device=Z.device))
            G = G + _gram(rest, 0, 1, N - first, False, [])[0]
        top = float(G.detach().diagonal().amax())
        if _GRAM_TINY <= top < math.inf:
            rate = 0.5 * _logdet_identity_plus(G[None], q, k_all)[0]
    if rate is None:  # the N×N form, or a total Gram matrix that over- or underflowed: its own pass
        rate = 0.5 * _logdets(_Dense(Z[None], None), q, k_all, "Z")[0]
    return rate, class_rate, classes, counts


def subspace_coding_rate(Z: Tensor, U: Tensor, eps: float, *, mask: Tensor | None = None,
                         weights: Tensor | None = None) -> Tensor:
    """CRATE's compression term R^c(Z | U_1..U_K) = Σ_k R(Z U_k, ε), with U_k ∈ R^{d×p}.

    Each term codes the projections U_kᵀ z_i ∈ R^p, so its constant is p/(N ε²) (CRATE eq. (8)).

    Args:
        Z: (..., N, d) sets of samples (any float dtype: the projections are computed in float64, each set
            and each subspace scaled by a power of two first, so they cannot overflow). U: (K, d, p) the
            subspace bases (or (d, p) for K = 1), K ≥ 1 and p ≥ 1, finite.
        eps: the distortion ε > 0 (not ε²). mask: (..., N) bool, True for real samples. weights: (..., N)
        multiplicities, as in `coding_rate`.
    Returns:
        (...) float64; an empty batch gives an empty result, as in `coding_rate`.
    Raises:
        ValueError: as `coding_rate`, and U of the wrong shape (K = 0 subspaces is refused like d = 0 or
            p = 0: there is nothing to code, and an empty list of heads is a mistake far more often than
            a request for the empty sum 0), or U holding NaN or inf.

    Paper: Yu et al. 2023 (CRATE), Section 2, R^c(Z; U_[K]).
    """
    eps = _check_eps(eps)
    Z = _check_tokens(Z)
    if not isinstance(U, Tensor) or not U.is_floating_point() or U.dim() not in (2, 3):
        raise ValueError(f"U must be a float tensor of shape (K, d, p) or (d, p), got "
                         f"{tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__}")
    if U.dim() == 2:
        U = U.unsqueeze(0)
    *lead, n, d = Z.shape
    if U.shape[0] == 0 or U.shape[1] != d or U.shape[2] == 0:
        raise ValueError(f"U must have shape (K ≥ 1, {d}, p ≥ 1) to project samples of dimension {d}, got "
                         f"{tuple(U.shape)}")
    if not bool(torch.isfinite(U).all()):
        raise ValueError("U contains NaN or inf")
    if n == 0:
        raise ValueError("Z is an empty set (N = 0 samples): its coding rate is undefined")
    flat, scale, counts = _prepare(Z, mask, weights)
    B, K, p = flat.shape[0], U.shape[0], U.shape[2]
    if B == 0:
        return _empty_result(flat, lead)
    if bool((counts == 0).any()):
        raise ValueError("a set has no real sample (its mask is all False or its weights all 0): its coding rate "
                         "is undefined")
    U = U.to(device=Z.device, dtype=torch.float64)
    u = _exponent(U.detach().abs().amax((-2, -1)))
    U = _times_pow2(U, -u[:, None, None])  # every entry below 1 in magnitude
    inv, shift = _eps_scale(eps)
    q = p / counts * inv
    step = max(1, _CHUNK_ELEMENTS // (n * max(d, K * p)))
    out = []
    for s in range(0, B, step):  # chunks of sets: the float64 projections stay about 8 MiB
        e = min(B, s + step)
        z = flat[s:e]
        w = None if scale is None else scale[s:e]
        top = z.detach().abs().amax(-1)  # (b, n), NaN if a row holds one
        if w is not None:
            top = torch.where(w if w.dtype == torch.bool else w > 0, top, 0.0)
        top = top.amax(-1).double()
        if not bool(torch.isfinite(top).all()):
            raise ValueError("Z contains NaN or inf")
        t = _exponent(top)
        z = _times_pow2(z.double(), -t[:, None, None])  # every real coordinate below 1: |projection| ≤ d
        projected = (z.reshape(-1, d) @ U).view(-1, n, p)  # (K·b, n, p), subspace-major
        sets = _Dense(projected, None if w is None else w.repeat(K, 1))
        k = (shift + 2 * (t[None, :] + u[:, None])).reshape(-1)
        out.append(_logdets(sets, q[s:e].repeat(K), k, "Z").view(K, e - s).sum(0))
    return (0.5 * torch.cat(out)).reshape(lead)
