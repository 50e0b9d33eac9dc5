"""Fine-tuning's model: `FinetuneClassifier` (a head on the pretrained backbone's hidden states), the auxiliary
language-modelling loss (GPT §3.2), and evaluation (accuracy, macro F1), for lab_models/inference/finetuning/run.py.

Per family: which hidden states the head reads, and the auxiliary LM loss. Every family reads its framed input in
one forward pass of the backbone it was pretrained with; the mask is full (every position sees every real token)
except for the causal families.

    family                     hidden states under the head                       auxiliary LM loss (λ > 0)
    gpt, gpt2                  the backbone, causal mask                          next-token loss on the same pass
    bert, roberta, albert,     the backbone, full mask                            the family's pretraining loss on
    spanbert, unilm                                                               the task's text (its own batch)
    electra                    the discriminator (`model.backbone`), full mask    the same (generator + detector)
    xlnet, mpnet               the content stream alone, full mask               the same (two-stream batches)
    glm                        the text as Part A without blanks: 2-D positions  the same (blank infilling)
                               (i, 0), full attention among Part A
    mass, t5                   the encoder, full mask                             the same (denoising)
    elmo, cove, ulmfit, cvt    `model.representations` of the unframed text:      none (λ must be 0)
                               ELMo's scalar mix (trained here, as the paper's
                               task-specific weights), CoVe's [embedding; CoVe],
                               ULMFiT's top LSTM (pooling "last"), CVT's BiLSTM;
                               pooling "mean" for the bidirectional three

Papers and deviations, stated:
- GPT (Radford et al. 2018, §3.2-3.3): the input is framed by start and extract tokens and the classifier reads the
  extract token's final state; L1 is the LM loss on the same input, in the same forward pass. Deviations: GPT adds
  new randomly initialised start/delimiter/extract embeddings; the lab reuses [BOS], [SEP] and [EOS]. [EOS] is the
  document separator the run saw in pretraining, so its state already summarises the text before it. The head is
  BERT's pooler + classifier (GPT has a single linear layer). GPT-2 (Radford et al. 2019) was not fine-tuned in its
  paper; it gets GPT's recipe.
- BERT, RoBERTa, ALBERT, SpanBERT (Devlin et al. 2019 §4; Liu et al. 2019; Lan et al. 2020; Joshi et al. 2020): the
  [CLS] representation through the pooler and a classifier; token tasks on each word's first piece (BERT §5.3).
  Deviation: the lab's pretraining rows carry no [CLS] (lab_models/training/batches.py), so the [CLS] embedding and the
  pooler start untrained (BERT's NSP trains them); the first fine-tuning steps learn them.
- ELECTRA (Clark et al. 2020): the discriminator is fine-tuned, the generator is thrown away (§3.1); here it stays in
  the model, untouched unless λ > 0.
- UniLM (Dong et al. 2019, §3.1 NLU): the bidirectional mode, as a BERT-style encoder.
- XLNet (Yang et al. 2019): fine-tuning uses the content stream with no permutation (every token sees every token).
  Deviation: XLNet's released code puts <cls> at the *end* and pools the last position; here [CLS] comes first and
  "auto" pools it, as for BERT (under a full mask only the positions tell the two apart); pass
  --pool last to read the last token ([SEP]) instead.
- MPNet (Song et al. 2020): fine-tuned like BERT/RoBERTa, on the one content stream.
- GLM (Du et al. 2022): plain text is Part A with no blanks, read bidirectionally, at 2-D positions (i, 0).
  Deviation: GLM fine-tunes classification as cloze blank infilling with verbalizers (§2.3); the lab uses the same
  classification head as BERT on the [CLS] position, so every family is compared with the same head.
- MASS, T5 (Song et al. 2019; Raffel et al. 2020): the head reads the encoder's output. Deviation: T5 casts every
  task as text-to-text through its decoder (§2.4), and MASS was fine-tuned for generation; an encoder with a
  classification head is the common way to compare them with encoders (as Sentence-T5 does with the encoder).
- For the non-causal families, λ > 0 adds the family's *own* pretraining loss (MLM, replaced-token detection,
  permutation LM, blank infilling, span corruption, ...) on the task's text, built by the family's batch builder in
  a second forward pass: GPT's auxiliary objective, generalised. It is off by default (the papers do not use it).
- What λ does here (measured on `tiny` GPT runs, 200 steps at the run's lr): the auxiliary loss's gradient on the
  shared weights is 10-40x the classifier's at the start (a fresh head sends back little), so under Adam and
  gradient clipping it sets the direction of the backbone's updates and the classifier learns slowly. A GPT run
  pretrained 300 steps reached 0.86 (topic) and 0.78 (sentiment) validation accuracy with λ = 0, but 0.48 and 0.34
  (the majority class) with λ = 0.5; entailment was the same either way (0.72). GPT §5 also found the auxiliary
  objective helps the larger datasets more than the smaller. The default stays the paper's 0.5; try 0 to compare.
"""
from __future__ import annotations

from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.training.engine import generator_for

import torch
import torch.nn.functional as F
from torch import nn

from lab_models.inference.finetuning.config import CAUSAL_FAMILIES, ENCODER_DECODER, macro_f1
from lab_models.families import RNN_FAMILIES
from lab_models.inference.finetuning.encoding import FinetuneBatch
from lab_models.nn.heads import SequenceClassificationHead
from lab_models.nn.heads import TokenClassificationHead
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.losses import sparse_token_loss


