"""The paper's Figure 2 configurations, for the CLI and the plots (known answers: tests/problems.py)."""

from __future__ import annotations

import numpy as np

FIGURE2_ALPHA = 0.5  # step parameter of the paper's Figure 2 (A = identity)


def figure2_configurations() -> dict[str, np.ndarray]:
    """Four small 2-D configurations in the spirit of the paper's Figure 2 (α = 0.5, A = I).

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
