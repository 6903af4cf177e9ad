"""Reading arrays the user gives: tokens (n, d) and a score matrix A, from .npy, .csv/.tsv/.txt or a literal.

One tolerant, explicit reader for every numeric file a user hands the library or the command line:

- text files may start with a byte-order mark (UTF-8, as Excel writes it, or UTF-16) and use ``,``,
  ``;``, tab or spaces between numbers; lines starting with ``#`` and blank lines are skipped;
- a first line is a header only when none of its cells is a number, and the result says so
  (`ArrayInput.header`), so that a caller can say it aloud; any other line that does not parse is an
  error naming the file, the line and the cell, never a dropped row;
- a .npy file's header is compared with the file's size before anything is read (a 120-byte file that
  claims 10^10 elements is refused), and the array must fit the memory budget (`hardmax.memory`).

numpy is imported inside the readers, so that building the command-line parser stays fast.
"""

from __future__ import annotations

import codecs
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hardmax.memory import require_memory

__all__ = ["ArrayInput", "parse_matrix", "read_array", "read_matrix"]

TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# A parsed text file keeps each number as a Python float in a list before NumPy sees it: ~40 bytes a
# number, about 10x its text; the budget check uses that factor.
_TEXT_EXPANSION = 12


@dataclass(frozen=True)
class ArrayInput:
    """An array read from a file or a literal.

    Attributes:
        array: (rows, cols) float64 NumPy array.
        source: where it came from (the path, or "literal").
        header: the column names of a header line that was skipped, or None when there was none.
        encoding: the text encoding used ("utf-8", "utf-8 with BOM", "utf-16-le with BOM", ...), None for .npy.
    """

    array: Any
    source: str
    header: tuple[str, ...] | None = None
    encoding: str | None = None

    def notes(self) -> list[str]:
        """What the reader decided on its own, in words (a BOM, a header): for the caller to say aloud."""
        said = []
        if self.encoding and "BOM" in self.encoding:
            said.append(f"{self.source}: read as {self.encoding}")
        if self.header is not None:
            said.append(f"{self.source}: line 1 ({', '.join(self.header)}) is a header, not numbers: skipped")
        return said


def _decode(raw: bytes, path: Path) -> tuple[str, str]:
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return raw[len(bom):].decode(encoding), f"{encoding} with BOM"
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: not valid {encoding} text at byte {e.start + len(bom)}") from None
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}: line {line} is not UTF-8 text (byte {e.start}); save the file as UTF-8") from None


def _split(line: str) -> list[str]:
    """Cells of one line: split on ';', tab or ',' (the first of them the line has), else on spaces."""
    for delimiter in (";", "\t", ","):
        if delimiter in line:
            return [cell.strip() for cell in line.split(delimiter)]
    return line.split()


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _read_text(path: Path, what: str) -> ArrayInput:
    import numpy as np

    require_memory(path.stat().st_size * _TEXT_EXPANSION, f"{what} file {path} ({path.stat().st_size:,} bytes of text)")
    text, encoding = _decode(path.read_bytes(), path)
    numbered = [(k, line) for k, line in enumerate(text.splitlines(), start=1)
                if line.strip() and not line.lstrip().startswith("#")]
    header = None
    if numbered and all(_number(cell) is None for cell in _split(numbered[0][1])):
        header = tuple(_split(numbered[0][1]))
        numbered = numbered[1:]
    if not numbered:
        raise ValueError(f"{path} holds no rows of numbers")
    rows = []
    for k, line in numbered:
        cells = _split(line)
        row = [_number(cell) for cell in cells]
        if None in row:
            bad = cells[row.index(None)]
            raise ValueError(f"{path}, line {k}: {bad!r} is not a number")
        rows.append(row)
    widths = sorted({len(row) for row in rows})
    if len(widths) > 1:
        first = next(k for (k, _), row in zip(numbered, rows, strict=True) if len(row) != len(rows[0]))
        raise ValueError(f"{path}: rows have different numbers of columns ({widths}); line {first} has "
                         f"{len(_split(dict(numbered)[first]))}, the first row {len(rows[0])}")
    return ArrayInput(array=np.array(rows, dtype=np.float64), source=str(path), header=header, encoding=encoding)


def _read_npy(path: Path, what: str) -> ArrayInput:
    import numpy as np

    size = path.stat().st_size
    try:
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(f)
            offset = f.tell()
    except (ValueError, OSError, SyntaxError, TypeError) as e:
        raise ValueError(f"{path} is not a valid .npy file ({e})") from None
    if dtype.hasobject:
        raise ValueError(f"{path}: a .npy of Python objects cannot be read safely; save numbers instead")
    count = math.prod(shape)
    if count * dtype.itemsize != size - offset:
        raise ValueError(f"{path}: its header describes {count:,} elements of {dtype} ({count * dtype.itemsize:,} "
                         f"bytes), but the file holds {size - offset:,} bytes of data: the file is damaged or cut")
    require_memory(count * max(dtype.itemsize, 8), f"{what} file {path} ({count:,} numbers)")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise ValueError(f"{path} is not a valid .npy file ({e})") from None
    return ArrayInput(array=array, source=str(path))


def read_array(path: str | Path, what: str = "array") -> ArrayInput:
    """A (rows, cols) float64 array from a .npy or .csv/.tsv/.txt file; `what` names it in errors.

    Returns:
        `ArrayInput` with the array and what the reader decided (header skipped, byte-order mark).

    Raises:
        ValueError: a missing file, another suffix, a damaged .npy, a line that is not numbers (named),
            rows of different lengths, an empty, non-2-D, non-real array, or one beyond the memory budget.
    """
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        result = _read_npy(path, what)
    elif suffix in TEXT_SUFFIXES:
        result = _read_text(path, what)
    else:
        raise ValueError(f"{what} file must be .npy or .csv (or .tsv, .txt), got {path.name}")
    array = result.array
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{what} must be a 2-D array with at least one row and column, "
                         f"got shape {array.shape} from {path}")
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number) \
            or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{what} must be real numbers, got dtype {array.dtype} from {path}")
    return ArrayInput(array=array.astype(np.float64), source=result.source, header=result.header,
                      encoding=result.encoding)


def parse_matrix(text: str, what: str = "a matrix"):
    """A matrix from a literal: rows split by ';', entries by ',' or spaces ("2,0;0,1" -> [[2, 0], [0, 1]])."""
    import numpy as np

    rows = [re.split(r"[,\s]+", row.strip()) for row in text.split(";")]
    values = [[_number(cell) for cell in row if cell] for row in rows]
    if not values or not values[0] or any(None in row for row in values):
        raise ValueError(f"cannot read {what} from {text!r}: give a .npy/.csv file or a literal like '2,0;0,1'")
    if any(len(row) != len(values[0]) for row in values):
        raise ValueError(f"{what} literal {text!r} must have rows of equal length, like '2,0;0,1'")
    return np.array(values, dtype=np.float64)


def read_matrix(text: str, what: str = "A") -> ArrayInput:
    """A matrix from a .npy/.csv/.tsv/.txt file (`read_array`) or a literal (`parse_matrix`)."""
    path = Path(text)
    if path.suffix.lower() in (".npy", *TEXT_SUFFIXES) or path.is_file():
        return read_array(path, what)
    return ArrayInput(array=parse_matrix(text, what), source="literal")
