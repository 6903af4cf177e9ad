"""Tests of `hardmax.cli.output`: a progress line on stderr, and the summary of the files a command wrote."""

from __future__ import annotations

import time

from hardmax.cli.output import say, summary


def test_say_writes_one_hardmax_line_on_stderr(capsys):
    say("3 runs found")
    captured = capsys.readouterr()
    assert captured.err == "hardmax: 3 runs found\n" and captured.out == ""


def test_say_on_a_terminal_clears_a_progress_bar_drawn_meanwhile_and_draws_it_again(monkeypatch):
    """A sweep's bar (another thread's) on the terminal: the line is written on a line of its own, not glued to the
    bar, and the bar comes back under it."""
    import io
    import sys

    from tqdm.auto import tqdm

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bar = tqdm(total=10, desc="sweep noop", file=terminal)
    bar.update(3)
    bar.refresh()  # drawn now (tqdm draws at most every 0.1 s)
    say("2023 polytope: claims hold")
    text = terminal.getvalue()
    bar.close()
    before, after = text.split("hardmax: 2023 polytope: claims hold\n")
    assert before.endswith("\r") and "3/10" in before and "3/10" in after


def test_summary_names_the_count_the_folder_and_the_seconds(tmp_path):
    paths = [tmp_path / "report.md", tmp_path / "figure.png"]
    text = summary(paths, time.perf_counter())
    assert text.startswith(f"wrote 2 files to {tmp_path}/ in ") and text.endswith(" s")
    assert float(text.split(" in ")[1].removesuffix(" s")) < 5
