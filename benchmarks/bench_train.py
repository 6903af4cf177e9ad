"""Throughput of the sentiment classifier: training steps and exact-hardmax evaluation.

    python benchmarks/bench_train.py [--data PATH] [--d 16] [--layer hardmax|crate] [--batches 100] [--json OUT]

Training: reviews/s of softmax forward + backward + Adam step on real IMDb batches (the batches an
epoch of `hardmax train` uses: bucketed by length, word dropout as configured), after a warm-up.
Evaluation: seconds for exact hardmax (and softmax) predictions on the whole test set. The model
weights are random: speed does not depend on training, except through the number of ties (none
here). Targets of issue #3: ≥ 2,000 reviews/s for d = 16 training, < 5 s for the 25k test set.
`--layer crate` times the CRATE classifier of `hardmax train --layer crate` the same way (issue #15:
≥ 1,000 reviews/s for d = 16, 8 blocks).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F

from hardmax.data import DataConfig, load_imdb
from hardmax.dynamics import Hardmax
from hardmax.io import write_json
from hardmax.models import CrateBlocks, ModelConfig, build_model
from hardmax.training import TrainConfig, epoch_batches, left_align, predict, word_dropout


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("HARDMAX_IMDB"), help="IMDb archive/directory/CSV")
    parser.add_argument("--d", type=int, nargs="+", default=[16])
    parser.add_argument("--layer", choices=("hardmax", "crate"), default="hardmax",
                        help="the paper's shared hardmax layer or CRATE blocks")
    parser.add_argument("--crate-heads", type=int, help="CRATE heads K (default: one)")
    parser.add_argument("--batches", type=int, default=100, help="training batches timed per d")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--limit", type=int, help="use only N reviews per split (smoke runs)")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_imdb(DataConfig(path=args.data, limit=args.limit), progress=False)
    config = TrainConfig()
    tr = data.train
    batches = epoch_batches(tr.lengths, batch_size=config.batch_size, seed=0, epoch=0, bucket=config.bucket)
    if args.layer != "crate" and args.crate_heads is not None:
        parser.error("--crate-heads applies to --layer crate only")
    crate = None if args.layer == "hardmax" else CrateBlocks() if args.crate_heads is None \
        else CrateBlocks(heads=args.crate_heads)
    rows_out = []
    for d in args.d:
        torch.manual_seed(0)
        model = build_model(ModelConfig(vocab_size=len(data.vocab), d=d, crate=crate))
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)

        def step(b: int, model: torch.nn.Module = model, opt: torch.optim.Optimizer = opt) -> int:
            rows = batches[b % len(batches)]
            ids, mask = left_align(tr.ids[rows], tr.mask[rows], int(tr.lengths[rows].max()))
            mask = word_dropout(mask, config.word_dropout, seed=0, epoch=0, batch=b)
            loss = F.binary_cross_entropy_with_logits(model(ids, mask), tr.labels[rows].float())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
            opt.step()
            return len(rows)

        for b in range(10):
            step(b)
        t0 = time.perf_counter()
        n = sum(step(10 + b) for b in range(args.batches))
        train_rate = n / (time.perf_counter() - t0)
        test = data.test
        predict(model, test.ids[:512], test.mask[:512], rule=Hardmax())  # warm-up
        t0 = time.perf_counter()
        predict(model, test.ids, test.mask, rule=Hardmax())
        hard_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        predict(model, test.ids, test.mask, rule=None)
        soft_s = time.perf_counter() - t0
        rows_out.append({"d": d, "train_reviews_per_second": train_rate, "test_reviews": len(test),
                         "hardmax_test_seconds": hard_s, "softmax_test_seconds": soft_s})
    print(f"layer: {args.layer}" + (f", {args.crate_heads} head(s)" if args.crate_heads else ""))
    print(f"{'d':>3} | training (reviews/s) | hardmax on {len(data.test)} test reviews (s) | softmax (s)")
    for r in rows_out:
        print(f"{r['d']:>3} | {r['train_reviews_per_second']:>20.0f} | {r['hardmax_test_seconds']:>33.2f} | "
              f"{r['softmax_test_seconds']:.2f}")
    result = {"layer": args.layer, "crate_heads": args.crate_heads, "threads": args.threads,
              "torch": torch.__version__, "rows": rows_out}
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
