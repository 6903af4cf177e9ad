"""The dynamics experiment: tokens (Figure 2's, a file's, or random ones) -> `simulate` -> `check_theorem`,
as a typed `SimulationResult`, and its files (trajectory, report, figure, GIF).

    config = SimulateConfig(random=12, dim=3, layers=20)
    result = run_simulation(config)           # SimulationResult: trajectories, reports, notes
    print(result.table()); save_simulation(result, "runs/mine")

`hardmax simulate` is these two calls; the explorer and the docs call them too. `SimulateConfig` is
importable without torch (the command line builds its options from it); the work imports inside.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hardmax.dynamics import Solution
    from hardmax.theory import FlowReport, TheoremReport

__all__ = ["MAX_FPS", "RULE_OPTIONS", "SimulateConfig", "SimulationResult", "run_simulation", "save_simulation"]

MAX_FPS = 50  #: hardmax.plots.save.MAX_FPS (not imported: matplotlib would load with this config)

#: The `SimulateConfig` fields that carry a rule's parameters: a registered rule's field of one of these names is
#: given by its option (--beta, --theta); a rule with a required field of another name needs a field added here.
RULE_OPTIONS = ("beta", "theta")

#: The normalisation schemes `--solver` names (`hardmax.dynamics.normalisation.SCHEMES`, spelled here so that the
#: parser needs no torch).
NORMALISATIONS = ("post-ln", "pre-ln", "peri-ln", "ngpt", "mix-ln")


def _either(names: list[str]) -> str:
    """"a", "a or b", "a, b or c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


