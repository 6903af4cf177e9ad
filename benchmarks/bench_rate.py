"""Speed of the coding rates (`hardmax.measures`) against the mcr2 reference formula.

    python benchmarks/bench_rate.py [--quick] [--threads N] [--json results/bench_rate.json]

Cases (issue #15 targets, float32 inputs, standard normal samples, best of --repeat runs):
- R and ΔR of 1,000,000 samples in d = 128 with 10 classes: < 5 s. The reference builds a dense
  (k, N, N) membership tensor for Rc; its size is printed, it is not run.
- R of 25,000 token sets of 128 tokens in d = 16 (one per review): < 0.5 s, and ≥ 10× faster than
  looping the reference formula ½ logdet(I + d/(N ε²) ZᵀZ) (float32 `torch.logdet`, as in the mcr2 code)
  over the sets, measured in the same run.
Accuracy: the library (float64 accumulation and Cholesky) against a float64 slogdet of the same sets.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch

from hardmax.io import write_json
from hardmax.measures import coding_rate, rate_reduction


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def reference_loop(Z: torch.Tensor, eps: float) -> torch.Tensor:
    """The mcr2 reference formula, one set at a time, in the input dtype (float32)."""
    n, d = Z.shape[-2:]
    eye = torch.eye(d, dtype=Z.dtype)
    return torch.stack([torch.logdet(eye + d / (n * eps**2) * z.T @ z) / 2 for z in Z])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default="results/bench_rate.json", help="where to write the figures ('' = nowhere)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    eps = 0.5
    N, D, K = (20_000, 32, 10) if args.quick else (1_000_000, 128, 10)
    sets, n, d = (500, 128, 16) if args.quick else (25_000, 128, 16)

    Z = torch.randn(N, D, generator=g)
    labels = torch.randint(0, K, (N,), generator=g)
    t_rate, rate = _best(lambda: coding_rate(Z, eps), args.repeat)
    t_reduction, parts = _best(lambda: rate_reduction(Z, labels, eps), args.repeat)
    membership_bytes = K * N * N * 4
    Z = None  # free 0.5 GB before the next case

    T = torch.randn(sets, n, d, generator=g)
    t_batched, batched = _best(lambda: coding_rate(T, eps), args.repeat)
    t_loop, looped = _best(lambda: reference_loop(T, eps), 1)
    check = min(sets, 2000)
    exact = torch.stack([torch.linalg.slogdet(torch.eye(d, dtype=torch.float64) + d / (n * eps**2) * z.T @ z)[1] / 2
                         for z in T[:check].double()])
    results = {
        "machine": {"platform": platform.platform(), "threads": args.threads, "cpus": os.cpu_count(),
                    "load_average": os.getloadavg()},
        "quick": args.quick,
        "samples": {"N": N, "d": D, "classes": K, "seconds_rate": t_rate, "seconds_rate_reduction": t_reduction,
                    "rate": float(rate), "reduction": float(parts.reduction),
                    "reference_membership_bytes": membership_bytes, "target_seconds": 5.0},
        "token_sets": {"sets": sets, "n": n, "d": d, "seconds_library": t_batched, "seconds_reference_loop": t_loop,
                       "speedup": t_loop / t_batched, "target_seconds": 0.5, "target_speedup": 10.0,
                       "max_abs_error_library": float((batched[:check] - exact).abs().max()),
                       "max_abs_error_reference_float32": float((looped[:check].double() - exact).abs().max())},
    }
    t = results["token_sets"]
    print(f"threads {args.threads}, load average {results['machine']['load_average'][0]:.2f}")
    print("| case | library | reference | target |\n|---|---|---|---|")
    print(f"| R of {N:,} samples, d = {D} | {t_rate:.2f} s | - | - |")
    print(f"| R and ΔR, {K} classes | {t_reduction:.2f} s | needs a {membership_bytes / 1e12:,.1f} TB membership "
          f"tensor | < 5 s {'✓' if t_reduction < 5 else '✗'} |")
    print(f"| R of {sets:,} sets of {n} tokens, d = {d} | {t_batched:.3f} s | {t_loop:.2f} s (loop, float32) | "
          f"< 0.5 s {'✓' if t_batched < 0.5 else '✗'}, {t['speedup']:.0f}× (≥ 10× "
          f"{'✓' if t['speedup'] >= 10 else '✗'}) |")
    print(f"max |error| vs float64 slogdet on {check} sets: library {t['max_abs_error_library']:.1e}, "
          f"reference float32 {t['max_abs_error_reference_float32']:.1e}")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
