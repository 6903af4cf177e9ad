"""Command-line options generated from config dataclasses, so that a config is the one source of defaults.

`add_options(group, DataConfig)` declares one option per field: ``--val-fraction`` for `val_fraction`,
its type from the annotation, ``choices`` from a `Literal`, ``--name`` / ``--no-name`` for booleans,
comma-separated values for tuples, the default from the field, and the help text from the field's
trailing ``# comment`` with the comment lines that continue it (or the comment block just above it, or
``field(metadata={"help": ...})``),
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

    A field's comment is the one that ends its line (``lr: float = 1e-2  # Adam learning rate``), whole:
    with the whole-line comments right below it (no blank line between) that go on with it. Those go on when
    they are indented deeper than the field (aligned under its comment), when the comment so far leaves a
    bracket open, or when they start with anything but a capital letter; a block that starts with a capital
    after a complete comment is a section heading (``# Your own table: ...``), part of no help. A field
    without such a comment takes the block of whole-line comments just above it, and a block right below a
    field that a next field without a comment of its own needs is that field's, unless indented deeper.
    Read with `tokenize`, so a ``#`` inside a string default is not taken for a comment.
    """
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # no source (a frozen app): metadata only
        source = ""
    # The class body as a sequence of items: ("comment", text, column), ("blank",), ("field", name, trailing
    # comment or "", column) and ("code",) for any other statement.
    items: list[tuple] = []
    line: list[tokenize.TokenInfo] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        code_so_far = any(t.type not in (tokenize.INDENT, tokenize.DEDENT) for t in line)
        if token.type == tokenize.COMMENT and not code_so_far:
            items.append(("comment", token.string.lstrip("#").strip(), token.start[1]))
            continue
        if token.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT) and not code_so_far:
            if token.type == tokenize.NL and not token.line.strip():
                items.append(("blank",))
            continue
        if token.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
            line.append(token)
            continue
        # A logical line ended: is it `name: annotation ...` for a field?
        code = [t for t in line if t.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL)]
        if len(code) >= 2 and code[0].type == tokenize.NAME and code[1].string == ":" and code[0].string in names:
            trailing = " ".join(t.string.lstrip("#").strip() for t in code if t.type == tokenize.COMMENT)
            items.append(("field", code[0].string, trailing, code[0].start[1]))
        elif code:
            items.append(("code",))
        line = []
    found: dict[str, str] = {}
    pending: list[str] = []  # whole-line comments since the last statement, not taken as a continuation
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if item[0] == "comment":
            pending.append(item[1])
        elif item[0] == "field":
            _, name, trailing, column = item
            if not trailing:
                text, pending = " ".join(pending), []
            else:
                pending = []
                below = []  # the block right below, up to a blank line or a statement
                while i + len(below) < len(items) and items[i + len(below)][0] == "comment":
                    below.append(items[i + len(below)])
                after = items[i + len(below)] if i + len(below) < len(items) else ("code",)
                next_needs_block = after[0] == "field" and not after[2]
                goes_on = []
                for _, words, at in below:
                    said = " ".join([trailing, *goes_on])
                    if at > column or (not next_needs_block and (
                            _open_brackets(said) or not words[:1].isupper())):
                        goes_on.append(words)
                    else:
                        break
                i += len(goes_on)
                text = " ".join([trailing, *goes_on])
            if text and name not in found:
                found[name] = text
        elif item[0] == "code":
            pending = []
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            found[f.name] = f.metadata["help"]
    return types.MappingProxyType(found)


def _open_brackets(text: str) -> bool:
    """Whether `text` leaves a bracket open (its sentence goes on)."""
    return sum(text.count(c) for c in "([{") > sum(text.count(c) for c in ")]}")


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
