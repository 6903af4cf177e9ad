"""Tests of `hardmax.data.load`: `load_imdb`'s cache (hits identical, keys that change with the settings and
the data and ignore what does not change the tensors, unusable caches rebuilt, no cache), head-tail truncation end
to end, and (marked `imdb`, skipped when it is absent) the full pipeline on the real archive.

Every archive, directory and CSV is generated here in tmp_path (tests/data_cases.py; no IMDb text is stored in
the repository); no test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself (conftest.py's
`no_global_paths`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
import torch
from data_cases import FRUIT, LONG_REVIEW, config, corpus, real_archive, write_tar, write_tree

from hardmax import data
from hardmax.data import DataConfig, load_imdb

pytestmark = pytest.mark.usefixtures("no_global_paths")


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


REAL_ARCHIVE = real_archive()


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
