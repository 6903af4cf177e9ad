"""Saving figures and animations atomically (PNG, PDF, GIF)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from matplotlib.figure import Figure

# --------------------------------------------------------------------------------------------
# Saving.
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target` (same suffix, so writers know the format); on success
    rename it onto `target`, on failure delete it. Readers never see a half-written file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def save_figure(fig: Figure, path_stem: str | os.PathLike, formats: Sequence[str] = ("png", "pdf"), *,
                dpi: int = 150) -> list[Path]:
    """Save `fig` as `path_stem.<format>` for each format, atomically (temp file + `os.replace`).

    Args:
        fig: the figure. path_stem: path without suffix (parent folders are created).
        formats: Matplotlib formats, e.g. ("png", "pdf", "svg"). dpi: resolution of raster formats.

    Returns:
        The paths written, in the order of `formats`.
    """
    if not formats:
        raise ValueError("save_figure needs at least one format")
    stem = Path(path_stem)
    written = []
    for fmt in formats:
        target = stem.parent / f"{stem.name}.{fmt}"
        with _atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, dpi=dpi, facecolor="white")
        written.append(target)
    return written
