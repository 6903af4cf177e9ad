"""Markdown tables: the one renderer of every table the library prints or writes (theorem checks, rates,
the reproduction and Att-SVM reports, benchmarks).

    markdown_table(["d", "accuracy"], [(2, "0.833"), (16, "0.862")])
    -> ["| d | accuracy |", "|---|---|", "| 2 | 0.833 |", "| 16 | 0.862 |"]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["markdown_table"]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """The lines of a Markdown table: the header, its rule, then one line per row (cells formatted by the caller,
    anything else by `str`). A row must have as many cells as the header.

    Raises:
        ValueError: a row of another length than the header.
    """
    width = len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * width]
    for row in rows:
        cells = [str(cell) for cell in row]
        if len(cells) != width:
            raise ValueError(f"a table row has {len(cells)} cells, the header {width}: {cells}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines
