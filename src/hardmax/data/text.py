"""Text pipeline (clean, lemmatise, drop stop words), the vocabulary, and id tensors for new text."""

from __future__ import annotations

import html
import itertools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import simplemma
import torch
from torch import Tensor

from hardmax.data.config import (
    PAD,
    PAD_WORD,
    STOP_LISTS,
    UNK,
    UNK_WORD,
    VERBATIM,
    DataError,
    StopWords,
    Truncation,
    check_stopwords,
)

__all__ = ["EncodedTexts", "Split", "Vocabulary", "clean_text", "clean_truncated", "clear_word_caches", "encode_texts",
           "tensorise", "word_cache"]

# --------------------------------------------------------------------------------------------
# Text pipeline.
# --------------------------------------------------------------------------------------------

# A tag starts with a letter or "/" + letter, so "a < b and c > d" is left alone.
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_URL = re.compile(r"(?:\b[A-Za-z][A-Za-z0-9+.-]*://|\b[Ww][Ww][Ww]\.)\S+")
# Runs of letters (any script); digits, "_" and punctuation separate words.
_WORD = re.compile(r"[^\W\d_]+")


def _words(text: str) -> list[str]:
    """Markup, URLs, punctuation and digits out; the remaining runs of letters, in order."""
    # The substring tests skip the regexes on the many reviews that cannot match.
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)  # "e" + U+0301 -> "é", so the accent joins its word
    if "&" in text:
        text = html.unescape(text)  # "Ji&#345;í" -> "Jiří", one word; "&amp;" -> "&", a separator
    if "<" in text:
        text = _HTML_TAG.sub(" ", text)  # before URLs: <a href="http://..."> goes as one tag
    if "://" in text or "www." in text or "WWW." in text:
        text = _URL.sub(" ", text)
    # Apostrophes are deleted, not split on: "don't" -> "dont" (-> lemma "do", a stop word) rather
    # than "don" + "t". Every other non-letter separates words, so "end.The" -> "end", "The".
    text = text.replace("'", "").replace("\u2019", "")
    return _WORD.findall(text)


class _WordCache(dict):
    """Surface word -> token ("" when dropped); each distinct word is normalised once.

    IMDb has ~11 M words but ~135 k distinct ones, so the lemmatiser runs ~80x less often, and
    `map(cache.__getitem__, words)` keeps the hot loop in C.
    """

    def __init__(self, lowercase: bool, lemmatize: bool, stopwords: StopWords) -> None:
        super().__init__()
        self.lowercase, self.lemmatize, self.stop_words = lowercase, lemmatize, STOP_LISTS[stopwords]
        self.verbatim = VERBATIM.get(stopwords, frozenset())  # kept words the lemmatiser would turn into stop words

    def __missing__(self, word: str) -> str:
        token = word.lower() if self.lowercase else word
        if self.lemmatize and word.lower() not in self.verbatim:
            lemma = simplemma.lemmatize(token, lang="en")
            token = lemma.lower() if self.lowercase else lemma
        if not token.isalpha():
            # Letters only: the word regex lets through numeric symbols ("A¹", "Ⅻ"), and lower() or
            # a lemma can add marks or hyphens ("İ".lower() = "i" + U+0307).
            token = "".join(filter(str.isalpha, token))
        # Stop words are checked on the surface word and on its lemma, whatever the order of the
        # two steps in a description: the lemma check drops inflections that are not in the list
        # ("doing" -> "do", "dont" -> "do"), the surface check drops a listed word whose lemma is
        # not ("less"/"least" -> "little"). Single letters are remnants ("s" of "1980s") or stop
        # words ("a", "I") and are dropped too.
        drop = len(token) < 2 or word.lower() in self.stop_words or token.lower() in self.stop_words
        token = "" if drop else token
        self[word] = token
        return token


_WORD_CACHES: dict[tuple[bool, bool, str], _WordCache] = {}


