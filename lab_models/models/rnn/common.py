"""What the four RNN-era families share: the model base class, the language-model batch, stream windows, padding,
and the context a family's batch source is built from.

The RNN families plug into the same machinery as the Transformer families (lab_models/training/engine.py, train.py, the
run folders): a model with `loss(batch) -> LossOutput`, a batch source with `train_batch(generator)` and
`validation_batches(generators)`. Their batches are the lab's `Batch` with an empty attention dict (an LSTM needs no
mask: the forward direction reads left to right, the backward one right to left, by construction). What they add:

- `train_batch_at(step, generator)` on a batch source: the batch of step `step` (ULMFiT's stages and CVT's
  alternation between labelled and unlabelled minibatches depend on the step). The engine calls it when it exists.
- `optimizer_groups(weight_decay)` and `begin_step(step, config) -> StepPlan` on a model: its own AdamW parameter
  groups and their learning rates at each step (ULMFiT's discriminative and slanted triangular rates, gradual
  unfreezing); `StepPlan.record` adds fields (the stage, the rate of every group) to the step's metrics row.

The language-model batch (ELMo, ULMFiT), worked example for the row "a b c d":

    input_ids          a  b  c  d
    targets            b  c  d  -      (the forward LM at t predicts token t+1)
    backward_targets   -  a  b  c      (the backward LM at t predicts token t-1; extras["backward_targets"])
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.text.vocab import VocabInfo
from lab_models.objectives.losses import LossOutput
from lab_models.text.streams import TokenStream, encode_stream


@dataclass(frozen=True)
class StepPlan:
    """What a model with its own plan (`begin_step`) says about one step: the learning rate of each optimizer group
    (in `optimizer_groups` order; 0 = frozen this step) and extra JSON-able fields for the step's metrics row."""

    lrs: tuple[float, ...]
    record: dict = field(default_factory=dict)

BACKWARD_TARGETS = "backward_targets"


@dataclass(frozen=True)
class DataContext:
    """Everything a family's `batch_source(context)` may need (built by lab_models/training/run.py)."""

    tokenizer: object  # the run's prepared tokenizers.Tokenizer
    vocab: VocabInfo
    settings: object  # the family's Settings
    train_stream: object  # (N,) the corpus's training split, encoded (documents joined by [EOS]): a tensor, or the
    # memory map of its token shards (text/token_shards.py); StreamWindows reads either
    validation_stream: object  # (M,) its validation split, the same way
    seq_len: int
    batch_size: int
    eval_batches: int
    steps: int  # the run's total steps (ULMFiT's stages are fractions of it)
    max_positions: int
    pairs_language: str = "synthetic"  # whose sentence pairs a translating family reads (translation.pairs_language)


class RNNFamilyModel(nn.Module):
    """The interface a `FamilyModel` offers, for the LSTM families: family, model_config (an RNNConfig), settings,
    vocab, objective_weights (every objective, 0 = off), `model(batch)` / `model.loss(batch)` -> LossOutput."""

    kind = "rnn"
    is_language_model = False  # True: validation rows report perplexity (ELMo, ULMFiT)

    def __init__(self, family: str, model_config, settings, vocab: VocabInfo, objective_weights: dict[str, float]):
        super().__init__()
        self.family = family
        self.model_config = model_config
        self.settings = settings
        self.vocab = vocab
        self.objective_weights = dict(objective_weights)
        self.addons = None  # add-on objectives attached by a training run (objectives/addons.py; CoVe's BT)

    def forward(self, batch: Batch) -> LossOutput:
        if not isinstance(batch, Batch):
            raise LabError("a {family} model takes a Batch (from its batch source), got {batch_type}",
                           family=self.family, batch_type=type(batch).__name__)
        out = self.compute_loss(batch)
        return out if self.addons is None else self.addons.apply(self, batch, out)

    def loss(self, batch: Batch) -> LossOutput:
        return self(batch)

    def compute_loss(self, batch: Batch) -> LossOutput:  # pragma: no cover - every family defines it
        raise NotImplementedError

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def weight(self, objective: str) -> float:
        return float(self.objective_weights.get(objective, 0.0))


def init_lstm_family(module: nn.Module) -> None:
    """Uniform(-0.1, 0.1) for embeddings and linear maps (AWD-LSTM's and OpenNMT's init); LSTMs keep PyTorch's
    uniform(-1/sqrt(H), 1/sqrt(H)); biases 0."""
    for sub in module.modules():
        if isinstance(sub, nn.Embedding):
            nn.init.uniform_(sub.weight, -0.1, 0.1)
        elif isinstance(sub, nn.Linear):
            nn.init.uniform_(sub.weight, -0.1, 0.1)
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)


