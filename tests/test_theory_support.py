"""hardmax.theory.support: the compiled support-growth kernel against its reference (tests/reference.py) and
closed forms."""

import numpy as np
import pytest
import reference

from hardmax.dynamics import simulate
from hardmax.theory.support import support_growth


def _directions(d: int, m: int = 32, seed: int = 0) -> np.ndarray:
    C = np.random.default_rng(seed).normal(size=(m, d))
    return C / np.linalg.norm(C, axis=1, keepdims=True)


@pytest.mark.parametrize("d", [1, 2, 3, 5, 16])
@pytest.mark.parametrize("n", [1, 3, 4, 7, 33])
def test_kernel_equals_the_reference_on_layers_that_grow(d, n):
    rng = np.random.default_rng(10 * d + n)
    Z = rng.normal(size=(9, n, d)) * rng.uniform(0.5, 2.0, size=(9, 1, 1))  # unrelated layers: hulls grow and shrink
    M = rng.normal(size=(d, d))
    for A in (np.eye(d), M @ M.T + d * np.eye(d)):
        for layers in (np.arange(8), np.array([0, 3, 7]), np.array([5])):
            want = reference.support_growth(Z, layers, A, _directions(d))
            got = support_growth(Z, layers, A, _directions(d), threads=2)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert support_growth(Z, np.arange(8), np.eye(d), _directions(d)) > 0


def test_one_corner_pushed_out_grows_by_its_displacement():
    """A square's corner (1, 1) moved to (1 + δ, 1 + δ): along its own direction c = z/‖z‖ the support grows by
    ⟨c, (δ, δ)⟩ = √2 δ, and no direction can see more than the displacement's length √2 δ."""
    square = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
    for delta in (1e-6, 0.25, 3.0):
        moved = square.copy()
        moved[0] += delta
        Z = np.stack([square, moved])
        assert support_growth(Z, np.array([0]), np.eye(2), _directions(2)) == pytest.approx(np.sqrt(2) * delta,
                                                                                            rel=1e-9)
        # pushed inwards instead: nothing grows
        Z = np.stack([square, square - np.array([[delta / 2, delta / 2], [0, 0], [0, 0], [0, 0]])])
        assert support_growth(Z, np.array([0]), np.eye(2), _directions(2)) == 0.0


def test_a_hardmax_run_never_grows_its_hull_beyond_rounding():
    rng = np.random.default_rng(3)
    for d in (2, 3):
        tokens = rng.normal(size=(60, d))
        Z = simulate(tokens, alpha=0.3, layers=80).tokens.numpy()
        growth = support_growth(Z, np.arange(80), np.eye(d), _directions(d))
        assert 0.0 <= growth <= 1e-13 * np.abs(Z).max()


def test_no_layers_no_growth_and_zero_directions_skipped():
    Z = np.zeros((3, 4, 2))
    assert support_growth(Z, np.array([], dtype=np.int64), np.eye(2), _directions(2)) == 0.0
    Z[1, 0] = [1.0, 0.0]  # layer 0 is all at the origin: its n directions A z_i are 0 and skipped
    assert support_growth(Z, np.array([0]), np.eye(2), np.array([[0.0, 1.0]])) == 0.0
    assert support_growth(Z, np.array([0]), np.eye(2), np.array([[1.0, 0.0]])) == pytest.approx(1.0)
