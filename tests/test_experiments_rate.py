"""hardmax.experiments.rate and `hardmax rate`: rates through layers, on small synthetic cases."""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
import torch
from test_cli_sentiment import write_archive

from hardmax.cli import main
from hardmax.dynamics import Hardmax, simulate
from hardmax.experiments.rate import (
    RateConfig,
    crate_measures,
    layer_rates,
    leader_rates,
    measure_classifier,
    measure_crate,
)
from hardmax.measures import coding_rate, rate_reduction
from hardmax.models import HardmaxClassifier, ModelConfig
from hardmax.models.crate import CrateBlocks, CrateClassifier

pytestmark = pytest.mark.usefixtures("one_thread")


def _reviews(n=40, length=12, vocab=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (n, length), generator=g)
    mask = torch.rand(n, length, generator=g) > 0.25
    mask[:, 0] = True
    labels = torch.randint(0, 2, (n,), generator=g)
    return ids, mask, labels


def test_layer_rates_match_the_measures_layer_by_layer():
    g = torch.Generator().manual_seed(1)
    tokens = torch.randn(10, 7, 3, generator=g, dtype=torch.float64)
    mask = torch.rand(10, 7, generator=g) > 0.2
    mask[:, 0] = True
    labels = torch.arange(10) % 2
    run = simulate(tokens, Hardmax(), alpha=1.0, layers=5, mask=mask)
    rates = layer_rates(run, 0.5, labels=labels)
    assert rates.layers == tuple(range(6))
    for k in (0, 3, 5):
        for b in (0, 4):
            expected = coding_rate(run.tokens[k, b][mask[b]], 0.5)
            assert rates.rate[k, b].item() == pytest.approx(expected.item(), rel=1e-12)
            z = run.tokens[k, b][mask[b]]
            scaled = coding_rate(z / z.pow(2).sum(-1).mean().sqrt(), 0.5)
            assert rates.rate_scaled[k, b].item() == pytest.approx(scaled.item(), rel=1e-12)
        means = torch.stack([run.tokens[k, b][mask[b]].mean(0) for b in range(10)])
        assert rates.reduction[k] == pytest.approx(rate_reduction(means, labels, 0.5).reduction.item(), rel=1e-10)
    # hardmax clustering compresses once the scale is removed (bound: (d/2) ln(1 + 1/ε²))
    assert rates.compression[-1] < 1.0
    assert rates.rate_scaled.max().item() <= 1.5 * math.log(1 + 4) + 1e-9


def test_leader_rates_single_cluster_closed_form():
    # every token attends to the one largest token: a single leader, the limit is one point v
    tokens = torch.tensor([[[3.0, 0.0], [1.0, 0.5], [0.5, -0.2], [1.0, 0.1]]], dtype=torch.float64)
    run = simulate(tokens, Hardmax(), alpha=1.0, layers=60)
    result = leader_rates(run, 0.5)
    v = run.final[0, 0]
    assert result.leaders.tolist() == [1]
    assert result.rate.item() == pytest.approx(0.5 * math.log(1 + 2 * v.pow(2).sum().item() / 0.25), rel=1e-9)
    assert result.rank_at_most_clusters == 1.0 and result.clusters_mean == 1.0
    # one point: R̂ = ½ ln(1 + d/ε²), the bound (r/2) ln(1 + d/(r ε²)) with r = 1, reached
    assert result.scaled_bound_holds == 1.0


def test_measure_classifier_small_and_crate_measures():
    ids, mask, labels = _reviews()
    model = HardmaxClassifier(ModelConfig(vocab_size=60, d=3, layers=3))
    report = measure_classifier(model, ids, mask, labels, RateConfig(long_layers=10, batch_size=16))
    hard = report.classifier["hardmax"]
    assert hard.layers == (0, 1, 2, 3) and hard.rate.shape == (4, 40)
    assert report.simulated["hardmax"].layers[-1] == 10
    # layer 0 is the embedding: the classifier and the simulate runs start from the same tokens
    assert hard.rate[0].tolist() == pytest.approx(report.simulated["hardmax"].rate[0].tolist(), rel=1e-6)
    # the classifier's K hardmax layers are the first K of the long simulate run
    assert hard.rate[-1].tolist() == pytest.approx(report.simulated["hardmax"].rate[3].tolist(), rel=1e-4)
    assert sum(n for n, _, _ in report.leaders.table.values()) == 40
    assert "| layer |" in report.table()
    json.dumps(report.to_dict())
    crate = CrateClassifier(ModelConfig(vocab_size=60, d=4, layers=2, crate=CrateBlocks(heads=2)))
    measures = crate_measures(crate, ids, mask, batch_size=16)
    assert len(measures.compression) == 2 and len(measures.rate) == 3
    assert all(0 < s < 1 for s in measures.sparsity)


