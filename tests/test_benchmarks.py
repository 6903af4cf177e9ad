"""Smoke tests of the benchmark and experiment scripts (benchmarks/bench_dynamics.py, bench_data.py, bench_rate.py,
scripts/sweep.py, scripts/ceiling.py, scripts/bow_network.py), so that they do not rot."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_dynamics.py"


def load_script(path: Path = SCRIPT):
    if str(path.parent) not in sys.path:  # as `python scripts/x.py` does: the scripts import their shared _report
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script is executed
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_the_expected_json(tmp_path, capsys):
    bench = load_script()
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "library" in table and "float64" in table and "target (float32)" in table
    results = json.loads(out.read_text())
    assert {"machine", "config", "data", "flops_per_review", "check", "dtypes", "targets"} <= results.keys()
    assert results["check"]["max_abs_error"]["library"] <= 1e-10
    assert {"mean_real_tokens", "mean_distinct_tokens", "share_at_cap"} <= results["data"].keys()
    assert results["data"]["mean_distinct_tokens"] < results["data"]["mean_real_tokens"] <= 128
    for dtype in ("float32", "float64"):
        row = results["dtypes"][dtype]
        assert {"loop_reviews_per_s", "naive_reviews_per_s", "library_reviews_per_s", "speedup_vs_loop",
                "library_gflops", "matmul_gflops", "fraction_of_matmul"} <= row.keys()
        assert all(row[key] > 0 for key in ("loop_reviews_per_s", "naive_reviews_per_s", "library_reviews_per_s"))
        assert len(row["library_seconds"]) == results["config"]["repeats"]


def test_synthetic_reviews_look_like_imdb():
    bench = load_script()
    stats = bench.make_batch(bench.BenchConfig(), 4096).stats()
    # IMDb train split through hardmax.data: mean 82.4 real tokens, 66.7 distinct, 25% at the cap.
    assert 79 < stats["mean_real_tokens"] < 86
    assert 63 < stats["mean_distinct_tokens"] < 71
    assert 0.2 < stats["share_at_cap"] < 0.3


def test_sweep_tabulates_validation_and_test_accuracy(tmp_path, monkeypatch, capsys):
    """Two variants on a generated archive: one row each, selected on validation, reused when rerun."""
    from test_cli_sentiment import write_archive

    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    sweep = load_script(SCRIPT.parents[1] / "scripts" / "sweep.py")
    archive = write_archive(tmp_path / "imdb.tar.gz")
    argv = ["--data", str(archive), "--d", "2", "--variants", "baseline", "random-val", "--epochs", "1",
            "--out", str(tmp_path / "sweep"), "--quiet"]
    rows = sweep.main(argv)
    assert [(r["variant"], r["d"], r["best_epoch"]) for r in rows] == [("baseline", 2, 1), ("random-val", 2, 1)]
    assert all(0 <= r["test_hardmax"] <= 1 and 0 <= r["val_hardmax"] <= 1 and r["alpha"] > 0 for r in rows)
    table = (tmp_path / "sweep" / "sweep.md").read_text()
    assert table.startswith("| variant | d |") and "| baseline | 2 | 1 (1) |" in table
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text()) == rows
    again = sweep.main(argv)  # finished runs are reused: same numbers
    assert [r["test_hardmax"] for r in again] == [r["test_hardmax"] for r in rows]


def test_ceiling_fits_the_linear_model_on_the_classifiers_inputs(tmp_path, monkeypatch, capsys):
    """scripts/ceiling.py on a generated archive: C chosen on validation, one row per variant."""
    from test_cli_sentiment import write_archive

    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    ceiling = load_script(SCRIPT.parents[1] / "scripts" / "ceiling.py")
    archive = write_archive(tmp_path / "imdb.tar.gz")
    rows = ceiling.main(["--data", str(archive), "--variants", "head", "whole", "head_tail_binary", "--C", "0.1", "10",
                         "--out", str(tmp_path / "ceiling")])
    assert [r["variant"] for r in rows] == ["head", "whole", "head_tail_binary"]
    for r in rows:
        assert r["val"] == max(r["val_by_C"].values()) and r["C"] in (0.1, 10)
        assert 0 <= r["test"] <= 1
    assert rows[1]["max_len"] == 1000
    assert (tmp_path / "ceiling" / "ceiling.md").read_text().startswith("| tokens |")


def test_bow_network_selects_its_epoch_on_validation(tmp_path, monkeypatch):
    """scripts/bow_network.py on a generated archive: one row per network, the epoch of best validation."""
    from test_cli_sentiment import write_archive

    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    script = load_script(SCRIPT.parents[1] / "scripts" / "bow_network.py")
    archive = write_archive(tmp_path / "imdb.tar.gz")
    argv = ["--data", str(archive), "--widths", "4:8", "2:3", "--epochs", "3", "--out", str(tmp_path / "bow")]
    rows = script.main(argv)
    assert [(r["width"], r["hidden"]) for r in rows] == [(4, 8), (2, 3)]
    for r in rows:
        vals = [h["val"] for h in r["history"]]
        assert len(vals) == 3 and r["epoch"] == vals.index(max(vals)) + 1 and r["val"] == max(vals)
        assert r["test"] == r["history"][r["epoch"] - 1]["test"]
    assert rows[0]["val"] > 0.6  # the generated corpus is easy: the network does learn
    assert json.loads((tmp_path / "bow" / "bow_network.json").read_text()) == rows
    assert script.main(argv) == rows  # seeded: the same numbers again
    with pytest.raises(SystemExit):
        script.main(["--data", str(archive), "--widths", "4x8"])


def test_averaging_network_ignores_padding():
    script = load_script(SCRIPT.parents[1] / "scripts" / "bow_network.py")
    net = script.AveragingNetwork(vocab_size=6, width=3, hidden=4)
    ids = torch.tensor([[2, 3, 0, 0], [2, 3, 5, 1]])
    mask = torch.tensor([[True, True, False, False], [True, True, False, False]])
    logits = net(ids, mask)
    torch.testing.assert_close(logits[0], logits[1])  # what sits under the mask does not matter
    torch.testing.assert_close(logits[:1], net(ids[:1, :2], mask[:1, :2]))


def test_normalised_counts_are_word_shares():
    ceiling = load_script(SCRIPT.parents[1] / "scripts" / "ceiling.py")
    ids = np.array([[2, 3, 2, 0], [4, 0, 0, 0]])
    mask = ids != 0
    X = ceiling.normalised_counts(ids, mask, vocab_size=5).toarray()
    np.testing.assert_allclose(X, [[0, 0, 2 / 3, 1 / 3, 0], [0, 0, 0, 0, 1]])


def test_presence_marks_each_word_once_and_never_padding():
    ceiling = load_script(SCRIPT.parents[1] / "scripts" / "ceiling.py")
    ids = np.array([[2, 3, 2, 0], [4, 0, 0, 0]])
    X = ceiling.presence(ids, ids != 0, vocab_size=5).toarray()
    np.testing.assert_array_equal(X, [[0, 0, 1, 1, 0], [0, 0, 0, 0, 1]])


def test_data_benchmark_times_a_cold_and_a_cached_pipeline(tmp_path, capsys):
    from test_cli_sentiment import write_archive

    bench = load_script(SCRIPT.parent / "bench_data.py")
    archive = write_archive(tmp_path / "imdb.tar.gz")
    result = bench.main(["--data", str(archive), "--repeats", "2", "--json", str(tmp_path / "data.json")])
    assert result["reviews"] == 240 and len(result["cold_all"]) == len(result["warm_all"]) == 2
    assert result["cold_seconds"] > 0 and result["warm_seconds"] > 0
    assert json.loads((tmp_path / "data.json").read_text()) == result
    assert "| cached load |" in capsys.readouterr().out


@pytest.mark.slow
def test_bench_fresh_compares_two_checkouts(tmp_path, capsys):
    """Fresh processes, alternating versions (here this checkout against itself), medians and JSON."""
    bench = load_script(SCRIPT.parent / "bench_fresh.py")
    src = Path(__file__).resolve().parents[1] / "src"
    out = tmp_path / "fresh.json"
    result = bench.main(["--runs", "1", "--reviews", "64", "--threads", "1", "--against", str(src),
                         "--json", str(out)])
    printed = capsys.readouterr().out
    assert printed.count("run 1") == 2 and "median this checkout:" in printed and "median       against:" in printed
    saved = json.loads(out.read_text())
    for name in ("this checkout", "against"):
        s = saved["summary"][name]
        assert s["simulate_later_reviews_per_s"] > 0 and s["kernel_reviews_per_s"] > 0 and len(s["runs"]) == 1
        assert s["first_over_later"] == pytest.approx(s["runs"][0]["first"] / s["runs"][0]["later"])
    assert result["reviews"] == 64 and saved["huge_pages"] is True
    with pytest.raises(SystemExit):
        bench.main(["--against", str(tmp_path)])  # not a hardmax src/ folder


def test_bench_scale_naive_loop_is_the_layer_and_the_quick_run_writes_json(tmp_path, monkeypatch, capsys):
    from hardmax.dynamics import simulate

    bench = load_script(SCRIPT.parent / "bench_scale.py")
    z = bench.tokens(40, 3, seed=1)  # Gaussian tokens: no exact ties, so the naive loop is the exact layer
    torch.testing.assert_close(bench.naive_loop(z.clone(), alpha=0.5, layers=6),
                               simulate(z, alpha=0.5, layers=6).final, rtol=0, atol=1e-12)
    bench.main(["--quick", "--skip-torch", "--json", str(tmp_path / "s.json"), "--plot", str(tmp_path / "s.png")])
    results = json.loads((tmp_path / "s.json").read_text())
    assert results["check_theorem_passed"] and results["compiled_s"] > 0
    assert set(results["slope_in_n"]) == set(results["slope_in_layers"]) == {"2", "3"}
    assert (tmp_path / "s.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "| compiled engine |" in out and "slope in layers" in out


@pytest.mark.slow
def test_bench_claims_quick_run_agrees_with_the_authors_loop_and_writes_json(tmp_path, capsys):
    bench = load_script(SCRIPT.parent / "bench_claims.py")
    start = bench.clusters_start()
    assert start.shape == (64,) and np.all((start >= 0) & (start < 2 * np.pi))
    assert bench.main(["--quick", "--json", str(tmp_path / "c.json")]) == 0
    results = json.loads((tmp_path / "c.json").read_text())
    lim = results["lost_in_the_middle"]
    assert lim["steps"] == 400 and lim["max_angle_difference"] <= 1e-10 and lim["speedup"] > 1
    assert results["causal_figure2"]["check"] == results["causal_clustering"]["check"] == "passed"
    assert results["normalisation"]["check"] == "passed"
    assert "their loop / `circle_flow` | " in capsys.readouterr().out


def test_benchmark_script_quick(tmp_path, capsys):
    """benchmarks/bench_rate.py --quick runs, prints its table and writes its JSON (so that it does not rot)."""
    bench = load_script(SCRIPT.with_name("bench_rate.py"))
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--repeat", "1", "--threads", "1", "--json", str(out)]) == 0
    assert "| case | library | reference | target |" in capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results["token_sets"]["max_abs_error_library"] < 1e-10
    assert results["samples"]["reference_membership_bytes"] == 10 * 20_000**2 * 4
