"""Generated IMDb-layout corpora for tests/test_data_*.py: review texts, archives, directories and CSVs written
into tmp_path (no IMDb text is stored in the repository), a `DataConfig` reading them, the long review of the
truncation tests, and where the real archive is (`real_archive`, also for test_experiments_pipeline.py). The
fixtures `archive` and `no_global_paths` are in conftest.py.
"""

from __future__ import annotations

import dataclasses
import io
import os
import tarfile
from pathlib import Path

from hardmax.data import DataConfig

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


def config(path: Path, tmp_path: Path, **changes) -> DataConfig:
    base = DataConfig(path=str(path), cache_dir=str(tmp_path / "cache"), min_count=1, download=False)
    return dataclasses.replace(base, **changes)


FRUIT = ["apple", "banana", "cherry", "damson", "elderberry", "fig", "grape", "guava", "kiwi", "lemon", "lime",
         "mango", "melon", "nectarine", "olive", "papaya", "peach", "pear", "plum", "quince"]


# 20 content words with stop words, digits and markup between them: the halves are counted in
# cleaned tokens, not in words of the raw text.
LONG_REVIEW = " ".join(f"{w} and the 42 <br />" if i % 3 == 0 else w for i, w in enumerate(FRUIT))


def real_archive() -> Path | None:
    """The real IMDb archive: $HARDMAX_IMDB, else ../shared/data/aclImdb-labeled.tar.gz beside the repository; None
    when neither exists. Read at import, before conftest.py's `no_global_paths` clears $HARDMAX_IMDB."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "data" / "aclImdb-labeled.tar.gz"
    candidates = [os.environ.get("HARDMAX_IMDB"), shared]
    return next((Path(c) for c in candidates if c and Path(c).exists()), None)
