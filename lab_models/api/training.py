"""Training jobs: start, stop, resume, the status of a run and the command that repeats it from a terminal; the
family's objective settings; the presets and devices a run may use; the Switch Transformer's settings; and what
training computes in on this machine.

The Train tab's backend. The `JobManager` is created by the app (one per app, shared by every session) and passed to
these functions; nothing here keeps a global one. lab_models/training/jobs/manager.py runs the queue (one run per
device at a time, each run a worker process `python -m lab_models train`, lab_models/training/run.py), and
training/jobs/files.py holds the presets and devices. A request is checked here the way the trainer will check it
(training/config.py, training/init_from.py, objectives/settings.py), so a bad one is refused with a message before
anything is queued. The families that can train are `checks.trainable_families`.
"""
from __future__ import annotations

from pathlib import Path

import torch

from lab_models.messages import LabError, Message
from lab_models.api.checks import trainable_family
from lab_models.api.runs import run_folder
from lab_models.home import lab_home
from lab_models.models import switch as _switch
from lab_models.nn.config import ModelConfig
from lab_models.objectives import objective_module
from lab_models.objectives.addons import ADDONS as _addon_names, MODULES as _addon_modules
from lab_models.objectives.addons import split_settings as _split_settings
from lab_models.objectives.settings import settings_help
from lab_models.objectives.settings import settings_with_overrides as _settings_with_overrides
from lab_models.objectives.specs import family_spec
from lab_models.text import corpora as _corpora
from lab_models.text.tokenizer_kinds import TOKENIZER_KINDS
from lab_models.training import flops as _flops, matmul_probe as _matmul_probe, performance as _performance
from lab_models.training import init_from as _init_from
from lab_models.training import runs as _runs
from lab_models.training.config import check_budget_flops, check_budget_minutes, parse_model_overrides
from lab_models.training.device import describe_device, select_device
from lab_models.training.jobs import files as _files
from lab_models.training.jobs import manager as _jobs
from lab_models.training.jobs.files import format_value
from lab_models.training.jobs.store import RunStore

__all__ = ["JobManager", "TRAINING_PRESETS", "TRAINING_DEVICES", "create_job_manager", "family_settings",
           "family_settings_help", "start_training", "training_command", "stop_training", "resume_training",
           "training_status", "device_label", "select_device", "torch_version", "training_precision",
           "SWITCH_DEFAULTS", "switch_settings"]

JobManager = _jobs.JobManager
TRAINING_PRESETS = _files.PRESETS
TRAINING_DEVICES = _files.DEVICES


def device_label() -> str:
    """The compute device in use, for the page header."""
    return describe_device(select_device("auto"))


def torch_version() -> str:
    """The version of torch this process runs, for the page header and bug reports."""
    return torch.__version__


def create_job_manager(home=None, *, max_concurrent_per_device: int = 1, **options) -> JobManager:
    """The app's one job manager for `home` (queues runs, one per device at a time by default). Call `.close()` at
    exit. Creating it marks runs that a previous server left queued/running as "stopped (interrupted)"."""
    return JobManager(lab_home(home), max_concurrent_per_device, **options)


def family_settings(family: str) -> dict[str, object]:
    """The family's objective settings with their defaults, flat: nested records become dotted keys
    (e.g. {"mask_rate": 0.15, "nsp": True, "rates.mask": 0.8}). These are the keys `start_training` accepts."""
    flat: dict[str, object] = {}

    def walk(prefix: str, mapping: dict) -> None:
        for key, value in mapping.items():
            if isinstance(value, dict):
                walk(f"{prefix}{key}.", value)
            else:
                flat[f"{prefix}{key}"] = value

    for objective in family_spec(family).objectives:
        walk("", dict(objective.settings))
    return flat


def family_settings_help(family: str) -> dict[str, str]:
    """One line per setting key of `family_settings(family)` saying what it does (the comment beside the field in
    objectives/<family>.py); keys without one are left out."""

    spec = family_spec(family)  # ValueError for an unknown family
    explained = settings_help(objective_module(family).Settings)
    for objective in spec.objectives:  # the add-on objectives' settings are "contrastive.temperature" and so on
        if objective.name in _addon_names:
            explained.update(settings_help(_addon_modules[objective.name].Settings, prefix=f"{objective.name}."))
    return explained


