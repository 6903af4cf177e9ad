"""The vector field of attention dynamics: a rule, scores, a value matrix and a manifold, combined at the call site.

    flat   (R^d):  ż_i = V (Σ_j P_ij z_j − z_i)            the paper's layer is its Euler step of size α/(1+α)
    sphere (S^{d−1}): ẋ_i = P⊥_{x_i} (V Σ_j P_ij x_j),   P⊥_x y = y − ⟨x, y⟩ x   (the layer-norm models SA / USA)

P is the attention `rule`'s matrix (`Hardmax`, `Softmax`, `Localmax`, `Unnormalised`, `hardmax.dynamics.rules`)
computed from the scores s_ij = ⟨Q z_i, K z_j⟩ = z_iᵀ A z_j that a `Scores` object gives at time t:

- `Bilinear(A)`: a fixed A (None: the identity). A may be (d, d) or one per sequence, (batch, d, d) — a whole
  ensemble of parameter values (the phase diagram's β I, say) runs as one batch.
- `QK(Q, K)`: A = QᵀK, not symmetric in general (softmax rules; hardmax needs a symmetric positive definite A).
- `Rescaled(scores, V)`: A(t) = e^{tVᵀ} A e^{tV}, the scores of the rescaled tokens z = e^{−tV} x of the
  unnormalised flow ẋ_i = Σ_j P_ij V x_j (Geshkovski, Letrouit, Polyanskiy, Rigollet 2023, "The emergence of
  clusters in self-attention dynamics", where z_i clusters towards polytopes and hyperplanes).

The manifold is any object of the `Manifold` protocol (`hardmax.dynamics.manifolds`: `Flat()`, `Sphere()`, or a
class of your own). Who attends to whom: `solve(..., mask=Causal())` (any pair mask of `hardmax.dynamics.masks`)
binds the restriction to the field with `Field.restricted(allowed)`; the rule then sees `allowed` (batch or 1, n, n),
and a token with no allowed key does not move. A new field is a new `Scores`, rule or manifold class, and nothing
else changes (CONTRIBUTING.md).
"""

from __future__ import annotations

import copy
import inspect
import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from hardmax.dynamics.inputs import as_tensor
from hardmax.dynamics.manifolds import Flat, Manifold, Sphere, missing_members
from hardmax.dynamics.masks import live_rows
from hardmax.dynamics.rules import AttentionRule, Hardmax, Softmax

__all__ = ["QK", "Bilinear", "Field", "Flat", "Manifold", "Rescaled", "Scores", "Sphere"]


@runtime_checkable
class Scores(Protocol):
    """What a field needs from its scores: the bilinear form A(t) with s_ij = z_iᵀ A(t) z_j."""

    def matrix(self, t: float | Tensor, like: Tensor) -> Tensor | None:
        """(d, d) or (batch, d, d) A(t) in `like`'s dtype and device; None for the identity."""
        ...

    @property
    def symmetric(self) -> bool:
        """Whether A(t) is symmetric (hardmax needs it)."""
        ...

    def rows(self, rows: slice) -> Scores:
        """The scores of a slice of the sequences (itself unless it holds one matrix per sequence)."""
        ...


def _matrix(x, name: str) -> Tensor:
    t = as_tensor(x, name)
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if t.dim() not in (2, 3) or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{name} must be a square (d, d) matrix or a (batch, d, d) stack, got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return t


@dataclass(frozen=True, eq=False)
class Bilinear:
    """Scores s_ij = z_iᵀ A z_j with a fixed A: (d, d), (batch, d, d) (one per sequence), or None (identity)."""

    A: Tensor | None = None

    def __post_init__(self):
        if self.A is not None:
            object.__setattr__(self, "A", _matrix(self.A, "A"))

    def matrix(self, t, like: Tensor) -> Tensor | None:
        """(d, d) or (batch, d, d) A in `like`'s dtype and device, at any time `t`; None for the identity."""
        return None if self.A is None else self.A.to(dtype=like.dtype, device=like.device)

    def rows(self, rows: slice) -> Bilinear:
        """The scores of the sequences `rows`: A sliced when it holds one matrix per sequence, else itself."""
        return self if self.A is None or self.A.dim() == 2 else Bilinear(self.A[rows])

    @property
    def symmetric(self) -> bool:
        """Whether A = Aᵀ exactly (the identity is)."""
        return self.A is None or bool(torch.equal(self.A, self.A.transpose(-1, -2)))


