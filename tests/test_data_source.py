"""Tests of `hardmax.data.source`: reading the IMDb layout from an archive, a directory or a CSV (extras
ignored, bad bytes replaced and counted), one clear error per bad input, and locating and downloading the archive
(order of the places looked in, file:// and HTTP downloads checked against their SHA-256).

Every archive, directory and CSV is generated here in tmp_path (tests/data_cases.py; no IMDb text is stored in
the repository); no test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself (conftest.py's
`no_global_paths`).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import io
import os
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from data_cases import config, corpus, review_text, write_csv, write_tar, write_tree

from hardmax import data
from hardmax.data import DataConfig, DataError, download_imdb, load_imdb, read_reviews, resolve_imdb_path

pytestmark = pytest.mark.usefixtures("no_global_paths")


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
