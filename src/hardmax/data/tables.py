"""Labelled texts from the user's own table: CSV, TSV, JSON Lines or Parquet, any k ≥ 2 classes.

    read_table(path, Columns(text="body", label="topic", split=None, group=None)) -> Reviews

The format is the file name's (.csv, .tsv, .jsonl / .ndjson, .parquet / .pq) and the content must agree (a
Parquet file starts with PAR1, a JSON Lines file with an object): a mismatch is an error, never a guess. Readers
are the standard library's `csv` and `json` and pyarrow's Parquet reader. Labels are names or integers: an integer
however written ("1", "01", "+1", "1.0", "1e0" and the JSON numbers 1 and 1.0 are one class, 1; ASCII digits only,
so "²" or "①" are names); a label that is empty, missing ("NaN", "NA", "null", JSON null), infinite, a number that
is not an integer, or a number written two ways among names ("1" and "01" beside "pos") is refused, naming its
line. The class names are recorded in sorted order (numbers numerically), class c being the c-th name. An optional split
column (train / validation / test as given: "val", "valid", "dev" also name validation) and group column (a
held-out validation made of whole groups, as the movie-disjoint split of IMDb) are read alongside.

Bad input gets one line naming the problem: an unknown format, a file that is not what its name says, a missing
column (with the columns that exist), a column (JSON key) named twice, an empty text or label (its line or row), a
single class, an unknown split name, a byte sequence that is not UTF-8 (its line: a file that mixes encodings), a
JSON line nested too deeply to parse. Values quoted in a message are cut short (`shown`).
"""

from __future__ import annotations

import csv
import decimal
import io
import json
import math
import os
import re
import reprlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hardmax.data.config import Columns, DataError
from hardmax.data.source import Reviews

__all__ = ["Texts", "decode_text", "label_order", "read_bytes", "read_table", "read_texts", "table_format",
           "texts_of_lines"]

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
           ".pq": "parquet"}
SPLIT_ALIASES = {"train": "train", "training": "train", "val": "val", "valid": "val", "validation": "val",
                 "dev": "val", "test": "test", "testing": "test"}

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 60
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 2, 4, 4


def shown(value) -> str:
    """`repr(value)` cut to a few dozen characters (a 10 MB label, or one nested 900 deep, in a one-line message)."""
    return _SHOWN.repr(value)


