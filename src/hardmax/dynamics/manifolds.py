"""Where the tokens live: the `Manifold` protocol, and its two implementations `Flat()` (R^d) and `Sphere()` (S^{d−1}).

    Flat   (R^d):      ż_i = V (Σ_j P_ij z_j − z_i)                       retraction: the identity
    Sphere (S^{d−1}):  ẋ_i = P⊥_{x_i} (V Σ_j P_ij x_j),  P⊥_x y = y − ⟨x, y⟩ x   retraction: x / ‖x‖

A manifold is asked, never tested for its class: the engine (`Field.velocity`, the solvers, `solve`) calls
`velocity`, `retract`, `check` and `pad`; `Field.validate` reads `min_dimension`; the checks of
`hardmax.theory.flows` and the pictures of `hardmax.plots.scene` read `euclidean`, `unit_sphere` and
`cluster_tolerance`; the `Renormalised` solver reads `renormalisable`. A new manifold is one class with these
members (CONTRIBUTING.md), and nothing else changes. The field's rule, scores and value live in `field`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

__all__ = ["Flat", "Manifold", "Sphere"]


@runtime_checkable
class Manifold(Protocol):
    """What the dynamics, their checks and their pictures need from the place the tokens live.

    Tokens z are (batch, n, d) (`check` takes any (..., d)); `target` is Σ_j P_ij z_j, (batch, n, d); V is the
    (d, d) value matrix, None for the identity. `Flat()` and `Sphere()` implement it; any object with these
    members can be given to `Field(..., manifold=...)`.
    """

    @property
    def name(self) -> str:
        """How messages and reports name it ("R^d", "the unit sphere S^{d−1}")."""
        ...

    @property
    def min_dimension(self) -> int:
        """The smallest token dimension d it exists in (`Field.validate` refuses smaller d)."""
        ...

    @property
    def euclidean(self) -> bool:
        """Whether it is R^d itself with ż_i = V(Σ_j P_ij z_j − z_i) and the identity retraction: the paper's
        layers (`Field.paper`, the fast paths of `solve`) and the convex-hull and 2023 rescaled theorems assume it."""
        ...

    @property
    def unit_sphere(self) -> bool:
        """Whether it is the unit sphere S^{d−1} with ẋ_i = P⊥_{x_i}(V Σ_j P_ij x_j): the norms check, the SA/USA
        theorems (one cluster, the energy E_β) and the unit circle / sphere of the pictures assume it."""
        ...

    @property
    def renormalisable(self) -> bool:
        """Whether `Renormalised`'s step-then-retract x ← R(x + dt V Σ_j P_ij x_j) (no projection first) is a
        scheme of its field: its velocity is the tangent projection of V Σ_j P_ij x_j, so the step agrees with
        Euler's to O(dt²)."""
        ...

    def velocity(self, z: Tensor, target: Tensor, V: Tensor | None) -> Tensor:
        """(batch, n, d) the velocity of tokens `z` towards their targets Σ_j P_ij z_j, tangent at `z`."""
        ...

    def retract(self, z: Tensor) -> Tensor:
        """(..., d) each token of `z` brought back onto the manifold (after a step; batched over leading axes)."""
        ...

    def check(self, z: Tensor) -> None:
        """Raise a one-line ValueError unless every token of `z` (..., d) lies on the manifold to rounding."""
        ...

    def pad(self, z: Tensor, mask: Tensor) -> Tensor:
        """(batch, n, d) `z` with its padding (`mask` (batch, n) False) at points of the manifold (where `retract`
        and `velocity` stay finite; `check` then looks at padding and real tokens alike, with no copy of the real
        ones); padding never moves and is put back as given; real tokens unchanged."""
        ...

    def cluster_tolerance(self, size: float) -> float:
        """The default distance at which two tokens are one cluster, for a start of diameter `size` (> 0)."""
        ...


_MEMBERS = tuple(name for name in vars(Manifold) if not name.startswith("_"))
_METHODS = tuple(name for name in _MEMBERS if not isinstance(vars(Manifold)[name], property))


def missing_members(obj: object) -> tuple[str, ...]:
    """The `Manifold` members the instance `obj` lacks, in the protocol's order (a method that is not callable
    counts as lacking); empty: it conforms."""
    return tuple(name for name in _MEMBERS
                 if not hasattr(obj, name) or (name in _METHODS and not callable(getattr(obj, name))))


