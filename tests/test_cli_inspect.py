"""`hardmax inspect`: a tiny model end to end into tmp_path, and bad inputs as one line each."""

from __future__ import annotations

import json

import pytest
import torch
from pretrained_models import TEXTS, build

from hardmax.cli import main


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return build("bert", tmp_path_factory.mktemp("cli"))


def test_inspect_writes_the_table_and_figures(bert, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS + ["", " ".join(["the movie"] * 30)]) + "\n")
    out = tmp_path / "out"
    assert main(["inspect", str(texts), "--model", str(bert), "--out", str(out), "--steps", "5",
                 "--svm-queries", "10", "--max-length", "16", "--batch-size", "2"]) == 0
    printed = capsys.readouterr().out
    assert "| layer | mean_cosine |" in printed and "2 of 5 texts were truncated at 16 tokens" in printed
    for name in ("table.md", "table.json", "views.png", "cosine_histogram.png", "selections.png", "particles.gif"):
        assert (out / name).stat().st_size > 0, name
    table = json.loads((out / "table.json").read_text())
    assert table["texts"] == 5 and table["truncated"] == 2 and len(table["layers"]) == 3
    assert len(table["heads"]) == 2 * 4 and table["head_run"]["positive_definite"] is False
    assert table["svm"]["infeasible"] is False and table["svm"]["svm"]["gap"] < 1e-6
    fractions = torch.tensor(table["histogram"]["fractions"])
    assert torch.allclose(fractions.sum(1), torch.ones(3, dtype=fractions.dtype))
    assert not list(out.glob("*.tmp*"))


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing", "no such model directory"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "is not a model directory: it has no config.json"),
])
def test_inspect_bad_model_is_one_line(tmp_path, capsys, make, message):
    assert main(["inspect", "a text", "--model", str(make(tmp_path)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("hardmax inspect: error:")
    assert not (tmp_path / "o").exists()


def test_inspect_unsupported_and_pickle_only_are_one_line(tmp_path, capsys):
    import transformers as t

    electra = tmp_path / "electra"
    t.ElectraModel(t.ElectraConfig(vocab_size=30, embedding_size=8, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=8)).save_pretrained(electra)
    assert main(["inspect", "a text", "--model", str(electra), "--out", str(tmp_path / "o")]) == 2
    assert "unsupported architecture 'electra'" in capsys.readouterr().err
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps({"model_type": "bert"}))
    torch.save({}, pickled / "pytorch_model.bin")
    assert main(["inspect", "a text", "--model", str(pickled), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "pickle-only checkpoint (pytorch_model.bin)" in err and err.count("\n") == 1
    assert main(["inspect", "a text", "--model", str(pickled), "--out", str(tmp_path / "o"), "--steps", "0"]) == 2
    assert "--steps must be ≥ 1" in capsys.readouterr().err
