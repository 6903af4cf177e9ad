"""Measures of token sets: coding rates (how many nats a set needs) and sparsity. Pure functions.

    rate.py       `coding_rate` R, `class_coding_rate` Rc, `rate_reduction` ΔR = R − Rc,
                  `subspace_coding_rate` R^c(Z | U) (MCR², Yu et al. 2020; CRATE, Yu et al. 2023)
    loss.py       `MCR2Loss`: −ΔR as an `nn.Module` for training
    sparsity.py   `zero_fraction`: share of exact zeros (CRATE's ISTA output)

What explains a trained classifier (leaders, decisive words) is `hardmax.explain`, not here.
"""

from hardmax.measures.loss import MCR2Loss, MCR2Result
from hardmax.measures.rate import (
    RateReduction,
    class_coding_rate,
    coding_rate,
    rate_reduction,
    subspace_coding_rate,
)
from hardmax.measures.sparsity import zero_fraction

__all__ = [
    "MCR2Loss",
    "MCR2Result",
    "RateReduction",
    "class_coding_rate",
    "coding_rate",
    "rate_reduction",
    "subspace_coding_rate",
    "zero_fraction",
]
