"""Command line: ``hardmax <command> [options]``; a thin layer over the library.

Each command is a pair: ``_add_<command>(subparsers)`` declares its arguments and
``_run_<command>(args) -> int`` turns them into a frozen config and library calls. `COMMANDS`
registers the pairs, in the order ``hardmax --help`` lists them. `main` parses, dispatches, and turns
bad input (ValueError, OSError) into a one-line message on stderr and exit code 2, without a
traceback. Tables go to stdout, progress and timings to stderr. Nothing imports this package.

Files: `inputs` and `output` (reading arrays, writing results), one file per group of commands
(`simulate`; `sentiment`: train, evaluate, explain, reproduce), and `app` (the parser and `main`).
"""

from __future__ import annotations

from hardmax.cli.app import COMMANDS, main

__all__ = [
    "COMMANDS",
    "main",
]
