"""The pipeline of `hardmax reproduce`: train or reuse a run per candidate, choose on validation, measure.

For each embedding dimension d: every candidate (stop-word list × learning rate) is trained, or a
finished run with the same settings and data is reused (`train_or_load`); the best on validation is
kept (`select_candidate`) and copied to out_dir/d{d}; it is evaluated on the test set under softmax and
exact hardmax, its leaders are counted, its leader words collected and its figures drawn
(`measure_dimension`). `reproduce` does all d and writes results.json and results.md
(`hardmax.experiments.report`). The test set is used only here, after model selection on validation.
"""

from __future__ import annotations

import dataclasses
import platform
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from hardmax.data import ImdbData, load_imdb
from hardmax.dynamics import Hardmax
from hardmax.experiments.report import benchmarks_link, candidate_name, read_benchmarks, render_report
from hardmax.experiments.reproduce import ReproduceConfig, candidate_dir
from hardmax.explain import evaluate_with_leaders, explain_ids, leader_word_counts
from hardmax.io import CheckpointError, read_json, write_json, write_text
from hardmax.models import HardmaxClassifier, ModelConfig
from hardmax.training import EpochRecord, load_run, train

__all__ = ["Candidate", "DimensionResult", "Selection", "TrainedRun", "measure_dimension",
           "reproduce", "select_candidate", "train_or_load"]


@dataclass(frozen=True)
class TrainedRun:
    """One trained run directory, as `train_or_load` left it."""

    model: HardmaxClassifier = field(repr=False)  # the selected (best-validation) weights
    history: tuple[EpochRecord, ...] = field(repr=False)  # one record per epoch, as in history.json
    best_epoch: int  # 1-based
    run_dir: Path
    reused: bool  # True: a finished run with the same settings and data was found and loaded, not trained

    @property
    def best_val_accuracy(self) -> float:
        """The best validation accuracy (exact hardmax) over the epochs."""
        return max(h.val_accuracy_hardmax for h in self.history)


@dataclass(frozen=True)
class Candidate:
    """One (stop-word list, learning rate) setting of a dimension and its run."""

    stopwords: str
    lr: float
    run: TrainedRun

    @property
    def name(self) -> str:
        """The candidate's name in the grid, "stop-word list / lr" (e.g. "nltk / 0.01")."""
        return candidate_name(self.stopwords, self.lr)


@dataclass(frozen=True)
class Selection:
    """The candidate kept for one d (best on validation), copied to out_dir/d{d}."""

    d: int
    chosen: Candidate
    run_dir: Path  # out_dir/d{d}
    data: ImdbData = field(repr=False)  # the chosen candidate's data (its stop-word list)
    grid: dict[str, float]  # candidate name -> best validation accuracy (exact hardmax), for every candidate
    training_seconds: float = 0.0  # the epochs of every candidate, as their histories record them
    reused: int = 0  # candidates found finished in out_dir (trained by an earlier call), not trained now


@dataclass(frozen=True)
class DimensionResult:
    """Everything measured for one embedding dimension."""

    d: int
    run_dir: str
    best_epoch: int
    epochs_run: int
    val_accuracy_hardmax: float
    lr: float  # the learning rate chosen on validation
    stopwords: str  # the stop-word list chosen on validation
    vocab_size: int  # of the chosen candidate's data
    grid: dict  # {"<stopwords> / <lr>": best validation accuracy (hardmax)} for every candidate
    alpha: float  # the learned α of the selected model
    test: dict  # Evaluation as a dict
    leaders: dict  # LeaderStats without the per-review tensor
    top_leader_words: dict  # {"positive": [[word, count], ...], "negative": [...]}: decisive leaders
    train_reviews_per_second: float  # median over epochs
    hardmax_test_seconds: float  # exact hardmax pass over the whole test set
    figures: list[str]
    top_leader_words_all: dict | None = None  # the same without the decisive-logit filter
    candidates: int = 1  # candidate runs for this d
    candidates_reused: int = 0  # of which found finished in out_dir rather than trained by this call
    candidates_training_seconds: float = 0.0  # their epochs' training time (from their histories)


