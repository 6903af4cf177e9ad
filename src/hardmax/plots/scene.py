"""What a picture of a `Solution` shows, for any field and manifold: `make_scene` -> `Scene`.

    tokens per saved state (plot coordinates) · trails · one colour per limit cluster (`cluster_labels`) ·
    the manifold's background (the unit circle / sphere, or the tokens' convex hull in R^d) · and, for the paper's
    hardmax layers only (`paper_layers`), the leaders, the polytope K and the points of the limit set S

What does not live here: drawing (`panels`), figures and GIFs (`figures`, `flows`). The manifold is asked through
its protocol's properties (`euclidean`, `unit_sphere`, `cluster_tolerance`), never tested for its class, so a new
manifold (the torus of tests/test_dynamics_manifolds.py) reaches the picture with nothing here changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from matplotlib import colormaps

from hardmax.dynamics import Hardmax, Solution
from hardmax.theory import find_clusters, leader_layers, limit_set, polytope
from hardmax.theory.geometry import components

__all__ = ["FIGURE2_LAYERS", "Scene", "check_layers", "check_single", "cluster_labels", "colours_of", "default_layers",
           "make_scene", "paper_layers", "projection"]

FIGURE2_LAYERS = (0, 1, 2, 5, 30)  #: the layers shown in the paper's Figure 2

# Tableau colours without grey (grey is K's colour); cycled when there are more clusters.
PALETTE = np.array([colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)])
K_FACE = "#e4e6ee"
K_EDGE = "#8c90a4"
HULL_FACE = "#eeeeee"  # the convex hull of the tokens (flows in R^d): lighter than K
HULL_EDGE = "#aaaaaa"

Background = Literal["none", "hull", "circle", "sphere"]
Clock = Literal["layer", "time"]


# --------------------------------------------------------------------------------------------
# What is drawn: one sequence, in plot coordinates.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scene:
    """Everything drawn for one sequence, mapped to p = 2 or 3 plot coordinates (p = 1: tokens against time).

    The paper's overlays (leaders, K, S) are empty arrays for any solution but the paper's hardmax layers.
    """

    path: np.ndarray  # (saved, n, p) positions of the real (unmasked) tokens
    times: np.ndarray  # (saved,) the time of each saved state
    steps: tuple[int, ...] | None  # the step (layer) of each saved state; None for an adaptive solver
    labels: np.ndarray  # (n,) index of the cluster each token ends in
    colours: np.ndarray  # (n, 4) RGBA colour of each token: its cluster's
    leader_since: np.ndarray  # (n,) first layer from which the token stays a leader, -1 if never
    vertices: np.ndarray  # (v, p) vertices of K
    edges: np.ndarray  # (e, 2) pairs of vertex indices: the edges of K
    k_dim: int  # dimension of K (-1: no K)
    limit: np.ndarray  # (s, p) points of S, not vertices of K, that some token reaches
    projected: bool  # d > p: the tokens were projected onto principal components
    note: str  # how the tokens were mapped to the plot, and what was left out ("" if nothing)
    paper: bool = False  # the paper's hardmax layers: leaders, K and S are drawn, in the paper's style
    background: Background = "none"  # behind the tokens: the unit circle / sphere, or their convex hull
    clock: Clock = "layer"  # panels are named by layer ("layer 5") or by time ("t = 0.5")
    trails: bool = True  # thin lines through each token's past positions

    @property
    def limit_label(self) -> str:
        """Legend entry of the diamonds: the points of S that some token reaches."""
        return "limit in S: projection of 0 on a face of K"

    @property
    def dimension(self) -> int:
        """p: 1 (tokens against time), 2 or 3 plot coordinates."""
        return self.path.shape[-1]

    def leaders_at(self, k: int) -> np.ndarray:
        """(n,) bool: the tokens that are leaders from saved state `k` on (none outside the paper's layers)."""
        return (self.leader_since >= 0) & (self.leader_since <= k)

    def stamp(self, k: int, *, total: bool = False) -> str:
        """The name of saved state `k`: "layer 5" (with `total`: "layer 5 of 30") or "t = 0.5"."""
        if self.clock == "layer":
            step = k if self.steps is None else self.steps[k]
            return f"layer {step}" + (f" of {self.steps[-1] if self.steps else len(self.times) - 1}" if total else "")
        return f"t = {float(self.times[k]):.3g}"

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of a cube holding everything drawn (the unit circle / sphere too), with a margin."""
        parts = [self.path.reshape(-1, self.dimension), self.vertices, self.limit]
        if self.background in ("circle", "sphere"):
            parts.append(np.stack([-np.ones(self.dimension), np.ones(self.dimension)]))
        points = np.concatenate(parts)
        lo, hi = points.min(0), points.max(0)
        # 3-D axes pad their box themselves: the unit sphere fills its box; everything else gets a margin.
        half = (0.5 if self.background == "sphere" else 0.6) * max(float((hi - lo).max()), 1e-9)
        centre = (lo + hi) / 2
        return centre - half, centre + half


def check_single(trajectory: Solution) -> None:
    """Raise ValueError unless `trajectory` holds one sequence: tokens of shape (layers + 1, n, d)."""
    if trajectory.tokens.dim() != 3:
        raise ValueError(
            "plots show one sequence: trajectory.tokens must have shape (layers + 1, n, d), got "
            f"{tuple(trajectory.tokens.shape)}; simulate the sequence on its own to plot it"
        )


def paper_layers(solution: Solution) -> bool:
    """Whether `solution` is the paper's hardmax layers, every one saved: the field is the paper's (`Field.paper`:
    V = I, symmetric A, R^d), the rule `Hardmax`, full attention, solved by `Euler.layers(α)`. Only then do
    leaders, K and S (Theorem 2.1) describe it, as `hardmax.theory.check_theorem` requires."""
    return (solution.field.paper and isinstance(solution.rule, Hardmax) and solution.pairs is None
            and getattr(solution.solver, "alpha", None) is not None and solution.steps is not None
            and solution.complete)


def _sequence(solution: Solution, sequence: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(saved, n, d) float64 positions and (n,) mask of one sequence; `sequence` None: the solution must be single."""
    tokens, mask = solution.tokens.detach().cpu(), solution.mask.detach().cpu()
    if sequence is None:
        check_single(solution)
    elif tokens.dim() == 4:
        if not 0 <= sequence < tokens.shape[1]:
            raise ValueError(f"sequence must be in 0..{tokens.shape[1] - 1}, got {sequence}")
        tokens, mask = tokens[:, sequence], mask[sequence]
    return tokens.to(torch.float64).numpy(), mask.numpy().astype(bool)


def cluster_labels(solution: Solution, sequence: int | None = None, tol: float | None = None) -> np.ndarray:
    """(n,) the cluster each real token ends in, numbered 0, 1, ... by first appearance: the one colouring rule.

    The paper's hardmax layers: `hardmax.theory.find_clusters` (the unfinished convergence accounted for);
    any other solution: tokens within `tol` at the last saved state are one cluster (single linkage; None: the
    manifold's `cluster_tolerance` of the start's extent).
    """
    path, real = _sequence(solution, sequence)
    if tol is None and paper_layers(solution):
        labels = find_clusters(solution).labels.detach().cpu().numpy()
        return (labels if labels.ndim == 1 else labels[sequence or 0])[real]
    path = path[:, real]
    if tol is None:
        tol = solution.field.manifold.cluster_tolerance(float(np.ptp(path[0], axis=0).max(initial=0.0)) or 1.0)
    return components(path[-1], float(tol))


def colours_of(labels: np.ndarray) -> np.ndarray:
    """(n, 4) RGBA: each cluster's colour from the palette (cycled)."""
    return PALETTE[np.asarray(labels) % len(PALETTE)]


def projection(points: np.ndarray, p: int) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """Map R^d to R^p: identity, zero padding (d < p), or the top-p principal components (d > p).

    `points` (m, d) fixes the principal axes; signs are chosen so the projection is deterministic.
    """
    d = points.shape[-1]
    if d == p:
        return (lambda x: np.asarray(x, dtype=np.float64).reshape(-1, d)), ""
    if d < p:
        return (lambda x: np.pad(np.asarray(x, dtype=np.float64).reshape(-1, d), ((0, 0), (0, p - d)))), ""
    centre = points.mean(0)
    _, sv, vt = np.linalg.svd(points - centre, full_matrices=False)
    basis = vt[:p] * np.sign(vt[:p, [0]] + (vt[:p, [0]] == 0))  # (p, d)
    share = float((sv[:p] ** 2).sum() / max((sv**2).sum(), 1e-300))
    note = f"projection of d = {d} onto principal components 1–{p} ({share:.0%} of the variance)"
    return (lambda x: (np.asarray(x, dtype=np.float64).reshape(-1, d) - centre) @ basis.T), note


@dataclass(frozen=True)
class _Overlays:
    """The paper's K and S of one sequence, in R^d (empty outside the paper's layers)."""

    leader_since: np.ndarray  # (n,)
    vertices: np.ndarray  # (v, d)
    edges: np.ndarray  # (e, 2)
    k_dim: int
    limit: np.ndarray  # (s, d)
    notes: tuple[str, ...] = ()


def _overlays(solution: Solution, sequence: int | None, path: np.ndarray, real: np.ndarray) -> _Overlays:
    """Leaders, K and S (Theorem 2.1) of the paper's hardmax layers; path (layers + 1, n, d) of the real tokens."""
    since = leader_layers(solution).detach().cpu().numpy()
    since = (since if since.ndim == 1 else since[sequence or 0])[real]
    d = path.shape[-1]
    leaders = path[-1, since >= 0]
    vertices, k_dim, edges, S = np.empty((0, d)), -1, np.empty((0, 2), np.int64), np.empty((0, d))
    notes = []
    if len(leaders):  # always true for hardmax (the token of largest A-norm leads); keeps plots total
        try:
            K = polytope(leaders)
            vertices, k_dim = np.asarray(K.vertices, dtype=np.float64).reshape(-1, d), K.dim
            edges = np.array([face for face in K.faces if len(face) == 2], dtype=np.int64).reshape(-1, 2)
            S = np.asarray(limit_set(K, solution.A.detach().cpu().double().numpy()), dtype=np.float64)
        except ValueError:  # too many faces to enumerate (high dimension): draw the hull of the leaders only
            vertices = np.unique(leaders, axis=0)
            k_dim = int(np.linalg.matrix_rank(vertices - vertices.mean(0))) if len(vertices) > 1 else 0
            notes.append("faces of K and S not drawn (too many faces)")
        # Vertices of K are already marked by the leaders' stars; of the other points of S, draw the
        # limits: those some token reaches (as the paper's Figure 2 does).
        S = S.reshape(-1, d)
        # Distances in units of the run's largest coordinate: the same choice at every scale (1e-160, 1e160).
        scale = float(np.abs(path).max()) or 1.0
        gap = np.linalg.norm((S[:, None] - vertices[None]) / scale, axis=-1).min(1, initial=np.inf)
        # Where each token is heading: with a settled target x*, z^K − x* = (z^{K−1} − x*)/(1+α), so
        # x* = z^K + (z^K − z^{K−1})/α (a short run has not arrived yet).
        heading = path[-1] if len(path) < 2 else path[-1] + (path[-1] - path[-2]) / float(solution.alpha[-1])
        reach = np.linalg.norm((S[:, None] - heading[None]) / scale, axis=-1).min(1, initial=np.inf)
        S = S[(gap > 1e-6) & (reach <= 1e-3)]
    return _Overlays(since, vertices, edges, int(k_dim), S, tuple(notes))


def make_scene(solution: Solution, p: int | None = None, *, sequence: int | None = None,
               clock: Clock | None = None) -> Scene:
    """What to draw of one sequence of any `Solution`, in p plot coordinates.

    Tokens of dimension d are drawn as they are (d = p), padded with zeros (d < p) or projected onto their top p
    principal components (d > p; said in `note`). Every solution gets its saved states, trails and one colour per
    cluster (`cluster_labels`); the manifold says the background (`unit_sphere`: the unit circle, p = 2, or sphere,
    p = 3; `euclidean`: the convex hull of the tokens, p = 2); the paper's hardmax layers (`paper_layers`) also get
    their leaders, the polytope K of the final leaders and the points of S that tokens reach (Theorem 2.1 of
    Alcalde, Fantuzzi, Zuazua 2024), and no hull (K takes its place).

    Args:
        solution: from `solve` or `simulate`; tokens (saved, n, d) or, with `sequence`, (saved, batch, n, d).
        p: plot coordinates, 2 or 3; None: 3 for d = 3, 1 (tokens against time) for d = 1 outside the paper's
            layers, else 2.
        sequence: which sequence of a batched solution; None: the solution must hold one sequence.
        clock: name panels by "layer" or "time"; None: layers for the paper's hardmax layers, else time.

    Returns:
        `Scene` with path (saved, n, p).
    """
    path, real = _sequence(solution, sequence)
    path = path[:, real]
    d = path.shape[-1]
    paper = paper_layers(solution)
    if p is None:
        p = 3 if d == 3 else 1 if (d == 1 and not paper) else 2
    if p not in (1, 2, 3) or (p == 1 and d != 1):
        raise ValueError(f"a scene has 2 or 3 plot coordinates (1 for tokens in R^1), got p = {p} for d = {d}")
    labels = cluster_labels(solution, sequence)
    n = path.shape[1]
    over = (_overlays(solution, sequence, path, real) if paper else
            _Overlays(np.full(n, -1, np.int64), np.empty((0, d)), np.empty((0, 2), np.int64), -1, np.empty((0, d))))
    manifold = solution.field.manifold
    background: Background = ("circle" if p == 2 else "sphere") if manifold.unit_sphere and p > 1 and d == p else (
        "hull" if manifold.euclidean and p == 2 and not paper else "none")
    project, note = projection(path.reshape(-1, d), p)
    note = "; ".join([note, *over.notes] if note else over.notes)
    steps = solution.steps if solution.steps is None else tuple(solution.steps)
    return Scene(
        path=project(path).reshape(path.shape[0], n, p),
        times=solution.times.detach().cpu().double().numpy(),
        steps=steps,
        labels=labels,
        colours=colours_of(labels),
        leader_since=over.leader_since,
        vertices=project(over.vertices),
        edges=over.edges,
        k_dim=over.k_dim,
        limit=project(over.limit),
        projected=d > p,
        note=note,
        paper=paper,
        background=background,
        clock=clock or ("layer" if paper else "time"),
    )


def default_layers(total: int) -> tuple[int, ...]:
    """Figure 2's layers (0, 1, 2, 5, 30) cut to a run of `total` layers, ending at its last layer."""
    return tuple(k for k in FIGURE2_LAYERS if k < total) + (total,)


def check_layers(layers: Sequence[int] | None, total: int) -> tuple[int, ...]:
    """The layers to show: `layers` (None: `default_layers(total)`); ValueError if none, or one outside 0..`total`."""
    chosen = default_layers(total) if layers is None else tuple(int(k) for k in layers)
    if not chosen:
        raise ValueError("layers must name at least one layer to show")
    bad = [k for k in chosen if not 0 <= k <= total]
    if bad:
        raise ValueError(f"layers {bad} are outside the trajectory's layers 0..{total}")
    return chosen
