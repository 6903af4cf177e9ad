"""Which tokens attention should select: the optimal tokens and the locally optimal selections.

For the one-layer model f(X) = vᵀ Xᵀ softmax(X W z) with labels y_i, the score of token t of input i
is γ_{i,t} = y_i vᵀ x_{i,t}: the loss is smallest when each input attends to its highest-scoring token
(globally optimal selection). Gradient descent may instead converge to a *locally optimal* selection
(Tarzanagh et al. 2023, arXiv 2308.16898, Definition 2 and Theorem 3): α is locally optimal when its
Att-SVM is feasible and every support token t of every input scores strictly below the selected one,
γ_{i,α_i} > γ_{i,t}. The SVM itself lives in `solver`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hardmax.svm.solver import AttSVM, InfeasibleError, Norm, att_svm, check_labels, check_tokens, real_tensor

__all__ = ["beats_support_tokens", "is_locally_optimal", "optimal_selection", "token_scores"]


def token_scores(X, y, v, mask=None) -> Tensor:
    """γ_{i,t} = y_i vᵀ x_{i,t}: (n, T) float64, −inf at masked tokens.

    Args:
        X: (n, T, d) tokens. y: (n,) labels, each +1 or −1 (0 or other values are refused: a label 0
            would make every token score 0). v: (d,) head. mask: (n, T) bool, True for real tokens, or None.
    """
    tokens = check_tokens(X, mask)
    X, mask = tokens.X, tokens.mask
    n, T, d = X.shape
    y, v = real_tensor(y, "y"), real_tensor(v, "v")
    if tuple(y.shape) != (n,):
        raise ValueError(f"y must be n = {n} labels ±1, got shape {tuple(y.shape)}")
    check_labels(y)
    if tuple(v.shape) != (d,) or not torch.isfinite(v).all():
        raise ValueError(f"v must be a finite vector of dimension d = {d}, got shape {tuple(v.shape)}")
    gamma = y[:, None] * (X @ v)
    return gamma.masked_fill(~mask, float("-inf"))


def optimal_selection(X, y, v, mask=None) -> Tensor:
    """The globally optimal tokens α_i = argmax_t γ_{i,t}, γ_{i,t} = y_i vᵀ x_{i,t}: (n,) int64.

    Ties go to the lowest index. Args as in `token_scores`.
    """
    return token_scores(X, y, v, mask).argmax(dim=1)


def is_locally_optimal(X, z, y, v, selection, *, norm: Norm = "fro", mask=None) -> bool:
    """Whether `selection` is a locally optimal token selection (Tarzanagh et al. 2023, Definition 2).

        α locally optimal  ⇔  the Att-SVM of α is feasible and γ_{i,α_i} > γ_{i,t} for every support
                              token t of every input i (support: margin (x_{i,α_i} − x_{i,t})ᵀ W^mm z_i = 1)

    A globally optimal selection whose SVM is feasible is locally optimal.

    Args:
        X: (n, T, d) tokens. z: (n, d) queries or None (self-attention, z_i = x_{i,0}). y: (n,) labels.
        v: (d,) head. selection: (n,) token index per input. norm: the SVM whose support tokens count,
            "fro" for the W parameterisation (the paper's definition), "nuc" for (K, Q).
        mask: (n, T) bool, True for real tokens, or None.

    Returns:
        False when the Att-SVM of the selection is (certified) infeasible, else the condition above.

    Raises:
        ValueError: bad input, or an Att-SVM solve that failed its checks (never read as "infeasible").
    """
    gamma = token_scores(X, y, v, mask)
    try:
        svm = att_svm(X, z, selection, norm=norm, mask=mask)
    except InfeasibleError:  # certified infeasible; any other failure is raised
        return False
    return bool(beats_support_tokens(svm, gamma).all())


def beats_support_tokens(svm: AttSVM, scores: Tensor) -> Tensor:
    """(n,) bool: γ_{i,α_i} > γ_{i,t} for every support token t of input i (the test of `is_locally_optimal`).

    Args:
        svm: the Att-SVM of the selection. scores: (n, T) token scores γ (`token_scores`).
    """
    chosen = scores.gather(1, svm.selection[:, None])
    return (~svm.support | (scores < chosen)).all(-1)
