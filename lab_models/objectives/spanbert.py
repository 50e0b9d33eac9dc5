"""SpanBERT: masking contiguous random spans of whole words, plus the span boundary objective (SBO).

Paper: Mandar Joshi, Danqi Chen, Yinhan Liu, Daniel S. Weld, Luke Zettlemoyer, Omer Levy (2020). SpanBERT: Improving
Pre-training by Representing and Predicting Spans. Transactions of the ACL 8, pages 64-77. arXiv:1907.10529.

Who may attend to whom: everyone to everyone (bidirectional). What is predicted: each masked token, twice: from its own
position (MLM) and from the span's two boundary tokens plus its relative position in the span (SBO).

- Span masking (section 3.1): repeat until `count_to_mask(n, 0.15)` tokens are masked: draw a span length in words
  ℓ ~ Geometric(p = 0.2) truncated to ℓ <= 10 and renormalised (the released code's `len_distrib`; mean 3.797 words),
  draw the start uniformly among the word starts (`vocab.starts_word`), and mask ℓ whole words from there. The span
  stops early at the end of the row, at an already masked word (spans never overlap), and before a word that would
  exceed the budget; a start whose first word does not fit, or that is already masked, is skipped. So the budget is
  never exceeded, and it is met exactly when every word is one token. One exception keeps a target in every row: if
  no word fits the budget at all (a short row of long words), one of the shortest words is masked anyway.
- The spans of an example are the maximal runs of consecutive masked positions (the released code merges touching
  spans the same way), so user-given `masked` positions define spans too.
- 80/10/10 is decided once per span (section 3.1): the whole span becomes [MASK]s, or random tokens, or stays
  (`common.corrupt` with one group per span).
- SBO targets, aligned with the input, in `extras`: for a masked token x_i of a span covering tokens s..e
  (inclusive), `sbo_left` = s - 1, `sbo_right` = e + 1 (input indices of the boundary tokens) and
  `sbo_relative_position` = i - s + 1, **1-based** as the paper's p_(i-s+1) (the distance from the left boundary).
  IGNORE_INDEX (-100) everywhere else. The SBO target token is `targets[i]`.
- Row edges: a span touching the first or the last token has no boundary token on that side. As in the released code
  (`--endpoints external`), such spans get **no SBO targets** (their tokens keep their MLM targets)
  [`sbo_skip_edge_spans=True`]. With `sbo_skip_edge_spans=False` they do, and a missing boundary is written **-1**,
  which the model must map to a learned "outside" vector.
- Only the first `sbo_max_tokens` (15, the released training command's `--max-pair-targets`) tokens of a span get SBO
  targets, which bounds the relative-position table at 15.
- No NSP (section 3.3: single-sequence training is better); `nsp=True` restores BERT's pairs for comparison.

Tiny worked example: `build_anatomy("spanbert", "the quick brown fox jumped over the lazy dog today".split(), seed=2)`
(a golden test in tests/objectives/test_bert_family_batches.py). The budget is round(1.5) = 2 tokens, spent on two
one-word spans, "lazy" (token 7) and "today" (token 9); both coins said [MASK]. "today" touches the right edge, so it
keeps its MLM target but gets no SBO target; "lazy" is predicted from its boundaries "the" (6) and "dog" (8).

    inputs                 the quick brown fox jumped over the [MASK] dog [MASK]
    positions              0   1     2     3   4      5    6   7      8   9
    targets                -   -     -     -   -      -    -   lazy   -   today
    sbo_left               -   -     -     -   -      -    -   6      -   -
    sbo_right              -   -     -     -   -      -    -   8      -   -
    sbo_relative_position  -   -     -     -   -      -    -   1      -   -
    segments               0 everywhere (one sequence)
    attention              all ones, 10 x 10 (every row: 1 1 1 1 1 1 1 1 1 1)

Deviations from the paper, stated:
- No [CLS]/[SEP] framing (the data pipeline frames); the 15% budget is over the row's tokens (the released code uses
  ceil(n * 0.15), we use BERT's round-half-even with a minimum of 1 like the rest of the lab).
- The span start is uniform over word starts, as the paper says; the released code draws a uniform token and moves
  it to its word's start (longer words start spans more often).
- Where the budget runs out, the released code cuts the last span mid-word; we stop at the last whole word that fits.
- The SBO loss (`loss` below) runs the 2-layer FFN over [x_(s-1); x_(e+1); p_(i-s+1)] (`nn.SpanBoundaryHead`, built
  in lab_models/models/family.py) and the tied output matrix, as the released code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.bert import (IS_NEXT, as_ids, as_rows, check_fraction, check_masking, check_positive_int,
                                        draw_pair, mlm_targets, reject_unknown, sample_split, validate_masked,
                                        validate_split)
from lab_models.objectives.common import BatchConfig, CorruptionRates, corrupt, count_to_mask
from lab_models.objectives.losses import LossOutput, combine, masked_mean, require_extra, token_and_sentence_parts

CHOICES: tuple[str, ...] = ("masked",)
RULE = Message("bidirectional: every x_i may attend every x_j; each masked x_i in span s..e is predicted from itself "
               "(MLM) and from x_(s-1), x_(e+1) and its offset (SBO)")

SBO_KEYS = ("sbo_left", "sbo_right", "sbo_relative_position")
OUTSIDE = -1  # a boundary beyond the row's edge (only with sbo_skip_edge_spans=False)


@dataclass(frozen=True)
class Settings:
    """SpanBERT's objective settings; the defaults are the paper's and its released code's."""

    mask_rate: float = 0.15  # masked-token budget as a fraction of the row
    mask_token_rate: float = 0.8  # a span becomes [MASK]s ...
    random_token_rate: float = 0.1  # ... or random tokens; the remaining 10% of spans stay unchanged
    geometric_p: float = 0.2  # span length in words ~ Geometric(p), truncated at max_span_words
    max_span_words: int = 10
    nsp: bool = False  # SpanBERT drops NSP; True restores BERT's segment pairs
    nsp_random_rate: float = 0.5  # P(NotNext) when nsp is on
    sbo_skip_edge_spans: bool = True  # spans touching a row edge get no SBO targets (released code)
    sbo_max_tokens: int = 15  # SBO targets for the first 15 tokens of a span at most (released command)

    def __post_init__(self):
        check_masking(self)
        check_fraction("geometric_p", self.geometric_p, allow_zero=False)
        check_positive_int("max_span_words", self.max_span_words)
        check_fraction("nsp_random_rate", self.nsp_random_rate)
        check_positive_int("sbo_max_tokens", self.sbo_max_tokens)

    @property
    def rates(self) -> CorruptionRates:
        return CorruptionRates(mask=self.mask_token_rate, random=self.random_token_rate)


