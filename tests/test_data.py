"""Tests of hardmax.data: reading, cleaning, vocabulary, splits, cache, download.

Every archive, directory and CSV is generated here in tmp_path (no IMDb text is stored in the
repository). One test, marked `imdb`, runs the full pipeline on the real archive when it is present.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from hardmax import data
from hardmax.data import (
    PAD,
    UNK,
    DataConfig,
    DataError,
    Vocabulary,
    clean_text,
    download_imdb,
    encode_texts,
    load_imdb,
    read_reviews,
    resolve_imdb_path,
)

REPO_ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------------------------
# Generated corpora.
# --------------------------------------------------------------------------------------------

POSITIVE = ["great", "wonderful", "brilliant", "superb", "delightful"]
NEGATIVE = ["awful", "boring", "terrible", "dreadful", "tedious"]
GROUPS = [("train", "neg"), ("train", "pos"), ("test", "neg"), ("test", "pos")]


def review_text(split: str, label: str, i: int) -> str:
    words = POSITIVE if label == "pos" else NEGATIVE
    text = f"This film was {words[i % 5]} and {words[(i + 1) % 5]}!<br /><br />Rated {i}/10, see http://example.com/{i}"
    if split == "test":
        text += " zebra"  # a word that only the test split has
    return text


def corpus(n: int = 10) -> dict[tuple[str, str], list[tuple[int, int, bytes]]]:
    """(split, label) -> [(review id, rating, raw bytes)], n per group."""
    out = {}
    for split, label in GROUPS:
        rating = 8 if label == "pos" else 2
        out[split, label] = [(i, rating, review_text(split, label, i).encode()) for i in range(n)]
    return out


def write_tree(root: Path, reviews: dict | None = None, *, extra: dict[str, bytes] | None = None) -> Path:
    """An aclImdb directory under root; returns root / "aclImdb"."""
    reviews = corpus() if reviews is None else reviews
    base = root / "aclImdb"
    for (split, label), items in reviews.items():
        folder = base / split / label
        folder.mkdir(parents=True, exist_ok=True)
        for review_id, rating, raw in items:
            (folder / f"{review_id}_{rating}.txt").write_bytes(raw)
    for name, raw in (extra or {}).items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(raw)
    return base


def write_tar(path: Path, reviews: dict | None = None, *, extra: dict[str, bytes] | None = None) -> Path:
    """A .tar.gz with the aclImdb layout, written from memory."""
    reviews = corpus() if reviews is None else reviews
    members = {f"aclImdb/{split}/{label}/{i}_{r}.txt": raw
               for (split, label), items in reviews.items() for i, r, raw in items}
    members.update({f"aclImdb/{name}": raw for name, raw in (extra or {}).items()})
    with tarfile.open(path, "w:gz") as archive:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            archive.addfile(info, io.BytesIO(raw))
    return path


def write_csv(path: Path, rows: list[tuple[str, str]], header: str = "review,sentiment") -> Path:
    lines = [header] + ['"' + text.replace('"', '""') + '",' + label for text, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def csv_rows(n: int = 20) -> list[tuple[str, str]]:
    return [(review_text("train", label, i), "positive" if label == "pos" else "negative")
            for i in range(n) for label in ("pos", "neg")]


def config(path: Path, tmp_path: Path, **changes) -> DataConfig:
    base = DataConfig(path=str(path), cache_dir=str(tmp_path / "cache"), min_count=1, download=False)
    return dataclasses.replace(base, **changes)


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_tar(tmp_path / "imdb.tar.gz")


@pytest.fixture(autouse=True)
def _no_global_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself."""
    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "default-cache"))


# --------------------------------------------------------------------------------------------
# Reading.
# --------------------------------------------------------------------------------------------