@dataclass(frozen=True, eq=False)
class QK:
    """Scores s_ij = ⟨Q z_i, K z_j⟩ = z_iᵀ QᵀK z_j from query and key matrices Q, K (d', d)."""

    Q: Tensor
    K: Tensor

    def __post_init__(self):
        q, k = as_tensor(self.Q, "Q").to(torch.float64), as_tensor(self.K, "K").to(torch.float64)
        if q.dim() != 2 or q.shape != k.shape:
            raise ValueError(f"Q and K must be matrices of one shape (d', d), got {tuple(q.shape)} and "
                             f"{tuple(k.shape)}")
        for name, m in (("Q", q), ("K", k)):
            if not bool(torch.isfinite(m).all()):
                raise ValueError(f"{name} contains NaN or inf")
        if not bool(torch.isfinite(q.T @ k).all()):
            raise ValueError("QᵀK overflows float64: scale Q and K")
        object.__setattr__(self, "Q", q)
        object.__setattr__(self, "K", k)

    def matrix(self, t, like: Tensor) -> Tensor:
        """(d, d) A = QᵀK in `like`'s dtype and device, the same at every time `t`."""
        return (self.Q.T @ self.K).to(dtype=like.dtype, device=like.device)

    def rows(self, rows: slice) -> QK:
        """Itself: Q and K are shared by every sequence."""
        return self

    @property
    def symmetric(self) -> bool:
        """Whether QᵀK is symmetric, to 1e3 eps times its largest entry."""
        a = self.Q.T @ self.K
        return bool(torch.allclose(a, a.T, rtol=0, atol=1e3 * torch.finfo(a.dtype).eps * float(a.abs().max())))


@dataclass(frozen=True, eq=False)
class Rescaled:
    """Scores of the rescaled tokens: A(t) = e^{tVᵀ} A e^{tV}, A from `scores` (2023 clustering paper, eq. (2.4)).

    Solving ż_i = V(Σ_j P_ij z_j − z_i) with these scores gives z_i(t) = e^{−tV} x_i(t) for the unnormalised
    flow ẋ_i = Σ_j P_ij V x_j with the fixed scores of `scores`: pair it with `Field(value=V)`.
    """

    scores: Scores
    V: Tensor

    def __post_init__(self):
        v = _matrix(self.V, "V")
        if v.dim() != 2:
            raise ValueError("Rescaled needs one (d, d) value matrix V")
        inner = self.scores.matrix(0.0, torch.empty(0, dtype=torch.float64))
        if inner is not None and tuple(inner.shape[-2:]) != tuple(v.shape):
            raise ValueError(f"Rescaled: V is {tuple(v.shape)} but the scores' A is {tuple(inner.shape[-2:])}")
        object.__setattr__(self, "V", v)

    def matrix(self, t, like: Tensor) -> Tensor:
        """(d, d) or (batch, d, d) A(t) = e^{tVᵀ} A e^{tV} in `like`'s dtype and device (symmetrised when A is)."""
        # e^{tV} in float64 on the CPU (d × d), whatever the time's type (torchdiffeq passes a tensor) and device
        e = torch.linalg.matrix_exp(float(t) * self.V.detach().cpu().to(torch.float64))
        e = e.to(dtype=like.dtype, device=like.device)
        inner = self.scores.matrix(t, like)
        a = e.T @ e if inner is None else e.T @ inner @ e
        return 0.5 * (a + a.transpose(-1, -2)) if self.scores.symmetric else a

    @property
    def symmetric(self) -> bool:
        """Whether the inner scores are symmetric (then so is every A(t))."""
        return self.scores.symmetric

    def rows(self, rows: slice) -> Rescaled:
        """The rescaled scores of the sequences `rows`: the inner scores sliced, the same V."""
        return Rescaled(self.scores.rows(rows), self.V)


