"""`hardmax.data.tables` and tables through `load_imdb`: every format, k classes, split and group columns, and
one clear line for each kind of bad input. The corpora are generated here (topic words + filler), never real."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hardmax.data import DataConfig, DataError, load_imdb
from hardmax.data.config import Columns
from hardmax.data.tables import read_table, table_format

TOPICS = {"sport": ["goal", "match", "team"], "music": ["song", "band", "album"], "food": ["bread", "soup", "cake"],
          "tech": ["laptop", "phone", "code"]}


def rows(n: int = 120, *, seed: int = 0, classes=("sport", "music", "food")) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        topic = classes[i % len(classes)]
        words = list(rng.choice(TOPICS[topic], size=4)) + list(rng.choice(["the", "a", "very", "today"], size=4))
        rng.shuffle(words)
        out.append({"body": " ".join(words), "topic": topic, "part": ["train", "train", "train", "validation",
                                                                      "test"][i % 5], "author": f"a{i // 6}"})
    return out


def write(path, records: list[dict]):
    suffix = path.suffix
    if suffix in (".csv", ".tsv"):
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(records[0]), delimiter="\t" if suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(records)
    elif suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        pq.write_table(pa.Table.from_pylist(records), path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_format_reads_the_same_rows(tmp_path, suffix):
    records = rows()
    got = read_table(write(tmp_path / f"t{suffix}", records), Columns(text="body", label="topic"))
    assert got.texts == [r["body"] for r in records]
    assert got.label_names == ("food", "music", "sport")  # sorted
    assert got.labels.tolist() == [got.label_names.index(r["topic"]) for r in records]
    assert got.split is None and got.groups is None and got.kind == "table"


def test_integer_labels_are_ordered_numerically_and_split_and_group_columns_are_read(tmp_path):
    records = [{**r, "topic": [10, 2, 7][i % 3]} for i, r in enumerate(rows())]
    got = read_table(write(tmp_path / "t.jsonl", records), Columns(text="body", label="topic", split="part",
                                                                    group="author"))
    assert got.label_names == ("2", "7", "10")
    assert set(got.split.tolist()) == {"train", "val", "test"}
    assert len(np.unique(got.groups)) == len({r["author"] for r in records})


def put(path, data):
    """Write bytes or text to path, and return the path."""
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)
    return path


@pytest.mark.parametrize("make,message", [
    (lambda p: write(p / "t.csv", rows()), "no column 'text'; the columns are 'body', 'topic', 'part', 'author'"),
    (lambda p: write(p / "t.csv", [{**r, "body": "  " if i == 7 else r["body"]} for i, r in enumerate(rows())]),
     r"line 9: empty text in column 'body'"),
    (lambda p: write(p / "t.jsonl", [{**r, "topic": "sport"} for r in rows()]), "has one class"),
    (lambda p: put(p / "t.csv", (p / "x.parquet").read_bytes()), "is a Parquet file"),
    (lambda p: put(p / "t.parquet", "body,topic\nx,y\n"), "not a Parquet file"),
    (lambda p: put(p / "t.csv", '{"body": "x", "topic": "y"}\n'), "starts like JSON"),
    (lambda p: put(p / "t.jsonl", "body,topic\nx,y\n"), "not a JSON object"),
    (lambda p: put(p / "t.csv", "body,topic\nnaïve,a\n".encode() + "café,b\n".encode("latin-1")),
     "line 3: bytes .* are not UTF-8"),
    (lambda p: write(p / "t.csv", [{**r, "part": "holdout" if i == 3 else r["part"]} for i, r in enumerate(rows())]),
     "line 5: split 'holdout'"),
    (lambda p: put(p / "t.txt", "x"), "unknown table format"),
    (lambda p: write(p / "t.jsonl", [{**r, "topic": ["a"] if i == 2 else r["topic"]} for i, r in enumerate(rows())]),
     r"line 3: label \['a'\]"),
    (lambda p: put(p / "t.csv", 'body,topic\nfine,a\n"two\nlines,b\nok,a\n'), "line 3: 1 field"),
])
def test_bad_tables_get_one_line(tmp_path, make, message):
    write(tmp_path / "x.parquet", rows(6))
    path = make(tmp_path)
    columns = Columns(text="text" if "no column" in message else "body", label="topic",
                      split="part" if "split" in message else None)
    with pytest.raises(DataError, match=message) as info:
        read_table(path, columns)
    assert "\n" not in str(info.value)


def test_format_comes_from_the_name_and_is_checked(tmp_path):
    assert table_format(write(tmp_path / "a.parquet", rows(6))) == "parquet"
    assert table_format(write(tmp_path / "a.tsv", rows(6))) == "tsv"


def _config(path, **kwargs):
    return DataConfig(path=str(path), text_column="body", label_column="topic", use_cache=False, min_count=1,
                      stopwords="none", **kwargs)


def test_a_table_through_load_imdb_with_k_classes(tmp_path):
    data = load_imdb(_config(write(tmp_path / "t.csv", rows(300))), progress=False)
    assert data.label_names == ("food", "music", "sport") and data.classes == 3
    assert data.info()["label_names"] == ["food", "music", "sport"]
    sizes = {name: len(getattr(data, name)) for name in ("train", "val", "test")}
    assert sizes["test"] == 90 and sum(sizes.values()) == 300  # a seeded, stratified 30 % test hold-out
    for name in ("train", "val", "test"):
        counts = np.bincount(getattr(data, name).labels.numpy(), minlength=3)
        assert counts.max() - counts.min() <= 1  # stratified over the three classes
    assert "goal" in data.vocab.words and "cake" in data.vocab.words


def test_split_column_as_given_and_groups_held_out_whole(tmp_path):
    records = rows(300)
    given = load_imdb(_config(write(tmp_path / "s.parquet", records), split_column="part"), progress=False)
    parts = np.array([r["part"] for r in records])
    for name, label in (("train", "train"), ("val", "validation"), ("test", "test")):
        assert sorted(getattr(given, name).index.tolist()) == np.flatnonzero(parts == label).tolist()
    grouped = load_imdb(_config(write(tmp_path / "g.jsonl", records), group_column="author"), progress=False)
    authors = np.array([r["author"] for r in records])
    train_authors = set(authors[grouped.train.index.numpy()])
    val_authors = set(authors[grouped.val.index.numpy()])
    assert val_authors and not train_authors & val_authors  # whole groups on one side
    assert 21 <= len(grouped.val) < 21 + 6  # 10 % of the 210 training rows, rounded up to a whole group of 6


def test_options_must_come_together():
    with pytest.raises(ValueError, match="both --text-column and --label-column"):
        DataConfig(text_column="body")
    with pytest.raises(ValueError, match="are for a table"):
        DataConfig(split_column="part")


def test_line_breaks_quotes_and_label_spellings(tmp_path):
    jsonl = tmp_path / "u.jsonl"  # U+2028 is valid unescaped inside a JSON string
    jsonl.write_text(json.dumps({"body": "one\u2028two", "topic": 1}, ensure_ascii=False) + "\n"
                     + json.dumps({"body": "three", "topic": "1"}) + "\n" + json.dumps({"body": "four", "topic": 2})
                     + "\n", encoding="utf-8")
    got = read_table(jsonl, Columns(text="body", label="topic"))
    assert got.texts[0] == "one\u2028two" and got.label_names == ("1", "2") and got.labels.tolist() == [0, 0, 1]
    tsv = tmp_path / "q.tsv"  # no quoting in TSV: a text may begin with a quote
    tsv.write_text('body\ttopic\n"Hello there\ta\nworld" is here\tb\n', encoding="utf-8")
    assert read_table(tsv, Columns(text="body", label="topic")).texts == ['"Hello there', 'world" is here']
    csv_numbers = write(tmp_path / "n.csv", [{**r, "topic": [10, 2, 9][i % 3]} for i, r in enumerate(rows(9))])
    assert read_table(csv_numbers, Columns(text="body", label="topic")).label_names == ("2", "9", "10")


def test_groups_stay_on_one_side_of_every_split(tmp_path):
    records = rows(300)
    data = load_imdb(_config(write(tmp_path / "g.csv", records), group_column="author"), progress=False)
    authors = np.array([r["author"] for r in records])
    sides = [set(authors[getattr(data, name).index.numpy()]) for name in ("train", "val", "test")]
    assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2])
    big = [{**r, "author": "one" if i < 250 else r["author"]} for i, r in enumerate(records)]
    with pytest.raises(DataError, match="groups are too large"):
        load_imdb(_config(write(tmp_path / "big.csv", big), group_column="author"), progress=False)


def test_a_split_column_without_test_rows_and_a_table_without_a_path(tmp_path):
    records = [{**r, "part": "train" if r["part"] == "test" else r["part"]} for r in rows(60)]
    with pytest.raises(DataError, match="names no test rows"):
        load_imdb(_config(write(tmp_path / "s.csv", records), split_column="part"), progress=False)
    with pytest.raises(DataError, match="give it with --data FILE"):
        load_imdb(DataConfig(text_column="body", label_column="topic", use_cache=False), progress=False)


# --- issue #39: classes past int8, one read, labels, headers, nesting, splits, repeated rows ----------------------

def test_more_than_128_classes_survive_the_cache(tmp_path):
    """Issue #39 (1): the cache stored labels as int8, so a 200-class table's cached labels wrapped to −128."""
    names = tuple(f"c{i:03d}" for i in range(200))
    records = [{"body": f"word{i % 200} filler{i % 7} more{i % 11}", "topic": names[i % 200]} for i in range(2000)]
    table = write(tmp_path / "many.csv", records)
    config = DataConfig(path=str(table), text_column="body", label_column="topic", min_count=1, stopwords="none",
                        cache_dir=str(tmp_path / "cache"))
    fresh = load_imdb(config, progress=False)
    cached = load_imdb(config, progress=False)
    assert cached.stats.cache_hit and not fresh.stats.cache_hit
    for name in ("train", "val", "test"):
        assert torch.equal(getattr(fresh, name).labels, getattr(cached, name).labels)
        assert int(getattr(cached, name).labels.min()) >= 0 and int(getattr(cached, name).labels.max()) < 200
    assert int(cached.train.labels.max()) >= 128


