"""Helpers shared by the tests of `hardmax.cli` (test_cli_*.py): the subcommand parsers of `hardmax`."""

from __future__ import annotations


def subparsers():
    """name -> the argparse parser of each `hardmax` subcommand."""
    from hardmax.cli.app import build_parser

    return build_parser()._subparsers._group_actions[0].choices
