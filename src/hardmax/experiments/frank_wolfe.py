"""Hardmax attention as Frank–Wolfe (Alcalde, Geshkovski, Ruiz-Balet, arXiv 2508.09628): its claims measured.

    hardmax_layers(tokens, A, alpha=, layers=)  the paper's layers z ← z + γ_k (mean_{C_i} z_j − z_i) for any symmetric
                                     A, semidefinite included (`simulate` asks A ≻ 0 of hardmax): the engine's own
                                     layer (`attention_step`), one batched call per layer
    dominance_cells(tokens, vertices, A)  the cell of each token: argmax_v ⟨A z, v⟩ over the polygon's vertices
    voronoi_check(...)     -> VoronoiReport: A ⪰ 0, vertices stay fixed, interior tokens keep their cell and move on
                              straight lines to its vertex, the distance shrinking by exactly Π_k (1 − γ_k)
    contraction_rate(...)  -> ContractionRate: A ⪯ 0, one cluster; at the origin or not; geometric (the first
                              version of the abstract) or O(1/k) on the energy (the second): measured, and said
    escape_times(...)      -> EscapeTimes: finite β, softmax from near-vertex states: the layers until a token leaves
                              its vertex, beside the symmetric polygon's exact recurrence; the slope of log T over β

The layer is a Frank–Wolfe step for f(z) = ½⟨A z, z⟩ over the hull of the current tokens: ∇f(z_i) = A z_i, and the
linear maximisation over the hull is attained at a token, argmax_j ⟨A z_i, z_j⟩. Their code (borjanG/2025-
transformers-frank-wolfe) only draws the cells (argmax_i ⟨x, v_i⟩, "self-inclusion": ⟨v_i, v_i⟩ ≥ ⟨v_i, v_j⟩);
every number here is measured on the library's layers. Each report has `.check()` (`Check`s, as `hardmax.theory`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import Bilinear, Euler, Field, Hardmax, Save, Softmax, attention_step, simulate, solve
from hardmax.dynamics.solvers import layer_contraction, layer_step
from hardmax.theory.check import Check

__all__ = ["ContractionRate", "EscapeTimes", "Rate", "VoronoiReport", "contraction_rate", "dominance_cells",
           "escape_times", "hardmax_layers", "voronoi_check"]

#: Which law a measured decay follows: e^{−ck} ("geometric") or k^{−p} ("sublinear").
Rate = Literal["geometric", "sublinear"]

_F64 = torch.float64


def _matrix(A, d: int, sign: int = 0) -> Tensor:
    """A as a symmetric (d, d) float64 tensor (None: the identity); `sign` +1 / −1 asks it to be positive / negative
    semidefinite."""
    if A is None:
        A = torch.eye(d, dtype=_F64)
    A = torch.as_tensor(A, dtype=_F64)
    if A.shape != (d, d):
        raise ValueError(f"A must have shape ({d}, {d}) to match tokens of dimension {d}, got {tuple(A.shape)}")
    if not torch.isfinite(A).all():
        raise ValueError("A contains NaN or inf")
    scale = float(A.abs().max().clamp(min=1))
    if not torch.allclose(A, A.T, rtol=0, atol=1e-12 * scale):
        raise ValueError("A must be symmetric")
    eig = torch.linalg.eigvalsh(A)
    if sign > 0 and float(eig.min()) < -1e-12 * scale:
        raise ValueError(f"A must be positive semidefinite; its smallest eigenvalue is {float(eig.min()):.3g}")
    if sign < 0 and float(eig.max()) > 1e-12 * scale:
        raise ValueError(f"A must be negative semidefinite; its largest eigenvalue is {float(eig.max()):.3g}")
    return (A + A.T) / 2


def _alphas(alpha, layers: int) -> Tensor:
    """(layers,) α_k > 0 from a scalar or one value per layer."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
        raise ValueError(f"layers must be an integer ≥ 0, got {layers!r}")
    a = torch.as_tensor(alpha, dtype=_F64).flatten()
    if a.numel() == 1:
        a = a.expand(layers)
    if a.numel() != layers:
        raise ValueError(f"alpha must be one number or one per layer ({layers}), got {a.numel()}")
    if not (torch.isfinite(a).all() and (a > 0).all()):
        raise ValueError("alpha must be finite and > 0")
    return a.clone()


@contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op torch thread for loops of thousands of small layers: a thread pool spins between the calls
    (measured: 15 s instead of 0.12 s for `contraction_rate(sequences=16, layers=200)` on a busy 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _positive(**values) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")


def hardmax_layers(tokens: Tensor, A, *, alpha: float | Sequence[float] | Tensor, layers: int) -> Tensor:
    """The paper's hardmax layers for any symmetric A, semidefinite or indefinite.

        z_i^{k+1} = z_i^k + γ_k (mean_{j ∈ C_i} z_j^k − z_i^k),   C_i = argmax_j ⟨A z_i^k, z_j^k⟩,   γ_k = α_k/(1+α_k)

    `attention_step(rule=Hardmax())` once per layer (ties kept by rule (★)), every sequence in each call: the same
    layer `simulate` runs, without its A ≻ 0 requirement (Theorem 2.1's), which the semidefinite cases break.

    Args:
        tokens: (batch, n, d) or (n, d) starts (computed in float64). A: (d, d) symmetric; None: the identity.
        alpha: α > 0, one number or one per layer. layers: how many layers (≥ 0).
    Returns:
        (layers + 1, *tokens.shape): the start and every layer.
    """
    z = torch.as_tensor(tokens, dtype=_F64)
    if z.dim() not in (2, 3) or 0 in z.shape:
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d), got {tuple(z.shape)}")
    if not torch.isfinite(z).all():
        raise ValueError("tokens contain NaN or inf")
    A = _matrix(A, z.shape[-1])
    a = _alphas(alpha, layers)
    batched = z if z.dim() == 3 else z.unsqueeze(0)
    out = [batched]
    with _one_thread():
        for k in range(layers):  # a loop over layers only: every token of every sequence in one call
            out.append(attention_step(out[-1], alpha=float(a[k]), rule=Hardmax(), A=A))
    path = torch.stack(out)
    return path if z.dim() == 3 else path[:, 0]


def dominance_cells(tokens: Tensor, vertices: Tensor, A) -> Tensor:
    """(..., n) the cell of each token: argmax_v ⟨A z_i, v⟩ over the vertices (their "dominance cells").

    tokens (..., n, d), vertices (..., K, d) (batch axes broadcast), A (d, d). A token on a boundary gets the lowest
    index; the checks use cells' interiors (random starts are on no boundary).
    """
    z, v = torch.as_tensor(tokens, dtype=_F64), torch.as_tensor(vertices, dtype=_F64)
    if z.dim() < 2 or v.dim() < 2 or z.shape[-1] != v.shape[-1]:
        raise ValueError(f"tokens (..., n, d) and vertices (..., K, d) must share d, got {tuple(z.shape)} and "
                         f"{tuple(v.shape)}")
    return ((z @ _matrix(A, z.shape[-1])) @ v.transpose(-1, -2)).argmax(-1)


def _polygons(batch: int, K: int, interior: int, A: Tensor, radii: tuple[float, float], own_cells: bool,
              g: torch.Generator, tries: int = 200) -> tuple[Tensor, Tensor]:
    """(tokens (batch, K + m, 2), K vertices first then m interior points; own (batch,) bool: every vertex strictly
    in its own cell). Vertices at random angles and radii in `radii` on the ellipse ⟨A v, v⟩ = r² (A ≻ 0, as their
    `quadratic.py` maps the circle; a singular A: the circle), kept when the polygon is convex and holds the origin,
    and, with `own_cells`, when ⟨A v, v⟩ > ⟨A v, w⟩ + 10⁻³ for all w ≠ v; interior points are Dirichlet(1) mixtures
    of the vertices."""
    low, high = radii
    definite = float(torch.linalg.eigvalsh(A).min()) > 1e-12 * float(A.abs().max())
    to_ellipse = torch.linalg.inv(torch.linalg.cholesky(A)) if definite else torch.eye(2, dtype=_F64)
    kept, own_kept = [], []
    for _ in range(tries):
        theta = torch.sort(torch.rand(16 * batch, K, generator=g, dtype=_F64) * 2 * math.pi).values
        r = low + (high - low) * torch.rand(16 * batch, K, generator=g, dtype=_F64)
        v = torch.stack([r * theta.cos(), r * theta.sin()], -1) @ to_ellipse  # v = r L^{-T} u: ⟨A v, v⟩ = r²
        ahead, after = v.roll(-1, 1) - v, v.roll(-2, 1) - v.roll(-1, 1)
        convex = (ahead[..., 0] * after[..., 1] - ahead[..., 1] * after[..., 0] > 1e-3).all(-1)
        centred = theta.diff(dim=-1, append=theta[:, :1] + 2 * math.pi).amax(-1) < math.pi  # a linear map keeps it
        s = (v @ A) @ v.transpose(-1, -2)
        others = s.masked_fill(torch.eye(K, dtype=torch.bool), -math.inf).amax(-1)
        own = (s.diagonal(dim1=-2, dim2=-1) > others + 1e-3).all(-1)
        ok = convex & centred & (own if own_cells else True)
        kept.append(v[ok])
        own_kept.append(own[ok])
        if sum(len(k) for k in kept) >= batch:
            break
    v, own = torch.cat(kept)[:batch], torch.cat(own_kept)[:batch]
    if len(v) < batch:
        raise ValueError(f"found {len(v)} of {batch} {K}-gons with every vertex in its own cell for this A; use "
                         "fewer vertices, radii closer to 1 or own_cells=False")
    weights = -torch.log(torch.rand(batch, interior, K, generator=g, dtype=_F64))
    return torch.cat([v, (weights / weights.sum(-1, keepdim=True)) @ v], 1), own


