"""The batches a run trains on: one packed token stream -> rows -> a family's batches.

    corpus.train --build_tokenizer (text/vocab_fit.py)--> tokenizer --prepare_tokenizer (text/vocab.py)--> VocabInfo
    documents --tokenize_to_shards (text/token_shards.py)--> d1 [EOS] d2 [EOS] d3 [EOS] ...  (one memory-mapped
                                                                                             stream per split)
    stream --B windows of seq_len tokens--> (B, T) rows --objective.make_batch(rows, generator, cfg)--> Batch

A stream is a `TokenStream` (text/streams.py): the memory map of a corpus's token shards in a run, or a tensor from
`encode_stream` (tests, benchmarks); both give the same rows for the same generator, so a run on the shards draws
exactly the batches the in-memory stream gave (tests/text/test_token_shards.py), and only the pages a window touches are
read from disk.

Packing follows RoBERTa's FULL-SENTENCES format (Liu et al. 2019, section 4.2): documents are concatenated into one
stream, inputs may cross document boundaries, and a separator ([EOS] here) marks each boundary, so no token is wasted
on padding. Deviations, stated:
- A training row is a window of `seq_len` tokens starting at a uniformly random offset of the stream (as nanoGPT
  does), not the next run of whole sentences: rows may begin and end mid-sentence. Random offsets give a small corpus
  many different rows; every draw comes from the step's generator, so the batch of step s is always the same.
- Rows carry no [CLS]/[SEP] framing; the objectives insert what they need (see the family modules).
- Validation rows are fixed: the validation stream cut into consecutive non-overlapping rows, the first
  `eval_batches * batch_size` of them, corrupted by generators with fixed seeds. A validation split shorter than one
  row becomes one shorter row; a corpus with no validation split (one document) is evaluated on its first training
  rows, and `PackedBatches.validation_note` says so.

Translation (MASS, T5; lab_models/objectives/translation.py): with a `TranslationPairs` given, every batch also holds
`batch_size` English -> Chinese pair rows from the synthetic corpus, drawn with the step's generator after the
denoising rows; `denoising=False` leaves the denoising rows out (translation only).
"""
from __future__ import annotations

import logging
from types import ModuleType

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import Batch
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.translation import mix
from lab_models.text.streams import TokenStream

logger = logging.getLogger(__name__)



class PackedBatches:
    """The batch source the engine draws from: random windows of the train stream for training, fixed rows of the
    validation stream for evaluation, each turned into a Batch by the family's `make_batch`.

    The engine hands in the generator (seeded from (seed, step, rank)), so this class holds no random state.
    """

    def __init__(self, train_stream, validation_stream, *, seq_len: int,
                 batch_size: int, objective: ModuleType, batch_config: BatchConfig, eval_batches: int = 4,
                 translation=None, denoising: bool = True):
        train_stream, validation_stream = TokenStream(train_stream), TokenStream(validation_stream)
        if seq_len < 2:
            raise LabError("seq_len must be at least 2, got {seq_len}", seq_len=seq_len)
        if batch_size < 1:
            raise LabError("batch_size must be at least 1, got {batch_size}", batch_size=batch_size)
        if train_stream.numel() < seq_len:
            raise LabError("the training split has only {n_tokens} tokens, fewer than one row of "
                           "seq_len={seq_len}; lower --seq-len or use a bigger corpus",
                           n_tokens=train_stream.numel(), seq_len=seq_len)
        self.train_stream = train_stream
        self.seq_len = seq_len
        self.batch_size = batch_size
        self.objective = objective
        self.batch_config = batch_config
        self.eval_batches = eval_batches
        # MASS / T5 translation (objectives/translation.py): a TranslationPairs adds batch_size pair rows to every
        # batch; with denoising=False the batches hold the pair rows only
        self.translation = translation
        self.denoising = denoising if translation is not None else True
        self.validation_note = ""
        if validation_stream.numel() < 2:
            self.validation_note = Message("the corpus has no validation split: evaluating on the first training rows")
            validation_stream = train_stream
        self.validation_rows = self._validation_rows(validation_stream, eval_batches * batch_size)

    def _validation_rows(self, stream: TokenStream, limit: int) -> list[torch.Tensor]:
        n_rows = min(limit, stream.numel() // self.seq_len)
        if n_rows == 0:
            return [stream.to_tensor()]
        return list(stream.head(n_rows * self.seq_len).view(n_rows, self.seq_len))

    @property
    def tokens_per_batch(self) -> int:
        return self.batch_size * self.seq_len

    def train_rows(self, generator: torch.Generator) -> torch.Tensor:
        """(B, T) long: `batch_size` windows of `seq_len` tokens at offsets drawn from `generator`."""
        high = self.train_stream.numel() - self.seq_len + 1
        starts = torch.randint(high, (self.batch_size,), generator=generator)  # (B,)
        return self.train_stream.windows(starts, self.seq_len)  # (B, T)

    def train_batch(self, generator: torch.Generator) -> Batch:
        """The batch of one training step; the same generator state always gives the same batch."""
        if self.translation is None:
            rows = self.train_rows(generator)
            return self.objective.make_batch(rows, generator, self.batch_config)
        examples = self._examples(self.train_rows(generator), generator) if self.denoising else []
        pairs = self.translation.sample(generator, self.batch_size)  # drawn after the denoising rows
        return self._mix(examples, pairs)

    def validation_batches(self, generators) -> list[Batch]:
        """The fixed validation batches: rows in order, `batch_size` at a time; `generators(i)` seeds batch i.
        With translation on, validation batch i also holds the fixed pairs i*B .. i*B+B-1 (translation.py)."""
        batches = []
        if self.translation is not None and not self.denoising:
            return [self._mix([], self.translation.validation(i, self.batch_size)) for i in range(self.eval_batches)]
        for i, start in enumerate(range(0, len(self.validation_rows), self.batch_size)):
            rows = self.validation_rows[start:start + self.batch_size]
            if self.translation is None:
                batches.append(self.objective.make_batch(rows, generators(i), self.batch_config))
            else:
                batches.append(self._mix(self._examples(rows, generators(i)),
                                         self.translation.validation(i, self.batch_size)))
        return batches

    def _examples(self, rows, generator: torch.Generator) -> list:
        """The family's examples of `rows`, drawn exactly as its `make_batch` draws them (objectives/__init__.py)."""
        module, cfg = self.objective, self.batch_config
        return [module.build_example(row, module.sample_choices(row, generator, cfg), generator, cfg) for row in rows]

    def _mix(self, examples: list, pairs: list) -> Batch:
        return mix(examples, pairs, pad_id=self.batch_config.vocab.pad_id)
