"""Tests of `hardmax.dynamics.field`: the velocity of a `Field` against its equation for two tokens (R^d and the
sphere, a value matrix V), which fields are the paper's, scores with one matrix per sequence, and a one-line
ValueError for every field that cannot be built."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tokens import gaussian, on_sphere

from hardmax.dynamics import (
    QK,
    RK4,
    Bilinear,
    Field,
    Hardmax,
    Localmax,
    Rescaled,
    Softmax,
    Sphere,
    solve,
)


def test_one_score_matrix_per_sequence_is_each_run_on_its_own():
    z = on_sphere(5, 3, 4, batch=6)
    betas = torch.linspace(0, 5, 6, dtype=torch.float64)
    A = betas.view(-1, 1, 1) * torch.eye(3, dtype=torch.float64)
    together = solve(Field(Softmax(1.0), scores=Bilinear(A), manifold=Sphere()), RK4(0.1), z, steps=20).tokens
    for b in range(6):
        alone = solve(Field(Softmax(1.0), scores=Bilinear(A[b]), manifold=Sphere()), RK4(0.1), z[b], steps=20)
        np.testing.assert_allclose(together[:, b].numpy(), alone.tokens.numpy(), rtol=0, atol=1e-14)


# Issue #39 (13): inputs that ended in tracebacks or unbounded work are one line each, before any allocation.
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_qk_refuses_non_finite_matrices(bad):
    good = torch.eye(2, dtype=torch.float64)
    broken = good.clone()
    broken[0, 1] = bad
    for Q, K in ((broken, good), (good, broken)):
        with pytest.raises(ValueError, match="contains NaN or inf"):
            QK(Q, K)
    with pytest.raises(ValueError, match="overflows"):
        QK(1e200 * good, 1e200 * good)


def test_two_tokens_move_as_the_equation_says():
    """Softmax(β), two tokens in R^2 with A = I: ż_1 = p (z_2 − z_1), p = e^{β⟨z_1, z_2⟩} / (e^{β|z_1|²} +
    e^{β⟨z_1, z_2⟩}); with a value V, ż_1 = V(T_1 − z_1); on the sphere the part along z_1 is removed."""
    beta = 0.8
    z = torch.tensor([[[1.0, 0.0], [0.6, 0.8]]], dtype=torch.float64)
    p = math.exp(beta * 0.6) / (math.exp(beta) + math.exp(beta * 0.6))
    drift = p * (z[0, 1] - z[0, 0])
    flat = Field(Softmax(beta)).velocity(0.0, z, None)
    torch.testing.assert_close(flat[0, 0], drift, rtol=1e-15, atol=0)
    V = torch.tensor([[2.0, 0.0], [1.0, -1.0]], dtype=torch.float64)
    torch.testing.assert_close(Field(Softmax(beta), value=V).velocity(0.0, z, None)[0, 0], V @ drift, rtol=1e-15,
                               atol=0)
    sphere = Field(Softmax(beta), manifold=Sphere()).velocity(0.0, z, None)  # P⊥_{z_1}(T_1): its second coordinate
    target = (1 - p) * z[0, 0] + p * z[0, 1]
    torch.testing.assert_close(sphere[0, 0], torch.stack([target.new_zeros(()), target[1]]), rtol=1e-15, atol=1e-16)


def test_absent_tokens_and_tokens_with_no_key_do_not_move():
    z = gaussian((1, 4, 2), 3)
    w = torch.tensor([[1.0, 0.0, 2.0, 1.0]], dtype=torch.float64)
    allowed = torch.ones(1, 4, 4, dtype=torch.bool)
    allowed[0, 3] = False  # token 3 may attend to nobody
    v = Field(Softmax(1.0)).restricted(allowed).velocity(0.0, z, w)
    assert bool((v[0, [1, 3]] == 0).all()) and bool((v[0, [0, 2]] != 0).any())


def test_the_papers_field_is_the_one_the_fast_paths_serve():
    """`Field.paper`: hardmax or softmax, V = I, one fixed symmetric A, R^d, no pair restriction."""
    A = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    assert Field(Hardmax()).paper and Field(Softmax(1.0), scores=Bilinear(A)).paper
    assert not Field(Localmax(0.1)).paper
    assert not Field(Softmax(1.0), value=torch.eye(2)).paper
    assert not Field(Softmax(1.0), manifold=Sphere()).paper
    assert not Field(Softmax(1.0), scores=QK(A, torch.eye(2, dtype=torch.float64))).paper
    assert not Field(Hardmax()).restricted(torch.ones(1, 3, 3, dtype=torch.bool)).paper


@pytest.mark.parametrize("make,message", [
    (lambda: Field(Hardmax(), scores=QK(torch.eye(2), torch.tensor([[1.0, 2.0], [0.0, 1.0]]))), "symmetric"),
    (lambda: Field(Softmax), "attention rule"),
    (lambda: Field(Hardmax(), scores=Bilinear(-torch.eye(2))), "positive definite"),
    (lambda: Field(Hardmax(), scores=Bilinear(torch.eye(2).expand(3, 2, 2))), "one per sequence"),
    (lambda: Rescaled(Bilinear(torch.eye(2)), torch.eye(3)), r"V is \(3, 3\)"),
    (lambda: Field(Softmax(1.0), manifold=Sphere), "an instance such as Sphere"),
    (lambda: Field(Softmax(1.0), value=torch.ones(2, 2, 2)), r"one \(d, d\) matrix"),
    (lambda: Field(Softmax(1.0)).restricted(torch.ones(1, 3, 3)), "allowed must be a .* bool tensor"),
    (lambda: Field(Softmax(1.0), value=torch.eye(3)).validate(2), r"value must be \(2, 2\)"),
])
def test_a_field_that_cannot_be_built_gets_a_one_line_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)
