"""`hardmax train`, `evaluate`, `explain` and `reproduce`: the IMDb sentiment classifier.

Options come from the configs (`DataConfig`, `TrainConfig`, `ModelConfig`, `ReproduceConfig`) through
`hardmax.cli.options`, so defaults, choices and help live in one place. Only those torch-free config
modules are imported while the parser is built; torch and the rest load inside the `_run_*` functions.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

from hardmax.cli.options import HelpFormatter, add_options, config_from_args, given
from hardmax.cli.sweep import add_scheduler_options, sweep_options

__all__ = ["add_evaluate", "add_explain", "add_predict", "add_reproduce", "add_train", "run_evaluate", "run_explain",
           "run_predict", "run_reproduce", "run_train"]

RUN_HELP = {
    "train": "run directory to create (config.json, vocab.json, history.json, model.safetensors)",
    "read": "run directory written by `hardmax train` or `hardmax reproduce` (e.g. runs/quick/d2)",
}
DATA_FLAGS = {"path": "--data", "seed": "--data-seed", "use_cache": "--no-cache", "download": "--no-download"}
DATA_HELP = {"path": "aclImdb directory, .tar.gz or Kaggle CSV; default: $HARDMAX_IMDB, then the archive recorded "
                     "in the cache directory, then download the canonical archive (84 MB)",
             "cache_dir": "preprocessed-tensor cache; default: $HARDMAX_CACHE or ~/.cache/hardmax",
             "use_cache": "neither read nor write the preprocessed-tensor cache",
             "download": "never download: fail unless the reviews are found locally"}
MODEL_FLAGS = {"alpha_init": "--alpha", "learn_alpha": "--fixed-alpha", "learn_A": "--learn-A", "A_eps": "--A-eps"}
MODEL_HELP = {"learn_alpha": "keep α at --alpha instead of learning it"}


def _train_config_class():
    """TrainConfig from its torch-free module (hardmax.training.config)."""
    try:
        from hardmax.training.config import TrainConfig
    except ImportError:  # a tree where training is still one module
        from hardmax.training import TrainConfig
    return TrainConfig


def _config(cls, args: argparse.Namespace, *, base=None, flags=None, **extra):
    """`config_from_args` (a config's complaint about a field worded with its option, `--lr`)."""
    return config_from_args(cls, args, base=base, flags=flags, **extra)


# Words a vocabulary may hold when --max-vocab is not given, for the memory check made before the data are
# read (IMDb at the default minimum count of 5 has about 35,000); train() checks again with the real one.
_VOCAB_GUESS = 100_000
_REVIEWS_GUESS = 50_000  # an evaluation batch holds at most the whole dataset


def _model_config(args: argparse.Namespace, vocab_size: int, classes: int = 2):
    """The `ModelConfig` of `hardmax train`'s options: --layer crate [--crate-heads K] gives CRATE blocks with
    K heads (`CrateBlocks`, the rest at its defaults); a complaint names the option."""
    from hardmax.models.config import CrateBlocks, ModelConfig

    heads = args.crate_heads
    if args.layer != "crate" and heads is not None:
        raise ValueError("--crate-heads applies to --layer crate only")
    try:
        crate = None if args.layer != "crate" else CrateBlocks() if heads is None else CrateBlocks(heads=heads)
        return _config(ModelConfig, args, vocab_size=vocab_size, flags=MODEL_FLAGS, crate=crate, classes=classes)
    except ValueError as e:
        message = str(e)
        if message.startswith("CrateBlocks.heads"):  # head_dim has no option here
            raise ValueError("--crate-heads" + message[len("CrateBlocks.heads"):].split(" (or give")[0]) from None
        raise


def _require_training_memory(model_config, train_config, data_config, d_option: str = "--d") -> None:
    """Refuse, before the data are read, a model and batches that cannot fit in memory (options named)."""
    from hardmax.memory import require_memory

    vocab = data_config.max_vocab or _VOCAB_GUESS
    estimate = dataclasses.replace(model_config, vocab_size=vocab).training_bytes(
        batch_size=train_config.batch_size, max_len=data_config.max_len,
        eval_batch_size=min(train_config.eval_batch_size, _REVIEWS_GUESS))
    require_memory(estimate, f"{d_option} {model_config.d} --layers {model_config.layers} --batch-size "
                   f"{train_config.batch_size} --eval-batch-size {train_config.eval_batch_size} --max-len "
                   f"{data_config.max_len} (a vocabulary of up to {vocab:,} words)", device=train_config.device)


def _set_threads(threads: int | None) -> None:
    if threads is None:
        return
    from hardmax.training.config import check_threads

    check_threads(threads, "--threads")
    import torch

    torch.set_num_threads(threads)


def _add_machine_options(p: argparse.ArgumentParser) -> None:
    """--device and --threads of the commands that run a trained model (train has them from TrainConfig)."""
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default: cpu)")
    p.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: torch's choice, "
                   "one per core)")


