"""The Att-SVM experiments: the paper's synthetic runs, the 2-D pictures, the join to hardmax, IMDb.

Tarzanagh, Li, Thrampoulidis, Oymak 2023 (arXiv 2308.16898), §5: train f(X) = vᵀ Xᵀ softmax(X W z) by
normalised gradient descent on W and on (K, Q), read the selected tokens off the final softmax, solve
the Att-SVMs of that selection, and follow the correlation of the iterates with them. Where softmax
saturates, it has become hardmax selection: `join_hardmax` shows it, and `imdb_join` asks the same
questions of a trained hardmax classifier's tokens. `render_report` writes everything as markdown.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from hardmax.memory import require_memory
from hardmax.svm import (
    AttSVM,
    DescentConfig,
    DescentPath,
    InfeasibleError,
    att_svm,
    beats_support_tokens,
    descend,
    initial_parameters,
    softmax_attention,
)
from hardmax.svm.descent import recorded_steps
from hardmax.tables import markdown_table
from hardmax.theory import attention_sets

__all__ = ["CURVES", "MAX_RECORDS", "MAX_SEED", "ImdbJoin", "JoinResult", "NoSolvableSeedError", "PlaneResult",
           "SeedSVMs", "SeedSolver", "SyntheticConfig", "SyntheticResult", "check_seed", "imdb_join", "join_hardmax",
           "plane_problem", "render_report", "run_plane", "run_synthetic", "solve_seed", "synthetic_memory",
           "synthetic_problems"]

#: Curve label -> (parameterisation descended, norm of the SVM compared with). The first two are the
#: paper's claims; the last two are controls (each parameterisation against the other's SVM), which
#: the authors' notebook plots under the label "(K,Q)" for the first of them.
CURVES = {
    "corr(W_k, W^mm_α)": ("W", "fro"),
    "corr((KQᵀ)_k, W^mm_⋆,α)": ("KQ", "nuc"),
    "control: corr(W_k, W^mm_⋆,α)": ("W", "nuc"),
    "control: corr((KQᵀ)_k, W^mm_α)": ("KQ", "fro"),
}


#: At most this many recorded steps per curve (plus the last): a longer run records more sparsely
#: (`SyntheticConfig.stride`), so the kept iterates W_k take S · MAX_RECORDS · d² floats whatever the steps.
MAX_RECORDS = 1000
#: Seeds are those of torch.Generator.manual_seed: 64-bit, and negative values are refused.
MAX_SEED = 2**63 - 1


def check_seed(seed, name: str = "seed") -> None:
    """Raise ValueError unless `seed` is an integer in [0, 2^63 − 1] (what a torch generator takes)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{name} must be an integer in [0, 2**63 − 1], got {seed!r}")


