"""`load_imdb`: the whole chain, with an on-disk cache keyed by the settings and the data."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from pathlib import Path

import simplemma
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from hardmax.data.config import PIPELINE_VERSION, SPLIT_NAMES, STOP_LISTS, DataConfig, DataError
from hardmax.data.source import GROUPS, acl_root, default_cache_dir, read_reviews, resolve_imdb_path
from hardmax.data.splits import DataStats, ImdbData, SplitStats, build_splits, make_split
from hardmax.data.tables import read_table
from hardmax.data.text import Split, Vocabulary
from hardmax.io import atomic_write, remove_stale_temp_files, write_text

__all__ = ["load_imdb"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# On-disk cache: <cache_dir>/imdb/<key>.safetensors (tensors) + <key>.json (vocabulary, stats).
# --------------------------------------------------------------------------------------------

# 2: labels stored as int64 (int8 wrapped a table of more than 128 classes to negative codes).
# 3: a table's labels read as integers however written ("1e0" is 1) and entries checked when read back.
_CACHE_FORMAT = "hardmax.imdb-cache/3"


def _fingerprint(source: Path, sha256: str | None) -> dict[str, object]:
    """What identifies the data: a file's SHA-256 (`sha256`) of the bytes read from it once (~0.1 s for the 84 MB
    archive; survives copies and touches), the same bytes that are then parsed, so a file changed while it is
    read cannot put one version's rows under another's key; or for a directory the names, sizes and mtimes of
    its review files (no re-reading; compared again after the read, in `load_imdb`)."""
    if sha256 is not None:
        return {"kind": "file", "sha256": sha256}
    root = acl_root(source)
    digest = hashlib.sha256()
    for split, label in GROUPS:
        folder = root / split / label
        if not folder.is_dir():
            continue  # read_reviews reports the layout error
        with os.scandir(folder) as entries:
            listing = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries)
        digest.update(json.dumps([split, label, listing]).encode())
    return {"kind": "directory", "path": str(source.resolve()), "listing": digest.hexdigest()}


def _read_bytes(source: Path) -> bytes:
    """A data file's bytes, read once (a FIFO or /dev/stdin too), or a DataError naming it."""
    try:
        return source.read_bytes()
    except OSError as exc:
        raise DataError(f"{source}: cannot read ({exc.strerror or exc})") from None


