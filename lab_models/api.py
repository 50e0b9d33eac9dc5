"""The one backend module the UI (`app/`) imports. See ../shared/CONTRACT.md for the stable part of this surface.

Everything here is a thin, documented entry point: it validates arguments (raising `LabError`, a `ValueError` whose
message a person can act on and that keeps its template for the page's translation: `Message`, lab_models/messages.py)
and delegates to the module that does the work. No model logic lives in the UI; no UI lives here.

Sections, in order: families, tokenizers and the Mask Explorer; training jobs; the Switch Transformer; scaling
sweeps; the Understand tab (contextual embeddings, attention maps, sentence similarity); generation and fill-mask;
fine-tuning; the leaderboard; checkpoint import and export; the model zoo. Each section says which stage does the work
(`lab_models/<stage>/`). A name exposed here as `X = module.X` is the stage's own object, given its API name here.
"""
from __future__ import annotations

import dataclasses as _dataclasses
import logging
import os as _os
from pathlib import Path
import types
import typing

import torch

from lab_models import home as _home
from lab_models.messages import Joined, LabError, Message, as_message, message_of
from lab_models.experiments import sweep as _sweep
from lab_models.experiments import zoo as _zoo
from lab_models.objectives.specs import FamilySpec, ObjectiveSpec, all_families, family_spec
from lab_models.home import lab_home
from lab_models.inference import attributions as _attributions
from lab_models.inference import leaderboard as _leaderboard
from lab_models.inference import logit_lens as _logit_lens
from lab_models.inference import probing as _probing
from lab_models.inference import loading as _inference
from lab_models.inference import representations as _probes
from lab_models.inference import routing as _routing
from lab_models.inference import sentence_similarity as _sentence_similarity
from lab_models.inference.finetuning import config as _config
from lab_models.inference.finetuning import results as _results
from lab_models.inference.finetuning import saved as _saved_finetunes
from lab_models.inference.generation import context as _context
from lab_models.inference.generation import generate as _generate
from lab_models.interop import cache as _cache
from lab_models.interop import checkpoint as _checkpoint
from lab_models.interop import exporter as _exporter
from lab_models.interop import importer as _importer
from lab_models.interop import registry as _registry
from lab_models.models import switch as _switch
from lab_models.models.family import TRAINED_FAMILIES as TRAINABLE_FAMILIES
from lab_models.objectives.addons import ADDONS as _addon_names, MODULES as _addon_modules
from lab_models.objectives import adversarial as _adversarial
from lab_models.objectives.anatomy import Anatomy, build_anatomy
from lab_models.text import corpora, tokenization, vocab_fit
from lab_models.text import corpus_files as _corpus_files
from lab_models.text import corpus_sources as _corpus_sources
from lab_models.text import corpus_streams as _corpus_streams
from lab_models.text import tasks as _tasks
from lab_models.text import tokenizer_inspect as _tokenizer_inspect
from lab_models.text import tokenizer_kinds as _tokenizer_kinds
from lab_models.training import runs as _runs
from lab_models.training import flops as _flops, matmul_probe as _matmul_probe, performance as _performance
from lab_models.training.device import describe_device, select_device
from lab_models.training.jobs import files as _files
from lab_models.training.jobs import manager as _jobs
from lab_models.training.jobs import store as _store
from lab_models.training.jobs import tokenizing as _tokenizing
from lab_models.objectives import objective_module
from lab_models.text.word_split import WordSplit
from lab_models.text.word_split import split_words
from lab_models.objectives.settings import settings_help
from lab_models.training.jobs.files import format_value
from lab_models.training.config import MAX_SEED as _MAX_SEED, MAX_STEPS as _MAX_STEPS, parse_model_overrides
from lab_models.training import init_from as _init_from
from lab_models.objectives.settings import settings_with_overrides as _settings_with_overrides
from lab_models.objectives.addons import split_settings as _split_settings
from lab_models.nn.config import ModelConfig
from lab_models.inference.generation.context import FILL_MASK_FAMILIES

logger = logging.getLogger(__name__)

__all__ = [
    "LabError",
    "Message",
    "Joined",
    "message_of",
    "as_message",
    "Anatomy",
    "FamilySpec",
    "ObjectiveSpec",
    "anatomy",
    "families",
    "family",
    "train_tokenizer",
    "device_label",
    "select_device",
    "lab_home",
    "TOKENIZER_KINDS",
    "BUILTIN_CORPORA",
    "list_corpora",
    "load_corpus",
    "import_corpus",
    "inspect_file",
    "corpus_card",
    "cached_tokenizer",
    "tokenize_for_display",
    "merge_replay",
    "merge_count",
    "tokenizer_stats",
    "token_length_histogram",
    "vocab_overlap",
    "load_tokenizer_file",
    "split_for_explorer",
    "explorer_split",
    "VocabSizeTooSmall",
    "VocabProposal",
    "minimum_vocab_size",
    "propose_vocab_size",
    "MAX_STEPS",
    "MAX_SEED",
    "MAX_VOCAB_SIZE",
    "MAX_SWEEP_D_MODEL",
    "MAX_SWEEP_LAYERS",
    "Generation",
    "AutoTask",
    "auto_task",
    "GENERATION_MODES",
    "GENERATION_STRATEGIES",
    "generation_modes",
    "generate",
    "fill_mask",
    "ZooConfig",
    "ZooProgress",
    "ZooRun",
    "ZooPlan",
    "DEMO_ZOO",
    "ZOO_ORDER",
    "start_zoo",
    "stop_zoo",
    "zoo_progress",
    "list_zoos",
    "has_runs",
    "fill_mask_picks",
    "JobManager",
    "RunStore",
    "TRAINABLE_FAMILIES",
    "TRAINING_PRESETS",
    "TRAINING_DEVICES",
    "trainable_families",
    "create_job_manager",
    "family_settings",
    "family_settings_help",
    "start_training",
    "stop_training",
    "resume_training",
    "training_status",
    "training_command",
    "list_runs",
    "run_metrics",
    "training_log",
    "run_folder",
    "path_inside",
    "corpus_name",
    "load_named_corpus",
    "RoutingView",
    "SWITCH_DEFAULTS",
    "switch_settings",
    "switch_routing",
    "is_switch_run",
    "switch_runs",
    "SWEEP_X_AXES",
    "SWEEP_POINT_COLUMNS",
    "parse_sweep_sizes",
    "fit_power_law",
    "sweep_command",
    "start_sweep",
    "stop_sweep",
    "list_sweeps",
    "sweep_points",
    "AttentionMaps",
    "PROBE_MAX_TOKENS",
    "PROBE_MAX_SENTENCES",
    "contextual_similarity",
    "embedding_projection",
    "attention_maps",
    "runs_with_weights",
    "TopicSimilarity",
    "sentence_similarity",
    "FinetuneTaskSpec",
    "FINETUNE_TASKS",
    "FINETUNE_POOLINGS",
    "FINETUNE_CAUSAL_FAMILIES",
    "FINETUNE_DEFAULT_LM_AUX_WEIGHT",
    "FINETUNE_MIN_CSV_ROWS",
    "FINETUNE_DEFAULTS",
    "FINETUNE_LEADERBOARD_COLUMNS",
    "finetune_tasks",
    "default_lm_aux_weight",
    "default_pooling",
    "csv_columns",
    "check_csv_task",
    "store_task_csv",
    "start_finetune",
    "stop_finetune",
    "finetune_status",
    "finetune_metrics",
    "list_finetunes",
    "finetune_leaderboard",
    "LEADERBOARD_COLUMNS",
    "LEADERBOARD_NOTE_COLUMNS",
    "LEADERBOARD_METRICS",
    "LEADERBOARD_ACCURACY_PREFIX",
    "LEADERBOARD_DEFAULT_EXAMPLES",
    "LEADERBOARD_MAX_EXAMPLES",
    "leaderboard",
    "leaderboard_corpora",
    "leaderboard_csv",
    "INTEROP_DEFAULT_CORPUS",
    "import_hf",
    "inspect_hf",
    "export_hf",
    "interop_architectures",
    "CORPUS_ROOT_ENV_VAR",
    "open_corpus",
    "link_corpus",
    "corpus_overview",
    "corpus_root",
    "inspect_server_corpus",
    "link_server_corpus",
    "TokenizeJobs",
    "create_tokenize_jobs",
    "start_tokenizing",
    "tokenizing_status",
    "stop_tokenizing",
]

