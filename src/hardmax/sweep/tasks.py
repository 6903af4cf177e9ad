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
    """A function of one cell's parameters. parameters: name -> (type, default), default `REQUIRED` when none; warm:
    a small cell that loads what the cells need (imports, compiled kernels), run once by each worker of an
    `EmbeddedCluster` started for the task (None: the first batch loads them)."""

    name: str
    function: Callable[..., dict]
    parameters: dict
    warm: dict | None = None

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


def register(name: str, *, warm: dict | None = None, **parameters) -> Callable:
    """Register `function` as task `name` with `parameters` (name=(type, default or REQUIRED)) and, optionally, the
    parameters of its warm-up cell (`Task.warm`; defaults filled in); a decorator."""
    def wrap(function: Callable[..., dict]) -> Callable[..., dict]:
        task = Task(name, function, parameters)
        TASKS[name] = task if warm is None else Task(name, function, parameters, task.check(warm))
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


@register("phase_cell", warm={"beta": 1.0, "starts": 64, "n": 2, "steps": 1, "seed": 0, "dtype": "float32"},
          beta=(float, REQUIRED), starts=(int, 100), n=(int, 32), d=(int, 3), steps=(int, 300),
          dt=(float, 0.1), tol=(float, 1e-2), seed=(int, REQUIRED), dtype=(str, "float64"), index=(int, 0),
          of=(int, 1))
def phase_cell(beta: float, starts: int, n: int, d: int, steps: int, dt: float, tol: float, seed: int,
               dtype: str, index: int, of: int) -> dict:
    """One β of the phase diagram of `hardmax particles` (`experiments.particles.phase_diagram`): the fraction of
    `starts` uniform starts on S^{d−1} in one cluster at every tenth step, and at the end. index, of: this β is the
    index-th of a diagram of `of` β whose starts come from one draw of `seed` (`phase_diagram(..., block=...)`:
    `hardmax particles --scheduler` gives them, so that its tables are those of the one-batch run); (0, 1): its own
    starts."""
    import torch

    from hardmax.experiments.particles import phase_diagram

    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    result = phase_diagram([beta], starts=starts, n=n, d=d, steps=steps, dt=dt, seed=seed, tol=tol,
                           dtype=getattr(torch, dtype), block=(index, of))
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


@register("solve", n=(int, REQUIRED), d=(int, 3), beta=(float, 1.0), steps=(int, 200), dt=(float, 0.1),
          solver=(str, "rk4"), starts=(int, 1), tol=(float, 1e-2), seed=(int, REQUIRED))
