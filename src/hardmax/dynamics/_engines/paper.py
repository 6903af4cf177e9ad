"""The paper's layers, fast: the compiled kernel (hardmax on a CPU) and the compact torch path (any rule, any device).

Serves `Field(rule, Bilinear(A))` (hardmax or softmax, V = I, one fixed symmetric positive definite A, R^d) with
`Euler.layers(α)` and at most a token mask. Identical tokens are merged once (exact grouping), leaders' rows skipped
after layer 1 (hardmax), ties decided by rule (★): every layer bit for bit what the reference loop computes with the
same rule (the tests hold them to each other). `run` is what `solve` calls; `simulation_bytes` its memory estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics._engines import kernel as _kernel
from hardmax.dynamics._engines.layers import AHEAD, AHEAD_SCORES, full_layers, hardmax_run
from hardmax.dynamics.dedup import Deduplicated, deduplicate, take_rows
from hardmax.dynamics.rules import AttentionRule, Hardmax, Unnormalised
from hardmax.dynamics.solvers import euler_update, layer_step
from hardmax.dynamics.step import attention_matrix, attention_step

# Hardmax is scale-free (scaling every token by c scales the trajectory by c); a review whose largest
# coordinate lies outside 2^±SAFE_EXPONENT is run scaled by a power of two, which is exact, so that
# scores and tie tolerances neither overflow nor underflow (float32: |z| ≳ 1e19 or ≲ 1e-19).
SAFE_EXPONENT = 20
# Working set of one block of reviews when only some layers are stored (bytes).
_BLOCK_BYTES = 64 * 2**20


def run(z: Tensor, mask: Tensor, rule: AttentionRule, alphas: Tensor, A: Tensor | None, stored: tuple[int, ...],
        keep_attention: bool, engine: str, chunk_size: int = 512) -> tuple[Tensor, Tensor | None]:
    """The paper's layers from z (batch, n, d) under mask (batch, n): (len(stored), batch, n, d) and, when asked,
    the attention matrices (layers, batch, n, n).

    alphas: (layers,) α_k (a tensor that requires grad keeps its graph: the layers then run as the differentiable
    loop of `attention_step`); A: the validated (d, d) matrix, None for the identity; engine: "compiled" (the numba
    kernel) or "torch" (the compact torch path), as `choose` decided; tokens and A must be finite."""
    layers = alphas.shape[0]
    hard = isinstance(rule, Hardmax)
    needs_grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (z, alphas, A))
    engine_run = _Engine(rule, alphas, _power_of_two(A) if hard else A, keep_attention=keep_attention,
                         chunk_size=int(chunk_size))
    attention = None
    if engine == "compiled":
        # The kernel measures each review's peak coordinate in its own first pass (no extra pass over the
        # tokens); the rare review beyond 2^±SAFE_EXPONENT is then run again, scaled.
        with torch.no_grad():
            out, peak = engine_run.compiled(z, mask, stored)
            scale = _review_scales(_finite(peak))
            if scale is not None:
                rows = scale.nonzero().squeeze(1)
                out[:, rows], _ = _scaled(lambda x: engine_run.compiled(x, mask[rows], stored), z[rows], mask[rows],
                                          scale[rows], stored)
    else:
        peak = _finite(_peaks(z, mask))
        if needs_grad:
            path, attention = _differentiable(z, mask, alphas, A, rule, keep_attention)
            out = path[list(stored)] if len(stored) < layers + 1 else path
        else:
            with torch.no_grad():
                scale = _review_scales(peak) if hard else None
                if scale is None:
                    out, attention = engine_run.stored(z, mask, stored)
                else:
                    out, attention = _scaled(lambda x: engine_run.stored(x, mask, stored), z, mask, scale, stored)
    if not hard:  # hardmax moves to convex combinations (finite); another rule may overflow after layer 0
        _require_finite(out, stored)
    return out, attention


def _require_finite(out: Tensor, stored: tuple[int, ...]) -> None:
    """Refuse a trajectory (stored, batch, n, d) whose stored layers hold NaN or inf, naming the first one."""
    ok = torch.isfinite(out.detach()).flatten(1).all(1)
    if bool(ok.all()):
        return
    first = int((~ok).nonzero()[0])
    after = f" (after layer {stored[first - 1]})" if first > 0 and stored[first - 1] != stored[first] - 1 else ""
    raise FloatingPointError(f"the tokens stopped being finite at layer {stored[first]}{after}: the attention "
                             "weights overflowed; use smaller tokens, a smaller alpha or a lower beta")


def simulation_bytes(batch: int, n: int, d: int, layers: int, stored: int, itemsize: int, *,
                     keep_attention: bool = False, torch_engine: bool = True, chunk_size: int = 512) -> float:
    """Estimated peak memory of `simulate` (bytes, a float: products of user sizes may exceed int64).

    The stored trajectory (stored × batch × n × d, and a Python int per stored layer), A and its
    eigenvalue check (d × d); the torch engine adds each block's full trajectory (layers + 1 layers of a
    review at least), a chunk's own trajectory and the copies that spread it over the block (4 × (layers + 1)
    × chunk × n × d, measured: 3-5×), a chunk's pairwise scores, masks and the rows refined (chunk × n × n,
    measured: 48 bytes each in float64), and the batched decision of the layers run ahead (up to
    `layers.AHEAD_SCORES` scores, measured: 36-64 bytes each); attention matrices add layers × batch × n × n."""
    per_layer = float(batch) * n * d * itemsize
    total = stored * (per_layer + 40.0) + 3.0 * d * d * 8
    if torch_engine:
        block = max(1.0, min(float(batch), _BLOCK_BYTES / ((layers + 1.0) * n * d * itemsize)))
        total += block * (layers + 1.0) * n * d * itemsize if stored < layers + 1 else 0.0
        chunk = min(float(batch), chunk_size)
        total += 4.0 * (layers + 1.0) * chunk * n * d * itemsize + chunk * n * n * (6.0 * itemsize + 8)
        if layers > 2:
            total += min(float(AHEAD_SCORES), AHEAD * chunk * n * n) * (8.0 * itemsize + 16)
    if keep_attention:
        total += float(layers) * batch * n * n * itemsize
    return total


def check_score_range(z: Tensor, mask: Tensor, A: Tensor | None, rule: AttentionRule) -> None:
    """Exponential rules are not scale-free: refuse tokens whose scores β⟨A z_i, z_j⟩ overflow the dtype.

    Softmax subtracts each row's maximum, so its scores need only be finite (< max/4); the unnormalised weights
    e^{β s} themselves must be finite (β s < log max). A: (d, d), (batch, d, d) or None (the identity)."""
    beta = getattr(rule, "beta", None)
    if beta is None or z.numel() == 0:
        return
    norm2 = float((z.detach().to(torch.float64) ** 2).sum(-1).masked_fill(~mask, 0).amax())
    size = 1.0 if A is None else float(torch.linalg.matrix_norm(A.detach().to(torch.float64), ord=2).amax())
    bound = float(beta) * norm2 * size
    exponential = isinstance(rule, Unnormalised)
    limit = math.log(torch.finfo(z.dtype).max) if exponential else torch.finfo(z.dtype).max / 4
    if not bound < limit:
        what = "unnormalised attention weights e^{β⟨A z_i, z_j⟩}" if exponential else "softmax scores β⟨A z_i, z_j⟩"
        raise ValueError(f"{what} reach {bound:.3g}{' in the exponent' if exponential else ''}, beyond the range of "
                         f"{z.dtype}; scale the tokens or lower beta")


def _peaks(z: Tensor, mask: Tensor) -> Tensor:
    """(batch,) the largest |coordinate| of each sequence's real tokens, NaN where any coordinate (padding
    included) is NaN or inf: what the compiled kernel reports from its first pass. z: (batch, n, d)."""
    # Each token's largest and smallest coordinate in one pass: no temporary of the tokens' size.
    lo, hi = torch.aminmax(z.detach(), dim=-1)
    biggest = torch.maximum(hi, -lo)  # NaN propagates
    peak = biggest.masked_fill(~mask, 0).amax(dim=1)
    return peak.masked_fill(~torch.isfinite(biggest).all(dim=1), math.nan)


def _finite(peak: Tensor) -> Tensor:
    """peak as given, after refusing NaN or inf tokens (`_peaks`)."""
    if not bool(torch.isfinite(peak).all()):
        raise ValueError("tokens contain NaN or inf")
    return peak


def _review_scales(peak: Tensor) -> Tensor | None:
    """(batch,) int exponents e with 2^-e · z_b of order 1 for reviews out of the safe range, else 0;
    None when every review is in range (the common case: nothing is copied).

    peak: (batch,) each review's largest |coordinate| over its real tokens (`_peaks`)."""
    _, e = torch.frexp(peak)
    e = torch.where(peak > 0, e, torch.zeros_like(e))
    outside = e.abs() > SAFE_EXPONENT
    return torch.where(outside, e, torch.zeros_like(e)) if bool(outside.any()) else None


