"""Command-line options generated from config dataclasses, so that a config is the one source of defaults.

`add_options(group, DataConfig)` declares one option per field: ``--val-fraction`` for `val_fraction`,
its type from the annotation, ``choices`` from a `Literal`, ``--name`` / ``--no-name`` for booleans,
comma-separated values for tuples, the default from the field, and the help text from the field's
trailing ``# comment`` (or the comment block just above it, or ``field(metadata={"help": ...})``),
followed by "(default: …)". `config_from_args(DataConfig, args)` reads the values back into the config.
Each option's destination is ``"<Config>.<field>"``, so that two configs with a field of the same name
(`seed`) never collide. Reading a config's comments needs only its source file: no torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import io
import re
import tokenize
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

__all__ = ["HelpFormatter", "add_options", "config_from_args", "field_help", "given", "option_flag"]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions' line breaks (their examples stay readable) and gives option help more room."""

    def __init__(self, prog: str, **kwargs: Any):
        super().__init__(prog, max_help_position=32, width=min(110, _terminal_width()), **kwargs)


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((100, 24)).columns


@functools.cache
def field_help(cls: type) -> Mapping[str, str]:
    """{field name: help text} of a dataclass, from `metadata["help"]` or the source's comments.

    A field's comment is the one that ends its line (``lr: float = 1e-2  # Adam learning rate``), or,
    when there is none, the block of whole-line comments just above it. Read with `tokenize`, so a
    ``#`` inside a string default is not taken for a comment.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    found: dict[str, str] = {}
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # no source (a frozen app): metadata only
        source = ""
    pending: list[str] = []  # whole-line comments since the last statement
    line: list[tokenize.TokenInfo] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and not any(t.type not in (tokenize.INDENT, tokenize.DEDENT) for t in line):
            pending.append(token.string.lstrip("#").strip())
            continue
        if token.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT) and not line:
            continue
        if token.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
            line.append(token)
            continue
        # A logical line ended: is it `name: annotation ...` for a field?
        code = [t for t in line if t.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL)]
        if len(code) >= 2 and code[0].type == tokenize.NAME and code[1].string == ":" and code[0].string in names \
                and code[0].string not in found:
            trailing = [t.string.lstrip("#").strip() for t in code if t.type == tokenize.COMMENT]
            text = " ".join(trailing) if trailing else " ".join(pending)
            if text:
                found[code[0].string] = text
        pending, line = [], []
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            found[f.name] = f.metadata["help"]
    return types.MappingProxyType(found)


def option_flag(name: str) -> str:
    """``--val-fraction`` for the field `val_fraction`."""
    return "--" + name.replace("_", "-")


def _dest(cls: type, name: str) -> str:
    return f"{cls.__name__}.{name}"


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """(X, True) for ``X | None``, (hint, False) otherwise."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0], True
    return hint, False


_KINDS = {int: "integers", float: "numbers", str: "names"}


def _comma_list(item: type, flag: str):
    def parse(text: str) -> tuple:
        try:
            return tuple(item(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be comma-separated {_KINDS.get(item, item.__name__)}, "
                                             f"got {text!r}") from None
    parse.__name__ = f"comma-separated {item.__name__}"
    return parse


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


def add_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *,
                only: tuple[str, ...] | None = None, exclude: tuple[str, ...] = (),
                flags: Mapping[str, str] | None = None, helps: Mapping[str, str] | None = None,
                defaults: Mapping[str, Any] | None = None, metavars: Mapping[str, str] | None = None,
                given_only: bool = False) -> list[str]:
    """Declare one option per field of the dataclass `cls` on `parser` (a parser or an argument group).

    Args:
        only: the fields to declare, in this order (default: every field with a default, in class order).
        exclude: fields left out. flags: field -> option string instead of ``option_flag(field)``; a
            boolean field whose default is True gets ``--no-<field>`` unless renamed here.
        helps: field -> help text instead of the comment's. defaults: field -> default shown and used
            instead of the field's (e.g. a preset's).
        given_only: the option is absent from the namespace unless given, so that `config_from_args`
            keeps the `base` config's value (a preset); the help then states `defaults`' values.
    Returns the names of the declared fields.
    """
    flags, helps, defaults, metavars = flags or {}, helps or {}, defaults or {}, metavars or {}
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = only if only is not None else tuple(
        n for n, f in fields.items()
        if f.init and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING))
    comments = field_help(cls)
    declared = []
    for name in names:
        if name in exclude:
            continue
        f = fields[name]
        if name in defaults:
            default = defaults[name]
        elif f.default is not dataclasses.MISSING:
            default = f.default
        else:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        hint, optional = _unwrap_optional(hints[name])
        text = helps.get(name) or comments.get(name)
        if not text:
            raise ValueError(f"{cls.__name__}.{name} has no help text: add a trailing comment to the field")
        kwargs: dict[str, Any] = {"dest": _dest(cls, name)}
        flag = flags.get(name, option_flag(name))
        if hint is bool:
            kwargs["action"] = "store_false" if default else "store_true"
            if default and name not in flags:
                flag = "--no-" + name.replace("_", "-")
            # A flag that switches a default-on setting off says so, whatever the comment's wording.
            shown = "" if name in helps else " (on by default; this flag turns it off)" if default else ""
        else:
            origin, args = typing.get_origin(hint), typing.get_args(hint)
            if origin is Literal:
                kwargs["choices"] = args
                kwargs["type"] = type(args[0])
            elif origin is tuple:
                kwargs["type"] = _comma_list(args[0], flag)
                kwargs["metavar"] = "LIST"
            elif hint in (int, float, str, Path):
                kwargs["type"] = hint
                kwargs["metavar"] = name.upper()
            else:
                raise TypeError(f"{cls.__name__}.{name}: no command-line type for {hint!r}")
            if name in metavars:
                kwargs["metavar"] = metavars[name]
            if default is not None or not optional:
                shown = f" (default: {_show(default)})"
            else:  # the comment's "None: ..." says what the default means, in the user's words
                text = re.sub(r"\bNone\s*(:|=)\s*", "default: ", text)
                shown = "" if "default" in text else " (default: none)"
        if "default" in text:  # the help states its default itself (e.g. a preset's)
            shown = ""
        kwargs["help"] = (text + shown).replace("%", "%%")
        if given_only:
            kwargs["default"] = argparse.SUPPRESS
        elif hint is not bool:
            kwargs["default"] = default
        else:
            kwargs["default"] = bool(default)
        parser.add_argument(flag, **kwargs)
        declared.append(name)
    return declared


def given(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """{field: value} of the options `add_options` declared for `cls` and that are in `args`."""
    prefix = f"{cls.__name__}."
    return {dest[len(prefix):]: value for dest, value in vars(args).items() if dest.startswith(prefix)}


def config_from_args(cls: type, args: argparse.Namespace, *, base: Any = None,
                     flags: Mapping[str, str] | None = None, **extra: Any):
    """The config `cls` from parsed arguments: `base` (or the defaults) with the options' values and `extra`.

    A config's complaint about a field ("lr must be ...") is worded with its option ("--lr must be ..."):
    `flags` maps fields whose option is not ``option_flag(field)``.
    """
    values = {**given(cls, args), **extra}
    try:
        return cls(**values) if base is None else dataclasses.replace(base, **values)
    except ValueError as e:
        message = str(e)
        for f in dataclasses.fields(cls):
            if message.startswith(f"{f.name} "):
                flag = (flags or {}).get(f.name, option_flag(f.name))
                raise ValueError(f"{flag}{message[len(f.name):]}") from None
        raise