def _model_config(d: int, config: ReproduceConfig, vocab_size: int) -> ModelConfig:
    return ModelConfig(vocab_size=vocab_size, d=d, layers=config.layers, beta=config.beta)


def train_or_load(d: int, data: ImdbData, config: ReproduceConfig, run_dir: Path | None = None) -> TrainedRun:
    """Reuse a finished run with exactly these settings and data, resume a compatible interrupted one,
    or train from scratch (a run from other settings or data in the directory is replaced).

    Trains with `config.train` (its lr included) in `run_dir` (default: out_dir/d{d}).
    """
    from hardmax.training import config_record, lock_run, settings_differences

    run_dir = Path(config.out_dir) / f"d{d}" if run_dir is None else Path(run_dir)
    model_config = _model_config(d, config, len(data.vocab))
    info = data.info()
    wanted = config_record(model_config, config.train, info)
    try:
        saved = read_json(run_dir / "config.json")
    except CheckpointError:
        saved = None
    # Fields that do not change the trained weights may differ.
    ignore = {"device", "eval_batch_size", "checkpoint_every"}

    def result_settings(record: dict) -> tuple:
        train = {k: v for k, v in record.get("train", {}).items() if k not in ignore}
        return record.get("model"), train, record.get("data")

    same = saved is not None and result_settings(saved) == result_settings(wanted)
    if same and (run_dir / "done.json").exists():
        try:
            run = load_run(run_dir, device=config.train.device)
            return TrainedRun(model=run.model, history=run.history,
                              best_epoch=read_json(run_dir / "done.json")["best_epoch"], run_dir=run_dir, reused=True)
        except CheckpointError:
            pass
    resume = (saved is not None and (run_dir / "checkpoint.safetensors").exists()
              and not (run_dir / "done.json").exists() and not settings_differences(saved, wanted))
    with lock_run(run_dir):  # the stale files are removed and the run trained under one lock
        if not resume:
            for stale in ("model.safetensors", "checkpoint.safetensors", "config.json", "history.json", "done.json",
                          "vocab.json"):
                (run_dir / stale).unlink(missing_ok=True)
        result = train(data.train, data.val, model_config=model_config, train_config=config.train,
                       run_dir=run_dir, resume=resume, data_info=info, vocab=data.vocab, progress=config.progress)
        write_json(run_dir / "done.json",
                   {"best_epoch": result.best_epoch, "best_val_accuracy": result.best_val_accuracy})
    return TrainedRun(model=result.model, history=result.history, best_epoch=result.best_epoch, run_dir=run_dir,
                      reused=False)


def _pick_example(model, data: ImdbData, max_words: int = 40) -> int:
    """A short test review that the model classifies correctly and confidently (for the figures)."""
    from hardmax.training import predict

    short = (data.test.lengths >= 12) & (data.test.lengths <= max_words)
    rows = short.nonzero().squeeze(-1)[:2000]
    if rows.numel() == 0:  # no review of a readable length: take the shortest ones
        rows = torch.argsort(data.test.lengths, stable=True)[:2000]
    logits = predict(model, data.test.ids[rows], data.test.mask[rows], rule=Hardmax())
    correct = (logits > 0) == (data.test.labels[rows] > 0)
    score = torch.where(correct, logits.abs(), torch.full_like(logits, -1.0))
    return int(rows[int(torch.argmax(score))])


