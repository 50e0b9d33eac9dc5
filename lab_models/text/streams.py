"""Documents to one token stream, the way RoBERTa packs its FULL-SENTENCES inputs (Liu et al. 2019, §4.2): every
document's ids followed by [EOS], all concatenated, so that rows cut from the stream (training/batches.py) waste no
token on padding and a separator marks each document boundary.

    documents "a b", "c"  --encode_stream-->  [id(a), id(b), EOS, id(c), EOS]

A stream lives in memory (`encode_stream`, a torch tensor: small texts, the tests) or on disk (a corpus's token shards,
a read-only numpy memory map: lab_models/text/token_shards.py). `TokenStream` gives the batch builders the two reads
they make of either, with the same values: windows at given offsets, and the stream's first tokens.

No deviation from the paper's packing; the rows drawn from the stream are random windows (training/batches.py says
how and why).
"""
from __future__ import annotations

import numpy as np
import torch
from tokenizers import Tokenizer

from lab_models.messages import LabError

ENCODE_CHUNK_DOCUMENTS = 2048  # encode_batch this many documents at a time: their Encodings are freed in between


def encode_stream(tokenizer: Tokenizer, documents, eos_id: int) -> torch.Tensor:
    """One (N,) long stream: every document's ids followed by [EOS]. Documents are encoded a chunk at a time (an
    `Encoding` holds its tokens, offsets and masks: about 100 bytes a token), so only the ids are kept.

    Example: documents "a b" and "c" -> [id(a), id(b), EOS, id(c), EOS].
    """
    documents = list(documents)
    parts: list[torch.Tensor] = []
    for start in range(0, len(documents), ENCODE_CHUNK_DOCUMENTS):
        encodings = tokenizer.encode_batch(documents[start:start + ENCODE_CHUNK_DOCUMENTS], add_special_tokens=False)
        ids = [token for encoding in encodings for token in (*encoding.ids, eos_id)]
        parts.append(torch.tensor(ids, dtype=torch.long))
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)


class TokenStream:
    """A 1-D token stream, in memory (a torch tensor) or on disk (a numpy memory map), read the same way.

    >>> stream = TokenStream(np.arange(10, dtype=np.uint16))
    >>> stream.windows(torch.tensor([0, 5]), 3).tolist(), stream.head(4).tolist(), stream.numel()
    ([[0, 1, 2], [5, 6, 7]], [0, 1, 2, 3], 10)
    """

    def __init__(self, tokens):
        if isinstance(tokens, TokenStream):
            tokens = tokens.tokens
        if not isinstance(tokens, (torch.Tensor, np.ndarray)) or tokens.ndim != 1:
            raise LabError("a token stream is a 1-D tensor or numpy array, got {tokens_type}",
                           tokens_type=type(tokens).__name__)
        self.tokens = tokens

    def numel(self) -> int:
        return int(self.tokens.shape[0])

    def __len__(self) -> int:
        return self.numel()

    def windows(self, starts: torch.Tensor, length: int) -> torch.Tensor:
        """(B, T) long: the `length` tokens from each of the (B,) offsets `starts`."""
        if isinstance(self.tokens, torch.Tensor):
            return self.tokens[starts[:, None] + torch.arange(length)].long()  # (B, T)
        index = starts.numpy()[:, None] + np.arange(length)  # (B, T)
        return torch.from_numpy(self.tokens[index].astype(np.int64))  # (B, T); reads only these pages of a map

    def head(self, count: int) -> torch.Tensor:
        """(count,) long: the stream's first `count` tokens (a copy, whatever the storage)."""
        if isinstance(self.tokens, torch.Tensor):
            return self.tokens[:count].clone().long()
        return torch.from_numpy(np.asarray(self.tokens[:count]).astype(np.int64))

    def to_tensor(self) -> torch.Tensor:
        """The whole stream as a long tensor (for the small streams that are read whole: in memory already, or a
        view's few thousand tokens)."""
        return self.head(self.numel())