def _cache_key(config: DataConfig, fingerprint: dict[str, object]) -> str:
    payload = {
        "pipeline": PIPELINE_VERSION,
        "settings": config._key_settings(),
        "data": fingerprint,
        "simplemma": getattr(simplemma, "__version__", "?"),
        # The list's content, not only its name: scikit-learn may change its list between versions.
        "stop_words": hashlib.sha256(" ".join(sorted(STOP_LISTS[config.stopwords])).encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def _compact(values: torch.Tensor) -> torch.Tensor:
    """`values` (non-negative integers) as int32 when every one fits, which halves the file (ids below the
    vocabulary's size, row numbers), else int64: never a narrower type that would wrap a value around."""
    fits = values.numel() == 0 or (int(values.min()) >= 0 and int(values.max()) < 2**31)
    return values.to(torch.int32 if fits else torch.int64).contiguous()


def _save_cache(stem: Path, key: str, splits: dict[str, Split], vocab: Vocabulary,
                stats: DataStats, config: DataConfig, label_names: tuple[str, ...]) -> None:
    # Ids and rows as int32 where they fit (`_compact`); labels int64, whatever the number of classes. Masks and
    # lengths are derived.
    tensors = {}
    for name, split in splits.items():
        tensors[f"{name}.ids"] = _compact(split.ids)
        tensors[f"{name}.labels"] = split.labels.to(torch.int64).contiguous()
        tensors[f"{name}.index"] = _compact(split.index)
    atomic_write(stem.with_suffix(".safetensors"), lambda tmp: save_file(tensors, tmp, metadata={"key": key}))
    meta = {
        "format": _CACHE_FORMAT,
        "key": key,
        "config": dataclasses.asdict(config),
        "words": list(vocab.words),
        "stats": dataclasses.asdict(stats),
        "label_names": list(label_names),
    }
    # The JSON is written last: its presence marks a complete entry.
    write_text(stem.with_suffix(".json"), json.dumps(meta, ensure_ascii=False))


def _load_cache(stem: Path, key: str) -> tuple[dict[str, Split], Vocabulary, int,
                                               dict[str, SplitStats], tuple[str, ...]] | None:
    """The cached entry, or None if absent or unusable (then it is rebuilt and overwritten)."""
    meta_file, tensor_file = stem.with_suffix(".json"), stem.with_suffix(".safetensors")
    if not meta_file.is_file() or not tensor_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if meta.get("format") != _CACHE_FORMAT or meta.get("key") != key:
            raise ValueError("format or key mismatch")
        with safe_open(str(tensor_file), framework="pt") as handle:
            if (handle.metadata() or {}).get("key") != key:
                raise ValueError("tensor file belongs to another entry")
            splits = {name: make_split(*(handle.get_tensor(f"{name}.{part}").numpy()
                                          for part in ("ids", "labels", "index")))
                      for name in SPLIT_NAMES}
        saved = meta["stats"]
        split_stats = {name: SplitStats(**saved["splits"][name]) for name in SPLIT_NAMES}
        names = tuple(meta.get("label_names", ("negative", "positive")))
        words = len(meta["words"])
        for name, split in splits.items():  # codes a later reader would misread are never handed on
            if len(split) and not (0 <= int(split.labels.min()) and int(split.labels.max()) < len(names)):
                raise ValueError(f"{name} labels outside 0..{len(names) - 1}")
            if len(split) and not (0 <= int(split.ids.min()) and int(split.ids.max()) < words):
                raise ValueError(f"{name} ids outside the vocabulary")
        return splits, Vocabulary(words=tuple(meta["words"])), int(saved["n_bad_bytes"]), split_stats, names
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as exc:
        logger.warning("ignoring unusable cache entry %s (%s); rebuilding", stem, exc)
        return None


# --------------------------------------------------------------------------------------------
# The entry point.
# --------------------------------------------------------------------------------------------


def _report_empty(source: Path, split_stats: dict[str, SplitStats]) -> None:
    """Reviews with nothing left after cleaning are left out of the tensors; say how many, per split; and how many
    held-out rows of a table repeat a training row's text."""
    skipped = {name: s.skipped_empty for name, s in split_stats.items() if s.skipped_empty}
    if skipped:
        logger.warning("%s: %d review(s) empty after cleaning were left out (%s)", source, sum(skipped.values()),
                       ", ".join(f"{name} {n}" for name, n in skipped.items()))
    same = {name: s.same_as_train for name, s in split_stats.items() if s.same_as_train}
    if same:  # a held-out row that repeats a training row measures memory, not generalisation
        logger.warning("%s: %s hold the text of a training row (the same words after cleaning); their accuracy "
                       "measures memory, not generalisation", source,
                       " and ".join(f"{n} {name} row(s)" for name, n in same.items()))


def load_imdb(config: DataConfig | None = None, *, progress: bool = True) -> ImdbData:
    """IMDb reviews as padded id tensors, ready for the sentiment model (paper §5).

    Locates the data (`resolve_imdb_path`), reads it, splits it (`config.split`: the standard
    25k/25k, or the paper's seeded 70/30 of all 50k; validation is a stratified `val_fraction` of the
    training part), cleans every review (`clean_text`), builds the vocabulary from the training part
    only, and encodes each review as `max_len` tokens (`config.truncation`: the first and last halves
    of a longer review by default, or its first tokens), right-padded with PAD.

    Reviews empty after cleaning are skipped, counted (`stats.splits[name].skipped_empty`) and reported
    in a warning.
    With `use_cache`, the result is stored under `cache_dir/imdb/` keyed by a hash of the settings
    and of the data, and later calls read it back. On 2 CPU cores the full 50k pipeline takes
    ~8 s and a cached load ~0.1 s (`benchmarks/bench_data.py`).

    Returns:
        `ImdbData` with `train`, `val`, `test` (`Split`: ids (N, max_len) int64, mask (N, max_len)
        bool, labels (N,) int64, lengths (N,), index (N,)), `vocab`, `stats` and `config`.
    """
    config = DataConfig() if config is None else config
    if config.text_column is not None and not config.path:  # never IMDb's search (or download) for a table
        raise DataError("--text-column and --label-column read your table: give it with --data FILE")
    start = time.perf_counter()
    cache_root = default_cache_dir() if config.cache_dir is None else Path(config.cache_dir).expanduser()
    source = resolve_imdb_path(config.path, download=config.download, cache_dir=cache_root,
                               progress=progress)
    stem = key = None
    # A file is read once: its SHA-256 (the cache key, the run's record) and its rows come from these bytes.
    raw = None if source.is_dir() else _read_bytes(source)
    sha256 = None if raw is None else hashlib.sha256(raw).hexdigest()
    fingerprint = None
    if config.use_cache:
        fingerprint = _fingerprint(source, sha256)
        key = _cache_key(config, fingerprint)
        stem = cache_root / "imdb" / key
        cached = _load_cache(stem, key)
        if cached is not None:
            splits, vocab, n_bad_bytes, split_stats, label_names = cached
            _report_empty(source, split_stats)
            stats = DataStats(
                source=str(source), n_bad_bytes=n_bad_bytes, vocab_size=len(vocab), splits=split_stats,
                cache_hit=True, cache_file=str(stem.with_suffix(".safetensors")),
                seconds=time.perf_counter() - start, sha256=sha256)
            return ImdbData(**splits, vocab=vocab, stats=stats, config=config, label_names=label_names)
    columns = config.columns()
    reviews = read_reviews(source, progress=progress, data=raw) if columns is None else \
        read_table(source, columns, data=raw)
    del raw
    if fingerprint is not None and fingerprint["kind"] == "directory" and _fingerprint(source, None) != fingerprint:
        # a review file changed, appeared or went while the folder was read: its rows are not cached under a key
        # that describes another state of the folder
        logger.warning("%s changed while it was read; its reviews are used but not cached", source)
        stem = key = None
    if reviews.n_bad_bytes:
        logger.warning("%s: %d byte sequence(s) were not UTF-8 and were replaced by U+FFFD",
                       source, reviews.n_bad_bytes)
    splits, vocab, split_stats = build_splits(reviews, config, progress)
    _report_empty(source, split_stats)
    stats = DataStats(
        source=str(source), n_bad_bytes=reviews.n_bad_bytes, vocab_size=len(vocab), splits=split_stats,
        cache_hit=False, cache_file=None if stem is None else str(stem.with_suffix(".safetensors")),
        seconds=time.perf_counter() - start, sha256=sha256)
    if stem is not None and key is not None:
        # Writes killed mid-way (kill -9, disk full) leave temporary files; an hour old, no writer owns them.
        remove_stale_temp_files(stem.parent, older_than=3600.0)
        try:
            _save_cache(stem, key, splits, vocab, stats, config, reviews.label_names)
        except (OSError, SafetensorError) as exc:  # a read-only or full cache directory must not lose the result
            logger.warning("could not write the IMDb cache %s (%s); going on without it",
                           stem, " ".join(str(exc).split()))
    return ImdbData(**splits, vocab=vocab, stats=stats, config=config, label_names=reviews.label_names)
