"""`hardmax simulate`: Figure 2, or the user's own tokens, with the theorem check (thin: the work is
`hardmax.experiments.dynamics.run_simulation` and `save_simulation`).

The options are generated from `SimulateConfig` (`hardmax.cli.options`); numpy, torch and matplotlib
load inside `run_simulate`, so that building the parser stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import time

from hardmax.cli.options import HelpFormatter, add_options, config_from_args
from hardmax.cli.sweep import add_scheduler_options, sweep_options
from hardmax.experiments.dynamics import SimulateConfig

__all__ = ["add_particles", "add_simulate", "run_particles", "run_simulate"]

# --------------------------------------------------------------------------------------------
# hardmax simulate
# --------------------------------------------------------------------------------------------


def add_simulate(subparsers) -> None:
    """Register `hardmax simulate` and its options on `subparsers`."""
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
                metavars={"dim": "D", "seed": "S", "A": "FILE_OR_LIST", "out": "DIR", "rule": "NAME"})


def run_simulate(args: argparse.Namespace) -> int:
    """Run `hardmax simulate` with the parsed `args`; returns the exit code."""
    from hardmax.cli.output import say, summary
    from hardmax.experiments.dynamics import run_simulation, save_simulation

    start = time.perf_counter()
    config = config_from_args(SimulateConfig, args, flags={"gif": "--no-gif"})
    result = run_simulation(config)
    for note in result.notes:
        say(note)
    say(result.describe())
    print(result.table())
    written = save_simulation(result, on_file=lambda what, paths, seconds: say(
        f"{what}: {', '.join(p.name for p in paths)} in {seconds:.2f} s"))
    say(summary(written, start))
    return 0


# --------------------------------------------------------------------------------------------
# hardmax particles
# --------------------------------------------------------------------------------------------


def add_particles(subparsers) -> None:
    """Register `hardmax particles` and its options on `subparsers`."""
    p = subparsers.add_parser(
        "particles",
        help="reproduce the particle-system papers' pictures: clustering, metastability, phase diagrams",
        formatter_class=HelpFormatter,
        description="Write the pictures the paper builds on (docs/dynamics.md): the four clustering pictures of "
                    "Geshkovski, Letrouit, Polyanskiy, Rigollet (2023) with their claims checked, the metastability "
                    "picture (n = 5 on the circle, β = 4, T = 400), and the phase diagrams of a single cluster on S¹ "
                    "and S² (n = 32, 20 β values, 1,000 starts per β; about 30 s on 2 CPU cores, --quick: 50 "
                    "starts, about 10 s).\n\n"
                    "examples: hardmax particles --out results/figures/dynamics\n"
                    "          hardmax particles --quick --no-gif --out runs/particles",
    )
    p.add_argument("--out", metavar="DIR", default="runs/particles", help="output folder (default: runs/particles)")
    p.add_argument("--quick", action="store_true", help="50 starts per β instead of 1,000")
    p.add_argument("--no-gif", dest="gif", action="store_false", help="skip the GIF animations")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the clustering pictures' tokens and the phase diagrams' starts; the metastability "
                        "picture keeps its own (default: 0)")
    add_scheduler_options(p, "the phase diagrams (one cell per β, into OUT/sweep_S1 and OUT/sweep_S2)")


def _diagram_by_sweep(out: str, where: dict, *, diagrams: int = 2, after_last=None):
    """A `reproduce(diagram=...)` that runs each phase diagram as a sweep of phase_cell cells (one per β, each with the
    starts it has in the one-batch diagram) into OUT/sweep_S{d−1} — rerun to finish an interrupted one — and reads the
    diagram back from its table. where: `sweep`'s executor or scheduler.

    Each call returns at once with a Future of the diagram: its sweep runs in a daemon thread of this process, after
    the previous call's (the S¹ cells, then the S²), while `reproduce` draws the pictures, so the workers' cells and
    the driver's drawing overlap. A thread left running when the command ends early (an error, Ctrl-C) dies with the
    process; the batches it wrote are whole (atomic part files), and the same command finishes the sweep.
    after_last: called in that thread once the `diagrams`-th diagram is answered (the command's embedded cluster's
    `close`, which then overlaps the drawing of the last figure)."""
    import concurrent.futures
    import threading
    from pathlib import Path

    from hardmax.sweep import read_table, sweep
    from hardmax.sweep.plots import phase_diagram_of

    previous: list[concurrent.futures.Future] = []

    def diagram(betas, *, starts: int, d: int, seed: int) -> concurrent.futures.Future:
        folder = Path(out) / f"sweep_S{d - 1}"
        cells = [{"beta": float(b), "index": i, "of": len(betas), "starts": starts, "d": d, "seed": seed,
                  "dtype": "float32"} for i, b in enumerate(betas)]  # the starts and dtype of the one-batch run
        future: concurrent.futures.Future = concurrent.futures.Future()
        before, last = list(previous), len(previous) + 1 == diagrams

        def run() -> None:
            concurrent.futures.wait(before)
            future.set_running_or_notify_cancel()
            try:
                sweep("phase_cell", cells, out=folder, **where)
                future.set_result(phase_diagram_of(read_table(folder)))
            except BaseException as e:  # re-raised by future.result(), in the command's thread
                future.set_exception(e)
            if last and after_last is not None:
                try:
                    after_last()
                except Exception:  # noqa: S110 (the command's with-block closes it again, in its own thread)
                    pass

        threading.Thread(target=run, name=f"hardmax-sweep-S{d - 1}", daemon=True).start()
        previous.append(future)
        return future

    return diagram


def run_particles(args: argparse.Namespace) -> int:
    """Run `hardmax particles` with the parsed `args`; returns the exit code."""
    from hardmax.cli.output import say, summary

    start = time.perf_counter()
    if args.seed < 0:
        raise ValueError(f"--seed must be ≥ 0, got {args.seed}")
    where = sweep_options(args)
    with contextlib.ExitStack() as stack:
        close = None
        if args.scheduler == "local":
            from hardmax.sweep import EmbeddedCluster

            # one cluster for both diagrams, started first: its workers start and load the phase cells' kernels, then
            # run the diagrams' cells, while the clustering pictures are drawn; closed as the last figure is drawn
            cluster = stack.enter_context(EmbeddedCluster(where["workers"], warm="phase_cell").start())
            where, close = {"executor": cluster}, cluster.close
            # the cores are the workers': the driver draws on the cores left over, one thread at least (its torch on
            # every core ran an OpenMP team that spun against 2 workers on 2 cores, their cells 15-50 % slower)
            import os

            import torch

            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(max(1, (os.cpu_count() or 1) - cluster.workers))
        from hardmax.experiments.particles import reproduce

        diagram = None if args.scheduler is None else _diagram_by_sweep(args.out, where, after_last=close)
        result = reproduce(args.out, quick=args.quick, gifs=args.gif, seed=args.seed, progress=say, diagram=diagram)
    for name, table in result.tables.items():
        print(f"\n## {name}\n\n{table}")
    say(summary(list(result.files), start))
    return 0
