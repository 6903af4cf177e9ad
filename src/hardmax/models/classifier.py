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
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hardmax.dynamics import AttentionRule, Hardmax, Save, Solution, attention_step, deduplicate, simulate
from hardmax.dynamics._engines.layers import hardmax_layers  # an engine service (hardmax.dynamics._engines)
from hardmax.models.base import WordClassifier
from hardmax.models.config import ModelConfig  # torch-free, so the CLI can read it quickly

__all__ = ["HardmaxClassifier", "ModelConfig", "ModelTrace"]



@dataclass(frozen=True)
class ModelTrace:
    """Everything the classifier computed for a batch: the `Solution` of its distinct tokens, and more.

    Attributes:
        trajectory: the layers on the batch's distinct words: `.tokens` (layers + 1, batch, m, d),
            `.multiplicity` (batch, m) copies of each word among the real tokens (0 = absent), `.mask`,
            `.A`, `.alpha`, `.rule` (what `hardmax.theory` reads).
        ids: (batch, m) word id of each distinct token (PAD where unused).
        index: (batch, n) position in the distinct tokens of each input position.
        pooled: (batch, d) mean of the final real tokens. logits: (batch,).
    """

    trajectory: Solution
    ids: Tensor
    index: Tensor
    pooled: Tensor
    logits: Tensor

    def to_dict(self) -> dict:
        """The trace as plain JSON values (`from_dict` reads it back)."""
        return {"trajectory": self.trajectory.to_dict(), **{k: getattr(self, k).detach().cpu().tolist()
                                                            for k in ("ids", "index", "pooled", "logits")}}

    @classmethod
    def from_dict(cls, record: dict) -> ModelTrace:
        """The trace `to_dict` wrote, as tensors (ids and index int64; pooled and logits in the tokens' dtype)."""
        trajectory = Solution.from_dict(record["trajectory"])
        dtype = trajectory.tokens.dtype
        return cls(trajectory=trajectory, ids=torch.tensor(record["ids"], dtype=torch.int64),
                   index=torch.tensor(record["index"], dtype=torch.int64),
                   pooled=torch.tensor(record["pooled"], dtype=dtype),
                   logits=torch.tensor(record["logits"], dtype=dtype))

    @property
    def tokens(self) -> Tensor:
        """(layers + 1, batch, m, d) the distinct tokens at every layer (`trajectory.tokens`)."""
        return self.trajectory.tokens

    @property
    def multiplicity(self) -> Tensor:
        """(batch, m) copies of each distinct word among the real tokens (`trajectory.multiplicity`)."""
        return self.trajectory.multiplicity

    @property
    def A(self) -> Tensor | None:
        """The learned score matrix, or None for the identity."""
        A = self.trajectory.A
        return None if torch.equal(A, torch.eye(A.shape[0], dtype=A.dtype, device=A.device)) else A


def _inverse_softplus(x: float) -> float:
    return x + math.log(-math.expm1(-x))


