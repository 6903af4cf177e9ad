"""`Solution`: the one result of every dynamics run — `solve`, `simulate` (its paper spelling), a classifier's `trace`.

    tokens (saved, *input_shape)   at   times (saved,)   and steps (saved,)   made by   field · solver   under   mask

The paper's view of the same object: `rule`, `A` and `alpha` (α_k of `Euler.layers(α)`) come from the field and the
solver that made it; `after(k)` is the state after k layers; `layers` how many were run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hardmax.dynamics.field import Bilinear, Field
from hardmax.dynamics.masks import Mask
from hardmax.dynamics.rules import AttentionRule, rule_from_dict, rule_to_dict
from hardmax.dynamics.solvers import Euler, Solver, layer_step

__all__ = ["Solution"]


@dataclass(frozen=True)
class Solution:
    """Tokens of a solved dynamics at the saved times, and what made them.

    Attributes:
        tokens: (saved, *input_shape) positions (the batch axis kept as given).
        times: (saved,) the time of each saved state (`Euler.layers(α)`: Σ_{l<k} α_l/(1+α_l), the layers' time).
        field, solver: what produced it (`Field(rule, scores, value, manifold)`, `Euler.layers(α)`, `RK4(dt)`, ...).
        mask: (*input_shape[:-1]) bool, True for real tokens (the token part of the mask given).
        steps: (saved,) the solver step of each saved state, increasing, ending with the last step run (an adaptive
            solver: None).
        attention: (saved, *input_shape[:-1], n) P at each saved state, when asked for (`Save(attention=True)`).
        multiplicity: (*input_shape[:-1]) how many copies of a word each token stands for (the classifier merges
            repeated words), 0 for absent tokens; None: 1 for every real token.
        engine: which engine ran it ("compiled", "layers", "reference", "adaptive": `hardmax.dynamics` docs).
        pairs: the pair part of the mask (`Causal()`, `Pairs(allowed)`, ...); None: every token saw every real token.
    """

    tokens: Tensor
    times: Tensor
    field: Field
    solver: Solver
    mask: Tensor
    steps: tuple[int, ...] | None = None
    attention: Tensor | None = None
    multiplicity: Tensor | None = None
    engine: str = "reference"
    pairs: Mask | None = None

    @property
    def final(self) -> Tensor:
        """(*input_shape) the last saved state."""
        return self.tokens[-1]

    def at(self, t: float) -> Tensor:
        """(*input_shape) the saved state nearest to time t."""
        return self.tokens[int(torch.argmin((self.times - t).abs()))]

    def after(self, step: int) -> Tensor:
        """(*input_shape) the state after `step` steps (layers; 0 = the input, negative counts from the end); it
        must be saved (`Save(every=k)` saves every k-th step)."""
        steps = self._steps()
        k = step + steps[-1] + 1 if step < 0 else step
        try:
            return self.tokens[steps.index(k)]
        except ValueError:
            shown = ", ".join(map(str, steps)) if len(steps) <= 6 else f"{steps[0]}, {steps[1]}, ..., {steps[-1]}"
            raise ValueError(f"step {step} is not saved (saved: {shown}); solve with Save() to keep every step") \
                from None

    @property
    def layers(self) -> int:
        """The number of steps run (the paper's layers: the depth)."""
        return self._steps()[-1]

    @property
    def complete(self) -> bool:
        """Whether every step 0..layers is saved."""
        steps = self._steps()
        return len(steps) == steps[-1] + 1

    @property
    def rule(self) -> AttentionRule:
        """The attention rule of the field (`Hardmax(...)`, `Softmax(beta=...)`, ...)."""
        return self.field.rule

    @property
    def A(self) -> Tensor:
        """(d, d) the score matrix of a `Bilinear(A)` field (the identity for A = None)."""
        scores = self.field.scores
        if not isinstance(scores, Bilinear):
            raise ValueError(f"this solution's scores are {type(scores).__name__}, not Bilinear(A): it has no A")
        d = self.tokens.shape[-1]
        return (torch.eye(d, dtype=self.tokens.dtype, device=self.tokens.device) if scores.A is None
                else scores.A)

    @property
    def alpha(self) -> Tensor:
        """(layers,) α_k of each layer, for a solution of the paper's layers (`Euler.layers(α)`)."""
        alpha = getattr(self.solver, "alpha", None)
        if alpha is None:
            raise ValueError(f"this solution was solved with {type(self.solver).__name__}, not Euler.layers(alpha): "
                             "it has no alpha")
        a = torch.as_tensor(alpha, dtype=self.tokens.dtype, device=self.tokens.device).reshape(-1)
        return a.expand(self.layers) if a.numel() == 1 else a

    @property
    def counts(self) -> Tensor:
        """(*input_shape[:-1]) the multiplicity as floats in the tokens' dtype (the mask as 0/1 when none)."""
        w = self.mask if self.multiplicity is None else self.multiplicity
        return w.to(self.tokens.dtype)

    def _steps(self) -> tuple[int, ...]:
        if self.steps is None:
            raise ValueError("an adaptive solution has saved times, not steps: use .at(t) or .times")
        return self.steps

    def to_dict(self) -> dict:
        """The solution of the paper's layers as plain JSON values (`from_dict` reads it back, same dtype, on the
        CPU); ValueError for another field or solver (they have no JSON form)."""
        f = self.field
        layers = isinstance(self.solver, Euler) and self.solver.alpha is not None
        if not (layers and type(f.scores) is Bilinear and f.value is None and f.manifold.euclidean):
            raise ValueError("only a solution of the paper's layers (Field(rule, Bilinear(A)), Euler.layers(alpha)) "
                             "has a JSON form")

        def listed(t: Tensor | None):
            return None if t is None else t.detach().cpu().tolist()

        return {"dtype": str(self.tokens.dtype).removeprefix("torch."), "tokens": listed(self.tokens),
                "alpha": listed(self.alpha), "A": listed(self.A), "rule": rule_to_dict(self.rule),
                "mask": listed(self.mask), "multiplicity": listed(self.multiplicity), "stored": list(self._steps()),
                "attention": listed(self.attention)}

    @classmethod
    def from_dict(cls, record: dict) -> Solution:
        """The `Solution` a `to_dict` record describes; ValueError for a malformed record."""
        try:
            dtype = getattr(torch, record["dtype"])
            if dtype not in (torch.float32, torch.float64):
                raise ValueError(f"dtype must be float32 or float64, got {record['dtype']!r}")

            def tensor(key: str, kind=None):
                value = record.get(key)
                return None if value is None else torch.tensor(value, dtype=kind or dtype)

            alpha, A = tensor("alpha"), tensor("A")
            return cls.from_layers(tensor("tokens"), alpha, A, rule_from_dict(record["rule"]),
                                   tensor("mask", torch.bool), tuple(int(k) for k in record["stored"]),
                                   multiplicity=tensor("multiplicity"), attention=tensor("attention"))
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a solution record: {type(e).__name__} {e}") from None

    @classmethod
    def from_layers(cls, tokens: Tensor, alpha: Tensor, A: Tensor | None, rule: AttentionRule, mask: Tensor,
                    steps: tuple[int, ...] | None = None, *, multiplicity: Tensor | None = None,
                    attention: Tensor | None = None) -> Solution:
        """The `Solution` of the paper's layers z ← z + γ_k(T(z) − z), γ_k = α_k/(1+α_k), from its parts (what a
        classifier's trace and `from_dict` build): tokens (saved, ..., n, d) after the layers `steps` (None: every
        layer 0..len(alpha)); alpha (layers,); A (d, d) or None; mask and multiplicity (..., n)."""
        alpha = alpha.reshape(-1)
        steps = tuple(range(alpha.shape[0] + 1)) if steps is None else tuple(steps)
        gammas = layer_step(alpha.detach())
        times = torch.cat([gammas.new_zeros(1), torch.cumsum(gammas, 0)])[list(steps)]
        # no layer (depth 0): any α describes it (none is applied); `alpha` is then empty
        solver = Euler.layers(alpha if alpha.numel() else 1.0)
        return cls(tokens=tokens, times=times, field=Field(rule, Bilinear(A)), solver=solver, mask=mask,
                   steps=steps, attention=attention, multiplicity=multiplicity, engine="layers")
