"""Training and evaluation of `HardmaxClassifier`: importable functions, no argparse, no globals.

`train` fits the model with softmax attention (Adam, BCE-with-logits, gradient clipping), picks the
epoch with the best *validation* accuracy under exact hardmax (the mode the model is deployed in;
the test set is never looked at), stops early, and writes everything to a run directory:

    run_dir/config.json        model, training and data settings, hardmax version, format
    run_dir/history.json       one record per epoch (losses, accuracies, α, throughput)
    run_dir/model.safetensors  the selected (best-validation) weights
    run_dir/checkpoint.safetensors   latest state (weights, Adam moments, position) for --resume

Batches of an epoch are a deterministic function of (seed, epoch), so a run resumed from a
mid-epoch checkpoint replays exactly the batches an uninterrupted run would have seen, and ends
with bitwise the same weights on CPU.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from hardmax.io import (
    CheckpointError,
    load_tensors,
    optimizer_from_tensors,
    optimizer_to_tensors,
    read_json,
    save_tensors,
    write_json,
)
from hardmax.models import HardmaxClassifier, ModelConfig

__all__ = ["Evaluation", "TrainConfig", "TrainResult", "evaluate", "load_run", "predict", "train"]


class LabelledSplit(Protocol):
    ids: Tensor  # (N, n) int64 word ids
    mask: Tensor  # (N, n) bool, True = real token
    labels: Tensor  # (N,) 0/1


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation settings. The defaults are those `hardmax reproduce` starts from (it picks the learning
    rate per d on validation); the accuracies they reach are in docs/results.md."""

    epochs: int = 12  # maximum number of epochs
    batch_size: int = 64  # reviews per step
    lr: float = 1e-2  # Adam learning rate
    weight_decay: float = 0.0  # Adam (L2) weight decay
    clip_norm: float = 1.0  # gradient clipping (global L2 norm); 0 disables
    patience: int = 3  # stop after this many epochs in a row without a better validation accuracy
    select_on: Literal["hardmax", "softmax"] = "hardmax"  # attention used for model selection
    seed: int = 0  # initialisation and batch order
    device: str = "cpu"  # "cpu", "cuda", "cuda:1", ...
    checkpoint_every: int = 100  # steps between mid-epoch checkpoints (and at every epoch end)
    eval_batch_size: int = 256  # reviews per evaluation batch (small enough for the scores to stay in cache)
    bucket: int = 50  # batches sorted by length within windows of this many batches (speed); 1 = off
    word_dropout: float = 0.3  # share of real tokens hidden in each training batch (regulariser; 0 = off)

    def __post_init__(self):
        for name in ("epochs", "batch_size", "checkpoint_every", "eval_batch_size", "bucket"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be finite and > 0, got {self.lr}")
        if self.weight_decay < 0 or self.clip_norm < 0 or self.patience < 0:
            raise ValueError("weight_decay, clip_norm and patience must be ≥ 0")
        if not 0.0 <= self.word_dropout < 1.0:
            raise ValueError(f"word_dropout must be in [0, 1), got {self.word_dropout}")
        if self.select_on not in ("hardmax", "softmax"):
            raise ValueError(f"select_on must be 'hardmax' or 'softmax', got {self.select_on!r}")


@dataclass(frozen=True)
class Evaluation:
    """Accuracy and loss of a model on a labelled split, under both attentions."""

    n: int  # number of reviews
    accuracy_softmax: float
    accuracy_hardmax: float
    loss_softmax: float  # mean BCE
    loss_hardmax: float
    agreement: float  # fraction of reviews where softmax and hardmax predict the same class
    seconds_hardmax: float  # wall time of the hardmax pass
    seconds_softmax: float


@dataclass(frozen=True)
class TrainResult:
    """What `train` returns; the same information is in `run_dir`."""

    run_dir: Path
    model: HardmaxClassifier  # with the selected (best-validation) weights
    history: list[dict] = field(repr=False)
    best_epoch: int  # 1-based
    best_val_accuracy: float
    stopped_early: bool


# --------------------------------------------------------------------------------------------
# Prediction and evaluation
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def predict(model: HardmaxClassifier, ids: Tensor, mask: Tensor, *, attention: str = "hardmax",
            batch_size: int = 256) -> Tensor:
    """Logits (N,) for ids/mask (N, n), in batches of reviews of similar length (fast; order kept)."""
    device = next(model.parameters()).device
    if ids.shape[0] == 0:
        return torch.empty(0, dtype=model.embedding.weight.dtype)
    was_training = model.training
    model.eval()
    order = torch.argsort(mask.sum(-1), stable=True)
    out = torch.empty(ids.shape[0], dtype=model.embedding.weight.dtype)
    for rows in torch.split(order, batch_size):
        width = int(mask[rows].sum(-1).max().item()) if not model.config.paper_padding else ids.shape[1]
        b_ids, b_mask = ids[rows, :], mask[rows, :]
        if not model.config.paper_padding:
            # Real tokens come first after left-alignment; truncating trailing padding is exact.
            b_ids, b_mask = left_align(b_ids, b_mask, width)
        out[rows] = model(b_ids.to(device), b_mask.to(device), attention=attention).float().cpu()
    model.train(was_training)
    return out


def left_align(ids: Tensor, mask: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """Move real tokens to the front (order kept) and cut to `width` columns."""
    order = torch.argsort((~mask).to(torch.uint8), dim=1, stable=True)[:, :width]
    return torch.gather(ids, 1, order), torch.gather(mask, 1, order)


def evaluate(model: HardmaxClassifier, split: LabelledSplit, *, batch_size: int = 256) -> Evaluation:
    """Accuracy, loss and softmax/hardmax agreement of `model` on `split`."""
    labels = split.labels.float()
    t0 = time.perf_counter()
    logits_h = predict(model, split.ids, split.mask, attention="hardmax", batch_size=batch_size)
    t1 = time.perf_counter()
    logits_s = predict(model, split.ids, split.mask, attention="softmax", batch_size=batch_size)
    t2 = time.perf_counter()
    pred_h, pred_s = logits_h > 0, logits_s > 0
    truth = labels > 0.5
    return Evaluation(
        n=int(labels.numel()),
        accuracy_softmax=float((pred_s == truth).float().mean()),
        accuracy_hardmax=float((pred_h == truth).float().mean()),
        loss_softmax=float(F.binary_cross_entropy_with_logits(logits_s, labels)),
        loss_hardmax=float(F.binary_cross_entropy_with_logits(logits_h, labels)),
        agreement=float((pred_h == pred_s).float().mean()),
        seconds_hardmax=t1 - t0,
        seconds_softmax=t2 - t1,
    )


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def epoch_batches(lengths: Tensor, *, batch_size: int, seed: int, epoch: int, bucket: int) -> list[Tensor]:
    """The batches (lists of review indices) of one epoch: a deterministic function of (seed, epoch).

    Reviews are shuffled, then sorted by length within windows of `bucket` batches so that a batch
    holds reviews of similar length (less padding work), and the batches are shuffled again.
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(lengths.numel(), generator=g)
    window = batch_size * bucket
    batches = []
    for chunk in torch.split(perm, window):
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches.extend(torch.split(chunk, batch_size))
    order = torch.randperm(len(batches), generator=g)
    return [batches[i] for i in order.tolist()]


def _config_record(model_config: ModelConfig, train_config: TrainConfig, data_info: dict | None) -> dict:
    from hardmax import __version__

    return {"hardmax_version": __version__, "model": model_config.to_dict(), "train": asdict(train_config),
            "data": data_info or {}}


def _compatible(saved: dict, current: dict) -> list[str]:
    """Differences that make a saved run incompatible with the current settings."""
    problems = []
    for section in ("model", "data"):
        a, b = saved.get(section, {}), current.get(section, {})
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                problems.append(f"{section}.{key}: saved {a.get(key)!r}, now {b.get(key)!r}")
    a, b = saved.get("train", {}), current.get("train", {})
    for key in sorted(set(a) | set(b)):
        # epochs and patience may be extended on resume; device and eval batch don't change the result.
        if key not in ("epochs", "patience", "device", "eval_batch_size") and a.get(key) != b.get(key):
            problems.append(f"train.{key}: saved {a.get(key)!r}, now {b.get(key)!r}")
    return problems


def train(
    train_split: LabelledSplit,
    val_split: LabelledSplit,
    *,
    model_config: ModelConfig,
    train_config: TrainConfig = TrainConfig(),
    run_dir: str | Path,
    resume: bool = False,
    data_info: dict | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a `HardmaxClassifier` with softmax attention and select it on validation under hardmax.

    Args:
        train_split, val_split: objects with `ids` (N, n) int64, `mask` (N, n) bool, `labels` (N,).
        model_config, train_config: settings.
        run_dir: directory for config, history, weights and checkpoints.
        resume: continue the run in `run_dir` from its last checkpoint (refused if the settings
            differ from the saved ones, except `epochs`/`patience`, which may be extended).
        data_info: JSON-able description of the data (settings, vocabulary size...), stored and
            compared on resume.
        progress: show tqdm progress bars.
    Returns:
        `TrainResult` with the best-validation model.
    """
    run_dir = Path(run_dir)
    for name, split in (("training", train_split), ("validation", val_split)):
        if split.ids.shape[0] == 0:
            raise ValueError(f"the {name} split is empty; model selection needs reviews in both "
                             "(e.g. val_fraction > 0)")
    device = torch.device(train_config.device)
    record = _config_record(model_config, train_config, data_info)
    ckpt_path = run_dir / "checkpoint.safetensors"
    if resume:
        if not ckpt_path.exists():
            raise CheckpointError(f"nothing to resume: {ckpt_path} does not exist")
        problems = _compatible(read_json(run_dir / "config.json"), record)
        if problems:
            raise CheckpointError(f"cannot resume {run_dir}: its settings differ: " + "; ".join(problems))
    elif ckpt_path.exists() or (run_dir / "model.safetensors").exists():
        raise CheckpointError(f"{run_dir} already holds a run; pass resume=True (--resume) or use a new directory")
    write_json(run_dir / "config.json", record)

    torch.manual_seed(train_config.seed)
    model = HardmaxClassifier(model_config).to(device)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=train_config.lr,
                                 weight_decay=train_config.weight_decay)
    state = {"epoch": 0, "batch": 0, "history": [], "best_val": -1.0, "best_epoch": 0, "bad_epochs": 0,
             "sums": [0.0, 0.0, 0, 0.0]}  # loss·n, correct, n, seconds within the current epoch
    if resume:
        tensors, meta = load_tensors(ckpt_path, device=device)
        model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        optimizer_from_tensors(optimizer, tensors, meta["optimizer"])
        state = meta["state"]

    lengths = train_split.mask.sum(-1)
    labels_all = train_split.labels.float()
    stopped_early = False
    while state["epoch"] < train_config.epochs:
        epoch = state["epoch"]
        if state["bad_epochs"] >= max(train_config.patience, 1):
            stopped_early = True
            break
        batches = epoch_batches(lengths, batch_size=train_config.batch_size, seed=train_config.seed,
                                epoch=epoch, bucket=train_config.bucket)
        model.train()
        bar = tqdm(total=len(batches), initial=state["batch"], desc=f"epoch {epoch + 1}/{train_config.epochs}",
                   disable=not progress, leave=False, unit="batch")
        t_start = time.perf_counter()
        for b in range(state["batch"], len(batches)):
            rows = batches[b]
            width = int(lengths[rows].max().item())
            ids, mask = left_align(train_split.ids[rows], train_split.mask[rows], width)
            if model_config.paper_padding:
                ids, mask = train_split.ids[rows], train_split.mask[rows]
            if train_config.word_dropout > 0:
                mask = word_dropout(mask, train_config.word_dropout, seed=train_config.seed, epoch=epoch, batch=b)
            ids, mask, y = ids.to(device), mask.to(device), labels_all[rows].to(device)
            logits = model(ids, mask, attention="softmax")
            loss = F.binary_cross_entropy_with_logits(logits, y)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"training diverged at epoch {epoch + 1}, batch {b}: loss {loss.item()}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if train_config.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), train_config.clip_norm)
            optimizer.step()
            sums = state["sums"]
            sums[0] += loss.item() * len(rows)
            sums[1] += int(((logits > 0) == (y > 0.5)).sum())
            sums[2] += len(rows)
            state["batch"] = b + 1
            bar.update(1)
            bar.set_postfix(loss=f"{sums[0] / sums[2]:.4f}", acc=f"{sums[1] / sums[2]:.4f}")
            if state["batch"] % train_config.checkpoint_every == 0 and state["batch"] < len(batches):
                sums[3] += time.perf_counter() - t_start
                t_start = time.perf_counter()
                _save_checkpoint(ckpt_path, model, optimizer, state)
        bar.close()
        sums = state["sums"]
        sums[3] += time.perf_counter() - t_start
        val = evaluate(model, val_split, batch_size=train_config.eval_batch_size)
        score = val.accuracy_hardmax if train_config.select_on == "hardmax" else val.accuracy_softmax
        entry = {"epoch": epoch + 1, "train_loss": sums[0] / sums[2], "train_accuracy": sums[1] / sums[2],
                 "val_loss_softmax": val.loss_softmax, "val_accuracy_softmax": val.accuracy_softmax,
                 "val_loss_hardmax": val.loss_hardmax, "val_accuracy_hardmax": val.accuracy_hardmax,
                 "val_agreement": val.agreement, "alpha": float(model.alpha.detach()),
                 "train_seconds": sums[3], "train_reviews_per_second": sums[2] / max(sums[3], 1e-9)}
        state["history"].append(entry)
        if score > state["best_val"]:
            state.update(best_val=score, best_epoch=epoch + 1, bad_epochs=0)
            save_tensors(run_dir / "model.safetensors", model.state_dict(),
                         {"epoch": epoch + 1, "val_accuracy": score, "config": record})
        else:
            state["bad_epochs"] += 1
        if progress:
            tqdm.write(f"epoch {epoch + 1:3d}  loss {entry['train_loss']:.4f}  train acc {entry['train_accuracy']:.4f}"
                       f"  val acc softmax {val.accuracy_softmax:.4f} hardmax {val.accuracy_hardmax:.4f}"
                       f"  α {entry['alpha']:.3f}  {entry['train_reviews_per_second']:.0f} reviews/s", file=sys.stderr)
        state.update(epoch=epoch + 1, batch=0, sums=[0.0, 0.0, 0, 0.0])
        write_json(run_dir / "history.json", state["history"])
        _save_checkpoint(ckpt_path, model, optimizer, state)
    best, _ = load_tensors(run_dir / "model.safetensors", device=device)
    model.load_state_dict(best)
    return TrainResult(run_dir=run_dir, model=model, history=state["history"], best_epoch=state["best_epoch"],
                       best_val_accuracy=state["best_val"], stopped_early=stopped_early)


def word_dropout(mask: Tensor, p: float, *, seed: int, epoch: int, batch: int) -> Tensor:
    """Hide a share p of the real tokens (a deterministic function of seed, epoch and batch, so that a
    resumed run sees the same masks); a review keeps at least its first token."""
    g = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_003 + batch)
    keep = mask & (torch.rand(mask.shape, generator=g) >= p)
    keep[:, 0] |= mask[:, 0]  # real tokens are left-aligned, so column 0 is real
    return keep


def _save_checkpoint(path: Path, model: HardmaxClassifier, optimizer: torch.optim.Optimizer, state: dict) -> None:
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    opt_tensors, opt_info = optimizer_to_tensors(optimizer)
    tensors.update(opt_tensors)
    save_tensors(path, tensors, {"state": state, "optimizer": opt_info})


def load_run(run_dir: str | Path, *, device: str = "cpu") -> tuple[HardmaxClassifier, dict]:
    """Load the selected model of a run directory: (model in eval mode, config record).

    Raises:
        CheckpointError: missing/corrupt files, another format version, or weights that do not match
            the saved configuration.
    """
    run_dir = Path(run_dir)
    record = read_json(run_dir / "config.json")
    try:
        model_config = ModelConfig(**record["model"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{run_dir / 'config.json'} has an incompatible model config ({e})") from None
    model = HardmaxClassifier(model_config).to(device)
    tensors, _ = load_tensors(run_dir / "model.safetensors", device=device)
    try:
        model.load_state_dict(tensors)
    except RuntimeError as e:
        raise CheckpointError(f"{run_dir / 'model.safetensors'} does not match its config: {e}") from None
    model.eval()
    return model, record