def test_directory_and_archive_read_identically(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "dir")
    archive = write_tar(tmp_path / "imdb.tar.gz")
    from_tar, from_dir, from_parent = read_reviews(archive), read_reviews(tree), read_reviews(tree.parent)
    for other in (from_dir, from_parent):
        assert other.texts == from_tar.texts
        for name in ("labels", "split", "review_ids", "ratings"):
            np.testing.assert_array_equal(getattr(other, name), getattr(from_tar, name))
    assert len(from_tar) == 40 and from_tar.n_bad_bytes == 0
    assert from_tar.labels.dtype == np.int8 and from_tar.labels.sum() == 20
    # Fixed order: train/neg, train/pos, test/neg, test/pos, each by numeric id.
    assert list(from_tar.split[:20]) == ["train"] * 20
    assert list(from_tar.review_ids[:10]) == list(range(10))
    assert list(from_tar.labels[:10]) == [0] * 10 and list(from_tar.ratings[10:20]) == [8] * 10
    assert from_tar.texts[10] == review_text("train", "pos", 0)


def test_archive_extras_are_ignored(tmp_path: Path) -> None:
    """The canonical archive also has unlabelled reviews, feature files and a README."""
    extra = {"train/unsup/0_0.txt": b"unlabelled", "imdb.vocab": b"the\nand\n", "README": b"readme",
             "train/pos/._0_8.txt": b"\x00\x05AppleDouble", "train/labeledBow.feat": b"0 0:1"}
    assert read_reviews(write_tar(tmp_path / "a.tar.gz", extra=extra)).texts == read_reviews(
        write_tar(tmp_path / "b.tar.gz")).texts


def test_csv(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "IMDB Dataset.csv", [("Great fun,\n\"really\"", "positive"),
                                                     ("Dull.", " Negative ")])
    reviews = read_reviews(path)
    assert reviews.texts == ["Great fun,\n\"really\"", "Dull."]
    assert list(reviews.labels) == [1, 0]
    assert reviews.split is None and reviews.review_ids is None and reviews.ratings is None


def test_csv_with_bom_and_reordered_columns(tmp_path: Path) -> None:
    path = tmp_path / "reviews.csv"
    path.write_bytes("\ufeffsentiment,review\npositive,Nice\nnegative,Dull\n".encode())
    assert read_reviews(path).texts == ["Nice", "Dull"]


def test_csv_unknown_label_names_the_label_and_row(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "bad.csv", [("fine", "positive"), ("meh", "neutral")])
    with pytest.raises(DataError, match=r"bad\.csv.*row 2.*'neutral'"):
        read_reviews(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [("text,label\nhi,positive\n", "missing column.*review.*sentiment"),
     ("", "empty CSV"),
     ("review,sentiment\n", "no reviews"),
     ("review,sentiment\nlonely\n", "1 field")],
)
def test_csv_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_reviews(path)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        read_reviews(tmp_path / "nowhere.tar.gz")