TOKENIZER_KINDS = _tokenizer_kinds.TOKENIZER_KINDS
BUILTIN_CORPORA = corpora.BUILTIN_CORPORA

list_corpora = corpora.list_corpora
load_corpus = corpora.load_corpus
import_corpus = corpora.import_corpus
inspect_file = _corpus_files.inspect_file
corpus_card = corpora.corpus_card

cached_tokenizer = tokenization.cached_tokenizer
tokenize_for_display = _tokenizer_inspect.tokenize_for_display
merge_replay = _tokenizer_inspect.merge_replay
merge_count = _tokenizer_inspect.merge_count
tokenizer_stats = _tokenizer_inspect.tokenizer_stats
token_length_histogram = _tokenizer_inspect.token_length_histogram
vocab_overlap = _tokenizer_inspect.vocab_overlap
load_tokenizer_file = tokenization.load_tokenizer_file

# A vocabulary too small for the corpus's alphabet (Chinese at 512 tokens) raises VocabSizeTooSmall with the smallest
# size that works (`.minimum`); propose_vocab_size(kinds, texts, requested) is the smallest size for several kinds.
VocabSizeTooSmall = tokenization.VocabSizeTooSmall
VocabProposal = vocab_fit.VocabProposal
minimum_vocab_size = vocab_fit.minimum_vocab_size
propose_vocab_size = vocab_fit.propose_vocab_size


def families() -> list[FamilySpec]:
    """One `FamilySpec` per family the lab knows (CONTRACT.md §1)."""
    return all_families()


def family(name: str) -> FamilySpec:
    """The `FamilySpec` of one family; ValueError for an unknown name."""
    return family_spec(name)


def train_tokenizer(kind: str, texts, vocab_size: int):
    """A trained `tokenizers.Tokenizer` of `kind` (bpe, byte_bpe, wordpiece, unigram) on `texts`."""
    return tokenization.train_tokenizer(kind, texts, vocab_size)


def anatomy(family: str, tokens, *, seed: int = 0, settings: dict | None = None, **choices) -> Anatomy:
    """What one training example of `family` looks like for the given token strings (CONTRACT.md §1).

    Built by the family's own `build_example`, the code that builds its training batches. `settings` overrides fields
    of the family's batch-builder settings (`family_settings(family)`), e.g. {"two_stream": False} for XLNet's leak.
    """
    if not isinstance(family, str):
        raise LabError("family must be a name such as 'bert', got {family!r}", family=family)
    if isinstance(tokens, str):
        raise LabError("tokens must be a list of token strings, not one string: split it first, e.g. text.split().")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabError("seed must be an integer, got {seed!r}", seed=seed)
    if not -2**63 <= seed < 2**64:  # what torch.Generator.manual_seed takes
        raise LabError("seed must be between -2**63 and 2**64 - 1, got {seed}", seed=seed)
    if settings is not None:
        choices["settings"] = _anatomy_settings(family, settings)
    return build_anatomy(family, list(tokens), seed=seed, **choices)


