"""Saving figures atomically (PNG, PDF, SVG, ...) and animations as GIFs (`save_gif`, used by every animation)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.figure import Figure

from hardmax.io import atomic_write

__all__ = ["MAX_FPS", "check_fps", "save_figure", "save_gif"]

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


#: GIF frame delays are whole hundredths of a second, and browsers show delays under 2/100 s as 1/10 s:
#: more than 50 frames per second cannot be shown.
MAX_FPS = 50


def check_fps(fps: int) -> int:
    """`fps` as an int, or ValueError unless it is an integer in 1..MAX_FPS."""
    if isinstance(fps, bool) or not isinstance(fps, int) or not 1 <= fps <= MAX_FPS:
        raise ValueError(f"fps must be an integer from 1 to {MAX_FPS} (GIF delays are hundredths of a second), "
                         f"got {fps!r}")
    return fps


def save_gif(fig: Figure, draw: Callable[[int], None], frames: int, path: str | os.PathLike, *, fps: int = 8,
             hold: float = 0.5, dpi: int = 90) -> Path:
    """Write an animation of `frames` frames as a GIF, atomically: ``draw(k)`` draws frame k on `fig`.

    Every frame is shown 1/fps s, the last one `hold` s longer: a duration, so memory and time do not
    grow with `fps` (frames are rendered once each, at `dpi`, and quantised by Pillow).

    Returns:
        The path written.
    """
    from PIL import Image

    check_fps(fps)
    if frames < 1:
        raise ValueError(f"an animation needs at least one frame, got {frames}")
    if not 0 <= hold <= 60:
        raise ValueError(f"hold must be between 0 and 60 seconds, got {hold}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(dpi)
    images = []
    for k in range(frames):
        draw(k)
        canvas.draw()
        images.append(Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert("RGB")
                      .quantize(colors=256, method=Image.Quantize.MEDIANCUT))
    step = 1000 / fps
    durations = [round(step)] * (frames - 1) + [round(step + 1000 * hold)]
    return atomic_write(Path(path), lambda tmp: images[0].save(tmp, format="GIF", save_all=True,
                                                               append_images=images[1:], duration=durations,
                                                               loop=0, disposal=1))
