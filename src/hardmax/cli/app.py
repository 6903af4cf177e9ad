"""The `hardmax` parser, its commands, and `main` (bad input or no memory -> one line on stderr, exit code 2;
Ctrl-C -> "hardmax: interrupted", exit code 130)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata

from hardmax.cli.explore import add_explore, run_explore
from hardmax.cli.inspect import add_inspect, run_inspect
from hardmax.cli.rate import add_rate, run_rate
from hardmax.cli.sentiment import (
    add_evaluate,
    add_explain,
    add_predict,
    add_reproduce,
    add_train,
    run_evaluate,
    run_explain,
    run_predict,
    run_reproduce,
    run_train,
)
from hardmax.cli.simulate import add_particles, add_simulate, run_particles, run_simulate
from hardmax.cli.svm import add_svm, run_svm
from hardmax.cli.sweep import add_sweep, run_sweep
from hardmax.terminate import Terminated, sigterm_exits

__all__ = ["COMMANDS", "Command", "build_parser", "main"]

# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """One `hardmax` command: its name, the function that declares its options on the subparsers, and the
    function that runs it on the parsed arguments (returning the exit code)."""

    name: str
    add: Callable[[argparse._SubParsersAction], None]
    run: Callable[[argparse.Namespace], int]


#: The subcommands of `hardmax`, in the order `hardmax --help` lists them.
COMMANDS: tuple[Command, ...] = (
    Command("simulate", add_simulate, run_simulate),
    Command("particles", add_particles, run_particles),
    Command("train", add_train, run_train),
    Command("evaluate", add_evaluate, run_evaluate),
    Command("explain", add_explain, run_explain),
    Command("predict", add_predict, run_predict),
    Command("reproduce", add_reproduce, run_reproduce),
    Command("svm", add_svm, run_svm),
    Command("rate", add_rate, run_rate),
    Command("explore", add_explore, run_explore),
    Command("inspect", add_inspect, run_inspect),
    Command("sweep", add_sweep, run_sweep),
)


class _UsageError(Exception):
    """A command line argparse rejects; `main` prints it and returns 2."""


class _Parser(argparse.ArgumentParser):
    # argparse's default exits the interpreter; raising lets `main(argv)` return a code instead.
    def error(self, message: str):
        raise _UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


def build_parser() -> _Parser:
    """The `hardmax` parser: `--version`, and one subcommand per entry of `COMMANDS`, set to run that command."""
    try:
        version = metadata.version("hardmax")
    except metadata.PackageNotFoundError:
        version = "unknown"
    parser = _Parser(prog="hardmax", description="Pure-attention hardmax transformers "
                     "(Alcalde, Fantuzzi, Zuazua 2024, arXiv 2407.01602).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add(subparsers)
        subparsers.choices[command.name].set_defaults(_handler=command.run)
    return parser


def _command(args: argparse.Namespace | None) -> str:
    return "hardmax" if args is None else f"hardmax {args.command}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hardmax`` with `argv` (default: the process's arguments); return the exit code."""
    parser = build_parser()
    args = None
    try:
        args = parser.parse_args(argv)
        with sigterm_exits():  # SIGTERM: every finally runs, no temporary file stays (exit 143)
            return int(args._handler(args))
    except Terminated:  # SIGTERM: what was being written was removed on the way out
        print("hardmax: terminated", file=sys.stderr)
        return 143
    except _UsageError as e:
        print(e, file=sys.stderr)
        return 2
    except (ValueError, OSError, FloatingPointError) as e:
        # ValueError covers DataError, CheckpointError (a run directory locked, damaged or edited) and
        # MemoryBudgetError (a size refused before allocating); OSError a disk full or a permission;
        # FloatingPointError a training that diverged.
        print(f"{_command(args)}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as e:  # an allocation no estimate foresaw (torch and NumPy raise it
        # with no message; a GPU's is torch.OutOfMemoryError, a RuntimeError): one line; other errors go on
        if isinstance(e, RuntimeError) and type(e).__name__ != "OutOfMemoryError":
            raise
        detail = " ".join(str(e).split()).split(". ")[0]
        print(f"{_command(args)}: error: out of memory{': ' + detail if detail else ''}; choose smaller sizes "
              "(fewer tokens, layers, reviews or seeds)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: files are written atomically, so nothing half-written is left
        print("hardmax: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # --help and --version
        return e.code if isinstance(e.code, int) else 0
