"""Smoke tests of the sentiment commands (`hardmax train / evaluate / explain / reproduce`), in-process.

Every run reads a small generated aclImdb archive (made-up sentences of sentiment and neutral words,
no IMDb text) and writes into tmp_path; $HARDMAX_CACHE points into tmp_path too. One tiny training
run (d = 2, 2 epochs) is shared by the tests that only read it. Bad input must give exit code 2 and
a readable last line on stderr, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hardmax.cli import main
from hardmax.experiments.pipeline import DimensionResult

POSITIVE = ["great", "wonderful", "brilliant", "superb", "delightful"]
NEGATIVE = ["awful", "boring", "terrible", "dreadful", "tedious"]
NEUTRAL = ["film", "plot", "actor", "scene", "story", "camera", "music", "director", "ending", "character",
           "dialogue", "script", "cast", "screen", "studio", "sequel", "budget", "cinema", "theatre", "costume"]
REVIEWS_PER_CLASS = 60  # per split: 108 train + 12 validation, 120 test
LAYERS = 8  # the CLI's default K


def review_text(rng: np.random.Generator, label: str, extra: tuple[str, ...] = ()) -> str:
    """A made-up review: 12-23 neutral words, 2-4 words of its polarity, sometimes one of the other,
    stop words and punctuation around them (12 to 28 tokens after cleaning)."""
    own, other = (POSITIVE, NEGATIVE) if label == "pos" else (NEGATIVE, POSITIVE)
    words = [*rng.choice(NEUTRAL + list(extra), size=rng.integers(12, 24)), *rng.choice(own, size=rng.integers(2, 5))]
    if rng.random() < 0.15:
        words.append(rng.choice(other))
    words = [str(w) for w in rng.permutation(words)]
    return "The " + " ".join(words[:6]) + ". It was " + " and ".join(words[6:]) + "!<br /><br />"


def write_archive(path: Path, *, n: int = REVIEWS_PER_CLASS, seed: int = 0, extra: tuple[str, ...] = (),
                  text=review_text) -> Path:
    """aclImdb/{train,test}/{pos,neg}/ID_RATING.txt in a .tar.gz, n reviews per label and split."""
    rng = np.random.default_rng(seed)
    with tarfile.open(path, "w:gz") as archive:
        for split in ("train", "test"):
            for label in ("pos", "neg"):
                for i in range(n):
                    rating = int(rng.integers(7, 11) if label == "pos" else rng.integers(1, 5))
                    raw = text(rng, label, extra).encode()
                    info = tarfile.TarInfo(f"aclImdb/{split}/{label}/{i}_{rating}.txt")
                    info.size = len(raw)
                    archive.addfile(info, io.BytesIO(raw))
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _best_line(out: str) -> str:
    return next(line.split(";")[0] for line in out.splitlines() if line.startswith("best epoch"))


def _last_line(err: str) -> str:
    """The error line: progress bars may come before it on stderr."""
    return err.strip().splitlines()[-1] if err.strip() else ""


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.one_thread


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """No test reads $HARDMAX_IMDB or writes to ~/.cache; the module shares one preprocessed cache."""
    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(cache_dir))


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    return write_archive(tmp_path_factory.mktemp("data") / "imdb.tar.gz")


TRAIN_ARGS = ("--d", "2", "--epochs", "2", "--min-count", "2", "--batch-size", "16")


@pytest.fixture(scope="module")
def trained(archive, cache_dir, tmp_path_factory) -> tuple[Path, int, str]:
    """(run directory, exit code, stdout) of one `hardmax train`, shared by the tests that read it."""
    run = tmp_path_factory.mktemp("runs") / "d2"
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.delenv("HARDMAX_IMDB", raising=False)
        mp.setenv("HARDMAX_CACHE", str(cache_dir))
        code = main(["train", "--run", str(run), "--data", str(archive), *TRAIN_ARGS])
    assert code == 0, err.getvalue()
    return run, code, out.getvalue()


# --------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------


def test_train_writes_a_run_directory(trained):
    run, _, out = trained
    for name in ("config.json", "history.json", "model.safetensors", "vocab.json", "checkpoint.safetensors"):
        assert (run / name).is_file(), name
    history = json.loads((run / "history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2]
    best = max(history, key=lambda h: h["val_accuracy_hardmax"])  # the first of equals wins
    assert f"best epoch {best['epoch']}: validation accuracy (hardmax) {best['val_accuracy_hardmax']:.4f}" in out
    record = json.loads((run / "config.json").read_text())
    assert record["model"]["d"] == 2 and record["model"]["layers"] == LAYERS
    assert record["data"]["truncation"] == "head_tail" and record["data"]["train"] == 108
    assert record["train"]["word_dropout"] == 0.3 and record["train"]["epochs"] == 2
    vocab = json.loads((run / "vocab.json").read_text())
    assert len(vocab["words"]) == record["model"]["vocab_size"] and {"great", "awful"} <= set(vocab["words"])


def test_resume_of_a_finished_run(trained, archive, tmp_path, capsys):
    run = Path(shutil.copytree(trained[0], tmp_path / "copy"))
    history = (run / "history.json").read_text()
    code, out, err = _run(capsys, "train", "--run", str(run), "--data", str(archive), *TRAIN_ARGS, "--resume")
    assert code == 0, err
    assert _best_line(out) == _best_line(trained[2])  # the same best epoch and accuracy
    assert (run / "history.json").read_text() == history  # nothing trained


def test_training_into_a_run_without_resume_exits_2(trained, archive, capsys):
    run = trained[0]
    config = (run / "config.json").read_text()
    code, out, err = _run(capsys, "train", "--run", str(run), "--data", str(archive), *TRAIN_ARGS)
    assert code == 2 and out == ""
    line = _last_line(err)
    assert line.startswith("hardmax train: error:") and "already holds a run" in line and "--resume" in line
    assert "resume=True" not in line  # the user's words: the option, not the library's argument
    assert "Traceback" not in err
    assert (run / "config.json").read_text() == config


def test_resume_with_other_settings_exits_2(trained, archive, tmp_path, capsys):
    run = Path(shutil.copytree(trained[0], tmp_path / "copy"))
    code, _, err = _run(capsys, "train", "--run", str(run), "--data", str(archive), *TRAIN_ARGS, "--resume",
                        "--d", "3")  # the last --d wins
    assert code == 2 and "settings differ" in _last_line(err) and "model.d: saved 2, now 3" in _last_line(err)


def test_resume_of_nothing_exits_2(archive, tmp_path, capsys):
    code, _, err = _run(capsys, "train", "--run", str(tmp_path / "new"), "--data", str(archive), *TRAIN_ARGS,
                        "--resume")
    assert code == 2 and "nothing to resume" in _last_line(err)


def test_a_run_that_stopped_before_its_first_checkpoint_can_be_trained_again(archive, tmp_path, capsys):
    # The reliability pass: a train that failed before its first checkpoint left config.json + vocab.json
    # that refused every retry ("already holds a run"), and --resume read all the reviews before saying
    # there was nothing to resume.
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "vocab.json").write_text("{}")
    code, _, err = _run(capsys, "train", "--run", str(run), "--data", str(tmp_path / "absent.tar.gz"), "--resume")
    assert code == 2 and "nothing to resume" in err and "stopped before its first checkpoint" in err
    assert "absent.tar.gz" not in err  # refused before the data are looked for
    code, out, err = _run(capsys, "train", "--run", str(run), "--data", str(archive), *TRAIN_ARGS)
    assert code == 0, err
    assert (run / "model.safetensors").is_file() and json.loads((run / "config.json").read_text())["model"]["d"] == 2


def test_train_without_validation_is_refused_or_works(archive, tmp_path, capsys):
    code, _, err = _run(capsys, "train", "--run", str(tmp_path / "run"), "--data", str(archive), *TRAIN_ARGS,
                        "--val-fraction", "0")
    assert code == 0 or (code == 2 and "valid" in _last_line(err))


# --------------------------------------------------------------------------------------------
# evaluate
# --------------------------------------------------------------------------------------------


def test_evaluate_prints_the_table_and_writes_metrics(trained, archive, capsys):
    run = trained[0]
    code, out, err = _run(capsys, "evaluate", "--run", str(run), "--data", str(archive))
    assert code == 0, err
    metrics = json.loads((run / "metrics_test.json").read_text())
    evaluation, leaders = metrics["evaluation"], metrics["leaders"]
    lines = out.splitlines()
    assert lines[0] == "test set, 120 reviews, d = 2"
    assert lines[1:3] == ["| attention | accuracy | macro-F1 | loss |", "|---|---|---|---|"]
    assert lines[3] == (f"| hardmax (exact) | {evaluation['accuracy_hardmax']:.4f} | "
                        f"{evaluation['macro_f1_hardmax']:.4f} | {evaluation['loss_hardmax']:.4f} |")
    assert lines[4] == (f"| softmax (β = 1000) | {evaluation['accuracy_softmax']:.4f} | "
                        f"{evaluation['macro_f1_softmax']:.4f} | {evaluation['loss_softmax']:.4f} |")
    assert lines[5].startswith(f"agreement {100 * evaluation['agreement']:.2f} %")
    assert lines[6].startswith(f"leaders per review: mean {leaders['mean']:.2f}")
    assert evaluation["n"] == 120 and leaders["n_reviews"] == 120 and leaders["per_review"] is None
    for key in ("accuracy_hardmax", "accuracy_softmax", "agreement", "fraction_initial"):
        value = evaluation.get(key, leaders.get(key))
        assert 0.0 <= value <= 1.0, key
    assert 1 <= leaders["min"] <= leaders["mean"] <= leaders["max"]
    # Progress goes to stderr as plain lines when stderr is not a terminal: no carriage returns in a log.
    assert "\r" not in err and "leaders: " in err and "metrics_test.json" in err


def test_evaluate_on_validation(trained, archive, capsys):
    code, out, err = _run(capsys, "evaluate", "--run", str(trained[0]), "--data", str(archive), "--on", "val")
    assert code == 0, err
    assert out.startswith("val set, 12 reviews") and (trained[0] / "metrics_val.json").is_file()


def test_evaluate_on_data_with_another_vocabulary_exits_2(trained, tmp_path, capsys):
    other = write_archive(tmp_path / "other.tar.gz", extra=("orchestra", "popcorn", "ticket"))
    code, _, err = _run(capsys, "evaluate", "--run", str(trained[0]), "--data", str(other))
    assert code == 2 and "vocabulary" in _last_line(err) and "Traceback" not in err
    # as many words, in another order (other counts): ids would mean other words, so it is refused too
    reordered = write_archive(tmp_path / "reordered.tar.gz", n=80, seed=1)
    code, _, err = _run(capsys, "evaluate", "--run", str(trained[0]), "--data", str(reordered))
    assert code == 2 and "vocabulary" in _last_line(err) and "Traceback" not in err


# --------------------------------------------------------------------------------------------
# explain
# --------------------------------------------------------------------------------------------


def test_explain_prints_leaders_and_writes_figures(trained, tmp_path, capsys):
    out_dir = tmp_path / "explain"
    code, out, err = _run(capsys, "explain", "a great wonderful film", "--run", str(trained[0]),
                          "--out", str(out_dir), "--gif")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(("prediction: positive", "prediction: negative")) and "P(positive) = " in lines[0]
    assert " leader(s) among 3 distinct words:" in lines[1]  # "a" is a stop word
    stars = [line for line in lines[2:] if line.lstrip().startswith("★")]
    assert stars and len(stars) == int(lines[1].split()[0])
    assert all(any(w in s for w in ("great", "wonderful", "film")) for s in stars)
    assert sorted(p.name for p in out_dir.iterdir()) == ["review.gif", "review.pdf", "review.png"]
    with Image.open(out_dir / "review.gif") as gif:
        assert gif.n_frames == LAYERS + 1
    assert "figures:" in err


def test_explain_text_and_texts_are_what_the_command_prints(trained, tmp_path, capsys):
    from hardmax.explain import explain_text, explain_texts
    from hardmax.training import load_run

    run = load_run(trained[0])
    texts = ["a great wonderful film", "Boring, awful plot.", "great great boring film, dreadful"]
    many = explain_texts(run, texts, batch_size=2)
    for text, explanation in zip(texts, many, strict=True):
        assert explanation.to_dict() == explain_text(run, text).to_dict()
        code, out, err = _run(capsys, "explain", text, "--run", str(trained[0]), "--out", str(tmp_path / "x"))
        assert code == 0, err
        assert out.strip() == explanation.summary()
    with pytest.raises(ValueError, match="text 1 'the and of' is empty after cleaning"):
        explain_texts(run, ["great film", "the and of"])
    with pytest.raises(ValueError, match="sequence of texts"):
        explain_texts(run, "great film")


def test_a_paper_padding_run_explains_each_text_on_its_real_words(archive, tmp_path, capsys):
    from hardmax.explain import explain_ids, explain_texts
    from hardmax.training import load_run

    code, _, err = _run(capsys, "train", "--run", str(tmp_path / "pp"), "--data", str(archive), *TRAIN_ARGS,
                        "--epochs", "1", "--paper-padding")
    assert code == 0, err
    run = load_run(tmp_path / "pp")
    texts = ["a great film", "boring awful plot, dreadful ending and a tedious script"]
    from hardmax.data import encode_texts

    encoded = encode_texts(texts, run.vocab, max_len=run.data_config.max_len, truncation=run.data_config.truncation,
                           **run.data_config.clean_options())
    for explanation, ids, real in zip(explain_texts(run, texts), encoded.ids, encoded.mask, strict=True):
        alone = explain_ids(run.model, ids[real], list(run.vocab.words))
        assert explanation.to_dict() == alone.to_dict() and "<pad>" not in explanation.words


def test_explain_defaults_to_the_run_directory_without_gif(trained, tmp_path, capsys):
    run = Path(shutil.copytree(trained[0], tmp_path / "copy"))
    code, _, err = _run(capsys, "explain", "Boring, awful plot.", "--run", str(run))
    assert code == 0, err
    assert sorted(p.name for p in (run / "explain").iterdir()) == ["review.pdf", "review.png"]


def test_explain_text_empty_after_cleaning_exits_2(trained, tmp_path, capsys):
    code, out, err = _run(capsys, "explain", "the and of", "--run", str(trained[0]), "--out", str(tmp_path / "x"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "empty after cleaning" in err and "'the and of'" in err
    assert not (tmp_path / "x").exists()


def test_explain_and_svm_refuse_a_crate_run_in_one_line(archive, tmp_path, capsys):
    # The reliability pass: both ended in "'CrateTrace' object has no attribute 'A'" (svm after all its work).
    run = tmp_path / "crate"
    code, _, err = _run(capsys, "train", "--run", str(run), "--data", str(archive), "--layer", "crate",
                        "--d", "4", "--epochs", "1", "--min-count", "2", "--batch-size", "16")
    assert code == 0, err
    code, out, err = _run(capsys, "explain", "a great film", "--run", str(run), "--out", str(tmp_path / "x"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "is a CRATE run" in err and "hardmax evaluate" in err
    assert not (tmp_path / "x").exists()
    code, out, err = _run(capsys, "svm", "--imdb-run", str(run), "--data", str(archive), "--seeds", "2",
                          "--iterations", "10", "--no-figures", "--out", str(tmp_path / "svm"))
    assert code == 2 and err.count("\n") == 1 and "--layer crate" in err and "Traceback" not in err
    assert not (tmp_path / "svm").exists()


def test_train_layer_crate_with_heads_records_and_reloads(archive, tmp_path, capsys):
    import torch

    from hardmax.io import load_tensors, save_tensors, write_json
    from hardmax.models import CrateBlocks, ModelConfig
    from hardmax.training import load_run

    run = tmp_path / "crate"
    code, _, err = _run(capsys, "train", "--run", str(run), "--data", str(archive), "--layer", "crate",
                        "--crate-heads", "2", "--d", "4", "--layers", "2", "--epochs", "1", "--min-count", "2",
                        "--batch-size", "16")
    assert code == 0, err
    record = json.loads((run / "config.json").read_text())["model"]
    assert record["crate"]["heads"] == 2 and record["crate"]["mode"] == "reference" and "crate_heads" not in record
    loaded = load_run(run)
    assert loaded.model_config.blocks == CrateBlocks(heads=2, mode="reference") and loaded.model_config.layers == 2
    assert loaded.model.blocks[0].subspaces.shape == (2, 4, 2)
    assert ModelConfig.from_record(record) == loaded.model_config
    code, out, err = _run(capsys, "evaluate", "--run", str(run), "--data", str(archive))
    assert code == 0 and "CRATE blocks" in out, err
    metrics = json.loads((run / "metrics_test.json").read_text())["evaluation"]
    # the same run as an earlier version wrote it ({"layer": "crate", "crate_heads": 2}) reads the same
    tensors, meta = load_tensors(run / "model.safetensors")
    old = {k: v for k, v in record.items() if k != "crate"} | {"layer": "crate", "crate_heads": 2}
    full = json.loads((run / "config.json").read_text()) | {"model": old}
    write_json(run / "config.json", full)
    save_tensors(run / "model.safetensors", tensors, meta | {"config": full})
    again = load_run(run)
    assert again.model_config == loaded.model_config
    assert all(torch.equal(again.model.state_dict()[k], v) for k, v in loaded.model.state_dict().items())
    code, out, err = _run(capsys, "evaluate", "--run", str(run), "--data", str(archive))
    assert code == 0 and "CRATE blocks" in out, err
    again_metrics = json.loads((run / "metrics_test.json").read_text())["evaluation"]
    for key in ("accuracy_softmax", "accuracy_hardmax"):
        assert again_metrics[key] == metrics[key]


def test_explain_missing_run_exits_2(tmp_path, capsys):
    missing = tmp_path / "no-such-run"
    code, _, err = _run(capsys, "explain", "a great film", "--run", str(missing))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("hardmax explain: error:") and str(missing) in err and "does not exist" in err


# --------------------------------------------------------------------------------------------
# reproduce
# --------------------------------------------------------------------------------------------

TIMINGS = ("seconds_hardmax", "seconds_softmax", "hardmax_test_seconds")


def _without_timings(result: dict) -> dict:
    out = {k: v for k, v in result.items() if k not in TIMINGS}
    out["test"] = {k: v for k, v in result["test"].items() if k not in TIMINGS}
    return out


@pytest.mark.slow
def test_reproduce_quick_writes_the_report_and_reuses_finished_runs(archive, tmp_path, capsys):
    runs, report = tmp_path / "runs", tmp_path / "report"
    argv = ["reproduce", "--quick", "--data", str(archive), "--dims", "2", "--epochs", "1",
            "--out", str(runs), "--report-dir", str(report)]
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert f"wrote {report / 'results.md'} and results.json (1 dimensions)" in out
    results = json.loads((report / "results.json").read_text())
    assert set(results) == {"label", "command", "seconds_total", "machine", "data", "train_config", "candidates",
                            "results", "benchmarks", "benchmarks_link", "report_dir"}
    assert results["report_dir"] is None  # an absolute directory is the user's own: not recorded
    assert results["benchmarks"] == {}  # no benchmark output in this report directory
    assert results["candidates"] == {"lrs": [0.01], "stopwords": ["nltk"]} and "lr" not in results["train_config"]
    assert results["label"] == "quick" and results["command"] == "hardmax reproduce --quick"
    assert results["train_config"]["epochs"] == 1 and results["train_config"]["device"] == "cpu"
    assert results["data"]["train"] == 108 and results["data"]["test"] == 120 and results["data"]["min_count"] == 2
    assert list(results["results"]) == ["2"]
    r = results["results"]["2"]
    assert set(r) == set(DimensionResult.__dataclass_fields__)
    assert r["d"] == 2 and r["best_epoch"] == 1 and r["epochs_run"] == 1 and r["test"]["n"] == 120
    assert set(r["top_leader_words"]) == {"positive", "negative"}
    assert {Path(f).name for f in r["figures"]} == {"leader_words_d2.png", "leader_words_d2.pdf",
                                                    "review_d2.png", "review_d2.pdf", "review_d2.gif"}
    assert all((report / f).is_file() for f in r["figures"])
    assert {"config.json", "history.json", "model.safetensors", "vocab.json", "done.json"} <= \
        {p.name for p in (runs / "d2").iterdir()}
    md = (report / "results.md").read_text()
    assert md.startswith("# Sentiment analysis on IMDb: reproduced results (quick run)")
    assert f"| 2 | {r['test']['accuracy_hardmax']:.4f}" in md and "![d = 2: review_d2](figures/review_d2.gif)" in md

    # A second run finds the finished run, says so, trains nothing again and gets the same numbers.
    stamps = {p.name: p.stat().st_mtime_ns for p in (runs / "d2").iterdir()}
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert f"d = 2: reused the finished run (same settings and data; delete the directory to retrain) in " \
           f"{runs / 'd2'}/" in out
    assert {p.name: p.stat().st_mtime_ns for p in (runs / "d2").iterdir()} == stamps
    again = json.loads((report / "results.json").read_text())["results"]["2"]
    assert r["candidates_reused"] == 0 and again["candidates_reused"] == 1 == again["candidates"]
    assert again["candidates_training_seconds"] == r["candidates_training_seconds"] > 0  # from the history
    assert _without_timings({**again, "candidates_reused": 0}) == _without_timings(r)
    assert "reusing 1 of 1 candidate runs that an earlier call trained" in (report / "results.md").read_text()


def test_reproduce_chooses_stop_words_and_learning_rate_on_validation(archive, tmp_path, capsys):
    runs, report = tmp_path / "runs", tmp_path / "report"
    argv = ["reproduce", "--quick", "--data", str(archive), "--dims", "2", "--epochs", "2", "--lrs", "0.03,0.001",
            "--stopwords", "nltk,none", "--out", str(runs), "--report-dir", str(report)]
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    r = json.loads((report / "results.json").read_text())["results"]["2"]
    grid = r["grid"]
    assert list(grid) == ["nltk / 0.03", "nltk / 0.001", "none / 0.03", "none / 0.001"]
    assert grid[f"{r['stopwords']} / {r['lr']:g}"] == max(grid.values()) == r["val_accuracy_hardmax"]
    for name, val in grid.items():  # each candidate is a run of its own, with its own history and data
        stop, lr = name.split(" / ")
        config = json.loads((runs / "candidates" / f"d2-{stop}-lr{lr}" / "config.json").read_text())
        assert config["data"]["stopwords"] == stop and config["train"]["lr"] == float(lr)
        history = json.loads((runs / "candidates" / f"d2-{stop}-lr{lr}" / "history.json").read_text())
        assert max(h["val_accuracy_hardmax"] for h in history) == val
    # The chosen candidate is copied to runs/d2, which is then a complete run of those settings.
    chosen = json.loads((runs / "d2" / "config.json").read_text())
    assert chosen["train"]["lr"] == r["lr"] and chosen["data"]["stopwords"] == r["stopwords"]
    assert chosen["data"]["vocab_size"] == r["vocab_size"] and r["run_dir"] == str(runs / "d2")
    assert (runs / "d2" / "model.safetensors").read_bytes() == \
        (runs / "candidates" / f"d2-{r['stopwords']}-lr{r['lr']:g}" / "model.safetensors").read_bytes()
    assert not any(p.name.startswith(".") for p in runs.iterdir())  # no staging directory left
    md = (report / "results.md").read_text()
    assert "stop-word list chosen per d on validation among nltk, none" in md
    assert ("| d | validation: nltk / 0.03 | validation: nltk / 0.001 | validation: none / 0.03 | "
            "validation: none / 0.001 | chosen |") in md
    assert f"| 2 | {' | '.join(f'{v:.4f}' for v in grid.values())} | {r['stopwords']} / {r['lr']:g} |" in md
    # `explain` on the chosen run cleans text with the chosen list.
    assert _run(capsys, "explain", "the and of", "--run", str(runs / "d2"), "--out", str(tmp_path / "ex"))[0] == \
        (0 if r["stopwords"] == "none" else 2)
    # A rerun trains nothing and chooses the same.
    stamps = {p.name: p.stat().st_mtime_ns for p in (runs / "candidates").rglob("*")}
    assert _run(capsys, *argv)[0] == 0
    assert {p.name: p.stat().st_mtime_ns for p in (runs / "candidates").rglob("*")} == stamps
    again = json.loads((report / "results.json").read_text())["results"]["2"]
    assert (again["lr"], again["stopwords"]) == (r["lr"], r["stopwords"])


def test_reproduce_does_not_reuse_a_run_trained_on_other_data(archive, tmp_path, capsys):
    runs, report = tmp_path / "runs", tmp_path / "report"
    argv = ["reproduce", "--quick", "--dims", "2", "--epochs", "1", "--out", str(runs), "--report-dir", str(report)]
    assert _run(capsys, *argv, "--data", str(archive))[0] == 0
    other = write_archive(tmp_path / "other.tar.gz", n=80, seed=1)  # the same 30 words, other counts
    code, _, err = _run(capsys, *argv, "--data", str(other))
    run_data = json.loads((runs / "d2" / "config.json").read_text())["data"]
    assert code == 2 or run_data["train"] == json.loads((report / "results.json").read_text())["data"]["train"]


def _short_review(rng: np.random.Generator, label: str, extra: tuple[str, ...] = ()) -> str:
    own = POSITIVE if label == "pos" else NEGATIVE
    return " ".join(str(w) for w in [*rng.choice(own, size=2), *rng.choice(NEUTRAL, size=4)])


def test_reproduce_with_only_short_reviews(tmp_path, capsys):
    archive = write_archive(tmp_path / "short.tar.gz", n=20, text=_short_review)
    code, _, err = _run(capsys, "reproduce", "--quick", "--data", str(archive), "--dims", "2", "--epochs", "1",
                        "--out", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "report"))
    assert code == 0, err


# --------------------------------------------------------------------------------------------
# Bad arguments.
# --------------------------------------------------------------------------------------------

BAD = {
    "dims not integers": (["reproduce", "--dims", "a,b"], "--dims must be comma-separated integers, got 'a,b'"),
    "dims not positive": (["reproduce", "--dims", "2,0"], "dims must be positive integers"),
    "lrs not numbers": (["reproduce", "--lrs", "fast"], "--lrs must be comma-separated numbers, got 'fast'"),
    "lrs repeated": (["reproduce", "--lrs", "0.01,0.01"], "lrs must be distinct positive learning rates"),
    "unknown stop words": (["reproduce", "--stopwords", "nltk,spacy"], "stopwords must be distinct lists among"),
    "unknown split": (["train", "--run", "RUN", "--split", "random"], "argument --split: invalid choice: 'random'"),
    "unknown truncation": (["train", "--run", "RUN", "--truncation", "middle"], "argument --truncation"),
    "train without --run": (["train", "--d", "2"], "the following arguments are required: --run"),
    "evaluate --on test2": (["evaluate", "--run", "RUN", "--on", "test2"], "argument --on: invalid choice"),
    "explain without text": (["explain", "--run", "RUN"], "the following arguments are required: text"),
    "d not an integer": (["train", "--run", "RUN", "--d", "two"], "argument --d: invalid int value: 'two'"),
    # Issue #23, items 5 and 18: every option checked before any data is read or anything allocated.
    "reproduce --layers 0": (["reproduce", "--layers", "0"], "--layers must be ≥ 1"),
    "reproduce --beta nan": (["reproduce", "--beta", "nan"], "--beta must be finite and > 0"),
    "reproduce --decisive nan": (["reproduce", "--decisive", "nan"], "--decisive must be a finite number ≥ 0"),
    "reproduce --example-review -1": (["reproduce", "--example-review", "-1"], "--example-review must be a test row"),
    "reproduce --dims huge": (["reproduce", "--dims", "2,100000000"], "--dims 100000000 --layers 8"),
    "explain --decisive -1": (["explain", "good", "--run", "RUN", "--decisive", "-1"], "--decisive must be a finite"),
    "explain --decisive nan": (["explain", "good", "--run", "RUN", "--decisive", "nan"], "--decisive must be"),
    "train --A-eps nan": (["train", "--run", "RUN", "--A-eps", "nan"], "--A-eps must be finite and > 0"),
    "train --d huge": (["train", "--run", "RUN", "--d", "100000000"], "--d 100000000 --layers 8"),
    "train --layers huge": (["train", "--run", "RUN", "--layers", "100000000"], "--layers 100000000 --batch-size"),
    "train --max-len huge": (["train", "--run", "RUN", "--max-len", "100000000000"], "--max-len 100000000000"),
    "train --batch-size huge": (["train", "--run", "RUN", "--batch-size", "100000000000"], "needs about"),
    "train --max-vocab huge": (["train", "--run", "RUN", "--max-vocab", "100000000000"], "needs about"),
    # Issue #24: CRATE's settings are refused where they do not apply, naming the option.
    "train --crate-heads without crate": (["train", "--run", "RUN", "--crate-heads", "2"],
                                          "--crate-heads applies to --layer crate only"),
    "train --crate-heads 3": (["train", "--run", "RUN", "--layer", "crate", "--crate-heads", "3"],
                              "--crate-heads must divide d = 16, got 3\n"),
    "train --crate-heads 0": (["train", "--run", "RUN", "--layer", "crate", "--crate-heads", "0"],
                              "--crate-heads must be an integer ≥ 1, got 0"),
    "train crate --learn-A": (["train", "--run", "RUN", "--layer", "crate", "--learn-A"],
                              "--learn-A applies to the paper's hardmax layer only, not to CRATE blocks"),
    "train crate --paper-padding": (["train", "--run", "RUN", "--layer", "crate", "--paper-padding"],
                                    "--paper-padding applies to the paper's hardmax layer only"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_exit_2_with_one_line(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a command that got past its arguments would write runs/ here
    monkeypatch.setenv("HARDMAX_IMDB", str(tmp_path / "no-data.tar.gz"))  # an option checked late meets this
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "4G")
    argv, message = BAD[case]
    code, out, err = _run(capsys, *[str(tmp_path / "run") if a == "RUN" else a for a in argv])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_bad_word_dropout_exits_2(archive, tmp_path, capsys):
    code, _, err = _run(capsys, "train", "--run", str(tmp_path / "run"), "--data", str(archive),
                        "--word-dropout", "1.0")
    assert code == 2 and "--word-dropout must be in [0, 1), got 1.0" in err and err.count("\n") == 1


def test_stopwords_choices_are_the_libraries_lists():
    """The CLI names the lists itself (importing hardmax.data would slow every `hardmax --help`)."""
    from hardmax.cli.app import build_parser
    from hardmax.data import STOP_LISTS

    sub = build_parser()._subparsers._group_actions[0].choices["train"]
    action = next(a for a in sub._actions if "--stopwords" in a.option_strings)
    assert sorted(action.choices) == sorted(STOP_LISTS)


# --------------------------------------------------------------------------------------------
# predict (issue #39, items 6, 7, 16: the variants)
# --------------------------------------------------------------------------------------------


def _predict_in_child(run: Path, source: str, out: Path, stdin_path: Path, *extra: str):
    """`hardmax predict` in a child process whose standard input is the file `stdin_path` (as `< file` gives it)."""
    import subprocess
    import sys

    with stdin_path.open("rb") as stdin:
        return subprocess.run([sys.executable, "-m", "hardmax", "predict", "--run", str(run), source, "--out",
                               str(out), "--threads", "1", *extra], stdin=stdin, capture_output=True, text=True,
                              timeout=300)


def test_predict_refuses_standard_input_that_is_its_output(trained, tmp_path, capsys, monkeypatch):
    """Issue #39 (7): `hardmax predict - --out t.csv < t.csv` replaced the input with the predictions: "-" was never
    compared with --out (nor /dev/stdin, when the shell gives it the output file)."""
    run, _, _ = trained
    table = tmp_path / "t.csv"
    table.write_text("text\nA great film, wonderful cast\nBoring and tedious\n", encoding="utf-8")
    before = table.read_bytes()
    with table.open("rb") as handle:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(handle))
        code, out, err = _run(capsys, "predict", "--run", str(run), "-", "--out", str(table))
    assert code == 2 and out == "" and "is the input (standard input)" in _last_line(err)
    assert table.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
    child = _predict_in_child(run, "/dev/stdin", table, table)
    assert child.returncode == 2 and "is the input /dev/stdin" in _last_line(child.stderr), child.stderr
    assert table.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.mark.slow
def test_predict_reads_a_table_or_text_given_as_dev_stdin(trained, tmp_path, capsys):
    """Issue #39 (16): /dev/stdin fed a table by the shell (`< t.csv`) was "unknown table format ''": the format is
    now that of the file behind the name; a text file or a pipe is read as lines."""
    run, _, _ = trained
    table = tmp_path / "t.csv"
    table.write_text("id,text\n1,A great film and a wonderful cast\n2,Boring and tedious\n", encoding="utf-8")
    code, _, _ = _run(capsys, "predict", "--run", str(run), str(table), "--out", str(tmp_path / "direct.csv"))
    assert code == 0
    child = _predict_in_child(run, "/dev/stdin", tmp_path / "via.csv", table)
    assert child.returncode == 0, child.stderr
    assert (tmp_path / "via.csv").read_text() == (tmp_path / "direct.csv").read_text()
    lines = tmp_path / "t.txt"
    lines.write_text("A great film and a wonderful cast\nBoring and tedious\n", encoding="utf-8")
    child = _predict_in_child(run, "/dev/stdin", tmp_path / "lines.csv", lines)
    assert child.returncode == 0, child.stderr
    assert (tmp_path / "lines.csv").read_text() == (tmp_path / "direct.csv").read_text()
    unknown = tmp_path / "texts"  # a regular file whose name says no format
    unknown.write_text("A great film\n", encoding="utf-8")
    code, _, err = _run(capsys, "predict", "--run", str(run), str(unknown), "--out", str(tmp_path / "u.csv"))
    assert code == 2 and "unknown format ''; known: .txt (one text per line)" in _last_line(err)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_predict_counts_the_blank_lines_of_a_table(trained, tmp_path, capsys, suffix):
    """Issue #39 (6): blank lines between a table's records were dropped without a word (a text file's were
    counted); now they are counted on stderr too, and every record keeps its row (an empty text, "" or spaces in
    a table of one column, gets an empty prediction)."""
    run, _, _ = trained
    if suffix == ".csv":  # one column: each line is a record, but for lines that hold no field at all
        body = 'text\n"A great film"\n""\n\n   \n\nBoring and tedious\n!!!\n\n'
        blank, empty = 3, [1, 2, 4]
    else:
        body = '{"text": "A great film"}\n{"text": ""}\n\n   \n{"text": "Boring and tedious"}\n{"text": "!!!"}\n\n'
        blank, empty = 3, [1, 3]
    table = tmp_path / f"t{suffix}"
    table.write_text(body, encoding="utf-8")
    code, _, err = _run(capsys, "predict", "--run", str(run), str(table), "--out", str(tmp_path / "p.csv"))
    assert code == 0 and f"{blank} blank line(s) skipped" in err, err
    assert f"{len(empty)} text(s) empty after cleaning" in err, err
    import csv

    got = list(csv.DictReader((tmp_path / "p.csv").open(encoding="utf-8")))
    assert [int(r["row"]) for r in got] == list(range(len(got)))
    assert [i for i, r in enumerate(got) if r["prediction"] == ""] == empty


def test_two_hundred_classes_train_twice_and_evaluate_through_the_cache(tmp_path, capsys):
    """Issue #39 (1): with labels cached as int8, a 200-class table's second `train` said "the training labels reach
    class 127, but the model has 200 classes" and `evaluate` ended in a bincount traceback."""
    import csv

    table = tmp_path / "many.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["body", "topic"])
        for i in range(2000):
            word = chr(97 + i % 200 // 26) + chr(97 + i % 26)  # letters only: cleaning keeps them
            writer.writerow([f"word{word} filler{chr(97 + i % 7)}", f"c{i % 200:03d}"])
    common = ("--data", str(table), "--text-column", "body", "--label-column", "topic", "--d", "2", "--epochs", "1",
              "--min-count", "1", "--stopwords", "none", "--threads", "1")
    for name in ("first", "second"):  # the second reads the cache the first wrote
        code, _, err = _run(capsys, "train", "--run", str(tmp_path / name), *common)
        assert code == 0, _last_line(err)
    code, out, err = _run(capsys, "evaluate", "--run", str(tmp_path / "second"), "--threads", "1")
    assert code == 0 and "Traceback" not in err, _last_line(err)
    record = json.loads((tmp_path / "second" / "config.json").read_text())
    assert record["model"]["classes"] == 200 and record["data"]["label_names"][199] == "c199"


def test_evaluate_checks_the_table_by_the_bytes_it_parsed(tmp_path, capsys, monkeypatch):
    """Issue #39 (8): evaluate compared the run's table_sha256 with a second read of the file (`file_sha256`), which
    a file rewritten in between could pass while the rows came from other bytes; now with the SHA-256 of the one
    read the rows were parsed from."""
    import csv

    import hardmax.data.splits

    table = tmp_path / "t.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["body", "topic"])
        for i in range(200):
            writer.writerow([f"{['goal match', 'song band'][i % 2]} {['the', 'very', 'today'][i % 3]}", "ab"[i % 2]])
    code, _, err = _run(capsys, "train", "--run", str(tmp_path / "run"), "--data", str(table), "--text-column",
                        "body", "--label-column", "topic", "--d", "2", "--epochs", "1", "--min-count", "1",
                        "--threads", "1")
    assert code == 0, _last_line(err)
    second_reads = []
    monkeypatch.setattr(hardmax.data.splits, "file_sha256", lambda path: second_reads.append(path) or "0" * 64)
    code, _, err = _run(capsys, "evaluate", "--run", str(tmp_path / "run"), "--threads", "1")
    assert code == 0 and second_reads == [], _last_line(err)
    table.write_text(table.read_text().replace("goal match", "goal goal"), encoding="utf-8")  # other bytes: refused
    code, _, err = _run(capsys, "evaluate", "--run", str(tmp_path / "run"), "--threads", "1")
    assert code == 2 and "is not the table" in _last_line(err) and second_reads == []
