"""What a batch builder hands the backbone: `Example` (one sequence) and `Batch` (many, padded).

Every family's objective builds one `Example` per sequence with `build_example`, and `collate` pads them into a `Batch`.
`api.anatomy` turns the very same `Example` into strings for the Mask Explorer, so what is drawn is what is trained.

Conventions, repo-wide:
- `IGNORE_INDEX` (-100) marks positions that carry no loss, as in `torch.nn.functional.cross_entropy`.
- Attention matrices are boolean, **True = may attend**, one per stream, keyed as `Anatomy` (docs/contract.md §1):
  `self`; `content` and `query` (two-stream); `encoder`, `decoder` and `cross` (encoder-decoder).
- `targets` align with `input_ids`, except for encoder-decoder families, where they align with `decoder_input_ids`.
- Two-stream families list, in `query_slots`, which input position each query-stream row sits at.

Padding: padded keys are never attended; a padded query row may attend only itself, so that no row of any mask is
empty (an all-False row makes softmax NaN inside SDPA).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

from lab_models.messages import LabError

IGNORE_INDEX = -100
# extras key the training engine adds on the host: (N,) long, the flat indices of the positions of `targets` that carry
# a target (row-major), so a loss gathers them with an index instead of a boolean mask, whose size a GPU would have to
# send back to the host before the step can go on (losses.sparse_token_loss's `rows`). A batch joined or cut from
# such batches must compute it again (`target_rows`)
TARGET_ROWS = "target_rows"


def target_rows(targets: torch.Tensor) -> torch.Tensor:
    """The flat indices of the positions of `targets` that carry a target.

    >>> target_rows(torch.tensor([[-100, 5, -100], [7, -100, 9]])).tolist()
    [1, 3, 5]
    """
    return (targets.reshape(-1) != IGNORE_INDEX).nonzero().squeeze(1)


@dataclass
class Example:
    """One training sequence after its objective has corrupted it. Shapes: T inputs, S decoder inputs, Q queries."""

    input_ids: torch.Tensor  # (T,) long
    attention: dict[str, torch.Tensor]  # stream -> (rows, cols) bool
    position_ids: torch.Tensor  # (T,) long, or (2, T) for GLM's 2-D positions
    targets: torch.Tensor  # (T,) long, or (S,) for encoder-decoder; IGNORE_INDEX = no loss
    segment_ids: torch.Tensor | None = None  # (T,) long: 0 = part A, 1 = part B
    decoder_input_ids: torch.Tensor | None = None  # (S,) long
    decoder_position_ids: torch.Tensor | None = None  # (S,) long
    query_slots: torch.Tensor | None = None  # (Q,) long: input position of each query-stream row
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # family-specific: nsp_label, sbo_*, ...


@dataclass
class Batch:
    """Examples padded to a common length and stacked. Same fields as `Example` with a leading batch dimension B."""

    input_ids: torch.Tensor  # (B, T)
    attention: dict[str, torch.Tensor]  # stream -> (B, rows, cols) bool
    position_ids: torch.Tensor  # (B, T) or (B, 2, T)
    targets: torch.Tensor  # (B, T) or (B, S)
    segment_ids: torch.Tensor | None = None  # (B, T)
    decoder_input_ids: torch.Tensor | None = None  # (B, S)
    decoder_position_ids: torch.Tensor | None = None  # (B, S)
    query_slots: torch.Tensor | None = None  # (B, Q); padded rows point at slot 0 and carry no target
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # (B, ...) each; the engine's TARGET_ROWS (N,)
    # the add-on objectives' own data (objectives/addons.py: contrastive sentences, back-translation's monolingual
    # sentences), not rows of this batch: collate never fills it, `to` moves it
    addons: dict[str, torch.Tensor] = field(default_factory=dict)

    def _map_tensors(self, fn) -> "Batch":
        """A new Batch with `fn` applied to every tensor (the stream dicts and extras included)."""
        mapped = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                mapped[f.name] = fn(value)
            elif isinstance(value, dict):  # an attention mask prepared on the host (nn/attention.py) moves whole
                mapped[f.name] = {k: fn(v) if isinstance(v, torch.Tensor) else v.map_tensors(fn)
                                  for k, v in value.items()}
            else:
                mapped[f.name] = value
        return Batch(**mapped)

    def pin_memory(self) -> "Batch":
        """The same batch in page-locked host memory, so that `to(cuda)` copies asynchronously (prefetching)."""
        return self._map_tensors(lambda t: t.pin_memory())

    def to(self, device: torch.device | str) -> "Batch":
        """Move every tensor to `device` (non_blocking where the source is pinned)."""
        return self._map_tensors(lambda t: t.to(device, non_blocking=True))


def _pad_1d(values: list[torch.Tensor], fill: int) -> torch.Tensor:
    length = max(v.shape[-1] for v in values)
    out = torch.full((len(values), *values[0].shape[:-1], length), fill, dtype=values[0].dtype)
    for row, v in enumerate(values):
        out[row, ..., : v.shape[-1]] = v
    return out


def _pad_square(masks: list[torch.Tensor], rows: int, cols: int) -> torch.Tensor:
    out = torch.zeros(len(masks), rows, cols, dtype=torch.bool)
    for b, m in enumerate(masks):
        out[b, : m.shape[0], : m.shape[1]] = m
        # Padded query rows attend only themselves (if that key exists) or the first key, so no row is empty.
        for r in range(m.shape[0], rows):
            out[b, r, r if r < cols else 0] = True
    return out


def collate(examples: list[Example], pad_id: int) -> Batch:
    """Pad examples to the longest one and stack them into a Batch."""
    if not examples:
        raise LabError("cannot collate an empty list of examples")
    first = examples[0]
    input_ids = _pad_1d([e.input_ids for e in examples], pad_id)  # (B, T)
    position_ids = _pad_1d([e.position_ids for e in examples], 0)  # (B, T) or (B, 2, T)
    targets = _pad_1d([e.targets for e in examples], IGNORE_INDEX)
    segment_ids = None if first.segment_ids is None else _pad_1d([e.segment_ids for e in examples], 0)
    decoder_input_ids = decoder_position_ids = None
    if first.decoder_input_ids is not None:
        decoder_input_ids = _pad_1d([e.decoder_input_ids for e in examples], pad_id)  # (B, S)
        decoder_position_ids = _pad_1d([e.decoder_position_ids for e in examples], 0)  # (B, S)
    query_slots = None if first.query_slots is None else _pad_1d([e.query_slots for e in examples], 0)  # (B, Q)

    attention = {}
    for stream in first.attention:
        masks = [e.attention[stream] for e in examples]
        rows = max(m.shape[0] for m in masks)
        cols = max(m.shape[1] for m in masks)
        attention[stream] = _pad_square(masks, rows, cols)  # (B, rows, cols)

    extras = {}
    for key in first.extras:
        values = [e.extras[key] for e in examples]
        if values[0].dim() == 0:
            extras[key] = torch.stack(values)
        else:
            fill = IGNORE_INDEX if key.endswith("targets") or key.endswith("labels") else 0
            extras[key] = _pad_1d(values, fill)
    return Batch(input_ids=input_ids, attention=attention, position_ids=position_ids, targets=targets,
                 segment_ids=segment_ids, decoder_input_ids=decoder_input_ids,
                 decoder_position_ids=decoder_position_ids, query_slots=query_slots, extras=extras)