def span_length_probabilities(p: float, max_words: int) -> torch.Tensor:
    """P(ℓ = 1..max_words) for ℓ ~ Geometric(p) truncated at max_words and renormalised. (max_words,) float64.

    >>> probs = span_length_probabilities(0.2, 10)
    >>> round(float((probs * torch.arange(1, 11)).sum()), 3)   # the paper's mean span length
    3.797
    """
    lengths = torch.arange(1, max_words + 1, dtype=torch.float64)
    weights = p * (1 - p) ** (lengths - 1)  # (max_words,)
    return weights / weights.sum()


def sample_spans(starts_word: torch.Tensor, budget: int, generator: torch.Generator,
                 settings: Settings) -> list[tuple[int, int, int]]:
    """SpanBERT's span choice: (start, end, n_words) token spans, half-open, in the order they were drawn."""
    n = starts_word.numel()
    word_starts = torch.nonzero(starts_word).flatten().tolist()
    word_ends = word_starts[1:] + [n]
    num_words = len(word_starts)
    probabilities = span_length_probabilities(settings.geometric_p, settings.max_span_words)
    covered = [False] * num_words
    remaining = budget if num_words else 0
    spans = []
    while remaining > 0:
        draws = 2 * remaining + 4  # draw in chunks: one tensor call per chunk, not per span
        lengths = (torch.multinomial(probabilities, draws, replacement=True, generator=generator) + 1).tolist()
        anchors = torch.randint(num_words, (draws,), generator=generator).tolist()
        for words, first in zip(lengths, anchors):
            if remaining <= 0:
                break
            if covered[first]:
                continue
            last, taken = first, 0
            while last < num_words and last - first < words and not covered[last]:
                size = word_ends[last] - word_starts[last]
                if taken + size > remaining:
                    break
                taken += size
                last += 1
            if last == first:  # its first word alone exceeds the budget
                if not any(not covered[w] and word_ends[w] - word_starts[w] <= remaining for w in range(num_words)):
                    return spans or [shortest_word(word_starts, word_ends, generator)]  # no uncovered word fits
                continue
            covered[first:last] = [True] * (last - first)
            spans.append((word_starts[first], word_starts[first] + taken, last - first))
            remaining -= taken
    return spans


