"""Tests of `hardmax.training` on the synthetic corpus of `corpus.py` (seconds, not minutes).

- Learning: the loss falls and hardmax validation accuracy clearly beats chance; the best epoch is
  the one selected; the run directory holds config.json, history.json, model.safetensors.
- Resume: a run killed with SIGKILL in the middle of an epoch (in a subprocess), then resumed, ends
  with bitwise the same weights, optimizer state and history as an uninterrupted run; so does a run
  resumed at an epoch boundary with more epochs.
- Refusals (CheckpointError): a resume with other settings (the message names the field), training
  into a directory that holds a run, corrupt or other-version weights and checkpoints.
- load_run / predict / evaluate: round trip with identical predictions, fields in [0, 1].
- Word dropout: a function of (seed, epoch, batch) that hides about p of the real tokens, never a
  review's first token, never un-hides padding; recorded, so a resume with another p is refused.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import pytest
import torch
from corpus import train_val
from safetensors.torch import save_file

from hardmax import ModelConfig, TrainConfig, __version__, evaluate, load_run, predict
from hardmax.dynamics import Hardmax
from hardmax.io import CheckpointError, load_tensors
from hardmax.training import EpochRecord, epoch_batches, train, word_dropout

TESTS = Path(__file__).resolve().parent
DATA_INFO = {"corpus": "tests/corpus.py", "seed": 0}
TIMING = ("train_seconds", "train_reviews_per_second")  # the only fields allowed to differ between runs

# The two rules of a classifier by the names the tests are parametrised with.
ATTENTION = {"softmax": None, "hardmax": Hardmax()}


pytestmark = pytest.mark.usefixtures("one_thread")  # bitwise comparisons: see conftest.one_thread


@pytest.fixture(scope="module")
def splits():
    return train_val(320, 160, seed=0)


def model_config(splits, **changes) -> ModelConfig:
    return ModelConfig(**{"vocab_size": splits[0].vocab_size, "d": 4, "layers": 2, **changes})


# 20 steps per epoch, a checkpoint every 2 steps: a kill lands in the middle of an epoch.
TRAIN = TrainConfig(epochs=3, batch_size=16, lr=0.05, checkpoint_every=2, seed=0)


def run(splits, run_dir, *, resume=False, data_info=DATA_INFO, model_changes=None, **train_changes):
    return train(*splits, model_config=model_config(splits, **(model_changes or {})),
                 train_config=replace(TRAIN, **train_changes), run_dir=run_dir, resume=resume,
                 data_info=data_info, progress=False)


@pytest.fixture(scope="module")
def trained(splits, tmp_path_factory):
    """One uninterrupted reference run, shared by the tests that only read it."""
    return run(splits, tmp_path_factory.mktemp("runs") / "reference")


def copy_run(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained.run_dir, tmp_path / "copy"))


def without_timing(history) -> list[dict]:
    return [{k: v for k, v in entry.to_dict().items() if k not in TIMING} for entry in history]


def assert_same_tensors(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


# --------------------------------------------------------------------------------------------
# Learning and the run directory.
# --------------------------------------------------------------------------------------------


def test_training_learns(trained):
    history = trained.history
    assert all(isinstance(h, EpochRecord) for h in history) and [h.epoch for h in history] == [1, 2, 3]
    assert history[-1].train_loss < 0.8 * history[0].train_loss
    assert trained.best_val_accuracy >= 0.75  # chance is 1/2
    accuracies = [h.val_accuracy_hardmax for h in history]
    assert trained.best_epoch == 1 + accuracies.index(max(accuracies))
    assert trained.best_val_accuracy == max(accuracies)
    assert not trained.stopped_early
    assert all(h.alpha > 0 for h in history)


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


def test_evaluate(trained, splits):
    result = evaluate(trained.model, splits[1])
    assert result.n == len(splits[1])
    for name in ("accuracy_softmax", "accuracy_hardmax", "agreement"):
        assert 0 <= getattr(result, name) <= 1, name
    assert result.loss_hardmax >= 0 and result.loss_softmax >= 0
    assert result.seconds_hardmax >= 0 and result.seconds_softmax >= 0
    assert result.agreement >= 0.95  # β = 1000: softmax is almost hardmax
    assert result.accuracy_hardmax == trained.best_val_accuracy  # the number selection was made on


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
@pytest.mark.parametrize("batch_size", [7, 1024])
def test_predict_matches_forward(trained, splits, attention, batch_size):
    """predict sorts by length, left-aligns and trims padding: same logits as one plain forward pass."""
    val = splits[1]
    with torch.no_grad():
        direct = trained.model(val.ids, val.mask, rule=ATTENTION[attention])
    got = predict(trained.model, val.ids, val.mask, rule=ATTENTION[attention], batch_size=batch_size)
    torch.testing.assert_close(got, direct, rtol=1e-4, atol=1e-4)


def test_early_stopping(splits, tmp_path):
    """With a learning rate too small to change a prediction, validation never improves after epoch 1."""
    result = run(splits, tmp_path / "run", lr=1e-9, epochs=10, patience=1, checkpoint_every=100)
    assert result.stopped_early and len(result.history) == 2 and result.best_epoch == 1


# --------------------------------------------------------------------------------------------
# Resume: bitwise the same run.
# --------------------------------------------------------------------------------------------


KILLED_RUN = """
import sys, time
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True, warn_only=True)
import importlib
# Not `import hardmax.training as T`: the package re-exports the function `train` under that name.
T = importlib.import_module("hardmax.training.loop")
from corpus import train_val
from hardmax import ModelConfig, TrainConfig

