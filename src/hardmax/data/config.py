"""Settings of the IMDb pipeline, its constants, and the error it raises."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["IMDB_BYTES", "IMDB_FILENAME", "IMDB_SHA256", "IMDB_URL", "PAD", "PAD_WORD", "PIPELINE_VERSION",
           "STOP_LISTS", "UNK", "UNK_WORD", "VAL_BLOCK", "Columns", "DataConfig", "DataError", "SplitProtocol",
           "StopWords", "Truncation", "ValSplit", "check_stopwords"]

#: The canonical archive. Checksum and size agree across several independent public records
#: (TensorFlow Datasets metadata, dataset loaders in Rust, Go, Julia and Python).
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"  #: its SHA-256, checked on download
IMDB_BYTES = 84_125_825  #: its size in bytes
IMDB_FILENAME = "aclImdb_v1.tar.gz"  #: its name in the cache

PAD = 0  #: the word id of padding (its word: `PAD_WORD`)
UNK = 1  #: the word id of an out-of-vocabulary word (its word: `UNK_WORD`)
PAD_WORD = "<pad>"  #: padding's word: it cannot collide with cleaned tokens, which are letters only
UNK_WORD = "<unk>"  #: an out-of-vocabulary word's word

#: Bump when cleaning, splitting or tensorising changes what a given config produces: it is part of
#: the cache key, so stale caches are never read back.
PIPELINE_VERSION = 2
PAPER_TEST_FRACTION = 0.3  # the paper's protocol: 70 % train, 30 % test of all 50k reviews

# NLTK's English stop-word list (the `stopwords` corpus of nltk_data, 179 words), which the paper
# used. NLTK fetches it with nltk.download() at run time, one of the flaws this library avoids, so the
# list itself is kept here. Our cleaning deletes apostrophes before the check ("don't" -> "dont"), so
# the contractions are listed in that form.
_NLTK_ENGLISH = """
i me my myself we our ours ourselves you youre youve youll youd your yours yourself yourselves he him
his himself she shes her hers herself it its itself they them their theirs themselves what which who
whom this that thatll these those am is are was were be been being have has had having do does did
doing a an the and but if or because as until while of at by for with about against between into
through during before after above below to from up down in out on off over under again further then
once here there when where why how all any both each few more most other some such no nor not only own
same so than too very s t can will just don dont should shouldve now d ll m o re ve y ain aren arent
couldn couldnt didn didnt doesn doesnt hadn hadnt hasn hasnt haven havent isn isnt ma mightn mightnt
mustn mustnt needn neednt shan shant shouldn shouldnt wasn wasnt weren werent won wont wouldn wouldnt
"""
# The negations in NLTK's list (apostrophes deleted, as our cleaning does). Sentiment reverses on
# them ("not good"), yet the paper's list removes them all.
NEGATIONS = frozenset("""
no nor not ain aren arent couldn couldnt didn didnt doesn doesnt don dont hadn hadnt hasn hasnt haven
havent isn isnt mightn mightnt mustn mustnt needn neednt shan shant shouldn shouldnt wasn wasnt weren
werent won wont wouldn wouldnt
""".split())
#: The stop-word lists a data configuration can name (`STOP_LISTS`).
StopWords = Literal["nltk", "nltk_keep_negations", "sklearn", "none"]
# "nltk": the paper's list; "nltk_keep_negations": the same without its negations (docs/reports/experiments.md
# measures it); "sklearn": scikit-learn's 318 words, longer (it also drops "never", "nothing", "well",
# "serious", and a few content words such as "show", "find", "fire"); "none".
_NLTK = frozenset(_NLTK_ENGLISH.split())


class _StopLists(Mapping):
    """The stop-word lists by name. scikit-learn's is read on first use: importing scikit-learn takes about
    a second, which every `hardmax --help` would pay (the command line reads DataConfig for its options)."""

    def __init__(self) -> None:
        self._lists: dict[str, frozenset[str] | None] = {
            "nltk": _NLTK, "nltk_keep_negations": _NLTK - NEGATIONS, "sklearn": None, "none": frozenset()}

    def __getitem__(self, name: str) -> frozenset[str]:
        if name == "sklearn" and self._lists["sklearn"] is None:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            self._lists["sklearn"] = frozenset(ENGLISH_STOP_WORDS)
        return self._lists[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lists)

    def __len__(self) -> int:
        return len(self._lists)


#: name -> the stop-word set of that list (NLTK's, the paper's, ships with the library).
STOP_LISTS: Mapping[str, frozenset[str]] = _StopLists()
# Words a list keeps that must also skip the lemmatiser: it maps some of them to stop words of the
# list ("dont" -> "do", "isnt" -> "be"), which would drop them after all.
VERBATIM: dict[str, frozenset[str]] = {"nltk_keep_negations": NEGATIONS}


def check_stopwords(stopwords: str) -> None:
    """Raise ValueError unless `stopwords` names one of STOP_LISTS."""
    if stopwords not in STOP_LISTS:
        raise ValueError(f"stopwords must be one of {sorted(STOP_LISTS)}, got {stopwords!r}")

#: "standard": IMDb's 25k/25k split; "paper": the paper's 70/30 split of all 50k reviews.
SplitProtocol = Literal["standard", "paper"]
#: How validation is held out of the training reviews: whole movies, or random reviews.
ValSplit = Literal["movies", "random"]
#: Reviews of one movie have consecutive ids in the dataset (at most 30 per movie and label), so a
#: hold-out of whole blocks of consecutive ids shares at most the two boundary movies of each block
#: with the training part; the test set shares none, and a random hold-out shares most.
VAL_BLOCK = 250
SPLIT_NAMES: tuple[str, ...] = ("train", "val", "test")


#: How a review longer than `max_len` tokens is cut.
Truncation = Literal["head", "head_tail"]


class DataError(ValueError):
    """The data cannot be used as given; the message names the file and the problem."""


# DataConfig's fields for the user's tables: recorded (run records, cache keys) only when set.
TABLE_FIELDS = ("text_column", "label_column", "split_column", "group_column")


@dataclass(frozen=True)
class Columns:
    """Which columns of the user's table hold the text, the label, and optionally the split and the group."""

    text: str
    label: str | None  # None: texts without labels (for prediction)
    split: str | None = None
    group: str | None = None

    def names(self) -> list[str]:
        """The columns named, in the order text, label, split, group (None left out)."""
        return [c for c in (self.text, self.label, self.split, self.group) if c is not None]


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the reviews come from and how they become tensors (paper §5 unless noted)."""

    path: str | None = None  # directory, .tar.gz or Kaggle CSV; None: $HARDMAX_IMDB, the cache, download
    split: SplitProtocol = "standard"  # "standard": the dataset's 25k/25k; "paper": seeded 70/30 of 50k
    val_fraction: float = 0.1  # share of the training part held out (stratified) for model selection
    val_split: ValSplit = "movies"  # "movies": blocks of consecutive review ids (≈ whole movies); "random"
    seed: int = 0  # seeds the paper's 70/30 split and the validation hold-out
    max_len: int = 128  # tokens kept per review after cleaning: longer ones truncated, shorter padded
    # "head_tail": the first and last max_len/2 tokens (chosen on validation, docs/reports/experiments.md);
    # "head": the first max_len (the paper's)
    truncation: Truncation = "head_tail"
    min_count: int = 5  # training occurrences (within max_len) a word needs to get its own id
    max_vocab: int | None = None  # cap on the vocabulary size, PAD and UNK included; None: no cap
    lowercase: bool = True  # the paper's code does not lower-case: lowercase=False reproduces it
    lemmatize: bool = True  # simplemma English lemmas ("movies" -> "movie", "was" -> "be")
    stopwords: StopWords = "nltk"  # stop-word list dropped from the text (see STOP_LISTS); "nltk": the paper's
    limit: int | None = None  # keep the first `limit` reviews of each source split, half per label
    cache_dir: str | None = None  # None: $HARDMAX_CACHE or ~/.cache/hardmax
    use_cache: bool = True  # read and write the preprocessed tensors under cache_dir/imdb
    download: bool = True  # allow fetching the canonical archive when no local copy is found
    # Your own table (CSV, TSV, JSON Lines, Parquet; hardmax.data.tables): the columns of the text and the label
    text_column: str | None = None  # the column holding each text (with --label-column: --data is your table)
    label_column: str | None = None  # the column holding each label (strings or integers, k ≥ 2 classes)
    split_column: str | None = None  # optional: train / validation / test of each row, used as given
    group_column: str | None = None  # optional: validation held out by whole groups (as IMDb's by movie)

    def __post_init__(self) -> None:
        if self.split not in ("standard", "paper"):
            raise ValueError(f"split must be 'standard' or 'paper', got {self.split!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.val_split not in ("movies", "random"):
            raise ValueError(f"val_split must be 'movies' or 'random', got {self.val_split!r}")
        check_stopwords(self.stopwords)
        if self.truncation not in ("head", "head_tail"):
            raise ValueError(f"truncation must be 'head' or 'head_tail', got {self.truncation!r}")
        if self.max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {self.max_len}")
        if self.min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {self.min_count}")
        if self.max_vocab is not None and self.max_vocab < 2:
            raise ValueError(f"max_vocab counts PAD and UNK, so it must be >= 2, got {self.max_vocab}")
        if (self.text_column is None) != (self.label_column is None):
            raise ValueError("a table needs both --text-column and --label-column")
        if self.text_column is None and (self.split_column is not None or self.group_column is not None):
            raise ValueError("--split-column and --group-column are for a table: add --text-column and "
                             "--label-column")
        if self.limit is not None and self.limit < 2:
            raise ValueError(f"limit must be >= 2 (one review per label) or None, got {self.limit}")

    @classmethod
    def from_record(cls, settings: dict, **overrides) -> DataConfig:
        """The config a run directory recorded (its config.json "data" entry), read back.

        Records written before an option existed get that option's value of the time: the first
        128 tokens (`truncation="head"`), scikit-learn's stop words (or none, from the old
        `remove_stopwords=False`) and a random validation split. Keys that are not settings
        (vocabulary size, split sizes) are ignored.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in settings.items() if k in names}
        known.setdefault("truncation", "head")
        known.setdefault("val_split", "random")
        known.setdefault("stopwords", "sklearn" if settings.get("remove_stopwords", True) else "none")
        return cls(**{**known, **overrides})

    def clean_options(self) -> dict[str, object]:
        """Keyword arguments for `clean_text` / `encode_texts` that match this config."""
        return {"lowercase": self.lowercase, "lemmatize": self.lemmatize, "stopwords": self.stopwords}

    def columns(self) -> Columns | None:
        """The table's `Columns`, or None for IMDb."""
        if self.text_column is None:
            return None
        return Columns(text=self.text_column, label=self.label_column, split=self.split_column,
                       group=self.group_column)

    def _key_settings(self) -> dict[str, object]:
        # Everything that changes the tensors; path, cache_dir, use_cache and download do not. The table columns
        # enter only when given, so that IMDb's cache keys are those of before tables existed.
        skip = {"path", "cache_dir", "use_cache", "download"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in skip and not (f.name in TABLE_FIELDS and getattr(self, f.name) is None)}
