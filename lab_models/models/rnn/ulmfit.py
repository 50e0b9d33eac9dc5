"""ULMFiT: an AWD-LSTM language model, pretrained, fine-tuned on the target task's text, then fine-tuned as a
classifier. Howard & Ruder (2018). Universal Language Model Fine-tuning for Text Classification. ACL. The LM is
Merity, Keskar, Socher (2018). Regularizing and Optimizing LSTM Language Models (AWD-LSTM).

One run trains all three stages (§3), one after the other, over its --steps:

    stage  name               data                                        learning rates
    1      general LM         the run's corpus (--corpus)                 STLR over the stage, every group alike
    2      LM fine-tuning     the target task's texts (unlabelled)        STLR + discriminative (lr / 2.6 per group down)
    3      classifier         the task's labelled sentences (sentiment)   STLR + discriminative + gradual unfreezing

Stage lengths: `pretrain_fraction` (0.5) and `lm_finetune_fraction` (0.25) of the steps, the classifier the rest.
Every metrics row records its stage (`stage`, `stage_name`) and the learning rate of every layer group (`lrs`); `lr`
is the top group's. The objectives are `lm` (stages 1 and 2) and `classifier` (stage 3); a step reports the one it
trains, validation reports both (the LM on the corpus's validation split: bits per byte; the classifier on the task's
validation sentences), and the validation `loss` is the objective of the current stage.

The model (AWD-LSTM, as ULMFiT's released fastai code): embedding (V, E) -> 3 LSTM layers (E -> h -> h -> E) -> a
decoder tied to the embedding (+ bias). Regularisation (Merity et al. §4): DropConnect on each LSTM's hidden-to-hidden
matrix (`weight_drop`, rnn/layers.py WeightDropLSTM), embedding dropout (whole words), variational (locked) dropout on
the embedding output, between layers and on the last layer's output.

Layer groups, bottom first: `embedding`, `lstm_1` .. `lstm_L` (the decoder bias with the top one), `head` (the
classifier). Discriminative fine-tuning (§3.2): lr^(l-1) = lr^l / 2.6, the top group at --lr: in stage 2 the top
group is lstm_L, in stage 3 the head. Slanted triangular learning rates (eq. 3): within each stage of T steps,
cut = floor(T * cut_frac), p = t / cut before the cut and 1 - (t - cut) / (cut (1 / cut_frac - 1)) after,
lr_t = lr_max (1 + p (ratio - 1)) / ratio (cut_frac 0.1, ratio 32). Gradual unfreezing (§3.3): stage 3 starts with
the head alone and unfreezes one more group (from the top) every `unfreeze_every` steps. The classifier (§3.3):
concat pooling h_c = [h_T; maxpool(H); meanpool(H)] over the last layer's states, then two linear blocks.

Worked example of the rates (T = 1000, lr 0.01, 2 LSTM layers; `discriminative_lrs`, `slanted_triangular_lr`):
t = 0: lr_max / 32 = 0.0003125; t = 100 (the cut): 0.01; t = 1000: 0.0003125. Stage 3 groups at the peak: head 0.01,
lstm_2 0.00385, lstm_1 0.00148, embedding 0.000569.

Deviations, stated:
- Stage 1 uses STLR over its own steps too (the paper pretrains with AWD-LSTM's schedule, its code with one-cycle).
- An "epoch" of gradual unfreezing is `unfreeze_every` steps; 0 (the default) splits stage 3 evenly among the groups.
  A group that is frozen for a step is frozen by a learning rate of 0 (lab_models/training/engine.py drops its
  gradients), so the model's parameters never change their requires_grad.
- The classifier's two blocks are the paper's (BatchNorm, dropout `classifier_dropout`, linear; ReLU between). The
  batch normalisation matters: the pooled LSTM states share a large per-feature offset and vary little between
  sentences, and without it the first linear layer's ReLUs die in the first steps (measured: accuracy stuck at the
  majority class). A training batch of one sentence normalises with the running statistics.
- The peak learning rate defaults to 5e-3 (`DEFAULT_LR`; the released fastai code peaks at 1e-2 to 2e-2 with
  Adam): at the presets' transformer rates (1e-3 and below) the tiny AWD-LSTM never leaves the unigram plateau.
- AdamW (the lab's engine) instead of SGD/Adam with the paper's betas (0.7, 0.99); the dropouts are the released
  fastai LM defaults (embedding 0.05, input 0.25, hidden 0.15, weight 0.2, output 0.1), not Merity's larger ones.
- Measured at the tiny preset (2000 steps, stage 3 = 800): with the paper's discriminative factor 2.6 the classifier
  stays near the class prior on the synthetic sentiment task (loss 1.05 against 1.09); with `discriminative_factor=1`
  and `unfreeze_every=25` it reaches 0.34. The defaults stay the paper's; docs/families.md shows the toggle.
- Stage 2's "target task" text is the built-in task's training sentences (`task`, default sentiment), joined into
  one stream and cut into seq_len windows like any corpus.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.models.rnn.common import (StepPlan, DataContext, RNNFamilyModel, StreamWindows, build_loss,
                                          encode_texts, init_lstm_family, lm_batch, mean_or_zero, pad_rows, token_nll)
from lab_models.models.rnn.layers import (LockedDropout, WeightDropLSTM, concat_pool, discriminative_lrs,
                                          embedding_dropout, lengths_of, slanted_triangular_lr)
from lab_models.text.tasks import TASKS
from lab_models.text.tasks import load_task

CHOICES: tuple[str, ...] = ()
DEFAULT_LR = 5e-3  # the peak of each stage's STLR when --lr is not given (lab_models/training/run.py)
RULE = Message("AWD-LSTM language model (left to right), then a concat-pooling classifier")
STAGE_NAMES = {1: Message("general LM pretraining"), 2: Message("LM fine-tuning"), 3: Message("classifier fine-tuning")}
CLASS_IDS, CLASS_LABELS = "class_input_ids", "class_labels"


@dataclass(frozen=True)
class Settings:
    """ULMFiT's toggles."""

    task: str = "sentiment"  # the built-in task: stage 2 fine-tunes the LM on its texts, stage 3 classifies them
    pretrain_fraction: float = 0.5  # share of the steps for stage 1, general-domain LM pretraining on the corpus
    lm_finetune_fraction: float = 0.25  # share for stage 2, LM fine-tuning on the task's text; stage 3 gets the rest
    cut_frac: float = 0.1  # STLR: the fraction of a stage's steps spent increasing the learning rate
    ratio: float = 32.0  # STLR: how much smaller the lowest learning rate is than the peak
    discriminative_factor: float = 2.6  # each layer group down gets the learning rate of the one above / this
    gradual_unfreezing: bool = True  # stage 3 unfreezes one layer group at a time, from the top
    unfreeze_every: int = 0  # steps per unfrozen group in stage 3 (0 = stage 3's steps split evenly among the groups)
    concat_pooling: bool = True  # the classifier reads [h_T; maxpool; meanpool]; off: h_T only
    embedding_dropout: float = 0.05  # AWD-LSTM: drop whole words (rows of the embedding matrix)
    input_dropout: float = 0.25  # AWD-LSTM: variational dropout on the embedding output
    hidden_dropout: float = 0.15  # AWD-LSTM: variational dropout between the LSTM layers
    weight_drop: float = 0.2  # AWD-LSTM: DropConnect on each LSTM's hidden-to-hidden matrix
    output_dropout: float = 0.1  # AWD-LSTM: variational dropout on the last layer's output
    classifier_hidden: int = 50  # the classifier's hidden width (the paper's 50)
    classifier_dropout: float = 0.1  # dropout before each of the classifier's linear layers

    def __post_init__(self):
        if self.task not in TASKS or TASKS[self.task].kind != "sequence":
            options = ", ".join(name for name, spec in TASKS.items() if spec.kind == "sequence")
            raise LabError("ULMFiT classifies single texts: task must be one of {options}, got {task!r}",
                           options=options, task=self.task)
        for name in ("pretrain_fraction", "lm_finetune_fraction", "cut_frac"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise LabError("{name} must be a number in [0, 1], got {value!r}", name=name, value=value)
        if self.pretrain_fraction + self.lm_finetune_fraction > 1:
            raise LabError("pretrain_fraction + lm_finetune_fraction must be at most 1 (stage 3 gets the rest)")
        if not 0 < self.cut_frac < 1:
            raise LabError("cut_frac must be in (0, 1), got {cut_frac!r}", cut_frac=self.cut_frac)
        if not self.ratio >= 1:
            raise LabError("ratio must be at least 1, got {ratio!r}", ratio=self.ratio)
        if not self.discriminative_factor >= 1:
            raise LabError("discriminative_factor must be at least 1, got {discriminative_factor!r}",
                           discriminative_factor=self.discriminative_factor)
        if isinstance(self.unfreeze_every, bool) or not isinstance(self.unfreeze_every, int) or self.unfreeze_every < 0:
            raise LabError("unfreeze_every must be a whole number >= 0, got {unfreeze_every!r}",
                           unfreeze_every=self.unfreeze_every)
        if isinstance(self.classifier_hidden, bool) or not isinstance(self.classifier_hidden, int) \
                or self.classifier_hidden < 1:
            raise LabError("classifier_hidden must be a whole number >= 1, got {classifier_hidden!r}",
                           classifier_hidden=self.classifier_hidden)
        for name in ("embedding_dropout", "input_dropout", "hidden_dropout", "weight_drop", "output_dropout",
                     "classifier_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise LabError("{name} must be a probability in [0, 1), got {value!r}", name=name, value=value)


# ------------------------------------------------------------------------------------------------ the plan


def stage_bounds(total_steps: int, settings: Settings) -> dict[int, tuple[int, int]]:
    """stage -> (first step, last step), 1-based and inclusive; a stage with no steps is left out.

    >>> stage_bounds(50, Settings())
    {1: (1, 25), 2: (26, 37), 3: (38, 50)}
    """
    n1 = round(total_steps * settings.pretrain_fraction)
    n2 = round(total_steps * settings.lm_finetune_fraction)
    n2 = min(n2, total_steps - n1)
    bounds, start = {}, 1
    for stage, n in ((1, n1), (2, n2), (3, total_steps - n1 - n2)):
        if n > 0:
            bounds[stage] = (start, start + n - 1)
            start += n
    return bounds


def stage_at(step: int, total_steps: int, settings: Settings) -> tuple[int, int, int]:
    """(stage, t, T): the stage of 1-based `step`, the 0-based step inside it, and its length."""
    bounds = stage_bounds(total_steps, settings)
    for stage, (first, last) in bounds.items():
        if step <= last:
            return stage, step - first, last - first + 1
    stage, (first, last) = max(bounds.items())  # past the end (a resume with fewer steps): stay in the last stage
    return stage, last - first, last - first + 1


def unfrozen_groups(t: int, T: int, n_groups: int, settings: Settings) -> int:
    """How many layer groups (from the top) train at step t of stage 3 (gradual unfreezing)."""
    if not settings.gradual_unfreezing:
        return n_groups
    every = settings.unfreeze_every or max(1, T // n_groups)
    return min(n_groups, 1 + t // every)


# ------------------------------------------------------------------------------------------------ data


class StagedBatches:
    """The batch source: stage 1 windows of the corpus, stage 2 windows of the task's texts, stage 3 labelled
    sentences. Validation batches hold corpus rows (the LM part) and task validation sentences (the classifier)."""

    def __init__(self, context: DataContext):
        s = context.settings
        self.settings, self.vocab, self.steps = s, context.vocab, context.steps
        self.batch_size, self.eval_batches = context.batch_size, context.eval_batches
        self.max_len = context.max_positions
        self.general = StreamWindows(context.train_stream, context.seq_len, Message("the corpus's training split"))
        self.validation_note = ""
        validation = context.validation_stream
        if validation.numel() < 2:
            self.validation_note = "the corpus has no validation split: evaluating on the first training rows"
            validation = context.train_stream
        self.general_validation = StreamWindows(validation, context.seq_len, Message("the validation split"))
        task = load_task(s.task)
        self.n_labels = task.n_labels
        self.target = StreamWindows(encode_texts(context.tokenizer, [e.text for e in task.train], context.vocab.eos_id),
                                    context.seq_len, Message("the {task} task's texts", task=s.task))
        self.labelled = self._encode(context.tokenizer, task.train)
        self.labelled_validation = self._encode(context.tokenizer, task.validation)

    def _encode(self, tokenizer, examples) -> list[tuple[list[int], int]]:
        encodings = tokenizer.encode_batch([e.text for e in examples], add_special_tokens=False)
        return [(enc.ids[: self.max_len], int(e.label)) for enc, e in zip(encodings, examples) if enc.ids]

    def _classifier_batch(self, examples) -> tuple[torch.Tensor, torch.Tensor]:
        ids = pad_rows([torch.tensor(x) for x, _ in examples], self.vocab.pad_id)  # (B, L)
        return ids, torch.tensor([y for _, y in examples], dtype=torch.long)  # (B,)

    def train_batch_at(self, step: int, generator: torch.Generator) -> Batch:
        stage, _, _ = stage_at(step, self.steps, self.settings)
        if stage == 1:
            return lm_batch(self.general.sample(generator, self.batch_size), self.vocab)
        if stage == 2:
            return lm_batch(self.target.sample(generator, self.batch_size), self.vocab)
        picks = torch.randint(len(self.labelled), (self.batch_size,), generator=generator).tolist()
        ids, labels = self._classifier_batch([self.labelled[i] for i in picks])
        batch = lm_batch(ids, self.vocab)
        batch.targets.fill_(IGNORE_INDEX)  # stage 3 trains no LM
        batch.extras = {CLASS_IDS: ids, CLASS_LABELS: labels}
        return batch

    def train_batch(self, generator: torch.Generator) -> Batch:
        return self.train_batch_at(1, generator)

    def validation_batches(self, generators) -> list[Batch]:
        rows = self.general_validation.fixed(self.eval_batches * self.batch_size)
        batches = []
        for i, start in enumerate(range(0, len(rows), self.batch_size)):
            batch = lm_batch(torch.stack(rows[start:start + self.batch_size]), self.vocab)
            n = len(self.labelled_validation)
            examples = [self.labelled_validation[(i * self.batch_size + k) % n] for k in range(self.batch_size)]
            batch.extras[CLASS_IDS], batch.extras[CLASS_LABELS] = self._classifier_batch(examples)
            batches.append(batch)
        return batches


def batch_source(context: DataContext) -> StagedBatches:
    return StagedBatches(context)


# ------------------------------------------------------------------------------------------------ the model


class _BatchNorm(nn.BatchNorm1d):
    """The classifier's BatchNorm1d; a training batch of one row is normalised with the running statistics (batch
    statistics of one row are undefined)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and x.shape[0] == 1:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        return super().forward(x)


class ULMFiT(RNNFamilyModel):
    is_language_model = True

    def __init__(self, family, model_config, settings: Settings, vocab, objective_weights):
        super().__init__(family, model_config, settings, vocab, objective_weights)

        c, s = model_config, settings
        E, H, L = c.embedding_size, c.hidden_size, c.n_layers
        self.embedding = nn.Embedding(c.vocab_size, E)
        widths = [E] + [H] * (L - 1) + [E]  # the last layer returns to E so that the decoder can be tied
        self.layers = nn.ModuleList(WeightDropLSTM(widths[i], widths[i + 1], s.weight_drop) for i in range(L))
        self.decoder_bias = nn.Parameter(torch.zeros(c.vocab_size))  # the decoder's matrix is the embedding's
        self.input_dropout = LockedDropout(s.input_dropout)
        self.hidden_dropout = LockedDropout(s.hidden_dropout)
        self.output_dropout = LockedDropout(s.output_dropout)
        pooled = 3 * E if s.concat_pooling else E
        n_labels = len(TASKS[s.task].label_names)
        self.head = nn.Sequential(
            _BatchNorm(pooled), nn.Dropout(s.classifier_dropout), nn.Linear(pooled, s.classifier_hidden), nn.ReLU(),
            _BatchNorm(s.classifier_hidden), nn.Dropout(s.classifier_dropout), nn.Linear(s.classifier_hidden, n_labels))
        init_lstm_family(self)
        if self.weight("lm") == 0 and (s.pretrain_fraction > 0 or s.lm_finetune_fraction > 0):
            raise LabError("ULMFiT's lm objective is off but stages 1 and 2 have steps: also set "
                           "pretrain_fraction=0 and lm_finetune_fraction=0 to train the classifier alone")
        if self.weight("classifier") == 0 and s.pretrain_fraction + s.lm_finetune_fraction < 1:
            raise LabError("ULMFiT's classifier objective is off but stage 3 has steps: set pretrain_fraction + "
                           "lm_finetune_fraction to 1 to train the language model alone")
        self.stage = 1  # set by begin_step; a model loaded for inference is a language model
        self.total_steps = None

    # ---- layer groups and the plan (engine.py: optimizer_groups, begin_step) -----------------------------------

    def layer_groups(self) -> list[tuple[str, list[nn.Parameter]]]:
        """(name, parameters), bottom first: embedding, lstm_1 .. lstm_L (+ decoder bias), head."""
        groups = [("embedding", [self.embedding.weight])]
        for i, layer in enumerate(self.layers, start=1):
            params = list(layer.parameters()) + ([self.decoder_bias] if i == len(self.layers) else [])
            groups.append((f"lstm_{i}", params))
        groups.append(("head", list(self.head.parameters())))
        return groups

    def optimizer_groups(self, weight_decay: float) -> list[dict]:
        """Two AdamW groups per layer group (matrices decay, vectors do not), in layer_groups order."""
        out = []
        for name, params in self.layer_groups():
            out.append({"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay, "name": name})
            out.append({"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0, "name": name})
        return out

    def group_rates(self, step: int, total_steps: int, lr: float) -> tuple[int, dict[str, float], int]:
        """(stage, {group: learning rate}, unfrozen groups) at 1-based `step` of a `total_steps` run."""
        s = self.settings
        stage, t, T = stage_at(step, total_steps, s)
        peak = slanted_triangular_lr(t, T, lr, s.cut_frac, s.ratio)
        names = [name for name, _ in self.layer_groups()]  # embedding, lstm_1..L, head
        rates = dict.fromkeys(names, 0.0)
        unfrozen = 0
        if stage == 1:
            rates.update({name: peak for name in names[:-1]})
        elif stage == 2:
            rates.update(zip(names[:-1], discriminative_lrs(peak, len(names) - 1, s.discriminative_factor)))
        else:
            unfrozen = unfrozen_groups(t, T, len(names), s)
            for name, rate in zip(names, discriminative_lrs(peak, len(names), s.discriminative_factor)):
                rates[name] = rate if names.index(name) >= len(names) - unfrozen else 0.0
        return stage, rates, unfrozen

    def begin_step(self, step: int, config) -> StepPlan:
        self.total_steps = config.steps
        stage, rates, unfrozen = self.group_rates(step, config.steps, config.lr)
        self.stage = stage
        record = {"stage": stage, "stage_name": STAGE_NAMES[stage], "lrs": rates}
        if stage == 3:
            record["unfrozen_groups"] = unfrozen
        lrs = tuple(rates[name] for name, _ in self.layer_groups() for _ in range(2))  # two AdamW groups each
        return StepPlan(lrs=lrs, record=record)

    # ---- the network ----------------------------------------------------------------------------------------

    def encode(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's outputs: (B, T, h) .. (B, T, E); left to right only."""
        weight = embedding_dropout(self.embedding.weight, self.settings.embedding_dropout, self.training)
        x = self.input_dropout(F.embedding(input_ids, weight))  # (B, T, E)
        outputs = []
        for i, layer in enumerate(self.layers):
            x, _ = layer(x)  # (B, T, width): one fused LSTM call
            outputs.append(x)
            x = self.hidden_dropout(x) if i < len(self.layers) - 1 else x
        return outputs

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.embedding.weight, self.decoder_bias)  # tied decoder

    def next_token_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, V): the LM's next-token logits at every position."""
        return self.lm_logits(self.encode(input_ids)[-1])

    def representations(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, E): the last LSTM layer's states (what the classifier pools)."""
        return self.encode(input_ids)[-1]

    def classify(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Right-padded sentences (B, L) -> class logits (B, C), through concat pooling."""
        lengths = lengths_of(input_ids, self.vocab.pad_id)  # (B,)
        states = self.output_dropout(self.encode(input_ids)[-1])  # (B, L, E)
        if self.settings.concat_pooling:
            pooled = concat_pool(states, lengths)  # (B, 3E)
        else:
            pooled = states[torch.arange(states.shape[0], device=states.device), lengths - 1]  # (B, E): h_T
        return self.head(pooled)

    def compute_loss(self, batch: Batch):
        parts: dict[str, torch.Tensor] = {}
        target_ids = torch.zeros(0, dtype=torch.long, device=batch.input_ids.device)
        target_nll = torch.zeros(0, device=batch.input_ids.device)
        where = batch.targets != IGNORE_INDEX  # (B, T)
        if self.weight("lm") > 0 and bool(where.any()):
            hidden = self.output_dropout(self.encode(batch.input_ids)[-1])  # (B, T, E)
            target_ids = batch.targets[where]
            target_nll = token_nll(self.lm_logits(hidden[where]), target_ids)  # (N,)
            parts["lm"] = mean_or_zero(target_nll)
        if self.weight("classifier") > 0 and CLASS_IDS in batch.extras:
            logits = self.classify(batch.extras[CLASS_IDS])  # (B, C)
            parts["classifier"] = F.cross_entropy(logits.float(), batch.extras[CLASS_LABELS])
        if not parts:
            raise LabError("this ULMFiT batch trains nothing: its objective for this stage has weight 0 (turn lm "
                           "or classifier back on, or give the stage no steps)")
        # the total is the current stage's objective (a validation batch holds both; its other part is only logged)
        current = "classifier" if self.stage == 3 else "lm"
        if current in parts:
            total = self.weight(current) * parts[current]
        else:
            total = sum(self.weight(name) * part for name, part in parts.items())
        return build_loss(total, parts, target_ids, target_nll)


def build(family, model_config, settings, vocab, objective_weights) -> ULMFiT:
    return ULMFiT(family, model_config, settings, vocab, objective_weights)
