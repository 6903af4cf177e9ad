"""Saving figures atomically (PNG, PDF, SVG, ...); GIFs are written by `figures.animate`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from hardmax.io import atomic_write

# --------------------------------------------------------------------------------------------
# Saving.
# --------------------------------------------------------------------------------------------


def save_figure(fig: Figure, path_stem: str | os.PathLike, formats: Sequence[str] = ("png", "pdf"), *,
                dpi: int = 150, tight: bool = False, close: bool = False) -> list[Path]:
    """Save `fig` as `path_stem.<format>` for each format, atomically (temp file + `os.replace`).

    Args:
        fig: the figure. path_stem: path without suffix (parent folders are created).
        formats: Matplotlib formats, e.g. ("png", "pdf", "svg"). dpi: resolution of raster formats.
        tight: crop to the drawn content (`bbox_inches="tight"`), for figures whose labels
            (long words, outside legends) reach past the canvas.
        close: close the figure once every format is written (also when a write fails), so that
            a loop saving many figures does not keep them all in memory.

    Returns:
        The paths written, in the order of `formats`.
    """
    if not formats:
        raise ValueError("save_figure needs at least one format")
    stem = Path(path_stem)
    options = {"dpi": dpi, "facecolor": "white", **({"bbox_inches": "tight"} if tight else {})}
    written = []
    try:
        for fmt in formats:
            target = stem.parent / f"{stem.name}.{fmt}"
            # The temporary file keeps the suffix, so Matplotlib knows the format.
            atomic_write(target, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, **options))
            written.append(target)
    finally:
        if close:
            import matplotlib.pyplot as plt  # only figures made with pyplot need closing; the rest never load it

            plt.close(fig)
    return written
