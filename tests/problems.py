"""Configurations of the hardmax dynamics with known answers (limits, leaders, attention sets).

Every answer here is derived by hand, not by running the engine. Two facts do most of the work:
  * a leader never moves, and stays a leader (the hull only shrinks, so it stays the strict maximiser
    of its own scores);
  * a token that attends to a single leader v keeps attending to v forever, so it converges to v:
    after one step z' = (1−γ) z + γ v, and for every old token u,
        ⟨A z', v⟩ − ⟨A z', u⟩ = (1−γ)(⟨A z, v⟩ − ⟨A z, u⟩) + γ(⟨A v, v⟩ − ⟨A v, u⟩) > 0,
    while every new token is a convex combination of old ones.
Exact ties come from exact symmetries in dyadic coordinates, so they are exact in floating point too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hardmax.theory import FIGURE2_ALPHA, figure2_configurations


@dataclass(frozen=True)
class Problem:
    """A configuration and what the dynamics does with it.

    Attributes:
        name: identifier for test ids.
        tokens: (n, d) float64 initial tokens.
        limits: (n, d) float64 limit of every token.
        leader_layers: (n,) first layer from which each token leads for good; -1 for followers.
        alpha: step parameter. A: (d, d) SPD or None (identity). layers: enough for float64 convergence.
        attention_sets: C_i at layer 0 as sorted index tuples, where the ties are the point; else None.
        limit_set: the set S of K = conv(final leaders) in lexicographic order, where it is worked out.
    """

    name: str
    tokens: np.ndarray
    limits: np.ndarray
    leader_layers: tuple[int, ...]
    alpha: float = FIGURE2_ALPHA
    A: np.ndarray | None = None
    layers: int = 120
    attention_sets: tuple[tuple[int, ...], ...] | None = None
    limit_set: np.ndarray | None = field(default=None)

    @property
    def cluster_leader(self) -> tuple[int, ...]:
        """Expected `Clusters.leader`: the smallest final leader sharing the token's limit, else -1."""
        leads = [i for i, k in enumerate(self.leader_layers) if k >= 0]
        return tuple(next((j for j in leads if np.array_equal(self.limits[j], self.limits[i])), -1)
                     for i in range(len(self.tokens)))


def _figure2() -> list[Problem]:
    cfg = figure2_configurations()
    tri, em, sq, nl = cfg["triangle"], cfg["emerging_leader"], cfg["square"], cfg["non_leader_clusters"]
    # Triangle: each interior token attends to one vertex at layer 0 (largest score ⟨z, v⟩).
    tri_target = [0, 1, 2, 0, 0, 1, 2, 1, 0, 2, 1, 0, 1, 1]
    # Square: the same, vertices (1,1), (−1,1), (−1,−1), (1,−1) are tokens 0..3.
    sq_target = [0, 1, 2, 3, 0, 1, 2, 3, 0, 2, 3]
    # Emerging leader: e = (2,0) attends to f = (2.5,1) (score 5 > ‖e‖² = 4); f runs to (0,8). After one
    # layer (γ = 1/3) e' = (13/6, 1/3) has ⟨e', e'⟩ = 173/36 > ⟨e', f'⟩ = 85/18 with f' = (5/3, 10/3):
    # e' leads from layer 1 on. f and g = (−1,1) attend only to (0,8).
    em_limits = np.array([[0, 8], [-4, 0], [13 / 6, 1 / 3], [0, 8], [0, 8]], dtype=np.float64)
    # (±1/2, 0) ties exactly between the two vertices on its side and stays on the x-axis: x ← x + γ(1 − x).
    nl_limits = np.array(nl[:4].tolist() + [[1, 0], [-1, 0]], dtype=np.float64)
    # S of the square: vertices and edge midpoints; not the origin (the projection onto K itself).
    square_S = np.array([[-1, -1], [-1, 0], [-1, 1], [0, -1], [0, 1], [1, -1], [1, 0], [1, 1]], float)
    return [
        Problem("figure2_triangle", tri, tri[tri_target], (0, 0, 0) + (-1,) * 11,
                limit_set=np.array([[-1, -2], [-1, 0], [-1, 2], [8 / 13, -12 / 13], [8 / 13, 12 / 13],
                                    [2, 0]], dtype=np.float64)),
        Problem("figure2_emerging_leader", em, em_limits, (0, 0, 1, -1, -1)),
        Problem("figure2_square", sq, sq[sq_target], (0, 0, 0, 0) + (-1,) * 7, limit_set=square_S),
        Problem("figure2_non_leader_clusters", nl, nl_limits, (0, 0, 0, 0, -1, -1),
                attention_sets=((0,), (1,), (2,), (3,), (0, 3), (1, 2)), limit_set=square_S),
    ]


