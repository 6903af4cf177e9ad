"""Tests of `hardmax.measures.rate`: coding rates, rate reduction and the subspace rate against closed
forms, the slow textbook formula and invariants.

The issue's closed forms exactly; orthogonal invariance and monotonicity in scale (hypothesis); batched = one
at a time with masks; weights = repeated rows; chunked = one shot; any finite ε, exact scale freedom for
powers of two, wild labels, NaN and inf refused, empty batches, half precision; the one-line refusals of bad
input (with those of `MCR2Loss` and `zero_fraction`, which share its checks).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from measures_cases import reference_class_rate, reference_rate

from hardmax.measures import (
    MCR2Loss,
    class_coding_rate,
    coding_rate,
    rate_reduction,
    subspace_coding_rate,
    zero_fraction,
)


def orthogonal_subspaces(d=16, K=4, p=4, per_class=200, dtype=torch.float64):
    """The issue's closed-form case: class k spread as ±e_i over p basis vectors of its own block."""
    eye = torch.eye(d, dtype=dtype)
    rows, labels = [], []
    for k in range(K):
        basis = eye[k * p:(k + 1) * p]
        rows.append(torch.cat([basis, -basis]).repeat(per_class // (2 * p), 1))
        labels += [k] * per_class
    return torch.cat(rows), torch.tensor(labels)


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


@pytest.mark.parametrize("call,match", [
    (lambda: coding_rate(torch.zeros(0, 3), 0.5), "empty set"),
    (lambda: coding_rate(torch.ones(2, 4, 3), 0.5, mask=torch.tensor([[True] * 4, [False] * 4])), "no real sample"),
    (lambda: coding_rate(torch.ones(4, 3), 0.0), "eps"),
    (lambda: coding_rate(torch.ones(4, 3), -1.0), "eps"),
    (lambda: coding_rate(torch.ones(4, 3), float("nan")), "eps"),
    (lambda: coding_rate(torch.tensor([[1.0, float("nan")]]), 0.5), "NaN"),
    (lambda: coding_rate(torch.eye(4).expand(3, 4, 4).contiguous() / torch.tensor([1.0, 0.0, 1.0])[:, None, None],
                         0.5), "NaN or inf"),  # an inf in the second of three sets
    (lambda: coding_rate(torch.ones(4, 3, dtype=torch.int64), 0.5), "floating"),
    (lambda: coding_rate(torch.ones(3), 0.5), "shape"),
    (lambda: coding_rate(torch.ones(4, 3), 0.5, mask=torch.ones(5, dtype=torch.bool)), "does not match"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0]), 0.5), "labels must have shape"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0.0, 1, 0, 1]), 0.5), "integer"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0, -1]), 0.5), "≥ 0"),
    (lambda: rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0, 3]), 0.5, num_classes=2), "num_classes"),
    (lambda: rate_reduction(torch.ones(2, 4, 3), torch.tensor([0, 1]), 0.5), r"\(N, d\)"),
    (lambda: subspace_coding_rate(torch.ones(4, 3), torch.ones(2, 4, 2), 0.5), "U must have shape"),
    (lambda: subspace_coding_rate(torch.ones(4, 3), torch.tensor([[1.0], [float("nan")], [0.0]]), 0.5),
     "U contains NaN"),
    (lambda: coding_rate(torch.ones(4, 3), 10**400), "eps"),  # an int too large for a float
    (lambda: rate_reduction(torch.tensor([[1.0, 0], [0, float("nan")]]), torch.tensor([0, 1]), 0.5), "NaN or inf"),
    (lambda: rate_reduction(torch.tensor([[1.0, 0], [0, float("inf")]]), torch.tensor([0, 0]), 0.5), "NaN or inf"),
    (lambda: subspace_coding_rate(torch.tensor([[[1.0, float("nan")]]]), torch.ones(1, 2, 1), 0.5), "NaN or inf"),
    (lambda: coding_rate(torch.ones(4, 3), True), "eps"),
    (lambda: MCR2Loss(eps=0.5, gamma=10**400), "gamma"),
    (lambda: zero_fraction(torch.ones(2, 0)), "d = 0"),
    (lambda: MCR2Loss(eps=0), "eps"),
    (lambda: MCR2Loss(eps=0.5, gamma=-1), "gamma"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def logspace_rate(Z: torch.Tensor, eps: float, log2_scale: int = 0) -> float:
    """R(2^log2_scale · Z, ε) as ½ Σ ln(1 + cλ_i) over the eigenvalues of ZᵀZ, in log space:
    ln c = ln d − ln N − 2 ln ε + 2 log2_scale ln 2, no overflow for any ε or scale."""
    Z = Z.double()
    N, d = Z.shape
    log_c = math.log(d) - math.log(N) - 2 * math.log(eps) + 2 * log2_scale * math.log(2)
    total = 0.0
    for lam in torch.linalg.eigvalsh(Z.T @ Z).tolist():
        if lam > 0:
            x = log_c + math.log(lam)
            total += x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))
    return 0.5 * total


