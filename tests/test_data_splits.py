"""Tests of `hardmax.data.splits` through `load_imdb`: the vocabulary from the training split only, padding,
truncation and masks, empty reviews skipped and counted, the standard, movie-held-out and paper splits, their
seeding and `limit`.

Every archive, directory and CSV is generated here in tmp_path (tests/data_cases.py; no IMDb text is stored in
the repository); no test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself (conftest.py's
`no_global_paths`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from data_cases import POSITIVE, config, corpus, review_text, write_csv, write_tar

from hardmax import data
from hardmax.data import PAD, UNK, DataConfig, DataError, load_imdb, read_reviews

pytestmark = pytest.mark.usefixtures("no_global_paths")


def csv_rows(n: int = 20) -> list[tuple[str, str]]:
    return [(review_text("train", label, i), "positive" if label == "pos" else "negative")
            for i in range(n) for label in ("pos", "neg")]


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
