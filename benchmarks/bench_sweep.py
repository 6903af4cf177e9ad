"""The sweep machinery's own cost and its parallel speed-up (issue #42), in one run.

- parallel: 200 cells of the `spin` task (≈ 50 ms of one core each) on a local Dask cluster of 2 workers against 1
  (target: ≤ 0.55× the time);
- overhead: per-cell cost of the machinery with the `noop` task (target ≤ 20 ms), on 1 local worker;
- memory: the driver's resident memory as each part file of a sweep of 100,000 `noop` cells is written (the serial
  executor, batches of 1,000): flat from the first to the last (the rows go to disk as batches finish), and the
  grid's own memory (its cells and keys, held while the sweep runs);
- the phase diagram of `hardmax particles` (20 β × 1,000 starts, its cells as `--scheduler` makes them) through the
  sweep on 1 and 2 local workers (the cluster's start included), against `phase_diagram` in one process with 1 and 2
  threads, each in a fresh process as a user runs them (both load the kernels from numba's cache).

    python benchmarks/bench_sweep.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import torch

import hardmax


def timed(grid, task: str, **options) -> float:
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = hardmax.sweep(task, grid, out=out, progress=False, **options)
        seconds = time.perf_counter() - start
        assert result.failed == 0 and result.ran == result.cells
    return seconds


def rss_through(work) -> dict:
    """Run `work()` (one sweep) and read the driver's resident memory before it, as each batch's part file is written
    and at the end, in MiB: the grid's own memory (before → the first part file: the cells and their keys, held while
    the sweep runs) and the growth from the first part file to the last (rows streamed to disk: flat)."""
    import hardmax.sweep.store as store

    process = psutil.Process()
    marks: list[float] = []
    write = store.write_part

    def counted(out, rows):
        write(out, rows)
        marks.append(process.memory_info().rss / 2**20)

    before = process.memory_info().rss / 2**20
    store.write_part = counted
    try:
        work()
    finally:
        store.write_part = write
    return {"rss_before_mib": before, "grid_mib": marks[0] - before, "growth_mib": marks[-1] - marks[0],
            "growth_from_10pct_mib": marks[-1] - marks[len(marks) // 10], "parts": len(marks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    cells_n = 200
    spin = {"seconds": [0.05], "seed": list(range(cells_n))}
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
    big = 20_000 if args.quick else 100_000
    with concurrent.futures.ThreadPoolExecutor(1) as ex:  # a first sweep loads what the driver needs
        timed({"x": [float(i) for i in range(2000)]}, "noop", executor=ex, batch=1000)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        start = time.perf_counter()
        memory = rss_through(lambda: timed({"x": [float(i) for i in range(big)]}, "noop", executor=ex, batch=1000))
        big_s = time.perf_counter() - start
    starts = 100 if args.quick else 1000  # hardmax particles: 1,000 starts per β (--quick: 50)
    betas = torch.linspace(0.0, 9.5, 20)
    cells = [{"beta": float(b), "index": i, "of": len(betas), "starts": starts, "d": 3, "seed": 0, "dtype": "float32"}
             for i, b in enumerate(betas)]  # hardmax particles --scheduler's cells: the one-batch run's starts
    # Each way as a fresh process, as a user runs it: `hardmax particles` (phase_diagram in one process, on the cores
    # its threads are given) against the same diagram as a sweep of phase_cell cells on a local cluster of as many
    # workers (the cluster's start included); both load the compiled kernels from numba's cache.
    setup = ("import time, torch; start = time.perf_counter(); torch.set_num_threads(THREADS); "
             "import hardmax; from hardmax.experiments.particles import phase_diagram; "
             "betas = torch.linspace(0.0, 9.5, 20); ")
    direct_code = setup + (f"phase_diagram(betas, starts={starts}, n=32, d=3, steps=300, dt=0.1, seed=0); "
                           "print(time.perf_counter() - start)")
    sweep_code = setup + (f"import tempfile; cells = {cells!r}; out = tempfile.mkdtemp(); "
                          "hardmax.sweep('phase_cell', cells, out=out, workers=THREADS, progress=False); "
                          "wall = time.perf_counter() - start; "
                          "print(wall, sum(hardmax.sweep.read_table(out).column('seconds').to_pylist()))")
    direct, through, cell_seconds = {}, {}, {}
    for threads in (1, 2):
        got = subprocess.run([sys.executable, "-c", direct_code.replace("THREADS", str(threads))], capture_output=True,
                             text=True, check=True).stdout.split()
        direct[threads] = float(got[-1])
        got = subprocess.run([sys.executable, "-c", sweep_code.replace("THREADS", str(threads))], capture_output=True,
                             text=True, check=True).stdout.split()
        through[threads], cell_seconds[threads] = float(got[-2]), float(got[-1])
    results = {"spin_cells": cells_n, "one_worker_s": one, "two_workers_s": two, "ratio": two / one,
               "cluster_start_s": seconds["start_2"], "noop_cells": noops, "overhead_ms": overhead * 1e3,
               "memory_cells": big, "memory_s": big_s, **memory, "phase_starts": starts,
               "phase_direct_s": direct, "phase_sweep_s": through, "phase_cell_seconds": cell_seconds}
    print("| measure | value | target |")
    print("|---|---|---|")
    print(f"| {cells_n} spin cells, 2 workers / 1 worker | {two:.1f} s / {one:.1f} s = {two / one:.2f} | ≤ 0.55 |")
    print(f"| a local cluster's start (2 workers) | {seconds['start_2']:.1f} s | |")
    print(f"| machinery per cell (noop, {noops} cells, 1 worker) | {overhead * 1e3:.2f} ms | ≤ 20 ms |")
    print(f"| driver memory through {big:,} noop cells ({big_s:.0f} s, {memory['parts']} part files): from the first "
          f"part file to the last | {memory['growth_mib']:+.1f} MiB (from 10 % of them: "
          f"{memory['growth_from_10pct_mib']:+.1f} MiB) | flat |")
    print(f"| the grid's own memory ({big:,} cells and their keys, held while the sweep runs) | "
          f"{memory['grid_mib']:.0f} MiB | |")
    print(f"| phase diagram 20 β × {starts} starts, fresh processes, 1 core: sweep on 1 worker / phase_diagram with 1 "
          "thread | "
          f"{through[1]:.1f} s / {direct[1]:.1f} s (cells' own seconds {cell_seconds[1]:.1f} s) | ≤ 1× |")
    print(f"| the same on 2 cores: sweep on 2 workers / phase_diagram with 2 threads (hardmax particles today) | "
          f"{through[2]:.1f} s / {direct[2]:.1f} s (cells' own seconds {cell_seconds[2]:.1f} s) | ≤ 1× |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
