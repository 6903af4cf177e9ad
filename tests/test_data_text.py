"""Tests of `hardmax.data.text`: cleaning (examples, options, stop words, lowercasing), the vocabulary (build,
encode, decode, refusals, JSON round trip), `encode_texts` as in training, and the "head" and "head_tail"
truncations.

Every archive, directory and CSV is generated here in tmp_path (tests/data_cases.py; no IMDb text is stored in
the repository); no test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself (conftest.py's
`no_global_paths`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from data_cases import FRUIT, LONG_REVIEW, config, write_tar
from hypothesis import given
from hypothesis import strategies as st

from hardmax import data
from hardmax.data import PAD, UNK, DataConfig, DataError, Vocabulary, clean_text, encode_texts, load_imdb, read_reviews

pytestmark = pytest.mark.usefixtures("no_global_paths")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Great acting.<br /><br />Superb plot", ["great", "acting", "superb", "plot"]),
        ("Visit http://www.imdb.com/title/tt0111161/ or www.example.org now", ["visit"]),
        ("<a href=\"https://x.y/z\">link</a> <i>bold</i>", ["link", "bold"]),
        ("10/10, 1980s, R2D2 #1!!!", []),  # digits split words; single letters are dropped
        ("The movies were boring and the actors laughed", ["movie", "boring", "actor", "laugh"]),
        ("It was what it is", []),  # "was" -> "be", a stop word, like the rest
        ("I don't like it; doing it is less fun", ["like", "less", "fun"]),  # dont, doing -> do: stop words
        ("Ji&#345;í Menzel &amp; Kie&#347;lowski", ["jiří", "menzel", "kieślowski"]),
        ("well-acted, funny_stuff", ["well", "act", "funny", "stuff"]),
        ("a < b and c > d", []),  # not a tag: nothing is swallowed, all single letters or stop words
        ("Café", ["café"]),
        ("Well made show, it made me cry", ["well", "make", "show", "make", "cry"]),
    ],
)
def test_clean_text_examples(text: str, expected: list[str]) -> None:
    assert clean_text(text) == expected


def test_clean_text_options() -> None:
    text = "The Movies were GREAT"
    assert clean_text(text) == ["movie", "great"]
    # The paper's code does not lower-case; simplemma still lower-cases lemmas it knows.
    assert clean_text(text, lowercase=False, lemmatize=False) == ["Movies", "GREAT"]
    assert clean_text(text, lemmatize=False) == ["movies", "great"]
    assert clean_text(text, stopwords="none") == ["the", "movie", "be", "great"]
    assert clean_text(text, lowercase=False, lemmatize=False, stopwords="none") == [
        "The", "Movies", "were", "GREAT"]


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200), st.sampled_from(sorted(data.STOP_LISTS)))
def test_clean_text_tokens_are_words_outside_the_stop_list(text: str, stopwords: str) -> None:
    for token in clean_text(text, stopwords=stopwords):
        assert token.isalpha() and len(token) >= 2 and token.lower() not in data.STOP_LISTS[stopwords]


@given(st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=200))
def test_clean_text_lowercases(text: str) -> None:
    assert all(token == token.lower() for token in clean_text(text))
    if text.isascii():  # "ß".upper() is "SS": case round trips only hold for ASCII
        assert clean_text(text.upper()) == clean_text(text.lower())


def test_vocabulary_build_encode_decode() -> None:
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "a", "b"], ["d"]], min_count=2)
    assert vocab.words == ("<pad>", "<unk>", "b", "a")  # by count, then alphabetical
    assert vocab.encode(["a", "zzz", "b"]) == [3, UNK, 2]
    assert vocab.decode(torch.tensor([2, 3, PAD])) == ["b", "a", "<pad>"]
    assert len(vocab) == 4 and "a" in vocab and "c" not in vocab
    assert Vocabulary.build([["b", "a", "b"], ["c", "a", "b"]], max_size=3).words == ("<pad>", "<unk>", "b")
    assert Vocabulary.from_json(vocab.to_json()) == vocab


def test_vocabulary_validation() -> None:
    with pytest.raises(ValueError, match="starts with"):
        Vocabulary(words=("a", "b"))
    with pytest.raises(ValueError, match="repeated"):
        Vocabulary(words=("<pad>", "<unk>", "x", "x"))
    with pytest.raises(DataError, match="not a hardmax vocabulary"):
        Vocabulary.from_json(json.dumps({"words": ["<pad>", "<unk>"]}))


@given(st.lists(st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=6), max_size=6),
       st.integers(1, 3))
def test_vocabulary_json_round_trip_and_min_count(token_lists: list[list[str]], min_count: int) -> None:
    vocab = Vocabulary.build(token_lists, min_count=min_count)
    assert Vocabulary.from_json(vocab.to_json()) == vocab
    counts = {}
    for tokens in token_lists:
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
    assert set(vocab.words[2:]) == {w for w, c in counts.items() if c >= min_count}


def test_encode_texts_matches_training(tmp_path: Path) -> None:
    loaded = load_imdb(config(write_tar(tmp_path / "a.tar.gz"), tmp_path, max_len=8), progress=False)
    texts = read_reviews(tmp_path / "a.tar.gz").texts
    row = int(loaded.train.index[3])
    encoded = encode_texts([texts[row], "Wonderful zebra!"], loaded.vocab, max_len=8,
                           **loaded.config.clean_options())
    assert encoded.ids.shape == (2, 8) and encoded.mask.dtype == torch.bool
    torch.testing.assert_close(encoded.ids[0], loaded.train.ids[3])
    assert encoded.tokens[1] == ["wonderful", "zebra"] and encoded.ids[1, :3].tolist() == [
        loaded.vocab.encode(["wonderful"])[0], UNK, PAD]
    assert encode_texts("Great!", loaded.vocab).lengths.tolist() == [1]
    with pytest.raises(DataError, match="text 1 is empty after cleaning"):
        encode_texts(["great", "<br /> the 42"], loaded.vocab)


def test_encode_texts_defaults_are_the_data_configs() -> None:
    """A caller who passes no options encodes texts the way a default run cut its reviews."""
    import inspect

    defaults = {name: p.default for name, p in inspect.signature(encode_texts).parameters.items()
                if p.default is not inspect.Parameter.empty}
    fields = {f.name: f.default for f in dataclasses.fields(DataConfig)}
    assert set(defaults) == {"max_len", "truncation", *DataConfig().clean_options()}
    assert defaults == {name: fields[name] for name in defaults}


FRUIT_VOCAB = Vocabulary(words=(data.PAD_WORD, data.UNK_WORD, *FRUIT))


def test_long_review_cleans_to_its_content_words() -> None:
    assert clean_text(LONG_REVIEW) == FRUIT


@pytest.mark.parametrize("max_len", [1, 2, 7, 8, 19])
def test_head_tail_keeps_the_first_and_last_halves(max_len: int) -> None:
    head, tail = -(-max_len // 2), max_len // 2  # ⌈L/2⌉, ⌊L/2⌋
    encoded = encode_texts(LONG_REVIEW, FRUIT_VOCAB, max_len=max_len, truncation="head_tail")
    expected = FRUIT[:head] + (FRUIT[-tail:] if tail else [])
    assert encoded.tokens == [expected] and len(expected) == max_len
    assert encoded.ids[0].tolist() == FRUIT_VOCAB.encode(expected) and encoded.mask.all()
    assert encoded.lengths.tolist() == [max_len]
    kept_head = encode_texts(LONG_REVIEW, FRUIT_VOCAB, max_len=max_len, truncation="head")
    assert kept_head.tokens == [FRUIT[:max_len]]


@pytest.mark.parametrize("truncation", ["head", "head_tail"])
def test_truncation_leaves_short_reviews_alone(truncation: str) -> None:
    texts = [LONG_REVIEW, "Kiwi, lemon and a durian!"]
    encoded = encode_texts(texts, FRUIT_VOCAB, max_len=20, truncation=truncation)
    assert encoded.tokens == [FRUIT, ["kiwi", "lemon", "durian"]]
    assert encoded.ids[1].tolist()[:4] == [FRUIT_VOCAB.encode(["kiwi"])[0], FRUIT_VOCAB.encode(["lemon"])[0],
                                           UNK, PAD]
    assert encoded.lengths.tolist() == [20, 3]
