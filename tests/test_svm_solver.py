"""Tests of `hardmax.svm.solver`: `att_svm`, the Att-SVM program, against closed forms.

Hand examples, one input by brute force over active sets, margins and support, Clarabel against the cvxpy
program and the working set against the whole program, masks, scale invariance (hypothesis), the
verification that refuses a wrong solver answer and certifies infeasibility, the input checks (one-line
ValueError; tensors that require grad are detached).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from svm_cases import TOKENS, issue_example, synthetic

from hardmax.svm import DescentConfig, InfeasibleError, att_svm, descend, is_locally_optimal, optimal_selection


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_hand_example_global_selection(norm):
    # Selecting token 0: the binding constraint is against (0, 0), p^mm = (−0.1, 1)/1.01.
    z = torch.tensor([[0.6, 0.8]], dtype=torch.float64)
    svm = att_svm(TOKENS[None], z, [0], norm=norm)
    p = svm.W @ z[0]
    torch.testing.assert_close(p, torch.tensor([-0.1, 1.0], dtype=torch.float64) / 1.01, rtol=0, atol=1e-7)
    assert 0.5 * float(p @ p) == pytest.approx(0.49505, abs=1e-5)
    assert svm.support.tolist() == [[False, False, True]]
    assert svm.margins[0, 1].item() == pytest.approx(1.11 / 1.01, abs=1e-7)
    assert math.isinf(svm.margins[0, 0].item())


def _token_max_margin(tokens: np.ndarray, alpha: int) -> np.ndarray:
    """min ‖p‖ s.t. (x_α − x_t)ᵀ p ≥ 1, by brute force over active sets (T − 1 ≤ 3 constraints).

    For an active set A the KKT point is p = D_Aᵀλ with D_A D_Aᵀ λ = 1; the answer is the shortest
    such p with λ ≥ 0 that satisfies every constraint.
    """
    D = np.delete(tokens[alpha] - tokens, alpha, axis=0)  # (T − 1, d)
    best = None
    m = len(D)
    for mask in range(1, 2 ** m):
        active = [k for k in range(m) if mask >> k & 1]
        A = D[active]
        lam, *_ = np.linalg.lstsq(A @ A.T, np.ones(len(active)), rcond=None)
        p = A.T @ lam
        if (lam >= -1e-12).all() and (D @ p >= 1 - 1e-9).all() and (best is None or p @ p < best @ best - 1e-12):
            best = p
    assert best is not None
    return best


@given(seed=st.integers(0, 10_000), T=st.integers(2, 4), d=st.integers(4, 6))
def test_one_input_closed_form(seed, T, d):
    # n = 1: W^mm = p zᵀ/‖z‖², rank one, and the Frobenius and nuclear solutions coincide.
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((1, T, d))
    z = rng.standard_normal((1, d))
    alpha = int(rng.integers(T))
    p = _token_max_margin(X[0], alpha)
    expected = torch.as_tensor(np.outer(p, z[0]) / (z[0] @ z[0]))
    fro = att_svm(X, z, [alpha], norm="fro")
    nuc = att_svm(X, z, [alpha], norm="nuc")
    scale = expected.norm().item()
    torch.testing.assert_close(fro.W, expected, rtol=0, atol=3e-5 * scale)  # interior point: ~1e-6 on close calls
    torch.testing.assert_close(nuc.W, expected, rtol=0, atol=3e-5 * scale)
    assert fro.rank == 1 and nuc.rank == 1
    assert fro.objective == pytest.approx(np.linalg.norm(p) / np.linalg.norm(z), rel=1e-6)
    assert nuc.objective == pytest.approx(fro.objective, rel=1e-6)


def test_margins_and_support_are_consistent():
    X, z, *_ = synthetic(1, 4, 5, 8, seed=3)
    svm = att_svm(X[0], z[0], [0, 1, 2, 3], norm="fro")
    finite = torch.isfinite(svm.margins)
    assert (svm.margins[finite] >= 1 - 1e-7).all()
    assert svm.support.any()  # a max-margin solution has at least one active constraint
    assert svm.status == "optimal" and svm.solve_time > 0
    # KKT: W^mm is a nonnegative combination of the support constraints' matrices (x_α − x_t) z_iᵀ.
    i, t = svm.support.nonzero(as_tuple=True)
    A = (X[0][i, svm.selection[i]] - X[0][i, t])[:, :, None] * z[0][i][:, None, :]
    lam, *_ = np.linalg.lstsq(A.reshape(len(i), -1).T.numpy(), svm.W.reshape(-1).numpy(), rcond=None)
    assert (lam > -1e-6).all()
    torch.testing.assert_close(torch.as_tensor(lam) @ A.reshape(len(i), -1), svm.W.reshape(-1), atol=1e-6, rtol=0)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize(("n", "T", "d", "seed"), [(6, 8, 10, 0), (3, 5, 4, 1), (4, 4, 9, 2)])
def test_direct_clarabel_equals_the_cvxpy_program(norm, n, T, d, seed):
    # The reduced conic program handed to Clarabel is the cvxpy program written in W (d × d): same W,
    # objective and support tokens, on problems with several queries (the nuclear solution has rank > 1).
    X, z, y, v, _ = synthetic(1, n, T, d, seed=seed)
    selection = optimal_selection(X[0], y[0], v[0])
    fast = att_svm(X[0], z[0], selection, norm=norm)
    ref = att_svm(X[0], z[0], selection, norm=norm, backend="cvxpy")
    assert fast.status == "optimal"
    torch.testing.assert_close(fast.W, ref.W, rtol=0, atol=1e-5 * ref.W.norm().item())
    assert fast.objective == pytest.approx(ref.objective, rel=1e-8)
    assert fast.support.tolist() == ref.support.tolist()
    if norm == "nuc":
        assert fast.rank > 1


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_working_set_gives_the_whole_program_solution(norm):
    # Cutting planes (forced here by a low threshold) end at the solution of the whole program.
    X, z, y, v, _ = synthetic(1, 8, 12, 8, seed=6)
    selection = optimal_selection(X[0], y[0], v[0])
    whole = att_svm(X[0], z[0], selection, norm=norm, working_set_above=None)
    cut = att_svm(X[0], z[0], selection, norm=norm, working_set_above=10)
    torch.testing.assert_close(cut.W, whole.W, rtol=0, atol=1e-5 * whole.W.norm().item())
    assert cut.objective == pytest.approx(whole.objective, rel=1e-7)
    assert cut.support.tolist() == whole.support.tolist()
    # An infeasible program stays infeasible on a working set.
    Xb, zb, *_ = synthetic(1, 12, 8, 3, seed=1)
    with pytest.raises(ValueError, match="infeasible"):
        att_svm(Xb[0], zb[0], torch.zeros(12, dtype=torch.long), working_set_above=10)


def test_self_attention_uses_token_zero_as_query():
    X, *_ = synthetic(1, 3, 4, 6, seed=5)
    a = att_svm(X[0], None, [1, 2, 3])
    b = att_svm(X[0], X[0][:, 0], [1, 2, 3])
    torch.testing.assert_close(a.W, b.W, atol=1e-8, rtol=0)


def test_mask_drops_padding_constraints():
    X, z, *_ = synthetic(1, 2, 4, 6, seed=7)
    mask = torch.tensor([[True, True, True, False], [True, True, True, True]])
    padded = att_svm(X[0], z[0], [0, 1], mask=mask)
    assert math.isinf(padded.margins[0, 3].item())
    # The same program written without the padding token in input 0: duplicate one of its real tokens.
    X2 = X[0].clone()
    X2[0, 3] = X2[0, 2]
    torch.testing.assert_close(att_svm(X2, z[0], [0, 1]).W, padded.W, atol=1e-7, rtol=0)


def test_infeasible_says_why():
    X, z, *_ = synthetic(1, 12, 8, 3, seed=1)
    with pytest.raises(ValueError, match=r"infeasible.*d = 3 < max\(T − 1, n\) = 12"):
        att_svm(X[0], z[0], torch.zeros(12, dtype=torch.long))
    # A repeated selected token is infeasible in any dimension.
    Xr = X[0][:2].clone()
    Xr[0, 1] = Xr[0, 0]
    with pytest.raises(ValueError, match="infeasible.*degenerate"):
        att_svm(torch.cat([Xr, torch.zeros(2, 8, 7, dtype=torch.float64)], -1), torch.ones(2, 10), [0, 0])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"X": [[[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.0]]]}, "ragged"),
    ({"X": [[[np.nan, 1.0], [1.0, 0.0]]]}, "NaN"),
    ({"X": [[0.0, 1.0], [1.0, 0.0]]}, r"shape \(n, T, d\)"),
    ({"selection": [2]}, "out of range"),
    ({"selection": [-1]}, "out of range"),
    ({"selection": [0.0]}, "integer"),
    ({"selection": [0, 1]}, "n = 1"),
    ({"norm": "l1"}, "norm must be one of"),
    ({"backend": "scs"}, "backend must be one of"),
    ({"working_set_above": 0}, "working_set_above must be"),
    ({"z": [[0.0, 1.0, 2.0]]}, "z must have shape"),
    ({"z": [[np.inf, 1.0]]}, "z contains NaN"),
    ({"mask": [[True, False]]}, "masked"),
])
def test_bad_input(kwargs, message):
    args = {"X": [[[0.0, 1.0], [1.0, 0.0]]], "z": [[1.0, 0.0]], "selection": [1], "norm": "fro", **kwargs}
    if "mask" in args:
        args["mask"] = torch.tensor(args["mask"])
    with pytest.raises(ValueError, match=message):
        att_svm(args["X"], args["z"], args["selection"], norm=args["norm"], mask=args.get("mask"),
                backend=args.get("backend", "clarabel"), working_set_above=args.get("working_set_above", 2000))


SCALES = [1e-6, 1e-3, 0.37, 300.0, 1e3, 1e4, 1e6]


def _scale_problem(case: int):
    if case == 0:
        return issue_example()
    n, T, d, seed = [(6, 8, 10, 1), (4, 5, 8, 3), (2, 6, 3, 2), (1, 3, 4, 5)][case - 1]
    X, z, y, v, _ = synthetic(1, n, T, d, seed=seed)
    X, z, y, v = X[0] * 2.5, z[0] * 0.7, y[0], v[0]  # not unit norm
    return X, z, y, v, optimal_selection(X, y, v)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize("case", [0, 1, 2, 3, 4])
def test_att_svm_is_scale_invariant(norm, case):
    # W(s·X, s·z) = W(X, z)/s², the same margins and support tokens, and the same verdict of
    # is_locally_optimal at every scale from 1e-6 to 1e6 (before: 0 support tokens at s = 300,
    # "infeasible" at s ≤ 1e-3, objective·s² 14× too large at 1e4).
    # s·X is rounded, so W(s·X, s·z) solves data 1e-16 apart: the QP's W agrees to ~1e-12, the
    # nuclear-norm SDP's to its accuracy ~√gap (2e-6 measured). Powers of two below: the same bits.
    X, z, y, v, sel = _scale_problem(case)
    try:
        ref = att_svm(X, z, sel, norm=norm)
    except InfeasibleError:
        ref = None
    local = is_locally_optimal(X, z, y, v, sel, norm=norm)
    tol = 1e-6 if norm == "fro" else 5e-6
    for s in SCALES:
        if ref is None:
            with pytest.raises(InfeasibleError):
                att_svm(s * X, s * z, sel, norm=norm)
        else:
            a = att_svm(s * X, s * z, sel, norm=norm)
            torch.testing.assert_close(a.W * s**2, ref.W, rtol=0, atol=tol * ref.W.norm().item())
            assert a.objective * s**2 == pytest.approx(ref.objective, rel=1e-6)
            assert a.support.tolist() == ref.support.tolist() and a.support.any()
            finite = torch.isfinite(ref.margins)
            torch.testing.assert_close(a.margins[finite], ref.margins[finite], rtol=tol, atol=tol)
            assert a.margins[finite].min() >= 1 - 1e-6 and a.margins[finite].min() <= 1 + 1e-5
            assert a.rank == ref.rank
        assert is_locally_optimal(s * X, s * z, y, v, sel, norm=norm) == local
    if ref is not None:
        # Tokens and queries on different scales: W(s·X, t·z) = W(X, z)/(s t).
        a = att_svm(1e5 * X, 1e-4 * z, sel, norm=norm)
        torch.testing.assert_close(a.W * 10.0, ref.W, rtol=0, atol=tol * ref.W.norm().item())
        # Powers of two scale float64 exactly, and so does the solver's W: the same bits.
        for k in (-40, -7, 13, 60):
            a = att_svm(2.0**k * X, 2.0**k * z, sel, norm=norm)
            assert torch.equal(a.W * 4.0**k, ref.W) and torch.equal(a.margins, ref.margins)


@given(seed=st.integers(0, 10_000), exponent=st.floats(-6, 6), shape=st.sampled_from([(3, 4, 5), (5, 6, 8), (2, 3, 2)]),
       norm=st.sampled_from(["fro", "nuc"]))
def test_att_svm_scale_invariance_property(seed, exponent, shape, norm):
    rng = np.random.default_rng(seed)
    n, T, d = shape
    X, z = rng.standard_normal((n, T, d)), rng.standard_normal((n, d))
    sel = rng.integers(0, T, n)
    s = 10.0**exponent
    try:
        ref = att_svm(X, z, sel, norm=norm)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            att_svm(s * X, s * z, sel, norm=norm)
        return
    a = att_svm(s * X, s * z, sel, norm=norm)
    # The SDP's accuracy: ~√gap = 1e-5 relative at Clarabel's gap tolerance 1e-10 (seed 374, s = 10, (2, 3, 2) measured
    # 1.4e-5; powers of two, as in test_att_svm_is_scale_invariant, give the same bits and need none of it).
    tol = 1e-6 if norm == "fro" else 3e-5
    torch.testing.assert_close(a.W * s**2, ref.W, rtol=0, atol=tol * ref.W.norm().item())
    assert a.support.tolist() == ref.support.tolist() and a.support.any()


def _patched_solver(monkeypatch, change):
    """Make the Clarabel backend return `change(W, dual)` -> (W, status, dual) instead of its own result."""
    from hardmax.svm import solver

    original = solver._solve_reduced

    def patched(diffs, queries, norm):
        out = original(diffs, queries, norm)
        return change(out[0], out[2] if len(out) > 2 else None, diffs)

    monkeypatch.setattr(solver, "_solve_reduced", patched)


def test_a_solution_without_active_constraint_is_refused(monkeypatch):
    # 1.03 × the max-margin W: feasible, margins ≥ 1.03, no support token; "optimal_inaccurate" was accepted.
    X, z, _, _, sel = issue_example()
    _patched_solver(monkeypatch, lambda W, dual, diffs: (1.03 * W, "optimal_inaccurate", dual))
    with pytest.raises(ValueError, match="no active constraint"):
        att_svm(X, z, sel)


def test_a_violated_margin_is_refused(monkeypatch):
    X, z, _, _, sel = issue_example()
    _patched_solver(monkeypatch, lambda W, dual, diffs: (0.999 * W, "optimal", dual))
    with pytest.raises(ValueError, match="violated margin"):
        att_svm(X, z, sel)


def test_a_feasible_but_larger_w_is_refused(monkeypatch):
    # Margins exactly those of W^mm (a direction outside span{a_j} added), but a 5 % larger norm:
    # only the duality gap, certified by the multipliers, tells it from the max-margin solution.
    X, z, *_ = synthetic(1, 1, 3, 5, seed=9)

    def larger(W, dual, diffs):
        q, _ = np.linalg.qr(np.concatenate([diffs.T, np.eye(5)], 1))  # q[:, 2:] ⟂ span{a_j} (2 differences)
        extra = np.outer(q[:, 3], np.ones(5))
        return W + 0.3 * np.linalg.norm(W) * extra / np.linalg.norm(extra), "optimal", dual

    assert att_svm(X[0], z[0], [0]).gap < 1e-6
    _patched_solver(monkeypatch, larger)
    with pytest.raises(ValueError, match="duality gap"):
        att_svm(X[0], z[0], [0])


def test_an_unverified_infeasible_status_is_not_taken_for_infeasibility(monkeypatch):
    # A feasible program reported "infeasible" (as at s ≤ 1e-3 before): the Farkas certificate does not
    # hold, so att_svm raises a solver failure and is_locally_optimal does not silently answer False.
    X, z, y, v, sel = issue_example()
    _patched_solver(monkeypatch, lambda W, dual, diffs: (None, "infeasible", np.ones(len(diffs))))
    with pytest.raises(ValueError, match="certificate of infeasibility does not hold") as info:
        att_svm(X, z, sel)
    assert not isinstance(info.value, InfeasibleError)
    with pytest.raises(ValueError, match="certificate"):
        is_locally_optimal(X, z, y, v, sel)


def test_real_infeasibility_is_certified():
    # A repeated token, and selections of d = 1 that no scalar separates: certified, both norms alike.
    X, z, *_ = synthetic(1, 12, 8, 3, seed=1)
    for norm in ("fro", "nuc"):
        with pytest.raises(InfeasibleError, match="infeasible"):
            att_svm(X[0], z[0], torch.zeros(12, dtype=torch.long), norm=norm)
    tokens = torch.tensor([[[1.0], [-0.5], [2.0]]], dtype=torch.float64)  # token 0 between the others
    assert not is_locally_optimal(tokens, [[1.0]], [1.0], [1.0], [0])


def test_inputs_that_require_grad_are_detached():
    X, z, y, v, sel = issue_example()
    Xg, zg, yg, vg = (t.clone().requires_grad_() for t in (X, z, y, v))
    a = att_svm(Xg, zg, sel)
    torch.testing.assert_close(a.W, att_svm(X, z, sel).W)
    assert not a.W.requires_grad
    assert is_locally_optimal(Xg, zg, yg, vg, sel) == is_locally_optimal(X, z, y, v, sel)
    assert optimal_selection(Xg, yg, vg).tolist() == optimal_selection(X, y, v).tolist()
    S = synthetic(2, 3, 4, 5)
    init = torch.zeros(2, 5, 5, dtype=torch.float64, requires_grad=True)
    path = descend(S[0].requires_grad_(), S[1], S[2], S[3], init, DescentConfig(iterations=20))
    assert not path.W.requires_grad


@pytest.mark.parametrize(("change", "message"), [
    ({"selection": [1, 2, 2**70]}, r"selection out of range: indices must lie in \[0, 4\)"),
    ({"selection": np.array([1, 2, 2**64 - 1], dtype=np.uint64)}, "selection out of range"),
    ({"X": "complex"}, "X must be real"),
    ({"z": "complex"}, "z must be real"),
    ({"X": "complex numpy"}, "X must be real"),
    ({"X": "bool"}, "X must hold real numbers, not bool"),
    ({"X": "bool numpy"}, "X must hold real numbers, not bool"),
    ({"X": "strings"}, "X must be an array of numbers"),
])
def test_bad_att_svm_inputs_are_refused_clearly(change, message):
    X, z, _, _, sel = issue_example()
    args = {"X": X, "z": z, "selection": sel}
    kinds = {"complex": lambda t: t.to(torch.complex128) + 1j, "complex numpy": lambda t: t.numpy() + 1j,
             "bool": lambda t: t > 0, "bool numpy": lambda t: (t > 0).numpy(),
             "strings": lambda t: np.full(tuple(t.shape), "1.0")}
    for key, value in change.items():
        args[key] = kinds[value](args[key]) if isinstance(value, str) else value
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "casting complex values to real discards the imaginary part"
        with pytest.raises(ValueError, match=message):
            att_svm(args["X"], args["z"], args["selection"])
