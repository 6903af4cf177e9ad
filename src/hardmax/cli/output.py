"""Writing command output: progress lines on stderr, timings, text, arrays and JSON.

numpy and torch are imported inside the functions that need them, so that building the parser
(`hardmax --help`) stays fast.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["jsonable", "save_npy", "say", "summary", "timed"]

# --------------------------------------------------------------------------------------------
# Output helpers.
# --------------------------------------------------------------------------------------------


def say(message: str) -> None:
    """One progress or timing line on stderr (stdout is kept for tables)."""
    print(f"hardmax: {message}", file=sys.stderr, flush=True)


def timed(what: str, make: Callable[[], list[Path]]) -> list[Path]:
    """Run `make` (which writes files), say what it wrote and how long it took."""
    start = time.perf_counter()
    paths = make()
    say(f"{what}: {', '.join(p.name for p in paths)} in {time.perf_counter() - start:.2f} s")
    return paths


def summary(paths: list[Path], start: float) -> str:
    """"wrote N files to DIR/ in T s"."""
    folder = paths[0].parent
    return f"wrote {len(paths)} files to {folder}/ in {time.perf_counter() - start:.1f} s"


def save_npy(path: Path, trajectory) -> Path:
    """A trajectory's (layers + 1, n, d) positions as .npy; `np.save` to an open file keeps the temporary name."""
    import numpy as np

    from hardmax.io import atomic_write

    tokens = trajectory.tokens.detach().cpu().numpy()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.save(f, tokens)

    return atomic_write(path, write)


def jsonable(x):
    """`hardmax.io.to_jsonable` (the library's one JSON spelling)."""
    from hardmax.io import to_jsonable

    return to_jsonable(x)
