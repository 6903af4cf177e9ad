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
Rows of absent tokens are 0. Every method also takes an optional pair restriction `allowed` (batch or 1, m, m)
bool, allowed[i, j] = token i may attend to token j (`hardmax.dynamics.masks`: a causal mask, say): each rule is
then itself on the keys K_i = {j : allowed[i, j], w_j > 0} of row i, and a row with no key is 0 (never NaN).
The scores are s_ij = z_iᵀ A z_j = ⟨z_i, A z_j⟩, the paper's ⟨A z_i, z_j⟩ for the symmetric A it assumes (hardmax
requires one; the other rules also take a non-symmetric A, e.g. QᵀK).

What the checks need to know of a rule is declared on its class, never read from the class's name (`check_flow`,
`hardmax simulate` and the explorer ask these; a rule that declares nothing gets the defaults):

    row_stochastic: bool       every row of P (of a present token with a key) sums to 1, so each target is a convex
                               combination of the tokens: the nested-hull claim applies (default False)
    particle_model: str | None "SA" (softmax self-attention) or "USA" (its unnormalised variant): the particle model
                               of Geshkovski, Letrouit, Polyanskiy, Rigollet whose sphere claims (one cluster, the
                               energy E_β with the rule's `beta`) and, for "SA", the 2023 rescaled claims apply;
                               None (the default): neither
    parameters                 the rule's dataclass fields; those without a default are required (`rule_parameters`)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import Tensor

from hardmax.dynamics._engines.select import hardmax_sets, hardmax_targets

__all__ = ["RULES", "AttentionRule", "Hardmax", "Localmax", "Softmax", "Unnormalised", "default_tie_rtol",
           "particle_model", "row_stochastic", "rule_from_dict", "rule_parameters", "rule_to_dict"]

ParticleModel = Literal["SA", "USA"]


@runtime_checkable
class AttentionRule(Protocol):
    """What `attention_step` and `simulate` need from a rule."""

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, m, m) attention matrix P; rows of absent tokens are 0. `allowed` (optional: a rule without it
        runs token masks only; `Field.restricted` refuses it a pair mask): (batch or 1, m, m) bool, row i restricted
        to the keys j with allowed[i, j]; a row with no such present key is 0."""
        ...

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None,
                allowed: Tensor | None = None) -> Tensor:
        """(batch, m, d) the targets Σ_j P_ij z_j (rows of absent tokens, and of tokens with no allowed key:
        anything finite; they do not move)."""
        ...


def _restricted(logits: Tensor, allowed: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """(logits with −inf where allowed[i, j] is False, dead rows (batch, m, 1) bool): logits (batch, m, m) already
    −inf at absent keys; a row left with no finite logit (no allowed present key) is set to 0, so that nothing
    downstream is NaN (nor its gradient), and returned in `dead` for the caller to zero. allowed None: unchanged."""
    if allowed is None:
        return logits, None
    logits = logits.masked_fill(~allowed, -math.inf)
    dead = torch.isneginf(logits.amax(-1, keepdim=True))
    return logits.masked_fill(dead, 0.0), dead


def _zero(x: Tensor, dead: Tensor | None) -> Tensor:
    """x (batch, m, ·) with the rows `dead` (batch, m, 1) set to 0 (None: x itself)."""
    return x if dead is None else x.masked_fill(dead, 0.0)


def _absent_rows_zero(p: Tensor, multiplicity: Tensor) -> Tensor:
    return torch.where((multiplicity > 0).unsqueeze(-1), p, torch.zeros((), dtype=p.dtype, device=p.device))


def default_tie_rtol(dtype: torch.dtype) -> float:
    """The default `tie_rtol` of rule (★): 64 machine epsilons (float32: 7.6e-6, float64: 1.4e-14).

    Its right-hand side then bounds the rounding of a d-term dot product of the query with a difference
    of two tokens, with a margin; `Hardmax(tie_rtol=...)` overrides it (`Hardmax().rtol(dtype)` is this).
    """
    return 64.0 * torch.finfo(dtype).eps


@dataclass(frozen=True)
class Hardmax:
    """Hardmax attention: each token attends uniformly (with multiplicity) to its maximisers C_i.

    Args:
        tie_rtol: relative tolerance of the tie rule (★) in [0, 1); None = `default_tie_rtol` of the
            tokens' dtype (64 eps). Identical tokens are always tied exactly.
    """

    tie_rtol: float | None = None
    row_stochastic: ClassVar[bool] = True  # P_i is uniform over C_i: a convex combination
    particle_model: ClassVar[ParticleModel | None] = None

    def __post_init__(self):
        t = self.tie_rtol
        if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t < 1):
            raise ValueError(f"tie_rtol must be a number in [0, 1) or None, got {t!r}")

    def rtol(self, dtype: torch.dtype) -> float:
        """The tolerance used for tokens of this dtype."""
        return default_tie_rtol(dtype) if self.tie_rtol is None else float(self.tie_rtol)

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, m, m) hardmax P: P_ij = w_j 1[j ∈ C_i] / Σ_{l ∈ C_i} w_l, C_i the maximisers by rule (★).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        `allowed` (batch or 1, m, m) bool: C_i = argmax over the allowed keys, (★) among them only (None: all).
        Rows of absent tokens (w = 0), and of tokens with no allowed key, are 0.
        """
        p = hardmax_sets(tokens, multiplicity, A, self.rtol(tokens.dtype), allowed) * multiplicity.unsqueeze(-2)
        p = p / p.sum(-1, keepdim=True).clamp(min=torch.finfo(tokens.dtype).tiny)
        return _absent_rows_zero(p, multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None,
                allowed: Tensor | None = None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j: the w-weighted mean of C_i (the maximiser itself when it is alone).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity),
        `allowed` as in `matrix` (a token with no allowed key: its own position, so a layer leaves it in place).
        """
        return hardmax_targets(tokens, multiplicity, A, self.rtol(tokens.dtype), allowed)


@dataclass(frozen=True)
class Softmax:
    """Softmax attention at inverse temperature β (the paper trains with β = 1000).

    Args:
        beta: inverse temperature, finite and > 0. As β → ∞, softmax tends to `Hardmax`.
    """

    beta: float
    row_stochastic: ClassVar[bool] = True
    particle_model: ClassVar[ParticleModel | None] = "SA"  # SA of GLPR: the sphere and the 2023 rescaled claims

    def __post_init__(self):
        b = self.beta
        if isinstance(b, bool) or not isinstance(b, int | float) or not (math.isfinite(b) and b > 0):
            raise ValueError(f"softmax attention needs a finite inverse temperature beta > 0, got {b!r}")

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, m, m) softmax P: P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l exp(β⟨A z_i, z_l⟩).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        Absent keys get weight 0; rows of absent tokens are 0. `allowed` (batch or 1, m, m) bool: the sums run
        over the allowed keys only (None: all); a row with no allowed present key is 0.
        """
        queries = tokens if A is None else tokens @ A
        logits = float(self.beta) * (queries @ tokens.transpose(-1, -2)) + _key_bias(multiplicity)
        logits, dead = _restricted(logits, allowed)
        return _absent_rows_zero(_zero(torch.softmax(logits, dim=-1), dead), multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None,
                allowed: Tensor | None = None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j, by PyTorch's fused attention (P is not formed).

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity),
        `allowed` as in `matrix` (a row with no allowed key: 0).
        """
        queries = tokens if A is None else tokens @ A
        # log w_j turns a merged token back into its w_j copies; log 0 = -inf removes absent keys.
        # PyTorch's fused attention computes softmax(β q kᵀ + bias) v without materialising it twice,
        # forward and backward (several times faster than the three-op version on CPU).
        bias, dead = _key_bias(multiplicity), None
        if allowed is not None:  # one bias per pair: the key bias, −inf where i may not attend to j
            bias, dead = _restricted(bias.expand(*bias.shape[:-2], tokens.shape[-2], tokens.shape[-2]), allowed)
        return _zero(F.scaled_dot_product_attention(
            queries.unsqueeze(1), tokens.unsqueeze(1), tokens.unsqueeze(1),
            attn_mask=bias.unsqueeze(1), scale=float(self.beta),
        ).squeeze(1), dead)


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
    row_stochastic: ClassVar[bool] = True  # uniform over C_i^θ: a convex combination
    particle_model: ClassVar[ParticleModel | None] = None

    def __post_init__(self):
        t = self.theta
        if isinstance(t, bool) or not isinstance(t, int | float) or not (math.isfinite(t) and t > 0):
            raise ValueError(f"localmax attention needs a finite alignment sensitivity theta > 0, got {t!r} "
                             "(theta = 0 is Hardmax())")

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, m, m) localmax P: P_ij = w_j 1[j ∈ C_i^θ] / Σ_{l ∈ C_i^θ} w_l.

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        `allowed` (batch or 1, m, m) bool: C_i^θ among the allowed keys, within θ of their best (None: all).
        Rows of absent tokens (w = 0), and of tokens with no allowed key, are 0.
        """
        present = multiplicity > 0
        s = (_queries(tokens, A) @ tokens.transpose(-1, -2)).masked_fill(~present.unsqueeze(-2), -math.inf)
        s, dead = _restricted(s, allowed)
        near = s >= s.amax(-1, keepdim=True) - float(self.theta)
        p = near.to(tokens.dtype) * multiplicity.unsqueeze(-2)
        p = p / p.sum(-1, keepdim=True).clamp(min=torch.finfo(tokens.dtype).tiny)
        return _absent_rows_zero(_zero(p, dead), multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None,
                allowed: Tensor | None = None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j, P from `matrix` (same arguments)."""
        return self.matrix(tokens, multiplicity, A, allowed) @ tokens


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
    row_stochastic: ClassVar[bool] = False  # rows sum to (1/n) Σ_j w_j e^{β s_ij}, not 1
    particle_model: ClassVar[ParticleModel | None] = "USA"  # USA of GLPR: the sphere claims

    def __post_init__(self):
        _beta(self.beta, "unnormalised attention")

    def matrix(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None, allowed: Tensor | None = None) -> Tensor:
        """(batch, m, m) P_ij = w_j exp(β⟨A z_i, z_j⟩) / Σ_l w_l: rows do not sum to 1.

        `tokens` (batch, m, d), `multiplicity` w (batch, m), scores s_ij = z_iᵀ A z_j (A None: the identity).
        `allowed` (batch or 1, m, m) bool: P_ij = 1[allowed_ij] w_j e^{β s_ij} / Σ_l 1[allowed_il] w_l, the mean over
        the keys token i sees (None: all, the 1/n above). Rows of absent tokens (w = 0), and of tokens with no
        allowed key, are 0.
        """
        logits = float(self.beta) * (_queries(tokens, A) @ tokens.transpose(-1, -2)) + _key_bias(multiplicity)
        if allowed is None:
            count = multiplicity.sum(-1).view(*multiplicity.shape[:-1], 1, 1)
        else:  # Σ_l w_l over the keys row i may attend to (integers, exact in any order)
            count = (allowed.to(multiplicity.dtype) * multiplicity.unsqueeze(-2)).sum(-1, keepdim=True)
        logits, dead = _restricted(logits, allowed)
        p = torch.exp(logits) / count.clamp(min=1)
        return _absent_rows_zero(_zero(p, dead), multiplicity)

    def targets(self, tokens: Tensor, multiplicity: Tensor, A: Tensor | None,
                allowed: Tensor | None = None) -> Tensor:
        """(batch, m, d) targets Σ_j P_ij z_j, P from `matrix` (same arguments)."""
        return self.matrix(tokens, multiplicity, A, allowed) @ tokens


def _key_bias(multiplicity: Tensor) -> Tensor:
    """(batch, 1, m) additive bias: log-multiplicity, -inf for absent tokens (multiplicity 0)."""
    return torch.log(multiplicity).unsqueeze(-2)


#: The rules by the name their JSON spelling uses: a new rule registers here (CONTRIBUTING.md).
RULES: dict[str, type] = {"hardmax": Hardmax, "softmax": Softmax, "localmax": Localmax, "unnormalised": Unnormalised}


def row_stochastic(rule) -> bool:
    """Whether `rule` declares that its rows sum to 1 (a convex combination of the tokens); False if undeclared."""
    return bool(getattr(rule, "row_stochastic", False))


def particle_model(rule) -> ParticleModel | None:
    """The GLPR particle model `rule` declares ("SA", "USA"), or None (also when undeclared)."""
    model = getattr(rule, "particle_model", None)
    return model if model in ("SA", "USA") else None


def rule_parameters(rule: type | str) -> dict[str, bool]:
    """{field: required} of a rule class (or a name in `RULES`): its dataclass fields, in order, each True when it
    has no default (the caller must give it). ValueError for an unknown name."""
    cls = rule
    if isinstance(rule, str):
        if rule not in RULES:
            raise ValueError(f"unknown attention rule {rule!r}; known: {', '.join(RULES)}")
        cls = RULES[rule]
    if not dataclasses.is_dataclass(cls):
        return {}
    return {f.name: f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            for f in dataclasses.fields(cls) if f.init}


def rule_to_dict(rule: AttentionRule) -> dict:
    """{"rule": name, **fields}: the JSON spelling of a registered rule (`rule_from_dict` reads it back)."""
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