def table_format(path: str | Path, head: bytes | None = None) -> str:
    """"csv", "tsv", "jsonl" or "parquet" from the file name, checked against the first bytes of the file (or
    `head`, the first bytes of what was read from it)."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"{path}: unknown table format {path.suffix!r}; known: {', '.join(FORMATS)}")
    if head is None:
        try:
            with path.open("rb") as f:
                head = f.read(4096)
        except OSError as exc:
            raise DataError(f"{path}: cannot read ({exc})") from exc
    head = head[:4096]
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


def _no_duplicates(path: Path, names, line: int | None = None) -> None:
    """A column (key) named twice is ambiguous: which one holds the texts? Refused, naming it."""
    seen = set()
    for name in names:
        if name in seen:
            where = f"{path}, line {line}" if line is not None else str(path)
            raise DataError(f"{where}: column {shown(name)} appears twice; rename one of them")
        seen.add(name)


def _missing(path: Path, columns: Columns, present) -> None:
    missing = [c for c in columns.names() if c not in present]
    if missing:
        raise DataError(f"{path}: no column {', '.join(map(repr, missing))}; the columns are {_names(present)}")


def _names(names) -> str:
    """The first few of a header's (an object's) names, each cut short, for a one-line message."""
    names = list(names)
    listed = ", ".join(shown(name) for name in names[:12])
    return listed + (f" and {len(names) - 12:,} more" if len(names) > 12 else "")


def _read_delimited(path: Path, raw: bytes, columns: Columns, delimiter: str) -> tuple[dict[str, list], list[int], int]:
    text = decode_text(path, raw)
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
    _no_duplicates(path, header)
    _missing(path, columns, header)
    index = {name: header.index(name) for name in columns.names()}
    out: dict[str, list] = {name: [] for name in columns.names()}
    lines = []
    blank = 0
    try:
        start = reader.line_num + 1  # the physical line a record begins on (quoted newlines span several)
        for row in reader:
            # a blank line (no field; with several columns, one blank field): no record. A table of one column
            # keeps a record per line, empty ones too ("" or spaces: an empty text)
            if row and not (len(row) == 1 < len(header) and not row[0].strip()):
                if len(row) != len(header):
                    raise DataError(f"{path}, line {start}: {len(row)} field(s), the header has {len(header)}")
                for name, i in index.items():
                    out[name].append(row[i])
                lines.append(start)
            else:
                blank += 1
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{path}, line {reader.line_num}: malformed {delimiter == ',' and 'CSV' or 'TSV'} ({exc})") \
            from None
    return out, lines, blank


def _read_jsonl(path: Path, raw: bytes, columns: Columns) -> tuple[dict[str, list], list[int], int]:
    text = decode_text(path, raw)
    out: dict[str, list] = {name: [] for name in columns.names()}
    lines = []
    blank = 0
    # not splitlines: U+2028 is valid inside JSON; a final line break ends the last line, it makes no blank one
    for number, line in enumerate(text.removesuffix("\n").split("\n") if text else [], start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            blank += 1
            continue
        try:
            record = json.loads(line, object_pairs_hook=_pairs)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        except RecursionError:  # Python's parser recurses once per level: a line nested 100,000 deep
            raise DataError(f"{path}, line {number}: JSON nested too deeply to be a row of a table") from None
        except _DuplicateKey as exc:
            raise DataError(f"{path}, line {number}: key {shown(exc.args[0])} appears twice in one object") from None
        except ValueError as exc:  # what json.loads raises besides its own errors: an integer of > 4,300 digits
            raise DataError(f"{path}, line {number}: cannot read this JSON ({' '.join(str(exc).split())[:120]})") \
                from None
        if not isinstance(record, dict):
            raise DataError(f"{path}, line {number}: a JSON {type(record).__name__}, not an object")
        missing = [c for c in columns.names() if c not in record]
        if missing:
            raise DataError(f"{path}, line {number}: no key {', '.join(map(repr, missing))}; the keys are "
                            f"{_names(record)}")
        for name in columns.names():
            out[name].append(record[name])
        lines.append(number)
    return out, lines, blank


class _DuplicateKey(Exception):
    pass


def _pairs(pairs: list) -> dict:
    """A JSON object's pairs as a dict, refusing a key given twice (json.loads keeps the last, silently)."""
    record = dict(pairs)
    if len(record) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return record


