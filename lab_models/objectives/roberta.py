"""RoBERTa: BERT's masked language model, with dynamic masking and without next sentence prediction.

Paper: Yinhan Liu, Myle Ott, Naman Goyal, Jingfei Du, Mandar Joshi, Danqi Chen, Omer Levy, Mike Lewis, Luke
Zettlemoyer, Veselin Stoyanov (2019). RoBERTa: A Robustly Optimized BERT Pretraining Approach. arXiv:1907.11692.

Who may attend to whom: everyone to everyone (bidirectional). What is predicted: the original token at each picked
position. The masking rule is BERT's (`count_to_mask(n, 0.15)` positions picked uniformly; 80% [MASK], 10% a random
ordinary token, 10% unchanged), with the paper's two changes to the objective:

- Dynamic masking (section 4.1): a fresh mask is drawn every time a sequence is fed to the model, so two calls of
  `make_batch` on the same row differ. `static_masking=True` restores BERT's scheme (a copy index in
  range(dupe_factor) and a generator seeded by a hash of the tokens and that index), for the paper's comparison.
- No NSP (section 4.2, FULL-SENTENCES): a row is one stream of contiguous text; there is a single segment, so
  `segment_ids` is None (no segment embedding is needed).

Tiny worked example: `build_anatomy("roberta", "Ġthe Ġcat Ġsat Ġon Ġthe Ġmat Ġtoday Ġ.".split(), seed=0)` (a golden test
in tests/objectives/test_bert_family_batches.py); eight tokens, one picked (round(1.2) = 1): the second "Ġthe" (position
4), whose coin said "random token" (10%): it reads "Ġmat" and must predict "Ġthe".

    inputs     Ġthe Ġcat Ġsat Ġon Ġmat Ġmat Ġtoday Ġ.
    positions  0    1    2    3   4    5    6      7
    targets    -    -    -    -   Ġthe -    -      -
    segments   none (one stream)
    attention  all ones, 8 x 8 (every row: 1 1 1 1 1 1 1 1)

Deviations from the paper, stated:
- Full-sentence packing across document boundaries (with a separator token) is the data pipeline's job; the objective
  treats a row as one stream and adds no <s>/</s> framing.
- The count of masked tokens is BERT's `round(n * 0.15)`; fairseq's implementation instead masks each token with
  probability 0.15 plus a random rounding, so its count varies from row to row.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import Batch, Example, collate
from lab_models.objectives.bert import (as_ids, as_rows, check_masking, check_positive_int, content_generator,
                                        corrupt_tokens, mlm_targets, reject_unknown, sample_masked, validate_masked)
from lab_models.objectives.common import BatchConfig, CorruptionRates
from lab_models.objectives.losses import LossOutput, mlm_with_sentence_objective

CHOICES: tuple[str, ...] = ("masked",)
RULE = Message("bidirectional: every x_i may attend every x_j; each picked x_i predicts its original token")


@dataclass(frozen=True)
class Settings:
    """RoBERTa's objective settings; the defaults are the paper's."""

    mask_rate: float = 0.15  # fraction of tokens picked for prediction
    mask_token_rate: float = 0.8  # a picked token becomes [MASK] ...
    random_token_rate: float = 0.1  # ... or a random token; the remaining 10% stay unchanged
    static_masking: bool = False  # False = dynamic masking (the paper); True = BERT's fixed copies
    dupe_factor: int = 10  # copies per sequence when static_masking is on

    def __post_init__(self):
        check_masking(self)
        check_positive_int("dupe_factor", self.dupe_factor)

    @property
    def rates(self) -> CorruptionRates:
        return CorruptionRates(mask=self.mask_token_rate, random=self.random_token_rate)


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """`masked`: fresh positions every call (plus `copy` under static masking)."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    if not settings.static_masking:
        return {"masked": sample_masked(ids.numel(), settings.mask_rate, generator)}
    copy = int(torch.randint(settings.dupe_factor, (1,), generator=generator))
    return {"copy": copy,
            "masked": sample_masked(ids.numel(), settings.mask_rate, content_generator(ids, copy, "mask"))}


def validate_choices(n: int, choices: dict) -> dict:
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    reject_unknown(choices, CHOICES, "roberta")
    return {"masked": validate_masked(n, choices["masked"])} if "masked" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    """Corrupt `choices["masked"]` 80/10/10; one segment. A missing `masked` is drawn as in training."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    n = ids.numel()
    if "masked" not in choices:
        choices = {**sample_choices(ids, generator, cfg), **choices}
    masked = validate_masked(n, choices["masked"])  # (k,)
    copy = choices.get("copy") if settings.static_masking else None
    fate_generator = content_generator(ids, copy, "fate") if copy is not None else generator
    return Example(
        input_ids=corrupt_tokens(ids, masked, settings.rates, cfg.vocab, fate_generator),  # (T,)
        attention={"self": masks.materialize(masks.bidirectional, n)},  # (T, T)
        position_ids=torch.arange(n),  # (T,)
        targets=mlm_targets(ids, masked),  # (T,)
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = as_rows(token_ids)
    examples = [build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows]
    return collate(examples, pad_id=cfg.vocab.pad_id)


def loss(model, batch: Batch) -> LossOutput:
    """mlm: cross-entropy at the picked positions only (sparse vocabulary head). No sentence-level objective."""
    return mlm_with_sentence_objective(model, batch, "mlm")
