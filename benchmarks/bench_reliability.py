"""What issue #39's fixes could slow down, timed: `solve`'s fixed-step loop (the finiteness check), a
phase-diagram-like batch, and `cluster_counts` (clusters of diameter ≤ tol).

- tiny steps: 5,000 Euler steps of 6 tokens in R^2 (softmax): the loop's own cost per step, where a check per step
  would show;
- phase-like: 2,000 sequences of 32 tokens on S², A = β I for 20 β values, 100 RK4 steps, saved every 10;
- cluster counts: 62,000 sequences of 32 tokens on S² at tol = 1e-2, half gathered near one point (chains wider
  than tol: split), half spread (singletons).

Each is the best of `--repeats`. Run it before and after a change in alternating processes (a worktree of the old
commit on PYTHONPATH) and compare; it asserts nothing.

    .venv/bin/python benchmarks/bench_reliability.py
    PYTHONPATH=/path/to/old/src .venv/bin/python benchmarks/bench_reliability.py --label before
"""

from __future__ import annotations

import argparse
import time

import torch


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()

    from hardmax.dynamics import RK4, Bilinear, Euler, Field, Save, Softmax, Sphere, solve
    from hardmax.theory import cluster_counts

    g = torch.Generator().manual_seed(0)
    tiny = torch.randn(1, 6, 2, dtype=torch.float64, generator=g)
    x = torch.nn.functional.normalize(torch.randn(2000, 32, 3, generator=g), dim=-1)
    A = torch.linspace(0, 9.5, 20).repeat_interleave(100).reshape(-1, 1, 1) * torch.eye(3)
    sphere = Field(Softmax(1.0), scores=Bilinear(A), manifold=Sphere())
    spread = torch.nn.functional.normalize(torch.randn(31 * 2000, 32, 3, generator=g), dim=-1)
    spread[::2] = torch.nn.functional.normalize(spread[::2, :1] + 0.003 * torch.randn(31 * 1000, 32, 3, generator=g),
                                                dim=-1)
    figures = {
        "tiny_step_us": best(lambda: solve(Field(Softmax(1.0)), Euler(0.01), tiny, steps=5000, save=Save.final()),
                             args.repeats) / 5000 * 1e6,
        "phase_like_s": best(lambda: solve(sphere, RK4(0.1), x, steps=100, save=Save(every=10)), args.repeats),
        "cluster_counts_s": best(lambda: cluster_counts(spread, 1e-2), args.repeats),
    }
    print(f"{args.label}: tiny steps {figures['tiny_step_us']:.1f} µs/step; phase-like solve "
          f"{figures['phase_like_s']:.3f} s; cluster_counts {figures['cluster_counts_s']:.3f} s "
          f"({torch.get_num_threads()} threads)")
    if args.json:
        from hardmax.io import write_json

        write_json(args.json, {"label": args.label, **figures})


if __name__ == "__main__":
    main()
