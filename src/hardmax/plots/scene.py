"""What a picture of a trajectory shows: leaders, clusters, trails, K and S, in data or projected coordinates."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps

from hardmax.dynamics import Solution
from hardmax.theory import find_clusters, leader_layers, limit_set, polytope

__all__ = ["FIGURE2_LAYERS", "Scene", "check_layers", "check_single", "default_layers", "make_scene", "projection"]

FIGURE2_LAYERS = (0, 1, 2, 5, 30)  #: the layers shown in the paper's Figure 2

# Tableau colours without grey (grey is K's colour); cycled when there are more clusters.
PALETTE = np.array([colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)])
K_FACE = "#e4e6ee"
K_EDGE = "#8c90a4"


# --------------------------------------------------------------------------------------------
# What is drawn: one sequence, in plot coordinates.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scene:
    """Everything drawn for one sequence, mapped to p = 2 or 3 plot coordinates."""

    path: np.ndarray  # (layers + 1, n, p) positions of the real (unmasked) tokens
    labels: np.ndarray  # (n,) index of the cluster each token converges to
    leader_since: np.ndarray  # (n,) first layer from which the token stays a leader, -1 if never
    vertices: np.ndarray  # (v, p) vertices of K
    edges: np.ndarray  # (e, 2) pairs of vertex indices: the edges of K
    k_dim: int  # dimension of K
    limit: np.ndarray  # (s, p) points of S, not vertices of K, that some token reaches
    projected: bool  # d > p: the tokens were projected onto principal components
    note: str  # how the tokens were mapped to the plot, and what was left out ("" if nothing)

    @property
    def limit_label(self) -> str:
        """Legend entry of the diamonds: the points of S that some token reaches."""
        return "limit in S: projection of 0 on a face of K"

    @property
    def colours(self) -> np.ndarray:
        """(n, 4) RGBA colour of each token: its limit cluster's."""
        return PALETTE[self.labels % len(PALETTE)]

    def leaders_at(self, layer: int) -> np.ndarray:
        """(n,) bool: the tokens that are leaders from `layer` on."""
        return (self.leader_since >= 0) & (self.leader_since <= layer)

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of a cube holding everything drawn, with a margin."""
        points = np.concatenate([self.path.reshape(-1, self.path.shape[-1]), self.vertices, self.limit])
        lo, hi = points.min(0), points.max(0)
        half = 0.6 * max(float((hi - lo).max()), 1e-9)
        centre = (lo + hi) / 2
        return centre - half, centre + half


def check_single(trajectory: Solution) -> None:
    """Raise ValueError unless `trajectory` holds one sequence: tokens of shape (layers + 1, n, d)."""
    if trajectory.tokens.dim() != 3:
        raise ValueError(
            "plots show one sequence: trajectory.tokens must have shape (layers + 1, n, d), got "
            f"{tuple(trajectory.tokens.shape)}; simulate the sequence on its own to plot it"
        )


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


def make_scene(trajectory: Solution, p: int) -> Scene:
    """Gather leaders, clusters, K and S of a single-sequence trajectory (see `hardmax.theory`)."""
    check_single(trajectory)
    real = trajectory.mask.detach().cpu().numpy().astype(bool)
    path = trajectory.tokens.detach().cpu().double().numpy()[:, real]
    labels = find_clusters(trajectory).labels.detach().cpu().numpy()[real]
    since = leader_layers(trajectory).detach().cpu().numpy()[real]
    d = path.shape[-1]
    leaders = path[-1, since >= 0]
    vertices, k_dim, edges, S = np.empty((0, d)), -1, np.empty((0, 2), np.int64), np.empty((0, d))
    notes = []
    if len(leaders):  # always true for hardmax (the token of largest A-norm leads); keeps plots total
        try:
            K = polytope(leaders)
            vertices, k_dim = np.asarray(K.vertices, dtype=np.float64).reshape(-1, d), K.dim
            edges = np.array([face for face in K.faces if len(face) == 2], dtype=np.int64).reshape(-1, 2)
            S = np.asarray(limit_set(K, trajectory.A.detach().cpu().double().numpy()), dtype=np.float64)
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
        heading = path[-1] if len(path) < 2 else path[-1] + (path[-1] - path[-2]) / float(trajectory.alpha[-1])
        reach = np.linalg.norm((S[:, None] - heading[None]) / scale, axis=-1).min(1, initial=np.inf)
        S = S[(gap > 1e-6) & (reach <= 1e-3)]
    project, note = projection(path.reshape(-1, d), p)
    note = "; ".join([note, *notes] if note else notes)
    return Scene(
        path=project(path).reshape(path.shape[0], path.shape[1], p),
        labels=labels,
        leader_since=since,
        vertices=project(vertices),
        edges=edges,
        k_dim=int(k_dim),
        limit=project(S),
        projected=d > p,
        note=note,
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
