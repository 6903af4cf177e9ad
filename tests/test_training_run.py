"""Tests of `hardmax.training.run`: the run directory a training leaves (config.json, history.json,
model.safetensors, checkpoint.safetensors, every TrainConfig field recorded), `load_run`'s round trip with
identical predictions, and its refusals (CheckpointError) of corrupt or other-version weights, a corrupt
config.json and an edited model config.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields

import pytest
import torch
from training_runs import ATTENTION, DATA_INFO, TRAIN, assert_same_tensors, copy_run, model_config, other_version

from hardmax import TrainConfig, __version__, load_run, predict
from hardmax.io import CheckpointError, load_tensors
from hardmax.training import EpochRecord

pytestmark = pytest.mark.usefixtures("one_thread")  # bitwise comparisons: see conftest.one_thread


def test_run_directory(trained, splits):
    run_dir = trained.run_dir
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint.safetensors", "config.json", "history.json",
                                                         "model.safetensors"]  # no temporary files left
    config = json.loads((run_dir / "config.json").read_text())
    assert config == {"hardmax_version": __version__, "model": model_config(splits).to_dict(),
                      "train": asdict(TRAIN), "data": DATA_INFO}
    assert json.loads((run_dir / "history.json").read_text()) == [h.to_dict() for h in trained.history]
    weights, meta = load_tensors(run_dir / "model.safetensors")
    assert meta["epoch"] == trained.best_epoch and meta["val_accuracy"] == trained.best_val_accuracy
    assert_same_tensors(weights, trained.model.state_dict())
    _, ckpt = load_tensors(run_dir / "checkpoint.safetensors")
    assert ckpt["state"]["epoch"] == 3 and ckpt["state"]["batch"] == 0


def test_load_run_round_trip(trained, splits):
    run = load_run(trained.run_dir)
    model = run.model
    assert not model.training
    assert run.record == json.loads((trained.run_dir / "config.json").read_text())
    assert run.path == trained.run_dir and run.best_epoch == trained.best_epoch
    assert run.model_config == model_config(splits) and run.train_config == TRAIN
    assert run.vocab is None  # trained without a vocabulary
    assert run.history == trained.history
    assert all(isinstance(h, EpochRecord) for h in run.history)
    assert model.config == trained.model.config
    val = splits[1]
    for attention in ("hardmax", "softmax"):
        assert torch.equal(predict(model, val.ids, val.mask, rule=ATTENTION[attention]),
                           predict(trained.model, val.ids, val.mask, rule=ATTENTION[attention]))


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_weights_are_refused(trained, tmp_path, damage):
    run_dir = copy_run(trained, tmp_path)
    path = run_dir / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(b"\x00\x01garbage" * 20 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_run(run_dir)


def test_weights_of_another_format_version_are_refused(trained, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    other_version(run_dir / "model.safetensors")
    with pytest.raises(CheckpointError, match="format 999"):
        load_run(run_dir)


def test_corrupt_config_is_refused(trained, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    (run_dir / "config.json").write_text('{"model": ')
    with pytest.raises(CheckpointError, match="config.json"):
        load_run(run_dir)


@pytest.mark.parametrize("field, value, message", [
    ("d", 6, "does not match its config"),  # weights that do not match the config
    ("heads", 4, "incompatible model config"),  # the config of an unknown model
])
def test_edited_model_config_is_refused(trained, tmp_path, field, value, message):
    run_dir = copy_run(trained, tmp_path)
    record = json.loads((run_dir / "config.json").read_text())
    record["model"][field] = value
    (run_dir / "config.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match=message):
        load_run(run_dir)


def test_train_config_fields_are_all_recorded(trained):
    saved = json.loads((trained.run_dir / "config.json").read_text())["train"]
    assert set(saved) == {f.name for f in fields(TrainConfig)}
