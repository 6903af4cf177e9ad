"""`ModelConfig` and `CrateBlocks`: the settings of the sentiment classifiers, importable without torch.

`ModelConfig` describes a classifier (vocabulary, d, depth, padding, embedding) and its attention layer:
the paper's shared hardmax layer (`crate=None`, with α, A and β below), or CRATE blocks
(`crate=CrateBlocks(...)`, whose settings are the blocks' own). `build_model(config)` builds either.

The command line builds its options from these dataclasses (`hardmax.cli.options`), so importing them
must stay cheap: only the standard library here. The models themselves are in `classifier.py` and `crate.py`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["CrateBlocks", "ModelConfig"]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class CrateBlocks:
    """The settings of one CRATE block (Yu et al. 2023; `hardmax.models.crate`), shared by all `layers` blocks
    of a `CrateClassifier` (each block still has its own parameters: CRATE does not share weights).

    Only what a block is lives here; the classifier around the blocks (vocabulary, d, depth, padding id,
    embedding scale) is `ModelConfig`'s: ``ModelConfig(vocab_size=..., d=16, crate=CrateBlocks(heads=2))``.
    Defaults: the authors' reference code, except one head (below).
    """

    # K subspaces, of dimension p = d/K. Default one head: the reference code's heads have p = 64 ≥ every
    # d here, and at d = 16 one head trains 3.5x faster than four and is as accurate (docs/reports/rate.md).
    heads: int = 1
    head_dim: int | None = None  # p, dimension of each subspace; None = d // heads (the reference's choice)
    beta: float | None = None  # inverse temperature of the MSSA softmax; None = 1/√p (reference: dim_head**-0.5)
    # "reference": the authors' code; "faithful": the derivation (see hardmax.models.crate). None: "reference",
    # or "faithful" for d ≤ 2, where a LayerNorm sends every vector to ±(1, −1) (times its gain), so the
    # reference mode would see every token as one of two points. `ModelConfig` resolves None for its d.
    mode: Literal["reference", "faithful"] | None = None
    step: float = 0.5  # κ of the faithful mode, in (0, 1): z' = (1 − κ) z + κ MSSA(z); α = κ/(1 − κ) = 1
    ista: bool = True  # apply the ISTA step after MSSA
    eta: float = 0.1  # ISTA step size η (reference code: step_size = 0.1)
    lam: float = 0.1  # ISTA sparsity weight λ (reference code: lambd = 0.1)

    def __post_init__(self):
        if not _is_int(self.heads) or self.heads < 1:
            raise ValueError(f"CrateBlocks.heads must be an integer ≥ 1, got {self.heads!r}")
        if self.head_dim is not None and (not _is_int(self.head_dim) or self.head_dim < 1):
            raise ValueError(f"CrateBlocks.head_dim must be an integer ≥ 1 or None, got {self.head_dim!r}")
        if self.beta is not None and not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"CrateBlocks.beta must be finite and > 0, got {self.beta}")
        if self.mode not in (None, "reference", "faithful"):
            raise ValueError(f"CrateBlocks.mode must be 'reference' or 'faithful', got {self.mode!r}")
        if not 0 < self.step < 1:
            raise ValueError(f"CrateBlocks.step κ must be in (0, 1), got {self.step}")
        if not (self.eta > 0 and math.isfinite(self.eta)):
            raise ValueError(f"CrateBlocks.eta must be finite and > 0, got {self.eta}")
        if not (self.lam >= 0 and math.isfinite(self.lam)):
            raise ValueError(f"CrateBlocks.lam must be finite and ≥ 0, got {self.lam}")

    def at_width(self, d: int) -> CrateBlocks:
        """These settings for tokens in R^d: the heads checked against d, and mode None resolved."""
        if self.head_dim is None and d % self.heads:
            raise ValueError(f"CrateBlocks.heads must divide d = {d}, got {self.heads} (or give CrateBlocks.head_dim)")
        if self.mode is None:
            return dataclasses.replace(self, mode="faithful" if d <= 2 else "reference")
        return self

    def subspace_dim(self, d: int) -> int:
        """p, the dimension of each subspace, for tokens in R^d."""
        return d // self.heads if self.head_dim is None else self.head_dim

    def inverse_temperature(self, d: int) -> float:
        """β of the MSSA softmax for tokens in R^d."""
        return 1 / math.sqrt(self.subspace_dim(d)) if self.beta is None else float(self.beta)

    def to_dict(self) -> dict:
        """The settings as a dict (`dataclasses.asdict`), as given: None where a setting follows d."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Configuration of a sentiment classifier (defaults: the paper's d = 16 `HardmaxClassifier`).

    The attention layer is the paper's shared hardmax layer (`crate=None`; α, A, β and `paper_padding`
    apply to it) or `layers` CRATE blocks (`crate=CrateBlocks(...)`: `CrateClassifier`).
    """

    vocab_size: int  # number of word ids, PAD and UNK included
    d: int = 16  # token dimension (paper: 2, 4, 8, 16)
    layers: int = 8  # K, applications of the one shared attention layer (or CRATE blocks)
    alpha_init: float = 1.0  # initial α > 0; α = softplus(raw) stays positive during training
    learn_alpha: bool = True  # train α (the paper does)
    learn_A: bool = False  # A = I (paper), or a learnable SPD A = L Lᵀ + A_eps·I
    A_eps: float = 1e-3  # keeps a learnable A uniformly positive definite
    beta: float = 1000.0  # inverse temperature of the training softmax (paper: temperature 0.001)
    paper_padding: bool = False  # reproduce the authors' code: PAD tokens attend, are attended and pooled
    pad_id: int = 0  # id of the padding token
    embedding_std: float = 1.0  # N(0, std²) initialisation of the embedding
    crate: CrateBlocks | None = None  # None: the paper's shared hardmax layer; CrateBlocks: CRATE blocks instead
    classes: int = 2  # k: the decoder maps the mean token to one logit (k = 2, the paper's) or to k logits

    def __post_init__(self):
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be ≥ 2 (PAD and UNK), got {self.vocab_size}")
        if isinstance(self.classes, bool) or not isinstance(self.classes, int) or self.classes < 2:
            raise ValueError(f"classes must be an integer ≥ 2, got {self.classes!r}")
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
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary of size {self.vocab_size}")
        if self.crate is not None:
            if not isinstance(self.crate, CrateBlocks):
                raise ValueError(f"crate must be a CrateBlocks or None, got {type(self.crate).__name__}")
            for name in ("learn_A", "paper_padding"):  # the hardmax layer's; CRATE has neither
                if getattr(self, name):
                    raise ValueError(f"{name} applies to the paper's hardmax layer only, not to CRATE blocks")
            self.crate.at_width(self.d)  # checks the heads against d (the mode is resolved where used: `blocks`)

    @property
    def blocks(self) -> CrateBlocks | None:
        """The CRATE blocks' settings for this d (mode None resolved: "faithful" for d ≤ 2, else "reference"), or
        None for the paper's hardmax layer. Resolved here, not stored, so that `dataclasses.replace(config, d=...)`
        resolves it again."""
        return None if self.crate is None else self.crate.at_width(self.d)

    @property
    def layer(self) -> Literal["hardmax", "crate"]:
        """The attention layer's name: "hardmax" (the paper's shared layer) or "crate" (CRATE blocks)."""
        return "hardmax" if self.crate is None else "crate"

    def training_bytes(self, *, batch_size: int, max_len: int, eval_batch_size: int = 0) -> float:
        """Estimated peak memory (bytes, float32) of training this model on batches of `batch_size` reviews of
        up to `max_len` tokens: the weights four times over (value, gradient, Adam's two moments), and the larger
        of what autograd keeps of every layer of a training batch — the tokens (batch × n × d) and the attention
        scores and weights (batch × heads × n × n), a few copies each — and one layer of an evaluation batch
        of `eval_batch_size` reviews (no gradients: one layer at a time)."""
        heads = 1 if self.crate is None else self.crate.heads  # CRATE's heads are folded into the batch
        weights = float(self.vocab_size) * self.d + 2.0 * self.d * self.d + self.d + 1
        if self.crate is not None:  # each block has its own U (d × d), D (d × d) and output projection
            weights += self.layers * 4.0 * self.d * self.d
        per_layer = float(batch_size) * max_len * (4.0 * self.d + 3.0 * heads * max_len)
        evaluation = 2.0 * float(eval_batch_size) * max_len * (2.0 * self.d + 3.0 * heads * max_len)
        return 4.0 * (4.0 * weights + max((self.layers + 1) * per_layer, evaluation))

    def to_dict(self) -> dict:
        """The run record's "model" entry: the fields, with the CRATE blocks' settings under "crate". A hardmax
        config has no "crate" entry (its records stay as before CRATE existed: runs resume and are reused)."""
        record = asdict(self)
        if record["classes"] == 2:  # the paper's two classes: records stay as before k classes existed
            del record["classes"]
        if record["crate"] is None:
            del record["crate"]
        else:  # the mode the blocks were built with, resolved for d
            record["crate"] = asdict(self.blocks)
        return record

    @classmethod
    def from_record(cls, record: dict) -> ModelConfig:
        """The config a run's record (`to_dict`) describes, including records of earlier versions: CRATE runs
        recorded as {"layer": "crate", "crate_heads": K} (K heads, reference mode, faithful for d ≤ 2), and
        before `crate_heads` existed as {"layer": "crate"}: those were built with max(1, d // 4) heads."""
        record = dict(record)
        layer, heads = record.pop("layer", None), record.pop("crate_heads", None)
        crate = record.pop("crate", None)
        if layer not in (None, "hardmax", "crate"):
            raise ValueError(f"layer must be 'hardmax' or 'crate', got {layer!r}")
        if layer == "crate":
            if crate is not None:
                raise ValueError("a model record gives both layer='crate' and crate: one only")
            crate = {"heads": max(1, record.get("d", cls.d) // 4) if heads is None else heads}
        elif heads is not None:
            raise ValueError(f"crate_heads applies to layer 'crate' only, got layer {layer or 'hardmax'!r}")
        if isinstance(crate, dict):
            crate = CrateBlocks(**crate)
            d = record.get("d", cls.d)
            if crate.mode == dataclasses.replace(crate, mode=None).at_width(d).mode:
                crate = dataclasses.replace(crate, mode=None)  # the default for d, as `to_dict` resolved it
        return cls(**record, crate=crate)


def default_class_names(k: int) -> list[str]:
    """Class names where none were recorded: IMDb's negative and positive for two classes, else "0" … "k−1"."""
    return ["negative", "positive"] if k == 2 else [str(c) for c in range(k)]
