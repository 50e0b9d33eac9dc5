"""CVT: Cross-View Training, a BiLSTM tagger taught on unlabelled text by its own predictions. Clark, Luong, Manning,
Le (2018). Semi-Supervised Sequence Modeling with Cross-View Training. EMNLP.

The model (§3, sequence tagging): token embeddings -> a first BiLSTM layer (forward states h1->, backward h1<-) -> a
second BiLSTM layer (h2) -> the primary prediction module p(y_i | x) = softmax(U ReLU(W [h2->_i; h2<-_i])) on the
full view. The auxiliary prediction modules (§3.1) see restricted views built from the first layer:

    forward   h1->_i        (x_1 .. x_i)        backward  h1<-_i        (x_i .. x_N)
    future    h1->_(i-1)    (x_1 .. x_(i-1))    past      h1<-_(i+1)    (x_(i+1) .. x_N)

each with its own two-layer module. Training alternates minibatches (§2):
- labelled (the built-in `tagging` task, lab_models/text/tasks.py, one tag per word on its first sub-word piece): the
  primary module's cross-entropy, objective `labelled`;
- unlabelled (windows of the run's corpus): the primary module on the full, clean view is the teacher (computed
  without dropout and without gradient); each auxiliary module on its noisy restricted view learns to match it:
  L_CVT = mean over positions of sum over modules of KL(p_primary || p_module), objective `unlabelled`.

Odd steps are labelled, even steps unlabelled (1:1). Both losses are logged as separate objectives; a step reports
the one it trained, validation reports both (the tagging task's validation sentences and the corpus's validation
rows), and its `loss` is their weighted sum. CVT predicts no tokens: its runs have no bits per byte.

Worked example of the views at position 2 of "the cat sat down" (i = 2, "sat"): forward has read "the cat sat",
backward "sat down", future "the cat", past "down". The future module predicts the tag of "sat" without seeing it.

Deviations, stated:
- Token embeddings instead of the paper's character CNN + GloVe word vectors; nn.LSTM layers (one fused call each).
- Unlabelled positions: only tokens that start a word are used (`word_starts_only`), as the labelled loss reads
  first pieces; the paper's tokens are words.
- The "future" view at the first position and the "past" view at the last read a zero state.
- The paper's labelled and unlabelled batch sizes and the 1:1 alternation are kept; the paper's learning-rate
  schedule (SGD with momentum, lr 0.5 / (1 + 0.005 sqrt(t))) is replaced by the lab's AdamW schedule.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.models.rnn.common import (DataContext, RNNFamilyModel, StreamWindows, build_loss, init_lstm_family,
                                          pad_rows)
from lab_models.models.rnn.layers import lengths_of, run_lstm
from lab_models.text.tasks import encode_words
from lab_models.text.tasks import load_task
from lab_models.text.tasks import TASKS

CHOICES: tuple[str, ...] = ()
RULE = Message("BiLSTM tagger: the primary module sees the whole sentence; auxiliary modules see one side of each word")
TAGS, UNLABELLED_IDS = "tags", "unlabelled_ids"
VIEWS = ("forward", "backward", "future", "past")


@dataclass(frozen=True)
class Settings:
    """CVT's toggles (each auxiliary view on or off)."""

    forward_view: bool = True  # auxiliary module on the forward states (x_1 .. x_i)
    backward_view: bool = True  # auxiliary module on the backward states (x_i .. x_N)
    future_view: bool = True  # auxiliary module on the forward states before i (x_1 .. x_(i-1)): never sees x_i
    past_view: bool = True  # auxiliary module on the backward states after i (x_(i+1) .. x_N): never sees x_i
    word_starts_only: bool = True  # the unlabelled loss is taken where a word starts (as tags sit on first pieces)
    module_hidden: int = 0  # hidden width of each prediction module (0 = the LSTM's hidden size)

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(v for v in VIEWS if getattr(self, f"{v}_view"))


# ------------------------------------------------------------------------------------------------ data


