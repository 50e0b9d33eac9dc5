"""Fine-tuning a pretrained run on a labelled task: `python -m lab_models.finetune`, its `FinetuneConfig`, the
leaderboard over all fine-tunings, and queueing one on the `JobManager`.

    python -m lab_models.finetune --run RUN_DIR_OR_ID --task sentiment|topic|entailment|tagging [--out DIR]
        [--steps N] [--pool auto|first|last|mean] [--lm-aux-weight X] [--batch-size N] [--lr X] [--seed S]
        [--max-len N] [--device auto|cpu|cuda|mps] [--eval-every N] [--log-every N] [--warmup-fraction X]
        [--weight-decay X] [--home DIR] [--save-weights] [--adversarial none|freelb|smart] [--adversarial-weight X]
        [--csv PATH --text-column C --label-column L [--text-pair-column P]]     (then --task csv, or no --task)

    finetune(FinetuneConfig(run_dir=..., task="topic", out=...)) -> the result dict (what result.json holds)
    finetune_leaderboard(home) -> pandas.DataFrame, one row per fine-tuning with a result
    start_finetune(job_manager, run_id, "topic", steps=200) -> the fine-tuning's id (queued like a training run)

What it does (the recipe of BERT §4 / GPT §3.2, scaled down):
1. Load the run's model, a fresh copy (not `inference.load_run`'s cached, shared one), and its tokenizer.
2. Frame each example with the lab's special tokens and add a head on the backbone's hidden states:
   - sentence tasks:  [CLS] a [SEP]            pairs: [CLS] a [SEP] b [SEP]  (segment 0, then 1; BERT §3)
   - causal families: [BOS] a [EOS]            pairs: [BOS] a [SEP] b [EOS]  (GPT §3.3: start, delimiter, extract)
   A `SequenceClassificationHead` (dense, tanh, dropout, linear: BERT's pooler + classifier) pools the hidden
   states: "first" (the [CLS] position, BERT), "last" (the last real token, GPT's extract token), or "mean" (over
   the real tokens, special tokens included). "auto" is "last" for the causal families (gpt, gpt2: under a causal
   mask only the last position has read the whole input) and "first" for the others. Tagging ("token" tasks) puts a
   `TokenClassificationHead` on every position; a word's label sits on its first sub-word piece (lab_models/tasks.py).
3. Train every weight with AdamW (β = 0.9, 0.999, eps 1e-8, weight decay 0.01 on matrices only, gradient clipping at
   1.0), linear warmup over the first 10% of the steps and linear decay to 0 (BERT's fine-tuning schedule), batches
   drawn without replacement epoch by epoch. The loss is the task's cross-entropy, plus `lm_aux_weight` (λ) times an
   auxiliary language-modelling loss: GPT §3.2, L3(C) = L2(C) + λ L1(C), λ = 0.5. The default λ is 0.5 for the
   causal families and 0 for the others.
4. Evaluate on the task's validation split every `eval_every` steps and at the end: accuracy and macro F1 (the mean
   F1 over the classes that occur in the gold labels or the predictions, as scikit-learn's "macro").
5. Optionally (`adversarial`, off by default) add adversarial training on the input embeddings, FreeLB or SMART,
   weighted by `adversarial_weight`: lab_models/objectives/adversarial.py (`finetune_step`) has the method, its
   papers and deviations; the train rows' losses then hold "adversarial" and "adversarial_task" (the task loss under
   the final perturbation).

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
  Deviation: the lab's pretraining rows carry no [CLS] (lab_models/data.py), so the [CLS] embedding and the pooler
  start untrained (BERT's NSP trains them); the first fine-tuning steps learn them.
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
- Truncation: texts are cut to `max_len` tokens with their framing, pairs longest-first (BERT's
  `_truncate_seq_pair`). `max_len` defaults to the run's pretraining row length (its positions beyond it were
  never trained), at most its `max_positions`.

Outputs, in `out` (by default `<lab home>/finetunes/<run_id>--<task>--<YYYYmmdd-HHMMSS>`): `config.json` (the
resolved `FinetuneConfig` under "finetune", the task's summary, the run's family and id), `status.json`
({"state": running/finished/stopped/failed, "step", "total_steps", ...}, as the pretraining runs; the JobManager
writes "queued"), `metrics.jsonl` (train rows: step, loss, losses {"task", "lm"}, accuracy of the batches, lr,
elapsed_s; evaluation rows with "split": "val": loss, accuracy, macro_f1), `result.json` at the end (task, run_id,
family, accuracy, macro_f1, majority_baseline, steps, seconds, num_parameters, pooling, lm_aux_weight, label_names,
confusion [gold][predicted]) and `finetune.log`. With --save-weights also `model.safetensors` (backbone + head).

Signals: SIGTERM or SIGINT finishes the current step, evaluates, writes result.json and status "stopped", exit 0.
A bad argument (unknown task, missing run, bad CSV, ...) exits 2 with one line on stderr ("error: ..."); a failure
while training writes status "failed" and exits 1.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lab_models import runs
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.engine import derive_seed, generator_for, parameter_groups
from lab_models.home import atomic_write_json, lab_home
from lab_models.nn.moe import collect_routing
from lab_models.switch import routing_loss
from lab_models.objectives.adversarial import FINETUNE_METHODS as ADVERSARIAL_METHODS, finetune_step
from lab_models.safe_paths import is_inside
from lab_models.tasks import TASKS, Task, csv_task, encode_words, load_task

logger = logging.getLogger("lab_models.finetune")

__all__ = ["FinetuneConfig", "FinetuneClassifier", "finetune", "main", "finetune_leaderboard", "list_finetunes",
           "start_finetune", "finetune_command", "finetunes_dir", "new_finetune_dir", "resolve_run_dir",
           "linear_schedule", "macro_f1", "CAUSAL_FAMILIES", "POOLINGS", "LEADERBOARD_COLUMNS"]

CAUSAL_FAMILIES = ("gpt", "gpt2")
RNN_FAMILIES = ("elmo", "cove", "ulmfit", "cvt")  # lab_models/rnn/: the head reads `model.representations`
ENCODER_DECODER = ("mass", "t5")
POOLINGS = ("auto", "first", "last", "mean")
DEFAULT_LM_AUX_WEIGHT = 0.5  # GPT §3.2: λ = 0.5
DEFAULT_LR = 5e-4  # when the run's config does not say its pretraining learning rate
FINETUNES_FOLDER = "finetunes"
RESULT_FILE = "result.json"
LOG_FILE = "finetune.log"
EXIT_BAD_ARGUMENT = 2
EXIT_FAILED = 1
STATUS_INTERVAL_S = 1.0  # status.json is rewritten at most this often between evaluations
EVAL_BATCH_SIZE = 64
LEADERBOARD_COLUMNS = ["finetune", "pretrained run", "family", "task", "pooling", "accuracy", "macro F1",
                       "majority baseline", "steps", "seconds", "state"]
_FOLDER_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


# ------------------------------------------------------------------------------------------------ the config
@dataclass(frozen=True)
class FinetuneConfig:
    """Everything a fine-tuning is made from. `resolved(...)` fills the "auto"/None fields from the run; the
    resolved config is what config.json saves under "finetune".

    Why these defaults: batch 32 and 10% warmup are BERT's. The learning rate defaults to the run's own pretraining
    peak (1e-3 at the `tiny` preset, 5e-4 at `small`): BERT-base fine-tunes at 2e-5..5e-5 and GPT at 6.25e-5, but
    the lab's small, briefly pretrained models need bigger steps, and the preset's rate is known to be stable for
    that model size. 200 steps is about a minute on a CPU at `tiny`.
    """

    run_dir: str  # the pretrained run's folder (or its id under <home>/runs)
    task: str  # a built-in task (lab_models.tasks.TASKS) or "csv"
    out: str | None = None  # None: <home>/finetunes/<run_id>--<task>--<timestamp>
    pooling: str = "auto"  # auto | first | last | mean
    lm_aux_weight: float | None = None  # λ; None: 0.5 for the causal families, else 0
    steps: int = 200
    batch_size: int = 32
    lr: float | None = None  # None: the run's pretraining learning rate (config.json "train.lr"), else 5e-4
    seed: int = 0
    max_len: int | None = None  # None: the run's seq_len, at most its max_positions
    device: str = "auto"
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int | None = None  # None: steps // 10 (at least 1); the last step is always evaluated
    log_every: int | None = None  # None: steps // 100 (at least 1)
    csv_path: str | None = None
    text_column: str | None = None
    label_column: str | None = None
    text_pair_column: str | None = None
    save_weights: bool = False
    home: str | None = None
    adversarial: str = "none"  # none, freelb or smart: objectives/adversarial.py
    adversarial_weight: float = 1.0  # the adversarial loss's weight in the total

    def __post_init__(self):
        for name in ("run_dir", "task"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if self.task != "csv" and self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}: choose one of {', '.join(TASKS)}, or csv with a CSV file")
        if self.task == "csv":
            if not self.csv_path or not self.text_column or not self.label_column:
                raise ValueError("a CSV task needs --csv PATH, --text-column NAME and --label-column NAME")
        elif self.csv_path is not None:
            raise ValueError(f"--csv goes with --task csv (or no --task), not with the built-in task {self.task!r}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}: choose one of {', '.join(POOLINGS)}")
        if self.adversarial not in ADVERSARIAL_METHODS or not _real(self.adversarial_weight, minimum=0.0):
            raise ValueError(f"adversarial must be one of {', '.join(ADVERSARIAL_METHODS)} with a finite weight >= 0, "
                             f"got {self.adversarial!r} and {self.adversarial_weight!r}")
        if self.lm_aux_weight is not None and not _real(self.lm_aux_weight, minimum=0.0):
            raise ValueError(f"lm_aux_weight must be a finite number >= 0, got {self.lm_aux_weight!r}")
        for name, minimum in (("steps", 1), ("batch_size", 1), ("seed", 0), ("max_len", 4), ("eval_every", 1),
                              ("log_every", 1)):
            value = getattr(self, name)
            if value is None and name in ("max_len", "eval_every", "log_every"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name.replace('_', '-')} must be a whole number >= {minimum}, got {value!r}")
        if self.lr is not None and (not _real(self.lr, minimum=0.0) or self.lr <= 0):
            raise ValueError(f"lr must be a positive number such as 5e-4, got {self.lr!r}")
        if not _real(self.warmup_fraction, minimum=0.0) or self.warmup_fraction >= 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction!r}")
        for name in ("weight_decay", "grad_clip"):
            if not _real(getattr(self, name), minimum=0.0):
                raise ValueError(f"{name.replace('_', '-')} must be a finite number >= 0, got {getattr(self, name)!r}")
        from lab_models.device import DEVICE_CHOICES

        if self.device not in DEVICE_CHOICES:
            raise ValueError(f"unknown device {self.device!r}: choose one of {', '.join(DEVICE_CHOICES)}")

    def resolved(self, family: str, seq_len: int, max_positions: int, pretrain_lr: float | None = None
                 ) -> "FinetuneConfig":
        """A copy with pooling, lm_aux_weight, lr, max_len, eval_every and log_every decided for this run."""
        causal = family in CAUSAL_FAMILIES
        pooling = self.pooling if self.pooling != "auto" else auto_pooling(family)
        weight = self.lm_aux_weight
        if weight is None:
            weight = DEFAULT_LM_AUX_WEIGHT if causal else 0.0
        if family in RNN_FAMILIES and weight > 0:
            raise ValueError(f"the auxiliary LM loss (λ = {weight}) is for the transformer families; fine-tune a "
                             f"{family} run with λ = 0 (empty)")
        _check_adversarial(family, self.adversarial)
        max_len = self.max_len if self.max_len is not None else min(int(seq_len or max_positions), max_positions)
        if max_len > max_positions:
            raise ValueError(f"--max-len {max_len} is longer than the run's {max_positions} positions")
        lr = self.lr
        if lr is None:
            lr = pretrain_lr if _real(pretrain_lr, 0.0) and pretrain_lr > 0 else DEFAULT_LR
        return dataclasses.replace(
            self, pooling=pooling, lm_aux_weight=float(weight), max_len=int(max_len), lr=float(lr),
            eval_every=self.eval_every or max(1, self.steps // 10),
            log_every=self.log_every or max(1, self.steps // 100))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _check_adversarial(family: str, method: str) -> None:
    if family in RNN_FAMILIES and method != "none":
        raise ValueError(f"adversarial training ({method}) perturbs a Transformer's token embeddings; fine-tune the "
                         f"{family} run without it")


def auto_pooling(family: str) -> str:
    """What pooling "auto" means: "last" for the left-to-right models (GPT, GPT-2, ULMFiT's AWD-LSTM: only the last
    position has read the whole input), "mean" for ELMo, CoVe and CVT (bidirectional LSTMs with no [CLS]), "first"
    ([CLS]) for the others.

    >>> auto_pooling("gpt"), auto_pooling("ulmfit"), auto_pooling("elmo"), auto_pooling("bert")
    ('last', 'last', 'mean', 'first')
    """
    if family in CAUSAL_FAMILIES or family == "ulmfit":
        return "last"
    return "mean" if family in RNN_FAMILIES else "first"


def _real(value, minimum: float) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            and value >= minimum)


# ------------------------------------------------------------------------------------------------ small helpers
def linear_schedule(step: int, steps: int, lr: float, warmup_fraction: float) -> float:
    """The learning rate of step `step` (1-based): linear warmup, then linear decay towards 0 (BERT's fine-tuning).

    >>> [round(linear_schedule(s, 10, 1.0, 0.2), 3) for s in (1, 2, 3, 10)]
    [0.5, 1.0, 1.0, 0.125]
    """
    warmup = int(round(warmup_fraction * steps))
    if warmup and step <= warmup:
        return lr * step / warmup
    return lr * max(0.0, (steps - step + 1) / max(1, steps - warmup))


def macro_f1(confusion: list[list[int]]) -> float:
    """The mean F1 over the classes that occur in the gold labels or the predictions. confusion[gold][predicted].

    >>> round(macro_f1([[2, 0], [1, 1]]), 4)    # class 0: P 2/3, R 1 -> 0.8; class 1: P 1, R 1/2 -> 0.6667
    0.7333
    """
    scores = []
    for c in range(len(confusion)):
        gold = sum(confusion[c])
        predicted = sum(row[c] for row in confusion)
        if gold + predicted == 0:
            continue
        scores.append(2 * confusion[c][c] / (gold + predicted))
    return sum(scores) / len(scores) if scores else 0.0


def finetunes_dir(home=None) -> Path:
    """<lab home>/finetunes, created if missing."""
    folder = lab_home(home) / FINETUNES_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def new_finetune_dir(home, run_id: str, task_slug: str) -> Path:
    """A fresh folder `<home>/finetunes/<run_id>--<task>--<YYYYmmdd-HHMMSS>` (with -2, -3, ... when taken)."""
    root = finetunes_dir(home)
    base = f"{_FOLDER_SAFE.sub('-', run_id).strip('-.')}--{task_slug}--{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, 1000):
        folder = root / (base if n == 1 else f"{base}-{n}")
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            continue
        return folder
    raise ValueError(f"could not create a fresh fine-tuning folder in {root}; is the lab home writable?")


def resolve_run_dir(run: str | os.PathLike, home=None) -> Path:
    """A run folder from a path, or from a run id under <home>/runs. ValueError when neither exists."""
    text = os.fspath(run)
    if not isinstance(text, str) or not text.strip():
        raise ValueError("choose a pretrained run (--run RUN_DIR)")
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve()
    if "/" not in text and os.sep not in text:
        candidate = lab_home(home) / "runs" / text
        if candidate.is_dir():
            return candidate.resolve()
    raise ValueError(f"no run folder at {text}: give a run's folder or its id under {lab_home(home) / 'runs'}")


# ------------------------------------------------------------------------------------------------ encoding
@dataclass
class _Encoded:
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


def _encode(task: Task, examples, tokenizer, vocab, family: str, max_len: int) -> list[_Encoded]:
    if family in RNN_FAMILIES:
        return _encode_unframed(task, examples, tokenizer, vocab, max_len)
    causal = family in CAUSAL_FAMILIES
    start, middle, end = ((vocab.bos_id, vocab.sep_id, vocab.eos_id) if causal
                          else (vocab.cls_id, vocab.sep_id, vocab.sep_id))
    out = []
    if task.kind == "token":
        for example in examples:
            ids, labels = encode_words(tokenizer, example.words, example.label)
            ids, labels = ids[: max_len - 2], labels[: max_len - 2]
            out.append(_Encoded([start, *ids, end], [0] * (len(ids) + 2), [IGNORE_INDEX, *labels, IGNORE_INDEX],
                                ids))
        return out
    texts = [example.text for example in examples]
    encoded_a = [e.ids for e in tokenizer.encode_batch(texts)]
    if task.kind == "pair":
        encoded_b = [e.ids for e in tokenizer.encode_batch([example.text_pair for example in examples])]
        for example, a, b in zip(examples, encoded_a, encoded_b):
            a, b = _truncate_pair(a, b, max_len - 3)
            ids = [start, *a, middle, *b, end]
            segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
            out.append(_Encoded(ids, segments, example.label, [*a, vocab.eos_id, *b]))
        return out
    for example, a in zip(examples, encoded_a):
        a = a[: max_len - 2]
        out.append(_Encoded([start, *a, end], [0] * (len(a) + 2), example.label, a))
    return out


def _encode_unframed(task: Task, examples, tokenizer, vocab, max_len: int) -> list[_Encoded]:
    """The RNN families' examples: the text's tokens alone (they never saw [CLS] or [SEP]); a pair is a [EOS] b,
    [EOS] being the document separator their pretraining read."""
    out = []
    if task.kind == "token":
        for example in examples:
            ids, labels = encode_words(tokenizer, example.words, example.label)
            out.append(_Encoded(ids[:max_len], [0] * len(ids[:max_len]), labels[:max_len], ids[:max_len]))
        return out
    encoded_a = [e.ids for e in tokenizer.encode_batch([example.text for example in examples])]
    if task.kind == "pair":
        encoded_b = [e.ids for e in tokenizer.encode_batch([example.text_pair for example in examples])]
        for example, a, b in zip(examples, encoded_a, encoded_b):
            a, b = _truncate_pair(a, b, max_len - 1)
            ids = [*a, vocab.eos_id, *b]
            out.append(_Encoded(ids, [0] * (len(a) + 1) + [1] * len(b), example.label, ids))
        return out
    return [_Encoded(a[:max_len] or [vocab.eos_id], [0] * max(1, len(a[:max_len])), example.label, a[:max_len])
            for example, a in zip(examples, encoded_a)]


@dataclass
class _Batch:
    input_ids: torch.Tensor  # (B, T) long, padded with [PAD]
    is_real: torch.Tensor  # (B, T) bool
    attention: torch.Tensor  # (B, T, T) bool, True = may attend
    position_ids: torch.Tensor  # (B, T), or (B, 2, T) for GLM
    segment_ids: torch.Tensor  # (B, T)
    labels: torch.Tensor  # (B,) or (B, T) long
    lm_targets: torch.Tensor  # (B, T): the next token at each real position (causal families' auxiliary loss)
    text_ids: list[torch.Tensor]  # the unframed texts (non-causal auxiliary loss)

    def to(self, device) -> "_Batch":
        return _Batch(*(getattr(self, f.name).to(device) if isinstance(getattr(self, f.name), torch.Tensor)
                        else getattr(self, f.name) for f in dataclasses.fields(self)))


def _collate(items: list[_Encoded], pad_id: int, causal: bool, two_d_positions: bool, token_task: bool) -> _Batch:
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
    return _Batch(input_ids, is_real, attention.contiguous(), position_ids, segment_ids, labels, lm_targets,
                  [torch.tensor(item.text_ids, dtype=torch.long) for item in items])


# ------------------------------------------------------------------------------------------------ the model
class FinetuneClassifier(nn.Module):
    """A pretrained FamilyModel (`base`, all of it kept: the auxiliary loss may need its heads) plus a task head on
    the hidden states of the backbone it reads (see the module docstring's table)."""

    def __init__(self, base: nn.Module, kind: str, n_labels: int, pooling: str):
        super().__init__()
        from lab_models.nn import SequenceClassificationHead, TokenClassificationHead

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

    def hidden(self, batch: _Batch) -> torch.Tensor:
        """(B, T, H): the encoder's output for MASS/T5; the one-stream forward pass for everyone else (XLNet and
        MPNet: their content stream; GLM: Part A)."""
        if self.rnn:  # ELMo's scalar mix (now trained), CoVe's [embedding; CoVe], ULMFiT's top LSTM, CVT's BiLSTM
            return self.base.representations(batch.input_ids)
        if self.family in ENCODER_DECODER:
            return self.backbone.encode(batch.input_ids, batch.attention, batch.position_ids, batch.segment_ids)
        return self.backbone(batch.input_ids, batch.attention, batch.position_ids, batch.segment_ids)

    def forward(self, batch: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
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


def _task_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if logits.dim() == 3:  # token task: (B, T, C)
        logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX)


class _AuxiliaryLoss:
    """λ L1: the causal LM loss on the same forward pass (gpt, gpt2), or the family's own pretraining loss on the
    task's text through its batch builder (everyone else)."""

    def __init__(self, model: FinetuneClassifier, settings, vocab, max_positions: int):
        from lab_models.objectives import objective_module
        from lab_models.objectives.common import BatchConfig

        self.model = model
        self.causal = model.family in CAUSAL_FAMILIES
        self.module = objective_module(model.family)
        self.batch_config = BatchConfig(settings, vocab)
        self.settings = settings
        self.max_positions = max_positions

    def __call__(self, batch: _Batch, hidden: torch.Tensor, step: int, seed: int) -> torch.Tensor:
        from lab_models.objectives.losses import sparse_token_loss

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
def _evaluate(model: FinetuneClassifier, batches: list[_Batch], n_labels: int, device, autocast: bool) -> dict:
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


# ------------------------------------------------------------------------------------------------ setup
@dataclass
class _Prepared:
    config: FinetuneConfig  # resolved
    out: Path
    task: Task
    run_dir: Path
    run_id: str
    family: str
    model: FinetuneClassifier
    device: torch.device
    train: list[_Encoded]
    validation: list[_Encoded]
    settings: object
    vocab: object
    pretrained_step: int


def _load_task(config: FinetuneConfig) -> Task:
    if config.task == "csv":
        return csv_task(config.csv_path, config.text_column, config.label_column, config.text_pair_column)
    return load_task(config.task)


def prepare(config: FinetuneConfig) -> _Prepared:
    """Check everything, build the model and encode the task. ValueError for anything a user can fix. Nothing is
    written, except that the output folder is created when `config.out` is None (to claim a fresh name)."""
    from lab_models.device import select_device
    from lab_models.inference import load_run

    run_dir = resolve_run_dir(config.run_dir, config.home)
    task = _load_task(config)
    run = load_run(run_dir)  # validates the folder and picks the weights
    base = copy.deepcopy(run.model)  # a private copy: the cached model may be serving the page
    seq_len = int(run.config.get("seq_len") or run.max_positions)
    train_config = run.config.get("train") if isinstance(run.config.get("train"), dict) else {}
    resolved = config.resolved(run.family, seq_len, run.max_positions, train_config.get("lr"))
    resolved = dataclasses.replace(resolved, run_dir=str(run_dir))
    device = select_device(resolved.device)
    if resolved.out is None:
        out = new_finetune_dir(config.home, run.run_id, task.slug)
    else:
        out = Path(resolved.out).expanduser().resolve()
    if (out / RESULT_FILE).exists():
        raise ValueError(f"{out} already holds a finished fine-tuning (result.json); choose another --out")
    resolved = dataclasses.replace(resolved, out=str(out))
    with torch.random.fork_rng(devices=[]):  # the head's init, from the seed, leaving the global generator alone
        torch.manual_seed(derive_seed(resolved.seed, "finetune-head") & 0x7FFFFFFF)
        model = FinetuneClassifier(base, task.kind, task.n_labels, resolved.pooling)
    model.requires_grad_(True)  # every weight is fine-tuned (pretraining froze the parts no objective used)
    model.to(device).train()
    train = _encode(task, task.train, run.tokenizer, run.vocab, run.family, resolved.max_len)
    validation = _encode(task, task.validation, run.tokenizer, run.vocab, run.family, resolved.max_len)
    return _Prepared(resolved, out, task, run_dir, run.run_id, run.family, model, device, train, validation,
                     run.settings, run.vocab, run.step)


# ------------------------------------------------------------------------------------------------ the loop
def finetune(config: FinetuneConfig, *, should_stop: Callable[[], bool] = lambda: False) -> dict:
    """Fine-tune as configured and return the result (also written to out/result.json). ValueError before anything
    is written for a bad configuration; an error while training writes status "failed" and is raised."""
    prepared = prepare(config)
    return run_prepared(prepared, should_stop=should_stop)


def run_prepared(p: _Prepared, *, should_stop: Callable[[], bool] = lambda: False) -> dict:
    cfg, out, model = p.config, p.out, p.model
    out.mkdir(parents=True, exist_ok=True)
    (out / runs.METRICS_FILE).unlink(missing_ok=True)
    causal = p.family in CAUSAL_FAMILIES
    two_d = p.family == "glm"
    token_task = p.task.kind == "token"
    pad_id = p.vocab.pad_id
    created = time.time()
    atomic_write_json(out / runs.CONFIG_FILE, {
        "kind": "finetune", "finetune": cfg.to_dict(), "family": p.family, "run_id": p.run_id,
        "run_dir": str(p.run_dir),
        "pretrained_step": p.pretrained_step, "task": p.task.summary(), "steps": cfg.steps,
        "num_parameters": model.num_parameters(), "device_used": str(p.device), "created": created,
        "torch_version": torch.__version__})
    runs.write_status(out, "running", step=0, total_steps=cfg.steps, message="fine-tuning")
    try:
        return _train(p, causal, two_d, token_task, pad_id, should_stop)
    except Exception as error:
        step = _last_step(out)
        logger.exception("fine-tuning failed after step %d", step)
        runs.write_status(out, "failed", step=step, total_steps=cfg.steps,
                          message=" ".join(f"{type(error).__name__}: {error}".split()))
        raise


def _last_step(out: Path) -> int:
    rows = runs.read_metrics(out)
    return int(rows[-1].get("step") or 0) if rows else 0


def _train(p: _Prepared, causal: bool, two_d: bool, token_task: bool, pad_id: int,
           should_stop: Callable[[], bool]) -> dict:
    cfg, out, model, device = p.config, p.out, p.model, p.device
    autocast = device.type == "cuda"
    optimizer = torch.optim.AdamW(parameter_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)
    auxiliary = _AuxiliaryLoss(model, p.settings, p.vocab, model.base.model_config.max_positions) \
        if cfg.lm_aux_weight > 0 else None
    validation = [_collate(p.validation[i:i + EVAL_BATCH_SIZE], pad_id, causal, two_d, token_task)
                  for i in range(0, len(p.validation), EVAL_BATCH_SIZE)]
    n_train = len(p.train)
    per_epoch = max(1, n_train // cfg.batch_size) if n_train >= cfg.batch_size else 1
    order: dict[int, list[int]] = {}

    def batch_indices(step: int) -> list[int]:
        """Epoch e is a permutation drawn from (seed, e); step s takes its slice (no example twice per epoch)."""
        epoch, slot = divmod(step - 1, per_epoch)
        if epoch not in order:
            order.clear()
            order[epoch] = torch.randperm(n_train, generator=generator_for(cfg.seed, "finetune-epoch", epoch)).tolist()
        chosen = order[epoch][slot * cfg.batch_size:(slot + 1) * cfg.batch_size]
        return chosen if chosen else order[epoch][: cfg.batch_size]

    started = time.perf_counter()
    last_status = 0.0
    interval = {"steps": 0, "loss": 0.0, "task": 0.0, "lm": 0.0, "correct": 0, "scored": 0}
    last_eval: dict | None = None
    step = 0
    logger.info("fine-tuning %s (%s) on %s: %d steps, %d train / %d validation examples, pooling %s, λ=%g",
                p.run_id, p.family, p.task.name, cfg.steps, n_train, len(p.validation), cfg.pooling, cfg.lm_aux_weight)
    stopped = bool(should_stop())
    while step < cfg.steps and not stopped:
        step += 1
        torch.manual_seed(derive_seed(cfg.seed, "finetune-dropout", step))
        batch = _collate([p.train[i] for i in batch_indices(step)], pad_id, causal, two_d, token_task).to(device)
        lr = linear_schedule(step, cfg.steps, cfg.lr, cfg.warmup_fraction)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast), \
                collect_routing(model) as routing:
            logits, hidden = model(batch)
            task_loss = _task_loss(logits, batch.labels)
            lm_loss = auxiliary(batch, hidden, step, cfg.seed) if auxiliary is not None else None
            adversarial = None if cfg.adversarial == "none" else finetune_step(  # (loss, task loss under delta)
                model, batch, logits, lambda out: _task_loss(out, batch.labels), cfg.adversarial, cfg.seed, step)
        total = task_loss if lm_loss is None else task_loss + cfg.lm_aux_weight * lm_loss
        total = total + routing_loss(routing)  # Switch layers keep their load-balancing loss (0 for dense models)
        if adversarial is not None:
            total = total + cfg.adversarial_weight * adversarial[0]
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if not math.isfinite(float(total.detach())):
            raise FloatingPointError(f"the fine-tuning loss became NaN or infinite at step {step}; lower --lr")
        with torch.no_grad():
            flat_logits = logits.reshape(-1, logits.shape[-1]) if token_task else logits
            flat_labels = batch.labels.reshape(-1)
            keep = flat_labels != IGNORE_INDEX
            interval["correct"] += int((flat_logits[keep].argmax(-1) == flat_labels[keep]).sum())
            interval["scored"] += int(keep.sum())
        interval["steps"] += 1
        interval["loss"] += float(total.detach())
        interval["task"] += float(task_loss.detach())
        interval["lm"] += float(lm_loss.detach()) if lm_loss is not None else 0.0
        for key, value in zip(("adversarial", "adversarial_task"), adversarial or ()):
            interval[key] = interval.get(key, 0.0) + float(value.detach())
        stopped = bool(should_stop())
        last = step == cfg.steps
        elapsed = time.perf_counter() - started
        if last or stopped or step % cfg.log_every == 0:
            n = interval["steps"]
            losses = {"task": interval["task"] / n}
            if auxiliary is not None:
                losses["lm"] = interval["lm"] / n
            if adversarial is not None:  # the trained adversarial loss, and the task loss under the perturbation
                losses.update(adversarial=interval["adversarial"] / n,
                              adversarial_task=interval["adversarial_task"] / n)
            runs.append_metrics(out, {"split": "train", "step": step, "loss": interval["loss"] / n, "losses": losses,
                                      "accuracy": interval["correct"] / max(1, interval["scored"]), "lr": lr,
                                      "elapsed_s": elapsed})
            interval = {"steps": 0, "loss": 0.0, "task": 0.0, "lm": 0.0, "correct": 0, "scored": 0}
        if last or stopped or step % cfg.eval_every == 0:
            last_eval = _evaluate(model, validation, p.task.n_labels, device, autocast)
            last_eval["step"] = step
            runs.append_metrics(out, {"split": "val", "step": step, "loss": last_eval["loss"],
                                      "accuracy": last_eval["accuracy"], "macro_f1": last_eval["macro_f1"],
                                      "elapsed_s": time.perf_counter() - started})
            logger.info("step %d: validation accuracy %.4f, macro F1 %.4f", step, last_eval["accuracy"],
                        last_eval["macro_f1"])
        if time.monotonic() - last_status >= STATUS_INTERVAL_S or step % cfg.eval_every == 0:
            runs.write_status(out, "running", step=step, total_steps=cfg.steps, message="fine-tuning",
                              loss=float(total.detach()), val_accuracy=last_eval["accuracy"] if last_eval else None)
            last_status = time.monotonic()
    if last_eval is None or last_eval["step"] != step:  # stopped before the first step
        last_eval = _evaluate(model, validation, p.task.n_labels, device, autocast)
        last_eval["step"] = step
    seconds = time.perf_counter() - started
    state = "finished" if step == cfg.steps else "stopped"
    result = {
        "finetune_id": out.name, "state": state, "task": p.task.name, "task_kind": p.task.kind,
        "run_id": p.run_id, "run_dir": str(p.run_dir), "family": p.family,
        "pooling": "per-token" if token_task else cfg.pooling,
        "lm_aux_weight": cfg.lm_aux_weight, "adversarial": cfg.adversarial,
        "accuracy": last_eval["accuracy"], "macro_f1": last_eval["macro_f1"],
        "validation_loss": last_eval["loss"], "majority_baseline": p.task.majority_baseline(), "steps": step,
        "total_steps": cfg.steps, "seconds": seconds, "num_parameters": model.num_parameters(),
        "label_names": list(p.task.label_names), "confusion": last_eval["confusion"], "scored": last_eval["scored"],
        "train_examples": len(p.train), "validation_examples": len(p.validation), "finished_at": time.time(),
    }
    if cfg.save_weights:
        runs.save_weights(model, out / runs.MODEL_FILE)
    atomic_write_json(out / RESULT_FILE, result)
    message = (f"finished {step} steps" if state == "finished" else f"stopped at step {step} of {cfg.steps}") + \
        f": validation accuracy {last_eval['accuracy']:.3f}"
    runs.write_status(out, state, step=step, total_steps=cfg.steps, message=message,
                      val_accuracy=last_eval["accuracy"])
    logger.info("%s: %s", out.name, message)
    return result


# ------------------------------------------------------------------------------------------------ results
def _summary(folder: Path) -> dict:
    config = runs.read_config(folder)
    status = runs.read_status(folder)
    result = runs.read_json(folder / RESULT_FILE)
    request = runs.read_json(folder / "job.json")
    settings = config.get("finetune") if isinstance(config.get("finetune"), dict) else {}
    state = status.get("state") or ("finished" if result else None)
    if state == "running" and not runs._pid_alive(status.get("pid")):
        state = "interrupted"
    task = result.get("task") or (config.get("task") or {}).get("name") or request.get("task")
    try:
        created = float(config.get("created") or request.get("created") or folder.stat().st_mtime)
    except OSError:
        created = 0.0
    return {
        "finetune_id": folder.name, "path": str(folder), "run_id": result.get("run_id") or config.get("run_id")
        or request.get("run_id"), "family": result.get("family") or config.get("family") or request.get("family"),
        "task": task, "pooling": result.get("pooling") or settings.get("pooling"),
        "lm_aux_weight": result.get("lm_aux_weight", settings.get("lm_aux_weight")), "state": state,
        "adversarial": result.get("adversarial", settings.get("adversarial", "none")),
        "message": status.get("message", ""), "step": status.get("step", result.get("steps", 0)),
        "total_steps": status.get("total_steps") or settings.get("steps"), "accuracy": result.get("accuracy"),
        "macro_f1": result.get("macro_f1"), "majority_baseline": result.get("majority_baseline"),
        "steps": result.get("steps"), "seconds": result.get("seconds"), "has_result": bool(result),
        "created": created,
    }


def list_finetunes(home=None) -> list[dict]:
    """Every fine-tuning folder under <home>/finetunes (with a config, status or result), newest first. Each row:
    finetune_id, path, run_id, family, task, pooling, lm_aux_weight, state (queued/running/finished/stopped/failed,
    or "interrupted" when status.json says running but its process is gone), message, step, total_steps, accuracy,
    macro_f1, majority_baseline, steps, seconds, has_result, created."""
    rows = []
    for folder in finetunes_dir(home).iterdir():
        if folder.is_dir() and is_inside(finetunes_dir(home), folder) and any(
                (folder / name).exists() for name in (runs.CONFIG_FILE, runs.STATUS_FILE, RESULT_FILE)):
            rows.append(_summary(folder))
    return sorted(rows, key=lambda row: row["created"], reverse=True)


def finetune_leaderboard(home=None, *, runs_filter=None, tasks=None):
    """A pandas DataFrame with one row per fine-tuning that has a result (finished, or stopped with the result so
    far), best accuracy first within each task. Columns: LEADERBOARD_COLUMNS (finetune, pretrained run, family,
    task, pooling, accuracy, macro F1, majority baseline, steps, seconds, state). `runs_filter` / `tasks`: keep only
    these pretrained run ids / task names."""
    import pandas as pd

    rows = []
    wanted_runs = set(runs_filter) if runs_filter else None
    wanted_tasks = set(tasks) if tasks else None
    for row in list_finetunes(home):
        if not row["has_result"]:
            continue
        if wanted_runs is not None and row["run_id"] not in wanted_runs:
            continue
        if wanted_tasks is not None and row["task"] not in wanted_tasks:
            continue
        rows.append({"finetune": row["finetune_id"], "pretrained run": row["run_id"], "family": row["family"],
                     "task": row["task"], "pooling": row["pooling"], "accuracy": row["accuracy"],
                     "macro F1": row["macro_f1"], "majority baseline": row["majority_baseline"],
                     "steps": row["steps"], "seconds": row["seconds"], "state": row["state"]})
    frame = pd.DataFrame(rows, columns=LEADERBOARD_COLUMNS)
    if len(frame):
        frame = frame.sort_values(["task", "accuracy"], ascending=[True, False], kind="stable").reset_index(drop=True)
    return frame


# ------------------------------------------------------------------------------------------------ the job manager
def finetune_command(config: FinetuneConfig) -> list[str]:
    """The worker command line for `config` (this Python, -m lab_models.finetune, its arguments)."""
    args = [sys.executable, "-m", "lab_models.finetune", "--run", config.run_dir, "--task", config.task]
    if config.out:
        args += ["--out", config.out]
    if config.home:
        args += ["--home", config.home]
    args += ["--steps", str(config.steps), "--pool", config.pooling, "--batch-size", str(config.batch_size),
             "--seed", str(config.seed), "--device", config.device,
             "--warmup-fraction", repr(float(config.warmup_fraction)),
             "--weight-decay", repr(float(config.weight_decay)), "--grad-clip", repr(float(config.grad_clip))]
    optional = (("--lm-aux-weight", config.lm_aux_weight), ("--lr", config.lr), ("--max-len", config.max_len),
                ("--eval-every", config.eval_every), ("--log-every", config.log_every), ("--csv", config.csv_path),
                ("--text-column", config.text_column), ("--label-column", config.label_column),
                ("--text-pair-column", config.text_pair_column))
    for flag, value in optional:
        if value is not None:
            args += [flag, repr(float(value)) if isinstance(value, float) else str(value)]
    if config.save_weights:
        args.append("--save-weights")
    if config.adversarial != "none":
        args += ["--adversarial", config.adversarial, "--adversarial-weight", repr(float(config.adversarial_weight))]
    return args


def start_finetune(manager, run: str, task: str, **options) -> str:
    """Queue a fine-tuning on `manager` (a lab_models.jobs.JobManager) like a training run; return its id (the
    folder name under <home>/finetunes). `run`: a run id (or folder); `task`: a built-in task or "csv" (then
    csv_path=, text_column=, label_column=[, text_pair_column=]); other options: FinetuneConfig's fields (steps,
    pooling, lm_aux_weight, batch_size, lr, seed, max_len, device, ...). Everything a user can get wrong (the run, its
    weights, the task, the CSV) is checked here, before anything is queued: ValueError.

    Progress: manager.status(id) ({"state", "step", "total_steps", ...}) and manager.metrics(id); stop:
    manager.stop(id) (SIGTERM: the worker evaluates, writes its result so far and ends "stopped")."""
    from lab_models.inference import weights_file

    home = manager.home
    run_dir = resolve_run_dir(run, home)
    allowed = {f.name for f in dataclasses.fields(FinetuneConfig)} - {"run_dir", "task", "out", "home"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ValueError(f"unknown fine-tuning option(s) {', '.join(unknown)}")
    options = {k: v for k, v in options.items() if v is not None}
    config = FinetuneConfig(run_dir=str(run_dir), task=task, home=str(home), **options)
    from lab_models.device import select_device

    select_device(config.device)  # ValueError for a device this machine does not have
    config_json = runs.read_config(run_dir)
    from lab_models.models import TRAINED_FAMILIES

    if config_json.get("family") not in TRAINED_FAMILIES or not isinstance(config_json.get("model"), dict):
        raise ValueError(f"{run_dir.name} is not a trained run this lab can fine-tune")
    _check_adversarial(config_json["family"], config.adversarial)  # an LSTM run cannot: say so before queueing
    weights_file(run_dir)  # ValueError when the run has no weights yet
    the_task = _load_task(config)  # a bad CSV fails here, not in the worker
    folder = new_finetune_dir(home, run_dir.name, the_task.slug)
    config = dataclasses.replace(config, out=str(folder))
    request = {"task": the_task.name, "run_id": run_dir.name, "family": config_json.get("family"),
               "steps": config.steps, "finetune": config.to_dict()}
    return manager.start_command("finetune", finetune_command(config), folder, device=config.device,
                                 total_steps=config.steps, request=request)


# ------------------------------------------------------------------------------------------------ the CLI
class _OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m lab_models.finetune", description="Fine-tune a pretrained run on a task.")
    p.add_argument("--run", help="the pretrained run's folder, or its id under <home>/runs")
    p.add_argument("--task", help=f"{', '.join(TASKS)}, or csv (with --csv)")
    p.add_argument("--out", help="the fine-tuning's folder (default: <home>/finetunes/<run>--<task>--<time>)")
    p.add_argument("--steps", type=int)
    p.add_argument("--pool", help="auto | first | last | mean (default auto)")
    p.add_argument("--lm-aux-weight", type=float, help="λ (default 0.5 for gpt/gpt2, else 0)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--max-len", type=int)
    p.add_argument("--device")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--log-every", type=int)
    p.add_argument("--warmup-fraction", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--grad-clip", type=float)
    p.add_argument("--csv", dest="csv_path")
    p.add_argument("--text-column")
    p.add_argument("--label-column")
    p.add_argument("--text-pair-column")
    p.add_argument("--save-weights", action="store_true")
    p.add_argument("--adversarial", help="none | freelb | smart (default none): adversarial training on the input "
                                         "embeddings")
    p.add_argument("--adversarial-weight", type=float, help="its weight in the loss (default 1)")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    return p


def config_from_args(args) -> FinetuneConfig:
    if not args.run:
        raise ValueError("--run is required: the pretrained run's folder or id")
    task = args.task or ("csv" if args.csv_path else None)
    if not task:
        raise ValueError(f"--task is required: one of {', '.join(TASKS)}, or --csv PATH with its columns")
    given = {"out": args.out, "steps": args.steps, "pooling": args.pool, "lm_aux_weight": args.lm_aux_weight,
             "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "max_len": args.max_len,
             "device": args.device, "eval_every": args.eval_every, "log_every": args.log_every,
             "warmup_fraction": args.warmup_fraction, "weight_decay": args.weight_decay, "grad_clip": args.grad_clip,
             "csv_path": args.csv_path, "text_column": args.text_column, "label_column": args.label_column,
             "text_pair_column": args.text_pair_column, "home": args.home, "adversarial": args.adversarial,
             "adversarial_weight": args.adversarial_weight}
    return FinetuneConfig(run_dir=args.run, task=task, save_weights=args.save_weights,
                          **{k: v for k, v in given.items() if v is not None})


def _setup_logging(out: Path) -> list[logging.Handler]:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler = logging.FileHandler(out / LOG_FILE, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for h in (stderr, handler):
        root.addHandler(h)
    return [stderr, handler]


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: list[str] | None = None) -> int:
    from lab_models.train import StopRequest

    stop = StopRequest()
    stop.install()  # from the start: a stop during setup ends the run before its first step
    out_hint = None
    try:
        args = build_parser().parse_args(argv)
        out_hint = args.out
        config = config_from_args(args)
        prepared = prepare(config)
    except ValueError as error:
        message = _one_line(error)
        if out_hint and Path(out_hint).expanduser().is_dir():  # a queued job's folder: tell the UI why
            try:
                runs.write_status(Path(out_hint).expanduser(), "failed", step=0, total_steps=0, message=message)
            except (OSError, ValueError):
                pass
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_ARGUMENT
    prepared.out.mkdir(parents=True, exist_ok=True)
    handlers = _setup_logging(prepared.out)
    try:
        run_prepared(prepared, should_stop=stop)
        return 0
    except Exception as error:  # noqa: BLE001 - reported in status.json (run_prepared) and on stderr
        print(f"error: {_one_line(f'{type(error).__name__}: {error}')}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        for handler in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()


if __name__ == "__main__":
    sys.exit(main())
