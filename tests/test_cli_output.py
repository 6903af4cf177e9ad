"""Tests of `hardmax.cli.output`: a progress line on stderr, and the summary of the files a command wrote."""

from __future__ import annotations

import time

from hardmax.cli.output import say, summary


def test_say_writes_one_hardmax_line_on_stderr(capsys):
    say("3 runs found")
    captured = capsys.readouterr()
    assert captured.err == "hardmax: 3 runs found\n" and captured.out == ""


def test_summary_names_the_count_the_folder_and_the_seconds(tmp_path):
    paths = [tmp_path / "report.md", tmp_path / "figure.png"]
    text = summary(paths, time.perf_counter())
    assert text.startswith(f"wrote 2 files to {tmp_path}/ in ") and text.endswith(" s")
    assert float(text.split(" in ")[1].removesuffix(" s")) < 5
