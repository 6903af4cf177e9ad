"""Train / validation / test rows, the built tensors and their statistics."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from hardmax.data.config import (
    PAD,
    PAPER_TEST_FRACTION,
    SPLIT_NAMES,
    TABLE_FIELDS,
    UNK,
    VAL_BLOCK,
    DataConfig,
    DataError,
)
from hardmax.data.source import Reviews
from hardmax.data.text import Split, Vocabulary, clean_truncated, tensorise, word_cache

__all__ = ["DataStats", "ImdbData", "SplitStats", "build_splits", "file_sha256", "make_split"]

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Splits and statistics.
# --------------------------------------------------------------------------------------------


def _first_per_label(rows: np.ndarray, labels: np.ndarray, limit: int | None, k: int = 2) -> np.ndarray:
    """The first limit//k rows of each of the k labels, the last limit % k labels one more each (k = 2: limit//2
    negative, limit - limit//2 positive), all a label has if fewer."""
    if limit is None:
        return rows
    counts = [limit // k + (c >= k - limit % k) for c in range(k)]
    return np.sort(np.concatenate([rows[labels[rows] == c][:counts[c]] for c in range(k)]))


def _hold_out(rows: np.ndarray, labels: np.ndarray, fraction: float,
              rng: np.random.Generator, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Stratified random hold-out: round(fraction * n_label) rows of each of the k labels -> (rest, held).

    Where that rounds every class to nothing although round(fraction * n) ≥ 1 (many small classes: 1,000 classes
    of 3 rows and a fraction of 0.1), the round(fraction * n) rows are shared out by largest remainder, ties in a
    seeded random order, so the hold-out is never empty for want of rounding (and is unchanged wherever it was
    not empty)."""
    members = [rows[labels[rows] == value] for value in range(k)]
    counts = [round(fraction * len(m)) for m in members]
    total = round(fraction * len(rows))
    if not any(counts) and total:
        share = np.array([fraction * len(m) for m in members])
        base = np.floor(share).astype(np.int64)
        order = np.lexsort((rng.permutation(k), -(share - base)))  # largest remainder first, ties at random
        base[order[: total - int(base.sum())]] += 1
        counts = [min(int(c), len(m)) for c, m in zip(base, members, strict=True)]
    held = [rng.permutation(m)[:c] for m, c in zip(members, counts, strict=True)]
    held_rows = np.sort(np.concatenate(held)).astype(np.int64)
    return np.setdiff1d(rows, held_rows), held_rows


def _hold_out_blocks(rows: np.ndarray, labels: np.ndarray, groups: np.ndarray, fraction: float,
                     rng: np.random.Generator, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Like `_hold_out`, but whole groups at a time: per label, random groups are held out until
    round(fraction * n_label) rows are reached (the last group is cut to size) -> (rest, held)."""
    held = []
    for value in range(k):
        members = rows[labels[rows] == value]
        want = round(fraction * len(members))
        _, inverse = np.unique(groups[members], return_inverse=True)
        rank = rng.permutation(inverse.max() + 1 if len(members) else 0)  # a random order of the groups
        by_group = members[np.argsort(rank[inverse], kind="stable")]
        held.append(by_group[:want])
    held_rows = np.sort(np.concatenate(held)).astype(np.int64)
    return np.setdiff1d(rows, held_rows), held_rows


def _hold_out_groups(rows: np.ndarray, groups: np.ndarray, fraction: float,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Whole groups, in a random order, until round(fraction * n) rows are held out (the last group whole, so no
    group is on both sides; not stratified by label, since a group may hold several labels) -> (rest, held).
    Groups so large that more than twice the share would be held out are refused (DataError)."""
    want = round(fraction * len(rows))
    if want == 0 or len(rows) == 0:
        return rows, rows[:0]
    names, inverse = np.unique(groups[rows], return_inverse=True)
    sizes = np.bincount(inverse)
    order = rng.permutation(len(names))
    taken = order[: int(np.searchsorted(np.cumsum(sizes[order]), want)) + 1]
    held = np.isin(inverse, taken)
    if held.all() or held.sum() > 2 * want + 1:  # a group too large for the share asked: refuse, do not skew
        raise DataError(f"the group column's groups are too large to hold out about {want:,} of {len(rows):,} rows "
                        f"as whole groups (the largest has {int(sizes.max()):,}); use smaller groups or none")
    return rows[~held], rows[held]


def _split_rows(reviews: Reviews, config: DataConfig) -> dict[str, np.ndarray]:
    """Review rows of train / val / test, before cleaning (so cleaning options never move a review
    to another split). Hold-outs are stratified by label: with balanced data this only removes a
    small random imbalance, and it makes validation accuracy comparable across seeds."""
    labels = reviews.labels
    k = len(reviews.label_names)
    if reviews.kind == "table":
        return _table_rows(reviews, config, k)
    if reviews.split is None:
        if config.split == "standard":
            raise DataError(f"{reviews.source} has no train/test split (a Kaggle-style CSV): "
                            "use split='paper' (seeded 70/30)")
        sources = [np.arange(len(reviews))]
    else:
        sources = [np.flatnonzero(reviews.split == name) for name in ("train", "test")]
    sources = [_first_per_label(rows, labels, config.limit, k) for rows in sources]
    if config.split == "standard":
        train, test = sources
    else:
        pool = np.sort(np.concatenate(sources))
        train, test = _hold_out(pool, labels, PAPER_TEST_FRACTION, np.random.default_rng([config.seed, 1]), k)
    # The vocabulary is built on `train` only, so validation, like the test set, has unseen words.
    rng = np.random.default_rng([config.seed, 2])
    if config.val_split == "movies" and reviews.review_ids is not None:
        # Validation, like the test set, should hold movies the model was not trained on; otherwise it
        # rewards memorising names and selects later, more overfitted epochs (see VAL_BLOCK).
        split_code = (reviews.split == "test").astype(np.int64)
        groups = (split_code * 2 + labels.astype(np.int64)) * 10**9 + reviews.review_ids // VAL_BLOCK
        train, val = _hold_out_blocks(train, labels, groups, config.val_fraction, rng, k)
    else:
        train, val = _hold_out(train, labels, config.val_fraction, rng, k)
    return {"train": train, "val": val, "test": test}


def _table_rows(reviews: Reviews, config: DataConfig, k: int) -> dict[str, np.ndarray]:
    """A table's rows: its split column as given (validation held out of train when it names none), else a
    seeded, stratified hold-out of 30 % for test and `val_fraction` of the rest for validation; validation by
    whole groups when a group column is given."""
    labels = reviews.labels
    everything = _first_per_label(np.arange(len(reviews)), labels, config.limit, k)
    if reviews.split is not None:
        train, val, test = (everything[reviews.split[everything] == name] for name in ("train", "val", "test"))
        if not len(test):
            raise DataError(f"{reviews.source}: the split column names no test rows")
        if len(val):
            return {"train": train, "val": val, "test": test}
    elif reviews.groups is not None:  # test, like validation, of whole groups
        train, test = _hold_out_groups(everything, reviews.groups, PAPER_TEST_FRACTION,
                                       np.random.default_rng([config.seed, 1]))
    else:
        train, test = _hold_out(everything, labels, PAPER_TEST_FRACTION, np.random.default_rng([config.seed, 1]), k)
    rng = np.random.default_rng([config.seed, 2])
    if reviews.groups is not None:
        train, val = _hold_out_groups(train, reviews.groups, config.val_fraction, rng)
    else:
        train, val = _hold_out(train, labels, config.val_fraction, rng, k)
    return {"train": train, "val": val, "test": test}


@dataclass(frozen=True, kw_only=True)
class SplitStats:
    """What cleaning and encoding did to one split (0.0 for the means of an empty split)."""

    reviews: int  # rows kept in the split
    skipped_empty: int  # reviews dropped because nothing was left after cleaning
    # (the rows the split was given are reviews + skipped_empty)
    mean_length: float  # real tokens per review, after truncation to max_len
    mean_distinct: float  # distinct ids per review (all UNKs count as one), what deduplication keeps
    unk_rate: float  # fraction of real tokens that are UNK
    truncated: float  # fraction of reviews that had more than max_len tokens
    # rows whose text is a training row's, or reads the same after cleaning (the model sees one input; own tables)
    same_as_train: int = 0


@dataclass(frozen=True, kw_only=True)
class DataStats:
    """Provenance and summary of a `load_imdb` call."""

    source: str  # the directory, archive or CSV read
    n_bad_bytes: int  # undecodable UTF-8 sequences read as U+FFFD
    vocab_size: int  # ids, PAD and UNK included
    splits: dict[str, SplitStats]  # "train", "val", "test"
    cache_hit: bool  # True when the tensors came from the on-disk cache
    cache_file: str | None  # the .safetensors file written or read; None with use_cache=False
    seconds: float  # wall-clock time of the call
    sha256: str | None = None  # SHA-256 of the file's bytes the rows were parsed from (None: a directory)


def _split_stats(ids: np.ndarray, lengths: np.ndarray, truncated: np.ndarray, skipped: int,
                 same: int = 0) -> SplitStats:
    n = len(ids)
    if n == 0:
        return SplitStats(reviews=0, skipped_empty=skipped, mean_length=0.0, mean_distinct=0.0,
                          unk_rate=0.0, truncated=0.0, same_as_train=same)
    ordered = np.sort(ids, axis=1)
    distinct = 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1) - (lengths < ids.shape[1])  # minus PAD
    return SplitStats(
        reviews=n,
        skipped_empty=skipped,
        mean_length=float(lengths.mean()),
        mean_distinct=float(distinct.mean()),
        unk_rate=float((ids == UNK).sum() / lengths.sum()),
        truncated=float(truncated.mean()),
        same_as_train=same,
    )


@dataclass(frozen=True, kw_only=True)
class ImdbData:
    """Train / validation / test tensors with their vocabulary (see `load_imdb`)."""

    train: Split
    val: Split
    test: Split
    vocab: Vocabulary
    stats: DataStats
    config: DataConfig
    label_names: tuple[str, ...] = ("negative", "positive")  # class c is label_names[c]

    @property
    def classes(self) -> int:
        """The number of classes k."""
        return len(self.label_names)

    def info(self) -> dict:
        """The data settings that change a trained model, with the vocabulary and split sizes: what a run
        records as config.json's "data" (`hardmax.training.train(..., data_info=data.info())`)."""
        settings = {k: v for k, v in asdict(self.config).items() if k not in ("path", "cache_dir", "use_cache",
                                                                             "download")
                    and not (k in TABLE_FIELDS and v is None)}  # IMDb's records stay as they were
        record = {**settings, "vocab_size": len(self.vocab), "train": len(self.train), "val": len(self.val),
                  "test": len(self.test)}
        if self.config.text_column is not None:  # a table: its classes, where it was read, what it held
            table = Path(self.config.path).expanduser().resolve()
            # the SHA-256 of the very bytes the rows came from (a file rewritten since is not mistaken for them)
            sha = self.stats.sha256 or file_sha256(table)
            record.update(label_names=list(self.label_names), table=str(table), table_sha256=sha)
        return record


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes (what identifies a table a run was trained on)."""
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def make_split(ids: np.ndarray, labels: np.ndarray, index: np.ndarray) -> Split:
    """The `Split` of padded `ids` (N, L), `labels` (N,) and source rows `index` (N,); mask: ids != PAD."""
    ids_t = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64))
    mask = ids_t != PAD
    return Split(ids=ids_t, mask=mask, labels=torch.from_numpy(labels.astype(np.int64)),
                 lengths=mask.sum(dim=1), index=torch.from_numpy(index.astype(np.int64)))


def build_splits(reviews: Reviews, config: DataConfig, progress: bool) -> tuple[dict[str, Split], Vocabulary,
                                                                          dict[str, SplitStats]]:
    """Clean, truncate and encode `reviews` into `config`'s train, val and test splits.

    Returns the `Split`s by name, the `Vocabulary` (built on the training part only) and each split's
    `SplitStats`; reviews left empty by cleaning are dropped and counted. `progress` shows a bar per split.
    """
    rows = _split_rows(reviews, config)
    given = {name: len(r) for name, r in rows.items()}
    # One process: cleaning the 50k reviews takes ~7 s of CPU. A Pool(2) was measured slower on
    # the 2-core machine (each worker lemmatises the shared vocabulary again, token lists must be
    # pickled back, and the readers' cores are rarely idle), so it is not used.
    cache = word_cache(**config.clean_options())
    tokens: dict[str, list[list[str]]] = {}
    cut: dict[str, np.ndarray] = {}
    for name in SPLIT_NAMES:
        texts = (reviews.texts[r] for r in rows[name])
        pairs = [clean_truncated(t, cache, config.max_len, config.truncation) for t in tqdm(
            texts, total=len(rows[name]), desc=f"clean {name}", unit=" reviews", disable=not progress)]
        tokens[name] = [p[0] for p in pairs]
        cut[name] = np.array([p[1] for p in pairs], dtype=bool)
    skipped = {}
    for name in SPLIT_NAMES:
        keep = np.array([len(t) > 0 for t in tokens[name]], dtype=bool)
        skipped[name] = int((~keep).sum())
        if skipped[name]:
            rows[name] = rows[name][keep]
            tokens[name] = [t for t in tokens[name] if t]
            cut[name] = cut[name][keep]
    _say_why_empty(reviews, config, given, skipped)
    same = _same_as_train(tokens) if reviews.kind == "table" else {}
    # Counting only the kept tokens: a word seen only past the truncation point would get an
    # embedding that no gradient ever reaches, so it is better mapped to UNK.
    vocab = Vocabulary.build(tokens["train"], min_count=config.min_count, max_size=config.max_vocab)
    splits, stats = {}, {}
    for name in SPLIT_NAMES:
        ids = tensorise(tokens[name], vocab, config.max_len)
        truncated = cut[name]
        splits[name] = make_split(ids, reviews.labels[rows[name]], rows[name])
        stats[name] = _split_stats(ids, splits[name].lengths.numpy(), truncated, skipped[name], same.get(name, 0))
    return splits, vocab, stats


def _same_as_train(tokens: dict[str, list[list[str]]]) -> dict[str, int]:
    """How many validation and test rows read as a training row after cleaning (the same text, or one that differs
    only in case, punctuation, digits or stop words, within the tokens kept): the model sees one input, so a table
    whose held-out rows repeat its training rows measures memory, not generalisation."""
    seen = {tuple(t) for t in tokens["train"]}
    return {name: sum(tuple(t) in seen for t in tokens[name]) for name in ("val", "test")}


def _say_why_empty(reviews: Reviews, config: DataConfig, given: dict[str, int], skipped: dict[str, int]) -> None:
    """A training or validation split left empty is a warning saying why (training refuses it later): the share
    held out rounds to no row, or every row of it was empty after cleaning."""
    for name, what in (("train", "training"), ("val", "validation")):
        if given[name] - skipped[name] > 0:
            continue
        if given[name]:
            why = f"all {given[name]:,} of its rows are empty after cleaning"
        elif name == "train":
            why = f"only {sum(given.values()):,} rows were read, all held out"
        elif not config.val_fraction:
            why = "val_fraction is 0"
        else:
            why = (f"val_fraction {config.val_fraction:g} of the {given['train']:,} training rows is "
                   f"{config.val_fraction * given['train']:.2g} row, which rounds to none")
            if reviews.split is not None:
                why = "the split column names no validation rows, and " + why
        logger.warning("%s: the %s split is empty: %s", reviews.source, what, why)
