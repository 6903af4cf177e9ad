"""Tests of `hardmax.plots.save`: `save_figure` writes each format atomically (no temporary file left, a
failed format leaves only the formats written before it); `save_gif` (each frame drawn once, the last held, bad
settings refused before anything is written) and `check_fps`."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from PIL import Image
from plots_cases import file_names

from hardmax.plots import plot_layers, save_figure
from hardmax.plots.save import MAX_FPS, check_fps, save_gif


def test_save_figure_writes_each_format_atomically(tmp_path, run2d):
    fig = plot_layers(run2d, (0, 8))
    written = save_figure(fig, tmp_path / "sub" / "fig.v1", formats=("png", "pdf", "svg"))
    assert [p.name for p in written] == ["fig.v1.png", "fig.v1.pdf", "fig.v1.svg"]
    assert file_names(tmp_path / "sub") == ["fig.v1.pdf", "fig.v1.png", "fig.v1.svg"]  # no temporary files
    assert all(p.stat().st_size > 1000 for p in written)
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written[1].read_bytes()[:5] == b"%PDF-"
    save_figure(fig, tmp_path / "sub" / "fig.v1", formats=("png",))  # overwriting is fine
    assert file_names(tmp_path / "sub") == ["fig.v1.pdf", "fig.v1.png", "fig.v1.svg"]


def test_failed_save_leaves_nothing_behind(tmp_path, run2d):
    fig = plot_layers(run2d, (0,))
    with pytest.raises(ValueError):
        save_figure(fig, tmp_path / "fig", formats=("png", "no-such-format"))
    assert file_names(tmp_path) == ["fig.png"]


def test_save_gif_writes_every_frame_atomically(tmp_path):
    fig = Figure(figsize=(1, 1))
    ax = fig.add_subplot()
    drawn = []

    def draw(k):
        drawn.append(k)
        ax.clear()
        ax.plot([0, 1], [0, k])

    path = save_gif(fig, draw, 3, tmp_path / "anim.gif", fps=10, hold=0.2, dpi=20)
    assert path == tmp_path / "anim.gif" and drawn == [0, 1, 2] and file_names(tmp_path) == ["anim.gif"]
    with Image.open(path) as im:
        assert im.format == "GIF" and im.n_frames == 3
        durations = []
        for k in range(3):
            im.seek(k)
            durations.append(im.info["duration"])
    assert durations == [100, 100, 300]  # 1/fps each, the last one `hold` longer


@pytest.mark.parametrize(("frames", "fps", "hold", "message"), [
    (0, 8, 0.5, "at least one frame"), (2, 8, -1.0, "hold must be between 0 and 60 seconds"),
    (2, 0, 0.5, "fps must be an integer from 1 to 50"),
])
def test_save_gif_refuses_bad_settings_in_one_line_and_writes_nothing(tmp_path, frames, fps, hold, message):
    with pytest.raises(ValueError, match=message) as e:
        save_gif(Figure(), lambda k: None, frames, tmp_path / "x.gif", fps=fps, hold=hold)
    assert "\n" not in str(e.value) and file_names(tmp_path) == []


def test_check_fps_takes_integers_from_one_to_max_fps():
    assert check_fps(1) == 1 and check_fps(MAX_FPS) == MAX_FPS == 50
    for bad in (0, MAX_FPS + 1, 2.0, True, "8"):
        with pytest.raises(ValueError, match=f"fps must be an integer from 1 to {MAX_FPS}"):
            check_fps(bad)
