"""Files: atomic writes, checked safetensors tensors + JSON, and the library's one JSON spelling.

No pickles: tensors are safetensors (with a SHA-256 of their bytes in the header), everything else is
JSON (`to_jsonable`). Every file is written to a temporary file in the same directory and moved into
place with `os.replace`, so a process killed at any instant (kill -9 included) leaves either the old
file or the new one, never half. The temporary file itself is removed on any exception, Ctrl-C included, and on
SIGTERM (whose default action would end the process with the file left behind: `atomic_write` turns it into an
exit that cleans up first); only kill -9 or a power cut can leave one, and `remove_stale_temp_files` finds those.
What a run directory holds is `hardmax.training.run`'s business.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import Tensor

from hardmax.terminate import sigterm_exits

__all__ = [
    "FORMAT_VERSION",
    "CheckpointError",
    "atomic_write",
    "load_tensors",
    "read_json",
    "remove_stale_temp_files",
    "save_tensors",
    "tensors_sha256",
    "to_jsonable",
    "write_json",
    "write_text",
]

FORMAT_VERSION = 1  #: bump when the layout of a run directory changes

logger = logging.getLogger(__name__)

# The name `atomic_write` gives its temporary file: "." + stem + "." + mkstemp's 8 random characters +
# ".tmp" + the target's suffix. A process killed between mkstemp and os.replace leaves one behind.
_TEMP_NAME = re.compile(r"\..+\.[A-Za-z0-9_]{8}\.tmp(\.[^.]+)?")


class CheckpointError(ValueError):
    """A checkpoint or run directory is missing, corrupt, or from an incompatible version/config."""


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp_path)`` then move the temporary file onto `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary name keeps the target's extension: some writers (Pillow) pick the format from it.
    with sigterm_exits():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
        try:
            os.close(fd)
            write(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual permissions
            os.replace(tmp, path)
        except BaseException:  # any error, Ctrl-C, SIGTERM (`sigterm_exits`): no temporary file stays
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return path


def remove_stale_temp_files(directory: str | Path, *, older_than: float = 0.0) -> list[Path]:
    """Delete the temporary files that writes killed before their `os.replace` left in `directory`.

    A live writer's temporary file has the same name pattern, so this is only safe while no other
    process writes `directory` (a run directory under its lock), or, where nothing is locked (the data
    cache), for files last modified more than `older_than` seconds ago. Returns the paths removed.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    now = time.time()
    for entry in directory.iterdir():
        if _TEMP_NAME.fullmatch(entry.name) and entry.is_file():
            try:
                if now - entry.stat().st_mtime < older_than:
                    continue
                entry.unlink()
            except FileNotFoundError:  # its writer finished or another cleaner was first
                continue
            removed.append(entry)
    if removed:
        logger.warning("removed %d temporary file(s) left in %s by an interrupted write", len(removed), directory)
    return removed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8), atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def to_jsonable(x):
    """Plain JSON values (the one JSON spelling of the library): an object with ``to_dict()`` gives that,
    dataclasses their fields, tensors and arrays nested lists, paths strings, and NaN/±inf become None
    (JSON has no such numbers). Used by every `to_dict`, the command line and the explorer."""
    if hasattr(x, "to_dict") and callable(x.to_dict) and not isinstance(x, type):
        return to_jsonable(x.to_dict())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: to_jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, Tensor):
        return to_jsonable(x.detach().cpu().tolist())
    if type(x).__module__ == "numpy" and hasattr(x, "tolist"):  # array or scalar
        return to_jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, bool | int | str):
        return x
    return str(x)


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


def tensors_sha256(tensors: dict[str, Tensor]) -> str:
    """SHA-256 of named tensors: names, dtypes, shapes and bytes, in name order (~2 ms per MB)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_tensors(path: str | Path, tensors: dict[str, Tensor], metadata: dict | None = None) -> Path:
    """Save tensors as safetensors (atomically), with a JSON `metadata` dict stored in the header.

    The header also holds the SHA-256 of the tensors (`tensors_sha256`), which `load_tensors` checks:
    a flipped bit or an edited weight is refused instead of being evaluated.

    Raises:
        OSError: the file cannot be written (disk full, no permission); nothing is left behind.
    """
    path = Path(path)
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    meta = {"hardmax": json.dumps({"format": FORMAT_VERSION, **(metadata or {})}, default=_json_default),
            "hardmax.sha256": tensors_sha256(tensors)}

    def write(tmp: str) -> None:
        try:
            save_file(tensors, tmp, metadata=meta)
        except SafetensorError as e:  # the Rust writer's I/O errors (ENOSPC, EFBIG...) are not OSErrors
            code = errno.ENOSPC if "StorageFull" in str(e) or "No space" in str(e) else errno.EIO
            raise OSError(code, f"could not write {path} ({' '.join(str(e).split())})") from None

    return atomic_write(path, write)


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
            header = f.metadata() or {}
            raw, stored = header.get("hardmax"), header.get("hardmax.sha256")
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{path} is not a readable safetensors file ({e})") from None
    if raw is None:
        raise CheckpointError(f"{path} was not written by hardmax (no 'hardmax' metadata)")
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is damaged: its 'hardmax' metadata is not JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"{path} has checkpoint format {found}, this hardmax reads "
                              f"format {FORMAT_VERSION}; retrain or use the matching hardmax version")
    # Files written before the checksum existed have none; they are read as before.
    if stored is not None and stored != tensors_sha256(tensors):
        raise CheckpointError(f"{path} is damaged or was edited: its tensors do not match the SHA-256 "
                              "stored with them; re-train or restore the file")
    return tensors, meta
