"""A sweep's table on disk: a Parquet dataset of part files, each written whole (temporary file, then rename).

    out/part-<first key>-<rows>.parquet     the rows of one finished batch of cells
    out/sweep.json                          the task and the number of cells asked (for `status`)

A row holds the cell's key, its parameters, its result columns (or its one-line error), its seconds, the library
version and when it finished. A part file exists whole or not at all (a killed driver leaves no half file), so the
cells done are the keys in the part files; reading dedupes by key (a batch finished twice, by a rerun that raced a
dying worker, counts once) and orders rows by key, so an interrupted and resumed sweep reads as the uninterrupted one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hardmax.io import atomic_write, read_json, write_json

__all__ = ["outcomes", "read_table", "write_part"]

META = "sweep.json"


def write_part(out: Path, rows: list[dict]) -> Path:
    """Write `rows` (dicts with at least "key") as one part file, atomically; returns its path."""
    names = dict.fromkeys(name for row in rows for name in row)  # every column of the batch (a failed cell has none
    table = pa.table({name: [row.get(name) for row in rows] for name in names})  # of its results)
    name = f"part-{rows[0]['key']}-{len(rows)}.parquet"
    return atomic_write(out / name, lambda tmp: pq.write_table(table, tmp))


def _parts(out: Path) -> list[Path]:
    return sorted(p for p in Path(out).glob("part-*.parquet") if not p.name.startswith("."))


def outcomes(out: Path) -> dict[str, str | None]:
    """key -> its one-line error (None: done) of every cell recorded in `out`, the first record of a key kept (as
    `read_table`); read from the part files' key and error columns only."""
    recorded: dict[str, str | None] = {}
    for part in _parts(out):
        columns = pq.read_table(part, columns=["key", "error"]).to_pydict()
        for k, error in zip(columns["key"], columns["error"], strict=True):
            recorded.setdefault(k, error)
    return recorded


def read_table(out: str | Path) -> pa.Table:
    """The sweep's rows as one pyarrow Table, one row per key (the first recorded), ordered by key; an empty table
    when nothing is recorded yet. ValueError (one line) for a folder that holds no sweep."""
    out = Path(out)
    if not out.is_dir():
        raise ValueError(f"{out} is not a sweep folder")
    parts = _parts(out)
    if not parts:
        return pa.table({"key": pa.array([], pa.string())})
    table = pa.concat_tables([pq.read_table(p) for p in parts], promote_options="permissive")
    keys = table.column("key").to_pylist()
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    order = sorted(first, key=str)
    return table.take(pa.array([first[k] for k in order]))


def write_meta(out: Path, meta: dict) -> None:
    write_json(out / META, meta)


def read_meta(out: Path) -> dict | None:
    path = Path(out) / META
    return read_json(path) if path.exists() else None


def clean(out: Path) -> None:
    """Remove temporary files a killed writer left (`atomic_write` names them .*.tmp)."""
    for p in Path(out).glob(".*.tmp*"):
        try:
            os.unlink(p)
        except OSError:
            pass
