"""The compiled engines of issue #43 against the reference loop they are tested against, in one run.

- causal exact hardmax: the paper's layers under `Causal()` for n tokens over L layers (default n = 2,000, d = 2,
  500 layers: the issue's target, under 2 s here), on the causal kernel and on the reference loop (forced with
  `_engines.using`), with the largest difference of their trajectories (0: bit for bit).
- softmax flows: the phase diagram of `hardmax particles` (20 β × starts, n = 32, d = 3, 300 RK4 steps on the
  sphere, float64 and float32), solving time on the compiled softmax flows and on the reference loop.

    python benchmarks/bench_engines.py            # the issue's sizes (a few minutes: the reference loop is slow)
    python benchmarks/bench_engines.py --quick    # smaller, a smoke run

Prints a Markdown table; --json writes the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from hardmax.dynamics import Causal, Save, simulate
from hardmax.dynamics._engines import using
from hardmax.experiments.particles import phase_diagram


def causal(n: int, d: int, layers: int, seed: int = 0) -> dict:
    z = torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))
    simulate(z[:64], alpha=0.5, layers=3, mask=Causal())  # compiled once (cached after)
    start = time.perf_counter()
    fast = simulate(z, alpha=0.5, layers=layers, mask=Causal(), save=Save.final())
    fast_s = time.perf_counter() - start
    with using("reference"):
        start = time.perf_counter()
        slow = simulate(z, alpha=0.5, layers=layers, mask=Causal(), save=Save.final())
        slow_s = time.perf_counter() - start
    return {"n": n, "d": d, "layers": layers, "engine": fast.engine, "compiled_s": fast_s, "reference_s": slow_s,
            "max_difference": float((fast.tokens - slow.tokens).abs().max())}


def diagram(starts: int, dtype: torch.dtype) -> dict:
    betas = torch.linspace(0.0, 9.5, 20)
    phase_diagram(betas[:2], starts=4, n=32, d=3, steps=2, dtype=dtype)  # compiled once
    compiled = phase_diagram(betas, starts=starts, n=32, d=3, steps=300, dt=0.1, dtype=dtype)
    with using("reference"):
        reference = phase_diagram(betas, starts=starts, n=32, d=3, steps=300, dt=0.1, dtype=dtype)
    scale = 1000 / starts  # stated for the full diagram (20 × 1,000 starts)
    return {"dtype": str(dtype).removeprefix("torch."), "starts": starts,
            "compiled_solve_s": compiled.solve_seconds * scale, "compiled_total_s": compiled.seconds * scale,
            "reference_solve_s": reference.solve_seconds * scale,
            "single_cluster_difference": float((compiled.single - reference.single).abs().max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 500 × 100 layers; 50 starts per β")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()
    n, layers, starts = (500, 100, 50) if args.quick else (2000, 500, 200)
    results = {"threads": torch.get_num_threads(), "causal": causal(n, 2, layers),
               "diagram": [diagram(starts, dtype) for dtype in (torch.float64, torch.float32)]}
    c = results["causal"]
    print(f"threads: {results['threads']}\n")
    print("| case | compiled | reference loop | × | agreement |")
    print("|---|---|---|---|---|")
    print(f"| causal exact hardmax, n = {c['n']:,}, d = {c['d']}, {c['layers']} layers ({c['engine']}) | "
          f"{c['compiled_s']:.2f} s | {c['reference_s']:.1f} s | {c['reference_s'] / c['compiled_s']:.0f}× | "
          f"max |Δ| = {c['max_difference']:.1g} |")
    for row in results["diagram"]:
        print(f"| phase diagram, 20 β × 1,000 starts ({row['dtype']}, solving; measured on {row['starts']} starts) | "
              f"{row['compiled_solve_s']:.1f} s | {row['reference_solve_s']:.1f} s | "
              f"{row['reference_solve_s'] / row['compiled_solve_s']:.1f}× | "
              f"P(one cluster) max |Δ| = {row['single_cluster_difference']:.2g} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
