"""The sweep machinery's own cost and its parallel speed-up (issue #42), in one run.

- parallel: 200 cells of the `spin` task (≈ 50 ms of one core each) on a local Dask cluster of 2 workers against 1
  (target: ≤ 0.55× the time);
- overhead: per-cell cost of the machinery with the `noop` task (target ≤ 20 ms), on 1 local worker;
- memory: the driver's resident memory before and after a sweep of 100,000 `noop` cells (the serial executor,
  batches of 1,000): flat (the rows go to disk as batches finish);
- the phase diagram of `hardmax particles` (20 β × starts) through the sweep on one worker, against
  `phase_diagram` in one process.

    python benchmarks/bench_sweep.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import tempfile
import time
from pathlib import Path

import psutil
import torch

import hardmax
from hardmax.experiments.particles import phase_diagram


def timed(grid, task: str, **options) -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = hardmax.sweep(task, grid, out=out, progress=False, **options)
        seconds = time.perf_counter() - start
        assert result.failed == 0 and result.ran == result.cells
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    cells = 200
    spin = {"seconds": [0.05], "seed": list(range(cells))}
    seconds = {}
    for n in (1, 2):  # clusters started outside the timing (their start is measured apart)
        start = time.perf_counter()
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40) as cluster, Client(cluster) as client:
            seconds[f"start_{n}"] = time.perf_counter() - start
            seconds[n] = timed(spin, "spin", executor=client)
    one, two = seconds[1], seconds[2]
    noops = 500 if args.quick else 2000
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        timed({"x": [0.0]}, "noop", executor=client)  # the worker's first task loads the library
        base = min(timed({"x": [0.0]}, "noop", executor=client) for _ in range(3))
        many = timed({"x": [float(i) for i in range(noops)]}, "noop", executor=client)
    overhead = (many - base) / (noops - 1)
    process = psutil.Process()
    big = 20_000 if args.quick else 100_000
    with concurrent.futures.ThreadPoolExecutor(1) as ex:  # a first sweep loads what the driver needs
        timed({"x": [float(i) for i in range(2000)]}, "noop", executor=ex, batch=1000)
    before = process.memory_info().rss
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        start = time.perf_counter()
        timed({"x": [float(i) for i in range(big)]}, "noop", executor=ex, batch=1000)
        big_s = time.perf_counter() - start
    grown = process.memory_info().rss - before
    starts = 20 if args.quick else 100
    betas = torch.linspace(0.0, 9.5, 20)
    phase_diagram(betas[:2], starts=4, n=32, d=3, steps=2)
    start = time.perf_counter()
    phase_diagram(betas, starts=starts, n=32, d=3, steps=300, dt=0.1, dtype=torch.float64)
    direct = time.perf_counter() - start
    through = timed({"beta": betas.tolist(), "starts": [starts], "seed": [0]}, "phase_cell", workers=1)
    results = {"spin_cells": cells, "one_worker_s": one, "two_workers_s": two, "ratio": two / one,
               "cluster_start_s": seconds["start_2"],
               "noop_cells": noops, "overhead_ms": overhead * 1e3, "memory_cells": big, "memory_s": big_s,
               "driver_growth_mb": grown / 2**20, "phase_starts": starts, "phase_direct_s": direct,
               "phase_sweep_s": through}
    print("| measure | value | target |")
    print("|---|---|---|")
    print(f"| {cells} spin cells, 2 workers / 1 worker | {two:.1f} s / {one:.1f} s = {two / one:.2f} | ≤ 0.55 |")
    print(f"| a local cluster's start (2 workers) | {seconds['start_2']:.1f} s | |")
    print(f"| machinery per cell (noop, {noops} cells, 1 worker) | {overhead * 1e3:.2f} ms | ≤ 20 ms |")
    print(f"| driver memory over {big:,} noop cells | {grown / 2**20:+.1f} MiB ({big_s:.0f} s) | flat |")
    print(f"| phase diagram 20 β × {starts} starts: through the sweep (1 worker) / phase_diagram | "
          f"{through:.1f} s / {direct:.1f} s | ≤ 1× (+ the cluster's start) |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