def select_candidate(d: int, datasets: dict[str, ImdbData], config: ReproduceConfig) -> Selection:
    """Train d for every (stop-word list, learning rate) of the config and keep the best on validation.

    `datasets` maps each list of `config.stopwords` to its data. With a single candidate the run lives
    in out_dir/d{d}. With several, each gets out_dir/candidates/d{d}-{stopwords}-lr{lr}, and the
    chosen one is copied to out_dir/d{d}, so that the selected model is always at the same place.
    Ties go to the earlier candidate (lists, then rates, in the config's order); the test set plays
    no part.
    """
    final_dir = Path(config.out_dir) / f"d{d}"
    settings = [(stop, lr) for stop in config.stopwords for lr in config.lrs]
    candidates = []
    for stop, lr in settings:
        one = dataclasses.replace(config, train=dataclasses.replace(config.train, lr=lr))
        run_dir = candidate_dir(config, d, stop, lr)
        candidate = Candidate(stopwords=stop, lr=lr, run=train_or_load(d, datasets[stop], one, run_dir))
        if config.progress:
            what = f"d = {d}" + (f", stop words {stop}, learning rate {lr:g}" if len(settings) > 1 else "")
            how = ("reused the finished run (same settings and data; delete the directory to retrain)"
                   if candidate.run.reused else "trained")
            print(f"{what}: {how} in {run_dir}/", flush=True)
        candidates.append(candidate)
    grid = {c.name: c.run.best_val_accuracy for c in candidates}
    chosen = max(candidates, key=lambda c: grid[c.name])  # max keeps the first of equals: ties go to the earlier
    if chosen.run.run_dir != final_dir:
        _copy_run(chosen.run.run_dir, final_dir)
    seconds = sum(h.train_seconds for c in candidates for h in c.run.history)
    return Selection(d=d, chosen=chosen, run_dir=final_dir, data=datasets[chosen.stopwords], grid=grid,
                     training_seconds=seconds, reused=sum(c.run.reused for c in candidates))


