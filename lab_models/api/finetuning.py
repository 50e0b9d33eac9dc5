"""Fine-tuning pretrained runs on labelled tasks: the built-in tasks (sentiment, topic, entailment, tagging) or a
user's CSV, one fine-tuning per run, queued on the app's JobManager like a training run; its status, metrics and
leaderboard, and the fine-tunings whose saved weights the attributions view can explain.

A fine-tuning is a worker process `python -m lab_models finetune` (lab_models/inference/finetuning/run.py), stopped
with SIGTERM, that writes result.json at the end; its settings are inference/finetuning/config.py's `FinetuneConfig`,
its rows and leaderboard inference/finetuning/results.py's, and the tasks and CSV reading text/tasks.py's. The
functions take the job manager (or a read-only `RunStore`) so that nothing here holds global state.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from lab_models.messages import LabError
from lab_models.home import lab_home
from lab_models.inference.finetuning import config as _config
from lab_models.inference.finetuning import results as _results
from lab_models.inference.finetuning import saved as _saved_finetunes
from lab_models.objectives import adversarial as _adversarial
from lab_models.objectives.specs import family_spec
from lab_models.text import corpus_files as _corpus_files
from lab_models.text import tasks as _tasks
from lab_models.training import runs as _runs
from lab_models.training.jobs import files as _files
from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.store import RunStore

__all__ = ["FinetuneTaskSpec", "FINETUNE_TASKS", "FINETUNE_POOLINGS", "FINETUNE_CAUSAL_FAMILIES",
           "FINETUNE_DEFAULT_LM_AUX_WEIGHT", "FINETUNE_MIN_CSV_ROWS", "FINETUNE_DEFAULTS",
           "FINETUNE_LEADERBOARD_COLUMNS", "FINETUNE_ADVERSARIAL_METHODS", "TASK_CSV_FOLDER", "finetune_tasks",
           "default_lm_aux_weight", "default_pooling", "csv_columns", "check_csv_task", "store_task_csv",
           "start_finetune", "stop_finetune", "finetune_status", "finetune_metrics", "list_finetunes",
           "finetune_leaderboard", "finetunes_with_weights"]

FinetuneTaskSpec = _tasks.TaskSpec
FINETUNE_TASKS = dict(_tasks.TASKS)  # name -> TaskSpec (name, kind, title, label_names, description)
FINETUNE_POOLINGS = _config.POOLINGS  # auto, first, last, mean
FINETUNE_CAUSAL_FAMILIES = _config.CAUSAL_FAMILIES  # the families whose default λ is GPT's 0.5
FINETUNE_DEFAULT_LM_AUX_WEIGHT = _config.DEFAULT_LM_AUX_WEIGHT
FINETUNE_MIN_CSV_ROWS = _tasks.MIN_CSV_ROWS
# FinetuneConfig's own defaults, for the controls of a page (one source of truth: the dataclass)
FINETUNE_DEFAULTS = {field.name: field.default for field in dataclasses.fields(_config.FinetuneConfig)
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


def finetunes_with_weights(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The finished or stopped fine-tunings of a sentence task that kept their weights (the attributions view can
    explain their labels), newest first: rows of `list_finetunes`."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return [row for row in list_finetunes(store) if row.get("state") in ("finished", "stopped")
            and _saved_finetunes.explainable_finetune(row["path"])]