def _anatomy_settings(family: str, values: dict):
    """The family's default batch-builder settings with `values` replaced (ValueError for an unknown key)."""
    import dataclasses


    if not isinstance(values, dict) or not all(isinstance(key, str) for key in values):
        raise LabError("settings must be a dict of setting names to values, e.g. {{'two_stream': False}}; got "
                       "{values_type}.", values_type=type(values).__name__)
    module = objective_module(family)
    if not hasattr(module, "Settings"):
        raise LabError("{family} has no batch-builder settings to change.", family=family)
    defaults = module.Settings()
    known = {f.name for f in dataclasses.fields(defaults)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise LabError("{family} has no setting {unknown}; its settings are: {known}.",
                       family=family, unknown=', '.join(unknown), known=', '.join(sorted(known)))
    hints = typing.get_type_hints(type(defaults))
    converted = {}
    for key, value in values.items():
        if not _fits(value, hints[key]):
            raise LabError("{family}'s setting {key} takes {type_words}, not "
                           "{value}.",
                           family=family, key=key, type_words=_type_words(hints[key]), value=_home.shown(value))
        converted[key] = tuple(value) if isinstance(value, list) else value
    return dataclasses.replace(defaults, **converted)


def _fits(value, annotation) -> bool:
    """Whether `value` has the type a Settings field is annotated with (a list passes for a tuple).

    >>> _fits(0.2, float), _fits(True, float), _fits([0.5, 0.5], tuple[float, ...]), _fits(None, int | None)
    (True, False, True, True)
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in args)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation in (int, float):
        return isinstance(value, (int, float) if annotation is float else int) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False
        if args and args[-1] is Ellipsis:
            return all(_fits(item, args[0]) for item in value)
        return not args or (len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args)))
    if isinstance(annotation, type):
        return isinstance(value, annotation)  # e.g. a nested settings dataclass
    return True  # an annotation this check does not know: the Settings class validates it


def _type_words(annotation) -> Message | str:
    names = {bool: Message("true or false"), int: Message("a whole number"), float: Message("a number"),
             str: Message("text"), type(None): "None"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return Joined((_type_words(option) for option in args), " or ")
    if origin is tuple:
        return Message("a list of {items}", items=_type_words(args[0])) if args else Message("a list of values")
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def explorer_split(text: str, tokenizer_path: str | Path | None = None, *, split: str = "whitespace",
                   max_tokens: int = 64):
    """`text` as token strings for the Mask Explorer, with the rule used (a `text_split.WordSplit`: tokens, mode,
    note). `split` "whitespace" splits on spaces and makes each Chinese/Japanese/Korean character (and emoji) a token
    of its own (BERT's rule; whitespace alone would give a Chinese sentence one token), "characters" one token per
    character; a saved tokenizer.json (`tokenizer_path`) splits as that tokenizer does."""

    if not text or not text.strip():
        raise LabError("Type a sentence first: the input is empty.")
    if tokenizer_path is None:
        result = split_words(text, split)
    else:
        tokenizer = tokenization.load_tokenizer_file(tokenizer_path)
        tokens = [t for t in tokenizer.encode(text, add_special_tokens=False).tokens if t]
        title = TOKENIZER_KINDS[_tokenizer_inspect.tokenizer_kind(tokenizer)]
        result = WordSplit(tokens, "tokenizer", Message("split with the {title} tokenizer", title=title))
    if not result.tokens:
        raise LabError("The tokenizer produced no tokens for this text.")
    if len(result.tokens) > max_tokens:
        raise LabError("The sentence has {n_tokens} tokens ({note}); the Mask Explorer draws at "
                       "most {max_tokens}. Shorten it.",
                       n_tokens=len(result.tokens), note=result.note, max_tokens=max_tokens)
    return result


def split_for_explorer(text: str, tokenizer_path: str | Path | None = None, *, max_tokens: int = 64,
                       split: str = "whitespace") -> list[str]:
    """The tokens of `explorer_split`: on whitespace (CJK characters one by one), per character, or with a saved
    tokenizer.json."""
    return explorer_split(text, tokenizer_path, split=split, max_tokens=max_tokens).tokens


def device_label() -> str:
    """The compute device in use, for the page header."""
    return describe_device(select_device("auto"))


def torch_version() -> str:
    return torch.__version__


# ------------------------------------------------------------------------------------------------ training jobs
# The Train tab's backend. The `JobManager` is created by the app (one per app, shared by every session) and passed
# to these functions; nothing here keeps a global one. See lab_models/training/jobs/manager.py for the queue's
# behaviour.
JobManager = _jobs.JobManager
RunStore = _store.RunStore
TRAINING_PRESETS = _files.PRESETS
TRAINING_DEVICES = _files.DEVICES


def trainable_families() -> list[FamilySpec]:
    """The families whose training works end to end (a `trainable` FamilySpec field wins where it exists)."""
    return [spec for spec in all_families() if getattr(spec, "trainable", spec.name in TRAINABLE_FAMILIES)]


def _trainable(family: str) -> FamilySpec:
    names = [spec.name for spec in trainable_families()]
    if family not in names:
        raise LabError("{family!r} cannot be trained yet: choose one of {names}.",
                       family=family, names=', '.join(names))
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
                      tokenizer, model=None, init_from=None) -> dict:
    """Check a training request against the family's spec and the lab home; return start()'s keyword arguments."""
    spec = _trainable(family)
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
    if corpus is not None and corpus not in corpora.list_corpora(home=jobs.home) and not Path(str(corpus)).exists():
        raise LabError("Unknown corpus {corpus!r}: choose one of {corpora} "
                       "or import it in the Corpora tab.",
                       corpus=corpus, corpora=', '.join(corpora.list_corpora(home=jobs.home)))
    if tokenizer is not None and tokenizer not in TOKENIZER_KINDS:
        raise LabError("Unknown tokenizer {tokenizer!r}: choose one of {tokenizer_kinds}.",
                       tokenizer=tokenizer, tokenizer_kinds=', '.join(TOKENIZER_KINDS))
    if device not in TRAINING_DEVICES:
        raise LabError("Unknown device {device!r}: choose one of {training_devices}.",
                       device=device, training_devices=', '.join(TRAINING_DEVICES))
    select_device(device)  # ValueError when e.g. cuda is asked for and there is none
    extra_args = _model_arguments(family, model)
    if init_from is not None and str(init_from).strip():
        extra_args += _init_from_arguments(jobs, family, str(init_from).strip(), values, tokenizer, model)
    return {"family": family, "preset": preset, "corpus": corpus, "steps": steps, "seed": seed, "device": device,
            "objectives": weights, "settings": values, "tokenizer": tokenizer, "extra_args": extra_args}


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
                   init_from: str | None = None) -> str:
    """Queue a training run of `family` and return its run id (e.g. "bert-tiny-20260101-120000-ab12").

    `objectives` maps objective names to weights (0 turns one off; missing ones keep their defaults); `settings`
    overrides keys of `family_settings(family)` (passed to the trainer as --set KEY=VALUE); `steps=None` is the
    preset's default; `tokenizer=None` is the family's own; `model` overrides model settings (--model KEY=VALUE),
    e.g. `switch_settings(True)` for Switch Transformer layers. `init_from`: a run id of the lab home whose weights,
    tokenizer and framing the run starts from (`--init-from`: an imported checkpoint or a lab run; the family must
    match its architecture, and the model's dimensions are its). The run starts when its device is free.
    """
    request = _training_request(jobs, family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                                model, init_from)
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
                     init_from: str | None = None) -> str:
    """The `python -m lab_models train ...` command that `start_training` with these arguments runs (RUN_DIR for the
    folder), so a run started in the page can be repeated from a terminal."""
    request = _training_request(jobs, family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                                model, init_from)
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

    The rows are `lab_models.training.runs.list_runs`'s, with the job manager's live view on top (queue positions, and
    the family/preset/corpus of runs that are still queued). Without a manager, a read-only `RunStore` of `home` is
    used.
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


def path_inside(folder, path, what: Message = Message("path")) -> Path:
    """`path` (relative to `folder`, or absolute) resolved with symlinks followed, when it lies inside `folder`; else
    ValueError. For a folder the user names on the server (an import): read only what is inside the folder named."""
    return _home.inside(folder, path, what)


def corpus_name(name, *, home=None) -> str:
    """`name` when it names a built-in or imported corpus of the lab home; else ValueError. The page passes corpora by
    name only: a path (which `load_corpus` accepts from a local caller) is refused here, so no request reads files
    outside the lab home."""
    names = corpora.list_corpora(home=home)
    if not isinstance(name, str) or name.strip() not in names:
        quoted = _home.shown(name) if isinstance(name, str) else type(name).__name__
        raise LabError("Unknown corpus {quoted}: choose one of {names}, or import a file in the Corpora "
                       "tab (the page takes corpus names, not paths).", quoted=quoted, names=', '.join(names))
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
    for name in (_runs.LOG_FILE, _files.LOG_FILE):
        tail = _files.log_tail(run_dir / name, lines)
        if tail:
            parts.append(f"== {name} ==\n{tail}")
    return "\n".join(parts)


# ================================================================================================ switch (begin)
# The Switch Transformer (lab_models/nn/moe.py, lab_models/models/switch.py): a feed-forward option of every Transformer
# family, turned on with `model=switch_settings(True, ...)` in start_training (the CLI's --model ffn=switch ...).
RoutingView = _routing.RoutingView
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


def is_switch_run(run_dir) -> bool:
    """Whether the run in `run_dir` was trained with Switch layers (its config.json says ffn "switch")."""
    model = _runs.read_config(Path(run_dir)).get("model")
    return isinstance(model, dict) and model.get("ffn") == "switch"


def switch_runs(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """`runs_with_weights` rows of the runs trained with Switch layers, newest first."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return [row for row in runs_with_weights(store) if is_switch_run(store.run_dir(row["run_id"]))]


def switch_routing(run_dir, sentence: str) -> RoutingView:
    """The expert each token of `sentence` goes to in every Switch layer of a trained run (`RoutingView`: per layer,
    the tokens, their experts and router probabilities), read in evaluation mode. ValueError for a run without
    Switch layers, an RNN run, an empty or too long sentence."""
    return _routing.token_routing(_probe_run_dir(run_dir), sentence)
# ================================================================================================ switch (end)


# ================================================================================================ sweep (begin)
# Scaling sweeps (lab_models/experiments/sweep.py): one family at several sizes (dense, and with --switch also with
# Switch
# layers), queued on the job manager as one worker (`python -m lab_models sweep`) in <home>/sweeps/<id>/, each size
# an ordinary training run inside it; a power law of validation bits per byte against parameters and training FLOPs.
SWEEP_X_AXES = dict(_sweep.X_AXES)  # "parameters", "flops" -> axis title
SWEEP_POINT_COLUMNS = ["sweep", "family", "variant", "size", "state", "non_embedding", "active_non_embedding",
                       "train_flops", "tokens", "bits_per_byte", "seconds", "message"]
fit_power_law = _sweep.fit_power_law


def parse_sweep_sizes(text: str) -> list[dict]:
    """The sizes of a `--sizes` text (preset names or DxL), each as {label, d_model, n_layers, n_heads, d_ff}."""
    return [_dataclasses.asdict(size) for size in _sweep.parse_sizes(text)]


def _sweep_config(jobs: RunStore, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes,
                  n_experts, capacity_factor, expert_every, out="") -> "_sweep.SweepConfig":
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or steps != int(steps) or \
            not 1 <= steps <= _MAX_STEPS:
        raise LabError("Steps must be a whole number from 1 to {max_steps:,}, got {steps!r}.",
                       max_steps=_MAX_STEPS, steps=steps)
    if device not in TRAINING_DEVICES:
        raise LabError("Unknown device {device!r}: choose one of {training_devices}.",
                       device=device, training_devices=', '.join(TRAINING_DEVICES))
    select_device(device)
    if corpus is not None and corpus not in corpora.list_corpora(home=jobs.home) and not Path(str(corpus)).exists():
        raise LabError("Unknown corpus {corpus!r}: choose one of {corpora}.",
                       corpus=corpus, corpora=', '.join(corpora.list_corpora(home=jobs.home)))
    config = _sweep.SweepConfig(
        family=family, sizes=tuple(size.label for size in _sweep.parse_sizes(sizes)), steps=int(steps), out=out,
        switch=bool(switch), preset=preset, corpus=corpus or None, seed=int(seed or 0), device=device,
        max_minutes=float(max_minutes) if max_minutes else None, n_experts=int(n_experts),
        capacity_factor=float(capacity_factor), expert_every=int(expert_every), home=str(jobs.home))
    _sweep.check_config(config)  # ValueError for a family, size or Switch setting that cannot train
    return config


def sweep_command(jobs: RunStore, family: str, sizes: str, *, steps: int, switch: bool = False, preset: str = "tiny",
                  corpus: str | None = None, seed: int = 0, device: str = "auto", max_minutes: float | None = None,
                  n_experts: int = 8, capacity_factor: float = 1.25, expert_every: int = 2) -> str:
    """The `python -m lab_models sweep ...` command `start_sweep` runs with these arguments (SWEEP_DIR for its
    folder)."""
    import shlex

    config = _sweep_config(jobs, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes, n_experts,
                           capacity_factor, expert_every, out="SWEEP_DIR")
    return shlex.join(["python", "-m", "lab_models", "sweep", *_sweep.sweep_arguments(config)])


def start_sweep(jobs: JobManager, family: str, sizes: str, *, steps: int, switch: bool = False, preset: str = "tiny",
                corpus: str | None = None, seed: int = 0, device: str = "auto", max_minutes: float | None = None,
                n_experts: int = 8, capacity_factor: float = 1.25, expert_every: int = 2) -> str:
    """Queue a scaling sweep of `family` at `sizes` ("32x1,64x2,tiny": preset names or DxL), `steps` steps per run,
    with Switch twins when `switch`; returns its id (its folder name under <home>/sweeps/). The sizes share the
    `preset`'s data and training settings; `max_minutes` limits each run. ValueError before anything is queued for a
    bad family, size or setting."""
    import sys as _sys

    config = _sweep_config(jobs, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes, n_experts,
                           capacity_factor, expert_every)
    folder = _sweep.new_sweep_dir(jobs.home, family)
    config = _dataclasses.replace(config, out=str(folder))
    command = [_sys.executable, "-m", "lab_models", "sweep", *_sweep.sweep_arguments(config)]
    runs_in_sweep = len(config.sizes) * len(config.variants())
    return jobs.start_command("sweep", command, folder, device=device, total_steps=runs_in_sweep,
                              request={"family": family, "sweep": config.to_dict()})


def stop_sweep(jobs: JobManager, sweep_id: str) -> dict:
    """Stop a sweep: a queued one leaves the queue; a running one stops its current run (which checkpoints) and
    starts no other. Returns its status."""
    jobs.stop(_sweep_id(jobs, sweep_id))
    return jobs.status(sweep_id.strip())


def _sweep_id(jobs: RunStore, sweep_id) -> str:
    if not isinstance(sweep_id, str) or not sweep_id.strip():
        raise LabError("Choose a sweep first.")
    folder = jobs.run_dir(sweep_id.strip())
    if folder.parent.name != _sweep.SWEEPS_FOLDER:
        raise LabError("{sweep_id} is not a sweep.", sweep_id=sweep_id)
    return folder.name


def list_sweeps(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """Every sweep in the lab home, newest first: sweep.json (config, points, fits) with sweep_id, and "status"
    (state, step = runs done, total_steps, message, queue_position) as the job manager sees it."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    found = []
    for sweep in _sweep.list_sweeps(store.home):
        try:
            sweep["status"] = store.status(sweep["sweep_id"])
        except ValueError:
            pass
        if not sweep.get("config"):  # queued, not started yet: its request says what it will do
            request = _runs.read_json(Path(sweep["folder"]) / _files.JOB_FILE)
            sweep["config"] = request.get("sweep") or {}
            sweep.setdefault("created", request.get("created"))
        found.append(sweep)
    return found


def sweep_points(sweep_ids=None, jobs: RunStore | None = None, *, home=None):
    """A pandas DataFrame of the points of the given sweeps (all when None): SWEEP_POINT_COLUMNS, one row per
    (sweep, size, variant) run, failed ones with their message."""
    import pandas as pd

    wanted = None if sweep_ids is None else {str(s).strip() for s in ([sweep_ids] if isinstance(sweep_ids, str)
                                                                       else sweep_ids)}
    records = []
    for sweep in list_sweeps(jobs, home=home):
        if wanted is not None and sweep["sweep_id"] not in wanted:
            continue
        family = (sweep.get("config") or {}).get("family")
        for point in sweep.get("points") or []:
            records.append({"sweep": sweep["sweep_id"], "family": family, **point})
    frame = pd.DataFrame(records)
    for column in SWEEP_POINT_COLUMNS:
        if column not in frame:
            frame[column] = None
    # a failure's message keeps its template (a text column would make it a plain str)
    frame["message"] = pd.Series([record.get("message") for record in records], index=frame.index, dtype=object)
    return frame[SWEEP_POINT_COLUMNS + [c for c in frame.columns if c not in SWEEP_POINT_COLUMNS]]
# ================================================================================================ sweep (end)


# ================================================================================================ understand (begin)
# The Understand tab's backend: contextual embeddings and attention maps of trained runs
# (lab_models/inference/representations.py), read
# from the real forward pass with hooks. Each function takes run folders (`RunStore.run_dir(run_id)` gives one).
AttentionMaps = _probes.AttentionMaps
PROBE_MAX_TOKENS = _probes.MAX_TOKENS
PROBE_MAX_SENTENCES = _probes.MAX_SENTENCES


def _probe_run_dir(run_dir) -> Path:
    if run_dir is None or not str(run_dir).strip():
        raise LabError("Choose a run first: pick one with weights (finished, stopped, or running with a "
                       "checkpoint).")
    return Path(str(run_dir).strip()).expanduser()


def contextual_similarity(run_dirs, sentence_a: str, sentence_b: str, word: str):
    """The cosine similarity of `word`'s vector in sentence A and in sentence B, per layer, for each run: a pandas
    DataFrame with columns run, family, layer (0 = embedding output, then one per block), layer_name, cosine,
    pieces_a and pieces_b (the tokens averaged into the word's vector). `run_dirs`: one run folder or a list.
    ValueError: an empty sentence or word, a word missing from a sentence, a sentence over the token limit, a run
    without weights."""
    import pandas as pd

    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs or [])
    if not dirs:
        raise LabError("Pick at least one run to compare.")
    frames = [_probes.contextual_similarity(_probe_run_dir(d), sentence_a, sentence_b, word) for d in dirs]
    return pd.concat(frames, ignore_index=True)


def embedding_projection(run_dir, sentences, word: str | None = None):
    """The final layer's token vectors of `sentences` (a list, or text with one sentence per line; at most
    PROBE_MAX_SENTENCES) on their first two principal components: a DataFrame with columns run, family, sentence
    (0-based index), position, token, is_word (covers `word`), x, y; attrs["explained_variance"] and attrs["view"]."""
    return _probes.embedding_projection(_probe_run_dir(run_dir), sentences, word)


def attention_maps(run_dir, sentence: str) -> AttentionMaps:
    """Every layer's and head's attention probabilities for `sentence`, per stream (self; content and query; encoder,
    decoder and cross), under the mask the family uses at inference (lab_models/inference/representations.py lists
    them)."""
    return _probes.attention_maps(_probe_run_dir(run_dir), sentence)


def runs_with_weights(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The rows of `list_runs` whose run has weights to load now (finished or stopped runs, and running or failed ones
    with a checkpoint), newest first; each row gains "weights_step", the step of those weights."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    rows = []
    for row in list_runs(store):
        if row.get("state") == "queued" or not row.get("run_id"):
            continue
        try:
            _, step = _inference.weights_file(store.run_dir(row["run_id"]))
        except (ValueError, OSError):
            continue
        rows.append({**row, "weights_step": step})
    return rows


# Sentence similarity by topic (lab_models/inference/sentence_similarity.py): the view that shows what the contrastive
# add-on
# (objectives/contrastive.py) changes.

TopicSimilarity = _sentence_similarity.TopicSimilarity
SENTENCE_SIMILARITY_POOLINGS = _sentence_similarity.POOLINGS
SENTENCE_SIMILARITY_PER_TOPIC = _sentence_similarity.DEFAULT_PER_TOPIC
SENTENCE_SIMILARITY_MAX_PER_TOPIC = _sentence_similarity.MAX_PER_TOPIC


def sentence_similarity(run_dirs, pooling: str = "mean",
                        per_topic: int = _sentence_similarity.DEFAULT_PER_TOPIC) -> list[TopicSimilarity]:
    """For each run, the mean cosine similarity between the pooled vectors of held-out synthetic sentences of each
    pair of topics, the gap between same-topic and different-topic pairs, the AUC of that separation and the share of
    sentences whose nearest neighbour shares their topic (`TopicSimilarity`). `pooling`: "mean" (of the tokens) or
    "auto" (the family's fine-tuning vector: [CLS], GPT's last token, ...). ValueError for no run, a run without
    weights, or a bad pooling or count."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs or [])
    if not dirs:
        raise LabError("Pick at least one run to compare.")
    return [_sentence_similarity.topic_similarity(_probe_run_dir(d), pooling, per_topic) for d in dirs]
# ================================================================================================ understand (end)


# ================================================================================================ bounds (begin)
# The bounds of the numbers a request takes, checked wherever the request comes in (the page, this API, the CLIs);
# README "Bad input" lists them. A number beyond them is refused with a message, never queued.
MAX_STEPS = _MAX_STEPS  # a training run's (or a sweep's, a zoo's, a fine-tuning's) steps: 1 to 10,000,000
MAX_SEED = _MAX_SEED  # a training run's, a generation's, a fine-tuning's, the leaderboard's seed: 0 to 2**32 - 1
MAX_VOCAB_SIZE = _tokenizer_kinds.MAX_VOCAB_SIZE  # a tokenizer's vocabulary: 1 to 262,144
MAX_SWEEP_D_MODEL = _sweep.MAX_SWEEP_D_MODEL  # a sweep's DxL sizes: d_model up to 16,384, layers up to 256
MAX_SWEEP_LAYERS = _sweep.MAX_SWEEP_LAYERS
# ================================================================================================ bounds (end)


# ================================================================================================ probing (begin)
# What each objective puts inside the models (issue 26): linear probes of every layer against a random-init control
# (lab_models/inference/probing.py), the logit lens (logit_lens.py) and attributions (attributions.py) at the position
# the family predicts (predicting.py). Each takes a run folder; `attributions` also a fine-tuning folder with saved
# weights (its classifier's label is explained).
__all__ += ["PROBE_TASKS", "PROBE_COLUMNS", "probe_layers", "best_probe_layer", "LENS_COLUMNS", "logit_lens",
            "Attribution", "ATTRIBUTION_METHODS", "ATTRIBUTION_BASELINES", "ATTRIBUTION_DEFAULT_STEPS",
            "ATTRIBUTION_MAX_STEPS", "attributions", "explain_prediction", "finetunes_with_weights"]
PROBE_TASKS = tuple(_probing.PROBE_TASKS)  # tags, roles (word level); topic, sentiment (sentence level)
PROBE_COLUMNS = list(_probing.PROBE_COLUMNS)
LENS_COLUMNS = list(_logit_lens.LENS_COLUMNS)
Attribution = _attributions.Attribution
ATTRIBUTION_METHODS = _attributions.METHODS
ATTRIBUTION_BASELINES = _attributions.BASELINES
ATTRIBUTION_DEFAULT_STEPS = _attributions.DEFAULT_STEPS
ATTRIBUTION_MAX_STEPS = _attributions.MAX_STEPS


def probe_layers(run_dir, task: str = "tags", seed: int = 0, progress=None):
    """A linear probe per (stream, layer) of a frozen run, against the majority baseline and the same probe on the
    untrained model of the same architecture and seed: a pandas DataFrame with columns stream, layer (0 =
    embeddings), depth (0.0 to 1.0), accuracy, majority, control, layer_name and selectivity (accuracy - control).
    `task`: "tags" or "roles" (per word), "topic" or "sentiment" (per sentence, from the mean of the layer); the
    sentences are the synthetic corpus's. The features are cached in the run folder (probe-features.safetensors).
    progress(done, total, message) is called while features are computed."""
    return _probing.probe_layers(_probe_run_dir(run_dir), task, seed, progress)


def best_probe_layer(frame) -> dict:
    """The row of a `probe_layers` table with the highest accuracy: {stream, layer, layer_name, depth, accuracy,
    control}, {} for none."""
    return _probing.best_probe_layer(frame)


def logit_lens(run_dir, text: str, top_k: int = 5):
    """What every layer predicts at the position the family predicts (the first [MASK] for the MLM families, the next
    token for the causal ones, a T5/MASS span's first token, CoVe's first translated token), decoded through the
    family's own output head with its final norm: a DataFrame with columns layer, rank, token, probability and
    layer_name; attrs: where, stream, note (where the head makes this an approximation), check_error."""
    return _logit_lens.logit_lens(_probe_run_dir(run_dir), text, top_k)


def explain_prediction(run_dir, text: str, method: str = "integrated_gradients", steps: int = 32, *,
                       baseline: str = "pad", target: str | None = None) -> Attribution:
    """Gradient x input or integrated gradients (`steps` Gauss-Legendre points from a baseline of [PAD] vectors or
    zeros) of the probability of the run's own answer at the position it predicts, or, for a fine-tuning folder with
    saved weights, of its classifier's label: an `Attribution` (tokens, scores, target, where, probability,
    baseline_probability, completeness_error)."""
    return _attributions.explain_prediction(_probe_run_dir(run_dir), text, method, steps, baseline=baseline,
                                            target=target)


def attributions(run_dir, text: str, method: str = "integrated_gradients", steps: int = 32) -> list[tuple[str, float]]:
    """One (token, attribution) pair per input token, for the family's prediction at the first [MASK] or the next
    token; `method` is "integrated_gradients" or "gradient_x_input" (`explain_prediction` has the details)."""
    return _attributions.attributions(_probe_run_dir(run_dir), text, method, steps)


def finetunes_with_weights(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The finished or stopped fine-tunings of a sentence task that kept their weights (the attributions view can
    explain their labels), newest first: rows of `list_finetunes`."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return [row for row in list_finetunes(store) if row.get("state") in ("finished", "stopped")
            and _saved_finetunes.explainable_finetune(row["path"])]
# ================================================================================================ probing (end)


# ================================================================================================ generation (begin)
# Generation and fill-mask from trained runs (lab_models/inference/generation/generate.py): `generate(run_dir, prompt,
# **decoding)` returns
# a `Generation` (a mode the family cannot do gives supported=False and an explanation); `fill_mask(run_dir, text,
# top_k)` the top-k tokens per [MASK]; `generation_modes(family)` what a family can do, its default first;
# `auto_task(family, prompt)` what mode "auto" asks a family to do with a prompt (the Compare tab's Auto mode).

Generation = _context.Generation
AutoTask = _context.AutoTask
auto_task = _context.auto_task
GENERATION_MODES = _context.GENERATION_MODES
GENERATION_STRATEGIES = _context.STRATEGIES
generation_modes = _context.generation_modes
generate = _generate.generate
fill_mask = _generate.fill_mask
# ================================================================================================ generation (end)


# ================================================================================================ finetune (begin)
# Fine-tuning pretrained runs on labelled tasks (lab_models/inference/finetuning/run.py, lab_models/text/tasks.py): the
# built-in tasks
# (sentiment, topic, entailment, tagging) or a user's CSV, one fine-tuning per run, queued on the app's JobManager
# like a training run (a worker process `python -m lab_models finetune`, stopped with SIGTERM, result.json at the
# end). The functions take the job manager (or a read-only `RunStore`) so that nothing here holds global state.
FinetuneTaskSpec = _tasks.TaskSpec
FINETUNE_TASKS = dict(_tasks.TASKS)  # name -> TaskSpec (name, kind, title, label_names, description)
FINETUNE_POOLINGS = _config.POOLINGS  # auto, first, last, mean
FINETUNE_CAUSAL_FAMILIES = _config.CAUSAL_FAMILIES  # the families whose default λ is GPT's 0.5
FINETUNE_DEFAULT_LM_AUX_WEIGHT = _config.DEFAULT_LM_AUX_WEIGHT
FINETUNE_MIN_CSV_ROWS = _tasks.MIN_CSV_ROWS
# FinetuneConfig's own defaults, for the controls of a page (one source of truth: the dataclass)
FINETUNE_DEFAULTS = {field.name: field.default for field in _dataclasses.fields(_config.FinetuneConfig)
                     if field.name in ("steps", "batch_size", "seed", "pooling")}
# finetune_leaderboard's columns, plus λ (the auxiliary LM weight the fine-tuning used)
FINETUNE_LEADERBOARD_COLUMNS = [*_config.LEADERBOARD_COLUMNS, "λ", "adversarial"]
FINETUNE_ADVERSARIAL_METHODS = _adversarial.FINETUNE_METHODS  # none, freelb, smart (objectives/adversarial.py)
TASK_CSV_FOLDER = "task-csv"  # <home>/task-csv/<hash>/<name>.csv: uploaded CSV tasks, kept for their workers


def finetune_tasks() -> list[FinetuneTaskSpec]:
    """The built-in tasks, in menu order: each a `TaskSpec` with name, kind (sequence, pair, token), title,
    label_names and a one-line description."""
    return list(FINETUNE_TASKS.values())


def default_lm_aux_weight(family: str) -> float:
    """The auxiliary LM weight λ a fine-tuning of `family` uses when none is given: 0.5 for GPT and GPT-2 (GPT §3.2),
    0 for the others (their papers fine-tune without it). ValueError for an unknown family."""
    family_spec(family)
    return float(FINETUNE_DEFAULT_LM_AUX_WEIGHT) if family in FINETUNE_CAUSAL_FAMILIES else 0.0


def default_pooling(family: str) -> str:
    """What pooling "auto" means for `family`: "last" for the left-to-right models (GPT, GPT-2, ULMFiT: only the
    last position has read the whole input), "mean" for ELMo, CoVe and CVT, "first" ([CLS]) for the others.
    ValueError for an unknown family."""
    family_spec(family)
    return _config.auto_pooling(family)


def _csv_path(path) -> Path:
    if path is None or not str(path).strip():
        raise LabError("Upload a CSV file first: it needs a header row naming a text column and a label column.")
    return Path(str(path).strip()).expanduser()


def csv_columns(path) -> list[str]:
    """The column names in the header row of a CSV file (delimiter , ; TAB or |, as corpus uploads). ValueError for
    a missing, empty, binary, non-UTF-8 or too big file, or a CSV syntax error."""
    path = _csv_path(path)
    if not path.is_file():
        raise LabError("No CSV file at {path}: upload it again.", path=path)
    size = path.stat().st_size
    cap = _corpus_files.max_upload_bytes()
    if size > cap:
        raise LabError("{name} is {megabytes:.1f} MB, more than the {cap_megabytes:.0f} MB limit "
                       "(PRETRAINING_LAB_MAX_UPLOAD_MB); use a smaller sample of the rows.",
                       name=path.name, megabytes=size / 2**20, cap_megabytes=cap / 2**20)
    text = _corpus_files.decode_text(path.read_bytes(), path.name)
    header, _ = _tasks.read_csv_rows(text, path.name)
    return header


def check_csv_task(path, text_column: str, label_column: str, text_pair_column: str | None = None) -> dict:
    """Read a CSV file as a fine-tuning task, the way the worker will, and summarise it: name, kind, title,
    label_names, train_examples, validation_examples, the label counts per split and majority_baseline.
    ValueError (what to fix) for a bad file, a missing column, too few rows or fewer than 2 labels."""
    pair = text_pair_column if text_pair_column and str(text_pair_column).strip() else None
    return _tasks.csv_task(_csv_path(path), text_column, label_column, pair).summary()


def store_task_csv(path, home=None) -> Path:
    """A copy of the CSV file at `path` inside the lab home (`<home>/task-csv/<content hash>/<file name>`), so a
    queued fine-tuning still finds it after the page's upload folder is cleaned; the same content is stored once."""
    import hashlib
    import shutil

    source = _csv_path(path)
    if not source.is_file():
        raise LabError("No CSV file at {source}: upload it again.", source=source)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in source.name).strip("-.") or "task.csv"
    target = lab_home(home) / TASK_CSV_FOLDER / digest / name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(source, partial)
        partial.replace(target)  # atomic: a concurrent reader never sees half a file
    return target


def start_finetune(jobs: JobManager, run_id: str, task: str, **options) -> str:
    """Queue one fine-tuning of run `run_id` on `task` (a name in FINETUNE_TASKS, or "csv" with csv_path=,
    text_column=, label_column=[, text_pair_column=]) and return its id, the folder name under <home>/finetunes.

    Options are `FinetuneConfig` fields: steps, batch_size, lr, seed, pooling (auto/first/last/mean), lm_aux_weight
    (λ; None = the family default, `default_lm_aux_weight`), max_len, device, ... (None = the default). A CSV is first
    copied into the lab home (`store_task_csv`). ValueError before anything is queued for an unknown run, a run
    without weights, a bad task or CSV, or a bad number."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise LabError("Choose a run to fine-tune: pick one with weights.")
    run_dir = jobs.run_dir(run_id.strip())  # ValueError for an unknown or malformed id
    if run_dir.parent != jobs.runs_dir:
        raise LabError("{run_id} is not a pretraining run; fine-tune one of the runs in the runs list.", run_id=run_id)
    if task == "csv" and options.get("csv_path"):
        options = {**options, "csv_path": str(store_task_csv(options["csv_path"], jobs.home))}
    return _results.start_finetune(jobs, run_id.strip(), task, **options)


def stop_finetune(jobs: JobManager, finetune_id: str) -> dict:
    """Stop a fine-tuning: a queued one leaves the queue ("stopped"); a running one finishes its step, evaluates,
    writes result.json and ends "stopped". Returns `finetune_status`. ValueError when it is not queued or running."""
    jobs.stop(_finetune_id(jobs, finetune_id))
    return finetune_status(jobs, finetune_id)


def _finetune_id(jobs: RunStore, finetune_id) -> str:
    if not isinstance(finetune_id, str) or not finetune_id.strip():
        raise LabError("Choose a fine-tuning first.")
    folder = jobs.run_dir(finetune_id.strip())
    if folder.parent.name != _config.FINETUNES_FOLDER:
        raise LabError("{finetune_id} is a pretraining run, not a fine-tuning.", finetune_id=finetune_id)
    return folder.name


def finetune_status(jobs: RunStore, finetune_id: str) -> dict:
    """Where a fine-tuning stands: `list_finetunes`' row (finetune_id, run_id, family, task, pooling, lm_aux_weight,
    accuracy, macro_f1, majority_baseline, steps, seconds, has_result, ...) with the job manager's live state on top
    (state, step, total_steps, message, queue_position, stopping), plus val_accuracy and val_step (the latest
    evaluation) and train_accuracy (the latest logged training batches)."""
    finetune_id = _finetune_id(jobs, finetune_id)
    folder = jobs.run_dir(finetune_id)
    row = _results.finetune_summary(folder)
    live = jobs.status(finetune_id)
    row.update({key: live.get(key) for key in ("state", "step", "total_steps", "message", "queue_position",
                                               "stopping", "interrupted")})
    request = _runs.read_json(folder / _files.JOB_FILE)
    settings = request.get("finetune") if isinstance(request.get("finetune"), dict) else {}
    if row.get("run_id") in (None, finetune_id) and settings.get("run_dir"):
        # before the worker writes config.json, job.json's "run_id" is the job's own id: the run is in its settings
        row["run_id"] = Path(str(settings["run_dir"])).name
    if not row.get("total_steps"):
        row["total_steps"] = request.get("steps")
    metrics = jobs.metrics(finetune_id)
    val = [r for r in metrics if r.get("split") == "val"]
    train = [r for r in metrics if r.get("split", "train") == "train"]
    row["val_accuracy"] = val[-1].get("accuracy") if val else None
    row["val_step"] = val[-1].get("step") if val else None
    row["train_accuracy"] = train[-1].get("accuracy") if train else None
    return row


def finetune_metrics(jobs: RunStore, finetune_id: str) -> list[dict]:
    """Every row of the fine-tuning's metrics.jsonl: train rows (step, loss, losses, accuracy, lr) and evaluation
    rows with "split": "val" (loss, accuracy, macro_f1)."""
    return jobs.metrics(_finetune_id(jobs, finetune_id))


def list_finetunes(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """Every fine-tuning in the lab home, newest first (`lab_models.inference.finetuning.run.list_finetunes`' rows)."""
    return _results.list_finetunes(jobs.home if jobs is not None else lab_home(home))


def finetune_leaderboard(jobs: RunStore | None = None, *, home=None, runs=None, tasks=None):
    """A pandas DataFrame, one row per fine-tuning with a result (finished, or stopped with its result so far), best
    accuracy first within each task: FINETUNE_LEADERBOARD_COLUMNS (finetune, pretrained run, family, task, pooling,
    accuracy, macro F1, majority baseline, steps, seconds, state, λ, adversarial). `runs` / `tasks`: keep only these
    pretrained run ids / task names (None or empty: all)."""
    root = jobs.home if jobs is not None else lab_home(home)
    frame = _results.finetune_leaderboard(root, runs_filter=runs or None, tasks=tasks or None)
    rows = {row["finetune_id"]: row for row in _results.list_finetunes(root)}
    frame["λ"] = [rows.get(finetune_id, {}).get("lm_aux_weight") for finetune_id in frame["finetune"]]
    frame["adversarial"] = [rows.get(finetune_id, {}).get("adversarial") or "none"
                            for finetune_id in frame["finetune"]]
    return frame[FINETUNE_LEADERBOARD_COLUMNS]
# ================================================================================================ finetune (end)


# ================================================================================================ leaderboard (begin)
# The equal-budget leaderboard (lab_models/inference/leaderboard.py): one row per run with weights (validation bits per
# byte,
# fill-mask accuracy and infill exact match on held-out text, classification accuracy per fine-tuning task,
# parameters, training tokens), filtered to one corpus; the forward-pass scores are cached in each run folder.
LEADERBOARD_COLUMNS = _leaderboard.LEADERBOARD_COLUMNS
LEADERBOARD_NOTE_COLUMNS = _leaderboard.NOTE_COLUMNS
LEADERBOARD_METRICS = _leaderboard.METRIC_COLUMNS
LEADERBOARD_ACCURACY_PREFIX = _leaderboard.ACCURACY_PREFIX
LEADERBOARD_DEFAULT_EXAMPLES = _leaderboard.DEFAULT_MAX_EXAMPLES
LEADERBOARD_MAX_EXAMPLES = _leaderboard.MAX_EXAMPLES_LIMIT
leaderboard = _leaderboard.leaderboard
leaderboard_corpora = _leaderboard.leaderboard_corpora


def leaderboard_csv(frame, path=None) -> Path:
    """Write a `leaderboard(...)` table as CSV (no index; NaN as an empty field; `pandas.read_csv` reads it back)
    to `path`, or, when None, to leaderboard-<YYYYmmdd-HHMMSS>.csv in a new temporary folder. Returns the path.
    ValueError when `frame` is not a table."""
    import tempfile
    import time as _time

    if path is None:
        folder = Path(tempfile.mkdtemp(prefix="pretraining-lab-leaderboard-"))
        path = folder / f"leaderboard-{_time.strftime('%Y%m%d-%H%M%S')}.csv"
    return _leaderboard.write_leaderboard_csv(frame, path)
# ================================================================================================ leaderboard (end)


# ================================================================================================ interop (begin)
# Real checkpoints in the lab and the lab's runs in transformers (lab_models/interop/): a local Hugging Face
# checkpoint folder becomes an ordinary run folder (every tab reads it like a trained run), and a run of a family
# that transformers has becomes a folder `from_pretrained` loads. Nothing is downloaded.
INTEROP_DEFAULT_CORPUS = _importer.DEFAULT_CORPUS


def inspect_hf(src_dir, *, generator_dir=None, allow_pickle: bool = False) -> dict:
    """What the checkpoint folder `src_dir` holds and what importing it would make, without writing anything: path,
    model_type, architecture, family, d_model, n_layers, n_heads, d_ff, vocab_size, max_positions, activation,
    parameters, weights_size, tokenizer (source, kind, size, added, roles), files [(name, bytes)], generator.
    ValueError saying why it cannot be imported."""
    return _importer.inspect_checkpoint(src_dir, generator=generator_dir, allow_pickle=allow_pickle)


def import_hf(src_dir, out_dir=None, *, generator_dir=None, allow_pickle: bool = False,
              corpus: str = INTEROP_DEFAULT_CORPUS, home=None, progress=None) -> Path:
    """Import the local checkpoint folder `src_dir` (what `save_pretrained` writes) as a run folder; returns it.

    out_dir: the new run folder (must not exist); None = `<lab home>/runs/<family>-imported-<time>-<hex>`, where
    every tab lists it. generator_dir: ELECTRA's generator folder. allow_pickle: accept pytorch_model.bin, read with
    torch.load(weights_only=True). corpus: the corpus the run is filed under and evaluated on (it was not trained on
    it). progress(fraction, message). ValueError (what to do) for a folder that is not a checkpoint, an unsupported
    architecture, a shape mismatch, a refused pickle, an existing out_dir; nothing is half-written."""
    return _importer.import_into_home(src_dir, out_dir, generator=generator_dir, allow_pickle=allow_pickle,
                                      corpus=corpus, home=home, progress=progress)


def export_hf(run_dir, out_dir) -> Path:
    """Write the run `run_dir` as a transformers checkpoint folder `out_dir` (must not exist); returns it. ValueError
    saying why for a family without a transformers class (SpanBERT, UniLM, MASS, GLM, the RNN era) or a run whose
    options the class lacks."""
    return _exporter.export_run(run_dir, out_dir)


def interop_architectures() -> list[dict]:
    """One row per architecture the lab converts: module, family, model_types, reference (the transformers class
    export writes), and available (whether its converter is in this build)."""
    rows = []
    for name, available in _registry.available().items():
        model_types, family = _registry.ARCHITECTURES[name]
        reference = _registry.reference_class(name) if available else None
        rows.append({"module": name, "family": family, "model_types": list(model_types), "reference": reference,
                     "available": available})
    return rows


# Checkpoints where users keep them (issue 23): the Hugging Face cache listed without a network, one import per
# listed checkpoint, and an export written as a folder plus a zip to download.
def cached_checkpoints(cache_dir=None) -> list[dict]:
    """The model repositories in the Hugging Face cache (default: the one huggingface_hub uses, HF_HUB_CACHE or
    HF_HOME/hub or ~/.cache/huggingface/hub), read with huggingface_hub's scanner, no network: one dict each with
    repo_id, revision, path (the snapshot folder `import_hf` takes), architecture, model_type, family, parameters,
    size, size_text, supported (bool) and reason ("" when supported). Supported ones first."""
    return _cache.cached_checkpoints(cache_dir)


def hf_cache_dir() -> Path:
    """The Hugging Face cache folder `cached_checkpoints` reads by default (from this process's environment)."""
    return _cache.default_cache_dir()


def checkpoint_files(folder) -> list[tuple[str, int]]:
    """(name, bytes) of a checkpoint folder's files, for the page's files table (ValueError: not a folder)."""
    return _checkpoint.list_files(_checkpoint.source_folder(folder))


def import_cached(repo_id: str, *, cache_dir=None, corpus: str = INTEROP_DEFAULT_CORPUS, home=None,
                  progress=None) -> Path:
    """Import the cached checkpoint `repo_id` (as `cached_checkpoints` lists it) into the lab home; returns the new
    run folder. ValueError when the cache has no such model or the lab cannot import it (saying why)."""
    return import_hf(_cache.cached_checkpoint_path(repo_id, cache_dir), corpus=corpus, home=home, progress=progress)


def export_problem(run_dir) -> str:
    """"" when `export_hf` would export the run, else why not (nothing is written)."""
    return _exporter.export_problem(run_dir)


def export_hf_archive(run_dir, *, home=None) -> dict:
    """Export the run into a new folder under `<lab home>/exports/` that `from_pretrained` loads, and zip it for a
    download: {"folder": Path, "zip": Path (in a new temporary folder)}. ValueError saying why a run cannot be
    exported."""
    folder, archive = _exporter.export_archive(run_dir, lab_home(home) / EXPORTS_FOLDER)
    return {"folder": folder, "zip": archive}


EXPORTS_FOLDER = "exports"  # <lab home>/exports/<run id>-transformers-<time>-<hex>/
# ================================================================================================ interop (end)


# ================================================================================================ zoo (begin)
# The model zoo (lab_models/experiments/zoo.py): one tagged run per family on one corpus at one budget, queued on the
# app's job
# manager; the page's "Train the demo zoo" is `start_zoo(jobs)` with DEMO_ZOO (tiny preset, synthetic corpus, every
# family). A second start continues: finished runs are skipped, stopped or failed ones resumed.

ZooConfig = _zoo.ZooConfig
ZooProgress = _zoo.ZooProgress
ZooRun = _zoo.ZooRun
ZooPlan = _zoo.ZooPlan
DEMO_ZOO = _zoo.DEMO_ZOO
ZOO_ORDER = _zoo.ZOO_ORDER


def start_zoo(jobs: JobManager, config: ZooConfig = DEMO_ZOO) -> ZooPlan:
    """Queue every family of the zoo that has not finished yet, in the zoo's order (GPT, GPT-2, BERT, T5 first); returns
    which families were started, resumed, skipped (finished) or left running."""
    return _zoo.start_zoo(jobs, config)


def stop_zoo(jobs: JobManager, name: str = DEMO_ZOO.name) -> list[str]:
    """Stop the zoo's queued and running runs (the running one checkpoints); `start_zoo` continues later."""
    return _zoo.stop_zoo(jobs, name)


def zoo_progress(jobs: RunStore, config: ZooConfig = DEMO_ZOO) -> ZooProgress:
    """Every family of the zoo with its run's state, step, total steps, loss and validation bits per byte."""
    return _zoo.zoo_progress(jobs, config)


def list_zoos(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The zoos in the lab home, newest first: {"name", "runs", "finished"}."""
    return _zoo.list_zoos(jobs if jobs is not None else RunStore(lab_home(home)))


def fill_mask_picks(jobs: RunStore, max_runs: int = 4) -> list[str]:
    """The runs to show first where a model fills masks (the Understand tab before the user picks): the demo zoo's
    finished runs that fill masks best at its budget (BERT, RoBERTa, MPNet, UniLM), then the newest other runs with
    weights of a family that can fill a mask; at most `max_runs`. [] when no run can fill a mask."""

    rows = runs_with_weights(jobs)  # newest first
    with_weights = {row["run_id"] for row in rows}
    zoo = _zoo.zoo_progress(jobs, DEMO_ZOO)
    by_family = {run.family: run.run_id for run in zoo.runs if run.state == "finished" and run.run_id in with_weights}
    picks = [by_family[family] for family in _zoo.ZOO_FILL_MASK_SHOWCASE if family in by_family]
    picks += [row["run_id"] for row in rows if row.get("family") in FILL_MASK_FAMILIES and row["run_id"] not in picks]
    return picks[:max_runs]


def has_runs(jobs: RunStore | None = None, *, home=None) -> bool:
    """Whether the lab home holds any run at all (the first tab offers the demo zoo when it holds none)."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return bool(store.run_ids())
# ================================================================================================ zoo (end)


# ======================================================================================== corpora at any size (begin)
# Corpora read in place and tokenized once, to disk (issue 24): lab_models/text/corpus_streams.py (reading any file
# or folder in constant memory), text/corpus_sources.py (what a run reads: fingerprint, split, tokenizer sample),
# text/token_shards.py (the memory-mapped token shards), training/corpus_tokens.py (`python -m lab_models tokenize`)
# and training/jobs/tokenizing.py (the Corpora tab's background tokenizations).
CORPUS_ROOT_ENV_VAR = "PRETRAINING_LAB_CORPUS_ROOT"
open_corpus = _corpus_sources.open_corpus
link_corpus = corpora.link_corpus
corpus_overview = _corpus_sources.corpus_overview
TokenizeJobs = _tokenizing.TokenizeJobs


def corpus_root(root=None, *, home=None) -> Path:
    """The folder whose files the page may link as corpora: `root` (app.py --corpus-root), else
    $PRETRAINING_LAB_CORPUS_ROOT, else `<lab home>/server-corpora` (created). A path typed in the page is read only
    when it resolves inside it (symlinks followed), as with `path_inside`."""
    chosen = root if root is not None else _os.environ.get(CORPUS_ROOT_ENV_VAR) or lab_home(home) / "server-corpora"
    folder = Path(chosen).expanduser().resolve()
    if root is None and not _os.environ.get(CORPUS_ROOT_ENV_VAR):
        folder.mkdir(parents=True, exist_ok=True)
    if not folder.is_dir():
        raise LabError("The corpus root {folder} is not a folder: start the app with --corpus-root DIR (or set "
                       "{corpus_root_env_var}) to a folder that holds your corpora.",
                       folder=folder, corpus_root_env_var=CORPUS_ROOT_ENV_VAR)
    return folder


def _server_path(path, root) -> Path:
    if not isinstance(path, str) or not path.strip():
        raise LabError("Type the path of a corpus file or folder inside {root} (e.g. web.txt or books/).", root=root)
    try:
        return path_inside(root, path.strip(), Message("corpus path"))
    except (OSError, RuntimeError) as error:  # "~nobody/x" (no such user's home), a name too long to stat
        raise LabError("The corpus path {path} cannot be read: {error}",
                       path=_home.shown(path.strip()), error=error) from None


def inspect_server_corpus(path, *, root, text_column=None) -> dict:
    """What a corpus path inside `root` holds, without reading its text: {"path", "layout", "files", "bytes",
    "formats", "columns", "text_column"} (the text columns of its first table file and the one that would be read)."""
    files = _corpus_streams.find_corpus_files(_server_path(path, root), (text_column or None))
    return {"path": str(files.root), "layout": files.layout, "files": len(files.files), "bytes": files.total_bytes,
            "formats": files.formats(), "columns": list(files.columns), "text_column": files.text_column}


def link_server_corpus(path, *, root, name=None, text_column=None, home=None) -> dict:
    """`link_corpus` for the page: the path must resolve inside `root` (`corpus_root`). Returns the stored facts."""
    return corpora.link_corpus(_server_path(path, root), name=(name or None), text_column=(text_column or None),
                               home=home)


def create_tokenize_jobs(home=None) -> TokenizeJobs:
    """The app's background tokenizations for `home`; call `.close()` at exit (running workers stop, keeping their
    work)."""
    return _tokenizing.TokenizeJobs(lab_home(home))


def start_tokenizing(jobs: TokenizeJobs, corpus, *, family: str = "gpt", preset: str = "tiny") -> str:
    """Tokenize a corpus of the lab home (by name) in the background, with the tokenizer a run of `family` at
    `preset` uses, so that such a run starts training at once; returns the job id (`tokenizing_status`)."""
    name = corpus_name(corpus, home=jobs.home)
    _trainable(family)
    if preset not in TRAINING_PRESETS:
        raise LabError("Unknown preset {preset!r}: choose one of {training_presets}.",
                       preset=preset, training_presets=', '.join(TRAINING_PRESETS))
    return jobs.start(name, family=family, preset=preset)


def tokenizing_status(jobs: TokenizeJobs, job_id) -> dict:
    """{"state": running | finished | stopped | failed | died, "message", "progress": {"phase", "bytes_done",
    "bytes_total", "tokens", "mb_per_s", "eta_s", "fraction", ...}, "corpus", ...} of a tokenize job."""
    if not isinstance(job_id, str) or not job_id.strip():
        raise LabError("Start a tokenization first.")
    return jobs.status(job_id.strip())


def stop_tokenizing(jobs: TokenizeJobs, job_id) -> dict:
    """Stop a tokenize job; what it tokenized is kept and a new start continues it."""
    if not isinstance(job_id, str) or not job_id.strip():
        raise LabError("Start a tokenization first.")
    return jobs.stop(job_id.strip())
# ========================================================================================== corpora at any size (end)


# ================================================================================================ speed (begin)
# What training computes in on this machine, and the peak MFU divides by (lab_models/training/performance.py,
# flops.py and matmul_probe.py): `--perf precision=auto` trains in bf16 autocast on CUDA and on a CPU with native bf16
# (AVX-512 BF16 or AMX) that a one-second matmul probe confirms (there for models of at least 4 MFLOPs per token: the
# small preset and up), fp32 elsewhere; MFU's peak is NVIDIA's data sheet
# where the GPU is in its table, the probe's (in the run's precision) everywhere else. The probe is cached per machine
# in the lab home. The page header says what auto picks and why.
__all__ += ["training_precision"]


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
# ================================================================================================ speed (end)
