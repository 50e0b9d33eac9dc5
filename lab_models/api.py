"""The one backend module the UI (`app/`) imports. See ../shared/CONTRACT.md for the stable part of this surface.

Everything here is a thin, documented entry point: it validates arguments (raising `ValueError` with a message a person
can act on) and delegates to the module that does the work. No model logic lives in the UI; no UI lives here.

The sections live in lab_models/api_parts/ (training jobs, switch, sweep, understand, finetune, leaderboard,
interop), one module each; this module imports every name they define and adds their `__all__` to its own, so
`lab_models.api` stays the whole surface. The first section (families, tokenizers, anatomy, the explorer), generation
and the zoo are still written here.
"""
from __future__ import annotations

import logging
import types
import typing
from pathlib import Path

import torch

from . import corpora, tokenization, vocab_fit
from . import safe_paths as _safe_paths
from .anatomy import Anatomy, build_anatomy
from .device import describe_device, select_device
from .families import FamilySpec, ObjectiveSpec, all_families, family_spec
from .home import lab_home

logger = logging.getLogger(__name__)

__all__ = [
    "Anatomy", "FamilySpec", "ObjectiveSpec", "anatomy", "families", "family", "train_tokenizer", "device_label",
    "select_device", "lab_home", "TOKENIZER_KINDS",
    # corpora
    "BUILTIN_CORPORA", "list_corpora", "load_corpus", "import_corpus", "inspect_file", "corpus_card",
    # tokenizer lab
    "cached_tokenizer", "tokenize_for_display", "merge_replay", "merge_count", "tokenizer_stats",
    "token_length_histogram", "vocab_overlap", "load_tokenizer_file", "split_for_explorer", "explorer_split",
    # vocabulary sizes for any script (lab_models/vocab_fit.py)
    "VocabSizeTooSmall", "VocabProposal", "minimum_vocab_size", "propose_vocab_size",
]

TOKENIZER_KINDS = tokenization.TOKENIZER_KINDS
BUILTIN_CORPORA = corpora.BUILTIN_CORPORA

list_corpora = corpora.list_corpora
load_corpus = corpora.load_corpus
import_corpus = corpora.import_corpus
inspect_file = corpora.inspect_file
corpus_card = corpora.corpus_card

cached_tokenizer = tokenization.cached_tokenizer
tokenize_for_display = tokenization.tokenize_for_display
merge_replay = tokenization.merge_replay
merge_count = tokenization.merge_count
tokenizer_stats = tokenization.tokenizer_stats
token_length_histogram = tokenization.token_length_histogram
vocab_overlap = tokenization.vocab_overlap
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
        raise ValueError(f"family must be a name such as 'bert', got {family!r}")
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of token strings, not one string: split it first, e.g. text.split().")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not -2**63 <= seed < 2**64:  # what torch.Generator.manual_seed takes
        raise ValueError(f"seed must be between -2**63 and 2**64 - 1, got {seed}")
    if settings is not None:
        choices["settings"] = _anatomy_settings(family, settings)
    return build_anatomy(family, list(tokens), seed=seed, **choices)