def test_the_key_and_the_rows_come_from_one_read(tmp_path, monkeypatch):
    """Issue #39 (8): the SHA-256 key, the rows and the run's table_sha256 came from three reads: a file changing
    in between put one version's rows under another's key. Now the file is read once and everything follows."""
    from pathlib import Path

    first = write(tmp_path / "t.csv", rows(120))
    second_bytes = write(tmp_path / "other.csv", rows(120, seed=5, classes=("tech", "food", "sport"))).read_bytes()
    reads = []
    real = Path.read_bytes

    def changing(self):  # the file is rewritten right after each read of it
        data = real(self)
        if self == first:
            reads.append(data)
            first.write_bytes(second_bytes if len(reads) % 2 else data)
        return data

    monkeypatch.setattr(Path, "read_bytes", changing)
    config = DataConfig(path=str(first), text_column="body", label_column="topic", min_count=1, stopwords="none",
                        cache_dir=str(tmp_path / "cache"))
    data = load_imdb(config, progress=False)
    monkeypatch.setattr(Path, "read_bytes", real)
    assert len(reads) == 1  # one read: hashed, parsed and recorded
    import hashlib

    assert data.stats.sha256 == hashlib.sha256(reads[0]).hexdigest() == data.info()["table_sha256"]
    expected = read_table(put(tmp_path / "copy.csv", reads[0]), Columns(text="body", label="topic"))
    assert data.label_names == expected.label_names


