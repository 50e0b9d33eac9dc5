"""BERT: the masked language model (MLM) with next sentence prediction (NSP).

Paper: Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova (2019). BERT: Pre-training of Deep Bidirectional
Transformers for Language Understanding. NAACL-HLT 2019, pages 4171-4186. arXiv:1810.04805.

Who may attend to whom: everyone to everyone (bidirectional). What is predicted: the original token at each picked
position, nothing elsewhere.

- MLM: pick `count_to_mask(n, 0.15)` positions uniformly without replacement (`round(n * 0.15)`, half to even, at least
  1, as in BERT's `create_pretraining_data.py`). Each picked token independently becomes [MASK] (80%), a random ordinary
  token (10%, drawn uniformly from `vocab.random_ids`, so it may equal the original) or stays unchanged (10%).
- NSP (`nsp=True`): the row is cut into segment A = x[:split] and B = x[split:]. `split` is drawn uniformly among the
  word starts in the middle half, [ceil(n/4), floor(3n/4)] (any word start in [1, n-1] if there is none there, any
  position in the middle half if the row is a single word). With probability 0.5, `make_batch` replaces B by an equally
  long run of tokens taken at a random offset from another row of the batch. `segment_ids` are 0 on A and 1 on B.
  `extras["nsp_label"]` follows the original code (and Hugging Face): **0 = IsNext, 1 = NotNext**, and IGNORE_INDEX
  (-100) for a one-token row that cannot be split.
- Static masking (`static_masking=True`, the original implementation): the corpus is masked once, offline, `dupe_factor`
  (10) times. Here each row draws a copy index k in range(dupe_factor) from the generator, and every other decision
  (the split, the NSP coin, the picked positions, their 80/10/10 fates and random tokens) comes from a generator seeded
  with a hash of (the token ids, k). So one sequence only ever sees `dupe_factor` different maskings.

Tiny worked example: `build_anatomy("bert", "my dog is hairy , he likes play ##ing .".split(), seed=0)` (a golden test
in tests/objectives/test_bert_family_batches.py). Copy k = 4 of 10; split = 6 (a word start in [3, 7]); two of ten
tokens picked (round(1.5) = 2): "my" (its coin said "keep": unchanged, yet still predicted) and "hairy" ([MASK]).

    inputs     my dog is [MASK] , he likes play ##ing .
    positions  0  1   2  3      4 5  6     7    8     9
    segments   0  0   0  0      0 0  1     1    1     1
    targets    my -   -  hairy  - -  -     -    -     -
    nsp_label  0 (IsNext: one sequence alone has no other row to draw a random B from)
    attention  all ones, 10 x 10 (every row: 1 1 1 1 1 1 1 1 1 1)

Deviations from the paper, stated:
- No [CLS]/[SEP] framing: the data pipeline frames and packs (the Anatomy contract shows only what an objective
  inserts). So the 15% count is taken over the row's n tokens, which here contain no [CLS]/[SEP].
- Segments are cut at a word start inside the row, not at sentence boundaries of a document: rows come from the
  pipeline without sentence structure. A NotNext B comes from another row of the same batch, not from another
  document of the corpus; if no other row is long enough the pair stays IsNext.
- A single sequence (the Mask Explorer, `sample_choices`) has no other row, so it always shows IsNext; NotNext pairs
  occur only in `make_batch`.
- Static masking draws a copy index per visit instead of cycling through the dupe_factor copies epoch by epoch; the
  NotNext segment's content comes from whichever row shares the batch (BERT fixes it offline).
- `max_predictions_per_seq` (20 at length 128, a padding cap of the TF code) is not applied.
"""
from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass
from typing import Sequence

import torch

from lab_models.messages import LabError, Message
from lab_models.objectives import masks
from lab_models.batch import IGNORE_INDEX, Batch, Example, collate
from lab_models.objectives.common import BatchConfig, CorruptionRates, count_to_mask, sample_positions
from lab_models.text.vocab import VocabInfo
from lab_models.objectives.losses import LossOutput, mlm_with_sentence_objective

CHOICES: tuple[str, ...] = ("masked",)
RULE = Message("bidirectional: every x_i may attend every x_j; each picked x_i predicts its original token")

IS_NEXT, NOT_NEXT = 0, 1  # extras["nsp_label"], as in BERT's code: 1 means B is a random segment


# ----------------------------------------------------------------------------------------------------------------------
# Helpers shared by the BERT family (RoBERTa, ALBERT, SpanBERT, ELECTRA and UniLM import these).


