"""`sweep(task, grid, out=...)`: the cells not yet in `out`, in batches, on an executor; rows written as batches finish.

    executor None         a dask.distributed LocalCluster of `workers` processes (default: the cores), one thread
                          each, with the numerical libraries' threads pinned to one per worker (`EmbeddedCluster`)
    executor=cluster      an `EmbeddedCluster` the caller started (early, in the background) and shares between sweeps
    scheduler="tcp://…"   any Dask cluster by address (dask-jobqueue for SLURM/PBS, Kubernetes, …): the same sweep
    executor=Client(…)    a distributed.Client you made; or any concurrent.futures.Executor (a process pool,
                          submitit's executors, the serial executor of the tests)

Small cells are batched (one task per batch) so that the machinery's cost per cell stays small; every batch that
finishes becomes one part file at once, so an interrupted sweep (Ctrl-C, kill -9 of the driver, a worker lost)
restarted with the same grid runs only the cells missing and ends with the table of an uninterrupted run.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hardmax.progress import LineProgress
from hardmax.progress import progress as progress_bar
from hardmax.sweep import store
from hardmax.sweep.cluster import EmbeddedCluster, pin_threads
from hardmax.sweep.grid import cells as grid_cells
from hardmax.sweep.grid import key, task_named
from hardmax.sweep.tasks import Task
from hardmax.version import __version__

__all__ = ["SweepResult", "run_batch", "sweep", "sweep_status"]

@dataclass(frozen=True)
class SweepResult:
    """What a sweep did. out: its folder (the Parquet dataset, `read_table(out)`); cells: the grid's; done and
    failed: the grid's cells recorded in the table without and with an error (from this run or an earlier one);
    ran: cells run now; skipped: cells found recorded by an earlier run; seconds: this run's; dashboard: the Dask
    dashboard's link when a cluster was used."""

    out: Path
    cells: int
    done: int
    failed: int
    ran: int
    skipped: int
    seconds: float
    dashboard: str | None = None

    def describe(self) -> str:
        """One line."""
        return (f"{self.cells:,} cells: {self.ran:,} run now, {self.skipped:,} found done, {self.failed:,} failed; "
                f"{self.seconds:.1f} s; table in {self.out}")


def run_batch(task_name: str, batch: list[dict], driver: int = -1) -> list[dict]:
    """The rows of a batch of cells: each cell's key and parameters, its result (or its one-line error), its seconds,
    the library version and when it finished. Runs in the worker (driver: the driver's process id)."""
    from hardmax.sweep.tasks import TASKS

    pin_threads(driver)
    task = TASKS[task_name]
    rows = []
    for cell in batch:
        start = time.perf_counter()
        row = {"key": key(task, cell), "task": task_name, **cell}
        try:
            result = task.function(**cell)
            row.update({f"result_{k}" if k in row else k: v for k, v in result.items()})
            row["error"] = None
        except Exception as e:  # a failing cell is recorded with its one-line error; the sweep goes on
            row["error"] = _one_line(e)
        row["seconds"] = time.perf_counter() - start
        row["version"] = __version__
        row["finished"] = time.time()
        rows.append(row)
    return rows


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


def _lost_rows(task: Task, batch: list[dict], error: BaseException) -> list[dict]:
    """The rows of a batch whose worker died every time Dask ran it (a crash in native code, memory): failed."""
    return [{"key": key(task, cell), "task": task.name, **cell, "error": _one_line(error), "seconds": math.nan,
             "version": __version__, "finished": time.time()} for cell in batch]