@pytest.mark.parametrize("make,message", [
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
     "line 1: JSON nested too deeply"),
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": "a", "topic": "b"}\n'), "key 'topic' appears twice"),
    (lambda p: put(p / "t.csv", "body,topic,body\nx,a,y\nz,b,w\n"), "column 'body' appears twice"),
    (lambda p: put(p / "t.csv", "body,topic\nx,NaN\ny,1\nz,2\n"), r"line 2: label 'NaN' .* is no class"),
    (lambda p: put(p / "t.csv", "body,topic\nx,inf\ny,1\n"), "is no class"),
    (lambda p: put(p / "t.csv", "body,topic\nx,1\ny,01\nz,pos\n"), "'1' and '01' .* one number written two ways"),
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": 1.5}\n{"body": "y", "topic": 2}\n'), "1.5 .* is no class"),
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": NaN}\n{"body": "y", "topic": 2}\n'), "is no class"),
])
def test_more_bad_tables_get_one_line(tmp_path, make, message):
    with pytest.raises(DataError, match=message) as info:
        read_table(make(tmp_path), Columns(text="body", label="topic"))
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_one_number_written_several_ways_is_one_class(tmp_path):
    """Issue #39 (14): "1", "1.0", "01" became three classes silently; Unicode digits ("²", "①") crashed int()."""
    table = put(tmp_path / "t.csv", "body,topic\na,1\nb,1.0\nc,01\nd,+1\ne,2\nf,10\n")
    got = read_table(table, Columns(text="body", label="topic"))
    assert got.label_names == ("1", "2", "10") and got.labels.tolist() == [0, 0, 0, 0, 1, 2]
    words = put(tmp_path / "w.csv", "body,topic\na,①\nb,²\nc,x\n")  # non-ASCII digits are names, not numbers
    assert read_table(words, Columns(text="body", label="topic")).label_names == ("x", "²", "①")


