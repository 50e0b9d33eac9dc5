"""UniLM: one Transformer, four self-attention masks, one cloze objective.

Paper: Li Dong, Nan Yang, Wenhui Wang, Furu Wei, Xiaodong Liu, Yu Wang, Jianfeng Gao, Ming Zhou, Hsiao-Wuen Hon
(2019). Unified Language Model Pre-training for Natural Language Understanding and Generation. NeurIPS 2019.
arXiv:1905.03197.

Who may attend to whom depends on the row's mode (`extras["mode"]`, an int code):

    code  mode            x_i may attend x_j iff               paper's name
    0     bidirectional   always                               bidirectional LM (BERT)
    1     left_to_right   j <= i      (masks.causal)           unidirectional LM, left-to-right
    2     right_to_left   j >= i      (masks.anticausal)       unidirectional LM, right-to-left
    3     seq2seq         j < src_len or j <= i (masks.prefix) sequence-to-sequence LM

In seq2seq the source x[:src_len] is fully visible within itself, and a target token sees the whole source and its own
left context, itself included. What is predicted, in every mode: the original token at each masked position (cloze).

- Mode mix (section 2.3): per row, bidirectional 1/3, seq2seq 1/3, left_to_right 1/6, right_to_left 1/6 (settings,
  validated to sum to 1). A one-token row cannot be split, so a seq2seq draw falls back to bidirectional there.
- Segments: bidirectional and seq2seq rows are "a pair of segments packed together" (section 2): `src_len` is drawn
  uniformly among the word starts in [1, n-1] (uniform over [1, n-1] when every token starts a word);
  `segment_ids` are 0 on the source / segment A and 1 on the target / segment B. Unidirectional rows are one
  segment (all 0) and have src_len None.
- NSP (section 2.2: like BERT, the bidirectional LM also trains next sentence prediction): in make_batch, a
  bidirectional row's segment B is replaced, with probability 0.5, by an equally long run of another row.
  `extras["nsp_label"]`: 0 = IsNext, 1 = NotNext (as BERT's code), IGNORE_INDEX for rows of the other modes and for
  one-token rows. A single sequence (the Mask Explorer) is always IsNext.
- Masking (section 2.3): `count_to_mask(n, 0.15)` tokens, anywhere in the row (in every mode; for seq2seq, section
  2.2 picks tokens in both segments, the source too, during pre-training). "80% of
  the time we randomly mask one token each time, and 20% of the time we mask a bigram or a trigram": we visit start
  positions in random order; at each one not yet masked we take one token (80%) or an n-gram of n ~ uniform{2, 3}
  tokens (20%), cut at the row's end, at an already masked token and at the budget, so the count is exactly
  count_to_mask(n, 0.15). Each masked token then becomes [MASK] (80%), a random token (10%) or stays (10%).

Tiny worked example: `build_anatomy("unilm", "the cat sat on the mat".split(), seed=11, mode="seq2seq", src_len=3)` (a
golden test in tests/objectives/test_bert_family_batches.py): source "the cat sat", target "on the mat"; one token
masked (round(0.9) = 1): "mat" (position 5).

    inputs     the cat sat on the [MASK]
    positions  0   1   2   3  4   5
    segments   0   0   0   1  1   1
    targets    -   -   -   -  -   mat
    mode       3 (seq2seq)
    attention  1 1 1 0 0 0
               1 1 1 0 0 0
               1 1 1 0 0 0
               1 1 1 1 0 0
               1 1 1 1 1 0
               1 1 1 1 1 1

With mode="right_to_left" the matrix is upper triangular (row i: 1 from column i on), with "left_to_right" lower
triangular, with "bidirectional" all ones.

Deviations from the paper, stated:
- No [CLS]/[SEP]/[EOS] framing: the pipeline frames. The paper's segments are real text segments; ours are the two
  sides of a split inside one row, and a NotNext B comes from another row of the batch.
- The paper uses distinct segment embeddings per LM objective ("segment embeddings ... play the role of LM
  identifier"). By default we keep the lab's 0/1 segment ids and give the mode in `extras["mode"]`;
  `lm_segment_ids=True` writes the released code's ids instead: bidirectional 0/1, left_to_right 2, seq2seq 4/5, and
  3 (the next free id) for right_to_left, which the released code does not name.
- The mode is drawn per row, so one batch mixes modes ("within one training batch" in the paper).
- n-grams are of tokens, not whole words (the paper does not say; its code's `mask_whole_word` is off by default).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.bert import (IS_NEXT, as_ids, as_rows, check_fraction, check_masking, check_positive_int,
                                        corrupt_tokens, draw_pair, mlm_targets, reject_unknown, validate_masked)
from lab_models.objectives.common import BatchConfig, CorruptionRates, count_to_mask, sample_positions
from lab_models.objectives.losses import LossOutput, mlm_with_sentence_objective

CHOICES: tuple[str, ...] = ("mode", "src_len", "masked")
RULE = Message("one model, four masks: bidirectional (every j) | left_to_right (j ≤ i) | right_to_left (j ≥ i) | "
               "seq2seq (j in the source, or j ≤ i); each masked x_i predicts its original token")

MODES = ("bidirectional", "left_to_right", "right_to_left", "seq2seq")  # extras["mode"] is the index in this tuple
MODE_CODES = {mode: code for code, mode in enumerate(MODES)}
TWO_SEGMENT_MODES = ("bidirectional", "seq2seq")
LM_SEGMENT_IDS = {"bidirectional": (0, 1), "left_to_right": (2, 2), "right_to_left": (3, 3), "seq2seq": (4, 5)}


@dataclass(frozen=True)
class Settings:
    """UniLM's objective settings; the defaults are the paper's."""

    mask_rate: float = 0.15  # fraction of tokens masked
    mask_token_rate: float = 0.8  # a masked token becomes [MASK] ...
    random_token_rate: float = 0.1  # ... or a random token; the remaining 10% stay unchanged
    p_bidirectional: float = 1 / 3  # the mode mix; the four must sum to 1
    p_seq2seq: float = 1 / 3
    p_left_to_right: float = 1 / 6
    p_right_to_left: float = 1 / 6
    ngram_rate: float = 0.2  # "20% of the time we mask a bigram or a trigram"
    max_ngram: int = 3
    nsp: bool = True  # next sentence prediction for bidirectional rows
    nsp_random_rate: float = 0.5  # P(NotNext)
    lm_segment_ids: bool = False  # True: the released code's per-mode segment ids (0/1, 2, 3, 4/5)

    def __post_init__(self):
        check_masking(self)
        for name in ("p_bidirectional", "p_seq2seq", "p_left_to_right", "p_right_to_left"):
            check_fraction(name, getattr(self, name))
        total = self.p_bidirectional + self.p_seq2seq + self.p_left_to_right + self.p_right_to_left
        if abs(total - 1.0) > 1e-3:  # a little slack for rounded UI values; the draw renormalises
            raise LabError("the mode probabilities p_bidirectional + p_seq2seq + p_left_to_right + "
                           "p_right_to_left must sum to 1, got {total:.6g}", total=total)
        check_fraction("ngram_rate", self.ngram_rate)
        check_positive_int("max_ngram", self.max_ngram, minimum=2)
        check_fraction("nsp_random_rate", self.nsp_random_rate)

    @property
    def rates(self) -> CorruptionRates:
        return CorruptionRates(mask=self.mask_token_rate, random=self.random_token_rate)

    @property
    def mode_weights(self) -> torch.Tensor:
        """(4,) float64, in MODES order."""
        return torch.tensor([self.p_bidirectional, self.p_left_to_right, self.p_right_to_left, self.p_seq2seq],
                            dtype=torch.float64)


def sample_src_len(starts_word: torch.Tensor, generator: torch.Generator) -> int | None:
    """The source (segment A) length: uniform over the word starts in [1, n-1] (any position if none); None if n < 2."""
    n = starts_word.numel()
    if n < 2:
        return None
    candidates = torch.nonzero(starts_word[1:]).flatten() + 1
    if candidates.numel() == 0:
        candidates = torch.arange(1, n)
    return int(candidates[torch.randint(candidates.numel(), (1,), generator=generator)])


def sample_masked(n: int, settings: Settings, generator: torch.Generator) -> torch.Tensor:
    """UniLM's masking: exactly count_to_mask(n, mask_rate) positions, single tokens (80%) or 2..max_ngram-grams
    (20%) from random starts. (k,) long, sorted."""
    budget = count_to_mask(n, settings.mask_rate)
    if settings.ngram_rate == 0:
        return sample_positions(torch.arange(n), budget, generator)
    starts = torch.randperm(n, generator=generator).tolist()
    is_ngram = (torch.rand(n, generator=generator) < settings.ngram_rate).tolist()
    ngram_sizes = torch.randint(2, settings.max_ngram + 1, (n,), generator=generator).tolist()
    covered = [False] * n
    chosen = []
    for start, ngram, size in zip(starts, is_ngram, ngram_sizes):
        if len(chosen) >= budget:
            break
        if covered[start]:
            continue
        for p in range(start, min(n, start + (size if ngram else 1))):
            if covered[p] or len(chosen) >= budget:
                break
            covered[p] = True
            chosen.append(p)
    return torch.tensor(sorted(chosen), dtype=torch.long)


def _draw_mode(n: int, settings: Settings, generator: torch.Generator) -> str:
    mode = MODES[int(torch.multinomial(settings.mode_weights, 1, generator=generator))]
    return "bidirectional" if mode == "seq2seq" and n < 2 else mode


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """As in training: `mode`, `src_len` (None for the unidirectional modes) and `masked`."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    mode = _draw_mode(ids.numel(), settings, generator)
    src_len = sample_src_len(cfg.vocab.starts_word(ids), generator) if mode in TWO_SEGMENT_MODES else None
    return {"mode": mode, "src_len": src_len, "masked": sample_masked(ids.numel(), settings, generator)}