def check_fraction(name: str, value, *, allow_zero: bool = True) -> None:
    """ValueError unless `value` is a real number in [0, 1] (or (0, 1] when zero is not allowed)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)
    if not ok or not (0.0 <= value <= 1.0) or (not allow_zero and value == 0):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise LabError("{name} must be a number in {interval}, got {value!r}",
                       name=name, interval=interval, value=value)


def check_positive_int(name: str, value, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise LabError("{name} must be an integer >= {minimum}, got {value!r}", name=name, minimum=minimum, value=value)


def check_masking(settings) -> None:
    """Validate the three masking fields every MLM-style Settings has."""
    check_fraction("mask_rate", settings.mask_rate, allow_zero=False)
    check_fraction("mask_token_rate", settings.mask_token_rate)
    check_fraction("random_token_rate", settings.random_token_rate)
    if settings.mask_token_rate + settings.random_token_rate > 1.0 + 1e-9:
        raise LabError("mask_token_rate + random_token_rate must be at most 1 (the rest stays unchanged), got "
                       "{mask_token_rate} + {random_token_rate}",
                       mask_token_rate=settings.mask_token_rate, random_token_rate=settings.random_token_rate)


def as_ids(token_ids) -> torch.Tensor:
    """One row of token ids as a 1-D LongTensor; ValueError if it is empty or not 1-D."""
    ids = torch.as_tensor(token_ids)
    if ids.dim() != 1:
        raise LabError("expected one row of token ids (a 1-D tensor), got shape {ids_shape}",
                       ids_shape=tuple(ids.shape))
    if ids.numel() == 0:
        raise LabError("the input is empty: give at least one token")
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise LabError("token ids must be integers, got dtype {ids_dtype}", ids_dtype=ids.dtype)
    return ids.long()


def as_rows(token_ids) -> list[torch.Tensor]:
    """make_batch's input, a (B, T) LongTensor or a list of 1-D LongTensors, as a list of non-empty rows."""
    if isinstance(token_ids, torch.Tensor):
        if token_ids.dim() != 2:
            raise LabError("make_batch needs a (B, T) tensor or a list of 1-D tensors, got shape "
                           "{token_ids_shape}", token_ids_shape=tuple(token_ids.shape))
        rows = list(token_ids)
    else:
        rows = list(token_ids)
    if not rows:
        raise LabError("the batch is empty: give at least one row of token ids")
    out = []
    for b, row in enumerate(rows):
        try:
            out.append(as_ids(row))
        except ValueError as err:
            raise LabError("row {b}: {err}", b=b, err=err) from None
    return out


def validate_masked(n: int, masked, name: str = "masked") -> torch.Tensor:
    """Check user-given positions for an n-token input; return them sorted as a LongTensor.

    >>> validate_masked(5, [3, 1]).tolist()
    [1, 3]
    """
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    if isinstance(masked, torch.Tensor):
        if masked.dtype == torch.bool or masked.is_floating_point() or masked.dim() > 1:
            raise LabError("{name} must be a list of integer token positions, got a {masked_dtype} tensor of "
                           "shape {masked_shape}",
                           name=name, masked_dtype=masked.dtype, masked_shape=tuple(masked.shape))
        values = masked.reshape(-1).tolist()
    elif isinstance(masked, (list, tuple)):
        values = list(masked)
    else:
        raise LabError("{name} must be a list of token positions (integers 0..{last_index}), got "
                       "{masked_type}", name=name, last_index=n - 1, masked_type=type(masked).__name__)
    if not values:
        raise LabError("{name} is empty: name at least one position to corrupt (0..{last_index})",
                       name=name, last_index=n - 1)
    not_ints = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if not_ints:
        raise LabError("{name} must hold integer positions, got {not_ints!r}", name=name, not_ints=not_ints)
    values = [int(v) for v in values]
    outside = [v for v in values if not 0 <= v < n]
    if outside:
        raise LabError("{name} positions {outside} are out of range for {n} tokens: use 0..{last_index}",
                       name=name, outside=outside, n=n, last_index=n - 1)
    if len(set(values)) != len(values):
        repeated = sorted({v for v in values if values.count(v) > 1})
        raise LabError("{name} positions {repeated} are given more than once: list each position once",
                       name=name, repeated=repeated)
    return torch.tensor(sorted(values), dtype=torch.long)


def reject_unknown(choices: dict, accepted: Sequence[str], family: str) -> None:
    unknown = sorted(set(choices) - set(accepted))
    if unknown:
        raise LabError("{family} does not take {unknown}; its choices are: {accepted}.",
                       family=family, unknown=', '.join(unknown), accepted=', '.join(accepted))


def sample_masked(n: int, rate: float, generator: torch.Generator) -> torch.Tensor:
    """BERT's pick: count_to_mask(n, rate) distinct positions, uniformly, sorted. (k,) long."""
    return sample_positions(torch.arange(n), count_to_mask(n, rate), generator)


