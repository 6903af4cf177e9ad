"""The paper's Figure 2 configurations, for the CLI and the plots.

`paper_figure2_configurations`: the four configurations of the authors' dynamics notebook (their points,
and their uniformly random followers drawn with a fixed seed). `figure2_configurations`: the library's
dyadic variants, whose scores and ties are exact in floating point (known answers: tests/problems.py).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FIGURE2_ALPHA", "FIGURE2_SEED", "figure2_configurations", "paper_figure2_configurations"]

FIGURE2_ALPHA = 0.5  #: step parameter of the paper's Figure 2 (A = identity)
FIGURE2_SEED = 20240701  #: the random followers of the paper's configurations (arXiv 2407.01602)


def paper_figure2_configurations(seed: int = FIGURE2_SEED) -> dict[str, np.ndarray]:
    """The four configurations of the paper's Figure 2, as in the authors' dynamics notebook.

    Rows of the figure, top to bottom (α = 0.5, A = I, layers 0, 1, 2, 5, 30):
      * "triangle": leaders (1, 1), (1/2, −1/2), (−1, −1); two followers uniform in [0, 1]², two in
        [−1, 0]², and (0.3, −0.2), (0.1, −0.2).
      * "emerging_leader": (1, 1/3), (−1/12, 1/12), (−1, −1), (0, 1/4), (−0.3, −0.7), (−0.6, −0.9),
        (0.8, 0.1), (0.6, 0.15): (−1/12, 1/12) follows at layer 0 and leads from layer 1 on.
      * "square": leaders (±1, ±1) and six followers uniform in [−1/2, 1/2]².
      * "non_leader_clusters": the square, (±1/2, 0) (exactly tied between two corners: they converge to
        (±1, 0), points of S that are not vertices) and four followers uniform in [−1/2, 1/2]².
    The notebook draws its followers without a seed; here they come from `numpy.random.default_rng(seed)`.

    Returns:
        name -> (n, 2) float64 tokens.
    """
    rng = np.random.default_rng(seed)
    square = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]], dtype=np.float64)
    triangle = np.concatenate([[[1, 1], [0.5, -0.5], [-1, -1]], rng.uniform(0, 1, (2, 2)),
                               rng.uniform(-1, 0, (2, 2)), [[0.3, -0.2], [0.1, -0.2]]])
    emerging = np.array([[1, 1 / 3], [-1 / 12, 1 / 12], [-1, -1], [0, 1 / 4], [-0.3, -0.7], [-0.6, -0.9],
                         [0.8, 0.1], [0.6, 0.15]])
    return {
        "triangle": triangle,
        "emerging_leader": emerging,
        "square": np.concatenate([square, rng.uniform(-0.5, 0.5, (6, 2))]),
        "non_leader_clusters": np.concatenate([square, [[-0.5, 0], [0.5, 0]], rng.uniform(-0.5, 0.5, (4, 2))]),
    }


def figure2_configurations() -> dict[str, np.ndarray]:
    """The library's four dyadic 2-D configurations in the spirit of the paper's Figure 2 (α = 0.5, A = I).

    Dyadic coordinates, so scores and ties are exact in floating point. Known answers are in
    tests/problems.py.
      * "triangle": leaders (2, 0), (−1, 2), (−1, −2); 11 interior tokens, each attending to one vertex
        from the start, so each converges to that vertex.
      * "emerging_leader": (2, 0) first attends to (2.5, 1); that token runs to the leader (0, 8), and
        after one layer (13/6, 1/3) attends only to itself: a leader that was not one at layer 0.
      * "square": leaders (±1, ±1) and 7 interior tokens, each converging to the vertex it sees first.
      * "non_leader_clusters": the square plus (±1/2, 0), exactly tied between two vertices; they
        converge to (±1, 0), the projections of the origin onto the vertical sides (points of S, not
        vertices).

    Returns:
        name -> (n, 2) float64 tokens.
    """
    square = [[1, 1], [-1, 1], [-1, -1], [1, -1]]
    return {
        "triangle": np.array([[2, 0], [-1, 2], [-1, -2], [1, 0.25], [0.5, -0.5], [-0.5, 1], [-0.5, -1],
                              [0.25, 0.75], [0.75, 0.5], [-0.25, -0.5], [0, 1.25], [1.25, -0.5],
                              [-0.75, 0.25], [0.5, 1]], dtype=np.float64),
        "emerging_leader": np.array([[0, 8], [-4, 0], [2, 0], [2.5, 1], [-1, 1]], dtype=np.float64),
        "square": np.array(square + [[0.5, 0.25], [-0.25, 0.625], [-0.375, -0.75], [0.75, -0.125],
                                     [0.125, 0.875], [-0.875, -0.25], [0.25, -0.625]], dtype=np.float64),
        "non_leader_clusters": np.array(square + [[0.5, 0], [-0.5, 0]], dtype=np.float64),
    }
