"""`hardmax svm`: the Att-SVM view of attention, reproduced (synthetic runs, 2-D pictures, join to hardmax, IMDb)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hardmax.cli.sweep import add_scheduler_options, sweep_options

__all__ = ["add_svm", "run_svm"]


def add_svm(subparsers) -> None:
    """Register `hardmax svm` and its options on `subparsers`."""
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
    add_scheduler_options(p, "the Att-SVMs of the seeds (one cell per seed, into OUT/sweep and OUT/sweep_join; the "
                             "descent stays one batch here)")


# Integer options and their smallest values; --seed is bounded on both sides (`_check_options`).
_SMALLEST = {"seeds": 1, "iterations": 1, "n": 1, "T": 2, "d": 1, "join_seeds": 0, "reviews": 2, "imdb_iterations": 1}
_MAX_SEED = 2**63 - 1


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_options(args: argparse.Namespace) -> None:
    """Every integer option in range and --out usable, before anything is computed (one line each)."""
    for name, smallest in _SMALLEST.items():
        if getattr(args, name) < smallest:
            raise ValueError(f"{_flag(name)} must be ≥ {smallest}, got {getattr(args, name)}")
    if not 0 <= args.seed <= _MAX_SEED:
        raise ValueError(f"--seed must lie in [0, 2**63 − 1] (a 64-bit generator seed), got {args.seed}")
    _check_out(args.out)


def _check_out(out: Path) -> None:
    """--out must be a folder or not exist yet, and its nearest existing parent a writable folder."""
    import os

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is an existing file, not a folder; choose a folder")
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--out {out} cannot be created: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out} cannot be written: {parent} is not a writable folder")


def _load_imdb_run(args: argparse.Namespace):
    """The --imdb-run run and its data, checked before any synthetic work: a CRATE run is refused."""
    from hardmax.training import load_run

    run = load_run(args.imdb_run)
    if run.model_config.layer != "hardmax":
        raise ValueError(f"--imdb-run {args.imdb_run} is a {run.model_config.layer!r} run (trained with --layer "
                         f"{run.model_config.layer}): the IMDb join needs the paper's hardmax layer (a run trained "
                         "without --layer crate)")
    return run, run.load_data(args.data)


def _svms_by_sweep(folder: Path, where: dict):
    """A `run_synthetic(svms=...)` that solves each seed's Att-SVMs as a sweep cell (`att_svm_solve`) into `folder` —
    rerun to finish an interrupted one — and reads them back from its table, seed by seed."""
    def svms(config, selections):
        import torch

        from hardmax.experiments.svm import SeedSVMs
        from hardmax.sweep import TASKS, cells, key, read_table, sweep

        task = TASKS["att_svm_solve"]
        grid = cells(task, [{"n": config.n, "T": config.T, "d": config.d, "seeds": config.seeds, "seed": config.seed,
                             "self_attention": config.self_attention, "index": s,
                             **{f"selection_{p}": ",".join(map(str, sel[s].tolist())) for p, sel in selections.items()}}
                            for s in range(config.seeds)])
        sweep(task, grid, out=folder, **where)
        rows = {row["key"]: row for row in read_table(folder).to_pylist()}
        for cell in grid:
            row = rows[key(task, cell)]
            if row["error"] is not None:
                raise ValueError(f"the Att-SVMs of seed {cell['index']} raised in the sweep ({row['error']})")
            solved = [(p, norm) for p in selections for norm in ("fro", "nuc") if row.get(f"W_{p}_{norm}") is not None]
            yield SeedSVMs(
                W={k: torch.tensor(row[f"W_{k[0]}_{k[1]}"], dtype=torch.float64).reshape(config.d, config.d)
                   for k in solved},
                support={k: torch.tensor(row[f"support_{k[0]}_{k[1]}"]).reshape(config.n, config.T) for k in solved},
                solves=row["solves"], failure=row["failure"])

    return svms


def run_svm(args: argparse.Namespace) -> int:
    """Run `hardmax svm` with the parsed `args`; returns the exit code."""
    _check_options(args)
    where = sweep_options(args)
    import dataclasses
    import time

    from hardmax.cli.output import say
    from hardmax.experiments.svm import (
        CURVES,
        NoSolvableSeedError,
        SyntheticConfig,
        imdb_join,
        join_hardmax,
        render_report,
        run_plane,
        run_synthetic,
        synthetic_memory,
    )
    from hardmax.io import to_jsonable, write_json, write_text
    from hardmax.memory import require_memory

    start = time.perf_counter()
    config = SyntheticConfig(n=args.n, T=args.T, d=args.d, seeds=args.seeds, iterations=args.iterations, seed=args.seed)
    join_config = dataclasses.replace(config, seeds=args.join_seeds, self_attention=True) if args.join_seeds else None
    # The join run follows the main run, whose result is kept: both at once.
    need = synthetic_memory(config) + (synthetic_memory(join_config) if join_config else 0.0)
    require_memory(need, f"--seeds {args.seeds} with --n {args.n} --T {args.T} --d {args.d} --iterations "
                         f"{args.iterations} --join-seeds {args.join_seeds} (the problems, and the iterates W_k of "
                         "both parameterisations kept for the curves)")
    imdb_run = _load_imdb_run(args) if args.imdb_run is not None else None
    say(f"synthetic: {config.seeds} seeds, n = {config.n}, T = {config.T}, d = {config.d}, {config.iterations} steps")
    by_sweep = args.scheduler is not None
    synthetic = run_synthetic(config, svms=_svms_by_sweep(args.out / "sweep", where) if by_sweep else None)
    for line in synthetic.failure_lines():
        say(f"not reported: {line}")
    say(f"descent {synthetic.seconds['descent']:.1f} s, {int(synthetic.seconds['solves'])} SVM solves "
        f"{synthetic.seconds['svm']:.1f} s; {synthetic.reported} of {config.seeds} seeds reported")
    join = join_skipped = None
    if join_config is not None:
        try:
            join = join_hardmax(run_synthetic(join_config, svms=_svms_by_sweep(args.out / "sweep_join", where)
                                              if by_sweep else None))
        except NoSolvableSeedError as e:
            join_skipped = str(e)
            say(f"join to hardmax skipped: {e}")
        else:
            say(f"join to hardmax (self-attention, {args.join_seeds} seeds): {time.perf_counter() - start:.1f} s "
                "so far")
    imdb = None
    if imdb_run is not None:
        run, data = imdb_run
        imdb = imdb_join(run, data.test, reviews=args.reviews, iterations=args.imdb_iterations, seed=args.seed)
        say(f"IMDb join: {imdb.reviews} reviews in {imdb.seconds:.1f} s")
    command = "hardmax svm " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                                        if k in ("seeds", "iterations", "imdb_run", "imdb_iterations") and v is not None
                                        and (k != "imdb_iterations" or args.imdb_run is not None))
    report = render_report(synthetic, join, imdb, command=command, join_skipped=join_skipped)
    written = []
    if args.figures:
        from hardmax.plots import save_figure
        from hardmax.plots.svm import plot_correlations, plot_plane

        written += save_figure(plot_correlations(synthetic), args.out / "svm_correlation", close=True)
        for T in (3, 5):
            written += save_figure(plot_plane(run_plane(T)), args.out / f"svm_plane_T{T}", close=True)
        report += "\n![correlations](svm_correlation.png)\n\n![T = 3](svm_plane_T3.png) ![T = 5](svm_plane_T5.png)\n"
    print(report)
    # With one reported seed there is no spread: std is null (torch's std of one value is NaN, with a warning).
    curves = {label: {"mean": synthetic.curves[label].mean(0),
                      "std": synthetic.curves[label].std(0) if synthetic.reported > 1 else None}
              for label in CURVES}
    written += [write_text(args.out / "report.md", report),
                write_json(args.out / "results.json", {
                    "config": to_jsonable(config), "seconds": synthetic.seconds,
                    "seeds_reported": to_jsonable(synthetic.seeds), "failed": len(synthetic.failures),
                    "failures": [{"seed": seed, "why": why} for seed, why in sorted(synthetic.failures.items())],
                    "iterations": to_jsonable(synthetic.iterations), "curves": to_jsonable(curves),
                    "join": None if join is None else to_jsonable(join), "join_skipped": join_skipped,
                    "imdb": None if imdb is None else to_jsonable(imdb)})]
    say(f"wrote {len(written)} files to {args.out}/ in {time.perf_counter() - start:.1f} s")
    return 0
