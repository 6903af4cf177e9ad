"""A sweep's cells as data: a product of parameter lists or a list of parameter sets, checked before any work.

    cells(task, {"beta": [1, 2], "starts": [100]})          -> [{"beta": 1.0, "starts": 100, ...}, ...]
    cells(task, [{"beta": 1}, {"beta": 4, "starts": 50}])    -> one cell each
    key(task, cell)                                         -> 16 hex digits, the cell's identity in the table

A cell is keyed by its task and its parameters (sorted, typed, defaults filled in), and its seed — when the task
takes one and the grid does not give it — comes from that key: the same cell gets the same seed on any worker, in
any order, in any rerun.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import tomllib

from hardmax.sweep.tasks import REQUIRED, TASKS, Task

__all__ = ["cells", "key", "load_spec", "task_named"]


def task_named(name) -> Task:
    """The registered task `name`; ValueError naming the tasks there are."""
    if not isinstance(name, str) or name not in TASKS:
        raise ValueError(f"unknown task {name!r}: the tasks are {', '.join(sorted(TASKS))}")
    return TASKS[name]


def key(task: Task, cell: Mapping) -> str:
    """16 hex digits of SHA-256 of the task's name and the cell's parameters (sorted; seed left out when derived)."""
    text = json.dumps({"task": task.name, **{k: cell[k] for k in sorted(cell)}}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cells(task: Task, grid) -> list[dict]:
    """Every cell of `grid` (a mapping of parameter -> list of values, whose product is taken, or a sequence of
    mappings), checked and completed (`Task.check`), each with its "seed" when the task takes one and the cell does
    not give it. ValueError (one line) for a malformed grid or parameter, before any work; duplicates refused."""
    if isinstance(grid, Mapping):
        names = list(grid)
        values = []
        for name in names:
            v = grid[name]
            v = list(v) if isinstance(v, list | tuple) else [v]
            if not v:
                raise ValueError(f"grid parameter {name!r} has no values")
            values.append(v)
        raw = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
    elif isinstance(grid, Sequence) and not isinstance(grid, str):
        raw = [dict(c) if isinstance(c, Mapping) else _not_a_cell(c) for c in grid]
    else:
        raise ValueError(f"a grid is a mapping of parameter -> values or a list of parameter sets, got "
                         f"{type(grid).__name__}")
    if not raw:
        raise ValueError("the grid has no cells")
    out, seen = [], set()
    derived = "seed" in task.parameters and task.parameters["seed"][1] is REQUIRED
    for cell in raw:
        given_seed = "seed" in cell
        if derived and not given_seed:
            cell = {**cell, "seed": 0}  # checked with a placeholder, then derived from the other parameters
        checked = task.check(cell)
        if derived and not given_seed:
            rest = {k: v for k, v in checked.items() if k != "seed"}
            checked["seed"] = int(key(task, rest), 16) % (2**31 - 1)
        k = key(task, checked)
        if k in seen:
            raise ValueError(f"the grid holds the same cell twice: {checked}")
        seen.add(k)
        out.append(checked)
    return out


def _not_a_cell(c):
    raise ValueError(f"a cell of a list grid must be a mapping of parameter -> value, got {c!r}")


def load_spec(path: str | Path) -> tuple[Task, list[dict], dict]:
    """(task, cells, options) from a TOML spec: `task = "name"`, then `[grid]` (parameter = [values...], their
    product) or `[[cells]]` (one table per cell), and optionally `[options]` (workers, batch). ValueError (one line)
    for an unreadable or malformed spec, before any work."""
    path = Path(path)
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read the sweep spec {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not a TOML sweep spec: {' '.join(str(e).split())}") from None
    unknown = sorted(set(spec) - {"task", "grid", "cells", "options"})
    if unknown:
        raise ValueError(f"{path}: unknown key {unknown[0]!r} (a spec has task, grid or cells, options)")
    task = task_named(spec.get("task"))
    if ("grid" in spec) == ("cells" in spec):
        raise ValueError(f"{path}: give either [grid] (a product of values) or [[cells]] (a list), not both or none")
    options = spec.get("options", {})
    if not isinstance(options, dict) or set(options) - {"workers", "batch"}:
        raise ValueError(f"{path}: [options] takes workers and batch")
    return task, cells(task, spec.get("grid", spec.get("cells"))), options