def test_many_small_classes_still_get_a_validation_split(tmp_path):
    """Issue #39 (14): 1,000 classes × 5 rows: val_fraction 0.1 of 3 training rows rounds every class to none."""
    def word(j: int) -> str:  # letters only: cleaning keeps them
        return "".join(chr(97 + (j // 26**e) % 26) for e in range(3))

    records = [{"body": f"{word(i % 1000)} {word(i % 13 + 1000)} filler", "topic": f"t{i % 1000:04d}"}
               for i in range(5000)]
    data = load_imdb(_config(write(tmp_path / "t.csv", records)), progress=False)
    assert len(data.val) == round(0.1 * (len(data.train) + len(data.val)))
    assert len(data.val) > 0 and len(data.train) + len(data.val) + len(data.test) == 5000
    usual = load_imdb(_config(write(tmp_path / "u.csv", rows(300))), progress=False)  # unchanged where not empty
    assert len(usual.val) == 21


def test_held_out_rows_repeating_training_rows_are_warned(tmp_path, caplog):
    """Issue #39 (14): test rows identical to training rows got no warning."""
    import logging

    records = rows(300)
    for r in records[::7]:  # rows of every part
        r["body"] = "the very same text"
    with caplog.at_level(logging.WARNING):
        data = load_imdb(_config(write(tmp_path / "t.csv", records), split_column="part"), progress=False)
    same = data.stats.splits["test"].same_as_train
    assert same > 0 and f"{same} test row(s) hold the text of a training row" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_imdb(_config(write(tmp_path / "u.csv", rows(300))), progress=False)
    assert "hold the text of a training row" not in caplog.text


# --- issue #39, second pass: the variants of each defect -----------------------------------------------------------

def test_an_integer_however_written_is_one_class_and_other_numbers_are_refused(tmp_path):
    """Issue #39 (14): "1e0" and "1", "1e1" and "10" were two classes each (only "1.0"-like spellings were joined);
    a non-integral "1.5" in a CSV became a class while the JSON number 1.5 was refused."""
    table = put(tmp_path / "t.csv", "body,topic\na,1e0\nb,1\nc,10\nd,1E1\ne,+1.\nf,.1e2\n")
    got = read_table(table, Columns(text="body", label="topic"))
    assert got.label_names == ("1", "10") and got.labels.tolist() == [0, 0, 1, 1, 0, 1]
    same = put(tmp_path / "j.jsonl", '{"body": "a", "topic": 1e300}\n{"body": "b", "topic": 2}\n'
                                     '{"body": "c", "topic": "1e300"}\n')
    with pytest.raises(DataError, match="line 1: label 1e\\+300 .* is no class \\(a number of more than 100 digits"):
        read_table(same, Columns(text="body", label="topic"))
    for label, why in (("1.5", "a number but not an integer"), ("NA", "a missing value"), ("#N/A", "a missing value"),
                       ("null", "a missing value"), ("-nan", "a missing value"), ("1" * 5000, "more than 100 digits"),
                       ("1e99999999999999999999", "more than 100 digits")):
        bad = put(tmp_path / "b.csv", f"body,topic\na,2\nb,{label}\nc,3\n")
        with pytest.raises(DataError, match=f"b.csv, line 3: label .* is no class \\([a-z ]*{why}") as info:
            read_table(bad, Columns(text="body", label="topic"))
        assert "\n" not in str(info.value) and len(str(info.value)) < 300
    names = put(tmp_path / "n.csv", "body,topic\na,pos\nb,1e1\nc,neg\nd,10\n")
    with pytest.raises(DataError, match="labels '1e1' and '10' .* \\(lines 3 and 5\\) are one number written two ways"):
        read_table(names, Columns(text="body", label="topic"))
    kept = put(tmp_path / "k.csv", "body,topic\na,pos\nb,1_000\nc,0x1\nd,１\n")  # names, not numbers
    assert read_table(kept, Columns(text="body", label="topic")).label_names == ("0x1", "1_000", "pos", "１")


@pytest.mark.parametrize("make,message", [
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": {"k": "' + "y" * 100_000 + '"}}\n'), "is no class \\(a dict"),
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": ' + "[" * 900 + "]" * 900 + "}\n"), "is no class \\(a list"),
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": ' + "1" * 5000 + "}\n"), "line 1: cannot read this JSON"),
    (lambda p: put(p / "t.jsonl", '{"body": "x", "topic": "a", "' + "k" * 100_000 + '": 1, "' + "k" * 100_000
                   + '": 2}\n'), "appears twice in one object"),
    (lambda p: put(p / "t.jsonl", "{" + ", ".join(f'"k{i}": {i}' for i in range(10_000)) + "}\n"),
     "no key 'body', 'topic'; the keys are 'k0', .* and 9,988 more"),
    (lambda p: put(p / "t.csv", ",".join(["z" * 100_000] * 2) + ",body,topic\n"), "appears twice"),
    (lambda p: put(p / "t.csv", "body,topic,part\nx,a,nope" + "!" * 100_000 + "\ny,b,train\n"), "split 'nope!!!"),
])
def test_values_in_messages_are_cut_short(tmp_path, make, message):
    """Issue #39 (14): a label, key or column name quoted whole made a "one-line" error 100,000 characters long (and
    an integer of 5,000 digits in JSON Lines was a bare ValueError from the int parser, naming no file)."""
    columns = Columns(text="body", label="topic", split="part") if "part" in message or "nope" in message else \
        Columns(text="body", label="topic")
    with pytest.raises(DataError, match=message) as info:
        read_table(make(tmp_path), columns)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400 and str(tmp_path) in str(info.value)


def test_an_old_or_damaged_cache_entry_is_rebuilt_never_read(tmp_path, caplog):
    """Issue #39 (1): an entry of the first cache format holds int8 labels (wrapped past class 127); it, and any
    entry whose labels or ids fall outside the classes and the vocabulary, is rebuilt instead of being read."""
    import logging
    from pathlib import Path

    from safetensors.torch import load_file, save_file

    names = tuple(f"c{i:03d}" for i in range(200))
    records = [{"body": f"word{i % 200} filler{i % 7}", "topic": names[i % 200]} for i in range(2000)]
    config = DataConfig(path=str(write(tmp_path / "many.csv", records)), text_column="body", label_column="topic",
                        min_count=1, stopwords="none", cache_dir=str(tmp_path / "cache"))
    fresh = load_imdb(config, progress=False)
    stem = Path(fresh.stats.cache_file).with_suffix("")
    meta = json.loads(stem.with_suffix(".json").read_text())
    tensors = load_file(stem.with_suffix(".safetensors"))
    key = meta["key"]
    for doctor in ("old format", "wrapped labels", "ids past the vocabulary"):
        changed, old = dict(tensors), dict(meta)
        if doctor == "old format":  # what the first format wrote: int8 labels, read back as negative codes
            old["format"] = "hardmax.imdb-cache/1"
            changed = {k: v.to(torch.int8) if k.endswith(".labels") else v for k, v in tensors.items()}
        elif doctor == "wrapped labels":
            changed["train.labels"] = tensors["train.labels"].to(torch.int8).to(torch.int64)
        else:
            changed["test.ids"] = tensors["test.ids"] + len(meta["words"])
        save_file(changed, str(stem.with_suffix(".safetensors")), metadata={"key": key})
        stem.with_suffix(".json").write_text(json.dumps(old))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = load_imdb(config, progress=False)
        assert not again.stats.cache_hit and "ignoring unusable cache entry" in caplog.text, doctor
        for name in ("train", "val", "test"):
            assert torch.equal(getattr(again, name).labels, getattr(fresh, name).labels)
            assert torch.equal(getattr(again, name).ids, getattr(fresh, name).ids)
        assert load_imdb(config, progress=False).stats.cache_hit  # rebuilt whole, read back whole


def test_cached_ids_and_rows_are_int32_only_where_they_fit():
    """Issue #39 (1, swept): ids and row numbers were cast to int32 unchecked; a value past 2^31 would wrap."""
    from hardmax.data.load import _compact

    assert _compact(torch.tensor([0, 5, 2**31 - 1])).dtype == torch.int32
    wide = torch.tensor([3, 2**31, 2**40])
    assert _compact(wide).dtype == torch.int64 and torch.equal(_compact(wide), wide)
    assert _compact(torch.zeros(0, 4, dtype=torch.int64)).dtype == torch.int32


def test_held_out_rows_that_read_as_training_rows_are_warned(tmp_path, caplog):
    """Issue #39 (14): only character-for-character copies were counted; a test row that differs from a training
    row in case, punctuation or digits is the same input to the model, and its accuracy measures memory too."""
    import logging

    records = rows(300)
    for i, r in enumerate(records):
        if r["part"] == "train" and i % 2:
            r["body"] = f"the only text {i // 2} of its kind"
    copies = [r for r in records if r["part"] == "test"][:5]
    trained = [r["body"] for r in records if r["part"] == "train" and r["body"].startswith("the only")][:5]
    for r, text in zip(copies, trained, strict=True):
        r["body"] = text.upper().replace(" ", " -- ") + "!!! 10/10"  # same words, other case, punctuation, digits
    with caplog.at_level(logging.WARNING):
        data = load_imdb(_config(write(tmp_path / "t.csv", records), split_column="part"), progress=False)
    assert data.stats.splits["test"].same_as_train == 5
    assert "5 test row(s) hold the text of a training row (the same words after cleaning)" in caplog.text


def test_an_empty_validation_split_says_why(tmp_path, caplog):
    """Issue #39 (14): "validation split is empty (e.g. val_fraction > 0)" was said with val_fraction 0.1: the
    data now say why it is empty (a share that rounds to no row, or rows all empty after cleaning)."""
    import logging

    with caplog.at_level(logging.WARNING):
        data = load_imdb(_config(write(tmp_path / "t.csv", rows(6, classes=("sport", "music")))), progress=False)
    assert len(data.val) == 0
    assert "the validation split is empty: val_fraction 0.1 of the 4 training rows is 0.4 row, which rounds to none" \
        in caplog.text
    records = rows(60, classes=("sport", "music"))
    for r in records:
        if r["part"] == "validation":
            r["body"] = "10/10 !!!"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        data = load_imdb(_config(write(tmp_path / "u.csv", records), split_column="part"), progress=False)
    assert len(data.val) == 0 and "the validation split is empty: all 12 of its rows are empty after cleaning" \
        in caplog.text


def test_a_limit_shares_its_rows_among_many_classes(tmp_path):
    """Issue #39 (14, swept): --limit gave every class limit // k rows and the last class all the remainder (a
    limit of 1,999 over 1,000 classes: 1 row each, and 1,000 for the last)."""
    from hardmax.data.splits import _first_per_label

    labels = np.repeat(np.arange(1000), 3)
    kept = _first_per_label(np.arange(len(labels)), labels, 1999, 1000)
    counts = np.bincount(labels[kept], minlength=1000)
    assert len(kept) == 1999 and counts.min() == 1 and counts.max() == 2
    two = _first_per_label(np.arange(10), np.array([0, 1] * 5), 5, 2)  # two classes: as before
    assert np.bincount(np.array([0, 1] * 5)[two]).tolist() == [2, 3]


def test_a_name_without_a_suffix_is_read_by_the_file_it_leads_to(tmp_path):
    """Issue #39 (16): /dev/stdin given a table by the shell (or any link without a suffix) was "unknown table format
    ''": the format is that of the file behind the name, still checked against its content."""
    table = write(tmp_path / "t.csv", rows(30))
    link = tmp_path / "latest"
    link.symlink_to(table)
    got = read_table(link, Columns(text="body", label="topic"))
    assert got.texts == read_table(table, Columns(text="body", label="topic")).texts
    misnamed = put(tmp_path / "m.jsonl", table.read_bytes())  # the name behind says JSON Lines, the bytes CSV
    (tmp_path / "other").symlink_to(misnamed)
    with pytest.raises(DataError, match="m.jsonl: named .jsonl but its first line is not a JSON object"):
        read_table(tmp_path / "other", Columns(text="body", label="topic"))
