"""The training loop of `HardmaxClassifier`, and prediction and evaluation: importable functions, no globals.

`train` fits the model with softmax attention (Adam, BCE-with-logits, gradient clipping), picks the
epoch with the best *validation* accuracy under exact hardmax (the mode the model is deployed in;
the test set is never looked at), stops early, and writes everything to a run directory (layout and
checks: `hardmax.training.run`), holding its lock while it writes.

Batches of an epoch are a deterministic function of (seed, epoch), so a run resumed from a
mid-epoch checkpoint replays exactly the batches an uninterrupted run would have seen, and ends
with bitwise the same weights on CPU.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from hardmax.dynamics import HARDMAX, AttentionRule
from hardmax.io import (
    CheckpointError,
    load_tensors,
    read_json,
    remove_stale_temp_files,
    save_tensors,
    write_json,
    write_text,
)
from hardmax.memory import require_memory
from hardmax.models import HardmaxClassifier, ModelConfig, WordClassifier, build_model
from hardmax.progress import progress as progress_bar
from hardmax.training.config import TrainConfig
from hardmax.training.device import resolve_device
from hardmax.training.run import (
    EpochRecord,
    config_record,
    lock_run,
    optimizer_from_tensors,
    optimizer_to_tensors,
    run_state,
    settings_differences,
    vocab_sha256,
)

if TYPE_CHECKING:
    from hardmax.data import Vocabulary

__all__ = ["Evaluation", "TrainResult", "epoch_batches", "evaluate", "initial_model", "left_align", "predict",
           "train", "word_dropout"]


class LabelledSplit(Protocol):
    ids: Tensor  # (N, n) int64 word ids
    mask: Tensor  # (N, n) bool, True = real token
    labels: Tensor  # (N,) class codes 0..k-1 (0/1: negative/positive for IMDb)


def predicted_classes(logits: Tensor) -> Tensor:
    """(N,) int64 classes from logits: (N,) one logit (two classes: logit > 0 is class 1) or (N, k) (argmax)."""
    return (logits > 0).long() if logits.dim() == 1 else logits.argmax(-1)


def class_probabilities(logits: Tensor) -> Tensor:
    """(N, k) the probability of each class: [1 − σ(l), σ(l)] for one logit (two classes), softmax for k logits."""
    if logits.dim() == 1:
        p1 = torch.sigmoid(logits)
        return torch.stack([1 - p1, p1], -1)
    return torch.softmax(logits, -1)


def class_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy: binary on one logit (the paper's), categorical on k logits."""
    if logits.dim() == 1:
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    return F.cross_entropy(logits, labels.long())


def macro_f1(truth: Tensor, predicted: Tensor, k: int) -> tuple[float, list[list[int]]]:
    """The macro-averaged F1 over k classes and the confusion matrix (rows: true class, columns: predicted)."""
    confusion = torch.bincount(truth.long() * k + predicted.long(), minlength=k * k).reshape(k, k)
    tp = confusion.diagonal().double()
    precision = tp / confusion.sum(0).double().clamp(min=1)
    recall = tp / confusion.sum(1).double().clamp(min=1)
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp))
    present = (confusion.sum(1) > 0) | (confusion.sum(0) > 0)  # classes absent from both sides do not count
    return float(f1[present].mean()) if bool(present.any()) else 0.0, confusion.tolist()


@dataclass(frozen=True)
class Evaluation:
    """Accuracy and loss of a model on a labelled split, under both attentions."""

    n: int  # number of reviews
    accuracy_softmax: float
    accuracy_hardmax: float
    loss_softmax: float  # mean cross-entropy (binary for two classes)
    loss_hardmax: float
    agreement: float  # fraction of reviews where softmax and hardmax predict the same class
    seconds_hardmax: float  # wall time of the hardmax pass
    seconds_softmax: float
    macro_f1_softmax: float = float("nan")  # the F1 of each class, averaged
    macro_f1_hardmax: float = float("nan")
    confusion_softmax: tuple = ()  # k × k counts, rows: true class, columns: predicted class
    confusion_hardmax: tuple = ()

    @classmethod
    def from_logits(cls, labels: Tensor, hardmax: Tensor, softmax: Tensor, *, seconds_hardmax: float,
                    seconds_softmax: float) -> Evaluation:
        """The evaluation of logits already computed under each attention — (N,) for two classes, (N, k) for k —
        for labels (N,) in 0..k-1."""
        k = 2 if hardmax.dim() == 1 else hardmax.shape[-1]
        truth = labels.long()
        pred_h, pred_s = predicted_classes(hardmax), predicted_classes(softmax)
        f1_h, confusion_h = macro_f1(truth, pred_h, k)
        f1_s, confusion_s = macro_f1(truth, pred_s, k)
        return cls(
            n=int(labels.numel()),
            accuracy_softmax=float((pred_s == truth).float().mean()),
            accuracy_hardmax=float((pred_h == truth).float().mean()),
            loss_softmax=float(class_loss(softmax.float(), truth)),
            loss_hardmax=float(class_loss(hardmax.float(), truth)),
            agreement=float((pred_h == pred_s).float().mean()),
            seconds_hardmax=seconds_hardmax,
            seconds_softmax=seconds_softmax,
            macro_f1_softmax=f1_s, macro_f1_hardmax=f1_h,
            confusion_softmax=tuple(map(tuple, confusion_s)), confusion_hardmax=tuple(map(tuple, confusion_h)),
        )


