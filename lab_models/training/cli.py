"""Headless training's command line: the argument parser of `python -m lab_models train` and the `TrainConfig` it
resolves (from the arguments, or from a run folder on --resume), with the row length fitted to the family.
lab_models/training/run.py runs what it resolves.

    python -m lab_models train --family NAME --out DIR [--preset tiny|small|medium|base] [--corpus NAME_OR_PATH]
        [--text-column NAME] [--steps N] [--seed S] [--device auto|cpu|cuda|mps] [--objective NAME=WEIGHT ...]
        [--set KEY=VALUE ...] [--model KEY=VALUE ...] [--tokenizer KIND] [--vocab-size N] [--batch-size N] [--seq-len N] [--lr X]
        [--schedule cosine|constant] [--eval-every N] [--checkpoint-every N] [--resume] [--home DIR]
        [--warmup-steps N] [--log-every N] [--eval-batches N] [--weight-decay X] [--grad-clip X]
        [--on-nonfinite fail|skip] [--zoo NAME] [--init-from RUN]

Resuming. `--resume` continues the run in DIR from its newest checkpoint with its saved configuration
(config.json "train"); the other arguments are ignored except --steps (to train longer; a changed total changes the
cosine schedule after the checkpoint), --device, --eval-every, --checkpoint-every and --log-every. The batches of
step s depend only on (seed, s, rank), and the checkpoint holds the exact weights and AdamW state, so a resumed run
repeats the same trajectory (exactly on a CPU; the run keeps the precision `precision=auto` resolved to when it
started, `keep_resolved_precision`). A DIR with a config.json but no checkpoint (a run killed before its
first checkpoint) starts over, with or without --resume; a DIR with a checkpoint and no --resume is an error.

Starting from another run. `--init-from RUN` (a run id of the lab home or a run folder: an imported checkpoint or a
lab run) starts the new run from that run's weights, tokenizer and framing, with any family whose architecture
matches (lab_models/training/init_from.py): the model's dimensions are the starting run's (the preset sets only the
training budget), `--tokenizer` and `--vocab-size` are refused, `--model` may change dropout only, and a family that
does not match exits 2 with one line naming the option that differs.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import math
from pathlib import Path

import torch

from lab_models.messages import LabError
from lab_models.training.console import OneLineParser
from lab_models.training import runs
from lab_models.text.corpus_sources import CorpusSource, open_corpus
from lab_models.training.device import DEVICE_CHOICES, select_device
from lab_models.training.engine import SCHEDULES
from lab_models.families import family_record
from lab_models.home import lab_home
from lab_models.objectives import objective_module
from lab_models.training.performance import parse_performance_overrides
from lab_models.text.tokenizer_kinds import MAX_VOCAB_SIZE, TOKENIZER_KINDS
from lab_models.training.config import (MAX_SEED, MAX_STEPS, PRESET_DEFAULTS, RESUME_OVERRIDABLE, TrainConfig,
                                        check_budget_flops, check_budget_minutes, parse_objectives,
                                        parse_model_overrides)
from lab_models.objectives.settings import settings_with_overrides, settings_to_dict
from lab_models.text.vocab import NUM_LAB_SENTINELS
from lab_models.models.family import TRAINED_FAMILIES
from lab_models.models.family import family_model_config
from lab_models.models.family import resolve_objective_weights
from lab_models.objectives.addons import resolve_settings
from lab_models.objectives.addons import split_settings
from lab_models.training.init_from import check_start, read_starting_point
from lab_models.text.tokenization import load_tokenizer_file
from lab_models.text.tokenizer_inspect import tokenizer_kind

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------ the parser
def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models train", description="Train one pretraining family headlessly.")
    p.add_argument("--family", help="gpt, gpt2, bert, roberta, albert, spanbert, electra, unilm, xlnet, mpnet, "
                                    "mass, glm, t5, elmo, cove, ulmfit or cvt")
    p.add_argument("--out", required=True, help="the run folder")
    p.add_argument("--preset", default="tiny", help="tiny | small | medium | base (default tiny)")
    p.add_argument("--corpus", help="a built-in, imported or linked corpus name, or a path: a .txt, .md, .jsonl, .csv "
                                    "or .parquet file, a folder of them, or a datasets save_to_disk folder (default: "
                                    "per preset)")
    p.add_argument("--text-column", help="the text column of a --corpus path's .jsonl/.csv/.parquet/datasets files "
                                         "(default: text, content, body, ... or the longest)")
    p.add_argument("--steps", type=int, help="optimizer steps (default: the preset's, tiny 50, small 2000)")
    p.add_argument("--budget-flops", type=float, metavar="F",
                   help="instead of --steps: the training FLOPs the run may spend, e.g. 1e13; it trains the whole "
                        "steps they buy at the model's FLOPs per token (counted on its first batch; config.json "
                        "\"budget\" records them), so that runs of different families get equal compute")
    p.add_argument("--budget-minutes", type=float, metavar="M",
                   help="instead of --steps: the minutes of wall time the run may train, e.g. 5; it times its first "
                        "steps and trains the steps that fit (config.json \"budget\" records them; evaluations "
                        "and checkpoints come on top)")
    p.add_argument("--seed", type=int, help="default 0")
    p.add_argument("--device", help="auto | cpu | cuda | mps (default auto)")
    p.add_argument("--objective", action="append", default=[], metavar="NAME=WEIGHT",
                   help="an objective and its loss weight, repeatable, e.g. nsp=0 or sop=1 (default: the family's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="a family setting, repeatable, e.g. mask_rate=0.2 or nsp=false (the Train tab lists each "
                        "family's settings with their defaults)")
    p.add_argument("--model", action="append", default=[], metavar="KEY=VALUE",
                   help="a model dimension, repeatable, e.g. d_model=128, n_layers=4, n_heads=4, dropout=0.1 "
                        "(default: the preset's)")
    p.add_argument("--tokenizer", help="bpe | byte_bpe | wordpiece | unigram (default: the family's)")
    p.add_argument("--vocab-size", type=int, help="the tokenizer's vocabulary (default: the preset's, tiny 512)")
    p.add_argument("--batch-size", type=int, help="rows per step (default: the preset's, tiny 16)")
    p.add_argument("--seq-len", type=int, help="tokens per row (default: the preset's, tiny 64)")
    p.add_argument("--lr", type=float, help="peak learning rate of AdamW (default: the preset's, tiny 1e-3)")
    p.add_argument("--schedule", help="cosine | constant (default cosine)")
    p.add_argument("--warmup-steps", type=int, help="steps of linear warmup (default: the preset's, tiny 5)")
    p.add_argument("--eval-every", type=int, help="steps between validations (default: the preset's, tiny 25)")
    p.add_argument("--eval-batches", type=int, help="validation batches per validation (default: the preset's)")
    p.add_argument("--checkpoint-every", type=int,
                   help="steps between checkpoints, the points a stopped run resumes from (default: the preset's)")
    p.add_argument("--log-every", type=int, help="steps between rows of metrics.jsonl (default: the preset's)")
    p.add_argument("--weight-decay", type=float, help="default 0.01")
    p.add_argument("--grad-clip", type=float, help="default 1.0 (0 = off)")
    p.add_argument("--perf", action="append", default=[], metavar="KEY=VALUE",
                   help="speed settings (training/performance.py): precision=auto|bf16|fp32, fused_adamw, compile, "
                        "attention=sdpa|flex, grad_accum=K, activation_checkpointing, prefetch")
    p.add_argument("--on-nonfinite", help="fail (default): a NaN/inf loss fails the run; skip: drop that step")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest checkpoint with its saved settings")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    p.add_argument("--zoo", help="tag the run as a member of this zoo (python -m lab_models zoo sets it)")
    p.add_argument("--init-from", metavar="RUN",
                   help="start from this run's weights and tokenizer (a run id or folder: an imported checkpoint or "
                        "a lab run) with any family whose architecture matches")
    return p


def check_at_least(name: str, value, minimum: int = 1):
    if value is not None and value < minimum:
        raise LabError("--{option} must be at least {minimum}, got {value}",
                       option=name.replace('_', '-'), minimum=minimum, value=value)


def check_at_most(name: str, value, maximum: int):
    if value is not None and value > maximum:
        raise LabError("--{option} must be at most {maximum:,}, got {value:,}",
                       option=name.replace('_', '-'), maximum=maximum, value=value)


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
            raise LabError("{family} turns a {seq_len}-token row into up to {longest} inputs, more than "
                           "max_positions={max_positions}: pass --model max_positions={longest} or lower --seq-len",
                           family=family, seq_len=seq_len, longest=longest, max_positions=max_positions)
        logger.info("%s: max_positions raised from %d to %d (rows of %d tokens become up to %d inputs)", family,
                    max_positions, longest, seq_len, longest)
        model_overrides = {**model_overrides, "max_positions": longest}
    if hasattr(module, "sentinels_needed"):

        needed = module.sentinels_needed(seq_len, settings)
        if needed > NUM_LAB_SENTINELS:
            raise LabError("{family} corrupts a {seq_len}-token row with {needed} sentinels, but the lab's "
                           "tokenizers have {num_lab_sentinels}: lower --seq-len or raise "
                           "mean_noise_span_length (--set mean_noise_span_length=...)",
                           family=family, seq_len=seq_len, needed=needed, num_lab_sentinels=NUM_LAB_SENTINELS)
    return model_overrides


def config_from_args(args) -> tuple[TrainConfig, CorpusSource]:
    """Validate the arguments of a fresh run and resolve every default. ValueError with a one-line message."""

    if not args.family:
        raise LabError("--family is required (one of {families})", families=", ".join(TRAINED_FAMILIES))
    if args.family not in TRAINED_FAMILIES:
        raise LabError("unknown or untrainable family {family!r}: choose one of {trained_families}",
                       family=args.family, trained_families=', '.join(TRAINED_FAMILIES))
    if args.preset not in PRESET_DEFAULTS:
        raise LabError("unknown preset {preset!r}: choose one of {preset_defaults}",
                       preset=args.preset, preset_defaults=', '.join(PRESET_DEFAULTS))
    device = args.device or "auto"
    schedule = args.schedule or "cosine"
    seed = 0 if args.seed is None else args.seed
    weight_decay = 0.01 if args.weight_decay is None else args.weight_decay
    grad_clip = 1.0 if args.grad_clip is None else args.grad_clip
    if device not in DEVICE_CHOICES:
        raise LabError("unknown device {device!r}: choose one of {device_choices}",
                       device=device, device_choices=', '.join(DEVICE_CHOICES))
    select_device(device)  # ValueError when the named device is not there
    if schedule not in SCHEDULES:
        raise LabError("unknown schedule {schedule!r}: choose one of {schedules}",
                       schedule=schedule, schedules=', '.join(SCHEDULES))
    for name in ("steps", "vocab_size", "batch_size", "log_every", "eval_batches"):
        check_at_least(name, getattr(args, name))
    check_at_most("steps", args.steps, MAX_STEPS)
    budget_flops = getattr(args, "budget_flops", None)
    budget_minutes = getattr(args, "budget_minutes", None)
    if budget_flops is not None and budget_minutes is not None:
        raise LabError("give --budget-flops or --budget-minutes, not both: either decides the steps")
    if budget_flops is not None:
        if args.steps is not None:
            raise LabError("give --steps or --budget-flops, not both: a budget decides the steps itself")
        check_budget_flops(budget_flops)
    if budget_minutes is not None:
        if args.steps is not None:
            raise LabError("give --steps or --budget-minutes, not both: a budget decides the steps itself")
        check_budget_minutes(budget_minutes)
    check_at_most("vocab_size", args.vocab_size, MAX_VOCAB_SIZE)
    check_at_most("seed", args.seed, MAX_SEED)
    check_at_least("seq_len", args.seq_len, 2)
    for name in ("warmup_steps", "eval_every", "checkpoint_every", "seed"):
        check_at_least(name, getattr(args, name), 0)
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise LabError("--lr must be a positive number such as 3e-4, got {lr}", lr=args.lr)
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise LabError("--weight-decay must be >= 0, got {weight_decay}", weight_decay=weight_decay)
    if not (math.isfinite(grad_clip) and grad_clip >= 0):
        raise LabError("--grad-clip must be >= 0 (0 turns clipping off), got {grad_clip}", grad_clip=grad_clip)
    family = args.family
    spec = family_record(family)
    start = read_starting_point(args.init_from, args.home) if getattr(args, "init_from", None) else None
    if start is not None and (args.tokenizer or args.vocab_size):
        raise LabError("--init-from {name} brings its own tokenizer: drop "
                       "{option}", name=start.run_dir.name, option='--tokenizer' if args.tokenizer else '--vocab-size')
    tokenizer = args.tokenizer or spec.tokenizer
    if tokenizer not in TOKENIZER_KINDS:
        raise LabError("unknown tokenizer {tokenizer!r}: choose one of {tokenizer_kinds}",
                       tokenizer=tokenizer, tokenizer_kinds=', '.join(TOKENIZER_KINDS))


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
    seq_len = pick("seq_len")
    if start is not None:  # the starting run's model, as it is (init_from.py checks that the family matches it)
        probe = check_start(start, family, settings, model_overrides)
        if seq_len > probe.max_positions:
            raise LabError("--seq-len {seq_len} is longer than the starting run's {max_positions} "
                           "positions; lower it", seq_len=seq_len, max_positions=probe.max_positions)
        module = objective_module(family)
        longest = module.max_length(seq_len, settings) if hasattr(module, "max_length") else seq_len
        if longest > probe.max_positions:  # GLM and MPNet lengthen their rows; the positions are the starting run's
            raise LabError("{family} turns a {seq_len}-token row into up to {longest} inputs, more than the "
                           "starting run's {max_positions} positions: lower --seq-len",
                           family=family, seq_len=seq_len, longest=longest, max_positions=probe.max_positions)
        tokenizer = tokenizer_kind(load_tokenizer_file(start.run_dir / runs.TOKENIZER_FILE))
        vocab_size = probe.vocab_size
    else:
        probe = family_model_config(family, args.preset, 1000, settings=settings, **model_overrides)
        if seq_len > probe.max_positions:
            raise LabError("--seq-len {seq_len} is longer than the model's {max_positions} positions; lower "
                           "it or pass --model max_positions={seq_len}",
                           seq_len=seq_len, max_positions=probe.max_positions)
        model_overrides = fit_row_length(family, settings, seq_len, probe.max_positions, model_overrides)
        vocab_size = pick("vocab_size")
    home = args.home
    corpus_name = args.corpus or defaults["corpus"]
    source = open_corpus(corpus_name, text_column=args.text_column, home=lab_home(home))
    config = TrainConfig(
        family=family, out=str(Path(args.out).expanduser().resolve()), preset=args.preset,
        corpus=source.reference, text_column=args.text_column or None, steps=pick("steps"), seed=seed, device=device,
        objectives=weights, settings=settings_to_dict(settings), model=model_overrides, tokenizer=tokenizer,
        vocab_size=vocab_size, batch_size=pick("batch_size"), seq_len=seq_len, lr=pick("lr"),
        schedule=schedule, warmup_steps=pick("warmup_steps"), eval_every=pick("eval_every"),
        eval_batches=pick("eval_batches"), checkpoint_every=pick("checkpoint_every"), log_every=pick("log_every"),
        weight_decay=weight_decay, grad_clip=grad_clip, on_nonfinite=args.on_nonfinite or "fail",
        home=str(Path(home).expanduser().resolve()) if home else None,
        performance=parse_performance_overrides(args.perf), addons=addons, zoo=args.zoo or None,
        init_from=str(start.run_dir) if start is not None else None, budget_flops=budget_flops,
        budget_minutes=budget_minutes,
    )
    config.performance_config().check_device(select_device(device))
    config.engine_config()  # validates the combination
    return config, source


def keep_resolved_precision(performance: dict, saved: dict, device: torch.device) -> dict:
    """A resumed run keeps the precision its start resolved `precision=auto` to (config.json "performance_used") on
    the same kind of device, so that it repeats its trajectory bit for bit even if the machine's matmul probe is
    measured again meanwhile. A run started with an explicit precision keeps that; on another kind of device, or with
    an explicit --perf precision on the resume (config_from_run asks this only without one), the run decides afresh.

    >>> keep_resolved_precision({}, {"device_used": "cpu", "performance_used": {"precision": {"precision": "bf16"}}},
    ...                         torch.device("cpu"))
    {'precision': 'bf16'}
    """
    used = ((saved.get("performance_used") or {}).get("precision") or {}).get("precision")
    if performance.get("precision", "auto") != "auto" or used not in ("bf16", "fp32"):
        return performance
    if str(saved.get("device_used", "")).split(":")[0] != device.type:
        return performance
    return {**performance, "precision": used}


def config_from_run(args) -> tuple[TrainConfig, CorpusSource]:
    """The saved configuration of the run in --out, with the few arguments a resume may change."""
    out = Path(args.out).expanduser().resolve()
    saved = runs.read_config(out).get("train")
    if not isinstance(saved, dict):
        raise LabError("nothing to resume in {out}: it has no config.json from an earlier run", out=out)
    if args.family and args.family != saved.get("family"):
        raise LabError("{out} holds a {family} run, not {args_family}; choose another --out",
                       out=out, family=saved.get('family'), args_family=args.family)
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {k: v for k, v in saved.items() if k in known}
    values["out"] = str(out)
    for name in RESUME_OVERRIDABLE:
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    overrides = parse_performance_overrides(args.perf) if getattr(args, "perf", None) else {}
    if overrides:  # speed settings may change on a resume (a GPU after a CPU, more accumulation)
        values["performance"] = {**values.get("performance", {}), **overrides}
    check_at_least("steps", values.get("steps"))
    check_at_most("steps", values.get("steps"), MAX_STEPS)
    device = select_device(values.get("device", "auto"))
    if "precision" not in overrides:  # an explicit --perf precision on the resume decides afresh
        values["performance"] = keep_resolved_precision(values.get("performance") or {}, runs.read_config(out), device)
    try:
        config = TrainConfig(**values)
        config.engine_config()
    except TypeError as error:
        raise LabError("{out}/config.json is not a run configuration this version can resume ({error})",
                       out=out, error=error) from None
    source = open_corpus(config.corpus, text_column=config.text_column, home=lab_home(config.home))
    return config, source
