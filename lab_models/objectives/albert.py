"""ALBERT: n-gram masked language modelling with sentence order prediction (SOP).

Paper: Zhenzhong Lan, Mingda Chen, Sebastian Goodman, Kevin Gimpel, Piyush Sharma, Radu Soricut (2020). ALBERT: A Lite
BERT for Self-supervised Learning of Language Representations. ICLR 2020. arXiv:1909.11942.

Who may attend to whom: everyone to everyone (bidirectional). What is predicted: the original token at each masked
position, and (from the first position's representation, in the model) whether the two segments are in order.

- SOP (section 3.1): segment A = x[:split] and B = x[split:] are two consecutive segments of the same text. With
  probability 0.5 they are swapped, so the input is B + A. `split` is drawn as in BERT's NSP (a word start in the
  middle half of the row). `segment_ids` mark input order: 0 on the first segment of the input, 1 on the second.
  `extras["sop_label"]`, as in the released code and Hugging Face: **0 = in order, 1 = swapped**; IGNORE_INDEX for a
  one-token row that cannot be split.
- n-gram masking (section 4.1, after SpanBERT): the masked budget is `count_to_mask(n, 0.15)` tokens. Word starts
  come from `vocab.starts_word` on the input (after any swap). The released `create_pretraining_data.py` procedure:
  visit the words in random order; at each not-yet-covered word draw n in {1, ..., 3} with p(n) ∝ 1/n (6/11, 3/11,
  2/11; renormalised over the words left before the end of the row); take the n whole words starting there; **if they
  would exceed the budget, shorten to n-1, n-2, ... words; skip the start if even one word does not fit, or if any
  word is already covered**. Stop when the budget is reached. So the budget is never exceeded, and it is met exactly
  when every word is one token. One exception keeps a target in every row: if no word fits the budget at all (a
  short row of long words, where the released code would mask nothing), one of the shortest words is masked anyway.
- Each masked token independently becomes [MASK] (80%), a random ordinary token (10%) or stays (10%): per token, as in
  the released code (SpanBERT decides per span; ALBERT does not).

Tiny worked example: `build_anatomy("albert", "▁the ▁quick ▁brown ▁fox ▁jump s ▁over ▁the ▁lazy ▁dog".split(),
seed=1)` (a golden test in tests/objectives/test_bert_family_batches.py). split = 4; the coin said swap, so the input is
B + A = "▁jump s ▁over ▁the ▁lazy ▁dog" + "▁the ▁quick ▁brown ▁fox"; the budget is round(1.5) = 2 tokens, spent on a
unigram that is one whole two-token word, "▁jump s" (positions 0 and 1); both tokens became [MASK].

    inputs     [MASK] [MASK] ▁over ▁the ▁lazy ▁dog ▁the ▁quick ▁brown ▁fox
    positions  0      1      2     3    4     5    6    7      8      9
    segments   0      0      0     0    0     0    1    1      1      1
    targets    ▁jump  s      -     -    -     -    -    -      -      -
    sop_label  1 (swapped)
    attention  all ones, 10 x 10 (every row: 1 1 1 1 1 1 1 1 1 1)

Deviations from the paper, stated:
- No [CLS]/[SEP] framing (the data pipeline frames), and segments are cut at a word start inside the row rather than
  at sentence boundaries of a document.
- Near the end of the row, p(n) is renormalised over the n that fit; the released code keeps drawing n = 3 there and
  simply takes the shorter run that remains.
- The released code's optional `do_permutation` second pass (off by default) is not implemented.
- User-given `masked` positions are taken literally (they need not be whole words or n-grams).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.bert import (as_ids, as_rows, check_fraction, check_masking, check_positive_int,
                                        corrupt_tokens, mlm_targets, reject_unknown, sample_split, validate_masked,
                                        validate_split)
from lab_models.objectives.common import BatchConfig, CorruptionRates, count_to_mask
from lab_models.objectives.losses import LossOutput, mlm_with_sentence_objective
from lab_models.objectives.spanbert import shortest_word

CHOICES: tuple[str, ...] = ("masked",)
RULE = Message("bidirectional: every x_i may attend every x_j; each masked x_i (whole-word n-grams) predicts its "
               "original token; are the two segments in order?")

IN_ORDER, SWAPPED = 0, 1  # extras["sop_label"]


@dataclass(frozen=True)
class Settings:
    """ALBERT's objective settings; the defaults are the paper's and its released code's."""

    mask_rate: float = 0.15  # masked-token budget as a fraction of the row
    mask_token_rate: float = 0.8  # a masked token becomes [MASK] ...
    random_token_rate: float = 0.1  # ... or a random token; the remaining 10% stay unchanged
    max_ngram: int = 3  # n-grams of 1..3 words
    favor_shorter_ngram: bool = True  # p(n) ∝ 1/n; False reverses the weights (the released flag)
    whole_word: bool = True  # n-grams of whole words (vocab.starts_word); False: of single tokens
    sop: bool = True  # sentence order prediction
    sop_swap_rate: float = 0.5  # P(swapped)

    def __post_init__(self):
        check_masking(self)
        check_positive_int("max_ngram", self.max_ngram)
        check_fraction("sop_swap_rate", self.sop_swap_rate)

    @property
    def rates(self) -> CorruptionRates:
        return CorruptionRates(mask=self.mask_token_rate, random=self.random_token_rate)


