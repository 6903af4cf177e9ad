"""Attention as a max-margin token selector: the Att-SVM view of softmax attention.

Tarzanagh, Li, Thrampoulidis, Oymak, "Transformers as Support Vector Machines" (arXiv 2308.16898) and
"Max-Margin Token Selection in Attention Mechanism" (arXiv 2306.13596): gradient descent on the
attention weights W of f(X) = vᵀ Xᵀ softmax(X W z) grows ‖W‖ without bound and converges in direction
to the hard-margin SVM that separates each input's selected token from its other tokens; descent on
(K, Q), W = K Qᵀ, converges to the nuclear-norm SVM. As ‖W‖ → ∞ softmax becomes hardmax selection,
which is where this view meets the hardmax dynamics of the rest of the library.

    solver.py      att_svm -> AttSVM (Clarabel, float64, direct or through cvxpy; imported on first solve)
    selection.py   token scores, globally optimal tokens, the local-optimality (support-token) test
    descent.py     normalised gradient descent on W or (K, Q), batched over problems -> DescentPath

The experiments (the paper's synthetic runs, the 2-D pictures, the join to hardmax and IMDb) live in
`hardmax.experiments.svm`, their figures in `hardmax.plots.svm`.
"""

from __future__ import annotations

from hardmax.svm.descent import (
    DescentConfig,
    DescentPath,
    Parameterisation,
    correlation,
    descend,
    initial_parameters,
    softmax_attention,
)
from hardmax.svm.selection import beats_support_tokens, is_locally_optimal, optimal_selection, token_scores
from hardmax.svm.solver import (
    RANK_RTOL,
    SUPPORT_TOL,
    WORKING_SET_ABOVE,
    AttSVM,
    Backend,
    InfeasibleError,
    Norm,
    att_svm,
)

__all__ = [
    "RANK_RTOL",
    "SUPPORT_TOL",
    "WORKING_SET_ABOVE",
    "AttSVM",
    "Backend",
    "DescentConfig",
    "DescentPath",
    "InfeasibleError",
    "Norm",
    "Parameterisation",
    "att_svm",
    "beats_support_tokens",
    "correlation",
    "descend",
    "initial_parameters",
    "is_locally_optimal",
    "optimal_selection",
    "softmax_attention",
    "token_scores",
]
