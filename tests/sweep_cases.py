"""Helpers shared by the tests of `hardmax.sweep` (test_sweep_*.py, test_cli_sweep.py): a small grid, a one-thread
executor, the table without its timing columns, this process's children and a counted LocalCluster.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from hardmax.sweep import read_table

GRID = {"n": [4, 7], "layers": [6, 12], "causal": [False, True]}


def rows_without_times(out: Path):
    """The table without the columns that say when and how long (they differ between runs)."""
    return read_table(out).drop_columns(["seconds", "finished"])


def serial_executor():
    """A one-thread executor: the serial reference every other executor's table is compared with."""
    return concurrent.futures.ThreadPoolExecutor(1)


def children() -> set[int]:
    """This process's live child processes (not multiprocessing's resource tracker, which lives as long as it)."""
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())}


def counting_local_clusters(monkeypatch) -> list:
    """distributed.LocalCluster, counted: the list gets one entry per cluster started."""
    import distributed

    started = []

    class Counted(distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            started.append(kwargs.get("n_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", Counted)
    return started