@dataclass(frozen=True)
class TrainResult:
    """What `train` returns; the same information is in `run_dir`."""

    run_dir: Path
    model: HardmaxClassifier  # with the selected (best-validation) weights
    history: tuple[EpochRecord, ...] = field(repr=False)  # one record per epoch, as in history.json
    best_epoch: int  # 1-based
    best_val_accuracy: float
    stopped_early: bool


# --------------------------------------------------------------------------------------------
# Prediction and evaluation
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def predict(model: WordClassifier, ids: Tensor, mask: Tensor, *, rule: AttentionRule | None = HARDMAX,
            batch_size: int = 256) -> Tensor:
    """Logits (N,) — (N, k) for a k-class model — for ids/mask (N, n), in batches of reviews of similar length
    (fast; order kept).

    rule: the attention, a `hardmax.dynamics` rule: exact hardmax by default, None for the model's training
        softmax (`model.softmax`)."""
    device = next(model.parameters()).device
    if ids.shape[0] == 0:
        return torch.empty(0, dtype=model.embedding.weight.dtype)
    was_training = model.training
    model.eval()
    order = torch.argsort(mask.sum(-1), stable=True)
    k = getattr(model.config, "classes", 2)
    out = torch.empty((ids.shape[0],) if k == 2 else (ids.shape[0], k), dtype=model.embedding.weight.dtype)
    for rows in torch.split(order, batch_size):
        width = int(mask[rows].sum(-1).max().item()) if not model.config.paper_padding else ids.shape[1]
        b_ids, b_mask = ids[rows, :], mask[rows, :]
        if not model.config.paper_padding:
            # Real tokens come first after left-alignment; truncating trailing padding is exact.
            b_ids, b_mask = left_align(b_ids, b_mask, width)
        out[rows] = model(b_ids.to(device), b_mask.to(device), rule).float().cpu()
    model.train(was_training)
    return out


def initial_model(model_config: ModelConfig, train_config: TrainConfig):
    """The weights `train` starts from: `build_model(model_config)` after seeding torch with train_config.seed
    (so measures at initialisation, e.g. `hardmax rate` on a CRATE run, see the run's own starting point)."""
    torch.manual_seed(train_config.seed)
    return build_model(model_config)


