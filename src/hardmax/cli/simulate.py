"""`hardmax simulate`: Figure 2, or the user's own tokens, with the theorem check."""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hardmax.cli.inputs import _read_array, read_matrix
from hardmax.cli.output import _jsonable, _save_npy, _say, _summary, _timed
from hardmax.dynamics import simulate
from hardmax.io import write_json, write_text
from hardmax.plots import animate, figure2, plot_trajectory, save_figure
from hardmax.theory import check_theorem, figure2_configurations

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
        if self.fps < 1:
            raise ValueError(f"--fps must be ≥ 1, got {self.fps}")

    @property
    def figure2(self) -> bool:
        """True when no tokens are given: reproduce the paper's Figure 2."""
        return self.tokens is None and self.random is None


def _add_simulate(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="run the hardmax dynamics, draw them, and check Theorem 2.1",
        description="Run the pure-attention hardmax dynamics on tokens, write figures, a GIF, the "
                    "trajectory and the check of Theorem 2.1 (leaders reach vertices of a polytope K, "
                    "other tokens vertices of K or points of S). Without tokens: the paper's Figure 2.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--figure2", action="store_true",
                        help="reproduce the paper's Figure 2 (the default when no tokens are given)")
    source.add_argument("--tokens", type=Path, metavar="FILE",
                        help=".npy array (n, d) or .csv file with d columns (header optional)")
    source.add_argument("--random", type=int, metavar="N", help="N random standard normal tokens")
    p.add_argument("--dim", type=int, metavar="D", help="dimension of --random tokens (default 2)")
    p.add_argument("--seed", type=int, metavar="S", help="seed of --random tokens (default 0)")
    p.add_argument("--A", metavar="FILE_OR_LIST",
                   help="symmetric positive definite score matrix: .npy/.csv file or literal like "
                        "'2,0;0,1' (default: identity)")
    p.add_argument("--alpha", type=float, default=0.5, help="step α > 0 (default 0.5)")
    p.add_argument("--layers", type=int, default=30, help="number of layers (default 30)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="output folder (default runs/figure2, or runs/simulate for your tokens)")
    p.add_argument("--no-gif", dest="gif", action="store_false", help="skip the GIF animation")
    p.add_argument("--fps", type=int, default=8, help="frames per second of the GIF (default 8)")


def _run_simulate(args: argparse.Namespace) -> int:
    config = SimulateConfig(tokens=args.tokens, random=args.random, dim=args.dim, seed=args.seed, A=args.A,
                            alpha=args.alpha, layers=args.layers, out=args.out, gif=args.gif, fps=args.fps)
    return _simulate_figure2(config) if config.figure2 else _simulate_tokens(config)


def _simulate_figure2(config: SimulateConfig) -> int:
    out = config.out or Path("runs/figure2")
    start = time.perf_counter()
    A = None if config.A is None else read_matrix(config.A)
    trajectories = {name: simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
                    for name, tokens in figure2_configurations().items()}
    reports = {name: check_theorem(trajectory) for name, trajectory in trajectories.items()}
    _say(f"simulated the {len(trajectories)} configurations of Figure 2, {config.layers} layers, "
         f"α = {config.alpha:g}: {time.perf_counter() - start:.2f} s")
    tables = "\n\n".join(f"## {name}\n\n{report.table()}" for name, report in reports.items())
    print(tables)
    written = [
        *_timed("figure", lambda: save_figure(figure2(trajectories), out / "figure2")),
        write_text(out / "report.txt", tables + "\n"),
        write_json(out / "report.json", {"config": _jsonable(config),
                                         "theorem": {k: _jsonable(r) for k, r in reports.items()}}),
    ]
    if config.gif:
        # The row whose clusters sit off the leaders shows the most of Theorem 2.1.
        name = next((k for k in trajectories if "non" in k.lower()), list(trajectories)[-1])
        written += _timed("GIF", lambda: [animate(trajectories[name], out / "figure2.gif", fps=config.fps,
                                                  title=name.replace("_", " "))])
    _say(_summary(written, start))
    return 0


def _simulate_tokens(config: SimulateConfig) -> int:
    out = config.out or Path("runs/simulate")
    start = time.perf_counter()
    if config.tokens is not None:
        tokens = _read_array(config.tokens, "tokens")
        source = config.tokens.name
    else:
        dim, seed = config.dim or 2, config.seed or 0
        tokens = np.random.default_rng(seed).standard_normal((config.random, dim))
        source = f"random (seed {seed})"
    A = None if config.A is None else read_matrix(config.A)
    trajectory = simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
    report = check_theorem(trajectory)
    n, d = tokens.shape
    _say(f"simulated n = {n} tokens in R^{d}, {config.layers} layers, α = {config.alpha:g}: "
         f"{time.perf_counter() - start:.2f} s")
    table = report.table()
    print(table)
    title = f"{source}: n = {n}, d = {d}, α = {config.alpha:g}, {'A = I' if A is None else 'A given'}"
    written = [
        _save_npy(out / "trajectory.npy", trajectory),
        write_text(out / "report.txt", table + "\n"),
        write_json(out / "report.json", {"config": _jsonable(config), "theorem": _jsonable(report)}),
        *_timed("figure", lambda: save_figure(plot_trajectory(trajectory, title=title), out / "figure")),
    ]
    if config.gif:
        written += _timed("GIF", lambda: [animate(trajectory, out / "animation.gif", fps=config.fps,
                                                  title=title)])
    _say(_summary(written, start))
    return 0