def word_cache(lowercase: bool, lemmatize: bool, stopwords: StopWords) -> _WordCache:
    """The shared cache (surface word -> token, "" when dropped) of these cleaning options, made on first use."""
    check_stopwords(stopwords)
    key = (bool(lowercase), bool(lemmatize), stopwords)
    if key not in _WORD_CACHES:
        _WORD_CACHES[key] = _WordCache(*key)
    return _WORD_CACHES[key]


def clear_word_caches() -> None:
    """Forget every normalised word held in memory (benchmarks time cold runs with it)."""
    _WORD_CACHES.clear()


def clean_text(text: str, *, lowercase: bool = True, lemmatize: bool = True,
               stopwords: StopWords = "nltk") -> list[str]:
    """The paper's text pipeline (§5), offline: raw review -> list of tokens.

    1. HTML entities are decoded (`&#345;` -> "ř"), then HTML tags (`<br />`) and URLs removed.
    2. Apostrophes are deleted ("don't" -> "dont"); every other punctuation mark, digit or
       underscore separates words; what remains are runs of letters (Unicode, NFC-normalised).
    3. Each word is lower-cased (unless `lowercase=False`: the paper's code keeps case, though
       simplemma returns lower-case lemmas for the words it knows), lemmatised with simplemma
       (English), and dropped if it is a single letter or if the word or its lemma is a stop word
       of the chosen list (`stopwords`): "nltk", NLTK's English list as the paper used (shipped with
       this library, since NLTK downloads it at run time), "sklearn", scikit-learn's 318 words (it
       also drops "never", "nothing", "well" and some content words such as "show", "find", "fire"),
       "nltk_keep_negations", NLTK's without "not", "no", "dont", ... (kept verbatim, not lemmatised),
       or "none". The nltk and sklearn lists drop "not" and "no".

    Example: "I loved these movies!<br /><br />Best of 2009: http://x.y" -> ["love", "movie", "good"].
    """
    cache = word_cache(lowercase, lemmatize, stopwords)
    return [token for token in map(cache.__getitem__, _words(text)) if token]


def _clean_head(text: str, cache: _WordCache, limit: int) -> list[str]:
    """The first `limit` tokens of `clean_text(text)`; the words after them are never normalised."""
    return list(itertools.islice(filter(None, map(cache.__getitem__, _words(text))), limit))


def clean_truncated(text: str, cache: _WordCache, max_len: int, truncation: str) -> tuple[list[str], bool]:
    """(kept tokens, whether the review was longer than max_len).

    "head" keeps the first max_len tokens. "head_tail" keeps the first ⌈max_len/2⌉ and the last
    ⌊max_len/2⌋: reviews often close with their verdict, which head truncation cuts off.
    """
    if truncation == "head":
        # max_len + 1 tokens tell truncated reviews apart without normalising the rest of the text.
        tokens = _clean_head(text, cache, max_len + 1)
        return tokens[:max_len], len(tokens) > max_len
    tokens = list(filter(None, map(cache.__getitem__, _words(text))))
    if len(tokens) <= max_len:
        return tokens, False
    tail = max_len // 2
    return tokens[: max_len - tail] + (tokens[-tail:] if tail else []), True


