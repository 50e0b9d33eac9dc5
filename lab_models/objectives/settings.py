"""An objective's settings: read from the command line (`--set KEY=VALUE`), saved to and read back from config.json,
and explained in one line each for the page.

Every family's batch builder declares its settings as a frozen dataclass `Settings` in `objectives/<family>.py`.
`settings_with_overrides` applies `--set` items to it (values parsed by the field's annotation, `parse_value`),
`settings_to_dict` / `settings_from_dict` are the config.json round trip, and `settings_help` reads the explanations.

Each field carries a trailing comment that says what it does (`mask_rate: float = 0.15  # fraction of tokens picked for
prediction`). Those comments are the one place the meaning is written down; the Train tab shows them next to the
values, so that the page and the code cannot drift apart.

>>> from lab_models.objectives import xlnet
>>> field_comments(xlnet.Settings)["k"].startswith("K: about 1/K of the tokens are predicted")
True
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import io
import tokenize
import types
import typing

from lab_models.messages import Joined, LabError, Message, message_of
from lab_models.objectives import objective_module



@functools.lru_cache(maxsize=None)
def field_comments(settings_class: type) -> dict[str, Message]:
    """{field name: its trailing comment} for a dataclass; fields without a comment are left out. Each comment is a
    `Message` whose template is the comment itself (its braces doubled): the setting's help, which the page translates
    like any message of the lab (tests/support/message_templates.py lists them with the code's templates)."""
    names = {f.name for f in dataclasses.fields(settings_class)}
    try:
        source = inspect.getsource(settings_class)
    except (OSError, TypeError):  # no source (a frozen app, say): no help, nothing breaks
        return {}
    comments: dict[str, str] = {}
    line_field: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        row, column = token.start
        if token.type == tokenize.NAME and column == 4 and token.string in names and row not in line_field:
            line_field[row] = token.string  # a field declaration starts at the class body's indentation
        elif token.type == tokenize.COMMENT and row in line_field:
            text = token.string.lstrip("#").strip()
            comments.setdefault(line_field[row], Message.verbatim(text))
    return comments


def settings_help(settings_class: type, prefix: str = "") -> dict[str, Message]:
    """Help for every (dotted) setting key of a Settings class, nested dataclasses included ("rates.mask")."""
    result: dict[str, str] = {}
    own = field_comments(settings_class)
    for f in dataclasses.fields(settings_class):
        key = f"{prefix}{f.name}"
        if isinstance(f.type, type) and dataclasses.is_dataclass(f.type):
            result.update(settings_help(f.type, prefix=f"{key}."))
        elif f.name in own:
            result[key] = own[f.name]
    return result


# ------------------------------------------------------------------------------------------------ parsing values
def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise LabError("expected true or false, got {text!r}", text=text)


def parse_value(text: str, annotation):
    """`text` converted to `annotation` (bool, int, float, str, tuples, optionals).

    >>> parse_value("false", bool), parse_value("0.2", float), parse_value("0.5,0.5", tuple[float, ...])
    (False, 0.2, (0.5, 0.5))
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) < len(args) and text.strip().lower() in ("none", "null"):
            return None
        errors = []
        for option in options:
            try:
                return parse_value(text, option)
            except ValueError as error:
                errors.append(message_of(error))
        raise LabError.of(Joined(errors, "; "))
    if annotation is bool:
        return parse_bool(text)
    if annotation is int:
        try:
            return int(text.strip())
        except ValueError:
            raise LabError("expected a whole number, got {text!r}", text=text) from None
    if annotation is float:
        try:
            return float(text.strip())
        except ValueError:
            raise LabError("expected a number, got {text!r}", text=text) from None
    if annotation is str:
        return text
    if origin is tuple:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if args and args[-1] is Ellipsis:
            return tuple(parse_value(part, args[0]) for part in parts)
        if args and len(parts) != len(args):
            raise LabError("expected {n_args} comma-separated values, got {text!r}", n_args=len(args), text=text)
        return tuple(parse_value(part, kind) for part, kind in zip(parts, args or [str] * len(parts)))
    raise LabError("cannot parse a value of type {annotation}", annotation=annotation)


def key_value(item: str, flag: str, example: str) -> tuple[str, str]:
    """`KEY=VALUE` of a command-line item (`--set`, `--model`, ...) split and stripped; ValueError naming `flag`."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise LabError("bad {flag} {item!r}: write KEY=VALUE, e.g. {flag} {example}",
                       flag=flag, item=item, example=example)
    return key.strip(), value.strip()


def settings_keys(cls) -> list[str]:
    """Every key a Settings class takes on the command line; a nested settings record's fields as "head.field"."""
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            keys += [f"{f.name}.{sub.name}" for sub in dataclasses.fields(kind)]
        else:
            keys.append(f.name)
    return keys


def settings_with_overrides(family: str, items: list[str], base=None):
    """The family's Settings (paper defaults, or `base`) with `--set KEY=VALUE` items applied."""
    cls = objective_module(family).Settings
    base = cls() if base is None else base
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    valid = settings_keys(cls)
    top: dict = {}
    nested: dict[str, dict] = {}
    for item in items:
        key, text = key_value(item, "--set", "mask_rate=0.2")
        head, dot, sub = key.partition(".")
        kind = hints.get(head)
        is_nested = isinstance(kind, type) and dataclasses.is_dataclass(kind)
        if head not in names or bool(dot) != is_nested or (
                is_nested and sub not in {f.name for f in dataclasses.fields(kind)}):
            hint = (Message("valid keys: {valid}", valid=", ".join(valid)) if valid
                    else Message("{family} has no settings", family=family))
            raise LabError("unknown setting {key!r} for {family}; {hint}", key=key, family=family, hint=hint)
        annotation = typing.get_type_hints(kind)[sub] if is_nested else kind
        try:
            value = parse_value(text, annotation)
        except ValueError as error:
            raise LabError("bad --set {key}={text}: {error}", key=key, text=text, error=message_of(error)) from None
        if is_nested:
            nested.setdefault(head, {})[sub] = value
        else:
            top[key] = value
    for head, subs in nested.items():
        top[head] = dataclasses.replace(getattr(base, head), **subs)
    try:
        return dataclasses.replace(base, **top)
    except TypeError as error:
        raise LabError("bad settings for {family}: {error}", family=family, error=error) from None


def settings_to_dict(settings) -> dict:
    return {f.name: (dataclasses.asdict(v) if dataclasses.is_dataclass(v := getattr(settings, f.name)) else v)
            for f in dataclasses.fields(settings)}


def settings_from_dict(family: str, values: dict):
    """The inverse of `settings_to_dict` (JSON lists become tuples, nested dicts dataclasses). A field the saved dict
    lacks takes the value runs saved before it existed used (the module's SAVED_BEFORE), else its default."""
    cls = objective_module(family).Settings
    values = {**getattr(objective_module(family), "SAVED_BEFORE", {}), **values}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        value, kind = values[f.name], hints[f.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind) and isinstance(value, dict):
            value = kind(**value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)
