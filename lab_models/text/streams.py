"""Documents to one token stream, the way RoBERTa packs its FULL-SENTENCES inputs (Liu et al. 2019, §4.2): every
document's ids followed by [EOS], all concatenated, so that rows cut from the stream (training/batches.py) waste no
token on padding and a separator marks each document boundary.

    documents "a b", "c"  --encode_stream-->  [id(a), id(b), EOS, id(c), EOS]

No deviation from the paper's packing; the rows drawn from the stream are random windows (training/batches.py says
how and why).
"""
from __future__ import annotations

import torch
from tokenizers import Tokenizer


def encode_stream(tokenizer: Tokenizer, documents, eos_id: int) -> torch.Tensor:
    """One (N,) long stream: every document's ids followed by [EOS].

    Example: documents "a b" and "c" -> [id(a), id(b), EOS, id(c), EOS].
    """
    documents = list(documents)
    if not documents:
        return torch.empty(0, dtype=torch.long)
    encodings = tokenizer.encode_batch(documents, add_special_tokens=False)
    total = sum(len(encoding.ids) + 1 for encoding in encodings)
    stream = torch.empty(total, dtype=torch.long)
    at = 0
    for encoding in encodings:
        n = len(encoding.ids)
        stream[at:at + n] = torch.tensor(encoding.ids, dtype=torch.long)
        stream[at + n] = eos_id
        at += n + 1
    return stream