def _add_data_options(p: argparse.ArgumentParser) -> None:
    from hardmax.data.config import DataConfig

    g = p.add_argument_group("data (hardmax.data.DataConfig)")
    add_options(g, DataConfig, flags=DATA_FLAGS, helps=DATA_HELP, metavars={"path": "PATH", "cache_dir": "DIR"})


def _add_train_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training (hardmax.training.TrainConfig)")
    add_options(g, _train_config_class())
    g.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: torch's choice, "
                   "one per core)")


def add_train(subparsers) -> None:
    """Register `hardmax train` and its options on `subparsers`."""
    from hardmax.models.config import ModelConfig

    p = subparsers.add_parser("train", help="train the sentiment classifier on IMDb", formatter_class=HelpFormatter,
                              description="Train embedding → K pure-attention layers → mean → linear on IMDb "
                              "with softmax attention; select the epoch on validation under exact hardmax.\n"
                              "About 13-15 s per epoch for d = 16 on 2 CPU cores (about 20 s with --layer crate), "
                              "plus the data the first time.\n\n"
                              "example: hardmax train --run runs/t16 --d 16")
    p.add_argument("--run", required=True, metavar="DIR", help=RUN_HELP["train"])
    p.add_argument("--resume", action="store_true", help="continue the run in DIR from its last checkpoint")
    m = p.add_argument_group("model (hardmax.models.ModelConfig)")
    add_options(m, ModelConfig, exclude=("vocab_size", "pad_id", "crate", "classes"), flags=MODEL_FLAGS,
                helps=MODEL_HELP)
    m.add_argument("--layer", choices=("hardmax", "crate"), default="hardmax",
                   help="the paper's shared attention layer, or CRATE blocks (ModelConfig.crate) (default: hardmax)")
    m.add_argument("--crate-heads", type=int, metavar="K", help="--layer crate only: heads K of dimension d/K "
                   "(CrateBlocks.heads; default: one)")
    _add_data_options(p)
    _add_train_options(p)


def run_train(args: argparse.Namespace) -> int:
    """Run `hardmax train` with the parsed `args`; returns the exit code."""
    from hardmax.data import load_imdb
    from hardmax.data.config import DataConfig
    from hardmax.training import resolve_device, run_state, train

    train_config = _config(_train_config_class(), args)
    data_config = _config(DataConfig, args, flags=DATA_FLAGS)
    run = Path(args.run)
    state = run_state(run)  # checked before the data are read: a wrong --run fails at once
    if not args.resume and state in ("resumable", "trained"):
        raise ValueError(f"{run} already holds a run: add --resume to continue it, or choose a new --run directory")
    if args.resume and state != "resumable":
        raise ValueError(f"nothing to resume in {run}: it has no checkpoint.safetensors"
                         + (" (the run stopped before its first checkpoint): run it again without --resume"
                            if state == "unstarted" else ""))
    # The model's settings are checked before the data are read (a typo fails at once).
    _require_training_memory(_model_config(args, vocab_size=2), train_config, data_config)
    _set_threads(args.threads)
    resolve_device(train_config.device)  # a missing GPU is reported before the data are read
    data = load_imdb(data_config)
    model_config = _model_config(args, vocab_size=len(data.vocab), classes=data.classes)
    result = train(data.train, data.val, model_config=model_config, train_config=train_config, run_dir=run,
                   resume=args.resume, data_info=data.info(), vocab=data.vocab)
    print(f"best epoch {result.best_epoch}: validation accuracy ({train_config.select_on}) "
          f"{result.best_val_accuracy:.4f}; "
          f"run in {run}/")
    return 0


