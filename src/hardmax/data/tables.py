"""Labelled texts from the user's own table: CSV, TSV, JSON Lines or Parquet, any k ≥ 2 classes.

    read_table(path, Columns(text="body", label="topic", split=None, group=None)) -> Reviews

The format is the file name's (.csv, .tsv, .jsonl / .ndjson, .parquet / .pq) and the content must agree (a
Parquet file starts with PAR1, a JSON Lines file with an object): a mismatch is an error, never a guess. Readers
are the standard library's `csv` and `json` and pyarrow's Parquet reader. Labels may be strings or integers; the
class names are recorded in sorted order (numbers numerically), class c being the c-th name. An optional split
column (train / validation / test as given: "val", "valid", "dev" also name validation) and group column (a
held-out validation made of whole groups, as the movie-disjoint split of IMDb) are read alongside.

Bad input gets one line naming the problem: an unknown format, a file that is not what its name says, a missing
column (with the columns that exist), an empty text or label (its line or row), a single class, an unknown split
name, a byte sequence that is not UTF-8 (its line: a file that mixes encodings).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from hardmax.data.config import Columns, DataError
from hardmax.data.source import Reviews

__all__ = ["decode_text", "label_order", "read_table", "read_texts", "table_format", "texts_of_lines"]

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
           ".pq": "parquet"}
SPLIT_ALIASES = {"train": "train", "training": "train", "val": "val", "valid": "val", "validation": "val",
                 "dev": "val", "test": "test", "testing": "test"}


def table_format(path: str | Path) -> str:
    """"csv", "tsv", "jsonl" or "parquet" from the file name, checked against the first bytes of the file."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"{path}: unknown table format {path.suffix!r}; known: {', '.join(FORMATS)}")
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc})") from exc
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if fmt == "parquet" and not head.startswith(b"PAR1"):
        raise DataError(f"{path}: named {path.suffix} but not a Parquet file (no PAR1 magic bytes)")
    if fmt != "parquet" and head.startswith(b"PAR1"):
        raise DataError(f"{path}: named {path.suffix} but it is a Parquet file; rename it to .parquet")
    if fmt == "jsonl" and first not in (b"{", b""):
        raise DataError(f"{path}: named {path.suffix} but its first line is not a JSON object")
    if fmt in ("csv", "tsv") and first in (b"{", b"["):
        raise DataError(f"{path}: named {path.suffix} but it starts like JSON; JSON Lines files end in .jsonl")
    return fmt


