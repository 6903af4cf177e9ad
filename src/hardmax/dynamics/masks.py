"""Masks: which tokens exist and who may attend to whom, as small immutable objects (`solve(..., mask=...)`).

    Tokens(present)      present (n,) or (batch, n) bool, True = a real token: padding (False) neither attends, is
                         attended to, nor moves. What a plain bool `mask=` has always meant, and still means.
    Pairs(allowed)       allowed (n, n) or (batch, n, n) bool: token i may attend to token j where allowed[i, j]
                         ((n, n) is shared by every sequence of a batch).
    Causal(window=None)  allowed[i, j] = j ≤ i: decoder attention, each token sees itself and the tokens before it;
                         Causal(window=w): also i − j < w, the w most recent tokens (a sliding window).
    a & b                both restrictions at once (`Intersection`): Causal() & Tokens(present) is a padded decoder.

How a rule sees a mask. The token part becomes the multiplicities w (batch, n) (0 = absent) every rule has always
taken; the pair part becomes one boolean matrix `allowed` (1 or batch, n, n), which the rules' `matrix` and
`targets` take as an optional `allowed=` (`Field.restricted` binds it to a field). Row i of the scores
s_ij = ⟨A z_i, z_j⟩ is restricted by the additive bias of `Mask.bias`,

    s̃_ij = s_ij + b_ij,    b_ij = 0 where allowed[i, j], −inf elsewhere        (and −inf where w_j = 0, as before)

so that every rule is its usual self on the keys K_i = {j : allowed[i, j], w_j > 0} of row i:

    hardmax       C_i = argmax_{j ∈ K_i} s_ij, every maximiser kept, ties by rule (★) among K_i only
    softmax       P_ij = 1[j ∈ K_i] w_j e^{β s_ij} / Σ_{l ∈ K_i} w_l e^{β s_il}
    localmax      C_i^θ = {j ∈ K_i : s_ij ≥ max_{l ∈ K_i} s_il − θ}
    unnormalised  P_ij = 1[j ∈ K_i] w_j e^{β s_ij} / Σ_{l ∈ K_i} w_l  (the mean over the keys the token sees: 1/n
                  without a pair mask, as before)

A token with no key (K_i = ∅: a row of `Pairs` that is all False, or whose allowed keys are all padding) has
P_i· = 0 and does not move: its velocity is 0 and a layer leaves it in place; nothing is NaN. Unlike padding, it
stays a key for the tokens that may attend to it (`live_rows` says which tokens move).

A plain bool tensor keeps meaning token presence whatever its shape ((n,) for one sequence, (batch, n) for a
batch), so every existing call reads as it did; who attends to whom is always spelled `Pairs(allowed)`, since a
(batch, n) presence mask with batch = n would otherwise read both ways. A plain tensor of a pair's shape is refused
with a line naming `Pairs`.

Engines: a token mask runs on every engine. A pair mask runs on `solve`'s reference loop (the engines' chooser
routes it there); the fast paths of the paper's layers refuse it with one line when forced (they merge identical
tokens and skip the leaders' rows, which assumes every token sees every token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from hardmax.dynamics.inputs import as_tensor

__all__ = ["Causal", "Intersection", "Mask", "Pairs", "Tokens"]


def _layout(shape) -> tuple[bool, int, int]:
    """(single, batch, n) of tokens of shape (n, d) or (batch, n, d)."""
    shape = tuple(shape)
    return (True, 1, shape[0]) if len(shape) == 2 else (False, shape[0], shape[1])


class Mask:
    """A restriction of attention: which tokens exist (`token_mask`) and who may attend to whom (`pair_mask`).

    `Tokens`, `Pairs`, `Causal` and `Intersection` (`a & b`) are the kinds; each is an immutable dataclass.
    `shape` below is the tokens' shape, (n, d) for one sequence or (batch, n, d) (batch = 1 for one sequence).
    """

    def token_mask(self, shape, device=None) -> Tensor | None:
        """(batch, n) bool, True for real tokens; None: every token is real."""
        return None

    def pair_mask(self, shape, device=None) -> Tensor | None:
        """(1 or batch, n, n) bool, [b, i, j] = token i may attend to token j; None: every pair."""
        return None

    def bias(self, shape, dtype: torch.dtype = torch.float64, device=None) -> Tensor | None:
        """(1 or batch, n, n) the additive score bias of `pair_mask`: b_ij = 0 where i may attend to j, −inf
        elsewhere, so that a row of scores restricted is s̃_i· = s_i· + b_i·; None: every pair (no bias)."""
        allowed = self.pair_mask(shape, device)
        if allowed is None:
            return None
        return torch.zeros((), dtype=dtype, device=allowed.device).expand(allowed.shape).masked_fill(~allowed,
                                                                                                    -math.inf)

    @property
    def pairs(self) -> Mask | None:
        """The pair part of this mask (None: it restricts token presence only)."""
        return None

    def __and__(self, other) -> Intersection:
        other = as_mask(other)
        if other is None:
            return NotImplemented
        return Intersection((*_parts(self), *_parts(other)))

    __rand__ = __and__


def _parts(mask: Mask) -> tuple[Mask, ...]:
    return mask.masks if isinstance(mask, Intersection) else (mask,)


def _bool(x, name: str, what: str) -> Tensor:
    t = as_tensor(x, name)
    if t.dtype != torch.bool:
        raise ValueError(f"{name} must be boolean ({what}), got dtype {t.dtype}")
    return t


@dataclass(frozen=True, eq=False)
class Tokens(Mask):
    """Token presence: `present` (n,) or (batch, n) bool, True = a real token (what a plain bool `mask=` means).

    Padding (False) neither attends, is attended to, nor moves: it enters the rules as multiplicity w_j = 0, so
    its keys get the bias b_ij = −inf in every row (log w_j), and its own row is 0. It restricts no pair.
    """

    present: Tensor

    def __post_init__(self):
        object.__setattr__(self, "present", _bool(self.present, "mask", "True = real token"))

    def token_mask(self, shape, device=None) -> Tensor:
        """(batch, n) `present` for tokens of `shape`: (n,) for one sequence (n, d), (batch, n) for (batch, n, d);
        a one-line ValueError for another shape (a pair's shape names `Pairs`)."""
        single, batch, n = _layout(shape)
        expected = (n,) if single else (batch, n)
        got = tuple(self.present.shape)
        if got != expected:
            hint = ("; a mask of who attends to whom is spelled Pairs(allowed), a plain bool mask means which "
                    "tokens exist" if len(got) >= 2 and got[-1] == got[-2] == n else "")
            raise ValueError(f"mask must have shape {expected}, got {got}{hint}")
        return self.present.to(device or self.present.device).reshape(batch, n)


@dataclass(frozen=True, eq=False)
class Pairs(Mask):
    """Who may attend to whom: `allowed` (n, n) or (batch, n, n) bool, allowed[i, j] = token i may attend to j.

    Row i of the scores is restricted to its allowed keys: s̃_ij = s_ij + b_ij, b_ij = 0 where allowed[i, j],
    −inf elsewhere. (n, n) is shared by every sequence of a batch; (batch, n, n) gives one per sequence. A row
    with no allowed key does not move (the module docstring). Every token exists; `Pairs(a) & Tokens(p)` adds
    padding.
    """

    allowed: Tensor

    def __post_init__(self):
        a = _bool(self.allowed, "Pairs(allowed)", "True = token i may attend to token j")
        if a.dim() not in (2, 3) or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"Pairs(allowed) must have shape (n, n) or (batch, n, n), got {tuple(a.shape)}")
        object.__setattr__(self, "allowed", a)

    def pair_mask(self, shape, device=None) -> Tensor:
        """(1 or batch, n, n) `allowed` for tokens of `shape`; a one-line ValueError when it does not fit them."""
        single, batch, n = _layout(shape)
        a = self.allowed
        fits = a.shape[-1] == n and (a.dim() == 2 or (not single and a.shape[0] == batch))
        if not fits:
            expected = f"({n}, {n})" if single else f"({n}, {n}) or ({batch}, {n}, {n})"
            raise ValueError(f"Pairs(allowed) must have shape {expected} for tokens of shape {tuple(shape)}, got "
                             f"{tuple(a.shape)}")
        return (a if a.dim() == 3 else a.unsqueeze(0)).to(device or a.device)

    @property
    def pairs(self) -> Pairs:
        """Itself."""
        return self


