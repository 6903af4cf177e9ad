"""`sweep(task, grid, out=...)`: the cells not yet in `out`, in batches, on an executor; rows written as batches finish.

    executor None         a dask.distributed LocalCluster of `workers` processes (default: the cores), one thread
                          each, with the numerical libraries' threads pinned to one per worker
    scheduler="tcp://…"   any Dask cluster by address (dask-jobqueue for SLURM/PBS, Kubernetes, …): the same sweep
    executor=Client(…)    a distributed.Client you made; or any concurrent.futures.Executor (a process pool,
                          submitit's executors, the serial executor of the tests)

Small cells are batched (one task per batch) so that the machinery's cost per cell stays small; every batch that
finishes becomes one part file at once, so an interrupted sweep (Ctrl-C, kill -9 of the driver, a worker lost)
restarted with the same grid runs only the cells missing and ends with the table of an uninterrupted run.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from dataclasses import dataclass
from pathlib import Path

from hardmax.progress import progress
from hardmax.sweep import store
from hardmax.sweep.grid import cells as grid_cells
from hardmax.sweep.grid import key, task_named
from hardmax.sweep.tasks import Task
from hardmax.version import __version__

__all__ = ["SweepResult", "sweep", "sweep_status"]

_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMEXPR_NUM_THREADS")


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: where its table is, how many cells the grid has, how many were run now, failed (ever,
    recorded with their error), and were found done from an earlier run; seconds of this run; the dashboard link
    of the cluster when one was used."""

    out: Path
    cells: int
    ran: int
    failed: int
    skipped: int
    seconds: float
    dashboard: str | None = None

    def describe(self) -> str:
        """One line."""
        return (f"{self.cells:,} cells: {self.ran:,} run now, {self.skipped:,} found done, {self.failed:,} failed; "
                f"{self.seconds:.1f} s; table in {self.out}")


def _pin_threads(driver: int) -> None:
    """One thread for torch and numba in a worker process (never in the driver's own process, whose settings are
    its caller's: a serial executor runs batches there). The environment (OMP, MKL, OpenBLAS, numba) of the local
    cluster's workers is set before they start (`_local_cluster`)."""
    if os.getpid() == driver:
        return
    import numba
    import torch

    torch.set_num_threads(1)
    numba.set_num_threads(1)


def run_batch(task_name: str, batch: list[dict], driver: int = -1) -> list[dict]:
    """The rows of a batch of cells: each cell's parameters, its result (or its one-line error), its seconds, the
    library version and when it finished. Runs in the worker (driver: the driver's process id)."""
    from hardmax.sweep.tasks import TASKS

    _pin_threads(driver)
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
            row["error"] = f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]
        row["seconds"] = time.perf_counter() - start
        row["version"] = __version__
        row["finished"] = time.time()
        rows.append(row)
    return rows


