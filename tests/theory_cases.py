"""Cases shared by the tests of `hardmax.theory` (test_theory_*.py): the known answers of tests/problems.py
run through `simulate`, and two small point sets (a square; a square with a point inside).
"""

from __future__ import annotations

import numpy as np
from problems import Problem, problems

from hardmax.dynamics import simulate

PROBLEMS = problems()


def run(problem: Problem, layers: int | None = None, **kwargs):
    return simulate(problem.tokens, alpha=problem.alpha, layers=problem.layers if layers is None else layers,
                    A=problem.A, **kwargs)


def by_name(name: str) -> Problem:
    return next(p for p in PROBLEMS if p.name == name)


SQUARE = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=np.float64)
SQUARE_WITH_A_POINT = [[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0], [0.5, 0.0]]
