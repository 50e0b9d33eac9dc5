"""Headless training's configuration: the presets, `TrainConfig` (frozen, saved with every run as config.json
"train"), and the parsing of `--objective`, `--set` and `--model` values. Part of `python -m lab_models train`
(lab_models/training/run.py).

Presets (the model sizes are lab_models/nn/config.py's; everything here can be overridden by its flag):

    preset  corpus       vocab   seq_len  batch  steps   lr     warmup  eval/ckpt every  log every  eval batches
    tiny    synthetic      512       64     16      50   1e-3        5        25              1           2
    small   stdlib-docs   4000      128     16    2000   5e-4      100       200              5           8
    medium  stdlib-docs  16000      256     32   10000   3e-4      500       500             10          16
    base    stdlib-docs  32000      512     32   20000   1e-4     1000      1000             10          16

Why these: `tiny` is for tests and smoke runs (50 steps of a 2-layer, 64-wide model on the small synthetic corpus
train in seconds on a CPU). `small` is the CPU demo: a 4-layer, 256-wide model on CPython's own documentation
(English prose, ~1.3 MB) at BERT's 128-token phase-1 length; 4000 tokens keep the vocabulary projection cheap on a
CPU. `medium` and `base` are GPU sizes (base = BERT-base / GPT-2 small) at BERT's learning rate. The vocabulary is
the size the tokenizer is trained to; if the corpus cannot support it, it is lowered to what the corpus supports and
the run says so (config.json "tokenizer.note", train.log). The model's vocabulary is that plus the lab's special
tokens (lab_models/text/vocab.py). Other training defaults: AdamW betas (0.9, 0.98), eps 1e-8, weight decay 0.01 on
matrices only, gradient clipping at 1.0, linear warmup then cosine decay to 10% of the peak
(lab_models/training/engine.py). A family module may set its own `DEFAULT_LR`, used when --lr is not given: ULMFiT's
AWD-LSTM peaks at 5e-3 (at the presets' 1e-3 and below its tiny LM stays at the unigram plateau, loss 5.47, for its
whole first stage).

Overrides. `--objective NAME=WEIGHT` sets an objective's weight (0 turns it off; names per family in
lab_models/families.py, plus SpanBERT's and UniLM's optional nsp). `--set KEY=VALUE` sets a field of the family's
objective Settings, parsed by the field's type: bools true/false/1/0/yes/no, ints, floats, tuples as comma lists
(mix=0.33,0.33,0.17,0.17), fields of a nested settings dataclass as `name.field=value`, `none` for optional fields.
A weight of 0 for an objective that has a bool setting of the same name (nsp, sop) turns that setting off too, and
a setting turned off turns its objective's weight to 0 (lab_models/models/family.py). `--model KEY=VALUE` overrides a
ModelConfig field (d_model=128, dropout=0.0, ...; vocab_size comes from the tokenizer); for the RNN families
(elmo, cove, ulmfit, cvt) an RNNConfig field (embedding_size=128, hidden_size=256, n_layers=3, ...).
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field


from lab_models.messages import LabError, Message
from lab_models.objectives.settings import key_value, parse_value
from lab_models.training.engine import EngineConfig
from lab_models.nn.config import ModelConfig
from lab_models.models.switch import check_switch_overrides
from lab_models.training.performance import PerformanceConfig
from lab_models.models.family import model_config_class


PRESET_DEFAULTS: dict[str, dict] = {
    "tiny": dict(corpus="synthetic", vocab_size=512, seq_len=64, batch_size=16, steps=50, lr=1e-3, warmup_steps=5,
                 eval_every=25, checkpoint_every=25, log_every=1, eval_batches=2),
    "small": dict(corpus="stdlib-docs", vocab_size=4000, seq_len=128, batch_size=16, steps=2000, lr=5e-4,
                  warmup_steps=100, eval_every=200, checkpoint_every=200, log_every=5, eval_batches=8),
    "medium": dict(corpus="stdlib-docs", vocab_size=16000, seq_len=256, batch_size=32, steps=10000, lr=3e-4,
                   warmup_steps=500, eval_every=500, checkpoint_every=500, log_every=10, eval_batches=16),
    "base": dict(corpus="stdlib-docs", vocab_size=32000, seq_len=512, batch_size=32, steps=20000, lr=1e-4,
                 warmup_steps=1000, eval_every=1000, checkpoint_every=1000, log_every=10, eval_batches=16),
}
# The bounds of a run's step count and seed, wherever a run is asked for (the Train and Scaling tabs, the API, the CLIs,
# the zoo): beyond them the request is refused with a message (docs/reliability.md) instead of being queued. Ten million
# steps is 500 times the base preset's 20,000; a seed is a number that numpy and torch both take.
MAX_STEPS = 10_000_000
MAX_SEED = 2**32 - 1


def check_steps(steps, what: Message = Message("steps")) -> int:
    """`steps` as an int from 1 to MAX_STEPS, else a ValueError naming `what`.

    >>> check_steps(300), check_steps(300.0)
    (300, 300)
    """
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or steps != steps or steps != int(steps) \
            or not 1 <= steps <= MAX_STEPS:
        raise LabError("{what} must be a whole number from 1 to {max_steps:,}, got {steps!r}.",
                       what=what, max_steps=MAX_STEPS, steps=steps)
    return int(steps)


def check_seed(seed, what: Message = Message("seed")) -> int:
    """`seed` as an int from 0 to MAX_SEED, else a ValueError naming `what`."""
    if isinstance(seed, bool) or not isinstance(seed, (int, float)) or seed != seed or seed != int(seed) \
            or not 0 <= seed <= MAX_SEED:
        raise LabError("{what} must be a whole number from 0 to {max_seed:,}, got {seed!r}.",
                       what=what, max_seed=MAX_SEED, seed=seed)
    return int(seed)


RESUME_OVERRIDABLE = ("steps", "device", "eval_every", "checkpoint_every", "log_every", "on_nonfinite")
EXIT_BAD_ARGUMENT = 2
EXIT_FAILED = 1
STATUS_INTERVAL_S = 1.0  # status.json is rewritten at most this often between checkpoints and evaluations


@dataclass(frozen=True)
class TrainConfig:
    """Everything a run is made from, fully resolved (no None left except `home`). Saved as config.json "train"."""

    family: str
    out: str
    preset: str
    corpus: str
    steps: int
    seed: int
    device: str
    objectives: dict[str, float]  # every objective of the family with its weight (0 = off)
    settings: dict  # the family's objective Settings, as a dict (nested dataclasses as dicts)
    model: dict  # ModelConfig overrides given with --model
    tokenizer: str
    vocab_size: int  # requested tokenizer size (the trained one may be lower; see config.json "tokenizer")
    batch_size: int
    seq_len: int
    lr: float
    schedule: str
    warmup_steps: int
    eval_every: int
    eval_batches: int
    checkpoint_every: int
    log_every: int
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    min_lr_ratio: float = 0.1
    home: str | None = None
    performance: dict = field(default_factory=dict)  # PerformanceConfig overrides given with --perf
    addons: dict = field(default_factory=dict)  # add-on objective -> its resolved settings (objectives/addons.py)
    on_nonfinite: str = "fail"  # or "skip" (engine.NONFINITE_POLICIES)
    zoo: str | None = None  # the zoo this run belongs to (lab_models/experiments/zoo.py), or None
    init_from: str | None = None  # the run folder whose weights and tokenizer it starts from (training/init_from.py)
    text_column: str | None = None  # the text column of a corpus path's table files (None: the suggested one)
    # the training FLOPs the run may spend (--budget-flops); its steps are what the budget buys (`steps_for_budget`,
    # decided once the model's FLOPs per token are counted), None: `steps` as given
    budget_flops: float | None = None
    # the wall time the run may train (--budget-minutes); its steps are what the speed of its first steps says fit
    # (`steps_for_minutes`, decided while it trains and kept by a resume), None: `steps` or `budget_flops`
    budget_minutes: float | None = None

    def performance_config(self) -> PerformanceConfig:
        return PerformanceConfig.from_dict(self.performance)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def engine_config(self) -> EngineConfig:
        return EngineConfig(steps=self.steps, lr=self.lr, schedule=self.schedule, warmup_steps=self.warmup_steps,
                            min_lr_ratio=self.min_lr_ratio, weight_decay=self.weight_decay, grad_clip=self.grad_clip,
                            eval_every=self.eval_every, log_every=self.log_every,
                            checkpoint_every=self.checkpoint_every, seed=self.seed, on_nonfinite=self.on_nonfinite)


MAX_BUDGET_MINUTES = 7 * 24 * 60  # a week
CALIBRATION_STEPS = 20  # a wall-time budget times this many steps after the first (which pays for warming up)


def check_budget_flops(value, name: str = "--budget-flops") -> float:
    """A FLOP budget as a float; LabError naming `name` (the flag or field the value came from) unless it is a
    positive, finite number. The one check of a FLOP budget, for train, the zoo, sweeps and the API.

    >>> check_budget_flops(3e12), check_budget_flops(10 ** 13)
    (3000000000000.0, 10000000000000.0)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise LabError("{name} must be a positive number of FLOPs such as 1e13, got {value!r}.", name=name,
                       value=value)
    return float(value)