@dataclass(frozen=True)
class Flat:
    """Tokens in R^d: velocity V(Σ_j P_ij z_j − z_i); nothing to retract, nothing to check."""

    @property
    def name(self) -> str:
        """"R^d"."""
        return "R^d"

    @property
    def min_dimension(self) -> int:
        """1: R^d exists for every d ≥ 1."""
        return 1

    @property
    def euclidean(self) -> bool:
        """True: the paper's space."""
        return True

    @property
    def unit_sphere(self) -> bool:
        """False: tokens in R^d have any norm."""
        return False

    @property
    def renormalisable(self) -> bool:
        """False: z + dt V Σ_j P_ij z_j is not a step of ż = V(Σ_j P_ij z_j − z) (the −z is missing)."""
        return False

    def velocity(self, z: Tensor, target: Tensor, V: Tensor | None) -> Tensor:
        """(batch, n, d) V (target − z) from tokens `z` and targets Σ_j P_ij z_j, both (batch, n, d) (V None: I)."""
        v = target - z
        return v if V is None else v @ V.transpose(-1, -2)

    def retract(self, z: Tensor) -> Tensor:
        """`z` itself: R^d needs no retraction."""
        return z

    def check(self, z: Tensor) -> None:
        """Accept any tokens: R^d has no constraint."""
        return None

    def pad(self, z: Tensor, mask: Tensor) -> Tensor:
        """`z` itself: padding may be any finite point of R^d."""
        return z

    def cluster_tolerance(self, size: float) -> float:
        """1e-3 · size: a thousandth of the start's diameter."""
        return 1e-3 * size


@dataclass(frozen=True)
class Sphere:
    """Tokens on the unit sphere S^{d−1}: velocity P⊥_{x_i}(V Σ_j P_ij x_j); a step is retracted by x / |x|."""

    @property
    def name(self) -> str:
        """"the unit sphere S^{d−1}"."""
        return "the unit sphere S^{d−1}"

    @property
    def min_dimension(self) -> int:
        """2: S^{d−1} needs d ≥ 2 (S^0 is two points: nothing moves along it)."""
        return 2

    @property
    def euclidean(self) -> bool:
        """False: the tokens are constrained to ‖x‖ = 1."""
        return False

    @property
    def unit_sphere(self) -> bool:
        """True."""
        return True

    @property
    def renormalisable(self) -> bool:
        """True: (x + dt u) / ‖x + dt u‖ = x + dt P⊥_x u + O(dt²), the sphere codes' scheme."""
        return True

    def velocity(self, z: Tensor, target: Tensor, V: Tensor | None) -> Tensor:
        """(batch, n, d) P⊥_z (V target) = V target − ⟨V target, z⟩ z: tangent to the sphere at `z` (V None: I).

        `z` and `target` (Σ_j P_ij z_j) are (batch, n, d).
        """
        drift = target if V is None else target @ V.transpose(-1, -2)
        return drift.addcmul(torch.linalg.vecdot(drift, z).unsqueeze(-1), z, value=-1)

    def retract(self, z: Tensor) -> Tensor:
        """(..., d) z / ‖z‖: each token back on the unit sphere."""
        return z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)

    def check(self, z: Tensor) -> None:
        """Raise ValueError unless every token of `z` has norm 1, to 1e3 eps of its dtype."""
        norms = torch.linalg.vector_norm(z.detach(), dim=-1)
        if not bool(((norms - 1).abs() <= 1e3 * torch.finfo(z.dtype).eps).all()):
            raise ValueError("tokens on the sphere must have norm 1; normalise them (z / |z|) first")

    def pad(self, z: Tensor, mask: Tensor) -> Tensor:
        """(batch, n, d) `z` with padding at the unit vector e_1, so that retractions stay finite."""
        return torch.where(mask.unsqueeze(-1), z, torch.nn.functional.one_hot(torch.tensor(0), z.shape[-1]).to(z))

    def cluster_tolerance(self, size: float) -> float:
        """1e-2, whatever the start: the sphere's diameter is 2."""
        return 1e-2
