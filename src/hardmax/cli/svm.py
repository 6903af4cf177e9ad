"""`hardmax svm`: the Att-SVM view of attention, reproduced (synthetic runs, 2-D pictures, join to hardmax, IMDb)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_svm(subparsers) -> None:
    p = subparsers.add_parser(
        "svm",
        help="attention as a max-margin token selector (Att-SVM): reproduce, draw, join to hardmax",
        description="Train f(X) = vᵀXᵀsoftmax(XWz) by normalised gradient descent on W and on (K, Q) for many "
                    "synthetic problems at once, solve the Att-SVMs of the selected tokens (Tarzanagh et al. "
                    "2023, arXiv 2308.16898), and write correlation curves, the 2-D pictures, the join to "
                    "hardmax attention and (with --imdb-run) the same questions on a trained classifier's tokens.",
    )
    p.add_argument("--seeds", type=int, default=100, help="synthetic problems, run as one batch (default 100)")
    p.add_argument("--iterations", type=int, default=2000, help="gradient steps (default 2000)")
    p.add_argument("--n", type=int, default=6, help="inputs per problem (default 6)")
    p.add_argument("--T", type=int, default=8, help="tokens per input (default 8)")
    p.add_argument("--d", type=int, default=10, help="token dimension (default 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the problems and initial parameters (default 0)")
    p.add_argument("--join-seeds", type=int, default=20,
                   help="seeds of the self-attention run used for the hardmax join (default 20; 0 skips it)")
    p.add_argument("--out", type=Path, default=Path("runs/svm"), metavar="DIR",
                   help="output folder for report.md, results.json and figures (default runs/svm)")
    p.add_argument("--imdb-run", type=Path, metavar="RUN_DIR",
                   help="a trained classifier's run directory (hardmax train): also run the IMDb join")
    p.add_argument("--data", metavar="PATH", help="IMDb data for --imdb-run (default: $HARDMAX_IMDB, cache)")
    p.add_argument("--reviews", type=int, default=200, help="test reviews of the IMDb join (default 200)")
    p.add_argument("--imdb-iterations", type=int, default=1000,
                   help="descent steps of the IMDb join (default 1000)")
    p.add_argument("--no-figures", dest="figures", action="store_false", help="skip the figures")


def run_svm(args: argparse.Namespace) -> int:
    import dataclasses
    import time

    from hardmax.cli.output import jsonable, say
    from hardmax.experiments.svm import (
        CURVES,
        SyntheticConfig,
        imdb_join,
        join_hardmax,
        render_report,
        run_plane,
        run_synthetic,
    )
    from hardmax.io import write_json, write_text

    if args.reviews < 2:
        raise ValueError(f"--reviews must be ≥ 2, got {args.reviews}")
    if args.imdb_iterations < 1:
        raise ValueError(f"--imdb-iterations must be ≥ 1, got {args.imdb_iterations}")
    if args.join_seeds < 0:
        raise ValueError(f"--join-seeds must be ≥ 0, got {args.join_seeds}")
    start = time.perf_counter()
    config = SyntheticConfig(n=args.n, T=args.T, d=args.d, seeds=args.seeds, iterations=args.iterations, seed=args.seed)
    say(f"synthetic: {config.seeds} seeds, n = {config.n}, T = {config.T}, d = {config.d}, {config.iterations} steps")
    synthetic = run_synthetic(config)
    say(f"descent {synthetic.seconds['descent']:.1f} s, {int(synthetic.seconds['solves'])} SVM solves "
        f"{synthetic.seconds['svm']:.1f} s")
    join = None
    if args.join_seeds:
        join_run = run_synthetic(dataclasses.replace(config, seeds=args.join_seeds, self_attention=True))
        join = join_hardmax(join_run)
        say(f"join to hardmax (self-attention, {args.join_seeds} seeds): {time.perf_counter() - start:.1f} s so far")
    imdb = None
    if args.imdb_run is not None:
        from hardmax.training import load_run

        run = load_run(args.imdb_run)
        data = run.load_data(args.data)
        imdb = imdb_join(run, data.test, reviews=args.reviews, iterations=args.imdb_iterations, seed=args.seed)
        say(f"IMDb join: {imdb.reviews} reviews in {imdb.seconds:.1f} s")
    command = "hardmax svm " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                                        if k in ("seeds", "iterations", "imdb_run", "imdb_iterations") and v is not None
                                        and (k != "imdb_iterations" or args.imdb_run is not None))
    report = render_report(synthetic, join, imdb, command=command)
    written = []
    if args.figures:
        from hardmax.plots import save_figure
        from hardmax.plots.svm import plot_correlations, plot_plane

        written += save_figure(plot_correlations(synthetic), args.out / "svm_correlation", close=True)
        for T in (3, 5):
            written += save_figure(plot_plane(run_plane(T)), args.out / f"svm_plane_T{T}", close=True)
        report += "\n![correlations](svm_correlation.png)\n\n![T = 3](svm_plane_T3.png) ![T = 5](svm_plane_T5.png)\n"
    print(report)
    curves = {label: {"mean": synthetic.curves[label].mean(0), "std": synthetic.curves[label].std(0)}
              for label in CURVES}
    written += [write_text(args.out / "report.md", report),
                write_json(args.out / "results.json", {
                    "config": jsonable(config), "seconds": synthetic.seconds,
                    "iterations": jsonable(synthetic.iterations), "curves": jsonable(curves),
                    "join": None if join is None else jsonable(join),
                    "imdb": None if imdb is None else jsonable(imdb)})]
    say(f"wrote {len(written)} files to {args.out}/ in {time.perf_counter() - start:.1f} s")
    return 0
