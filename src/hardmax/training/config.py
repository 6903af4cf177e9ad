"""`TrainConfig`: the optimisation settings, importable without torch (the CLI builds its options from it).

Only the standard library is imported here. Whether a device exists is checked where torch is at hand
(`hardmax.training.device.resolve_device`); here a device name is only checked for its spelling.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields
from typing import Literal

__all__ = ["TrainConfig", "check_device_name"]

# "cpu", "cuda", "cuda:1", "mps", ...: the device types torch knows by name, with an optional index.
_DEVICE = re.compile(r"(cpu|cuda|mps|xpu|meta)(:\d+)?")


def check_device_name(name: object) -> str:
    """Return `name` if it spells a torch device ("cpu", "cuda", "cuda:1", "mps"); raise ValueError if not."""
    if not isinstance(name, str) or _DEVICE.fullmatch(name) is None:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {name!r}")
    return name


def check_threads(threads: object, name: str = "threads") -> int:
    """Return `threads` if it is an integer from 1 to 4 × the CPUs here; raise ValueError (naming `name`) if not.

    torch's thread pool crashes the process on absurd counts (100,000: a segmentation fault)."""
    cpus = os.cpu_count() or 1
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 4 * cpus:
        raise ValueError(f"{name} must be an integer from 1 to {4 * cpus} (4 × the {cpus} CPUs here), got {threads!r}")
    return threads


def _check_types(config) -> None:
    """Refuse values of the wrong type (a string where a number is expected, a bool for an int) with
    the field's name, before any comparison turns them into a TypeError deep inside `__post_init__`."""
    for f in fields(config):
        value = getattr(config, f.name)
        expected = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if expected == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif expected == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif expected == "str":
            ok = isinstance(value, str)
        else:  # Literal fields are checked against their choices by __post_init__
            ok = True
        if not ok:
            raise ValueError(f"{f.name} must be a {'number' if expected == 'float' else expected}, "
                             f"got {value!r} ({type(value).__name__})")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation settings. The defaults are those `hardmax reproduce` starts from (it picks the learning
    rate per d on validation); the accuracies they reach are in docs/results.md."""

    epochs: int = 12  # maximum number of epochs
    batch_size: int = 64  # reviews per step
    lr: float = 1e-2  # Adam learning rate
    weight_decay: float = 0.0  # Adam (L2) weight decay
    clip_norm: float = 1.0  # gradient clipping (global L2 norm); 0 disables
    patience: int = 3  # stop after this many epochs in a row without a better validation accuracy
    select_on: Literal["hardmax", "softmax"] = "hardmax"  # attention used for model selection
    seed: int = 0  # initialisation and batch order
    device: str = "cpu"  # "cpu", "cuda", "cuda:1", ...
    checkpoint_every: int = 100  # steps between mid-epoch checkpoints (and at every epoch end)
    eval_batch_size: int = 256  # reviews per evaluation batch (small enough for the scores to stay in cache)
    bucket: int = 50  # batches sorted by length within windows of this many batches (speed); 1 = off
    word_dropout: float = 0.3  # share of real tokens hidden in each training batch (regulariser; 0 = off)

    def __post_init__(self):
        _check_types(self)
        for name in ("epochs", "batch_size", "checkpoint_every", "eval_batch_size", "bucket"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        for name in ("weight_decay", "clip_norm"):
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be finite and ≥ 0, got {getattr(self, name)}")
        if self.patience < 0:
            raise ValueError(f"patience must be ≥ 0, got {self.patience}")
        if not 0.0 <= self.word_dropout < 1.0:
            raise ValueError(f"word_dropout must be in [0, 1), got {self.word_dropout}")
        if self.select_on not in ("hardmax", "softmax"):
            raise ValueError(f"select_on must be 'hardmax' or 'softmax', got {self.select_on!r}")
        check_device_name(self.device)
