"""Run directories and checkpoints: safetensors weights + JSON, written atomically.

No pickles: weights and optimizer moments are safetensors, everything else is JSON. Every file is
written to a temporary file in the same directory and moved into place with `os.replace`, so a run
killed at any instant (kill -9 included) leaves either the old file or the new one, never half.
What is saved is decided by `hardmax.training`; this module only knows how to write and read it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import Tensor

__all__ = [
    "FORMAT_VERSION",
    "CheckpointError",
    "atomic_write",
    "load_tensors",
    "optimizer_from_tensors",
    "optimizer_to_tensors",
    "read_json",
    "save_tensors",
    "write_json",
    "write_text",
]

FORMAT_VERSION = 1  # bump when the layout of a run directory changes


class CheckpointError(ValueError):
    """A checkpoint or run directory is missing, corrupt, or from an incompatible version/config."""


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` then move the temporary file onto `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary name keeps the target's extension: some writers (Pillow) pick the format from it.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8), atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: str | Path, obj) -> Path:
    """Write `obj` as indented JSON, atomically."""
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(x):
    if isinstance(x, Tensor):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"cannot write {type(x).__name__} to JSON")


def read_json(path: str | Path) -> dict:
    """Read a JSON file, raising CheckpointError with the path if it is missing or corrupt."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON ({e})") from None


def save_tensors(path: str | Path, tensors: dict[str, Tensor], metadata: dict | None = None) -> Path:
    """Save tensors as safetensors (atomically), with a JSON `metadata` dict stored in the header."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    meta = {"hardmax": json.dumps({"format": FORMAT_VERSION, **(metadata or {})}, default=_json_default)}
    return atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))


def load_tensors(path: str | Path, device: str | torch.device = "cpu") -> tuple[dict[str, Tensor], dict]:
    """Load a file written by `save_tensors`: (tensors, metadata).

    Raises:
        CheckpointError: missing or corrupt file, or a file from another format version.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    try:
        # One open for tensors and metadata: a writer may replace the file between two opens, and
        # the tensors of one save must never be paired with the metadata of the next.
        with safe_open(str(path), framework="pt", device=str(device)) as f:
            raw = (f.metadata() or {}).get("hardmax")
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file ({e})") from None
    if raw is None:
        raise CheckpointError(f"{path} was not written by hardmax (no 'hardmax' metadata)")
    meta = json.loads(raw)
    if meta.get("format") != FORMAT_VERSION:
        raise CheckpointError(f"{path} has checkpoint format {meta.get('format')}, this hardmax reads "
                              f"format {FORMAT_VERSION}; retrain or use the matching hardmax version")
    return tensors, meta


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
