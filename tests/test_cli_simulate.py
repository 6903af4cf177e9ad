"""Tests of `hardmax.cli.simulate`: `hardmax simulate` and `hardmax particles`, run in-process through `main(argv)`.

Each run writes into tmp_path; bad input must give exit code 2 and one readable line on stderr.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from hardmax.cli import main
from hardmax.dynamics import Save, simulate
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


def test_figure2_gif_animates_all_four_rows(tmp_path, capsys):
    code, _, err = _run(capsys, "--layers", "6", "--fps", "2", "--out", str(tmp_path))
    assert code == 0, err
    with Image.open(tmp_path / "figure2.gif") as gif:
        assert gif.n_frames == 7  # layers 0..6 (the held last frame is merged into the last one)
        gif.seek(0)
        first = np.asarray(gif.convert("L"), dtype=float)
        gif.seek(6)
        last = np.asarray(gif.convert("L"), dtype=float)
    h, w = first.shape
    # One panel per configuration in a 2 × 2 grid (title and legend bands excluded): each one moves.
    top, bottom = int(0.12 * h), int(0.88 * h)
    for rows in (slice(top, h // 2), slice(h // 2, bottom)):
        for cols in (slice(0, w // 2), slice(w // 2, w)):
            assert np.abs(first[rows, cols] - last[rows, cols]).sum() > 0, (rows, cols)


# --------------------------------------------------------------------------------------------
# Issue #23 (reliability pass): BOM, sizes refused before allocating, fps, seeds (interrupts: test_cli_app.py).
# --------------------------------------------------------------------------------------------


def test_a_token_csv_with_a_byte_order_mark_keeps_its_first_row(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbf1,0\n0,1\n-1,-1\n")  # what Excel writes
    code, _, err = _run(capsys, "--tokens", str(path), "--layers", "2", "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 0, err
    assert np.load(tmp_path / "run" / "trajectory.npy").shape == (3, 3, 2)
    assert "n = 3 tokens" in err and "read as utf-8 with BOM" in err


def test_a_header_is_said_aloud(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("x,y\n1,0\n0,1\n")
    code, _, err = _run(capsys, "--tokens", str(path), "--layers", "2", "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 0 and "line 1 (x, y) is a header" in err


@pytest.mark.parametrize("argv, named", [
    (["--layers", "100000000"], "--layers 100000000"),
    (["--random", "100000000"], "--random 100000000"),
    (["--random", "2", "--dim", "100000000"], "--dim 100000000"),
    (["--random", "5", "--layers", "100000000"], "--layers 100000000"),
])
def test_sizes_beyond_memory_are_refused_before_allocating(tmp_path, capsys, monkeypatch, argv, named):
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "2G")
    code, out, err = _run(capsys, *argv, "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 2 and out == ""
    assert err.startswith("hardmax simulate: error: ") and err.count("\n") == 1
    assert named in err and "needs about" in err and "2 GiB available" in err
    assert not (tmp_path / "run").exists()


def test_simulate_refuses_a_depth_beyond_memory_naming_layers(monkeypatch):
    # The reliability pass: simulate(..., layers=10**9) raised MemoryError with an empty message.
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "256M")
    with pytest.raises(ValueError, match=r"10,000,000 layers .* needs about"):
        simulate(TOKENS, alpha=0.5, layers=10**7)
    with pytest.raises(ValueError, match="more than the 10,000,000"):  # past MAX_STEPS: refused before any size
        simulate(TOKENS, alpha=0.5, layers=10**9)
    assert simulate(TOKENS, alpha=0.5, layers=10**6, save=Save.final()).tokens.shape == (2, 6, 2)


@pytest.mark.parametrize("fps, ok", [("0", False), ("51", False), ("3000", False), ("100000", False), ("50", True)])
def test_fps_is_bounded_and_the_hold_is_a_duration(tmp_path, capsys, fps, ok):
    np.save(tmp_path / "t.npy", TOKENS)
    code, _, err = _run(capsys, "--tokens", str(tmp_path / "t.npy"), "--layers", "3", "--fps", fps,
                        "--out", str(tmp_path / "run"))
    if not ok:
        assert code == 2 and "--fps must be from 1 to 50" in err and err.count("\n") == 1
        return
    assert code == 0, err
    with Image.open(tmp_path / "run" / "animation.gif") as gif:
        assert gif.n_frames == 4  # one frame per layer: the end is held by its duration, not by copies
        durations = []
        for k in range(gif.n_frames):
            gif.seek(k)
            durations.append(gif.info["duration"])
    assert durations[:3] == [20, 20, 20] and durations[-1] == 520


@pytest.mark.parametrize("seed", ["-1", str(2**63)])
def test_seed_out_of_range_names_the_option(tmp_path, capsys, seed):
    code, _, err = _run(capsys, "--random", "3", "--seed", seed, "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 2 and "--seed must be an integer from 0 to 2^63 - 1" in err


def test_theorem_check_at_extreme_token_scales_via_the_command(tmp_path, capsys):
    # The reliability pass: tokens at 1e160 printed "FAILED" with tolerance inf and a NaN rate shown as passed.
    for scale in (1e160, 1e-160):
        np.save(tmp_path / "t.npy", TOKENS * scale)
        code, out, err = _run(capsys, "--tokens", str(tmp_path / "t.npy"), "--layers", "30", "--no-gif",
                              "--out", str(tmp_path / "run"))
        assert code == 0, err
        assert "FAILED" not in out and "atol inf" not in out and " nan " not in out
        report = json.loads((tmp_path / "run" / "report.json").read_text())
        assert report["theorem"]["passed"]


def test_simulate_reaches_the_particle_models(tmp_path, capsys):
    """--rule/--beta/--sphere/--solver/--dt run `solve` (SA on the sphere here) and check the papers' claims."""
    from hardmax.dynamics import RK4, Field, Softmax, Sphere, solve

    np.save(tmp_path / "tokens.npy", TOKENS)
    out_dir = tmp_path / "sa"
    code, out, err = _run(capsys, "--tokens", str(tmp_path / "tokens.npy"), "--rule", "softmax", "--beta", "2",
                          "--sphere", "--solver", "rk4", "--dt", "0.1", "--layers", "40", "--fps", "4",
                          "--out", str(out_dir))
    assert code == 0, err
    on_sphere = TOKENS / np.linalg.norm(TOKENS, axis=1, keepdims=True)
    expected = solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), on_sphere, steps=40)
    np.testing.assert_array_equal(np.load(out_dir / "solution.npy"), expected.tokens.numpy())
    np.testing.assert_allclose(np.load(out_dir / "times.npy"), expected.times.numpy())
    for name in ("figure.png", "animation.gif", "report.txt", "report.json"):
        assert (out_dir / name).stat().st_size > 0, name
    assert "energy" in (out_dir / "report.txt").read_text() and "| check |" in out
    report = json.loads((out_dir / "report.json").read_text())
    assert report["config"]["rule"] == "softmax" and report["passed"]
    assert "on S^1" in err and "softmax attention" in err