@dataclass(frozen=True, kw_only=True)
class SimulateConfig:
    """What `run_simulation` runs; exactly one source of tokens (Figure 2 when none is given)."""

    tokens: Path | None = None  # .npy (n, d) or .csv with d columns (header optional)
    random: int | None = None  # this many standard normal tokens instead of a file
    dim: int | None = None  # dimension of the random tokens (default 2)
    seed: int | None = None  # seed of the random tokens (default 0)
    A: str | None = None  # score matrix: .npy/.csv file or literal "2,0;0,1"; None = identity
    alpha: float = 0.5  # step α > 0 of every layer (γ = α / (1 + α)); the paper's Figure 2 uses 0.5
    layers: int = 30  # number of layers
    out: Path | None = None  # output folder; None = runs/figure2 or runs/simulate
    gif: bool = True  # also render a GIF animation (the slowest part)
    fps: int = 8  # frames per second of the GIF
    configurations: Literal["paper", "dyadic"] = "paper"  # Figure 2's tokens: the authors' notebook (random
    # followers drawn with a fixed seed) or the library's dyadic variants (exact ties, known limits)
    rule: str = "hardmax"  # attention rule: a name in hardmax.dynamics.RULES, its parameters given by the options
    # of the same name (--beta, --theta); anything but the paper's hardmax layer is solved by `solve`
    beta: float | None = None  # inverse temperature of a rule with a beta (softmax, unnormalised)
    theta: float | None = None  # alignment sensitivity θ > 0 of a rule with a theta (localmax)
    value: str | None = None  # value matrix V: .npy/.csv file or literal "1,0;0,-0.5"; None = identity
    sphere: bool = False  # tokens on the unit sphere (normalised first): SA / USA, ẋ = P⊥(V Σ P x)
    solver: Literal["layers", "euler", "rk4", "renormalised", "adaptive", "post-ln", "pre-ln", "peri-ln", "ngpt",
                    "mix-ln"] = "layers"  # layers: the paper's layer (α); euler / rk4 / renormalised: --layers steps
    # of --dt; adaptive: dopri5 up to --time; post-ln / pre-ln / peri-ln / ngpt / mix-ln: a residual stream that
    # normalises each layer as that scheme does (hardmax.dynamics.normalisation), --layers layers of --dt, in R^d
    dt: float | None = None  # step of the euler, rk4 and renormalised solvers (default 0.1)
    time: float | None = None  # final time of the adaptive solver (default 10)
    causal: bool = False  # decoder attention: token i attends only to tokens j ≤ i (a Causal() pair mask), in
    # every rule; Theorem 2.1 is about full attention, so the run goes through `solve` and `check_flow`
    alibi: str | None = None  # ALiBi positional bias b_ij = −m·abs(i − j) on a softmax or unnormalised rule: a slope
    # m ≥ 0 ("0.5"), or "λ/n" ("1/n": m = λ / n, the lost-in-the-middle paper's weights)

    def __post_init__(self) -> None:
        if self.tokens is not None and self.random is not None:
            raise ValueError("give either --tokens FILE or --random N, not both")
        if self.random is None and (self.dim is not None or self.seed is not None):
            raise ValueError("--dim and --seed describe random tokens: add --random N")
        if self.random is not None and self.random < 1:
            raise ValueError(f"random needs at least one token, got {self.random}")
        if self.dim is not None and self.dim < 1:
            raise ValueError(f"dim must be ≥ 1, got {self.dim}")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"alpha must be finite and > 0, got {self.alpha}")
        if self.layers < 0:
            raise ValueError(f"layers must be ≥ 0, got {self.layers}")
        if not 1 <= self.fps <= MAX_FPS:
            raise ValueError(f"fps must be from 1 to {MAX_FPS} (GIF delays are hundredths of a second), "
                             f"got {self.fps}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be an integer from 0 to 2^63 - 1, got {self.seed}")
        if self.configurations not in ("paper", "dyadic"):
            raise ValueError(f"configurations must be 'paper' or 'dyadic', got {self.configurations!r}")
        self.attention_rule()  # a registered rule, its options given exactly when it takes them, valid values
        if self.dt is not None and self.solver in ("layers", "adaptive"):
            raise ValueError(f"--dt is for the fixed-step solvers (euler, rk4, renormalised and the normalisation "
                             f"schemes), not {self.solver}")
        if self.solver in NORMALISATIONS and self.sphere:
            raise ValueError(f"--solver {self.solver} runs in R^d (the tokens' norms are what the scheme regulates): "
                             "drop --sphere")
        self.positional_bias()  # a slope, and a rule that takes it
        if self.time is not None and self.solver != "adaptive":
            raise ValueError("--time is for --solver adaptive (fixed-step solvers run --layers steps of --dt)")
        if self.solver == "renormalised" and not self.sphere:
            raise ValueError("--solver renormalised is the sphere's scheme: add --sphere")
        if self.random is not None:  # before any token is drawn
            self.require_memory(self.random, self.dim or 2, f"--random {self.random} --dim {self.dim or 2}")

    def require_memory(self, n: int, d: int, source: str) -> None:
        """Refuse (one line naming the options) a run whose trajectory, theorem check and figures would not
        fit in memory: (layers + 1) × n × d float64 a few times over, n × n pairwise scores, d × d A."""
        from hardmax.memory import require_memory

        trajectory = 4.0 * (self.layers + 1) * n * d * 8
        require_memory(trajectory + 4.0 * n * n * 8 + 3.0 * d * d * 8,
                       f"{source} with --layers {self.layers} (a trajectory of {self.layers + 1:,} layers × "
                       f"{n:,} tokens × {d:,} float64, {n:,}² pairwise scores)")

    def rule_record(self) -> dict:
        """{"rule": name, parameter: value, ...}: the `rule_from_dict` record of the rule the options ask for.

        The rule and its parameters come from the registry (`hardmax.dynamics.RULES`): a parameter is one of the
        rule class's dataclass fields, given by the option of its name (`RULE_OPTIONS`), required when the field
        has no default. ValueError (one line, naming the options) for an unknown rule, a required parameter not
        given, or an option given that the rule does not take."""
        from hardmax.dynamics.rules import RULES, rule_parameters

        if not isinstance(self.rule, str) or self.rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}")
        parameters = rule_parameters(self.rule)
        lacking = [p for p, required in parameters.items() if required and p not in RULE_OPTIONS]
        if lacking:
            raise ValueError(f"--rule {self.rule} needs a parameter {lacking[0]} that hardmax simulate has no option "
                             f"for (its rule options: {', '.join('--' + o for o in RULE_OPTIONS)})")
        record = {"rule": self.rule}
        for option in RULE_OPTIONS:
            takers = [name for name in RULES if option in rule_parameters(name)]
            value = getattr(self, option)
            if value is not None and option not in parameters:
                raise ValueError(f"--{option} is for --rule {_either(takers)}" if takers
                                 else f"--{option}: no registered rule takes it")
            if value is None and parameters.get(option):
                raise ValueError(f"--rule {self.rule} needs --{option} (--{option} goes with --rule {_either(takers)})")
            if value is not None:
                record[option] = value
        return record

    def attention_rule(self):
        """The rule object (`rule_from_dict(self.rule_record())`); ValueError as `rule_record`, or the rule's own
        one-line complaint about a parameter's value."""
        from hardmax.dynamics.rules import rule_from_dict

        return rule_from_dict(self.rule_record())

    def positional_bias(self):
        """`ALiBi` for --alibi ("0.5": slope 0.5; "1/n": λ/n with λ = 1), or None; ValueError (one line) for a slope
        that is not a number ≥ 0 or a rule with no β to bias (hardmax, localmax)."""
        if self.alibi is None:
            return None
        from hardmax.dynamics.positional import ALiBi

        text = str(self.alibi).strip()
        per_length = text.endswith("/n")
        try:
            slope = float(text[:-2] if per_length else text)
        except ValueError:
            raise ValueError(f"--alibi must be a slope m ≥ 0 (\"0.5\") or λ/n (\"1/n\"), got {self.alibi!r}") from None
        if not (math.isfinite(slope) and slope >= 0):
            raise ValueError(f"--alibi's slope must be a finite number ≥ 0, got {self.alibi!r}")
        from hardmax.dynamics.positional import Positional

        bias = ALiBi(slope, per_length=per_length)
        try:  # the rules a positional bias rides on are Positional's to say
            Positional(self.attention_rule(), bias)
        except ValueError:
            raise ValueError(f"--alibi biases a softmax or unnormalised rule (--rule softmax --beta B), "
                             f"not {self.rule}") from None
        return bias

    @property
    def flow(self) -> bool:
        """True when anything but the paper's layer is asked for: the run goes through `dynamics.solve`."""
        return (self.rule != "hardmax" or self.value is not None or self.sphere or self.solver != "layers"
                or self.causal or self.alibi is not None)

    @property
    def figure2(self) -> bool:
        """True when no tokens are given: reproduce the paper's Figure 2."""
        return self.tokens is None and self.random is None


