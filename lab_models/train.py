"""Headless training: `python -m lab_models.train` (CONTRACT.md section 2), its `TrainConfig`, and the presets.

    python -m lab_models.train --family NAME --out DIR [--preset tiny|small|medium|base] [--corpus NAME_OR_PATH]
        [--steps N] [--seed S] [--device auto|cpu|cuda|mps] [--objective NAME=WEIGHT ...] [--set KEY=VALUE ...]
        [--model KEY=VALUE ...] [--tokenizer KIND] [--vocab-size N] [--batch-size N] [--seq-len N] [--lr X]
        [--schedule cosine|constant] [--eval-every N] [--checkpoint-every N] [--resume] [--home DIR]
        [--warmup-steps N] [--log-every N] [--eval-batches N] [--weight-decay X] [--grad-clip X]
        [--on-nonfinite fail|skip] [--zoo NAME]

The same command runs under `torchrun --nproc_per_node K` (DistributedDataParallel; gloo on CPU, nccl on CUDA): each
rank draws its own batches, rank 0 alone writes files, logged numbers are averaged over ranks. The batch size is per
rank. A bad argument exits with status 2 and one line on stderr ("error: ...").

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
tokens (lab_models/vocab.py). Other training defaults: AdamW betas (0.9, 0.98), eps 1e-8, weight decay 0.01 on
matrices only, gradient clipping at 1.0, linear warmup then cosine decay to 10% of the peak (lab_models/engine.py).
A family module may set its own `DEFAULT_LR`, used when --lr is not given: ULMFiT's AWD-LSTM peaks at 5e-3 (at the
presets' 1e-3 and below its tiny LM stays at the unigram plateau, loss 5.47, for its whole first stage).

Overrides. `--objective NAME=WEIGHT` sets an objective's weight (0 turns it off; names per family in
lab_models/families.py, plus SpanBERT's and UniLM's optional nsp). `--set KEY=VALUE` sets a field of the family's
objective Settings, parsed by the field's type: bools true/false/1/0/yes/no, ints, floats, tuples as comma lists
(mix=0.33,0.33,0.17,0.17), fields of a nested settings dataclass as `name.field=value`, `none` for optional fields.
A weight of 0 for an objective that has a bool setting of the same name (nsp, sop) turns that setting off too, and
a setting turned off turns its objective's weight to 0 (lab_models/models.py). `--model KEY=VALUE` overrides a
ModelConfig field (d_model=128, dropout=0.0, ...; vocab_size comes from the tokenizer); for the RNN families
(elmo, cove, ulmfit, cvt) an RNNConfig field (embedding_size=128, hidden_size=256, n_layers=3, ...).

The RNN families (lab_models/rnn/) run through the same loop. Where their data is not corpus windows (CoVe's
sentence pairs, ULMFiT's three stages, CVT's labelled and unlabelled minibatches), the family module's
`batch_source(context)` replaces PackedBatches, and `tokenizer_corpus(corpus, settings)` adds what the tokenizer must
know (CoVe: the Chinese side of the pairs). A model's StepPlan record (ULMFiT's `stage`, `stage_name`, `lrs`) is
written into each train row of metrics.jsonl.

Translation (MASS, T5): `--objective translation=W` adds English -> Chinese translation of the synthetic corpus's
sentence pairs (whatever --corpus is; the pairs are built in, see lab_models/objectives/translation.py) to every step:
batch_size pair rows beside the denoising rows, loss = denoising + W * translation. `--objective seq2seq=0` (MASS)
or `--objective span_corruption=0` (T5) with translation on trains translation alone. With translation on, the
tokenizer is also trained on the pairs (their Chinese side) unless the corpus is the synthetic one, and, for T5, on
its task prefix; config.json records it all under "translation".

Add-on objectives (lab_models/objectives/addons.py): `--objective contrastive=W`, `adversarial=W` or
`back_translation=W` for the families that support them, tuned with `--set NAME.SETTING=VALUE`; their settings are
saved under "train.addons", their facts under config.json "addons", their numbers in the validation rows.

Resuming. `--resume` continues the run in DIR from its newest checkpoint with its saved configuration
(config.json "train"); the other arguments are ignored except --steps (to train longer; a changed total changes the
cosine schedule after the checkpoint), --device, --eval-every, --checkpoint-every and --log-every. The batches of
step s depend only on (seed, s, rank), and the checkpoint holds the exact weights and AdamW state, so a resumed run
repeats the same trajectory (exactly on a CPU). A DIR with a config.json but no checkpoint (a run killed before its
first checkpoint) starts over, with or without --resume; a DIR with a checkpoint and no --resume is an error.

Signals. SIGTERM or SIGINT: the current step finishes, a checkpoint and model.safetensors are written, status.json
says "stopped", the exit status is 0. A NaN/inf loss: status "failed", message "non-finite loss at step N: ...", exit
status 1, and the last good checkpoint is kept (non-finite weights are never checkpointed); `--on-nonfinite skip`
instead drops such a step's update, logs it and goes on (lab_models/engine.py). A full disk: status "failed",
message "disk full: ...", the last complete checkpoint intact. Any other exception: status "failed" with the message.
The run folder's files are described in lab_models/runs.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import resource
import signal
import sys
import time
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from lab_models import runs
from lab_models.corpora import BUILTIN_CORPORA, Corpus, load_corpus
from lab_models.data import PackedBatches, build_tokenizer, encode_stream
from lab_models.device import DEVICE_CHOICES, select_device
from lab_models.engine import (SCHEDULES, EngineConfig, EvalEvent, NonFiniteLossError, StepEvent, StopEvent, Trainer,
                               derive_seed, generator_for)
from lab_models.families import family_spec
from lab_models.home import lab_home
from lab_models.nn.config import PRESETS, ModelConfig
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.switch import check_switch_overrides, switch_metrics
from lab_models.performance import PerformanceConfig, parse_performance_overrides
from lab_models.tokenization import TOKENIZER_KINDS, load_tokenizer_file
from lab_models.vocab import prepare_tokenizer, token_byte_lengths

logger = logging.getLogger("lab_models.train")

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
    zoo: str | None = None  # the zoo this run belongs to (lab_models/zoo.py), or None

    def performance_config(self) -> PerformanceConfig:
        return PerformanceConfig.from_dict(self.performance)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def engine_config(self) -> EngineConfig:
        return EngineConfig(steps=self.steps, lr=self.lr, schedule=self.schedule, warmup_steps=self.warmup_steps,
                            min_lr_ratio=self.min_lr_ratio, weight_decay=self.weight_decay, grad_clip=self.grad_clip,
                            eval_every=self.eval_every, log_every=self.log_every,
                            checkpoint_every=self.checkpoint_every, seed=self.seed, on_nonfinite=self.on_nonfinite)


# ------------------------------------------------------------------------------------------------ parsing values
def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def parse_value(text: str, annotation):
    """`text` converted to `annotation` (bool, int, float, str, tuples, optionals).

    >>> parse_value("false", bool), parse_value("0.2", float), parse_value("0.5,0.5", tuple[float, ...])
    (False, 0.2, (0.5, 0.5))
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) < len(args) and text.strip().lower() in ("none", "null"):
            return None
        errors = []
        for option in options:
            try:
                return parse_value(text, option)
            except ValueError as error:
                errors.append(str(error))
        raise ValueError("; ".join(errors))
    if annotation is bool:
        return _parse_bool(text)
    if annotation is int:
        try:
            return int(text.strip())
        except ValueError:
            raise ValueError(f"expected a whole number, got {text!r}") from None
    if annotation is float:
        try:
            return float(text.strip())
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    if annotation is str:
        return text
    if origin is tuple:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if args and args[-1] is Ellipsis:
            return tuple(parse_value(part, args[0]) for part in parts)
        if args and len(parts) != len(args):
            raise ValueError(f"expected {len(args)} comma-separated values, got {text!r}")
        return tuple(parse_value(part, kind) for part, kind in zip(parts, args or [str] * len(parts)))
    raise ValueError(f"cannot parse a value of type {annotation}")


