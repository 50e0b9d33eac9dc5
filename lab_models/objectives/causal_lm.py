"""GPT and GPT-2: the causal (left-to-right) language model. Radford et al. 2018, 2019.

Position i may attend positions j <= i and predicts token i+1; the last position predicts nothing.

Worked example (4 tokens "a b c d"; no randomness):

    inputs     a  b  c  d
    positions  0  1  2  3
    targets    b  c  d  -
    attention  1 0 0 0
               1 1 0 0
               1 1 1 0
               1 1 1 1

Deviation from the papers: none in the objective. (GPT-2's changes, pre-LN and byte-level BPE, live in the model and
tokenizer, not here.)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, TARGET_ROWS, Batch, Example, collate
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.losses import LossOutput, combine, run_backbone, sparse_token_loss

CHOICES: tuple[str, ...] = ()
RULE = Message("causal: x_i may attend x_j iff j ≤ i; x_i predicts x_(i+1)")


@dataclass(frozen=True)
class Settings:
    """The causal LM has no settings to toggle."""


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    return {}


def validate_choices(n: int, choices: dict) -> dict:
    if choices:
        raise LabError("the causal LM takes no choices, got {choices}", choices=sorted(choices))
    return {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    n = token_ids.numel()
    targets = torch.full((n,), IGNORE_INDEX, dtype=torch.long)  # (T,)
    targets[:-1] = token_ids[1:]
    return Example(
        input_ids=token_ids.clone(),
        attention={"self": masks.materialize(masks.causal, n)},  # (T, T)
        position_ids=torch.arange(n),
        targets=targets,
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = list(token_ids)
    return collate([build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows],
                   pad_id=cfg.vocab.pad_id)


def loss(model, batch: Batch) -> LossOutput:
    """clm: cross-entropy of the next-token logits against `targets` (row i predicts token i+1), projected to the
    vocabulary only at rows with a target (padding and each row's last position have none)."""
    hidden = run_backbone(model.backbone, batch)  # (B, T, H)
    clm, target_ids, target_nll, _ = sparse_token_loss(model.backbone, hidden, batch.targets,
                                                       rows=batch.extras.get(TARGET_ROWS))
    return combine(model.objective_weights, {"clm": clm}, target_ids, target_nll)
