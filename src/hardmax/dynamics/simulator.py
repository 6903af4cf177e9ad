"""`simulate`: validated input, deduplication, chunks on a thread pool, and the full trajectory."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics.dedup import Deduplicated, deduplicate, take_rows
from hardmax.dynamics.layers import _full_layers, _hardmax_run
from hardmax.dynamics.step import ATTENTIONS, Attention, attention_step, attention_weights, default_tie_rtol

try:  # the compiled CPU kernel; without numba every case runs on the torch engine
    from hardmax.dynamics import kernel as _kernel
except ImportError:  # pragma: no cover - numba is a dependency, but a broken install should still run
    _kernel = None

Backend = Literal["auto", "torch", "numba"]
BACKENDS: tuple[str, ...] = ("auto", "torch", "numba")
# numba's parallel kernels must not be launched from two threads at once with its fallback
# (workqueue) threading layer; calls are serialised, each one already uses every core.
_KERNEL_LOCK = threading.Lock()


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
    backend: Backend = "auto",
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
        chunk_size: sequences processed together by the torch engine; chunks are formed from sequences
            with similar numbers of distinct tokens so the working set stays in cache.
        backend: "torch" runs the batched torch engine (`hardmax.dynamics.step`); "numba" the compiled
            CPU kernel (`hardmax.dynamics.kernel`: hardmax, float32/float64, CPU, no `return_weights`),
            which gives the same trajectory (scores may differ in the last bit) 2-3x faster; "auto"
            takes the kernel wherever it applies.

    Returns:
        `Trajectory` with `.tokens` of shape (layers + 1, *tokens.shape).

    Raises:
        ValueError: on wrong shapes, NaN/inf tokens, non-SPD or wrongly sized A, α ≤ 0, negative layers,
            an unknown attention or backend, softmax without β > 0, or backend="numba" where the kernel
            does not apply.

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

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    why_not = _kernel_unusable(z, attention, return_weights)
    if backend == "numba" and why_not:
        raise ValueError(f"backend='numba' cannot run this simulation: {why_not}; use backend='torch'")
    use_kernel = backend != "torch" and not why_not

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

    if use_kernel:
        tokens_np = batched.detach().contiguous().numpy()
        # The trajectory in NumPy's memory: NumPy asks Linux for transparent huge pages for large
        # arrays (madvise), so writing a fresh one (600 MB for 8,192 IMDb reviews) takes ~1,000 page
        # faults instead of ~150,000, which with torch's allocator cost as much as the arithmetic.
        out_np = np.empty((layers + 1, *tokens_np.shape), dtype=tokens_np.dtype)
        with _KERNEL_LOCK:
            _kernel.hardmax_trajectory(tokens_np, m_t.contiguous().numpy(),
                                       None if A_used is None else A_used.detach().numpy(),
                                       (alphas / (1 + alphas)).numpy(), tie_rtol, out_np,
                                       torch.get_num_threads())
        out = torch.from_numpy(out_np)
        if single:
            out, m_t = out[:, 0], m_t[0]
        return Trajectory(tokens=out, alpha=alphas, A=A_t, attention=attention, beta=beta, mask=m_t,
                          tie_rtol=float(tie_rtol))
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
        # torch releases the GIL inside ops, so whole chunks run in parallel (1.65× on 2 cores here).
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


def _kernel_unusable(z: Tensor, attention: str, return_weights: bool) -> str:
    """Why the compiled kernel cannot run this simulation ("" when it can)."""
    if _kernel is None:
        return "numba is not installed"
    if attention != "hardmax":
        return "it runs hardmax attention only"
    if return_weights:
        return "it does not return attention matrices"
    if z.device.type != "cpu":
        return f"it runs on the CPU, the tokens are on {z.device}"
    if z.dtype not in (torch.float32, torch.float64):
        return f"it runs float32 and float64, the tokens are {z.dtype}"
    return ""


def _chunks_by_size(counts: Tensor, chunk_size: int) -> list[Tensor]:
    """Split sequence indices into chunks of ≤ chunk_size with similar distinct-token counts."""
    order = torch.argsort(counts, stable=True)
    return list(torch.split(order, max(1, chunk_size)))