def decode_text(path, raw: bytes) -> str:
    """UTF-8 text of a file's bytes (a BOM dropped), or a DataError naming the line of the first bad byte."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DataError(f"{path}, line {line}: bytes {raw[exc.start:exc.end]!r} are not UTF-8 (the file mixes "
                        "encodings?); save it as UTF-8") from None


def _missing(path: Path, columns: Columns, present) -> None:
    missing = [c for c in columns.names() if c not in present]
    if missing:
        raise DataError(f"{path}: no column {', '.join(map(repr, missing))}; the columns are "
                        f"{', '.join(map(repr, present))}")


def _read_delimited(path: Path, columns: Columns, delimiter: str) -> tuple[dict[str, list], list[int]]:
    text = decode_text(path, path.read_bytes())
    csv.field_size_limit(2**31 - 1)  # a text may be longer than the csv module's default 131,072 characters
    # TSV has no quoting (a text may begin with a quote); CSV quotes fields that hold commas or newlines.
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter,
                        quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: empty file (expected a header line with the column names)") from None
    except csv.Error as exc:
        raise DataError(f"{path}, line 1: malformed header ({exc})") from None
    header = [h.strip() for h in header]
    _missing(path, columns, header)
    index = {name: header.index(name) for name in columns.names()}
    out: dict[str, list] = {name: [] for name in columns.names()}
    lines = []
    try:
        start = reader.line_num + 1  # the physical line a record begins on (quoted newlines span several)
        for row in reader:
            if row and not (len(row) == 1 and not row[0].strip()):  # not a blank line
                if len(row) != len(header):
                    raise DataError(f"{path}, line {start}: {len(row)} field(s), the header has {len(header)}")
                for name, i in index.items():
                    out[name].append(row[i])
                lines.append(start)
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{path}, line {reader.line_num}: malformed {delimiter == ',' and 'CSV' or 'TSV'} ({exc})") \
            from None
    return out, lines


def _read_jsonl(path: Path, columns: Columns) -> tuple[dict[str, list], list[int]]:
    text = decode_text(path, path.read_bytes())
    out: dict[str, list] = {name: [] for name in columns.names()}
    lines = []
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines: U+2028 is valid inside JSON
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}, line {number}: a JSON {type(record).__name__}, not an object")
        missing = [c for c in columns.names() if c not in record]
        if missing:
            raise DataError(f"{path}, line {number}: no key {', '.join(map(repr, missing))}; the keys are "
                            f"{', '.join(map(repr, record))}")
        for name in columns.names():
            out[name].append(record[name])
        lines.append(number)
    return out, lines


def _read_parquet(path: Path, columns: Columns) -> tuple[dict[str, list], list[int]]:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        _missing(path, columns, schema.names)
        table = pq.read_table(path, columns=columns.names())
    except DataError:
        raise
    except Exception as exc:  # pyarrow's errors: a corrupt or truncated file
        raise DataError(f"{path}: cannot read Parquet ({type(exc).__name__}: {exc})") from None
    out = {name: table.column(name).to_pylist() for name in columns.names()}
    return out, list(range(1, table.num_rows + 1))


def _read(path: Path, fmt: str, columns: Columns) -> tuple[dict[str, list], list[int]]:
    """The columns' values and each row's line (row for Parquet): the reader of the format."""
    if fmt in ("csv", "tsv"):
        return _read_delimited(path, columns, "," if fmt == "csv" else "\t")
    return _read_jsonl(path, columns) if fmt == "jsonl" else _read_parquet(path, columns)


def read_table(path: str | Path, columns: Columns) -> Reviews:
    """The labelled texts of a CSV / TSV / JSON Lines / Parquet file as `Reviews` (k ≥ 2 classes).

    Returns `Reviews` with labels (n,) int64 class codes, `label_names` (k,) in code order, `split` (n,) of
    "train" / "val" / "test" when a split column is given (else None: a seeded hold-out), `groups` (n,) when a
    group column is given. Raises `DataError` (one line) on anything the module docstring lists.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    fmt = table_format(path)
    data, lines = _read(path, fmt, columns)
    where = "row" if fmt == "parquet" else "line"
    if not lines:
        raise DataError(f"{path}: no rows")
    texts = _checked_texts(path, data[columns.text], lines, columns.text, where)
    raw_labels = data[columns.label]
    labels = []
    for value, line in zip(raw_labels, lines, strict=True):
        if isinstance(value, bool) or not isinstance(value, str | int) or \
                (isinstance(value, str) and not value.strip()):
            raise DataError(f"{path}, {where} {line}: label {value!r} in column {columns.label!r} (labels are "
                            "non-empty strings or integers)")
        labels.append(value.strip() if isinstance(value, str) else value)
    if not all(isinstance(v, int) for v in labels):  # a mix of 1 and "1" is one class, "1"
        labels = [str(v) for v in labels]
    names = label_order(labels)
    if len(names) < 2:
        raise DataError(f"{path}: column {columns.label!r} has one class ({names[0]!r}); a classifier needs ≥ 2")
    code = {name: i for i, name in enumerate(names)}
    split = None
    if columns.split is not None:
        split_values = []
        for value, line in zip(data[columns.split], lines, strict=True):
            name = SPLIT_ALIASES.get(str(value).strip().lower())
            if name is None:
                raise DataError(f"{path}, {where} {line}: split {value!r} in column {columns.split!r}; "
                                "expected train, validation or test")
            split_values.append(name)
        split = np.array(split_values)
        if not (split == "train").any():
            raise DataError(f"{path}: column {columns.split!r} names no training rows")
    groups = None
    if columns.group is not None:
        for value, line in zip(data[columns.group], lines, strict=True):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise DataError(f"{path}, {where} {line}: no group in column {columns.group!r}")
        _, groups = np.unique(np.array([str(g) for g in data[columns.group]]), return_inverse=True)
        groups = groups.astype(np.int64)
    return Reviews(texts=list(texts), labels=np.array([code[label] for label in labels], dtype=np.int64),
                   split=split, review_ids=None, ratings=None, source=str(path),
                   label_names=tuple(str(n) for n in names), groups=groups, kind="table")


def _checked_texts(path: Path, values: list, lines: list[int], column: str, where: str) -> list[str]:
    """The column's values, each a non-empty string, or a DataError naming the line (row) of the first that is not."""
    for value, line in zip(values, lines, strict=True):
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"{path}, {where} {line}: empty text in column {column!r}"
                            if value is None or isinstance(value, str) else
                            f"{path}, {where} {line}: the text in column {column!r} is a "
                            f"{type(value).__name__}, not a string")
    return list(values)


def label_order(labels) -> list:
    """The distinct labels in class order: integers numerically (also integers written as text, as a CSV holds
    them: "2" before "10"), other strings alphabetically."""
    distinct = set(labels)
    if all(isinstance(v, int) for v in distinct):
        return sorted(distinct)
    if all(isinstance(v, str) and v.lstrip("-").isdigit() for v in distinct):
        return sorted(distinct, key=int)
    return sorted(distinct, key=str)


def read_texts(path: str | Path, column: str = "text") -> list[str]:
    """The texts of a file, for prediction: one per line of a .txt file (blank lines skipped), or the `column` of
    a CSV / TSV / JSON Lines / Parquet table. Raises `DataError` (one line) for an empty text, a missing column,
    bytes that are not UTF-8 (their line), a file that is not what its name says."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    if path.suffix.lower() == ".txt":
        return texts_of_lines(decode_text(path, path.read_bytes()))
    fmt = table_format(path)
    data, lines = _read(path, fmt, Columns(text=column, label=None))
    return _checked_texts(path, data[column], lines, column, "row" if fmt == "parquet" else "line")


def texts_of_lines(text: str) -> list[str]:
    """One text per non-blank line (lines end at \n, with an optional \r; other Unicode breaks stay in the text)."""
    return [line.removesuffix("\r") for line in text.split("\n") if line.strip()]