@dataclass(frozen=True)
class Causal(Mask):
    """Decoder attention: token i may attend to token j when j ≤ i (itself and the tokens before it).

    allowed[i, j] = (j ≤ i) and, with a `window` w, (i − j < w): the w most recent tokens, itself included.
    As a bias: b_ij = 0 for i − w < j ≤ i, −inf elsewhere. Token 1 sees only itself, so it never moves. Every
    token exists; `Causal() & Tokens(present)` adds padding.

    Args:
        window: None (every earlier token) or an integer w ≥ 1 (w = 1: each token sees only itself).
    """

    window: int | None = None

    def __post_init__(self):
        w = self.window
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            raise ValueError(f"Causal(window=...) must be an integer ≥ 1 or None, got {w!r}")

    def pair_mask(self, shape, device=None) -> Tensor:
        """(1, n, n) allowed[0, i, j] = (j ≤ i) and (i − j < window), for tokens of `shape`."""
        _, _, n = _layout(shape)
        i = torch.arange(n, device=device)
        lag = i.unsqueeze(1) - i.unsqueeze(0)  # [i, j] = i − j
        allowed = lag >= 0
        if self.window is not None:
            allowed &= lag < self.window
        return allowed.unsqueeze(0)

    @property
    def pairs(self) -> Causal:
        """Itself."""
        return self


