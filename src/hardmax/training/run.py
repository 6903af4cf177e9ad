"""`Run`: one trained run directory, read back whole and checked, and the lock that guards it while written.

    run_dir/config.json        settings: {"hardmax_version", "model", "train", "data"} (`config_record`)
    run_dir/vocab.json         the vocabulary the ids refer to (`hardmax.data.Vocabulary.to_json`)
    run_dir/history.json       one record per epoch (`EpochRecord`)
    run_dir/model.safetensors  the selected weights; its header holds the config record they were trained
                               with, the SHA-256 of the vocabulary's words and of the tensors themselves
    run_dir/checkpoint.safetensors   latest training state, for --resume (same header entries)
    run_dir/.lock              present while a process writes the directory (`lock_run`)

The files must agree with each other: `load_run` refuses, naming the file, a config.json whose model,
data or result-changing training settings differ from those stored with the weights, a vocab.json whose
words (added, removed or reordered) are not the ones trained with, weights whose bytes changed, and
non-finite weights. What is written, and when, is decided by `hardmax.training.loop.train`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from torch import Tensor

from hardmax.io import CheckpointError, load_tensors, read_json
from hardmax.models import HardmaxClassifier, ModelConfig, build_model
from hardmax.training.config import TrainConfig

if TYPE_CHECKING:
    from hardmax.data import DataConfig, Vocabulary

__all__ = ["LOCK_NAME", "EpochRecord", "Run", "RunLockedError", "RunState", "config_record", "load_run", "lock_run",
           "optimizer_from_tensors", "optimizer_to_tensors", "run_state", "settings_differences", "vocab_sha256"]

logger = logging.getLogger(__name__)

#: The lock file that keeps two processes from writing one run directory.
LOCK_NAME = ".lock"
# Training settings that may change between a run and its resumption (or be edited afterwards)
# without changing the weights a run selects.
RESUMABLE = frozenset({"epochs", "patience", "device", "eval_batch_size"})


class RunLockedError(CheckpointError):
    """Another process is writing the run directory."""


@dataclass(frozen=True, kw_only=True)
class EpochRecord:
    """One epoch of `history.json`: what training and validation measured."""

    epoch: int  # 1-based
    train_loss: float  # mean BCE over the epoch's batches (softmax attention, word dropout on)
    train_accuracy: float
    val_loss_softmax: float
    val_accuracy_softmax: float
    val_loss_hardmax: float
    val_accuracy_hardmax: float  # what model selection uses by default
    val_agreement: float  # share of validation reviews where softmax and hardmax agree
    alpha: float  # the learned step size at the end of the epoch
    train_seconds: float
    train_reviews_per_second: float

    @classmethod
    def from_dict(cls, entry: dict, *, source: str = "history.json") -> EpochRecord:
        """The record `to_dict` wrote; CheckpointError naming `source` when a field is missing or not a number."""
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if not isinstance(entry, dict) or name not in entry]
        if missing:
            raise CheckpointError(f"{source}: an epoch record lacks {', '.join(missing)}")
        try:
            return cls(epoch=int(entry["epoch"]), **{n: float(entry[n]) for n in names if n != "epoch"})
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{source}: epoch record {entry.get('epoch')!r} has a non-numeric value ({e})") \
                from None

    def to_dict(self) -> dict:
        """The record as plain values (`dataclasses.asdict`), an entry of history.json."""
        return asdict(self)


def config_record(model_config: ModelConfig, train_config: TrainConfig, data_info: dict | None) -> dict:
    """What config.json holds (and what the weights' header repeats): versions and every setting."""
    from hardmax.version import __version__

    return {"hardmax_version": __version__, "model": model_config.to_dict(), "train": asdict(train_config),
            "data": data_info or {}}


def _current_model_record(record: dict) -> dict:
    """A model record as this version writes it: old CRATE records ("layer", "crate_heads") rewritten."""
    if "layer" not in record and "crate_heads" not in record:
        return record
    try:
        return ModelConfig.from_record(record).to_dict()
    except (TypeError, ValueError):  # not a config this version can read: compared as it is
        return record


# Data entries added after runs were first recorded, with the value an older record means.
DATA_DEFAULTS = {"text_column": None, "label_column": None, "split_column": None, "group_column": None,
                 "label_names": ["negative", "positive"]}


def settings_differences(saved: dict, current: dict, *, names: tuple[str, str] = ("saved", "now")) -> list[str]:
    """Settings of two config records that make them different runs: every model and data entry, and the
    training entries except `RESUMABLE` ones. One "section.key: saved X, now Y" line per difference
    (`names` replaces "saved" and "now"). A CRATE model recorded by an earlier version ({"layer": "crate",
    "crate_heads": K}) is compared as the config it describes (`ModelConfig.from_record`)."""
    problems = []
    for section in ("model", "data", "train"):
        a, b = saved.get(section) or {}, current.get(section) or {}
        if section == "model":
            a, b = _current_model_record(a), _current_model_record(b)
        if section == "data" and a and b:  # runs recorded before tables existed are IMDb's two classes
            a, b = {**DATA_DEFAULTS, **a}, {**DATA_DEFAULTS, **b}
        for key in sorted(set(a) | set(b)):
            if key in ("table", "table_sha256") and section == "data":
                continue  # where the table was read: the same data may be moved (the settings and data sha decide)
            if (section != "train" or key not in RESUMABLE) and a.get(key) != b.get(key):
                problems.append(f"{section}.{key}: {names[0]} {a.get(key)!r}, {names[1]} {b.get(key)!r}")
    return problems


#: What a run directory holds: nothing, an unstarted run, a run to resume, or a trained run.
RunState = Literal["empty", "unstarted", "resumable", "trained"]


def run_state(run_dir: str | Path) -> RunState:
    """What `run_dir` holds: "empty" (nothing of a run), "unstarted" (config.json or vocab.json only: a run
    that stopped before its first checkpoint, which a new `train` replaces), "resumable" (a checkpoint:
    `train(..., resume=True)` continues it) or "trained" (selected weights without a checkpoint)."""
    run_dir = Path(run_dir)
    if (run_dir / "checkpoint.safetensors").exists():
        return "resumable"
    if (run_dir / "model.safetensors").exists():
        return "trained"
    if (run_dir / "config.json").exists() or (run_dir / "vocab.json").exists():
        return "unstarted"
    return "empty"


def vocab_sha256(words: Sequence[str]) -> str:
    """SHA-256 of a vocabulary's words in id order: adding, removing or reordering a word changes it."""
    return hashlib.sha256(json.dumps(list(words), ensure_ascii=False).encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# The lock.
# --------------------------------------------------------------------------------------------

_HELD: dict[Path, tuple[int, int]] = {}  # resolved run dir -> (owning thread id, depth)
_HELD_GUARD = threading.Lock()


@contextmanager
def lock_run(run_dir: str | Path) -> Iterator[Path]:
    """Hold `run_dir`'s lock (an exclusive `flock` on run_dir/.lock, which records the holder's pid).

    A second process (or thread) that asks for it gets `RunLockedError` at once, naming the holder; the
    same thread may nest `lock_run` calls (`reproduce` locks around `train`, which locks again). The
    kernel drops the lock when its holder dies, so a lock file left by a killed run is simply taken over.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    key = run_dir.resolve()
    me = threading.get_ident()
    with _HELD_GUARD:
        owner = _HELD.get(key)
        if owner is not None:
            if owner[0] != me:
                raise RunLockedError(f"{run_dir} is being written by another thread of this process")
            _HELD[key] = (me, owner[1] + 1)
    if owner is not None:
        try:
            yield key / LOCK_NAME
        finally:
            with _HELD_GUARD:
                _HELD[key] = (me, _HELD[key][1] - 1)
        return
    fd = _acquire(key / LOCK_NAME, run_dir)
    with _HELD_GUARD:
        _HELD[key] = (me, 1)
    try:
        yield key / LOCK_NAME
    finally:
        with _HELD_GUARD:
            del _HELD[key]
        # Unlink before unlocking: a process waiting on this inode then sees it is stale and starts over.
        (key / LOCK_NAME).unlink(missing_ok=True)
        os.close(fd)


def _acquire(path: Path, run_dir: Path) -> int:
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        logger.warning("cannot lock %s on this platform; do not train twice into it at once", run_dir)
        return os.open(os.devnull, os.O_RDONLY)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise RunLockedError(f"{run_dir} is being written by another process (pid {holder}, lock file "
                                 f"{path}); wait for it to finish or use another directory") from None
        except OSError as e:  # a file system without flock (some network mounts): go on unlocked
            logger.warning("cannot lock %s (%s); do not train twice into it at once", run_dir, e)
            return fd
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # the previous holder removed this file as we opened it: take the new one


# --------------------------------------------------------------------------------------------
# Reading a run back.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Run:
    """A trained run directory, read back and checked (`Run.load` / `load_run`).

    Attributes:
        path: the run directory.
        model: the selected weights in a `HardmaxClassifier`, in eval mode.
        record: config.json as written (`config_record`): hardmax_version, model, train, data.
        model_config, train_config: the record's model and training settings, typed.
        vocab: the run's `Vocabulary`, or None when the run was trained without one (synthetic data).
        history: one `EpochRecord` per epoch trained.
        best_epoch: the epoch whose weights `model` holds (1-based).
    """

    path: Path
    model: HardmaxClassifier = field(repr=False)
    record: dict = field(repr=False)
    model_config: ModelConfig
    train_config: TrainConfig
    vocab: Vocabulary | None = field(repr=False)
    history: tuple[EpochRecord, ...] = field(repr=False)
    best_epoch: int

    @property
    def data_config(self) -> DataConfig:
        """The data settings the run was trained on (`DataConfig.from_record`), to clean new text alike."""
        from hardmax.data import DataConfig

        return DataConfig.from_record(self.record.get("data") or {})

    @property
    def class_names(self) -> list[str]:
        """The run's class names in code order: those recorded with its table, else `default_class_names`."""
        from hardmax.models.config import default_class_names

        names = (self.record.get("data") or {}).get("label_names")
        return list(names) if names is not None and len(names) == self.model_config.classes \
            else default_class_names(self.model_config.classes)

    def encode(self, texts: Sequence[str]):
        """`texts` cleaned and encoded as the run's training reviews were (`hardmax.data.encode_texts` with the
        run's vocabulary, max_len, truncation and cleaning): an `EncodedTexts` of ids (n, max_len) and mask.

        Raises:
            ValueError: a run without a vocabulary; `hardmax.data.DataError` for a text empty after cleaning.
        """
        from hardmax.data import encode_texts

        if self.vocab is None:
            raise ValueError(f"{self.path} has no vocab.json (trained without a vocabulary): text cannot be encoded")
        data = self.data_config
        return encode_texts(list(texts), self.vocab, max_len=data.max_len, truncation=data.truncation,
                            **data.clean_options())

    def load_data(self, path: str | Path | None = None, *, progress: bool = True):
        """The data the run was trained on (`hardmax.data.load_imdb` with `data_config`; `path` the archive or
        folder, None: the usual search), checked to give the run's vocabulary, so ids mean the same words.

        Raises:
            ValueError: the data's vocabulary is not the run's (other data, or other settings).
        """
        from hardmax.data import load_imdb

        record = self.record.get("data") or {}
        recorded = record.get("table")
        if path is None and recorded is not None:  # a run trained on the user's table reads that table again
            if not Path(recorded).is_file():
                raise ValueError(f"{self.path} was trained on {recorded}, which is gone: pass --data FILE")
            path = recorded
        data = load_imdb(replace(self.data_config, path=path), progress=progress)
        trained_on = self.class_names
        if list(data.label_names) != trained_on:  # the most specific complaint first
            raise ValueError(f"{self.path} was trained on the labels {', '.join(map(str, trained_on))}; this data has "
                             f"{', '.join(data.label_names)}")
        if record.get("table_sha256"):
            from hardmax.data.splits import file_sha256

            # the SHA-256 of the very bytes the rows were parsed from (never a second read the file may differ in)
            if (data.stats.sha256 or file_sha256(Path(data.config.path).expanduser())) != record["table_sha256"]:
                raise ValueError(f"{data.config.path} is not the table {self.path} was trained on (its bytes differ): "
                                 "its seeded test rows would not be the run's")
        same = (len(data.vocab) == self.model_config.vocab_size if self.vocab is None
                else list(data.vocab.words) == list(self.vocab.words))
        if not same:
            raise ValueError(f"the data's vocabulary ({len(data.vocab)} words) differs from the run's "
                             f"({self.model_config.vocab_size}); pass the same data the run was trained on")
        return data

    @classmethod
    def load(cls, run_dir: str | Path, *, device: str = "cpu") -> Run:
        """Read `run_dir` and check that its files agree with each other (see the module docstring).

        Raises:
            CheckpointError: a missing or damaged file, another format version, or a file that disagrees
                with the weights; the message names the file.
        """
        from hardmax.training.device import resolve_device

        run_dir = Path(run_dir)
        torch_device = resolve_device(device)
        config_path, weights_path = run_dir / "config.json", run_dir / "model.safetensors"
        record = read_json(config_path)
        if not isinstance(record, dict) or not isinstance(record.get("model"), dict):
            raise CheckpointError(f"{config_path} has no model settings")
        try:
            model_config = ModelConfig.from_record(record["model"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{config_path} has an incompatible model config ({e})") from None
        try:
            known = {f.name for f in fields(TrainConfig)}
            train_config = TrainConfig(**{k: v for k, v in (record.get("train") or {}).items() if k in known})
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{config_path} has invalid training settings ({e})") from None
        tensors, meta = load_tensors(weights_path, device=torch_device)
        trained_with = meta.get("config")
        if isinstance(trained_with, dict):
            problems = settings_differences(trained_with, record, names=("weights trained with", "config.json says"))
            if problems:
                raise CheckpointError(f"{weights_path} does not match its config {config_path}: "
                                      + "; ".join(problems) + "; restore config.json or re-train")
        for name, t in tensors.items():
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise CheckpointError(f"{weights_path} holds non-finite weights (NaN or inf in {name}); "
                                      "re-train or restore the file")
        vocab = _read_vocab(run_dir, meta, model_config)
        model = build_model(model_config).to(torch_device)
        try:
            model.load_state_dict(tensors)
        except RuntimeError as e:
            message = " ".join(str(e).split())
            raise CheckpointError(f"{weights_path} does not match its config: {message}") from None
        model.eval()
        history_path = run_dir / "history.json"
        entries = read_json(history_path) if history_path.exists() else []
        if not isinstance(entries, list):
            raise CheckpointError(f"{history_path} is not a list of epoch records")
        history = tuple(EpochRecord.from_dict(e, source=str(history_path)) for e in entries)
        return cls(path=run_dir, model=model, record=record, model_config=model_config, train_config=train_config,
                   vocab=vocab, history=history, best_epoch=int(meta.get("epoch", 0)))


def _read_vocab(run_dir: Path, meta: dict, model_config: ModelConfig) -> Vocabulary | None:
    """vocab.json, checked against the words' SHA-256 stored with the weights (or, for runs written before
    it was stored, against the embedding's size only)."""
    path = run_dir / "vocab.json"
    expected = meta.get("vocab_sha256")
    if not path.exists():
        if expected is not None:
            raise CheckpointError(f"{path} is missing; the weights were trained with a vocabulary")
        return None
    from hardmax.data import Vocabulary

    try:
        vocab = Vocabulary.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path} is not a readable vocabulary ({' '.join(str(e).split())})") from None
    if expected is not None and vocab_sha256(vocab.words) != expected:
        raise CheckpointError(f"{path} disagrees with the weights: its {len(vocab)} words are not the ones "
                              f"the model was trained with (words added, removed or reordered); "
                              "restore vocab.json or re-train")
    if len(vocab) != model_config.vocab_size:
        raise CheckpointError(f"{path} has {len(vocab)} words but the model embeds {model_config.vocab_size}; "
                              "restore vocab.json or re-train")
    if expected is None:
        logger.warning("%s: this run predates vocabulary checksums; only its size could be checked", path)
    return vocab


def load_run(run_dir: str | Path, *, device: str = "cpu") -> Run:
    """`Run.load(run_dir, device=device)`: the selected model of a run directory with its settings,
    vocabulary and history, after checking that the files agree."""
    return Run.load(run_dir, device=device)


def optimizer_to_tensors(optimizer: torch.optim.Optimizer, prefix: str = "optim.") -> tuple[dict, dict]:
    """Split an optimizer state_dict into tensors (for safetensors) and JSON-able scalars."""
    state = optimizer.state_dict()
    tensors, scalars = {}, {}
    for pid, st in state["state"].items():
        for key, value in st.items():
            if isinstance(value, Tensor):
                tensors[f"{prefix}{pid}.{key}"] = value
            else:
                scalars[f"{pid}.{key}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_tensors(optimizer: torch.optim.Optimizer, tensors: dict[str, Tensor], info: dict,
                           prefix: str = "optim.") -> None:
    """Inverse of `optimizer_to_tensors`: load the state into `optimizer` in place."""
    state: dict[int, dict] = {}
    for name, value in tensors.items():
        if name.startswith(prefix):
            pid, key = name[len(prefix):].split(".", 1)
            state.setdefault(int(pid), {})[key] = value
    for name, value in info["scalars"].items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = value
    optimizer.load_state_dict({"state": state, "param_groups": info["param_groups"]})