save = T._save_checkpoint
def throttled_save(*args):
    save(*args)
    time.sleep(0.1)  # slow the run down so that the parent can kill it in the middle of an epoch
T._save_checkpoint = throttled_save
splits = train_val(320, 160, seed=0)
T.train(*splits, model_config=ModelConfig(**{model!r}), train_config=TrainConfig(**{train!r}),
        run_dir={run_dir!r}, data_info={data_info!r}, progress=False)
"""


def kill_mid_epoch(splits, run_dir: Path, *, timeout: float = 120.0) -> dict:
    """Train in a subprocess; SIGKILL it once its checkpoint is in the middle of an epoch after the first.

    Returns the state saved in the checkpoint it left behind.
    """
    train_module = importlib.import_module("hardmax.training.loop")
    assert hasattr(train_module, "_save_checkpoint"), "the subprocess throttles hardmax.training.loop._save_checkpoint"
    script = KILLED_RUN.format(tests=str(TESTS), model=model_config(splits).to_dict(), train=asdict(TRAIN),
                               run_dir=str(run_dir), data_info=DATA_INFO)
    ckpt = run_dir / "checkpoint.safetensors"
    log = run_dir.parent / f"{run_dir.name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the training subprocess ended (rc {proc.returncode}) before it could be killed:\n"
                            + log.read_text(errors="replace")[-3000:])
            if ckpt.exists():
                try:
                    state = load_tensors(ckpt)[1]["state"]
                except CheckpointError:
                    state = None  # being replaced right now: read it again
                if state is not None and state["epoch"] >= 1 and state["batch"] > 0:
                    os.kill(proc.pid, signal.SIGKILL)
                    break
            time.sleep(0.01)
        else:
            pytest.fail(f"no mid-epoch checkpoint after {timeout} s")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return load_tensors(ckpt)[1]["state"]


@pytest.mark.slow
def test_resume_after_kill_is_bitwise_identical(trained, splits, tmp_path):
    run_dir = tmp_path / "killed"
    state = kill_mid_epoch(splits, run_dir)
    assert state["epoch"] in (1, 2) and 0 < state["batch"] < 20 and len(state["history"]) == state["epoch"]
    with pytest.raises(CheckpointError, match="already holds a run"):
        run(splits, run_dir)  # a killed run is still a run

    resumed = run(splits, run_dir, resume=True)

    reference = trained.run_dir
    assert_same_tensors(load_tensors(run_dir / "checkpoint.safetensors")[0],
                        load_tensors(reference / "checkpoint.safetensors")[0])  # final weights and Adam moments
    assert_same_tensors(resumed.model.state_dict(), trained.model.state_dict())  # selected weights
    assert without_timing(resumed.history) == without_timing(trained.history)
    assert (resumed.best_epoch, resumed.best_val_accuracy) == (trained.best_epoch, trained.best_val_accuracy)
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(p.name for p in reference.iterdir())


def test_resume_with_more_epochs_is_bitwise_identical(trained, splits, tmp_path):
    """Stopping after 2 epochs and resuming with epochs=3 gives the 3-epoch run."""
    run_dir = tmp_path / "short"
    first = run(splits, run_dir, epochs=2)
    assert len(first.history) == 2
    resumed = run(splits, run_dir, resume=True)
    assert_same_tensors(load_tensors(run_dir / "checkpoint.safetensors")[0],
                        load_tensors(trained.run_dir / "checkpoint.safetensors")[0])
    assert without_timing(resumed.history) == without_timing(trained.history)
    assert json.loads((run_dir / "config.json").read_text())["train"]["epochs"] == 3


def test_resume_of_a_finished_run_trains_no_more(trained, splits, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    before = load_tensors(run_dir / "checkpoint.safetensors")[0]
    resumed = run(splits, run_dir, resume=True)
    assert resumed.history == trained.history
    assert_same_tensors(load_tensors(run_dir / "checkpoint.safetensors")[0], before)
    assert_same_tensors(resumed.model.state_dict(), trained.model.state_dict())


# --------------------------------------------------------------------------------------------
# Refusals.
# --------------------------------------------------------------------------------------------


def test_refuses_to_train_into_a_run(trained, splits):
    config = (trained.run_dir / "config.json").read_text()
    with pytest.raises(CheckpointError, match="already holds a run"):
        run(splits, trained.run_dir)
    assert (trained.run_dir / "config.json").read_text() == config


@pytest.mark.parametrize("changes, field", [
    ({"model_changes": {"d": 8}}, "model.d: saved 4, now 8"),
    ({"model_changes": {"learn_A": True}}, "model.learn_A"),
    ({"lr": 0.01}, "train.lr: saved 0.05, now 0.01"),
    ({"seed": 1}, "train.seed"),
    ({"batch_size": 8}, "train.batch_size"),
    ({"data_info": {"corpus": "other", "seed": 0}}, "data.corpus"),
])
def test_refuses_resume_with_other_settings(trained, splits, changes, field):
    config = (trained.run_dir / "config.json").read_text()
    with pytest.raises(CheckpointError, match="settings differ") as info:
        run(splits, trained.run_dir, resume=True, **changes)
    assert field in str(info.value)
    assert (trained.run_dir / "config.json").read_text() == config  # nothing was written


def test_refuses_resume_of_nothing(splits, tmp_path):
    with pytest.raises(CheckpointError, match="nothing to resume"):
        run(splits, tmp_path / "empty", resume=True)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_weights_are_refused(trained, tmp_path, damage):
    run_dir = copy_run(trained, tmp_path)
    path = run_dir / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(b"\x00\x01garbage" * 20 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_run(run_dir)


def other_version(path: Path) -> None:
    """Rewrite a hardmax safetensors file as if a future format version had written it."""
    tensors, meta = load_tensors(path)
    save_file(tensors, str(path), metadata={"hardmax": json.dumps({**meta, "format": 999})})


def test_weights_of_another_format_version_are_refused(trained, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    other_version(run_dir / "model.safetensors")
    with pytest.raises(CheckpointError, match="format 999"):
        load_run(run_dir)


def test_checkpoint_of_another_format_version_is_refused(trained, splits, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    other_version(run_dir / "checkpoint.safetensors")
    with pytest.raises(CheckpointError, match="format 999"):
        run(splits, run_dir, resume=True, epochs=4)


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


# --------------------------------------------------------------------------------------------
# Batches and configs.
# --------------------------------------------------------------------------------------------


def test_epoch_batches_are_a_function_of_seed_and_epoch():
    lengths = torch.randint(1, 50, (103,), generator=torch.Generator().manual_seed(0))
    kwargs = {"batch_size": 8, "bucket": 3}
    first = epoch_batches(lengths, seed=0, epoch=0, **kwargs)
    again = epoch_batches(lengths, seed=0, epoch=0, **kwargs)
    assert len(first) == len(again) and all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert torch.equal(torch.sort(torch.cat(first)).values, torch.arange(103))  # every review once
    assert max(len(b) for b in first) == 8
    for other in (epoch_batches(lengths, seed=0, epoch=1, **kwargs), epoch_batches(lengths, seed=1, epoch=0, **kwargs)):
        assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=False))
    for batch in first:  # sorted by length within a bucket window
        assert torch.equal(lengths[batch], torch.sort(lengths[batch], stable=True).values)


@pytest.mark.parametrize("changes", [{"epochs": 0}, {"batch_size": 0}, {"checkpoint_every": 0}, {"lr": 0.0},
                                     {"lr": float("nan")}, {"weight_decay": -1.0}, {"clip_norm": -1.0},
                                     {"patience": -1}, {"select_on": "both"}])
def test_train_config_validation(changes):
    with pytest.raises(ValueError, match=next(iter(changes))):  # the message names the field
        TrainConfig(**changes)


def test_train_config_fields_are_all_recorded(trained):
    saved = json.loads((trained.run_dir / "config.json").read_text())["train"]
    assert set(saved) == {f.name for f in fields(TrainConfig)}


# --------------------------------------------------------------------------------------------
# Word dropout.
# --------------------------------------------------------------------------------------------


def left_aligned_mask(lengths: list[int], width: int) -> torch.Tensor:
    """(len(lengths), width) bool: real tokens first, as `train` hands batches to `word_dropout`."""
    return torch.arange(width) < torch.tensor(lengths).unsqueeze(-1)


@pytest.fixture(scope="module")
def batch_mask() -> torch.Tensor:
    lengths = torch.randint(1, 65, (400,), generator=torch.Generator().manual_seed(7)).tolist()
    return left_aligned_mask(lengths, 64)


def test_word_dropout_is_a_function_of_seed_epoch_and_batch(batch_mask):
    keep = word_dropout(batch_mask, 0.3, seed=0, epoch=2, batch=5)
    assert torch.equal(keep, word_dropout(batch_mask.clone(), 0.3, seed=0, epoch=2, batch=5))
    for other in ({"seed": 1, "epoch": 2, "batch": 5}, {"seed": 0, "epoch": 3, "batch": 5},
                  {"seed": 0, "epoch": 2, "batch": 6}):
        assert not torch.equal(keep, word_dropout(batch_mask, 0.3, **other)), other
    torch.manual_seed(123)  # the global generator plays no part
    assert torch.equal(keep, word_dropout(batch_mask, 0.3, seed=0, epoch=2, batch=5))


@pytest.mark.parametrize("p", [0.0, 0.1, 0.3, 0.6, 0.95])
def test_word_dropout_hides_about_p_of_the_real_tokens(batch_mask, p):
    before = batch_mask.clone()
    keep = word_dropout(batch_mask, p, seed=0, epoch=0, batch=0)
    assert torch.equal(batch_mask, before)  # the batch's own mask is left alone
    assert keep.dtype == torch.bool and keep.shape == batch_mask.shape
    assert not (keep & ~batch_mask).any()  # padding is never un-hidden
    assert torch.equal(keep[:, 0], batch_mask[:, 0])  # every review keeps its first token
    assert (keep.sum(-1) >= 1).all()
    candidates = batch_mask[:, 1:]  # real tokens that may be hidden (~13,000)
    hidden = (candidates & ~keep[:, 1:]).sum() / candidates.sum()
    assert float(hidden) == pytest.approx(p, abs=0.02)


def test_word_dropout_of_one_token_reviews_keeps_them():
    mask = left_aligned_mask([1, 1, 1, 1], 3)
    assert torch.equal(word_dropout(mask, 0.99, seed=0, epoch=0, batch=0), mask)


@pytest.mark.parametrize("p", [1.0, 1.5, -0.1])
def test_word_dropout_must_be_below_one(p):
    with pytest.raises(ValueError, match=r"word_dropout must be in \[0, 1\)"):
        TrainConfig(word_dropout=p)


def test_resume_with_another_word_dropout_is_refused(trained, splits):
    assert TRAIN.word_dropout == 0.3  # the reference run used word dropout
    with pytest.raises(CheckpointError, match="train.word_dropout: saved 0.3, now 0.0"):
        run(splits, trained.run_dir, resume=True, word_dropout=0.0)


def test_word_dropout_changes_training(trained, splits, tmp_path):
    plain = run(splits, tmp_path / "plain", word_dropout=0.0, epochs=1)
    assert plain.history[0].train_loss != trained.history[0].train_loss


def test_train_config_imports_without_torch():
    """The CLI builds its options from TrainConfig: its module, and the package's lazy name, stay torch-free."""
    code = ("import sys; from hardmax.training.config import TrainConfig; import hardmax.training as t; "
            "t.TrainConfig(lr=0.1); assert 'torch' not in sys.modules, 'torch imported'; "
            "t.load_run; assert 'torch' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
