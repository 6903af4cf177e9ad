"""Helpers shared by the tests of `hardmax.sweep` (test_sweep_*.py): a small grid, a one-thread executor and the
table without its timing columns.
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
