"""Accuracy experiments: train variants of the sentiment model and tabulate validation and test accuracy.

    python scripts/sweep.py --d 16 --variants baseline random-val wd1e-5 --out runs/sweep

Each variant changes a few data or training settings (see VARIANTS). Every run is selected on
its validation split (never on test), like `hardmax train`; the table then shows the selected epoch,
its validation accuracy and the test accuracy under exact hardmax, so one can see which settings
generalise and whether validation ranks them the way the test set does. Finished runs are reused
(same settings), interrupted ones resumed. Results go to OUT/sweep.md and OUT/sweep.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

import torch
from _report import run_and_report

from hardmax.data import DataConfig, load_imdb
from hardmax.experiments.pipeline import train_or_load
from hardmax.experiments.reproduce import ReproduceConfig
from hardmax.training import TrainConfig, evaluate

# name -> ({DataConfig overrides}, {TrainConfig overrides})
VARIANTS: dict[str, tuple[dict, dict]] = {
    "baseline": ({}, {}),
    "random-val": ({"val_split": "random"}, {}),
    "wd1e-5": ({}, {"weight_decay": 1e-5}),
    "wd1e-6": ({}, {"weight_decay": 1e-6}),
    "dropout0.5": ({}, {"word_dropout": 0.5}),
    "min-count10": ({"min_count": 10}, {}),
    "min-count2": ({"min_count": 2}, {}),
    "lr3e-3": ({}, {"lr": 3e-3}),
    "lr1e-3": ({}, {"lr": 1e-3}),
    "lr1e-3-long": ({}, {"lr": 1e-3, "epochs": 30}),
    "lr3e-3-long": ({}, {"lr": 3e-3, "epochs": 30}),
    "wd1e-4": ({}, {"weight_decay": 1e-4}),
    "dropout0.1": ({}, {"word_dropout": 0.1}),
    "min-count20": ({"min_count": 20}, {}),
    "head-tail": ({"truncation": "head_tail"}, {}),
    "head": ({"truncation": "head"}, {}),
    "stop-sklearn": ({"stopwords": "sklearn"}, {}),
    "batch128": ({}, {"batch_size": 128}),
}


def run_variant(name: str, d: int, args: argparse.Namespace) -> dict:
    data_over, train_over = VARIANTS[name]
    data = load_imdb(DataConfig(path=args.data, **{"limit": args.limit, **data_over}), progress=False)
    train_config = dataclasses.replace(TrainConfig(), **train_over)
    if args.epochs is not None:  # smoke runs
        train_config = dataclasses.replace(train_config, epochs=args.epochs)
    config = ReproduceConfig(dims=(d,), out_dir=str(Path(args.out) / name), train=train_config,
                             progress=not args.quiet)
    t0 = time.perf_counter()
    trained = train_or_load(d, data, config)
    model, history, best_epoch = trained.model, trained.history, trained.best_epoch
    seconds = time.perf_counter() - t0
    test = evaluate(model, data.test)
    best = history[best_epoch - 1]
    return {"variant": name, "d": d, "best_epoch": best_epoch, "epochs_run": len(history),
            "val_hardmax": best.val_accuracy_hardmax, "test_hardmax": test.accuracy_hardmax,
            "test_softmax": test.accuracy_softmax, "agreement": test.agreement,
            "alpha": float(model.alpha.detach()), "train_seconds": seconds}


def table(rows: list[dict]) -> str:
    lines = ["| variant | d | selected epoch (of run) | val acc (hardmax) | test acc (hardmax) | test acc (softmax) "
             "| learned α |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        val = f"{r['val_hardmax']:.4f}" if r["val_hardmax"] is not None else "—"
        lines.append(f"| {r['variant']} | {r['d']} | {r['best_epoch']} ({r['epochs_run']}) | {val} | "
                     f"{r['test_hardmax']:.4f} | {r['test_softmax']:.4f} | {r['alpha']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("HARDMAX_IMDB"), help="IMDb archive/directory/CSV")
    parser.add_argument("--d", type=int, nargs="+", default=[16])
    parser.add_argument("--variants", nargs="+", default=["baseline"], choices=sorted(VARIANTS))
    parser.add_argument("--out", default="runs/sweep", help="directory for the runs and the table")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--limit", type=int, help="use only the first N reviews of each split (smoke runs)")
    parser.add_argument("--epochs", type=int, help="override every variant's maximum number of epochs")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    runs = [(name, d) for name in args.variants for d in args.d]
    return run_and_report(runs, lambda run: run_variant(*run, args), table, args.out, "sweep")


if __name__ == "__main__":
    main()
