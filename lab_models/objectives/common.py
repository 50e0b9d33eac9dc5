"""Pieces every objective shares: the batch config, the 80/10/10 corruption, mask-count rounding, and the string
vocabulary that lets `api.anatomy` run the real batch builders on plain token strings. (The vocabulary facts a
builder reads, `VocabInfo` and the lab's special tokens, are lab_models/text/vocab.py's.)

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

from dataclasses import dataclass
from typing import Sequence

import torch

from lab_models.messages import LabError
from lab_models.text.vocab import BOS, CLS, EOS, GLM_END, GLM_START, MASK, PAD, SEP, SPECIAL_TOKENS, VocabInfo, sentinel

@dataclass(frozen=True)
class BatchConfig:
    """`make_batch`'s `cfg`: a family's objective settings (paper defaults) plus the vocabulary facts."""

    settings: object
    vocab: VocabInfo




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
            raise LabError("corruption rates must be in [0, 1] and sum to at most 1, got mask={mask}, "
                           "random={random}", mask=self.mask, random=self.random)

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
