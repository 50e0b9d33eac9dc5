"""A vocabulary of numbered ids with every special id set, for the tests whose models need no tokenizer (the
performance and precision tests)."""
from __future__ import annotations

from lab_models.text.vocab import VocabInfo


def vocab(size: int = 300) -> VocabInfo:
    return VocabInfo(size=size, pad_id=0, mask_id=1, cls_id=2, sep_id=3, bos_id=4, eos_id=5, start_id=6, end_id=7,
                     sentinel_ids=tuple(range(8, 40)), random_ids=tuple(range(40, size)))