def test_measure_crate_reports_initial_and_trained_and_refuses_no_reviews():
    ids, mask, _ = _reviews()
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=60, d=4, layers=2, crate=CrateBlocks(heads=2))
    initial = CrateClassifier(config).eval()
    trained = CrateClassifier(config).eval()  # other weights
    report = measure_crate(trained, initial, ids, mask, RateConfig(batch_size=16))
    assert (report.d, report.heads, report.layers, report.reviews) == (4, 2, 2, 40)
    assert report.initial == crate_measures(initial, ids, mask, eps=report.eps, batch_size=16)
    assert report.trained == crate_measures(trained, ids, mask, eps=report.eps, batch_size=16)
    assert report.initial != report.trained and "| block |" in report.table()
    assert json.loads(json.dumps(report.to_dict()))["trained"]["rate"] == report.trained.rate
    with pytest.raises(ValueError, match="no reviews to measure"):
        measure_crate(trained, initial, ids[:0], mask[:0], RateConfig())
    with pytest.raises(ValueError, match="no reviews to measure"):
        measure_classifier(HardmaxClassifier(ModelConfig(vocab_size=60, d=3)), ids[:0], mask[:0], ids[:0, 0],
                           RateConfig())


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """(run directory, archive) of one tiny `hardmax train` (d = 2, 1 epoch), shared by the CLI tests."""
    folder = tmp_path_factory.mktemp("rate_run")
    archive = write_archive(folder / "imdb.tar.gz", n=20)
    run = folder / "run"
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        mp.delenv("HARDMAX_IMDB", raising=False)
        mp.setenv("HARDMAX_CACHE", str(folder / "cache"))
        assert main(["train", "--run", str(run), "--data", str(archive), "--d", "2", "--epochs", "1",
                     "--min-count", "2", "--batch-size", "16"]) == 0
    return run, archive


def test_rate_cli_smoke(small_run, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    run, archive = small_run
    out = tmp_path / "rate"
    code = main(["rate", "--run", str(run), "--data", str(archive), "--out", str(out), "--reviews", "30",
                 "--long-layers", "12"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| layer |" in captured.out
    saved = json.loads((out / "rate.json").read_text())
    assert saved["report"]["reviews"] == 30 and saved["config"]["long_layers"] == 12
    assert (out / "rate.png").stat().st_size > 0 and (out / "rate.md").exists()
    assert main(["rate", "--run", str(run), "--eps", "-1"]) == 2


# --------------------------------------------------------------------------------------------
# Reliability (issue #23): option checks and the memory of the long runs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("options,match", [
    (["--reviews", "-5"], "--reviews must be ≥ 0"),
    (["--eps", "nan"], "--eps must be a finite number > 0"),
    (["--eps", "inf"], "--eps must be a finite number > 0"),
    (["--eps", "0"], "--eps must be a finite number > 0"),
    (["--long-layers", "0"], "--long-layers must be ≥ 1"),
    (["--threads", "0"], "--threads must be an integer from 1 to"),
    (["--threads", "100000"], "--threads must be an integer from 1 to"),  # torch segfaults on it
])
def test_rate_cli_names_the_bad_option(tmp_path, capsys, options, match):
    """Checked before the run is read (a missing run directory would be the error otherwise)."""
    assert main(["rate", "--run", str(tmp_path / "missing"), *options]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hardmax rate: error: ") and match in err and "\n" not in err


def test_rate_config_names_the_bad_field():
    for kwargs, match in [({"reviews": -1}, "reviews"), ({"long_layers": 0}, "long_layers"),
                          ({"long_layers": 2.5}, "long_layers"), ({"batch_size": True}, "batch_size"),
                          ({"eps": 10**400}, "eps"), ({"eps": float("nan")}, "eps"), ({"split": "train"}, "split"),
                          ({"seed": -1}, "seed")]:
        with pytest.raises(ValueError, match=match):
            RateConfig(**kwargs)


def test_long_runs_refused_before_allocating(monkeypatch):
    from hardmax.memory import MemoryBudgetError

    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "1G")
    ids, mask, labels = _reviews()
    model = HardmaxClassifier(ModelConfig(vocab_size=60, d=3, layers=3))
    with pytest.raises(MemoryBudgetError, match=r"^long_layers=2000000 \(the long simulate runs"):
        measure_classifier(model, ids, mask, labels, RateConfig(long_layers=2_000_000))


def test_long_runs_in_batches_of_reviews_give_the_same_report(monkeypatch):
    """The long runs go through the reviews in batches sized by memory: any batch gives the same numbers."""
    import hardmax.experiments.rate as rate

    ids, mask, labels = _reviews(n=30)
    model = HardmaxClassifier(ModelConfig(vocab_size=60, d=3, layers=2))
    config = RateConfig(long_layers=8, batch_size=16)
    whole = measure_classifier(model, ids, mask, labels, config)
    assert rate.long_run_memory(8, 30, 12, 3, 16)[0] == 16
    monkeypatch.setattr(rate, "_LONG_BATCH_BYTES", 1)  # one review at a time
    assert rate.long_run_memory(8, 30, 12, 3, 16)[0] == 1
    single = measure_classifier(model, ids, mask, labels, config)
    assert json.dumps(single.to_dict()) == json.dumps(whole.to_dict())
    for name in ("hardmax", "softmax"):
        assert torch.equal(single.simulated[name].rate, whole.simulated[name].rate)
    assert torch.equal(single.leaders.leaders, whole.leaders.leaders)


def test_rate_cli_refuses_long_layers_before_reading_the_data(small_run, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "cache"))
    run, _ = small_run
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "2G")
    # a data path that does not exist: the refusal comes before the data are read
    code = main(["rate", "--run", str(run), "--data", str(tmp_path / "no-such-archive.tar.gz"),
                 "--long-layers", "2000000"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("hardmax rate: error: --long-layers 2000000 (the long simulate runs keep every layer")
    assert "choose a smaller value" in err