@dataclass(frozen=True, eq=False)
class Field:
    """The vector field of the dynamics: `rule` (P), `scores` (A(t)), `value` V (None: the identity), `manifold`.

    Field(Hardmax()) with the defaults is the paper's: ż_i = Σ_j P_ij z_j − z_i, P the hardmax matrix of
    ⟨z_i, z_j⟩, in R^d. The manifold is any `Manifold`: `Flat()` (R^d, the default), `Sphere()` or a class of
    your own; its `velocity` gives the equation. `velocity(t, z, w)` maps tokens (batch, n, d) and multiplicities
    (batch, n) to the velocity (batch, n, d); absent tokens (w = 0) do not move; w = None: every token present,
    multiplicity 1. `allowed`: who may attend to whom, (batch or 1, n, n) bool, set by `restricted` (what `solve`
    does for a pair mask such as `Causal()`), not by the constructor; None: every token attends to every present one.
    """

    rule: AttentionRule
    scores: Scores = field(default_factory=Bilinear)
    value: Tensor | None = None
    manifold: Manifold = field(default_factory=Flat)
    allowed: Tensor | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if isinstance(self.rule, type) or not isinstance(self.rule, AttentionRule):
            raise ValueError("rule must be an attention rule such as Hardmax() or Softmax(beta=...), "
                             f"got {self.rule!r}")
        if not isinstance(self.scores, Scores):
            raise ValueError(f"scores must be Bilinear(A), QK(Q, K) or Rescaled(...), got {self.scores!r}")
        if isinstance(self.manifold, type):
            raise ValueError(f"manifold must be an instance such as {self.manifold.__name__}(), not the class")
        if missing := missing_members(self.manifold):  # the Manifold protocol, asked member by member
            raise ValueError(f"manifold must be Flat(), Sphere() or an object with the Manifold members; "
                             f"{type(self.manifold).__name__} lacks {', '.join(missing)}")
        if self.value is not None:
            v = _matrix(self.value, "value")
            if v.dim() != 2:
                raise ValueError(f"value must be one (d, d) matrix, got {tuple(v.shape)}")
            object.__setattr__(self, "value", v)
        if isinstance(self.rule, Hardmax):
            if not self.scores.symmetric:
                raise ValueError("hardmax attention needs symmetric scores (A = Aᵀ, positive definite); "
                                 "QᵀK is not: use a softmax or localmax rule")
            A = _probe(self.scores)
            if A is not None and A.dim() == 3:
                raise ValueError("hardmax attention takes one (d, d) score matrix, not one per sequence")
            if A is not None and float(torch.linalg.eigvalsh(A.detach().cpu().to(torch.float64)).min()) <= 0:
                raise ValueError("hardmax attention needs a positive definite A; its smallest eigenvalue is "
                                 f"{float(torch.linalg.eigvalsh(A.detach().cpu().to(torch.float64)).min()):.3g}")

    def validate(self, d: int) -> None:
        """Refuse matrices of the wrong size for tokens of dimension d (one-line ValueError)."""
        for name, m in (("value", self.value), ("A", _probe(self.scores))):
            if m is not None and tuple(m.shape[-2:]) != (d, d):
                raise ValueError(f"{name} must be ({d}, {d}) to match tokens of dimension {d}, "
                                 f"got {tuple(m.shape[-2:])}")
        if d < self.manifold.min_dimension:
            raise ValueError(f"tokens on {self.manifold.name} need dimension d ≥ {self.manifold.min_dimension}, "
                             f"got d = {d}")

    def rows(self, rows: slice) -> Field:
        """The field of a slice of the sequences (scores with one matrix per sequence, and a pair restriction with
        one matrix per sequence, are sliced)."""
        part = Field(self.rule, self.scores.rows(rows), self.value, self.manifold)
        a = self.allowed
        return part if a is None else part.restricted(a if a.shape[0] == 1 else a[rows])

    def restricted(self, allowed: Tensor | None) -> Field:
        """This field with attention restricted to `allowed` (batch or 1, n, n) bool, allowed[b, i, j] = token i may
        attend to token j (None: no restriction): s̃_ij = s_ij + b_ij, b_ij = −inf where not allowed, and a token
        with no allowed key does not move (`hardmax.dynamics.masks`). What `solve` runs for a pair mask.

        Raises:
            ValueError: the rule's `matrix` or `targets` takes no `allowed` argument (a rule of your own written
                before pair masks: it runs token masks only).
        """
        if allowed is not None:
            missing = [name for name in ("matrix", "targets") if not _takes_allowed(getattr(self.rule, name))]
            if missing:
                raise ValueError(f"{type(self.rule).__name__} takes no pair mask: its {' and '.join(missing)} "
                                 "need an allowed= argument (see AttentionRule); token masks run as before")
            if allowed.dtype != torch.bool or allowed.dim() != 3 or allowed.shape[-1] != allowed.shape[-2]:
                raise ValueError(f"allowed must be a (batch or 1, n, n) bool tensor, got {allowed.dtype} of shape "
                                 f"{tuple(allowed.shape)}")
        out = copy.copy(self)
        object.__setattr__(out, "allowed", allowed)
        return out

    def V(self, like: Tensor) -> Tensor | None:
        """(d, d) the value matrix V in `like`'s dtype and device; None for the identity."""
        return None if self.value is None else self.value.to(dtype=like.dtype, device=like.device)

    def attention(self, t, z: Tensor, w: Tensor | None) -> Tensor:
        """(batch, n, n) the attention matrix P at time t (restricted to `allowed` when set)."""
        return self.rule.matrix(z, _ones(z) if w is None else w, self.scores.matrix(t, z), **self._pairs())

    def targets(self, t, z: Tensor, w: Tensor | None) -> Tensor:
        """(batch, n, d) Σ_j P_ij z_j at time t (restricted to `allowed` when set)."""
        A = self.scores.matrix(t, z)
        if type(self.rule) is Softmax and not torch.is_grad_enabled():  # in-place steps: no autograd
            return _softmax_targets(z, w, A, float(self.rule.beta), self.allowed)
        return self.rule.targets(z, _ones(z) if w is None else w, A, **self._pairs())

    def velocity(self, t, z: Tensor, w: Tensor | None) -> Tensor:
        """(batch, n, d) ż at time t; 0 for absent tokens and for tokens with no allowed key."""
        v = self.manifold.velocity(z, self.targets(t, z, w), self.V(z))
        # where, not a product: a sequence of padding only has NaN targets (no key to attend to)
        moving = self.moving(z, w)
        return v if moving is None else torch.where(moving.unsqueeze(-1), v, v.new_zeros(()))

    def moving(self, z: Tensor, w: Tensor | None) -> Tensor | None:
        """(batch, n) bool, the tokens that move: present (w > 0) with at least one allowed key; None: all of them
        (w None, no pair restriction). z: (batch, n, d), for the shape and device."""
        if self.allowed is None:
            return None if w is None else w > 0
        return live_rows(_ones(z) if w is None else w, self.allowed)

    def _pairs(self) -> dict:
        return {} if self.allowed is None else {"allowed": self.allowed}

    @property
    def requires_grad(self) -> bool:
        """Whether a matrix of the field (V, A, Q, K, a rescaling V) requires grad: `solve` then records the graph."""
        return any(t.requires_grad for t in _tensors(self))

    @property
    def paper(self) -> bool:
        """Whether this is the paper's field (V = I, fixed symmetric A, R^d, hardmax or softmax): the fast
        paths of `solve` (the compiled kernel, the compact hardmax path) serve it."""
        return (self.value is None and self.manifold.euclidean and type(self.scores) is Bilinear
                and self.scores.symmetric and (self.scores.A is None or self.scores.A.dim() == 2)
                and isinstance(self.rule, Hardmax | Softmax) and self.allowed is None)


