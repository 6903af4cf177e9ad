"""Tests of `hardmax.experiments.report`: the report rendered from a hand-made payload (header, accuracy table
against the targets or a quick run's expectations, stop lists, the candidate grid, leaders, words, speed and
figures), the benchmarks quoted from their JSON files and the link to the benchmarks page.
"""

from __future__ import annotations

import pytest

from hardmax.data import STOP_LISTS
from hardmax.experiments.report import benchmarks_link, read_benchmarks, render_report
from hardmax.experiments.reproduce import PAPER_ACCURACY, QUICK_ACCURACY, TARGET_ACCURACY
from hardmax.io import write_json


def _result(d: int, accuracy: float, *, words: bool = True) -> dict:
    return {
        "d": d, "run_dir": f"runs/d{d}", "best_epoch": 3, "epochs_run": 5, "val_accuracy_hardmax": accuracy,
        "test": {"n": 25000, "accuracy_hardmax": accuracy, "accuracy_softmax": accuracy - 0.005,
                 "loss_softmax": 0.4, "loss_hardmax": 0.41, "agreement": 0.98,
                 "seconds_hardmax": 1.5, "seconds_softmax": 1.0},
        "leaders": {"n_reviews": 25000, "mean": 3.456, "std": 1.2, "min": 1, "max": 9, "fraction_initial": 0.875},
        "top_leader_words": {"positive": [["great", 120], ["love", 80]] if words else [],
                             "negative": [["bad", 140], ["waste", 60]] if words else []},
        "train_reviews_per_second": 1234.4, "hardmax_test_seconds": 1.5,
        "figures": [f"figures/leader_words_d{d}.png", f"figures/leader_words_d{d}.pdf",
                    f"figures/review_d{d}.png", f"figures/review_d{d}.pdf"]
        + ([f"figures/review_d{d}.gif"] if d == 2 else []),
    }


@pytest.fixture
def payload() -> dict:
    return {
        "label": "full", "command": "hardmax reproduce", "seconds_total": 90.0,
        "machine": {"cpu": "x86_64", "threads": 2, "torch": "2.0", "python": "3.11"},
        "data": {"train": 22500, "val": 2500, "test": 25000, "split": "standard", "vocab_size": 20000,
                 "min_count": 5, "max_len": 128, "load_seconds": 14.04, "cache_hit": False},
        "train_config": {"epochs": 12, "lr": 0.01},
        "results": {"2": _result(2, 0.8123), "16": _result(16, 0.8512), "3": _result(3, 0.7, words=False)},
    }


def test_render_report_header(payload):
    lines = render_report(payload).splitlines()
    assert lines[0] == "# Sentiment analysis on IMDb: reproduced results (full run)"
    assert lines[2].startswith("Produced by `hardmax reproduce` in 1.5 min on x86_64 (2 threads, torch 2.0).")
    assert lines[4].startswith("Data: 22500 train / 2500 validation / 25000 test reviews (split `standard`), "
                               "vocabulary 20000 words (min count 5), 128 tokens per review")
    assert "validation: random training reviews" in lines[4]  # payloads from before val_split say nothing
    movies = render_report({**payload, "data": {**payload["data"], "val_split": "movies"}}).splitlines()
    assert "validation: whole movies held out of the training split" in movies[4]


def test_render_report_accuracy_table(payload):
    text = render_report(payload)
    lines = text.splitlines()
    start = lines.index("## Test accuracy")
    assert lines[start + 2].startswith("| d | hardmax (exact) | softmax (β = train) | agreement |")
    rows = lines[start + 4: start + 7]
    # Rows in the payload's order; ✓ / ✗ against TARGET_ACCURACY; dimensions without a target get none.
    assert rows[0] == (f"| 2 | 0.8123 ✓ | 0.8073 | 98.00 % | {PAPER_ACCURACY[2]:.3f} | ≥ {TARGET_ACCURACY[2]:.2f} "
                       "| 0.8123 | 3 / 5 | 0.01 | sklearn | – |")
    assert rows[1] == (f"| 16 | 0.8512 ✗ | 0.8462 | 98.00 % | {PAPER_ACCURACY[16]:.3f} | "
                       f"≥ {TARGET_ACCURACY[16]:.2f} | 0.8512 | 3 / 5 | 0.01 | sklearn | – |")
    assert rows[2].startswith("| 3 | 0.7000 | 0.6950 | 98.00 % |") and rows[2].endswith(
        "|  | 0.7000 | 3 / 5 | 0.01 | sklearn | – |")
    assert "| d | validation: " not in text  # no candidate grid in this payload