def _setting_value(family: str, key: str, value, default):
    """`value` read as the type of `default` (so "0.2" -> 0.2, "false" -> False); ValueError when it cannot be."""
    where = Message("setting {key!r} of {family}", key=key, family=family)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise LabError("The {where} is on/off: write true or false, not {value!r}.", where=where, value=value)
    if isinstance(default, int):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise LabError("The {where} is a whole number, not {value!r}.", where=where, value=value) from None
        if not number.is_integer():
            raise LabError("The {where} is a whole number, not {value!r}.", where=where, value=value)
        return int(number)
    if isinstance(default, float):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise LabError("The {where} is a number, not {value!r}.", where=where, value=value) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise LabError("The {where} must be a finite number, not {value!r}.", where=where, value=value)
        return number
    if value is None or not str(value).strip():
        raise LabError("The {where} needs a value.", where=where)
    return str(value).strip()


def _training_request(jobs: RunStore, family, preset, corpus, steps, seed, device, objectives, settings,
                      tokenizer, model=None, init_from=None, budget_flops=None, budget_minutes=None) -> dict:
    """Check a training request against the family's spec and the lab home; return start()'s keyword arguments."""
    spec = trainable_family(family)
    defaults = {objective.name: objective.weight for objective in spec.objectives}
    weights = dict(objectives) if objectives is not None else dict(defaults)
    unknown = [name for name in weights if name not in defaults]
    if unknown:
        raise LabError("{title} has no objective {unknown!r}: its objectives are {defaults}.",
                       title=spec.title, unknown=unknown[0], defaults=', '.join(defaults))
    own = [name for name in defaults if name not in _addon_names]  # an add-on adds to the family's own objectives
    if not any(float(weights.get(name, defaults[name]) or 0) > 0 for name in own):
        raise LabError("Turn on at least one of {title}'s objectives ({own}).", title=spec.title, own=', '.join(own))
    known = family_settings(family)
    values = {}
    for key, value in dict(settings or {}).items():
        if key not in known:
            raise LabError("{title} has no setting {key!r}: its settings are {known}.",
                           title=spec.title, key=key, known=', '.join(known))
        values[key] = _setting_value(spec.title, key, value, known[key])
    if corpus is not None and corpus not in _corpora.list_corpora(home=jobs.home) and not Path(str(corpus)).exists():
        raise LabError("Unknown corpus {corpus!r}: choose one of {corpora} or import it in the Corpora tab.",
                       corpus=corpus, corpora=', '.join(_corpora.list_corpora(home=jobs.home)))
    if tokenizer is not None and tokenizer not in TOKENIZER_KINDS:
        raise LabError("Unknown tokenizer {tokenizer!r}: choose one of {tokenizer_kinds}.",
                       tokenizer=tokenizer, tokenizer_kinds=', '.join(TOKENIZER_KINDS))
    if device not in TRAINING_DEVICES:
        raise LabError("Unknown device {device!r}: choose one of {training_devices}.",
                       device=device, training_devices=', '.join(TRAINING_DEVICES))
    select_device(device)  # ValueError when e.g. cuda is asked for and there is none
    extra_args = _model_arguments(family, model) + _budget_arguments(steps, budget_flops, budget_minutes)
    if init_from is not None and str(init_from).strip():
        extra_args += _init_from_arguments(jobs, family, str(init_from).strip(), values, tokenizer, model)
    return {"family": family, "preset": preset, "corpus": corpus, "steps": steps, "seed": seed, "device": device,
            "objectives": weights, "settings": values, "tokenizer": tokenizer, "extra_args": extra_args}


def _budget_arguments(steps, budget_flops, budget_minutes) -> list[str]:
    """`--budget-flops F` or `--budget-minutes M` (train's own checks: one length at a time, a positive number)."""
    given = [name for name, value in (("steps", steps), ("budget_flops", budget_flops),
                                      ("budget_minutes", budget_minutes)) if value is not None]
    if len(given) > 1:
        raise LabError("Give steps, a FLOP budget or a budget in minutes, not {given}: each decides how long the run "
                       "trains.", given=" and ".join(given))
    if budget_flops is not None:
        return ["--budget-flops", repr(check_budget_flops(budget_flops))]
    if budget_minutes is not None:
        return ["--budget-minutes", repr(check_budget_minutes(budget_minutes))]
    return []


