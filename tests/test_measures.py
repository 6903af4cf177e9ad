"""hardmax.measures: coding rates against closed forms, the slow textbook formula, and invariants."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from hardmax.measures import (
    MCR2Loss,
    class_coding_rate,
    coding_rate,
    rate_reduction,
    subspace_coding_rate,
    zero_fraction,
)


def reference_rate(Z: torch.Tensor, eps: float) -> float:
    """The textbook formula, ½ logdet(I + d/(N ε²) ZᵀZ), in float64 with slogdet (slow, obviously right)."""
    Z = Z.double()
    N, d = Z.shape
    sign, logdet = torch.linalg.slogdet(torch.eye(d, dtype=torch.float64) + d / (N * eps**2) * Z.T @ Z)
    assert sign > 0
    return 0.5 * float(logdet)


def reference_class_rate(Z: torch.Tensor, labels: torch.Tensor, eps: float) -> float:
    N = Z.shape[0]
    return sum(Z[labels == j].shape[0] / N * reference_rate(Z[labels == j], eps) for j in labels.unique().tolist())


def orthogonal_subspaces(d=16, K=4, p=4, per_class=200, dtype=torch.float64):
    """The issue's closed-form case: class k spread as ±e_i over p basis vectors of its own block."""
    eye = torch.eye(d, dtype=dtype)
    rows, labels = [], []
    for k in range(K):
        basis = eye[k * p:(k + 1) * p]
        rows.append(torch.cat([basis, -basis]).repeat(per_class // (2 * p), 1))
        labels += [k] * per_class
    return torch.cat(rows), torch.tensor(labels)


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------


def test_orthogonal_subspaces_closed_form():
    Z, labels = orthogonal_subspaces()
    eps = math.sqrt(0.5)
    parts = rate_reduction(Z, labels, eps)
    assert parts.rate.item() == pytest.approx(8 * math.log(3), rel=1e-13)
    assert parts.class_rate.item() == pytest.approx(2 * math.log(9), rel=1e-13)
    assert parts.reduction.item() == pytest.approx(8 * math.log(3) - 2 * math.log(9), rel=1e-12)
    assert coding_rate(Z, eps).item() == pytest.approx(8 * math.log(3), rel=1e-13)
    assert class_coding_rate(Z, labels, eps).item() == pytest.approx(2 * math.log(9), rel=1e-13)
    assert parts.counts.tolist() == [200] * 4


@pytest.mark.parametrize("d,K,p,per_class,eps2", [(12, 3, 4, 40, 0.25), (8, 2, 2, 12, 2.0), (6, 3, 2, 4, 1.0)])
def test_general_closed_form(d, K, p, per_class, eps2):
    Z, labels = orthogonal_subspaces(d, K, p, per_class)
    N = K * per_class
    R = 0.5 * sum(p * math.log(1 + d * per_class / (N * eps2 * p)) for _ in range(K))
    Rc = sum(per_class / (2 * N) * p * math.log(1 + d / (p * eps2)) for _ in range(K))
    parts = rate_reduction(Z, labels, math.sqrt(eps2))
    assert parts.rate.item() == pytest.approx(R, rel=1e-12)
    assert parts.class_rate.item() == pytest.approx(Rc, rel=1e-12)


def test_identical_classes_have_no_reduction():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(30, 5, generator=g, dtype=torch.float64)
    Z = torch.cat([base, base, base])
    labels = torch.arange(3).repeat_interleave(30)
    assert rate_reduction(Z, labels, 0.5).reduction.item() == pytest.approx(0.0, abs=1e-12)


def test_unit_norm_bound_and_isotropic_equality():
    d, eps = 6, 0.7
    bound = d / 2 * math.log(1 + 1 / eps**2)
    g = torch.Generator().manual_seed(1)
    Z = torch.nn.functional.normalize(torch.randn(500, d, generator=g, dtype=torch.float64), dim=-1)
    assert coding_rate(Z, eps).item() < bound
    eye = torch.eye(d, dtype=torch.float64)
    isotropic = torch.cat([eye, -eye]).repeat(7, 1)  # ZᵀZ = (N/d) I
    assert coding_rate(isotropic, eps).item() == pytest.approx(bound, rel=1e-13)


def test_matches_reference_formula_and_both_gram_forms():
    g = torch.Generator().manual_seed(2)
    for N, d in [(50, 7), (3, 9), (9, 9), (1, 4)]:
        Z = torch.randn(N, d, generator=g, dtype=torch.float64)
        assert coding_rate(Z, 0.3).item() == pytest.approx(reference_rate(Z, 0.3), rel=1e-12)
        labels = torch.randint(0, 3, (N,), generator=g)
        assert class_coding_rate(Z, labels, 0.3).item() == pytest.approx(
            reference_class_rate(Z, labels, 0.3), rel=1e-12)


@given(st.integers(0, 10_000), st.integers(1, 12), st.integers(1, 6))
def test_orthogonal_invariance(seed, N, d):
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(N, d, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    assert coding_rate(Z @ Q, 0.5).item() == pytest.approx(coding_rate(Z, 0.5).item(), rel=1e-10, abs=1e-12)


@given(st.integers(0, 10_000), st.floats(1.01, 10.0))
def test_monotone_in_scale(seed, factor):
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(20, 4, generator=g, dtype=torch.float64)
    assert coding_rate(factor * Z, 0.5).item() > coding_rate(Z, 0.5).item()


def test_batched_equals_one_at_a_time_with_masks():
    g = torch.Generator().manual_seed(3)
    Z = torch.randn(2, 5, 12, 3, generator=g, dtype=torch.float64)
    mask = torch.rand(2, 5, 12, generator=g) > 0.4
    mask[..., 0] = True
    Z_padded = torch.where(mask.unsqueeze(-1), Z, torch.nan)  # padding may hold anything
    batched = coding_rate(Z_padded, 0.4, mask=mask)
    assert batched.shape == (2, 5)
    for i in range(2):
        for j in range(5):
            one = coding_rate(Z[i, j][mask[i, j]], 0.4).item()
            assert batched[i, j].item() == pytest.approx(one, rel=1e-12)
            assert one == pytest.approx(reference_rate(Z[i, j][mask[i, j]], 0.4), rel=1e-12)
    # sets shorter than d use the N×N form: same answer
    short = Z[..., :2, :]
    assert torch.allclose(coding_rate(short, 0.4), coding_rate(torch.cat([short, torch.zeros_like(Z)], -2),
                                                                0.4, mask=torch.cat([torch.ones(2, 5, 2, dtype=bool),
                                                                                     torch.zeros(2, 5, 12, dtype=bool)],
                                                                                    -1)), rtol=1e-12)


def test_weights_count_copies():
    g = torch.Generator().manual_seed(9)
    Z = torch.randn(3, 6, 4, generator=g, dtype=torch.float64)
    weights = torch.tensor([[1.0, 2, 3, 0, 1, 1], [4, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.float64)
    got = coding_rate(Z, 0.5, weights=weights)
    for b in range(3):
        copies = Z[b].repeat_interleave(weights[b].long(), dim=0)
        assert got[b].item() == pytest.approx(reference_rate(copies, 0.5), rel=1e-12)
    U = torch.randn(2, 4, 2, generator=g, dtype=torch.float64)
    copies = Z[0].repeat_interleave(weights[0].long(), dim=0)
    assert subspace_coding_rate(Z, U, 0.5, weights=weights)[0].item() == pytest.approx(
        subspace_coding_rate(copies, U, 0.5).item(), rel=1e-12)
    with pytest.raises(ValueError, match="weights"):
        coding_rate(Z, 0.5, weights=-weights)


def test_chunked_accumulation_equals_one_shot(monkeypatch):
    import hardmax.measures.rate as rate

    g = torch.Generator().manual_seed(4)
    Z = torch.randn(7, 40, 5, generator=g)
    labels = torch.randint(0, 4, (280,), generator=g)
    whole = coding_rate(Z, 0.5), rate_reduction(Z.reshape(-1, 5), labels, 0.5).reduction
    monkeypatch.setattr(rate, "_CHUNK_ELEMENTS", 17)  # forces chunks of sets, rows and class rows
    chunked = coding_rate(Z, 0.5), rate_reduction(Z.reshape(-1, 5), labels, 0.5).reduction
    assert torch.allclose(whole[0], chunked[0], rtol=1e-12)
    assert torch.allclose(whole[1], chunked[1], rtol=1e-10)


def test_float32_near_rank_deficient_classes_are_finite_and_accurate():
    g = torch.Generator().manual_seed(5)
    # each class spans one direction plus 1e-4 noise: Z_jᵀZ_j is nearly rank 1, c·Z_jᵀZ_j has eigenvalues
    # from ~1e-3 to ~1e7 (the mcr2 reference's float32 logdet is NaN or off on such classes)
    directions = torch.randn(4, 32, generator=g, dtype=torch.float64)
    labels = torch.arange(4).repeat_interleave(500)
    Z64 = directions[labels] * torch.randn(2000, 1, generator=g, dtype=torch.float64)
    Z64 = Z64 + 1e-4 * torch.randn(2000, 32, generator=g, dtype=torch.float64)
    Z32 = Z64.float()
    eps = 1e-2
    parts32 = rate_reduction(Z32, labels, eps)
    parts64 = rate_reduction(Z32.double(), labels, eps)
    for a, b in [(parts32.rate, parts64.rate), (parts32.class_rate, parts64.class_rate)]:
        assert torch.isfinite(a)
        assert a.item() == pytest.approx(b.item(), rel=1e-9)
    assert parts32.class_rate.item() == pytest.approx(reference_class_rate(Z32, labels, eps), rel=1e-9)


def test_subspace_coding_rate_is_sum_of_projected_rates():
    g = torch.Generator().manual_seed(6)
    Z = torch.randn(3, 20, 8, generator=g, dtype=torch.float64)
    U = torch.randn(4, 8, 2, generator=g, dtype=torch.float64)
    mask = torch.rand(3, 20, generator=g) > 0.3
    got = subspace_coding_rate(Z, U, 0.5, mask=mask)
    for b in range(3):
        expected = sum(reference_rate(Z[b][mask[b]] @ U[k], 0.5) for k in range(4))
        assert got[b].item() == pytest.approx(expected, rel=1e-12)
    # one head with U = I is the plain coding rate
    assert torch.allclose(subspace_coding_rate(Z, torch.eye(8, dtype=torch.float64), 0.5), coding_rate(Z, 0.5))


def test_zero_fraction():
    Z = torch.tensor([[[0.0, 1.0], [0.0, 0.0], [5.0, 5.0]]])
    assert zero_fraction(Z).tolist() == [pytest.approx(0.5)]
    assert zero_fraction(Z, mask=torch.tensor([[True, False, True]])).tolist() == [pytest.approx(0.25)]


# --------------------------------------------------------------------------------------------
# The loss
# --------------------------------------------------------------------------------------------


def test_mcr2_loss_value_and_gradcheck():
    g = torch.Generator().manual_seed(7)
    Z = torch.randn(12, 4, generator=g, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0, 1, 2] * 4)
    loss_fn = MCR2Loss(eps=0.5, gamma=1.0, normalize=False)
    result = loss_fn(Z, labels)
    assert result.loss.item() == pytest.approx(-(reference_rate(Z.detach(), 0.5)
                                                 - reference_class_rate(Z.detach(), labels, 0.5)), rel=1e-12)
    assert result.reduction.item() == pytest.approx(-result.loss.item(), rel=1e-12)
    assert torch.autograd.gradcheck(lambda z: loss_fn(z, labels).loss, (Z,))
    normalized = MCR2Loss(eps=0.5, gamma=2.0)
    assert torch.autograd.gradcheck(lambda z: normalized(z, labels).loss, (Z,))
    # the subspace and batched rates are differentiable too
    U = torch.randn(2, 4, 2, generator=g, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda z: subspace_coding_rate(z.reshape(3, 4, 4), U, 0.5).sum(), (Z,))


def test_mcr2_loss_training_increases_reduction():
    g = torch.Generator().manual_seed(8)
    Z = torch.randn(60, 6, generator=g, requires_grad=True)
    labels = torch.arange(3).repeat(20)
    loss_fn = MCR2Loss(eps=0.5)
    before = loss_fn(Z, labels).reduction.item()
    optimizer = torch.optim.SGD([Z], lr=0.5)
    for _ in range(50):
        optimizer.zero_grad()
        loss_fn(Z, labels).loss.backward()
        optimizer.step()
    assert loss_fn(Z, labels).reduction.item() > 2 * before + 0.1


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,match", [
    (lambda: coding_rate(torch.zeros(0, 3), 0.5), "empty set"),
    (lambda: coding_rate(torch.ones(2, 4, 3), 0.5, mask=torch.tensor([[True] * 4, [False] * 4])), "no real sample"),
    (lambda: coding_rate(torch.ones(4, 3), 0.0), "eps"),
    (lambda: coding_rate(torch.ones(4, 3), -1.0), "eps"),
    (lambda: coding_rate(torch.ones(4, 3), float("nan")), "eps"),
    (lambda: coding_rate(torch.tensor([[1.0, float("nan")]]), 0.5), "NaN"),
    (lambda: coding_rate(torch.eye(4).expand(3, 4, 4).contiguous() / torch.tensor([1.0, 0.0, 1.0])[:, None, None],
                         0.5), "NaN or inf"),  # an inf in the second of three sets
    (lambda: coding_rate(torch.full((4, 3), 1e200, dtype=torch.float64), 0.5), "too large"),
    (lambda: coding_rate(torch.ones(4, 3, dtype=torch.int64), 0.5), "floating"),
    (lambda: coding_rate(torch.ones(3), 0.5), "shape"),
    (lambda: coding_rate(torch.ones(4, 3), 0.5, mask=torch.ones(5, dtype=torch.bool)), "does not match"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0]), 0.5), "labels must have shape"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0.0, 1, 0, 1]), 0.5), "integer"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0, -1]), 0.5), "≥ 0"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0, 3]), 0.5, num_classes=2), "num_classes"),
    (lambda: rate_reduction(torch.ones(2, 4, 3), torch.tensor([0, 1]), 0.5), r"\(N, d\)"),
    (lambda: subspace_coding_rate(torch.ones(4, 3), torch.ones(2, 4, 2), 0.5), "U must have shape"),
    (lambda: MCR2Loss(eps=0), "eps"),
    (lambda: MCR2Loss(eps=0.5, gamma=-1), "gamma"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_benchmark_script_quick(tmp_path, capsys):
    """benchmarks/bench_rate.py --quick runs, prints its table and writes its JSON (so that it does not rot)."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_rate.py"
    spec = importlib.util.spec_from_file_location("bench_rate", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--repeat", "1", "--threads", "1", "--json", str(out)]) == 0
    assert "| case | library | reference | target |" in capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results["token_sets"]["max_abs_error_library"] < 1e-10
    assert results["samples"]["reference_membership_bytes"] == 10 * 20_000**2 * 4