# ------------------------------------------------------------------------------------------------ the model
class FinetuneClassifier(nn.Module):
    """A pretrained FamilyModel (`base`, all of it kept: the auxiliary loss may need its heads) plus a task head on
    the hidden states of the backbone it reads (see the module docstring's table)."""

    def __init__(self, base: nn.Module, kind: str, n_labels: int, pooling: str):
        super().__init__()

        self.base = base
        self.family = base.family
        self.kind = kind
        self.pooling = pooling
        self.rnn = base.family in RNN_FAMILIES
        d_model = _representation_size(base) if self.rnn else base.model_config.d_model
        dropout = base.model_config.dropout
        if kind == "token":
            self.head = TokenClassificationHead(d_model, n_labels, dropout=dropout)
        else:
            self.head = SequenceClassificationHead(d_model, n_labels, pool=pooling, dropout=dropout)

    @property
    def backbone(self):
        return self.base.backbone  # ELECTRA: the discriminator

    def hidden(self, batch: FinetuneBatch) -> torch.Tensor:
        """(B, T, H): the encoder's output for MASS/T5; the one-stream forward pass for everyone else (XLNet and
        MPNet: their content stream; GLM: Part A)."""
        if self.rnn:  # ELMo's scalar mix (now trained), CoVe's [embedding; CoVe], ULMFiT's top LSTM, CVT's BiLSTM
            return self.base.representations(batch.input_ids)
        if self.family in ENCODER_DECODER:
            return self.backbone.encode(batch.input_ids, batch.attention, batch.position_ids, batch.segment_ids)
        return self.backbone(batch.input_ids, batch.attention, batch.position_ids, batch.segment_ids)

    def forward(self, batch: FinetuneBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (B, C) or (B, T, C), hidden (B, T, H))."""
        hidden = self.hidden(batch)
        if self.kind == "token":
            return self.head(hidden), hidden
        return self.head(hidden, batch.is_real), hidden

    def num_parameters(self) -> int:
        """The parameters the classification pass uses: the backbone's embeddings and (encoder) blocks, and the head.
        Pretraining-only parts (LM head, NSP/SOP/SBO heads, ELECTRA's generator, MASS/T5's decoder, XLNet's w) are
        left out, though λ > 0 may train them."""
        if self.rnn:
            return sum(p.numel() for p in self.parameters())
        unused = ("decoder_blocks.", "ln_dec.", "decoder_relative_bias.", "lm_transform.", "lm_out.", "lm_bias",
                  "query_start")
        used = sum(p.numel() for name, p in self.backbone.named_parameters() if not name.startswith(unused))
        return used + sum(p.numel() for p in self.head.parameters())


@torch.no_grad()
def _representation_size(base: nn.Module) -> int:
    """The width of an RNN model's `representations` (ELMo 2E, CoVe E + 2h, ULMFiT E, CVT 2H), read off one tiny
    forward pass in eval mode (no dropout draw, so the head's initialisation stays the seed's)."""
    was_training = base.training
    base.eval()
    device = next(base.parameters()).device
    width = base.representations(torch.full((1, 2), base.vocab.eos_id, dtype=torch.long, device=device)).shape[-1]
    base.train(was_training)
    return int(width)


def task_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if logits.dim() == 3:  # token task: (B, T, C)
        logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX)


class AuxiliaryLoss:
    """λ L1: the causal LM loss on the same forward pass (gpt, gpt2), or the family's own pretraining loss on the
    task's text through its batch builder (everyone else)."""

    def __init__(self, model: FinetuneClassifier, settings, vocab, max_positions: int):
        self.model = model
        self.causal = model.family in CAUSAL_FAMILIES
        self.module = objective_module(model.family)
        self.batch_config = BatchConfig(settings, vocab)
        self.settings = settings
        self.max_positions = max_positions

    def __call__(self, batch: FinetuneBatch, hidden: torch.Tensor, step: int, seed: int) -> torch.Tensor:
        if self.causal:
            return sparse_token_loss(self.model.backbone, hidden, batch.lm_targets)[0]
        rows = [self._fit(row) for row in batch.text_ids if row.numel() >= 2]
        if not rows:
            return hidden.sum() * 0.0
        family_batch: Batch = self.module.make_batch(rows, generator_for(seed, "finetune-aux", step),
                                                     self.batch_config)
        return self.model.base.loss(family_batch.to(hidden.device)).total

    def _fit(self, row: torch.Tensor) -> torch.Tensor:
        """Shorten a row until the family's batch builder keeps it within the model's positions (GLM, MPNet grow)."""
        grow = getattr(self.module, "max_length", None)
        while row.numel() > 2 and (grow(row.numel(), self.settings) if grow else row.numel()) > self.max_positions:
            row = row[:-1]
        return row


# ------------------------------------------------------------------------------------------------ evaluation
@torch.no_grad()
def evaluate(model: FinetuneClassifier, batches: list[FinetuneBatch], n_labels: int, device, autocast: bool) -> dict:
    model.eval()
    confusion = [[0] * n_labels for _ in range(n_labels)]
    loss_sum, weight = 0.0, 0
    try:
        for batch in batches:
            batch = batch.to(device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast):
                logits, _ = model(batch)
            labels = batch.labels
            if logits.dim() == 3:
                logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
            keep = labels != IGNORE_INDEX
            logits, labels = logits[keep].float(), labels[keep]
            loss_sum += float(F.cross_entropy(logits, labels, reduction="sum"))
            weight += labels.numel()
            predicted = logits.argmax(dim=-1)
            flat = torch.bincount(labels * n_labels + predicted, minlength=n_labels * n_labels).tolist()
            for g in range(n_labels):
                for p in range(n_labels):
                    confusion[g][p] += flat[g * n_labels + p]
    finally:
        model.train()
    correct = sum(confusion[c][c] for c in range(n_labels))
    return {"loss": loss_sum / max(1, weight), "accuracy": correct / max(1, weight), "macro_f1": macro_f1(confusion),
            "confusion": confusion, "scored": weight}
