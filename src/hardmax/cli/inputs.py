"""Reading user input for the commands: token arrays (.npy / .csv) and matrices given inline.

numpy is imported inside the readers, so that building the parser (`hardmax --help`) stays fast.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["read_array", "read_matrix"]

# --------------------------------------------------------------------------------------------
# Reading user input.
# --------------------------------------------------------------------------------------------


def _read_csv(path: Path):
    """A numeric CSV file as an (n, d) float64 array; a first line that is not numeric is a header."""
    import numpy as np

    lines = [line for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    rows = [[cell.strip() for cell in line.split(",")] for line in lines]
    if rows:
        try:
            [float(cell) for cell in rows[0]]
        except ValueError:
            rows = rows[1:]  # a header
    if not rows:
        raise ValueError(f"{path} holds no rows of numbers")
    widths = sorted({len(row) for row in rows})
    if len(widths) > 1:
        raise ValueError(f"{path}: rows have different numbers of columns ({widths})")
    try:
        return np.array([[float(cell) for cell in row] for row in rows], dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def read_array(path: Path, what: str):
    """An (rows, cols) float64 array from a .npy or .csv file; `what` names it in errors."""
    import numpy as np

    if not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        array = np.load(path, allow_pickle=False)
    elif suffix in (".csv", ".txt"):
        array = _read_csv(path)
    else:
        raise ValueError(f"{what} file must be .npy or .csv, got {path.name}")
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{what} must be a 2-D array with at least one row and column, "
                         f"got shape {array.shape} from {path}")
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{what} must be real numbers, got dtype {array.dtype} from {path}")
    return array.astype(np.float64)


def read_matrix(text: str):
    """The matrix A from a .npy/.csv file or a literal: rows split by ';', entries by ',' ("2,0;0,1")."""
    import numpy as np

    path = Path(text)
    if path.suffix.lower() in (".npy", ".csv", ".txt") or path.is_file():
        return read_array(path, "A")
    try:
        rows = [[float(cell) for cell in row.replace(",", " ").split()] for row in text.split(";")]
    except ValueError:
        raise ValueError(f"cannot read A from {text!r}: give a .npy/.csv file or a literal like '2,0;0,1'") \
            from None
    if not rows or any(len(row) != len(rows[0]) for row in rows) or not rows[0]:
        raise ValueError(f"A literal {text!r} must have rows of equal length, like '2,0;0,1'")
    return np.array(rows, dtype=np.float64)
