"""`simulate` in fresh processes: the first call against later ones, and this checkout against another.

Timings on a shared VM drift with the host's load by ±30 % over minutes, so two versions are only
comparable when their runs alternate. Each run is a fresh Python process that loads the benchmark's
IMDb-shaped float32 batch (`bench_dynamics.make_batch`: 8,192 reviews of n = 128, d = 16, its SPD A,
8 layers, α = 1; or --reviews), warms the compiled kernel on 32 reviews, then times

- `simulate` four times, each on a fresh copy of the batch: the first call (newly mapped output memory)
  and the median of the three later ones;
- the kernel call alone (`hardmax.dynamics._engines.kernel.hardmax_trajectory`) three times, median.

    .venv/bin/python benchmarks/bench_fresh.py                       # this checkout, 5 processes
    git worktree add /tmp/old ac08216                                # e.g. the code before issue #10
    .venv/bin/python benchmarks/bench_fresh.py --against /tmp/old/src --runs 5
    .venv/bin/python benchmarks/bench_fresh.py --no-huge-pages       # NumPy without madvise(HUGEPAGE)

Prints one line per process and the medians; --json writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One process's measurement; it must run on old checkouts too, so it uses only `simulate`'s oldest
# keywords and the kernel's unchanged signature.
CHILD = r"""
import json, sys, time, statistics
import numpy as np, torch
from hardmax.dynamics import simulate
try:
    from hardmax.dynamics._engines import kernel
except ImportError:  # before issue #40
    from hardmax.dynamics import kernel
torch.set_num_threads(int(sys.argv[3]))
if sys.argv[2] == "off":
    np._core.multiarray._set_madvise_hugepage(False)
f = np.load(sys.argv[1])
z = np.ascontiguousarray(f["tokens"].astype(np.float32)); mask = f["mask"]; A = f["A"].astype(np.float32)
layers, alpha = int(f["layers"]), float(f["alpha"])
zt, mt, At = torch.from_numpy(z), torch.from_numpy(mask), torch.from_numpy(A)
simulate(zt[:32].clone(), alpha=alpha, layers=layers, A=At, mask=mt[:32].clone())
calls = []
for _ in range(4):
    fresh, fresh_mask = zt.clone(), mt.clone()
    t0 = time.perf_counter()
    out = simulate(fresh, alpha=alpha, layers=layers, A=At, mask=fresh_mask)
    calls.append(time.perf_counter() - t0)
    del out
gammas = np.full(layers, alpha / (1 + alpha), np.float32)
out = np.empty((layers + 1, *z.shape), np.float32)
rtol = 64 * float(np.finfo(np.float32).eps)
kernel_calls = []
for _ in range(3):
    t0 = time.perf_counter()
    kernel.hardmax_trajectory(z, mask, A, gammas, rtol, out, int(sys.argv[3]))
    kernel_calls.append(time.perf_counter() - t0)
print(json.dumps({"first": calls[0], "later": statistics.median(calls[1:]),
                  "kernel": statistics.median(kernel_calls), "reviews": int(z.shape[0])}))
"""


def child(batch: Path, src: Path, huge_pages: bool, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(batch), "on" if huge_pages else "off", str(threads)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"a measurement process failed ({src}): {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per version (alternating)")
    parser.add_argument("--against", type=Path, metavar="SRC", help="another checkout's src/ to compare with")
    parser.add_argument("--reviews", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-huge-pages", action="store_true", help="NumPy without transparent huge pages")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.reviews < 32:
        parser.error("--runs must be ≥ 1 and --reviews ≥ 32")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import numpy as np
    from bench_dynamics import BenchConfig, make_batch

    config = BenchConfig(reviews=args.reviews)
    data = make_batch(config, args.reviews)
    versions = {"this checkout": ROOT / "src"}
    if args.against is not None:
        places = (args.against / "hardmax" / "dynamics" / where / "kernel.py" for where in ("", "_engines"))
        if not any(place.exists() for place in places):
            parser.error(f"{args.against} is not a hardmax src/ folder with the compiled kernel")
        versions["against"] = args.against
    rows: dict[str, list[dict]] = {name: [] for name in versions}
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "batch.npz"
        np.savez(batch, tokens=data.tokens, mask=data.mask, A=data.A, alpha=config.alpha, layers=config.layers)
        for run in range(args.runs):
            for name, src in versions.items():
                r = child(batch, src, not args.no_huge_pages, args.threads)
                rows[name].append(r)
                n = r["reviews"]
                print(f"run {run + 1} {name:>13}: simulate first {n / r['first']:>7,.0f} rev/s, later "
                      f"{n / r['later']:>7,.0f} (first/later {r['first'] / r['later']:.2f}x); kernel "
                      f"{n / r['kernel']:>7,.0f}", flush=True)
    summary = {}
    for name, rs in rows.items():
        n = rs[0]["reviews"]
        summary[name] = {"simulate_later_reviews_per_s": statistics.median(n / r["later"] for r in rs),
                         "simulate_first_reviews_per_s": statistics.median(n / r["first"] for r in rs),
                         "first_over_later": statistics.median(r["first"] / r["later"] for r in rs),
                         "kernel_reviews_per_s": statistics.median(n / r["kernel"] for r in rs), "runs": rs}
        s = summary[name]
        print(f"median {name:>13}: simulate {s['simulate_later_reviews_per_s']:,.0f} rev/s (first call "
              f"{s['first_over_later']:.2f}x a later one), kernel {s['kernel_reviews_per_s']:,.0f}")
    result = {"reviews": args.reviews, "threads": args.threads, "huge_pages": not args.no_huge_pages,
              "versions": {k: str(v) for k, v in versions.items()}, "summary": summary}
    if args.json:
        from hardmax.io import write_json

        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
