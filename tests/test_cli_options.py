"""Tests of `hardmax.cli.options`: options generated from the configs (defaults, choices and help are the
configs' own), help read from the fields' comments, and configs read back from the parsed arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest
from cli_cases import subparsers


def test_options_come_from_the_configs():
    """Defaults, choices and help of the generated options are the configs' own."""
    from hardmax.cli.options import field_help
    from hardmax.data.config import DataConfig
    from hardmax.models.config import ModelConfig
    from hardmax.training.config import TrainConfig

    train = subparsers()["train"]
    actions = {a.option_strings[0]: a for a in train._actions if a.option_strings}
    for flag, cls, name in [("--epochs", TrainConfig, "epochs"), ("--lr", TrainConfig, "lr"),
                            ("--batch-size", TrainConfig, "batch_size"), ("--seed", TrainConfig, "seed"),
                            ("--layers", ModelConfig, "layers"), ("--beta", ModelConfig, "beta"),
                            ("--alpha", ModelConfig, "alpha_init"), ("--min-count", DataConfig, "min_count")]:
        default = getattr(cls(vocab_size=2) if cls is ModelConfig else cls(), name)
        assert actions[flag].default == default, flag
        assert actions[flag].help.startswith(field_help(cls)[name]), flag
    assert actions["--split"].choices == ("standard", "paper")
    assert actions["--select-on"].choices == ("hardmax", "softmax")
    assert actions["--fixed-alpha"].const is False  # store_false into learn_alpha


@dataclass(frozen=True, kw_only=True)
class Example:
    """A config for the option generator (module level: its annotations are resolved in this module)."""

    name: str = "a # not a comment"  # the name
    # what the size is,
    # over two lines
    size: int = 3
    kind: Literal["x", "y"] = "y"  # which kind
    fast: bool = True  # go fast
    sizes: tuple[float, ...] = (1.0, 2.5)  # several sizes
    other: int | None = field(default=None, metadata={"help": "from the metadata"})


def test_field_help_reads_trailing_and_block_comments():
    import argparse

    from hardmax.cli.options import add_options, config_from_args, field_help

    assert dict(field_help(Example)) == {"name": "the name", "size": "what the size is, over two lines",
                                         "kind": "which kind", "fast": "go fast", "sizes": "several sizes",
                                         "other": "from the metadata"}
    parser = argparse.ArgumentParser()
    add_options(parser, Example)
    assert config_from_args(Example, parser.parse_args([])) == Example()
    args = parser.parse_args(["--kind", "x", "--no-fast", "--sizes", "3,4", "--other", "7", "--size", "5"])
    assert config_from_args(Example, args) == Example(kind="x", fast=False, sizes=(3.0, 4.0), other=7, size=5)
    text = parser.format_help()
    assert "(default: 1,2.5)" in text and "(default: none)" in text and "{x,y}" in text
    with pytest.raises(SystemExit):
        parser.parse_args(["--sizes", "3,x"])
