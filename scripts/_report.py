"""What the experiment scripts share: run the variants one by one, print each table row as it
finishes (runs take minutes), then write the rows as JSON and Markdown, atomically."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from hardmax.io import write_json, write_text


def run_and_report(items: Iterable, run: Callable[..., dict], table: Callable[[list[dict]], str],
                   out: str | Path, stem: str) -> list[dict]:
    """rows = [run(item) for item in items], with progress; writes OUT/stem.json and OUT/stem.md."""
    rows = []
    for item in items:
        rows.append(run(item))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    out = Path(out)
    write_json(out / f"{stem}.json", rows)
    write_text(out / f"{stem}.md", table(rows) + "\n")
    print(table(rows))
    return rows
