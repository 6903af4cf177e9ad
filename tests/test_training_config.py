"""Tests of `hardmax.training.config`: `TrainConfig`'s one-line refusals (each names its field) and its
module imported without torch.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from hardmax import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")  # bitwise comparisons: see conftest.one_thread


@pytest.mark.parametrize("changes", [{"epochs": 0}, {"batch_size": 0}, {"checkpoint_every": 0}, {"lr": 0.0},
                                     {"lr": float("nan")}, {"weight_decay": -1.0}, {"clip_norm": -1.0},
                                     {"patience": -1}, {"select_on": "both"}])
def test_train_config_validation(changes):
    with pytest.raises(ValueError, match=next(iter(changes))):  # the message names the field
        TrainConfig(**changes)


@pytest.mark.parametrize("p", [1.0, 1.5, -0.1])
def test_word_dropout_must_be_below_one(p):
    with pytest.raises(ValueError, match=r"word_dropout must be in \[0, 1\)"):
        TrainConfig(word_dropout=p)


def test_train_config_imports_without_torch():
    """The CLI builds its options from TrainConfig: its module, and the package's lazy name, stay torch-free."""
    code = ("import sys; from hardmax.training.config import TrainConfig; import hardmax.training as t; "
            "t.TrainConfig(lr=0.1); assert 'torch' not in sys.modules, 'torch imported'; "
            "t.load_run; assert 'torch' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
