"""Tests of `hardmax.experiments.pipeline`: the recorded command, a missing benchmarks page refused before any
training, and (marked `imdb` and `slow`, skipped when the archive is absent) the whole pipeline on a slice of the
real IMDb.

The CLI's `reproduce` command on a generated archive (reports, reuse of finished runs) is tested in
test_cli_sentiment.py.
"""

from __future__ import annotations

import json
import time

import pytest
from data_cases import real_archive

from hardmax.data import DataConfig
from hardmax.experiments.pipeline import reproduce
from hardmax.experiments.report import render_report
from hardmax.experiments.reproduce import ReproduceConfig, quick
from hardmax.training import TrainConfig

REAL_ARCHIVE = real_archive()


def test_the_recorded_command_names_a_relative_report_directory():
    from hardmax.experiments.pipeline import _command

    assert _command(quick()) == "hardmax reproduce --quick"
    assert _command(ReproduceConfig(report_dir="results")) == "hardmax reproduce --report-dir results"
    assert _command(ReproduceConfig(report_dir="/home/someone/out")) == "hardmax reproduce"
    assert _command(ReproduceConfig(report_dir="results", benchmarks_page="docs/reports/benchmarks.md")) == \
        "hardmax reproduce --report-dir results --benchmarks-page docs/reports/benchmarks.md"


def test_a_missing_benchmarks_page_is_refused_before_training(tmp_path):
    from hardmax.experiments.pipeline import reproduce

    config = quick(out_dir=str(tmp_path), report_dir=str(tmp_path), benchmarks_page=str(tmp_path / "nowhere.md"))
    with pytest.raises(ValueError, match=r"benchmarks_page \(--benchmarks-page\) .*nowhere.md: no such file"):
        reproduce(config)


@pytest.mark.imdb
@pytest.mark.slow
@pytest.mark.skipif(REAL_ARCHIVE is None, reason="IMDb archive absent (set HARDMAX_IMDB)")
def test_reproduce_on_a_slice_of_the_real_archive(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "default-cache"))
    config = quick(data=DataConfig(path=str(REAL_ARCHIVE), limit=600, cache_dir=str(tmp_path / "cache"),
                                   download=False),
                   dims=(2,), train=TrainConfig(epochs=1), out_dir=str(tmp_path / "runs"),
                   report_dir=str(tmp_path / "report"), progress=False)
    start = time.perf_counter()
    results = reproduce(config)
    seconds = time.perf_counter() - start
    report = tmp_path / "report"
    payload = json.loads((report / "results.json").read_text())
    r = payload["results"]["2"]
    assert [x.d for x in results] == [2] and r["test"]["accuracy_hardmax"] == results[0].test["accuracy_hardmax"]
    assert payload["data"]["train"] + payload["data"]["val"] == 600 and payload["data"]["test"] == 600
    # One epoch on 540 reviews may stay near chance; the model must not be broken, and hardmax must agree.
    assert 0.45 < r["test"]["accuracy_hardmax"] <= 1.0
    assert 0.45 < r["test"]["accuracy_softmax"] <= 1.0
    assert r["test"]["agreement"] >= 0.9
    assert r["epochs_run"] == r["best_epoch"] == 1
    assert 1 <= r["leaders"]["min"] <= r["leaders"]["mean"] <= r["leaders"]["max"] <= 128
    assert all((report / f).is_file() for f in r["figures"]) and len(r["figures"]) == 5
    assert (report / "results.md").read_text() == render_report(payload)
    print(f"\nreal IMDb slice: {seconds:.1f} s, test accuracy hardmax {r['test']['accuracy_hardmax']:.4f}, "
          f"agreement {r['test']['agreement']:.4f}")
