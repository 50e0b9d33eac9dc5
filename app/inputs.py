"""Reading the page's controls and values: whole numbers from number boxes and sliders, the runs picked in a
multiselect (and those of them a redrawn picker keeps), finite numbers from metrics rows.

Shared by the tabs so that every tab refuses the same bad input with the same words (a ValueError, which
app/errors.py turns into a message in the page).
"""
from __future__ import annotations

import math

from lab_models import api


def whole_number(value, name: api.Message | str, default: int, low: int, high: int) -> int:
    """`value` as an int in [low, high]; an empty box is `default`. `name` is the control's name: a message (translated
    with the rest), or a text already in the reader's language.

    >>> whole_number("12", "Steps", 5, 1, 100), whole_number("", "Steps", 5, 1, 100), whole_number(3.0, "Seed", 0, 0, 9)
    (12, 5, 3)
    >>> whole_number(2.5, "Layer", 1, 1, 10_000)
    Traceback (most recent call last):
    lab_models.messages.LabError: Layer must be a whole number from 1 to 10,000, got 2.5.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise api.LabError("{name} must be a whole number, got {value!r}.", name=name, value=value) from None
    if not number.is_integer() or not low <= number <= high:  # inf and nan are not integers
        raise api.LabError("{name} must be a whole number from {low:,} to {high:,}, got {value!r}.",
                           name=name, low=low, high=high, value=value)
    return int(number)


def finite(value) -> float | None:
    """`value` as a float when it is a finite number (a metrics row's field, a status field), else None.

    >>> finite("0.5"), finite(None), finite(float("nan")), finite("n/a")
    (0.5, None, None, None)
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def picked(values) -> list[str]:
    """A multiselect's value (a list, one string or None) as its distinct, non-empty, stripped strings, in order.
    Anything else (a number, a nested list: only an API client sends those) is a ValueError.

    >>> picked([" a", "b", "a", "", None]), picked("a"), picked(None)
    (['a', 'b'], ['a'], [])
    >>> picked([["a"]])
    Traceback (most recent call last):
    lab_models.messages.LabError: Pick from the list: each choice is one name, got list.
    """
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)):
        raise api.LabError("Pick from the list: expected a list of names, got {values_type}.",
                           values_type=type(values).__name__)
    names = []
    for value in values:
        if value is None:
            continue
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise api.LabError("Pick from the list: each choice is one name, got {value_type}.",
                               value_type=type(value).__name__)
        if str(value).strip():
            names.append(str(value).strip())
    return list(dict.fromkeys(names))


def still_listed(values, listed) -> list[str]:
    """The picked names (`picked(values)`) that are still among `listed`, in the order picked: what a picker keeps
    when it is redrawn with the choices of now.

    >>> still_listed(["b", "gone", "a"], ["a", "b"])
    ['b', 'a']
    """
    listed = set(listed)
    return [name for name in picked(values) if name in listed]


def picked_runs(run_ids, max_runs: int, purpose: api.Message, *,
                together: api.Message = api.Message("compare side by side"), required: bool = True) -> list[str]:
    """The picked run ids: at least one (when `required`) and at most `max_runs`, else a ValueError that says so
    (`purpose`, `together`: what the runs are picked for, in words).

    >>> picked_runs(["gpt-a", "gpt-a"], 4, api.Message("generate with"))
    ['gpt-a']
    >>> picked_runs([], 4, api.Message("generate with"))
    Traceback (most recent call last):
    lab_models.messages.LabError: Pick at least one run (up to 4) to generate with.
    """
    ids = picked(run_ids)
    if required and not ids:
        raise api.LabError("Pick at least one run (up to {max_runs}) to {purpose}.", max_runs=max_runs,
                           purpose=purpose)
    if len(ids) > max_runs:
        raise api.LabError("Pick at most {max_runs} runs to {together}; {n_ids} are picked.",
                           max_runs=max_runs, together=together, n_ids=len(ids))
    return ids


def budget_number(value, name) -> float | None:
    """A budget box's value: None when empty or 0 (no budget), else the positive number it holds.

    >>> budget_number(0, "Minutes"), budget_number("", "Minutes"), budget_number("2.5", "Minutes")
    (None, None, 2.5)
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise api.LabError("{name} must be a number, got {value!r}.", name=name, value=value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise api.LabError("{name} must be a number, got {value!r}.", name=name, value=value) from None
    if number != number or number < 0 or number == float("inf"):
        raise api.LabError("{name} must be a positive number, or 0 for none; got {value!r}.", name=name,
                           value=value)
    return number or None
