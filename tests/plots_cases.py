"""Tokens and helpers shared by tests/test_plots_{figures,scene,save}.py: the square K of SQUARE and the names of a
folder's files. The fixture `run2d` (SQUARE's run) is in conftest.py.
"""

from __future__ import annotations

import numpy as np

# A square K with four tokens inside and two that converge to the midpoints of its vertical sides
# (projections of the origin onto faces): every element of the picture shows up.
SQUARE = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0], [0.5, 0.0], [-0.5, 0.0],
                   [0.3, 0.6], [-0.4, -0.5]])


def file_names(folder) -> list[str]:
    """The names of the files in `folder`, sorted (a temporary file left behind shows up here)."""
    return sorted(p.name for p in folder.iterdir())