def add_evaluate(subparsers) -> None:
    """Register `hardmax evaluate` and its options on `subparsers`."""
    p = subparsers.add_parser("evaluate", help="test accuracy (softmax and hardmax) and leader statistics of a run",
                              formatter_class=HelpFormatter,
                              description="Accuracy and loss under softmax and exact hardmax, their agreement, and "
                              "the number of leaders per review, on the test (or validation) split of the data the "
                              "run was trained on. Writes RUN/metrics_<split>.json.\n\n"
                              "example: hardmax evaluate --run runs/quick/d16")
    p.add_argument("--run", required=True, metavar="DIR", help=RUN_HELP["read"])
    p.add_argument("--data", metavar="PATH", help="the reviews (default: found as for `hardmax train`)")
    p.add_argument("--on", choices=("test", "val"), default="test", help="split to evaluate (default: test)")
    _add_machine_options(p)


def run_evaluate(args: argparse.Namespace) -> int:
    """Run `hardmax evaluate` with the parsed `args`; returns the exit code."""
    import time

    from hardmax.cli.output import say
    from hardmax.explain import evaluate_with_leaders
    from hardmax.io import to_jsonable, write_json
    from hardmax.models import HardmaxClassifier
    from hardmax.training import evaluate, load_run

    _set_threads(args.threads)
    start = time.perf_counter()
    run = load_run(args.run, device=args.device)  # checks that config, vocabulary and weights agree
    model = run.model
    data = run.load_data(args.data)
    split = getattr(data, args.on)
    say(f"{args.on} set: {len(split):,} reviews; softmax and hardmax passes")
    # Leaders (C_i = {i}) belong to the paper's shared layer; a CRATE run (--layer crate) gets accuracies only.
    paper_layer = isinstance(model, HardmaxClassifier)
    if paper_layer:
        result, stats = evaluate_with_leaders(model, split, progress=True)
    else:
        result, stats = evaluate(model, split), None
    beta = model.inverse_temperature
    print(f"{args.on} set, {result.n} reviews, d = {model.config.d}" + ("" if paper_layer else ", CRATE blocks"))
    print("| attention | accuracy | macro-F1 | loss |\n|---|---|---|---|")
    print(f"| hardmax (exact) | {result.accuracy_hardmax:.4f} | {result.macro_f1_hardmax:.4f} | "
          f"{result.loss_hardmax:.4f} |")
    print(f"| softmax (β = {beta:g}) | {result.accuracy_softmax:.4f} | {result.macro_f1_softmax:.4f} | "
          f"{result.loss_softmax:.4f} |")
    passes = "hardmax pass with leader counts" if paper_layer else "hardmax pass"
    print(f"agreement {100 * result.agreement:.2f} %; {passes} {result.seconds_hardmax:.2f} s, "
          f"softmax pass {result.seconds_softmax:.2f} s")
    metrics = {"evaluation": to_jsonable(result)}
    if stats is not None:
        print(f"leaders per review: mean {stats.mean:.2f}, std {stats.std:.2f}, min {stats.min}, max {stats.max}; "
              f"{100 * stats.fraction_initial:.1f} % already leaders at layer 0")
        metrics["leaders"] = to_jsonable(dataclasses.replace(stats, per_review=None, logits=None))
    names = data.label_names
    print("\nconfusion under hardmax (rows: true class, columns: predicted)\n")
    print("| true \\ predicted | " + " | ".join(names) + " |\n|---" * 1 + "|---" * len(names) + "|")
    for name, row in zip(names, result.confusion_hardmax, strict=True):
        print(f"| {name} | " + " | ".join(f"{v:,}" for v in row) + " |")
    path = write_json(Path(args.run) / f"metrics_{args.on}.json", metrics)
    say(f"wrote {path} ({time.perf_counter() - start:.1f} s in all)")
    return 0


def add_explain(subparsers) -> None:
    """Register `hardmax explain` and its options on `subparsers`."""
    p = subparsers.add_parser("explain", help="prediction, leaders and followers of one review, with a figure",
                              formatter_class=HelpFormatter,
                              description="Run one review through a trained classifier under exact hardmax and "
                              "list its leaders (words whose attention set is only themselves) with their "
                              "followers, and draw the words through the layers. The figures mean most for "
                              "d = 2 (the plane itself); for d ≥ 8 almost every word is its own leader, and the "
                              "output lists the decisive leaders instead.\n\n"
                              "example: hardmax explain \"Awful, the worst film ever: boring, stupid and a waste "
                              "of time.\" --run runs/quick/d2")
    p.add_argument("text", help="the review text (quote it)")
    p.add_argument("--run", required=True, metavar="DIR", help=RUN_HELP["read"])
    p.add_argument("--out", metavar="DIR", help="where to write the figure (default: RUN/explain)")
    p.add_argument("--gif", action="store_true", help="also write a GIF of the layers")
    p.add_argument("--decisive", type=float, default=2.0,
                   help="a leader is decisive when its own decoder logit v·z + b exceeds this in absolute value "
                   "(default: 2)")


