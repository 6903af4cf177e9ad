"""Locating, downloading and reading the reviews: an aclImdb directory, its .tar.gz, or a Kaggle CSV."""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import http.client
import io
import itertools
import logging
import lzma
import os
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from hardmax.data.config import IMDB_FILENAME, IMDB_SHA256, IMDB_URL, DataError
from hardmax.io import atomic_write

__all__ = ["Reviews", "acl_root", "default_cache_dir", "download_imdb", "not_found_message", "read_reviews",
           "resolve_imdb_path"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Locating and downloading the archive.
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """$HARDMAX_CACHE if set, else ~/.cache/hardmax (read at call time, not import time)."""
    return Path(os.environ.get("HARDMAX_CACHE") or "~/.cache/hardmax").expanduser()


def download_imdb(
    directory: str | Path | None = None,
    *,
    url: str = IMDB_URL,
    sha256: str | None = IMDB_SHA256,
    progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download `url` into `directory` (default `default_cache_dir()`), verify it, move it in place.

    The bytes go to a temporary file in the same directory while their SHA-256 is computed; only a
    file with the expected checksum is renamed (atomically) to its final name, so an interrupted or
    corrupted download never leaves a file that looks complete. Any `urllib` URL works (file:// in
    tests). Returns the path of the verified file; raises `DataError` on network or checksum failure.
    """
    directory = default_cache_dir() if directory is None else Path(directory).expanduser()
    name = Path(urllib.parse.urlparse(url).path).name or IMDB_FILENAME
    target = directory / name

    def fetch(tmp: str) -> None:
        digest = hashlib.sha256()
        with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"download {name}",
                      disable=not progress) as bar:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        actual = digest.hexdigest()
        if sha256 is not None and actual != sha256.lower():
            raise DataError(f"{url}: SHA-256 is {actual}, expected {sha256.lower()}; download discarded")

    try:
        atomic_write(target, fetch)  # the temporary file is removed on any failure
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        # HTTPError's str has the status code; URLError's reason is the useful part.
        reason = exc if isinstance(exc, urllib.error.HTTPError) else getattr(exc, "reason", exc)
        raise DataError(f"could not download {url}: {reason}") from exc
    logger.info("downloaded %s to %s", url, target)
    return target


def resolve_imdb_path(
    path: str | Path | None = None,
    *,
    download: bool = True,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> Path:
    """Where to read IMDb from: `path` > $HARDMAX_IMDB > cached canonical archive > download.

    Any local directory, archive or CSV with the right layout is accepted as it is; only a
    downloaded file is checked against `IMDB_SHA256`. Raises `DataError` when the given path does
    not exist, or when nothing is found and `download` is False.
    """
    cache = default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()
    origin = "--data (DataConfig.path)"
    if path is None or str(path) == "":
        path, origin = os.environ.get("HARDMAX_IMDB") or None, "$HARDMAX_IMDB"
    if path is not None:
        resolved = Path(path).expanduser()
        if not resolved.exists():
            raise DataError(not_found_message(f"{resolved} (from {origin}) does not exist", cache))
        return resolved
    cached = cache / IMDB_FILENAME
    if cached.is_file():
        return cached
    if not download:
        raise DataError(not_found_message("no IMDb data found and downloading is off", cache))
    try:
        return download_imdb(cache, progress=progress)
    except DataError as exc:
        raise DataError(not_found_message(str(exc), cache)) from exc


def not_found_message(reason: str, cache: Path) -> str:
    """The one message of every "no data" path: what went wrong, then where the reviews are looked for."""
    return (f"{reason}. The reviews are looked for in --data PATH (DataConfig.path), then $HARDMAX_IMDB, then "
            f"{cache / IMDB_FILENAME} (the cache directory: --cache-dir or $HARDMAX_CACHE), then downloaded "
            f"from {IMDB_URL}")


# --------------------------------------------------------------------------------------------
# Reading reviews: aclImdb directory, its .tar.gz, or a Kaggle-style CSV.
# --------------------------------------------------------------------------------------------

# ".../train/pos/123_9.txt": split, label, review id, rating (1-10). "unsup" and "._" files never match.
_MEMBER = re.compile(r"(?:^|/)(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")
_FILE = re.compile(r"(\d+)_(\d+)\.txt$")
GROUPS = (("train", "neg"), ("train", "pos"), ("test", "neg"), ("test", "pos"))
_LAYOUT = "aclImdb/{train,test}/{pos,neg}/ID_RATING.txt"
_CSV_LABELS = {"positive": 1, "negative": 0, "pos": 1, "neg": 0}
# The Large Movie Review Dataset v1.0 has exactly this many reviews under each of GROUPS.
CANONICAL_GROUP_SIZE = 12_500


@dataclass(frozen=True, kw_only=True)
class Reviews:
    """Raw reviews in a fixed order: train/neg, train/pos, test/neg, test/pos by review id (archives),
    or file order (CSV), so a directory and its .tar.gz give identical `Reviews`.

    Attributes:
        texts: n raw review strings.
        labels: (n,) class codes: int8 for IMDb and Kaggle's two (1 = positive), int64 for a table's k classes
            (any number of them).
        split: (n,) str array of "train"/"test", or None for a CSV (which has no standard split).
        review_ids: (n,) int64 IDs from the file names, or None for a CSV.
        ratings: (n,) int8 star ratings 1-10 from the file names, or None for a CSV.
        source: the path read.
        n_bad_bytes: byte sequences that were not valid UTF-8 and were read as U+FFFD.
        label_names: the name of each class, in code order (IMDb: negative, positive).
        groups: (n,) int64 group of each row for a held-out validation of whole groups (a table's group
            column), or None.
        kind: "imdb" (the archive or its directory), "kaggle" (the review,sentiment CSV) or "table" (the user's
            CSV / TSV / JSON Lines / Parquet, `hardmax.data.tables`); `split` may then also hold "val".
    """

    texts: list[str]
    labels: np.ndarray
    split: np.ndarray | None
    review_ids: np.ndarray | None
    ratings: np.ndarray | None
    source: str
    n_bad_bytes: int = 0
    label_names: tuple[str, ...] = ("negative", "positive")
    groups: np.ndarray | None = None
    kind: str = "imdb"

    def __len__(self) -> int:
        return len(self.texts)


def _decode(raw: bytes) -> tuple[str, int]:
    """UTF-8 text and the number of undecodable byte sequences (replaced, never fatal)."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        # U+FFFD already present in the file is not a bad byte.
        return text, text.count("\ufffd") - raw.count("\ufffd".encode())


def read_reviews(path: str | Path, *, progress: bool = False, data: bytes | None = None) -> Reviews:
    """Read all labelled reviews from an aclImdb directory, its .tar.gz, or a Kaggle-style CSV.

    Archives and directories follow aclImdb/{train,test}/{pos,neg}/ID_RATING.txt (the directory may
    be `aclImdb` itself or its parent; the unlabelled `unsup` reviews are ignored). A ".csv" file
    needs columns `review` and `sentiment` (positive/negative). The tar is streamed once, never
    extracted. The user's own tables are read by `hardmax.data.tables.read_table`. `data`: the file's bytes, when
    the caller has read them once already (to hash them: `load_imdb`), parsed instead of reading the file again.
    Raises `DataError` on a missing file, a corrupt or truncated archive, a wrong layout, an unknown label or
    missing columns.
    """
    path = Path(path).expanduser()
    if data is None and not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if path.is_file() and path.suffix.lower() in (".tsv", ".jsonl", ".ndjson", ".parquet", ".pq"):
        raise DataError(f"{path}: a table of your own needs --text-column and --label-column (which columns hold "
                        "the text and the label)")
    if data is None and path.is_dir():
        return _read_directory(path, progress)
    if path.name.lower().endswith(".csv"):
        return _read_csv(path, data)
    return _read_tar(path, progress, data)


def _open_decompressed(path: Path, data: bytes | None = None):
    """The archive's uncompressed bytes (of `data`, or of the file) as a file object whose reader checks the
    compression's own integrity data: gzip's CRC-32 and length trailer (`gzip`), bzip2's block CRCs, xz's check."""
    if data is not None:
        magic, source = data[:6], io.BytesIO(data)
    else:
        with path.open("rb") as handle:
            magic = handle.read(6)
        source = path
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=source, mode="rb") if data is not None else gzip.open(path, "rb")
    if magic[:3] == b"BZh":
        return bz2.open(source, "rb")
    if magic == b"\xfd7zXZ\x00":
        return lzma.open(source, "rb")
    return source if data is not None else path.open("rb")  # a plain tar: its header checksums are all there is


def _read_tar(path: Path, progress: bool, data: bytes | None = None) -> Reviews:
    records: list[tuple[str, str, int, int, str]] = []
    n_bad = 0
    try:
        with _open_decompressed(path, data) as stream, tarfile.open(fileobj=stream, mode="r|") as archive:
            # Stream mode: one sequential pass over the bytes, never extracted.
            for member in tqdm(archive, desc=f"read {path.name}", unit=" files", disable=not progress):
                match = _MEMBER.search(member.name)
                if match is None or not member.isfile():
                    continue
                handle = archive.extractfile(member)
                text, bad = _decode(handle.read() if handle is not None else b"")
                n_bad += bad
                split, label, review_id, rating = match.groups()
                records.append((split, label, int(review_id), int(rating), text))
            # tarfile ends its iteration quietly at a damaged header in the middle of an archive; a
            # complete archive ends with zero blocks only. Reading them to the end also makes the
            # decompressor reach, and check, its trailer (gzip's CRC-32 and length).
            tail_offset = archive.offset
            while chunk := archive.fileobj.read(1 << 20):
                if chunk.count(0) != len(chunk):
                    raise tarfile.ReadError(f"a damaged tar header near uncompressed byte {tail_offset:,}; "
                                            f"{len(records):,} reviews were read before it")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError, OSError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise DataError(f"{path}: the archive is damaged ({type(exc).__name__}: {reason}); "
                        "download it again or use another copy") from exc
    return _assemble(records, path, n_bad)


def acl_root(path: Path) -> Path:
    """The folder holding train/ and test/: `path` itself or its aclImdb/ subfolder."""
    return path if (path / "train").is_dir() or (path / "test").is_dir() else path / "aclImdb"


def _read_directory(path: Path, progress: bool) -> Reviews:
    root = acl_root(path)
    files: list[tuple[str, str, int, int, str]] = []
    for split, label in GROUPS:
        folder = root / split / label
        if not folder.is_dir():
            raise DataError(f"{path}: wrong layout, no folder {folder} (expected {_LAYOUT})")
        with os.scandir(folder) as entries:
            for entry in entries:
                match = _FILE.fullmatch(entry.name)
                if match is not None and entry.is_file():
                    files.append((split, label, int(match[1]), int(match[2]), entry.path))
    records = []
    n_bad = 0
    for split, label, review_id, rating, file in tqdm(files, desc=f"read {path.name}", unit=" files",
                                                      disable=not progress):
        try:
            text, bad = _decode(Path(file).read_bytes())
        except OSError as exc:
            raise DataError(f"{file}: cannot read ({exc})") from exc
        n_bad += bad
        records.append((split, label, review_id, rating, text))
    return _assemble(records, path, n_bad)


def _assemble(records: list[tuple[str, str, int, int, str]], source: Path, n_bad: int) -> Reviews:
    """Check the layout (four non-empty groups, no duplicates) and fix the order."""
    present = Counter((split, label) for split, label, *_ in records)
    if not records:
        raise DataError(f"{source}: no reviews found (expected {_LAYOUT})")
    for group in GROUPS:
        if present[group] == 0:
            raise DataError(f"{source}: wrong layout, no reviews under {'/'.join(group)} "
                            f"(expected {_LAYOUT})")
    for split, label, review_id, rating, _ in records:
        if not 1 <= rating <= 10 or review_id >= 2**63:
            raise DataError(f"{source}: review file {split}/{label}/{review_id}_{rating}.txt has "
                            + (f"rating {rating}, expected 1 to 10" if review_id < 2**63 else "an id out of range"))
    if len(records) >= 2 * CANONICAL_GROUP_SIZE:
        # More than half of the dataset's reviews: the dataset itself (a smaller sample is someone's choice,
        # and any file name may hold it), so a copy that lost reviews is caught by its counts.
        counts = {"/".join(group): present[group] for group in GROUPS}
        if any(n != CANONICAL_GROUP_SIZE for n in counts.values()):
            found = ", ".join(f"{name} {n:,}" for name, n in counts.items())
            raise DataError(f"{source}: the Large Movie Review Dataset has {CANONICAL_GROUP_SIZE:,} reviews under "
                            f"each of train/neg, train/pos, test/neg, test/pos; found {found}: the copy is "
                            "incomplete or damaged")
    order = {group: rank for rank, group in enumerate(GROUPS)}
    records.sort(key=lambda r: (order[(r[0], r[1])], r[2]))
    for previous, current in itertools.pairwise(records):
        if previous[:3] == current[:3]:
            raise DataError(f"{source}: review {current[0]}/{current[1]}/{current[2]}_*.txt appears twice")
    return Reviews(
        texts=[r[4] for r in records],
        labels=np.array([r[1] == "pos" for r in records], dtype=np.int8),
        split=np.array([r[0] for r in records]),
        review_ids=np.array([r[2] for r in records], dtype=np.int64),
        ratings=np.array([r[3] for r in records], dtype=np.int8),
        source=str(source),
        n_bad_bytes=n_bad,
    )


def _read_csv(path: Path, raw: bytes | None = None) -> Reviews:
    try:
        raw = path.read_bytes() if raw is None else raw
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc})") from exc
    text, n_bad = _decode(raw)
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""))
    try:
        header = [name.strip().lower() for name in next(reader)]
    except StopIteration:
        raise DataError(f"{path}: empty CSV file (expected columns review,sentiment)") from None
    except csv.Error as exc:
        raise DataError(f"{path}: malformed CSV header ({exc})") from exc
    missing = [name for name in ("review", "sentiment") if name not in header]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; found {header} "
                        "(expected a Kaggle-style CSV with columns review,sentiment)")
    review_col, label_col = header.index("review"), header.index("sentiment")
    texts, labels = [], []
    try:
        for row_number, row in enumerate(reader, start=1):
            if not row:
                continue  # a blank line
            if len(row) <= max(review_col, label_col):
                raise DataError(f"{path}, line {reader.line_num} (row {row_number}): "
                                f"{len(row)} field(s), expected {len(header)}")
            label = _CSV_LABELS.get(row[label_col].strip().lower())
            if label is None:
                raise DataError(f"{path}, line {reader.line_num} (row {row_number}): unknown sentiment "
                                f"label {row[label_col]!r} (expected 'positive' or 'negative')")
            texts.append(row[review_col])
            labels.append(label)
    except csv.Error as exc:
        raise DataError(f"{path}, line {reader.line_num}: malformed CSV ({exc})") from exc
    if not texts:
        raise DataError(f"{path}: no reviews, only a header")
    n_positive = sum(labels)
    if n_positive in (0, len(labels)):
        raise DataError(f"{path}: all {len(labels):,} reviews are {'positive' if n_positive else 'negative'}; "
                        "a sentiment dataset needs both labels")
    return Reviews(texts=texts, labels=np.array(labels, dtype=np.int8), split=None, review_ids=None,
                   ratings=None, source=str(path), n_bad_bytes=n_bad, kind="kaggle")
