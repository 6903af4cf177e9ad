"""Long context: the critical temperature β_n = γ log n (Chen, Lin, Polyanskiy, Rigollet, ICLR 2026, arXiv 2510.05554).

    simplex_tokens(n, d, rho, seed)        (n, d) unit tokens whose pairwise cosines are ρ (exactly when d ≥ n + 1)
    long_context_cell(n=, gamma=, ...)     -> LongContextCell: one (n, γ, seed) through `solve`: the angle ratio λ
                                              and the attention's self-mass
    simplex_cell(n, gamma, ...)            the same two numbers for the exact simplex in closed form (any n)
    crossing(gammas, values, level)        the γ where a statistic rising with γ crosses `level` (interpolated)
    transition(rows, ...)                  -> LongContextTransition: γ_c(n) from a sweep's rows (task
                                              `long_context`), beside the paper's γ_c = 1/(1 − ρ); `.figure()`
    paper_gamma(rho) = 1/(1 − ρ);  simplex_gamma(n, ...);  annealed_gamma(n, d, rho)

The paper's model (its eq. 2.2, Q = K = V = I): pre-layer-norm tokens y_i = x_i/|x_i| on the sphere, scores
β⟨y_i, y_j⟩ with β = β_n = γ log n, one attention layer with a residual of weight α,

    x_i' = α x_i + Σ_j A_ij y_j,      A_ij = e^{β⟨y_i, y_j⟩} / Σ_l e^{β⟨y_i, y_l⟩},

from the simplex (|x_i| = 1, ⟨y_i, y_j⟩ = ρ for i ≠ j; the "almost simplex" when ⟨y_i, y_j⟩ = ρ + O(1/√d)). The
self-weight is e^β against (n − 1) e^{βρ}: as n → ∞ attention tends to the identity when γ(1 − ρ) > 1 and to the
uniform average (every token pulled to one direction) when γ(1 − ρ) < 1, so γ_c = 1/(1 − ρ) (their Theorem 2.1).

Here that layer is one step of the library's verb: `solve(Field(Softmax(β)), Euler(1/(1 + α)), y, steps=1)` in R^d
gives (α y + Σ_j A_ij y_j)/(1 + α) (the same directions). Depth is the sphere flow ẏ_i = P⊥_{y_i}(Σ_j A_ij y_j) for
a time T (`Field(Softmax(β), manifold=Sphere())`, RK4; the compiled softmax engine): the Post-LN layers' limit. What
is measured (`LongContextCell`): λ = θ_out/θ_in, θ the angle of the tokens' mean pairwise cosine (1: attention did
nothing, 0: one direction), and the mean self-attention A_ii at the start (1: the identity). The sweep task
`long_context` (`hardmax.sweep.tasks`) is `long_context_cell`'s row.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import RK4, Euler, Field, Save, Softmax, Sphere, solve

__all__ = ["LongContextCell", "LongContextTransition", "annealed_gamma", "crossing", "long_context_cell",
           "paper_gamma", "simplex_cell", "simplex_gamma", "simplex_tokens", "transition"]

Statistic = Literal["angle_ratio", "self_attention"]
STATISTICS = ("angle_ratio", "self_attention")


def _check(n: int, rho: float, *, gamma: float = 1.0, d: int | None = None, alpha: float = 0.0,
           time: float = 0.0) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer ≥ 2, got {n!r}")
    if not (isinstance(rho, int | float) and 0 <= rho < 1):
        raise ValueError(f"rho must lie in [0, 1), got {rho!r}")
    if not (isinstance(gamma, int | float) and math.isfinite(gamma) and gamma >= 0):
        raise ValueError(f"gamma must be a finite number ≥ 0, got {gamma!r}")
    if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 3):
        raise ValueError(f"d must be an integer ≥ 3, got {d!r}")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number ≥ 0, got {alpha!r}")
    if not (isinstance(time, int | float) and math.isfinite(time) and time >= 0):
        raise ValueError(f"time must be a finite number ≥ 0 (0: one layer), got {time!r}")


def paper_gamma(rho: float) -> float:
    """γ_c = 1/(1 − ρ): the paper's critical γ of β_n = γ log n for tokens of pairwise cosine ρ (n → ∞)."""
    _check(2, rho)
    return 1.0 / (1.0 - rho)