def ties_with_multiplicity() -> Problem:
    """(1,0) twice, (0,1), and (1/2,1/2), which ties with all four tokens (scores all 1/2).

    Counted with multiplicity, its first target is (2·(1,0) + (0,1) + (1/2,1/2))/4 = (5/8, 3/8), so after
    one layer (γ = 1/3) it sits at (13/24, 11/24) and attends only to (1,0). The duplicates lead together.
    """
    tokens = np.array([[1, 0], [1, 0], [0, 1], [0.5, 0.5]], dtype=np.float64)
    limits = np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float64)
    return Problem("ties_with_multiplicity", tokens, limits, (0, 0, 0, -1),
                   attention_sets=((0, 1), (0, 1), (2,), (0, 1, 2, 3)))


def one_dimensional() -> Problem:
    """d = 1: positive tokens go to the largest, negative ones to the smallest. S = {−2, 3} (not 0)."""
    tokens = np.array([[-2.0], [-1.0], [0.5], [3.0]])
    limits = np.array([[-2.0], [-2.0], [3.0], [3.0]])
    return Problem("one_dimensional", tokens, limits, (0, -1, -1, 0), attention_sets=((0,), (0,), (3,), (3,)),
                   limit_set=np.array([[-2.0], [3.0]]))


def a_norm_projection() -> Problem:
    """A = [[2,1],[1,2]]: a follower converges to the A-projection of 0 onto an edge, not the Euclidean one.

    v1 = (1,0) and v2 = (1,−1) have ‖v‖_A² = 2. x = (1/2, −1/4) has A x = (3/4, 0), so ⟨A x, v1⟩ =
    ⟨A x, v2⟩ = 3/4 exactly; moving towards the midpoint m = (1, −1/2) keeps x1 + 2 x2 = 0, i.e. the tie.
    m minimises ‖(1, t)‖_A² = 2 + 2t + 2t² (t = −1/2); the Euclidean projection would be v1 = (1, 0).
    """
    A = np.array([[2.0, 1.0], [1.0, 2.0]])
    tokens = np.array([[1, 0], [1, -1], [-1, 0], [0.5, -0.25]], dtype=np.float64)
    limits = np.array([[1, 0], [1, -1], [-1, 0], [1, -0.5]], dtype=np.float64)
    # S of the triangle v1 v2 v3 (v3 = (−1, 0)) under A: the vertices; m on v1v2; on v1v3, ‖(x, 0)‖_A² = 2x²
    # gives the origin (also the projection onto aff K = R²), which S excludes (no token reaches 0); on
    # v3v2, (−1 + 2s, −s) has ‖·‖_A² = 2 − 6s + 6s², minimal at s = 1/2: (0, −1/2), self-consistent
    # (⟨A p, v − p⟩ = −1, 0, 0 for v1, v2, v3).
    return Problem("a_norm_projection", tokens, limits, (0, 0, 0, -1), A=A,
                   attention_sets=((0,), (1,), (2,), (0, 1)),
                   limit_set=np.array([[-1, 0], [0, -0.5], [1, -1], [1, -0.5], [1, 0]], dtype=np.float64))


def segment_in_3d() -> Problem:
    """K is a segment in R^3: v1 = (1,1,1), v2 = (1,−1,−1). (1/2, 1/4, −1/4) and (1/4, 1/8, −1/8) tie
    between them (⟨x, v1⟩ = ⟨x, v2⟩ = x1 when x3 = −x2) and keep x3 = −x2, converging to (1, 0, 0), the
    projection of 0 onto the line through v1 and v2.
    """
    tokens = np.array([[1, 1, 1], [1, -1, -1], [0.5, 0.25, -0.25], [0.25, 0.125, -0.125]], dtype=np.float64)
    limits = np.array([[1, 1, 1], [1, -1, -1], [1, 0, 0], [1, 0, 0]], dtype=np.float64)
    return Problem("segment_in_3d", tokens, limits, (0, 0, -1, -1), attention_sets=((0,), (1,), (0, 1), (0, 1)),
                   limit_set=np.array([[1, -1, -1], [1, 0, 0], [1, 1, 1]], dtype=np.float64))


def problems() -> list[Problem]:
    """All problems with known answers."""
    return [*_figure2(), ties_with_multiplicity(), one_dimensional(), a_norm_projection(), segment_in_3d()]
