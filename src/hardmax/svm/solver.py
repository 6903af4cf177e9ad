"""The attention SVM (Att-SVM): the max-margin W that separates each input's selected token.

    W^mm = argmin ‖W‖   s.t.   (x_{i,α_i} − x_{i,t})ᵀ W z_i ≥ 1   for every t ≠ α_i and every input i

with ‖·‖ the Frobenius norm (the limit direction of gradient descent on W) or the nuclear norm (the
limit of descent on (K, Q), W = K Qᵀ). Tarzanagh, Li, Thrampoulidis, Oymak, "Transformers as Support
Vector Machines" (arXiv 2308.16898), eq. (Att-SVM) and (Att-SVM⋆).

The program is linear in W: the constraint of (i, t) reads ⟨W, (x_{i,α_i} − x_{i,t}) z_iᵀ⟩ ≥ 1. It is
solved by the interior-point solver Clarabel in float64, by default as a conic program built here in
reduced coordinates (a QP for "fro", a semidefinite program for "nuc"), or, with backend="cvxpy", as
the same program written in cvxpy (the readable reference the tests compare with). Clarabel and cvxpy
are imported inside the solve only, so that `import hardmax` does not pay for them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

__all__ = ["RANK_RTOL", "SUPPORT_TOL", "WORKING_SET_ABOVE", "AttInputs", "AttSVM", "Backend", "CheckedTokens",
           "InfeasibleError", "Norm", "att_svm", "check_inputs", "check_labels", "check_tokens", "real_tensor"]

#: The matrix norm of the Att-SVM objective: Frobenius or nuclear.
Norm = Literal["fro", "nuc"]
_NORMS = ("fro", "nuc")
#: A constraint is active (its token a support token) when its margin is ≤ 1 + SUPPORT_TOL. Clarabel
#: stops at relative gaps ~1e-8, so active margins come out as 1 ± 1e-8 and inactive ones, on generic
#: data, are above 1 by far more than 1e-5.
SUPPORT_TOL = 1e-5
#: Singular values below RANK_RTOL · σ_max count as zero: interior-point nuclear-norm solutions carry
#: residual singular values of order 1e-8 relative, never exactly 0.
RANK_RTOL = 1e-6
# Clarabel's stopping tolerances, tighter than its defaults (1e-8): the support tokens and the rank
# are read off the solution, and descent is compared with it to 4 digits. (Tighter still, 1e-12, the
# nuclear-norm SDP often ends in InsufficientProgress or NumericalError; its W is accurate to ~√gap,
# about 1e-6 relative, the QP's to ~1e-12.)
_TOLERANCES = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}
# Directions of span{a_j} or span{z_j} with singular value below this (relative) are dropped from the
# reduced coordinates: they move any margin by less than 1e-12 ‖W‖.
_SPAN_RTOL = 1e-12
# Clarabel's statuses in cvxpy's words, so that both backends report alike.
_CLARABEL_STATUS = {"Solved": "optimal", "AlmostSolved": "optimal_inaccurate", "PrimalInfeasible": "infeasible",
                    "AlmostPrimalInfeasible": "infeasible_inaccurate"}
#: Cutting planes (see `_solve_working_set`) are used above this many constraints by default. The first
#: working set holds _START constraints per input, each round adds at most _ADD violated ones per input,
#: a constraint counts as violated below a margin of 1 − _TOL, and at most _ROUNDS rounds are run.
WORKING_SET_ABOVE = 2000
_WORKING_SET_START = 4
_WORKING_SET_ADD = 4
_WORKING_SET_TOL = 1e-9
_WORKING_SET_ROUNDS = 100
# The checks of every solution (`_check_solution`): margins may fall short of 1 by _FEASIBLE_TOL; the
# norm of the rescaled feasible point W / (min margin) must be within _GAP_RTOL (relative) of the lower
# bound that the solver's multipliers certify. A claimed infeasibility needs multipliers λ ≥ 0 with
# ‖Σ λ_j a_j z_jᵀ/(‖a_j‖‖z_j‖)‖ ≤ _FARKAS_RTOL Σ λ_j (Farkas' lemma; see `_certifies_infeasibility`).
_FEASIBLE_TOL = 1e-6
_GAP_RTOL = 1e-6
_FARKAS_RTOL = 1e-9
_FARKAS_COLUMNS = 2000  # at most this many constraints (those of the largest λ_j) enter the check
#: How `att_svm` solves its convex program: Clarabel directly, or through CVXPY.
Backend = Literal["clarabel", "cvxpy"]
_BACKENDS = ("clarabel", "cvxpy")


class InfeasibleError(ValueError):
    """The Att-SVM of a selection is infeasible (certified): no W puts every selected token ahead."""


@dataclass(frozen=True)
class AttSVM:
    """Solution of the Att-SVM for one set of inputs and one selection (all tensors float64).

    Attributes:
        W: (d, d) the max-margin matrix W^mm (norm "fro") or W^mm_⋆ (norm "nuc").
        norm: "fro" or "nuc". selection: (n,) int64, the selected token α_i of each input.
        margins: (n, T) (x_{i,α_i} − x_{i,t})ᵀ W z_i; +inf at the selected token and at masked tokens.
        support: (n, T) bool, the active constraints: margin ≤ 1 + SUPPORT_TOL.
        singular_values: (d,) of W, descending. rank: number of them above RANK_RTOL · σ_max.
        objective: ‖W‖ in the chosen norm. status: "optimal" or "optimal_inaccurate" (Clarabel's
            Solved / AlmostSolved, in cvxpy's words for both backends); either is returned only after
            `att_svm` checked the solution (feasible, an active constraint, a certified duality gap).
        solve_time: seconds spent building and solving the program.
        gap: the certified relative duality gap, (‖W‖/min margin − dual bound) / (‖W‖/min margin), ≤ 1e-6
            (NaN when the backend gave no multipliers).
    """

    W: Tensor
    norm: Norm
    selection: Tensor
    margins: Tensor
    support: Tensor
    singular_values: Tensor
    rank: int
    objective: float
    status: str
    solve_time: float
    gap: float

    @property
    def direction(self) -> Tensor:
        """W / ‖W‖_F, the direction gradient descent is compared with."""
        return self.W / self.W.norm()


def real_tensor(value, name: str) -> Tensor:
    """`value` (tensor, array or nested lists of real numbers) as a detached float64 CPU tensor.

    Raises:
        ValueError naming `name`: complex numbers ("must be real": the imaginary part is never dropped),
        bools, strings or other non-numbers, ragged nested lists.
    """
    if isinstance(value, Tensor):
        t = value.detach()
        if t.is_complex():
            raise ValueError(f"{name} must be real, got a complex tensor ({t.dtype})")
        if t.dtype == torch.bool:
            raise ValueError(f"{name} must hold real numbers, not bool")
        return t.to(device="cpu", dtype=torch.float64)
    try:
        a = np.asarray(value)
    except ValueError as e:
        raise ValueError(f"{name} must be an array of numbers (ragged inputs are not allowed): {e}") from None
    if a.dtype.kind == "c" or (a.dtype.kind == "O" and any(isinstance(x, complex) for x in a.ravel())):
        raise ValueError(f"{name} must be real, got complex numbers")
    if a.dtype.kind == "b" or (a.dtype.kind == "O" and any(isinstance(x, bool | np.bool_) for x in a.ravel())):
        raise ValueError(f"{name} must hold real numbers, not bool")
    if a.dtype.kind not in "iufO":
        raise ValueError(f"{name} must be an array of numbers, got {a.dtype}")
    try:
        return torch.as_tensor(a.astype(np.float64))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be an array of numbers: {e}") from None


def check_labels(y: Tensor, name: str = "y") -> None:
    """Raise ValueError unless every entry of the float tensor `y` is a label +1 or −1 (a label 0 would
    silently make every token score 0, other values rescale the loss)."""
    bad = ~((y == 1) | (y == -1))
    if bad.any():
        raise ValueError(f"{name} must hold labels +1 or −1, got {y[bad].flatten()[0].item():g} "
                         f"({int(bad.sum())} of {y.numel()} entries are not ±1)")


def _index_tensor(value, name: str, n: int, T: int) -> Tensor:
    """`value` as n int64 token indices in [0, T) (huge Python integers are out of range, not an overflow)."""
    if isinstance(value, Tensor):
        a = value.detach().cpu()
        kind = "i" if not (a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool) else "f"
        shape = tuple(a.shape)
    else:
        try:
            a = np.asarray(value)
        except ValueError:
            raise ValueError(f"{name} must be n = {n} integer token indices (ragged input)") from None
        kind, shape = a.dtype.kind, a.shape
        if kind == "O":
            kind = "i" if all(isinstance(x, int | np.integer) and not isinstance(x, bool) for x in a.ravel()) else "f"
        elif kind == "u":
            kind = "i"
    if kind != "i" or shape != (n,):
        raise ValueError(f"{name} must be n = {n} integer token indices, got {getattr(a, 'dtype', type(a))} {shape}")
    if ((a < 0) | (a >= T)).any():  # on Python integers for an object array: no overflow
        shown = a.tolist()
        raise ValueError(f"{name} out of range: indices must lie in [0, {T}), got {shown}")
    return a.to(torch.int64) if isinstance(a, Tensor) else torch.as_tensor(a.astype(np.int64))


@dataclass(frozen=True)
class CheckedTokens:
    """Tokens X (n, T, d) float64 and mask (n, T) bool, checked (`check_tokens`)."""

    X: Tensor
    mask: Tensor


@dataclass(frozen=True)
class AttInputs:
    """Att-SVM inputs, checked (`check_inputs`): X (n, T, d) float64, z (n, d) float64 (x_{i,0} for
    self-attention), selection (n,) int64 or None, mask (n, T) bool."""

    X: Tensor
    z: Tensor
    selection: Tensor | None
    mask: Tensor


def check_tokens(X, mask=None) -> CheckedTokens:
    """Validate tokens X (n, T, d) and mask (n, T) (None: all real); return them as float64 / bool tensors.

    Tensors that require grad are detached (the Att-SVM and the token scores are measurements, not
    differentiable layers).

    Raises:
        ValueError: ragged, complex, bool, non-finite or mis-shaped X, fewer than 2 tokens, a mis-shaped
            mask, or an input whose mask has no real token.
    """
    X = real_tensor(X, "X")
    if X.dim() != 3 or min(X.shape) < 1:
        raise ValueError(f"X must have shape (n, T, d) with n, T, d ≥ 1, got {tuple(X.shape)}")
    if not torch.isfinite(X).all():
        raise ValueError("X contains NaN or inf")
    n, T, d = X.shape
    if T < 2:
        raise ValueError(f"each input needs at least 2 tokens to select from, got T = {T}")
    mask = torch.ones(n, T, dtype=torch.bool) if mask is None else torch.as_tensor(
        mask.detach().cpu() if isinstance(mask, Tensor) else np.asarray(mask))
    if mask.dtype != torch.bool or tuple(mask.shape) != (n, T):
        raise ValueError(f"mask must be a bool array of shape {(n, T)}, got {mask.dtype} {tuple(mask.shape)}")
    empty = (~mask.any(1)).nonzero().flatten()
    if len(empty):
        raise ValueError(f"mask has no real token in input {int(empty[0])} ({len(empty)} input(s) all padding): "
                         "every input needs at least one real (True) token")
    return CheckedTokens(X=X, mask=mask)


def check_inputs(X, z=None, selection=None, mask=None) -> AttInputs:
    """Validate and convert Att-SVM inputs to float64 / int64 / bool tensors (detached, on the CPU).

    Args:
        X: (n, T, d) tokens. z: (n, d) queries, or None for self-attention (z_i = x_{i,0}).
        selection: (n,) token index per input, or None (not checked). mask: (n, T) bool, True for
            real tokens, or None (all real).

    Returns:
        `AttInputs`, with z filled in and mask all True when not given.

    Raises:
        ValueError: ragged, complex, bool, non-finite or mis-shaped inputs, a selection out of range or on a
            padding token.
    """
    tokens = check_tokens(X, mask)
    X, mask = tokens.X, tokens.mask
    n, T, d = X.shape
    if z is None:
        if not mask[:, 0].all():
            raise ValueError("self-attention (z=None) uses token 0 as query, but token 0 is masked in some input")
        z = X[:, 0]
    else:
        z = real_tensor(z, "z")
        if tuple(z.shape) != (n, d):
            raise ValueError(f"z must have shape (n, d) = {(n, d)}, got {tuple(z.shape)}")
        if not torch.isfinite(z).all():
            raise ValueError("z contains NaN or inf")
    if selection is not None:
        selection = _index_tensor(selection, "selection", n, T)
        if not mask.gather(1, selection[:, None]).all():
            raise ValueError("selection points at a masked (padding) token")
    return AttInputs(X=X, z=z, selection=selection, mask=mask)


def att_svm(X, z, selection, *, norm: Norm = "fro", mask=None, backend: Backend = "clarabel",
            working_set_above: int | None = WORKING_SET_ABOVE) -> AttSVM:
    """Solve the Att-SVM: the smallest W whose scores put every selected token ahead by a margin of 1.

        W^mm = argmin_W ‖W‖  s.t.  (x_{i,α_i} − x_{i,t})ᵀ W z_i ≥ 1  ∀ t ≠ α_i, ∀ i      (Att-SVM)

    Gradient descent on W converges in direction to the Frobenius solution, descent on (K, Q) to the
    nuclear-norm one (Tarzanagh et al. 2023, arXiv 2308.16898, Theorems 2 and 3, §2-3).

    Args:
        X: (n, T, d) tokens x_{i,t}. z: (n, d) queries z_i (cross-attention), or None for self-attention
            with query x_{i,0}. selection: (n,) selected token α_i per input.
        norm: "fro" (‖W‖_F) or "nuc" (‖W‖_⋆). mask: (n, T) bool, True for real tokens (padding has no
            constraint), or None.
        backend: "clarabel" (default): the program in reduced coordinates handed to Clarabel directly
            (see `_solve_reduced`); "cvxpy": the same program written in cvxpy and solved by Clarabel,
            the readable reference (2-3× slower: cvxpy canonicalises every call, and the SDP is larger).
            Both give the same W to Clarabel's tolerances (tests compare them).
        working_set_above: with more constraints than this, solve by cutting planes on a working set
            of constraints (exact; see `_solve_working_set`); None: always the whole program at once.

    Returns:
        `AttSVM` (float64).

    Raises:
        InfeasibleError (a ValueError): an infeasible program (a selected token that no W can put ahead,
            e.g. a repeated token, or any of the many selections that are not separable when
            d < max(T − 1, n)), certified by Farkas multipliers that are checked here.
        ValueError: bad input (see `check_inputs`), norm not "fro"/"nuc", a solution that fails the
            checks (`_check_solution`: whatever the solver's status), or W outside float64's range.
    """
    if norm not in _NORMS:
        raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if working_set_above is not None and working_set_above < 1:
        raise ValueError(f"working_set_above must be ≥ 1 or None, got {working_set_above}")
    if selection is None:
        raise ValueError("selection is required: one token index per input")
    checked = check_inputs(X, z, selection, mask)
    X, z, selection, mask = checked.X, checked.z, checked.selection, checked.mask
    n, T, d = X.shape
    others = mask.clone()
    others[torch.arange(n), selection] = False
    i, t = others.nonzero(as_tuple=True)
    if len(i) == 0:
        raise ValueError("no constraints: every input has only its selected token")
    # Scale-free by construction: the program is solved on data rescaled by powers of two (exact in
    # float64), tokens to |x| < 1 before they are subtracted (no overflow), the differences a_j and the
    # queries z_j to largest entries in [½, 1). With a_j = 2^{e_a} â_j and z_j = 2^{e_z} ẑ_j the program in
    # W is the program in Ĉ = 2^{e_a + e_z} W: same constraints, norms in a fixed ratio. So
    # W(s·X, s·z) = W(X, z)/s² and the margins do not change with s, whatever Clarabel's absolute tolerances.
    Xs, e_x = _pow2_normalised(X.numpy())
    zs, e_z = _pow2_normalised(z.numpy())
    i_np, t_np, sel_np = i.numpy(), t.numpy(), selection.numpy()
    diffs, e_a = _pow2_normalised(Xs[i_np, sel_np[i_np]] - Xs[i_np, t_np])  # (m, d): â_j ∝ x_{i,α_i} − x_{i,t}
    queries = zs[i_np]  # (m, d): ẑ_j ∝ z_i of constraint j
    start = time.perf_counter()
    solve = _solve_reduced if backend == "clarabel" else _solve_cvxpy
    if working_set_above is None or len(diffs) <= working_set_above:
        C, status, dual = solve(diffs, queries, norm)
    else:
        C, status, dual = _solve_working_set(diffs, queries, i_np, norm, solve)
    solve_time = time.perf_counter() - start
    if status.startswith("infeasible"):
        if not _certifies_infeasibility(diffs, queries, dual):
            raise ValueError(f"the Att-SVM solver reported status {status!r} on inputs of shape {(n, T, d)}, but "
                             "its certificate of infeasibility does not hold: the program was not solved")
        raise InfeasibleError(_infeasible_message(n, T, d, status))
    if C is None:
        raise ValueError(f"the Att-SVM solver failed (status {status!r}) on inputs of shape {(n, T, d)}")
    scaled_margins = ((diffs @ C) * queries).sum(1)  # (m,) ⟨Ĉ, â_j ẑ_jᵀ⟩ = the margins of W
    gap = _check_solution(C, diffs, queries, scaled_margins, dual, norm, status, (n, T, d))
    W_star = torch.as_tensor(np.ldexp(C, -(e_x + e_a + e_z)), dtype=torch.float64)
    if not (torch.isfinite(W_star).all() and W_star.abs().max() > 0):
        raise ValueError(f"the Att-SVM solution W is outside float64's range (it scales as 1/(|x| |z|): tokens of "
                         f"scale 2^{e_x + e_a} and queries of scale 2^{e_z}); rescale X and z")
    margins = torch.full((n, T), float("inf"), dtype=torch.float64)
    margins[i, t] = torch.as_tensor(scaled_margins, dtype=torch.float64)
    sv = torch.linalg.svdvals(W_star)
    value = float(W_star.norm()) if norm == "fro" else float(sv.sum())
    return AttSVM(W=W_star, norm=norm, selection=selection, margins=margins, support=margins <= 1 + SUPPORT_TOL,
                  singular_values=sv, rank=int((sv > RANK_RTOL * sv[0]).sum()), objective=value,
                  status=status, solve_time=solve_time, gap=gap)


def _pow2_normalised(a: np.ndarray) -> tuple[np.ndarray, int]:
    """(a / 2^e, e) with the largest |entry| of a / 2^e in [½, 1): an exact rescaling (e = 0 for a = 0)."""
    top = float(np.abs(a).max()) if a.size else 0.0
    if top == 0:
        return a, 0
    e = math.frexp(top)[1]
    return np.ldexp(a, -e), e


def _dual_bound(diffs: np.ndarray, queries: np.ndarray, dual: np.ndarray, norm: Norm) -> float:
    """A lower bound on the optimal ‖Ĉ‖ from any λ ≥ 0: Σλ_j / ‖G‖_dual, G = Σ λ_j â_j ẑ_jᵀ.

    For a feasible C, ⟨C, G⟩ = Σ λ_j ⟨C, â_j ẑ_jᵀ⟩ ≥ Σ λ_j, and ⟨C, G⟩ ≤ ‖C‖ ‖G‖_dual (Hölder; the dual
    of the Frobenius norm is itself, that of the nuclear norm the spectral norm). Valid for whatever λ
    the solver returns (negative entries are set to 0): a certificate that needs no trust in the solver.
    """
    lam = np.clip(np.nan_to_num(np.asarray(dual, dtype=np.float64), nan=0.0), 0.0, None)
    G = diffs.T @ (lam[:, None] * queries)
    dual_norm = float(np.linalg.norm(G)) if norm == "fro" else float(np.linalg.norm(G, 2))
    total = float(lam.sum())
    return total / dual_norm if dual_norm > 0 and math.isfinite(total / dual_norm) else 0.0


def _certifies_infeasibility(diffs: np.ndarray, queries: np.ndarray, dual: np.ndarray | None) -> bool:
    """Whether the Att-SVM is certified infeasible, by Farkas' lemma and a check of our own.

    No C has ⟨C, B_j⟩ ≥ 1 for all j (B_j = â_j ẑ_jᵀ) iff some λ ≥ 0 with Σ λ_j = 1 has Σ λ_j B_j = 0.
    Clarabel's certificate λ holds that only to its tolerances (~1e-5 relative), so it is used to pick
    the constraints involved (all of them when there are few), and a nonnegative least-squares solve
    (Lawson-Hanson, exact active sets) finds the certificate on them, in the reduced coordinates of
    `_solve_reduced`, with each B_j scaled to unit norm: accepted when ‖Σ μ_j B̃_j‖ ≤ _FARKAS_RTOL Σ μ_j.
    """
    from scipy.optimize import nnls

    size = np.linalg.norm(diffs, axis=1) * np.linalg.norm(queries, axis=1)
    if (size == 0).any():  # a zero difference or query: its margin is 0 for every W
        return True
    lam = np.ones(len(diffs)) if dual is None else np.clip(np.nan_to_num(np.asarray(dual, dtype=np.float64),
                                                                        nan=0.0), 0.0, None)
    cols = np.arange(len(diffs))
    if len(cols) > _FARKAS_COLUMNS:
        cols = np.argsort(-lam * size, kind="stable")[:_FARKAS_COLUMNS]
    Ua, Uz = _basis(diffs[cols]), _basis(queries[cols])
    B = ((diffs[cols] @ Ua)[:, :, None] * (queries[cols] @ Uz)[:, None, :]).reshape(len(cols), -1) / size[cols, None]
    A = np.vstack([B.T, np.ones((1, len(cols)))])
    target = np.zeros(len(A))
    target[-1] = 1.0
    try:
        mu, _ = nnls(A, target, maxiter=50 * len(A) + 10 * len(cols))
    except RuntimeError:  # no convergence: no certificate
        return False
    total = float(mu.sum())
    return total > 0.5 and float(np.linalg.norm(B.T @ mu)) <= _FARKAS_RTOL * total


def _check_solution(C: np.ndarray, diffs: np.ndarray, queries: np.ndarray, margins: np.ndarray, dual, norm: Norm,
                    status: str, shape: tuple[int, int, int]) -> float:
    """Accept the solver's Ĉ only if it is the max-margin solution to tolerance; return its relative duality gap.

    Feasible: every margin ≥ 1 − _FEASIBLE_TOL. Optimal: the smallest margin ≤ 1 + SUPPORT_TOL (a
    max-margin W has an active constraint, else W / (smallest margin) would be feasible and smaller),
    and ‖Ĉ‖ / (smallest margin), the norm of a feasible point, within _GAP_RTOL of the dual lower bound
    (`_dual_bound`). Any status ("optimal_inaccurate" included) passes or fails on these alone.
    """
    what = f"the Att-SVM solver returned status {status!r} on inputs of shape {shape} but "
    if not (np.isfinite(C).all() and np.isfinite(margins).all()):
        raise ValueError(what + "a non-finite W")
    smallest = float(margins.min())
    if smallest < 1 - _FEASIBLE_TOL:
        raise ValueError(what + f"a violated margin {smallest:.6g} < 1 (not feasible); the program was not solved")
    if smallest > 1 + SUPPORT_TOL:
        raise ValueError(what + f"no active constraint (smallest margin {smallest:.6g} > 1): not the max-margin "
                         "solution; the program was not solved")
    if dual is None:
        return float("nan")
    value = float(np.linalg.norm(C)) if norm == "fro" else float(np.linalg.svd(C, compute_uv=False).sum())
    upper = value / smallest
    gap = (upper - _dual_bound(diffs, queries, dual, norm)) / upper
    if not gap <= _GAP_RTOL:
        raise ValueError(what + f"a W whose norm is not certified minimal (relative duality gap {gap:.3g} > "
                         f"{_GAP_RTOL:g}); the program was not solved")
    return max(gap, 0.0)


def _basis(vectors: np.ndarray) -> np.ndarray:
    """(d, r) orthonormal basis of the span of the rows of `vectors` (m, d); r = 0 if they are all 0."""
    U, s, _ = np.linalg.svd(vectors.T, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return U[:, :0]
    return U[:, s > _SPAN_RTOL * s[0]]


def _solve_working_set(diffs: np.ndarray, queries: np.ndarray, inputs: np.ndarray, norm: Norm,
                       solve) -> tuple[np.ndarray | None, str, np.ndarray | None]:
    """Solve the Att-SVM by cutting planes on a working set of its constraints (many-token inputs).

    Clarabel's KKT matrix holds the dense (constraints × unknowns) block of the margins, so a review set
    of ~10⁴ tokens costs seconds per interior-point step although only the few support tokens decide W.
    Cutting planes: solve on a working set (first the `_WORKING_SET_START` shortest differences a_j of
    each input: the constraints that need the largest W), add each input's most violated constraints,
    repeat. The result is exact: it is optimal for a relaxation and feasible for the whole program
    (to `_WORKING_SET_TOL`); an infeasible working set means an infeasible program.

    Args:
        diffs: (m, d) a_j. queries: (m, d) z_j. inputs: (m,) the input i of each constraint.
        norm: "fro" / "nuc". solve: `_solve_reduced` or `_solve_cvxpy`.
    """
    active = _per_input_smallest(np.linalg.norm(diffs, axis=1) * np.linalg.norm(queries, axis=1), inputs,
                                 _WORKING_SET_START)
    for _ in range(_WORKING_SET_ROUNDS):
        W, status, part = solve(diffs[active], queries[active], norm)
        dual = None
        if part is not None:  # the working set's multipliers, 0 for the other constraints: still a certificate
            dual = np.zeros(len(diffs))
            dual[active] = part
        if W is None:
            return W, status, dual
        margins = ((diffs @ W) * queries).sum(1)
        violated = (margins < 1 - _WORKING_SET_TOL) & ~active
        if not violated.any():
            return W, status, dual
        active |= violated & _per_input_smallest(np.where(violated, margins, np.inf), inputs, _WORKING_SET_ADD)
    return None, f"no convergence of the working set in {_WORKING_SET_ROUNDS} rounds", None


def _per_input_smallest(values: np.ndarray, inputs: np.ndarray, k: int) -> np.ndarray:
    """(m,) bool: the k smallest `values` of each input (ties by position), without a loop over inputs."""
    order = np.lexsort((values, inputs))  # by input, then by value
    sorted_inputs = inputs[order]
    rank = np.arange(len(order)) - np.searchsorted(sorted_inputs, sorted_inputs, side="left")
    chosen = np.zeros(len(values), dtype=bool)
    chosen[order[rank < k]] = True
    return chosen


def _solve_reduced(diffs: np.ndarray, queries: np.ndarray,
                   norm: Norm) -> tuple[np.ndarray | None, str, np.ndarray | None]:
    """The Att-SVM in reduced coordinates, as one conic program for Clarabel; (W or None, status, λ).

    λ (m,): Clarabel's multipliers of the margin constraints (at an optimum), or its certificate of
    infeasibility; `att_svm` checks either before it believes the status.

    Every constraint ⟨W, a_j z_jᵀ⟩ ≥ 1 sees W only through P_a W P_z (P_a, P_z: orthogonal projections
    onto span{a_j}, span{z_j}), and P_a W P_z has no larger Frobenius or nuclear norm than W. So the
    minimiser is W = U_a C U_zᵀ with orthonormal bases U_a (d, p), U_z (d, q), and ‖W‖ = ‖C‖:

        fro:  min ½‖C‖_F²                        s.t.  ⟨C, B_j⟩ ≥ 1,  B_j = (U_aᵀa_j)(U_zᵀz_j)ᵀ   (QP)
        nuc:  min ½(tr U + tr V)  s.t.  [[U, C], [Cᵀ, V]] ⪰ 0,  ⟨C, B_j⟩ ≥ 1                    (SDP)

    (the SDP's value is ‖C‖_⋆, Fazel's semidefinite form of the nuclear norm). In the paper's setting
    (d = 10, n = 6 queries) the PSD block shrinks from 20 × 20 to 16 × 16, which halves Clarabel's time;
    the cvxpy form also pays canonicalisation on every call. When p or q is 1, C is a vector and the
    nuclear norm is the Frobenius norm: the QP is solved for both.
    """
    import clarabel  # lazy, as cvxpy: only solving needs it
    from scipy import sparse

    Ua, Uz = _basis(diffs), _basis(queries)
    p, q = Ua.shape[1], Uz.shape[1]
    m = len(diffs)
    if p == 0 or q == 0:  # every a_j or every z_j is 0: no W has a positive margin
        return None, "infeasible", np.ones(m)
    B = ((diffs @ Ua)[:, :, None] * (queries @ Uz)[:, None, :]).reshape(m, p * q)  # row j: vec(B_j), row-major
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    for key, value in _TOLERANCES.items():
        setattr(settings, key, value)
    # Clarabel: min ½xᵀPx + cᵀx s.t. Ax + s = b, s in the cones; "⟨C, B_j⟩ ≥ 1" is −Bx + s = −1, s ≥ 0.
    # With one query direction (or one difference direction) C is a vector, whose nuclear and Frobenius
    # norms coincide: the QP is then exact to ~1e-12 where the SDP stops at ~1e-6 (√gap on rank one).
    if norm == "fro" or min(p, q) == 1:
        x_dim = p * q
        P = sparse.identity(x_dim, format="csc")
        cost = np.zeros(x_dim)
        A = sparse.csc_matrix(-B)
        b = -np.ones(m)
        cones = [clarabel.NonnegativeConeT(m)]
        C_index = np.arange(x_dim).reshape(p, q)
        C_scale = 1.0
    else:
        # x = svec(Y) of Y = [[U, C], [Cᵀ, V]] (N × N): Clarabel's PSDTriangle order (upper triangle by
        # columns, off-diagonal entries × √2), and the cone constraint is s = x.
        N = p + q
        x_dim = N * (N + 1) // 2
        column_start = np.arange(N) * (np.arange(N) + 1) // 2
        P = sparse.csc_matrix((x_dim, x_dim))
        cost = np.zeros(x_dim)
        cost[column_start + np.arange(N)] = 0.5  # ½ tr Y
        C_index = column_start[p:][None, :] + np.arange(p)[:, None]  # (p, q): Y[a, p + b] = C[a, b]
        C_scale = math.sqrt(2)
        rows = np.repeat(np.arange(m), p * q)
        linear = sparse.csc_matrix((-B.ravel() / C_scale, (rows, np.tile(C_index.ravel(), m))), shape=(m, x_dim))
        A = sparse.vstack([linear, -sparse.identity(x_dim)], format="csc")
        b = np.concatenate([-np.ones(m), np.zeros(x_dim)])
        cones = [clarabel.NonnegativeConeT(m), clarabel.PSDTriangleConeT(N)]
    solution = clarabel.DefaultSolver(P, cost, A, b, cones, settings).solve()
    status = _CLARABEL_STATUS.get(str(solution.status), str(solution.status))
    dual = np.asarray(solution.z)[:m]
    if not status.startswith("optimal"):
        return None, status, dual
    C = np.asarray(solution.x)[C_index] / C_scale
    return Ua @ C @ Uz.T, status, dual


def _solve_cvxpy(diffs: np.ndarray, queries: np.ndarray,
                 norm: Norm) -> tuple[np.ndarray | None, str, np.ndarray | None]:
    """The Att-SVM as written: a cvxpy problem in W (d × d), solved by Clarabel; (W or None, status, λ or None)."""
    import cvxpy as cp  # lazy: cvxpy costs ~0.5 s to import

    m, d = diffs.shape
    # ⟨W, a zᵀ⟩ = vec(W)·vec(a zᵀ) in row-major order on both sides.
    M = (diffs[:, :, None] * queries[:, None, :]).reshape(m, d * d)
    W = cp.Variable((d, d))
    # ½‖W‖_F² rather than ‖W‖_F: a quadratic objective Clarabel handles directly, whose solution is
    # accurate to ~1e-9 where the second-order-cone form of ‖W‖_F leaves errors of √gap ≈ 1e-5.
    objective = 0.5 * cp.sum_squares(W) if norm == "fro" else cp.normNuc(W)
    margin = M @ cp.vec(W, order="C") >= 1
    problem = cp.Problem(cp.Minimize(objective), [margin])
    try:
        problem.solve(solver=cp.CLARABEL, **_TOLERANCES)
    except cp.error.SolverError as e:
        raise ValueError(f"the Att-SVM solver failed ({e})") from None
    dual = None if margin.dual_value is None else np.asarray(margin.dual_value, dtype=np.float64).reshape(m)
    if problem.status in ("infeasible", "infeasible_inaccurate") or W.value is None:
        return None, str(problem.status), dual
    return np.array(W.value), str(problem.status), dual


def _infeasible_message(n: int, T: int, d: int, status: str) -> str:
    why = (f"d = {d} < max(T − 1, n) = {max(T - 1, n)}, so the selected tokens need not be separable"
           if d < max(T - 1, n) else
           f"d = {d} ≥ max(T − 1, n), so the inputs are degenerate (a selected token repeated among the "
           "others, a zero query, or a selected token inside the hull of the others)")
    return f"Att-SVM infeasible (solver status {status!r}): no W puts every selected token ahead; {why}"
