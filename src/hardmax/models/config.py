"""`ModelConfig`: the settings of `HardmaxClassifier`, importable without torch.

The command line builds its options from this dataclass (`hardmax.cli.options`), so importing it
must stay cheap: only the standard library here. The model itself is in `classifier.py`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["ModelConfig"]


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
    layer: Literal["hardmax", "crate"] = "hardmax"  # the paper's shared attention layer, or CRATE blocks
    # CRATE blocks only: heads K of dimension p = d/K. Default one head: the reference code's heads have
    # p = 64 ≥ every d here, and at d = 16 one head trains 3.5x faster than four and is as accurate (docs/rate.md).
    crate_heads: int | None = None

    def __post_init__(self):
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be ≥ 2 (PAD and UNK), got {self.vocab_size}")
        if self.d < 1 or self.layers < 0:
            raise ValueError(f"need d ≥ 1 and layers ≥ 0, got d={self.d}, layers={self.layers}")
        if not (self.alpha_init > 0 and math.isfinite(self.alpha_init)):
            raise ValueError(f"alpha_init must be finite and > 0, got {self.alpha_init}")
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError(f"beta must be finite and > 0, got {self.beta}")
        if not (self.A_eps > 0 and math.isfinite(self.A_eps)):
            raise ValueError(f"A_eps must be finite and > 0, got {self.A_eps}")
        if not (self.embedding_std > 0 and math.isfinite(self.embedding_std)):
            raise ValueError(f"embedding_std must be finite and > 0, got {self.embedding_std}")
        if self.layer not in ("hardmax", "crate"):
            raise ValueError(f"layer must be 'hardmax' or 'crate', got {self.layer!r}")
        if self.layer == "crate" and self.crate_heads is None:
            object.__setattr__(self, "crate_heads", 1)
        if self.crate_heads is not None:
            if self.layer != "crate":
                raise ValueError("crate_heads applies to --layer crate only")
            if isinstance(self.crate_heads, bool) or not isinstance(self.crate_heads, int) or self.crate_heads < 1 \
                    or self.d % self.crate_heads:
                raise ValueError(f"crate_heads must be a divisor of d = {self.d}, got {self.crate_heads!r}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary of size {self.vocab_size}")

    def training_bytes(self, *, batch_size: int, max_len: int) -> float:
        """Estimated peak memory (bytes, float32) of training this model on batches of `batch_size` reviews of
        up to `max_len` tokens: the weights four times over (value, gradient, Adam's two moments), and what
        autograd keeps of every layer: the tokens (batch × n × d) and the attention scores and weights
        (batch × n × n), a few copies each."""
        weights = float(self.vocab_size) * self.d + 2.0 * self.d * self.d + self.d + 1
        per_layer = float(batch_size) * max_len * (4.0 * self.d + 3.0 * max_len)
        return 4.0 * (4.0 * weights + (self.layers + 1) * per_layer)

    def to_dict(self) -> dict:
        record = asdict(self)
        if record["layer"] == "hardmax":  # records of hardmax runs stay as before the field existed (resume, reuse)
            del record["layer"]
        if record["crate_heads"] is None:  # likewise (set for CRATE only)
            del record["crate_heads"]
        return record

    @classmethod
    def from_record(cls, record: dict) -> ModelConfig:
        """The config a run's record (`to_dict`) describes. CRATE runs recorded before `crate_heads` existed
        were built with max(1, d // 4) heads, and are read so."""
        record = dict(record)
        if record.get("layer") == "crate" and "crate_heads" not in record:
            record["crate_heads"] = max(1, record.get("d", cls.d) // 4)
        return cls(**record)
