"""What every word classifier shares: word ids checked once, and the attention rule as an object.

A classifier is called as ``model(ids, mask, rule)`` with a `hardmax.dynamics` rule object — the same
objects `simulate` takes — so that no string names an attention anywhere: ``rule=None`` is the rule the
model was trained with (`model.softmax`, softmax at its trained β), ``rule=Hardmax()`` exact hardmax
(``Hardmax(tie_rtol)`` for another tie tolerance).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from hardmax.dynamics import AttentionRule, Hardmax, Softmax

__all__ = ["AttentionName", "WordClassifier"]

AttentionName = Literal["softmax", "hardmax"]  #: how settings files and options name a classifier's two rules


class WordClassifier(nn.Module):
    """Base of `HardmaxClassifier` and `CrateClassifier`: `config` (vocab_size, pad_id, paper_padding),
    `inverse_temperature` (β of its training softmax), `check_ids`, `rule_of` and `rule_named`."""

    config: object

    @property
    def inverse_temperature(self) -> float:
        """β of the softmax the model is trained with."""
        raise NotImplementedError

    @property
    def softmax(self) -> Softmax:
        """The rule the model is trained with: softmax at its inverse temperature."""
        return Softmax(self.inverse_temperature)

    def rule_named(self, name: AttentionName) -> AttentionRule:
        """The rule a settings file names (`TrainConfig.select_on`, `--on`): "softmax" (`softmax`) or "hardmax"."""
        if name == "softmax":
            return self.softmax
        if name == "hardmax":
            return Hardmax()
        raise ValueError(f"attention must be 'softmax' or 'hardmax', got {name!r}")

    def rule_of(self, rule: AttentionRule | None) -> AttentionRule:
        """`rule` itself, or `softmax` for None.

        Raises:
            ValueError: anything else (a rule class instead of an instance, a string).
        """
        if rule is None:
            return self.softmax
        if isinstance(rule, type) or not isinstance(rule, AttentionRule):
            raise ValueError(f"rule must be an attention rule such as Hardmax() or Softmax(beta=...), or None for "
                             f"the model's training softmax; got {rule!r}")
        return rule

    def check_ids(self, ids: Tensor, mask: Tensor | None) -> Tensor:
        """The mask of real tokens (batch, n) for word ids (batch, n), after checking both; the authors'
        padding behaviour (`paper_padding`) makes every position real.

        Raises:
            ValueError: ids that are not (batch, n) integers within the vocabulary, a mis-shaped mask, or a
                review without a real token.
        """
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"ids must be an integer tensor of shape (batch, n), got "
                             f"{getattr(ids, 'dtype', type(ids).__name__)} {tuple(getattr(ids, 'shape', ()))}")
        vocab = self.config.vocab_size
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
            raise ValueError(f"ids must lie in [0, {vocab}), got values in [{int(ids.min())}, {int(ids.max())}]")
        if mask is None:
            mask = ids != self.config.pad_id
        elif not isinstance(mask, Tensor) or mask.shape != ids.shape or mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor of shape {tuple(ids.shape)}, got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}")
        if self.config.paper_padding:
            mask = torch.ones_like(mask)
        if bool((mask.sum(-1) == 0).any()):
            raise ValueError("every review needs at least one real (unmasked) token")
        return mask
