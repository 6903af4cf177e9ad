"""`hardmax train`, `evaluate`, `explain` and `reproduce`: the IMDb sentiment classifier."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch

from hardmax.cli.output import _jsonable, _say
from hardmax.io import write_json, write_text

# --------------------------------------------------------------------------------------------
# Sentiment commands: train, evaluate, explain, reproduce.
# --------------------------------------------------------------------------------------------


def _add_data_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--data", metavar="PATH", help="aclImdb directory, .tar.gz or Kaggle CSV "
                   "(default: $HARDMAX_IMDB, then the cache, then download the canonical archive)")
    g.add_argument("--split", choices=("standard", "paper"), default="standard",
                   help="standard 25k/25k, or the paper's seeded 70/30 of all 50k (default: standard)")
    g.add_argument("--val-fraction", type=float, default=0.1, help="validation share of the training part")
    g.add_argument("--val-split", choices=("movies", "random"), default="movies",
                   help="hold out blocks of consecutive review ids, i.e. whole movies as the test set does, "
                        "or random reviews (default: movies)")
    g.add_argument("--limit", type=int, help="use only the first N reviews of each split (quick runs)")
    g.add_argument("--min-count", type=int, default=5, help="minimum training count of a vocabulary word")
    g.add_argument("--truncation", choices=("head", "head_tail"), default="head_tail",
                   help="keep the first and last 64 tokens, or the first 128 as the paper (default: head_tail)")
    g.add_argument("--no-lowercase", action="store_true", help="keep case (as the paper's code does)")
    g.add_argument("--stopwords", choices=("nltk", "nltk_keep_negations", "sklearn", "none"), default="nltk",
                   help="stop-word list removed: NLTK's as the paper (shipped, no download), the same but "
                        "keeping its negations (not, no, dont, ...), scikit-learn's longer one, or none "
                        "(default: nltk)")
    g.add_argument("--cache-dir", help="preprocessed-tensor cache (default: $HARDMAX_CACHE or ~/.cache/hardmax)")


def _data_config(args: argparse.Namespace):
    from hardmax.data import DataConfig

    return DataConfig(path=args.data, split=args.split, val_fraction=args.val_fraction, limit=args.limit,
                      min_count=args.min_count, lowercase=not args.no_lowercase, cache_dir=args.cache_dir,
                      truncation=args.truncation, val_split=args.val_split, stopwords=args.stopwords)


def _add_train_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--epochs", type=int, default=12)
    g.add_argument("--batch-size", type=int, default=64)
    g.add_argument("--lr", type=float, default=1e-2)
    g.add_argument("--weight-decay", type=float, default=0.0, help="Adam L2 weight decay")
    g.add_argument("--word-dropout", type=float, default=0.3, help="share of tokens hidden per training batch")
    g.add_argument("--patience", type=int, default=3, help="early-stopping patience (epochs)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default: cpu)")
    g.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")


def _train_config(args: argparse.Namespace):
    from hardmax.training import TrainConfig

    if args.threads:
        torch.set_num_threads(args.threads)
    return TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                       weight_decay=args.weight_decay, word_dropout=args.word_dropout,
                       seed=args.seed, device=args.device)


def _add_train(subparsers) -> None:
    p = subparsers.add_parser("train", help="train the sentiment classifier on IMDb",
                              description="Train embedding → K pure-attention layers → mean → linear on IMDb "
                              "with softmax attention; select the epoch on validation under exact hardmax.")
    p.add_argument("--run", required=True, metavar="DIR", help="run directory (config, history, weights)")
    p.add_argument("--resume", action="store_true", help="continue the run in DIR from its last checkpoint")
    m = p.add_argument_group("model")
    m.add_argument("--d", type=int, default=16, help="token dimension (paper: 2, 4, 8, 16)")
    m.add_argument("--layers", type=int, default=8, help="K, applications of the shared layer")
    m.add_argument("--beta", type=float, default=1000.0, help="training inverse temperature (paper: 1000)")
    m.add_argument("--alpha", type=float, default=1.0, help="initial α > 0")
    m.add_argument("--fixed-alpha", action="store_true", help="keep α at --alpha instead of learning it")
    m.add_argument("--embedding-std", type=float, default=1.0, help="std of the N(0, std²) embedding initialisation")
    m.add_argument("--learn-A", action="store_true", help="learn an SPD A = LLᵀ + εI (default A = I)")
    m.add_argument("--paper-padding", action="store_true",
                   help="reproduce the authors' code: padding tokens attend, are attended and pooled")
    _add_data_options(p)
    _add_train_options(p)


def _run_train(args: argparse.Namespace) -> int:
    from hardmax.data import load_imdb
    from hardmax.experiments.reproduce import data_info
    from hardmax.models import ModelConfig
    from hardmax.training import train

    train_config = _train_config(args)
    data = load_imdb(_data_config(args))
    model_config = ModelConfig(vocab_size=len(data.vocab), d=args.d, layers=args.layers, beta=args.beta,
                               alpha_init=args.alpha, learn_alpha=not args.fixed_alpha, learn_A=args.learn_A,
                               embedding_std=args.embedding_std, paper_padding=args.paper_padding)
    run = Path(args.run)
    result = train(data.train, data.val, model_config=model_config, train_config=train_config, run_dir=run,
                   resume=args.resume, data_info=data_info(data))
    write_text(run / "vocab.json", data.vocab.to_json())
    print(f"best epoch {result.best_epoch}: validation accuracy (hardmax) {result.best_val_accuracy:.4f}; "
          f"run in {run}/")
    return 0


def _add_evaluate(subparsers) -> None:
    p = subparsers.add_parser("evaluate", help="test accuracy (softmax and hardmax) and leader statistics of a run")
    p.add_argument("--run", required=True, metavar="DIR")
    p.add_argument("--data", metavar="PATH", help="the data (default: as for train)")
    p.add_argument("--on", choices=("test", "val"), default="test", help="split to evaluate (default: test)")
    p.add_argument("--device", default="cpu")


def _run_evaluate(args: argparse.Namespace) -> int:
    from hardmax.data import DataConfig, load_imdb
    from hardmax.explain import leader_statistics
    from hardmax.training import evaluate, load_run

    model, record = load_run(args.run, device=args.device)
    data = load_imdb(DataConfig.from_record(record.get("data", {}), path=args.data))
    if len(data.vocab) != model.config.vocab_size:
        raise ValueError(f"the data's vocabulary ({len(data.vocab)} words) differs from the run's "
                         f"({model.config.vocab_size}); pass the same data the run was trained on")
    split = getattr(data, args.on)
    result = evaluate(model, split)
    stats = leader_statistics(model, split.ids, split.mask)
    print(f"{args.on} set, {result.n} reviews, d = {model.config.d}")
    print("| attention | accuracy | loss |\n|---|---|---|")
    print(f"| hardmax (exact) | {result.accuracy_hardmax:.4f} | {result.loss_hardmax:.4f} |")
    print(f"| softmax (β = {model.config.beta:g}) | {result.accuracy_softmax:.4f} | {result.loss_softmax:.4f} |")
    print(f"agreement {100 * result.agreement:.2f} %; hardmax pass {result.seconds_hardmax:.2f} s")
    print(f"leaders per review: mean {stats.mean:.2f}, std {stats.std:.2f}, min {stats.min}, max {stats.max}; "
          f"{100 * stats.fraction_initial:.1f} % already leaders at layer 0")
    write_json(Path(args.run) / f"metrics_{args.on}.json",
               {"evaluation": _jsonable(result), "leaders": _jsonable(dataclasses.replace(stats, per_review=None))})
    return 0


def _add_explain(subparsers) -> None:
    p = subparsers.add_parser("explain", help="prediction, leaders and followers of one review, with a figure")
    p.add_argument("text", help="the review text")
    p.add_argument("--run", required=True, metavar="DIR")
    p.add_argument("--out", metavar="DIR", help="where to write the figure (default: RUN/explain)")
    p.add_argument("--gif", action="store_true", help="also write a GIF of the layers")


def _run_explain(args: argparse.Namespace) -> int:
    from hardmax.data import DataConfig, Vocabulary, encode_texts
    from hardmax.explain import explain_ids
    from hardmax.plots import save_figure
    from hardmax.plots.sentiment import animate_review, plot_review
    from hardmax.training import load_run

    model, record = load_run(args.run)
    vocab = Vocabulary.from_json((Path(args.run) / "vocab.json").read_text(encoding="utf-8"))
    data = DataConfig.from_record(record.get("data", {}))
    encoded = encode_texts(args.text, vocab, max_len=data.max_len, truncation=data.truncation,
                           **data.clean_options())
    ids = encoded.ids[0][encoded.mask[0]]
    explanation = explain_ids(model, ids, list(vocab.words))
    print(explanation.summary())
    out = Path(args.out) if args.out else Path(args.run) / "explain"
    fig = plot_review(explanation, model, layers=(0, 1, 2, model.config.layers))
    paths = save_figure(fig, out / "review", tight=True, close=True)
    if args.gif:
        paths.append(animate_review(explanation, model, out / "review.gif"))
    _say(f"figures: {', '.join(map(str, paths))}")
    return 0


def _add_reproduce(subparsers) -> None:
    p = subparsers.add_parser("reproduce", help="the paper's sentiment results for d = 2, 4, 8, 16 → docs/results.md",
                              description="Train the grid of embedding dimensions, evaluate on the test set, count "
                              "leaders, draw the figures, and write results.md and results.json.")
    p.add_argument("--quick", action="store_true", help="5,000 + 5,000 reviews and 4 epochs per d (~3 min); "
                   "writes to runs/quick/")
    p.add_argument("--data", metavar="PATH", help="the data (default: $HARDMAX_IMDB, cache, download)")
    p.add_argument("--dims", help="comma-separated dimensions (default: 2,4,8,16)")
    p.add_argument("--out", metavar="DIR", help="run directories (default: runs/reproduce or runs/quick)")
    p.add_argument("--report-dir", metavar="DIR", help="results.md/json and figures (default: docs or runs/quick)")
    p.add_argument("--epochs", type=int, help="maximum epochs per d")
    p.add_argument("--lrs", help="comma-separated learning rates tried per d, the best on validation kept "
                   "(default: 0.01,0.003; --quick: 0.01)")
    p.add_argument("--stopwords", help="comma-separated stop-word lists (nltk, nltk_keep_negations, sklearn, none) "
                   "tried per d with every learning rate, the best on validation kept (default: nltk,sklearn; "
                   "--quick: nltk)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch CPU threads")


def _run_reproduce(args: argparse.Namespace) -> int:
    from hardmax.experiments.reproduce import ReproduceConfig, quick, reproduce

    if args.threads:
        torch.set_num_threads(args.threads)
    config = quick() if args.quick else ReproduceConfig()
    changes: dict = {}
    if args.dims:
        try:
            changes["dims"] = tuple(int(x) for x in args.dims.split(","))
        except ValueError:
            raise ValueError(f"--dims must be comma-separated integers, got {args.dims!r}") from None
    if args.lrs:
        try:
            changes["lrs"] = tuple(float(x) for x in args.lrs.split(","))
        except ValueError:
            raise ValueError(f"--lrs must be comma-separated numbers, got {args.lrs!r}") from None
    if args.stopwords:
        changes["stopwords"] = tuple(args.stopwords.split(","))
    if args.out:
        changes["out_dir"] = args.out
    if args.report_dir:
        changes["report_dir"] = args.report_dir
    if args.data:
        changes["data"] = dataclasses.replace(config.data, path=args.data)
    train = config.train
    if args.epochs:
        train = dataclasses.replace(train, epochs=args.epochs)
    changes["train"] = dataclasses.replace(train, device=args.device)
    config = dataclasses.replace(config, **changes)
    results = reproduce(config)
    print(f"wrote {Path(config.report_dir) / 'results.md'} and results.json ({len(results)} dimensions)")
    return 0