def corrupt_tokens(token_ids: torch.Tensor, positions: torch.Tensor, rates: CorruptionRates, vocab: VocabInfo,
                   generator: torch.Generator) -> torch.Tensor:
    """80/10/10 (or `rates`) decided independently per picked position; a corrupted copy of `token_ids`.

    The same rule as `common.corrupt` with one group per position, drawn in one vectorised call.
    """
    out = token_ids.clone()  # (T,)
    fate = torch.rand(positions.numel(), generator=generator)  # (k,)
    to_mask = fate < rates.mask  # (k,)
    to_random = ~to_mask & (fate < rates.mask + rates.random)  # (k,)
    out[positions[to_mask]] = vocab.mask_id
    n_random = int(to_random.sum())
    if n_random:
        picks = torch.randint(len(vocab.random_ids), (n_random,), generator=generator).tolist()
        out[positions[to_random]] = torch.tensor([vocab.random_ids[i] for i in picks], dtype=out.dtype)
    return out


def mlm_targets(token_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The original tokens at `positions`, IGNORE_INDEX elsewhere. (T,) long."""
    targets = torch.full(token_ids.shape, IGNORE_INDEX, dtype=torch.long)  # (T,)
    targets[positions] = token_ids[positions]
    return targets


def content_generator(token_ids: torch.Tensor, copy: int, purpose: str) -> torch.Generator:
    """A generator seeded by a hash of the token ids, the copy index and a purpose tag: static masking."""
    digest = hashlib.blake2b(token_ids.detach().cpu().to(torch.int64).contiguous().numpy().tobytes(), digest_size=8)
    digest.update(f"|copy={int(copy)}|{purpose}".encode())
    return torch.Generator().manual_seed(int.from_bytes(digest.digest(), "little") & (2**63 - 1))


def sample_split(starts_word: torch.Tensor, generator: torch.Generator) -> int | None:
    """Where segment B begins: a word start in the middle half [ceil(n/4), floor(3n/4)]; None if n < 2.

    Falls back to any word start in [1, n-1], then to any position of the middle half (a row that is one word).
    """
    n = starts_word.numel()
    if n < 2:
        return None
    lo, hi = max(1, math.ceil(n / 4)), min(n - 1, (3 * n) // 4)
    candidates = torch.nonzero(starts_word[lo:hi + 1]).flatten() + lo
    if candidates.numel() == 0:
        candidates = torch.nonzero(starts_word[1:]).flatten() + 1
    if candidates.numel() == 0:
        candidates = torch.arange(lo, hi + 1)
    return int(candidates[torch.randint(candidates.numel(), (1,), generator=generator)])


def validate_split(n: int, split) -> int | None:
    if split is None:
        return None
    if isinstance(split, bool) or not isinstance(split, numbers.Integral) or not 1 <= split <= n - 1:
        raise LabError("split must be an integer in 1..{last_index} for {n} tokens, got {split!r}",
                       last_index=n - 1, n=n, split=split)
    return int(split)


def draw_random_segment(rows: Sequence[torch.Tensor], i: int, length: int,
                        generator: torch.Generator) -> torch.Tensor | None:
    """`length` consecutive tokens from a random other row of the batch (NSP's NotNext B); None if there is none."""
    others = [j for j, row in enumerate(rows) if j != i and row.numel() >= length]
    if not others:
        return None
    j = others[int(torch.randint(len(others), (1,), generator=generator))]
    offset = int(torch.randint(rows[j].numel() - length + 1, (1,), generator=generator))
    return rows[j][offset:offset + length]


def draw_pair(rows: Sequence[torch.Tensor], i: int, split: int, random_rate: float, coin_generator: torch.Generator,
              generator: torch.Generator) -> tuple[torch.Tensor, int]:
    """NSP for row i cut at `split`: keep B = row[split:] (IsNext), or with probability `random_rate` replace it by an
    equally long run of another row (NotNext). The coin comes from `coin_generator`, the other row from `generator`.
    Returns (the input ids, nsp_label)."""
    row = rows[i]
    if torch.rand((), generator=coin_generator).item() < random_rate:
        segment_b = draw_random_segment(rows, i, row.numel() - split, generator)
        if segment_b is not None:
            return torch.cat([row[:split], segment_b]), NOT_NEXT  # (T,)
    return row, IS_NEXT


# ----------------------------------------------------------------------------------------------------------------------
# BERT itself.


@dataclass(frozen=True)
class Settings:
    """BERT's objective settings; the defaults are the paper's (and its released code's)."""

    mask_rate: float = 0.15  # fraction of tokens picked for prediction
    mask_token_rate: float = 0.8  # a picked token becomes [MASK] ...
    random_token_rate: float = 0.1  # ... or a random token; the remaining 10% stay unchanged
    nsp: bool = True  # next sentence prediction: two segments, B replaced by a random one half the time
    nsp_random_rate: float = 0.5  # P(NotNext)
    static_masking: bool = True  # the original code masks once, offline; RoBERTa's "dynamic masking" turns this off
    dupe_factor: int = 10  # how many fixed maskings each sequence has under static masking

    def __post_init__(self):
        check_masking(self)
        check_fraction("nsp_random_rate", self.nsp_random_rate)
        check_positive_int("dupe_factor", self.dupe_factor)

    @property
    def rates(self) -> CorruptionRates:
        return CorruptionRates(mask=self.mask_token_rate, random=self.random_token_rate)


def _training_choices(rows: Sequence[torch.Tensor], i: int, generator: torch.Generator,
                      cfg: BatchConfig) -> tuple[torch.Tensor, dict]:
    """Row i's training-time decisions: the copy index, the NSP pair, then the positions to mask on the result.

    Returns the model's input sequence (A + B, or A + a random segment) and the choices for `build_example`.
    """
    settings: Settings = cfg.settings
    row = rows[i]
    choices: dict = {}
    copy = None
    if settings.static_masking:
        copy = int(torch.randint(settings.dupe_factor, (1,), generator=generator))
        choices["copy"] = copy
    ids = row
    if settings.nsp:
        pair_generator = content_generator(row, copy, "pair") if copy is not None else generator
        split = sample_split(cfg.vocab.starts_word(row), pair_generator)
        choices["split"] = split
        if split is not None:
            ids, choices["nsp_label"] = draw_pair(rows, i, split, settings.nsp_random_rate, pair_generator, generator)
    mask_generator = content_generator(ids, copy, "mask") if copy is not None else generator
    choices["masked"] = sample_masked(ids.numel(), settings.mask_rate, mask_generator)
    return ids, choices


def sample_choices(token_ids: torch.Tensor, generator: torch.Generator, cfg: BatchConfig) -> dict:
    """As in training, for one sequence alone: `masked` (plus `split`, `nsp_label` and, static, `copy`)."""
    ids = as_ids(token_ids)
    return _training_choices([ids], 0, generator, cfg)[1]


def validate_choices(n: int, choices: dict) -> dict:
    if n <= 0:
        raise LabError("the input is empty: give at least one token")
    reject_unknown(choices, CHOICES, "bert")
    return {"masked": validate_masked(n, choices["masked"])} if "masked" in choices else {}


def build_example(token_ids: torch.Tensor, choices: dict, generator: torch.Generator, cfg: BatchConfig) -> Example:
    """Corrupt `choices["masked"]` 80/10/10 and mark the segments. Missing choices are drawn as in training."""
    settings: Settings = cfg.settings
    ids = as_ids(token_ids)
    n = ids.numel()
    if "masked" not in choices or (settings.nsp and "split" not in choices):
        choices = {**sample_choices(ids, generator, cfg), **choices}
    masked = validate_masked(n, choices["masked"])  # (k,)
    copy = choices.get("copy") if settings.static_masking else None
    fate_generator = content_generator(ids, copy, "fate") if copy is not None else generator
    segment_ids = torch.zeros(n, dtype=torch.long)  # (T,)
    extras = {}
    if settings.nsp:
        split = validate_split(n, choices.get("split"))
        if split is not None:
            segment_ids[split:] = 1
        label = int(choices.get("nsp_label", IS_NEXT)) if split is not None else IGNORE_INDEX
        extras["nsp_label"] = torch.tensor(label)  # () long
    return Example(
        input_ids=corrupt_tokens(ids, masked, settings.rates, cfg.vocab, fate_generator),  # (T,)
        attention={"self": masks.materialize(masks.bidirectional, n)},  # (T, T)
        position_ids=torch.arange(n),  # (T,)
        targets=mlm_targets(ids, masked),  # (T,)
        segment_ids=segment_ids,
        extras=extras,
    )


def make_batch(token_ids, generator: torch.Generator, cfg: BatchConfig) -> Batch:
    """NSP pairs (NotNext B drawn from other rows), masked positions, then 80/10/10, per row; padded to a Batch."""
    rows = as_rows(token_ids)
    examples = []
    for i in range(len(rows)):
        ids, choices = _training_choices(rows, i, generator, cfg)
        examples.append(build_example(ids, choices, generator, cfg))
    return collate(examples, pad_id=cfg.vocab.pad_id)


def loss(model, batch: Batch) -> LossOutput:
    """mlm: cross-entropy at the picked positions only (sparse vocabulary head); nsp: BERT's pooler + 2-way
    classifier on the first position against extras["nsp_label"] (0 = IsNext, 1 = NotNext; IGNORE rows skipped)."""
    return mlm_with_sentence_objective(model, batch, "mlm", sentence=("nsp", "nsp_label"))
