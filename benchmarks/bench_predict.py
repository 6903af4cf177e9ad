"""`hardmax predict` on a file of texts (issue #28): texts per second at d = 16, end to end (read, clean, encode,
the hardmax pass with leaders, the probabilities, the CSV written), and the library call alone.

Texts are IMDb test reviews read from the archive (never copied into the repository: the file the command reads
lives in a temporary folder). A d = 16 run is trained first when none is given (5,000 reviews, 3 epochs).
The issue's target: ≥ 2,000 texts/s at d = 16 here. This script states it as met or not; it asserts nothing.

    .venv/bin/python benchmarks/bench_predict.py --data ../shared/data/aclImdb-labeled.tar.gz
    .venv/bin/python benchmarks/bench_predict.py --run runs/quick/d16 --texts 20000 --json results/bench_predict.json
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("HARDMAX_IMDB", "../shared/data/aclImdb-labeled.tar.gz"))
    parser.add_argument("--run", help="a trained d = 16 run (default: train one into a temporary folder)")
    parser.add_argument("--texts", type=int, default=10_000, help="texts predicted (default: 10,000)")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()

    from hardmax.cli import main as cli
    from hardmax.data import read_reviews
    from hardmax.explain import predict_texts
    from hardmax.training import load_run

    work = Path(tempfile.mkdtemp(prefix="bench_predict_"))
    run_dir = args.run
    if run_dir is None:
        run_dir = str(work / "d16")
        start = time.perf_counter()
        code = cli(["train", "--data", args.data, "--run", run_dir, "--d", "16", "--limit", "5000", "--epochs", "3",
                    "--min-count", "2"])
        if code:
            raise SystemExit(code)
        print(f"trained a d = 16 run on 5,000 reviews in {time.perf_counter() - start:.0f} s")
    reviews = read_reviews(args.data)
    test = [t for t, s in zip(reviews.texts, reviews.split, strict=True) if s == "test"][: args.texts]
    source = work / "texts.txt"
    source.write_text("\n".join(" ".join(t.split()) for t in test) + "\n", encoding="utf-8")

    run = load_run(run_dir)
    predict_texts(run, test[:64])  # warm-up: the compiled engine, the cleaning caches
    start = time.perf_counter()
    predictions = predict_texts(run, test, batch_size=2048)
    library = time.perf_counter() - start
    start = time.perf_counter()
    code = cli(["predict", "--run", run_dir, str(source), "--out", str(work / "predictions.csv")])
    command = time.perf_counter() - start
    if code:
        raise SystemExit(code)
    rows = sum(1 for _ in (work / "predictions.csv").open(encoding="utf-8")) - 1
    threads = torch.get_num_threads()
    print(f"\n{len(test):,} IMDb test reviews, d = {run.model_config.d}, {threads} threads")
    print("| measure | figure | target |\n|---|---|---|")
    print(f"| `predict_texts` (library) | {len(test) / library:,.0f} texts/s ({library:.2f} s) | |")
    print(f"| `hardmax predict` end to end, in-process (run load, read, predict, CSV) | "
          f"{len(test) / command:,.0f} texts/s ({command:.2f} s, {rows:,} rows) | ≥ 2,000 texts/s "
          f"{'✓' if len(test) / command >= 2000 else '✗'} |")
    agree = sum(p.label == ("positive" if r else "negative") for p, r in zip(predictions, reviews.labels[
        [i for i, s in enumerate(reviews.split) if s == "test"][: args.texts]], strict=True)) / len(test)
    print(f"accuracy of these predictions: {agree:.3f}")
    if args.json:
        from hardmax.io import write_json

        write_json(args.json, {"texts": len(test), "d": run.model_config.d, "threads": threads,
                               "library_texts_per_s": len(test) / library, "command_texts_per_s": len(test) / command,
                               "accuracy": agree})


if __name__ == "__main__":
    main()
