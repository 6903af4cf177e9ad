"""The user's own labelled texts (issue #28): k-class models, their metrics against scikit-learn, the paper's two
classes unchanged, and `hardmax train` / `hardmax evaluate` on a generated table end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import confusion_matrix, f1_score

from hardmax.cli import main
from hardmax.models import HardmaxClassifier, ModelConfig, build_model
from hardmax.training.loop import Evaluation, macro_f1, predicted_classes


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), k=st.integers(2, 6), n=st.integers(1, 60))
def test_macro_f1_and_confusion_match_scikit_learn(seed, k, n):
    rng = np.random.default_rng(seed)
    truth, pred = rng.integers(0, k, n), rng.integers(0, k, n)
    f1, confusion = macro_f1(torch.from_numpy(truth), torch.from_numpy(pred), k)
    present = sorted(set(truth) | set(pred))
    assert f1 == pytest.approx(f1_score(truth, pred, labels=present, average="macro", zero_division=0), abs=1e-12)
    assert confusion == confusion_matrix(truth, pred, labels=list(range(k))).tolist()


def test_two_classes_keep_one_logit_and_their_records():
    config = ModelConfig(vocab_size=20, d=4)
    model = build_model(config)
    assert model.decoder.out_features == 1 and "classes" not in config.to_dict()
    assert ModelConfig.from_record(config.to_dict()) == config
    ids = torch.randint(2, 20, (5, 7))
    assert model(ids).shape == (5,)


@pytest.mark.parametrize("crate", [False, True])
def test_k_classes_give_k_logits(crate):
    from hardmax.models.config import CrateBlocks

    config = ModelConfig(vocab_size=20, d=4, classes=5, crate=CrateBlocks() if crate else None)
    model = build_model(config)
    ids = torch.randint(2, 20, (6, 7))
    from hardmax.dynamics import Hardmax

    for rule in (None, Hardmax()):
        logits = model(ids, None, rule)
        assert logits.shape == (6, 5)
    assert ModelConfig.from_record(config.to_dict()).classes == 5
    if not crate:
        assert isinstance(model, HardmaxClassifier)


def test_evaluation_of_k_logits():
    labels = torch.tensor([0, 1, 2, 2, 1])
    logits = torch.tensor([[3.0, 0, 0], [0, 2, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]])
    e = Evaluation.from_logits(labels, logits, logits, seconds_hardmax=0.0, seconds_softmax=0.0)
    assert e.accuracy_hardmax == pytest.approx(0.8) and e.agreement == 1.0
    assert e.confusion_hardmax == ((1, 0, 0), (0, 2, 0), (1, 0, 1))
    assert predicted_classes(torch.tensor([-1.0, 2.0])).tolist() == [0, 1]


@pytest.mark.parametrize("bad", [1, 0, 2.5, True])
def test_classes_must_be_two_or_more(bad):
    with pytest.raises(ValueError, match="classes must be an integer ≥ 2"):
        ModelConfig(vocab_size=20, classes=bad)


@pytest.fixture(scope="module")
def topic_run(tmp_path_factory):
    """A four-class run trained through `hardmax train` on a generated JSON Lines table (a few seconds)."""
    from test_data_tables import rows, write

    folder = tmp_path_factory.mktemp("topics")
    table = write(folder / "topics.jsonl", rows(900, classes=("sport", "music", "food", "tech")))
    run = folder / "run"
    code = main(["train", "--data", str(table), "--text-column", "body", "--label-column", "topic", "--run",
                 str(run), "--d", "4", "--epochs", "8", "--min-count", "1", "--stopwords", "none", "--threads", "1"])
    assert code == 0
    return run, table


def test_train_and_evaluate_a_four_class_table(topic_run, capsys):
    run, table = topic_run
    record = json.loads((run / "config.json").read_text())
    assert record["model"]["classes"] == 4
    assert record["data"]["label_names"] == ["food", "music", "sport", "tech"]
    assert record["data"]["table"] == str(table.resolve())
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--threads", "1"]) == 0  # the table is found again
    out = capsys.readouterr().out
    assert "| true \\ predicted | food | music | sport | tech |" in out and "macro-F1" in out
    metrics = json.loads((run / "metrics_test.json").read_text())["evaluation"]
    assert metrics["accuracy_hardmax"] > 0.5 and len(metrics["confusion_hardmax"]) == 4  # chance is 0.25


def test_predict_writes_what_explain_says(topic_run, tmp_path, capsys, monkeypatch):
    import io

    from test_data_tables import rows, write

    from hardmax.explain import explain_texts
    from hardmax.training import load_run

    run, _ = topic_run
    texts = write(tmp_path / "new.csv", rows(40, seed=9, classes=("sport", "music", "food", "tech")))
    for out in (tmp_path / "p.csv", tmp_path / "p.jsonl"):
        assert main(["predict", "--run", str(run), str(texts), "--text-column", "body", "--out", str(out),
                     "--batch", "16"]) == 0
    import csv

    table = list(csv.DictReader((tmp_path / "p.csv").open(encoding="utf-8")))
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(table) == len(lines) == 40 and [int(r["row"]) for r in table] == list(range(40))
    bodies = [r["body"] for r in rows(40, seed=9, classes=("sport", "music", "food", "tech"))]
    explained = explain_texts(load_run(run), bodies)
    for row, line, e in zip(table, lines, explained, strict=True):
        assert row["prediction"] == line["prediction"] == e.label
        assert sorted(row["leaders"].split()) == sorted(e.words[i] for i in e.leaders)
        assert [float(row[f"p_{c}"]) for c in e.classes] == pytest.approx(e.probabilities, abs=1e-6)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(
        "\ufeffthe band played a new song\n\nthe team won the match\n".encode())))
    capsys.readouterr()
    assert main(["predict", "--run", str(run), "-"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("row,prediction,p_food,p_music,p_sport,p_tech") and len(out) == 3


@pytest.mark.parametrize("argv,message", [
    (["--text-column", "nope"], "no column 'nope'"),
    (["--out", "{tmp}/p.txt"], "write .csv or .jsonl"),
    (["--decisive", "-1"], "--decisive must be"),
    (["--batch", "0"], "--batch must be ≥ 1"),
    (["--out", "{tmp}/new.csv"], "is the input"),
    (["--out", "{tmp}/./sub/../new.csv"], "is the input"),
    (["--out", "{tmp}/link.csv"], "is the input"),
    (["--out", "{tmp}/hard.csv"], "is the input"),
])
def test_predict_refuses_with_one_line_and_writes_nothing(topic_run, tmp_path, capsys, argv, message):
    from test_data_tables import rows, write

    run, _ = topic_run
    records = rows(8, seed=3)
    texts = write(tmp_path / "new.csv", records)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to(texts)  # the input under other names: a symbolic and a hard link
    import os

    os.link(texts, tmp_path / "hard.csv")
    before = texts.read_bytes()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    out = ["--out", str(tmp_path / "p.csv")] if "--out" not in argv else []
    code = main(["predict", "--run", str(run), str(texts), "--text-column", "body", *out, *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in err[-1] and err[-1].startswith("hardmax predict: error: "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.csv", "link.csv", "new.csv", "sub"]  # nothing new
    assert texts.read_bytes() == before  # the input is never replaced


def test_the_explorer_reads_a_k_class_run(topic_run):
    from hardmax.explore.views import review_view
    from hardmax.training import load_run

    view = review_view(load_run(topic_run[0]), "the band played a new song on the album")
    assert view["classes"] == ["food", "music", "sport", "tech"] and view["label"] in view["classes"]
    assert 0 < view["probability"]["softmax"] <= 1 and 0 < view["probability"]["hardmax"] <= 1
    assert len(view["layer_logits"][0]) == len(view["words"])


def test_a_run_refuses_data_with_other_labels(topic_run, tmp_path, capsys):
    from test_data_tables import rows, write

    run, _ = topic_run
    renamed = [{**r, "topic": "food2" if r["topic"] == "food" else r["topic"]}  # the same texts, rows and words
               for r in rows(900, classes=("sport", "music", "food", "tech"))]
    other = write(tmp_path / "other.jsonl", renamed)
    assert main(["evaluate", "--run", str(run), "--data", str(other), "--threads", "1"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # (progress lines of the cleaning come before it)
    assert last.startswith("hardmax evaluate: error: ")
    assert last.endswith("was trained on the labels food, music, sport, tech; this data has food2, music, sport, tech")


def test_a_changed_table_is_refused(topic_run, tmp_path, capsys):
    import shutil

    run, table = topic_run
    changed = tmp_path / "changed.jsonl"
    shutil.copy(table, changed)
    with changed.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"body": "goal match team", "topic": "sport", "part": "train", "author": "x"}) + "\n")
    assert main(["evaluate", "--run", str(run), "--data", str(changed), "--threads", "1"]) == 2
    assert "is not the table" in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_review_figure_of_a_k_class_run(topic_run):
    from hardmax.explain import explain_text
    from hardmax.plots.sentiment import plot_review
    from hardmax.training import load_run

    loaded = load_run(topic_run[0])
    e = explain_text(loaded, "the band played a new song on the album")
    fig = plot_review(e, loaded.model, layers=(0, 8))
    assert f"P({e.label})" in fig._suptitle.get_text()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"{e.label} half-plane" in legend and "the runner-up class half-plane" in legend


def test_predict_texts_over_several_batches_is_one_batch(topic_run):
    from hardmax.explain import predict_texts
    from hardmax.training import load_run

    loaded = load_run(topic_run[0])
    texts = ["the band played a new song", "goal for the team today", "fresh bread and soup", "a laptop with code",
             "the match and the album"] * 3
    assert predict_texts(loaded, texts, batch_size=4) == predict_texts(loaded, texts, batch_size=64)


def test_a_crate_run_predicts_without_leaders(tmp_path, capsys):
    import csv

    from test_data_tables import rows, write

    table = write(tmp_path / "topics.csv", rows(300, classes=("sport", "music", "food")))
    run = tmp_path / "crate"
    assert main(["train", "--data", str(table), "--text-column", "body", "--label-column", "topic", "--run", str(run),
                 "--d", "4", "--epochs", "2", "--min-count", "1", "--stopwords", "none", "--layer", "crate",
                 "--select-on", "softmax", "--threads", "1"]) == 0
    out = tmp_path / "p.csv"
    assert main(["predict", "--run", str(run), str(table), "--text-column", "body", "--out", str(out)]) == 0
    table_rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(table_rows) == 300 and {r["prediction"] for r in table_rows} <= {"food", "music", "sport"}
    assert all(r["leaders"] == "" and r["decisive_leaders"] == "" for r in table_rows)
    probabilities = [sum(float(r[f"p_{c}"]) for c in ("food", "music", "sport")) for r in table_rows]
    assert probabilities == pytest.approx([1.0] * 300, abs=1e-5)


@pytest.mark.parametrize("batch", ["3", "64"])
def test_texts_empty_after_cleaning_get_an_empty_prediction_and_are_counted(topic_run, tmp_path, capsys, batch):
    """Issue #39 (6): the first text empty after cleaning stopped the whole file; now its row is empty, its
    probabilities NaN (JSON null), the others predicted as alone, and the count said on stderr."""
    import csv
    import math

    from test_data_tables import rows, write

    from hardmax.explain import predict_texts
    from hardmax.training import load_run

    run, _ = topic_run
    records = rows(10, seed=4, classes=("sport", "music", "food", "tech"))
    for i, text in ((0, "10/10"), (4, "!!!"), (5, "-- ?? --"), (9, "")):
        records[i]["body"] = text
    table = write(tmp_path / "t.csv", records)
    for out in ("p.csv", "p.jsonl"):
        assert main(["predict", "--run", str(run), str(table), "--text-column", "body", "--batch", batch,
                     "--out", str(tmp_path / out)]) == 0
        err = capsys.readouterr().err
        assert "4 text(s) empty after cleaning" in err and "predicted 6 texts" in err
    got = list(csv.DictReader((tmp_path / "p.csv").open(encoding="utf-8")))
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    alone = predict_texts(load_run(run), [r["body"] for i, r in enumerate(records) if i not in (0, 4, 5, 9)])
    kept = iter(alone)
    for i, (row, line) in enumerate(zip(got, lines, strict=True)):
        assert int(row["row"]) == line["row"] == i
        if i in (0, 4, 5, 9):
            assert row["prediction"] == line["prediction"] == "" and line["p_food"] is None
            assert math.isnan(float(row["p_food"])) and row["leaders"] == ""
        else:
            p = next(kept)
            assert row["prediction"] == line["prediction"] == p.label
            assert line["p_food"] == pytest.approx(p.probabilities["food"], abs=1e-6)
    only_empty = write(tmp_path / "e.csv", [{**records[0], "body": "..."}, {**records[1], "body": "1 2 3"}])
    assert main(["predict", "--run", str(run), str(only_empty), "--text-column", "body",
                 "--out", str(tmp_path / "e_out.csv")]) == 0
    assert [r["prediction"] for r in csv.DictReader((tmp_path / "e_out.csv").open())] == ["", ""]


def test_blank_input_lines_are_counted_and_fifos_stdin_and_folders_are_read_or_named(topic_run, tmp_path, capsys):
    """Issue #39 (6, 16): blank lines of a text file were dropped without a word; a FIFO, /dev/stdin or a folder
    given to predict was "no such file"."""
    import os
    import threading

    run, _ = topic_run
    text = "the band played a new song\n\n   \nthe team won the match\n"
    plain = tmp_path / "t.txt"
    plain.write_text(text, encoding="utf-8")
    assert main(["predict", "--run", str(run), str(plain), "--out", str(tmp_path / "a.csv")]) == 0
    assert "2 blank line(s) skipped" in capsys.readouterr().err
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(text, encoding="utf-8"))
    writer.start()
    assert main(["predict", "--run", str(run), str(fifo), "--out", str(tmp_path / "b.csv")]) == 0
    writer.join()
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()
    code = main(["predict", "--run", str(run), str(tmp_path), "--out", str(tmp_path / "c.csv")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "is a directory" in err[-1] and not (tmp_path / "c.csv").exists()


def test_sigterm_during_predict_leaves_no_temporary_file(topic_run, tmp_path):
    """Issue #39 (15): SIGTERM during `predict --out` left the temporary file (SIGINT cleaned up); now both do."""
    import signal
    import subprocess
    import sys
    import time

    run, _ = topic_run
    texts = tmp_path / "many.txt"
    texts.write_text("the band played a new song and the team won the match today\n" * 200_000, encoding="utf-8")
    out = tmp_path / "out" / "p.csv"
    out.parent.mkdir()
    for sig in (signal.SIGTERM, signal.SIGINT):
        child = subprocess.Popen([sys.executable, "-m", "hardmax", "predict", "--run", str(run), str(texts),
                                  "--out", str(out), "--batch", "512"], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not list(out.parent.iterdir()) and time.monotonic() < deadline:  # until the temporary file exists
            time.sleep(0.05)
        assert list(out.parent.iterdir()), "the writer never started"
        child.send_signal(sig)
        err = child.communicate(timeout=120)[1]
        assert child.returncode == (143 if sig == signal.SIGTERM else 130), err
        assert list(out.parent.iterdir()) == [] and "Traceback" not in err  # nothing left, nothing half-written