@pytest.mark.parametrize("stopwords", sorted(STOP_LISTS))
def test_render_report_describes_every_stop_list(payload, stopwords):
    payload["data"]["stopwords"] = stopwords
    assert "stop words" in render_report(payload).splitlines()[4]  # the data line says which list


def test_render_report_candidate_grid(payload):
    payload["data"]["stopwords"] = "nltk"
    payload["results"]["16"].update(lr=0.003, stopwords="nltk", grid={"nltk / 0.01": 0.84, "nltk / 0.003": 0.8512,
                                                                      "sklearn / 0.01": 0.85, "sklearn / 0.003": 0.83})
    payload["results"]["2"].update(lr=0.01, stopwords="nltk", grid={"nltk / 0.01": 0.8123})  # one candidate: no grid
    lines = render_report(payload).splitlines()
    assert "stop-word list chosen per d on validation among nltk, sklearn, the vocabulary size is that of nltk" \
        in lines[4]
    start = lines.index("## Test accuracy")
    assert lines[start + 5].endswith("| 0.8512 | 3 / 5 | 0.003 | nltk | – |")
    grid = lines.index("| d | validation: nltk / 0.01 | validation: nltk / 0.003 | validation: sklearn / 0.01 | "
                       "validation: sklearn / 0.003 | chosen |")
    assert lines[grid + 2] == "| 16 | 0.8400 | 0.8512 | 0.8500 | 0.8300 | nltk / 0.003 |" and lines[grid + 3] == ""
    # A grid over learning rates only does not claim a choice of stop words.
    payload["results"]["16"]["grid"] = {"nltk / 0.01": 0.84, "nltk / 0.003": 0.8512}
    assert "NLTK's stop words removed, as in the paper" in render_report(payload).splitlines()[4]


def test_render_report_leaders_words_speed_and_figures(payload):
    lines = render_report(payload).splitlines()
    assert "| 2 | 3.46 | 1.20 | 1 | 9 | 87.5 % |" in lines
    assert "- d = 2, positive reviews: great (120), love (80)" in lines
    assert "- d = 16, negative reviews: bad (140), waste (60)" in lines
    assert "- d = 3, positive reviews: (no review or leader this decisive)" in lines
    assert "| 16 | 1234 | 1.50 |" in lines
    assert "Data pipeline: 14.0 s (first run, uncached)." in lines
    figures = [line for line in lines if line.startswith("![")]
    assert "![d = 2: review_d2](figures/review_d2.gif)" in figures
    assert len(figures) == 3 * 2 + 1 and not any(".pdf" in f for f in figures)  # PNGs and the GIF only
    assert lines[-1] == 'Training settings: `{"epochs": 12, "lr": 0.01}`'
    payload["candidates"] = {"lrs": [0.01, 0.003], "stopwords": ["nltk", "sklearn"]}
    assert render_report(payload).splitlines()[-1] == (
        "Candidates per d: learning rates 0.01, 0.003; stop words nltk, sklearn.")


def test_render_report_quotes_the_benchmarks_found(payload, tmp_path):
    assert read_benchmarks(tmp_path) == {} and "## Speed on an idle machine" not in render_report(payload)
    write_json(tmp_path / "bench_train.json", {"rows": [
        {"d": 2, "train_reviews_per_second": 3018.4, "test_reviews": 25000, "hardmax_test_seconds": 2.484},
        {"d": 16, "train_reviews_per_second": 2563.8, "test_reviews": 25000, "hardmax_test_seconds": 1.49}]})
    write_json(tmp_path / "bench_data.json", {"reviews": 50000, "cold_seconds": 7.81, "warm_seconds": 0.131})
    (tmp_path / "benchmarks.json").write_text("{not json")  # unreadable: left out, not fatal
    payload["benchmarks"] = read_benchmarks(tmp_path)
    assert set(payload["benchmarks"]) == {"train", "data"}
    lines = render_report(payload).splitlines()
    start = lines.index("## Speed on an idle machine (benchmark scripts)")
    train = "`python benchmarks/bench_train.py --d 2 4 8 16 --json REPORT_DIR/bench_train.json`"
    data = "`python benchmarks/bench_data.py --json REPORT_DIR/bench_data.json`"
    assert lines[start + 4: start + 10] == [
        f"| training, d = 2 (reviews/s) | 3,018 |  | {train} |",
        f"| training, d = 16 (reviews/s) | 2,564 | ≥ 2,000 | {train} |",
        f"| exact hardmax on 25,000 test reviews, d = 2 (s) | 2.48 | < 5 | {train} |",
        f"| exact hardmax on 25,000 test reviews, d = 16 (s) | 1.49 | < 5 | {train} |",
        f"| data pipeline, first run on 50,000 reviews (s) | 7.8 | < 60 | {data} |",
        f"| data pipeline, cached load (s) | 0.13 | < 3 | {data} |"]
    write_json(tmp_path / "benchmarks.json", {"dtypes": {"float32": {"library_reviews_per_s": 30171.9,
                                                                     "speedup_vs_loop": 316.4}}})
    payload["benchmarks"] = read_benchmarks(tmp_path)
    engine = ("| dynamics engine, float32 (reviews/s; × the per-token loop) | 30,172 (316×) | ≥ 20,000 (200×) | "
              "`python benchmarks/bench_dynamics.py --json REPORT_DIR/benchmarks.json` |")
    assert engine in render_report(payload).splitlines()


