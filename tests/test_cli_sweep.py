"""The commands whose grids run as sweeps: `hardmax sweep` itself, and `hardmax particles`, `svm` and `reproduce`
with `--scheduler` — each writes what it writes without it, and a rerun finds its cells done."""

from __future__ import annotations

import json
import re
import time

import pytest

from hardmax.cli import main
from hardmax.sweep import TASKS, read_table, sweep_status


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_help_names_every_task(capsys):
    code, out, _ = _run(capsys, "sweep", "--help")
    text = " ".join(out.split())
    assert code == 0
    assert all(name in text for name in TASKS), sorted(n for n in TASKS if n not in text)


@pytest.mark.parametrize("argv, message", [
    (["sweep", "s.toml", "--out", "o", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"],
     "--workers is the size of a local cluster: give it with --scheduler local, not with a scheduler's address"),
    (["sweep", "s.toml", "--out", "o", "--workers", "0"], "--workers must be ≥ 1, got 0"),
    (["sweep", "s.toml", "--out", "o", "--batch", "0"], "--batch must be ≥ 1, got 0"),
    (["sweep", "--status", "o", "--out", "o"], "--status DIR stands alone"),
    (["sweep", "s.toml"], "give a spec and --out DIR"),
    (["particles", "--workers", "2"], "--workers is the size of a local cluster: give it with --scheduler local, not "
                                      "without --scheduler"),
    (["svm", "--workers", "2"], "--workers is the size of a local cluster"),
    (["reproduce", "--workers", "2"], "--workers is the size of a local cluster"),
])
def test_bad_options_are_refused_in_one_line_before_any_work(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('task = "noop"\n[grid]\nx = [1]\n')
    code, out, err = _run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "runs").exists()


def test_a_spec_with_a_bad_parameter_is_refused_in_one_line(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    for text, message in (('task = "solve"\n[grid]\nn = [4]\nbeta = ["hot"]\n', "solve.beta must be a finite number"),
                          ('task = "nope"\n[grid]\nx = [1]\n', "unknown task 'nope'"),
                          ('task = "rate"\n[grid]\nn = [4]\nepsilon = [0.5]\n', "takes no parameter 'epsilon'")):
        spec.write_text(text)
        code, out, err = _run(capsys, "sweep", str(spec), "--out", str(tmp_path / "o"))
        assert code == 2 and err.count("\n") == 1 and message in err, err
        assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_particles_through_a_local_cluster_prints_the_tables_of_the_one_process_run(tmp_path, monkeypatch, capsys):
    """--scheduler local: the tables of the one-process run, both diagrams' sweeps on one cluster (started once per
    command, at its start), no process left when the command ends; a rerun finds the cells done."""
    from sweep_cases import children, counting_local_clusters

    from hardmax.experiments import particles

    # One clustering picture and a short metastability run (the same in both runs); the phase diagrams whole.
    monkeypatch.setattr(particles, "KINDS_2023", ("polytope",))
    metastability = particles.metastability
    monkeypatch.setattr(particles, "metastability", lambda **kw: metastability(**kw, t1=20.0))
    base = ["particles", "--quick", "--no-gif"]
    code, alone, _ = _run(capsys, *base, "--out", str(tmp_path / "alone"))
    assert code == 0
    started, before = counting_local_clusters(monkeypatch), children()
    swept = [*base, "--out", str(tmp_path / "swept"), "--scheduler", "local", "--workers", "2"]
    code, out, _ = _run(capsys, *swept)
    assert code == 0 and out == alone  # every table, the phase diagrams' included
    assert started == [2]  # one cluster for the two diagrams
    time.sleep(0.5)
    assert not children() - before
    assert (tmp_path / "swept" / "phase_diagram_S2.png").exists()
    swept_dir = tmp_path / "swept"
    assert sweep_status(swept_dir / "sweep_S1")["done"] == 20 == len(read_table(swept_dir / "sweep_S2"))
    part = sorted((tmp_path / "swept" / "sweep_S1").glob("part-*.parquet"))[0]
    part.unlink()  # a batch lost: the rerun runs it alone and prints the same tables
    code, out, err = _run(capsys, *swept)
    assert code == 0 and out == alone and sweep_status(tmp_path / "swept" / "sweep_S1")["done"] == 20


def test_particles_whose_sweep_fails_in_its_thread_says_so_in_one_line_and_leaves_no_process(tmp_path, monkeypatch,
                                                                                                capsys):
    """The diagrams' sweeps run in a thread of the command while it draws (`_diagram_by_sweep`): a sweep that fails
    there ends the command with its one-line error, and the cluster closes."""
    from sweep_cases import children

    import hardmax.sweep
    from hardmax.experiments import particles

    monkeypatch.setattr(particles, "KINDS_2023", ("polytope",))
    metastability = particles.metastability
    monkeypatch.setattr(particles, "metastability", lambda **kw: metastability(**kw, t1=20.0))

    def failing(*args, **kwargs):
        raise ValueError("the cells of this sweep cannot run here")

    monkeypatch.setattr(hardmax.sweep, "sweep", failing)
    before = children()
    code, _, err = _run(capsys, "particles", "--quick", "--no-gif", "--out", str(tmp_path), "--scheduler", "local",
                        "--workers", "1")
    assert code != 0 and "the cells of this sweep cannot run here" in err and "Traceback" not in err
    time.sleep(0.5)
    assert not children() - before


@pytest.mark.slow
def test_svm_through_a_local_cluster_writes_the_one_process_report(tmp_path, capsys):
    base = ["svm", "--seeds", "8", "--iterations", "200", "--join-seeds", "4", "--no-figures"]
    code, alone, _ = _run(capsys, *base, "--out", str(tmp_path / "alone"))
    assert code == 0
    code, out, err = _run(capsys, *base, "--out", str(tmp_path / "swept"), "--scheduler", "local", "--workers", "2")
    assert code == 0, err

    def timeless(text: str) -> str:
        return re.sub(r"\d+\.\d+ s", "", text)

    assert timeless(out) == timeless(alone)
    a, b = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("alone", "swept"))
    assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
    assert sweep_status(tmp_path / "swept" / "sweep")["done"] == 8
    assert sweep_status(tmp_path / "swept" / "sweep_join")["done"] == 4


@pytest.mark.slow
def test_reproduce_through_a_local_cluster_selects_and_measures_as_in_one_process(tmp_path, monkeypatch, capsys):
    from test_cli_sentiment import write_archive  # the module's made-up IMDb archive

    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    archive = write_archive(tmp_path / "imdb.tar.gz")
    base = ["reproduce", "--quick", "--data", str(archive), "--dims", "2", "--epochs", "1", "--lrs", "0.03,0.001",
            "--threads", "1"]
    assert _run(capsys, *base, "--out", str(tmp_path / "alone"))[0] == 0
    code, out, err = _run(capsys, *base, "--out", str(tmp_path / "swept"), "--scheduler", "local", "--workers", "2")
    assert code == 0, err
    a, b = (json.loads((tmp_path / d / "results.json").read_text())["results"]["2"] for d in ("alone", "swept"))
    same = ("best_epoch", "epochs_run", "val_accuracy_hardmax", "lr", "stopwords", "grid", "alpha", "leaders",
            "top_leader_words")
    assert {k: a[k] for k in same} == {k: b[k] for k in same}
    assert a["test"]["accuracy_hardmax"] == b["test"]["accuracy_hardmax"]
    assert b["candidates_reused"] == 2  # trained by the sweep, found finished by the pipeline
    assert sweep_status(tmp_path / "swept" / "sweep")["done"] == 2


def test_the_cli_says_what_a_sweep_holds_and_refuses_bad_input(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('task = "noop"\n[[cells]]\nx = 1.0\n[[cells]]\nx = 2.0\nfail = true\n')
    code = main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert code == 1  # a cell failed: recorded, and said
    assert main(["sweep", "--status", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "2 cells: 1 done, 1 failed, 0 remaining" in out and "fails on purpose" in out
    spec.write_text('task = "noop"\n[grid]\nx = [1]\nzz = [2]\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "never")]) == 2
    assert "takes no parameter 'zz'" in capsys.readouterr().err and not (tmp_path / "never").exists()
    assert main(["sweep", "--status", str(tmp_path / "nothing")]) == 2
