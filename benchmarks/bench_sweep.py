"""The sweep machinery's own cost and its parallel speed-up (issue #42), in one run.

- parallel: 200 cells of the `spin` task (≈ 50 ms of one core each) on a local Dask cluster of 2 workers against 1
  (target: ≤ 0.55× the time);
- overhead: per-cell cost of the machinery with the `noop` task (target ≤ 20 ms), on 1 local worker;
- memory: the driver's resident memory as each part file of a sweep of 100,000 `noop` cells is written (the serial
  executor, batches of 1,000): flat from the first to the last (the rows go to disk as batches finish), and the
  grid's own memory (its cells and keys, held while the sweep runs);
- the phase diagrams through the sweep, end to end as a user runs them (issue #42's target: "no slower than today's
  `hardmax particles` on one worker"): `hardmax particles --no-gif` (the clustering and metastability pictures, then
  the phase diagrams on S¹ and S², 20 β × 1,000 starts each) in a fresh process, with `--scheduler local --workers
  1` against without it, both with their numerical libraries on 1 thread (OMP/MKL/OpenBLAS/NUMBA_NUM_THREADS=1);
  and `--workers 2` against without on 2 threads, for information. The runs alternate, `--rounds` times; all load
  the kernels from numba's cache.

    python benchmarks/bench_sweep.py [--quick] [--only machinery|phase] [--rounds N] [--json FILE]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

import hardmax

# the numerical libraries' thread counts, set in the environment of the `hardmax particles` runs
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


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


def machinery(quick: bool) -> tuple[dict, list[str]]:
    """The spin, noop and memory measures: (results, table rows)."""
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
    noops = 500 if quick else 2000
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        timed({"x": [0.0]}, "noop", executor=client)  # the worker's first task loads the library
        base = min(timed({"x": [0.0]}, "noop", executor=client) for _ in range(3))
        many = timed({"x": [float(i) for i in range(noops)]}, "noop", executor=client)
    overhead = (many - base) / (noops - 1)
    big = 20_000 if quick else 100_000
    with concurrent.futures.ThreadPoolExecutor(1) as ex:  # a first sweep loads what the driver needs
        timed({"x": [float(i) for i in range(2000)]}, "noop", executor=ex, batch=1000)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        start = time.perf_counter()
        memory = rss_through(lambda: timed({"x": [float(i) for i in range(big)]}, "noop", executor=ex, batch=1000))
        big_s = time.perf_counter() - start
    results = {"spin_cells": cells_n, "one_worker_s": one, "two_workers_s": two, "ratio": two / one,
               "cluster_start_s": seconds["start_2"], "noop_cells": noops, "overhead_ms": overhead * 1e3,
               "memory_cells": big, "memory_s": big_s, **memory}
    rows = [f"| {cells_n} spin cells, 2 workers / 1 worker | {two:.1f} s / {one:.1f} s = {two / one:.2f} | ≤ 0.55 |",
            f"| a local cluster's start (2 workers) | {seconds['start_2']:.1f} s | |",
            f"| machinery per cell (noop, {noops} cells, 1 worker) | {overhead * 1e3:.2f} ms | ≤ 20 ms |",
            f"| driver memory through {big:,} noop cells ({big_s:.0f} s, {memory['parts']} part files): from the "
            f"first part file to the last | {memory['growth_mib']:+.1f} MiB (from 10 % of them: "
            f"{memory['growth_from_10pct_mib']:+.1f} MiB) | flat |",
            f"| the grid's own memory ({big:,} cells and their keys, held while the sweep runs) | "
            f"{memory['grid_mib']:.0f} MiB | |"]
    return results, rows


def particles(quick: bool, threads: int | None, workers: int | None) -> dict:
    """One `hardmax particles --no-gif [--quick]` in a fresh process (`workers`: with --scheduler local --workers N;
    None: without), its numerical libraries given `threads` threads by their environment (None: their default, the
    cores): its wall seconds, the diagrams' seconds it prints, and the cells' own seconds in the sweep tables."""
    import re

    from hardmax.sweep import read_table

    env = {**os.environ, **{name: str(threads) for name in THREADS if threads is not None}}
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "hardmax", "particles", "--no-gif", "--out", out, *(["--quick"] * quick)]
        if workers is not None:
            command += ["--scheduler", "local", "--workers", str(workers)]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        diagrams = [float(s) for s in re.findall(r"phase diagram on S\^\d: .* in ([0-9.]+) s", done.stderr)]
        cells = (sum(sum(read_table(Path(out) / f"sweep_S{k}").column("seconds").to_pylist()) for k in (1, 2))
                 if workers is not None else None)
    return {"wall_s": wall, "diagrams_s": sum(diagrams), "cells_s": cells}


def phase(quick: bool, rounds: int) -> tuple[dict, list[str]]:
    """`hardmax particles` without --scheduler against --scheduler local, on 1 worker against 1 thread (the target)
    and on 2 workers against the default threads (the 2 cores), alternating, `rounds` times: (results, table rows)."""
    ways = {"direct_1": (1, None), "sweep_1": (1, 1), "direct_2": (None, None), "sweep_2": (None, 2)}
    runs: dict[str, list[dict]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, (threads, workers) in ways.items():
            runs[name].append(particles(quick, threads, workers))
            print(f"{name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    command = f"hardmax particles --no-gif{' --quick' * quick}"
    rows = []
    for n, label in ((1, "1 worker / 1 thread (target)"), (2, "2 workers / 2 threads (the cores)")):
        direct, swept = runs[f"direct_{n}"], runs[f"sweep_{n}"]
        ratio = sum(r["wall_s"] for r in swept) / sum(r["wall_s"] for r in direct)
        walls = ", ".join(f"{s['wall_s']:.1f} / {d['wall_s']:.1f} s" for s, d in zip(swept, direct, strict=True))
        cells = " / ".join(f"{s['cells_s']:.1f}" for s in swept)
        diagrams = " / ".join(f"{d['diagrams_s']:.1f}" for d in direct)
        met = "✓" if ratio <= 1.0 else "✗"
        rows.append(f"| `{command}`, fresh process, {label}: --scheduler local --workers {n} / without, each round | "
                    f"{walls}; ratio of the sums **{ratio:.3f}** (cells' own seconds {cells} s; the direct run's "
                    f"diagrams {diagrams} s) | ≤ 1.0 {met if n == 1 else '(for information)'} |")
    return {"phase_command": command, "phase_rounds": runs}, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("machinery", "phase"), help="one part (default: both)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of the phase part (default: 2)")
    parser.add_argument("--json")
    args = parser.parse_args()
    results, rows = {}, []
    for name, part in (("machinery", lambda: machinery(args.quick)), ("phase", lambda: phase(args.quick, args.rounds))):
        if args.only in (None, name):
            got, lines = part()
            results.update(got)
            rows += lines
    print("| measure | value | target |")
    print("|---|---|---|")
    print("\n".join(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