def _scaled(run, z: Tensor, mask: Tensor, scale: Tensor, stored: tuple[int, ...]) -> tuple[Tensor, object]:
    """run(2^-e z), its trajectory scaled back by 2^e, e = scale (batch,): hardmax is scale-free, so this is
    the trajectory of z (batch, n, d), computed where scores neither overflow nor underflow.

    run maps tokens to (trajectory (len(stored), batch, n, d), anything), returned with the trajectory.
    Padding takes no part and never moves: it is zeroed before scaling (scaled with its review it could
    overflow to inf, or vanish) and put back as given at every stored layer, as is layer 0 (the input)."""
    real = mask.unsqueeze(-1)
    out, extra = run(_ldexp(torch.where(real, z, torch.zeros((), dtype=z.dtype, device=z.device)), -scale))
    out = torch.where(real, _ldexp(out, scale), z)
    if stored[0] == 0:
        out[0] = z
    return out, extra


def _ldexp(x: Tensor, e: Tensor) -> Tensor:
    """x · 2^e with e (batch,) per review on x's batch axis (-3); exact, in two halves so that 2^e itself
    cannot overflow."""
    half = torch.div(e, 2, rounding_mode="floor")
    one = torch.ones(e.shape, dtype=x.dtype, device=x.device)
    return x * torch.ldexp(one, half).view(-1, 1, 1) * torch.ldexp(one, e - half).view(-1, 1, 1)


