"""`lab_models.api`'s training jobs section (re-exported there: the UI imports only `lab_models.api`).

The Train tab's backend. The `JobManager` is created by the app (one per app, shared by every session) and passed
to these functions; nothing here keeps a global one. See lab_models/jobs.py for the queue's behaviour.
"""
from __future__ import annotations

from pathlib import Path

from .. import corpora
from .. import jobs as _jobs
from .. import runs as _runs
from .. import safe_paths as _safe_paths
from ..device import select_device
from ..families import FamilySpec, all_families, family_spec
from ..home import lab_home
from ..objectives.addons import ADDONS as _addon_names, MODULES as _addon_modules
from ..tokenization import TOKENIZER_KINDS

JobManager = _jobs.JobManager
RunStore = _jobs.RunStore
from ..models import TRAINED_FAMILIES as TRAINABLE_FAMILIES
TRAINING_PRESETS = _jobs.PRESETS
TRAINING_DEVICES = _jobs.DEVICES
__all__ = [
    "JobManager", "RunStore", "TRAINABLE_FAMILIES", "TRAINING_PRESETS", "TRAINING_DEVICES", "trainable_families",
    "create_job_manager", "family_settings", "family_settings_help", "start_training", "stop_training",
    "resume_training",
    "training_status", "training_command", "list_runs", "run_metrics", "training_log", "run_folder", "path_inside",
    "corpus_name", "load_named_corpus",
]


def trainable_families() -> list[FamilySpec]:
    """The families whose training works end to end (a `trainable` FamilySpec field wins where it exists)."""
    return [spec for spec in all_families() if getattr(spec, "trainable", spec.name in TRAINABLE_FAMILIES)]


def _trainable(family: str) -> FamilySpec:
    names = [spec.name for spec in trainable_families()]
    if family not in names:
        raise ValueError(f"{family!r} cannot be trained yet: choose one of {', '.join(names)}.")
    return family_spec(family)


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
    from ..objectives import objective_module
    from ..setting_help import settings_help

    spec = family_spec(family)  # ValueError for an unknown family
    explained = settings_help(objective_module(family).Settings)
    for objective in spec.objectives:  # the add-on objectives' settings are "contrastive.temperature" and so on
        if objective.name in _addon_names:
            explained.update(settings_help(_addon_modules[objective.name].Settings, prefix=f"{objective.name}."))
    return explained


def _setting_value(family: str, key: str, value, default):
    """`value` read as the type of `default` (so "0.2" -> 0.2, "false" -> False); ValueError when it cannot be."""
    where = f"setting {key!r} of {family}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"The {where} is on/off: write true or false, not {value!r}.")
    if isinstance(default, int):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"The {where} is a whole number, not {value!r}.") from None
        if not number.is_integer():
            raise ValueError(f"The {where} is a whole number, not {value!r}.")
        return int(number)
    if isinstance(default, float):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"The {where} is a number, not {value!r}.") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"The {where} must be a finite number, not {value!r}.")
        return number
    if value is None or not str(value).strip():
        raise ValueError(f"The {where} needs a value.")
    return str(value).strip()


def _training_request(jobs: RunStore, family, preset, corpus, steps, seed, device, objectives, settings,
                      tokenizer, model=None) -> dict:
    """Check a training request against the family's spec and the lab home; return start()'s keyword arguments."""
    spec = _trainable(family)
    defaults = {objective.name: objective.weight for objective in spec.objectives}
    weights = dict(objectives) if objectives is not None else dict(defaults)
    unknown = [name for name in weights if name not in defaults]
    if unknown:
        raise ValueError(f"{spec.title} has no objective {unknown[0]!r}: its objectives are {', '.join(defaults)}.")
    own = [name for name in defaults if name not in _addon_names]  # an add-on adds to the family's own objectives
    if not any(float(weights.get(name, defaults[name]) or 0) > 0 for name in own):
        raise ValueError(f"Turn on at least one of {spec.title}'s objectives ({', '.join(own)}).")
    known = family_settings(family)
    values = {}
    for key, value in dict(settings or {}).items():
        if key not in known:
            raise ValueError(f"{spec.title} has no setting {key!r}: its settings are {', '.join(known)}.")
        values[key] = _setting_value(spec.title, key, value, known[key])
    if corpus is not None and corpus not in corpora.list_corpora(home=jobs.home) and not Path(str(corpus)).exists():
        raise ValueError(f"Unknown corpus {corpus!r}: choose one of {', '.join(corpora.list_corpora(home=jobs.home))} "
                         "or import it in the Corpora tab.")
    if tokenizer is not None and tokenizer not in TOKENIZER_KINDS:
        raise ValueError(f"Unknown tokenizer {tokenizer!r}: choose one of {', '.join(TOKENIZER_KINDS)}.")
    if device not in TRAINING_DEVICES:
        raise ValueError(f"Unknown device {device!r}: choose one of {', '.join(TRAINING_DEVICES)}.")
    select_device(device)  # ValueError when e.g. cuda is asked for and there is none
    return {"family": family, "preset": preset, "corpus": corpus, "steps": steps, "seed": seed, "device": device,
            "objectives": weights, "settings": values, "tokenizer": tokenizer,
            "extra_args": _model_arguments(family, model)}