def run_explain(args: argparse.Namespace) -> int:
    """Run `hardmax explain` with the parsed `args`; returns the exit code."""
    from hardmax.cli.output import say
    from hardmax.explain import explain_text
    from hardmax.plots import save_figure
    from hardmax.plots.sentiment import animate_review, plot_review
    from hardmax.training import load_run

    if not (math.isfinite(args.decisive) and args.decisive >= 0):
        raise ValueError(f"--decisive must be a finite number ≥ 0 (a decoder logit), got {args.decisive}")
    run = load_run(args.run)  # checks that config, vocabulary and weights agree
    explanation = explain_text(run, args.text)
    print(explanation.summary(decisive=args.decisive))
    out = Path(args.out) if args.out else Path(args.run) / "explain"
    fig = plot_review(explanation, run.model, layers=(0, 1, 2, run.model.config.layers))
    paths = save_figure(fig, out / "review", tight=True, close=True)
    if args.gif:
        paths.append(animate_review(explanation, run.model, out / "review.gif"))
    say(f"figures: {', '.join(map(str, paths))}")
    return 0


REPRODUCE_HELP = {
    "dims": "embedding dimensions d, comma-separated (default: 2,4,8,16)",
    "out_dir": "run directories, one per d (default: runs/reproduce; --quick: runs/quick)",
    "report_dir": "where results.md, results.json and figures/ go (default: runs/reproduce; --quick: runs/quick; "
                  "the repository's tracked report: --report-dir results --benchmarks-page docs/reports/benchmarks.md)",
    "benchmarks_page": "a page that quotes the idle-machine benchmarks, linked from results.md (default: a "
                       "benchmarks.md beside the report, if any)",
    "lrs": "learning rates tried per d, comma-separated; the best on validation is kept (default: 0.01,0.003; "
           "--quick: 0.01)",
    "stopwords": "stop-word lists (nltk, nltk_keep_negations, sklearn, none) tried per d with every learning rate, "
                 "comma-separated; the best on validation is kept (default: nltk,sklearn; --quick: nltk)",
    "example_review": "test row drawn in the review figures (default: a short review each model gets right)",
}


def add_reproduce(subparsers) -> None:
    """Register `hardmax reproduce` and its options on `subparsers`."""
    from hardmax.experiments.reproduce import ReproduceConfig

    p = subparsers.add_parser("reproduce", help="the paper's sentiment results for d = 2, 4, 8, 16 → runs/reproduce/",
                              formatter_class=HelpFormatter,
                              description="Train the grid of embedding dimensions (candidates chosen on "
                              "validation), evaluate on the test set, count leaders, draw the figures, and write "
                              "results.md and results.json. Finished runs are reused, interrupted ones resumed.\n"
                              "Full run: about 45 min on 2 CPU cores (16 training runs; about 1.5 min when they are "
                              "finished and reused); --quick: about 1.5 min.\n\n"
                              "examples: hardmax reproduce --quick\n"
                              "          hardmax reproduce --report-dir results "
                              "--benchmarks-page docs/reports/benchmarks.md")
    p.add_argument("--quick", action="store_true", help="5,000 + 5,000 reviews, 4 epochs per d, one candidate, "
                   "into runs/quick/ (the README's first job)")
    add_options(p, ReproduceConfig, only=("dims", "out_dir", "report_dir", "benchmarks_page", "lrs", "stopwords",
                                          "layers", "beta", "confidence", "decisive", "example_review"),
                flags={"out_dir": "--out"}, helps=REPRODUCE_HELP, given_only=True,
                metavars={"out_dir": "DIR", "report_dir": "DIR", "benchmarks_page": "FILE", "example_review": "ROW"})
    p.add_argument("--data", metavar="PATH", help="the reviews (default: $HARDMAX_IMDB, the cache's record, download)")
    p.add_argument("--epochs", type=int, help="maximum epochs per d (default: 12; --quick: 4)")
    _add_machine_options(p)
    add_scheduler_options(p, "the candidate runs (one training run per d × stop-word list × learning rate, into "
                             "OUT/sweep; the workers need the run directories' filesystem)")


