"""The paper's pure-attention sentiment classifier, as a torch module.

    ids (batch, n) ─ embedding E (V, d) ─▶ z^0 ─ K × shared attention layer ─▶ z^K
        ─ mean over real tokens ─▶ z̄ (batch, d) ─ linear decoder ─▶ logit (batch,)

The attention layer IS `hardmax.dynamics.attention_step`: softmax at inverse temperature β for
training (the paper trains at temperature 1/β = 0.001) and exact hardmax for inference. Repeated
words are merged into one token with a multiplicity weight before the first layer, which is exact
for both attentions (a duplicated key enters softmax as w_j e^{β s_ij}) and makes reviews cheaper.
Data loading lives in `hardmax.data`, the training loop in `hardmax.training`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hardmax.dynamics import Attention, attention_step, deduplicate, hardmax_layers

__all__ = ["HardmaxClassifier", "ModelConfig", "ModelTrace"]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Configuration of `HardmaxClassifier` (defaults: the paper's d = 16 model)."""

    vocab_size: int  # number of word ids, PAD and UNK included
    d: int = 16  # token dimension (paper: 2, 4, 8, 16)
    layers: int = 8  # K, applications of the one shared attention layer
    alpha_init: float = 1.0  # initial α > 0; α = softplus(raw) stays positive during training
    learn_alpha: bool = True  # train α (the paper does)
    learn_A: bool = False  # A = I (paper), or a learnable SPD A = L Lᵀ + A_eps·I
    A_eps: float = 1e-3  # keeps a learnable A uniformly positive definite
    beta: float = 1000.0  # inverse temperature of the training softmax (paper: temperature 0.001)
    paper_padding: bool = False  # reproduce the authors' code: PAD tokens attend, are attended and pooled
    pad_id: int = 0  # id of the padding token
    embedding_std: float = 1.0  # N(0, std²) initialisation of the embedding

    def __post_init__(self):
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be ≥ 2 (PAD and UNK), got {self.vocab_size}")
        if self.d < 1 or self.layers < 0:
            raise ValueError(f"need d ≥ 1 and layers ≥ 0, got d={self.d}, layers={self.layers}")
        if not (self.alpha_init > 0 and math.isfinite(self.alpha_init)):
            raise ValueError(f"alpha_init must be finite and > 0, got {self.alpha_init}")
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError(f"beta must be finite and > 0, got {self.beta}")
        if self.A_eps <= 0:
            raise ValueError(f"A_eps must be > 0, got {self.A_eps}")
        if not (self.embedding_std > 0 and math.isfinite(self.embedding_std)):
            raise ValueError(f"embedding_std must be finite and > 0, got {self.embedding_std}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary of size {self.vocab_size}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ModelTrace:
    """Everything the classifier computed for a batch, on its distinct tokens.

    Attributes:
        ids: (batch, m) word id of each distinct token (PAD where unused).
        weights: (batch, m) multiplicity of each distinct token among real tokens (0 = absent).
        index: (batch, n) position in the distinct tokens of each input position.
        tokens: (layers + 1, batch, m, d) distinct tokens at every layer.
        pooled: (batch, d) mean of the final real tokens. logits: (batch,).
        A: (d, d) the score matrix, or None for the identity.
    """

    ids: Tensor
    weights: Tensor
    index: Tensor
    tokens: Tensor
    pooled: Tensor
    logits: Tensor
    A: Tensor | None = None


def _inverse_softplus(x: float) -> float:
    return x + math.log(-math.expm1(-x))


class HardmaxClassifier(nn.Module):
    """Embedding → K shared pure-attention layers → mean over real tokens → linear decoder.

    Args:
        config: `ModelConfig`.

    Call: ``model(ids, mask, attention="softmax" | "hardmax") -> logits`` with ids (batch, n) int64,
    mask (batch, n) bool (True = real token), logits (batch,). The probability of a positive review is
    sigmoid(logit).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d)
        nn.init.normal_(self.embedding.weight, std=config.embedding_std)
        self.alpha_raw = nn.Parameter(torch.tensor(_inverse_softplus(config.alpha_init)),
                                      requires_grad=config.learn_alpha)
        if config.learn_A:
            self.A_factor = nn.Parameter(torch.eye(config.d))
        else:
            self.register_parameter("A_factor", None)
        self.decoder = nn.Linear(config.d, 1)

    @property
    def alpha(self) -> Tensor:
        """α = softplus(raw) > 0 (0-dim tensor)."""
        return F.softplus(self.alpha_raw)

    @property
    def A(self) -> Tensor | None:
        """The SPD score matrix L Lᵀ + εI (d, d), or None for the identity."""
        if self.A_factor is None:
            return None
        L = torch.tril(self.A_factor)
        return L @ L.T + self.config.A_eps * torch.eye(self.config.d, device=L.device, dtype=L.dtype)

    def A_matrix(self) -> Tensor:
        """A as an explicit (d, d) tensor (the identity when A is not learned)."""
        A = self.A
        w = self.embedding.weight
        return torch.eye(self.config.d, device=w.device, dtype=w.dtype) if A is None else A

    def _check_inputs(self, ids: Tensor, mask: Tensor | None) -> Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (batch, n), got {tuple(ids.shape)}")
        if ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"ids must be integer word ids, got dtype {ids.dtype}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(f"ids must lie in [0, {self.config.vocab_size}), got values in "
                             f"[{int(ids.min())}, {int(ids.max())}]")
        if mask is None:
            mask = ids != self.config.pad_id
        elif mask.shape != ids.shape or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor of shape {tuple(ids.shape)}, got "
                             f"{mask.dtype} {tuple(mask.shape)}")
        if self.config.paper_padding:
            mask = torch.ones_like(mask)
        return mask

    def trace(self, ids: Tensor, mask: Tensor | None = None, *, attention: Attention = "softmax",
              tie_rtol: float | None = None) -> ModelTrace:
        """Run the classifier and keep every layer (see `ModelTrace`)."""
        return self._run(ids, mask, attention, tie_rtol, keep_path=True)

    def forward(self, ids: Tensor, mask: Tensor | None = None, *, attention: Attention = "softmax",
                tie_rtol: float | None = None) -> Tensor:
        """Logits (batch,) for ids (batch, n) and mask (batch, n) (True = real token)."""
        return self._run(ids, mask, attention, tie_rtol, keep_path=False).logits

    def _run(self, ids: Tensor, mask: Tensor | None, attention: Attention, tie_rtol: float | None,
             keep_path: bool) -> ModelTrace:
        mask = self._check_inputs(ids, mask)
        if (mask.sum(-1) == 0).any():
            raise ValueError("every review needs at least one real (unmasked) token")
        # Merge repeated words by id (exact for both attentions); embed each distinct word once so
        # that its gradient is counted once.
        dedup = deduplicate(ids.unsqueeze(-1), mask)
        distinct_ids = dedup.tokens.squeeze(-1)
        weights = dedup.weights.to(self.embedding.weight.dtype)
        z = self.embedding(distinct_ids)
        alpha, A = self.alpha, self.A
        if attention == "hardmax":
            # Same step as attention_step, with the leaders' rows skipped after the first layer.
            tokens = hardmax_layers(z, weights, alpha.expand(self.config.layers), A=A, tie_rtol=tie_rtol,
                                    keep_path=keep_path)
        else:
            path = [z]
            for _ in range(self.config.layers):
                path.append(attention_step(path[-1], weights, alpha=alpha, A=A, attention=attention,
                                           beta=self.config.beta, tie_rtol=tie_rtol))
                if not keep_path:
                    path = path[-1:]
            tokens = torch.stack(path)
        z = tokens[-1]
        pooled = (weights.unsqueeze(-1) * z).sum(1) / weights.sum(1, keepdim=True)
        logits = self.decoder(pooled).squeeze(-1)
        return ModelTrace(ids=distinct_ids, weights=weights, index=dedup.index,
                          tokens=tokens,
                          pooled=pooled, logits=logits, A=A)
