"""Pieces every objective shares: vocabulary facts, the 80/10/10 corruption, mask-count rounding, and the string
vocabulary that lets `api.anatomy` run the real batch builders on plain token strings.

Worked example (BERT-style corruption of 2 picked positions with a seeded generator):

>>> vocab = StringVocab(["the", "cat", "sat", "down"])   # 8 specials + 8 sentinels come first
>>> vocab.encode(["the", "cat", "sat", "down"]).tolist()
[16, 17, 18, 19]
>>> count_to_mask(10, 0.15), count_to_mask(30, 0.15), count_to_mask(3, 0.15)   # round half to even, at least 1
(2, 4, 1)

Papers: Devlin et al. 2019 (80/10/10; the count is `max(1, round(n * rate))` with Python's round-half-to-even, as in
BERT's `create_pretraining_data.py`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import torch

# The special tokens an objective may insert. Tokenizers for training map these names to their own ids.
PAD, MASK, CLS, SEP, BOS, EOS, GLM_START, GLM_END = "[PAD]", "[MASK]", "[CLS]", "[SEP]", "[BOS]", "[EOS]", "[S]", "[E]"
NUM_SENTINELS = 100  # T5 reserves 100 sentinels <extra_id_0> ... <extra_id_99>


def sentinel(k: int) -> str:
    """T5's k-th sentinel token string: sentinel(0) == '<extra_id_0>'."""
    return f"<extra_id_{k}>"


@dataclass(frozen=True)
class VocabInfo:
    """The vocabulary facts a batch builder needs. Ids of the special tokens; `word_start[i]` says whether token id i
    begins a word (SpanBERT masks whole words); `random_ids` are the ids a 10%-random replacement may draw."""

    size: int
    pad_id: int
    mask_id: int
    cls_id: int
    sep_id: int
    bos_id: int
    eos_id: int
    start_id: int  # GLM's [S]
    end_id: int  # GLM's [E]
    sentinel_ids: tuple[int, ...]  # T5's <extra_id_k>, k = 0, 1, ...
    random_ids: tuple[int, ...]  # ordinary (non-special) ids, for random replacement
    word_start: tuple[bool, ...] | None = None  # per id; None = every token starts a word

    def __post_init__(self):
        if self.size <= 0:
            raise ValueError(f"vocabulary size must be positive, got {self.size}")
        if not self.random_ids:
            raise ValueError("the vocabulary has no ordinary tokens to draw random replacements from")

    @functools.cached_property
    def _word_start_table(self) -> torch.Tensor:
        """`word_start` as a (size,) bool tensor, built once: converting the tuple costs milliseconds per call."""
        return torch.tensor(self.word_start, dtype=torch.bool)

    def starts_word(self, token_ids: torch.Tensor) -> torch.Tensor:
        """(T,) bool: which tokens begin a word. The first token always does."""
        if self.word_start is None:
            starts = torch.ones(token_ids.shape, dtype=torch.bool)
        else:
            starts = self._word_start_table[token_ids]  # a fresh tensor: advanced indexing copies
        if starts.numel():
            starts[0] = True
        return starts


@dataclass(frozen=True)
class BatchConfig:
    """`make_batch`'s `cfg`: a family's objective settings (paper defaults) plus the vocabulary facts."""

    settings: object
    vocab: VocabInfo


SPECIAL_TOKENS = (PAD, MASK, CLS, SEP, BOS, EOS, GLM_START, GLM_END)


def _looks_like_continuation(token: str, marked_starts: bool) -> bool:
    if token.startswith("##"):
        return True
    if marked_starts:  # byte-level BPE (Ġ) and SentencePiece (▁) mark the *start* of a word instead
        return not (token.startswith("Ġ") or token.startswith("▁"))
    return False