def left_align(ids: Tensor, mask: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """Move real tokens to the front (order kept) and cut to `width` columns."""
    order = torch.argsort((~mask).to(torch.uint8), dim=1, stable=True)[:, :width]
    return torch.gather(ids, 1, order), torch.gather(mask, 1, order)


def evaluate(model: HardmaxClassifier, split: LabelledSplit, *, batch_size: int = 256) -> Evaluation:
    """Accuracy, loss and softmax/hardmax agreement of `model` on `split`."""
    t0 = time.perf_counter()
    logits_h = predict(model, split.ids, split.mask, rule=HARDMAX, batch_size=batch_size)
    t1 = time.perf_counter()
    logits_s = predict(model, split.ids, split.mask, rule=model.softmax, batch_size=batch_size)
    t2 = time.perf_counter()
    return Evaluation.from_logits(split.labels, logits_h, logits_s, seconds_hardmax=t1 - t0, seconds_softmax=t2 - t1)


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


def train(
    train_split: LabelledSplit,
    val_split: LabelledSplit,
    *,
    model_config: ModelConfig,
    train_config: TrainConfig | None = None,
    run_dir: str | Path,
    resume: bool = False,
    data_info: dict | None = None,
    vocab: Vocabulary | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a `HardmaxClassifier` with softmax attention and select it on validation under hardmax.

    Args:
        train_split, val_split: objects with `ids` (N, n) int64, `mask` (N, n) bool, `labels` (N,).
        model_config, train_config: settings (train_config default: `TrainConfig()`).
        run_dir: directory for config, history, weights and checkpoints.
        resume: continue the run in `run_dir` from its last checkpoint (refused if the settings
            differ from the saved ones, except `epochs`/`patience`, which may be extended).
        data_info: JSON-able description of the data (settings, vocabulary size...), stored and
            compared on resume.
        vocab: the vocabulary the ids refer to; written to vocab.json, and its SHA-256 stored with the
            weights so that `load_run` refuses a vocab.json that differs.
        progress: show tqdm progress bars.
    Returns:
        `TrainResult` with the best-validation model.
    Raises:
        RunLockedError: another process is writing `run_dir`.
        CheckpointError: `run_dir` holds another run, or a checkpoint that `resume` cannot continue.
        FloatingPointError: the training loss became NaN or infinite.
        ValueError: an empty split, or a device this machine does not have.
    """
    run_dir = Path(run_dir)
    train_config = TrainConfig() if train_config is None else train_config
    for name, split in (("training", train_split), ("validation", val_split)):
        if split.ids.shape[0] == 0:
            raise ValueError(f"the {name} split is empty; model selection needs reviews in both (too few rows "
                             "for the fractions held out, or every review of it empty after cleaning)")
    if vocab is not None and len(vocab) != model_config.vocab_size:
        raise ValueError(f"the vocabulary has {len(vocab)} words, model_config.vocab_size is {model_config.vocab_size}")
    for name, split in (("training", train_split), ("validation", val_split)):
        top = int(split.labels.max()) if split.labels.numel() else 0
        if top >= model_config.classes or (split.labels.numel() and int(split.labels.min()) < 0):
            raise ValueError(f"the {name} labels reach class {top}, but the model has {model_config.classes} classes "
                             "(ModelConfig.classes): build it with the data's number of classes")
    device = resolve_device(train_config.device)
    longest = max(train_split.ids.shape[1], val_split.ids.shape[1])
    reviews = max(train_split.ids.shape[0], val_split.ids.shape[0])
    require_memory(model_config.training_bytes(batch_size=train_config.batch_size, max_len=longest,
                                               eval_batch_size=min(train_config.eval_batch_size, reviews)),
                   f"training d={model_config.d}, layers={model_config.layers}, batch_size={train_config.batch_size} "
                   f"on reviews of {longest} tokens with a vocabulary of {model_config.vocab_size:,} words",
                   device=device)
    with lock_run(run_dir):
        remove_stale_temp_files(run_dir)
        return _train_locked(train_split, val_split, model_config=model_config, train_config=train_config,
                             run_dir=run_dir, resume=resume, data_info=data_info, vocab=vocab, progress=progress,
                             device=device)


def _train_locked(train_split: LabelledSplit, val_split: LabelledSplit, *, model_config: ModelConfig,
                  train_config: TrainConfig, run_dir: Path, resume: bool, data_info: dict | None,
                  vocab: Vocabulary | None, progress: bool, device: torch.device) -> TrainResult:
    record = config_record(model_config, train_config, data_info)
    words_sha256 = None if vocab is None else vocab_sha256(vocab.words)
    ckpt_path = run_dir / "checkpoint.safetensors"
    header = {"config": record, "vocab_sha256": words_sha256}  # what every weights file is trained with
    state = run_state(run_dir)
    if resume:
        if state != "resumable":
            raise CheckpointError(f"nothing to resume in {run_dir}: it has no checkpoint.safetensors"
                                  + (" (the run stopped before its first checkpoint; train it anew)"
                                     if state == "unstarted" else ""))
        ckpt_tensors, ckpt_meta = load_tensors(ckpt_path, device=device)
        # The checkpoint's own record is what its weights were trained with; config.json may come from
        # another process (older checkpoints have no record: config.json is all there is).
        saved = ckpt_meta.get("config") or read_json(run_dir / "config.json")
        problems = settings_differences(saved, record)
        if "vocab_sha256" in ckpt_meta and ckpt_meta["vocab_sha256"] != words_sha256:
            problems.append("the vocabulary differs (words added, removed or reordered)")
        if problems:
            raise CheckpointError(f"cannot resume {run_dir}: its settings differ: " + "; ".join(problems))
    elif state in ("resumable", "trained"):  # "unstarted" (no weights yet) is replaced
        raise CheckpointError(f"{run_dir} already holds a run; pass resume=True or use a new directory")
    if vocab is not None:
        write_text(run_dir / "vocab.json", vocab.to_json())
    write_json(run_dir / "config.json", record)

    model = initial_model(model_config, train_config).to(device)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=train_config.lr,
                                 weight_decay=train_config.weight_decay)
    state = {"epoch": 0, "batch": 0, "history": [], "best_val": -1.0, "best_epoch": 0, "bad_epochs": 0,
             "sums": [0.0, 0.0, 0, 0.0]}  # loss·n, correct, n, seconds within the current epoch
    if resume:
        model.load_state_dict({k[6:]: v for k, v in ckpt_tensors.items() if k.startswith("model.")})
        optimizer_from_tensors(optimizer, ckpt_tensors, ckpt_meta["optimizer"])
        state = ckpt_meta["state"]

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
        bar = progress_bar(total=len(batches), initial=state["batch"], desc=f"epoch {epoch + 1}/{train_config.epochs}",
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
            logits = model(ids, mask, model.softmax)
            loss = class_loss(logits, y)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"training diverged at epoch {epoch + 1}, batch {b}: loss {loss.item()}; "
                                         "try a smaller learning rate (--lr) or gradient clipping (clip_norm)")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if train_config.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), train_config.clip_norm)
            optimizer.step()
            sums = state["sums"]
            sums[0] += loss.item() * len(rows)
            sums[1] += int((predicted_classes(logits) == y.long()).sum())
            sums[2] += len(rows)
            state["batch"] = b + 1
            bar.update(1)
            bar.set_postfix_str(f"loss={sums[0] / sums[2]:.4f}, acc={sums[1] / sums[2]:.4f}", refresh=False)
            if state["batch"] % train_config.checkpoint_every == 0 and state["batch"] < len(batches):
                sums[3] += time.perf_counter() - t_start
                t_start = time.perf_counter()
                _save_checkpoint(ckpt_path, model, optimizer, state, header)
        bar.close()
        sums = state["sums"]
        sums[3] += time.perf_counter() - t_start
        val = evaluate(model, val_split, batch_size=train_config.eval_batch_size)
        score = val.accuracy_hardmax if train_config.select_on == "hardmax" else val.accuracy_softmax
        entry = EpochRecord(
            epoch=epoch + 1, train_loss=sums[0] / sums[2], train_accuracy=sums[1] / sums[2],
            val_loss_softmax=val.loss_softmax, val_accuracy_softmax=val.accuracy_softmax,
            val_loss_hardmax=val.loss_hardmax, val_accuracy_hardmax=val.accuracy_hardmax,
            val_agreement=val.agreement, alpha=float(model.alpha.detach()),
            train_seconds=sums[3], train_reviews_per_second=sums[2] / max(sums[3], 1e-9)).to_dict()
        state["history"].append(entry)
        if score > state["best_val"]:
            state.update(best_val=score, best_epoch=epoch + 1, bad_epochs=0)
            save_tensors(run_dir / "model.safetensors", model.state_dict(),
                         {"epoch": epoch + 1, "val_accuracy": score, **header})
        else:
            state["bad_epochs"] += 1
        if progress:
            print(f"epoch {epoch + 1:3d}  loss {entry['train_loss']:.4f}  train acc {entry['train_accuracy']:.4f}"
                  f"  val acc softmax {val.accuracy_softmax:.4f} hardmax {val.accuracy_hardmax:.4f}"
                  f"  α {entry['alpha']:.3f}  {entry['train_reviews_per_second']:.0f} reviews/s", file=sys.stderr)
        state.update(epoch=epoch + 1, batch=0, sums=[0.0, 0.0, 0, 0.0])
        write_json(run_dir / "history.json", state["history"])
        _save_checkpoint(ckpt_path, model, optimizer, state, header)
    best, _ = load_tensors(run_dir / "model.safetensors", device=device)
    model.load_state_dict(best)
    history = tuple(EpochRecord.from_dict(entry) for entry in state["history"])
    return TrainResult(run_dir=run_dir, model=model, history=history, best_epoch=state["best_epoch"],
                       best_val_accuracy=state["best_val"], stopped_early=stopped_early)


def word_dropout(mask: Tensor, p: float, *, seed: int, epoch: int, batch: int) -> Tensor:
    """Hide a share p of the real tokens (a deterministic function of seed, epoch and batch, so that a
    resumed run sees the same masks); a review keeps at least its first token."""
    g = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_003 + batch)
    keep = mask & (torch.rand(mask.shape, generator=g) >= p)
    keep[:, 0] |= mask[:, 0]  # real tokens are left-aligned, so column 0 is real
    return keep


def _save_checkpoint(path: Path, model: HardmaxClassifier, optimizer: torch.optim.Optimizer, state: dict,
                     header: dict) -> None:
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    opt_tensors, opt_info = optimizer_to_tensors(optimizer)
    tensors.update(opt_tensors)
    save_tensors(path, tensors, {"state": state, "optimizer": opt_info, **header})
