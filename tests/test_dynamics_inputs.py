"""Tests of `hardmax.dynamics.inputs`: what callers pass (tensors, arrays, lists, numbers) turned into checked tensors,
the dtypes kept or chosen, and a one-line ValueError naming the problem for every input refused."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hardmax.dynamics import as_floating, as_tensor, validate_A, validate_alpha
from hardmax.dynamics.inputs import COARSE_DTYPES, MAX_STEPS


def test_as_tensor_keeps_what_it_is_given_unless_told():
    t = torch.arange(3, dtype=torch.int32)
    assert as_tensor(t, "x") is t  # a tensor is used as it is
    assert as_tensor([[1, 2], [3, 4]], "x").dtype == torch.int64
    assert as_tensor(np.float32(2.5), "x").dtype == torch.float32
    converted = as_tensor(np.eye(2)[:, ::-1], "x", dtype=torch.float32)  # a strided view: made contiguous
    assert converted.dtype == torch.float32 and torch.equal(converted, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))


@pytest.mark.parametrize(("given", "dtype"), [
    (np.array([[1, 2]]), torch.float64),  # NumPy integers: float64, NumPy's default
    ([[1, 2]], torch.float64),
    (torch.tensor([[1, 2]]), torch.get_default_dtype()),  # torch integers: torch's default
    (torch.zeros(2, dtype=torch.float32), torch.float32),  # floating tensors keep their dtype
    (np.zeros(2, dtype=np.float32), torch.float32),
])
def test_as_floating_chooses_a_floating_dtype(given, dtype):
    assert as_floating(given, "tokens").dtype == dtype
    assert as_floating(np.array([1, 2]), "tokens", integers=torch.float32).dtype == torch.float32


def test_validate_A_returns_the_identity_or_the_matrix_in_the_tokens_dtype():
    assert torch.equal(validate_A(None, 3, torch.float32, "cpu"), torch.eye(3))
    A = validate_A([[2, 1], [1, 2]], 2, torch.float64, "cpu")
    assert A.dtype == torch.float64 and A.tolist() == [[2.0, 1.0], [1.0, 2.0]]


def test_validate_alpha_gives_one_alpha_per_layer_and_keeps_the_graph():
    assert validate_alpha(0.5, 3, torch.float32, "cpu").tolist() == [0.5] * 3
    assert validate_alpha([0.5, 1.0], 2, torch.float64, "cpu").tolist() == [0.5, 1.0]
    learned = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    validate_alpha(learned, 4, torch.float64, "cpu").sum().backward()
    assert learned.grad.item() == 4.0  # one α used by four layers: ∂(Σ α_k)/∂α = 4


@pytest.mark.parametrize(("call", "message"), [
    (lambda: as_tensor({"z": 1}, "tokens"), "tokens must be a torch tensor or a NumPy array, got dict"),
    (lambda: as_tensor([[1.0, 2.0], [3.0]], "tokens"), "tokens must be a rectangular numeric array"),
    (lambda: as_tensor(np.array([1j]), "A"), "A must be real, got complex dtype complex128"),
    (lambda: as_tensor(torch.tensor([1j]), "A"), "A must be real, got complex dtype torch.complex64"),
    (lambda: as_tensor(np.array(["a"]), "tokens"), "tokens must be numeric"),
    (lambda: as_floating(torch.zeros(2, dtype=torch.float16), "tokens"), "cannot resolve ties"),
    (lambda: validate_A(np.eye(3), 2, torch.float64, "cpu"), r"A must have shape \(2, 2\) to match tokens of "
                                                              r"dimension 2, got \(3, 3\)"),
    (lambda: validate_A([[1.0, math.nan], [math.nan, 1.0]], 2, torch.float64, "cpu"), "A contains NaN or inf"),
    (lambda: validate_A([[1.0, 0.5], [0.0, 1.0]], 2, torch.float64, "cpu"), r"A must be symmetric \(A != A.T\)"),
    (lambda: validate_A([[1.0, 0.0], [0.0, -2.0]], 2, torch.float64, "cpu"),
     "A must be positive definite; its smallest eigenvalue is -2"),
    (lambda: validate_alpha(True, 2, torch.float64, "cpu"), "alpha must be a number > 0, got True"),
    (lambda: validate_alpha(np.array([True]), 2, torch.float64, "cpu"), "got a bool array"),
    (lambda: validate_alpha([], 2, torch.float64, "cpu"), "got an empty array"),
    (lambda: validate_alpha([1.0, -0.5], 2, torch.float64, "cpu"), r"alpha must be finite and > 0, got -0.5"),
    (lambda: validate_alpha([1.0, 1.0, 1.0], 2, torch.float64, "cpu"),
     r"one value per layer \(2\), got 3 values"),
])
def test_a_refused_input_is_named_in_one_line(call, message):
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_the_bounds_the_library_states():
    """Coarse dtypes (eps ≥ 2^-10, float16's: about 1e-3) are the ones refused where ties are decided; 10⁷ steps is
    the largest run."""
    assert torch.float16 in COARSE_DTYPES and torch.bfloat16 in COARSE_DTYPES
    assert all(torch.finfo(dtype).eps >= 2**-10 for dtype in COARSE_DTYPES)
    assert torch.float32 not in COARSE_DTYPES and MAX_STEPS == 10**7