@dataclass(frozen=True)
class VoronoiReport:
    """A ⪰ 0: what the hardmax layers do to polygons and the tokens inside them (`voronoi_check`).

    Attributes:
        vertex_move: the largest distance a vertex moved, over the polygons whose every vertex lies in its own cell
            (the hypothesis; 0: fixed).
        cells_kept: the fraction of their interior tokens whose cell never changed, over every layer.
        off_line: the largest distance of an interior token from the line through its start and its cell's vertex.
        rate_error: the largest |‖z_i(k) − v‖ / ‖z_i(0) − v‖ − Π_{l<k} (1 − γ_l)| over those tokens and layers.
        factor: Π_l (1 − γ_l) over all layers: the predicted ratio at the end.
        own_cells: the fraction of polygons satisfying the hypothesis.
        moved_without: the fraction of the polygons without it in which some vertex moved (nan: there were none).
        layers, sequences: the size of the run. engine: which engine ran the layers ("compiled" for A ≻ 0).
    """

    vertex_move: float
    cells_kept: float
    off_line: float
    rate_error: float
    factor: float
    own_cells: float
    moved_without: float
    layers: int
    sequences: int
    engine: str

    def check(self, tol: float = 1e-12) -> Check:
        """The Voronoi picture where its hypothesis holds: vertices fixed, every cell kept, straight lines and the
        rate Π(1 − γ_k) to `tol`."""
        ok = self.own_cells > 0 and self.vertex_move <= tol and self.cells_kept == 1.0 and self.off_line <= tol \
            and self.rate_error <= tol
        value = (f"vertices moved ≤ {self.vertex_move:.3g}, cells kept {self.cells_kept:.4f}, off line ≤ "
                 f"{self.off_line:.3g}, rate error ≤ {self.rate_error:.3g} over {self.layers} layers "
                 f"({self.own_cells:.0%} of {self.sequences} polygons with every vertex in its own cell)")
        return Check("voronoi", "A ⪰ 0: vertices stationary, interior tokens keep their cell and go straight to its "
                     "vertex, distance × Π(1 − γ_k) (AGR 2025)", "passed" if ok else "failed", value,
                     f"0 moves, all cells kept, errors ≤ {tol:g}", () if ok else (value,),
                     {"vertex_move": self.vertex_move, "cells_kept": self.cells_kept, "off_line": self.off_line,
                      "rate_error": self.rate_error, "own_cells": self.own_cells})


