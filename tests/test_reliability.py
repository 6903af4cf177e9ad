"""Nothing silently wrong (issue #12): damaged data, edited or shared run directories, one-line errors.

Every case here failed before the reliability pass (read without error, evaluated, or ended in a
traceback) and must now be refused with a message that names the file or the setting. The cases and
how each is handled are listed in docs/reports/reliability.md.

- Item 2, damaged archives: 16 flipped bytes and cuts at 10 %, 50 %, 90 %, 99.9 % of a generated .tar.gz,
  a flipped CRC or length byte of its gzip trailer, a cut trailer, a damaged tar header in the middle or
  at the end of an archive with a valid CRC; a copy of the dataset with the wrong counts; a rating out of
  range; a single-class CSV; every "no data" path.
- Item 3, run directories: config.json with another model.layers / paper_padding / beta or data settings,
  vocab.json with extra, missing or shuffled words, weights edited in place, NaN weights.
- Item 4, concurrency: a directory locked by another process, a lock left by a killed one, a resume whose
  checkpoint was trained with other settings than config.json says, temporary files of a killed write.
- Item 6, one line: disk full while writing weights (simulated, and a real write past RLIMIT_FSIZE), a full
  cache directory, a diverged training, --device cuda / foo, --threads -1, non-numeric settings, empty
  reviews reported with a count.
The generated reviews are made-up words of tests/corpus.py, never IMDb text.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from corpus import sentiment_corpus, train_val
from hypothesis import given
from hypothesis import strategies as st
from safetensors import SafetensorError

from hardmax.data import IMDB_FILENAME, IMDB_URL, DataConfig, DataError, Vocabulary, load_imdb, read_reviews
from hardmax.data.source import resolve_imdb_path
from hardmax.io import CheckpointError, load_tensors, save_tensors
from hardmax.models import ModelConfig
from hardmax.training import (
    Run,
    RunLockedError,
    TrainConfig,
    load_run,
    lock_run,
    resolve_device,
    set_threads,
    train,
)

TESTS = Path(__file__).resolve().parent
GROUPS = [("train", "neg"), ("train", "pos"), ("test", "neg"), ("test", "pos")]


@pytest.fixture(autouse=True)
def _no_global_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself."""
    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "default-cache"))


# --------------------------------------------------------------------------------------------
# Generated archives (made-up words of tests/corpus.py).
# --------------------------------------------------------------------------------------------


def fake_reviews(n_per_group: int, seed: int = 0) -> dict[tuple[str, str], list[tuple[int, int, bytes]]]:
    """(split, label) -> [(review id, rating, text)]: the corpus's words joined into sentences."""
    corpus = sentiment_corpus(8 * n_per_group, seed=seed, min_length=20, max_length=60)
    words = np.array(corpus.words)
    out: dict = {group: [] for group in GROUPS}
    for row in range(len(corpus)):
        label = "pos" if corpus.labels[row] else "neg"
        split = "train" if row % 2 else "test"
        items = out[split, label]
        if len(items) < n_per_group:
            ids = corpus.ids[row][corpus.mask[row]].numpy()
            text = "This one was " + " ".join(words[ids]).replace("<unk>", "odd") + "."
            items.append((len(items), 8 if label == "pos" else 2, text.encode()))
    assert all(len(items) == n_per_group for items in out.values())
    return out


def tar_bytes(reviews: dict, *, damage_header: int | None = None) -> bytes:
    """An uncompressed aclImdb tar; `damage_header` spoils the header checksum of that member."""
    buffer = io.BytesIO()
    offsets = []
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for (split, label), items in reviews.items():
            for review_id, rating, raw in items:
                offsets.append(buffer.tell())
                info = tarfile.TarInfo(f"aclImdb/{split}/{label}/{review_id}_{rating}.txt")
                info.size = len(raw)
                archive.addfile(info, io.BytesIO(raw))
    data = bytearray(buffer.getvalue())
    if damage_header is not None:
        at = offsets[damage_header] + 150  # inside the stored checksum field (bytes 148-155 of the header)
        data[at] = ord("9")
    return bytes(data)