def test_simulate_with_a_value_matrix_and_localmax(tmp_path, capsys):
    code, out, err = _run(capsys, "--random", "7", "--rule", "localmax", "--theta", "0.3", "--value", "1,0;0,-0.5",
                          "--solver", "euler", "--dt", "0.2", "--layers", "10", "--no-gif", "--out", str(tmp_path))
    assert code == 0, err
    assert np.load(tmp_path / "solution.npy").shape == (11, 7, 2)


@pytest.mark.parametrize("argv,message", [
    (["--rule", "softmax"], "--beta goes with --rule softmax"),
    (["--beta", "2"], "--beta is for --rule softmax"),
    (["--rule", "localmax"], "needs --theta"),
    (["--dt", "0.1"], "--dt is for the fixed-step solvers"),
    (["--solver", "rk4", "--time", "3"], "--time is for --solver adaptive"),
    (["--solver", "renormalised"], "add --sphere"),
    (["--rule", "softmax", "--beta", "1", "--value", "1,2,3"], "value"),
])
def test_simulate_refuses_particle_options_that_do_not_fit(capsys, argv, message):
    code, out, err = _run(capsys, "--random", "4", *argv)
    assert code == 2 and message in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_particles_writes_the_reproductions(tmp_path, capsys, monkeypatch):
    import hardmax.experiments.particles as particles

    real = particles.phase_diagram
    monkeypatch.setattr(particles, "phase_diagram", lambda betas, **kw: real(betas[:3], **{**kw, "starts": 4}))
    code = main(["particles", "--quick", "--no-gif", "--out", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["clusters_2023_polytope.png", "clusters_2023_hyperplanes.png",
                            "clusters_2023_polytope_x_hyperplanes.png", "clusters_2023_boolean.png",
                            "metastability.png", "phase_diagram_S1.png", "phase_diagram_S2.png"])
    assert "## polytope" in captured.out and "## phase S2" in captured.out and "PASSED" in captured.out


@pytest.mark.parametrize("argv", [("--rule", "unnormalised", "--beta", "5", "--solver", "euler", "--layers", "300"),
                                  ("--rule", "unnormalised", "--beta", "3", "--solver", "rk4", "--dt", "0.5",
                                   "--layers", "100")])
def test_simulate_never_reports_states_that_overflowed(tmp_path, capsys, argv):
    """Issue #39 (5): an overflow after t = 0 wrote report.json with "passed": true, then died in matplotlib."""
    np.save(tmp_path / "tokens.npy", 3 * TOKENS)
    code, out, err = _run(capsys, "--tokens", str(tmp_path / "tokens.npy"), *argv, "--no-gif",
                          "--out", str(tmp_path / "run"))
    assert code == 2 and "stopped being finite at step" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "report.json").exists()


