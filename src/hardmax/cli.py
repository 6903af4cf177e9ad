"""Command line: ``hardmax <command> [options]``; a thin layer over the library.

Each command is a pair: ``_add_<command>(subparsers)`` declares its arguments and
``_run_<command>(args) -> int`` turns them into a frozen config and library calls. `COMMANDS`
registers the pairs, in the order ``hardmax --help`` lists them. `main` parses, dispatches, and turns
bad input (ValueError, OSError) into a one-line message on stderr and exit code 2, without a
traceback. Tables go to stdout, progress and timings to stderr. Nothing imports this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from hardmax.checkpoint import atomic_write, write_json
from hardmax.dynamics import Trajectory, simulate
from hardmax.plots import animate, figure2, plot_trajectory, save_figure
from hardmax.theory import check_theorem, figure2_configurations

# --------------------------------------------------------------------------------------------
# Reading user input.
# --------------------------------------------------------------------------------------------


def _read_csv(path: Path) -> np.ndarray:
    """A numeric CSV file as an (n, d) float64 array; a first line that is not numeric is a header."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    rows = [[cell.strip() for cell in line.split(",")] for line in lines]
    if rows:
        try:
            [float(cell) for cell in rows[0]]
        except ValueError:
            rows = rows[1:]  # a header
    if not rows:
        raise ValueError(f"{path} holds no rows of numbers")
    widths = sorted({len(row) for row in rows})
    if len(widths) > 1:
        raise ValueError(f"{path}: rows have different numbers of columns ({widths})")
    try:
        return np.array([[float(cell) for cell in row] for row in rows], dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def _read_array(path: Path, what: str) -> np.ndarray:
    """An (rows, cols) float64 array from a .npy or .csv file."""
    if not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        array = np.load(path, allow_pickle=False)
    elif suffix in (".csv", ".txt"):
        array = _read_csv(path)
    else:
        raise ValueError(f"{what} file must be .npy or .csv, got {path.name}")
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{what} must be a 2-D array with at least one row and column, "
                         f"got shape {array.shape} from {path}")
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{what} must be real numbers, got dtype {array.dtype} from {path}")
    return array.astype(np.float64)


def read_matrix(text: str) -> np.ndarray:
    """The matrix A from a .npy/.csv file or a literal: rows split by ';', entries by ',' ("2,0;0,1")."""
    path = Path(text)
    if path.suffix.lower() in (".npy", ".csv", ".txt") or path.is_file():
        return _read_array(path, "A")
    try:
        rows = [[float(cell) for cell in row.replace(",", " ").split()] for row in text.split(";")]
    except ValueError:
        raise ValueError(f"cannot read A from {text!r}: give a .npy/.csv file or a literal like '2,0;0,1'") \
            from None
    if not rows or any(len(row) != len(rows[0]) for row in rows) or not rows[0]:
        raise ValueError(f"A literal {text!r} must have rows of equal length, like '2,0;0,1'")
    return np.array(rows, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# hardmax simulate
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SimulateConfig:
    """What `hardmax simulate` runs; exactly one source of tokens (Figure 2 when none is given)."""

    tokens: Path | None = None  # .npy (n, d) or .csv with d columns (header optional)
    random: int | None = None  # this many standard normal tokens instead of a file
    dim: int | None = None  # dimension of the random tokens (default 2)
    seed: int | None = None  # seed of the random tokens (default 0)
    A: str | None = None  # score matrix: .npy/.csv file or literal "2,0;0,1"; None = identity
    alpha: float = 0.5  # step α > 0 of every layer (γ = α / (1 + α)); the paper's Figure 2 uses 0.5
    layers: int = 30  # number of layers
    out: Path | None = None  # output folder; None = runs/figure2 or runs/simulate
    gif: bool = True  # also render a GIF animation (the slowest part)
    fps: int = 8  # frames per second of the GIF

    def __post_init__(self) -> None:
        if self.tokens is not None and self.random is not None:
            raise ValueError("give either --tokens FILE or --random N, not both")
        if self.random is None and (self.dim is not None or self.seed is not None):
            raise ValueError("--dim and --seed describe random tokens: add --random N")
        if self.random is not None and self.random < 1:
            raise ValueError(f"--random needs at least one token, got {self.random}")
        if self.dim is not None and self.dim < 1:
            raise ValueError(f"--dim must be ≥ 1, got {self.dim}")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"--alpha must be finite and > 0, got {self.alpha}")
        if self.layers < 0:
            raise ValueError(f"--layers must be ≥ 0, got {self.layers}")
        if self.fps < 1:
            raise ValueError(f"--fps must be ≥ 1, got {self.fps}")

    @property
    def figure2(self) -> bool:
        """True when no tokens are given: reproduce the paper's Figure 2."""
        return self.tokens is None and self.random is None


