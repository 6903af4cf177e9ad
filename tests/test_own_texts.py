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


@pytest.mark.slow
def test_train_and_evaluate_a_four_class_table(tmp_path, capsys):
    from test_data_tables import rows, write

    table = write(tmp_path / "topics.jsonl", rows(900, classes=("sport", "music", "food", "tech")))
    run = tmp_path / "run"
    code = main(["train", "--data", str(table), "--text-column", "body", "--label-column", "topic", "--run",
                 str(run), "--d", "4", "--epochs", "8", "--min-count", "1", "--stopwords", "none", "--threads", "1"])
    assert code == 0, capsys.readouterr().err
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
