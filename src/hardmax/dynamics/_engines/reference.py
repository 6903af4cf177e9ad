"""The reference engine: one batched torch loop over `solver.step` (every fixed-step case), and the adaptive solver.

Any field, solver, manifold and mask (pair masks included), on the CPU or CUDA, differentiable. All initial
conditions of a batch (batch, n, d) advance together, in blocks of sequences that each go through every step
(1,024 on a CPU so that each step's (block, n, n) scores stay in cache; the whole batch on a GPU, which wants large
launches; one graph when gradients are needed). The states are looked at every `_FINITE_EVERY` steps (one host
synchronisation each) and the first non-finite step found by replay: no cost per step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hardmax.dynamics.field import Field
from hardmax.dynamics.solvers import Adaptive

_FINITE_EVERY = 64  # steps between two looks at whether the states are finite (one host synchronisation each)


def loop(field: Field, solver, z: Tensor, w: Tensor | None, dts: Tensor, kept: tuple[int, ...], attention: bool,
         per_sequence: bool, grad: bool) -> tuple[Tensor, Tensor | None]:
    """(len(kept), batch, n, d) the states after the steps in `kept` from z (batch, n, d), and P at each when asked.

    field: the field as the loop runs it (restricted to the pair mask); w: (batch, n) presence weights, None for
    all present; dts: (count,) the steps; per_sequence: the field holds one matrix or pair mask per sequence (then
    each block runs `field.rows(block)`)."""
    batch, n, d = z.shape
    count = dts.shape[0]
    chunk = batch if grad or z.device.type != "cpu" else 1024
    out = z.new_empty(len(kept), batch, n, d)
    kept_attention = z.new_empty(len(kept), batch, n, n) if attention else None
    slot = {k: i for i, k in enumerate(kept)}
    saved: list[Tensor] = []
    learned = grad and dts.requires_grad
    sizes = dts.detach().tolist()  # the steps as floats, read once (no host synchronisation per step on a GPU)
    for start in range(0, batch, max(chunk, 1)):  # blocks of sequences, each through every step
        rows = slice(start, start + chunk)
        part = field.rows(rows) if per_sequence else field
        x, xw, t = z[rows], None if w is None else w[rows], 0.0
        saved = []
        good = (0, 0.0, x)  # the last step whose state was seen finite
        with torch.enable_grad() if grad else torch.no_grad():
            for k in range(count + 1):
                if k in slot:
                    saved.append(x)
                    if kept_attention is not None:
                        kept_attention[slot[k], rows] = part.attention(t, x, xw)
                if k == count:
                    break
                dt = dts[k] if learned else sizes[k]  # a learned step (α requiring grad) keeps its graph
                x = solver.step(part, t, x, xw, dt)
                t = t + sizes[k]
                if (k + 1) % _FINITE_EVERY == 0 or k + 1 == count:  # one host synchronisation per 64 steps
                    if not bool(torch.isfinite(x.detach()).all()):
                        raise _not_finite(solver, part, xw, dts, good, count, start)
                    good = (k + 1, t, x)
        if not grad:
            for i, x in enumerate(saved):
                out[i, rows] = x
    if grad and saved:
        out = torch.stack(saved)
    return out, kept_attention


def adaptive(solver: Adaptive, field: Field, z: Tensor, w: Tensor | None, times: Tensor) -> Tensor:
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