def test_quick_report_compares_with_quick_expectations(payload):
    """A quick run is held to what quick runs reach, not to the full run's targets."""
    payload = {**payload, "label": "quick", "command": "hardmax reproduce --quick"}
    payload["results"]["2"]["test"]["accuracy_hardmax"] = QUICK_ACCURACY[2] + 0.001  # below the full target
    payload["results"]["16"]["test"]["accuracy_hardmax"] = QUICK_ACCURACY[16] - 0.001
    lines = render_report(payload).splitlines()
    start = lines.index("## Test accuracy")
    assert "not with the full run's targets" in lines[start + 2]
    header = next(line for line in lines[start:] if line.startswith("| d | hardmax"))
    assert "| expected (quick run) |" in header and "| target |" not in header
    table = lines[lines.index(header) + 2:]
    rows = {line.split(" | ")[0]: line for line in table[:3]}
    assert f"| {QUICK_ACCURACY[2] + 0.001:.4f} ✓ |" in rows["| 2"] and f"≥ {QUICK_ACCURACY[2]:.2f}" in rows["| 2"]
    assert f"| {QUICK_ACCURACY[16] - 0.001:.4f} ✗ |" in rows["| 16"]
    assert all(QUICK_ACCURACY[d] < TARGET_ACCURACY[d] for d in QUICK_ACCURACY)


def test_benchmarks_link_works_from_any_report_directory(payload, tmp_path, monkeypatch):
    """The link goes to the page named by the caller, else to a benchmarks.md beside the report; the library
    assumes no repository layout (a docs/benchmarks.md under the working directory is not found by itself)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    report = tmp_path / "runs" / "quick"
    report.mkdir(parents=True)
    (tmp_path / "docs" / "benchmarks.md").write_text("# speed\n")
    assert benchmarks_link(report) is None
    assert benchmarks_link(report, "docs/missing.md") is None
    link = benchmarks_link(report, "docs/benchmarks.md")
    assert link == "../../docs/benchmarks.md" and (report / link).resolve() == tmp_path / "docs" / "benchmarks.md"
    assert benchmarks_link(tmp_path / "docs") == "benchmarks.md"
    text = render_report({**payload, "benchmarks_link": link})
    assert "[benchmarks.md](../../docs/benchmarks.md)" in text
    assert "[benchmarks.md]" not in render_report({**payload, "benchmarks_link": None})
    assert "[benchmarks.md](benchmarks.md)" in render_report(payload)  # results.json from before the link


def test_benchmark_commands_name_the_report_directory(payload, tmp_path):
    write_json(tmp_path / "bench_data.json", {"reviews": 50000, "cold_seconds": 7.81, "warm_seconds": 0.131})
    payload = {**payload, "benchmarks": read_benchmarks(tmp_path), "report_dir": "results"}
    assert "`python benchmarks/bench_data.py --json results/bench_data.json`" in render_report(payload)


def test_render_report_cached_quick_run(payload):
    payload = {**payload, "label": "quick", "command": "hardmax reproduce --quick",
               "data": {**payload["data"], "cache_hit": True}}
    text = render_report(payload)
    assert text.startswith("# Sentiment analysis on IMDb: reproduced results (quick run)")
    assert "Produced by `hardmax reproduce --quick`" in text and "Data pipeline: 14.0 s (cached)." in text
