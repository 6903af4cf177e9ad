"""Tests of `hardmax.svm.descent`: batched gradient descent on the attention weights against a
per-problem loop and exact gradients, masks, saturation, convergence to the Att-SVM direction, and the
config and shape checks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from svm_cases import synthetic

from hardmax.svm import DescentConfig, att_svm, correlation, descend, initial_parameters, softmax_attention


def _notebook_loop(X, z, y, v, init, parameterisation: str, iterations: int, ridge: float, mask=None):
    """One problem, autograd, the plain float64 formulas: the obviously-correct reference."""
    eps = torch.finfo(torch.float64).eps
    params = [init.clone().requires_grad_()] if parameterisation == "W" else [t.clone().requires_grad_() for t in init]
    out = []
    for _ in range(iterations):
        W = params[0] if parameterisation == "W" else params[0] @ params[1].T
        scores = (X @ W @ z.unsqueeze(-1)).squeeze(-1)
        p = torch.softmax(scores if mask is None else scores.masked_fill(~mask, float("-inf")), -1)
        f = (p * (X @ v)).sum(-1)
        loss = torch.log1p(torch.exp(-y * f)).mean()
        if parameterisation == "KQ":
            loss = loss + ridge * sum(t.norm() ** 2 for t in params)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for t, g in zip(params, grads, strict=True):
                t -= 0.1 * g / (g.norm() + eps)
        out.append((params[0] if parameterisation == "W" else params[0] @ params[1].T).detach().clone())
    return torch.stack(out)


@pytest.mark.parametrize("parameterisation", ["W", "KQ"])
def test_batched_descent_equals_per_problem_loop(parameterisation):
    X, z, y, v, g = synthetic(3, 4, 5, 6, seed=11)
    init = initial_parameters(parameterisation, 3, 6, generator=g)
    config = DescentConfig(parameterisation=parameterisation, iterations=60, record_every=1)
    path = descend(X, z, y, v, init, config)
    assert path.W.shape == (3, 61, 6, 6) and path.iterations.tolist() == list(range(61))
    for s in range(3):
        one = init[s] if parameterisation == "W" else (init[0][s], init[1][s])
        ref = _notebook_loop(X[s], z[s], y[s], v[s], one, parameterisation, 60, config.kq_ridge)
        torch.testing.assert_close(path.W[s, 1:], ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("parameterisation", ["W", "KQ"])
def test_masked_descent_ignores_padding(parameterisation):
    # Padding tokens get no attention: the path equals autograd with −inf scores there, whatever the
    # padding holds, and an input with a single real token contributes nothing.
    X, z, y, v, g = synthetic(2, 3, 5, 4, seed=13)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 0, 3:] = False
    mask[1, 2, 1:] = False  # one real token
    init = initial_parameters(parameterisation, 2, 4, generator=g)
    config = DescentConfig(parameterisation=parameterisation, iterations=40, record_every=1)
    path = descend(X, z, y, v, init, config, mask=mask)
    other = X.clone()
    other[~mask] = 7.0
    torch.testing.assert_close(descend(other, z, y, v, init, config, mask=mask).W, path.W, rtol=0, atol=1e-12)
    for s in range(2):
        one = init[s] if parameterisation == "W" else (init[0][s], init[1][s])
        ref = _notebook_loop(X[s], z[s], y[s], v[s], one, parameterisation, 40, config.kq_ridge, mask=mask[s])
        torch.testing.assert_close(path.W[s, 1:], ref, rtol=1e-9, atol=1e-9)
    assert (path.attention[~mask] == 0).all()


def _exact_gradient(X, z, y, v, W, digits: int) -> np.ndarray:
    """∇_W L / ‖∇_W L‖ of one problem by the plain formula in mpmath at `digits` digits.

    u_α − f cancels to e^{−(score gap)}: the digits must exceed the largest score gap / ln 10.
    """
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(digits):
        n, T, d = X.shape
        X, z, y, v, W = (np.vectorize(mpmath.mpf, otypes=[object])(a.numpy()) for a in (X, z, y, v, W))
        grad = np.full((d, d), mpmath.mpf(0), dtype=object)
        for i in range(n):
            s = [X[i, t] @ W @ z[i] for t in range(T)]
            e = [mpmath.exp(a - max(s)) for a in s]
            p = [a / sum(e) for a in e]
            u = [X[i, t] @ v for t in range(T)]
            f = sum(pt * ut for pt, ut in zip(p, u, strict=True))
            g = -y[i] / (1 + mpmath.exp(y[i] * f)) / n
            for t in range(T):
                grad = grad + g * p[t] * (u[t] - f) * np.outer(X[i, t], z[i])
        norm = mpmath.sqrt(sum(a * a for a in grad.ravel()))
        return np.array([[float(a / norm) for a in row] for row in grad])


@pytest.mark.parametrize("scale", [1.0, 30.0, 3000.0])
def test_step_direction_is_exact_when_softmax_saturates(scale):
    # At ‖W‖ ~ 10³ the unselected tokens' softmax weights are below e^{-745} (0 in float64) and u − f
    # cancels for the selected one; the step must still follow the exact gradient direction (80 digits).
    X, z, y, v, g = synthetic(1, 3, 4, 3, seed=4)
    W = scale * torch.randn(1, 3, 3, generator=g, dtype=torch.float64)
    config = DescentConfig(iterations=1, lr=1.0, eps=0.0, record_every=1)
    path = descend(X, z, y, v, W, config)
    step = (path.W[0, 0] - path.W[0, 1]).numpy()  # = ∇/‖∇‖ up to rounding of W (~1e-13 here)
    scores = (X[0] @ W[0] @ z[0].unsqueeze(-1)).squeeze(-1)
    gap = float((scores.amax(-1) - scores.amin(-1)).max())
    expected = _exact_gradient(X[0], z[0], y[0], v[0], W[0], digits=40 + int(gap / math.log(10)))
    np.testing.assert_allclose(step, expected, rtol=0, atol=1e-10)
    if scale == 3000.0:  # the case the log-domain formula is for: float64 softmax has underflowed
        assert (softmax_attention(X, z, W) == 0).any()


def test_descent_converges_to_the_svm_direction():
    X, z, y, v, g = synthetic(4, 3, 4, 6, seed=2)
    path = descend(X, z, y, v, initial_parameters("W", 4, 6, generator=g), DescentConfig(iterations=600))
    ref = torch.stack([att_svm(X[s], z[s], path.selection[s]).W for s in range(4)])
    corr = path.correlation(ref)
    assert (corr[:, -1] > 0.97).all()
    assert (corr[:, -1] > corr[:, 5]).all()
    # ‖W_k‖ grows (almost) linearly under normalised steps of length 0.1.
    assert (path.W[:, -1].norm(dim=(-2, -1)) > 0.5 * 0.1 * 600).all()
    assert (path.attention.max(-1).values > 0.99).all()


def test_correlation_and_attention_basics():
    A = torch.randn(5, 3, 3, dtype=torch.float64)
    torch.testing.assert_close(correlation(A, 2 * A), torch.ones(5, dtype=torch.float64))
    X, z, *_ = synthetic(2, 3, 4, 5)
    p = softmax_attention(X, z, torch.zeros(2, 5, 5, dtype=torch.float64))
    torch.testing.assert_close(p, torch.full((2, 3, 4), 0.25, dtype=torch.float64))


@pytest.mark.parametrize(("field", "value"), [("iterations", 0), ("lr", -1.0), ("eps", float("nan")),
                                              ("record_every", 0), ("parameterisation", "QK"), ("kq_ridge", -1.0)])
def test_descent_config_validation(field, value):
    with pytest.raises(ValueError, match=field):
        DescentConfig(**{field: value})


def test_descend_rejects_bad_shapes():
    X, z, y, v, _ = synthetic(2, 3, 4, 5)
    with pytest.raises(ValueError, match="init must be W"):
        descend(X, z, y, v, torch.zeros(2, 4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="z must have shape"):
        descend(X, z[0], y, v, torch.zeros(2, 5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="float64"):
        descend(X.float(), z, y, v, torch.zeros(2, 5, 5, dtype=torch.float64))
