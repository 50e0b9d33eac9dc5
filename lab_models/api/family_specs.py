"""The families and what one training example of each looks like: the `FamilySpec` records of the 17 families, the
anatomy of an example (the Mask Explorer's picture), and the split of a typed sentence into the tokens it draws.

The records are lab_models/objectives/specs.py's; an anatomy is built by objectives/anatomy.py with the family's own
`build_example`, the code that builds its training batches, so the Mask Explorer draws exactly what the model trains
on. A sentence is split by text/word_split.py, or by a saved tokenizer (text/tokenization.py).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
import types
import typing

from lab_models.messages import Joined, LabError, Message
from lab_models import home as _home
from lab_models.objectives import objective_module
from lab_models.objectives.anatomy import Anatomy, build_anatomy
from lab_models.objectives.specs import FamilySpec, ObjectiveSpec, all_families, family_spec
from lab_models.text import tokenization
from lab_models.text import tokenizer_inspect as _tokenizer_inspect
from lab_models.text.tokenizer_kinds import TOKENIZER_KINDS
from lab_models.text.word_split import WordSplit, split_words

__all__ = ["FamilySpec", "ObjectiveSpec", "Anatomy", "families", "family", "anatomy", "explorer_split",
           "split_for_explorer"]


def families() -> list[FamilySpec]:
    """One `FamilySpec` per family the lab knows (docs/contract.md §1)."""
    return all_families()


def family(name: str) -> FamilySpec:
    """The `FamilySpec` of one family; ValueError for an unknown name."""
    return family_spec(name)


def anatomy(family: str, tokens, *, seed: int = 0, settings: dict | None = None, **choices) -> Anatomy:
    """What one training example of `family` looks like for the given token strings (docs/contract.md §1).

    Built by the family's own `build_example`, the code that builds its training batches. `settings` overrides fields
    of the family's batch-builder settings (`family_settings(family)`), e.g. {"two_stream": False} for XLNet's leak.
    """
    if not isinstance(family, str):
        raise LabError("family must be a name such as 'bert', got {family!r}", family=family)
    if isinstance(tokens, str):
        raise LabError("tokens must be a list of token strings, not one string: split it first, e.g. text.split().")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabError("seed must be an integer, got {seed!r}", seed=seed)
    if not -2**63 <= seed < 2**64:  # what torch.Generator.manual_seed takes
        raise LabError("seed must be between -2**63 and 2**64 - 1, got {seed}", seed=seed)
    if settings is not None:
        choices["settings"] = _anatomy_settings(family, settings)
    return build_anatomy(family, list(tokens), seed=seed, **choices)


def _anatomy_settings(family: str, values: dict):
    """The family's default batch-builder settings with `values` replaced (ValueError for an unknown key)."""
    if not isinstance(values, dict) or not all(isinstance(key, str) for key in values):
        raise LabError("settings must be a dict of setting names to values, e.g. {{'two_stream': False}}; got "
                       "{values_type}.", values_type=type(values).__name__)
    module = objective_module(family)
    if not hasattr(module, "Settings"):
        raise LabError("{family} has no batch-builder settings to change.", family=family)
    defaults = module.Settings()
    known = {f.name for f in dataclasses.fields(defaults)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise LabError("{family} has no setting {unknown}; its settings are: {known}.",
                       family=family, unknown=', '.join(unknown), known=', '.join(sorted(known)))
    hints = typing.get_type_hints(type(defaults))
    converted = {}
    for key, value in values.items():
        if not _fits(value, hints[key]):
            raise LabError("{family}'s setting {key} takes {type_words}, not "
                           "{value}.",
                           family=family, key=key, type_words=_type_words(hints[key]), value=_home.shown(value))
        converted[key] = tuple(value) if isinstance(value, list) else value
    return dataclasses.replace(defaults, **converted)


def _fits(value, annotation) -> bool:
    """Whether `value` has the type a Settings field is annotated with (a list passes for a tuple).

    >>> _fits(0.2, float), _fits(True, float), _fits([0.5, 0.5], tuple[float, ...]), _fits(None, int | None)
    (True, False, True, True)
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in args)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation in (int, float):
        return isinstance(value, (int, float) if annotation is float else int) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False
        if args and args[-1] is Ellipsis:
            return all(_fits(item, args[0]) for item in value)
        return not args or (len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args)))
    if isinstance(annotation, type):
        return isinstance(value, annotation)  # e.g. a nested settings dataclass
    return True  # an annotation this check does not know: the Settings class validates it


def _type_words(annotation) -> Message | str:
    names = {bool: Message("true or false"), int: Message("a whole number"), float: Message("a number"),
             str: Message("text"), type(None): "None"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return Joined((_type_words(option) for option in args), " or ")
    if origin is tuple:
        return Message("a list of {items}", items=_type_words(args[0])) if args else Message("a list of values")
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def explorer_split(text: str, tokenizer_path: str | Path | None = None, *, split: str = "whitespace",
                   max_tokens: int = 64):
    """`text` as token strings for the Mask Explorer, with the rule used (a `text_split.WordSplit`: tokens, mode,
    note). `split` "whitespace" splits on spaces and makes each Chinese/Japanese/Korean character (and emoji) a token
    of its own (BERT's rule; whitespace alone would give a Chinese sentence one token), "characters" one token per
    character; a saved tokenizer.json (`tokenizer_path`) splits as that tokenizer does."""

    if not text or not text.strip():
        raise LabError("Type a sentence first: the input is empty.")
    if tokenizer_path is None:
        result = split_words(text, split)
    else:
        tokenizer = tokenization.load_tokenizer_file(tokenizer_path)
        tokens = [t for t in tokenizer.encode(text, add_special_tokens=False).tokens if t]
        title = TOKENIZER_KINDS[_tokenizer_inspect.tokenizer_kind(tokenizer)]
        result = WordSplit(tokens, "tokenizer", Message("split with the {title} tokenizer", title=title))
    if not result.tokens:
        raise LabError("The tokenizer produced no tokens for this text.")
    if len(result.tokens) > max_tokens:
        raise LabError("The sentence has {n_tokens} tokens ({note}); the Mask Explorer draws at "
                       "most {max_tokens}. Shorten it.",
                       n_tokens=len(result.tokens), note=result.note, max_tokens=max_tokens)
    return result


def split_for_explorer(text: str, tokenizer_path: str | Path | None = None, *, max_tokens: int = 64,
                       split: str = "whitespace") -> list[str]:
    """The tokens of `explorer_split`: on whitespace (CJK characters one by one), per character, or with a saved
    tokenizer.json."""
    return explorer_split(text, tokenizer_path, split=split, max_tokens=max_tokens).tokens