def sweep(task: str | Task, grid, *, out: str | Path, executor=None, scheduler: str | None = None,
          workers: int | None = None, batch: int | None = None, show_progress: bool = True) -> SweepResult:
    """Run `task` on every cell of `grid` not yet recorded in `out`; rows appended to out's Parquet table.

    Args:
        task: a registered task's name (`hardmax.sweep.TASKS`) or the `Task`.
        grid: {parameter: [values]} (their product) or [{parameter: value}, ...] (`hardmax.sweep.cells`).
        out: the sweep's folder (created); rerun with the same grid to finish an interrupted sweep.
        executor: None (a LocalCluster of `workers` processes), a distributed.Client, or any
            concurrent.futures.Executor. scheduler: a Dask scheduler's address (instead of an executor).
        workers: processes of the LocalCluster (default: the cores). batch: cells per task (default: about 8
            tasks per worker, at most 64 cells, so that per-cell overhead stays small and progress stays fine).
    Returns:
        `SweepResult`. Raises ValueError (one line) for a bad task, grid or option, before any work starts.
    """
    task = task_named(task) if isinstance(task, str) else task
    every = grid_cells(task, grid)  # checked before anything runs
    if executor is not None and scheduler is not None:
        raise ValueError("give an executor or a scheduler address, not both")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer ≥ 1, got {workers!r}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise ValueError(f"batch must be an integer ≥ 1, got {batch!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store.clean(out)
    meta = store.read_meta(out)
    if meta is not None and meta.get("task") != task.name:
        raise ValueError(f"{out} holds a sweep of task {meta.get('task')!r}, not {task.name!r}: use another --out")
    store.write_meta(out, {"task": task.name, "cells": len(every), "version": __version__})
    start = time.perf_counter()
    done = store.done_keys(out)
    pending = [c for c in every if key(task, c) not in done]
    skipped = len(every) - len(pending)
    if not pending:
        failed = _failed(out)
        return SweepResult(out, len(every), 0, failed, skipped, time.perf_counter() - start)
    owned, dashboard, client = None, None, None
    try:
        if executor is None and scheduler is None:
            owned = _local_cluster(workers)
            client, dashboard = owned
            submit, slots = client.submit, len(client.scheduler_info()["workers"])
        elif scheduler is not None:
            from distributed import Client

            client = Client(scheduler)
            dashboard = client.dashboard_link
            submit, slots = client.submit, max(1, len(client.scheduler_info()["workers"]))
        elif _is_client(executor):
            submit, slots = executor.submit, max(1, len(executor.scheduler_info()["workers"]))
            dashboard = executor.dashboard_link
        elif isinstance(executor, concurrent.futures.Executor):
            submit, slots = executor.submit, max(1, getattr(executor, "_max_workers", 1) or 1)
        else:
            raise ValueError(f"executor must be a distributed.Client or a concurrent.futures.Executor, got "
                             f"{type(executor).__name__}")
        size = batch or max(1, min(64, len(pending) // (8 * slots) or 1))
        batches = [pending[i:i + size] for i in range(0, len(pending), size)]
        if dashboard and show_progress:
            print(f"hardmax sweep: the Dask dashboard is at {dashboard}", flush=True)
        me = os.getpid()
        futures = [submit(run_batch, task.name, b, me, pure=False) if _is_client_submit(submit) else
                   submit(run_batch, task.name, b, me) for b in batches]
        ran = failed_now = 0
        bar = progress(total=len(pending), desc=f"sweep {task.name}", unit="cell", initial=0) if show_progress else None
        try:
            for future in _as_completed(futures, client or executor):
                rows = future.result()
                store.write_part(out, rows)
                ran += len(rows)
                failed_now += sum(r["error"] is not None for r in rows)
                if bar is not None:
                    bar.update(len(rows))
        finally:
            if bar is not None:
                bar.close()
    finally:
        if owned is not None:
            client, _ = owned
            cluster = client.cluster
            client.close()
            cluster.close()
        elif scheduler is not None and client is not None:
            client.close()
    return SweepResult(out, len(every), ran, _failed(out), skipped, time.perf_counter() - start, dashboard)


def _failed(out: Path) -> int:
    table = store.read_table(out)
    return 0 if "error" not in table.column_names else sum(e is not None for e in table.column("error").to_pylist())


def _is_client(executor) -> bool:
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover
        return False
    return isinstance(executor, Client)


def _is_client_submit(submit) -> bool:
    return getattr(submit, "__self__", None) is not None and _is_client(submit.__self__)


def _as_completed(futures, executor):
    if _is_client(executor):
        from distributed import as_completed

        return as_completed(futures)
    return concurrent.futures.as_completed(futures)


def _local_cluster(workers: int | None):
    """(Client, dashboard link) of a LocalCluster of processes, one thread each, the numerical libraries' threads
    pinned to one per worker before it starts (environment) and when it runs a batch (`_pin_threads`)."""
    import dask
    from distributed import Client, LocalCluster

    n = workers or os.cpu_count() or 1
    with dask.config.set({"distributed.nanny.pre-spawn-environ": {name: "1" for name in _THREADS},
                          "distributed.worker.daemon": False}):
        # everything on the loopback interface: scheduler, workers, nannies and the dashboard (127.0.0.1 only)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=40)
    client = Client(cluster)
    return client, client.dashboard_link


def sweep_status(out: str | Path) -> dict:
    """What a sweep folder holds: {"task", "cells" (asked), "done", "failed", "remaining", "errors" (the first
    five one-line errors)}; ValueError (one line) for a folder that holds no sweep."""
    out = Path(out)
    meta = store.read_meta(out)
    if meta is None:
        raise ValueError(f"{out} holds no sweep (no {store.META})")
    table = store.read_table(out)
    errors = [e for e in (table.column("error").to_pylist() if "error" in table.column_names else []) if e]
    return {"task": meta["task"], "cells": meta["cells"], "done": table.num_rows - len(errors),
            "failed": len(errors), "remaining": max(0, meta["cells"] - table.num_rows), "errors": errors[:5]}