def _ones(z: Tensor) -> Tensor:
    return torch.ones(z.shape[:-1], dtype=z.dtype, device=z.device)


def _softmax_targets(z: Tensor, w: Tensor | None, A: Tensor | None, beta: float,
                     allowed: Tensor | None = None) -> Tensor:
    """Σ_j P_ij z_j for softmax P without autograd: one score product (log w_j as its bias where some token is
    absent or merged), then torch.softmax (float32) or the row maximum subtracted, exp in place and a division
    (float64), and one product with the tokens laid out (batch, d, n). For the short sequences and small d of
    particle systems this is 2-3x the fused attention kernel the classifier uses (benchmarks/bench_flows.py).
    `allowed` (batch or 1, n, n) bool: the scores of pairs not allowed become −inf after the product (so an
    all-True restriction is bit for bit no restriction); a row with no allowed key gets target 0, never NaN."""
    q = queries(z, A)
    zt = z.transpose(-1, -2).contiguous()  # (batch, d, n): both products run faster with d on the rows
    if w is None:  # no padding, no merged tokens: no bias to add (and to copy)
        s = torch.bmm(q, zt)
        s = s.mul_(beta) if beta != 1 else s
    else:
        s = torch.baddbmm(torch.log(w).unsqueeze(-2), q, zt, alpha=beta)
    if allowed is None:
        return _softmax_targets_of(s, zt)
    s = s.masked_fill_(~allowed, -math.inf)
    dead = torch.isneginf(s.amax(-1, keepdim=True))  # (batch, n, 1): rows with no allowed present key
    if not bool(dead.any()):
        return _softmax_targets_of(s, zt)
    return _softmax_targets_of(s.masked_fill_(dead, 0.0), zt).masked_fill_(dead, 0.0)  # finite, then 0


