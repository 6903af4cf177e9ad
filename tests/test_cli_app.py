"""Tests of `hardmax.cli.app`: the parser (`hardmax --help` loads no numerical library, every option has help
and its default, `python -m hardmax`), a missing command, and Ctrl-C and allocation failures as one line.
"""

from __future__ import annotations

import pytest
from cli_cases import subparsers

from hardmax.cli import main


def test_help_and_missing_command(capsys):
    assert main(["simulate", "--help"]) == 0
    assert "--tokens" in capsys.readouterr().out
    assert main([]) == 2
    assert "required" in capsys.readouterr().err


HEAVY = ("torch", "numpy", "matplotlib", "sklearn", "scipy", "numba")


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["evaluate", "--help"], ["explain", "--help"],
                                  ["reproduce", "--help"], ["simulate", "--help"]])
def test_help_imports_nothing_heavy(argv):
    """`hardmax --help` must stay well under a second: building the parser loads no numerical library."""
    import subprocess
    import sys

    code = ("import sys, contextlib, io\nfrom hardmax.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): code = main({argv!r})\n"
            f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split(None, 1) == ["0", "[]\n"], result.stdout


def test_python_dash_m_hardmax(tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "hardmax", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "usage: hardmax" in result.stdout and "reproduce" in result.stdout
    result = subprocess.run([sys.executable, "-m", "hardmax", "simulate", "--alpha", "0"], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("hardmax simulate: error: --alpha must be")


OWN_COMMANDS = ("simulate", "train", "evaluate", "explain", "reproduce")  # cli.simulate and cli.sentiment


def test_every_option_has_help_and_its_default():
    for name, sub in subparsers().items():
        if name not in OWN_COMMANDS:
            continue
        for action in sub._actions:
            if action.dest == "help":
                continue
            flag = action.option_strings[0] if action.option_strings else action.dest
            assert action.help and len(action.help) > 10, (name, flag)
            takes_value = action.nargs != 0 and action.option_strings
            if takes_value and not action.required:
                assert "default" in action.help, (name, flag, action.help)
        if name in ("evaluate", "explain"):
            run = next(a for a in sub._actions if "--run" in a.option_strings)
            assert "run directory" in run.help


@pytest.mark.parametrize("raised, code, line", [
    (KeyboardInterrupt(), 130, "hardmax: interrupted"),
    (MemoryError(), 2, "hardmax simulate: error: out of memory; choose smaller sizes"),
    (MemoryError("cannot allocate 8 GiB"), 2, "hardmax simulate: error: out of memory: cannot allocate 8 GiB"),
])
def test_interrupts_and_allocation_failures_are_one_line(tmp_path, capsys, monkeypatch, raised, code, line):
    import hardmax.dynamics

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(hardmax.dynamics, "simulate", fail)
    assert main(["simulate", "--random", "3", "--no-gif", "--out", str(tmp_path / "run")]) == code
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_gpu_out_of_memory_error_is_one_line(tmp_path, capsys, monkeypatch):
    import torch

    import hardmax.dynamics

    def fail(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(hardmax.dynamics, "simulate", fail)
    assert main(["simulate", "--random", "3", "--no-gif", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err == "hardmax simulate: error: out of memory: CUDA out of memory; choose smaller sizes (fewer tokens, " \
                  "layers, reviews or seeds)\n"


def test_other_runtime_errors_are_not_taken_for_memory(tmp_path, monkeypatch):
    import hardmax.dynamics

    def fail(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(hardmax.dynamics, "simulate", fail)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["simulate", "--random", "3", "--no-gif", "--out", str(tmp_path / "run")])
