"""The Python API of the Pretraining Lab: the one backend package that the UI (`app/`) imports, and the surface for
scripts and users. Its stable part, what callers may rely on across versions, is described in docs/contract.md.

Every entry point validates its arguments (raising `LabError`, a `ValueError` with a message a person can act on that
keeps its template for the page's translation) and delegates to the stage of `lab_models/` that does the work (each
area module's docstring names its stages). No model logic lives in the UI; no UI lives here. A name that an area
module gives as `X = module.X` is the stage's own object under its API name.

This file is the face: it imports the public names of the area modules and lists them in `__all__`, nothing else, so
`from lab_models import api` and `api.X` reach every name. The areas, each a module of this package:

- `family_specs`: families, family specs, the anatomy of a training example and the Mask Explorer's split.
- `corpora`: corpora at any size, tokenizers and their inspection, vocabulary fitting, tokenize jobs.
- `training`: training jobs, family settings, presets, devices, precision, the Switch Transformer's settings.
- `runs`: the lab home's runs, run folders, metrics, logs, runs with weights, paths inside a folder.
- `understanding`: generation, fill-mask, contextual embeddings, attention maps, sentence similarity, probes,
  the logit lens, attributions, the Switch routing view.
- `finetuning`: fine-tuning runs on built-in or CSV tasks, their status and leaderboard.
- `checkpoints`: Hugging Face import and export, the Hugging Face cache.
- `experiments`: scaling sweeps, the leaderboard, the model zoo.
- `claims`: the survey's claims, each tested at equal FLOPs over seeds, with a verdict and its interval.
- `checks`: the bounds of a request's numbers, the families that can train, and what a refusal is made of.

The app calls each name as `api.X` at call time, so a test may replace a name on this face; an area module that uses
another's name internally (`fill_mask_picks` reads `experiments.DEMO_ZOO`) looks it up in its own module.
"""
from lab_models.api.family_specs import (
    FamilySpec, ObjectiveSpec, Anatomy, families, family, anatomy, explorer_split, split_for_explorer,
)
from lab_models.api.corpora import (
    BUILTIN_CORPORA, list_corpora, load_corpus, import_corpus, inspect_file, corpus_card, corpus_name,
    load_named_corpus, CORPUS_ROOT_ENV_VAR, open_corpus, link_corpus, corpus_overview, corpus_root,
    inspect_server_corpus, link_server_corpus, TOKENIZER_KINDS, train_tokenizer, cached_tokenizer, load_tokenizer_file,
    tokenize_for_display, merge_replay, merge_count, tokenizer_stats, token_length_histogram, vocab_overlap,
    VocabSizeTooSmall, VocabProposal, minimum_vocab_size, propose_vocab_size, TokenizeJobs, create_tokenize_jobs,
    start_tokenizing, tokenizing_status, stop_tokenizing,
)
from lab_models.api.training import (
    JobManager, TRAINING_PRESETS, TRAINING_DEVICES, create_job_manager, family_settings, family_settings_help,
    start_training, training_command, stop_training, resume_training, training_status, device_label, select_device,
    torch_version, training_precision, SWITCH_DEFAULTS, switch_settings,
)
from lab_models.api.runs import (
    RunStore, lab_home, list_runs, has_runs, run_folder, path_inside, run_metrics, training_log, runs_with_weights,
    is_switch_run, switch_runs,
)
from lab_models.api.understanding import (
    Generation, AutoTask, auto_task, GENERATION_MODES, GENERATION_STRATEGIES, generation_modes, generate, fill_mask,
    AttentionMaps, PROBE_MAX_TOKENS, PROBE_MAX_SENTENCES, contextual_similarity, embedding_projection, attention_maps,
    TopicSimilarity, SENTENCE_SIMILARITY_POOLINGS, SENTENCE_SIMILARITY_PER_TOPIC, SENTENCE_SIMILARITY_MAX_PER_TOPIC,
    sentence_similarity, PROBE_TASKS, PROBE_COLUMNS, probe_layers, best_probe_layer, LENS_COLUMNS, logit_lens,
    Attribution, ATTRIBUTION_METHODS, ATTRIBUTION_BASELINES, ATTRIBUTION_DEFAULT_STEPS, ATTRIBUTION_MAX_STEPS,
    explain_prediction, attributions, RoutingView, switch_routing, context_baselines, blank_scores,
    continuation_scores,
)
from lab_models.api.finetuning import (
    FinetuneTaskSpec, FINETUNE_TASKS, FINETUNE_POOLINGS, FINETUNE_CAUSAL_FAMILIES, FINETUNE_DEFAULT_LM_AUX_WEIGHT,
    FINETUNE_MIN_CSV_ROWS, FINETUNE_DEFAULTS, FINETUNE_LEADERBOARD_COLUMNS, FINETUNE_ADVERSARIAL_METHODS,
    TASK_CSV_FOLDER, finetune_tasks, default_lm_aux_weight, default_pooling, csv_columns, check_csv_task,
    store_task_csv, start_finetune, stop_finetune, finetune_status, finetune_metrics, list_finetunes,
    finetune_leaderboard, finetunes_with_weights,
)
from lab_models.api.checkpoints import (
    INTEROP_DEFAULT_CORPUS, EXPORTS_FOLDER, inspect_hf, import_hf, export_hf, interop_architectures, cached_checkpoints,
    hf_cache_dir, checkpoint_files, import_cached, export_problem, export_hf_archive,
)
from lab_models.api.experiments import (
    SWEEP_X_AXES, SWEEP_POINT_COLUMNS, fit_power_law, parse_sweep_sizes, sweep_command, start_sweep, stop_sweep,
    list_sweeps, sweep_points, LEADERBOARD_COLUMNS, LEADERBOARD_NOTE_COLUMNS, LEADERBOARD_METRICS,
    LEADERBOARD_ACCURACY_PREFIX, LEADERBOARD_DEFAULT_EXAMPLES, LEADERBOARD_MAX_EXAMPLES, leaderboard,
    leaderboard_corpora, leaderboard_csv, ZooConfig, ZooProgress, ZooRun, ZooPlan, DEMO_ZOO, ZOO_ORDER, start_zoo,
    stop_zoo, zoo_progress, list_zoos, fill_mask_picks, view_picks, seed_summary, trained_seeds, MAX_ZOO_SEEDS,
)
from lab_models.api.claims import (
    Claim, ClaimArm, ClaimResult, ClaimsSetup, ClaimVerdict, CLAIM_METRICS, CLAIM_VERDICTS, CLAIM_VERDICT_TEXT, claims,
    claim_records, claim_results, claim, compare_arms, start_claims, stop_claims, claim_result, claims_results, claim_progress, claim_curves, claims_table,
    claims_markdown, claims_score_jobs,
)
from lab_models.api.checks import (
    LabError, Message, Joined, message_of, as_message, MAX_STEPS, MAX_SEED, MAX_VOCAB_SIZE, MAX_SWEEP_D_MODEL,
    MAX_SWEEP_LAYERS, TRAINABLE_FAMILIES, trainable_families,
    trainable_family,
)