def _power_of_two(A: Tensor | None) -> Tensor | None:
    """A scaled by an exact power of two to a largest entry of order 1 (hardmax: C_i does not change)."""
    if A is None:
        return None
    _, e = torch.frexp(A.abs().amax())
    return torch.ldexp(A, -e) if abs(int(e)) > SAFE_EXPONENT else A


def _differentiable(z: Tensor, mask: Tensor, alphas: Tensor, A: Tensor | None, rule: AttentionRule,
                    keep_attention: bool) -> tuple[Tensor, Tensor | None]:
    """The reference loop of `attention_step` on every token, recorded by autograd."""
    w = mask.to(z.dtype)
    path, attention = [z], []
    for k in range(alphas.shape[0]):
        if keep_attention:
            attention.append(attention_matrix(path[-1], w, rule=rule, A=A))
        path.append(attention_step(path[-1], w, alpha=alphas[k], rule=rule, A=A))
    return torch.stack(path), (torch.stack(attention) if keep_attention else None)


@dataclass(frozen=True)
class _Engine:
    """One configured run of the no-grad engines over blocks of reviews."""

    rule: AttentionRule
    alphas: Tensor
    A: Tensor | None
    keep_attention: bool
    chunk_size: int

    def stored(self, z: Tensor, mask: Tensor, stored: tuple[int, ...]) -> tuple[Tensor, Tensor | None]:
        """The torch engine: (len(stored), batch, n, d) and the attention matrices; the full trajectory is
        written directly when every layer is stored, otherwise block by block (each block's full
        trajectory stays small)."""
        layers = self.alphas.shape[0]
        if len(stored) == layers + 1:
            return self._torch(z, mask)
        batch, n, d = z.shape
        block = max(1, _BLOCK_BYTES // ((layers + 1) * n * d * z.element_size()))
        out = z.new_empty(len(stored), batch, n, d)
        attention = []
        for start in range(0, batch, block):  # blocks of thousands of reviews, not single reviews
            part, att = self._torch(z[start:start + block], mask[start:start + block])
            out[:, start:start + block] = part[list(stored)]
            attention.append(att)
        return out, (torch.cat(attention, dim=1) if self.keep_attention else None)

    def compiled(self, z: Tensor, mask: Tensor, stored: tuple[int, ...]) -> tuple[Tensor, Tensor]:
        """The compiled kernel: (len(stored), batch, n, d), written directly (the other layers never leave
        each review's scratch memory), and (batch,) each review's peak coordinate (NaN: not finite).
        Reviews beyond 2^±SAFE_EXPONENT get layer 0 only (`simulate` runs them again, scaled)."""
        tokens_np = z.detach().numpy()
        # The trajectory in NumPy's memory: NumPy asks Linux for transparent huge pages for large
        # arrays (madvise), so writing a fresh one (600 MB for 8,192 IMDb reviews) takes ~1,000 page
        # faults instead of ~150,000, which with torch's allocator cost as much as the arithmetic.
        out_np = np.empty((len(stored), *tokens_np.shape), dtype=tokens_np.dtype)
        # (the kernel serialises its parallel calls itself: `hardmax._numba.parallel`)
        done = _kernel.hardmax_trajectory(tokens_np, mask.contiguous().numpy(),
                                          None if self.A is None else self.A.detach().numpy(),
                                          layer_step(self.alphas).numpy(),
                                          self.rule.rtol(z.dtype), out_np, torch.get_num_threads(),
                                          stored=stored, safe_exponent=SAFE_EXPONENT)
        return torch.from_numpy(out_np), torch.from_numpy(done.peak)

    def _torch(self, z: Tensor, mask: Tensor) -> tuple[Tensor, Tensor | None]:
        layers = self.alphas.shape[0]
        batch, n, d = z.shape
        out = torch.empty(layers + 1, batch, n, d, dtype=z.dtype, device=z.device)
        out[0] = z
        out_w = torch.empty(layers, batch, n, n, dtype=z.dtype, device=z.device) if self.keep_attention else None
        dedup = deduplicate(z, mask)
        counts = dedup.index.amax(dim=1) + 1  # distinct tokens per sequence
        # Hardmax fast path: chunks return layer 1 in full and later layers for the followers only
        # (`hardmax_run`); the full trajectory is then written once, with a few large copies.
        compact = isinstance(self.rule, Hardmax) and out_w is None and layers > 0
        moving: list[tuple[Tensor, Tensor]] = []  # (flat positions (P,), positions at layers 2..K)
        in_full: list[tuple[Tensor, Tensor]] = []  # (rows, layers 1..K (layers, rows, n, d)) computed in full
        # Chunks run one after another with the caller's torch thread settings (thread counts are the
        # caller's business; the compiled engine is the fast CPU path).
        for rows in _chunks_by_size(counts, self.chunk_size):
            width = int(counts[rows].max().item())
            u, w, index = dedup.tokens[rows, :width], dedup.multiplicity[rows, :width], dedup.index[rows]
            if compact:
                rtol = self.rule.rtol(z.dtype)
                run = hardmax_run(u, w, self.alphas, self.A, rtol)
                if run is None:
                    path = full_layers(u, w, self.alphas, self.A, rtol)
                    in_full.append((rows, take_rows(path[1:], index, lead=1)))
                    continue
                out[1].index_copy_(0, rows, take_rows(run.first, index))
                f = run.later.shape[2]
                if f > 0:
                    slot = torch.gather(torch.argsort(run.order, dim=1), 1, index)  # (chunk, n)
                    b, t = (slot < run.followers.unsqueeze(1)).nonzero(as_tuple=True)
                    values = run.later.reshape(layers - 1, -1, d).index_select(1, b * f + slot[b, t])
                    moving.append((rows[b] * n + t, values))
                continue
            path = torch.empty(layers + 1, *u.shape, dtype=z.dtype, device=z.device)
            path[0] = u
            part = Deduplicated(u, w, index)
            # `attention_step`, with its step sizes and present tokens taken once for all layers (the same
            # arithmetic: every layer bit for bit; a layer of 200 tokens costs ~100 µs, of which these were ~10)
            gammas, present = layer_step(self.alphas), w > 0
            everyone = bool(present.all())  # then `move` is z + γ (T − z) throughout, written in place
            for k in range(layers):
                if out_w is not None:
                    p = attention_matrix(path[k], w, rule=self.rule, A=self.A)
                    # Spread each distinct token's weight equally over its copies.
                    p = p / w.clamp(min=1).unsqueeze(-2)
                    full = part.expand(p)  # (chunk, n, width): rows expanded
                    out_w[k, rows] = torch.gather(full, 2, index.unsqueeze(1).expand(-1, n, -1))
                target = self.rule.targets(path[k], w, self.A)
                # The same operations (γ (T − z) + z) written in place, without the selection and its temporaries;
                # a rule's targets of another dtype or shape go through `move`, as before.
                if everyone and target.dtype == path.dtype and target.shape == path.shape[1:]:
                    torch.sub(target, path[k], out=path[k + 1])
                    path[k + 1].mul_(gammas[k]).add_(path[k])
                else:
                    path[k + 1] = euler_update(path[k], target, gammas[k], present)
            out[1:].index_copy_(1, rows, part.expand(path[1:], lead=1))
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
        return out, out_w


def _chunks_by_size(counts: Tensor, chunk_size: int) -> list[Tensor]:
    """Split sequence indices into chunks of ≤ chunk_size with similar distinct-token counts."""
    order = torch.argsort(counts, stable=True)
    return list(torch.split(order, max(1, chunk_size)))