def write_archive(path: Path, reviews: dict | None = None, **damage) -> Path:
    path.write_bytes(gzip.compress(tar_bytes(fake_reviews(40) if reviews is None else reviews, **damage)))
    return path


@pytest.fixture(scope="module")
def good_archive(tmp_path_factory) -> Path:
    return write_archive(tmp_path_factory.mktemp("data") / "imdb.tar.gz")


# --------------------------------------------------------------------------------------------
# Item 2: damaged archives are refused.
# --------------------------------------------------------------------------------------------


def test_the_undamaged_archive_is_read(good_archive):
    reviews = read_reviews(good_archive)
    assert len(reviews) == 160 and reviews.labels.sum() == 80


def flip(data: bytes, at: int, n: int = 16) -> bytes:
    damaged = bytearray(data)
    for i in range(at, min(at + n, len(data))):
        damaged[i] ^= 0xA5
    return bytes(damaged)


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9, 0.999, "crc", "length"])
def test_flipped_bytes_are_refused(good_archive, tmp_path, where):
    data = good_archive.read_bytes()
    # The gzip trailer: CRC-32 of the uncompressed bytes, then their length (4 bytes each).
    at, n = {"crc": (len(data) - 8, 1), "length": (len(data) - 4, 1)}.get(where, (None, 16))
    if at is None:
        at = min(int(where * len(data)), len(data) - 16)
    path = tmp_path / "flipped.tar.gz"
    path.write_bytes(flip(data, at, n))
    with pytest.raises(DataError, match=r"flipped\.tar\.gz: the archive is damaged"):
        read_reviews(path)


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9, 0.999, "trailer"])
def test_cut_archives_are_refused(good_archive, tmp_path, where):
    data = good_archive.read_bytes()
    keep = len(data) - 8 if where == "trailer" else int(where * len(data))
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(data[:keep])
    with pytest.raises(DataError, match=r"cut\.tar\.gz: the archive is damaged"):
        read_reviews(path)


@given(fraction=st.floats(0.0, 1.0, exclude_max=True), xor=st.integers(1, 255), cut=st.booleans())
def test_any_damage_is_refused_or_harmless(good_archive, tmp_path_factory, fraction, xor, cut):
    """One flipped byte anywhere, or a cut anywhere: an error, or (a flip in bytes 4-9 of the gzip header,
    time stamp, extra flags and OS, which the data do not depend on) exactly the reviews of the intact file."""
    data = good_archive.read_bytes()
    at = int(fraction * len(data))
    damaged = data[:at] if cut else data[:at] + bytes([data[at] ^ xor]) + data[at + 1:]
    path = tmp_path_factory.mktemp("fuzz") / "damaged.tar.gz"
    path.write_bytes(damaged)
    try:
        reviews = read_reviews(path)
    except DataError as e:
        assert "damaged.tar.gz: the archive is damaged" in str(e), str(e)
        return
    assert not cut and 4 <= at < 10, f"damage at byte {at} of {len(data)} was read without error"
    assert reviews.texts == read_reviews(good_archive).texts


@pytest.mark.parametrize("member", [80, 159])  # in the middle, and the last review
def test_a_damaged_tar_header_is_refused_even_with_a_valid_crc(tmp_path, member):
    path = write_archive(tmp_path / "header.tar.gz", damage_header=member)
    gzip.decompress(path.read_bytes())  # the gzip layer itself is intact
    with pytest.raises(DataError, match="archive is damaged.*damaged tar header"):
        read_reviews(path)


def test_a_damaged_plain_tar_is_refused(tmp_path):
    path = tmp_path / "plain.tar"
    path.write_bytes(tar_bytes(fake_reviews(10), damage_header=20))
    with pytest.raises(DataError, match="damaged tar header"):
        read_reviews(path)


def test_the_dataset_with_wrong_counts_is_refused(tmp_path, monkeypatch):
    # As if the dataset had 10 reviews per split and label: a copy with 37 of its 40 is refused.
    monkeypatch.setattr("hardmax.data.source.CANONICAL_GROUP_SIZE", 10)
    reviews = fake_reviews(10)
    assert len(read_reviews(write_archive(tmp_path / "whole.tar.gz", reviews))) == 40
    reviews["train", "pos"] = reviews["train", "pos"][:7]
    with pytest.raises(DataError, match=r"has 10 reviews under each .* found train/neg 10, train/pos 7, test/neg 10"):
        read_reviews(write_archive(tmp_path / "lost.tar.gz", reviews))
    small = {group: items[:4] for group, items in reviews.items()}  # under half: a sample, not the dataset
    assert len(read_reviews(write_archive(tmp_path / "sample.tar.gz", small))) == 16


