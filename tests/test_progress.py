"""Tests of `hardmax.progress`: a bar on a terminal, periodic plain lines anywhere else."""

from __future__ import annotations

import io

from hardmax.progress import LineProgress, progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_every_few_seconds_and_one_at_the_end():
    clock, out = Clock(), io.StringIO()
    bar = LineProgress(total=100, desc="leaders", unit="batch", every=10.0, file=out, clock=clock)
    for _ in range(100):
        clock.now += 0.25  # 25 s in all: lines at 10 s and 20 s, and the last one
        bar.update(1)
    bar.close()
    bar.close()  # closing twice prints once
    lines = out.getvalue().splitlines()
    assert lines == ["leaders: 40/100 batch (40 %) in 10 s, 4.0 batch/s",
                     "leaders: 80/100 batch (80 %) in 20 s, 4.0 batch/s",
                     "leaders: 100/100 batch (100 %) in 25 s, 4.0 batch/s"]
    assert "\r" not in out.getvalue()


def test_iterating_a_file_that_is_not_a_terminal():
    out = io.StringIO()
    items = list(progress(range(7), desc="read", unit=" files", file=out))
    assert items == list(range(7))
    assert out.getvalue() == out.getvalue().strip() + "\n"  # one final line, no carriage returns
    assert out.getvalue().startswith("read: 7/7 files (100 %)")


def test_disabled_prints_nothing():
    out = io.StringIO()
    assert list(progress(range(3), disable=True, file=out)) == [0, 1, 2]
    assert out.getvalue() == ""


def test_a_terminal_gets_tqdm():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    from tqdm.auto import tqdm

    bar = progress(range(3), desc="x", file=Terminal())
    assert isinstance(bar, tqdm)
    assert list(bar) == [0, 1, 2]
