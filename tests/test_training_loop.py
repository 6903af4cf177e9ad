"""Tests of `hardmax.training.loop` on the synthetic corpus of `corpus.py` (seconds, not minutes).

- Learning: the loss falls and hardmax validation accuracy clearly beats chance; the best epoch is
  the one selected; early stopping; `evaluate` and `predict`.
- Resume: a run killed with SIGKILL in the middle of an epoch (in a subprocess), then resumed, ends
  with bitwise the same weights, optimizer state and history as an uninterrupted run; so does a run
  resumed at an epoch boundary with more epochs.
- Refusals (CheckpointError): a resume with other settings (the message names the field), training
  into a directory that holds a run, nothing to resume, a checkpoint of another format version.
- Batches and word dropout: functions of (seed, epoch, batch) that hide about p of the real tokens, never a
  review's first token, never un-hide padding; recorded, so a resume with another p is refused.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from training_runs import ATTENTION, DATA_INFO, TRAIN, assert_same_tensors, copy_run, model_config, other_version, run

from hardmax import evaluate, predict
from hardmax.io import CheckpointError, load_tensors
from hardmax.training import EpochRecord, epoch_batches, word_dropout

pytestmark = pytest.mark.usefixtures("one_thread")  # bitwise comparisons: see conftest.one_thread


TESTS = Path(__file__).resolve().parent


TIMING = ("train_seconds", "train_reviews_per_second")  # the only fields allowed to differ between runs


def without_timing(history) -> list[dict]:
    return [{k: v for k, v in entry.to_dict().items() if k not in TIMING} for entry in history]


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


def test_checkpoint_of_another_format_version_is_refused(trained, splits, tmp_path):
    run_dir = copy_run(trained, tmp_path)
    other_version(run_dir / "checkpoint.safetensors")
    with pytest.raises(CheckpointError, match="format 999"):
        run(splits, run_dir, resume=True, epochs=4)


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


def test_resume_with_another_word_dropout_is_refused(trained, splits):
    assert TRAIN.word_dropout == 0.3  # the reference run used word dropout
    with pytest.raises(CheckpointError, match="train.word_dropout: saved 0.3, now 0.0"):
        run(splits, trained.run_dir, resume=True, word_dropout=0.0)


def test_word_dropout_changes_training(trained, splits, tmp_path):
    plain = run(splits, tmp_path / "plain", word_dropout=0.0, epochs=1)
    assert plain.history[0].train_loss != trained.history[0].train_loss