@pytest.mark.parametrize("rating", [0, 11, 300, 10**30])
def test_a_rating_out_of_range_is_refused(tmp_path, rating):
    reviews = fake_reviews(5)
    review_id, _, raw = reviews["train", "pos"][3]
    reviews["train", "pos"][3] = (review_id, rating, raw)
    with pytest.raises(DataError, match=f"train/pos/3_{rating}.txt has rating {rating}, expected 1 to 10"):
        read_reviews(write_archive(tmp_path / "a.tar.gz", reviews))


@pytest.mark.parametrize("label", ["positive", "negative"])
def test_a_single_class_csv_is_refused(tmp_path, label):
    path = tmp_path / "one.csv"
    path.write_text("review,sentiment\n" + "".join(f'"review {i}",{label}\n' for i in range(5)))
    with pytest.raises(DataError, match=f"all 5 reviews are {label}; a sentiment dataset needs both labels"):
        read_reviews(path)


def assert_names_every_place(message: str, cache: Path) -> None:
    for place in ("--data", "HARDMAX_IMDB", str(cache / IMDB_FILENAME), IMDB_URL):
        assert place in message, place


def test_data_not_found_names_every_place(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as info:
        resolve_imdb_path(tmp_path / "nowhere.tar.gz", cache_dir=cache)
    assert "nowhere.tar.gz (from --data" in str(info.value)
    assert_names_every_place(str(info.value), cache)
    monkeypatch.setenv("HARDMAX_IMDB", str(tmp_path / "missing"))
    with pytest.raises(DataError, match="from \\$HARDMAX_IMDB") as info:
        resolve_imdb_path(None, cache_dir=cache)
    assert_names_every_place(str(info.value), cache)
    monkeypatch.delenv("HARDMAX_IMDB")
    with pytest.raises(DataError, match="downloading is off") as info:
        resolve_imdb_path(None, cache_dir=cache, download=False)
    assert_names_every_place(str(info.value), cache)

    def offline(*args, **kwargs):
        raise DataError(f"could not download {IMDB_URL}: no network")

    monkeypatch.setattr("hardmax.data.source.download_imdb", offline)
    with pytest.raises(DataError, match="no network") as info:
        load_imdb(DataConfig(cache_dir=str(cache)), progress=False)
    assert_names_every_place(str(info.value), cache)


def test_reviews_empty_after_cleaning_are_reported_with_a_count(tmp_path, caplog):
    reviews = fake_reviews(10)
    for i in (2, 5):
        reviews["train", "neg"][i] = (i, 2, b"The and of, 123!")  # only stop words, digits, punctuation
    config = DataConfig(path=str(write_archive(tmp_path / "a.tar.gz", reviews)), cache_dir=str(tmp_path / "c"),
                        min_count=1, download=False, val_fraction=0.0)
    for cached in (False, True):
        with caplog.at_level(logging.WARNING, logger="hardmax.data.load"):
            caplog.clear()
            data = load_imdb(config, progress=False)
        assert data.stats.cache_hit is cached and data.stats.splits["train"].skipped_empty == 2
        assert "2 review(s) empty after cleaning were left out (train 2)" in caplog.text


def test_a_full_cache_directory_does_not_stop_loading(tmp_path, monkeypatch, caplog):
    def disk_full(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                              'message: "No space left on device" })')

    monkeypatch.setattr("hardmax.data.load.save_file", disk_full)
    config = DataConfig(path=str(write_archive(tmp_path / "a.tar.gz", fake_reviews(10))),
                        cache_dir=str(tmp_path / "c"), min_count=1, download=False)
    with caplog.at_level(logging.WARNING, logger="hardmax.data.load"):
        data = load_imdb(config, progress=False)
    assert len(data.train) + len(data.val) == 20 and "going on without it" in caplog.text
    assert not [p for p in (tmp_path / "c" / "imdb").iterdir() if p.suffix != ".json"]  # no temporary file left


def test_old_temporary_files_of_the_data_cache_are_removed(tmp_path):
    config = DataConfig(path=str(write_archive(tmp_path / "a.tar.gz", fake_reviews(10))),
                        cache_dir=str(tmp_path / "c"), min_count=1, download=False)
    folder = tmp_path / "c" / "imdb"
    folder.mkdir(parents=True)
    old, fresh = folder / ".0123abcd.k3x_9abc.tmp.safetensors", folder / ".0123abcd.zz99yy88.tmp.json"
    for path in (old, fresh):
        path.write_bytes(b"half a file")
    os.utime(old, (time.time() - 7200, time.time() - 7200))  # two hours old: its writer is gone
    load_imdb(config, progress=False)
    assert not old.exists() and fresh.exists()  # a fresh one may belong to a live writer


# --------------------------------------------------------------------------------------------
# Item 3: the files of a run directory must agree.
# --------------------------------------------------------------------------------------------

TRAIN = TrainConfig(epochs=1, batch_size=32, lr=0.05, seed=0)
DATA_INFO = {"corpus": "tests/corpus.py", "max_len": 24, "stopwords": "nltk"}


@pytest.fixture(scope="module")
def splits():
    return train_val(128, 64, seed=0)


@pytest.fixture(scope="module")
def vocab(splits) -> Vocabulary:
    return Vocabulary(words=tuple(splits[0].words))


def fit(splits, run_dir, vocab=None, *, resume=False, **changes):
    return train(*splits, model_config=ModelConfig(vocab_size=splits[0].vocab_size, d=2, layers=2),
                 train_config=replace(TRAIN, **changes), run_dir=run_dir, resume=resume, data_info=DATA_INFO,
                 vocab=vocab, progress=False)


@pytest.fixture(scope="module")
def run_dir(splits, vocab, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "run"
    torch.set_num_threads(1)
    fit(splits, path, vocab)
    return path


@pytest.fixture
def copy(run_dir, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(run_dir, tmp_path / "copy"))


def test_a_run_reads_back_whole(run_dir, vocab, splits):
    run = Run.load(run_dir)
    assert run.vocab == vocab and run.model_config.layers == 2 and run.train_config == TRAIN
    assert len(run.history) == 1 and run.history[0].epoch == 1 and run.best_epoch == 1
    assert run.data_config.max_len == 24 and run.path == run_dir
    assert load_run(run_dir).record == run.record


def edit_json(path: Path, edit) -> None:
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("section, key, value", [
    ("model", "layers", 5), ("model", "paper_padding", True), ("model", "beta", 3.0),
    ("data", "max_len", 64), ("data", "stopwords", "none"), ("train", "lr", 0.5),
])
def test_an_edited_config_is_refused(copy, section, key, value):
    edit_json(copy / "config.json", lambda r: r[section].__setitem__(key, value))
    with pytest.raises(CheckpointError, match=f"does not match its config .*config.json: {section}.{key}"):
        load_run(copy)


def test_settings_that_do_not_change_the_weights_may_be_edited(copy):
    edit_json(copy / "config.json", lambda r: r["train"].update(epochs=50, device="cpu", patience=9))
    assert load_run(copy).train_config.epochs == 50


@pytest.mark.parametrize("change", ["extra", "missing", "shuffled", "deleted"])
def test_an_edited_vocabulary_is_refused(copy, vocab, change):
    words = list(vocab.words)
    if change == "deleted":
        (copy / "vocab.json").unlink()
    else:
        words = {"extra": words + ["zebra"], "missing": words[:-1],
                 "shuffled": words[:2] + words[3:4] + words[2:3] + words[4:]}[change]
        (copy / "vocab.json").write_text(Vocabulary(words=tuple(words)).to_json())
    with pytest.raises(CheckpointError, match="vocab.json"):
        load_run(copy)


def test_weights_edited_in_place_are_refused(copy):
    path = copy / "model.safetensors"
    tensors, _ = load_tensors(path)
    data = bytearray(path.read_bytes())
    # Flip the sign bit of the decoder's first weight, found by its bytes in the file.
    value = tensors["decoder.weight"].reshape(-1)[:1].numpy().tobytes()
    at = data.rindex(value)
    data[at + 3] ^= 0x80
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.safetensors is damaged or was edited"):
        load_run(copy)


def test_non_finite_weights_are_refused(copy):
    path = copy / "model.safetensors"
    tensors, meta = load_tensors(path)
    tensors["decoder.weight"][0, 0] = float("nan")
    save_tensors(path, tensors, {k: v for k, v in meta.items() if k != "format"})  # a consistent checksum
    with pytest.raises(CheckpointError, match=r"non-finite weights \(NaN or inf in decoder.weight\)"):
        load_run(copy)


# --------------------------------------------------------------------------------------------
# Item 4: one writer per run directory.
# --------------------------------------------------------------------------------------------

HOLD_LOCK = """
import sys, time
from hardmax.training import lock_run
with lock_run(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


def hold_lock(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLD_LOCK), str(run_dir)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"locked"
    return proc


def test_a_second_writer_is_refused_and_a_dead_ones_lock_taken_over(splits, vocab, tmp_path):
    run_dir = tmp_path / "run"
    proc = hold_lock(run_dir)
    try:
        with pytest.raises(RunLockedError, match=f"being written by another process \\(pid {proc.pid}"):
            fit(splits, run_dir, vocab)
        assert not (run_dir / "config.json").exists()  # nothing was written
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert (run_dir / ".lock").exists()  # left by the killed holder; the kernel released its lock
    fit(splits, run_dir, vocab)
    assert load_run(run_dir).best_epoch == 1 and not (run_dir / ".lock").exists()


def test_the_lock_is_reentrant_in_one_thread_only(tmp_path):
    import threading

    errors = []
    with lock_run(tmp_path / "r"), lock_run(tmp_path / "r"):
        thread = threading.Thread(target=lambda: errors.append(_try_lock(tmp_path / "r")))
        thread.start()
        thread.join()
    assert errors == ["another thread"]
    assert not (tmp_path / "r" / ".lock").exists()


def _try_lock(path: Path) -> str:
    try:
        with lock_run(path):
            return "acquired"
    except RunLockedError as e:
        return "another thread" if "another thread" in str(e) else str(e)


def test_resume_refuses_a_checkpoint_trained_with_other_settings(splits, vocab, tmp_path):
    run_dir = tmp_path / "run"
    fit(splits, run_dir, vocab, seed=7, checkpoint_every=1)
    # Another process wrote config.json for seed 8 (the mixture of issue #12): the checkpoint says 7.
    edit_json(run_dir / "config.json", lambda r: r["train"].update(seed=8))
    with pytest.raises(CheckpointError, match="train.seed: saved 7, now 8"):
        fit(splits, run_dir, vocab, resume=True, seed=8, epochs=2, checkpoint_every=1)
    other = Vocabulary(words=tuple(splits[0].words[:2] + splits[0].words[3:] + splits[0].words[2:3]))
    with pytest.raises(CheckpointError, match="vocabulary differs"):
        fit(splits, run_dir, other, resume=True, seed=7, epochs=2, checkpoint_every=1)


def test_temporary_files_of_a_killed_write_are_removed(splits, vocab, tmp_path):
    run_dir = tmp_path / "run"
    fit(splits, run_dir, vocab)
    stale = [run_dir / ".model.k3x_9abc.tmp.safetensors", run_dir / ".history.a1b2c3d4.tmp.json"]
    kept = run_dir / ".notes.tmp"  # not a name atomic_write gives
    for path in [*stale, kept]:
        path.write_bytes(b"half a file")
    fit(splits, run_dir, vocab, resume=True, epochs=2)
    assert not any(p.exists() for p in stale) and kept.exists()


# --------------------------------------------------------------------------------------------
# Item 6: one clear error, never a traceback.
# --------------------------------------------------------------------------------------------


def test_disk_full_while_writing_weights_is_one_oserror(tmp_path, monkeypatch):
    def disk_full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"partial")
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                              'message: "No space left on device" })')

    monkeypatch.setattr("hardmax.io.save_file", disk_full)
    with pytest.raises(OSError, match="could not write .*w.safetensors .*No space left on device") as info:
        save_tensors(tmp_path / "w.safetensors", {"a": torch.ones(3)})
    assert info.value.errno == 28 and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []  # the partial temporary file is gone


WRITE_PAST_LIMIT = """
import resource, signal, sys, torch
from hardmax.io import save_tensors
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
try:
    save_tensors(sys.argv[1], {"w": torch.zeros(1_000_000)})
except OSError as e:
    print("OSError", e)
"""


def test_a_real_failed_write_is_one_oserror(tmp_path):
    out = subprocess.run([sys.executable, "-c", WRITE_PAST_LIMIT, str(tmp_path / "w.safetensors")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("OSError") and "could not write" in out.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_diverged_training_is_one_floating_point_error(splits, tmp_path, monkeypatch):
    import hardmax.training.loop as loop

    original = loop.F.binary_cross_entropy_with_logits
    calls = []

    def loss_becomes_nan(logits, target):
        calls.append(1)
        value = original(logits, target)
        return value * float("nan") if len(calls) == 3 else value

    monkeypatch.setattr(loop.F, "binary_cross_entropy_with_logits", loss_becomes_nan)
    with pytest.raises(FloatingPointError, match="training diverged at epoch 1, batch 2: loss nan"):
        fit(splits, tmp_path / "run")


def test_devices_and_threads_are_checked():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got 'foo'"):
        resolve_device("foo")
    with pytest.raises(ValueError, match="device must be"):
        TrainConfig(device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device is available"):
            resolve_device("cuda")
    else:
        with pytest.raises(ValueError, match="CUDA device"):
            resolve_device(f"cuda:{torch.cuda.device_count()}")
    for bad in (-1, 0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads must be an integer from 1 to"):
            set_threads(bad)


@pytest.mark.parametrize("changes", [{"lr": "0.01"}, {"epochs": "3"}, {"epochs": 2.5}, {"patience": True},
                                     {"word_dropout": None}, {"weight_decay": float("inf")}])
def test_non_numeric_settings_are_one_value_error(changes):
    name = next(iter(changes))
    with pytest.raises(ValueError, match=f"^{name} must be"):
        TrainConfig(**changes)


def test_a_non_numeric_config_json_is_one_checkpoint_error(copy):
    edit_json(copy / "config.json", lambda r: r["model"].update(d="two"))
    with pytest.raises(CheckpointError, match="config.json"):
        load_run(copy)


def cli(capsys, *argv: str) -> tuple[int, str]:
    from hardmax.cli import main

    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("argv, message", [
    (["--device", "foo"], "device must be"),
    (["--threads", "-1"], "threads must be"),
    (["--lr", "abc"], "invalid float value"),
] + ([] if torch.cuda.is_available() else [(["--device", "cuda"], "no CUDA device is available")]))
def test_cli_settings_fail_in_one_line_before_reading_data(capsys, tmp_path, argv, message):
    start = time.perf_counter()
    code, err = cli(capsys, "train", "--run", str(tmp_path / "run"), "--data", str(tmp_path / "none.tar.gz"), *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert time.perf_counter() - start < 30


def test_cli_locked_run_and_damaged_data_fail_in_one_line(capsys, tmp_path, good_archive):
    data = tmp_path / "cut.tar.gz"
    data.write_bytes(good_archive.read_bytes()[:-8])
    code, err = cli(capsys, "train", "--run", str(tmp_path / "a"), "--data", str(data), "--epochs", "1")
    assert code == 2 and "archive is damaged" in err.splitlines()[-1] and "Traceback" not in err, err
    run_dir = tmp_path / "b"
    proc = hold_lock(run_dir)
    try:
        code, err = cli(capsys, "train", "--run", str(run_dir), "--data", str(good_archive), "--epochs", "1",
                        "--d", "2", "--cache-dir", str(tmp_path / "cache"))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # Progress bars of the data may come first; the error is the last line, and there is no traceback.
    assert code == 2 and f"pid {proc.pid}" in err.splitlines()[-1] and "Traceback" not in err, err


def test_cli_diverged_training_and_full_disk_fail_in_one_line(capsys, tmp_path, good_archive, monkeypatch):
    import hardmax.training.loop as loop

    base = ["train", "--data", str(good_archive), "--epochs", "1", "--d", "2", "--cache-dir", str(tmp_path / "c")]
    original = loop.F.binary_cross_entropy_with_logits
    monkeypatch.setattr(loop.F, "binary_cross_entropy_with_logits", lambda x, y: original(x, y) * float("nan"))
    code, err = cli(capsys, *base, "--run", str(tmp_path / "a"))
    assert code == 2 and "training diverged at epoch 1, batch 0: loss nan" in err.splitlines()[-1], err
    assert "Traceback" not in err
    monkeypatch.setattr(loop.F, "binary_cross_entropy_with_logits", original)

    def disk_full(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                              'message: "No space left on device" })')

    monkeypatch.setattr("hardmax.io.save_file", disk_full)
    code, err = cli(capsys, *base, "--run", str(tmp_path / "b"))
    last = err.splitlines()[-1]
    assert code == 2 and "could not write" in last and "No space left on device" in last, err
    assert "Traceback" not in err


def test_a_file_system_without_flock_trains_unlocked_with_a_warning(tmp_path, monkeypatch, caplog):
    import errno
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with caplog.at_level(logging.WARNING, logger="hardmax.training.run"), lock_run(tmp_path / "r"):
        assert "cannot lock" in caplog.text
    assert not (tmp_path / "r" / ".lock").exists()


# --------------------------------------------------------------------------------------------
# Issue #39 (15, swept): SIGTERM during any atomic write, from the library as from the command line.
# --------------------------------------------------------------------------------------------

_SLOW_WRITE = """
import signal, sys, time
from pathlib import Path
from hardmax.io import atomic_write, write_text
if sys.argv[2] == "ignored":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
target = Path(sys.argv[1]) / "out.txt"
write_text(target, "the old file, complete")

def slow(tmp):
    Path(tmp).write_text("half of the new fi")
    print("writing", flush=True)
    time.sleep(60 if sys.argv[2] == "default" else 2)
    Path(tmp).write_text("the new file, complete")

atomic_write(target, slow)
print("handler back:", signal.getsignal(signal.SIGTERM) is (signal.SIG_IGN if sys.argv[2] == "ignored" else
                                                            signal.SIG_DFL), flush=True)
"""


@pytest.mark.parametrize("disposition", ["default", "ignored"])
def test_sigterm_during_a_library_atomic_write_leaves_no_temporary_file(tmp_path, disposition):
    """SIGTERM's default action ended a script that called `atomic_write` on the spot, leaving the temporary file
    (only the CLI caught it). Now the write turns it into an exit with status 143 that removes the file first, and
    the old file stays whole; an ignored SIGTERM (nohup, a parent's choice) stays ignored and the write completes."""
    child = subprocess.Popen([sys.executable, "-c", _SLOW_WRITE, str(tmp_path), disposition],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"], err  # no temporary file beside it
    if disposition == "default":
        assert child.returncode == 143 and "Traceback" not in err, err
        assert (tmp_path / "out.txt").read_text() == "the old file, complete"
    else:
        assert child.returncode == 0 and "handler back: True" in out, err
        assert (tmp_path / "out.txt").read_text() == "the new file, complete"


def test_an_atomic_write_leaves_the_sigterm_handler_as_it_found_it(tmp_path):
    """The write sets its own SIGTERM handler only in place of the default one, and puts back what it found."""
    from hardmax.io import atomic_write

    def mine(signum, frame):
        pass

    seen = []

    def write(tmp: str) -> None:  # notes the handler while the temporary file exists
        seen.append(signal.getsignal(signal.SIGTERM))
        Path(tmp).write_text("x")

    before = signal.getsignal(signal.SIGTERM)
    try:
        for handler in (signal.SIG_DFL, signal.SIG_IGN, mine):
            signal.signal(signal.SIGTERM, handler)
            atomic_write(tmp_path / "f.txt", write)
            assert signal.getsignal(signal.SIGTERM) is handler
            assert (seen[-1] is handler) == (handler is not signal.SIG_DFL)  # only the default is replaced
    finally:
        signal.signal(signal.SIGTERM, before)