@dataclass(frozen=True)
class SimulationResult:
    """What `run_simulation` computed.

    Attributes:
        config: the `SimulateConfig` run.
        solutions: name -> single-sequence float64 `Solution` (Figure 2: its four configurations; otherwise one,
            named "tokens"): the paper's layers, or (`config.flow`) the field and solver the options ask for.
        reports: name -> what was checked on that solution: `check_theorem`'s `TheoremReport` for the paper's
            layers, `check_flow`'s `FlowReport` for a flow.
        source: where the tokens came from, in words ("Figure 2 (paper)", "t.csv", "random (seed 0)").
        notes: what the readers decided on their own (a header skipped, a byte-order mark), to say aloud.
        seconds: time of reading, simulating and checking.
    """

    config: SimulateConfig
    solutions: Mapping[str, Solution]
    reports: Mapping[str, TheoremReport | FlowReport]
    source: str
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    A_given: bool = False  # whether a score matrix A was given (the figures' titles say so)

    @property
    def passed(self) -> bool:
        """Whether every solution passed its check (the theorem's, or every claim of `check_flow`)."""
        return all(report.passed for report in self.reports.values())

    def table(self) -> str:
        """The check tables (one section per configuration for Figure 2)."""
        if self.config.flow:
            return "\n\n".join(f"## {name}\n\n{report.table()}" if len(self.reports) > 1 else report.table()
                               for name, report in self.reports.items())
        if self.config.figure2:
            return "\n\n".join(f"## {name}\n\n{report.table()}" for name, report in self.reports.items())
        return next(iter(self.reports.values())).table()

    def describe(self) -> str:
        """One line: what was simulated and how long it took."""
        if self.config.flow:
            c = self.config
            first = next(iter(self.solutions.values()))
            n, d = first.tokens.shape[-2:]
            return (f"solved {len(self.solutions)} configuration(s) of n = {n} tokens "
                    f"{'on S^' + str(d - 1) if c.sphere else 'in R^' + str(d)}, {c.rule}"
                    f"{' causal' if c.causal else ''}{f' ALiBi ({c.alibi})' if c.alibi else ''} attention, "
                    f"{'V given' if c.value else 'V = I'}, {c.solver} solver, up to t = {float(first.times[-1]):g}: "
                    f"{self.seconds:.2f} s")
        if self.config.figure2:
            return (f"simulated the {len(self.solutions)} configurations of Figure 2, {self.config.layers} "
                    f"layers, α = {self.config.alpha:g}: {self.seconds:.2f} s")
        n, d = next(iter(self.solutions.values())).tokens.shape[1:]
        return f"simulated n = {n} tokens in R^{d}, {self.config.layers} layers, α = {self.config.alpha:g}: " \
               f"{self.seconds:.2f} s"

    def to_dict(self) -> dict:
        """The run as plain JSON values: config, source, notes, trajectories and theorem reports."""
        from hardmax.io import to_jsonable

        if self.config.flow:
            return {"config": to_jsonable(self.config), "source": self.source, "notes": list(self.notes),
                    "passed": self.passed, "seconds": self.seconds,
                    "claims": {name: [to_jsonable(c.__dict__) for c in r.checks]
                               for name, r in self.reports.items()},
                    "solutions": {name: {"times": s.times.tolist(), "tokens": s.tokens.tolist()}
                                  for name, s in self.solutions.items()}}
        return {"config": to_jsonable(self.config), "source": self.source, "notes": list(self.notes),
                "passed": self.passed, "seconds": self.seconds,
                "theorem": {name: report.to_dict() for name, report in self.reports.items()},
                "trajectories": {name: t.to_dict() for name, t in self.solutions.items()}}


