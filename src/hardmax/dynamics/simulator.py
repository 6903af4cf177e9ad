"""`simulate`: validated input, deduplication, the choice of engine, and the `Trajectory`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import kernel as _kernel
from hardmax.dynamics.dedup import Deduplicated, deduplicate, take_rows
from hardmax.dynamics.inputs import MAX_STEPS, as_floating, as_tensor
from hardmax.dynamics.layers import AHEAD, AHEAD_SCORES, full_layers, hardmax_run
from hardmax.dynamics.masks import validate_mask
from hardmax.dynamics.rules import AttentionRule, Hardmax, Unnormalised, rule_from_dict, rule_to_dict
from hardmax.dynamics.save import Save
from hardmax.dynamics.select import move
from hardmax.dynamics.step import HARDMAX, attention_matrix, attention_step
from hardmax.memory import require_memory

__all__ = ["ENGINES", "Engine", "Store", "Trajectory", "check_score_range", "simulate", "simulation_bytes",
           "validate_A", "validate_alpha", "validate_mask"]

#: The engines `simulate` accepts: "auto" picks the compiled kernel for hardmax on a CPU.
Engine = Literal["auto", "torch", "compiled"]
#: The values of `Engine`.
ENGINES: tuple[str, ...] = ("auto", "torch", "compiled")
#: Which layers `simulate` keeps: "all", "final", or every k-th (an int).
Store = Literal["all", "final"] | int
# Hardmax is scale-free (scaling every token by c scales the trajectory by c); a review whose largest
# coordinate lies outside 2^±SAFE_EXPONENT is run scaled by a power of two, which is exact, so that
# scores and tie tolerances neither overflow nor underflow (float32: |z| ≳ 1e19 or ≲ 1e-19).
SAFE_EXPONENT = 20
# Working set of one block of reviews when only some layers are stored (bytes).
_BLOCK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Trajectory:
    """Positions of tokens through the layers: the result of `simulate` and of a classifier's `trace`.

    Attributes:
        tokens: (len(stored), *input_shape) positions at the stored layers (batch axis kept as given).
        alpha: (layers,) step parameter α_k of each layer.
        A: (d, d) the score matrix used.
        rule: the attention rule (`Hardmax(...)`, `Softmax(beta=...)`).
        mask: (*input_shape[:-1]) bool, True for real tokens.
        multiplicity: (*input_shape[:-1]) how many copies of a word each token stands for (the
            classifier merges repeated words), 0 for absent tokens; None: 1 for every real token.
        stored: the layer index of each entry of `tokens` (increasing, ends with `layers`).
        attention: (layers, *input_shape[:-1], n) attention matrix P of each layer, when asked for.
    """

    tokens: Tensor
    alpha: Tensor
    A: Tensor
    rule: AttentionRule
    mask: Tensor
    multiplicity: Tensor | None = None
    stored: tuple[int, ...] | None = None
    attention: Tensor | None = None

    def __post_init__(self):
        if self.stored is None:  # every layer
            object.__setattr__(self, "stored", tuple(range(self.alpha.shape[0] + 1)))

    @property
    def layers(self) -> int:
        """The number of layers run (the depth)."""
        return self.alpha.shape[0]

    @property
    def final(self) -> Tensor:
        """(*input_shape) positions after the last layer."""
        return self.tokens[-1]

    @property
    def times(self) -> Tensor:
        """(len(stored),) the time of each stored layer: the layers are Euler steps of size α_k/(1+α_k) of the
        flow ż = Σ_j P_ij z_j − z, so layer k is at time Σ_{l<k} α_l/(1+α_l) (`hardmax.dynamics.solve`'s `times`)."""
        gammas = (self.alpha / (1 + self.alpha)).detach()
        t = torch.cat([gammas.new_zeros(1), torch.cumsum(gammas, 0)])
        return t[list(self.stored)]

    @property
    def complete(self) -> bool:
        """Whether every layer 0..layers is stored."""
        return len(self.stored) == self.layers + 1

    @property
    def counts(self) -> Tensor:
        """(*input_shape[:-1]) the multiplicity as floats in the tokens' dtype (the mask as 0/1 when none)."""
        w = self.mask if self.multiplicity is None else self.multiplicity
        return w.to(self.tokens.dtype)

    def to_dict(self) -> dict:
        """The trajectory as plain JSON values (`from_dict` reads it back, same dtype, on the CPU)."""
        def listed(t: Tensor | None):
            return None if t is None else t.detach().cpu().tolist()

        return {"dtype": str(self.tokens.dtype).removeprefix("torch."), "tokens": listed(self.tokens),
                "alpha": listed(self.alpha), "A": listed(self.A), "rule": rule_to_dict(self.rule),
                "mask": listed(self.mask), "multiplicity": listed(self.multiplicity), "stored": list(self.stored),
                "attention": listed(self.attention)}

    @classmethod
    def from_dict(cls, record: dict) -> Trajectory:
        """The `Trajectory` a `to_dict` record describes; ValueError for a malformed record."""
        try:
            dtype = getattr(torch, record["dtype"])
            if dtype not in (torch.float32, torch.float64):
                raise ValueError(f"dtype must be float32 or float64, got {record['dtype']!r}")

            def tensor(key: str, kind=None):
                value = record.get(key)
                return None if value is None else torch.tensor(value, dtype=kind or dtype)

            return cls(tokens=tensor("tokens"), alpha=tensor("alpha"), A=tensor("A"),
                       rule=rule_from_dict(record["rule"]), mask=tensor("mask", torch.bool),
                       multiplicity=tensor("multiplicity"), stored=tuple(int(k) for k in record["stored"]),
                       attention=tensor("attention"))
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a trajectory record: {type(e).__name__} {e}") from None

    def at(self, layer: int) -> Tensor:
        """(*input_shape) positions after `layer` layers (0 = the input); it must be stored."""
        k = layer + self.layers + 1 if layer < 0 else layer
        try:
            return self.tokens[self.stored.index(k)]
        except ValueError:
            raise ValueError(f"layer {layer} is not stored (stored: {_describe(self.stored)}); "
                             "simulate with store='all'") from None


def _describe(stored: tuple[int, ...]) -> str:
    return ", ".join(map(str, stored)) if len(stored) <= 6 else f"{stored[0]}, {stored[1]}, ..., {stored[-1]}"


def validate_A(A, d: int, dtype: torch.dtype, device) -> Tensor:
    """Return A as a (d, d) tensor, or raise ValueError if it is not symmetric positive definite."""
    if A is None:
        return torch.eye(d, dtype=dtype, device=device)
    A = as_tensor(A, "A", dtype=dtype, device=device)
    if A.shape != (d, d):
        raise ValueError(f"A must have shape ({d}, {d}) to match tokens of dimension {d}, got {tuple(A.shape)}")
    values = A.detach()  # the checks are not part of the graph when A requires grad
    if not torch.isfinite(values).all():
        raise ValueError("A contains NaN or inf")
    scale = values.abs().max().clamp(min=1)
    if not torch.allclose(values, values.T, rtol=0, atol=1e3 * torch.finfo(dtype).eps * float(scale)):
        raise ValueError("A must be symmetric (A != A.T)")
    smallest = torch.linalg.eigvalsh(values.to(torch.float64)).min().item()
    if smallest <= 0:
        raise ValueError(f"A must be positive definite; its smallest eigenvalue is {smallest:.3g}")
    return A


def validate_alpha(alpha, layers: int, dtype: torch.dtype, device) -> Tensor:
    """Return α as a (layers,) tensor, or raise ValueError unless every α_k is finite and > 0.

    A tensor α that requires grad keeps its graph (so gradients reach it through `simulate`).
    """
    if isinstance(alpha, bool | np.bool_):
        raise ValueError(f"alpha must be a number > 0, got {alpha!r}")
    a = as_tensor(alpha, "alpha")
    if a.dtype == torch.bool:
        raise ValueError("alpha must be numbers > 0, got a bool array")
    values = a.detach().to(torch.float64).reshape(-1).cpu()
    if values.numel() == 0:
        raise ValueError("alpha must be a scalar or one value per layer, got an empty array")
    if not torch.isfinite(values).all() or (values <= 0).any():
        bad = values[~(torch.isfinite(values) & (values > 0))][0].item()
        raise ValueError(f"alpha must be finite and > 0, got {bad}")
    if values.numel() not in (1, layers):
        raise ValueError(f"alpha must be a scalar or have one value per layer ({layers}), got {values.numel()} values")
    a = a.reshape(-1).to(dtype=dtype, device=device)
    return a.expand(layers) if a.numel() == 1 else a


def simulate(
    tokens,
    rule: AttentionRule = HARDMAX,
    *,
    alpha: float | Sequence[float] | Tensor,
    layers: int,
    A=None,
    mask=None,
    store: Store = "all",
    keep_attention: bool = False,
    engine: Engine = "auto",
    chunk_size: int = 512,
    save: Save | None = None,
) -> Trajectory:
    """Run the pure-attention dynamics (1.1) for `layers` layers under an attention `rule`.

    z_i^{k+1} = z_i^k + α_k/(1+α_k) (Σ_j P_ij z_j^k − z_i^k), with P given by the rule:
    `Hardmax()` (the default: C_i = argmax_j ⟨A z_i^k, z_j^k⟩, every maximiser kept and counted with
    multiplicity, ties by rule (★)) or `Softmax(beta)` (P = softmax(β⟨A z_i, z_j⟩)).

    Args:
        tokens: (n, d) or (batch, n, d), NumPy array (float64 unless already floating) or tensor
            (dtype and device kept; float16/bfloat16 are refused: they cannot resolve ties).
        rule: the attention rule, `Hardmax(tie_rtol=...)` or `Softmax(beta=...)` (`hardmax.dynamics.rules`).
        alpha: α > 0, a scalar or one value per layer (a tensor that requires grad gets gradients).
        layers: number of layers ≥ 0.
        A: (d, d) symmetric positive definite matrix; None for the identity.
        mask: (n,) or (batch, n) bool (or `Tokens(present)`), True for real tokens. Masked tokens (padding)
            neither attend nor are attended to, and do not move. A pair mask (`Causal()`, `Pairs(allowed)`) is
            refused with one line: it runs on `solve(..., engine="loop")` (these engines merge identical tokens
            and skip leaders, exact only when every token sees every token).
        store: which layers the trajectory keeps: "all" (0..layers), "final" (0 and layers), or an
            integer k (every k-th layer, and the last). Memory is what is stored: a 4,096-review batch
            (n = 128, d = 16, float32) needs 34 MB per stored layer.
        keep_attention: also return each layer's attention matrix (memory: layers·n² per sequence).
        engine: "torch" (batched torch, any rule, CPU or CUDA, differentiable), "compiled" (the numba
            kernel: hardmax, float32/float64 CPU, no gradients or attention matrices; the same
            trajectory, 3-4x faster), or "auto" (the kernel wherever it applies).
        chunk_size: sequences processed together by the torch engine; chunks are formed from sequences
            with similar numbers of distinct tokens so the working set stays in cache.
        save: what to keep, as `solve` spells it: `Save()` (every layer), `Save(every=k)`, `Save.final()`, with
            `attention=True` for the attention matrices; it replaces store= and keep_attention= (give one
            spelling, not both).

    Returns:
        `Trajectory` with `.tokens` of shape (stored layers, *tokens.shape).

    Gradients: when tokens, α or A require grad (and grad mode is on), the layers run as the reference
    loop of `attention_step` on the torch engine, so gradients are those of that loop (hardmax:
    exact where the attention sets do not change). Hardmax is run scale-free: a review whose largest
    coordinate is beyond 2^±20 is computed scaled by an exact power of two.

    Raises:
        ValueError: on wrong shapes, a pair mask, NaN/inf tokens, a dtype that cannot resolve ties, non-SPD or wrongly
            sized A, α ≤ 0, negative layers, an unknown rule, engine or store, softmax scores that
            overflow, or engine="compiled" where the kernel does not apply.

    Paper: Alcalde, Fantuzzi, Zuazua, "Clustering in pure-attention hardmax transformers", eq. (1.1).

    Example: the four corners of a square lead; the two tokens tied between two corners go to the
    projections of the origin onto the vertical sides.

    >>> import torch, hardmax
    >>> tokens = torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0], [-0.5, 0]], dtype=torch.float64)
    >>> run = hardmax.simulate(tokens, alpha=0.5, layers=30)
    >>> run.tokens.shape
    torch.Size([31, 6, 2])
    >>> run.final[4:].round(decimals=4).tolist()
    [[1.0, 0.0], [-1.0, 0.0]]
    """
    if save is not None:
        if not isinstance(save, Save):
            raise ValueError(f"save must be a hardmax.dynamics.Save, got {type(save).__name__}")
        if not (isinstance(store, str) and store == "all") or keep_attention:
            raise ValueError("give save=Save(...) or store=/keep_attention=, not both")
        store, keep_attention = save.store(), save.attention
    z = as_floating(tokens, "tokens")
    if z.dim() not in (2, 3):
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d), got {tuple(z.shape)}")
    if z.shape[-1] == 0 or z.shape[-2] == 0:  # a batch of no sequences (batch = 0) is a valid empty run
        raise ValueError(f"tokens must have at least one token of dimension ≥ 1, got {tuple(z.shape)}")
    if isinstance(layers, bool) or not isinstance(layers, int | np.integer) or layers < 0:
        raise ValueError(f"layers must be an integer ≥ 0, got {layers!r}")
    if layers > MAX_STEPS:
        raise ValueError(f"layers = {int(layers):,} is more than the {MAX_STEPS:,} a run takes")
    layers = int(layers)
    if isinstance(rule, type) or not isinstance(rule, AttentionRule):
        raise ValueError("rule must be an attention rule such as hardmax.dynamics.Hardmax() or "
                         f"Softmax(beta=...), got {rule!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer ≥ 1, got {chunk_size!r}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    single = z.dim() == 2
    batch, n, d = (1, *z.shape) if single else z.shape
    torch_path = engine == "torch" or bool(_compiled_unusable(z, rule, keep_attention, False))
    require_memory(simulation_bytes(batch, n, d, layers, _stored_count(store, layers), z.element_size(),
                                    keep_attention=keep_attention, torch_engine=torch_path, chunk_size=int(chunk_size)),
                   f"simulate(layers={layers:,}) of tokens of shape {tuple(z.shape)} ({z.dtype})", device=z.device)
    stored = _stored_layers(store, layers)
    batched = (z.unsqueeze(0) if single else z).contiguous()  # NumPy views, transposes, Fortran order
    A_t = validate_A(A, d, z.dtype, z.device)
    alphas = validate_alpha(alpha, layers, z.dtype, z.device)
    m_t = validate_mask(mask, single, batch, n, z.device)
    if batch == 0:
        return Trajectory(tokens=z.new_empty(len(stored), 0, n, d), alpha=alphas, A=A_t, rule=rule, mask=m_t,
                          stored=stored, attention=z.new_empty(layers, 0, n, n) if keep_attention else None)
    needs_grad = torch.is_grad_enabled() and any(x.requires_grad for x in (batched, alphas, A_t))
    why_not = _compiled_unusable(z, rule, keep_attention, needs_grad)
    if engine == "compiled" and why_not:
        raise ValueError(f"engine='compiled' cannot run this simulation: {why_not}; use engine='torch'")
    hard = isinstance(rule, Hardmax)
    identity = not A_t.requires_grad and torch.equal(A_t, torch.eye(d, dtype=z.dtype, device=z.device))
    A_used = None if identity else A_t
    run = _Engine(rule, alphas, _power_of_two(A_used) if hard else A_used, keep_attention=keep_attention,
                  chunk_size=int(chunk_size))
    attention = None
    if not needs_grad and engine != "torch" and not why_not:
        # The kernel measures each review's peak coordinate in its own first pass (no extra pass over the
        # tokens); the rare review beyond 2^±SAFE_EXPONENT is then run again, scaled.
        with torch.no_grad():
            out, peak = run.compiled(batched, m_t, stored)
            scale = _review_scales(_finite(peak))
            if scale is not None:
                rows = scale.nonzero().squeeze(1)
                out[:, rows], _ = _scaled(lambda x: run.compiled(x, m_t[rows], stored), batched[rows], m_t[rows],
                                          scale[rows], stored)
    else:
        peak = _finite(_peaks(batched, m_t))
        if not hard:
            check_score_range(batched, m_t, A_t, rule)
        if needs_grad:
            path, attention = _differentiable(batched, m_t, alphas, A_used, rule, keep_attention)
            out = path[list(stored)] if len(stored) < layers + 1 else path
        else:
            with torch.no_grad():
                scale = _review_scales(peak) if hard else None
                if scale is None:
                    out, attention = run.stored(batched, m_t, stored)
                else:
                    out, attention = _scaled(lambda x: run.stored(x, m_t, stored), batched, m_t, scale, stored)
    if not hard:  # hardmax moves to convex combinations (finite); another rule may overflow after layer 0
        _require_finite(out, stored)
    if single:
        out, m_t = out[:, 0], m_t[0]
        attention = attention[:, 0] if attention is not None else None
    return Trajectory(tokens=out, alpha=alphas, A=A_t, rule=rule, mask=m_t, stored=stored, attention=attention)


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


def _stored_count(store, layers: int) -> int:
    """len(_stored_layers(store, layers)), without building it; ValueError for a bad `store`."""
    if isinstance(store, str) and store == "all":
        return layers + 1
    if isinstance(store, str) and store == "final":
        return 2 if layers else 1
    if isinstance(store, int | np.integer) and not isinstance(store, bool) and store >= 1:
        return layers // int(store) + 1 + (layers % int(store) != 0)
    raise ValueError(f"store must be 'all', 'final' or an integer k ≥ 1 (every k-th layer), got {store!r}")


def _stored_layers(store, layers: int) -> tuple[int, ...]:
    if store == "all":
        return tuple(range(layers + 1))
    if store == "final":
        return (0, layers) if layers else (0,)
    if isinstance(store, int | np.integer) and not isinstance(store, bool) and store >= 1:
        return tuple(sorted({*range(0, layers + 1, int(store)), layers}))
    raise ValueError(f"store must be 'all', 'final' or an integer k ≥ 1 (every k-th layer), got {store!r}")


def check_score_range(z: Tensor, mask: Tensor, A: Tensor | None, rule: AttentionRule) -> None:
    """Exponential rules are not scale-free: refuse tokens whose scores β⟨A z_i, z_j⟩ overflow the dtype.

    Softmax subtracts each row's maximum, so its scores need only be finite (< max/4); the unnormalised weights
    e^{β s} themselves must be finite (β s < log max). A: (d, d), (batch, d, d) or None (the identity)."""
    beta = getattr(rule, "beta", None)
    if beta is None:
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
        # (the kernel serialises its parallel calls itself: `kernel.KERNEL_LOCK`)
        done = _kernel.hardmax_trajectory(tokens_np, mask.contiguous().numpy(),
                                          None if self.A is None else self.A.detach().numpy(),
                                          (self.alphas / (1 + self.alphas)).numpy(),
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
            gammas, present = self.alphas / (1 + self.alphas), w > 0
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
                    path[k + 1] = move(path[k], target, gammas[k], present)
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


def _compiled_unusable(z: Tensor, rule: AttentionRule, keep_attention: bool, needs_grad: bool) -> str:
    """Why the compiled kernel cannot run this simulation ("" when it can)."""
    if not isinstance(rule, Hardmax):
        return "it runs hardmax attention only"
    if keep_attention:
        return "it does not return attention matrices"
    if needs_grad:
        return "it does not compute gradients"
    if z.device.type != "cpu":
        return f"it runs on the CPU, the tokens are on {z.device}"
    if z.dtype not in (torch.float32, torch.float64):
        return f"it runs float32 and float64, the tokens are {z.dtype}"
    return ""


def _chunks_by_size(counts: Tensor, chunk_size: int) -> list[Tensor]:
    """Split sequence indices into chunks of ≤ chunk_size with similar distinct-token counts."""
    order = torch.argsort(counts, stable=True)
    return list(torch.split(order, max(1, chunk_size)))