def _add_simulate(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="run the hardmax dynamics, draw them, and check Theorem 2.1",
        description="Run the pure-attention hardmax dynamics on tokens, write figures, a GIF, the "
                    "trajectory and the check of Theorem 2.1 (leaders reach vertices of a polytope K, "
                    "other tokens vertices of K or points of S). Without tokens: the paper's Figure 2.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--figure2", action="store_true",
                        help="reproduce the paper's Figure 2 (the default when no tokens are given)")
    source.add_argument("--tokens", type=Path, metavar="FILE",
                        help=".npy array (n, d) or .csv file with d columns (header optional)")
    source.add_argument("--random", type=int, metavar="N", help="N random standard normal tokens")
    p.add_argument("--dim", type=int, metavar="D", help="dimension of --random tokens (default 2)")
    p.add_argument("--seed", type=int, metavar="S", help="seed of --random tokens (default 0)")
    p.add_argument("--A", metavar="FILE_OR_LIST",
                   help="symmetric positive definite score matrix: .npy/.csv file or literal like "
                        "'2,0;0,1' (default: identity)")
    p.add_argument("--alpha", type=float, default=0.5, help="step α > 0 (default 0.5)")
    p.add_argument("--layers", type=int, default=30, help="number of layers (default 30)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="output folder (default runs/figure2, or runs/simulate for your tokens)")
    p.add_argument("--no-gif", dest="gif", action="store_false", help="skip the GIF animation")
    p.add_argument("--fps", type=int, default=8, help="frames per second of the GIF (default 8)")


def _run_simulate(args: argparse.Namespace) -> int:
    config = SimulateConfig(tokens=args.tokens, random=args.random, dim=args.dim, seed=args.seed, A=args.A,
                            alpha=args.alpha, layers=args.layers, out=args.out, gif=args.gif, fps=args.fps)
    return _simulate_figure2(config) if config.figure2 else _simulate_tokens(config)


def _simulate_figure2(config: SimulateConfig) -> int:
    out = config.out or Path("runs/figure2")
    start = time.perf_counter()
    A = None if config.A is None else read_matrix(config.A)
    trajectories = {name: simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
                    for name, tokens in figure2_configurations().items()}
    reports = {name: check_theorem(trajectory) for name, trajectory in trajectories.items()}
    _say(f"simulated the {len(trajectories)} configurations of Figure 2, {config.layers} layers, "
         f"α = {config.alpha:g}: {time.perf_counter() - start:.2f} s")
    tables = "\n\n".join(f"## {name}\n\n{report.table()}" for name, report in reports.items())
    print(tables)
    written = [
        *_timed("figure", lambda: save_figure(figure2(trajectories), out / "figure2")),
        _write_text(out / "report.txt", tables + "\n"),
        write_json(out / "report.json", {"config": _jsonable(config),
                                         "theorem": {k: _jsonable(r) for k, r in reports.items()}}),
    ]
    if config.gif:
        # The row whose clusters sit off the leaders shows the most of Theorem 2.1.
        name = next((k for k in trajectories if "non" in k.lower()), list(trajectories)[-1])
        written += _timed("GIF", lambda: [animate(trajectories[name], out / "figure2.gif", fps=config.fps,
                                                  title=name.replace("_", " "))])
    _say(_summary(written, start))
    return 0


def _simulate_tokens(config: SimulateConfig) -> int:
    out = config.out or Path("runs/simulate")
    start = time.perf_counter()
    if config.tokens is not None:
        tokens = _read_array(config.tokens, "tokens")
        source = config.tokens.name
    else:
        dim, seed = config.dim or 2, config.seed or 0
        tokens = np.random.default_rng(seed).standard_normal((config.random, dim))
        source = f"random (seed {seed})"
    A = None if config.A is None else read_matrix(config.A)
    trajectory = simulate(tokens, alpha=config.alpha, layers=config.layers, A=A)
    report = check_theorem(trajectory)
    n, d = tokens.shape
    _say(f"simulated n = {n} tokens in R^{d}, {config.layers} layers, α = {config.alpha:g}: "
         f"{time.perf_counter() - start:.2f} s")
    table = report.table()
    print(table)
    title = f"{source}: n = {n}, d = {d}, α = {config.alpha:g}, {'A = I' if A is None else 'A given'}"
    written = [
        _save_npy(out / "trajectory.npy", trajectory),
        _write_text(out / "report.txt", table + "\n"),
        write_json(out / "report.json", {"config": _jsonable(config), "theorem": _jsonable(report)}),
        *_timed("figure", lambda: save_figure(plot_trajectory(trajectory, title=title), out / "figure")),
    ]
    if config.gif:
        written += _timed("GIF", lambda: [animate(trajectory, out / "animation.gif", fps=config.fps,
                                                  title=title)])
    _say(_summary(written, start))
    return 0


# --------------------------------------------------------------------------------------------
# Output helpers.
# --------------------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(f"hardmax: {message}", file=sys.stderr, flush=True)


def _timed(what: str, make: Callable[[], list[Path]]) -> list[Path]:
    start = time.perf_counter()
    paths = make()
    _say(f"{what}: {', '.join(p.name for p in paths)} in {time.perf_counter() - start:.2f} s")
    return paths


def _summary(paths: list[Path], start: float) -> str:
    folder = paths[0].parent
    return f"wrote {len(paths)} files to {folder}/ in {time.perf_counter() - start:.1f} s"


def _write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _save_npy(path: Path, trajectory: Trajectory) -> Path:
    """(layers + 1, n, d) positions; `np.save` to an open file, which keeps the temporary name."""
    tokens = trajectory.tokens.detach().cpu().numpy()

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.save(f, tokens)

    return atomic_write(path, write)


def _jsonable(x):
    """Plain JSON values for configs and reports (dataclasses, tensors, arrays, paths); NaN -> None."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, torch.Tensor):
        return _jsonable(x.detach().cpu().tolist())
    if isinstance(x, np.ndarray | np.generic):
        return _jsonable(x.tolist())
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set | frozenset):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, bool | int | str):
        return x
    return str(x)


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
    g.add_argument("--truncation", choices=("head", "head_tail"), default="head",
                   help="keep the first 128 tokens (paper), or the first and last 64 (default: head)")
    g.add_argument("--no-lowercase", action="store_true", help="keep case (as the paper's code does)")
    g.add_argument("--cache-dir", help="preprocessed-tensor cache (default: $HARDMAX_CACHE or ~/.cache/hardmax)")


def _data_config(args: argparse.Namespace):
    from hardmax.data import DataConfig

    return DataConfig(path=args.data, split=args.split, val_fraction=args.val_fraction, limit=args.limit,
                      min_count=args.min_count, lowercase=not args.no_lowercase, cache_dir=args.cache_dir,
                      truncation=args.truncation, val_split=args.val_split)


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
    from hardmax.train import TrainConfig

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
    from hardmax.models import ModelConfig
    from hardmax.reproduce import data_info
    from hardmax.train import train

    train_config = _train_config(args)
    data = load_imdb(_data_config(args))
    model_config = ModelConfig(vocab_size=len(data.vocab), d=args.d, layers=args.layers, beta=args.beta,
                               alpha_init=args.alpha, learn_alpha=not args.fixed_alpha, learn_A=args.learn_A,
                               embedding_std=args.embedding_std, paper_padding=args.paper_padding)
    run = Path(args.run)
    result = train(data.train, data.val, model_config=model_config, train_config=train_config, run_dir=run,
                   resume=args.resume, data_info=data_info(data))
    _write_text(run / "vocab.json", data.vocab.to_json())
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
    from hardmax.measures import leader_statistics
    from hardmax.train import evaluate, load_run

    model, record = load_run(args.run, device=args.device)
    fields = {f.name for f in dataclasses.fields(DataConfig)}
    settings = {k: v for k, v in record.get("data", {}).items() if k in fields}
    data = load_imdb(DataConfig(**{**settings, "path": args.data}))
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
    from hardmax.data import Vocabulary, encode_texts
    from hardmax.measures import explain_ids
    from hardmax.sentiment_plots import animate_review, plot_review, save
    from hardmax.train import load_run

    model, record = load_run(args.run)
    vocab = Vocabulary.from_json((Path(args.run) / "vocab.json").read_text(encoding="utf-8"))
    data = record.get("data", {})
    encoded = encode_texts(args.text, vocab, max_len=data.get("max_len", 128),
                           truncation=data.get("truncation", "head"),
                           lowercase=data.get("lowercase", True), lemmatize=data.get("lemmatize", True),
                           remove_stopwords=data.get("remove_stopwords", True))
    ids = encoded.ids[0][encoded.mask[0]]
    explanation = explain_ids(model, ids, list(vocab.words))
    print(explanation.summary())
    out = Path(args.out) if args.out else Path(args.run) / "explain"
    paths = save(plot_review(explanation, model, layers=(0, 1, 2, model.config.layers)), out / "review")
    if args.gif:
        paths.append(str(animate_review(explanation, model, out / "review.gif")))
    _say(f"figures: {', '.join(paths)}")
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
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, help="torch CPU threads")


def _run_reproduce(args: argparse.Namespace) -> int:
    from hardmax.reproduce import ReproduceConfig, quick, reproduce

    if args.threads:
        torch.set_num_threads(args.threads)
    config = quick() if args.quick else ReproduceConfig()
    changes: dict = {}
    if args.dims:
        try:
            changes["dims"] = tuple(int(x) for x in args.dims.split(","))
        except ValueError:
            raise ValueError(f"--dims must be comma-separated integers, got {args.dims!r}") from None
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


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

Command = tuple[str, Callable[[argparse._SubParsersAction], None], Callable[[argparse.Namespace], int]]
COMMANDS: list[Command] = [
    ("simulate", _add_simulate, _run_simulate),
    ("train", _add_train, _run_train),
    ("evaluate", _add_evaluate, _run_evaluate),
    ("explain", _add_explain, _run_explain),
    ("reproduce", _add_reproduce, _run_reproduce),
]


class _UsageError(Exception):
    """A command line argparse rejects; `main` prints it and returns 2."""


class _Parser(argparse.ArgumentParser):
    # argparse's default exits the interpreter; raising lets `main(argv)` return a code instead.
    def error(self, message: str):
        raise _UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


def _parser() -> _Parser:
    try:
        version = metadata.version("hardmax")
    except metadata.PackageNotFoundError:
        version = "unknown"
    parser = _Parser(prog="hardmax", description="Pure-attention hardmax transformers "
                     "(Alcalde, Fantuzzi, Zuazua 2024, arXiv 2407.01602).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add, run in COMMANDS:
        add(subparsers)
        subparsers.choices[name].set_defaults(_handler=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hardmax`` with `argv` (default: the process's arguments); return the exit code."""
    parser = _parser()
    args = None
    try:
        args = parser.parse_args(argv)
        return int(args._handler(args))
    except _UsageError as e:
        print(e, file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        command = "hardmax" if args is None else f"hardmax {args.command}"
        print(f"{command}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help and --version
        return e.code if isinstance(e.code, int) else 0