@dataclass(frozen=True, eq=False)
class Intersection(Mask):
    """Several restrictions at once (`a & b`): a token exists if every part says so, i may attend to j if every
    part allows it — allowed = ∧ allowed_k, present = ∧ present_k, b_ij = Σ_k b_ij^(k)."""

    masks: tuple[Mask, ...]

    def __post_init__(self):
        if not self.masks or not all(isinstance(m, Mask) for m in self.masks):
            raise ValueError(f"Intersection needs masks (Tokens, Pairs, Causal), got {self.masks!r}")

    def token_mask(self, shape, device=None) -> Tensor | None:
        """(batch, n) bool: the tokens every part keeps; None when no part restricts them."""
        return _all([m.token_mask(shape, device) for m in self.masks])

    def pair_mask(self, shape, device=None) -> Tensor | None:
        """(1 or batch, n, n) bool: the pairs every part allows; None when no part restricts them."""
        return _all([m.pair_mask(shape, device) for m in self.masks])

    @property
    def pairs(self) -> Mask | None:
        """The parts that restrict pairs (one of them alone, or their intersection); None if none does."""
        parts = tuple(m for m in self.masks if m.pairs is not None)
        return None if not parts else parts[0] if len(parts) == 1 else Intersection(parts)


def _all(parts: list[Tensor | None]) -> Tensor | None:
    out = None
    for p in parts:
        if p is not None:
            out = p if out is None else out & p
    return out


def as_mask(mask) -> Mask | None:
    """A `Mask` from what `mask=` accepts: None, a `Mask`, or a plain bool array/tensor (token presence, `Tokens`)."""
    if mask is None or isinstance(mask, Mask):
        return mask
    return Tokens(mask)


class Resolved(NamedTuple):
    """A mask laid out for tokens of one shape (`resolve`).

    Attributes:
        present: (batch, n) bool, True for real tokens.
        allowed: (1 or batch, n, n) bool, who may attend to whom; None: every pair.
        pairs: the pair part of the mask as given (`Mask.pairs`); None when it restricts token presence only.
    """

    present: Tensor
    allowed: Tensor | None
    pairs: Mask | None


def resolve(mask, shape, device=None) -> Resolved:
    """The token and pair parts of `mask` (None, a `Mask` or a plain bool tensor) for tokens of `shape`."""
    m = as_mask(mask)
    _, batch, n = _layout(shape)
    present = None if m is None else m.token_mask(shape, device)
    if present is None:
        present = torch.ones(batch, n, dtype=torch.bool, device=device)
    allowed = None if m is None else m.pair_mask(shape, device)
    return Resolved(present, allowed, None if m is None else m.pairs)


def live_rows(multiplicity: Tensor, allowed: Tensor | None) -> Tensor:
    """(batch, n) bool: the tokens that move, present (w_i > 0) with at least one key (K_i ≠ ∅).

    multiplicity: (batch, n) w (0 = absent). allowed: (1 or batch, n, n) bool or None (every pair).
    """
    present = multiplicity > 0
    if allowed is None:
        return present
    return present & (allowed & present.unsqueeze(-2)).any(-1)
