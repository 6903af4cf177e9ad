"""CRATE blocks against the paper's hardmax layer on IMDb: accuracy, compression, sparsity, speed.

    HARDMAX_IMDB=... nice -n 10 python scripts/crate.py [--dims 2 4 8 16] [--layers 8] [--epochs 4]
        [--limit 5000] [--out runs/crate] [--report results]

For each d, trains `hardmax train`'s pipeline (`hardmax.training.train`: Adam, softmax attention,
model chosen on validation under exact hardmax) on the same data and settings for the paper's
classifier (`--layer hardmax`, lr 1e-2) and CRATE blocks (`--layer crate`: one head unless --crate-heads, the
reference code's pre-LayerNorms, η = λ = 0.1; lr 1e-3, as at 1e-2 CRATE stays at chance). `--kinds`
runs one of the two (OUT/crate_<kinds>.json). Data: `hardmax reproduce --quick`'s subset by default
(the first 5,000 reviews of each source split, min_count 2; 4,500 train / 500 validation / 5,000 test).
Measures, on 1,000 test reviews: test accuracy (exact hardmax and softmax), training speed (median
reviews/s over epochs), and for CRATE the compression R^c(Z^ℓ | U^ℓ) at each block's input and the
fraction of exact zeros after each ISTA step, at initialisation (same seed) and trained; for the
hardmax model the scale-free rate R̂ of the tokens per layer. Writes OUT/crate_<kinds>.{json,md}, and
with --report also REPORT/rate_<kinds>.{json,md} and REPORT/figures/rate_crate.png.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import run_and_report  # noqa: E402

from hardmax.data import DataConfig, load_imdb  # noqa: E402
from hardmax.dynamics import Hardmax  # noqa: E402
from hardmax.experiments.rate import crate_measures, layer_rates  # noqa: E402
from hardmax.io import write_json, write_text  # noqa: E402
from hardmax.models import CrateBlocks, ModelConfig  # noqa: E402
from hardmax.plots import save_figure  # noqa: E402
from hardmax.plots.rate import plot_crate_measures  # noqa: E402
from hardmax.training import TrainConfig, evaluate, initial_model, train  # noqa: E402

EPS = 0.5  # distortion ε of every rate


def _table(rows: list[dict]) -> str:
    lines = ["| d | layer | test acc. (hardmax) | test acc. (softmax) | reviews/s | R^c first → last block "
             "(init) | R^c first → last block (trained) | non-zero after ISTA, last block (init → trained) | "
             "R̂ last / R̂ 0 |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["layer"] == "crate":
            ci, ct = r["init"]["compression"], r["trained"]["compression"]
            zi, zt = r["init"]["sparsity"][-1], r["trained"]["sparsity"][-1]
            crate = f"{ci[0]:.2f} → {ci[-1]:.2f} | {ct[0]:.2f} → {ct[-1]:.2f} | {1 - zi:.3f} → {1 - zt:.3f} | -"
        else:
            crate = f"- | - | - | {r['rate_scaled'][-1] / r['rate_scaled'][0]:.3f}"
        layer = f"crate (K = {r['crate_heads']})" if r.get("crate_heads") else r["layer"]
        lines.append(f"| {r['d']} | {layer} | {r['accuracy_hardmax']:.4f} | {r['accuracy_softmax']:.4f} | "
                     f"{r['reviews_per_second']:,.0f} | {crate} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("HARDMAX_IMDB"))
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2, help="learning rate of the hardmax model (the paper's)")
    parser.add_argument("--crate-lr", type=float, default=1e-3,
                        help="learning rate of CRATE (at 1e-2 it stays at chance on IMDb and on the test corpus)")
    parser.add_argument("--crate-heads", type=int, help="CRATE heads K (default: the model's, one)")
    parser.add_argument("--kinds", nargs="+", choices=("hardmax", "crate"), default=["hardmax", "crate"])
    parser.add_argument("--limit", type=int, default=5000, help="reviews per source split (0 = all)")
    parser.add_argument("--measure", type=int, default=1000, help="test reviews measured")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", default="runs/crate")
    parser.add_argument("--report", help="also write REPORT/rate_crate.{json,md} and REPORT/figures/rate_crate.png")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_imdb(DataConfig(path=args.data, limit=args.limit or None, min_count=2), progress=False)
    test = data.test
    rows = torch.randperm(len(test), generator=torch.Generator().manual_seed(0))[:args.measure]
    ids, mask, labels = test.ids[rows], test.mask[rows], test.labels[rows]
    measures = {}

    def run(item: tuple[int, str]) -> dict:
        d, layer = item
        crate = None if layer == "hardmax" else CrateBlocks() if args.crate_heads is None \
            else CrateBlocks(heads=args.crate_heads)
        model_config = ModelConfig(vocab_size=len(data.vocab), d=d, layers=args.layers, crate=crate)
        lr = args.lr if layer == "hardmax" else args.crate_lr
        # CRATE's heads run softmax at β = 1/√p (the reference code's temperature), far from the hardmax limit:
        # its epoch is chosen under the attention it is meant to run with.
        train_config = TrainConfig(epochs=args.epochs, lr=lr, checkpoint_every=1000,
                                   select_on="hardmax" if layer == "hardmax" else "softmax")
        heads = f"-k{crate.heads}" if crate is not None else ""
        run_dir = Path(args.out) / f"{layer}{d}{heads}-lr{lr:g}"
        initial = initial_model(model_config, train_config)
        result = train(data.train, data.val, model_config=model_config, train_config=train_config,
                       run_dir=run_dir, vocab=data.vocab, progress=False, data_info=data.info(),
                       resume=(run_dir / "checkpoint.safetensors").exists())
        model = result.model.eval()
        evaluation = evaluate(model, test)
        speed = statistics.median(h.train_reviews_per_second for h in result.history)
        row = {"d": d, "layer": layer, "crate_heads": None if crate is None else crate.heads, "layers": args.layers,
               "lr": lr, "epochs": args.epochs,
               "accuracy_hardmax": evaluation.accuracy_hardmax,
               "accuracy_softmax": evaluation.accuracy_softmax, "reviews_per_second": speed,
               "best_epoch": result.best_epoch, "train_reviews": len(data.train), "test_reviews": len(test)}
        if layer == "crate":
            before, after = (crate_measures(m, ids, mask, eps=EPS) for m in (initial, model))
            row["init"], row["trained"] = vars(before), vars(after)
            measures[f"d = {d}, init"], measures[f"d = {d}, trained"] = before, after
        else:
            with torch.no_grad():
                rates = layer_rates(model.trace(ids, mask, Hardmax()).trajectory, EPS, labels=labels)
            row["rate_scaled"], row["reduction"] = rates.rate_scaled_mean, rates.reduction
        return row

    items = [(d, layer) for layer in args.kinds for d in args.dims]
    results = run_and_report(items, run, _table, args.out, "crate_" + "_".join(args.kinds))
    if args.report:
        report = Path(args.report)
        stem = "rate_" + "_".join(args.kinds)
        write_json(report / f"{stem}.json", results)
        write_text(report / f"{stem}.md", _table(results) + "\n")
        if measures:
            save_figure(plot_crate_measures(measures), report / "figures" / "rate_crate", formats=("png",), close=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
