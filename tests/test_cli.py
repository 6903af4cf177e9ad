"""Smoke tests of the command line (`hardmax simulate`), run in-process through `main(argv)`.

Each run writes into tmp_path; bad input must give exit code 2 and one readable line on stderr.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from hardmax.cli import main
from hardmax.dynamics import simulate
from hardmax.theory import figure2_configurations

TOKENS = np.array([[1.0, 0.2], [-0.8, 0.9], [-0.5, -1.0], [0.1, 0.1], [0.3, -0.2], [-0.2, 0.3]])


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_figure2_by_default(tmp_path, capsys):
    code, out, err = _run(capsys, "--out", str(tmp_path))
    assert code == 0, err
    for name in ("figure2.png", "figure2.pdf", "figure2.gif", "report.txt", "report.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    with Image.open(tmp_path / "figure2.gif") as gif:
        assert gif.n_frames > 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert list(report["theorem"]) == list(figure2_configurations())
    assert all(r["passed"] for r in report["theorem"].values())
    assert report["config"]["alpha"] == 0.5 and report["config"]["layers"] == 30
    for name in figure2_configurations():
        assert name in out  # each configuration's theorem table is printed
    assert (tmp_path / "report.txt").read_text().strip() == out.strip()
    assert "wrote" in err


def test_figure2_flag_with_fewer_layers(tmp_path, capsys):
    code, out, err = _run(capsys, "--figure2", "--layers", "1", "--no-gif", "--out", str(tmp_path))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "figure2.pdf", "figure2.png", "report.json", "report.txt"]


def test_tokens_from_npy(tmp_path, capsys):
    np.save(tmp_path / "tokens.npy", TOKENS)
    out_dir = tmp_path / "run"
    code, out, err = _run(capsys, "--tokens", str(tmp_path / "tokens.npy"), "--layers", "6", "--fps", "2",
                          "--out", str(out_dir))
    assert code == 0, err
    trajectory = np.load(out_dir / "trajectory.npy")
    expected = simulate(TOKENS, alpha=0.5, layers=6).tokens.numpy()
    np.testing.assert_array_equal(trajectory, expected)
    for name in ("figure.png", "figure.pdf", "animation.gif", "report.txt", "report.json"):
        assert (out_dir / name).stat().st_size > 0, name
    assert not [p for p in out_dir.iterdir() if p.name.startswith(".")]  # no temporary files left
    assert out.strip() == (out_dir / "report.txt").read_text().strip()
    assert json.loads((out_dir / "report.json").read_text())["config"]["tokens"].endswith("tokens.npy")


def test_tokens_from_csv_with_header(tmp_path, capsys):
    rows = "\n".join(",".join(f"{x:.17g}" for x in row) for row in TOKENS)
    (tmp_path / "tokens.csv").write_text("x,y\n" + rows + "\n")
    code, _, err = _run(capsys, "--tokens", str(tmp_path / "tokens.csv"), "--layers", "4", "--no-gif",
                        "--out", str(tmp_path / "run"))
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "trajectory.npy")[0], TOKENS)


def test_random_tokens_in_3d(tmp_path, capsys):
    code, _, err = _run(capsys, "--random", "8", "--dim", "3", "--seed", "1", "--layers", "4", "--fps", "2",
                        "--out", str(tmp_path))
    assert code == 0, err
    trajectory = np.load(tmp_path / "trajectory.npy")
    assert trajectory.shape == (5, 8, 3)
    np.testing.assert_array_equal(trajectory[0], np.random.default_rng(1).standard_normal((8, 3)))
    assert (tmp_path / "figure.png").stat().st_size > 0
    assert (tmp_path / "animation.gif").stat().st_size > 0


def test_A_as_a_literal(tmp_path, capsys):
    np.save(tmp_path / "tokens.npy", TOKENS)
    code, _, err = _run(capsys, "--tokens", str(tmp_path / "tokens.npy"), "--A", "2,0;0,1", "--alpha", "1",
                        "--layers", "5", "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 0, err
    expected = simulate(TOKENS, alpha=1.0, layers=5, A=np.diag([2.0, 1.0])).tokens.numpy()
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "trajectory.npy"), expected)


def test_A_from_a_csv_file(tmp_path, capsys):
    np.save(tmp_path / "tokens.npy", TOKENS)
    (tmp_path / "A.csv").write_text("1,0.5\n0.5,2\n")
    code, _, err = _run(capsys, "--tokens", str(tmp_path / "tokens.npy"), "--A", str(tmp_path / "A.csv"),
                        "--layers", "2", "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 0, err


@pytest.fixture
def inputs(tmp_path):
    """Files for the bad-input cases."""
    np.save(tmp_path / "ok.npy", TOKENS)
    np.save(tmp_path / "flat.npy", TOKENS.ravel())
    np.save(tmp_path / "cube.npy", np.zeros((2, 3, 2)))
    (tmp_path / "ragged.csv").write_text("1,2\n3\n")
    (tmp_path / "words.csv").write_text("x,y\n1,two\n")
    (tmp_path / "tokens.json").write_text("[]")
    return tmp_path


BAD = {
    "missing file": (["--tokens", "{d}/nope.npy"], "not found"),
    "1-D array": (["--tokens", "{d}/flat.npy"], "2-D array"),
    "3-D array": (["--tokens", "{d}/cube.npy"], "2-D array"),
    "ragged csv": (["--tokens", "{d}/ragged.csv"], "different numbers of columns"),
    "words in csv": (["--tokens", "{d}/words.csv"], "two"),
    "unknown format": (["--tokens", "{d}/tokens.json"], ".npy or .csv"),
    "A not positive definite": (["--tokens", "{d}/ok.npy", "--A", "1,0;0,-1"], "positive definite"),
    "A not symmetric": (["--tokens", "{d}/ok.npy", "--A", "1,2;0,1"], "symmetric"),
    "A of the wrong size": (["--tokens", "{d}/ok.npy", "--A", "1,0,0;0,1,0;0,0,1"], "shape"),
    "A unreadable": (["--tokens", "{d}/ok.npy", "--A", "two"], "cannot read A"),
    "A file missing": (["--tokens", "{d}/ok.npy", "--A", "{d}/A.npy"], "not found"),
    "alpha zero": (["--alpha", "0"], "alpha"),
    "alpha negative": (["--random", "5", "--alpha", "-1"], "alpha"),
    "alpha not a number": (["--alpha", "x"], "invalid float"),
    "negative layers": (["--layers", "-1"], "layers"),
    "two sources": (["--tokens", "{d}/ok.npy", "--random", "5"], "not allowed with"),
    "dim without random": (["--dim", "3"], "--random"),
    "no tokens": (["--random", "0"], "at least one token"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_code_2(inputs, capsys, case):
    argv, message = BAD[case]
    argv = [a.format(d=inputs) for a in argv]
    code, out, err = _run(capsys, *argv, "--no-gif", "--out", str(inputs / "run"))
    assert code == 2
    assert err.startswith("hardmax simulate: error: ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err
    assert out == ""
    assert not (inputs / "run").exists()  # nothing written


def test_help_and_missing_command(capsys):
    assert main(["simulate", "--help"]) == 0
    assert "--tokens" in capsys.readouterr().out
    assert main([]) == 2
    assert "required" in capsys.readouterr().err
