"""The long-context sweep's cost (issue #43: its largest cell, n = 4,096, under 60 s on this machine), in one run.

- the largest cell of the sweep: one layer at β = γ log n of n = 4,096 almost-simplex tokens in R^64
  (`long_context_cell`, time 0), and the sphere flow of the same tokens to t = 4 (16 RK4 steps of 0.25): the
  deepest cell of docs/claims/long_context.md is half of it (8 steps of 0.5);
- a small sweep through `hardmax.sweep` (task `long_context`, one serial worker): n = 64 … 1,024 × 6 γ, one layer.

    python benchmarks/bench_long_context.py            # the issue's sizes (about a minute)
    python benchmarks/bench_long_context.py --quick    # n = 1,024, a smoke run

Prints a Markdown table (the target beside each figure); --json writes the figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import tempfile
import time
from pathlib import Path

import torch

from hardmax.experiments.long_context import long_context_cell, transition
from hardmax.sweep import read_table, sweep


def cell(n: int, time_: float, dt: float) -> dict:
    long_context_cell(n=64, gamma=2.0, time=time_, dt=dt)  # compiled once (cached after)
    start = time.perf_counter()
    c = long_context_cell(n=n, gamma=2.0, d=64, time=time_, dt=dt)
    return {"n": n, "d": 64, "time": time_, "dt": dt, "engine": c.engine, "seconds": time.perf_counter() - start,
            "angle_ratio": c.angle_ratio}


def small_sweep(ns: list[int], gammas: list[float]) -> dict:
    with tempfile.TemporaryDirectory() as out, concurrent.futures.ThreadPoolExecutor(1) as ex:
        start = time.perf_counter()
        sweep("long_context", {"n": ns, "gamma": gammas, "seed": [0]}, out=out, executor=ex, progress=False)
        seconds = time.perf_counter() - start
        found = transition(read_table(out))
    return {"cells": len(ns) * len(gammas), "seconds": seconds,
            "gamma_c": {str(n): g for n, g in zip(found.ns, found.gamma, strict=True)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 1,024 for the largest cell; a smaller sweep")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()
    n = 1024 if args.quick else 4096
    ns = [64, 128] if args.quick else [64, 128, 256, 512, 1024]
    gammas = [1.0, 1.4, 1.8, 2.2, 2.6, 3.0]
    results = {"threads": torch.get_num_threads(), "layer": cell(n, 0.0, 0.25), "flow": cell(n, 4.0, 0.25),
               "sweep": small_sweep(ns, gammas)}
    print(f"threads: {results['threads']}\n")
    print("| case | engine | time | target |")
    print("|---|---|---|---|")
    layer, flow, sw = results["layer"], results["flow"], results["sweep"]
    print(f"| one layer, n = {layer['n']:,}, d = 64 | {layer['engine']} | {layer['seconds']:.2f} s | < 60 s |")
    print(f"| sphere flow to t = 4, n = {flow['n']:,}, d = 64, 16 RK4 steps | {flow['engine']} | "
          f"{flow['seconds']:.1f} s | < 60 s |")
    print(f"| sweep, n = {ns[0]} … {ns[-1]:,} × {len(gammas)} γ, one layer ({sw['cells']} cells, one worker) | "
          f"long_context | {sw['seconds']:.1f} s | – |")
    print("\nγ_c(n) of that sweep (λ = 1/2): " + ", ".join(f"n = {k}: {v:.2f}" for k, v in sw["gamma_c"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