class HardmaxClassifier(WordClassifier):
    """Embedding → K shared pure-attention layers → mean over real tokens → linear decoder.

    Args:
        config: `ModelConfig`.

    Call: ``model(ids, mask, rule) -> logits`` with ids (batch, n) int64, rule a `hardmax.dynamics` rule
    (None: the training softmax `model.softmax`; `Hardmax()`: exact hardmax),
    mask (batch, n) bool (True = real token), logits (batch,) for two classes (the probability of class 1, the
    positive review, is sigmoid(logit)) or (batch, k) for k > 2 classes (softmax over the last axis).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.crate is not None:
            raise ValueError("HardmaxClassifier builds the paper's hardmax layer, but this ModelConfig has "
                             "crate=CrateBlocks(...): use build_model(config) or CrateClassifier(config)")
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d)
        nn.init.normal_(self.embedding.weight, std=config.embedding_std)
        self.alpha_raw = nn.Parameter(torch.tensor(_inverse_softplus(config.alpha_init)),
                                      requires_grad=config.learn_alpha)
        if config.learn_A:
            self.A_factor = nn.Parameter(torch.eye(config.d))
        else:
            self.register_parameter("A_factor", None)
        self.decoder = nn.Linear(config.d, 1 if config.classes == 2 else config.classes)

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

    @property
    def inverse_temperature(self) -> float:
        """β of the training softmax (the paper's 1000)."""
        return float(self.config.beta)

    def trace(self, ids: Tensor, mask: Tensor | None = None, rule: AttentionRule | None = None) -> ModelTrace:
        """Run the classifier and keep every layer (see `ModelTrace`); `rule` as in `forward`."""
        return self._run(ids, mask, self.rule_of(rule), keep_path=True)

    def forward(self, ids: Tensor, mask: Tensor | None = None, rule: AttentionRule | None = None) -> Tensor:
        """Logits (batch,) for ids (batch, n) and mask (batch, n) (True = real token; None: ids ≠ PAD).

        rule: the attention of the shared layer, a `hardmax.dynamics` rule: None for the training softmax
            (`self.softmax`), `Hardmax()` for exact hardmax (run by `simulate`'s compiled engine on a CPU
            without gradients).
        """
        rule = self.rule_of(rule)
        if isinstance(rule, Hardmax) and not torch.is_grad_enabled() and ids.device.type == "cpu":
            return self._hardmax_logits(ids, mask, rule)
        return self._run(ids, mask, rule, keep_path=False).logits

    def _hardmax_logits(self, ids: Tensor, mask: Tensor | None, rule: Hardmax) -> Tensor:
        """Hardmax inference through `simulate`'s compiled engine, which merges repeated words itself
        (identical embeddings) and keeps only the last layer: the same layers as `_run`, 3-4x faster."""
        mask = self.check_ids(ids, mask)
        run = simulate(self.embedding(ids), rule, alpha=self.alpha, layers=self.config.layers,
                       A=self.A, mask=mask, save=Save.final())
        w = mask.to(run.final.dtype).unsqueeze(-1)
        pooled = (w * run.final).sum(1) / w.sum(1)
        return self.decoder(pooled).squeeze(-1)

    def _run(self, ids: Tensor, mask: Tensor | None, rule: AttentionRule, keep_path: bool) -> ModelTrace:
        mask = self.check_ids(ids, mask)
        # Merge repeated words by id (exact for both attentions); embed each distinct word once so
        # that its gradient is counted once.
        dedup = deduplicate(ids.unsqueeze(-1), mask)
        distinct_ids = dedup.tokens.squeeze(-1)
        multiplicity = dedup.multiplicity.to(self.embedding.weight.dtype)
        z = self.embedding(distinct_ids)
        alpha, A = self.alpha, self.A
        alphas = alpha.expand(self.config.layers)
        if isinstance(rule, Hardmax):
            # Same step as attention_step, with the leaders' rows skipped after the first layer.
            tokens = hardmax_layers(z, multiplicity, alphas, A=A, tie_rtol=rule.tie_rtol, keep_path=keep_path)
        else:
            path = [z]
            for _ in range(self.config.layers):
                path.append(attention_step(path[-1], multiplicity, alpha=alpha, rule=rule, A=A))
                if not keep_path:
                    path = path[-1:]
            tokens = torch.stack(path)
        z = tokens[-1]
        pooled = (multiplicity.unsqueeze(-1) * z).sum(1) / multiplicity.sum(1, keepdim=True)
        logits = self.decoder(pooled).squeeze(-1)
        stored = None if keep_path else (self.config.layers,)
        trajectory = Solution.from_layers(tokens, alphas, self.A_matrix(), rule, multiplicity > 0, stored,
                                          multiplicity=multiplicity)
        return ModelTrace(trajectory=trajectory, ids=distinct_ids, index=dedup.index, pooled=pooled, logits=logits)