def test_corrupt_and_truncated_archives(tmp_path: Path, archive: Path) -> None:
    raw = archive.read_bytes()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(raw[: len(raw) // 2])
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(os.urandom(4096))
    not_tar = tmp_path / "text.tar.gz"
    not_tar.write_bytes(gzip.compress(b"just some text, not a tar archive\n" * 50))
    flipped = tmp_path / "flipped.tar.gz"
    flipped.write_bytes(raw[:100] + bytes(b ^ 0xFF for b in raw[100:200]) + raw[200:])
    for path in (truncated, garbage, not_tar, flipped):
        with pytest.raises(DataError, match=path.name):
            read_reviews(path)


def test_wrong_layout(tmp_path: Path) -> None:
    reviews = corpus()
    del reviews["train", "neg"]
    with pytest.raises(DataError, match="wrong layout.*train/neg"):
        read_reviews(write_tar(tmp_path / "a.tar.gz", reviews))
    with pytest.raises(DataError, match="wrong layout.*train/neg"):
        read_reviews(write_tree(tmp_path / "dir", reviews))
    flat = tmp_path / "flat.tar.gz"
    with tarfile.open(flat, "w:gz") as archive:
        info = tarfile.TarInfo("reviews/1.txt")
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(DataError, match="no reviews found"):
        read_reviews(flat)
    with pytest.raises(DataError, match="wrong layout"):
        read_reviews(tmp_path)  # a directory without train/ or aclImdb/


def test_bad_bytes_are_replaced_and_counted(tmp_path: Path) -> None:
    reviews = corpus()
    reviews["train", "pos"][0] = (0, 9, b"Splendid \xff\xfe film \xef\xbf\xbd")  # 2 bad, 1 genuine U+FFFD
    for path in (write_tar(tmp_path / "a.tar.gz", reviews), write_tree(tmp_path / "dir", reviews)):
        read = read_reviews(path)
        assert read.n_bad_bytes == 2
        assert read.texts[10] == "Splendid \ufffd\ufffd film \ufffd"
    csv_path = tmp_path / "bad.csv"
    csv_path.write_bytes(b"review,sentiment\n\"caf\xe9 \xff\",positive\nfine,negative\n")
    assert read_reviews(csv_path).n_bad_bytes == 2
    loaded = load_imdb(config(tmp_path / "a.tar.gz", tmp_path), progress=False)
    assert loaded.stats.n_bad_bytes == 2


# --------------------------------------------------------------------------------------------
# Text pipeline.
# --------------------------------------------------------------------------------------------


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


def test_stop_word_lists() -> None:
    # NLTK's list (the paper's, the default) keeps "never", "nothing", "well" and "show", which
    # scikit-learn's longer list drops; both drop "not" and "no", and contractions lose their
    # apostrophe before the check.
    text = "I never liked the show, nothing works well. Not good, no. Don't!"
    assert clean_text(text) == ["never", "like", "show", "nothing", "work", "well", "good"]
    assert clean_text(text, stopwords="sklearn") == ["like", "work", "good"]
    assert clean_text(text, stopwords="none")[:3] == ["never", "like", "the"]
    assert clean_text(text, stopwords="nltk_keep_negations") == [
        "never", "like", "show", "nothing", "work", "well", "not", "good", "no", "dont"]
    nltk, sklearn = data.STOP_LISTS["nltk"], data.STOP_LISTS["sklearn"]
    kept = nltk - data.STOP_LISTS["nltk_keep_negations"]
    assert data.STOP_LISTS["nltk_keep_negations"] < nltk and {"not", "no", "nor", "dont", "isnt", "wasnt"} <= kept
    assert all(word in {"no", "nor", "not", "ain", "won", "wont", "shan", "shant"} or word.endswith(("n", "nt"))
               for word in kept)  # only negations are given back
    assert {"not", "no", "the", "very"} <= nltk & sklearn and {"dont", "wouldnt", "youre"} <= nltk
    assert {"never", "nothing", "well", "show"} <= sklearn - nltk and not data.STOP_LISTS["none"]
    with pytest.raises(ValueError, match="stopwords must be one of"):
        clean_text(text, stopwords="spacy")
    with pytest.raises(ValueError, match="stopwords must be one of"):
        data.DataConfig(stopwords="nltk179")


def test_config_from_a_run_record_reads_old_records() -> None:
    current = data.DataConfig(min_count=3, stopwords="sklearn", truncation="head_tail")
    record = {**dataclasses.asdict(current), "vocab_size": 120, "train": 10}
    assert data.DataConfig.from_record(record) == current
    assert data.DataConfig.from_record(record, path="x").path == "x"
    # Before the options existed: the first 128 tokens, scikit-learn's list (or none), a random hold-out.
    old = {k: v for k, v in record.items() if k not in ("stopwords", "truncation", "val_split")}
    assert data.DataConfig.from_record({**old, "remove_stopwords": True}) == dataclasses.replace(
        current, truncation="head", val_split="random")
    assert data.DataConfig.from_record({**old, "remove_stopwords": False}).stopwords == "none"


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200), st.sampled_from(sorted(data.STOP_LISTS)))
def test_clean_text_tokens_are_words_outside_the_stop_list(text: str, stopwords: str) -> None:
    for token in clean_text(text, stopwords=stopwords):
        assert token.isalpha() and len(token) >= 2 and token.lower() not in data.STOP_LISTS[stopwords]


@given(st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=200))
def test_clean_text_lowercases(text: str) -> None:
    assert all(token == token.lower() for token in clean_text(text))
    if text.isascii():  # "ß".upper() is "SS": case round trips only hold for ASCII
        assert clean_text(text.upper()) == clean_text(text.lower())


# --------------------------------------------------------------------------------------------
# Vocabulary and encoding.
# --------------------------------------------------------------------------------------------


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


