"""`solve(field, solver, tokens, ...)`: one verb for every attention dynamics, and the `Solution` with its times.

    field  = Field(rule, scores, value, manifold)        what moves the tokens    (`hardmax.dynamics.field`)
    solver = Euler(dt) | Euler.layers(α) | RK4(dt) | Renormalised(dt) | Adaptive(rtol, atol)   (`solvers`)
    save   = Save(every=k) | Save.final() | Save(times=...), attention=True to keep P      what to keep

The engines say which cases they serve (`engine_for`): the paper's field (`Field.paper`) with `Euler.layers(α)`
runs on `simulate`'s engines (the compiled kernel and the compact hardmax path: exact ties, bit for bit today's
layers); every other case runs as one batched torch loop over steps (CPU or CUDA, any rule, differentiable), and so
does every pair mask (`Causal()`, `Pairs(allowed)`: `hardmax.dynamics.masks`), whatever the field.
All initial conditions of a batch (batch, n, d) advance together: no Python loop over starts or tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics.field import Field
from hardmax.dynamics.inputs import MAX_STEPS, as_floating
from hardmax.dynamics.masks import Mask, as_mask, resolve
from hardmax.dynamics.save import Save
from hardmax.dynamics.simulator import check_score_range, simulate
from hardmax.dynamics.solvers import Adaptive, Euler, Solver
from hardmax.memory import require_memory

__all__ = ["MAX_STEPS", "SOLVE_ENGINES", "Solution", "engine_for", "solve"]

#: The engines `solve` accepts: "layers" (simulate's, for the paper's layer), "loop" (one batched torch loop), "auto".
SOLVE_ENGINES = ("auto", "layers", "loop")
_FINITE_EVERY = 64  # steps between two looks at whether the states are finite (one host synchronisation each)


def engine_for(field: Field, solver: Solver, mask=None) -> tuple[str, str]:
    """(engine, why): the engine `solve(engine="auto")` runs this case on.

    "layers": the paper's field (`Field.paper`: hardmax or softmax, V = I, one fixed symmetric A, R^d) with
    `Euler.layers(α)` and at most a token mask runs on `simulate`'s engines — the compiled kernel (hardmax on a
    CPU), the compact hardmax path and the torch engine — with exact ties, bit for bit today's layers. "loop":
    everything else, one batched torch loop over steps for any field and solver (CPU or CUDA, differentiable);
    in particular a pair mask (`mask`: `Causal()`, `Pairs(allowed)` or an intersection holding one), because
    simulate's engines merge identical tokens and skip the leaders' rows, which is exact only when every token
    sees every token: the loop is the reference engine that runs it for every rule, (★) included.
    """
    restriction = as_mask(mask)
    if restriction is not None and restriction.pairs is not None:
        return "loop", (f"a pair mask ({type(restriction.pairs).__name__}: who attends to whom) runs on "
                        "engine='loop'; simulate's engines run every token against every token")
    if not (isinstance(solver, Euler) and solver.alpha is not None):
        return "loop", "only Euler.layers(α) steps are the paper's layers"
    if not field.paper:
        return "loop", "the field is not the paper's (hardmax or softmax, V = I, one fixed symmetric A, R^d)"
    return "layers", "the paper's field with Euler.layers(α): simulate's engines, exact ties, bit for bit"


@dataclass(frozen=True)
class Solution:
    """Tokens of a solved dynamics at the saved times.

    Attributes:
        tokens: (saved, *input_shape) positions.
        times: (saved,) the time of each saved state (for `Euler.layers`: Σ_k α_k/(1+α_k), the layers' time).
        steps: (saved,) the solver step of each saved state (adaptive: None).
        field, solver: what produced it. mask: (*input_shape[:-1]) bool, True for real tokens: the token part of
            the mask given (a plain bool mask, `Tokens`, or the `Tokens` in an intersection), as it always was.
        pairs: the pair part of the mask given (`Causal()`, `Pairs(allowed)`, or their intersection;
            `hardmax.dynamics.masks`); None when every token attended to every real token.
        attention: (saved, *input_shape[:-1], n) P at each saved state, when asked for.
    """

    tokens: Tensor
    times: Tensor
    field: Field
    solver: Solver
    mask: Tensor
    steps: tuple[int, ...] | None = None
    attention: Tensor | None = None
    engine: str = "loop"  # which engine ran it ("layers", "loop", "adaptive"; see `engine_for`)
    pairs: Mask | None = None  # who attended to whom (None: every token to every real token)

    @property
    def final(self) -> Tensor:
        """(*input_shape) the last saved state."""
        return self.tokens[-1]

    def at(self, t: float) -> Tensor:
        """(*input_shape) the saved state nearest to time t."""
        return self.tokens[int(torch.argmin((self.times - t).abs()))]


def solve(field: Field, solver: Solver, tokens, *, steps: int | None = None, t1: float | None = None,
          save: Save | None = None, mask=None, chunk_size: int | None = None, engine: str = "auto") -> Solution:
    """Solve the attention dynamics `field` from `tokens` with `solver`.

    Args:
        field: `Field(rule, scores, value, manifold)`.
        solver: `Euler(dt)`, `Euler.layers(alpha)`, `RK4(dt)`, `Renormalised(dt)` or `Adaptive(rtol, atol)`.
        tokens: (n, d) or (batch, n, d): NumPy array (float64 unless floating) or tensor (dtype, device kept).
            Each real token must lie on the field's manifold (`Manifold.check`: on the sphere, norm 1).
        steps: number of steps of a fixed-step solver (or give t1: steps = t1 / dt, which must be whole).
        t1: final time (an adaptive solver needs it, or Save(times=...)).
        save: `Save()` (every step, the default), `Save(every=k)`, `Save.final()`, `Save(times=...)`.
        mask: which tokens exist and who attends to whom (`hardmax.dynamics.masks`): a plain bool (n,) or
            (batch, n) tensor or `Tokens(present)`, True for real tokens (padding neither attends nor moves);
            `Causal()` / `Causal(window=w)` (decoder attention), `Pairs(allowed)` ((n, n) or (batch, n, n)), or an
            intersection `Causal() & Tokens(present)`. A pair mask runs on the loop for every rule (`engine_for`);
            a token with no allowed key does not move.
        engine: "auto" (`engine_for` decides), "layers" (simulate's engines; refused where they do not serve the
            case, a pair mask among them) or "loop" (the batched loop, also for the paper's layers: the reference
            the fast path is tested against).
        chunk_size: sequences advanced together through all steps (the batched loop). None: 1,024 on a CPU, so
            that each step's (chunk, n, n) scores stay in cache, and the whole batch on a GPU, which wants large
            launches.

    Returns:
        `Solution` with tokens of shape (saved, *tokens.shape) and their times.

    Raises:
        ValueError: one line naming the problem: shapes, NaN/inf, tokens off the manifold, matrices of the
            wrong size, hardmax with non-symmetric scores, a step count that is not whole or beyond `MAX_STEPS`,
            an unknown solver.
        FloatingPointError: the states stopped being finite (the field overflowed after t = 0): the message names
            the first step (and time, and sequence) where they did. A solution is never returned with NaN or inf.
    """
    save = Save() if save is None else save
    if engine not in SOLVE_ENGINES:
        raise ValueError(f"engine must be one of {SOLVE_ENGINES}, got {engine!r}")
    if not isinstance(save, Save):
        raise ValueError(f"save must be a hardmax.dynamics.Save, got {type(save).__name__}")
    if not isinstance(field, Field):
        raise ValueError(f"field must be a hardmax.dynamics.Field, got {type(field).__name__}")
    z = as_floating(tokens, "tokens")
    if z.dim() not in (2, 3) or z.shape[-1] == 0 or z.shape[-2] == 0:
        raise ValueError(f"tokens must have shape (n, d) or (batch, n, d) with n, d ≥ 1, got {tuple(z.shape)}")
    if not bool(torch.isfinite(z).all()):
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
    field.manifold.check(zb if real else zb[m])  # the real tokens; padding is anything and is put back as given
    if not real:  # padding rides along at a point of the manifold (on the sphere e_1), so that retractions stay finite
        zb = field.manifold.pad(zb, m)
    check_score_range(zb, m, field.scores.matrix(0.0, zb), field.rule)  # at t = 0
    w = None if real else m.to(zb.dtype)  # None: every token present (no masking in the hot loop)
    given_field = field  # what Solution records; the loop runs it restricted to `allowed`, which the rule then sees
    if allowed is not None:
        field = field.restricted(allowed if field.allowed is None else field.allowed & allowed)

    if isinstance(solver, Adaptive):
        if steps is not None:
            raise ValueError("an adaptive solver chooses its own steps: give t1=... (or Save(times=...)), not steps")
        times = _adaptive_times(save, t1)
        require_memory(float(len(times)) * zb.numel() * zb.element_size() * 8,
                       f"solve of tokens of shape {tuple(z.shape)}", device=zb.device)
        out = torch.where(m.unsqueeze(-1), _adaptive(solver, field, zb, w, times), given)
        attention = (torch.stack([field.attention(float(t), x, w) for t, x in zip(times, out, strict=True)])
                     if save.attention else None)
        return _solution(out, times.to(zb.dtype), given_field, solver, m, None, attention, single, "adaptive", pairs)
    if not hasattr(solver, "step"):
        raise ValueError(f"solver must be Euler, RK4, Renormalised or Adaptive, got {type(solver).__name__}")
    if save.times is not None:
        raise ValueError("Save(times=...) is for an adaptive solver; a fixed-step one saves Save(every=k)")
    count = _step_count(solver, steps, t1)
    require_memory(16.0 * (count + 1), f"the {count:,} steps of a solve", device=zb.device)  # steps and times
    dts = solver.steps(count, zb.dtype, zb.device)
    kept = save.indices(count)
    times = torch.cat([dts.new_zeros(1), torch.cumsum(dts, 0)])[list(kept)]
    chosen, why = engine_for(field, solver, pairs)
    if engine == "layers" and chosen != "layers":
        raise ValueError(f"engine='layers' cannot run this case: {why}; use engine='auto' or 'loop'")
    if chosen == "layers" and engine != "loop":
        # The fast path: the paper's layers on `simulate`'s engines (exact ties, bit for bit).
        run = simulate(zb, field.rule, alpha=solver.alpha, layers=count, A=field.scores.A, mask=m, save=save)
        attention = None
        if save.attention:  # simulate keeps P of layers 0..count-1; the last saved state's P is computed here
            last = field.attention(0.0, run.tokens[-1], w)
            attention = torch.cat([run.attention, last.unsqueeze(0)])[list(kept)]
        return _solution(run.tokens, times, given_field, solver, m, kept, attention, single, "layers")
    require_memory(float(len(kept)) * zb.numel() * zb.element_size() + 8.0 * zb.numel() * zb.element_size()
                   + 4.0 * batch * n * n * zb.element_size(), f"solve of tokens of shape {tuple(z.shape)}",
                   device=zb.device)
    if chunk_size is None:
        chunk_size = 1024 if zb.device.type == "cpu" else max(1, batch)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer ≥ 1, got {chunk_size!r}")
    out = zb.new_empty(len(kept), batch, n, d)
    attention = zb.new_empty(len(kept), batch, n, n) if save.attention else None
    slot = {k: i for i, k in enumerate(kept)}
    grad = _needs_grad(zb, field)
    if grad:
        chunk_size = batch  # one graph
    for start in range(0, batch, int(chunk_size)):  # blocks of sequences, each through every step
        rows = slice(start, start + int(chunk_size))
        per_sequence = (A0 is not None and A0.dim() == 3) or (allowed is not None and allowed.shape[0] > 1)
        part = field.rows(rows) if per_sequence else field
        x, xw, t = zb[rows], None if w is None else w[rows], 0.0
        saved = []
        good = (0, 0.0, x)  # the last step whose state was seen finite
        with torch.enable_grad() if grad else torch.no_grad():
            for k in range(count + 1):
                if k in slot:
                    saved.append(x)
                    if attention is not None:
                        attention[slot[k], rows] = part.attention(t, x, xw)
                if k == count:
                    break
                dt = float(dts[k])
                x = solver.step(part, t, x, xw, dt)
                t = t + dt
                if (k + 1) % _FINITE_EVERY == 0 or k + 1 == count:  # one host synchronisation per 64 steps
                    if not bool(torch.isfinite(x.detach()).all()):
                        raise _not_finite(solver, part, xw, dts, good, count, start)
                    good = (k + 1, t, x)
        if grad:
            out = torch.stack(saved)
        else:
            for i, x in enumerate(saved):
                out[i, rows] = x
    if given is not zb and not grad:
        out = torch.where(m.unsqueeze(-1), out, given)
    return _solution(out, times, given_field, solver, m, kept, attention, single, "loop", pairs)


def _not_finite(solver, field: Field, w: Tensor | None, dts: Tensor, good: tuple, count: int,
                first_row: int) -> FloatingPointError:
    """The error naming the first step whose state holds NaN or inf, found by replaying the steps from `good` =
    (step, time, state), the last state seen finite. A state that is not finite stays so (each token's update
    includes the token itself, and NaN and inf propagate), so the states are looked at only every `_FINITE_EVERY`
    steps and the replay covers at most that many: no cost per step."""
    k, t, x = good
    with torch.no_grad():
        while k < count:
            dt = float(dts[k])
            x = solver.step(field, t, x.detach(), w, dt)
            t, k = t + dt, k + 1
            bad = ~torch.isfinite(x).flatten(1).all(1)
            if bool(bad.any()):
                break
    row = first_row + int(bad.nonzero()[0]) if bool(bad.any()) else first_row
    return FloatingPointError(
        f"the states stopped being finite at step {k:,} of {count:,} (t = {t:.6g}; sequence {row} first seen): the "
        "field overflowed; use a smaller step, a shorter time, smaller tokens or a lower beta")


def _adaptive(solver: Adaptive, field: Field, z: Tensor, w: Tensor | None, times: Tensor) -> Tensor:
    """The adaptive solver's states at `times`, as one line of error when it cannot get there: a step that
    underflows, more than its `max_steps` steps, or states that are not finite."""
    try:
        out = solver.solve(field, z, w, times.to(dtype=z.dtype, device=z.device))
    except AssertionError as error:  # torchdiffeq's checks: 'underflow in dt …', 'max_num_steps exceeded …'
        text = str(error)
        if "max_num_steps" in text:
            raise ValueError(f"the adaptive solver took more than {solver.max_steps:,} steps before t = "
                             f"{float(times[-1]):g} (rtol {solver.rtol:g}, atol {solver.atol:g}): a stiff or "
                             "overflowing field, or a horizon too long; use a shorter t1, looser "
                             "tolerances or a larger Adaptive(max_steps=...)") from None
        if "underflow" in text or "non-finite" in text:
            raise FloatingPointError(f"the adaptive solver stopped before t = {float(times[-1]):g}: "
                                     f"{text.split(':')[0].strip()} (the field overflowed or the tolerances "
                                     f"rtol {solver.rtol:g}, atol {solver.atol:g} are below what {z.dtype} "
                                     "resolves)") from None
        raise
    ok = torch.isfinite(out).flatten(1).all(1)
    if not bool(ok.all()):
        bad = int((~ok).nonzero()[0])
        raise FloatingPointError(f"the states stopped being finite by saved time {bad} (t = {float(times[bad]):.6g}): "
                                 "the field overflowed; use a shorter time, smaller tokens or a lower beta")
    return out


def _needs_grad(z: Tensor, field: Field) -> bool:
    return torch.is_grad_enabled() and (z.requires_grad or field.requires_grad)


def _solution(out, times, field, solver, m, kept, attention, single, engine: str = "loop",
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
