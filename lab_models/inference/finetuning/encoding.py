"""Fine-tuning's input framing and batching (BERT §3 / GPT §3.3), for lab_models/inference/finetuning/run.py.

2. Frame each example as the run frames a text downstream (`run.framing.downstream`, lab_models/text/framing.py) and
   add a head on the backbone's hidden states. The lab's runs:
   - sentence tasks:  [CLS] a [SEP]            pairs: [CLS] a [SEP] b [SEP]  (segment 0, then 1; BERT §3)
   - causal families: [BOS] a [EOS]            pairs: [BOS] a [SEP] b [EOS]  (GPT §3.3: start, delimiter, extract)
   - the RNN-era families read the unframed text; a pair is a [EOS] b ([EOS] the document separator they read).
   An imported checkpoint (or a run started from one) is framed as its own tokenizer frames a text: `[CLS] a [SEP]`
   with BERT's segments, RoBERTa's `<s> a </s></s> b </s>`, XLNet's `a <sep> b <sep> <cls>` (segments 0, 1, 2),
   GPT-2's bare text, as `tokenizer(a, b)` in transformers gives them.

- Truncation: texts are cut to `max_len` tokens with their framing, pairs longest-first (BERT's
  `_truncate_seq_pair`). `max_len` defaults to the run's pretraining row length (its positions beyond it were
  never trained), at most its `max_positions`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from lab_models.batch import IGNORE_INDEX
from lab_models.text.framing import Template
from lab_models.text.tasks import Task, encode_words

import torch


# ------------------------------------------------------------------------------------------------ encoding
@dataclass
class EncodedExample:
    """One framed example: token ids, segment ids, and its label (a class) or labels (one per token, token tasks)."""

    ids: list[int]
    segments: list[int]
    label: int | list[int]
    text_ids: list[int]  # the task's text without framing (for a non-causal family's auxiliary loss)


def _truncate_pair(a: list, b: list, budget: int) -> tuple[list, list]:
    """BERT's `_truncate_seq_pair`: drop the last token of the longer side until both fit in `budget`."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) >= len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def encode_examples(task: Task, examples, tokenizer, vocab, framing: Template, max_len: int) -> list[EncodedExample]:
    """The examples encoded (without the tokenizer's own post-processing) and framed by `framing` (the run's
    downstream template), each cut to `max_len` tokens with its framing. A text that gives no tokens and no framing
    reads [EOS]."""
    out = []
    room = max(1, max_len - framing.added())
    if task.kind == "token":
        for example in examples:
            ids, labels = encode_words(tokenizer, example.words, example.label)
            ids, labels = ids[:room], labels[:room]
            framed = framing.frame(ids)
            tags = [IGNORE_INDEX] * len(framed.ids)
            tags[framed.start:framed.start + len(labels)] = labels
            out.append(EncodedExample(framed.ids, framed.segments, tags, ids))
        return out
    encoded_a = [e.ids for e in tokenizer.encode_batch([example.text for example in examples],
                                                       add_special_tokens=False)]
    if task.kind == "pair":
        encoded_b = [e.ids for e in tokenizer.encode_batch([example.text_pair for example in examples],
                                                           add_special_tokens=False)]
        for example, a, b in zip(examples, encoded_a, encoded_b):
            a, b = _truncate_pair(a, b, max_len - framing.added(pair=True))
            framed = framing.frame(a, b)
            out.append(EncodedExample(framed.ids, framed.segments, example.label, [*a, vocab.eos_id, *b]))
        return out
    for example, a in zip(examples, encoded_a):
        a = a[:room]
        framed = framing.frame(a)
        if not framed.ids:  # an empty text of a family that reads it unframed
            framed = framing.frame([vocab.eos_id])
        out.append(EncodedExample(framed.ids, framed.segments, example.label, a))
    return out


@dataclass
class FinetuneBatch:
    input_ids: torch.Tensor  # (B, T) long, padded with [PAD]
    is_real: torch.Tensor  # (B, T) bool
    attention: torch.Tensor  # (B, T, T) bool, True = may attend
    position_ids: torch.Tensor  # (B, T), or (B, 2, T) for GLM
    segment_ids: torch.Tensor  # (B, T)
    labels: torch.Tensor  # (B,) or (B, T) long
    lm_targets: torch.Tensor  # (B, T): the next token at each real position (causal families' auxiliary loss)
    text_ids: list[torch.Tensor]  # the unframed texts (non-causal auxiliary loss)

    def to(self, device) -> "FinetuneBatch":
        return FinetuneBatch(*(getattr(self, f.name).to(device) if isinstance(getattr(self, f.name), torch.Tensor)
                        else getattr(self, f.name) for f in dataclasses.fields(self)))


def collate_examples(items: list[EncodedExample], pad_id: int, causal: bool, two_d_positions: bool,
                     token_task: bool) -> FinetuneBatch:
    B, T = len(items), max(len(item.ids) for item in items)
    input_ids = torch.full((B, T), pad_id, dtype=torch.long)
    segment_ids = torch.zeros((B, T), dtype=torch.long)
    labels = torch.full((B, T), IGNORE_INDEX, dtype=torch.long) if token_task else torch.zeros(B, dtype=torch.long)
    lengths = torch.tensor([len(item.ids) for item in items])
    for b, item in enumerate(items):
        n = len(item.ids)
        input_ids[b, :n] = torch.tensor(item.ids)
        segment_ids[b, :n] = torch.tensor(item.segments)
        if token_task:
            labels[b, :n] = torch.tensor(item.label)
        else:
            labels[b] = item.label
    positions = torch.arange(T)
    is_real = positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)
    attention = is_real.unsqueeze(1).expand(B, T, T)  # (B, T, T): every real key
    if causal:
        attention = attention & torch.ones(T, T, dtype=torch.bool).tril()
    attention = attention | torch.eye(T, dtype=torch.bool)  # a padded row attends itself: no row is empty
    position_ids = positions.expand(B, T).clone()
    if two_d_positions:  # GLM: Part A tokens are at (i, 0)
        position_ids = torch.stack([position_ids, torch.zeros_like(position_ids)], dim=1)  # (B, 2, T)
    lm_targets = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
    lm_targets[:, :-1] = torch.where(is_real[:, 1:], input_ids[:, 1:], IGNORE_INDEX)
    return FinetuneBatch(input_ids, is_real, attention.contiguous(), position_ids, segment_ids, labels, lm_targets,
                  [torch.tensor(item.text_ids, dtype=torch.long) for item in items])