class StringVocab:
    """A throw-away vocabulary over the tokens the user typed plus the lab's special tokens, so that the real batch
    builders can run on strings. Ids: specials first (in SPECIAL_TOKENS order), then sentinels, then the distinct
    input tokens in first-seen order."""

    def __init__(self, tokens: Sequence[str], num_sentinels: int = 8):
        self.id_to_token: list[str] = list(SPECIAL_TOKENS) + [sentinel(k) for k in range(num_sentinels)]
        self.token_to_id: dict[str, int] = {t: i for i, t in enumerate(self.id_to_token)}
        first_ordinary = len(self.id_to_token)
        for token in tokens:
            if token not in self.token_to_id:
                self.token_to_id[token] = len(self.id_to_token)
                self.id_to_token.append(token)
        ordinary = tuple(range(first_ordinary, len(self.id_to_token)))
        marked = any(t.startswith(("Ġ", "▁")) for t in tokens)
        word_start = tuple(not _looks_like_continuation(t, marked) if i >= first_ordinary else True
                           for i, t in enumerate(self.id_to_token))
        ids = self.token_to_id
        self.info = VocabInfo(
            size=len(self.id_to_token), pad_id=ids[PAD], mask_id=ids[MASK], cls_id=ids[CLS], sep_id=ids[SEP],
            bos_id=ids[BOS], eos_id=ids[EOS], start_id=ids[GLM_START], end_id=ids[GLM_END],
            sentinel_ids=tuple(ids[sentinel(k)] for k in range(num_sentinels)),
            random_ids=ordinary or (ids[MASK],), word_start=word_start,
        )

    def encode(self, tokens: Sequence[str]) -> torch.Tensor:
        return torch.tensor([self.token_to_id[t] for t in tokens], dtype=torch.long)

    def decode(self, token_id: int) -> str:
        return self.id_to_token[int(token_id)]


def count_to_mask(n: int, rate: float) -> int:
    """How many of n tokens to corrupt: round(n * rate), half to even, at least 1 (BERT's rule). 0 for n == 0."""
    if n <= 0:
        return 0
    return min(n, max(1, round(n * rate)))


def sample_positions(candidates: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """`count` distinct entries of `candidates`, uniformly without replacement, sorted ascending."""
    perm = torch.randperm(candidates.numel(), generator=generator)[:count]
    return candidates[perm].sort().values


@dataclass(frozen=True)
class CorruptionRates:
    """What a picked token becomes: [MASK] with prob `mask`, a random token with prob `random`, else unchanged."""

    mask: float = 0.8
    random: float = 0.1

    def __post_init__(self):
        if not (0.0 <= self.mask <= 1.0 and 0.0 <= self.random <= 1.0 and self.mask + self.random <= 1.0 + 1e-9):
            raise ValueError(f"corruption rates must be in [0, 1] and sum to at most 1, got mask={self.mask}, "
                             f"random={self.random}")

    @property
    def keep(self) -> float:
        return max(0.0, 1.0 - self.mask - self.random)


def corrupt(token_ids: torch.Tensor, groups: Sequence[torch.Tensor], rates: CorruptionRates, vocab: VocabInfo,
            generator: torch.Generator) -> torch.Tensor:
    """Apply 80/10/10 (or `rates`) once per group of positions: every position of a group gets the same fate
    (BERT: groups are single tokens; SpanBERT: groups are whole spans). Returns a corrupted copy.

    Random replacements are drawn per position from `vocab.random_ids`.
    """
    out = token_ids.clone()
    pool = vocab.random_ids  # indexed in Python: building a tensor of a 30k vocabulary per call costs milliseconds
    for group in groups:
        if group.numel() == 0:
            continue
        fate = torch.rand((), generator=generator).item()
        if fate < rates.mask:
            out[group] = vocab.mask_id
        elif fate < rates.mask + rates.random:
            picks = torch.randint(len(pool), (group.numel(),), generator=generator)
            out[group] = torch.tensor([pool[i] for i in picks.tolist()], dtype=out.dtype)
    return out
