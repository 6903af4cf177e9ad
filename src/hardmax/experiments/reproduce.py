"""`hardmax reproduce`: the paper's Section 4 (sentiment analysis on IMDb) end to end.

For each embedding dimension d it trains the classifier (or reuses a finished run), evaluates it on
the test set under softmax and exact hardmax, counts leaders, collects leader words, draws the
figures, and finally writes a report (results.md) and machine-readable results (results.json).
The test set is used only there, after model selection on validation.

This file holds the settings (`ReproduceConfig`, the `quick` preset) and the reference accuracies, and
imports no torch, so that the command line reads its options quickly. The work is in `pipeline`
(train, select, measure: `pipeline.reproduce(config)` runs it) and `report` (results.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from hardmax.data.config import STOP_LISTS, DataConfig
from hardmax.training.config import TrainConfig

__all__ = ["PAPER_ACCURACY", "QUICK_ACCURACY", "TARGET_ACCURACY", "ReproduceConfig", "candidate_dir", "candidates",
           "quick"]

PAPER_ACCURACY = {2: 0.791, 4: 0.823, 8: 0.850, 16: 0.882}  #: 70/30 split, best epoch picked on test
TARGET_ACCURACY = {2: 0.80, 4: 0.84, 8: 0.85, 16: 0.86}  #: standard split, chosen on validation (revised)
#: What `hardmax reproduce --quick` reaches on 2 CPU cores: the lowest test accuracy (exact hardmax) of
#: repeated quick runs, rounded down (runs differ by thread scheduling only).
QUICK_ACCURACY = {2: 0.65, 4: 0.74, 8: 0.78, 16: 0.81}


@dataclass(frozen=True, kw_only=True)
class ReproduceConfig:
    """Settings of `reproduce` (defaults: the full grid, ~11-20 min on 2 CPU cores; see docs/results.md)."""

    dims: tuple[int, ...] = (2, 4, 8, 16)  # embedding dimensions to train
    out_dir: str = "runs/reproduce"  # one run directory per d inside
    report_dir: str = "runs/reproduce"  # where results.md / results.json / figures go
    benchmarks_page: str | None = None  # a page quoting the idle-machine benchmarks, linked from results.md
    data: DataConfig = field(default_factory=DataConfig)  # the reviews and their preprocessing
    train: TrainConfig = field(default_factory=TrainConfig)  # optimisation (its lr is replaced by each of `lrs`)
    # Candidates trained per d: every stop-word list (`data.stopwords` is replaced by each) with every
    # learning rate; the run with the best validation accuracy (exact hardmax) is kept. No single
    # setting suits every d (docs/reports/experiments.md): lr 1e-2 for small d, 3e-3 for d = 16; NLTK's list
    # (the paper's) helps d = 8 and 16 on validation, scikit-learn's longer one d = 4.
    lrs: tuple[float, ...] = (1e-2, 3e-3)  # learning rates tried per d
    stopwords: tuple[str, ...] = ("nltk", "sklearn")  # stop-word lists tried per d
    layers: int = 8  # K, applications of the shared attention layer
    beta: float = 1000.0  # training inverse temperature (paper: temperature 0.001)
    confidence: float = 0.95  # "confidently classified" threshold of the leader-word histogram (the paper's)
    decisive: float = 2.0  # leaders count in the histogram when the size of their logit v·z + b exceeds this
    example_review: int | None = None  # test row for the token-evolution figures; None: pick one
    progress: bool = True  # progress bars / lines and one line per trained or reused run
    label: str = "full"  # "full" or "quick", written into the report

    def __post_init__(self):
        if not self.dims or any(d < 1 for d in self.dims):
            raise ValueError(f"dims must be positive integers, got {self.dims}")
        if not self.lrs or not all(0 < lr < math.inf for lr in self.lrs) or len(set(self.lrs)) != len(self.lrs):
            raise ValueError(f"lrs must be distinct positive learning rates, got {self.lrs}")
        if not self.stopwords or not set(self.stopwords) <= set(STOP_LISTS) or \
                len(set(self.stopwords)) != len(self.stopwords):
            raise ValueError(f"stopwords must be distinct lists among {sorted(STOP_LISTS)}, got {self.stopwords}")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence}")
        if self.layers < 1:
            raise ValueError(f"layers must be ≥ 1 (the leaders and clusters reported need at least one layer), "
                             f"got {self.layers}")
        if not (self.beta > 0 and math.isfinite(self.beta)):
            raise ValueError(f"beta must be finite and > 0, got {self.beta}")
        if not (self.decisive >= 0 and math.isfinite(self.decisive)):
            raise ValueError(f"decisive must be a finite number ≥ 0 (a decoder logit), got {self.decisive}")
        if self.example_review is not None and self.example_review < 0:
            raise ValueError(f"example_review must be a test row ≥ 0, got {self.example_review}")


    def to_json(self) -> str:
        """The settings as one line of JSON (sorted keys): `from_json` reads it back; a sweep cell carries it."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ReproduceConfig:
        """The settings `to_json` wrote; ValueError (one line) for text that is not such settings."""
        try:
            fields = json.loads(text)
            data, train = DataConfig(**fields.pop("data")), TrainConfig(**fields.pop("train"))
            tuples = {k: tuple(fields.pop(k)) for k in ("dims", "lrs", "stopwords")}
            return cls(data=data, train=train, **tuples, **fields)
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as e:
            raise ValueError(f"not the settings of hardmax reproduce ({e})") from None


def candidates(config: ReproduceConfig) -> list[tuple[int, str, float]]:
    """(d, stop-word list, learning rate) of every candidate run `reproduce` trains, in its order."""
    return [(d, stop, lr) for d in config.dims for stop in config.stopwords for lr in config.lrs]


def candidate_dir(config: ReproduceConfig, d: int, stopwords: str, lr: float) -> Path:
    """Where a candidate is trained: out_dir/d{d} when it is d's only one, else out_dir/candidates/d{d}-{list}-lr{lr}
    (the chosen one is copied to out_dir/d{d})."""
    if len(config.stopwords) * len(config.lrs) == 1:
        return Path(config.out_dir) / f"d{d}"
    return Path(config.out_dir) / "candidates" / f"d{d}-{stopwords}-lr{lr:g}"


def quick(**overrides) -> ReproduceConfig:
    """The README's first job: the whole pipeline on 5,000 + 5,000 reviews, 4 epochs per d, one candidate
    (about 3-5 min on 2 CPU cores), into runs/quick/ (runs and report)."""
    base = ReproduceConfig(
        out_dir="runs/quick", report_dir="runs/quick", label="quick",
        data=DataConfig(limit=5000, min_count=2),
        train=TrainConfig(epochs=4, checkpoint_every=1000), lrs=(1e-2,), stopwords=("nltk",),
    )
    return dataclasses.replace(base, **overrides)
