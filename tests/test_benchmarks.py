"""Smoke test of benchmarks/bench_dynamics.py, so the benchmark script does not rot."""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_dynamics.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_dynamics", SCRIPT)
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
