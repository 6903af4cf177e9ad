"""Attention rules: small immutable objects that say how a token weighs the others.

A rule maps tokens (batch, m, d), their multiplicities (batch, m) and the score matrix A to the
attention matrix P (batch, m, m) and the targets Σ_j P_ij z_j (batch, m, d). `attention_step` and
`simulate` take a rule object, so a new rule is a new class with these two methods (see
`AttentionRule` and CONTRIBUTING.md); nothing else in the engine has to change.

    Hardmax(tie_rtol):  P_ij = w_j 1[j ∈ C_i] / Σ_{l ∈ C_i} w_l,  C_i = argmax_j ⟨A z_i, z_j⟩, every
                        maximiser kept, ties decided by rule (★) of `ties`            (paper, eq. 1.1)
    Softmax(beta):      P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l exp(β⟨A z_i, z_l⟩)     (paper, Sec. 4)
    Localmax(theta):    P_ij = w_j 1[s_ij ≥ max_l s_il − θ] / Σ_l w_l 1[s_il ≥ max s_i − θ], s_ij = ⟨A z_i, z_j⟩:
                        uniform over the tokens within θ of the best score (Cimetière, Chiri, Gharesifard
                        2025, arXiv 2509.15958: between softmax and hardmax; θ → 0 is hardmax)
    Unnormalised(beta): P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l                      (USA: rows do not sum to 1;
                        Geshkovski, Letrouit, Polyanskiy, Rigollet 2023, the gradient flow of E_β on the sphere)

w_j is the multiplicity of token j (identical tokens merged into one; 0 = absent, e.g. padding).
Rows of absent tokens are 0. The scores are s_ij = z_iᵀ A z_j = ⟨z_i, A z_j⟩, the paper's ⟨A z_i, z_j⟩ for the
symmetric A it assumes (hardmax requires one; the other rules also take a non-symmetric A, e.g. QᵀK).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import Tensor

from hardmax.dynamics.select import hardmax_sets, hardmax_targets
from hardmax.dynamics.ties import default_tie_rtol

__all__ = ["RULES", "AttentionRule", "Hardmax", "Localmax", "Softmax", "Unnormalised", "rule_from_dict", "rule_to_dict"]


@runtime_checkable
class AttentionRule(Protocol):
    """What `attention_step` and `simulate` need from a rule."""

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, m) attention matrix P; rows of absent tokens are 0."""
        ...

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, d) the targets Σ_j P_ij z_j (rows of absent tokens: anything finite)."""
        ...


def _absent_rows_zero(p: Tensor, multiplicity: Tensor) -> Tensor:
    return torch.where((multiplicity > 0).unsqueeze(-1), p, torch.zeros((), dtype=p.dtype, device=p.device))


@dataclass(frozen=True)
class Hardmax:
    """Hardmax attention: each token attends uniformly (with multiplicity) to its maximisers C_i.

    Args:
        tie_rtol: relative tolerance of the tie rule (★) in [0, 1); None = `default_tie_rtol` of the
            tokens' dtype (64 eps). Identical tokens are always tied exactly.
    """

    tie_rtol: float | None = None

    def __post_init__(self):
        t = self.tie_rtol
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t < 1):
            raise ValueError(f"tie_rtol must be a number in [0, 1) or None, got {t!r}")

    def rtol(self, dtype: torch.dtype) -> float:
        """The tolerance used for tokens of this dtype."""
        return default_tie_rtol(dtype) if self.tie_rtol is None else float(self.tie_rtol)

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, m) hardmax P: P_ij = w_j 1[j ∈ C_i] / Σ_{l ∈ C_i} w_l, C_i the maximisers by rule (★).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        Rows of absent tokens (w = 0) are 0.
        """
        p = hardmax_sets(tokens, multiplicity, A, self.rtol(tokens.dtype)) * multiplicity.unsqueeze(-2)
        p = p / p.sum(-1, keepdim=True).clamp(min=torch.finfo(tokens.dtype).tiny)
        return _absent_rows_zero(p, multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j: the w-weighted mean of C_i (the maximiser itself when it is alone).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        """
        return hardmax_targets(tokens, multiplicity, A, self.rtol(tokens.dtype))


@dataclass(frozen=True)
class Softmax:
    """Softmax attention at inverse temperature β (the paper trains with β = 1000).

    Args:
        beta: inverse temperature, finite and > 0. As β → ∞, softmax tends to `Hardmax`.
    """

    beta: float

    def __post_init__(self):
        b = self.beta
        if isinstance(b, bool) or not isinstance(b, int | float) or not (math.isfinite(b) and b > 0):
            raise ValueError(f"softmax attention needs a finite inverse temperature beta > 0, got {b!r}")

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, m) softmax P: P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l exp(β⟨A z_i, z_l⟩).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        Absent keys get weight 0; rows of absent tokens are 0.
        """
        queries = tokens if A is None else tokens @ A
        logits = float(self.beta) * (queries @ tokens.transpose(-1, -2)) + _key_bias(multiplicity)
        return _absent_rows_zero(torch.softmax(logits, dim=-1), multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j, by PyTorch's fused attention (P is not formed).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        """
        queries = tokens if A is None else tokens @ A
        # log w_j turns a merged token back into its w_j copies; log 0 = -inf removes absent keys.
        # PyTorch's fused attention computes softmax(β q kᵀ + bias) v without materialising it twice,
        # forward and backward (several times faster than the three-op version on CPU).
        return F.scaled_dot_product_attention(
            queries.unsqueeze(1), tokens.unsqueeze(1), tokens.unsqueeze(1),
            attn_mask=_key_bias(multiplicity).unsqueeze(1), scale=float(self.beta),
        ).squeeze(1)


def _beta(b, what: str) -> None:
    if isinstance(b, bool) or not isinstance(b, int | float) or not (math.isfinite(b) and b >= 0):
        raise ValueError(f"{what} needs a finite inverse temperature beta ≥ 0, got {b!r}")


def _queries(tokens: Tensor, A: Tensor | None) -> Tensor:
    return tokens if A is None else tokens @ A


@dataclass(frozen=True)
class Localmax:
    """Localmax attention: each token attends uniformly (with multiplicity) to every token whose score is
    within θ of its best, C_i^θ = {j : ⟨A z_i, z_j⟩ ≥ max_l ⟨A z_i, z_l⟩ − θ}.

    Between softmax (every token weighs) and hardmax (θ = 0: the maximisers only; use `Hardmax` there, whose
    tie rule makes θ = 0 exact). The weights are a convex combination, so the convex hull of the tokens
    shrinks layer by layer and converges to a polytope (Cimetière, Chiri, Gharesifard 2025,
    arXiv 2509.15958; `hardmax.theory.check_flow` measures it). A need not be symmetric.

    Args:
        theta: the alignment sensitivity θ > 0, in units of the scores.
    """

    theta: float

    def __post_init__(self):
        t = self.theta
        if isinstance(t, bool) or not isinstance(t, int | float) or not (math.isfinite(t) and t > 0):
            raise ValueError(f"localmax attention needs a finite alignment sensitivity theta > 0, got {t!r} "
                             "(theta = 0 is Hardmax())")

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, m) localmax P: P_ij = w_j 1[j ∈ C_i^θ] / Σ_{l ∈ C_i^θ} w_l.

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        Rows of absent tokens (w = 0) are 0.
        """
        present = multiplicity > 0
        s = (_queries(tokens, A) @ tokens.transpose(-1, -2)).masked_fill(~present.unsqueeze(-2), -math.inf)
        near = s >= s.amax(-1, keepdim=True) - float(self.theta)
        p = near.to(tokens.dtype) * multiplicity.unsqueeze(-2)
        p = p / p.sum(-1, keepdim=True).clamp(min=torch.finfo(tokens.dtype).tiny)
        return _absent_rows_zero(p, multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j, P from `matrix` (same arguments)."""
        return self.matrix(tokens, multiplicity, A) @ tokens


@dataclass(frozen=True)
class Unnormalised:
    """Unnormalised softmax weights (the USA model): P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l.

    Rows do not sum to 1: on the sphere, ẋ_i = P⊥_{x_i}((1/n) Σ_j e^{β⟨x_i, x_j⟩} x_j) is the gradient
    ascent of E_β = (1/(2βn²)) Σ_ij e^{β⟨x_i, x_j⟩} (Geshkovski, Letrouit, Polyanskiy, Rigollet,
    "A mathematical perspective on Transformers"). β = 0 is allowed (P_ij = w_j / n).

    Args:
        beta: inverse temperature β ≥ 0, finite.
    """

    beta: float

    def __post_init__(self):
        _beta(self.beta, "unnormalised attention")

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, m) P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l: rows do not sum to 1.

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        Rows of absent tokens (w = 0) are 0.
        """
        logits = float(self.beta) * (_queries(tokens, A) @ tokens.transpose(-1, -2)) + _key_bias(multiplicity)
        p = torch.exp(logits) / multiplicity.sum(-1).clamp(min=1).view(*multiplicity.shape[:-1], 1, 1)
        return _absent_rows_zero(p, multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j, P from `matrix` (same arguments)."""
        return self.matrix(tokens, multiplicity, A) @ tokens


