"""`solve(field, solver, tokens, ...)`: one verb for every attention dynamics, and the `Solution` with its times.

    field  = Field(rule, scores, value, manifold)        what moves the tokens    (`hardmax.dynamics.field`)
    solver = Euler(dt) | Euler.layers(α) | RK4(dt) | Renormalised(dt) | Adaptive(rtol, atol)   (`solvers`)
    save   = Save(every=k) | Save.final() | Save(times=...), attention=True to keep P      what to keep

`solve` validates, then hands the case to one of the private engines (`hardmax.dynamics._engines`: each says which
cases it serves, one chooser picks): the paper's field (`Field.paper`) with `Euler.layers(α)` runs on the fast paths
(the compiled kernel, the compact hardmax path: exact ties, bit for bit the reference loop); every other case, every
pair mask (`Causal()`, `Pairs(allowed)`) among them, on the reference loop over `solver.step` (CPU or CUDA, any rule,
differentiable); an adaptive solver on torchdiffeq. `Solution.engine` says which ran. All initial conditions of a
batch (batch, n, d) advance together: no Python loop over starts or tokens.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import _engines
from hardmax.dynamics._engines import paper, reference
from hardmax.dynamics.field import Field
from hardmax.dynamics.inputs import MAX_STEPS, as_floating, validate_A
from hardmax.dynamics.masks import Mask, resolve
from hardmax.dynamics.save import Save
from hardmax.dynamics.solution import Solution
from hardmax.dynamics.solvers import Adaptive, Solver
from hardmax.memory import require_memory

__all__ = ["MAX_STEPS", "solve"]


def solve(field: Field, solver: Solver, tokens, *, steps: int | None = None, t1: float | None = None,
          save: Save | None = None, mask=None) -> Solution:
    """Solve the attention dynamics `field` from `tokens` with `solver`: the one verb of `hardmax.dynamics`.

    Args:
        field: `Field(rule, scores, value, manifold)`.
        solver: `Euler(dt)`, `Euler.layers(alpha)` (the paper's layers), `RK4(dt)`, `Renormalised(dt)`,
            `Adaptive(rtol, atol)`, or any object with the `Solver` protocol.
        tokens: (n, d) or (batch, n, d): NumPy array (float64 unless floating) or tensor (dtype, device kept).
            Each real token must lie on the field's manifold (`Manifold.check`: on the sphere, norm 1).
        steps: number of steps of a fixed-step solver (or give t1: steps = t1 / dt, which must be whole).
        t1: final time (an adaptive solver needs it, or Save(times=...)).
        save: `Save()` (every step, the default), `Save(every=k)`, `Save.final()`, `Save(times=...)`, with
            `attention=True` to keep P at each saved state.
        mask: which tokens exist and who attends to whom (`hardmax.dynamics.masks`): a plain bool (n,) or
            (batch, n) tensor or `Tokens(present)`, True for real tokens (padding neither attends nor moves);
            `Causal()` / `Causal(window=w)` (decoder attention), `Pairs(allowed)` ((n, n) or (batch, n, n)), or an
            intersection `Causal() & Tokens(present)`. A token with no allowed key does not move.

    Returns:
        `Solution` with tokens of shape (saved, *tokens.shape), their times and steps, and which engine ran it.

    Raises:
        ValueError: one line naming the problem: shapes, NaN/inf, tokens off the manifold, matrices of the
            wrong size, hardmax with non-symmetric scores, the paper's layers with A not positive definite, a step
            count that is not whole or beyond `MAX_STEPS`, an unknown solver.
        FloatingPointError: the states stopped being finite (the field overflowed after t = 0): the message names
            the first step (and time, and sequence) where they did. A solution is never returned with NaN or inf.

    Example: the paper's layers (`hardmax.simulate` spells the same call).

    >>> import torch
    >>> from hardmax.dynamics import Bilinear, Euler, Field, Hardmax, Save, solve
    >>> z = torch.tensor([[1., 1], [1, -1], [-1, 1], [-1, -1], [0.5, 0]], dtype=torch.float64)
    >>> sol = solve(Field(Hardmax(), Bilinear(None)), Euler.layers(0.5), z, steps=30, save=Save.final())
    >>> sol.final[4].round(decimals=4).tolist(), sol.steps
    ([1.0, 0.0], (0, 30))
    """
    save = Save() if save is None else save
    if not isinstance(save, Save):
        raise ValueError(f"save must be a hardmax.dynamics.Save, got {type(save).__name__}")
    if not isinstance(field, Field):
        raise ValueError(f"field must be a hardmax.dynamics.Field, got {type(field).__name__}")
    z = as_floating(tokens, "tokens")
    if z.dim() not in (2, 3) or z.shape[-1] == 0 or z.shape[-2] == 0:
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d) with n, d ≥ 1, got {tuple(z.shape)}")
    if z.numel() and not _all_finite(z):
        raise ValueError("tokens contain NaN or inf")
    single = z.dim() == 2
    zb = (z.unsqueeze(0) if single else z).contiguous()
    batch, n, d = zb.shape
    field.validate(d)
    A0 = field.scores.matrix(0.0, zb)
    if A0 is not None and A0.dim() == 3 and A0.shape[0] != batch:
        raise ValueError(f"a stack of score matrices needs one per sequence ({batch}), got {A0.shape[0]}")
    m, allowed, pairs = resolve(mask, z.shape, zb.device)
    given, real = zb, bool(m.all())
    if not real:  # padding rides along at a point of the manifold (on the sphere e_1), so that retractions stay finite
        zb = field.manifold.pad(zb, m)
    field.manifold.check(zb)  # the real tokens (padding is now a point of the manifold; it is put back as given)
    paper.check_score_range(zb, m, field.scores.matrix(0.0, zb), field.rule)  # at t = 0
    w = None if real else m.to(zb.dtype)  # None: every token present (no masking in the hot loop)
    given_field = field  # what Solution records; the loop runs it restricted to `allowed`, which the rule then sees
    if allowed is not None:
        field = field.restricted(allowed if field.allowed is None else field.allowed & allowed)
    grad = _needs_grad(zb, field) or _needs_grad(zb, solver)
    case = _engines.Case(given_field, solver, pairs, zb.device.type, zb.dtype, save.attention, grad, tuple(zb.shape))

    if isinstance(solver, Adaptive):
        _engines.choose(case)  # a forced fixed-step engine refuses it in one line
        if steps is not None:
            raise ValueError("an adaptive solver chooses its own steps: give t1=... (or Save(times=...)), not steps")
        times = _adaptive_times(save, t1)
        require_memory(float(len(times)) * zb.numel() * zb.element_size() * 8,
                       f"solve of tokens of shape {tuple(z.shape)}", device=zb.device)
        out = torch.where(m.unsqueeze(-1), reference.adaptive(solver, field, zb, w, times), given)
        attention = (torch.stack([field.attention(float(t), x, w) for t, x in zip(times, out, strict=True)])
                     if save.attention else None)
        return _solution(out, times.to(zb.dtype), given_field, solver, m, None, attention, single, "adaptive", pairs)
    if not (hasattr(solver, "step") and hasattr(solver, "steps")):
        raise ValueError(f"solver must be Euler, RK4, Renormalised or Adaptive (or have step and steps), got "
                         f"{type(solver).__name__}")
    if save.times is not None:
        raise ValueError("Save(times=...) is for an adaptive solver; a fixed-step one saves Save(every=k)")
    count = _step_count(solver, steps, t1)
    if count > 1 << 16:  # steps and times (small counts need no look at the memory)
        require_memory(16.0 * (count + 1), f"the {count:,} steps of a solve", device=zb.device)
    dts = solver.steps(count, zb.dtype, zb.device)
    kept = save.indices(count)
    times = torch.cat([dts.new_zeros(1), torch.cumsum(dts.detach(), 0)])[list(kept)]
    engine = _engines.choose(case)
    if batch == 0:  # a batch of no sequences is a valid empty solution
        attention = zb.new_empty(len(kept), 0, n, n) if save.attention else None
        return _solution(zb.new_empty(len(kept), 0, n, d), times, given_field, solver, m, kept, attention, single,
                         engine, pairs)
    if engine in ("compiled", "torch"):  # the paper's layers, on the fast paths (exact ties, bit for bit)
        out, attention = _paper_layers(field, solver, zb, m, count, kept, save.attention, engine)
        return _solution(out, times, given_field, solver, m, kept, attention, single, engine)
    if engine == "causal":  # the paper's hardmax layers under a causal mask, compiled
        out = _causal_layers(given_field, zb, m, dts, kept, pairs.window)
        return _solution(out, times, given_field, solver, m, kept, None, single, engine, pairs)
    if engine == "softmax":  # softmax flows, compiled: one sequence per core
        out = _softmax_flow(given_field, solver, zb, m, dts, kept, pairs)
        if not _all_finite(out):  # the reference loop names the step where the states stopped being finite
            per_sequence = (A0 is not None and A0.dim() == 3) or (allowed is not None and allowed.shape[0] > 1)
            reference.loop(field, solver, zb, w, dts, kept, False, per_sequence, False)
        if given is not zb:
            out = torch.where(m.unsqueeze(-1), out, given)
        return _solution(out, times, given_field, solver, m, kept, None, single, engine, pairs)
    require_memory(float(len(kept)) * zb.numel() * zb.element_size() + 8.0 * zb.numel() * zb.element_size()
                   + 4.0 * batch * n * n * zb.element_size(), f"solve of tokens of shape {tuple(z.shape)}",
                   device=zb.device)
    per_sequence = (A0 is not None and A0.dim() == 3) or (allowed is not None and allowed.shape[0] > 1)
    out, attention = reference.loop(field, solver, zb, w, dts, kept, save.attention, per_sequence, grad)
    if given is not zb and not grad:
        out = torch.where(m.unsqueeze(-1), out, given)
    return _solution(out, times, given_field, solver, m, kept, attention, single, "reference", pairs)


def _paper_layers(field: Field, solver, z: Tensor, m: Tensor, count: int, kept: tuple[int, ...], attention: bool,
                  engine: str) -> tuple[Tensor, Tensor | None]:
    """The paper's layers on the fast engine `engine`: (len(kept), batch, n, d), and P at each kept state."""
    batch, n, d = z.shape
    A = validate_A(field.scores.A, d, z.dtype, z.device)
    identity = not A.requires_grad and torch.equal(A, torch.eye(d, dtype=z.dtype, device=z.device))
    alphas = solver.alpha if isinstance(solver.alpha, Tensor) else torch.tensor(solver.alpha, dtype=torch.float64)
    alphas = alphas.reshape(-1).to(dtype=z.dtype, device=z.device)
    alphas = alphas.expand(count) if alphas.numel() == 1 else alphas
    require_memory(paper.simulation_bytes(batch, n, d, count, len(kept), z.element_size(),
                                          keep_attention=attention, torch_engine=engine == "torch"),
                   f"the paper's {count:,} layers of tokens of shape {tuple(z.shape)} ({z.dtype})", device=z.device)
    if not attention:
        return paper.run(z, m, field.rule, alphas, None if identity else A, kept, False, engine)
    # The engines keep P of the layers they run: one more layer (its tokens dropped) gives the last state's P by
    # the same arithmetic as the others (identical tokens merged: exact under permutations, ties included).
    out, P = paper.run(z, m, field.rule, torch.cat([alphas, alphas[-1:] if count else alphas.new_ones(1)]),
                       None if identity else A, kept, True, engine)
    return out, P[list(kept)]


def _all_finite(z: Tensor) -> bool:
    """Whether every entry of z is finite: one pass, no temporary (min and max propagate NaN, and show ±inf)."""
    lo, hi = torch.aminmax(z.detach())
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def _causal_layers(field: Field, z: Tensor, m: Tensor, dts: Tensor, kept: tuple[int, ...],
                   window: int | None) -> Tensor:
    """The paper's hardmax layers under `Causal(window)` on the causal kernel: (len(kept), batch, n, d)."""
    from hardmax.dynamics._engines.causal import causal_trajectory

    batch, n, d = z.shape
    A = validate_A(field.scores.A, d, z.dtype, z.device)
    identity = torch.equal(A, torch.eye(d, dtype=z.dtype, device=z.device))
    require_memory(float(len(kept)) * z.numel() * z.element_size() + 6.0 * n * d * z.element_size() * batch,
                   f"the paper's {dts.shape[0]:,} causal layers of tokens of shape {tuple(z.shape)}", device=z.device)
    out = causal_trajectory(z.detach().numpy(), m.numpy(), None if identity else A.detach().numpy(),
                            dts.detach().numpy(), field.rule.rtol(z.dtype), window, kept, torch.get_num_threads())
    return torch.from_numpy(out)


def _softmax_flow(field: Field, solver, z: Tensor, m: Tensor, dts: Tensor, kept: tuple[int, ...], pairs) -> Tensor:
    """A softmax flow on the compiled engine (`_engines.softmax`): (len(kept), batch, n, d)."""
    from hardmax.dynamics._engines.softmax import scratch_bytes, softmax_flow
    from hardmax.dynamics.solvers import RK4

    batch, n, d = z.shape
    A = field.scores.matrix(0.0, z)
    V = field.V(z)
    # the saved states, and per thread the engine's scratch (O(n d): never an n × n matrix)
    symmetric = bool(field.manifold.unit_sphere) and pairs is None
    require_memory(float(len(kept)) * z.numel() * z.element_size()
                   + scratch_bytes(batch, n, d, symmetric, torch.get_num_threads(), z.element_size()),
                   f"a softmax flow of tokens of shape {tuple(z.shape)}", device=z.device)
    out = softmax_flow(z.detach().numpy(), m.numpy(), None if A is None else A.detach().numpy(),
                       float(field.rule.beta), None if V is None else V.detach().numpy(),
                       bool(field.manifold.unit_sphere), None if pairs is None else pairs.window, pairs is not None,
                       dts.detach().numpy(), isinstance(solver, RK4), kept, torch.get_num_threads())
    return torch.from_numpy(out)


def _needs_grad(z: Tensor, what) -> bool:
    """Whether gradients are asked of this solve: grad mode on and the tokens, or a tensor of the field or the
    solver (A, Q, K, V, α), requiring grad."""
    if not torch.is_grad_enabled():
        return False
    if z.requires_grad:
        return True
    if isinstance(what, Field):
        return what.requires_grad
    alpha = getattr(what, "alpha", None)
    return isinstance(alpha, Tensor) and alpha.requires_grad


def _solution(out, times, field, solver, m, kept, attention, single, engine: str,
              pairs: Mask | None = None) -> Solution:
    if single:
        out, m = out[:, 0], m[0]
        attention = None if attention is None else attention[:, 0]
    return Solution(tokens=out, times=times, field=field, solver=solver, mask=m, steps=kept, attention=attention,
                    engine=engine, pairs=pairs)


def _step_count(solver, steps, t1) -> int:
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
            raise ValueError(f"steps must be an integer ≥ 0, got {steps!r}")
        if steps > MAX_STEPS:
            raise ValueError(f"steps = {int(steps):,} is more than the {MAX_STEPS:,} a solve takes")
        return int(steps)
    if t1 is None or getattr(solver, "dt", None) is None:
        raise ValueError("give steps=..., or t1=... with a solver of fixed step dt")
    if isinstance(t1, bool) or not isinstance(t1, int | float | np.integer | np.floating):
        raise ValueError(f"t1 must be a finite time ≥ 0, got {t1!r}")
    t1 = float(t1)
    if not (math.isfinite(t1) and t1 >= 0):
        raise ValueError(f"t1 must be a finite time ≥ 0, got {t1}")
    ratio = t1 / solver.dt
    if not ratio <= MAX_STEPS + 0.5:
        raise ValueError(f"t1 = {t1:g} with dt = {solver.dt:g} is {ratio:.3g} steps, more than the {MAX_STEPS:,} a "
                         "solve takes; use a larger dt or a shorter t1")
    count = round(ratio)
    if abs(count * solver.dt - t1) > 1e-9 * max(1.0, t1):
        raise ValueError(f"t1 = {t1} is not a whole number of steps dt = {solver.dt}")
    return int(count)


def _adaptive_times(save: Save, t1) -> Tensor:
    """The times an adaptive solve saves: Save(times=...) (t1, if given, must be the last), Save.final() (0 and
    t1), or the default Save() (101 evenly spaced times up to t1); Save(every=k > 1) means nothing here."""
    if save.times is not None:
        if t1 is not None and float(t1) != save.times[-1]:
            raise ValueError(f"t1 = {t1} is not the last of Save(times=...) ({save.times[-1]}); give one of them")
        times = save.times if save.times[0] == 0 else (0.0, *save.times)
        return torch.tensor(times, dtype=torch.float64)
    if t1 is None or isinstance(t1, bool) or not (isinstance(t1, int | float) and math.isfinite(t1) and t1 > 0):
        raise ValueError(f"an adaptive solver needs a finite t1 > 0 (or Save(times=...)), got {t1!r}")
    if save.every is None:
        return torch.tensor([0.0, float(t1)], dtype=torch.float64)
    if save.every != 1:
        raise ValueError("an adaptive solver has no fixed steps to save every k of: use Save(times=...), "
                         "Save.final() or the default Save() (101 times)")
    return torch.linspace(0.0, float(t1), 101, dtype=torch.float64)