def _init_from_arguments(jobs: RunStore, family: str, run_id: str, settings: dict, tokenizer, model) -> list[str]:
    """`--init-from RUN` for a run id of the lab home, checked the way the trainer will check it (the family must
    match the starting run's architecture; its tokenizer and dimensions are kept)."""
    if tokenizer is not None:
        raise LabError("A run started from {run_id} uses that run's tokenizer: leave the tokenizer on the "
                       "family's default.", run_id=run_id)
    start = _init_from.read_starting_point(run_folder(run_id, jobs=jobs), jobs.home)
    family_items, _ = _split_settings([f"{key}={format_value(value)}" for key, value in settings.items()])
    objective_settings = _settings_with_overrides(family, family_items)  # an add-on's settings change no model
    _init_from.check_start(start, family, objective_settings,
                           parse_model_overrides([f"{k}={format_value(v)}" for k, v in (model or {}).items()],
                                                 family))
    return ["--init-from", run_id]


def _model_arguments(family: str, model) -> list[str]:
    """`--model KEY=VALUE` trainer arguments for a dict of ModelConfig overrides (e.g. the Switch Transformer's
    {"ffn": "switch", "n_experts": 8}), checked the way the trainer will read them."""

    if not model:
        return []
    if not isinstance(model, dict):
        raise LabError("model must be a dict of model settings such as {{'ffn': 'switch'}}, got {model!r}.",
                       model=model)
    items = [f"{key}={format_value(value)}" for key, value in model.items()]
    parse_model_overrides(items, family)  # ValueError with the trainer's own message
    return [argument for item in items for argument in ("--model", item)]


def start_training(jobs: JobManager, family: str, *, preset: str = "tiny", corpus: str | None = None,
                   steps: int | None = None, seed: int = 0, device: str = "auto",
                   objectives: dict[str, float] | None = None, settings: dict[str, object] | None = None,
                   tokenizer: str | None = None, model: dict[str, object] | None = None,
                   init_from: str | None = None, budget_flops: float | None = None,
                   budget_minutes: float | None = None) -> str:
    """Queue a training run of `family` and return its run id (e.g. "bert-tiny-20260101-120000-ab12").

    `objectives` maps objective names to weights (0 turns one off; missing ones keep their defaults); `settings`
    overrides keys of `family_settings(family)` (passed to the trainer as --set KEY=VALUE); `steps=None` is the
    preset's default; `tokenizer=None` is the family's own; `model` overrides model settings (--model KEY=VALUE),
    e.g. `switch_settings(True)` for Switch Transformer layers. `init_from`: a run id of the lab home whose weights,
    tokenizer and framing the run starts from (`--init-from`: an imported checkpoint or a lab run; the family must
    match its architecture, and the model's dimensions are its). `budget_flops` or `budget_minutes` instead of
    `steps`: the run trains the steps that many training FLOPs buy, or that fit in that many minutes (train
    --budget-flops / --budget-minutes; config.json "budget" records them). The run starts when its device is free.
    """
    request = _training_request(jobs, family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                                model, init_from, budget_flops, budget_minutes)
    return _disk_errors_said(jobs, lambda: jobs.start(**request))


def _disk_errors_said(jobs: RunStore, action):
    """`action()`, with a full or read-only lab home turned into a ValueError that says so ("disk full: ...")."""
    try:
        return action()
    except OSError as error:
        message = _runs.disk_error_message(error, jobs.home)
        if message is None:
            raise
        raise LabError.of(message) from None


def training_command(jobs: RunStore, family: str, *, preset: str = "tiny", corpus: str | None = None,
                     steps: int | None = None, seed: int = 0, device: str = "auto",
                     objectives: dict[str, float] | None = None, settings: dict[str, object] | None = None,
                     tokenizer: str | None = None, model: dict[str, object] | None = None,
                     init_from: str | None = None, budget_flops: float | None = None,
                     budget_minutes: float | None = None) -> str:
    """The `python -m lab_models train ...` command that `start_training` with these arguments runs (RUN_DIR for the
    folder), so a run started in the page can be repeated from a terminal."""
    request = _training_request(jobs, family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                                model, init_from, budget_flops, budget_minutes)
    return jobs.preview_command(**request)


def stop_training(jobs: JobManager, run_id: str) -> dict:
    """Stop a run: a queued one leaves the queue; a running one checkpoints and ends "stopped". Returns its status."""
    _disk_errors_said(jobs, lambda: jobs.stop(run_id))
    return training_status(jobs, run_id)


def resume_training(jobs: JobManager, run_id: str) -> dict:
    """Queue a stopped, failed or died run again; it continues from its last checkpoint. Returns its status."""
    _disk_errors_said(jobs, lambda: jobs.resume(run_id))
    return training_status(jobs, run_id)