def _key_bias(multiplicity: Tensor) -> Tensor:
    """(batch, 1, m) additive bias: log-multiplicity, -inf for absent tokens (multiplicity 0)."""
    return torch.log(multiplicity).unsqueeze(-2)


#: The rules by the name their JSON spelling uses: a new rule registers here (CONTRIBUTING.md).
RULES: dict[str, type] = {"hardmax": Hardmax, "softmax": Softmax, "localmax": Localmax, "unnormalised": Unnormalised}


def rule_to_dict(rule: AttentionRule) -> dict:
    """{"rule": name, **fields}: the JSON spelling of a registered rule (`rule_from_dict` reads it back)."""
    import dataclasses

    for name, cls in RULES.items():
        if type(rule) is cls:
            return {"rule": name, **dataclasses.asdict(rule)}
    raise ValueError(f"{type(rule).__name__} is not a registered rule ({', '.join(RULES)}): add it to RULES")


def rule_from_dict(record: dict) -> AttentionRule:
    """The rule a `rule_to_dict` record describes; ValueError for an unknown name or field."""
    fields = dict(record)
    name = fields.pop("rule", None)
    if name not in RULES:
        raise ValueError(f"unknown attention rule {name!r}; known: {', '.join(RULES)}")
    try:
        return RULES[name](**fields)
    except TypeError as e:
        raise ValueError(f"attention rule {name!r}: {e}") from None
