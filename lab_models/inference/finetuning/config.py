"""Fine-tuning's configuration and small helpers: the constants, `FinetuneConfig` (frozen, saved with every
fine-tuning), `auto_pooling`, BERT's linear warmup/decay schedule, macro F1, and where fine-tunings live on disk.

lab_models/inference/finetuning/run.py's docstring has the recipe and the papers.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from dataclasses import dataclass
from lab_models.messages import LabError
from lab_models.home import lab_home
from lab_models.objectives.adversarial import FINETUNE_METHODS as ADVERSARIAL_METHODS
from lab_models.text.tasks import Task, csv_task, load_task, TASKS
from pathlib import Path
from lab_models.families import RNN_FAMILIES
from lab_models.training.config import check_seed, check_steps
from lab_models.training.device import DEVICE_CHOICES

MAX_FINETUNE_BATCH_SIZE = 4096  # a larger one is refused (docs/reliability.md); the tasks hold a few thousand examples

CAUSAL_FAMILIES = ("gpt", "gpt2")
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
    task: str  # a built-in task (lab_models.text.tasks.TASKS) or "csv"
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
                raise LabError("{name} must be a non-empty string, got {value!r}", name=name, value=value)
        if self.task != "csv" and self.task not in TASKS:
            raise LabError("unknown task {task!r}: choose one of {tasks}, or csv with a CSV file",
                           task=self.task, tasks=', '.join(TASKS))
        if self.task == "csv":
            if not self.csv_path or not self.text_column or not self.label_column:
                raise LabError("a CSV task needs --csv PATH, --text-column NAME and --label-column NAME")
        elif self.csv_path is not None:
            raise LabError("--csv goes with --task csv (or no --task), not with the built-in task {task!r}",
                           task=self.task)
        if self.pooling not in POOLINGS:
            raise LabError("unknown pooling {pooling!r}: choose one of {poolings}",
                           pooling=self.pooling, poolings=', '.join(POOLINGS))
        if self.adversarial not in ADVERSARIAL_METHODS or not _real(self.adversarial_weight, minimum=0.0):
            raise LabError("adversarial must be one of {adversarial_methods} with a finite weight >= 0, "
                           "got {adversarial!r} and {adversarial_weight!r}",
                           adversarial_methods=', '.join(ADVERSARIAL_METHODS), adversarial=self.adversarial,
                           adversarial_weight=self.adversarial_weight)
        if self.lm_aux_weight is not None and not _real(self.lm_aux_weight, minimum=0.0):
            raise LabError("lm_aux_weight must be a finite number >= 0, got {lm_aux_weight!r}",
                           lm_aux_weight=self.lm_aux_weight)
        for name, minimum in (("steps", 1), ("batch_size", 1), ("seed", 0), ("max_len", 4), ("eval_every", 1),
                              ("log_every", 1)):
            value = getattr(self, name)
            if value is None and name in ("max_len", "eval_every", "log_every"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise LabError("{option} must be a whole number >= {minimum}, got {value!r}",
                               option=name.replace('_', '-'), minimum=minimum, value=value)
        check_steps(self.steps)  # and at most MAX_STEPS, as a pretraining run
        check_seed(self.seed)
        if self.batch_size > MAX_FINETUNE_BATCH_SIZE:
            raise LabError("batch-size must be at most {max_finetune_batch_size:,}, got {batch_size:,}",
                           max_finetune_batch_size=MAX_FINETUNE_BATCH_SIZE, batch_size=self.batch_size)
        if self.lr is not None and (not _real(self.lr, minimum=0.0) or self.lr <= 0):
            raise LabError("lr must be a positive number such as 5e-4, got {lr!r}", lr=self.lr)
        if not _real(self.warmup_fraction, minimum=0.0) or self.warmup_fraction >= 1:
            raise LabError("warmup_fraction must be in [0, 1), got {warmup_fraction!r}",
                           warmup_fraction=self.warmup_fraction)
        for name in ("weight_decay", "grad_clip"):
            if not _real(getattr(self, name), minimum=0.0):
                raise LabError("{option} must be a finite number >= 0, got {value!r}",
                               option=name.replace('_', '-'), value=getattr(self, name))

        if self.device not in DEVICE_CHOICES:
            raise LabError("unknown device {device!r}: choose one of {device_choices}",
                           device=self.device, device_choices=', '.join(DEVICE_CHOICES))

    def resolved(self, family: str, seq_len: int, max_positions: int, pretrain_lr: float | None = None
                 ) -> "FinetuneConfig":
        """A copy with pooling, lm_aux_weight, lr, max_len, eval_every and log_every decided for this run."""
        causal = family in CAUSAL_FAMILIES
        pooling = self.pooling if self.pooling != "auto" else auto_pooling(family)
        weight = self.lm_aux_weight
        if weight is None:
            weight = DEFAULT_LM_AUX_WEIGHT if causal else 0.0
        if family in RNN_FAMILIES and weight > 0:
            raise LabError("the auxiliary LM loss (λ = {weight}) is for the transformer families; fine-tune a "
                           "{family} run with λ = 0 (empty)", weight=weight, family=family)
        check_adversarial(family, self.adversarial)
        max_len = self.max_len if self.max_len is not None else min(int(seq_len or max_positions), max_positions)
        if max_len > max_positions:
            raise LabError("--max-len {max_len} is longer than the run's {max_positions} positions",
                           max_len=max_len, max_positions=max_positions)
        lr = self.lr
        if lr is None:
            lr = pretrain_lr if _real(pretrain_lr, 0.0) and pretrain_lr > 0 else DEFAULT_LR
        return dataclasses.replace(
            self, pooling=pooling, lm_aux_weight=float(weight), max_len=int(max_len), lr=float(lr),
            eval_every=self.eval_every or max(1, self.steps // 10),
            log_every=self.log_every or max(1, self.steps // 100))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def check_adversarial(family: str, method: str) -> None:
    if family in RNN_FAMILIES and method != "none":
        raise LabError("adversarial training ({method}) perturbs a Transformer's token embeddings; fine-tune the "
                       "{family} run without it", method=method, family=family)


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
    raise LabError("could not create a fresh fine-tuning folder in {root}; is the lab home writable?", root=root)


def resolve_run_dir(run: str | os.PathLike, home=None) -> Path:
    """A run folder from a path, or from a run id under <home>/runs. ValueError when neither exists."""
    text = os.fspath(run)
    if not isinstance(text, str) or not text.strip():
        raise LabError("choose a pretrained run (--run RUN_DIR)")
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve()
    if "/" not in text and os.sep not in text:
        candidate = lab_home(home) / "runs" / text
        if candidate.is_dir():
            return candidate.resolve()
    raise LabError("no run folder at {text}: give a run's folder or its id under {path}",
                   text=text, path=lab_home(home) / 'runs')


def load_config_task(config: FinetuneConfig) -> Task:
    if config.task == "csv":
        return csv_task(config.csv_path, config.text_column, config.label_column, config.text_pair_column)
    return load_task(config.task)