def training_status(jobs: RunStore, run_id: str) -> dict:
    """Where a run stands: state ("queued", "running", "finished", "stopped", "failed", or "died": its trainer was
    killed from outside; the message names the signal and the step, training_log has its last lines), step, total_steps,
    queue_position (1 = next; None unless queued), tokens_per_s, eta_s, message, interrupted, stopping, and the last
    losses (loss, losses per objective, val_loss, val_bits_per_byte, val_perplexity)."""
    return jobs.summary(run_id)


# The Switch Transformer (lab_models/nn/moe.py, lab_models/models/switch.py): a feed-forward option of every Transformer
# family, turned on with `model=switch_settings(True, ...)` in start_training (the CLI's --model ffn=switch ...).
SWITCH_DEFAULTS = dict(_switch.SWITCH_DEFAULTS)  # ffn, n_experts, capacity_factor, expert_every, ... (ModelConfig's)


def switch_settings(on: bool, n_experts=None, capacity_factor=None, expert_every=None, router_z_weight=None) -> dict:
    """The `model` overrides of `start_training` for Switch layers: {} when `on` is false, else {"ffn": "switch"} and
    every given value that differs from its default (None = the default). ValueError for a value the model would
    reject (e.g. 0 experts), with the model's own message."""
    if not on:
        return {}
    given = {"n_experts": n_experts, "capacity_factor": capacity_factor, "expert_every": expert_every,
             "router_z_weight": router_z_weight}
    overrides: dict[str, object] = {"ffn": "switch"}
    for key, value in given.items():
        if value is None or value == "":
            continue
        default = SWITCH_DEFAULTS[key]
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise LabError("The Switch setting {key} must be a number, got {value!r}.", key=key, value=value) from None
        if isinstance(default, int):
            if not number.is_integer():
                raise LabError("The Switch setting {key} must be a whole number, got {value!r}.", key=key, value=value)
            number = int(number)
        if number != default:
            overrides[key] = number

    # the model's own checks (n_experts >= 1, capacity_factor > 0, ...); the trainer checks the depth against the preset
    depth = overrides.get("expert_every", SWITCH_DEFAULTS["expert_every"])
    ModelConfig(vocab_size=100, n_layers=depth if isinstance(depth, int) and depth > 0 else 1, **overrides)
    return overrides


# What training computes in on this machine, and the peak MFU divides by (lab_models/training/performance.py,
# flops.py and matmul_probe.py): `--perf precision=auto` trains in bf16 autocast on CUDA and on a CPU with native bf16
# (AVX-512 BF16 or AMX) that a one-second matmul probe confirms (there for models of at least 4 MFLOPs per token: the
# small preset and up), fp32 elsewhere; MFU's peak is NVIDIA's data sheet where the GPU is in its table, the probe's
# (in the run's precision) everywhere else. The probe is cached per machine in the lab home. The page header says what
# auto picks and why.
def training_precision(home=None, device: str = "auto", *, refresh: bool = False) -> dict:
    """What `--perf precision=auto` trains in on `device` ("auto": the device training picks) and why, with the peak
    MFU divides by. `refresh=True` measures the matmul probe again instead of reading its cache.

    Keys: device (the device label), precision ("bf16" or "fp32"), why (a PRECISION_REASONS code), reason (one
    English sentence), features (the CPU's native bf16 instruction sets, titled), bf16_speedup (the probe's bf16 /
    fp32 matmul speed, None where it was not asked), fp32_flops and bf16_flops (the probe's, None without one),
    min_bf16_flops_per_token (on a CPU: auto picks bf16 only for models of at least this many training FLOPs per
    token; the header says so), peak_flops, peak_source and peak_kind ("table", "probe" or "unknown")."""
    chosen = select_device(device)
    root = lab_home(home)
    probed = []

    def peaks():
        if not probed:
            probed.append(_matmul_probe.cached_matmul_peaks(chosen, root, refresh=refresh))
        return probed[0]

    if refresh:
        peaks()
    choice = _performance.PerformanceConfig().precision_choice(chosen, peaks)
    peak = _flops.device_peak(chosen, choice.precision, peaks)
    probe = probed[0] if probed else None
    features = _matmul_probe.native_bf16_features() if chosen.type == "cpu" else ()
    return {"device": describe_device(chosen), "precision": choice.precision, "why": choice.why,
            "reason": choice.reason, "features": _matmul_probe.describe_features(features),
            "bf16_speedup": choice.bf16_speedup,
            "fp32_flops": probe.fp32 if probe else None, "bf16_flops": probe.bf16 if probe else None,
            "min_bf16_flops_per_token": _performance.MIN_BF16_FLOPS_PER_TOKEN if chosen.type == "cpu" else None,
            **peak.to_dict()}