def _anatomy_settings(family: str, values: dict):
    """The family's default batch-builder settings with `values` replaced (ValueError for an unknown key)."""
    import dataclasses

    from .objectives import objective_module

    if not isinstance(values, dict) or not all(isinstance(key, str) for key in values):
        raise ValueError(f"settings must be a dict of setting names to values, e.g. {{'two_stream': False}}; got "
                         f"{type(values).__name__}.")
    module = objective_module(family)
    if not hasattr(module, "Settings"):
        raise ValueError(f"{family} has no batch-builder settings to change.")
    defaults = module.Settings()
    known = {f.name for f in dataclasses.fields(defaults)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{family} has no setting {', '.join(unknown)}; its settings are: {', '.join(sorted(known))}.")
    hints = typing.get_type_hints(type(defaults))
    converted = {}
    for key, value in values.items():
        if not _fits(value, hints[key]):
            raise ValueError(f"{family}'s setting {key} takes {_type_words(hints[key])}, not "
                             f"{_safe_paths.shown(value)}.")
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


def _type_words(annotation) -> str:
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "text", type(None): "None"}
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_words(option) for option in args)
    if origin is tuple:
        return "a list of " + (_type_words(args[0]) if args else "values")
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def explorer_split(text: str, tokenizer_path: str | Path | None = None, *, split: str = "whitespace",
                   max_tokens: int = 64):
    """`text` as token strings for the Mask Explorer, with the rule used (a `text_split.WordSplit`: tokens, mode,
    note). `split` "whitespace" splits on spaces and makes each Chinese/Japanese/Korean character (and emoji) a token
    of its own (BERT's rule; whitespace alone would give a Chinese sentence one token), "characters" one token per
    character; a saved tokenizer.json (`tokenizer_path`) splits as that tokenizer does."""
    from .text_split import WordSplit, split_words

    if not text or not text.strip():
        raise ValueError("Type a sentence first: the input is empty.")
    if tokenizer_path is None:
        result = split_words(text, split)
    else:
        tokenizer = tokenization.load_tokenizer_file(tokenizer_path)
        tokens = [t for t in tokenizer.encode(text, add_special_tokens=False).tokens if t]
        title = TOKENIZER_KINDS[tokenization.tokenizer_kind(tokenizer)]
        result = WordSplit(tokens, "tokenizer", f"split with the {title} tokenizer")
    if not result.tokens:
        raise ValueError("The tokenizer produced no tokens for this text.")
    if len(result.tokens) > max_tokens:
        raise ValueError(f"The sentence has {len(result.tokens)} tokens ({result.note}); the Mask Explorer draws at "
                         f"most {max_tokens}. Shorten it.")
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
# to these functions; nothing here keeps a global one. See lab_models/jobs.py for the queue's behaviour.
from .api_parts import training as _training_part  # noqa: E402
from .api_parts.training import (JobManager, RunStore, TRAINABLE_FAMILIES, TRAINING_PRESETS, TRAINING_DEVICES,
                                 trainable_families, create_job_manager, family_settings, family_settings_help,
                                 start_training, training_command, stop_training, resume_training, training_status,
                                 list_runs, run_folder, path_inside, corpus_name, load_named_corpus, run_metrics,
                                 training_log)
__all__ += _training_part.__all__


# ================================================================================================ switch (begin)
# The Switch Transformer (lab_models/nn/moe.py, lab_models/switch.py): a feed-forward option of every Transformer
# family, turned on with `model=switch_settings(True, ...)` in start_training (the CLI's --model ffn=switch ...).
from .api_parts import switch as _switch_part  # noqa: E402
from .api_parts.switch import RoutingView, SWITCH_DEFAULTS, switch_settings, is_switch_run, switch_runs, switch_routing
__all__ += _switch_part.__all__
# ================================================================================================ switch (end)


# ================================================================================================ sweep (begin)
# Scaling sweeps (lab_models/sweep.py): one family at several sizes (dense, and with --switch also with Switch
# layers), queued on the job manager as one worker (`python -m lab_models.sweep`) in <home>/sweeps/<id>/, each size
# an ordinary training run inside it; a power law of validation bits per byte against parameters and training FLOPs.
from .api_parts import sweep as _sweep_part  # noqa: E402
from .api_parts.sweep import (SWEEP_X_AXES, SWEEP_POINT_COLUMNS, fit_power_law, parse_sweep_sizes, sweep_command,
                              start_sweep, stop_sweep, list_sweeps, sweep_points)
__all__ += _sweep_part.__all__
# ================================================================================================ sweep (end)


# ================================================================================================ understand (begin)
# The Understand tab's backend: contextual embeddings and attention maps of trained runs (lab_models/probes.py), read
# from the real forward pass with hooks. Each function takes run folders (`RunStore.run_dir(run_id)` gives one).
from .api_parts import understand as _understand_part  # noqa: E402
from .api_parts.understand import (AttentionMaps, PROBE_MAX_TOKENS, PROBE_MAX_SENTENCES, contextual_similarity,
                                   embedding_projection, attention_maps, runs_with_weights, TopicSimilarity,
                                   SENTENCE_SIMILARITY_POOLINGS, SENTENCE_SIMILARITY_PER_TOPIC,
                                   SENTENCE_SIMILARITY_MAX_PER_TOPIC, sentence_similarity)
__all__ += _understand_part.__all__
# ================================================================================================ understand (end)


# ================================================================================================ generation (begin)
# Generation and fill-mask from trained runs (lab_models/generate.py): `generate(run_dir, prompt, **decoding)` returns
# a `Generation` (a mode the family cannot do gives supported=False and an explanation); `fill_mask(run_dir, text,
# top_k)` the top-k tokens per [MASK]; `generation_modes(family)` what a family can do, its default first.
from . import generate as _generate  # noqa: E402

Generation = _generate.Generation
GENERATION_MODES = _generate.GENERATION_MODES
GENERATION_STRATEGIES = _generate.STRATEGIES
generation_modes = _generate.generation_modes
generate = _generate.generate
fill_mask = _generate.fill_mask
__all__ += ["Generation", "GENERATION_MODES", "GENERATION_STRATEGIES", "generation_modes", "generate", "fill_mask"]
# ================================================================================================ generation (end)


# ================================================================================================ finetune (begin)
# Fine-tuning pretrained runs on labelled tasks (lab_models/finetune.py, lab_models/tasks.py): the built-in tasks
# (sentiment, topic, entailment, tagging) or a user's CSV, one fine-tuning per run, queued on the app's JobManager
# like a training run (a worker process `python -m lab_models.finetune`, stopped with SIGTERM, result.json at the
# end). The functions take the job manager (or a read-only `RunStore`) so that nothing here holds global state.
from .api_parts import finetune as _finetune_part  # noqa: E402
from .api_parts.finetune import (FinetuneTaskSpec, FINETUNE_TASKS, FINETUNE_POOLINGS, FINETUNE_CAUSAL_FAMILIES,
                                 FINETUNE_DEFAULT_LM_AUX_WEIGHT, FINETUNE_MIN_CSV_ROWS, FINETUNE_DEFAULTS,
                                 FINETUNE_LEADERBOARD_COLUMNS, FINETUNE_ADVERSARIAL_METHODS, TASK_CSV_FOLDER,
                                 finetune_tasks, default_lm_aux_weight, default_pooling, csv_columns, check_csv_task,
                                 store_task_csv, start_finetune, stop_finetune, finetune_status, finetune_metrics,
                                 list_finetunes, finetune_leaderboard)
__all__ += _finetune_part.__all__
# ================================================================================================ finetune (end)


# ================================================================================================ leaderboard (begin)
# The equal-budget leaderboard (lab_models/leaderboard.py): one row per run with weights (validation bits per byte,
# fill-mask accuracy and infill exact match on held-out text, classification accuracy per fine-tuning task,
# parameters, training tokens), filtered to one corpus; the forward-pass scores are cached in each run folder.
from .api_parts import leaderboard as _leaderboard_part  # noqa: E402
from .api_parts.leaderboard import (LEADERBOARD_COLUMNS, LEADERBOARD_NOTE_COLUMNS, LEADERBOARD_METRICS,
                                    LEADERBOARD_ACCURACY_PREFIX, LEADERBOARD_DEFAULT_EXAMPLES,
                                    LEADERBOARD_MAX_EXAMPLES, leaderboard, leaderboard_corpora, leaderboard_csv)
__all__ += _leaderboard_part.__all__
# ================================================================================================ leaderboard (end)


# ================================================================================================ interop (begin)
# Real checkpoints in the lab and the lab's runs in transformers (lab_models/interop/): a local Hugging Face
# checkpoint folder becomes an ordinary run folder (every tab reads it like a trained run), and a run of a family
# that transformers has becomes a folder `from_pretrained` loads. Nothing is downloaded.
from .api_parts import interop as _interop_part  # noqa: E402
from .api_parts.interop import INTEROP_DEFAULT_CORPUS, inspect_hf, import_hf, export_hf, interop_architectures
__all__ += _interop_part.__all__
# ================================================================================================ interop (end)


# ================================================================================================ zoo (begin)
# The model zoo (lab_models/zoo.py): one tagged run per family on one corpus at one budget, queued on the app's job
# manager; the page's "Train the demo zoo" is `start_zoo(jobs)` with DEMO_ZOO (tiny preset, synthetic corpus, every
# family). A second start continues: finished runs are skipped, stopped or failed ones resumed.
from . import zoo as _zoo  # noqa: E402

ZooConfig = _zoo.ZooConfig
ZooProgress = _zoo.ZooProgress
ZooRun = _zoo.ZooRun
ZooPlan = _zoo.ZooPlan
DEMO_ZOO = _zoo.DEMO_ZOO
ZOO_ORDER = _zoo.ZOO_ORDER
__all__ += ["ZooConfig", "ZooProgress", "ZooRun", "ZooPlan", "DEMO_ZOO", "ZOO_ORDER", "start_zoo", "stop_zoo",
            "zoo_progress", "list_zoos", "has_runs", "fill_mask_picks"]


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
    from .generation.context import FILL_MASK_FAMILIES
    from .api_parts.understand import runs_with_weights

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
