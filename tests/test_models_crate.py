"""hardmax.models.crate: CRATE blocks and classifier; the bridge to the paper's layer (1.1)."""

from __future__ import annotations

import json

import pytest
import torch

from hardmax.dynamics import Hardmax, Softmax, attention_step, simulate
from hardmax.measures import zero_fraction
from hardmax.models import ModelConfig
from hardmax.models.crate import CrateBlock, CrateBlocks, CrateClassifier


def _bridge_block(d: int, kappa: float) -> CrateBlock:
    block = CrateBlock(d, CrateBlocks(heads=1, mode="faithful", step=kappa, ista=False))
    with torch.no_grad():
        block.U.copy_(torch.eye(d))
    return block.double()


@pytest.mark.parametrize("kappa", [0.2, 0.5, 0.8])
def test_bridge_one_block_is_the_papers_layer(kappa):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5, 9, 3, generator=g, dtype=torch.float64)
    multiplicity = torch.ones(5, 9, dtype=torch.float64)
    multiplicity[:, 7:] = 0  # padding
    half, out = _bridge_block(3, kappa)(z, multiplicity, Hardmax())
    expected = attention_step(z, multiplicity, alpha=kappa / (1 - kappa), rule=Hardmax())
    real = multiplicity > 0
    assert torch.equal(out, half)  # no ISTA
    assert torch.allclose(half[real], expected[real], rtol=0, atol=1e-14)


def test_bridge_stack_of_blocks_follows_simulate():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(4, 12, 2, generator=g, dtype=torch.float64)
    kappa, layers = 0.5, 6
    blocks = [_bridge_block(2, kappa) for _ in range(layers)]
    path = [z]
    ones = torch.ones(4, 12, dtype=torch.float64)
    for block in blocks:
        path.append(block(path[-1], ones, Hardmax())[1])
    run = simulate(z, Hardmax(), alpha=kappa / (1 - kappa), layers=layers)
    assert torch.allclose(torch.stack(path), run.tokens, rtol=0, atol=1e-12)
    # and softmax heads follow the softmax dynamics at the same β
    soft = [z]
    for block in blocks:
        soft.append(block(soft[-1], ones, Softmax(5.0))[1])
    run = simulate(z, Softmax(5.0), alpha=kappa / (1 - kappa), layers=layers)
    assert torch.allclose(torch.stack(soft), run.tokens, rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", ["reference", "faithful"])
def test_classifier_shapes_trace_and_gradient_flow(mode):
    config = ModelConfig(vocab_size=50, d=8, layers=3, crate=CrateBlocks(heads=2, mode=mode))
    model = CrateClassifier(config)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(1, 50, (6, 11), generator=g)
    mask = torch.rand(6, 11, generator=g) > 0.3
    mask[:, 0] = True
    logits = model(ids, mask)
    assert logits.shape == (6,)
    trace = model.trace(ids, mask, rule=Hardmax())
    assert trace.tokens.shape[0] == 4 and trace.tokens.shape[1] == 6 and trace.tokens.shape[-1] == 8
    assert trace.compressed.shape == trace.tokens[1:].shape
    assert torch.allclose(trace.logits, model(ids, mask, rule=Hardmax()))
    # padding changes nothing
    padded = torch.cat([ids, torch.zeros(6, 4, dtype=torch.int64)], 1)
    assert torch.allclose(model(padded, torch.cat([mask, torch.zeros(6, 4, dtype=torch.bool)], 1)), logits,
                          atol=1e-6)
    torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.ones(6)).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        if name != "embedding.weight" or mode == "reference":
            assert parameter.grad.abs().sum() > 0, name
    assert model.blocks[0].subspaces.shape == (2, 8, 4)