@pytest.mark.parametrize("eps", [1e200, 1.7e308, 1e-200, 5e-324, 1e-9, 1e9, 3e-8])
def test_any_finite_eps_gives_the_rate(eps):
    g = torch.Generator().manual_seed(11)
    Z = torch.randn(40, 5, generator=g, dtype=torch.float64)
    got = coding_rate(Z, eps).item()
    assert math.isfinite(got)
    assert got == pytest.approx(logspace_rate(Z, eps), rel=1e-9, abs=1e-12)
    # the same through the class rates and the subspace rates (one class; U = I)
    parts = rate_reduction(Z, torch.zeros(40, dtype=torch.int64), eps)
    assert parts.rate.item() == pytest.approx(got, rel=1e-9, abs=1e-12)
    assert parts.class_rate.item() == pytest.approx(got, rel=1e-9, abs=1e-12)
    assert subspace_coding_rate(Z, torch.eye(5, dtype=torch.float64), eps).item() == pytest.approx(
        got, rel=1e-9, abs=1e-12)


def test_eps_too_large_for_a_float_is_one_value_error_naming_eps():
    with pytest.raises(ValueError, match="eps"):
        coding_rate(torch.ones(4, 3), 10**400)
    with pytest.raises(ValueError, match="eps"):
        rate_reduction(torch.ones(4, 3), torch.tensor([0, 1, 0, 1]), float("inf"))


@pytest.mark.parametrize("power", [-1000, -700, -300, 300, 700, 1000])
def test_rate_is_exactly_scale_free_for_powers_of_two(power):
    """R(sZ, sε) = R(Z, ε): samples beyond 1e154 (squares overflow) or below 1e-154 (squares underflow) and
    ε beyond any square included, for R, Rc, ΔR and R^c."""
    g = torch.Generator().manual_seed(12)
    Z = torch.randn(3, 30, 4, generator=g, dtype=torch.float64)
    labels = torch.arange(30) % 3
    U = torch.randn(2, 4, 2, generator=g, dtype=torch.float64)
    s = 2.0**power
    eps = 0.3
    assert torch.allclose(coding_rate(Z * s, eps * s), coding_rate(Z, eps), rtol=1e-12)
    scaled, plain = rate_reduction(Z[0] * s, labels, eps * s), rate_reduction(Z[0], labels, eps)
    assert scaled.rate.item() == pytest.approx(plain.rate.item(), rel=1e-12)
    assert scaled.class_rate.item() == pytest.approx(plain.class_rate.item(), rel=1e-12)
    assert torch.allclose(subspace_coding_rate(Z * s, U, eps * s), subspace_coding_rate(Z, U, eps), rtol=1e-12)
    # huge samples at a moderate ε: finite, and the log-space formula
    big = coding_rate(Z[0] * 2.0**1000, 0.5).item()
    assert big == pytest.approx(logspace_rate(Z[0], 0.5, 1000), rel=1e-12)


def test_weights_only_count_relative_to_each_other():
    g = torch.Generator().manual_seed(13)
    Z = torch.randn(2, 8, 3, generator=g, dtype=torch.float64)
    weights = torch.tensor([[1.0, 2, 3, 0, 1, 1, 2, 1], [4, 1, 1, 1, 0, 0, 1, 2]], dtype=torch.float64)
    expected = coding_rate(Z, 0.5, weights=weights)
    for factor in (1e-320, 1e-300, 2.0**-1070, 1e300):  # subnormal, tiny and huge weights: the same rate
        got = coding_rate(Z, 0.5, weights=weights * factor)
        assert torch.allclose(got, expected, rtol=1e-12), factor
    # a single subnormal weight per set: that sample alone
    lone = torch.zeros(2, 8, dtype=torch.float64)
    lone[:, 0] = 1e-320
    assert torch.allclose(coding_rate(Z, 0.5, weights=lone), coding_rate(Z[:, :1], 0.5), rtol=1e-12)
    # weights in float16 and weights beyond float16's range in float64
    assert torch.allclose(coding_rate(Z, 0.5, weights=weights.half()), expected, rtol=1e-12)


