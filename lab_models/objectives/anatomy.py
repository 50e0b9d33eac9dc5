"""`Anatomy`: one training example drawn as strings, for the Mask Explorer and for `api.anatomy`.

It is produced by running a family's real `build_example` on a `StringVocab` built from the user's tokens, then
decoding the ids back into strings. Nothing here decides who attends to whom; it only translates.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Example
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig, StringVocab


@dataclass
class Anatomy:
    """As docs/contract.md §1: `targets` align with `inputs`, or with `decoder_inputs` for encoder-decoder families."""

    family: str
    inputs: list[str]
    attention: dict[str, torch.Tensor]  # stream -> (rows, cols) bool, True = may attend
    positions: list[list[int]]  # one row, or two for GLM
    targets: list[str | None]
    decoder_inputs: list[str] | None = None
    decoder_positions: list[list[int]] | None = None
    segments: list[int] | None = None
    query_slots: list[int] | None = None  # two-stream: the input index of each query-stream row
    choices: dict = field(default_factory=dict)  # the structural choices used (given or sampled)
    extras: dict = field(default_factory=dict)  # family-specific, as plain Python values
    rule: Message | str = ""  # one-line legend: the attention rule in words


def build_anatomy(family: str, tokens: list[str], *, seed: int = 0, settings=None, **choices) -> Anatomy:
    """Run `family`'s batch builder on `tokens` and return the example as strings. ValueError for a family without a
    mask to draw (the RNN families) and for any choice the family cannot draw."""
    module = objective_module(family)
    if not callable(getattr(module, "build_example", None)):
        raise LabError("{family} is an RNN-era family: it has no attention mask to draw (its LSTMs read the tokens "
                       "in order, left to right and/or right to left, so no position chooses what it attends). "
                       "The Mask Explorer draws the Transformer families.", family=family)
    if not isinstance(tokens, (list, tuple)) or not tokens:
        raise LabError("Give at least one token: the input is empty.")
    if not all(isinstance(t, str) and t for t in tokens):
        raise LabError("Every token must be a non-empty string.")
    unknown = sorted(set(choices) - set(module.CHOICES))
    if unknown:
        accepted = ", ".join(module.CHOICES) or "none"
        raise LabError("{family} does not take {unknown}; its choices are: {accepted}.",
                       family=family, unknown=', '.join(unknown), accepted=accepted)
    vocab = StringVocab(tokens)
    cfg = BatchConfig(settings=settings if settings is not None else module.Settings(), vocab=vocab.info)
    token_ids = vocab.encode(tokens)  # (n,)
    generator = torch.Generator().manual_seed(int(seed))
    given = module.validate_choices(len(tokens), dict(choices)) if choices else {}
    sampled = module.sample_choices(token_ids, generator, cfg)
    used = {**sampled, **given}
    example: Example = module.build_example(token_ids, used, generator, cfg)
    return example_to_anatomy(family, example, vocab, used, rule=getattr(module, "RULE", ""))


def _decode_targets(targets: torch.Tensor, vocab: StringVocab) -> list[str | None]:
    return [None if int(t) == IGNORE_INDEX else vocab.decode(t) for t in targets]


def _plain(value):
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def example_to_anatomy(family: str, example: Example, vocab: StringVocab, choices: dict,
                       rule: Message | str = "") -> Anatomy:
    positions = example.position_ids
    positions_rows = [positions.tolist()] if positions.dim() == 1 else positions.tolist()
    decoder_inputs = decoder_positions = None
    if example.decoder_input_ids is not None:
        decoder_inputs = [vocab.decode(t) for t in example.decoder_input_ids]
        decoder_positions = [example.decoder_position_ids.tolist()]
    return Anatomy(
        family=family,
        inputs=[vocab.decode(t) for t in example.input_ids],
        attention={k: v.clone() for k, v in example.attention.items()},
        positions=positions_rows,
        targets=_decode_targets(example.targets, vocab),
        decoder_inputs=decoder_inputs,
        decoder_positions=decoder_positions,
        segments=None if example.segment_ids is None else example.segment_ids.tolist(),
        query_slots=None if example.query_slots is None else example.query_slots.tolist(),
        choices={k: _plain(v) for k, v in choices.items()},
        extras={k: _plain(v) for k, v in example.extras.items()},
        rule=rule,
    )
