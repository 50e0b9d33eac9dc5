"""GLM: autoregressive blank infilling with 2-D positions.

Du, Qian, Liu, Ding, Qiu, Yang, Tang (2022). GLM: General Language Model Pretraining with Autoregressive Blank
Infilling. ACL 2022. arXiv:2103.10360. Reference code: THUDM/GLM, blocklm_utils.py (`ConstructBlockStrategy`).

Spans are blanked out of the text. Part A is the text with each span replaced by one [MASK]; Part B is the spans, in
shuffled order, each as [S] + span tokens, predicting span tokens + [E]. One stream ("self"): Part A attends all of
Part A (bidirectional, like BERT) and never Part B; a Part B token attends Part A and the Part B tokens up to itself
(causal, like GPT). Position ids are 2-D: row 1 is the Part A index (every Part B token of a span gets the index of
that span's [MASK]); row 2 is 0 on Part A and 1 .. len+1 inside each span of Part B.

Sampling the spans (`sample_choices`, following `construct_blocks` / `sample_spans` of the reference):
- span lengths are drawn from Poisson(lambda = 3); a zero draw is redrawn, i.e. lengths follow Poisson(3) conditioned
  on >= 1 (the reference samples 1..39 with Poisson pmf weights, which is the same up to the negligible tail > 39).
  Mean: 3 / (1 - e^-3) = 3.157.
- lengths are drawn until they cover at least int(0.15 n) tokens (at least 1 token here); the last span may overshoot
  this, as in the reference.
- the spans must fit with at least one unmasked token between two spans (the reference's placement); if a span does
  not fit, it is truncated to the room left (the reference drops such a sample instead). This only matters for very
  short texts or large settings.
- the lengths are shuffled and placed uniformly among all placements with >= 1 gap between spans: each span gets a
  random number of the unmasked tokens before it (the reference's `sample_spans`).

Worked example (the paper's Figure 2: x1..x6, spans x3 and x5 x6, Part B in the order [x5 x6], [x3];
`api.anatomy("glm", ["x1", .., "x6"], spans=[(4, 6), (2, 3)], shuffle=False)`; no randomness):

    index        0   1   2       3   4       5    6   7    8    9
    inputs       x1  x2  [MASK]  x4  [MASK]  [S]  x5  x6   [S]  x3
    position 1   0   1   2       3   4       4    4   4    2    2
    position 2   0   0   0       0   0       1    2   3    1    2
    targets      -   -   -       -   -       x5   x6  [E]  x3   [E]

    self   1 1 1 1 1 0 0 0 0 0      Part A (rows 0-4) sees Part A only;
           1 1 1 1 1 0 0 0 0 0      Part B (rows 5-9) sees Part A and itself causally.
           1 1 1 1 1 0 0 0 0 0
           1 1 1 1 1 0 0 0 0 0
           1 1 1 1 1 0 0 0 0 0
           1 1 1 1 1 1 0 0 0 0
           1 1 1 1 1 1 1 0 0 0
           1 1 1 1 1 1 1 1 0 0
           1 1 1 1 1 1 1 1 1 0
           1 1 1 1 1 1 1 1 1 1
    extras: span_order = [0, 1] (Part B follows the given list), part_a_length = 5

Choices: `spans` is a list of half-open (start, end) spans, in any order; `shuffle=False` keeps Part B in the given
order (so the paper's figure is reproduced by listing (4, 6) first), `shuffle=True` draws a random order.

Deviations, stated:
- Only the paper's blank-infilling objective with short spans (the "GLM_Base" objective, 15% of tokens, lambda = 3);
  the document-level and sentence-level multi-task objectives (gMASK, sMASK) are not built here.
- No [CLS] at the start and no <eos> (the lab adds no framing); the reference never masks its leading [CLS].
- No segment ids: GLM has no segment embeddings, the 2-D positions tell Part A from Part B.

The loss (`loss(model, batch)`, objective "blank_infilling"): one forward pass of the one stream with both position
rows (the model has `n_position_rows=2`: a second learned position table is added for row 2), then cross-entropy at
the Part B rows (sparse tied head). Part A carries no loss.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.losses import LossOutput, combine, run_backbone, sparse_token_loss

CHOICES: tuple[str, ...] = ("spans", "shuffle")
RULE = Message("Part A (text with [MASK]s) sees all of Part A, never Part B; Part B ([S] + span) sees Part A and "
               "Part B causally; each span is predicted left to right, ending with [E]")


@dataclass(frozen=True)
class Settings:
    """GLM's blank-infilling settings; defaults are the paper's."""

    mask_ratio: float = 0.15  # spans are drawn until they cover int(mask_ratio * n) tokens (at least 1)
    poisson_lambda: float = 3.0  # span length ~ Poisson(lambda), zero draws redrawn
    shuffle: bool = True  # shuffle the spans in Part B (False: Part B follows the spans' given order)

    def __post_init__(self):
        ratio, lam = self.mask_ratio, self.poisson_lambda
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 < ratio < 1.0:
            raise LabError("mask_ratio must be in (0, 1), got {ratio!r}", ratio=ratio)
        if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not 0.1 <= lam <= 100.0:
            raise LabError("poisson_lambda must be in [0.1, 100], got {lam!r}", lam=lam)
        if not isinstance(self.shuffle, bool):
            raise LabError("shuffle must be True or False, got {shuffle!r}", shuffle=self.shuffle)


def check_spans(n: int, spans) -> list[tuple[int, int]]:
    """Validate a list of half-open (start, end) spans over n tokens: at least one, each non-empty and inside range(n),
    no two overlapping. Returns them as int tuples, in the given order."""
    if isinstance(spans, torch.Tensor):
        spans = spans.tolist()
    if not isinstance(spans, (list, tuple)):
        raise LabError("spans must be a list of (start, end) pairs, got {spans!r}", spans=spans)
    if not spans:
        raise LabError("Give at least one span to blank out.")
    out = []
    for span in spans:
        if isinstance(span, torch.Tensor):
            span = span.tolist()
        if not isinstance(span, (list, tuple)) or len(span) != 2:
            raise LabError("each span must be a (start, end) pair, got {span!r}", span=span)
        try:
            start, end = (operator.index(v) for v in span)
        except TypeError:
            raise LabError("span {span!r} must hold two integers (start, end)", span=span) from None
        if start >= end:
            raise LabError("span {span} is empty: a span (start, end) is half-open and needs start < end.",
                           span=(start, end))
        if start < 0 or end > n:
            raise LabError("span {span} is out of range for {n} tokens (0 <= start < end <= {n}).",
                           span=(start, end), n=n)
        out.append((start, end))
    ordered = sorted(out)
    for (s1, e1), (s2, e2) in zip(ordered, ordered[1:]):
        if s2 < e1:
            raise LabError("spans {first_span} and {second_span} overlap; spans must not share tokens.",
                           first_span=(s1, e1), second_span=(s2, e2))
    return out


def _check_length(n: int) -> None:
    if n < 1:
        raise LabError("GLM needs at least 1 token.")


def draw_span_lengths(n: int, settings: Settings, generator: torch.Generator) -> list[int]:
    """Poisson(lambda) lengths, zeros redrawn, until they cover int(mask_ratio * n) tokens (at least 1), each
    truncated so that all spans fit with one gap between neighbours."""
    goal = max(1, int(settings.mask_ratio * n))
    lengths: list[int] = []
    covered = 0
    while covered < goal:
        draws = torch.poisson(torch.full((goal + 1,), float(settings.poisson_lambda)), generator=generator)
        for length in draws[draws > 0].long().tolist():
            room = n - covered - len(lengths)  # keep one unmasked token between this span and each earlier one
            if covered >= goal or room < 1:
                return lengths
            lengths.append(min(length, room))
            covered += lengths[-1]
    return lengths


def place_spans(n: int, lengths: list[int], generator: torch.Generator) -> list[tuple[int, int]]:
    """Place spans of the given lengths (in this order) uniformly, with at least one unmasked token between spans:
    span i starts after `places[i]` of the free tokens (the reference's `sample_spans`)."""
    k = len(lengths)
    length_t = torch.tensor(lengths, dtype=torch.long)  # (k,)
    free = n - int(length_t.sum()) - (k - 1)  # unmasked tokens not needed as gaps
    places = torch.randint(free + 1, (k,), generator=generator).sort().values  # (k,)
    before = torch.cumsum(length_t + 1, 0) - (length_t + 1)  # (k,): masked tokens + gaps before span i
    starts = places + before  # (k,)
    return [(s, s + length) for s, length in zip(starts.tolist(), lengths)]


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    n = token_ids.numel()
    _check_length(n)
    lengths = draw_span_lengths(n, cfg.settings, generator)
    lengths = [lengths[i] for i in torch.randperm(len(lengths), generator=generator).tolist()]
    return {"spans": place_spans(n, lengths, generator), "shuffle": cfg.settings.shuffle}


def validate_choices(n: int, choices: dict) -> dict:
    """Check `spans` (non-empty, in range, non-overlapping; any order) and `shuffle` (a bool)."""
    _check_length(n)
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        raise LabError("GLM takes the choices {choices}; got {unknown}",
                       choices=', '.join(CHOICES), unknown=', '.join(unknown))
    out = {}
    if "spans" in choices:
        out["spans"] = check_spans(n, choices["spans"])
    if "shuffle" in choices:
        if not isinstance(choices["shuffle"], bool):
            raise LabError("shuffle must be True or False, got {shuffle!r}", shuffle=choices['shuffle'])
        out["shuffle"] = choices["shuffle"]
    return out


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    vocab = cfg.vocab
    n = token_ids.numel()
    spans = check_spans(n, choices["spans"])
    k = len(spans)
    span_order = torch.randperm(k, generator=generator) if choices.get("shuffle", cfg.settings.shuffle) \
        else torch.arange(k)  # (k,): Part B's i-th span is spans[span_order[i]]

    # Part A: drop every span token but the first, which becomes [MASK].
    starts = torch.tensor([s for s, _ in spans], dtype=torch.long)  # (k,)
    ends = torch.tensor([e for _, e in spans], dtype=torch.long)  # (k,)
    is_start = torch.zeros(n, dtype=torch.bool)
    is_start[starts] = True
    cover = torch.zeros(n + 1, dtype=torch.long)
    cover.index_add_(0, starts, torch.ones(k, dtype=torch.long))
    cover.index_add_(0, ends, -torch.ones(k, dtype=torch.long))
    in_span = torch.cumsum(cover, 0)[:n] > 0  # (n,)
    keep = ~in_span | is_start  # (n,)
    part_a = torch.where(is_start, torch.full_like(token_ids, vocab.mask_id), token_ids)[keep]  # (LA,)
    part_a_length = part_a.numel()
    mask_index = torch.cumsum(keep.long(), 0) - 1  # (n,): Part A index of each kept token

    # Part B: [S] + span, predicting span + [E], in span_order.
    inputs_b, targets_b, pos1_b, pos2_b = [], [], [], []
    for i in span_order.tolist():
        start, end = spans[i]
        length = end - start
        inputs_b.append(torch.cat([torch.tensor([vocab.start_id]), token_ids[start:end]]))  # (len+1,)
        targets_b.append(torch.cat([token_ids[start:end], torch.tensor([vocab.end_id])]))  # (len+1,)
        pos1_b.append(mask_index[start].repeat(length + 1))  # (len+1,): where the blank is in Part A
        pos2_b.append(torch.arange(1, length + 2))  # (len+1,): position inside the span

    total = part_a_length + sum(t.numel() for t in inputs_b)
    position_ids = torch.stack([
        torch.cat([torch.arange(part_a_length)] + pos1_b),
        torch.cat([torch.zeros(part_a_length, dtype=torch.long)] + pos2_b),
    ])  # (2, T)
    return Example(
        input_ids=torch.cat([part_a] + inputs_b),  # (T,)
        attention={"self": masks.materialize(masks.prefix(part_a_length), total)},  # (T, T)
        position_ids=position_ids,
        targets=torch.cat([torch.full((part_a_length,), IGNORE_INDEX, dtype=torch.long)] + targets_b),  # (T,)
        extras={"span_order": span_order, "part_a_length": torch.tensor(part_a_length)},
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = list(token_ids)
    return collate([build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows],
                   pad_id=cfg.vocab.pad_id)


def max_length(n: int, settings: Settings) -> int:
    """The longest input an n-token row can become. k spans turn n tokens into n + 2k inputs (each span keeps one
    [MASK] in Part A and gains an [S] in Part B); k is at most int(mask_ratio * n) (each span covers >= 1 token) and
    at most ceil(n / 2) (spans need a gap between them). n=64 (defaults): 82."""
    return n + 2 * min(max(1, int(settings.mask_ratio * n)), (n + 1) // 2)


def loss(model, batch: Batch) -> LossOutput:
    """blank_infilling: -log p(span tokens and [E] | Part A, the Part B tokens before them), at Part B's rows."""
    hidden = run_backbone(model.backbone, batch)  # (B, T, H)
    part, target_ids, target_nll, _ = sparse_token_loss(model.backbone, hidden, batch.targets)
    return combine(model.objective_weights, {"blank_infilling": part}, target_ids, target_nll)