def test_n_by_n_form_in_chunks_of_columns(monkeypatch):
    """Fewer samples than dimensions (the N×N form) and sets larger than a chunk: the Gram matrix is
    accumulated over blocks of columns (blocks of rows gave ZZᵀ of the wrong size)."""
    import hardmax.measures.rate as rate

    g = torch.Generator().manual_seed(14)
    Z = torch.randn(2, 6, 11, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False
    expected = [reference_rate(Z[0], 0.5), reference_rate(Z[1, :4], 0.5)]
    monkeypatch.setattr(rate, "_CHUNK_ELEMENTS", 17)
    assert coding_rate(Z, 0.5, mask=mask).tolist() == pytest.approx(expected, rel=1e-12)
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    assert class_coding_rate(Z[0], labels, 0.5).item() == pytest.approx(reference_class_rate(Z[0], labels, 0.5),
                                                                        rel=1e-12)
    assert rate_reduction(Z[0], labels, 0.5).rate.item() == pytest.approx(expected[0], rel=1e-12)


def test_many_classes_of_mixed_sizes_match_the_textbook_formula(monkeypatch):
    import hardmax.measures.rate as rate

    g = torch.Generator().manual_seed(15)
    Z = torch.randn(300, 6, generator=g, dtype=torch.float64)
    labels = torch.cat([torch.zeros(150, dtype=torch.int64), torch.randint(1, 60, (150,), generator=g)])
    labels = labels[torch.randperm(300, generator=g)]
    expected = reference_class_rate(Z, labels, 0.4)
    for chunk in (1 << 20, 40, 7):  # several classes per chunk, slices of the large class, one row at a time
        monkeypatch.setattr(rate, "_CHUNK_ELEMENTS", chunk)
        parts = rate_reduction(Z, labels, 0.4)
        assert parts.class_rate.item() == pytest.approx(expected, rel=1e-12)
        assert parts.rate.item() == pytest.approx(reference_rate(Z, 0.4), rel=1e-12)
        present = torch.bincount(labels).nonzero().squeeze(1)
        assert parts.classes.tolist() == present.tolist()
        assert parts.counts.tolist() == torch.bincount(labels)[present].tolist()


def test_wild_labels_cost_what_the_present_classes_cost(monkeypatch):
    """A label of 10^7 (or num_classes = 10^7) costs the (k,) counts, not a Gram matrix or a loop per class."""
    import time

    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "512M")
    g = torch.Generator().manual_seed(16)
    Z = torch.randn(12, 3, generator=g, dtype=torch.float64)
    compact = torch.tensor([0, 1, 2] * 4)
    wild = torch.tensor([0, 10**7, 5] * 4)
    start = time.perf_counter()
    parts = rate_reduction(Z, wild, 0.5)
    loss = MCR2Loss(eps=0.5, num_classes=10**7 + 1)(Z, wild)
    assert time.perf_counter() - start < 10  # the per-class loop took minutes
    reference = rate_reduction(Z, compact, 0.5)
    assert parts.class_rate.item() == pytest.approx(reference.class_rate.item(), rel=1e-13)
    assert parts.classes.tolist() == [0, 5, 10**7] and parts.counts.tolist() == [4, 4, 4]
    assert torch.isfinite(loss.loss)


def test_num_classes_and_labels_are_checked(monkeypatch):
    Z, labels = torch.ones(4, 3), torch.tensor([0, 1, 0, 1])
    for bad in (2.5, True, 0, -3, "2"):
        with pytest.raises(ValueError, match="num_classes"):
            rate_reduction(Z, labels, 0.5, num_classes=bad)
        with pytest.raises(ValueError, match="num_classes"):
            MCR2Loss(eps=0.5, num_classes=bad)
    with pytest.raises(ValueError, match="num_classes"):
        class_coding_rate(Z, torch.tensor([0, 1, 0, 2]), 0.5, num_classes=2)
    parts = rate_reduction(Z, labels, 0.5, num_classes=np_int(3))
    assert parts.classes.tolist() == [0, 1] and parts.counts.tolist() == [2, 2]  # the classes present only