def test_vocabulary_from_train_only_and_unknown_reviews_kept(tmp_path: Path) -> None:
    reviews = corpus()
    reviews["test", "neg"].append((99, 1, b"Quokka quokka!"))  # only unknown words: all UNK, kept
    loaded = load_imdb(config(write_tar(tmp_path / "a.tar.gz", reviews), tmp_path), progress=False)
    assert "film" in loaded.vocab and "zebra" not in loaded.vocab and "quokka" not in loaded.vocab
    test = loaded.test
    assert len(test) == 21 and loaded.stats.splits["test"].skipped_empty == 0
    texts = read_reviews(tmp_path / "a.tar.gz").texts
    assert texts[30] == "Quokka quokka!"  # last of test/neg in read order
    row = test.ids[test.index == 30][0]
    assert row[:2].tolist() == [UNK, UNK] and row[2:].eq(PAD).all()
    for ids, length, index in zip(test.ids, test.lengths, test.index, strict=True):
        if "zebra" in texts[int(index)]:
            assert ids[length - 1] == UNK  # "zebra" comes last
    assert loaded.stats.splits["test"].unk_rate > 0 and loaded.stats.splits["train"].unk_rate == 0


def test_padding_truncation_and_mask(tmp_path: Path) -> None:
    reviews = corpus()
    long_text = " ".join(f"{w}" for w in POSITIVE * 4)  # 20 tokens
    reviews["train", "pos"][0] = (0, 10, long_text.encode())
    loaded = load_imdb(config(write_tar(tmp_path / "a.tar.gz", reviews), tmp_path, max_len=6,
                              val_fraction=0.0, truncation="head"), progress=False)
    train = loaded.train
    assert train.ids.shape == (20, 6) and train.ids.dtype == torch.int64
    assert train.mask.dtype == torch.bool and train.labels.dtype == torch.int64
    torch.testing.assert_close(train.mask, train.ids != PAD)
    torch.testing.assert_close(train.lengths, train.mask.sum(1))
    # Real tokens first, then padding.
    assert (train.mask[:, :-1] >= train.mask[:, 1:]).all() and (train.lengths >= 1).all()
    long_row = train.ids[train.index == 10][0]
    assert loaded.vocab.decode(long_row) == [*POSITIVE, "great"]
    assert loaded.stats.splits["train"].truncated == pytest.approx(1 / 20)
    short = train.index.tolist().index(0)  # "This film was awful and boring!<br /><br />Rated 0/10, ..."
    assert loaded.vocab.decode(train.ids[short, : train.lengths[short]]) == ["film", "awful", "boring", "rate",
                                                                             "see"]


def test_empty_reviews_are_skipped_and_counted(tmp_path: Path) -> None:
    reviews = corpus()
    reviews["train", "pos"].append((50, 7, b"<br /><br />1234 !!! The, and of..."))
    reviews["test", "neg"].append((50, 3, b""))
    loaded = load_imdb(config(write_tar(tmp_path / "a.tar.gz", reviews), tmp_path, val_fraction=0.0),
                       progress=False)
    assert loaded.stats.splits["train"].skipped_empty == 1 and len(loaded.train) == 20
    assert loaded.stats.splits["test"].skipped_empty == 1 and len(loaded.test) == 20
    assert (loaded.train.lengths > 0).all() and (loaded.test.lengths > 0).all()


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


# --------------------------------------------------------------------------------------------
# Splits.
# --------------------------------------------------------------------------------------------


def test_standard_split_with_stratified_validation(tmp_path: Path) -> None:
    loaded = load_imdb(config(write_tar(tmp_path / "a.tar.gz", corpus(20)), tmp_path, val_fraction=0.25),
                       progress=False)
    assert (len(loaded.train), len(loaded.val), len(loaded.test)) == (30, 10, 40)
    assert loaded.val.labels.sum() == 5 and loaded.train.labels.sum() == 15  # stratified
    train_rows, val_rows = set(loaded.train.index.tolist()), set(loaded.val.index.tolist())
    assert not train_rows & val_rows and train_rows | val_rows == set(range(40))
    assert set(loaded.test.index.tolist()) == set(range(40, 80))
    counts = {name: stats.reviews for name, stats in loaded.stats.splits.items()}
    assert counts == {"train": 30, "val": 10, "test": 40}