def ngram_probabilities(max_ngram: int, favor_shorter: bool = True) -> list[float]:
    """p(n) for n = 1..max_ngram: ∝ 1/n (reversed when not favor_shorter).

    >>> [round(p * 11) for p in ngram_probabilities(3)]
    [6, 3, 2]
    """
    weights = [1.0 / n for n in range(1, max_ngram + 1)]
    if not favor_shorter:
        weights = weights[::-1]
    total = sum(weights)
    return [w / total for w in weights]


def _draw_length(probabilities: list[float], u: float) -> int:
    """Inverse-CDF draw of n in 1..len(probabilities) from u in [0, 1), renormalising the given probabilities."""
    total = sum(probabilities)
    cumulative = 0.0
    for n, p in enumerate(probabilities, start=1):
        cumulative += p / total
        if u < cumulative:
            return n
    return len(probabilities)


def sample_ngrams(starts_word: torch.Tensor, budget: int, generator: torch.Generator,
                  settings: Settings) -> list[tuple[int, int, int]]:
    """ALBERT's n-gram choice: (start, end, n_words) token spans, half-open, in the order they were chosen."""
    n = starts_word.numel()
    word_starts = torch.nonzero(starts_word).flatten().tolist()
    word_ends = word_starts[1:] + [n]
    num_words = len(word_starts)
    probabilities = ngram_probabilities(settings.max_ngram, settings.favor_shorter_ngram)
    order = torch.randperm(num_words, generator=generator).tolist()  # the shuffled candidate starts
    draws = torch.rand(num_words, generator=generator).tolist()  # one n per candidate
    covered = [False] * num_words
    used = 0
    chosen = []
    for w, u in zip(order, draws):
        if used >= budget:
            break
        size = _draw_length(probabilities[:min(settings.max_ngram, num_words - w)], u)
        while size > 1 and used + word_ends[w + size - 1] - word_starts[w] > budget:
            size -= 1  # shorten the n-gram until it fits the budget
        length = word_ends[w + size - 1] - word_starts[w]
        if used + length > budget or any(covered[w:w + size]):
            continue  # even one word is too long, or it overlaps an earlier n-gram: skip this start
        covered[w:w + size] = [True] * size
        used += length
        chosen.append((word_starts[w], word_ends[w + size - 1], size))
    if not chosen and num_words:  # no whole word fits the budget: mask one shortest word anyway
        chosen.append(shortest_word(word_starts, word_ends, generator))
    return chosen


