"""Models built from attention layers.

    config.py       `ModelConfig`: the classifier (vocabulary, d, depth, padding, embedding) and its attention
                    layer: `crate=None`, the paper's shared hardmax layer (α, A, β), or `crate=CrateBlocks(...)`,
                    the settings of CRATE blocks (heads, mode, ISTA, ...). No torch: the command line builds
                    its options from it quickly
    base.py         `WordClassifier`: what both classifiers share (ids checked once; the attention as a rule
                    object, ``model(ids, mask, rule)``: None = training softmax, `Hardmax()` = exact hardmax)
    classifier.py   `HardmaxClassifier`: word embedding → the one attention layer `layers` times → mean →
                    linear decoder (the paper's Section 4 model)
    crate.py        `CrateClassifier`: word embedding → `layers` CRATE blocks (MSSA + ISTA, Yu et al. 2023) →
                    mean → linear decoder; `build_model(config)` picks it when `config.crate` is set

A new model is a new file here that runs its layers through `hardmax.dynamics` (so that what is trained
is what the theory analyses) and returns a `hardmax.dynamics.Solution` from its `trace` method.
Names are imported on first use (PEP 562 `__getattr__`), so `hardmax.models.ModelConfig` does not
import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hardmax.lazy import lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "HardmaxClassifier": "hardmax.models.classifier",
    "ModelConfig": "hardmax.models.config",
    "ModelTrace": "hardmax.models.classifier",
    "CrateClassifier": "hardmax.models.crate",
    "CrateBlocks": "hardmax.models.config",
    "WordClassifier": "hardmax.models.base",
    "AttentionName": "hardmax.models.base",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), extra=["build_model"])


def build_model(config):
    """The classifier a `ModelConfig` describes: `HardmaxClassifier`, or `CrateClassifier` when `config.crate`
    holds CRATE blocks' settings."""
    if config.crate is not None:
        from hardmax.models.crate import CrateClassifier

        return CrateClassifier(config)
    from hardmax.models.classifier import HardmaxClassifier

    return HardmaxClassifier(config)


if TYPE_CHECKING:
    from hardmax.models.base import AttentionName, WordClassifier  # noqa: F401
    from hardmax.models.classifier import HardmaxClassifier, ModelTrace  # noqa: F401
    from hardmax.models.config import CrateBlocks, ModelConfig  # noqa: F401
    from hardmax.models.crate import CrateClassifier  # noqa: F401