class AlternatingBatches:
    """Odd steps: `batch_size` labelled tagging sentences; even steps: `batch_size` corpus windows."""

    def __init__(self, context: DataContext):
        self.vocab, self.batch_size, self.eval_batches = context.vocab, context.batch_size, context.eval_batches
        self.max_len = context.max_positions
        task = load_task("tagging")
        self.n_tags = task.n_labels

        def encode(examples):
            out = []
            for e in examples:
                ids, tags = encode_words(context.tokenizer, e.words, e.label)
                if ids:
                    out.append((ids[: self.max_len], tags[: self.max_len]))
            return out

        self.labelled = encode(task.train)
        self.labelled_validation = encode(task.validation)
        self.unlabelled = StreamWindows(context.train_stream, context.seq_len, Message("the corpus's training split"))
        validation = context.validation_stream if context.validation_stream.numel() >= 2 else context.train_stream
        self.validation_note = "" if validation is context.validation_stream else \
            "the corpus has no validation split: evaluating on the first training rows"
        self.unlabelled_validation = StreamWindows(validation, context.seq_len, Message("the validation split"))

    def _labelled(self, examples) -> Batch:
        ids = pad_rows([x for x, _ in examples], self.vocab.pad_id)  # (B, L)
        tags = pad_rows([y for _, y in examples], IGNORE_INDEX)  # (B, L)
        return Batch(input_ids=ids, attention={}, position_ids=torch.arange(ids.shape[1]).expand_as(ids).clone(),
                     targets=torch.full_like(ids, IGNORE_INDEX), extras={TAGS: tags})

    def train_batch_at(self, step: int, generator: torch.Generator) -> Batch:
        if step % 2 == 1:
            picks = torch.randint(len(self.labelled), (self.batch_size,), generator=generator).tolist()
            return self._labelled([self.labelled[i] for i in picks])
        rows = self.unlabelled.sample(generator, self.batch_size)  # (B, T)
        return Batch(input_ids=rows, attention={}, position_ids=torch.arange(rows.shape[1]).expand_as(rows).clone(),
                     targets=torch.full_like(rows, IGNORE_INDEX), extras={UNLABELLED_IDS: rows})

    def train_batch(self, generator: torch.Generator) -> Batch:
        return self.train_batch_at(1, generator)

    def validation_batches(self, generators) -> list[Batch]:
        rows = self.unlabelled_validation.fixed(self.eval_batches * self.batch_size)
        n = len(self.labelled_validation)
        batches = []
        for i, start in enumerate(range(0, len(rows), self.batch_size)):
            batch = self._labelled([self.labelled_validation[(i * self.batch_size + k) % n]
                                    for k in range(self.batch_size)])
            batch.extras[UNLABELLED_IDS] = torch.stack(rows[start:start + self.batch_size])
            batches.append(batch)
        return batches


def batch_source(context: DataContext) -> AlternatingBatches:
    return AlternatingBatches(context)


# ------------------------------------------------------------------------------------------------ the model


def prediction_module(d_in: int, hidden: int, n_tags: int) -> nn.Sequential:
    """p(y | h) = softmax(U ReLU(W h)) (the paper's two-layer modules); returns logits."""
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, n_tags))