def test_validation_holds_out_whole_movies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reviews of a movie have consecutive ids, so the default hold-out takes whole blocks of ids
    (VAL_BLOCK, here 5): every validation block is complete. val_split='random' does not."""
    monkeypatch.setattr(data.splits, "VAL_BLOCK", 5)
    path = write_tar(tmp_path / "a.tar.gz", corpus(20))  # train rows: neg ids 0-19, then pos ids 0-19

    def blocks(split) -> dict[tuple[int, int], int]:
        counts: dict[tuple[int, int], int] = {}
        for row in split.index.tolist():
            key = (row // 20, (row % 20) // 5)  # (label, block of ids)
            counts[key] = counts.get(key, 0) + 1
        return counts

    for seed in range(5):
        movies = load_imdb(config(path, tmp_path, val_fraction=0.25, seed=seed), progress=False)
        assert len(movies.val) == 10 and movies.val.labels.sum() == 5  # still stratified
        held = blocks(movies.val)
        assert sorted(held.values()) == [5, 5] and {label for label, _ in held} == {0, 1}
        assert not set(held) & set(blocks(movies.train))  # no block on both sides
    partial = [sorted(blocks(load_imdb(config(path, tmp_path, val_fraction=0.25, seed=seed, val_split="random"),
                                       progress=False).val).values()) != [5, 5] for seed in range(5)]
    assert any(partial)
    with pytest.raises(ValueError, match="val_split"):
        DataConfig(val_split="movie")  # type: ignore[arg-type]


@pytest.mark.parametrize("val_split", ["movies", "random"])
def test_split_seeding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, val_split: str) -> None:
    monkeypatch.setattr(data.splits, "VAL_BLOCK", 2)  # ten blocks per label to choose from
    path = write_tar(tmp_path / "a.tar.gz", corpus(20))
    first = load_imdb(config(path, tmp_path, seed=1, use_cache=False, val_split=val_split), progress=False)
    again = load_imdb(config(path, tmp_path, seed=1, use_cache=False, val_split=val_split), progress=False)
    other = load_imdb(config(path, tmp_path, seed=2, use_cache=False, val_split=val_split), progress=False)
    torch.testing.assert_close(first.val.index, again.val.index)
    assert not torch.equal(first.val.index, other.val.index)


def test_paper_split(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "imdb.csv", csv_rows(20))  # 40 reviews
    with pytest.raises(DataError, match="no train/test split.*split='paper'"):
        load_imdb(config(path, tmp_path), progress=False)
    loaded = load_imdb(config(path, tmp_path, split="paper", val_fraction=0.1), progress=False)
    assert (len(loaded.train) + len(loaded.val), len(loaded.test)) == (28, 12)
    assert loaded.test.labels.sum() == 6 and len(loaded.val) == 2
    rows = torch.cat([loaded.train.index, loaded.val.index, loaded.test.index])
    assert sorted(rows.tolist()) == list(range(40))
    # The archive pools train and test before the 70/30 split.
    pooled = load_imdb(config(write_tar(tmp_path / "a.tar.gz"), tmp_path, split="paper"), progress=False)
    assert len(pooled.train) + len(pooled.val) == 28 and len(pooled.test) == 12
    assert (pooled.test.index >= 20).any() and (pooled.train.index < 20).any()


def test_limit_takes_the_first_reviews_of_each_label(tmp_path: Path) -> None:
    loaded = load_imdb(config(write_tar(tmp_path / "a.tar.gz"), tmp_path, limit=4, val_fraction=0.0),
                       progress=False)
    assert loaded.train.index.tolist() == [0, 1, 10, 11] and loaded.test.index.tolist() == [20, 21, 30, 31]
    assert loaded.train.labels.tolist() == [0, 0, 1, 1]


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="split"):
        DataConfig(split="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="val_fraction"):
        DataConfig(val_fraction=1.0)
    with pytest.raises(ValueError, match="max_len"):
        DataConfig(max_len=0)
    with pytest.raises(ValueError, match="truncation must be 'head' or 'head_tail'"):
        DataConfig(truncation="tail")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_vocab"):
        DataConfig(max_vocab=1)
    with pytest.raises(ValueError, match="min_count"):
        DataConfig(min_count=0)
    with pytest.raises(ValueError, match="limit"):
        DataConfig(limit=1)


# --------------------------------------------------------------------------------------------
# Cache.
# --------------------------------------------------------------------------------------------


def _assert_same(a: data.ImdbData, b: data.ImdbData) -> None:
    assert a.vocab == b.vocab
    for name in ("train", "val", "test"):
        for field in ("ids", "mask", "labels", "lengths", "index"):
            x, y = getattr(getattr(a, name), field), getattr(getattr(b, name), field)
            assert x.dtype == y.dtype and torch.equal(x, y), (name, field)
    assert a.stats.splits == b.stats.splits


def test_cache_hit_returns_identical_data(tmp_path: Path, archive: Path) -> None:
    cfg = config(archive, tmp_path)
    built = load_imdb(cfg, progress=False)
    cached = load_imdb(cfg, progress=False)
    assert not built.stats.cache_hit and cached.stats.cache_hit
    assert built.stats.cache_file == cached.stats.cache_file and Path(cached.stats.cache_file).is_file()
    _assert_same(built, cached)
    # Moving the archive keeps the key: it is the content that counts.
    moved = archive.rename(tmp_path / "moved.tar.gz")
    assert load_imdb(dataclasses.replace(cfg, path=str(moved)), progress=False).stats.cache_hit
    files = sorted(p.name for p in (tmp_path / "cache" / "imdb").iterdir())
    assert len(files) == 2 and not any(name.startswith(".") for name in files)  # no temporary files left


@pytest.mark.parametrize("change", [{"max_len": 7}, {"lowercase": False}, {"min_count": 2}, {"seed": 3},
                                    {"val_fraction": 0.2}, {"limit": 6}, {"split": "paper"},
                                    {"max_vocab": 5}, {"stopwords": "none"},
                                    {"stopwords": "sklearn"}])
def test_cache_key_changes_with_settings(tmp_path: Path, archive: Path, change: dict) -> None:
    cfg = config(archive, tmp_path)
    first = load_imdb(cfg, progress=False)
    changed = load_imdb(dataclasses.replace(cfg, **change), progress=False)
    assert not changed.stats.cache_hit and changed.stats.cache_file != first.stats.cache_file


def test_cache_ignores_settings_that_do_not_change_tensors(tmp_path: Path, archive: Path) -> None:
    cfg = config(archive, tmp_path)
    load_imdb(cfg, progress=False)
    assert load_imdb(dataclasses.replace(cfg, download=True), progress=False).stats.cache_hit


def test_cache_key_changes_with_data(tmp_path: Path) -> None:
    reviews = corpus()
    path = write_tar(tmp_path / "a.tar.gz", reviews)
    cfg = config(path, tmp_path, val_fraction=0.0)  # every training review builds the vocabulary
    first = load_imdb(cfg, progress=False)
    reviews["train", "pos"][0] = (0, 9, b"Marvellous marvellous film")
    write_tar(path, reviews)
    second = load_imdb(cfg, progress=False)
    assert not second.stats.cache_hit and "marvellous" in second.vocab and "marvellous" not in first.vocab
    # Directories are fingerprinted by file names, sizes and mtimes.
    tree = write_tree(tmp_path / "dir")
    cfg = config(tree, tmp_path)
    load_imdb(cfg, progress=False)
    assert load_imdb(cfg, progress=False).stats.cache_hit
    (tree / "train" / "pos" / "0_8.txt").write_text("Marvellous marvellous film, truly")
    assert not load_imdb(cfg, progress=False).stats.cache_hit


def test_unusable_cache_is_rebuilt(tmp_path: Path, archive: Path) -> None:
    cfg = config(archive, tmp_path)
    built = load_imdb(cfg, progress=False)
    tensors = Path(built.stats.cache_file)
    tensors.write_bytes(b"not safetensors")
    rebuilt = load_imdb(cfg, progress=False)
    assert not rebuilt.stats.cache_hit
    _assert_same(built, rebuilt)
    assert load_imdb(cfg, progress=False).stats.cache_hit
    tensors.with_suffix(".json").write_text("{truncated")
    assert not load_imdb(cfg, progress=False).stats.cache_hit


def test_no_cache(tmp_path: Path, archive: Path) -> None:
    loaded = load_imdb(config(archive, tmp_path, use_cache=False), progress=False)
    assert loaded.stats.cache_file is None and not (tmp_path / "cache").exists()


# --------------------------------------------------------------------------------------------
# Locating and downloading.
# --------------------------------------------------------------------------------------------


def test_resolve_order(tmp_path: Path, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="no IMDb data"):
        resolve_imdb_path(cache_dir=cache, download=False)
    cache.mkdir()
    cached = cache / data.IMDB_FILENAME
    cached.write_bytes(archive.read_bytes())
    assert resolve_imdb_path(cache_dir=cache, download=False) == cached
    monkeypatch.setenv("HARDMAX_IMDB", str(archive))
    assert resolve_imdb_path(cache_dir=cache) == archive
    other = write_tree(tmp_path / "dir")
    assert resolve_imdb_path(other, cache_dir=cache) == other
    monkeypatch.setenv("HARDMAX_IMDB", str(tmp_path / "missing.tar.gz"))
    with pytest.raises(DataError, match=r"missing\.tar\.gz.*HARDMAX_IMDB"):
        resolve_imdb_path(cache_dir=cache)


def test_resolve_downloads_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def fake_download(directory: Path, **kwargs) -> Path:
        calls.append(directory)
        Path(directory).mkdir(parents=True, exist_ok=True)
        return write_tar(Path(directory) / data.IMDB_FILENAME)

    monkeypatch.setattr(data.source, "download_imdb", fake_download)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "env-cache"))
    loaded = load_imdb(DataConfig(min_count=1), progress=False)
    assert calls == [tmp_path / "env-cache"] and len(loaded.test) == 20
    assert loaded.stats.cache_file.startswith(str(tmp_path / "env-cache"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_file_url(tmp_path: Path, archive: Path) -> None:
    target = download_imdb(tmp_path / "dl", url=archive.as_uri(), sha256=_sha256(archive), progress=False)
    assert target == tmp_path / "dl" / archive.name and target.read_bytes() == archive.read_bytes()
    assert os.listdir(tmp_path / "dl") == [archive.name]


def test_download_wrong_checksum_leaves_nothing(tmp_path: Path, archive: Path) -> None:
    with pytest.raises(DataError, match="SHA-256.*discarded"):
        download_imdb(tmp_path / "dl", url=archive.as_uri(), sha256="0" * 64, progress=False)
    assert os.listdir(tmp_path / "dl") == []


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_GET(self) -> None:
        if self.path == "/short.tar.gz":  # announces more bytes than it sends, then hangs up
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"\x1f\x8b partial")
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server on 127.0.0.1 serving tmp_path/served."""
    served = tmp_path / "served"
    served.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_Handler, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def test_download_over_http(tmp_path: Path, http_server: tuple[str, Path]) -> None:
    url, served = http_server
    archive = write_tar(served / "aclImdb_v1.tar.gz")
    target = download_imdb(tmp_path / "dl", url=f"{url}/aclImdb_v1.tar.gz", sha256=_sha256(archive),
                           progress=False)
    assert read_reviews(target).texts == read_reviews(archive).texts
    for name, match in (("missing.tar.gz", "could not download.*404"),
                        ("short.tar.gz", "could not download|SHA-256")):
        with pytest.raises(DataError, match=match):
            download_imdb(tmp_path / "dl2", url=f"{url}/{name}", sha256=_sha256(archive), progress=False)
    assert os.listdir(tmp_path / "dl2") == []
    with pytest.raises(DataError, match="SHA-256"):
        download_imdb(tmp_path / "dl3", url=f"{url}/aclImdb_v1.tar.gz", sha256="f" * 64, progress=False)
    assert os.listdir(tmp_path / "dl3") == []