# --------------------------------------------------------------------------------------------
# Vocabulary.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Vocabulary:
    """Word <-> id. words[0] is PAD_WORD (id `PAD` = 0), words[1] is UNK_WORD (id `UNK` = 1); the
    others follow by decreasing training count, ties in alphabetical order (deterministic)."""

    words: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = tuple(self.words)
        if len(words) < 2 or words[PAD] != PAD_WORD or words[UNK] != UNK_WORD:
            raise ValueError(f"a vocabulary starts with {PAD_WORD!r}, {UNK_WORD!r}; got {words[:2]}")
        index = {word: i for i, word in enumerate(words)}
        if len(index) != len(words):
            repeated = [w for w, c in Counter(words).items() if c > 1][:5]
            raise ValueError(f"repeated words in vocabulary: {repeated}")
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "_index", index)

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], *, min_count: int = 1,
              max_size: int | None = None) -> Vocabulary:
        """Words seen at least `min_count` times, the most frequent first; at most `max_size` ids
        in all (PAD and UNK included)."""
        counts = Counter(itertools.chain.from_iterable(token_lists))
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        if max_size is not None:
            kept = kept[: max(max_size - 2, 0)]
        return cls(words=(PAD_WORD, UNK_WORD, *kept))

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of `tokens`; words not in the vocabulary become `UNK`."""
        get = self._index.get
        return [get(token, UNK) for token in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of `ids` (a list, tensor or array of ints)."""
        return [self.words[int(i)] for i in ids]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def to_json(self) -> str:
        """The vocabulary as JSON text, {"format": "hardmax.vocabulary/1", "words": [...]} in id order."""
        return json.dumps({"format": "hardmax.vocabulary/1", "words": list(self.words)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocabulary:
        """The vocabulary `to_json` wrote; DataError when the JSON is not a hardmax vocabulary record
        (json.JSONDecodeError when it is not JSON)."""
        payload = json.loads(text)
        if not isinstance(payload, dict) or payload.get("format") != "hardmax.vocabulary/1":
            raise DataError("not a hardmax vocabulary (expected format 'hardmax.vocabulary/1')")
        return cls(words=tuple(payload["words"]))


# --------------------------------------------------------------------------------------------
# Tensors.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Split:
    """One split as tensors; N reviews, L = max_len. Real tokens come first, then PAD.

    Attributes:
        ids: (N, L) int64 word ids; PAD (0) after the real tokens, UNK (1) for unknown words.
        mask: (N, L) bool, True on real tokens (ids != PAD).
        labels: (N,) int64, 1 = positive, 0 = negative (`.float()` for a BCE loss).
        lengths: (N,) int64 real tokens per review, 1..L.
        index: (N,) int64 row of each review in `read_reviews(source)` order (to find its text).
    """

    ids: Tensor
    mask: Tensor
    labels: Tensor
    lengths: Tensor
    index: Tensor

    def __len__(self) -> int:
        return self.ids.shape[0]


@dataclass(frozen=True, kw_only=True)
class EncodedTexts:
    """New texts through the training pipeline (see `encode_texts`); n texts, L = max_len.

    Attributes:
        ids: (n, L) int64. mask: (n, L) bool. lengths: (n,) int64.
        tokens: the kept tokens of each text (before the vocabulary: UNK ids keep their word here).
    """

    ids: Tensor
    mask: Tensor
    lengths: Tensor
    tokens: list[list[str]]


def tensorise(token_lists: Sequence[Sequence[str]], vocab: Vocabulary, max_len: int) -> np.ndarray:
    """(N, max_len) int64 ids: each list's first `max_len` tokens encoded by `vocab` (UNK when unknown), then PAD."""
    ids = np.zeros((len(token_lists), max_len), dtype=np.int64)  # PAD = 0
    for row, tokens in enumerate(token_lists):
        encoded = vocab.encode(tokens[:max_len])
        ids[row, : len(encoded)] = encoded
    return ids


def encode_texts(
    texts: str | Sequence[str],
    vocab: Vocabulary,
    *,
    max_len: int = 128,
    truncation: Truncation = "head_tail",
    lowercase: bool = True,
    lemmatize: bool = True,
    stopwords: StopWords = "nltk",
) -> EncodedTexts:
    """Clean and encode new texts for inference, exactly as the training reviews were.

    Pass the training config's `clean_options()`, `max_len` and `truncation`; the defaults are
    `DataConfig`'s (a test keeps them equal), so texts encode like a default run's reviews. Raises
    `DataError` naming the text when nothing is left after cleaning (only stop words, digits,
    punctuation or markup).
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    cache = word_cache(lowercase, lemmatize, stopwords)
    tokens = [clean_truncated(text, cache, max_len, truncation)[0] for text in texts]
    for i, kept in enumerate(tokens):
        if not kept:
            raise DataError(f"text {i} is empty after cleaning (only stop words, digits, punctuation "
                            f"or markup): {texts[i][:80]!r}")
    ids = torch.from_numpy(tensorise(tokens, vocab, max_len))
    lengths = torch.tensor([len(t) for t in tokens], dtype=torch.int64)
    return EncodedTexts(ids=ids, mask=ids != PAD, lengths=lengths, tokens=tokens)