def check_budget_minutes(value, name: str = "--budget-minutes") -> float:
    """A wall-time budget in minutes as a float; LabError naming `name` unless it is above 0 and at most
    MAX_BUDGET_MINUTES. The one check of a minutes budget, for train, the zoo, sweeps and the API.

    >>> check_budget_minutes(2), check_budget_minutes(0.5)
    (2.0, 0.5)
    """
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not 0 < value <= MAX_BUDGET_MINUTES):
        raise LabError("{name} must be a number of minutes above 0 and at most {most:,}, such as 5, got {value!r}.",
                       name=name, most=MAX_BUDGET_MINUTES, value=value)
    return float(value)


def steps_for_minutes(budget_minutes: float, elapsed_s: float, step: int, seconds_per_step: float) -> int:
    """The whole steps a wall-time budget allows: `step` steps are done after `elapsed_s` seconds of training, and
    each further one takes `seconds_per_step`; at least one more step (whose evaluation ends the run), at most
    MAX_STEPS.

    >>> steps_for_minutes(1.0, elapsed_s=3.0, step=20, seconds_per_step=0.1)  # 57 s left: 570 more steps
    590
    >>> steps_for_minutes(0.01, elapsed_s=3.0, step=20, seconds_per_step=0.1)  # already spent: one more
    21
    """
    remaining = budget_minutes * 60.0 - elapsed_s
    more = int(remaining / seconds_per_step) if seconds_per_step > 0 and remaining > 0 else 0
    return min(MAX_STEPS, step + max(1, more))


