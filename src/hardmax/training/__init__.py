"""Training, evaluation and run directories of the sentiment classifier.

    config.py   `TrainConfig` (no torch: the CLI builds its options from it quickly)
    loop.py     `train`, `evaluate`, `predict`, and the pieces of the loop (`epoch_batches`, `left_align`,
                `word_dropout`)
    device.py   `resolve_device` (a torch device this machine has), `set_threads`
    run.py      `Run` / `load_run` (a run directory read back and checked), `run_state` (what a directory
                holds: empty, unstarted, resumable, trained), `lock_run`, `EpochRecord`

Names are imported on first use (PEP 562 `__getattr__`), so `from hardmax.training.config import
TrainConfig` and `hardmax.training.TrainConfig` do not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hardmax.lazy import lazy_exports

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "TrainConfig": "hardmax.training.config",
    "check_device_name": "hardmax.training.config",
    "Evaluation": "hardmax.training.loop",
    "TrainResult": "hardmax.training.loop",
    "epoch_batches": "hardmax.training.loop",
    "evaluate": "hardmax.training.loop",
    "initial_model": "hardmax.training.loop",
    "left_align": "hardmax.training.loop",
    "predict": "hardmax.training.loop",
    "resolve_device": "hardmax.training.device",
    "set_threads": "hardmax.training.device",
    "train": "hardmax.training.loop",
    "word_dropout": "hardmax.training.loop",
    "EpochRecord": "hardmax.training.run",
    "Run": "hardmax.training.run",
    "RunLockedError": "hardmax.training.run",
    "config_record": "hardmax.training.run",
    "load_run": "hardmax.training.run",
    "lock_run": "hardmax.training.run",
    "RunState": "hardmax.training.run",
    "run_state": "hardmax.training.run",
    "settings_differences": "hardmax.training.run",
    "vocab_sha256": "hardmax.training.run",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from hardmax.training.config import TrainConfig, check_device_name  # noqa: F401
    from hardmax.training.device import resolve_device, set_threads  # noqa: F401
    from hardmax.training.loop import (  # noqa: F401
        Evaluation,
        TrainResult,
        epoch_batches,
        evaluate,
        initial_model,
        left_align,
        predict,
        train,
        word_dropout,
    )
    from hardmax.training.run import (  # noqa: F401
        EpochRecord,
        Run,
        RunLockedError,
        RunState,
        config_record,
        load_run,
        lock_run,
        run_state,
        settings_differences,
        vocab_sha256,
    )