@dataclass(frozen=True, kw_only=True)
class SyntheticConfig:
    """The paper's synthetic setting (defaults: n = 6, T = 8, d = 10, 100 seeds, 2,000 steps; ~40 s on 2 cores)."""

    n: int = 6  # inputs per problem
    T: int = 8  # tokens per input
    d: int = 10  # token dimension
    seeds: int = 100  # independent problems, solved as one batch
    iterations: int = 2000  # normalised gradient steps
    lr: float = 0.1  # η
    # curves are kept every this many steps, or more sparsely when that would keep more than
    # MAX_RECORDS of them (see `stride`)
    record_every: int = 10
    seed: int = 0  # seed of the one generator that draws all problems and initial parameters
    self_attention: bool = False  # query z_i = x_{i,0} instead of an independent unit query

    def __post_init__(self) -> None:
        for name in ("n", "T", "d", "seeds", "iterations", "record_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if value < (2 if name == "T" else 1):
                raise ValueError(f"{name} must be ≥ {2 if name == 'T' else 1}, got {value}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        check_seed(self.seed)

    @property
    def stride(self) -> int:
        """Steps between recorded iterates: `record_every`, or more when that would record over MAX_RECORDS."""
        return max(self.record_every, -(-self.iterations // MAX_RECORDS))


def synthetic_memory(config: SyntheticConfig) -> float:
    """Bytes `run_synthetic(config)` allocates at its peak, about (float64; a float: sizes may be huge).

    The dominant terms: the problems X (S·n·T·d, and the Gaussian draw they are normalised from), the
    descent's per-step arrays (~16 of S·n·T, and one of S·n·T·d in the gradient), the recorded iterates
    of both parameterisations (2·S·R·d², R recorded steps) and one more of that size while a curve's
    correlations are formed, and the softmax along them (S·R·n·T scores from S·R·n·d queries, twice at
    once). Measured peaks are within 10 % of it (n = 6, T = 8; d = 10 and 40).
    """
    S, n, T, d = (float(v) for v in (config.seeds, config.n, config.T, config.d))
    R = float(config.iterations // config.stride + 2)
    return 8.0 * (3 * S * n * T * d + 16 * S * n * T + 3 * S * R * (d * d + 1) + 2 * S * R * n * (T + d)
                  + 4 * S * d * d + 6 * S * R)


class NoSolvableSeedError(ValueError):
    """No seed of a synthetic run has solvable Att-SVMs for its selections: nothing to report."""


def _unit(t: Tensor) -> Tensor:
    return t / t.norm(dim=-1, keepdim=True)


@dataclass(frozen=True)
class AttentionProblems:
    """Problems of the single-layer model f(X) = y vᵀXᵀsoftmax(X W z): tokens X (..., n, T, d), queries
    z (..., n, d), labels y = ±1 (..., n), heads v (..., d); the leading axis, when present, is the seed."""

    X: Tensor
    z: Tensor
    y: Tensor
    v: Tensor


def synthetic_problems(config: SyntheticConfig, generator: torch.Generator) -> AttentionProblems:
    """Unit-norm Gaussian tokens X (S, n, T, d) and queries z (S, n, d), labels y = ±1 (S, n), unit heads v (S, d)."""
    S, n, T, d = config.seeds, config.n, config.T, config.d
    X = _unit(torch.randn(S, n, T, d, generator=generator, dtype=torch.float64))
    z = _unit(torch.randn(S, n, d, generator=generator, dtype=torch.float64))
    y = torch.where(torch.rand(S, n, generator=generator) > 0.5, 1.0, -1.0).to(torch.float64)
    v = _unit(torch.randn(S, d, generator=generator, dtype=torch.float64))
    return AttentionProblems(X=X, z=X[:, :, 0] if config.self_attention else z, y=y, v=v)


@dataclass(frozen=True)
class SyntheticResult:
    """`run_synthetic`'s measurements; S reported seeds (those whose Att-SVMs were solved), R recorded steps.

    Attributes:
        config: the settings. X, z, y, v: the reported seeds' problems (see `synthetic_problems`).
        paths: "W" / "KQ" -> `DescentPath`. svm: (parameterisation, norm) -> (S, d, d) the Att-SVM
            solution of that parameterisation's final selection.
        curves: label of `CURVES` -> (S, R) correlations. selected_mass: parameterisation -> (S, R)
            softmax mass on the finally selected token, mean over inputs.
        locally_optimal, globally_optimal: parameterisation -> (S,) bool.
        seconds: "descent", "svm" (and their count of solves, "solves").
        seeds: (S,) int64, the reported seeds' indices in the batch of `config.seeds`.
        failures: batch index -> why that seed is not reported (an Att-SVM of its selection could not be
            solved: infeasible, or the solver failed); the other seeds are reported.
    """

    config: SyntheticConfig
    X: Tensor
    z: Tensor
    y: Tensor
    v: Tensor
    paths: dict[str, DescentPath]
    svm: dict[tuple[str, str], Tensor]
    curves: dict[str, Tensor]
    selected_mass: dict[str, Tensor]
    locally_optimal: dict[str, Tensor]
    globally_optimal: dict[str, Tensor]
    seconds: dict[str, float]
    seeds: Tensor
    failures: dict[int, str]

    @property
    def iterations(self) -> Tensor:
        """(R,) int64 the step counts recorded (0 = the initial parameters), as `paths` records them."""
        return self.paths["W"].iterations

    @property
    def reported(self) -> int:
        """Number of seeds reported (`config.seeds` less the failures)."""
        return len(self.seeds)

    def at(self, label: str, step: int) -> Tensor:
        """(S,) the curve `label` at the recorded step closest to `step`."""
        k = int((self.iterations - step).abs().argmin())
        return self.curves[label][:, k]

    def table(self, steps: tuple[int, ...] = (1000, 2000)) -> str:
        """Markdown: mean ± std (min) over seeds of every curve at `steps`, and the selections.

        With one reported seed there is no spread: "—" stands for the std.
        """
        steps = tuple(s for s in steps if s <= self.config.iterations) or (self.config.iterations,)
        rows = []
        for label in CURVES:
            rows.append((label, *(f"{c.mean():.4f} ± {_spread(c, '.4f')} ({c.min():.4f})"
                                  for c in (self.at(label, s) for s in steps))))
        for p in ("W", "KQ"):
            mass = self.selected_mass[p]
            rows.append((f"softmax mass on the selected token, {p}",
                         *(f"{m.mean():.6f} ± {_spread(m, '.1e')} ({m.min():.6f})" for m in
                           (mass[:, int((self.iterations - s).abs().argmin())] for s in steps))))
        lines = [*markdown_table(("quantity", *(f"step {s}: mean ± std (min)" for s in steps)), rows), ""]
        S = self.reported
        for p in ("W", "KQ"):
            lines.append(f"- {p}: selection locally optimal in {int(self.locally_optimal[p].sum())}/{S} seeds, "
                         f"globally optimal in {int(self.globally_optimal[p].sum())}/{S}")
        same = (self.paths["W"].selection == self.paths["KQ"].selection).all(-1)
        lines.append(f"- W and (K, Q) select the same tokens in {int(same.sum())}/{S} seeds")
        if self.failures:
            lines.append(f"- {len(self.failures)} of {self.config.seeds} seeds not reported (an Att-SVM of their "
                         "selection could not be solved):")
            lines += [f"  - {line}" for line in self.failure_lines()]
        return "\n".join(lines)

    def failure_lines(self) -> list[str]:
        """One line per distinct reason of `failures`: "seeds 0, 2, 5: <why>"."""
        by_reason: dict[str, list[int]] = {}
        for seed, why in sorted(self.failures.items()):
            by_reason.setdefault(why, []).append(seed)
        return [f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}: {why}"
                for why, seeds in by_reason.items()]


def _spread(t: Tensor, spec: str) -> str:
    """The std of `t` formatted with `spec`, or "—" for fewer than two values (no spread, no warning)."""
    return format(float(t.std()), spec) if t.numel() > 1 else "—"


@dataclass(frozen=True)
class SeedSVMs:
    """The Att-SVMs of one seed's selections (`solve_seed`): W[(parameterisation, norm)] (d, d) and support[...]
    (n, T) bool, the number of convex programs solved, and why the seed failed (None: every SVM solved)."""

    W: dict[tuple[str, str], Tensor]
    support: dict[tuple[str, str], Tensor]
    solves: int
    failure: str | None = None


def solve_seed(X: Tensor, z: Tensor, selections: dict[str, Tensor]) -> SeedSVMs:
    """Both Att-SVMs (Frobenius, nuclear) of each parameterisation's selection of one seed: X (n, T, d), z (n, d),
    selections: parameterisation -> (n,) the selected token of each input. A selection shared by two
    parameterisations is solved once; the first SVM that cannot be solved (infeasible, a failed solve) ends the
    seed, its reason in `failure`. One convex program at a time: Clarabel has no batch axis."""
    W: dict[tuple[str, str], Tensor] = {}
    support: dict[tuple[str, str], Tensor] = {}
    solved_by: dict[tuple[tuple[int, ...], str], str] = {}  # (selection, norm) -> parameterisation
    for p, sel in selections.items():
        for norm in ("fro", "nuc"):
            key = (tuple(sel.tolist()), norm)
            if key in solved_by:
                W[(p, norm)], support[(p, norm)] = W[(solved_by[key], norm)], support[(solved_by[key], norm)]
                continue
            try:
                solution = att_svm(X, z, sel, norm=norm)
            except ValueError as e:
                failure = f"{p} selection, {'Frobenius' if norm == 'fro' else 'nuclear'} norm: {e}"
                return SeedSVMs(W, support, len(solved_by), failure)
            W[(p, norm)], support[(p, norm)] = solution.W, solution.support
            solved_by[key] = p
    return SeedSVMs(W, support, len(solved_by))


#: ``svms(config, selections) -> one SeedSVMs per seed, in order``: how `run_synthetic` may have its Att-SVMs solved
#: elsewhere (`hardmax svm --scheduler` runs `solve_seed` as sweep cells); None: `solve_seed` here, seed by seed.
SeedSolver = Callable[[SyntheticConfig, dict[str, Tensor]], Iterable[SeedSVMs]]


def _solve_all(X: Tensor, z: Tensor, selections: dict[str, Tensor], config: SyntheticConfig,
               svms: SeedSolver | None = None
               ) -> tuple[dict[tuple[str, str], Tensor], dict[tuple[str, str], Tensor], int, dict[int, str]]:
    """Both SVMs of every parameterisation's selection of every seed (`solve_seed`, or `svms`).

    Returns W: (parameterisation, norm) -> (S, d, d), support: the same keys -> (S, n, T) bool (the
    solutions' support tokens), the number of solves, and failures: seed -> why, for a seed whose solve
    raised (an infeasible selection, a failed solve); that seed is not solved further (its rows are NaN).
    The solutions are written into these tensors as each seed's come, not kept: thousands of small objects kept
    between Clarabel's large temporary buffers made glibc's heap grow by ~2.5 MB per nuclear-norm solve at d = 40.
    """
    S, n, T, d = X.shape
    keys = [(p, norm) for p in selections for norm in ("fro", "nuc")]
    W = {key: torch.full((S, d, d), float("nan"), dtype=torch.float64) for key in keys}
    support = {key: torch.zeros(S, n, T, dtype=torch.bool) for key in keys}
    failures: dict[int, str] = {}
    solves = 0
    seeds = svms(config, selections) if svms is not None else (
        solve_seed(X[s], z[s], {p: sel[s] for p, sel in selections.items()}) for s in range(S))
    for s, one in enumerate(seeds):
        solves += one.solves
        if one.failure is not None:
            failures[s] = one.failure
            continue
        for key in keys:
            W[key][s], support[key][s] = one.W[key], one.support[key]
    return W, support, solves, failures


def _config_text(config: SyntheticConfig) -> str:
    return (f"seeds={config.seeds}, n={config.n}, T={config.T}, d={config.d}, iterations={config.iterations}, "
            f"record_every={config.record_every}")


def run_synthetic(config: SyntheticConfig = SyntheticConfig(), *, svms: SeedSolver | None = None) -> SyntheticResult:
    """The paper's synthetic experiment, all seeds as one batch per parameterisation (see module docstring).

    Seeds whose Att-SVMs cannot be solved are left out of the result and listed in `failures`. svms: who solves
    the Att-SVMs of each seed's selections (`SeedSolver`; None: `solve_seed` in this process, one seed after the other).

    Raises:
        MemoryBudgetError: the run would need more memory than is available (`synthetic_memory`).
        NoSolvableSeedError: no seed could be reported.
    """
    require_memory(synthetic_memory(config), f"SyntheticConfig({_config_text(config)}) (problems, "
                   f"{len(recorded_steps(config.iterations, config.stride))} recorded iterates × 2 parameterisations)")
    generator = torch.Generator().manual_seed(config.seed)
    problems = synthetic_problems(config, generator)
    X, z, y, v = problems.X, problems.z, problems.y, problems.v
    start = time.perf_counter()
    paths = {}
    for p in ("W", "KQ"):
        init = initial_parameters(p, config.seeds, config.d, generator=generator)
        descent = DescentConfig(parameterisation=p, iterations=config.iterations, lr=config.lr,
                                record_every=config.stride)
        paths[p] = descend(X, z, y, v, init, descent)
    t_descent = time.perf_counter() - start
    svm, support, solves, failures = _solve_all(X, z, {p: path.selection for p, path in paths.items()}, config, svms)
    t_svm = time.perf_counter() - start - t_descent
    keep = [s for s in range(config.seeds) if s not in failures]
    if not keep:
        first = min(failures)
        raise NoSolvableSeedError(f"no seed of the synthetic run could be solved: the Att-SVMs of all "
                                  f"{config.seeds} seeds' selections failed (seed {first}: {failures[first]})")
    if failures:
        index = torch.tensor(keep)
        X, z, y, v = X[index], z[index], y[index], v[index]
        paths = {p: dataclasses.replace(path, W=path.W[index], loss=path.loss[index], attention=path.attention[index],
                                        selection=path.selection[index]) for p, path in paths.items()}
        svm = {key: W[index] for key, W in svm.items()}
        support = {key: sup[index] for key, sup in support.items()}
    curves = {label: paths[p].correlation(svm[(p, norm)]) for label, (p, norm) in CURVES.items()}
    mass = {}
    for p, path in paths.items():
        att = softmax_attention(X.unsqueeze(1), z.unsqueeze(1), path.W)  # (S, R, n, T)
        idx = path.selection[:, None, :, None].expand(-1, att.shape[1], -1, 1)
        mass[p] = att.gather(-1, idx).squeeze(-1).mean(-1)
        del att
    gamma = y[..., None] * (X @ v[:, None, :, None]).squeeze(-1)  # (S, n, T): token scores γ = y vᵀx
    # Locally optimal (Definition 2): the selected token beats its support tokens, those of the SVM
    # whose limit that parameterisation approaches (Frobenius for W, nuclear for (K, Q)); the test of
    # `beats_support_tokens`, for all seeds at once.
    local = {}
    for p, path in paths.items():
        chosen = gamma.gather(-1, path.selection.unsqueeze(-1))
        local[p] = (~support[(p, "fro" if p == "W" else "nuc")] | (gamma < chosen)).all(-1).all(-1)
    globally = {p: (paths[p].selection == gamma.argmax(-1)).all(-1) for p in paths}
    return SyntheticResult(config=config, X=X, z=z, y=y, v=v, paths=paths, svm=svm, curves=curves,
                           selected_mass=mass, locally_optimal=local, globally_optimal=globally,
                           seconds={"descent": t_descent, "svm": t_svm, "solves": float(solves)},
                           seeds=torch.tensor(keep, dtype=torch.int64), failures=failures)


# --------------------------------------------------------------------------------------------
# The 2-D pictures (n = 2, d = 2).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlaneResult:
    """Two inputs of T tokens in the plane, descended from W = 0 (W) and from Q = 0 (K, Q); every step kept."""

    X: Tensor  # (2, T, 2)
    z: Tensor  # (2, 2) unit queries
    paths: dict[str, DescentPath]  # "W", "KQ"; W (1, iterations + 1, 2, 2)
    svm: dict[str, AttSVM]  # "fro", "nuc": the SVMs of the W path's final selection


def plane_problem(T: int, seed: int = 0) -> AttentionProblems:
    """X (2, T, 2): token 0 of input i at (1, ±0.6), the rest scattered around (−0.8, 0); y = 1, v = (1, 0)."""
    if T < 2:
        raise ValueError(f"T must be ≥ 2, got {T}")
    check_seed(seed)
    g = torch.Generator().manual_seed(seed)
    X = 0.35 * torch.randn(2, T, 2, generator=g, dtype=torch.float64) + torch.tensor([-0.8, 0.0], dtype=torch.float64)
    X[:, 0] = torch.tensor([[1.0, 0.6], [1.0, -0.6]], dtype=torch.float64)
    z = _unit(torch.randn(2, 2, generator=g, dtype=torch.float64))
    return AttentionProblems(X=X, z=z, y=torch.ones(2, dtype=torch.float64),
                             v=torch.tensor([1.0, 0.0], dtype=torch.float64))


def run_plane(T: int, *, iterations: int = 1000, seed: int = 0) -> PlaneResult:
    """Descend on one plane problem (`plane_problem`) with both parameterisations and solve its SVMs."""
    problem = plane_problem(T, seed)
    X, z, y, v = problem.X, problem.z, problem.y, problem.v
    g = torch.Generator().manual_seed(seed + 1)
    inits = {"W": torch.zeros(1, 2, 2, dtype=torch.float64),
             "KQ": (0.1 * torch.randn(1, 2, 2, generator=g, dtype=torch.float64),
                    torch.zeros(1, 2, 2, dtype=torch.float64))}
    paths = {p: descend(X[None], z[None], y[None], v[None], init,
                        DescentConfig(parameterisation=p, iterations=iterations, record_every=1))
             for p, init in inits.items()}
    selection = paths["W"].selection[0]
    svm = {norm: att_svm(X, z, selection, norm=norm) for norm in ("fro", "nuc")}
    return PlaneResult(X=X, z=z, paths=paths, svm=svm)


# --------------------------------------------------------------------------------------------
# Joined to hardmax.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinResult:
    """Softmax with W_k against hardmax selection with the score of W^mm (the W parameterisation).

    Attributes:
        steps: (R,) recorded steps. norm: (R,) median ‖W_k‖_F over seeds.
        off_mass: (R,) largest softmax mass off the hardmax-selected token, 1 − p_{i,α_i}(W_k), over all inputs.
        agree: (R,) share of inputs whose softmax argmax under W_k is the hardmax selection α_i.
        radii: (m,) R of the scaled SVM W = R·W^mm. scaled_off_mass: (m,) 1 − p_{i,α_i}(R·W^mm), largest.
        bound: (m,) (T−1)e^{−R} / (1 + (T−1)e^{−R}), its closed-form bound (every margin of W^mm is ≥ 1).
        hardmax_asymmetric: share of inputs whose hardmax attention set under ⟨W^mm z_i, x_t⟩ is {α_i}.
        sym_positive_definite: share of seeds with sym(W^mm) = (W^mm + W^mmᵀ)/2 positive definite.
        hardmax_sym: among those seeds (self-attention only), share of inputs whose query token x_{i,0}
            has the attention set {α_i} in the hardmax dynamics with A = sym(W^mm); NaN if none.
    """

    steps: Tensor
    norm: Tensor
    off_mass: Tensor
    agree: Tensor
    radii: Tensor
    scaled_off_mass: Tensor
    bound: Tensor
    hardmax_asymmetric: float
    sym_positive_definite: float
    hardmax_sym: float


def join_hardmax(result: SyntheticResult, radii: tuple[float, ...] = (1, 2, 5, 10, 20, 40)) -> JoinResult:
    """Measure how softmax attention along the descent becomes hardmax attention with the score of W^mm."""
    X, z, path = result.X, result.z, result.paths["W"]
    W_mm = result.svm[("W", "fro")]  # (S, d, d)
    sel = path.selection  # (S, n): hardmax selection of W^mm (margins ≥ 1 put it first)
    att = softmax_attention(X.unsqueeze(1), z.unsqueeze(1), path.W)  # (S, R, n, T)
    p_sel = att.gather(-1, sel[:, None, :, None].expand(-1, att.shape[1], -1, 1)).squeeze(-1)
    agree = (att.argmax(-1) == sel[:, None]).float().mean((0, 2))
    R = torch.tensor(radii, dtype=torch.float64)
    scaled = softmax_attention(X.unsqueeze(1), z.unsqueeze(1), R[None, :, None, None] * W_mm.unsqueeze(1))
    scaled_off = 1 - scaled.gather(-1, sel[:, None, :, None].expand(-1, len(radii), -1, 1)).squeeze(-1)
    T = X.shape[2]
    bound = (T - 1) * torch.exp(-R) / (1 + (T - 1) * torch.exp(-R))
    scores = (X @ (W_mm.unsqueeze(1) @ z.unsqueeze(-1))).squeeze(-1)  # (S, n, T) ⟨W^mm z_i, x_t⟩
    top = scores.amax(-1, keepdim=True)
    asym = ((scores == top).sum(-1) == 1) & (scores.argmax(-1) == sel)
    sym = (W_mm + W_mm.transpose(-1, -2)) / 2
    pd = torch.linalg.eigvalsh(sym)[:, 0] > 0
    hits = []
    if result.config.self_attention:
        for s in pd.nonzero().squeeze(-1).tolist():  # the dynamics' A must be SPD: only these seeds
            sets = attention_sets(X[s], A=sym[s])[:, 0]  # (n, T): attention set of token 0 in each input
            hits.append((sets.sum(-1) == 1) & sets.gather(1, sel[s][:, None]).squeeze(-1))
    return JoinResult(steps=path.iterations, norm=path.W.norm(dim=(-2, -1)).median(0).values,
                      off_mass=(1 - p_sel).amax((0, 2)), agree=agree, radii=R,
                      scaled_off_mass=scaled_off.amax((0, 2)), bound=bound,
                      hardmax_asymmetric=float(asym.float().mean()), sym_positive_definite=float(pd.float().mean()),
                      hardmax_sym=float(torch.cat(hits).float().mean()) if hits else float("nan"))


# --------------------------------------------------------------------------------------------
# IMDb: the trained classifier's tokens as inputs.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImdbJoin:
    """The single-layer softmax model trained on a hardmax classifier's review tokens (see `imdb_join`).

    Attributes:
        reviews, d, iterations: sizes. tokens_mean, tokens_max: distinct words per review.
        feasible_single: share of reviews whose own Att-SVM (n = 1) of the GD selection is feasible.
        feasible_by_n: n -> whether the joint Att-SVM of the first n reviews (GD selection) is feasible.
        optimal_feasible_by_n: the same for the globally optimal selection (argmax y vᵀx).
        corr: corr(W_k, W^mm) at the end on the largest feasible prefix of reviews, GD rerun on it; None if
            no prefix is feasible. corr_reviews: that prefix's length n (None likewise).
        beats_support: on that prefix, share of reviews whose selected word scores above all its support
            words (γ = y vᵀx), the per-review test of local optimality (all of them: locally optimal).
        selected_leader, optimal_leader: share of reviews whose GD-selected / optimal word is a leader of
            the classifier at layer 0 and at the last layer K (tuple of two). chance: mean share of
            leaders among a review's distinct words at layer 0 and at K (the rate of a random word).
        agree_optimal: share of reviews whose GD-selected word is the globally optimal one.
        top_words: (word, count) of the most often selected words. examples: (label, selected word,
            optimal word, is leader at K) for the first reviews. seconds: wall time.
    """

    reviews: int
    d: int
    iterations: int
    tokens_mean: float
    tokens_max: int
    feasible_single: float
    feasible_by_n: dict[int, bool]
    optimal_feasible_by_n: dict[int, bool]
    corr: float | None
    corr_reviews: int | None
    beats_support: float | None
    selected_leader: tuple[float, float]
    optimal_leader: tuple[float, float]
    chance: tuple[float, float]
    agree_optimal: float
    top_words: list[tuple[str, int]]
    examples: list[tuple[str, str, str, bool]] = field(default_factory=list)
    seconds: float = 0.0


def _feasible(X: Tensor, z: Tensor, sel: Tensor, mask: Tensor) -> AttSVM | None:
    try:
        return att_svm(X, z, sel, norm="fro", mask=mask)
    except InfeasibleError:
        return None


def imdb_join(run, split, *, reviews: int = 200, iterations: int = 1000, seed: int = 0) -> ImdbJoin:
    """Train f(X) = vᵀXᵀsoftmax(XWz) on a classifier's layer-0 tokens and compare with Att-SVM and leaders.

    X_i: the distinct words of review i after the embedding (padded to the longest review with a mask:
    padding is neither attended to nor constrained, so each review keeps its own T_i), z_i: the review's
    mean token (repeated words counted), v: the decoder's weight, y_i = ±1 the review's label.

    Args:
        run: a loaded run (`hardmax.training.load_run`), with `.model` and `.vocab`. split: a data split
            with ids (N, L), mask (N, L), labels (N,). reviews: how many (a seeded random subset).
        iterations: descent steps (η = 0.1, normalised). seed: the subset.

    Raises:
        ValueError: a model that is not a `HardmaxClassifier` (a CRATE run: the join reads the paper's
            shared hardmax layer's tokens and leaders), reviews < 1, a seed outside [0, 2^63 − 1].
    """
    from hardmax.dynamics import Hardmax
    from hardmax.explain import leader_masks
    from hardmax.models import HardmaxClassifier

    model = run.model
    if not isinstance(model, HardmaxClassifier):
        raise ValueError(f"the IMDb join needs the paper's hardmax layer (a HardmaxClassifier: a run trained without "
                         f"--layer crate), got a {type(model).__name__}")
    if not isinstance(reviews, int) or isinstance(reviews, bool) or reviews < 1:
        raise ValueError(f"reviews must be an integer ≥ 1, got {reviews!r}")
    check_seed(seed)
    start = time.perf_counter()
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(split.labels), generator=g)[:reviews]
    with torch.no_grad():
        trace = model.trace(split.ids[pick], split.mask[pick], Hardmax())
    present = trace.multiplicity > 0
    X = trace.tokens[0].to(torch.float64)  # (N, m, d)
    w = trace.multiplicity.to(torch.float64)
    z = (w.unsqueeze(-1) * X).sum(1) / w.sum(1, keepdim=True)
    v = model.decoder.weight.detach()[0].to(torch.float64)
    y = split.labels[pick].to(torch.float64) * 2 - 1
    N, m, d = X.shape
    leaders = leader_masks(trace, layers=(0, trace.tokens.shape[0] - 1))  # (2, N, m)
    path = descend(X[None], z[None], y[None], v[None], torch.zeros(1, d, d, dtype=torch.float64),
                   DescentConfig(iterations=iterations, record_every=iterations), mask=present[None])
    sel = path.selection[0]
    gamma = (y[:, None] * (X @ v)).masked_fill(~present, float("-inf"))
    best = gamma.argmax(-1)
    single = [_feasible(X[i:i + 1], z[i:i + 1], sel[i:i + 1], present[i:i + 1]) is not None for i in range(N)]
    sizes = sorted({k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256) if k < N} | {N})
    feasible = {k: _feasible(X[:k], z[:k], sel[:k], present[:k]) is not None for k in sizes}
    optimal = {k: _feasible(X[:k], z[:k], best[:k], present[:k]) is not None for k in sizes}
    corr = corr_reviews = beats_support = None
    largest = max((k for k, ok in feasible.items() if ok), default=None)
    if largest is not None:
        # The first `largest` reviews alone (the same descent when largest = N, deterministic).
        sub = path if largest == N else descend(
            X[None, :largest], z[None, :largest], y[None, :largest], v[None], torch.zeros(1, d, d, dtype=torch.float64),
            DescentConfig(iterations=iterations, record_every=iterations), mask=present[None, :largest])
        svm = _feasible(X[:largest], z[:largest], sub.selection[0], present[:largest])
        if svm is not None:
            corr, corr_reviews = float(sub.correlation(svm.W[None])[0, -1]), largest
            beats_support = float(beats_support_tokens(svm, gamma[:largest]).float().mean())
    rows = torch.arange(N)
    sel_lead = leaders[:, rows, sel].float().mean(-1)
    best_lead = leaders[:, rows, best].float().mean(-1)
    chance = (leaders.float().sum(-1) / present.sum(-1)).mean(-1)
    words = run.vocab.words
    chosen = [words[int(trace.ids[i, sel[i]])] for i in range(N)]
    counts: dict[str, int] = {}
    for word in chosen:
        counts[word] = counts.get(word, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:15]
    examples = [("positive" if y[i] > 0 else "negative", chosen[i], words[int(trace.ids[i, best[i]])],
                 bool(leaders[1, i, sel[i]])) for i in range(min(10, N))]
    T_i = present.sum(-1).float()
    return ImdbJoin(reviews=N, d=d, iterations=iterations, tokens_mean=float(T_i.mean()), tokens_max=int(T_i.max()),
                    feasible_single=float(torch.tensor(single).float().mean()), feasible_by_n=feasible,
                    optimal_feasible_by_n=optimal, corr=corr, corr_reviews=corr_reviews, beats_support=beats_support,
                    selected_leader=tuple(sel_lead.tolist()),
                    optimal_leader=tuple(best_lead.tolist()), chance=tuple(chance.tolist()),
                    agree_optimal=float((sel == best).float().mean()), top_words=top,
                    examples=examples, seconds=time.perf_counter() - start)


# --------------------------------------------------------------------------------------------
# Report.
# --------------------------------------------------------------------------------------------


def render_report(synthetic: SyntheticResult, join: JoinResult | None = None, imdb: ImdbJoin | None = None, *,
                  command: str = "hardmax svm", join_skipped: str | None = None) -> str:
    """Markdown report of the experiments (tables only; figures are referenced by the caller).

    `join_skipped`: why the join to hardmax was not run (stated in its section), when it was not.
    """
    c = synthetic.config
    s = synthetic.seconds
    out = [f"# Att-SVM: attention as a max-margin token selector\n\nProduced by `{command}`.\n",
           f"## Synthetic experiment (n = {c.n}, T = {c.T}, d = {c.d}, {c.seeds} seeds"
           + (f" of which {synthetic.reported} reported" if synthetic.failures else "") + f", {c.iterations} steps, "
           f"η = {c.lr:g}, {'self' if c.self_attention else 'cross'}-attention)\n",
           f"Descent (both parameterisations, all seeds batched): {s['descent']:.1f} s; "
           f"{int(s['solves'])} Att-SVM solves: {s['svm']:.1f} s.\n", synthetic.table(), ""]
    if join is not None:
        out += ["## Joined to hardmax\n",
                "Softmax attention with the descent's W_k against hardmax attention with the score ⟨W^mm z_i, x_t⟩ "
                "(which selects α_i in every input by a margin ≥ 1):\n",
                *markdown_table(("step", "median ‖W_k‖", "largest 1 − p_{α}(W_k)", "inputs whose softmax argmax is α"),
                                ((int(join.steps[k]), f"{join.norm[k]:.1f}", f"{join.off_mass[k]:.2e}",
                                  f"{join.agree[k]:.4f}") for k in range(0, len(join.steps),
                                                                         max(1, len(join.steps) // 8))))]
        out += ["", "Scaled SVM R·W^mm: softmax mass off the selected token against the bound "
                "(T−1)e^{−R}/(1+(T−1)e^{−R}):\n",
                *markdown_table(("R", "largest measured", "bound"),
                                ((f"{r:g}", f"{m:.3e}", f"{b:.3e}") for r, m, b in
                                 zip(join.radii.tolist(), join.scaled_off_mass.tolist(), join.bound.tolist(),
                                     strict=True)))]
        out += ["", f"- hardmax attention with the asymmetric score ⟨W^mm z_i, x_t⟩ selects α_i in "
                f"{100 * join.hardmax_asymmetric:.1f} % of the inputs",
                f"- sym(W^mm) is positive definite in {100 * join.sym_positive_definite:.1f} % of the seeds; there, "
                "the "
                f"hardmax dynamics with A = sym(W^mm) gives the query token the attention set {{α_i}} in "
                f"{100 * join.hardmax_sym:.1f} % of the inputs" if math.isfinite(join.hardmax_sym) else
                f"- sym(W^mm) is positive definite in {100 * join.sym_positive_definite:.1f} % of the seeds, so the "
                "hardmax dynamics (which need a symmetric positive definite A) ran with A = sym(W^mm) on none; "
                "the asymmetric score above is the hardmax attention that W^mm defines", ""]
    if join is None and join_skipped:
        out += ["## Joined to hardmax\n", f"Skipped: {join_skipped}", ""]
    if imdb is not None:
        out += [f"## IMDb: the d = {imdb.d} classifier's tokens\n",
                f"{imdb.reviews} test reviews, {imdb.tokens_mean:.1f} distinct words on average (at most "
                f"{imdb.tokens_max}), one W trained jointly for {imdb.iterations} steps ({imdb.seconds:.1f} s).\n",
                f"- each review alone (n = 1): the GD selection is separable in {100 * imdb.feasible_single:.1f} % "
                "of reviews",
                "- jointly, first n reviews (GD selection / globally optimal selection): " + ", ".join(
                    f"n = {k}: {'feasible' if imdb.feasible_by_n[k] else 'infeasible'} / "
                    f"{'feasible' if imdb.optimal_feasible_by_n[k] else 'infeasible'}" for k in imdb.feasible_by_n),
                ("- corr(W_k, W^mm) after GD on the largest feasible group (n = "
                 f"{imdb.corr_reviews}): {imdb.corr:.4f}; its selected word beats all its support words (local "
                 f"optimality) in {100 * imdb.beats_support:.1f} % of those reviews" if imdb.corr is not None else
                 "- no group of reviews is jointly separable"),
                f"- the selected word is a hardmax leader of the classifier in {100 * imdb.selected_leader[0]:.1f} % "
                f"(layer 0) / {100 * imdb.selected_leader[1]:.1f} % (layer K) of reviews; the globally optimal word in "
                f"{100 * imdb.optimal_leader[0]:.1f} % / {100 * imdb.optimal_leader[1]:.1f} %; a random word of the "
                "review "
                f"is a leader with probability {100 * imdb.chance[0]:.1f} % / {100 * imdb.chance[1]:.1f} %",
                f"- the GD-selected word is the globally optimal word (largest y vᵀx) in "
                f"{100 * imdb.agree_optimal:.1f} % of reviews",
                "", *markdown_table(("selected word", "reviews"), imdb.top_words), "",
                *markdown_table(("review", "selected word", "globally optimal word", "leader at K"),
                                ((lab, a, b, "yes" if lead else "no") for lab, a, b, lead in imdb.examples)), ""]
    return "\n".join(out)