def _softmax_targets_of(s: Tensor, zt: Tensor) -> Tensor:
    """(batch, n, d) Σ_j softmax(s)_ij z_j from scores s (batch, n, n, overwritten) and the tokens zt (batch, d, n)."""
    if s.dtype == torch.float32:  # torch.softmax is vectorised for float32 (1.5x the steps below), not float64 (0.5x)
        return torch.bmm(zt, torch.softmax(s, -1).transpose(-1, -2)).transpose(-1, -2)
    s = s.sub_(s.amax(-1, keepdim=True)).exp_()
    return torch.bmm(zt, s.transpose(-1, -2)).transpose(-1, -2) / s.sum(-1, keepdim=True)


def queries(z: Tensor, A: Tensor | None) -> Tensor:
    """(batch, n, d) the queries z A (row vectors), s_ij = ⟨queries_i, z_j⟩. A diagonal A (one per sequence:
    the β I of a phase diagram) is applied as a product by its diagonal, exactly what z @ A computes."""
    if A is None:
        return z
    diagonal = torch.diagonal(A, dim1=-2, dim2=-1)
    if A.shape[-1] == 1 or not bool(torch.count_nonzero(A - torch.diag_embed(diagonal))):
        return z * diagonal.unsqueeze(-2)
    return z @ A


def _takes_allowed(method) -> bool:
    """Whether a rule's method accepts an `allowed=` argument (by name, or as **kwargs)."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "allowed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _probe(scores: Scores) -> Tensor | None:
    return scores.matrix(0.0, torch.empty(0, dtype=torch.float64))


def _tensors(obj) -> list[Tensor]:
    """The tensors held by a field, its scores and their inner scores."""
    import dataclasses

    found = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Tensor):
            found.append(value)
        elif dataclasses.is_dataclass(value):
            found += _tensors(value)
    return found