def _read_parquet(path: Path, raw: bytes, columns: Columns) -> tuple[dict[str, list], list[int], int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(pa.BufferReader(raw))
        _no_duplicates(path, schema.names)
        _missing(path, columns, schema.names)
        table = pq.read_table(pa.BufferReader(raw), columns=columns.names())
    except DataError:
        raise
    except Exception as exc:  # pyarrow's errors: a corrupt or truncated file
        raise DataError(f"{path}: cannot read Parquet ({type(exc).__name__}: {exc})") from None
    out = {name: table.column(name).to_pylist() for name in columns.names()}
    return out, list(range(1, table.num_rows + 1)), 0


def _read(path: Path, raw: bytes, fmt: str, columns: Columns) -> tuple[dict[str, list], list[int], int]:
    """The columns' values, each row's line (row for Parquet) and the number of blank lines skipped (they hold no
    row) in the file's bytes `raw`: the format's reader."""
    if fmt in ("csv", "tsv"):
        return _read_delimited(path, raw, columns, "," if fmt == "csv" else "\t")
    return _read_jsonl(path, raw, columns) if fmt == "jsonl" else _read_parquet(path, raw, columns)


def read_bytes(path: Path) -> bytes:
    """A file's bytes, read once: a regular file, a FIFO or /dev/stdin; a DataError naming a directory, a missing
    file or one that cannot be read."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a file")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_table(path: str | Path, columns: Columns, *, data: bytes | None = None) -> Reviews:
    """The labelled texts of a CSV / TSV / JSON Lines / Parquet file as `Reviews` (k ≥ 2 classes).

    The file is read once (or `data`, its bytes read by the caller to hash them: what is parsed is what was
    hashed). Returns `Reviews` with labels (n,) int64 class codes, `label_names` (k,) in code order, `split` (n,)
    of "train" / "val" / "test" when a split column is given (else None: a seeded hold-out), `groups` (n,) when a
    group column is given. Raises `DataError` (one line) on anything the module docstring lists.
    """
    path = Path(path).expanduser()
    raw = read_bytes(path) if data is None else data
    fmt = table_format(_named(path), raw)
    data, lines, _ = _read(path, raw, fmt, columns)
    where = "row" if fmt == "parquet" else "line"
    if not lines:
        raise DataError(f"{path}: no rows")
    texts = _checked_texts(path, data[columns.text], lines, columns.text, where)
    labels = _labels(path, data[columns.label], lines, columns.label, where)
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
                raise DataError(f"{path}, {where} {line}: split {shown(value)} in column {columns.split!r}; "
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


# ASCII digits only ("²", "①", "٣" and "１" are names here, never numbers): a sign, digits with an optional fraction,
# an optional exponent. "1_000" and "0x1", which Python's own parsers read as numbers, are names too.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# How missing values are written by the tools that write tables (pandas, R, spreadsheets), lower-cased, sign dropped.
_MISSING = frozenset({"nan", "inf", "infinity", "na", "n/a", "#n/a", "null", "<na>"})
_DIGITS = 100  # integers up to 10^100 are classes; a label beyond is no class name anyone meant


class _NoClass(Exception):
    """Why a label is no class (a few words, for the one-line DataError naming its line)."""


def _number(text: str) -> decimal.Decimal | None:
    """The number a label written as text spells exactly ("+01", "1.0", "1e0" → 1; "1.5"), or None for a name; an
    exponent beyond what `decimal` holds ("1e99999999999999999999") is infinite."""
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return decimal.Decimal(text)
    except decimal.InvalidOperation:
        return decimal.Decimal("-Infinity" if text.startswith("-") else "Infinity")


def _class_of(value) -> tuple[str, int | None]:
    """(the label's spelling, its integer or None for a name), or `_NoClass` saying why the value is no class."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise _NoClass("empty")
    if isinstance(value, bool) or not isinstance(value, str | int | float | decimal.Decimal):
        raise _NoClass(f"a {type(value).__name__}")
    if isinstance(value, str):
        text = value.strip()
        if text.lower().lstrip("+-") in _MISSING:
            raise _NoClass("a missing value")
        number = _number(text)
        if number is None:
            return text, None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _NoClass("not a finite number")
        number = decimal.Decimal(repr(value))  # the number as written: 1e300 is 10^300, not the float's binary value
    else:  # an int (JSON, Parquet) or a Decimal (Parquet's decimal columns)
        if isinstance(value, decimal.Decimal) and not value.is_finite():
            raise _NoClass("not a finite number")
        number = decimal.Decimal(value)
    if not number.is_finite() or number.adjusted() >= _DIGITS:
        raise _NoClass(f"a number of more than {_DIGITS} digits")
    if number != number.to_integral_value():
        raise _NoClass("a number but not an integer")
    integer = int(number)
    return (text if isinstance(value, str) else str(integer)), integer


def _labels(path: Path, values: list, lines: list[int], column: str, where: str) -> list:
    """The labels as classes: integers when every label is one, however written (1, "1", "01", "+1", "1.0", "1e0"
    and 1.0 are one class, 1), else names (stripped strings, integers as their digits). Refused, naming the line
    (row): an empty or missing label ("", "NaN", "NA", "null", None), a bool or a list, infinity, a number that is not
    an integer, one of more than 100 digits; and among names, two spellings of one number ("1" and "01": which is
    the class?)."""
    read = []
    for value, line in zip(values, lines, strict=True):
        try:
            read.append(_class_of(value))
        except _NoClass as why:
            raise DataError(f"{path}, {where} {line}: label {shown(value)} in column {column!r} is no class "
                            f"({why}); class labels are names or integers") from None
    if all(number is not None for _, number in read):
        return [number for _, number in read]
    spelled: dict[int, tuple[str, int]] = {}  # names: two spellings of one number would be two classes of one name
    for (text, number), line in zip(read, lines, strict=True):
        if number is None:
            continue
        first, first_line = spelled.setdefault(number, (text, line))
        if first != text:
            raise DataError(f"{path}: labels {shown(first)} and {shown(text)} in column {column!r} ({where}s "
                            f"{first_line} and {line}) are one number written two ways; write each class one way")
    return [text for text, _ in read]


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
    numbers = {v: _number(v.strip()) for v in distinct if isinstance(v, str)}
    if len(numbers) == len(distinct) and all(n is not None and n.is_finite() for n in numbers.values()):
        return sorted(distinct, key=numbers.__getitem__)
    return sorted(distinct, key=str)


@dataclass(frozen=True)
class Texts:
    """The texts of a file, for prediction (`read_texts`), and the blank lines of a text file that were not texts."""

    texts: list[str]
    blank_lines: int = 0


def read_texts(path: str | Path, column: str = "text") -> Texts:
    """The texts of a file, for prediction: one per line of a .txt file (a FIFO or /dev/stdin fed by a pipe too;
    blank lines are no texts, and counted), or the `column` of a CSV / TSV / JSON Lines / Parquet table (an empty
    cell is the text "", kept in its row: its prediction is empty; blank lines between records hold no row and are
    counted). The format is the name's suffix, else that of the file the name leads to (/dev/stdin given a.csv).
    Raises `DataError` (one line) for a missing column, a cell that is not a string, bytes that are not UTF-8 (their
    line), a file that is not what its name says or has no known suffix, a directory."""
    path = Path(path).expanduser()
    raw = read_bytes(path)
    fmt = _texts_format(path)
    if fmt == "lines":
        return texts_of_lines(decode_text(path, raw))
    table_format(_named(path), raw)  # the content agrees with the name
    data, lines, blank = _read(path, raw, fmt, Columns(text=column, label=None))
    values = ["" if value is None else value for value in data[column]]
    for value, line in zip(values, lines, strict=True):
        if not isinstance(value, str):
            raise DataError(f"{path}, {'row' if fmt == 'parquet' else 'line'} {line}: the text in column {column!r} "
                            f"is a {type(value).__name__}, not a string")
    return Texts(values, blank)


def _named(path: Path) -> Path:
    """The name whose suffix tells the format: `path`'s, or when it has no known one, that of the file it leads to
    (/dev/stdin or /dev/fd/0 given a.csv by the shell, a link)."""
    if path.suffix.lower() in FORMATS or path.suffix.lower() == ".txt":
        return path
    behind = Path(os.path.realpath(path))
    return behind if behind.suffix.lower() in FORMATS or behind.suffix.lower() == ".txt" else path


def _texts_format(path: Path) -> str:
    """"lines" (a .txt file, a FIFO, a pipe) or a table format: by the name's suffix, else by the suffix of the file
    the name leads to (/dev/stdin, /dev/fd/0 or a link), else "lines" for what is not a regular file."""
    suffix = _named(path).suffix.lower()
    if suffix == ".txt":
        return "lines"
    if suffix in FORMATS:
        return FORMATS[suffix]
    if not path.is_file():
        return "lines"
    raise DataError(f"{path}: unknown format {path.suffix!r}; known: .txt (one text per line), {', '.join(FORMATS)}")


def texts_of_lines(text: str) -> Texts:
    """One text per non-blank line (lines end at \n, with an optional \r; other Unicode breaks stay in the text);
    the blank lines (a final line break ends the last line, it does not make a blank one) are counted."""
    lines = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []
    texts = [line for line in lines if line.strip()]
    return Texts(texts, len(lines) - len(texts))
