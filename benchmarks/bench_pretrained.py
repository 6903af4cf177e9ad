"""The three views on all-MiniLM-L6-v2 over IMDb reviews: what every per-layer and per-head measure adds to the
model's own forward pass with attentions, on the same batches; peak memory; the Att-SVM of one head on 200 queries.

    .venv/bin/python benchmarks/bench_pretrained.py            # 1,000 reviews at 128 tokens, batches of 32
    .venv/bin/python benchmarks/bench_pretrained.py --quick    # 64 reviews

Reviews from HARDMAX_IMDB or ../shared/data/aclImdb-labeled.tar.gz (`hardmax.data.source.read_reviews`), the first N
of a seeded shuffle. Times per phase: the forward pass alone (`output_attentions`, `output_hidden_states`), the record
(tokenisation, the same forward with hooks), the views (clustering, selection, coding). Target: record + views −
forward ≤ 1× forward; the Att-SVM (head space) of one head on 200 queries under 60 s. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

import numpy as np
import torch


def _reviews(n: int) -> list[str]:
    from hardmax.data.source import read_reviews

    default = Path(__file__).resolve().parents[2] / "shared/data/aclImdb-labeled.tar.gz"
    path = os.environ.get("HARDMAX_IMDB") or str(default)
    texts = read_reviews(path).texts
    order = np.random.default_rng(0).permutation(len(texts))[:n]
    return [str(texts[i]) for i in order]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 reviews")
    parser.add_argument("--reviews", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--svm-queries", type=int, default=200)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    n = 64 if args.quick else args.reviews
    from hardmax.pretrained import ViewConfig, clustering, coding, head_svm, load, record, selection, value_subspaces

    texts = _reviews(n)
    start = time.perf_counter()
    p = load()
    load_s = time.perf_counter() - start
    rss_model = _rss_mib()
    U = value_subspaces([p.family.weights(layer, p.heads) for layer in p.family.layers(p.model)])
    config = ViewConfig()
    forward = record_s = views_s = 0.0
    per_view = {"clustering": 0.0, "selection": 0.0, "coding": 0.0}
    first = None
    for s in range(0, n, args.batch_size):
        batch = texts[s:s + args.batch_size]
        enc = p.tokenizer(batch, truncation=True, max_length=args.max_length, padding=True, return_tensors="pt")
        t = time.perf_counter()
        with torch.no_grad():
            p.model(**enc, output_attentions=True, output_hidden_states=True)
        forward += time.perf_counter() - t
        t = time.perf_counter()
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = record(p, batch, max_length=args.max_length)
        record_s += time.perf_counter() - t
        for name, fn, extra in (("clustering", clustering, (config, len(p.tokenizer))), ("selection", selection, ()),
                                ("coding", coding, (U, config))):
            t = time.perf_counter()
            fn(r, *extra)
            per_view[name] += time.perf_counter() - t
        if first is None:
            first = r
        del r
    views_s = sum(per_view.values())
    overhead = (record_s + views_s - forward) / forward
    rss_peak = _rss_mib()
    t = time.perf_counter()
    svm = head_svm(p, first, 3, 4, queries=args.svm_queries)
    svm_s = time.perf_counter() - t
    figures = {"reviews": n, "batch_size": args.batch_size, "max_length": args.max_length, "load_s": load_s,
               "forward_s": forward, "record_s": record_s, "views_s": views_s, "per_view_s": per_view,
               "overhead_x_forward": overhead, "rss_after_load_mib": rss_model, "rss_peak_mib": rss_peak,
               "svm_queries": svm.queries, "svm_s": svm_s, "svm": svm.to_dict(), "threads": torch.get_num_threads()}
    print(f"MiniLM, {n} reviews at {args.max_length} tokens, batches of {args.batch_size}, "
          f"{torch.get_num_threads()} threads")
    print(f"  forward with attentions    {forward:8.2f} s")
    print(f"  record (hooks, tokenise)   {record_s:8.2f} s")
    print("  views                      " + f"{views_s:8.2f} s  ("
          + ", ".join(f"{k} {v:.2f}" for k, v in per_view.items()) + ")")
    print(f"  overhead (record + views − forward) / forward = {overhead:.2f}×")
    print(f"  peak RSS {rss_peak:.0f} MiB (after loading: {rss_model:.0f} MiB)")
    print(f"  Att-SVM layer 3 head 4, {svm.queries} queries: {svm_s:.1f} s, {svm.message}, correlation "
          f"{svm.correlation}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
