"""Command line: ``hardmax <command> [options]``; a thin layer over the library.

Each command is a pair: ``add_<command>(subparsers)`` declares its arguments and
``run_<command>(args) -> int`` turns them into a frozen config and library calls. `COMMANDS`
registers the pairs, in the order ``hardmax --help`` lists them. `main` parses, dispatches, and turns
bad input (ValueError, OSError, MemoryError) into a one-line message on stderr and exit code 2, without a
traceback, and Ctrl-C into "hardmax: interrupted" (exit code 130). Tables go to stdout, progress and
timings to stderr. Nothing imports this package, and it holds no logic a page or a script would want.

Files: `options` (options generated from the config dataclasses), `output` (progress lines, JSON), one
file per group of commands (`simulate`; `sentiment`: train, evaluate, explain, reproduce; `svm`; `rate`),
and `app` (the parser and `main`).
"""

from __future__ import annotations

from hardmax.cli.app import COMMANDS, main

__all__ = [
    "COMMANDS",
    "main",
]