def _check_src_len(n: int, src_len) -> int:
    if isinstance(src_len, bool) or not isinstance(src_len, numbers.Integral) or not 1 <= src_len <= n - 1:
        raise LabError("src_len must be an integer in 1..{last_index} for {n} tokens (the source and the target both "
                       "need at least one token), got {src_len!r}", last_index=n - 1, n=n, src_len=src_len)
    return int(src_len)


def _check_mode(mode) -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise LabError("unknown mode {mode!r}: choose one of {modes}", mode=mode, modes=', '.join(MODES))
    return mode


def validate_choices(n: int, choices: dict) -> dict:
    """Check `mode`, `src_len` and `masked`. A `src_len` without a `mode` means seq2seq."""
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    reject_unknown(choices, CHOICES, "unilm")
    out: dict = {}
    mode = choices.get("mode")
    src_len = choices.get("src_len")
    if mode is None and src_len is not None:
        mode = "seq2seq"
    if mode is not None:
        out["mode"] = _check_mode(mode)
        if mode == "seq2seq" and n < 2:
            raise LabError("seq2seq needs at least 2 tokens (a source and a target), got {n}; choose another mode", n=n)
        if mode not in TWO_SEGMENT_MODES:
            if src_len is not None:
                raise LabError("src_len applies to seq2seq (the source length) and bidirectional (segment A); "
                               "{mode} reads one segment, so leave src_len out", mode=mode)
            out["src_len"] = None
    if src_len is not None:
        out["src_len"] = _check_src_len(n, src_len)
    if "masked" in choices:
        out["masked"] = validate_masked(n, choices["masked"])
    return out


