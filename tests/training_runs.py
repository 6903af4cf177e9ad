"""The reference training shared by tests/test_training_{loop,run}.py: the synthetic corpus's splits, the
settings, `run` (one call of `train`) and copies of a finished run. The fixtures `splits` and `trained` that
build them once per session are in conftest.py.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import torch
from corpus import train_val
from safetensors.torch import save_file

from hardmax import ModelConfig, TrainConfig
from hardmax.dynamics import Hardmax
from hardmax.io import load_tensors
from hardmax.training import train

DATA_INFO = {"corpus": "tests/corpus.py", "seed": 0}


# The two rules of a classifier by the names the tests are parametrised with.
ATTENTION = {"softmax": None, "hardmax": Hardmax()}


def model_config(splits, **changes) -> ModelConfig:
    return ModelConfig(**{"vocab_size": splits[0].vocab_size, "d": 4, "layers": 2, **changes})


# 20 steps per epoch, a checkpoint every 2 steps: a kill lands in the middle of an epoch.
TRAIN = TrainConfig(epochs=3, batch_size=16, lr=0.05, checkpoint_every=2, seed=0)


def training_splits():
    """The synthetic corpus's train and validation splits (320 and 160 reviews)."""
    return train_val(320, 160, seed=0)


def run(splits, run_dir, *, resume=False, data_info=DATA_INFO, model_changes=None, **train_changes):
    return train(*splits, model_config=model_config(splits, **(model_changes or {})),
                 train_config=replace(TRAIN, **train_changes), run_dir=run_dir, resume=resume,
                 data_info=data_info, progress=False)


def copy_run(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained.run_dir, tmp_path / "copy"))


def assert_same_tensors(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


def other_version(path: Path) -> None:
    """Rewrite a hardmax safetensors file as if a future format version had written it."""
    tensors, meta = load_tensors(path)
    save_file(tensors, str(path), metadata={"hardmax": json.dumps({**meta, "format": 999})})
