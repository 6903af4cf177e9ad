"""CRATE blocks (Yu et al., "White-box transformers via sparse rate reduction", NeurIPS 2023) and a
sentiment classifier built from them, with the call interface of `HardmaxClassifier`.

One block, on tokens z_i ∈ R^d (rows), with K subspaces U_k ∈ R^{d×p}:

    MSSA:  w_i^k = U_kᵀ z_i,  SSA_k(z)_i = Σ_j P^k_ij w_j^k,  P^k = rule(w^k)   (Q = K = V = U_k)
           reference: z' = z + Linear([SSA_1 … SSA_K](LN z))      (the authors' code: pre-LayerNorm,
                                                                    untied output projection, residual)
           faithful:  z' = (1 − κ) z + κ Σ_k U_k SSA_k(z)          (CRATE eq. (10): a gradient step of
                                                                    size κ·p/(Nε²) on R^c(Z | U), output
                                                                    tied to the U_k, no normalisation)
    ISTA:  z'' = ReLU(x + η Dᵀ(x − D x) − ηλ),  x = LN(z') (reference) or z' (faithful), D ∈ R^{d×d}

The ISTA step is the one of the reference code (`FeedForward` in CRATE's model/crate.py): one proximal
gradient step on λ‖a‖₁ + ½‖x − D a‖² started at a = x, non-negative soft threshold, step η; η = 0.1 and
λ = 0.1 are that code's defaults (the paper's eq. (12) writes the same step; the later book's version
scales and signs the threshold differently, which is not what is used here). D is initialised as in the
reference code (Kaiming uniform).

The attention rule of a head is a `hardmax.dynamics` rule (`Softmax(β)` for training, `Hardmax()` for
the exact limit), applied to the projected tokens, so that the bridge to the paper's layer (1.1) is
exact: one head, U = I, no ISTA, faithful mode and hardmax give z + κ(mean_{j∈C_i} z_j − z_i), which is
`hardmax.dynamics.attention_step` with α = κ/(1 − κ) and A = I (tested).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hardmax.dynamics import AttentionRule, deduplicate
from hardmax.models.base import WordClassifier

__all__ = ["CrateBlock", "CrateClassifier", "CrateConfig", "CrateTrace"]

@dataclass(frozen=True, kw_only=True)
class CrateConfig:
    """Configuration of `CrateBlock` and `CrateClassifier` (defaults: the authors' reference code)."""

    vocab_size: int = 2  # number of word ids, PAD and UNK included (classifier only)
    d: int = 16  # token dimension
    layers: int = 8  # CRATE blocks, each with its own parameters (CRATE does not share weights)
    heads: int = 4  # K, number of subspaces
    head_dim: int | None = None  # p, dimension of each subspace; None = d // heads (the reference's choice)
    beta: float | None = None  # inverse temperature of the MSSA softmax; None = 1/√p (reference: dim_head**-0.5)
    mode: Literal["reference", "faithful"] = "reference"  # authors' code, or the derivation (see module doc)
    step: float = 0.5  # κ of the faithful mode, in (0, 1): z' = (1 − κ) z + κ MSSA(z); α = κ/(1 − κ) = 1
    ista: bool = True  # apply the ISTA step after MSSA
    eta: float = 0.1  # ISTA step size η (reference code: step_size = 0.1)
    lam: float = 0.1  # ISTA sparsity weight λ (reference code: lambd = 0.1)
    pad_id: int = 0  # id of the padding token (classifier only)
    embedding_std: float = 1.0  # N(0, std²) initialisation of the embedding (classifier only)

    def __post_init__(self):
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be ≥ 2 (PAD and UNK), got {self.vocab_size}")
        if self.d < 1 or self.layers < 0 or self.heads < 1:
            raise ValueError(f"need d ≥ 1, layers ≥ 0, heads ≥ 1, got d={self.d}, layers={self.layers}, "
                             f"heads={self.heads}")
        if self.head_dim is None and self.d % self.heads:
            raise ValueError(f"d = {self.d} is not divisible by heads = {self.heads}; give head_dim")
        if self.p < 1:
            raise ValueError(f"head_dim must be ≥ 1, got {self.p}")
        if self.beta is not None and not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta must be finite and > 0, got {self.beta}")
        if self.mode not in ("reference", "faithful"):
            raise ValueError(f"mode must be 'reference' or 'faithful', got {self.mode!r}")
        if not 0 < self.step < 1:
            raise ValueError(f"step κ must be in (0, 1), got {self.step}")
        if not (self.eta > 0 and math.isfinite(self.eta)) or not (self.lam >= 0 and math.isfinite(self.lam)):
            raise ValueError(f"need eta > 0 and lam ≥ 0, got eta={self.eta}, lam={self.lam}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary of size {self.vocab_size}")
        if not (self.embedding_std > 0 and math.isfinite(self.embedding_std)):
            raise ValueError(f"embedding_std must be finite and > 0, got {self.embedding_std}")

    @property
    def p(self) -> int:
        """Dimension of each subspace."""
        return self.d // self.heads if self.head_dim is None else self.head_dim

    @property
    def paper_padding(self) -> bool:
        """Always False: padding never attends, is attended or pooled (what `hardmax.training` asks a model)."""
        return False

    @property
    def inverse_temperature(self) -> float:
        """β of the MSSA softmax."""
        return 1 / math.sqrt(self.p) if self.beta is None else float(self.beta)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_model_config(cls, config) -> CrateConfig:
        """The CRATE classifier `hardmax train --layer crate` builds from a `ModelConfig`: its vocabulary, d,
        depth, padding id and embedding scale, with K = `crate_heads` heads (default one) of dimension p = d / K
        and the reference code's defaults for the rest. For d ≤ 2 the faithful mode is used: a LayerNorm in R²
        sends every vector to ±(1, −1) (times its gain), so the reference mode would see every token as one of
        two points. The hardmax layer's settings (α, A, β) do not apply; the authors' padding behaviour
        (`paper_padding`) and a learned A are refused."""
        if config.layer != "crate":
            raise ValueError(f"CRATE blocks are built from a ModelConfig with layer='crate', got {config.layer!r}")
        if config.paper_padding or config.learn_A:
            raise ValueError("--layer crate does not support --paper-padding or --learn-A")
        return cls(vocab_size=config.vocab_size, d=config.d, layers=config.layers, heads=config.crate_heads,
                   pad_id=config.pad_id, embedding_std=config.embedding_std,
                   mode="faithful" if config.d <= 2 else "reference")


class CrateBlock(nn.Module):
    """One CRATE block: MSSA (compression against the subspaces U_k) then one ISTA step (sparsification).

    Call: ``block(z, multiplicity, rule) -> CrateStep`` with z (batch, m, d), multiplicity (batch, m)
    (0 = absent token, e.g. padding) and a `hardmax.dynamics` rule (`Softmax(β)` or `Hardmax()`).

    Paper: Yu et al. 2023 (CRATE), Section 2.3 (MSSA, eq. (10)) and 2.4 (ISTA, eq. (12)).
    """

    def __init__(self, config: CrateConfig):
        super().__init__()
        self.config = config
        d, K, p = config.d, config.heads, config.p
        # U = [U_1 … U_K] (d, K·p): the reference's bias-free qkv Linear, in column form.
        self.U = nn.Parameter(torch.empty(d, K * p))
        nn.init.kaiming_uniform_(self.U.T, a=math.sqrt(5))  # nn.Linear's default initialisation
        if config.mode == "reference":
            self.norm_attention = nn.LayerNorm(d)
            self.norm_ista = nn.LayerNorm(d)
            self.out = nn.Linear(K * p, d)
        else:
            self.register_module("norm_attention", None)
            self.register_module("norm_ista", None)
            self.register_module("out", None)
        if config.ista:
            self.D = nn.Parameter(torch.empty(d, d))
            nn.init.kaiming_uniform_(self.D)  # as the reference code
        else:
            self.register_parameter("D", None)

    @property
    def subspaces(self) -> Tensor:
        """(K, d, p) the bases U_k."""
        K, p = self.config.heads, self.config.p
        return self.U.reshape(self.config.d, K, p).permute(1, 0, 2)

    def mssa(self, z: Tensor, multiplicity: Tensor, rule) -> Tensor:
        """[SSA_1 … SSA_K] (batch, m, K·p): each head's rule applied to its projections z U_k."""
        batch, m, _ = z.shape
        K, p = self.config.heads, self.config.p
        w = (z @ self.U).reshape(batch, m, K, p).transpose(1, 2).reshape(batch * K, m, p)
        heads = rule.targets(w, multiplicity.repeat_interleave(K, dim=0), None)  # heads folded into the batch
        return heads.reshape(batch, K, m, p).transpose(1, 2).reshape(batch, m, K * p)

    def compress(self, z: Tensor, multiplicity: Tensor, rule) -> Tensor:
        """The MSSA half-step z → z' (batch, m, d)."""
        if self.config.mode == "reference":
            return z + self.out(self.mssa(self.norm_attention(z), multiplicity, rule))
        kappa = self.config.step
        return (1 - kappa) * z + kappa * (self.mssa(z, multiplicity, rule) @ self.U.T)

    def sparsify(self, z: Tensor) -> Tensor:
        """The ISTA step z' → ReLU(x + η Dᵀ(x − D x) − ηλ), x = LN(z') (reference) or z' (faithful)."""
        if self.D is None:
            return z
        x = self.norm_ista(z) if self.norm_ista is not None else z
        eta, lam = self.config.eta, self.config.lam
        residual = x - x @ self.D.T  # x − D x, rows
        return F.relu(x + eta * (residual @ self.D) - eta * lam)

    def forward(self, z: Tensor, multiplicity: Tensor, rule) -> tuple[Tensor, Tensor]:
        """(z', z''): the tokens after MSSA and after ISTA, both (batch, m, d)."""
        half = self.compress(z, multiplicity, rule)
        return half, self.sparsify(half)


@dataclass(frozen=True)
class CrateTrace:
    """Everything `CrateClassifier.trace` computed, on the distinct words of each review.

    Attributes:
        tokens: (layers + 1, batch, m, d) the embedding and the output of every block.
        compressed: (layers, batch, m, d) each block's tokens after MSSA, before ISTA.
        multiplicity: (batch, m) copies of each distinct word among the real tokens (0 = absent).
        ids: (batch, m) word ids. index: (batch, n) position of each input token among the distinct ones.
        pooled: (batch, d) input of the decoder. logits: (batch,).
    """

    tokens: Tensor
    compressed: Tensor
    multiplicity: Tensor
    ids: Tensor
    index: Tensor
    pooled: Tensor
    logits: Tensor


class CrateClassifier(WordClassifier):
    """Embedding → `layers` CRATE blocks → mean over real tokens → (LayerNorm, reference mode) → linear.

    The call interface of `HardmaxClassifier` (`WordClassifier`): ``model(ids, mask, rule)``
    → logits (batch,), ``.trace(...)``, ``.config``, ``.embedding``, ``.decoder``, ``.alpha``.
    Repeated words are merged into one token with a multiplicity before the first block: every part of
    a block acts on a token alone except attention, where the multiplicity is exact for both rules.

    Paper: Yu et al. 2023 (CRATE), Section 2.5 (the architecture), with a mean over tokens in place of
    the class token.
    """

    def __init__(self, config: CrateConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d)
        nn.init.normal_(self.embedding.weight, std=config.embedding_std)
        self.blocks = nn.ModuleList(CrateBlock(config) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.d) if config.mode == "reference" else None
        self.decoder = nn.Linear(config.d, 1)

    @property
    def alpha(self) -> Tensor:
        """α = κ/(1 − κ) of the faithful MSSA step, what the training history records as α (0-dim)."""
        kappa = self.config.step
        return torch.tensor(kappa / (1 - kappa))

    @property
    def inverse_temperature(self) -> float:
        """β of the heads' training softmax."""
        return self.config.inverse_temperature

    def trace(self, ids: Tensor, mask: Tensor | None = None, rule: AttentionRule | None = None) -> CrateTrace:
        """Run the classifier and keep every block's tokens (see `CrateTrace`); `rule` as in `forward`."""
        mask = self.check_ids(ids, mask)
        dedup = deduplicate(ids.unsqueeze(-1), mask)
        distinct_ids = dedup.tokens.squeeze(-1)
        multiplicity = dedup.multiplicity.to(self.embedding.weight.dtype)
        rule = self.rule_of(rule)
        z = self.embedding(distinct_ids)
        path, halves = [z], []
        for block in self.blocks:
            half, z = block(z, multiplicity, rule)
            halves.append(half)
            path.append(z)
        pooled = (multiplicity.unsqueeze(-1) * z).sum(1) / multiplicity.sum(1, keepdim=True)
        features = pooled if self.norm is None else self.norm(pooled)
        logits = self.decoder(features).squeeze(-1)
        compressed = torch.stack(halves) if halves else z.new_zeros((0, *z.shape))
        return CrateTrace(tokens=torch.stack(path), compressed=compressed, multiplicity=multiplicity,
                          ids=distinct_ids, index=dedup.index, pooled=pooled, logits=logits)

    def forward(self, ids: Tensor, mask: Tensor | None = None, rule: AttentionRule | None = None) -> Tensor:
        """Logits (batch,) for ids (batch, n) and mask (batch, n) (True = real token); rule: the heads' attention
        (None: the training softmax `self.softmax`; `Hardmax()`: exact hardmax)."""
        return self.trace(ids, mask, rule).logits