def _copy_run(source: Path, target: Path) -> None:
    """Replace the run directory `target` by a copy of `source`, atomically (a crash leaves the old
    one or the new one, never a mix)."""
    staging = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(source, staging)
    except BaseException:  # an error, Ctrl-C or SIGTERM mid-copy: no half copy stays beside the runs
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def measure_dimension(selection: Selection, config: ReproduceConfig, report_dir: Path) -> DimensionResult:
    """Test accuracy, leader statistics, leader words and figures of the model chosen for one d."""
    from hardmax.plots import save_figure
    from hardmax.plots import sentiment as plots

    d, data, run = selection.d, selection.data, selection.chosen.run
    model = run.model
    test, stats = evaluate_with_leaders(model, data.test, batch_size=config.train.eval_batch_size,
                                        progress=config.progress)
    words = leader_word_counts(model, data.test.ids, data.test.mask, data.test.labels,
                               confidence=config.confidence, decisive=config.decisive)
    every = leader_word_counts(model, data.test.ids, data.test.mask, data.test.labels,
                               confidence=config.confidence, decisive=None)
    vocab_words = list(data.vocab.words)
    top = {side: [[vocab_words[k], c] for k, c in counter.most_common(25)] for side, counter in words.items()}
    top_all = {side: [[vocab_words[k], c] for k, c in counter.most_common(25)] for side, counter in every.items()}
    figures = []
    fig_dir = report_dir / "figures"
    fig = plots.plot_leader_words(words, vocab_words,
                                  title=f"Decisive leader words, d = {d} (confident, correct test reviews)")
    figures += save_figure(fig, fig_dir / f"leader_words_d{d}", tight=True, close=True)
    row = config.example_review if config.example_review is not None else _pick_example(model, data)
    ids = data.test.ids[row][data.test.mask[row]]
    explanation = explain_ids(model, ids, vocab_words)
    fig = plots.plot_review(explanation, model, layers=(0, 1, 2, config.layers))
    figures += save_figure(fig, fig_dir / f"review_d{d}", tight=True, close=True)
    if d == 2:
        figures.append(plots.animate_review(explanation, model, fig_dir / f"review_d{d}.gif"))
    history = run.history
    train_speed = sorted(h.train_reviews_per_second for h in history)[len(history) // 2]
    leaders = {k: v for k, v in asdict(stats).items() if k not in ("per_review", "logits")}
    stopwords, lr = selection.chosen.stopwords, selection.chosen.lr
    return DimensionResult(
        d=d, run_dir=str(selection.run_dir), best_epoch=run.best_epoch, epochs_run=len(history),
        val_accuracy_hardmax=selection.grid[candidate_name(stopwords, lr)], lr=lr, stopwords=stopwords,
        vocab_size=len(data.vocab), grid=selection.grid, alpha=float(model.alpha.detach()),
        test=asdict(test), leaders=leaders, top_leader_words=top, train_reviews_per_second=train_speed,
        hardmax_test_seconds=test.seconds_hardmax, figures=[str(f.relative_to(report_dir)) for f in figures],
        top_leader_words_all=top_all, candidates=len(selection.grid), candidates_reused=selection.reused,
        candidates_training_seconds=selection.training_seconds,
    )


def reproduce(config: ReproduceConfig) -> list[DimensionResult]:
    """Train and evaluate every d in `config.dims`, then write results.md and results.json into
    `config.report_dir`; returns one `DimensionResult` per d.

    Finished runs in `config.out_dir` are reused and interrupted ones resumed, so rerunning after a
    crash continues where it stopped.
    """
    start = time.perf_counter()
    torch.manual_seed(config.train.seed)
    report_dir = Path(config.report_dir)
    if config.benchmarks_page is not None and not Path(config.benchmarks_page).is_file():
        raise ValueError(f"benchmarks_page (--benchmarks-page) {config.benchmarks_page}: no such file "
                         "(the page results.md links to)")
    datasets = {stop: load_imdb(dataclasses.replace(config.data, stopwords=stop), progress=config.progress)
                for stop in config.stopwords}
    data = datasets[config.stopwords[0]]  # described in the report's header
    results = []
    for d in config.dims:
        t0 = time.perf_counter()
        results.append(measure_dimension(select_candidate(d, datasets, config), config, report_dir))
        if config.progress:
            r = results[-1]
            print(f"d = {d:2d}: test accuracy hardmax {r.test['accuracy_hardmax']:.4f}, softmax "
                  f"{r.test['accuracy_softmax']:.4f}, agreement {r.test['agreement']:.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    _write_report(results, data, config, report_dir, time.perf_counter() - start)
    return results


def _command(config: ReproduceConfig) -> str:
    """The command line that reproduces this report (the preset and where it writes)."""
    from hardmax.experiments.reproduce import quick

    base = quick() if config.label == "quick" else ReproduceConfig()
    words = ["hardmax reproduce"] + (["--quick"] if config.label == "quick" else [])
    if config.report_dir != base.report_dir and not Path(config.report_dir).is_absolute():
        words += ["--report-dir", Path(config.report_dir).as_posix()]  # absolute paths are the user's own
    if config.benchmarks_page is not None and not Path(config.benchmarks_page).is_absolute():
        words += ["--benchmarks-page", Path(config.benchmarks_page).as_posix()]
    return " ".join(words)


def _write_report(results: list[DimensionResult], data: ImdbData, config: ReproduceConfig, report_dir: Path,
                  seconds: float) -> None:
    machine = {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
               "torch": torch.__version__, "python": platform.python_version()}
    payload = {
        "label": config.label,
        "command": _command(config),
        "seconds_total": seconds,
        "machine": machine,
        "data": {**data.info(), "stats": {k: asdict(v) for k, v in data.stats.splits.items()},
                 "load_seconds": data.stats.seconds, "cache_hit": data.stats.cache_hit},
        # The learning rate is a candidate setting, recorded per d in the results.
        "train_config": {k: v for k, v in asdict(config.train).items() if k != "lr"},
        "candidates": {"lrs": list(config.lrs), "stopwords": list(config.stopwords)},
        "results": {str(r.d): asdict(r) for r in results},
        "benchmarks": read_benchmarks(report_dir),
        "benchmarks_link": benchmarks_link(report_dir, config.benchmarks_page),
        "report_dir": None if report_dir.is_absolute() else report_dir.as_posix(),
    }
    write_json(report_dir / "results.json", payload)
    write_text(report_dir / "results.md", render_report(payload))
