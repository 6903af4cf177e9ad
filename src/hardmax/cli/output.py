"""Writing command output: progress lines on stderr, summaries (JSON values: `hardmax.io.to_jsonable`).

numpy and torch are imported inside the functions that need them, so that building the parser
(`hardmax --help`) stays fast.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

__all__ = ["say", "summary"]

# --------------------------------------------------------------------------------------------
# Output helpers.
# --------------------------------------------------------------------------------------------


def say(message: str) -> None:
    """One progress or timing line on stderr (stdout is kept for tables). On a terminal it goes through tqdm, which
    clears a progress bar drawn meanwhile (a sweep's, from another thread) and draws it again under the line."""
    if getattr(sys.stderr, "isatty", lambda: False)():
        from tqdm.auto import tqdm

        tqdm.write(f"hardmax: {message}", file=sys.stderr)
        sys.stderr.flush()
        return
    print(f"hardmax: {message}", file=sys.stderr, flush=True)


def summary(paths: list[Path], start: float) -> str:
    """"wrote N files to DIR/ in T s"."""
    folder = paths[0].parent
    return f"wrote {len(paths)} files to {folder}/ in {time.perf_counter() - start:.1f} s"
