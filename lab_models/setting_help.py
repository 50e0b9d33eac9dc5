"""One-line explanations of each objective setting, read from the comments beside the `Settings` fields.

Every family's batch builder declares its settings as a frozen dataclass in `objectives/<family>.py`, and each field
carries a trailing comment that says what it does (`mask_rate: float = 0.15  # fraction of tokens picked for
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

__all__ = ["field_comments", "settings_help"]


@functools.lru_cache(maxsize=None)
def field_comments(settings_class: type) -> dict[str, str]:
    """{field name: its trailing comment} for a dataclass; fields without a comment are left out."""
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
            comments.setdefault(line_field[row], token.string.lstrip("#").strip())
    return comments


def settings_help(settings_class: type, prefix: str = "") -> dict[str, str]:
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
