"""Writing command output: progress lines on stderr, timings, text, arrays and JSON."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from hardmax.dynamics import Trajectory
from hardmax.io import atomic_write

# --------------------------------------------------------------------------------------------
# Output helpers.
# --------------------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(f"hardmax: {message}", file=sys.stderr, flush=True)


def _timed(what: str, make: Callable[[], list[Path]]) -> list[Path]:
    start = time.perf_counter()
    paths = make()
    _say(f"{what}: {', '.join(p.name for p in paths)} in {time.perf_counter() - start:.2f} s")
    return paths


def _summary(paths: list[Path], start: float) -> str:
    folder = paths[0].parent
    return f"wrote {len(paths)} files to {folder}/ in {time.perf_counter() - start:.1f} s"


def _save_npy(path: Path, trajectory: Trajectory) -> Path:
    """(layers + 1, n, d) positions; `np.save` to an open file, which keeps the temporary name."""
    tokens = trajectory.tokens.detach().cpu().numpy()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.save(f, tokens)

    return atomic_write(path, write)


def _jsonable(x):
    """Plain JSON values for configs and reports (dataclasses, tensors, arrays, paths); NaN -> None."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, torch.Tensor):
        return _jsonable(x.detach().cpu().tolist())
    if isinstance(x, np.ndarray | np.generic):
        return _jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, bool | int | str):
        return x
    return str(x)
