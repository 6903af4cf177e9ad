"""`hardmax simulate`: Figure 2, or the user's own tokens, with the theorem check.

The options are generated from `SimulateConfig` (`hardmax.cli.options`); numpy, torch and matplotlib
load inside `run_simulate`, so that building the parser stays fast.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hardmax.cli.options import HelpFormatter, add_options, config_from_args

MAX_FPS = 50  # hardmax.plots.save.MAX_FPS (not imported: matplotlib would load while the parser is built)

# --------------------------------------------------------------------------------------------
# hardmax simulate
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SimulateConfig:
    """What `hardmax simulate` runs; exactly one source of tokens (Figure 2 when none is given)."""

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

    def __post_init__(self) -> None:
        if self.tokens is not None and self.random is not None:
            raise ValueError("give either --tokens FILE or --random N, not both")
        if self.random is None and (self.dim is not None or self.seed is not None):
            raise ValueError("--dim and --seed describe random tokens: add --random N")
        if self.random is not None and self.random < 1:
            raise ValueError(f"--random needs at least one token, got {self.random}")
        if self.dim is not None and self.dim < 1:
            raise ValueError(f"--dim must be ≥ 1, got {self.dim}")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"--alpha must be finite and > 0, got {self.alpha}")
        if self.layers < 0:
            raise ValueError(f"--layers must be ≥ 0, got {self.layers}")
        if not 1 <= self.fps <= MAX_FPS:
            raise ValueError(f"--fps must be from 1 to {MAX_FPS} (GIF delays are hundredths of a second), "
                             f"got {self.fps}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ValueError(f"--seed must be an integer from 0 to 2^63 - 1, got {self.seed}")
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

    @property
    def figure2(self) -> bool:
        """True when no tokens are given: reproduce the paper's Figure 2."""
        return self.tokens is None and self.random is None


def add_simulate(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="run the hardmax dynamics, draw them, and check Theorem 2.1",
        formatter_class=HelpFormatter,
        description="Run the pure-attention hardmax dynamics on tokens, write figures, a GIF, the "
                    "trajectory and the check of Theorem 2.1 (leaders reach vertices of a polytope K, "
                    "other tokens vertices of K or points of S). Without tokens: the paper's Figure 2 "
                    "(about 10 s on 2 CPU cores, most of it drawing).\n\n"
                    "examples: hardmax simulate\n"
                    "          hardmax simulate --random 12 --dim 3 --layers 20 --out runs/mine",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--figure2", action="store_true",
                        help="reproduce the paper's Figure 2 (the default when no tokens are given)")
    add_options(source, SimulateConfig, only=("tokens", "random"), metavars={"tokens": "FILE", "random": "N"})
    add_options(p, SimulateConfig, exclude=("tokens", "random"), flags={"gif": "--no-gif"},
                helps={"gif": "skip the GIF animation (the slowest part)"},
                metavars={"dim": "D", "seed": "S", "A": "FILE_OR_LIST", "out": "DIR"})


def run_simulate(args: argparse.Namespace) -> int:
    config = config_from_args(SimulateConfig, args)
    return _simulate_figure2(config) if config.figure2 else _simulate_tokens(config)


def _simulate_figure2(config: SimulateConfig) -> int:
    from hardmax.cli.output import jsonable, say, summary, timed
    from hardmax.dynamics import simulate
    from hardmax.io import write_json, write_text
    from hardmax.plots import figure2, save_figure
    from hardmax.plots.figures import animate_figure2
    from hardmax.theory import check_theorem, figure2_configurations, paper_figure2_configurations

    out = config.out or Path("runs/figure2")
    start = time.perf_counter()
    configurations = (paper_figure2_configurations() if config.configurations == "paper"
                      else figure2_configurations())
    n = sum(len(tokens) for tokens in configurations.values())
    config.require_memory(n, 2, f"Figure 2 ({len(configurations)} configurations, {n} tokens in all)")
    A = _read_A(config)
    trajectories = {name: simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
                    for name, tokens in configurations.items()}
    reports = {name: check_theorem(trajectory) for name, trajectory in trajectories.items()}
    say(f"simulated the {len(trajectories)} configurations of Figure 2, {config.layers} layers, "
         f"α = {config.alpha:g}: {time.perf_counter() - start:.2f} s")
    tables = "\n\n".join(f"## {name}\n\n{report.table()}" for name, report in reports.items())
    print(tables)
    written = [
        *timed("figure", lambda: save_figure(figure2(trajectories), out / "figure2")),
        write_text(out / "report.txt", tables + "\n"),
        write_json(out / "report.json", {"config": jsonable(config),
                                         "theorem": {k: r.to_dict() for k, r in reports.items()}}),
    ]
    if config.gif:  # all four rows, moving together
        written += timed("GIF", lambda: [animate_figure2(trajectories, out / "figure2.gif", fps=config.fps)])
    say(summary(written, start))
    return 0


def _simulate_tokens(config: SimulateConfig) -> int:
    import numpy as np

    from hardmax.cli.output import jsonable, save_npy, say, summary, timed
    from hardmax.dynamics import simulate
    from hardmax.inputs import read_array
    from hardmax.io import write_json, write_text
    from hardmax.plots import animate, plot_trajectory, save_figure
    from hardmax.theory import check_theorem

    out = config.out or Path("runs/simulate")
    start = time.perf_counter()
    if config.tokens is not None:
        given = read_array(config.tokens, "tokens")
        for note in given.notes():
            say(note)
        tokens = given.array
        config.require_memory(*tokens.shape, f"--tokens {config.tokens} ({tokens.shape[0]:,} × {tokens.shape[1]:,})")
        source = config.tokens.name
    else:
        dim, seed = config.dim or 2, config.seed or 0
        tokens = np.random.default_rng(seed).standard_normal((config.random, dim))
        source = f"random (seed {seed})"
    A = _read_A(config)
    trajectory = simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
    report = check_theorem(trajectory)
    n, d = tokens.shape
    say(f"simulated n = {n} tokens in R^{d}, {config.layers} layers, α = {config.alpha:g}: "
         f"{time.perf_counter() - start:.2f} s")
    table = report.table()
    print(table)
    title = f"{source}: n = {n}, d = {d}, α = {config.alpha:g}, {'A = I' if A is None else 'A given'}"
    written = [
        save_npy(out / "trajectory.npy", trajectory),
        write_text(out / "report.txt", table + "\n"),
        write_json(out / "report.json", {"config": jsonable(config), "theorem": report.to_dict()}),
        *timed("figure", lambda: save_figure(plot_trajectory(trajectory, title=title), out / "figure")),
    ]
    if config.gif:
        written += timed("GIF", lambda: [animate(trajectory, out / "animation.gif", fps=config.fps,
                                                  title=title)])
    say(summary(written, start))
    return 0


def _read_A(config: SimulateConfig):
    """The matrix of --A (None: the identity), with what the reader decided said aloud."""
    from hardmax.cli.output import say
    from hardmax.inputs import read_matrix

    if config.A is None:
        return None
    given = read_matrix(config.A, "A")
    for note in given.notes():
        say(note)
    return given.array
