"""The engines behind `solve`: private fast paths, each saying which cases it serves, and one chooser.

    engine       serves                                                                    module
    reference    every case: one batched torch loop over `solver.step` (any field, solver, `reference`
                 mask, manifold; CPU or CUDA; gradients). What every fast path is tested against.
    adaptive     an `Adaptive` solver (torchdiffeq's odeint), any field                      `reference`
    compiled     the paper's layers (`Field.paper` + `Euler.layers(α)`), hardmax, a CPU,     `paper` + `kernel`
                 float32/64, no gradient or attention matrix, at most a token mask
    causal       the paper's hardmax layers under `Causal(window)` (decoder attention), a CPU, `causal`
                 float32/64, no gradient or attention matrix: every row every layer, compiled
    torch        the paper's layers, any rule of the paper (hardmax, softmax), any device,   `paper` + `layers`
                 gradients and attention matrices; identical tokens merged, leaders skipped
    softmax      softmax flows: Softmax(β), Bilinear(A) (one, or one per sequence), V,      `softmax`
                 R^d or the unit sphere, Euler/RK4, token and causal masks, a CPU, float32/64,
                 no gradient or attention matrix: one sequence per core, its scores in cache

`choose(case)` returns the first that serves the case, in the order compiled, causal, torch, softmax, reference
(adaptive: its own). A pair mask runs on the reference loop (`Pairs`, every rule), on the causal kernel (the paper's
hardmax under `Causal`) or the softmax flows (softmax under `Causal`): the fast paths of full attention merge
identical tokens and skip leaders, exact only when every token sees every token. `using(name)` forces one engine
(tests, benchmarks).

Files: `kernel` (numba, the exact hardmax kernel), `layers` (compact hardmax in torch), `select` (hardmax sets by
rule (★)), `ties` (the tie rule and frames), `paper` (the paper's layers on `kernel`/`layers`), `causal` (the
paper's hardmax layers under a causal mask), `reference` (the loop and the adaptive solver), `circle` (numba: the
lost-in-the-middle model's RK4 in the angles, behind `positional.circle_flow`, not chosen by `choose`). Identical
tokens are merged by the public `hardmax.dynamics.dedup`, the default tie tolerance is `rules.default_tie_rtol`.

Services to the other packages (the only names they import from here; `tests/test_architecture.py` holds them to
it): the leader rule's compiled snapshots and tie sets (`theory.leaders`), the kernel's lock (`theory.support`), the
compact hardmax layers (the classifier's training path).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import NamedTuple

#: Names the other packages may import from the engines (each an engine service, documented where it is defined).
SERVICES = {
    "hardmax.dynamics._engines.kernel": ("hardmax_snapshots",),
    "hardmax.dynamics._engines.select": ("hardmax_sets", "score_bias"),
    "hardmax.dynamics._engines.layers": ("hardmax_layers",),
}

#: Every engine's name, in the order `choose` tries the paper's fast paths.
NAMES = ("compiled", "causal", "torch", "softmax", "reference", "adaptive")

_FORCED: contextvars.ContextVar[str | None] = contextvars.ContextVar("hardmax_engine", default=None)


@contextlib.contextmanager
def using(name: str):
    """Run every `solve` (and `simulate`) inside the block on engine `name` ("compiled", "torch", "reference");
    a case the engine does not serve is refused with one line saying why."""
    if name not in NAMES:
        raise ValueError(f"engine must be one of {NAMES}, got {name!r}")
    token = _FORCED.set(name)
    try:
        yield
    finally:
        _FORCED.reset(token)


class Case(NamedTuple):
    """What the chooser looks at: the field (as given, before a pair mask restricts it), the solver, the pair part of
    the mask (None: every token sees every token), the tokens' device and dtype, whether attention matrices are kept
    and whether gradients are needed."""

    field: object
    solver: object
    pairs: object
    device: str
    dtype: object
    attention: bool
    grad: bool
    shape: tuple[int, ...] = ()  # (batch, n, d) of the tokens, when the chooser may look at sizes


def serves(name: str, case: Case) -> str:
    """Why engine `name` does not serve `case` ("" when it does)."""
    from hardmax.dynamics.solvers import Adaptive, Euler
    if name == "adaptive":
        return "" if isinstance(case.solver, Adaptive) else "it runs Adaptive solvers only"
    if isinstance(case.solver, Adaptive):
        return "an adaptive solver chooses its own steps (engine 'adaptive')"
    if name == "reference":
        return ""
    from hardmax.dynamics.masks import Causal
    if name == "softmax":
        return _softmax_serves(case, Causal)
    if name == "causal":
        if not isinstance(case.pairs, Causal):
            return "it runs the causal mask Causal(window) only"
    elif case.pairs is not None:
        return ("a pair mask (who attends to whom) runs on the reference loop: the fast paths merge identical tokens "
                "and skip leaders, exact only when every token sees every token")
    if not (isinstance(case.solver, Euler) and case.solver.alpha is not None):
        return "only Euler.layers(α) steps are the paper's layers"
    if not case.field.paper:
        return "the field is not the paper's (hardmax or softmax, V = I, one fixed symmetric A, R^d)"
    if name in ("compiled", "causal"):
        from hardmax.dynamics.rules import Hardmax
        if not isinstance(case.field.rule, Hardmax):
            return "it runs hardmax attention only"
        return _compiled_limits(case)
    return ""


def _compiled_limits(case: Case) -> str:
    """What every compiled (numba) engine needs: no attention matrices kept, no gradients, a CPU, float32/64."""
    import torch

    if case.attention:
        return "it does not return attention matrices"
    if case.grad:
        return "it does not compute gradients"
    if case.device != "cpu":
        return f"it runs on the CPU, the tokens are on {case.device}"
    if case.dtype not in (torch.float32, torch.float64):
        return f"it runs float32 and float64, the tokens are {case.dtype}"
    return ""


def _softmax_serves(case: Case, causal) -> str:
    """Why the compiled softmax flows do not serve `case` ("" when they do)."""
    from hardmax.dynamics.field import Bilinear
    from hardmax.dynamics.rules import Softmax
    from hardmax.dynamics.solvers import RK4, Euler
    f = case.field
    if type(f.rule) is not Softmax:
        return "it runs Softmax(beta) only"
    if type(f.scores) is not Bilinear:
        return "it runs fixed bilinear scores Bilinear(A) only"
    if not (f.manifold.euclidean or f.manifold.unit_sphere):
        return f"it runs in R^d or on the unit sphere, not on {f.manifold.name}"
    if type(case.solver) not in (Euler, RK4):
        return "it runs Euler and RK4 steps only"
    if case.pairs is not None and not isinstance(case.pairs, causal):
        return "it runs token masks and Causal(window) only"
    if len(case.shape) == 3:
        import torch

        from hardmax.dynamics._engines.softmax import MAX_WIDTH, lanes_used
        batch, n, d = case.shape
        symmetric = bool(f.manifold.unit_sphere) and case.pairs is None
        if d > MAX_WIDTH and not lanes_used(batch, n, d, symmetric, torch.get_num_threads(), case.dtype.itemsize):
            return (f"its rows are loops over the {d} coordinates: past d = {MAX_WIDTH} the reference loop's batched "
                    "products (BLAS) are faster")
    return _compiled_limits(case)


def choose(case: Case) -> str:
    """The engine that runs `case`: the one `using` forces (ValueError if it cannot), else the first that serves."""
    forced = _FORCED.get()
    if forced is not None:
        why = serves(forced, case)
        if why:
            raise ValueError(f"engine {forced!r} cannot run this case: {why}")
        return forced
    for name in NAMES:
        if not serves(name, case):
            return name
    raise AssertionError("the reference engine serves every fixed-step case")  # pragma: no cover