def _model_arguments(family: str, model) -> list[str]:
    """`--model KEY=VALUE` trainer arguments for a dict of ModelConfig overrides (e.g. the Switch Transformer's
    {"ffn": "switch", "n_experts": 8}), checked the way the trainer will read them."""
    from ..jobs import format_value
    from ..train import parse_model_overrides

    if not model:
        return []
    if not isinstance(model, dict):
        raise ValueError(f"model must be a dict of model settings such as {{'ffn': 'switch'}}, got {model!r}.")
    items = [f"{key}={format_value(value)}" for key, value in model.items()]
    parse_model_overrides(items, family)  # ValueError with the trainer's own message
    return [argument for item in items for argument in ("--model", item)]


def start_training(jobs: JobManager, family: str, *, preset: str = "tiny", corpus: str | None = None,
                   steps: int | None = None, seed: int = 0, device: str = "auto",
                   objectives: dict[str, float] | None = None, settings: dict[str, object] | None = None,
                   tokenizer: str | None = None, model: dict[str, object] | None = None) -> str:
    """Queue a training run of `family` and return its run id (e.g. "bert-tiny-20260101-120000-ab12").

    `objectives` maps objective names to weights (0 turns one off; missing ones keep their defaults); `settings`
    overrides keys of `family_settings(family)` (passed to the trainer as --set KEY=VALUE); `steps=None` is the
    preset's default; `tokenizer=None` is the family's own; `model` overrides model settings (--model KEY=VALUE),
    e.g. `switch_settings(True)` for Switch Transformer layers. The run starts when its device is free.
    """
    request = _training_request(jobs, family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                                model)
    return _disk_errors_said(jobs, lambda: jobs.start(**request))


def _disk_errors_said(jobs: RunStore, action):
    """`action()`, with a full or read-only lab home turned into a ValueError that says so ("disk full: ...")."""
    try:
        return action()
    except OSError as error:
        message = _runs.disk_error_message(error, jobs.home)
        if message is None:
            raise
        raise ValueError(message) from None


def training_command(jobs: RunStore, family: str, *, preset: str = "tiny", corpus: str | None = None,
                     steps: int | None = None, seed: int = 0, device: str = "auto",
                     objectives: dict[str, float] | None = None, settings: dict[str, object] | None = None,
                     tokenizer: str | None = None, model: dict[str, object] | None = None) -> str:
    """The `python -m lab_models.train ...` command that `start_training` with these arguments runs (RUN_DIR for the
    folder), so a run started in the page can be repeated from a terminal."""
    request = _training_request(jobs, family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                                model)
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


def list_runs(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """Every run in the lab home, newest first: one flat dict per run (run_id, family, preset, corpus, device, state,
    queue_position, message, step, total_steps, loss, val_loss, val_bits_per_byte, tokens_per_s, eta_s, created).

    The rows are `lab_models.runs.list_runs`'s, with the job manager's live view on top (queue positions, and the
    family/preset/corpus of runs that are still queued). Without a manager, a read-only `RunStore` of `home` is used.
    """
    store = jobs if jobs is not None else RunStore(lab_home(home))
    base = {row["run_id"]: row for row in _runs.list_runs(store.home)}
    rows = []
    for summary in store.list_runs():
        row = dict(base.get(summary["run_id"], {}))
        row.update({key: value for key, value in summary.items() if value is not None or key not in row})
        rows.append(row)
    return rows


def run_folder(run_id: str, *, jobs: RunStore | None = None, home=None) -> Path:
    """The folder of the run (or fine-tuning) named `run_id`, inside the lab home: how every page endpoint that takes a
    run turns the id it got into a folder. ValueError for anything that is not the plain id of an existing run: '..',
    a path, a separator, a NUL byte, more than 200 characters, or a folder that resolves outside the lab home. (The
    Python API's own functions, e.g. `generate(run_dir, ...)`, keep taking a folder path from a local caller.)"""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return store.run_dir(run_id)


def path_inside(folder, path, what: str = "path") -> Path:
    """`path` (relative to `folder`, or absolute) resolved with symlinks followed, when it lies inside `folder`; else
    ValueError. For a folder the user names on the server (an import): read only what is inside the folder named."""
    return _safe_paths.inside(folder, path, what)


def corpus_name(name, *, home=None) -> str:
    """`name` when it names a built-in or imported corpus of the lab home; else ValueError. The page passes corpora by
    name only: a path (which `load_corpus` accepts from a local caller) is refused here, so no request reads files
    outside the lab home."""
    names = corpora.list_corpora(home=home)
    if not isinstance(name, str) or name.strip() not in names:
        quoted = _safe_paths.shown(name) if isinstance(name, str) else type(name).__name__
        raise ValueError(f"Unknown corpus {quoted}: choose one of {', '.join(names)}, or import a file in the Corpora "
                         "tab (the page takes corpus names, not paths).")
    return name.strip()


def load_named_corpus(name, *, home=None):
    """`load_corpus` for the page: a built-in or imported corpus by name only (`corpus_name`), never a path."""
    return corpora.load_corpus(corpus_name(name, home=home), home=home)


def run_metrics(jobs: RunStore, run_id: str) -> list[dict]:
    """Every row of the run's metrics.jsonl (train rows, and evaluation rows with "split": "val"), in order."""
    return jobs.metrics(run_id)


def training_log(jobs: RunStore, run_id: str, lines: int = 20) -> str:
    """The last `lines` lines of the run's logs, for the page: the trainer's own train.log, then worker.log (its
    stdout/stderr, where a crash before logging started shows up), each under a "== name ==" line; '' when empty."""
    run_dir = jobs.run_dir(run_id)
    parts = []
    for name in (_runs.LOG_FILE, _jobs.LOG_FILE):
        tail = _jobs.log_tail(run_dir / name, lines)
        if tail:
            parts.append(f"== {name} ==\n{tail}")
    return "\n".join(parts)