def _tokens(config: SimulateConfig) -> tuple[dict, str, list[str]]:
    """name -> (n, d) float64 tokens, the source in words, and the reader's notes."""
    import numpy as np

    from hardmax.inputs import read_array
    from hardmax.theory import figure2_configurations, paper_figure2_configurations

    if config.figure2:
        configurations = (paper_figure2_configurations() if config.configurations == "paper"
                          else figure2_configurations())
        n = sum(len(tokens) for tokens in configurations.values())
        config.require_memory(n, 2, f"Figure 2 ({len(configurations)} configurations, {n} tokens in all)")
        return dict(configurations), f"Figure 2 ({config.configurations})", []
    if config.tokens is not None:
        given = read_array(config.tokens, "tokens")
        tokens = given.array
        config.require_memory(*tokens.shape, f"--tokens {config.tokens} ({tokens.shape[0]:,} × {tokens.shape[1]:,})")
        return {"tokens": tokens}, Path(config.tokens).name, given.notes()
    seed = config.seed or 0
    tokens = np.random.default_rng(seed).standard_normal((config.random, config.dim or 2))
    return {"tokens": tokens}, f"random (seed {seed})", []


def run_simulation(config: SimulateConfig) -> SimulationResult:
    """Read or draw the tokens, run the hardmax dynamics and check Theorem 2.1 on every configuration.

    Raises:
        ValueError: unreadable tokens or A, a non-SPD A, sizes beyond the memory budget (`hardmax.memory`).
    """
    from hardmax.dynamics import simulate
    from hardmax.inputs import read_matrix
    from hardmax.theory import check_theorem

    start = time.perf_counter()
    configurations, source, notes = _tokens(config)
    A = None
    if config.A is not None:
        given = read_matrix(config.A, "A")
        A, notes = given.array, [*notes, *given.notes()]
    if config.flow:
        return _run_flow(config, configurations, source, notes, A, start)
    solutions = {name: simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
                 for name, tokens in configurations.items()}
    reports = {name: check_theorem(solution) for name, solution in solutions.items()}
    return SimulationResult(config=config, solutions=solutions, reports=reports, source=source,
                            notes=tuple(notes), seconds=time.perf_counter() - start, A_given=A is not None)


def flow_parts(config: SimulateConfig, A=None, V=None):
    """The `Field` and solver a config asks for (`hardmax.dynamics`): the options as library objects."""
    from hardmax.dynamics import RK4, SCHEMES, Adaptive, Bilinear, Euler, Field, Flat, Positional, Renormalised, Sphere

    rule, bias = config.attention_rule(), config.positional_bias()
    field = Field(rule if bias is None else Positional(rule, bias), scores=Bilinear(A), value=V,
                  manifold=Sphere() if config.sphere else Flat())
    dt = 0.1 if config.dt is None else config.dt
    if config.solver in SCHEMES:
        return field, SCHEMES[config.solver](dt)
    solver = {"layers": lambda: Euler.layers(config.alpha), "euler": lambda: Euler(dt), "rk4": lambda: RK4(dt),
              "renormalised": lambda: Renormalised(dt), "adaptive": lambda: Adaptive()}[config.solver]()
    return field, solver


def _run_flow(config: SimulateConfig, configurations: dict, source: str, notes: list, A, start: float):
    import numpy as np

    from hardmax.dynamics import Causal, Save, solve
    from hardmax.inputs import read_matrix
    from hardmax.theory import check_flow

    V = None
    if config.value is not None:
        given = read_matrix(config.value, "value")
        V, notes = given.array, [*notes, *given.notes()]
    field, solver = flow_parts(config, A, V)
    solutions = {}
    for name, tokens in configurations.items():
        z = np.asarray(tokens, dtype=np.float64)
        if config.sphere:
            norms = np.linalg.norm(z, axis=1, keepdims=True)
            if (norms == 0).any():
                raise ValueError(f"{name}: a token at the origin cannot be put on the sphere")
            z = z / norms
        mask = Causal() if config.causal else None
        if config.solver == "adaptive":
            solutions[name] = solve(field, solver, z, t1=10.0 if config.time is None else config.time, mask=mask)
        else:
            solutions[name] = solve(field, solver, z, steps=config.layers, save=Save(), mask=mask)
    reports = {name: check_flow(solution) for name, solution in solutions.items()}
    return SimulationResult(config=config, solutions=solutions, reports=reports, source=source, notes=tuple(notes),
                            seconds=time.perf_counter() - start, A_given=A is not None)