def shortest_word(word_starts: list[int], word_ends: list[int], generator: torch.Generator) -> tuple[int, int, int]:
    """The fallback when no whole word fits the budget (every word is longer): one of the shortest words, uniformly,
    as a one-word span. Whole words win over the budget, and every row keeps at least one target."""
    sizes = [end - start for start, end in zip(word_starts, word_ends)]
    shortest = [w for w, size in enumerate(sizes) if size == min(sizes)]
    w = shortest[int(torch.randint(len(shortest), (1,), generator=generator))]
    return word_starts[w], word_ends[w], 1


def spans_of(masked: torch.Tensor, n: int) -> list[tuple[int, int]]:
    """The maximal runs of consecutive masked positions, as half-open (start, end) spans.

    >>> spans_of(torch.tensor([1, 2, 3, 6, 8, 9]), 10)
    [(1, 4), (6, 7), (8, 10)]
    """
    is_masked = torch.zeros(n + 2, dtype=torch.bool)  # padded by one False on each side
    is_masked[masked + 1] = True
    starts = torch.nonzero(is_masked[1:-1] & ~is_masked[:-2]).flatten().tolist()
    ends = (torch.nonzero(is_masked[1:-1] & ~is_masked[2:]).flatten() + 1).tolist()
    return list(zip(starts, ends))


def sbo_targets(spans: Sequence[tuple[int, int]], n: int, settings: Settings) -> dict[str, torch.Tensor]:
    """`sbo_left`, `sbo_right`, `sbo_relative_position`: (T,) long each, IGNORE_INDEX where no SBO target."""
    left = torch.full((n,), IGNORE_INDEX, dtype=torch.long)  # (T,)
    right = torch.full((n,), IGNORE_INDEX, dtype=torch.long)  # (T,)
    relative = torch.full((n,), IGNORE_INDEX, dtype=torch.long)  # (T,)
    for start, end in spans:
        at_edge = start == 0 or end == n
        if at_edge and settings.sbo_skip_edge_spans:
            continue
        stop = min(end, start + settings.sbo_max_tokens)
        left[start:stop] = start - 1 if start > 0 else OUTSIDE
        right[start:stop] = end if end < n else OUTSIDE
        relative[start:stop] = torch.arange(1, stop - start + 1)
    return {"sbo_left": left, "sbo_right": right, "sbo_relative_position": relative}


def _training_choices(rows: Sequence[torch.Tensor], i: int, generator: torch.Generator,
                      cfg: BatchConfig) -> tuple[torch.Tensor, dict]:
    """Row i's decisions: the NSP pair (only when nsp is on), then the spans to mask on the resulting input."""
    settings: Settings = cfg.settings
    ids = rows[i]
    choices: dict = {}
    if settings.nsp:
        split = sample_split(cfg.vocab.starts_word(ids), generator)
        choices["split"] = split
        if split is not None:
            ids, choices["nsp_label"] = draw_pair(rows, i, split, settings.nsp_random_rate, generator, generator)
    spans = sample_spans(cfg.vocab.starts_word(ids), count_to_mask(ids.numel(), settings.mask_rate), generator,
                         settings)
    choices["masked"] = torch.tensor(sorted(p for start, end, _ in spans for p in range(start, end)), dtype=torch.long)
    return ids, choices


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """As in training, for one sequence alone: `masked` (whole-word spans), plus `split`/`nsp_label` if nsp is on."""
    return _training_choices([as_ids(token_ids)], 0, generator, cfg)[1]