@pytest.mark.parametrize("label", [10**9, 10**12, 2**62])
def test_a_huge_label_value_costs_nothing(monkeypatch, label):
    """Issue #39 (9): per-class counts indexed by the classes present, not the label values (10^9 took 8 GB, 27 s)."""
    import tracemalloc

    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "64M")  # a (label + 1,) allocation would be refused
    Z = torch.randn(50, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, label] * 25)
    tracemalloc.start()
    parts = rate_reduction(Z, labels, 0.5, num_classes=None if label < 2**62 else label + 1)
    tracemalloc.stop()
    assert parts.classes.tolist() == [0, label] and parts.counts.tolist() == [25, 25]
    same = rate_reduction(Z, torch.tensor([0, 1] * 25), 0.5)
    assert parts.reduction.item() == pytest.approx(same.reduction.item(), rel=1e-13)
    assert class_coding_rate(Z, labels, 0.5).item() == pytest.approx(same.class_rate.item(), rel=1e-13)


def np_int(value):
    import numpy as np

    return np.int64(value)


def test_empty_batches_give_empty_results():
    """A batch of no sets has no rates (each set's rate is independent): an empty result, not a torch error."""
    Z = torch.zeros(0, 5, 3, requires_grad=True)
    got = coding_rate(Z, 0.5)
    assert got.shape == (0,) and got.dtype == torch.float64
    got.sum().backward()  # connected to the input, as a non-empty batch would be
    assert coding_rate(torch.zeros(2, 0, 4, 3), 0.5, weights=torch.ones(2, 0, 4)).shape == (2, 0)
    assert subspace_coding_rate(torch.zeros(0, 5, 3), torch.ones(2, 3, 2), 0.5).shape == (0,)
    assert zero_fraction(torch.zeros(0, 5, 3)).shape == (0,)


def test_no_subspaces_is_refused_naming_U():
    with pytest.raises(ValueError, match="U must have shape"):
        subspace_coding_rate(torch.ones(2, 5, 3), torch.ones(0, 3, 2), 0.5)


def test_half_precision_subspace_rate_is_finite_and_matches_float64():
    """Projections of float16 tokens of 100-300 in d = 400 onto bases of 0.5-1.5 (~80,000) exceed float16's
    65,504: they are computed in float64."""
    g = torch.Generator().manual_seed(17)
    Z = (100 + 200 * torch.rand(2, 10, 400, generator=g)).half()
    U = (0.5 + torch.rand(3, 400, 2, generator=g)).half()
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 7:] = False
    got = subspace_coding_rate(Z, U, 0.5, mask=mask)
    expected = [sum(reference_rate(Z[b][mask[b]].double() @ U[k].double(), 0.5) for k in range(3)) for b in range(2)]
    assert torch.isfinite(got).all()
    assert got.tolist() == pytest.approx(expected, rel=1e-12)
    assert torch.equal(coding_rate(Z, 0.5, mask=mask), coding_rate(Z.double(), 0.5, mask=mask))


def test_gradients_through_every_path():
    """The Cholesky path, the eigenvalue path (huge c), the rescaled path (huge samples) and weights."""
    g = torch.Generator().manual_seed(18)
    Z = torch.randn(2, 6, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[1.0, 2, 0.5, 1, 1, 3], [1, 1, 1, 1, 1, 1]], dtype=torch.float64, requires_grad=True)
    for eps in (0.5, 1e-30):
        assert torch.autograd.gradcheck(lambda z, w, eps=eps: coding_rate(z, eps, weights=w), (Z, w))
    assert torch.autograd.gradcheck(lambda z: coding_rate(z * 2.0**1000, 2.0**1000 * 0.5), (Z,))
    labels = torch.tensor([0, 0, 1, 1, 1, 4])
    assert torch.autograd.gradcheck(lambda z: rate_reduction(z[0], labels, 1e-30).reduction, (Z,))