def _attention(mode: str, n: int, src_len: int | None) -> torch.Tensor:
    if mode == "bidirectional":
        return masks.materialize(masks.bidirectional, n)  # (T, T)
    if mode == "left_to_right":
        return masks.materialize(masks.causal, n)  # (T, T)
    if mode == "right_to_left":
        return masks.materialize(masks.anticausal, n)  # (T, T)
    return masks.materialize(masks.prefix(src_len), n)  # (T, T)


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    """The row's mask for its mode, segments, and 80/10/10 at `masked`. Missing choices are drawn as in training
    (a missing src_len of a two-segment mode too)."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    n = ids.numel()
    if "mode" not in choices or "masked" not in choices:
        choices = {**sample_choices(ids, generator, cfg), **choices}
    mode = _check_mode(choices["mode"])
    src_len = choices.get("src_len")
    if mode in TWO_SEGMENT_MODES:
        if src_len is None:
            src_len = sample_src_len(cfg.vocab.starts_word(ids), generator)
        if src_len is None and mode == "seq2seq":
            raise LabError("seq2seq needs at least 2 tokens (a source and a target), got {n}", n=n)
        if src_len is not None:
            src_len = _check_src_len(n, src_len)
    else:
        src_len = None
    masked = validate_masked(n, choices["masked"])  # (k,)

    first_id, second_id = LM_SEGMENT_IDS[mode] if settings.lm_segment_ids else (0, 1)
    segment_ids = torch.full((n,), first_id, dtype=torch.long)  # (T,)
    if src_len is not None:
        segment_ids[src_len:] = second_id
    extras = {"mode": torch.tensor(MODE_CODES[mode])}  # () long
    if settings.nsp:
        is_pair = mode == "bidirectional" and src_len is not None
        extras["nsp_label"] = torch.tensor(int(choices.get("nsp_label", IS_NEXT)) if is_pair else IGNORE_INDEX)
    return Example(
        input_ids=corrupt_tokens(ids, masked, settings.rates, cfg.vocab, generator),  # (T,)
        attention={"self": _attention(mode, n, src_len)},  # (T, T)
        position_ids=torch.arange(n),  # (T,)
        targets=mlm_targets(ids, masked),  # (T,)
        segment_ids=segment_ids,
        extras=extras,
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    """Per row: a mode, segments, NSP for bidirectional rows (B from another row half the time), masking."""
    settings: Settings = cfg.settings
    rows = as_rows(token_ids)
    examples = []
    for i, row in enumerate(rows):
        choices = sample_choices(row, generator, cfg)
        ids = row
        if settings.nsp and choices["mode"] == "bidirectional" and choices["src_len"] is not None:
            ids, choices["nsp_label"] = draw_pair(rows, i, choices["src_len"], settings.nsp_random_rate, generator,
                                                  generator)
        examples.append(build_example(ids, choices, generator, cfg))
    return collate(examples, pad_id=cfg.vocab.pad_id)


def loss(model, batch: Batch) -> LossOutput:
    """cloze: cross-entropy at the masked positions, whatever the row's mode (the mode lives in the batch's mask,
    so one set of parameters serves all four LMs); nsp (optional, see lab_models/models/family.py): pooler + 2-way
    classifier on the first position against extras["nsp_label"], which is IGNORE_INDEX except on bidirectional rows."""
    return mlm_with_sentence_objective(model, batch, "cloze", sentence=("nsp", "nsp_label"))