# --------------------------------------------------------------------------------------------
# The real archive.
# --------------------------------------------------------------------------------------------


def _real_archive() -> Path | None:
    shared = REPO_ROOT.parent / "shared" / "data" / "aclImdb-labeled.tar.gz"
    candidates = [os.environ.get("HARDMAX_IMDB"), shared]
    return next((Path(c) for c in candidates if c and Path(c).exists()), None)


REAL_ARCHIVE = _real_archive()  # read before the autouse fixture clears $HARDMAX_IMDB


@pytest.mark.imdb
@pytest.mark.slow
@pytest.mark.skipif(REAL_ARCHIVE is None, reason="IMDb archive absent (set HARDMAX_IMDB)")
def test_full_pipeline_on_the_real_archive(tmp_path: Path) -> None:
    cfg = DataConfig(path=str(REAL_ARCHIVE), cache_dir=str(tmp_path / "cache"), download=False)
    start = time.perf_counter()
    built = load_imdb(cfg, progress=False)
    first_seconds = time.perf_counter() - start
    start = time.perf_counter()
    cached = load_imdb(cfg, progress=False)
    cached_seconds = time.perf_counter() - start
    stats = built.stats.splits
    skipped = {name: split_stats.skipped_empty for name, split_stats in stats.items()}
    assert len(built.train) + len(built.val) + skipped["train"] + skipped["val"] == 25_000
    assert len(built.test) + skipped["test"] == 25_000
    assert len(built.val) == pytest.approx(2_500, abs=2)
    for split in (built.train, built.val, built.test):
        assert split.labels.float().mean().item() == pytest.approx(0.5, abs=0.01)
        assert split.ids.shape[1] == 128 and (split.lengths >= 1).all()
    assert 5_000 < len(built.vocab) < 60_000
    assert 40 < stats["test"].mean_length <= 128 and stats["test"].unk_rate < 0.1
    assert cached.stats.cache_hit and cached_seconds < 3.0
    _assert_same(built, cached)
    print(f"\nfirst load {first_seconds:.1f} s, cached {cached_seconds:.2f} s, vocab {len(built.vocab)}, "
          f"{stats}")