def voronoi_check(*, A=None, sequences: int = 64, vertices: int = 6, interior: int = 20,
                  alpha: float | Sequence[float] = 0.5, layers: int = 1000, radii: tuple[float, float] = (0.4, 1.0),
                  own_cells: bool = True, seed: int = 0) -> VoronoiReport:
    """Hardmax layers with A ⪰ 0 from random polygons (d = 2) and tokens inside them: the Voronoi picture measured.

    A ≻ 0 runs `simulate` (the compiled exact engine), a singular A `hardmax_layers`. An interior token z in the
    cell of vertex v moves to z + γ(v − z): ‖z(k) − v‖ = Π_{l<k} (1 − γ_l) ‖z(0) − v‖ on the segment [z(0), v],
    provided v is its own maximiser (⟨A v, v⟩ > ⟨A v, w⟩): `own_cells=False` drops that condition to show what
    happens without it. About 1 s on one core with the defaults.

    Args:
        A: (2, 2) positive semidefinite; None: the identity. sequences: polygons, each one sequence of the batch.
        vertices, interior: K vertices and m interior tokens per polygon. alpha: one α or one per layer.
        radii: the vertices' A-norms ⟨A v, v⟩^{1/2} are uniform in it (their `sample_vertices`: (0.4, 1)); equal
            radii put every vertex in its own cell.
    """
    _positive(sequences=sequences, interior=interior, layers=layers)
    if isinstance(vertices, bool) or not isinstance(vertices, int) or vertices < 3:
        raise ValueError(f"vertices must be an integer ≥ 3, got {vertices!r}")
    A = torch.eye(2, dtype=_F64) if A is None else _matrix(A, 2, sign=+1)
    a = _alphas(alpha, layers)
    if not (len(radii) == 2 and 0 < radii[0] <= radii[1]):
        raise ValueError(f"radii must be (low, high) with 0 < low ≤ high, got {radii!r}")
    z, own = _polygons(sequences, vertices, interior, A, (float(radii[0]), float(radii[1])), own_cells,
                       torch.Generator().manual_seed(seed))
    if float(torch.linalg.eigvalsh(A).min()) > 1e-12 * float(A.abs().max()):
        solution = simulate(z, alpha=a, layers=layers, A=A)
        path, engine = solution.tokens, solution.engine
    else:
        path, engine = hardmax_layers(z, A, alpha=a, layers=layers), "layers"
    move = (path[:, :, :vertices] - z[:, :vertices]).norm(dim=-1).amax((0, 2))  # (sequences,)
    moved_without = float((move[~own] > 0).double().mean()) if bool((~own).any()) else math.nan
    path, z = path[:, own], z[own]
    if len(z) == 0:
        return VoronoiReport(vertex_move=math.nan, cells_kept=math.nan, off_line=math.nan, rate_error=math.nan,
                             factor=float(layer_contraction(a).prod()), own_cells=0.0, moved_without=moved_without,
                             layers=layers, sequences=sequences, engine=engine)
    v = z[:, :vertices]
    inner = path[:, :, vertices:]  # (layers + 1, polygons, m, 2)
    cells = dominance_cells(inner, v, A)
    vertex = torch.gather(v, 1, cells[0].unsqueeze(-1).expand(-1, -1, 2))  # (polygons, m, 2) each token's vertex
    start, now = inner[0] - vertex, inner - vertex
    length = start.norm(dim=-1)
    cross = (now[..., 0] * start[..., 1] - now[..., 1] * start[..., 0]) / length  # distance from the line
    ratio = (now * start).sum(-1) / length**2  # the position along it
    expected = torch.cat([torch.ones(1, dtype=_F64), torch.cumprod(layer_contraction(a), 0)]).reshape(-1, 1, 1)
    kept = (cells == cells[0]).all(0)
    return VoronoiReport(vertex_move=float(move[own].max()), cells_kept=float(kept.double().mean()),
                         off_line=float(cross.abs().amax()), rate_error=float((ratio - expected).abs().amax()),
                         factor=float(expected[-1]), own_cells=float(own.double().mean()),
                         moved_without=moved_without, layers=layers, sequences=sequences, engine=engine)


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, R²) of the least-squares line y ≈ a + b x."""
    b, a = np.polyfit(x, y, 1)
    residual = y - (a + b * x)
    return float(b), float(1 - (residual**2).sum() / max(((y - y.mean()) ** 2).sum(), 1e-300))


@dataclass(frozen=True)
class ContractionRate:
    """A ⪯ 0: the cluster, its limit and the decay of the energy (`contraction_rate`), medians over sequences.

    Attributes:
        spread: (layers + 1,) max_i ‖z_i − z̄‖, z̄ = mean_j z_j (half the diameter to the diameter).
        energy: (layers + 1,) E_k = −½ mean_i ⟨A z_i, z_i⟩ (≥ 0).
        gap: (layers + 1,) E_k − E(c), c = mean_i z_i(K): the energy above that of the point the tokens gather at
            (E is convex: E_k ≥ E(mean_i z_i(k)); c is the limit once they are one cluster).
        limit: (sequences,) ‖mean_i z_i(K)‖ / max_i ‖z_i(0)‖: how far from the origin the tokens end.
        final_spread: (sequences,) spread(K) / spread(0).
        ratio, geometric_r2: the per-layer factor of the gap's geometric fit (gap_k ≈ c ratio^k) and its R².
        power, power_r2: the exponent of its power fit (gap_k ≈ c k^power; −1 for O(1/k)) and its R².
        fitted: the layers 1..fitted used by the fits (where the gap is above 10⁻¹² of gap_0).
    """

    spread: Tensor
    energy: Tensor
    gap: Tensor
    limit: Tensor
    final_spread: Tensor
    ratio: float
    geometric_r2: float
    power: float
    power_r2: float
    fitted: int

    @property
    def holds(self) -> Rate:
        """The law the energy gap follows: the fit with the larger R²."""
        return "geometric" if self.geometric_r2 >= self.power_r2 else "sublinear"

    def check(self) -> dict[str, Check]:
        """The abstracts' claims: `single_cluster` (both), `origin` (the first version's "at the origin"),
        `linear_rate` (the first version: geometric), `sublinear_rate` (the second: O(1/k) on the energy)."""
        collapsed, worst = float(self.final_spread.max()), float(self.limit.max())
        at_origin = float((self.limit <= 1e-9).double().mean())
        rate = (f"gap {self.holds}: ratio {self.ratio:.4f}/layer (R² {self.geometric_r2:.4f}), power "
                f"{self.power:.2f} (R² {self.power_r2:.4f}) over layers 1..{self.fitted}")
        at_least_1_over_k = self.holds == "geometric" or self.power <= -1 + 0.05

        def check(name: str, claim: str, ok: bool, value: str, expected: str, numbers: dict) -> Check:
            return Check(name, claim, "passed" if ok else "failed", value, expected, () if ok else (value,), numbers)

        return {"single_cluster": check("single_cluster", "A ⪯ 0: the tokens contract to one cluster",
                                        collapsed <= 1e-9, f"spread ≤ {collapsed:.3g} of its start", "≤ 1e-9",
                                        {"final_spread": collapsed}),
                "origin": check("origin", "… at the origin (arXiv v1 abstract)", worst <= 1e-9,
                                f"limit ‖z̄‖ up to {worst:.3g} of the start's radius (median "
                                f"{float(self.limit.median()):.3g}); {at_origin:.0%} at the origin",
                                "≤ 1e-9 in every sequence", {"limit_max": worst, "at_origin": at_origin}),
                "linear_rate": check("linear_rate", "… linearly (geometrically) (arXiv v1 abstract)",
                                     self.holds == "geometric", rate, "geometric fits better",
                                     {"ratio": self.ratio, "geometric_r2": self.geometric_r2}),
                "sublinear_rate": check("sublinear_rate", "energy at the rate O(1/k) (second version's abstract)",
                                        at_least_1_over_k, rate, "geometric, or power ≤ −1",
                                        {"power": self.power, "power_r2": self.power_r2})}


def contraction_rate(*, A=None, tokens: Tensor | None = None, sequences: int = 64, n: int = 16, d: int = 2,
                     alpha: float | Sequence[float] = 0.5, layers: int = 300, seed: int = 0) -> ContractionRate:
    """Hardmax layers with A ⪯ 0 (`hardmax_layers`): one cluster, where, and how fast.

    The layer is Frank–Wolfe for the concave f(z) = ½⟨A z, z⟩ over the current hull (maximised at the origin when
    the origin is in the hull): E_k = −½ mean_i ⟨A z_i, z_i⟩ is its gap to 0. The fits use the gap to the energy
    of the point the tokens gather at, E_k − E(c), over layers 1..k where it is above 10⁻¹² of its start (float64
    holds no more).
    About 0.6 s on one core with the defaults.

    Args:
        A: (d, d) negative semidefinite; None: −I. tokens: (batch, n, d) starts; None: `sequences` × n standard
            Gaussian tokens in R^d. alpha: one α or one per layer.
    """
    _positive(sequences=sequences, n=n, d=d, layers=layers)
    if tokens is None:
        z = torch.randn(sequences, n, d, generator=torch.Generator().manual_seed(seed), dtype=_F64)
    else:
        z = torch.as_tensor(tokens, dtype=_F64)
        if z.dim() != 3 or 0 in z.shape:
            raise ValueError(f"tokens must have shape (batch, n, d), got {tuple(z.shape)}")
    A = -torch.eye(z.shape[-1], dtype=_F64) if A is None else _matrix(A, z.shape[-1], sign=-1)
    path = hardmax_layers(z, A, alpha=alpha, layers=layers)  # (layers + 1, batch, n, d)
    energy = -0.5 * ((path @ A) * path).sum(-1).mean(-1)  # (layers + 1, batch)
    spread = (path - path.mean(-2, keepdim=True)).norm(dim=-1).amax(-1)  # (layers + 1, batch)
    centre = path[-1].mean(-2)  # (batch, d)
    gap = (energy + 0.5 * ((centre @ A) * centre).sum(-1)).median(-1).values
    e = gap.numpy()
    use = np.nonzero(e > 1e-12 * e[0])[0]
    fitted = int(use.max()) if len(use) else 0
    if fitted < 3:
        raise ValueError(f"the energy reached its end within {fitted} layers: nothing to fit (fewer tokens alike, "
                         "or a smaller alpha)")
    k = np.arange(1, fitted + 1, dtype=np.float64)
    slope, g2 = _fit(k, np.log(e[1:fitted + 1]))
    power, p2 = _fit(np.log(k), np.log(e[1:fitted + 1]))
    return ContractionRate(spread=spread.median(-1).values, energy=energy.median(-1).values, gap=gap,
                           limit=path[-1].mean(-2).norm(dim=-1) / z.norm(dim=-1).amax(-1),
                           final_spread=spread[-1] / spread[0], ratio=math.exp(slope), geometric_r2=g2,
                           power=power, power_r2=p2, fitted=fitted)


def _polygon_escape(beta: float, K: int, gamma: float, radius: float, max_layers: int) -> float:
    """The exact escape layer of the regular K-gon with every token on its vertex: by symmetry it stays a regular
    K-gon of radius r_k, r_{k+1} = r_k (1 − γ Σ_j p_j (1 − cos θ_j)), p = softmax_j(β r_k² cos θ_j), θ_j = 2πj/K;
    the first k with 1 − r_k > radius (inf past max_layers)."""
    cos = np.cos(2 * np.pi * np.arange(K) / K)
    r = 1.0
    for k in range(1, max_layers + 1):
        p = np.exp(beta * r * r * (cos - 1))
        r *= 1 - gamma * float((p * (1 - cos)).sum() / p.sum())
        if 1 - r > radius:
            return float(k)
    return math.inf


def _escape(field: Field, start: Tensor, vertex: Tensor, alpha: float, radius: float, max_layers: int,
            chunk: int) -> float:
    """The median over sequences of the first layer at which a token of start (batch, n, 2) is farther than
    `radius` from its vertex (n, 2): `solve` in chunks of `chunk` layers, every layer of a chunk kept."""
    z, done = start, 0
    first = torch.full((len(start),), math.inf, dtype=_F64)
    while done < max_layers and bool(first.isinf().any()):
        steps = min(chunk, max_layers - done)
        path = solve(field, Euler.layers(alpha), z, steps=steps, save=Save()).tokens[1:]  # (steps, batch, n, 2)
        out = (path - vertex).norm(dim=-1).amax(-1) > radius  # (steps, batch)
        hit = done + 1 + out.double().argmax(0).to(_F64)
        first = torch.where(first.isinf() & out.any(0), hit, first)
        z, done = path[-1], done + steps
    return float(first.median())


@dataclass(frozen=True)
class EscapeTimes:
    """Finite β: the layers a token stays near its vertex (`escape_times`).

    Attributes:
        betas: (B,) β. layers: (B,) the first layer at which some token is farther than `radius` from its vertex,
            median over sequences (inf: none within the horizon). polygon: (B,) the same for the exact symmetric
            recurrence (every token on its vertex: `spread` = 0).
        slope, intercept, r2: the fit log T ≈ intercept + slope β, and its R².
        corrected: the slope of log(β T) against β: the large-β law T ∝ e^{β g}/β predicts `gap`.
        gap: g = 1 − cos(2π/K), the score gap between a vertex and its neighbours (A = I, unit circle).
    """

    betas: Tensor
    layers: Tensor
    polygon: Tensor
    slope: float
    intercept: float
    r2: float
    corrected: float
    gap: float

    def check(self, r2: float = 0.95) -> Check:
        """Escape times grow exponentially in β: increasing, log T linear in β (R² ≥ `r2`), slope > 0."""
        t = self.layers
        ok = bool(torch.isfinite(t).all() and (t.diff() > 0).all()) and self.slope > 0 and self.r2 >= r2
        value = (f"T = {', '.join(f'{x:g}' for x in t.tolist())} at β = "
                 f"{', '.join(f'{b:g}' for b in self.betas.tolist())}: slope {self.slope:.3f} (R² {self.r2:.4f}), "
                 f"log(βT) slope {self.corrected:.3f}, gap {self.gap:.3f}")
        return Check("metastability", "finite β: tokens stay near the vertices for times exponential in β (AGR 2025)",
                     "passed" if ok else "failed", value, f"T increasing, log T linear in β (R² ≥ {r2:g}), slope > 0",
                     () if ok else (value,), {"slope": self.slope, "r2": self.r2, "corrected": self.corrected,
                                              "gap": self.gap})


def escape_times(*, betas: Sequence[float] = (2.0, 4.0, 8.0, 16.0), vertices: int = 5, per_vertex: int = 4,
                 spread: float = 0.01, radius: float = 0.1, alpha: float = 1.0, sequences: int = 8,
                 max_layers: int = 1_000_000, chunk: int = 512, seed: int = 0) -> EscapeTimes:
    """Softmax layers (A = I) from near-vertex states: how long the tokens stay, and how that grows with β.

    `per_vertex` tokens within `spread` (Gaussian) of each vertex of a regular K-gon on the unit circle, `sequences`
    such starts in one batch; `solve(Field(Softmax(β)), Euler.layers(α))` in chunks of `chunk` layers until every
    sequence has a token farther than `radius` from its vertex (or `max_layers`). In the hardmax limit the start is
    fixed forever (each vertex is its own maximiser). About 0.2 s on one core with the defaults (β = 24 adds 18 s).
    """
    _positive(vertices=vertices, per_vertex=per_vertex, sequences=sequences, max_layers=max_layers, chunk=chunk)
    b = torch.tensor([float(x) for x in betas], dtype=_F64)
    if len(b) < 2 or not (torch.isfinite(b).all() and (b > 0).all()):
        raise ValueError("betas must be at least two finite numbers > 0")
    if vertices < 3 or not 0 <= spread < radius < math.sin(math.pi / vertices):
        raise ValueError("need vertices ≥ 3 and 0 ≤ spread < radius < sin(π/K), half a side of the K-gon")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be finite and > 0, got {alpha!r}")
    g = torch.Generator().manual_seed(seed)
    angle = 2 * math.pi * torch.arange(vertices, dtype=_F64) / vertices
    v = torch.stack([angle.cos(), angle.sin()], -1).repeat_interleave(per_vertex, 0)  # (n, 2)
    start = v + spread * torch.randn(sequences, len(v), 2, generator=g, dtype=_F64)
    with _one_thread():
        times = [_escape(Field(Softmax(beta), Bilinear(None)), start, v, alpha, radius, max_layers, chunk)
                 for beta in b.tolist()]
    t = torch.tensor(times, dtype=_F64)
    polygon = torch.tensor([_polygon_escape(beta, vertices, layer_step(alpha), radius, max_layers)
                            for beta in b.tolist()], dtype=_F64)
    finite = torch.isfinite(t) & (t > 0)
    slope = intercept = r2 = corrected = math.nan
    if int(finite.sum()) >= 2:
        x, y = b[finite].numpy(), np.log(t[finite].numpy())
        slope, r2 = _fit(x, y)
        intercept = float(y.mean() - slope * x.mean())
        corrected = _fit(x, y + np.log(x))[0]
    return EscapeTimes(betas=b, layers=t, polygon=polygon, slope=slope, intercept=intercept, r2=r2,
                       corrected=corrected, gap=1 - math.cos(2 * math.pi / vertices))
