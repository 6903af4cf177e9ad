"""`hardmax rate`: coding rate and rate reduction through the layers of a trained run (thin: the work is
`hardmax.experiments.rate.measure_classifier`; heavy imports happen inside `run_rate`)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from hardmax.cli.options import HelpFormatter

__all__ = ["add_rate", "run_rate"]

# --------------------------------------------------------------------------------------------
# hardmax rate
# --------------------------------------------------------------------------------------------


def add_rate(subparsers) -> None:
    """Register `hardmax rate` and its options on `subparsers`."""
    p = subparsers.add_parser(
        "rate", help="coding rate R and rate reduction ΔR through the layers of a trained run",
        formatter_class=HelpFormatter,
        description="Per-layer coding rate of each review's tokens and rate reduction between the two sentiment "
                    "classes (mean token per review), through the classifier (hardmax and softmax) and along "
                    "long `simulate` runs from its embeddings; final rate against the number of leaders. For a "
                    "CRATE run (--layer crate): compression R^c(Z | U) and sparsity per block, at the run's "
                    "initialisation and trained. Prints the tables, writes OUT/rate.json, OUT/rate.md and "
                    "OUT/rate.png/.pdf.\n\n"
                    "example: hardmax rate --run runs/quick/d16")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory written by `hardmax train`")
    p.add_argument("--out", type=Path, metavar="DIR", help="output folder (default: RUN/rate)")
    p.add_argument("--data", metavar="PATH", help="the reviews (default: found as for `hardmax train`)")
    p.add_argument("--eps", type=float, help="distortion ε of the rates, not ε² (default 0.5)")
    p.add_argument("--reviews", type=int, metavar="N", help="reviews measured, a seeded subset; 0 = all (default 2000)")
    p.add_argument("--on", dest="split", choices=("test", "val"), help="split measured (default: test)")
    p.add_argument("--long-layers", type=int, metavar="K", help="depth of the simulate runs (default 64)")
    p.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: torch's choice)")


def _check_options(args: argparse.Namespace) -> None:
    """Every numeric option, before torch loads: one line naming the option."""
    if args.eps is not None and not (math.isfinite(args.eps) and args.eps > 0):
        raise ValueError(f"--eps must be a finite number > 0 (the distortion ε, not ε²), got {args.eps}")
    if args.reviews is not None and args.reviews < 0:
        raise ValueError(f"--reviews must be ≥ 0 (0 = all), got {args.reviews}")
    if args.long_layers is not None and args.long_layers < 1:
        raise ValueError(f"--long-layers must be ≥ 1, got {args.long_layers}")
    if args.threads is not None:
        from hardmax.training.config import check_threads

        check_threads(args.threads, "--threads")


def _check_long_runs(config, reviews: int | None, tokens: int, d: int, given: str) -> None:
    """`require_memory` for the long simulate runs, naming --long-layers (and --reviews once known); reviews None:
    not known before the data are read (counted as one, so that only what must fail fails)."""
    from hardmax.experiments.rate import long_run_memory, long_run_text
    from hardmax.memory import require_memory

    batch, nbytes = long_run_memory(config.long_layers, reviews or 1, tokens, d, config.batch_size)
    require_memory(nbytes, f"--long-layers {config.long_layers}{given} "
                           f"({long_run_text(config.long_layers, reviews, tokens, d, batch)})")


def run_rate(args: argparse.Namespace) -> int:
    """Run `hardmax rate` with the parsed `args`; returns the exit code."""
    _check_options(args)
    import time
    from dataclasses import asdict

    import torch

    from hardmax.cli.output import say
    from hardmax.experiments.rate import RateConfig, measure_classifier, measure_crate
    from hardmax.io import write_json, write_text
    from hardmax.plots import save_figure
    from hardmax.plots.rate import plot_crate_measures, plot_rates
    from hardmax.training import initial_model, load_run

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    given = {k: getattr(args, k) for k in ("eps", "reviews", "split", "long_layers") if getattr(args, k) is not None}
    config = RateConfig(**given)
    start = time.perf_counter()
    run = load_run(args.run)
    model = run.model
    crate = run.model_config.crate is not None  # no long runs
    if not crate:  # before the data are read: a review has at most max_len tokens
        _check_long_runs(config, config.reviews or None, run.data_config.max_len, run.model_config.d, "")
    data = run.load_data(args.data)
    split = getattr(data, config.split)
    rows = torch.randperm(len(split), generator=torch.Generator().manual_seed(config.seed))
    if config.reviews:
        rows = rows[:config.reviews]
    if not crate:
        _check_long_runs(config, len(rows), split.ids.shape[1], run.model_config.d,
                         f" with --reviews {config.reviews} ({len(rows):,} reviews)")
    say(f"{config.split} set: measuring {len(rows):,} of {len(split):,} reviews, ε = {config.eps:g}")
    if crate:
        initial = initial_model(run.model_config, run.train_config).eval()
        report = measure_crate(model, initial, split.ids[rows], split.mask[rows], config)
        figure = plot_crate_measures({f"d = {report.d}, init": report.initial,
                                      f"d = {report.d}, trained": report.trained})
    else:
        report = measure_classifier(model, split.ids[rows], split.mask[rows], split.labels[rows], config)
        figure = plot_rates({f"d = {report.d}": report})
    table = report.table()
    print(table)
    out = args.out or Path(args.run) / "rate"
    written = [write_json(out / "rate.json", {"config": asdict(config), "report": report.to_dict()}),
               write_text(out / "rate.md", table + "\n"), *save_figure(figure, out / "rate", close=True)]
    say(f"wrote {', '.join(str(p) for p in written)} ({time.perf_counter() - start:.1f} s)")
    return 0