def simplex_tokens(n: int, d: int, rho: float, seed: int = 0, *, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, d) unit tokens y_i = √ρ e_1 + √(1 − ρ) v_i, v_i unit and orthogonal to e_1.

    d ≥ n + 1: v_i = e_{i+1}, the exact simplex ⟨y_i, y_j⟩ = ρ (no randomness). d ≤ n: v_i uniform on the unit
    sphere of e_1^⊥ (from `seed`), the almost simplex ⟨y_i, y_j⟩ = ρ + (1 − ρ)⟨v_i, v_j⟩, ⟨v_i, v_j⟩ of mean 0 and
    variance 1/(d − 1)."""
    _check(n, rho, d=d)
    if d >= n + 1:
        v = torch.zeros(n, d - 1, dtype=torch.float64)
        v[torch.arange(n), torch.arange(n)] = 1.0
    else:
        g = torch.Generator().manual_seed(seed)
        v = torch.nn.functional.normalize(torch.randn(n, d - 1, generator=g, dtype=torch.float64), dim=-1)
    head = torch.full((n, 1), math.sqrt(rho), dtype=torch.float64)
    return torch.cat([head, math.sqrt(1.0 - rho) * v], -1).to(dtype)


def _mean_cosine(z: Tensor) -> float:
    """The mean over pairs i ≠ j of ⟨z_i, z_j⟩/(|z_i||z_j|) of (n, d) tokens: (|Σ u_i|² − n)/(n(n − 1)), O(nd)."""
    u = torch.nn.functional.normalize(z.to(torch.float64), dim=-1)
    n = u.shape[0]
    s = u.sum(0)
    return float(((s @ s) - n) / (n * (n - 1)))


def _self_attention(y: Tensor, beta: float, rows: int = 512) -> float:
    """The mean of A_ii = e^{β|y_i|²}/Σ_l e^{β⟨y_i, y_l⟩} over i, computed `rows` rows at a time (n × n never held)."""
    y = y.to(torch.float64)
    total = 0.0
    for lo in range(0, y.shape[0], rows):
        s = beta * (y[lo:lo + rows] @ y.T)  # (rows, n)
        own = s[torch.arange(s.shape[0]), torch.arange(lo, lo + s.shape[0])]  # β|y_i|²
        total += float((own - torch.logsumexp(s, -1)).exp().sum())
    return total / y.shape[0]


def _ratio(cosine_in: float, cosine_out: float) -> float:
    return math.acos(min(1.0, max(-1.0, cosine_out))) / math.acos(min(1.0, max(-1.0, cosine_in)))


@dataclass(frozen=True)
class LongContextCell:
    """One (n, γ, seed) of the long-context model, measured.

    Attributes:
        n, gamma, rho, d, alpha, time, seed: the cell (time 0: one layer; > 0: the sphere flow for that time).
        beta: γ log n. angle_ratio: λ = θ_out/θ_in, θ = arccos(mean pairwise cosine). self_attention: the mean
            A_ii of the start (1 − it: the attention's distance from the identity, per row).
        cosine_in, cosine_out: the mean pairwise cosine before and after. engine: `Solution.engine`. seconds: the
            cell's wall time.
    """

    n: int
    gamma: float
    rho: float
    d: int
    alpha: float
    time: float
    seed: int
    beta: float
    angle_ratio: float
    self_attention: float
    cosine_in: float
    cosine_out: float
    engine: str
    seconds: float

    def to_dict(self) -> dict:
        """The cell as a sweep row: every field by name."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def long_context_cell(*, n: int, gamma: float, rho: float = 0.5, d: int = 64, alpha: float = 0.0,
                      time: float = 0.0, dt: float = 0.25, seed: int = 0) -> LongContextCell:
    """Run the paper's model at β = γ log n from `simplex_tokens(n, d, rho, seed)` and measure it.

    time = 0: one layer x' = α y + Σ_j A_ij y_j, as `solve(Field(Softmax(β)), Euler(1/(1 + α)), y, steps=1)` in R^d
    (α = 0: the attention output alone, the paper's collapse statement). time = T > 0: the sphere flow
    ẏ_i = P⊥_{y_i}(Σ_j A_ij y_j) for T with RK4(dt) (round(T/dt) steps; α unused), depth's continuous limit.

    Returns:
        `LongContextCell`. The largest cell of the sweep (n = 4,096, d = 64) takes ~1 s for one layer and ~2 s per
        RK4 step of the flow on one laptop core (benchmarks/bench_long_context.py).
    """
    _check(n, rho, gamma=gamma, d=d, alpha=alpha, time=time)
    if not (isinstance(dt, int | float) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a finite number > 0, got {dt!r}")
    start = _time.perf_counter()
    beta = gamma * math.log(n)
    y = simplex_tokens(n, d, rho, seed)
    if time == 0:
        run = solve(Field(Softmax(beta)), Euler(1.0 / (1.0 + alpha)), y, steps=1, save=Save.final())
    else:
        run = solve(Field(Softmax(beta), manifold=Sphere()), RK4(dt), y, steps=max(1, round(time / dt)),
                    save=Save.final())
    cosine_in, cosine_out = _mean_cosine(y), _mean_cosine(run.final)
    return LongContextCell(n=n, gamma=float(gamma), rho=float(rho), d=d, alpha=float(alpha), time=float(time),
                           seed=seed, beta=beta, angle_ratio=_ratio(cosine_in, cosine_out),
                           self_attention=_self_attention(y, beta), cosine_in=cosine_in, cosine_out=cosine_out,
                           engine=run.engine, seconds=_time.perf_counter() - start)


def simplex_cell(n: int, gamma: float, *, rho: float = 0.5, alpha: float = 0.0, time: float = 0.0,
                 dt: float = 1e-3) -> tuple[float, float]:
    """(λ, mean A_ii) of the exact simplex in closed form: what `long_context_cell` measures when d ≥ n + 1.

    By symmetry A_ii = a = 1/(1 + (n − 1) e^{−β(1 − ρ)}) and A_ij = b = (1 − a)/(n − 1), so one layer gives
    x_i' = c y_i + b S (c = α + a − b, S = Σ_j y_j, ⟨y_i, S⟩ = s = 1 + (n − 1)ρ, |S|² = n s): the output cosine is
    (c²ρ + 2cbs + b²ns)/(c² + 2cbs + b²ns). Under the sphere flow every pair keeps one cosine ρ(t),
    ρ̇ = 2 b(ρ) s(ρ) (1 − ρ) (a, b at ρ(t)), integrated here by RK4 of step dt to `time`."""
    _check(n, rho, gamma=gamma, alpha=alpha, time=time)
    beta = gamma * math.log(n)

    def weights(r: float) -> tuple[float, float]:
        a = 1.0 / (1.0 + (n - 1) * math.exp(-beta * (1.0 - r)))
        return a, (1.0 - a) / (n - 1)

    a0, _ = weights(rho)
    if time == 0:
        a, b = weights(rho)
        c, s = alpha + a - b, 1.0 + (n - 1) * rho
        cross = 2 * c * b * s + b * b * n * s
        return _ratio(rho, (c * c * rho + cross) / (c * c + cross)), a0

    def rate(r: float) -> float:
        _, b = weights(r)
        return 2.0 * b * (1.0 + (n - 1) * r) * (1.0 - r)

    r, steps = rho, max(1, math.ceil(time / dt))
    h = time / steps
    for _ in range(steps):
        k1 = rate(r)
        k2 = rate(r + h / 2 * k1)
        k3 = rate(r + h / 2 * k2)
        k4 = rate(r + h * k3)
        r = min(1.0, r + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
    return _ratio(rho, r), a0


def crossing(gammas, values, level: float = 0.5) -> float:
    """The γ where `values` (rising with γ) first cross `level` from below: linear interpolation between the two
    grid points around it (sorted by γ; a value equal to the level is the crossing). NaN when the values never cross
    in the grid's range (all below, all above).

    gammas, values: array-likes of shape (k,)."""
    g, v = np.asarray(gammas, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if g.ndim != 1 or g.shape != v.shape or len(g) < 2:
        raise ValueError(f"gammas and values must be two 1-d arrays of one length ≥ 2, got shapes {g.shape}, "
                         f"{v.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    order = np.argsort(g, kind="stable")
    g, v = g[order], v[order]
    up = np.nonzero((v[:-1] < level) & (v[1:] >= level))[0]
    if len(up) == 0:
        return float("nan")
    i = int(up[0])
    return float(g[i] + (level - v[i]) / (v[i + 1] - v[i]) * (g[i + 1] - g[i]))


def simplex_gamma(n: int, *, rho: float = 0.5, alpha: float = 0.0, time: float = 0.0,
                  statistic: Statistic = "angle_ratio", level: float = 0.5) -> float:
    """The exact simplex's finite-n critical γ: where `simplex_cell`'s statistic crosses `level` (bisection; both
    rise with γ). For the self-attention at level 1/2 it is log(n − 1)/((1 − ρ) log n) → 1/(1 − ρ)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    index = STATISTICS.index(statistic)

    def f(g: float) -> float:
        return simplex_cell(n, g, rho=rho, alpha=alpha, time=time, dt=1e-2)[index] - level

    lo, hi = 0.0, 4.0 / (1.0 - rho)
    while f(hi) < 0:
        hi *= 2
        if hi > 1e3:
            return float("nan")
    if f(lo) >= 0:
        return float("nan")
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def annealed_gamma(n: int, d: int, rho: float = 0.5) -> float:
    """An estimate (ours, not the paper's) of where the almost simplex's mean self-attention is 1/2 at finite d.

    With b = β(1 − ρ) the self-weight is e^b against Σ_{j≠i} e^{b u_j}, u_j = ⟨v_i, v_j⟩ a coordinate of a uniform
    point of S^{k−1}, k = d − 1. Replacing the sum by its mean (n − 1) M_k(b), M_k(b) = E e^{bu} =
    Γ(k/2) (2/b)^{k/2−1} I_{k/2−1}(b), gives A_ii = 1/2 at b = log(n − 1) + log M_k(b), γ = b/((1 − ρ) log n).
    As d → ∞ (M_k → 1) this is log(n − 1)/((1 − ρ) log n) → 1/(1 − ρ); at fixed d it grows with log n / d (for
    Gaussian u, b ≈ k(1 − √(1 − 2 log n / k))). d ≥ n + 1 (the exact simplex): the exact value."""
    from scipy.optimize import brentq
    from scipy.special import logsumexp

    _check(n, rho, d=d)
    if d >= n + 1:
        return math.log(n - 1) / ((1.0 - rho) * math.log(n))
    # M_k(b) = ∫_0^π e^{b cos φ} sin^{k−2} φ dφ / ∫_0^π sin^{k−2} φ dφ (u = cos φ): a smooth integrand for every k ≥ 2,
    # summed in logs (the Bessel form underflows for large k)
    phi = np.linspace(0.0, math.pi, 20001)[1:-1]
    log_sin = (d - 3) * np.log(np.sin(phi))
    norm = float(logsumexp(log_sin))

    def log_m(b: float) -> float:
        return float(logsumexp(log_sin + b * np.cos(phi))) - norm

    def f(b: float) -> float:
        return b - math.log(n - 1) - log_m(b)

    lo = hi = math.log(n - 1)  # f(lo) = −log M_k ≤ 0 (M_k ≥ e^{b E u} = 1)
    while f(hi) < 0:
        hi *= 2
    return lo if f(lo) == 0 else brentq(f, lo, hi, xtol=1e-12) / ((1.0 - rho) * math.log(n))


@dataclass(frozen=True)
class LongContextTransition:
    """γ_c(n) located from a sweep of `long_context` cells of one setting (ρ, d, α, time), beside the theory.

    Attributes:
        ns: (k,) the context lengths. gamma: (k,) the simulated γ_c(n) (`crossing` of the seed-averaged statistic;
            NaN where the grid does not bracket it). curves: {n: (γ grid, mean statistic)}.
        gamma_paper: 1/(1 − ρ). gamma_simplex: (k,) the exact simplex's finite-n crossing (`simplex_gamma`).
        gamma_annealed: (k,) `annealed_gamma` for the self-attention statistic (NaN for λ).
        statistic, level, rho, d, alpha, time: what was located, and the setting.
    """

    ns: tuple[int, ...]
    gamma: tuple[float, ...]
    curves: dict
    gamma_paper: float
    gamma_simplex: tuple[float, ...]
    gamma_annealed: tuple[float, ...]
    statistic: str
    level: float
    rho: float
    d: int
    alpha: float
    time: float

    def table(self) -> str:
        """A Markdown table: n, simulated γ_c, the exact simplex's, the annealed estimate, the paper's."""
        lines = ["| n | γ_c simulated | γ_c exact simplex | γ_c annealed (finite d) | paper 1/(1−ρ) |",
                 "|---:|---:|---:|---:|---:|"]
        for n, g, s, a in zip(self.ns, self.gamma, self.gamma_simplex, self.gamma_annealed, strict=True):
            lines.append(f"| {n:,} | {g:.3f} | {s:.3f} | " + ("–" if math.isnan(a) else f"{a:.3f}")
                         + f" | {self.gamma_paper:.3f} |")
        return "\n".join(lines)

    def figure(self):
        """Two panels: the statistic against γ, one line per n, the level dashed; γ_c(n) against n (log scale) with
        the exact simplex's finite-n values, the annealed estimate and the paper's 1/(1 − ρ)."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(10, 4.2), layout="constrained")
        left, right = fig.subplots(1, 2)
        colours = [f"C{i % 10}" for i in range(len(self.ns))]
        for n, c in zip(self.ns, colours, strict=True):
            g, v = self.curves[n]
            left.plot(g, v, marker=".", color=c, label=f"n = {n:,}")
        left.axhline(self.level, color="grey", ls="--", lw=1)
        left.axvline(self.gamma_paper, color="black", ls=":", lw=1)
        left.set_xlabel("γ   (β = γ log n)")
        left.set_ylabel({"angle_ratio": "angle ratio λ = θ_out / θ_in",
                         "self_attention": "mean self-attention A_ii"}[self.statistic])
        left.legend(fontsize=7)
        right.plot(self.ns, self.gamma, marker="o", label="simulated (almost simplex)" if self.d <= max(self.ns)
                   else "simulated")
        right.plot(self.ns, self.gamma_simplex, marker="s", ls="--", label="exact simplex, finite n")
        if not all(math.isnan(a) for a in self.gamma_annealed):
            right.plot(self.ns, self.gamma_annealed, marker="^", ls="-.", label=f"annealed estimate, d = {self.d}")
        right.axhline(self.gamma_paper, color="black", ls=":", label="paper: 1/(1 − ρ)")
        right.set_xscale("log", base=2)
        right.set_xlabel("context length n")
        right.set_ylabel(f"γ_c  ({self.statistic} = {self.level:g})")
        right.legend(fontsize=7)
        depth = "one layer" if self.time == 0 else f"sphere flow to t = {self.time:g}"
        fig.suptitle(f"ρ = {self.rho:g}, d = {self.d}, α = {self.alpha:g}, {depth}")
        return fig


def _rows(table) -> list[dict]:
    rows = table.to_pylist() if hasattr(table, "to_pylist") else list(table)
    return [r for r in rows if r.get("error") is None and r.get("task", "long_context") == "long_context"]


def transition(table, *, statistic: Statistic = "angle_ratio", level: float = 0.5,
               where: dict | None = None) -> LongContextTransition:
    """γ_c(n) from the rows of a sweep of task `long_context` (a pyarrow table or a list of dicts; failed cells and
    other tasks' rows skipped): the rows matching `where` (e.g. {"d": 64, "time": 0.0}) must share one (ρ, d, α,
    time); for each n the statistic is averaged over seeds at each γ and `crossing` locates γ_c(n)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, got {statistic!r}")
    rows = [r for r in _rows(table) if all(r.get(k) == v for k, v in (where or {}).items())]
    if not rows:
        raise ValueError("the table holds no long_context rows" + (f" matching {where}" if where else ""))
    setting = {k: sorted({r[k] for r in rows}) for k in ("rho", "d", "alpha", "time")}
    several = [k for k, v in setting.items() if len(v) > 1]
    if several:
        raise ValueError(f"the rows hold several values of {several[0]} ({setting[several[0]]}): choose one with "
                         f"where={{{several[0]!r}: ...}}")
    rho, d, alpha, time = (setting[k][0] for k in ("rho", "d", "alpha", "time"))
    ns = tuple(sorted({int(r["n"]) for r in rows}))
    curves, gamma = {}, []
    for n in ns:
        by: dict[float, list[float]] = {}
        for r in rows:
            if r["n"] == n:
                by.setdefault(float(r["gamma"]), []).append(float(r[statistic]))
        g = np.array(sorted(by))
        v = np.array([np.mean(by[x]) for x in g])
        curves[n] = (g, v)
        gamma.append(crossing(g, v, level) if len(g) >= 2 else float("nan"))
    simplex = tuple(simplex_gamma(n, rho=rho, alpha=alpha, time=time, statistic=statistic, level=level) for n in ns)
    annealed = tuple(annealed_gamma(n, d, rho) if statistic == "self_attention" and level == 0.5 else float("nan")
                     for n in ns)
    return LongContextTransition(ns=ns, gamma=tuple(gamma), curves=curves, gamma_paper=paper_gamma(rho),
                                 gamma_simplex=simplex, gamma_annealed=annealed, statistic=statistic, level=level,
                                 rho=rho, d=d, alpha=alpha, time=time)
