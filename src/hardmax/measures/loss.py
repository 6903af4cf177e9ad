"""`MCR2Loss`: the maximal coding rate reduction objective as a training loss (−ΔR and its parts).

The measures themselves live in `hardmax.measures.rate`; this file only turns them into an `nn.Module`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from hardmax.measures.rate import check_num_classes, check_positive, rate_reduction

__all__ = ["MCR2Loss", "MCR2Result"]


@dataclass(frozen=True)
class MCR2Result:
    """What `MCR2Loss` returns (0-dim float64 tensors with autograd).

    Attributes:
        loss: Rc − γ·R (= −ΔR for γ = 1), to be minimised.
        rate: R(Z, ε), the expansion term. class_rate: Rc, the compression term.
    """

    loss: Tensor
    rate: Tensor
    class_rate: Tensor

    @property
    def reduction(self) -> Tensor:
        """ΔR = R − Rc (independent of γ)."""
        return self.rate - self.class_rate


class MCR2Loss(nn.Module):
    """Maximal coding rate reduction loss: −(γ R(Z, ε) − Rc(Z, ε | Π)).

    Args:
        eps: the distortion ε > 0 (not ε²: the mcr2 reference code passes ε² under the name `eps`, so
            its default eps=0.5 is ε = √0.5 here).
        gamma: weight γ of the expansion term R (the reference's `gam2`); γ = 1 gives −ΔR.
        normalize: project every feature onto the unit sphere first, as the reference's users are told
            to do (the rates grow without bound with the scale of Z otherwise).
        num_classes: k, an integer ≥ 1 (default: the largest label of each batch + 1); labels must be below it.
            Work follows the classes present in a batch, not k; only the (k,) counts are allocated.

    Call: ``loss_fn(Z, labels) -> MCR2Result`` with Z (N, d) features and labels (N,) integer classes;
    ``result.loss`` is the scalar to minimise. ``tuple(loss_fn(Z, labels))`` is not supported: use the fields.

    Paper: Yu, Chan, You, Song, Ma, "Learning diverse and discriminative representations via the
    principle of maximal coding rate reduction", NeurIPS 2020, eq. (7).
    """

    def __init__(self, eps: float, gamma: float = 1.0, *, normalize: bool = True, num_classes: int | None = None):
        super().__init__()
        eps = check_positive(eps, "eps", "(the distortion ε)")
        gamma = check_positive(gamma, "gamma", "(the weight of R)")
        if not isinstance(normalize, bool):
            raise ValueError(f"normalize must be True or False, got {normalize!r}")
        self.eps, self.gamma, self.normalize = eps, gamma, normalize
        self.num_classes = check_num_classes(num_classes)

    def forward(self, Z: Tensor, labels: Tensor) -> MCR2Result:
        """The MCR² loss of features `Z` (N, d) with integer classes `labels` (N,), as an `MCR2Result`.

        `result.loss` is Rc − γ R, the scalar to minimise; Z is first normalised to unit rows when `normalize`.
        """
        if self.normalize and isinstance(Z, Tensor) and Z.is_floating_point():
            Z = F.normalize(Z, dim=-1)
        parts = rate_reduction(Z, labels, self.eps, num_classes=self.num_classes)
        return MCR2Result(loss=parts.class_rate - self.gamma * parts.rate, rate=parts.rate,
                          class_rate=parts.class_rate)

    def extra_repr(self) -> str:
        return f"eps={self.eps:g}, gamma={self.gamma:g}, normalize={self.normalize}"