def solve_cell(n: int, d: int, beta: float, steps: int, dt: float, solver: str, starts: int, tol: float,
               seed: int) -> dict:
    """Self-attention on the sphere, ẋ_i = P_x(Σ_j softmax_j(β⟨x_i, x_j⟩) x_j) (`hardmax.dynamics.solve` with
    `Field(Softmax(β), manifold=Sphere())`), from `starts` sets of n uniform tokens on S^{d−1}; what
    `hardmax.theory.check_flow` says of it, the clusters at the end and the energy E_β at the start and end."""
    import torch

    from hardmax.dynamics import RK4, Euler, Field, Renormalised, Save, Softmax, Sphere, solve
    from hardmax.theory import check_flow, cluster_counts, energy

    solvers = {"rk4": RK4, "euler": Euler, "renormalised": Renormalised}
    if solver not in solvers:
        raise ValueError(f"solver must be one of {', '.join(solvers)}, got {solver!r}")
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(starts, n, d, dtype=torch.float64, generator=g), dim=-1)
    run = solve(Field(Softmax(beta), manifold=Sphere()), solvers[solver](dt), x, steps=steps,
                save=Save(every=max(1, steps // 20)))
    report = check_flow(run, tol=tol)
    clusters = cluster_counts(run.tokens[-1], tol).double()
    E = energy(run.tokens[[0, -1]], beta)  # (2, starts)
    return {"passed": report.passed, "verdict": report.verdict, "clusters_final": float(clusters.mean()),
            "single_final": float((clusters == 1).double().mean()), "energy_start": float(E[0].mean()),
            "energy_final": float(E[-1].mean()), "t_final": float(run.times[-1])}


@register("long_context", n=(int, REQUIRED), gamma=(float, REQUIRED), rho=(float, 0.5), d=(int, 64),
          alpha=(float, 0.0), time=(float, 0.0), dt=(float, 0.25), seed=(int, REQUIRED))
def long_context_row(n: int, gamma: float, rho: float, d: int, alpha: float, time: float, dt: float,
                     seed: int) -> dict:
    """One (n, γ, seed) of the long-context model at β = γ log n (`hardmax.experiments.long_context.
    long_context_cell`, Chen, Lin, Polyanskiy, Rigollet 2026): n almost-simplex tokens of pairwise cosine ρ in R^d
    through one attention layer of residual α (time 0) or the sphere flow to `time` (RK4, step dt); the row: the
    angle ratio λ, the start's mean self-attention, the cosines before and after, the engine. A sweep over n and γ
    locates the critical γ_c(n) (`long_context.transition`), beside the paper's 1/(1 − ρ)."""
    from hardmax.experiments.long_context import long_context_cell

    cell = long_context_cell(n=n, gamma=gamma, rho=rho, d=d, alpha=alpha, time=time, dt=dt, seed=seed)
    return {"beta": cell.beta, "angle_ratio": cell.angle_ratio, "self_attention": cell.self_attention,
            "cosine_in": cell.cosine_in, "cosine_out": cell.cosine_out, "engine": cell.engine}


@register("rate", n=(int, REQUIRED), d=(int, 2), layers=(int, 30), alpha=(float, 0.5), eps=(float, 0.5),
          seed=(int, REQUIRED))
def rate_cell(n: int, d: int, layers: int, alpha: float, eps: float, seed: int) -> dict:
    """The coding rate R(Z, ε) = ½ logdet(I + d/(n ε²) ZᵀZ) (`hardmax.measures.coding_rate`) of n standard normal
    tokens in R^d before and after the paper's hardmax layers (`hardmax.simulate`): how much the dynamics compress."""
    import numpy as np

    from hardmax.dynamics import simulate
    from hardmax.measures import coding_rate

    tokens = np.random.default_rng(seed).standard_normal((n, d))
    run = simulate(tokens, alpha=alpha, layers=layers)
    rates = coding_rate(run.tokens[[0, -1]], eps)  # (2,)
    return {"rate_start": float(rates[0]), "rate_final": float(rates[1]),
            "rate_ratio": float(rates[1] / rates[0]) if float(rates[0]) > 0 else float("nan")}


# The curves of `hardmax.experiments.svm.CURVES` under column names: (parameterisation, norm) -> column.
_SVM_COLUMNS = {("W", "fro"): "corr_W_fro", ("KQ", "nuc"): "corr_KQ_nuc", ("W", "nuc"): "control_W_nuc",
                ("KQ", "fro"): "control_KQ_fro"}


@register("att_svm_seed", n=(int, 6), T=(int, 8), d=(int, 10), iterations=(int, 2000), lr=(float, 0.1),
          self_attention=(bool, False), seed=(int, REQUIRED))
def att_svm_seed(n: int, T: int, d: int, iterations: int, lr: float, self_attention: bool, seed: int) -> dict:
    """One problem of the Att-SVM synthetic experiment (`hardmax.experiments.svm.run_synthetic` with one seed):
    normalised gradient descent on W and on (K, Q), the Att-SVMs of the final selections; at the last step each
    curve's correlation with its SVM, the softmax mass on the selected token, and whether the selections are
    locally / globally optimal. A seed whose Att-SVM cannot be solved is a failed cell (its reason recorded)."""
    from hardmax.experiments.svm import CURVES, SyntheticConfig, run_synthetic

    result = run_synthetic(SyntheticConfig(n=n, T=T, d=d, seeds=1, iterations=iterations, lr=lr, seed=seed,
                                           self_attention=self_attention))
    row = {_SVM_COLUMNS[pair]: float(result.curves[label][0, -1]) for label, pair in CURVES.items()}
    for p in ("W", "KQ"):
        row[f"mass_{p}"] = float(result.selected_mass[p][0, -1])
        row[f"locally_optimal_{p}"] = bool(result.locally_optimal[p][0])
        row[f"globally_optimal_{p}"] = bool(result.globally_optimal[p][0])
    row["same_selection"] = bool((result.paths["W"].selection == result.paths["KQ"].selection).all())
    return row


@register("train_candidate", config=(str, REQUIRED), d=(int, REQUIRED), stopwords=(str, REQUIRED),
          lr=(float, REQUIRED))
def train_candidate(config: str, d: int, stopwords: str, lr: float) -> dict:
    """One candidate run of `hardmax reproduce` (a training run): the classifier of dimension d trained with this
    stop-word list and learning rate (`hardmax.experiments.pipeline.train_or_load`, in the run directory
    `candidate_dir` names: a finished run is reused, an interrupted one resumed). config: the settings
    (`ReproduceConfig.to_json`). The row: its best validation accuracy (exact hardmax), best epoch, epochs run."""
    import dataclasses

    from hardmax.data import load_imdb
    from hardmax.experiments.pipeline import train_or_load
    from hardmax.experiments.reproduce import ReproduceConfig, candidate_dir

    settings = ReproduceConfig.from_json(config)
    one = dataclasses.replace(settings, progress=False, train=dataclasses.replace(settings.train, lr=lr))
    data = load_imdb(dataclasses.replace(settings.data, stopwords=stopwords), progress=False)
    run = train_or_load(d, data, one, candidate_dir(settings, d, stopwords, lr))
    return {"best_val_accuracy": run.best_val_accuracy, "best_epoch": run.best_epoch, "epochs": len(run.history),
            "reused": run.reused, "train_seconds": sum(h.train_seconds for h in run.history)}


@register("att_svm_solve", n=(int, 6), T=(int, 8), d=(int, 10), seeds=(int, REQUIRED), seed=(int, REQUIRED),
          self_attention=(bool, False), index=(int, REQUIRED), selection_W=(str, REQUIRED),
          selection_KQ=(str, REQUIRED))
def att_svm_solve(n: int, T: int, d: int, seeds: int, seed: int, self_attention: bool, index: int,
                  selection_W: str, selection_KQ: str) -> dict:
    """The Att-SVMs of one seed of a synthetic run (`hardmax.experiments.svm.solve_seed`): the problems of
    SyntheticConfig(n, T, d, seeds, seed, self_attention) drawn again (the same generator), seed `index`'s taken,
    with the selections of W and (K, Q) ("i,j,…": the selected token of each input). The row: each SVM's W (d·d
    numbers) and support (n·T flags) by parameterisation and norm, the number of solves, and why the seed failed
    (None when every SVM was solved). `hardmax svm --scheduler` runs its seeds' SVMs as these cells."""
    import torch

    from hardmax.experiments.svm import SyntheticConfig, solve_seed, synthetic_problems

    config = SyntheticConfig(n=n, T=T, d=d, seeds=seeds, seed=seed, self_attention=self_attention)
    if not 0 <= index < seeds:
        raise ValueError(f"index must lie in [0, seeds), got {index}")
    problems = synthetic_problems(config, torch.Generator().manual_seed(seed))
    selections = {p: torch.tensor([int(i) for i in text.split(",")], dtype=torch.int64)
                  for p, text in (("W", selection_W), ("KQ", selection_KQ))}
    one = solve_seed(problems.X[index], problems.z[index], selections)
    row = {"solves": one.solves, "failure": one.failure}
    for (p, norm), W in one.W.items():
        row[f"W_{p}_{norm}"] = W.reshape(-1).tolist()
        row[f"support_{p}_{norm}"] = one.support[(p, norm)].reshape(-1).tolist()
    return row