def validate_choices(n: int, choices: dict) -> dict:
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    reject_unknown(choices, CHOICES, "spanbert")
    return {"masked": validate_masked(n, choices["masked"])} if "masked" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    """Spans = maximal runs of `masked`; one 80/10/10 fate per span; SBO boundaries. Missing choices are drawn."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    n = ids.numel()
    if "masked" not in choices or (settings.nsp and "split" not in choices):
        choices = {**sample_choices(ids, generator, cfg), **choices}
    masked = validate_masked(n, choices["masked"])  # (k,)
    spans = spans_of(masked, n)
    segment_ids = torch.zeros(n, dtype=torch.long)  # (T,)
    extras = sbo_targets(spans, n, settings)
    if settings.nsp:
        split = validate_split(n, choices.get("split"))
        if split is not None:
            segment_ids[split:] = 1
        extras["nsp_label"] = torch.tensor(int(choices.get("nsp_label", IS_NEXT)) if split is not None
                                           else IGNORE_INDEX)  # () long
    groups = [torch.arange(start, end) for start, end in spans]
    return Example(
        input_ids=corrupt(ids, groups, settings.rates, cfg.vocab, generator),  # (T,)
        attention={"self": masks.materialize(masks.bidirectional, n)},  # (T, T)
        position_ids=torch.arange(n),  # (T,)
        targets=mlm_targets(ids, masked),  # (T,)
        segment_ids=segment_ids,
        extras=extras,
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = as_rows(token_ids)
    examples = []
    for i in range(len(rows)):
        ids, choices = _training_choices(rows, i, generator, cfg)
        examples.append(build_example(ids, choices, generator, cfg))
    batch = collate(examples, pad_id=cfg.vocab.pad_id)
    for b, example in enumerate(examples):  # collate pads extras with 0, a valid index: mark padding as no target
        for key in SBO_KEYS:
            batch.extras[key][b, example.input_ids.numel():] = IGNORE_INDEX
    return batch


def loss(model, batch: Batch) -> LossOutput:
    """mlm: cross-entropy at the masked positions (sparse vocabulary head). sbo: each token with an SBO target is
    represented from its span's boundary tokens and its 1-based relative position (`model.heads["sbo"]`, the
    2-layer MLP), projected with the tied token embedding matrix (and the head's own bias), and scored against the
    original token `targets[i]`; only the rows with an SBO target go through the head. nsp (only with settings.nsp):
    as BERT's."""
    weights = model.objective_weights
    hidden, parts, target_ids, target_nll = token_and_sentence_parts(model, batch, "mlm", ("nsp", "nsp_label"))
    if weights.get("sbo", 0.0) > 0:
        left, right, relative = (require_extra(batch, key, "spanbert") for key in SBO_KEYS)  # (B, T) each
        has_target = relative != IGNORE_INDEX  # (B, T)
        # Compact each row's SBO rows to the front (stable: row-major order kept), so that the head's MLP runs on
        # N = max targets per row columns instead of all T. At least one column, so the head is always in the graph.
        n_columns = max(1, int(has_target.sum(dim=1).max()))
        columns = torch.argsort((~has_target).to(torch.int8), dim=1, stable=True)[:, :n_columns]  # (B, N)
        rel = relative.gather(1, columns)  # (B, N)
        head = model.heads["sbo"]
        y = head(hidden, left.gather(1, columns), right.gather(1, columns), rel)  # (B, N, H)
        rows = rel != IGNORE_INDEX  # (B, N)
        sbo_targets = batch.targets.gather(1, columns)[rows]  # (M,) the original tokens
        logits = head.logits(model.backbone, y[rows])  # (M, V)
        nll = torch.nn.functional.cross_entropy(logits.float(), sbo_targets, ignore_index=IGNORE_INDEX,
                                                reduction="none")  # (M,)
        parts["sbo"] = masked_mean(nll, (sbo_targets != IGNORE_INDEX).sum())
    return combine(weights, parts, target_ids, target_nll)