def test_sparsity_at_initialisation():
    """The ReLU threshold of ISTA zeroes a share of the coordinates at initialisation (reference mode:
    LayerNorm'd inputs, so roughly half of them plus the threshold)."""
    model = CrateClassifier(ModelConfig(vocab_size=200, d=16, layers=4, crate=CrateBlocks(heads=4)))
    ids = torch.randint(1, 200, (32, 40), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        trace = model.trace(ids)
    mask = trace.multiplicity > 0
    for layer in range(1, 5):
        zeros = zero_fraction(trace.tokens[layer], mask=mask)
        assert (zeros > 0.3).all() and (zeros < 0.9).all()
        assert zero_fraction(trace.compressed[layer - 1], mask=mask).max() < 0.01  # MSSA is not sparse
    no_ista = CrateClassifier(ModelConfig(vocab_size=200, d=16, layers=2, crate=CrateBlocks(heads=4, ista=False)))
    with torch.no_grad():
        assert zero_fraction(no_ista.trace(ids).tokens[-1], mask=mask).max() < 0.01


def test_ista_step_formula():
    block = CrateBlock(4, CrateBlocks(heads=1, mode="faithful", eta=0.3, lam=0.2)).double()
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    D = block.D.detach()
    expected = torch.relu(x + 0.3 * torch.einsum("ji,...j->...i", D, x - torch.einsum("ij,...j->...i", D, x)) - 0.06)
    assert torch.allclose(block.sparsify(x), expected, atol=1e-14)


@pytest.mark.parametrize("kwargs,match", [
    ({"heads": 0}, "CrateBlocks.heads"),
    ({"heads": True}, "CrateBlocks.heads"),
    ({"head_dim": 0}, "CrateBlocks.head_dim"),
    ({"step": 1.0}, "CrateBlocks.step"),
    ({"eta": 0.0}, "CrateBlocks.eta"),
    ({"lam": -1.0}, "CrateBlocks.lam"),
    ({"beta": -1.0}, "CrateBlocks.beta"),
    ({"mode": "other"}, "CrateBlocks.mode"),
])
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match) as caught:
        CrateBlocks(**kwargs)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="layers"):
        ModelConfig(vocab_size=5, layers=-1, crate=CrateBlocks())
    with pytest.raises(ValueError, match="CrateBlocks.heads must divide d = 6"):
        ModelConfig(vocab_size=5, d=6, crate=CrateBlocks(heads=4))
    with pytest.raises(ValueError, match="CrateBlocks.heads must divide d = 6"):
        CrateBlock(6, CrateBlocks(heads=4))
    assert ModelConfig(vocab_size=5, d=6, crate=CrateBlocks(heads=4, head_dim=3)).crate.subspace_dim(6) == 3


def test_bad_inputs():
    model = CrateClassifier(ModelConfig(vocab_size=10, d=4, layers=1, crate=CrateBlocks()))
    with pytest.raises(ValueError, match="ids"):
        model(torch.tensor([[1, 20]]))
    with pytest.raises(ValueError, match="real"):
        model(torch.tensor([[1, 2]]), torch.tensor([[False, False]]))
    with pytest.raises(ValueError, match="rule must be an attention rule"):
        model(torch.tensor([[1, 2]]), rule="other")


