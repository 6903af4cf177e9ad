"""One configuration with many tokens over many layers (issue #25): the engines against a naive torch loop.

The researcher's shape: one sequence of n tokens in R^d, hundreds of layers (float64, α = 1/2, Gaussian
tokens). Prints, in one run and on one machine, so that ratios are meaningful:

- wall time of a naive torch loop of the same layer (dense scores, max with a tie tolerance, mean over the
  attention set: no exact tie rule), the compiled engine (the default) and the torch engine;
- each engine's time of the last stretch of layers against the first (does the cost per layer grow as the
  tokens cluster?), from two runs of `simulate` that end there;
- `check_theorem` on the run;
- scaling of the compiled engine in n (and in layers), with the fitted log-log slope.

The issue's targets (n = 200, d = 2, 500 layers): compiled ≤ 1× the naive loop, torch engine ≤ 3×, layers
400–500 ≤ 1.5× layers 1–100, `check_theorem` < 100 ms, n = 3,200 over 500 layers < 10 s. This script
measures where the library stands; it states each target as met or not, it does not assert them.

    .venv/bin/python benchmarks/bench_scale.py --quick            # a smoke run, ~20 s
    .venv/bin/python benchmarks/bench_scale.py --json out.json    # the issue's sizes (the torch engine at
                                                                  # n = 200 alone takes about a minute today)
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch

from hardmax.dynamics import simulate
from hardmax.theory import check_theorem


def naive_loop(z: torch.Tensor, *, alpha: float, layers: int, rtol: float = 1e-12) -> torch.Tensor:
    """The layer (1.1) as a plain torch loop over layers: scores, the near-maximisers, their mean. (n, d)."""
    gamma = alpha / (1 + alpha)
    for _ in range(layers):
        s = z @ z.T
        best = s.amax(dim=1, keepdim=True)
        members = (s >= best - rtol * best.abs()).to(z.dtype)
        z = z + gamma * (members @ z / members.sum(1, keepdim=True) - z)
    return z


def timed(run, repeats: int = 1) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def tokens(n: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((n, d)))


def late_over_early(engine: str, z: torch.Tensor, layers: int) -> tuple[float, float]:
    """(time of layers 1..layers/5, time of layers 4/5·layers..layers) of one engine, from cumulative runs."""
    fifth = max(1, layers // 5)
    t_early = timed(lambda: simulate(z, alpha=0.5, layers=fifth, engine=engine, store="final"))
    t_before = timed(lambda: simulate(z, alpha=0.5, layers=layers - fifth, engine=engine, store="final"))
    t_all = timed(lambda: simulate(z, alpha=0.5, layers=layers, engine=engine, store="final"))
    return t_early, max(t_all - t_before, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--json", help="also write the results as JSON")
    parser.add_argument("--skip-torch", action="store_true", help="leave out the torch engine (slow today)")
    args = parser.parse_args()
    n, d, layers = (60, 2, 120) if args.quick else (200, 2, 500)
    sizes = (50, 100, 200) if args.quick else (50, 100, 200, 400, 800, 1600, 3200)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    z = tokens(n, d)
    simulate(z[:8], alpha=0.5, layers=3)  # load the compiled kernel before timing
    results: dict = {"n": n, "d": d, "layers": layers, "threads": torch.get_num_threads()}
    results["naive_s"] = timed(lambda: naive_loop(z.clone(), alpha=0.5, layers=layers), repeats=3)
    results["compiled_s"] = timed(lambda: simulate(z, alpha=0.5, layers=layers), repeats=3)
    early, late = late_over_early("compiled", z, layers)
    results["compiled_late_over_early"] = late / early if early > 0 else math.nan
    if not args.skip_torch:
        results["torch_s"] = timed(lambda: simulate(z, alpha=0.5, layers=layers, engine="torch"))
        early, late = late_over_early("torch", z, layers)
        results["torch_late_over_early"] = late / early if early > 0 else math.nan
    run = simulate(z, alpha=0.5, layers=layers)
    results["check_theorem_s"] = timed(lambda: check_theorem(run))
    results["check_theorem_passed"] = check_theorem(run).passed
    scaling = {}
    for size in sizes:
        scaling[size] = timed(lambda size=size: simulate(tokens(size, d), alpha=0.5, layers=layers,
                                                          store="final"))
    logs = np.log(np.array(list(scaling))), np.log(np.array(list(scaling.values())))
    results["scaling_in_n"] = {str(k): v for k, v in scaling.items()}
    results["slope_in_n"] = float(np.polyfit(*logs, 1)[0])

    print(f"one configuration: n = {n}, d = {d}, {layers} layers, float64, {results['threads']} threads")
    print("| measure | figure | target |\n|---|---|---|")
    ratio = results["compiled_s"] / results["naive_s"]
    print(f"| naive torch loop (no exact ties) | {results['naive_s']:.3f} s | |")
    print(f"| compiled engine | {results['compiled_s']:.3f} s ({ratio:.1f}× the loop) | ≤ 1× "
          f"{'✓' if ratio <= 1 else '✗'} |")
    if "torch_s" in results:
        ratio = results["torch_s"] / results["naive_s"]
        print(f"| torch engine | {results['torch_s']:.2f} s ({ratio:.0f}× the loop) | ≤ 3× "
              f"{'✓' if ratio <= 3 else '✗'} |")
    for engine in ("compiled", "torch"):
        key = f"{engine}_late_over_early"
        if key in results:
            print(f"| {engine}: last fifth of the layers / first fifth | {results[key]:.2f}× | ≤ 1.5× "
                  f"{'✓' if results[key] <= 1.5 else '✗'} |")
    verdict = "passed" if results["check_theorem_passed"] else "FAILED"
    print(f"| check_theorem | {1000 * results['check_theorem_s']:.0f} ms ({verdict}) "
          f"| < 100 ms {'✓' if results['check_theorem_s'] < 0.1 else '✗'} |")
    largest = max(scaling)
    print(f"| compiled, n = {largest}, {layers} layers | {scaling[largest]:.2f} s | < 10 s (n = 3,200) "
          f"{'✓' if largest >= 3200 and scaling[largest] < 10 else ''} |")
    print(f"| compiled, slope in n (log-log, {min(sizes)}..{largest}) | {results['slope_in_n']:.2f} | ≤ 2 |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
