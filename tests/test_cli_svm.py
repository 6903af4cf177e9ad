"""Tests of `hardmax.cli.svm`: the integer options and --out of `hardmax svm` checked before anything is
computed, in one line naming the option."""

from __future__ import annotations

import pytest

from hardmax.cli import main


@pytest.mark.parametrize("option, message", [
    (["--seeds", "0"], "--seeds must be ≥ 1, got 0"),
    (["--T", "1"], "--T must be ≥ 2, got 1"),
    (["--join-seeds", "-1"], "--join-seeds must be ≥ 0, got -1"),
    (["--seed", "-1"], "--seed must lie in [0, 2**63 − 1] (a 64-bit generator seed), got -1"),
])
def test_integer_options_out_of_range_are_one_line(tmp_path, capsys, option, message):
    assert main(["svm", "--out", str(tmp_path / "out"), *option]) == 2
    assert capsys.readouterr().err == f"hardmax svm: error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_an_out_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    assert main(["svm", "--out", str(tmp_path / "taken" / "svm")]) == 2
    assert "cannot be created: " in capsys.readouterr().err