def save_simulation(result: SimulationResult, out: str | Path | None = None, *,
                    on_file=None) -> list[Path]:
    """Write a run's files into `out` (default: the config's `out`, else runs/figure2 or runs/simulate):
    report.txt and report.json (config and theorem reports), the figure (PNG, PDF), the GIF unless the
    config says `gif=False`, and for the user's tokens trajectory.npy. Every file is written atomically.

    Args:
        on_file: called as ``on_file(what, paths, seconds)`` after each figure or GIF (progress lines).
    Returns:
        The paths written.
    """
    import numpy as np

    from hardmax.io import atomic_write, to_jsonable, write_json, write_text
    from hardmax.plots import animate, figure2, plot_trajectory, save_figure
    from hardmax.plots.figures import animate_figure2

    config = result.config
    out = Path(out or config.out or ("runs/figure2" if config.figure2 else "runs/simulate"))

    def timed(what: str, make) -> list[Path]:
        start = time.perf_counter()
        paths = make()
        if on_file is not None:
            on_file(what, paths, time.perf_counter() - start)
        return paths

    if config.flow:
        return _save_flow(result, out, timed)

    report = {"config": to_jsonable(config),
              "theorem": ({name: r.to_dict() for name, r in result.reports.items()} if config.figure2
                          else next(iter(result.reports.values())).to_dict())}
    if config.figure2:
        trajectories = result.solutions
        written = [*timed("figure", lambda: save_figure(figure2(trajectories), out / "figure2")),
                   write_text(out / "report.txt", result.table() + "\n"), write_json(out / "report.json", report)]
        if config.gif:  # all four rows, moving together
            written += timed("GIF", lambda: [animate_figure2(trajectories, out / "figure2.gif", fps=config.fps)])
        return written
    trajectory = next(iter(result.solutions.values()))
    n, d = trajectory.tokens.shape[1:]
    title = f"{result.source}: n = {n}, d = {d}, α = {config.alpha:g}, {'A given' if result.A_given else 'A = I'}"
    positions = trajectory.tokens.detach().cpu().numpy()

    def write_npy(tmp: str) -> None:
        with open(tmp, "wb") as f:  # np.save to an open file keeps the temporary name
            np.save(f, positions)

    written = [atomic_write(out / "trajectory.npy", write_npy), write_text(out / "report.txt", result.table() + "\n"),
               write_json(out / "report.json", report),
               *timed("figure", lambda: save_figure(plot_trajectory(trajectory, title=title), out / "figure"))]
    if config.gif:
        written += timed("GIF", lambda: [animate(trajectory, out / "animation.gif", fps=config.fps, title=title)])
    return written


def _save_flow(result: SimulationResult, out: Path, timed) -> list[Path]:
    """report.txt, report.json, and per configuration a figure (first, a fifth, last state), its GIF and, for the
    user's tokens, solution.npy (saved states × n × d) with times.npy."""
    import numpy as np

    from hardmax.io import atomic_write, write_json, write_text
    from hardmax.plots.flows import animate_flow, flow_figure
    from hardmax.plots.save import save_figure

    config = result.config
    written = [write_text(out / "report.txt", result.table() + "\n"),
               write_json(out / "report.json", {k: v for k, v in result.to_dict().items() if k != "solutions"})]
    single = len(result.solutions) == 1
    for name, solution in result.solutions.items():
        stem = "" if single else f"_{name}"
        title = f"{name}: {config.rule}, {config.solver}" + (", sphere" if config.sphere else "")
        written += timed("figure", lambda s=solution, st=stem, t=title: save_figure(
            flow_figure(s, (0, len(s.times) // 5, -1), title=t), out / f"figure{st}"))
        if config.gif:
            written += timed("GIF", lambda s=solution, st=stem, t=title: [
                animate_flow(s, out / f"animation{st}.gif", fps=config.fps, title=t)])
        if single:
            for key, array in (("solution", solution.tokens), ("times", solution.times)):
                def write(tmp: str, a=array) -> None:
                    with open(tmp, "wb") as f:
                        np.save(f, a.detach().cpu().numpy())
                written.append(atomic_write(out / f"{key}.npy", write))
    return written
