"""objectives: one module per family, the batch builders and losses. Each turns token ids into a `Batch` that says
who may attend to whom and what is predicted; `objective_module(family)` finds a family's module.

Beside them: the mask predicates every builder speaks (masks.py), the pieces they share (common.py, losses.py), the
encoder-decoders' translation rows (translation.py), the add-on objectives (addons.py: contrastive, adversarial,
back_translation), each family's objectives with their settings as the page shows them (specs.py), the settings'
parsing and help (settings.py), and one training example drawn as strings for the Mask Explorer (anatomy.py).

Every family module provides the same five things, so that training and the Mask Explorer share one code path:

- `Settings`: a frozen dataclass of the objective's settings. Paper defaults are the field defaults; every field is a
  toggle the UI exposes; `__post_init__` raises `ValueError` on impossible values.
- `CHOICES`: the names of the anatomy choices the family accepts (docs/contract.md §1), e.g. `("masked",)`.
- `sample_choices(token_ids, generator, cfg) -> dict`: draw the random structural decisions as in training
  (masked positions, spans, the factorization order, the UniLM mode, ...).
- `validate_choices(n, choices) -> dict`: check user-given choices for an n-token input and normalise them;
  raise `ValueError` with an actionable message (not a permutation, overlapping spans, out of range, ...).
- `build_example(token_ids, choices, generator, cfg) -> Example`: build one example from fixed choices. Any remaining
  randomness (80/10/10 fates, random replacements) comes from `generator`.
- `make_batch(token_ids, generator, cfg) -> Batch`: `sample_choices` then `build_example` for each row, then `collate`.
  `token_ids` is a (B, T) LongTensor or a list of 1-D LongTensors; `cfg` is a `BatchConfig`.

`gpt` and `gpt2` share `causal_lm`.

The RNN-era families (ELMo, CoVe, ULMFiT, CVT) live in lab_models/models/rnn/: their modules give `Settings`, `CHOICES`
and `RULE` (and `make_batch` where the batch is a corpus window), but no `build_example`, because they have no attention
mask to draw. An entry with a dot names a module outside this package: the RNN-era modules are whole families
(batches, loss and model in one file), so they live with the models and are imported by name when asked for.

May import: `families`, `batch`, `home`, `text/`, `nn/`.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from lab_models.messages import LabError

# family name -> module name inside this package
FAMILY_MODULES = {
    "gpt": "causal_lm", "gpt2": "causal_lm", "bert": "bert", "roberta": "roberta", "albert": "albert",
    "spanbert": "spanbert", "electra": "electra", "xlnet": "xlnet", "mpnet": "mpnet", "unilm": "unilm",
    "mass": "mass", "glm": "glm", "t5": "t5",
    "elmo": "lab_models.models.rnn.elmo", "cove": "lab_models.models.rnn.cove",
    "ulmfit": "lab_models.models.rnn.ulmfit", "cvt": "lab_models.models.rnn.cvt",
}


def objective_module(family: str) -> ModuleType:
    """The batch-builder module of `family`; ValueError for a family without one."""
    if family not in FAMILY_MODULES:
        known = ", ".join(sorted(FAMILY_MODULES))
        raise LabError("No batch builder for family {family!r}: choose one of {known}.", family=family, known=known)
    name = FAMILY_MODULES[family]
    return importlib.import_module(name if "." in name else f"{__name__}.{name}")