__all__ = [
    # families
    "FamilySpec", "ObjectiveSpec", "Anatomy", "families", "family", "anatomy", "explorer_split", "split_for_explorer",
    # corpora
    "BUILTIN_CORPORA", "list_corpora", "load_corpus", "import_corpus", "inspect_file", "corpus_card", "corpus_name",
    "load_named_corpus", "CORPUS_ROOT_ENV_VAR", "open_corpus", "link_corpus", "corpus_overview", "corpus_root",
    "inspect_server_corpus", "link_server_corpus", "TOKENIZER_KINDS", "train_tokenizer", "cached_tokenizer",
    "load_tokenizer_file", "tokenize_for_display", "merge_replay", "merge_count", "tokenizer_stats",
    "token_length_histogram", "vocab_overlap", "VocabSizeTooSmall", "VocabProposal", "minimum_vocab_size",
    "propose_vocab_size", "TokenizeJobs", "create_tokenize_jobs", "start_tokenizing", "tokenizing_status",
    "stop_tokenizing",
    # training
    "JobManager", "TRAINING_PRESETS", "TRAINING_DEVICES", "create_job_manager", "family_settings",
    "family_settings_help", "start_training", "training_command", "stop_training", "resume_training", "training_status",
    "device_label", "select_device", "torch_version", "training_precision", "SWITCH_DEFAULTS", "switch_settings",
    # runs
    "RunStore", "lab_home", "list_runs", "has_runs", "run_folder", "path_inside", "run_metrics", "training_log",
    "runs_with_weights", "is_switch_run", "switch_runs",
    # understanding
    "Generation", "AutoTask", "auto_task", "GENERATION_MODES", "GENERATION_STRATEGIES", "generation_modes", "generate",
    "fill_mask", "AttentionMaps", "PROBE_MAX_TOKENS", "PROBE_MAX_SENTENCES", "contextual_similarity",
    "embedding_projection", "attention_maps", "TopicSimilarity", "SENTENCE_SIMILARITY_POOLINGS",
    "SENTENCE_SIMILARITY_PER_TOPIC", "SENTENCE_SIMILARITY_MAX_PER_TOPIC", "sentence_similarity", "PROBE_TASKS",
    "PROBE_COLUMNS", "probe_layers", "best_probe_layer", "LENS_COLUMNS", "logit_lens", "Attribution",
    "ATTRIBUTION_METHODS", "ATTRIBUTION_BASELINES", "ATTRIBUTION_DEFAULT_STEPS", "ATTRIBUTION_MAX_STEPS",
    "explain_prediction", "attributions", "RoutingView", "switch_routing", "context_baselines", "blank_scores",
    "continuation_scores",
    # finetuning
    "FinetuneTaskSpec", "FINETUNE_TASKS", "FINETUNE_POOLINGS", "FINETUNE_CAUSAL_FAMILIES",
    "FINETUNE_DEFAULT_LM_AUX_WEIGHT", "FINETUNE_MIN_CSV_ROWS", "FINETUNE_DEFAULTS", "FINETUNE_LEADERBOARD_COLUMNS",
    "FINETUNE_ADVERSARIAL_METHODS", "TASK_CSV_FOLDER", "finetune_tasks", "default_lm_aux_weight", "default_pooling",
    "csv_columns", "check_csv_task", "store_task_csv", "start_finetune", "stop_finetune", "finetune_status",
    "finetune_metrics", "list_finetunes", "finetune_leaderboard", "finetunes_with_weights",
    # checkpoints
    "INTEROP_DEFAULT_CORPUS", "EXPORTS_FOLDER", "inspect_hf", "import_hf", "export_hf", "interop_architectures",
    "cached_checkpoints", "hf_cache_dir", "checkpoint_files", "import_cached", "export_problem", "export_hf_archive",
    # experiments
    "SWEEP_X_AXES", "SWEEP_POINT_COLUMNS", "fit_power_law", "parse_sweep_sizes", "sweep_command", "start_sweep",
    "stop_sweep", "list_sweeps", "sweep_points", "LEADERBOARD_COLUMNS", "LEADERBOARD_NOTE_COLUMNS",
    "LEADERBOARD_METRICS", "LEADERBOARD_ACCURACY_PREFIX", "LEADERBOARD_DEFAULT_EXAMPLES", "LEADERBOARD_MAX_EXAMPLES",
    "leaderboard", "leaderboard_corpora", "leaderboard_csv", "ZooConfig", "ZooProgress", "ZooRun", "ZooPlan",
    "DEMO_ZOO", "ZOO_ORDER", "start_zoo", "stop_zoo", "zoo_progress", "list_zoos", "fill_mask_picks", "view_picks",
    "seed_summary", "trained_seeds", "MAX_ZOO_SEEDS",
    # claims
    "Claim", "ClaimArm", "ClaimResult", "ClaimsSetup", "ClaimVerdict", "CLAIM_METRICS", "CLAIM_VERDICTS",
    "CLAIM_VERDICT_TEXT", "claims", "claim_records", "claim_results", "claim", "compare_arms", "start_claims", "stop_claims", "claim_result", "claims_results", "claim_progress",
    "claim_curves", "claims_table", "claims_markdown", "claims_score_jobs",
    # checks
    "LabError", "Message", "Joined", "message_of", "as_message", "MAX_STEPS", "MAX_SEED", "MAX_VOCAB_SIZE",
    "MAX_SWEEP_D_MODEL", "MAX_SWEEP_LAYERS", "TRAINABLE_FAMILIES",
    "trainable_families", "trainable_family",
]