def test_simulate_causal_runs_decoder_attention_and_reports_what_holds(tmp_path, capsys):
    """Issue #43: `hardmax simulate --causal` — Causal() attention through `solve` (the causal kernel for hardmax),
    the first token at rest, the full-attention claims not tested; the saved solution is what the library gives."""
    import json

    import numpy as np

    from hardmax.cli import main
    from hardmax.dynamics import Causal, simulate

    assert main(["simulate", "--random", "9", "--seed", "3", "--layers", "8", "--causal", "--no-gif",
                 "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    claims = {c["name"]: c["status"] for c in report["claims"]["tokens"]}
    assert claims["first_token"] == "passed" and claims["single_cluster"] == "not tested"
    tokens = np.random.default_rng(3).standard_normal((9, 2))
    want = simulate(tokens, alpha=0.5, layers=8, mask=Causal()).tokens.numpy()
    np.testing.assert_array_equal(np.load(tmp_path / "solution.npy"), want)
    assert "causal attention" in capsys.readouterr().out


def test_simulate_alibi_biases_the_rule_and_saves_what_solve_gives(tmp_path):
    """Issue #43: `hardmax simulate --alibi M` (and "λ/n") wraps the rule in `Positional(rule, ALiBi(...))` through
    `solve`; the saved states are the library's, and a different slope gives different states."""
    import numpy as np

    from hardmax.cli import main
    from hardmax.dynamics import RK4, ALiBi, Causal, Field, Positional, Save, Softmax, Sphere, Unnormalised, solve

    tokens = np.random.default_rng(4).standard_normal((7, 2))
    on_sphere = tokens / np.linalg.norm(tokens, axis=1, keepdims=True)
    for alibi, bias, rule, name, sphere in (("0.75", ALiBi(0.75), Softmax(1.5), "softmax", []),
                                            ("2/n", ALiBi(2.0, per_length=True), Unnormalised(1.5), "unnormalised",
                                             ["--sphere"])):  # the lost-in-the-middle model's rule, on the circle
        out = tmp_path / name
        assert main(["simulate", "--random", "7", "--seed", "4", "--rule", name, "--beta", "1.5", "--alibi", alibi,
                     "--causal", "--solver", "rk4", "--dt", "0.05", "--layers", "12", *sphere, "--no-gif",
                     "--out", str(out)]) == 0
        field = Field(Positional(rule, bias), manifold=Sphere()) if sphere else Field(Positional(rule, bias))
        start = on_sphere if sphere else tokens
        want = solve(field, RK4(0.05), start, steps=12, save=Save(), mask=Causal())
        np.testing.assert_allclose(np.load(out / "solution.npy"), want.tokens.numpy(), rtol=0, atol=1e-14)
        plain = solve(Field(rule, manifold=field.manifold), RK4(0.05), start, steps=12, save=Save(), mask=Causal())
        assert np.abs(plain.tokens.numpy() - want.tokens.numpy()).max() > 1e-6  # the bias moved them


@pytest.mark.parametrize("argv, message", [
    (["--alibi", "0.5"], "--alibi biases a softmax or unnormalised rule"),
    (["--rule", "softmax", "--beta", "1", "--alibi", "-1"], "--alibi's slope must be a finite number ≥ 0"),
    (["--rule", "softmax", "--beta", "1", "--alibi", "steep"], "--alibi must be a slope m ≥ 0"),
    (["--rule", "softmax", "--beta", "1", "--solver", "pre-ln", "--sphere"], "runs in R^d"),
])
def test_simulate_alibi_and_normalisation_refuse_bad_options_in_one_line(tmp_path, capsys, argv, message):
    code, out, err = _run(capsys, "--random", "5", *argv, "--no-gif", "--out", str(tmp_path / "run"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("scheme", ["post-ln", "pre-ln", "peri-ln", "ngpt", "mix-ln"])
def test_simulate_normalisation_schemes_are_the_library_solvers(tmp_path, scheme):
    """Issue #43: `--solver post-ln|pre-ln|peri-ln|ngpt|mix-ln` runs that scheme's layers (`SCHEMES`); the report
    checks what the scheme promises and leaves the flow's claims untested (Pre-LN leaves the tokens' hull)."""
    import json

    import numpy as np

    from hardmax.cli import main
    from hardmax.dynamics import SCHEMES, Field, Save, Softmax, solve

    assert main(["simulate", "--random", "6", "--dim", "3", "--seed", "2", "--rule", "softmax", "--beta", "3",
                 "--solver", scheme, "--dt", "0.2", "--layers", "15", "--no-gif", "--out", str(tmp_path)]) == 0
    tokens = np.random.default_rng(2).standard_normal((6, 3))
    want = solve(Field(Softmax(3.0)), SCHEMES[scheme](0.2), tokens, steps=15, save=Save())
    np.testing.assert_allclose(np.load(tmp_path / "solution.npy"), want.tokens.numpy(), rtol=0, atol=1e-14)
    claims = {c["name"]: c["status"] for c in json.loads((tmp_path / "report.json").read_text())["claims"]["tokens"]}
    assert claims["finite"] == "passed" and claims["hull"] == "not tested"
    assert claims.get("unit_tokens") == ("passed" if scheme in ("post-ln", "ngpt") else None)