def _train_by_sweep(config, where: dict) -> None:
    """Train every candidate run of `config` as a sweep cell (`train_candidate`) into out_dir/sweep, so that the
    pipeline then finds them finished and reuses them; the data cached first, here, so that workers only read it."""
    from hardmax.data import load_imdb
    from hardmax.experiments.reproduce import candidates
    from hardmax.sweep import sweep

    for stop in config.stopwords:
        load_imdb(dataclasses.replace(config.data, stopwords=stop), progress=config.progress)
    # Absolute run directories: a worker's working directory need not be this one.
    settings = dataclasses.replace(config, out_dir=str(Path(config.out_dir).resolve())).to_json()
    result = sweep("train_candidate", [{"config": settings, "d": d, "stopwords": stop, "lr": lr}
                                       for d, stop, lr in candidates(config)],
                   out=Path(config.out_dir) / "sweep", progress=config.progress, **where)
    if result.failed:
        raise ValueError(f"{result.failed} candidate run(s) failed in the sweep: hardmax sweep --status "
                         f"{result.out} says why")


def run_reproduce(args: argparse.Namespace) -> int:
    """Run `hardmax reproduce` with the parsed `args`; returns the exit code."""
    from hardmax.experiments.pipeline import reproduce
    from hardmax.experiments.reproduce import ReproduceConfig, quick

    where = sweep_options(args)
    base = quick() if args.quick else ReproduceConfig()
    changes: dict = {}
    if args.data:
        changes["data"] = dataclasses.replace(base.data, path=args.data)
    train = base.train if args.epochs is None else _replace_train(base.train, epochs=args.epochs)
    changes["train"] = _replace_train(train, device=args.device)
    config = _config(ReproduceConfig, args, base=dataclasses.replace(base, **changes), flags={"out_dir": "--out"})
    _set_threads(args.threads)
    from hardmax.models.config import ModelConfig

    _require_training_memory(ModelConfig(vocab_size=2, d=max(config.dims), layers=config.layers, beta=config.beta),
                             config.train, config.data, d_option="--dims")
    if "report_dir" not in given(ReproduceConfig, args) and "out_dir" in given(ReproduceConfig, args):
        config = dataclasses.replace(config, report_dir=config.out_dir)  # the report beside its runs
    if args.scheduler is not None:
        _train_by_sweep(config, where)
    results = reproduce(config)
    print(f"wrote {Path(config.report_dir) / 'results.md'} and results.json ({len(results)} dimensions)")
    return 0


def _replace_train(train, **changes):
    try:
        return dataclasses.replace(train, **changes)
    except ValueError as e:
        raise ValueError(f"--{' '.join(str(e).split())}") from None


# --------------------------------------------------------------------------------------------
# hardmax predict
# --------------------------------------------------------------------------------------------


def add_predict(subparsers) -> None:
    """Register `hardmax predict` and its options on `subparsers`."""
    p = subparsers.add_parser(
        "predict", help="predictions for a file of texts, with their leaders (CSV or JSON Lines)",
        formatter_class=HelpFormatter,
        description="Classify every text of a file with a trained run: one row per text with the predicted class, "
                    "the probability of each class under the attention the run was selected on, the leader words "
                    "(C_i = {i} at the last layer) and the decisive leaders with the class each pushes towards. "
                    "Texts come from a .txt file or standard input (-), one per line, or from a column of a CSV, "
                    "TSV, JSON Lines or Parquet file. Written in batches as it goes, to a temporary file renamed "
                    "at the end (nothing half-written, also when killed with SIGTERM or Ctrl-C), or to standard "
                    "output; never onto the input itself.\n\n"
                    "Rows: \"row\" numbers the texts from 0. A table keeps every record in its place: an empty "
                    "cell, or a text with nothing left after cleaning (\"10/10\", \"!!!\", only stop words), gets "
                    "an empty prediction and NaN probabilities (null in JSON Lines). Blank lines are no texts: in a "
                    ".txt file (or between a table's records) they are skipped, so \"row\" then differs from the "
                    "line number; both counts are said on standard error.\n\n"
                    "examples: hardmax predict --run runs/quick/d16 reviews.txt --out predictions.csv\n"
                    "          hardmax predict --run runs/topics tickets.parquet --text-column body --out p.jsonl")
    p.add_argument("--run", required=True, metavar="DIR", help=RUN_HELP["read"])
    p.add_argument("input", metavar="FILE", help="the texts: a .txt file (one per line), a table, or - (stdin)")
    p.add_argument("--text-column", default="text", help="the column of a table holding the texts (default: text)")
    p.add_argument("--out", default="-", metavar="FILE",
                   help="where to write: .csv or .jsonl (the format follows the suffix), or - for standard output "
                        "as CSV (default: -)")
    p.add_argument("--decisive", type=float, default=2.0,
                   help="a leader is decisive when its own decoder logit (k classes: margin) exceeds this "
                        "(default: 2)")
    p.add_argument("--batch", type=int, default=2048, metavar="N", help="texts per pass (default: 2048)")
    _add_machine_options(p)