def steps_for_budget(budget_flops: float, flops_per_token: float, tokens_per_step: int) -> int:
    """The optimizer steps a budget of training FLOPs buys: as many whole steps as fit (at least one), each costing
    the model's FLOPs per training token (lab_models/training/flops.py, counted on a real batch of the run) times the
    tokens one step feeds it (a micro-batch's tokens x gradient accumulation x processes). LabError when the budget
    buys more than MAX_STEPS, or when the FLOPs could not be counted.

    >>> steps_for_budget(1e12, flops_per_token=2e6, tokens_per_step=4096)  # 8.2e9 FLOPs a step
    122
    >>> steps_for_budget(1e6, flops_per_token=2e6, tokens_per_step=4096)  # less than one step: one
    1
    """
    if not flops_per_token or not tokens_per_step or not math.isfinite(flops_per_token):
        raise LabError("The model's FLOPs could not be counted, so a FLOP budget cannot be turned into steps: give "
                       "--steps instead of --budget-flops.")
    per_step = flops_per_token * tokens_per_step
    steps = max(1, int(budget_flops // per_step))
    if steps > MAX_STEPS:
        raise LabError("A budget of {budget:.3g} FLOPs buys {steps:,} steps of {per_step:.3g} FLOPs, more than the "
                       "{max_steps:,} a run may take: lower --budget-flops.", budget=budget_flops, steps=steps,
                       per_step=per_step, max_steps=MAX_STEPS)
    return steps


def parse_objectives(items: list[str]) -> dict[str, float]:
    weights: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise LabError("bad --objective {item!r}: write NAME=WEIGHT, e.g. --objective mlm=1.0", item=item)
        try:
            weight = float(text)
        except ValueError:
            raise LabError("bad --objective {item!r}: the weight must be a number, e.g. {name}=0.5",
                           item=item, name=name.strip()) from None
        if not math.isfinite(weight) or weight < 0:
            raise LabError("bad --objective {item!r}: the weight must be a finite number >= 0", item=item)
        weights[name.strip()] = weight
    return weights


def parse_model_overrides(items: list[str], family: str | None = None) -> dict:
    config_class = model_config_class(family) if family else ModelConfig
    hints = typing.get_type_hints(config_class)
    valid = [f.name for f in dataclasses.fields(config_class) if f.name != "vocab_size"]
    overrides = {}
    for item in items:
        key, text = key_value(item, "--model", "dropout=0.0")
        if family:
            check_switch_overrides(family, [key])  # the RNN families have no feed-forward to switch
        if key == "vocab_size":
            raise LabError("the model's vocab_size comes from the tokenizer: use --vocab-size N instead")
        if key not in valid:
            raise LabError("unknown model setting {key!r}; valid keys: {valid}", key=key, valid=', '.join(valid))
        try:
            overrides[key] = parse_value(text, hints[key])
        except ValueError as error:
            raise LabError("bad --model {key}={text}: {error}", key=key, text=text, error=error) from None
    return overrides
