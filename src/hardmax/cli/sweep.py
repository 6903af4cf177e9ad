"""`hardmax sweep`: a parameter grid from a TOML spec, on a local Dask cluster or any scheduler, resumable (thin: the
work is `hardmax.sweep.sweep`; heavy imports happen inside `run_sweep`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hardmax.cli.options import HelpFormatter

__all__ = ["add_scheduler_options", "add_sweep", "run_sweep", "sweep_options"]

# --------------------------------------------------------------------------------------------
# --scheduler / --workers, for every command whose grid runs as a sweep
# --------------------------------------------------------------------------------------------


def add_scheduler_options(p: argparse.ArgumentParser, what: str) -> None:
    """`--scheduler ADDRESS|local` and `--workers N` on the parser `p` of a command that runs `what` as a sweep."""
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help=f"run {what} as a resumable sweep (rerun the command to finish an interrupted one) on this "
                        "Dask scheduler (tcp://host:8786); 'local' for a local cluster of processes (default: no "
                        "sweep, all in this process)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes of the local cluster (--scheduler local; default: one per core)")


def sweep_options(args: argparse.Namespace, *, local_by_default: bool = False) -> dict:
    """The `hardmax.sweep.sweep` keywords of `--scheduler` and `--workers` ({"scheduler", "workers"}); ValueError (one
    line) for --workers below 1, or without a local cluster (`local_by_default`: no --scheduler means one; otherwise
    the command runs in its own process then, and --workers needs --scheduler local)."""
    local = args.scheduler == "local" or (args.scheduler is None and local_by_default)
    if args.workers is not None and not local:
        raise ValueError("--workers is the size of a local cluster: give it with --scheduler local, not "
                         + ("without --scheduler" if args.scheduler is None else "with a scheduler's address"))
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be ≥ 1, got {args.workers}")
    return {"scheduler": None if args.scheduler in (None, "local") else args.scheduler, "workers": args.workers}


# --------------------------------------------------------------------------------------------
# hardmax sweep
# --------------------------------------------------------------------------------------------


def add_sweep(subparsers) -> None:
    """Register `hardmax sweep` and its options on `subparsers`."""
    p = subparsers.add_parser(
        "sweep", help="a parameter grid (TOML spec) on Dask: a local cluster or any scheduler, resumable",
        formatter_class=HelpFormatter,
        description="Run a task on every cell of a grid, rows appended to a Parquet table in OUT as cells finish. "
                    "The spec names the task and its grid:\n\n"
                    '  task = "phase_cell"\n  [grid]\n  beta = [0.5, 1, 2, 4]\n  starts = [200]\n\n'
                    "(or [[cells]] tables, one per cell). Without --scheduler the cells run on a local Dask cluster "
                    "of --workers processes; with --scheduler tcp://HOST:8786 on that cluster (dask-jobqueue, "
                    "Kubernetes, ...). Rerun the same command to finish an interrupted sweep: only the missing "
                    "cells run. Tasks (hardmax.sweep.TASKS): phase_cell, simulate, solve, rate, long_context, "
                    "att_svm_seed, att_svm_solve, train_candidate, noop, spin.\n\n"
                    "examples: hardmax sweep grid.toml --out runs/sweep;  hardmax sweep --status runs/sweep")
    p.add_argument("spec", nargs="?", type=Path, metavar="SPEC.toml", help="the sweep's spec")
    p.add_argument("--out", type=Path, metavar="DIR", help="the sweep's folder (its Parquet table)")
    p.add_argument("--status", type=Path, metavar="DIR", help="say what a sweep folder holds, and stop")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a Dask scheduler's address, tcp://host:8786 (default, or 'local': a local cluster)")
    p.add_argument("--workers", type=int, metavar="N", help="processes of the local cluster (default: one per core)")
    p.add_argument("--batch", type=int, metavar="K", help="cells per task (default: chosen from the grid's size)")


def run_sweep(args: argparse.Namespace) -> int:
    """Run `hardmax sweep`; 0 when every cell ran (1 when some failed: they are in the table with their error)."""
    from hardmax.sweep import load_spec, sweep, sweep_status

    if args.status is not None:
        if args.spec is not None or args.out is not None:
            raise ValueError("--status DIR stands alone (no spec, no --out)")
        status = sweep_status(args.status)
        print(f"{args.status}: task {status['task']}, {status['cells']:,} cells: {status['done']:,} done, "
              f"{status['failed']:,} failed, {status['remaining']:,} remaining")
        for error in status["errors"]:
            print(f"  failed: {error}")
        return 0
    if args.spec is None or args.out is None:
        raise ValueError("give a spec and --out DIR (or --status DIR)")
    where = sweep_options(args, local_by_default=True)
    if args.batch is not None and args.batch < 1:
        raise ValueError(f"--batch must be ≥ 1, got {args.batch}")
    task, cells, options = load_spec(args.spec)
    if where["workers"] is None and where["scheduler"] is None:
        where["workers"] = options.get("workers")
    batch = args.batch if args.batch is not None else options.get("batch")
    result = sweep(task, cells, out=args.out, batch=batch, **where)
    print(result.describe())
    print(json.dumps({"cells": result.cells, "done": result.done, "failed": result.failed, "ran": result.ran,
                      "skipped": result.skipped}))
    return 1 if result.failed else 0