def _key_value(item: str, flag: str, example: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise ValueError(f"bad {flag} {item!r}: write KEY=VALUE, e.g. {flag} {example}")
    return key.strip(), value.strip()


def _settings_keys(cls) -> list[str]:
    hints = typing.get_type_hints(cls)
    keys = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            keys += [f"{f.name}.{sub.name}" for sub in dataclasses.fields(kind)]
        else:
            keys.append(f.name)
    return keys


def settings_with_overrides(family: str, items: list[str], base=None):
    """The family's Settings (paper defaults, or `base`) with `--set KEY=VALUE` items applied."""
    cls = objective_module(family).Settings
    base = cls() if base is None else base
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    valid = _settings_keys(cls)
    top: dict = {}
    nested: dict[str, dict] = {}
    for item in items:
        key, text = _key_value(item, "--set", "mask_rate=0.2")
        head, dot, sub = key.partition(".")
        kind = hints.get(head)
        is_nested = isinstance(kind, type) and dataclasses.is_dataclass(kind)
        if head not in names or bool(dot) != is_nested or (
                is_nested and sub not in {f.name for f in dataclasses.fields(kind)}):
            hint = f"valid keys: {', '.join(valid)}" if valid else f"{family} has no settings"
            raise ValueError(f"unknown setting {key!r} for {family}; {hint}")
        annotation = typing.get_type_hints(kind)[sub] if is_nested else kind
        try:
            value = parse_value(text, annotation)
        except ValueError as error:
            raise ValueError(f"bad --set {key}={text}: {error}") from None
        if is_nested:
            nested.setdefault(head, {})[sub] = value
        else:
            top[key] = value
    for head, subs in nested.items():
        top[head] = dataclasses.replace(getattr(base, head), **subs)
    try:
        return dataclasses.replace(base, **top)
    except TypeError as error:
        raise ValueError(f"bad settings for {family}: {error}") from None


def settings_to_dict(settings) -> dict:
    return {f.name: (dataclasses.asdict(v) if dataclasses.is_dataclass(v := getattr(settings, f.name)) else v)
            for f in dataclasses.fields(settings)}


def settings_from_dict(family: str, values: dict):
    """The inverse of `settings_to_dict` (JSON lists become tuples, nested dicts dataclasses). A field the saved dict
    lacks takes the value runs saved before it existed used (the module's SAVED_BEFORE), else its default."""
    cls = objective_module(family).Settings
    values = {**getattr(objective_module(family), "SAVED_BEFORE", {}), **values}
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        value, kind = values[f.name], hints[f.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind) and isinstance(value, dict):
            value = kind(**value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def parse_objectives(items: list[str]) -> dict[str, float]:
    weights: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise ValueError(f"bad --objective {item!r}: write NAME=WEIGHT, e.g. --objective mlm=1.0")
        try:
            weight = float(text)
        except ValueError:
            raise ValueError(f"bad --objective {item!r}: the weight must be a number, e.g. {name.strip()}=0.5") from None
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"bad --objective {item!r}: the weight must be a finite number >= 0")
        weights[name.strip()] = weight
    return weights


def parse_model_overrides(items: list[str], family: str | None = None) -> dict:
    from lab_models.models import model_config_class

    config_class = model_config_class(family) if family else ModelConfig
    hints = typing.get_type_hints(config_class)
    valid = [f.name for f in dataclasses.fields(config_class) if f.name != "vocab_size"]
    overrides = {}
    for item in items:
        key, text = _key_value(item, "--model", "dropout=0.0")
        if family:
            check_switch_overrides(family, [key])  # the RNN families have no feed-forward to switch
        if key == "vocab_size":
            raise ValueError("the model's vocab_size comes from the tokenizer: use --vocab-size N instead")
        if key not in valid:
            raise ValueError(f"unknown model setting {key!r}; valid keys: {', '.join(valid)}")
        try:
            overrides[key] = parse_value(text, hints[key])
        except ValueError as error:
            raise ValueError(f"bad --model {key}={text}: {error}") from None
    return overrides


# ------------------------------------------------------------------------------------------------ the parser
class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (the contract), not usage + error."""

    def error(self, message):
        raise ValueError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="python -m lab_models.train", description="Train one pretraining family headlessly.")
    p.add_argument("--family", help="gpt, gpt2, bert, roberta, albert, spanbert, electra, unilm, xlnet, mpnet, "
                                    "mass, glm, t5, elmo, cove, ulmfit or cvt")
    p.add_argument("--out", required=True, help="the run folder")
    p.add_argument("--preset", default="tiny", help="tiny | small | medium | base (default tiny)")
    p.add_argument("--corpus", help="a built-in or imported corpus name, or a path (default: per preset)")
    p.add_argument("--steps", type=int)
    p.add_argument("--seed", type=int, help="default 0")
    p.add_argument("--device", help="auto | cpu | cuda | mps (default auto)")
    p.add_argument("--objective", action="append", default=[], metavar="NAME=WEIGHT")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings")
    p.add_argument("--model", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--tokenizer", help="bpe | byte_bpe | wordpiece | unigram (default: the family's)")
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--schedule", help="cosine | constant (default cosine)")
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--eval-batches", type=int)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--log-every", type=int)
    p.add_argument("--weight-decay", type=float, help="default 0.01")
    p.add_argument("--grad-clip", type=float, help="default 1.0 (0 = off)")
    p.add_argument("--perf", action="append", default=[], metavar="KEY=VALUE",
                   help="speed settings (lab_models/performance.py): precision=auto|bf16|fp32, fused_adamw, compile, "
                        "attention=sdpa|flex, grad_accum=K, activation_checkpointing, prefetch")
    p.add_argument("--on-nonfinite", help="fail (default): a NaN/inf loss fails the run; skip: drop that step")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    p.add_argument("--zoo", help="tag the run as a member of this zoo (python -m lab_models.zoo sets it)")
    return p


def _positive(name: str, value, minimum: int = 1):
    if value is not None and value < minimum:
        raise ValueError(f"--{name.replace('_', '-')} must be at least {minimum}, got {value}")


def _corpus_reference(name_or_path: str, corpus: Corpus) -> str:
    """What config.json records: a built-in or imported name as given, a path made absolute."""
    if corpus.source == "path":
        return str(Path(name_or_path).expanduser().resolve())
    return name_or_path


def fit_row_length(family: str, settings, seq_len: int, max_positions: int, model_overrides: dict) -> dict:
    """Check that a row of `seq_len` tokens fits the family's batches; returns `model_overrides`, with max_positions
    raised where the batch builder lengthens rows.

    - GLM adds a [MASK] and an [S] per span (Parts A and B) and MPNet one [MASK] slot per predicted token, so their
      inputs are longer than seq_len (their position ids stay below seq_len). The backbone accepts no input longer
      than max_positions, so max_positions is raised to fit (config.json records it under train.model), unless
      --model max_positions was given: then too small is an error.
    - T5 needs one sentinel per noise span (+1); the lab's tokenizers have vocab.NUM_LAB_SENTINELS.
    """
    module = objective_module(family)
    longest = module.max_length(seq_len, settings) if hasattr(module, "max_length") else seq_len
    if longest > max_positions:
        if "max_positions" in model_overrides:
            raise ValueError(f"{family} turns a {seq_len}-token row into up to {longest} inputs, more than "
                             f"max_positions={max_positions}: pass --model max_positions={longest} or lower --seq-len")
        logger.info("%s: max_positions raised from %d to %d (rows of %d tokens become up to %d inputs)", family,
                    max_positions, longest, seq_len, longest)
        model_overrides = {**model_overrides, "max_positions": longest}
    if hasattr(module, "sentinels_needed"):
        from lab_models.vocab import NUM_LAB_SENTINELS

        needed = module.sentinels_needed(seq_len, settings)
        if needed > NUM_LAB_SENTINELS:
            raise ValueError(f"{family} corrupts a {seq_len}-token row with {needed} sentinels, but the lab's "
                             f"tokenizers have {NUM_LAB_SENTINELS}: lower --seq-len or raise "
                             f"mean_noise_span_length (--set mean_noise_span_length=...)")
    return model_overrides


def config_from_args(args) -> tuple[TrainConfig, Corpus]:
    """Validate the arguments of a fresh run and resolve every default. ValueError with a one-line message."""
    from lab_models.models import TRAINED_FAMILIES, family_model_config, resolve_objective_weights

    if not args.family:
        raise ValueError("--family is required (one of " + ", ".join(TRAINED_FAMILIES) + ")")
    if args.family not in TRAINED_FAMILIES:
        raise ValueError(f"unknown or untrainable family {args.family!r}: choose one of {', '.join(TRAINED_FAMILIES)}")
    if args.preset not in PRESET_DEFAULTS:
        raise ValueError(f"unknown preset {args.preset!r}: choose one of {', '.join(PRESET_DEFAULTS)}")
    device = args.device or "auto"
    schedule = args.schedule or "cosine"
    seed = 0 if args.seed is None else args.seed
    weight_decay = 0.01 if args.weight_decay is None else args.weight_decay
    grad_clip = 1.0 if args.grad_clip is None else args.grad_clip
    if device not in DEVICE_CHOICES:
        raise ValueError(f"unknown device {device!r}: choose one of {', '.join(DEVICE_CHOICES)}")
    select_device(device)  # ValueError when the named device is not there
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}: choose one of {', '.join(SCHEDULES)}")
    for name in ("steps", "vocab_size", "batch_size", "log_every", "eval_batches"):
        _positive(name, getattr(args, name))
    _positive("seq_len", args.seq_len, 2)
    for name in ("warmup_steps", "eval_every", "checkpoint_every", "seed"):
        _positive(name, getattr(args, name), 0)
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise ValueError(f"--lr must be a positive number such as 3e-4, got {args.lr}")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"--weight-decay must be >= 0, got {weight_decay}")
    if not (math.isfinite(grad_clip) and grad_clip >= 0):
        raise ValueError(f"--grad-clip must be >= 0 (0 turns clipping off), got {grad_clip}")
    family = args.family
    spec = family_spec(family)
    tokenizer = args.tokenizer or spec.tokenizer
    if tokenizer not in TOKENIZER_KINDS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}: choose one of {', '.join(TOKENIZER_KINDS)}")

    from lab_models.objectives.addons import resolve_settings, split_settings

    explicit_weights = parse_objectives(args.objective)
    family_items, addon_items = split_settings(args.settings)  # "contrastive.temperature=0.1" is an add-on's
    settings = settings_with_overrides(family, family_items)
    bools = {f.name for f in dataclasses.fields(settings) if isinstance(getattr(settings, f.name), bool)}
    switched_off = {name: False for name, weight in explicit_weights.items() if weight == 0 and name in bools}
    if switched_off:
        settings = dataclasses.replace(settings, **switched_off)
    weights = resolve_objective_weights(family, settings, explicit_weights)
    addons = resolve_settings(family, weights, addon_items)

    defaults = PRESET_DEFAULTS[args.preset]

    module_defaults = {"lr": getattr(objective_module(family), "DEFAULT_LR", None)}

    def pick(name):
        value = getattr(args, name, None)
        if value is None and module_defaults.get(name) is not None:
            return module_defaults[name]
        return defaults[name] if value is None else value

    model_overrides = parse_model_overrides(args.model, family)
    probe = family_model_config(family, args.preset, 1000, settings=settings, **model_overrides)
    seq_len = pick("seq_len")
    if seq_len > probe.max_positions:
        raise ValueError(f"--seq-len {seq_len} is longer than the model's {probe.max_positions} positions; lower it "
                         f"or pass --model max_positions={seq_len}")
    model_overrides = fit_row_length(family, settings, seq_len, probe.max_positions, model_overrides)
    home = args.home
    corpus_name = args.corpus or defaults["corpus"]
    corpus = load_corpus(corpus_name, home=lab_home(home))
    config = TrainConfig(
        family=family, out=str(Path(args.out).expanduser().resolve()), preset=args.preset,
        corpus=_corpus_reference(corpus_name, corpus), steps=pick("steps"), seed=seed, device=device,
        objectives=weights, settings=settings_to_dict(settings), model=model_overrides, tokenizer=tokenizer,
        vocab_size=pick("vocab_size"), batch_size=pick("batch_size"), seq_len=seq_len, lr=pick("lr"),
        schedule=schedule, warmup_steps=pick("warmup_steps"), eval_every=pick("eval_every"),
        eval_batches=pick("eval_batches"), checkpoint_every=pick("checkpoint_every"), log_every=pick("log_every"),
        weight_decay=weight_decay, grad_clip=grad_clip, on_nonfinite=args.on_nonfinite or "fail",
        home=str(Path(home).expanduser().resolve()) if home else None,
        performance=parse_performance_overrides(args.perf), addons=addons, zoo=args.zoo or None,
    )
    config.performance_config().check_device(select_device(device))
    config.engine_config()  # validates the combination
    return config, corpus


def config_from_run(args) -> tuple[TrainConfig, Corpus]:
    """The saved configuration of the run in --out, with the few arguments a resume may change."""
    out = Path(args.out).expanduser().resolve()
    saved = runs.read_config(out).get("train")
    if not isinstance(saved, dict):
        raise ValueError(f"nothing to resume in {out}: it has no config.json from an earlier run")
    if args.family and args.family != saved.get("family"):
        raise ValueError(f"{out} holds a {saved.get('family')} run, not {args.family}; choose another --out")
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {k: v for k, v in saved.items() if k in known}
    values["out"] = str(out)
    for name in RESUME_OVERRIDABLE:
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    if getattr(args, "perf", None):  # speed settings may change on a resume (a GPU after a CPU, more accumulation)
        values["performance"] = {**values.get("performance", {}), **parse_performance_overrides(args.perf)}
    _positive("steps", values.get("steps"))
    select_device(values.get("device", "auto"))
    try:
        config = TrainConfig(**values)
        config.engine_config()
    except TypeError as error:
        raise ValueError(f"{out}/config.json is not a run configuration this version can resume ({error})") from None
    corpus = load_corpus(config.corpus, home=lab_home(config.home))
    return config, corpus


# ------------------------------------------------------------------------------------------------ distributed
@dataclass
class _World:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _init_world(device_choice: str) -> _World:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = select_device(device_choice)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(device)
    world = _World(rank, world_size, local_rank, device)
    if world.distributed:
        if not dist.is_available():
            raise ValueError("WORLD_SIZE > 1 but this torch has no torch.distributed")
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, **({"device_id": device} if device.type == "cuda" else {}))
    return world


def _broadcast_text(world: _World, text: str | None) -> str | None:
    """Rank 0's `text` on every rank (None stays None)."""
    if not world.distributed:
        return text
    box = [text]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _all_ranks_true(world: _World, value: bool) -> bool:
    if not world.distributed:
        return value
    flag = torch.tensor([0.0 if value else 1.0], device=world.device if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item() == 0.0


# ------------------------------------------------------------------------------------------------ signals
class StopRequest:
    """Set by SIGTERM/SIGINT; the loop checks it after every step. Repeated signals change nothing (torchrun and a
    job manager may both forward one)."""

    def __init__(self):
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            logger.info("received %s: finishing the current step, then checkpointing", self.signal_name)

    def __call__(self) -> bool:
        return self.signal_name is not None


# ------------------------------------------------------------------------------------------------ the run
def _setup_logging(out: Path, is_main: bool) -> list[logging.Handler]:
    """Warnings to stderr; everything from INFO up to DIR/train.log (rank 0). Returns the handlers added."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handlers: list[logging.Handler] = [stderr]
    if is_main:
        handler = logging.FileHandler(out / runs.LOG_FILE, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(handler)
    for handler in handlers:
        root.addHandler(handler)
    return handlers


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # ru_maxrss is in KiB on Linux


def _prepare_run_dir(config: TrainConfig, corpus: Corpus, resume: bool) -> dict:
    """Rank 0, before any other rank touches DIR: the tokenizer, stale files, a first status. Returns tokenizer facts
    for config.json."""
    out = Path(config.out)
    has_checkpoint = runs.has_checkpoint(out)
    if has_checkpoint and not resume:
        raise ValueError(f"{out} already holds a run with a checkpoint: pass --resume to continue it, or choose "
                         f"another --out")
    previous = runs.read_config(out)
    if resume and has_checkpoint and (out / runs.TOKENIZER_FILE).is_file():
        return previous.get("tokenizer", {})
    # A fresh start (also a resume of a run that never reached its first checkpoint).
    (out / runs.METRICS_FILE).unlink(missing_ok=True)
    runs.write_status(out, "running", step=0, total_steps=config.steps, message="training the tokenizer")
    tokenizer_corpus = corpus
    family_module = objective_module(config.family)
    if hasattr(family_module, "tokenizer_corpus"):  # an RNN family's own additions (CoVe: the pairs' Chinese side)
        tokenizer_corpus = family_module.tokenizer_corpus(corpus, settings_from_dict(config.family, config.settings))
    if _translation_weight(config) > 0:  # the tokenizer must know the Chinese side (objectives/translation.py)
        from lab_models.objectives.translation import tokenizer_corpus as with_pairs

        tokenizer_corpus = with_pairs(corpus, config.family)
    choice = build_tokenizer(tokenizer_corpus, config.tokenizer, config.vocab_size, home=lab_home(config.home))
    prepared, info = prepare_tokenizer(choice.tokenizer)
    from lab_models.home import atomic_write_text

    atomic_write_text(out / runs.TOKENIZER_FILE, prepared.to_str())
    return {"kind": choice.kind, "requested_vocab_size": choice.requested_vocab_size,
            "trained_vocab_size": choice.vocab_size, "vocab_size": info.size, "note": choice.note,
            "cache_key": choice.cache_key}


def _translation_weight(config: TrainConfig) -> float:
    from lab_models.objectives.translation import TRANSLATION_FAMILIES

    if config.family not in TRANSLATION_FAMILIES:
        return 0.0
    return float(config.objectives.get("translation", 0.0))


def _family_batch_source(module, config: TrainConfig, tokenizer, info, settings, corpus: Corpus, model_config):
    """The RNN families' own batch source (`batch_source(context)` in lab_models/rnn/<family>.py), or None."""
    if not hasattr(module, "batch_source"):
        return None
    from lab_models.rnn.common import DataContext

    context = DataContext(
        tokenizer=tokenizer, vocab=info, settings=settings,
        train_stream=encode_stream(tokenizer, corpus.train, info.eos_id),
        validation_stream=encode_stream(tokenizer, corpus.validation, info.eos_id), seq_len=config.seq_len,
        batch_size=config.batch_size, eval_batches=config.eval_batches, steps=config.steps,
        max_positions=model_config.max_positions)
    return module.batch_source(context)


def _translation_pairs(config: TrainConfig, tokenizer, info, max_positions: int):
    """The synthetic sentence pairs, tokenized, when the run trains translation (MASS, T5); else None. A pair is cut
    to the model's max_positions on each side (not to seq_len: T5's task prefix alone is ~25 tokens of a small
    vocabulary)."""
    if _translation_weight(config) <= 0:
        return None
    from lab_models.objectives.translation import TranslationPairs

    pairs = TranslationPairs(config.family, tokenizer, info, max_len=max_positions,
                             settings=settings_from_dict(config.family, config.settings))
    if pairs.unknown_target_fraction > 0.01:
        logger.warning("%.1f%% of the Chinese target tokens are unknown to the tokenizer", 100 *
                       pairs.unknown_target_fraction)
    if pairs.truncated_fraction > 0:
        logger.warning("%.1f%% of the translation pairs are longer than the model's %d positions and are cut",
                       100 * pairs.truncated_fraction, max_positions)
    return pairs


def _translation_json(config: TrainConfig, corpus: Corpus, pairs) -> dict | None:
    if pairs is None:
        return None
    from lab_models.objectives.translation import tokenizer_texts_note

    return {"weight": _translation_weight(config), **pairs.facts(), "pairs_per_step": config.batch_size,
            "denoising_rows": config.objectives.get(_main_objective(config.family), 0.0) > 0,
            "tokenizer_trained_on": tokenizer_texts_note(corpus, config.family)}


def _main_objective(family: str) -> str:
    from lab_models.models import MAIN_OBJECTIVE

    return MAIN_OBJECTIVE[family]


def _config_json(config: TrainConfig, model, tokenizer_facts: dict, corpus: Corpus, world: _World,
                 created: float, validation_note: str, translation: dict | None = None) -> dict:
    mc = model.model_config
    info = model.vocab
    extra = {} if translation is None else {"translation": translation}
    return {
        "family": config.family, "preset": config.preset, "corpus": config.corpus,
        "corpus_fingerprint": corpus.fingerprint, "seed": config.seed, "device": config.device,
        "device_used": str(world.device), "world_size": world.world_size, "steps": config.steps,
        "d_model": mc.d_model, "n_layers": mc.n_layers, "n_heads": mc.n_heads, "d_ff": mc.d_ff,
        "vocab_size": mc.vocab_size, "seq_len": config.seq_len, "batch_size": config.batch_size,
        "objectives": dict(model.objective_weights), "settings": config.settings, "model": mc.to_dict(),
        "num_parameters": model.num_parameters(), "tokenizer": tokenizer_facts,
        "special_ids": {"pad": info.pad_id, "mask": info.mask_id, "cls": info.cls_id, "sep": info.sep_id,
                        "bos": info.bos_id, "eos": info.eos_id, "start": info.start_id, "end": info.end_id},
        "validation_note": validation_note, "train": config.to_dict(), "created": created,
        "torch_version": torch.__version__, "zoo": config.zoo, **extra,
    }


def _find_unused_needed(model, batches: PackedBatches, world: _World, seed: int) -> bool:
    """Whether DDP needs find_unused_parameters: one probe forward/backward on a fixed batch (the same on every
    rank), then the gradients are dropped. The step RNG is reseeded per step, so the probe changes no trajectory."""
    torch.manual_seed(derive_seed(seed, "probe"))
    batch = batches.train_batch(generator_for(seed, "probe")).to(world.device)
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=world.device.type == "cuda"):
        out = model.loss(batch)
    out.total.backward()
    unused = any(p.requires_grad and p.grad is None for p in model.parameters())
    model.zero_grad(set_to_none=True)
    return not _all_ranks_true(world, not unused)


def run(config: TrainConfig, corpus: Corpus, *, resume: bool) -> int:
    """Train as configured; returns the exit status. Errors are reported in status.json and on stderr."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    world = _init_world(config.device)
    handlers = _setup_logging(out, world.is_main)
    try:
        return _run(config, corpus, resume, world, out)
    finally:
        for handler in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()


def _run(config: TrainConfig, corpus: Corpus, resume: bool, world: _World, out: Path) -> int:
    from lab_models.models import build_model

    stop = StopRequest()
    stop.install()
    created = float(runs.read_config(out).get("created") or time.time()) if resume else time.time()
    step = 0
    try:
        failure = None
        tokenizer_facts: dict = {}
        if world.is_main:
            try:
                tokenizer_facts = _prepare_run_dir(config, corpus, resume)
            except ValueError as error:
                failure = str(error)
        failure = _broadcast_text(world, failure)
        if failure is not None:
            raise ValueError(failure)

        tokenizer, info = prepare_tokenizer(load_tokenizer_file(out / runs.TOKENIZER_FILE))
        byte_lengths = token_byte_lengths(tokenizer)
        module = objective_module(config.family)
        settings = settings_from_dict(config.family, config.settings)
        checkpoint = runs.latest_checkpoint(out) if resume else None
        saved_model = runs.read_config(out).get("model") if checkpoint is not None else None
        if saved_model:
            from lab_models.models import model_config_from_dict

            model_config = model_config_from_dict(config.family, saved_model)
        else:
            from lab_models.models import family_model_config

            model_config = family_model_config(config.family, config.preset, info.size, settings=settings,
                                               **config.model)
        pairs = _translation_pairs(config, tokenizer, info, model_config.max_positions)
        batches = _family_batch_source(module, config, tokenizer, info, settings, corpus, model_config) or PackedBatches(
            encode_stream(tokenizer, corpus.train, info.eos_id), encode_stream(tokenizer, corpus.validation,
                                                                                info.eos_id),
            seq_len=config.seq_len, batch_size=config.batch_size, objective=module,
            batch_config=BatchConfig(settings, info), eval_batches=config.eval_batches, translation=pairs,
            denoising=config.objectives.get(_main_objective(config.family), 0.0) > 0)
        if batches.validation_note:
            logger.warning(batches.validation_note)
        model = build_model(config.family, model_config, settings, info, config.objectives,
                            seed=derive_seed(config.seed, "init") & 0x7FFFFFFF)
        model.to(world.device)
        from lab_models.objectives.addons import attach

        batches, addons, addon_facts = attach(model, config.addons, tokenizer=tokenizer, vocab=info, corpus=corpus,
                                              batches=batches, batch_size=config.batch_size,
                                              max_positions=model_config.max_positions)
        engine_config = config.engine_config()
        find_unused = _find_unused_needed(model, batches, world, config.seed) if world.distributed else False
        trainer = Trainer(model, batches, engine_config, device=world.device, byte_lengths=byte_lengths,
                          rank=world.rank, world_size=world.world_size, find_unused_parameters=find_unused,
                          performance=config.performance_config())
        if checkpoint is not None:
            trainer.restore(runs.load_checkpoint(out, model=model, optimizer=trainer.optimizer))
            logger.info("resumed from %s at step %d", checkpoint.name, trainer.step)
        step = trainer.step
        if world.is_main:
            runs.truncate_metrics(out, trainer.step)
            runs.write_config(out, {**_config_json(config, model, tokenizer_facts, corpus, world, created,
                                                   batches.validation_note, _translation_json(config, corpus, pairs)),
                                    **addon_facts})
            runs.write_status(out, "running", step=trainer.step, total_steps=config.steps, message="training")
            logger.info("training %s (%d parameters) on %s for %d steps", config.family, model.num_parameters(),
                        world.device, config.steps)
    except ValueError as error:
        return _fail(out, world, config, step, str(error), EXIT_BAD_ARGUMENT)
    except Exception as error:  # noqa: BLE001 - reported in status.json, with the traceback in train.log
        logger.exception("setting up the run failed")
        message = runs.disk_error_message(error, out) or f"{type(error).__name__}: {error}"  # "disk full: ..."
        return _fail(out, world, config, step, message, EXIT_FAILED)

    causal = model.objective_weights.get("clm", 0) > 0 or getattr(model, "is_language_model", False)
    last_status = 0.0
    saved_step = trainer.step if checkpoint is not None else -1
    checkpoint_after_eval = False
    try:
        for event in trainer.run(should_stop=stop):
            step = event.step
            if not world.is_main:
                continue
            if isinstance(event, StepEvent):
                runs.append_metrics(out, {
                    "split": "train", "step": event.step, "loss": _finite(event.loss),
                    "losses": {k: _finite(v) for k, v in event.losses.items()}, "lr": event.lr,
                    "grad_norm": _finite(event.grad_norm), "tokens_per_s": event.tokens_per_s,
                    "elapsed_s": event.elapsed_s, "tokens": event.tokens_seen, "max_rss_mb": _max_rss_mb(),
                    **_speed_fields(event), **event.record, **switch_metrics(model)})
                checkpoint_now = event.checkpoint_due and not event.evaluation_follows  # else after the evaluation
                checkpoint_after_eval = event.checkpoint_due and event.evaluation_follows
                if checkpoint_now:
                    runs.save_checkpoint(out, model=model, optimizer=trainer.optimizer, state=_state(trainer, config))
                    saved_step = event.step
                if checkpoint_now or time.monotonic() - last_status >= STATUS_INTERVAL_S:
                    runs.write_status(out, "running", step=event.step, total_steps=config.steps,
                                      message="training", loss=_finite(event.loss))
                    last_status = time.monotonic()
            elif isinstance(event, EvalEvent):
                row = {"split": "val", "step": event.step, "loss": _finite(event.loss),
                       "losses": {k: _finite(v) for k, v in event.losses.items()},
                       "bits_per_byte": _finite(event.bits_per_byte), "nll_per_token": _finite(event.nll_per_token),
                       "targets": event.targets, "bytes": event.bytes, "elapsed_s": event.elapsed_s}
                if causal:
                    row["perplexity"] = _finite(event.perplexity)
                if addons is not None:  # alignment, uniformity, BLEU, ... (objectives/addons.py)
                    row.update({k: _finite(v) for k, v in addons.evaluate(model).items()})
                runs.append_metrics(out, row)
                logger.info("step %d: val loss %.4f, %.4f bits per byte", event.step, event.loss, event.bits_per_byte)
                if checkpoint_after_eval:  # the step is complete once its evaluation is logged
                    runs.save_checkpoint(out, model=model, optimizer=trainer.optimizer, state=_state(trainer, config))
                    saved_step, checkpoint_after_eval = event.step, False
                    runs.write_status(out, "running", step=event.step, total_steps=config.steps, message="training")
                    last_status = time.monotonic()
        step = trainer.step
        stopped = trainer.step < config.steps
        if world.is_main:
            if saved_step != trainer.step:
                runs.save_checkpoint(out, model=model, optimizer=trainer.optimizer, state=_state(trainer, config))
            runs.save_weights(model, out / runs.MODEL_FILE)
            if stopped:
                message = f"stopped by {stop.signal_name or 'request'} at step {trainer.step}; resumable"
                runs.write_status(out, "stopped", step=trainer.step, total_steps=config.steps, message=message)
            else:
                runs.write_status(out, "finished", step=trainer.step, total_steps=config.steps,
                                  message=f"finished {trainer.step} steps")
            logger.info("%s at step %d", "stopped" if stopped else "finished", trainer.step)
        _finish_world(world)
        return 0
    except NonFiniteLossError as error:
        return _fail(out, world, config, step, str(error), EXIT_FAILED)
    except Exception as error:  # noqa: BLE001
        logger.exception("training failed at step %d", step)
        message = runs.disk_error_message(error, out) or f"{type(error).__name__}: {error}"  # "disk full: ..."
        return _fail(out, world, config, step, message, EXIT_FAILED)


def _speed_fields(event: StepEvent) -> dict:
    """FLOPs per token and MFU for a metrics row ("mfu" is null where the device's peak is unknown, e.g. a CPU)."""
    if event.flops_per_token is None:
        return {}
    return {"flops_per_token": event.flops_per_token, "mfu": event.mfu}


def _state(trainer: Trainer, config: TrainConfig) -> dict:
    return {**trainer.state(), "train": config.to_dict()}


def _finish_world(world: _World) -> None:
    if world.distributed and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _fail(out: Path, world: _World, config: TrainConfig, step: int, message: str, code: int) -> int:
    message = " ".join(message.split())
    if world.is_main:
        try:
            runs.write_status(out, "failed", step=step, total_steps=config.steps, message=message)
        except OSError:
            pass
    print(f"error: {message}", file=sys.stderr)
    if world.distributed and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the other ranks may be gone already
            pass
    return code


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        _positive("steps", args.steps)
        if args.resume:
            config, corpus = config_from_run(args)
        else:
            config, corpus = config_from_args(args)
    except ValueError as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_BAD_ARGUMENT
    return run(config, corpus, resume=args.resume)


if __name__ == "__main__":
    sys.exit(main())
