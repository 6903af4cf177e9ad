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

Settings: a block's are `CrateBlocks` (heads, head_dim, beta, mode, step, ista, eta, lam); the classifier's
(vocabulary, d, depth, padding id, embedding scale) are `ModelConfig`'s, whose `crate` field holds the
blocks' (both in the torch-free `hardmax.models.config`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hardmax.dynamics import AttentionRule, deduplicate
from hardmax.models.base import WordClassifier
from hardmax.models.config import CrateBlocks, ModelConfig

__all__ = ["CrateBlock", "CrateBlocks", "CrateClassifier", "CrateTrace"]


class CrateBlock(nn.Module):
    """One CRATE block: MSSA (compression against the subspaces U_k) then one ISTA step (sparsification).

    ``CrateBlock(d, settings)``: a block on tokens in R^d with the `CrateBlocks` settings (mode None resolved
    for d). Call: ``block(z, multiplicity, rule) -> (z', z'')`` with z (batch, m, d), multiplicity (batch, m)
    (0 = absent token, e.g. padding) and a `hardmax.dynamics` rule (`Softmax(β)` or `Hardmax()`).

    Paper: Yu et al. 2023 (CRATE), Section 2.3 (MSSA, eq. (10)) and 2.4 (ISTA, eq. (12)).
    """

    def __init__(self, d: int, config: CrateBlocks):
        super().__init__()
        self.config = config = config.at_width(d)
        self.d, self.p = d, config.subspace_dim(d)
        K, p = config.heads, self.p
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
        K, p = self.config.heads, self.p
        return self.U.reshape(self.d, K, p).permute(1, 0, 2)

    def mssa(self, z: Tensor, multiplicity: Tensor, rule) -> Tensor:
        """[SSA_1 … SSA_K] (batch, m, K·p): each head's rule applied to its projections z U_k."""
        batch, m, _ = z.shape
        K, p = self.config.heads, self.p
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

    ``CrateClassifier(config)`` with a `ModelConfig` whose `crate` holds the blocks' settings (`CrateBlocks`);
    the classifier's own (vocabulary, d, `layers` blocks, padding id, embedding scale) are the config's.
    The call interface of `HardmaxClassifier` (`WordClassifier`): ``model(ids, mask, rule)``
    → logits (batch,), ``.trace(...)``, ``.config``, ``.embedding``, ``.decoder``, ``.alpha``.
    Repeated words are merged into one token with a multiplicity before the first block: every part of
    a block acts on a token alone except attention, where the multiplicity is exact for both rules.

    Paper: Yu et al. 2023 (CRATE), Section 2.5 (the architecture), with a mean over tokens in place of
    the class token.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig) or config.crate is None:
            raise ValueError("CrateClassifier needs a ModelConfig with crate=CrateBlocks(...), got "
                             + ("the hardmax layer (crate=None)" if isinstance(config, ModelConfig)
                                else type(config).__name__))
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d)
        nn.init.normal_(self.embedding.weight, std=config.embedding_std)
        self.blocks = nn.ModuleList(CrateBlock(config.d, config.blocks) for _ in range(config.layers))
        self.norm = nn.LayerNorm(config.d) if config.blocks.mode == "reference" else None
        self.decoder = nn.Linear(config.d, 1 if config.classes == 2 else config.classes)

    @property
    def alpha(self) -> Tensor:
        """α = κ/(1 − κ) of the faithful MSSA step, what the training history records as α (0-dim)."""
        kappa = self.config.blocks.step
        return torch.tensor(kappa / (1 - kappa))

    @property
    def inverse_temperature(self) -> float:
        """β of the heads' training softmax."""
        return self.config.blocks.inverse_temperature(self.config.d)

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