def test_train_layer_crate_smoke(tmp_path, monkeypatch, capsys):
    from test_cli_sentiment import write_archive

    from hardmax.cli import main
    from hardmax.models import build_model
    from hardmax.training import load_run

    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(1)
    archive = write_archive(tmp_path / "imdb.tar.gz", n=20)
    run = tmp_path / "crate"
    code = main(["train", "--run", str(run), "--data", str(archive), "--d", "4", "--layers", "2", "--layer", "crate",
                 "--epochs", "1", "--min-count", "2", "--batch-size", "16"])
    assert code == 0, capsys.readouterr().err
    loaded = load_run(run)
    assert isinstance(loaded.model, CrateClassifier) and loaded.model.config.crate.heads == 1
    assert loaded.model.config.blocks.mode == "reference" and loaded.model.config is loaded.model_config
    # a LayerNorm in R² is degenerate, so d = 2 runs the faithful mode (unless asked otherwise)
    assert ModelConfig(vocab_size=5, d=2, crate=CrateBlocks()).blocks.mode == "faithful"
    assert ModelConfig(vocab_size=5, d=2, crate=CrateBlocks(mode="reference")).blocks.mode == "reference"
    assert loaded.model_config.layer == "crate"
    # rate: compression and sparsity per block, at the run's initialisation and trained
    assert main(["rate", "--run", str(run), "--data", str(archive), "--reviews", "40"]) == 0
    assert "CRATE, d = 4, 1 head(s), 40 reviews" in capsys.readouterr().out
    rate = json.loads((run / "rate" / "rate.json").read_text())["report"]
    assert len(rate["trained"]["compression"]) == 2 and len(rate["initial"]["rate"]) == 3
    assert rate["initial"] != rate["trained"] and (run / "rate" / "rate.png").exists()
    # evaluate: accuracies under both attentions, no leader statistics (a property of the paper's layer)
    assert main(["evaluate", "--run", str(run), "--data", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "CRATE blocks" in out and f"softmax (β = {loaded.model.inverse_temperature:g})" in out
    assert "leaders per review" not in out
    metrics = json.loads((run / "metrics_test.json").read_text())
    assert set(metrics) == {"evaluation"} and 0 <= metrics["evaluation"]["accuracy_softmax"] <= 1
    # a hardmax config's record is unchanged by CRATE (old runs resume and are reused)
    assert "layer" not in ModelConfig(vocab_size=5).to_dict() and "crate" not in ModelConfig(vocab_size=5).to_dict()
    assert type(build_model(ModelConfig(vocab_size=5))).__name__ == "HardmaxClassifier"


def test_crate_heads_choose_the_subspaces():
    from hardmax.models import build_model

    assert CrateBlocks().heads == 1  # the default
    one = build_model(ModelConfig(vocab_size=5, d=16, crate=CrateBlocks()))
    assert one.config.crate.subspace_dim(16) == 16 and one.blocks[0].subspaces.shape == (1, 16, 16)
    two = build_model(ModelConfig(vocab_size=5, d=16, crate=CrateBlocks(heads=2)))
    assert two.blocks[0].subspaces.shape == (2, 16, 8)
    ids = torch.randint(1, 5, (3, 7))
    assert one(ids).shape == two(ids).shape == (3,)
    for bad in (3, 0, True, 32):
        with pytest.raises(ValueError, match="CrateBlocks.heads"):
            ModelConfig(vocab_size=5, d=16, crate=CrateBlocks(heads=bad))


def test_every_setting_has_one_home_and_bad_combinations_name_it():
    from hardmax.models import HardmaxClassifier, build_model

    # the classifier's settings are ModelConfig's; the blocks' are CrateBlocks'
    config = ModelConfig(vocab_size=7, d=8, layers=3, pad_id=2, embedding_std=0.5, crate=CrateBlocks(heads=2))
    model = build_model(config)
    assert isinstance(model, CrateClassifier) and model.config is config and len(model.blocks) == 3
    assert model.embedding.weight.shape == (7, 8) and config.layer == "crate"
    assert ModelConfig(vocab_size=7).layer == "hardmax"
    with pytest.raises(AttributeError):
        config.layer = "hardmax"  # a read-only name of the choice
    # the hardmax layer's settings do not apply to CRATE blocks: refused, in one line naming the setting
    for name in ("learn_A", "paper_padding"):
        with pytest.raises(ValueError, match=f"^{name} applies to the paper's hardmax layer only") as caught:
            ModelConfig(vocab_size=5, crate=CrateBlocks(), **{name: True})
        assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="^crate must be a CrateBlocks or None, got dict"):
        ModelConfig(vocab_size=5, crate={"heads": 2})
    # each classifier refuses the other's config
    with pytest.raises(ValueError, match="needs a ModelConfig with crate=CrateBlocks"):
        CrateClassifier(ModelConfig(vocab_size=5))
    with pytest.raises(ValueError, match="HardmaxClassifier builds the paper's hardmax layer"):
        HardmaxClassifier(config)
    # block settings without CRATE, in a record
    with pytest.raises(ValueError, match="^crate_heads applies to layer 'crate' only"):
        ModelConfig.from_record({"vocab_size": 5, "d": 16, "crate_heads": 2})
    with pytest.raises(ValueError, match="^layer must be 'hardmax' or 'crate'"):
        ModelConfig.from_record({"vocab_size": 5, "layer": "other"})


def test_records_round_trip_and_old_crate_records_load_as_before():
    # hardmax records are as they always were (finished runs are reused by comparing them)
    assert ModelConfig(vocab_size=5, d=16).to_dict() == {
        "vocab_size": 5, "d": 16, "layers": 8, "alpha_init": 1.0, "learn_alpha": True, "learn_A": False,
        "A_eps": 1e-3, "beta": 1000.0, "paper_padding": False, "pad_id": 0, "embedding_std": 1.0}
    assert ModelConfig.from_record({"vocab_size": 5, "d": 16}).crate is None
    # a CRATE config's record names every block setting and reads back to the same config
    config = ModelConfig(vocab_size=5, d=16, layers=2, crate=CrateBlocks(heads=2, ista=False, eta=0.2))
    record = json.loads(json.dumps(config.to_dict()))
    assert record["crate"]["heads"] == 2 and record["crate"]["mode"] == "reference" and "layer" not in record
    assert ModelConfig.from_record(record) == config
    # records of earlier versions: {"layer": "crate", "crate_heads": K}, and before crate_heads existed,
    # {"layer": "crate"}, which was built with max(1, d // 4) heads; d ≤ 2 ran the faithful mode
    old = {"vocab_size": 5, "d": 16, "layers": 2, "alpha_init": 1.0, "learn_alpha": True, "learn_A": False,
           "A_eps": 1e-3, "beta": 1000.0, "paper_padding": False, "pad_id": 0, "embedding_std": 1.0, "layer": "crate"}
    assert ModelConfig.from_record({**old, "crate_heads": 2}) == ModelConfig(vocab_size=5, d=16, layers=2,
                                                                            crate=CrateBlocks(heads=2))
    assert ModelConfig.from_record(old).blocks == CrateBlocks(heads=4, mode="reference")
    assert ModelConfig.from_record({**old, "d": 2}).blocks == CrateBlocks(heads=1, mode="faithful")
    assert ModelConfig.from_record({"vocab_size": 5, "d": 8, "layer": "hardmax"}) == ModelConfig(vocab_size=5, d=8)


@pytest.mark.parametrize("d,heads", [(16, 2), (16, None), (2, 1)])
def test_an_old_crate_run_loads_to_the_same_model(tmp_path, d, heads):
    """A run directory written before CrateBlocks (config.json's model: layer/crate_heads) loads, with the same
    modules and weights: its state dict is the one the old CrateConfig.from_model_config built."""
    from hardmax.io import save_tensors, write_json
    from hardmax.models import build_model
    from hardmax.training import TrainConfig, config_record, load_run, settings_differences

    blocks = CrateBlocks(heads=max(1, d // 4) if heads is None else heads)
    torch.manual_seed(5)
    model = build_model(ModelConfig(vocab_size=9, d=d, layers=2, crate=blocks))
    record = config_record(model.config, TrainConfig(), None)
    old_model = {k: v for k, v in record["model"].items() if k != "crate"}
    old_model["layer"] = "crate"
    if heads is not None:
        old_model["crate_heads"] = heads
    record["model"] = old_model
    write_json(tmp_path / "config.json", record)
    save_tensors(tmp_path / "model.safetensors", model.state_dict(), {"epoch": 1, "config": record})
    loaded = load_run(tmp_path)
    assert loaded.model_config == model.config and loaded.model_config.blocks.mode == ("faithful" if d <= 2
                                                                                      else "reference")
    assert loaded.model.state_dict().keys() == model.state_dict().keys()
    K = max(1, d // 4) if heads is None else heads  # the heads the old code built
    assert loaded.model.blocks[0].subspaces.shape == (K, d, d // K)
    assert ("norm.weight" in loaded.model.state_dict()) == (d > 2)  # reference mode's LayerNorms, not at d = 2
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[key], value), key
    ids = torch.randint(1, 9, (3, 6))
    with torch.no_grad():
        assert torch.equal(loaded.model(ids), model(ids))
    # an interrupted old run resumes: its record is compared as the config it describes
    assert settings_differences(record, config_record(model.config, TrainConfig(), None)) == []


def test_layer_norm_in_two_dimensions_is_degenerate():
    """Why d = 2 CRATE runs in the faithful mode: a LayerNorm maps every 2-vector to ±(1, −1)."""
    z = torch.randn(100, 2, generator=torch.Generator().manual_seed(4))
    normed = torch.nn.functional.layer_norm(z, (2,))
    assert torch.allclose(normed[:, 0], -normed[:, 1], atol=1e-4)
    apart = (z[:, 0] - z[:, 1]).abs() > 0.5  # the LayerNorm's ε only matters for nearly equal coordinates
    assert torch.allclose(normed[apart].abs(), torch.ones(int(apart.sum()), 2), atol=1e-3)


def test_the_blocks_mode_follows_d_through_replace():
    import dataclasses

    from hardmax.models import ModelConfig

    narrow = ModelConfig(vocab_size=5, d=2, crate=CrateBlocks())
    assert narrow.blocks.mode == "faithful"
    assert dataclasses.replace(narrow, d=16).blocks.mode == "reference"
    assert ModelConfig.from_record(narrow.to_dict()).blocks.mode == "faithful"


def test_the_training_estimate_counts_evaluation_without_gradients_and_crate_heads():
    from hardmax.models import ModelConfig

    paper = ModelConfig(vocab_size=40_000, d=16)
    assert paper.training_bytes(batch_size=64, max_len=128, eval_batch_size=4096) < 2 * 2**30
    one, four = (ModelConfig(vocab_size=40_000, d=16, crate=CrateBlocks(heads=k)) for k in (1, 4))
    assert four.training_bytes(batch_size=64, max_len=128) > 3 * one.training_bytes(batch_size=64, max_len=128) / 2
