"""What the page and the API show of each family (docs/contract.md §1, `api.families()`): the registry's record
(lab_models/families.py) with every objective's default settings, read from the family's batch-builder `Settings`
(objectives/<family>.py), and the add-on objectives it accepts (objectives/addons.py), off until asked for.
The UI builds every family-dependent control from these records.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lab_models.families import FAMILY_NAMES, OBJECTIVE_DESCRIPTIONS, family_record
from lab_models.objectives import FAMILY_MODULES, objective_module
from lab_models.objectives.addons import DESCRIPTIONS as ADDON_DESCRIPTIONS, default_settings, family_addons


@dataclass(frozen=True)
class ObjectiveSpec:
    """One objective the user can toggle: its name, default weight (0 = off unless asked for), default settings and a
    one-line description."""

    name: str
    weight: float
    settings: dict
    description: str = ""


@dataclass(frozen=True)
class FamilySpec:
    name: str  # lower case, e.g. "bert"
    title: str  # e.g. "BERT"
    kind: str  # decoder | encoder | encoder-decoder | two-stream | rnn
    objectives: tuple[ObjectiveSpec, ...]
    tokenizer: str  # default tokenizer kind: bpe | byte_bpe | wordpiece | unigram
    paper: str  # the citation
    has_anatomy: bool = True  # a batch builder the Mask Explorer can draw
    anatomy_choices: tuple[str, ...] = ()


def _settings_dict(settings) -> dict:
    out = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        out[f.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return out


def family_spec(name: str) -> FamilySpec:
    """The `FamilySpec` of `name`; ValueError for a family the lab does not know."""
    record = family_record(name)
    module = objective_module(name) if name in FAMILY_MODULES else None
    settings = _settings_dict(module.Settings()) if module is not None else {}
    descriptions = {**OBJECTIVE_DESCRIPTIONS, **ADDON_DESCRIPTIONS}
    return FamilySpec(
        name=name, title=record.title, kind=record.kind, tokenizer=record.tokenizer, paper=record.paper,
        objectives=tuple(ObjectiveSpec(obj, weight, settings, descriptions.get(obj, ""))
                         for obj, weight in record.objectives)
        # the add-on objectives (objectives/addons.py): off (weight 0) until asked for; their settings nest under
        # their name, so the Train tab's table shows them as "contrastive.temperature" and so on
        + tuple(ObjectiveSpec(addon, 0.0, {addon: default_settings(addon)}, ADDON_DESCRIPTIONS[addon])
                for addon in family_addons(name)),
        has_anatomy=module is not None and hasattr(module, "build_example"),  # the RNN families draw no mask
        anatomy_choices=tuple(module.CHOICES) if module is not None else (),
    )


def all_families() -> list[FamilySpec]:
    return [family_spec(name) for name in FAMILY_NAMES]
