"""Tests of `hardmax.cli.rate`: every numeric option of `hardmax rate` checked before the run is read, in one
line naming the option."""

from __future__ import annotations

import pytest

from hardmax.cli import main


@pytest.mark.parametrize("flag, value, message", [
    ("--eps", "0", "--eps must be a finite number > 0 (the distortion ε, not ε²), got 0.0"),
    ("--eps", "inf", "--eps must be a finite number > 0"),
    ("--reviews", "-1", "--reviews must be ≥ 0 (0 = all), got -1"),
    ("--long-layers", "0", "--long-layers must be ≥ 1, got 0"),
])
def test_bad_numbers_are_refused_before_the_run_is_read(tmp_path, capsys, flag, value, message):
    out = tmp_path / "out"
    assert main(["rate", "--run", str(tmp_path / "no-run"), "--out", str(out), f"{flag}={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hardmax rate: error: {message}") and err.count("\n") == 1 and not out.exists()