class CVT(RNNFamilyModel):
    def __init__(self, family, model_config, settings: Settings, vocab, objective_weights):
        super().__init__(family, model_config, settings, vocab, objective_weights)

        c = model_config
        E, H = c.embedding_size, c.hidden_size
        n_tags = len(TASKS["tagging"].label_names)
        hidden = settings.module_hidden or H
        if self.weight("unlabelled") > 0 and not settings.views:
            raise LabError("CVT's unlabelled objective needs at least one auxiliary view: turn one of "
                           "forward_view, backward_view, future_view, past_view on, or set unlabelled=0")
        self.embedding = nn.Embedding(c.vocab_size, E)
        self.first = nn.LSTM(E, H, batch_first=True, bidirectional=True)  # h1 -> and h1 <-
        self.second = nn.ModuleList(nn.LSTM(2 * H, H, batch_first=True, bidirectional=True)
                                    for _ in range(c.n_layers - 1))  # up to h2
        self.primary = prediction_module(2 * H, hidden, n_tags)
        # keyed "<view>_view": nn.Module already has an attribute "forward"
        self.auxiliary = nn.ModuleDict({f"{view}_view": prediction_module(H, hidden, n_tags) for view in settings.views})
        self.dropout_p = c.dropout
        init_lstm_family(self)
        if self.weight("unlabelled") == 0:
            self.auxiliary.requires_grad_(False)

    def _drop(self, x: torch.Tensor, noisy: bool) -> torch.Tensor:
        return F.dropout(x, self.dropout_p, self.training and noisy)

    def encode(self, input_ids: torch.Tensor, noisy: bool = True):
        """(first-layer states (B, T, 2H) = [h1->; h1<-], top states (B, T, 2H)). Rows are right-padded; the LSTMs
        are packed, so a backward direction starts at each row's last real token. `noisy` applies dropout."""
        lengths = lengths_of(input_ids, self.vocab.pad_id)  # (B,)
        x = self._drop(self.embedding(input_ids), noisy)  # (B, T, E)
        first, _ = run_lstm(self.first, x, lengths=lengths)  # (B, T, 2H)
        top = first
        for lstm in self.second:
            top, _ = run_lstm(lstm, self._drop(top, noisy), lengths=lengths)  # (B, T, 2H)
        return first, self._drop(top, noisy)

    def primary_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, n_tags): the primary module on the full view."""
        return self.primary(self.encode(input_ids)[1])

    def view_states(self, first: torch.Tensor) -> dict[str, torch.Tensor]:
        """The restricted views (B, T, H) of the first layer's states (module docstring)."""
        H = first.shape[-1] // 2
        forward, backward = first[..., :H], first[..., H:]  # (B, T, H) each
        zero = torch.zeros_like(forward[:, :1])  # (B, 1, H)
        views = {"forward": forward, "backward": backward,
                 "future": torch.cat([zero, forward[:, :-1]], dim=1),  # h1->_(i-1): has not read x_i
                 "past": torch.cat([backward[:, 1:], zero], dim=1)}  # h1<-_(i+1): has not read x_i
        return {view: views[view] for view in self.settings.views}

    def auxiliary_logits(self, input_ids: torch.Tensor, noisy: bool = True) -> dict[str, torch.Tensor]:
        first, _ = self.encode(input_ids, noisy)
        return {view: self.auxiliary[f"{view}_view"](self._drop(states, noisy))
                for view, states in self.view_states(first).items()}

    def representations(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, 2H): the top BiLSTM states (what the primary module reads)."""
        return self.encode(input_ids, noisy=False)[1]

    def compute_loss(self, batch: Batch):
        parts: dict[str, torch.Tensor] = {}
        if self.weight("labelled") > 0 and TAGS in batch.extras:
            tags = batch.extras[TAGS]  # (B, L)
            where = tags != IGNORE_INDEX
            logits = self.primary_logits(batch.input_ids)[where]  # (N, n_tags)
            parts["labelled"] = F.cross_entropy(logits.float(), tags[where]) if where.any() else logits.sum() * 0
        if self.weight("unlabelled") > 0 and UNLABELLED_IDS in batch.extras:
            parts["unlabelled"] = self.cvt_loss(batch.extras[UNLABELLED_IDS])
        if not parts:
            raise LabError("this CVT batch trains nothing: its objective (labelled or unlabelled) has weight 0")
        total = sum(self.weight(name) * part for name, part in parts.items())
        empty = torch.zeros(0, dtype=torch.long, device=batch.input_ids.device)
        return build_loss(total, parts, empty, torch.zeros(0, device=batch.input_ids.device))

    def cvt_loss(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Sum over the auxiliary modules of the mean KL(teacher || module) over the used positions."""
        used = input_ids != self.vocab.pad_id  # (B, T)
        if self.settings.word_starts_only:
            used &= self.vocab.starts_word(input_ids.reshape(-1).cpu()).view_as(input_ids).to(input_ids.device)
        with torch.no_grad():  # the teacher: the primary module on the clean full view, no gradient
            teacher = torch.log_softmax(self.primary(self.encode(input_ids, noisy=False)[1]).float(), dim=-1)
        teacher = teacher[used]  # (N, n_tags)
        loss = teacher.new_zeros(())
        for view, logits in self.auxiliary_logits(input_ids, noisy=True).items():
            student = torch.log_softmax(logits[used].float(), dim=-1)  # (N, n_tags)
            kl = F.kl_div(student, teacher, log_target=True, reduction="none").sum(-1)  # (N,)
            loss = loss + kl.sum() / max(kl.numel(), 1)
        return loss


def build(family, model_config, settings, vocab, objective_weights) -> CVT:
    return CVT(family, model_config, settings, vocab, objective_weights)