def sweep(task: str | Task, grid, *, out: str | Path, executor=None, scheduler: str | None = None,
          workers: int | None = None, batch: int | None = None, progress: bool = True) -> SweepResult:
    """Run `task` on every cell of `grid` not yet recorded in `out`; rows appended to out's Parquet table.

    Args:
        task: a registered task's name (`hardmax.sweep.TASKS`) or the `Task`.
        grid: {parameter: [values]} (their product) or [{parameter: value}, ...] (`hardmax.sweep.cells`).
        out: the sweep's folder (created); rerun with the same grid to finish an interrupted sweep.
        executor: None (a LocalCluster of `workers` processes, closed at the end), an `EmbeddedCluster` (several
            sweeps on one cluster; left open), a distributed.Client, or any concurrent.futures.Executor.
            scheduler: a Dask scheduler's address (instead of an executor).
        workers: processes of the LocalCluster (default: the cores). batch: cells per task (default: about 8
            tasks per worker, at most 64 cells, so that per-cell overhead stays small and progress stays fine).
        progress: a progress bar (cells done, failed, left, the time left) and the dashboard's link.
    Returns:
        `SweepResult`. Raises ValueError (one line) for a bad task, grid or option, before any work starts.
        Interrupted (Ctrl-C), it cancels what it submitted, closes the cluster it started and re-raises: the batches
        finished are in the table, and the same call finishes the sweep.

    A script that runs a sweep on the local cluster calls it under ``if __name__ == "__main__":`` (the workers are
    processes that import the script).
    """
    task = task_named(task) if isinstance(task, str) else task
    every = grid_cells(task, grid)  # checked before anything runs
    if executor is not None and scheduler is not None:
        raise ValueError("give an executor or a scheduler address, not both")
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be a Dask scheduler's address (tcp://host:8786), got {scheduler!r}")
    if executor is not None and not (isinstance(executor, EmbeddedCluster | concurrent.futures.Executor)
                                     or _is_client(executor)):
        raise ValueError(f"executor must be an EmbeddedCluster, a distributed.Client or a concurrent.futures.Executor, "
                         f"got {type(executor).__name__}")
    for name, value in (("workers", workers), ("batch", batch)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be an integer ≥ 1, got {value!r}")
    out = Path(out)
    meta = store.read_meta(out) if out.is_dir() else None
    if meta is not None and meta.get("task") != task.name:
        raise ValueError(f"{out} holds a sweep of task {meta.get('task')!r}, not {task.name!r}: use another --out")
    out.mkdir(parents=True, exist_ok=True)
    store.clean(out)
    store.write_meta(out, {"task": task.name, "cells": len(every), "version": __version__})
    start = time.perf_counter()
    keys = [key(task, c) for c in every]
    recorded = store.outcomes(out)
    pending = [c for c, k in zip(every, keys, strict=True) if k not in recorded]
    skipped = len(every) - len(pending)
    dashboard = None
    ran = 0
    if pending:
        dashboard, ran = _run(task, pending, out, executor, scheduler, workers, batch, progress)
    recorded = store.outcomes(out)
    errors = [recorded[k] for k in keys if k in recorded]
    failed = sum(e is not None for e in errors)
    return SweepResult(out, len(every), len(errors) - failed, failed, ran, skipped, time.perf_counter() - start,
                       dashboard)


def _run(task: Task, pending: list[dict], out: Path, executor, scheduler, workers, batch, show: bool):
    """Submit the pending cells in batches and write each batch's rows as it finishes: (dashboard link, cells run)."""
    client = owned = dashboard = None
    futures: dict = {}
    try:
        if executor is None and scheduler is None:
            owned = EmbeddedCluster(workers)
            client = owned.client
        elif isinstance(executor, EmbeddedCluster):
            client = executor.client
        elif scheduler is not None:
            from distributed import Client

            client = Client(scheduler)
        elif _is_client(executor):
            client = executor
        if client is not None:
            dashboard = client.dashboard_link
            slots = max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
        else:
            slots = max(1, getattr(executor, "_max_workers", 1) or 1)
        size = batch or max(1, min(64, len(pending) // (8 * slots)))
        batches = [pending[i:i + size] for i in range(0, len(pending), size)]
        if dashboard and show:
            print(f"hardmax sweep: the Dask dashboard is at {dashboard}", file=sys.stderr, flush=True)
        me = os.getpid()

        def submit(cells: list[dict]):
            if client is not None:
                return client.submit(run_batch, task.name, cells, me, pure=False)
            return executor.submit(run_batch, task.name, cells, me)

        # a window of batches in flight (two per worker, and two more), the next submitted as one is written: the
        # workers never wait, and the driver never holds the rows of batches that finished ahead of the writer (all
        # submitted at once, a cheap task's 100,000 rows sat in finished futures: +36 MiB)
        return dashboard, _collect(task, batches, submit, 2 * slots + 2, futures, out, client, show)
    except BaseException:
        for future in futures:  # nothing more runs for this sweep (an executor the caller owns stays usable)
            future.cancel()
        raise
    finally:
        if owned is not None:
            owned.close()
        elif scheduler is not None and client is not None:
            client.close()


def _collect(task: Task, batches: list[list[dict]], submit, window: int, futures: dict, out: Path, client,
             show: bool) -> int:
    """Keep `window` batches in flight (`futures`: future -> its cells, filled here), write each finished batch as
    one part file and submit the next; a progress bar of cells done, failed and left. Cells run."""
    total = sum(len(b) for b in batches)
    bar = progress_bar(total=total, desc=f"sweep {task.name}", unit="cell") if show else None
    ran = failed = 0
    start = time.perf_counter()
    if client is not None:
        from distributed import KilledWorker
        from distributed import wait as wait_for
    else:
        KilledWorker, wait_for = (), concurrent.futures.wait  # noqa: N806 (nothing to catch)
    queue = iter(batches)
    for cells in itertools.islice(queue, window):
        futures[submit(cells)] = cells
    try:
        while futures:
            done = wait_for(list(futures), return_when="FIRST_COMPLETED").done
            for future in done:
                # the future leaves the map once its batch is on disk (a finished future holds its rows, a Dask one
                # its result on a worker)
                cells = futures.pop(future)
                try:
                    rows = future.result()
                except KilledWorker as e:  # the batch's worker died each time it ran it: its cells fail, the rest go
                    rows = _lost_rows(task, cells, e)
                del future
                for following in itertools.islice(queue, 1):
                    futures[submit(following)] = following
                store.write_part(out, rows)
                ran += len(rows)
                failed += sum(r["error"] is not None for r in rows)
                if bar is not None:
                    left = total - ran
                    eta = (time.perf_counter() - start) / ran * left
                    bar.set_postfix_str(f"{failed:,} failed, {left:,} left"
                                        + (f", about {eta:.0f} s to go" if isinstance(bar, LineProgress) else ""))
                    bar.update(len(rows))
    finally:
        if bar is not None:
            bar.close()
    return ran


def _is_client(executor) -> bool:
    from distributed import Client

    return isinstance(executor, Client)


def sweep_status(out: str | Path) -> dict:
    """What a sweep folder holds: {"task", "cells" (asked), "done", "failed", "remaining", "errors" (the first
    five one-line errors)}; ValueError (one line) for a folder that holds no sweep."""
    out = Path(out)
    meta = store.read_meta(out) if out.is_dir() else None
    if meta is None:
        raise ValueError(f"{out} holds no sweep (no {store.META})")
    errors = [e for e in store.outcomes(out).values() if e is not None]
    recorded = len(store.outcomes(out))
    return {"task": meta["task"], "cells": meta["cells"], "done": recorded - len(errors), "failed": len(errors),
            "remaining": max(0, meta["cells"] - recorded), "errors": errors[:5]}