def _input_order(ids: torch.Tensor, split: int | None, sop_label: int) -> tuple[torch.Tensor, int | None]:
    """The model's input (A + B, or B + A when swapped) and the length of its first segment."""
    if split is None:
        return ids, None
    if sop_label == SWAPPED:
        return torch.cat([ids[split:], ids[:split]]), ids.numel() - split  # (T,)
    return ids, split


def _word_starts(ids: torch.Tensor, cfg: BatchConfig) -> torch.Tensor:
    if cfg.settings.whole_word:
        return cfg.vocab.starts_word(ids)  # (T,) bool
    return torch.ones(ids.numel(), dtype=torch.bool)


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """As in training: `split` and `sop_label` (SOP on), then `masked` positions of the resulting input."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    choices: dict = {}
    split, sop_label = None, IN_ORDER
    if settings.sop:
        split = sample_split(cfg.vocab.starts_word(ids), generator)
        choices["split"] = split
        if split is not None:
            sop_label = SWAPPED if torch.rand((), generator=generator).item() < settings.sop_swap_rate else IN_ORDER
            choices["sop_label"] = sop_label
    inputs, _ = _input_order(ids, split, sop_label)
    ngrams = sample_ngrams(_word_starts(inputs, cfg), count_to_mask(ids.numel(), settings.mask_rate), generator,
                           settings)
    positions = [p for start, end, _ in ngrams for p in range(start, end)]
    choices["masked"] = torch.tensor(sorted(positions), dtype=torch.long)
    return choices


def validate_choices(n: int, choices: dict) -> dict:
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    reject_unknown(choices, CHOICES, "albert")
    return {"masked": validate_masked(n, choices["masked"])} if "masked" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    """Swap the segments if `sop_label` says so, then corrupt `masked` (positions of the input) 80/10/10 per token.
    Missing choices are drawn as in training."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    n = ids.numel()
    if "masked" not in choices or (settings.sop and "split" not in choices):
        choices = {**sample_choices(ids, generator, cfg), **choices}
    split = validate_split(n, choices.get("split")) if settings.sop else None
    sop_label = int(choices.get("sop_label", IN_ORDER))
    if sop_label not in (IN_ORDER, SWAPPED):
        raise LabError("sop_label must be {in_order} (in order) or {swapped} (swapped), got {sop_label!r}",
                       in_order=IN_ORDER, swapped=SWAPPED, sop_label=sop_label)
    inputs, first_len = _input_order(ids, split, sop_label)  # (T,)
    masked = validate_masked(n, choices["masked"])  # (k,)
    segment_ids = torch.zeros(n, dtype=torch.long)  # (T,)
    extras = {}
    if settings.sop:
        if first_len is not None:
            segment_ids[first_len:] = 1
        extras["sop_label"] = torch.tensor(sop_label if split is not None else IGNORE_INDEX)  # () long
    return Example(
        input_ids=corrupt_tokens(inputs, masked, settings.rates, cfg.vocab, generator),  # (T,)
        attention={"self": masks.materialize(masks.bidirectional, n)},  # (T, T)
        position_ids=torch.arange(n),  # (T,)
        targets=mlm_targets(inputs, masked),  # (T,)
        segment_ids=segment_ids,
        extras=extras,
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    rows = as_rows(token_ids)
    examples = [build_example(row, sample_choices(row, generator, cfg), generator, cfg) for row in rows]
    return collate(examples, pad_id=cfg.vocab.pad_id)


def loss(model, batch: Batch) -> LossOutput:
    """mlm: cross-entropy at the masked n-gram positions (sparse vocabulary head, through the H -> E transform);
    sop: pooler + 2-way classifier on the first position against extras["sop_label"] (0 = in order, 1 = swapped)."""
    return mlm_with_sentence_objective(model, batch, "mlm", sentence=("sop", "sop_label"))