def run_predict(args: argparse.Namespace) -> int:
    """Run `hardmax predict` with the parsed `args`; returns the exit code."""
    import csv
    import json
    import math
    import sys
    import time

    from hardmax.cli.output import say
    from hardmax.data.tables import decode_text, read_texts, texts_of_lines
    from hardmax.explain import predict_texts
    from hardmax.io import atomic_write
    from hardmax.progress import progress
    from hardmax.training import load_run

    if not (math.isfinite(args.decisive) and args.decisive >= 0):
        raise ValueError(f"--decisive must be a finite number ≥ 0, got {args.decisive}")
    if args.batch < 1:
        raise ValueError(f"--batch must be ≥ 1, got {args.batch}")
    out = args.out
    fmt = "csv" if out == "-" else Path(out).suffix.lower().lstrip(".")
    if fmt not in ("csv", "jsonl"):
        raise ValueError(f"--out {out}: write .csv or .jsonl (or - for standard output)")
    if out != "-" and _same_file(args.input, out):
        raise ValueError(f"--out {out} is the input {'(standard input)' if args.input == '-' else args.input}: it "
                         "would be replaced by the predictions; write them to another file")
    _set_threads(args.threads)
    start = time.perf_counter()
    run = load_run(args.run, device=args.device)
    if args.input == "-":  # bytes, decoded as files are: a BOM dropped, bad bytes named with their line
        read = texts_of_lines(decode_text("<stdin>", sys.stdin.buffer.read()))
    else:
        read = read_texts(args.input, args.text_column)
    texts = read.texts
    if read.blank_lines:  # not texts: the rows below are the texts' numbers, not the file's lines
        say(f"{read.blank_lines:,} blank line(s) skipped: they are not texts (\"row\" numbers the texts, not the "
            "lines)")
    if not texts:
        raise ValueError(f"{args.input}: no texts")
    say(f"{len(texts):,} texts")
    empty = 0

    def write(stream) -> None:
        nonlocal empty
        writer = None
        bar = progress(total=len(texts), desc="predict", unit=" texts")
        for first in range(0, len(texts), args.batch):
            predictions = predict_texts(run, texts[first:first + args.batch], decisive=args.decisive, first=first)
            empty += sum(p.empty for p in predictions)
            rows = [p.to_row() for p in predictions]
            for offset, row in enumerate(rows):
                row = {"row": first + offset, **row}
                if fmt == "jsonl":  # JSON has no NaN: an empty text's probabilities are null
                    row = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
                    stream.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
                else:
                    if writer is None:
                        writer = csv.DictWriter(stream, fieldnames=list(row), lineterminator="\n")
                        writer.writeheader()
                    writer.writerow(row)
            bar.update(len(rows))
        bar.close()

    if out == "-":
        write(sys.stdout)
    else:
        def to_file(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                write(f)
        atomic_write(out, to_file)
    seconds = time.perf_counter() - start
    if empty:
        say(f"{empty:,} text(s) empty after cleaning (only stop words, digits or punctuation): no prediction, "
            "NaN probabilities")
    say(f"predicted {len(texts) - empty:,} texts in {seconds:.1f} s ({len(texts) / seconds:,.0f} texts/s)"
        + ("" if out == "-" else f"; wrote {out}"))
    return 0


def _same_file(a: str, b: str) -> bool:
    """Whether the input `a` (a path, or "-": standard input, which may be a file redirected with <) and the output
    path `b` are one file (the same path, a symbolic or a hard link, /dev/stdin), as far as can be told."""
    import os
    import sys

    pb = Path(b).expanduser()
    try:
        out = os.stat(pb)
    except OSError:  # the output does not exist yet (or cannot be looked at): compare what the paths resolve to
        return a != "-" and Path(a).expanduser().resolve() == pb.resolve()
    try:
        into = os.fstat(sys.stdin.fileno()) if a == "-" else os.stat(Path(a).expanduser())
    except (OSError, ValueError, AttributeError):  # no standard input (closed, or replaced by an object without one)
        return False
    return (into.st_dev, into.st_ino) == (out.st_dev, out.st_ino)
