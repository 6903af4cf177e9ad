"""What a sweep can run: tasks, library functions of one cell's parameters that return a row of numbers.

    TASKS[name] = Task(name, function, parameters)      parameters: name -> (type, default or REQUIRED)

A task is a plain function of keyword arguments returning a dict of numbers (or short strings); `seed` is given
by the sweep from the cell's parameters when the task takes one and the grid does not say it (the same cell gets
the same seed wherever and whenever it runs). A new task is one `register` call in a module of the library.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["REQUIRED", "TASKS", "Task", "register"]

#: The default of a parameter the grid must give.
REQUIRED = object()


@dataclass(frozen=True)
class Task:
    """A function of one cell's parameters. parameters: name -> (type, default), default `REQUIRED` when none."""

    name: str
    function: Callable[..., dict]
    parameters: dict

    def check(self, cell: dict) -> dict:
        """The cell with every parameter typed and the defaults filled in; ValueError (one line) for a parameter the
        task does not take, one it needs and lacks, or a value of the wrong type."""
        unknown = sorted(set(cell) - set(self.parameters))
        if unknown:
            raise ValueError(f"task {self.name!r} takes no parameter {unknown[0]!r} (it takes: "
                             f"{', '.join(self.parameters)})")
        out = {}
        for name, (kind, default) in self.parameters.items():
            if name not in cell:
                if default is REQUIRED:
                    raise ValueError(f"task {self.name!r} needs a value for {name!r}")
                out[name] = default
                continue
            out[name] = _typed(cell[name], kind, f"{self.name}.{name}")
        return out


def _typed(value, kind, name: str):
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string, got {value!r}")
        return value
    raise TypeError(f"unknown parameter type {kind!r}")  # pragma: no cover (a programming error)


#: The registered tasks, by name.
TASKS: dict[str, Task] = {}


def register(name: str, **parameters) -> Callable:
    """Register `function` as task `name` with `parameters` (name=(type, default or REQUIRED)); a decorator."""
    def wrap(function: Callable[..., dict]) -> Callable[..., dict]:
        TASKS[name] = Task(name, function, parameters)
        return function
    return wrap


@register("noop", x=(float, 0.0), sleep=(float, 0.0), fail=(bool, False))
def noop(x: float, sleep: float, fail: bool) -> dict:
    """Nothing (the sweep machinery's own cost): {"x": x} after `sleep` seconds; `fail` raises (a failing cell)."""
    if sleep:
        time.sleep(sleep)
    if fail:
        raise ValueError(f"this cell fails on purpose (x = {x})")
    return {"x": x}


@register("spin", seconds=(float, 0.05), seed=(int, 0))
def spin(seconds: float, seed: int) -> dict:
    """Busy arithmetic for about `seconds` of one core (an embarrassingly parallel cell for the benchmark)."""
    end = time.perf_counter() + seconds
    x, steps = float(seed % 1000), 0
    while time.perf_counter() < end:
        for _ in range(1000):
            x = (x * 1.000001 + 0.5) % 1000.0
        steps += 1000
    return {"steps": steps, "x": x}


@register("phase_cell", beta=(float, REQUIRED), starts=(int, 100), n=(int, 32), d=(int, 3), steps=(int, 300),
          dt=(float, 0.1), tol=(float, 1e-2), seed=(int, REQUIRED), dtype=(str, "float64"))
def phase_cell(beta: float, starts: int, n: int, d: int, steps: int, dt: float, tol: float, seed: int,
               dtype: str) -> dict:
    """One β of the phase diagram of `hardmax particles` (`experiments.particles.phase_diagram`): the fraction of
    `starts` uniform starts on S^{d−1} in one cluster at every tenth step, and at the end."""
    import torch

    from hardmax.experiments.particles import phase_diagram

    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    result = phase_diagram([beta], starts=starts, n=n, d=d, steps=steps, dt=dt, seed=seed, tol=tol,
                           dtype=getattr(torch, dtype))
    single, mean = result.single[0].tolist(), result.mean_clusters[0].tolist()
    times = result.times.tolist()
    return {"single_final": single[-1], "t_final": float(times[-1]), "solve_seconds": result.solve_seconds,
            **{f"single_t{float(t):g}": p for t, p in zip(times, single, strict=True)},
            **{f"clusters_t{float(t):g}": c for t, c in zip(times, mean, strict=True)}}


@register("simulate", n=(int, REQUIRED), d=(int, 2), layers=(int, 30), alpha=(float, 0.5), seed=(int, REQUIRED),
          causal=(bool, False))
def simulate_cell(n: int, d: int, layers: int, alpha: float, seed: int, causal: bool) -> dict:
    """The paper's hardmax layers on n standard normal tokens in R^d (`hardmax.simulate`), and what the theory
    says of them: Theorem 2.1's check (full attention), the leaders, the distinct limits."""
    import numpy as np

    from hardmax.dynamics import Causal, simulate
    from hardmax.theory import check_flow, check_theorem, leader_layers

    tokens = np.random.default_rng(seed).standard_normal((n, d))
    run = simulate(tokens, alpha=alpha, layers=layers, mask=Causal() if causal else None)
    distinct = len(np.unique(run.final.numpy().round(9), axis=0))
    if causal:
        return {"passed": check_flow(run).passed, "leaders": -1, "distinct_limits": distinct}
    return {"passed": check_theorem(run).passed, "leaders": int((leader_layers(run) >= 0).sum()),
            "distinct_limits": distinct}