# ------------------------------------------------------------------------------------------------ batches


def lm_batch(rows, vocab: VocabInfo) -> Batch:
    """Rows of token ids -> the language-model batch (module docstring): forward and backward targets.

    >>> from lab_models.objectives.common import StringVocab
    >>> b = lm_batch(torch.tensor([[16, 17, 18, 19]]), StringVocab(["a", "b", "c", "d"]).info)
    >>> b.targets.tolist(), b.extras["backward_targets"].tolist()
    ([[17, 18, 19, -100]], [[-100, 16, 17, 18]])
    """
    ids = rows if isinstance(rows, torch.Tensor) else pad_rows(list(rows), vocab.pad_id)
    ids = ids.long()  # (B, T)
    targets = torch.full_like(ids, IGNORE_INDEX)
    targets[:, :-1] = ids[:, 1:]
    backward = torch.full_like(ids, IGNORE_INDEX)
    backward[:, 1:] = ids[:, :-1]
    padding = ids == vocab.pad_id
    targets[padding] = IGNORE_INDEX  # no loss from or onto padding (validation rows can be shorter)
    backward[padding] = IGNORE_INDEX
    targets[:, :-1][padding[:, 1:]] = IGNORE_INDEX
    return Batch(input_ids=ids, attention={}, position_ids=torch.arange(ids.shape[1]).expand_as(ids).clone(),
                 targets=targets, extras={BACKWARD_TARGETS: backward})


def pad_rows(rows: list, pad_id: int) -> torch.Tensor:
    """1-D long tensors (or lists) right-padded with `pad_id` to one (B, L) tensor, L >= 1.

    >>> pad_rows([[5, 6, 7], [8]], 0).tolist()
    [[5, 6, 7], [8, 0, 0]]
    """
    rows = [torch.as_tensor(r, dtype=torch.long).reshape(-1) for r in rows]
    out = pad_sequence(rows, batch_first=True, padding_value=pad_id)  # (B, L)
    return out if out.shape[1] else torch.full((len(rows), 1), pad_id, dtype=torch.long)


class StreamWindows:
    """Training rows: `batch_size` windows of `seq_len` tokens at random offsets of a stream (as data.PackedBatches);
    validation rows: the stream cut into consecutive rows, the first `limit` of them."""

    def __init__(self, stream, seq_len: int, what: Message):
        stream = TokenStream(stream)  # a tensor, or a corpus's memory-mapped token shards
        if stream.numel() < 2:
            raise LabError("{what} has fewer than 2 tokens: nothing to train a language model on", what=what)
        self.stream = stream
        self.seq_len = min(seq_len, stream.numel())

    def sample(self, generator: torch.Generator, batch_size: int) -> torch.Tensor:
        high = self.stream.numel() - self.seq_len + 1
        starts = torch.randint(high, (batch_size,), generator=generator)  # (B,)
        return self.stream.windows(starts, self.seq_len)  # (B, T)

    def fixed(self, limit: int) -> list[torch.Tensor]:
        n = max(1, min(limit, self.stream.numel() // self.seq_len))
        return list(self.stream.head(n * self.seq_len).view(n, self.seq_len))


def encode_texts(tokenizer, texts, eos_id: int) -> torch.Tensor:
    """Texts joined into one stream, each followed by [EOS] (data.encode_stream)."""

    return encode_stream(tokenizer, texts, eos_id)


def token_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(N, V) logits and (N,) targets -> (N,) negative log-likelihoods in nats (float32)."""
    return nn.functional.cross_entropy(logits.float(), targets, reduction="none")


def mean_or_zero(values: torch.Tensor) -> torch.Tensor:
    """values.mean(), or a graph-connected 0 when empty (objectives/losses.masked_mean)."""
    return values.sum() / max(values.numel(), 1)


def build_loss(total: torch.Tensor, parts: dict[str, torch.Tensor], target_ids: torch.Tensor,
               target_nll: torch.Tensor) -> LossOutput:
    return LossOutput(total=total, parts={k: v.detach() for k, v in parts.items()}, target_ids=target_ids,
                      target_nll=target_nll.detach())


def weighted_total(weights: dict[str, float], parts: dict[str, torch.Tensor]) -> torch.Tensor:
    if not parts:
        raise LabError("no objective was computed: give at least one objective a positive weight")
    return sum(float(weights[name]) * part for name, part in parts.items())