# --------------------------------------------------------------------------------------------
# Truncation: "head" and "head_tail".
# --------------------------------------------------------------------------------------------

FRUIT = ["apple", "banana", "cherry", "damson", "elderberry", "fig", "grape", "guava", "kiwi", "lemon", "lime",
         "mango", "melon", "nectarine", "olive", "papaya", "peach", "pear", "plum", "quince"]
# 20 content words with stop words, digits and markup between them: the halves are counted in
# cleaned tokens, not in words of the raw text.
LONG_REVIEW = " ".join(f"{w} and the 42 <br />" if i % 3 == 0 else w for i, w in enumerate(FRUIT))
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


def test_load_imdb_with_head_tail_truncation(tmp_path: Path) -> None:
    reviews = corpus()
    reviews["train", "pos"][0] = (0, 9, LONG_REVIEW.encode())
    reviews["test", "neg"][0] = (0, 1, ("Awful! " + LONG_REVIEW + " Dreadful.").encode())
    path = write_tar(tmp_path / "a.tar.gz", reviews)
    cfg = config(path, tmp_path, max_len=6, val_fraction=0.0, truncation="head")
    head = load_imdb(cfg, progress=False)
    head_tail = load_imdb(dataclasses.replace(cfg, truncation="head_tail"), progress=False)
    # The cache key holds the truncation: the second load is built, not read back.
    assert not head_tail.stats.cache_hit and head_tail.stats.cache_file != head.stats.cache_file
    assert load_imdb(dataclasses.replace(cfg, truncation="head_tail"), progress=False).stats.cache_hit

    def tokens(loaded: data.ImdbData, split: str, row: int) -> list[str]:
        s = getattr(loaded, split)
        return loaded.vocab.decode(s.ids[row][s.mask[row]])

    row = int(torch.nonzero(head.train.index == 10).item())  # (train, pos) review 0 follows the 10 negatives
    assert tokens(head, "train", row) == FRUIT[:6]
    assert tokens(head_tail, "train", row) == FRUIT[:3] + FRUIT[-3:]
    # Words past the cut never reach the vocabulary: "banana" is kept by head only, "quince" by head_tail only.
    assert "banana" in head.vocab and "quince" not in head.vocab
    assert "quince" in head_tail.vocab and "elderberry" not in head_tail.vocab
    assert tokens(head_tail, "test", 0) == ["awful", "apple", "banana", "plum", "quince", "dreadful"]
    assert head_tail.stats.splits["train"].truncated == head.stats.splits["train"].truncated > 0
