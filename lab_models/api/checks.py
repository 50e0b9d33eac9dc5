"""What a request is checked against in more than one area of the API: the bounds of its numbers and the families
that can train; and what a refusal is made of.

A refusal is a `LabError`, the `ValueError` whose English keeps its template and fields (a `Message`,
lab_models/messages.py), so that the page translates the template before it formats it; `Joined` is a list of
messages, `message_of` what an exception says as a message, `as_message` any text as one.

The bounds hold wherever a request comes in (the page, this API, the CLIs); docs/reliability.md ("Bad input") lists
them. A number
beyond them is refused with a message, never queued. The stages own the numbers (lab_models/training/config.py,
text/tokenizer_kinds.py, experiments/sweep.py) and the list of families whose training works end to end
(models/family.py); here they get their API names. Training runs and tokenize jobs check their family with
`trainable_family` before anything is queued.
"""
from __future__ import annotations

from lab_models.messages import Joined, LabError, Message, as_message, message_of
from lab_models.experiments import sweep as _sweep
from lab_models.models.family import TRAINED_FAMILIES as TRAINABLE_FAMILIES
from lab_models.objectives.specs import FamilySpec, all_families, family_spec
from lab_models.text import tokenizer_kinds as _tokenizer_kinds
from lab_models.training import config as _training_config

__all__ = ["LabError", "Message", "Joined", "message_of", "as_message", "MAX_STEPS", "MAX_SEED", "MAX_VOCAB_SIZE",
           "MAX_SWEEP_D_MODEL", "MAX_SWEEP_LAYERS", "TRAINABLE_FAMILIES", "trainable_families", "trainable_family"]

# a training run's (or a sweep's, a zoo's, a fine-tuning's) steps: 1 to 10,000,000
MAX_STEPS = _training_config.MAX_STEPS
# a training run's, a generation's, a fine-tuning's, the leaderboard's seed: 0 to 2**32 - 1
MAX_SEED = _training_config.MAX_SEED
MAX_VOCAB_SIZE = _tokenizer_kinds.MAX_VOCAB_SIZE  # a tokenizer's vocabulary: 1 to 262,144
MAX_SWEEP_D_MODEL = _sweep.MAX_SWEEP_D_MODEL  # a sweep's DxL sizes: d_model up to 16,384, layers up to 256
MAX_SWEEP_LAYERS = _sweep.MAX_SWEEP_LAYERS


def trainable_families() -> list[FamilySpec]:
    """The families whose training works end to end (a `trainable` FamilySpec field wins where it exists)."""
    return [spec for spec in all_families() if getattr(spec, "trainable", spec.name in TRAINABLE_FAMILIES)]


def trainable_family(family: str) -> FamilySpec:
    """The `FamilySpec` of `family` when it can be trained; else ValueError naming the families that can."""
    names = [spec.name for spec in trainable_families()]
    if family not in names:
        raise LabError("{family!r} cannot be trained yet: choose one of {names}.",
                       family=family, names=', '.join(names))
    return family_spec(family)
