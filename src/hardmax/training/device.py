"""Where training and inference run: `resolve_device` (a torch device this machine has) and `set_threads`.

Used by `loop` (training, evaluation) and `run` (loading a run onto a device); torch-free checks of the
names are in `config` (`check_device_name`, `check_threads`).
"""

from __future__ import annotations

import torch

from hardmax.training.config import check_device_name, check_threads

__all__ = ["resolve_device", "set_threads"]


def resolve_device(name: str | torch.device) -> torch.device:
    """The torch device `name` ("cpu", "cuda", "cuda:1", "mps"), after checking that this machine has it.

    Raises:
        ValueError: a misspelt device, or one this machine (or this torch build) does not have.
    """
    if isinstance(name, torch.device):
        name = str(name)
    check_device_name(name)
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise ValueError(f"device {name!r}: no CUDA device is available (torch {torch.__version__}, "
                             f"{build}); use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r}: MPS is not available on this machine; use --device cpu")
    elif device.type == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise ValueError(f"device {name!r}: no XPU device is available; use --device cpu")
    return device


def set_threads(threads: int) -> None:
    """`torch.set_num_threads(threads)` for CPU work, after `check_threads` (1 to 4 × the CPUs here)."""
    torch.set_num_threads(check_threads(threads))
