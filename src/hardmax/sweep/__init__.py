"""Sweeps: parameter grids as data, on Dask, resumable — `sweep(task, grid, out=DIR)`.

- `tasks`: what a cell runs (`TASKS`: phase_cell, solve, simulate, rate, long_context, att_svm_seed, att_svm_solve,
  train_candidate, noop, spin; `register` adds one).
- `grid`: the cells of a product or a list, checked before any work; each keyed and seeded by its parameters;
  `load_spec` reads a TOML spec (`hardmax sweep SPEC.toml --out DIR`).
- `store`: the Parquet table (one part file per finished batch, written whole), read back one row per cell.
- `run`: `sweep` (a LocalCluster by default; any Dask scheduler by address; any concurrent.futures executor) →
  `SweepResult`, `sweep_status`.
- `cluster`: `EmbeddedCluster`, that LocalCluster as an object: started early (in the background, its workers
  warmed for a task) and shared by several sweeps.
- `plots`: the table as pictures (P(one cluster) over (t, β), the critical γ over n).

Why Dask (`distributed`): the same sweep moves from this machine to a cluster by naming a scheduler (dask-jobqueue
for SLURM/PBS, Kubernetes), with a dashboard, and the embedded LocalCluster needs no setup.
"""

from __future__ import annotations

import sys
import types

from hardmax.sweep.cluster import EmbeddedCluster
from hardmax.sweep.grid import cells, key, load_spec, task_named
from hardmax.sweep.run import SweepResult, sweep, sweep_status
from hardmax.sweep.store import read_table
from hardmax.sweep.tasks import REQUIRED, TASKS, Task, register

__all__ = ["REQUIRED", "TASKS", "EmbeddedCluster", "SweepResult", "Task", "cells", "key", "load_spec", "read_table",
           "register", "sweep", "sweep_status", "task_named"]


class _CallableModule(types.ModuleType):
    """`hardmax.sweep(task, grid, out=...)` is `hardmax.sweep.sweep(...)`: the package is the verb."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
