"""Fine-tuning results and queueing: the summaries of finished fine-tunings, `list_finetunes`,
`finetune_leaderboard` (one row per fine-tuning with a result) and `finetune_command` / `start_finetune` (a worker
`python -m lab_models finetune` queued on the JobManager like a training run). The fine-tuning itself
is lab_models/inference/finetuning/run.py.
"""
from __future__ import annotations

import dataclasses
import sys
from lab_models.messages import LabError
from lab_models.training import runs
from lab_models.home import is_inside
from pathlib import Path

from lab_models.inference.finetuning.config import (load_config_task, RESULT_FILE, LEADERBOARD_COLUMNS, FinetuneConfig,
                                                    check_adversarial, finetunes_dir, new_finetune_dir,
                                                    resolve_run_dir)
from lab_models.inference.loading import weights_file
from lab_models.training.device import select_device
from lab_models.models.family import TRAINED_FAMILIES


# ------------------------------------------------------------------------------------------------ results
def finetune_summary(folder: Path) -> dict:
    config = runs.read_config(folder)
    status = runs.read_status(folder)
    result = runs.read_json(folder / RESULT_FILE)
    request = runs.read_json(folder / "job.json")
    settings = config.get("finetune") if isinstance(config.get("finetune"), dict) else {}
    state = status.get("state") or ("finished" if result else None)
    if state == "running" and not runs.pid_alive(status.get("pid")):
        state = "interrupted"
    task = result.get("task") or (config.get("task") or {}).get("name") or request.get("task")
    try:
        created = float(config.get("created") or request.get("created") or folder.stat().st_mtime)
    except OSError:
        created = 0.0
    return {
        "finetune_id": folder.name, "path": str(folder), "run_id": result.get("run_id") or config.get("run_id")
        or request.get("run_id"), "family": result.get("family") or config.get("family") or request.get("family"),
        "task": task, "pooling": result.get("pooling") or settings.get("pooling"),
        "lm_aux_weight": result.get("lm_aux_weight", settings.get("lm_aux_weight")), "state": state,
        "adversarial": result.get("adversarial", settings.get("adversarial", "none")),
        "message": status.get("message", ""), "step": status.get("step", result.get("steps", 0)),
        "total_steps": status.get("total_steps") or settings.get("steps"), "accuracy": result.get("accuracy"),
        "macro_f1": result.get("macro_f1"), "majority_baseline": result.get("majority_baseline"),
        "steps": result.get("steps"), "seconds": result.get("seconds"), "has_result": bool(result),
        "created": created,
    }


def list_finetunes(home=None) -> list[dict]:
    """Every fine-tuning folder under <home>/finetunes (with a config, status or result), newest first. Each row:
    finetune_id, path, run_id, family, task, pooling, lm_aux_weight, state (queued/running/finished/stopped/failed,
    or "interrupted" when status.json says running but its process is gone), message, step, total_steps, accuracy,
    macro_f1, majority_baseline, steps, seconds, has_result, created."""
    rows = []
    for folder in finetunes_dir(home).iterdir():
        if folder.is_dir() and is_inside(finetunes_dir(home), folder) and any(
                (folder / name).exists() for name in (runs.CONFIG_FILE, runs.STATUS_FILE, RESULT_FILE)):
            rows.append(finetune_summary(folder))
    return sorted(rows, key=lambda row: row["created"], reverse=True)


def finetune_leaderboard(home=None, *, runs_filter=None, tasks=None):
    """A pandas DataFrame with one row per fine-tuning that has a result (finished, or stopped with the result so
    far), best accuracy first within each task. Columns: LEADERBOARD_COLUMNS (finetune, pretrained run, family,
    task, pooling, accuracy, macro F1, majority baseline, steps, seconds, state). `runs_filter` / `tasks`: keep only
    these pretrained run ids / task names."""
    import pandas as pd

    rows = []
    wanted_runs = set(runs_filter) if runs_filter else None
    wanted_tasks = set(tasks) if tasks else None
    for row in list_finetunes(home):
        if not row["has_result"]:
            continue
        if wanted_runs is not None and row["run_id"] not in wanted_runs:
            continue
        if wanted_tasks is not None and row["task"] not in wanted_tasks:
            continue
        rows.append({"finetune": row["finetune_id"], "pretrained run": row["run_id"], "family": row["family"],
                     "task": row["task"], "pooling": row["pooling"], "accuracy": row["accuracy"],
                     "macro F1": row["macro_f1"], "majority baseline": row["majority_baseline"],
                     "steps": row["steps"], "seconds": row["seconds"], "state": row["state"]})
    frame = pd.DataFrame(rows, columns=LEADERBOARD_COLUMNS)
    if len(frame):
        frame = frame.sort_values(["task", "accuracy"], ascending=[True, False], kind="stable").reset_index(drop=True)
    return frame


# ------------------------------------------------------------------------------------------------ the job manager
def finetune_command(config: FinetuneConfig) -> list[str]:
    """The worker command line for `config` (this Python, -m lab_models finetune, its arguments)."""
    args = [sys.executable, "-m", "lab_models", "finetune", "--run", config.run_dir, "--task", config.task]
    if config.out:
        args += ["--out", config.out]
    if config.home:
        args += ["--home", config.home]
    args += ["--steps", str(config.steps), "--pool", config.pooling, "--batch-size", str(config.batch_size),
             "--seed", str(config.seed), "--device", config.device,
             "--warmup-fraction", repr(float(config.warmup_fraction)),
             "--weight-decay", repr(float(config.weight_decay)), "--grad-clip", repr(float(config.grad_clip))]
    optional = (("--lm-aux-weight", config.lm_aux_weight), ("--lr", config.lr), ("--max-len", config.max_len),
                ("--eval-every", config.eval_every), ("--log-every", config.log_every), ("--csv", config.csv_path),
                ("--text-column", config.text_column), ("--label-column", config.label_column),
                ("--text-pair-column", config.text_pair_column))
    for flag, value in optional:
        if value is not None:
            args += [flag, repr(float(value)) if isinstance(value, float) else str(value)]
    if config.save_weights:
        args.append("--save-weights")
    if config.adversarial != "none":
        args += ["--adversarial", config.adversarial, "--adversarial-weight", repr(float(config.adversarial_weight))]
    return args


def start_finetune(manager, run: str, task: str, **options) -> str:
    """Queue a fine-tuning on `manager` (a lab_models.training.jobs.manager.JobManager) like a training run; return its
    id (the folder name under <home>/finetunes). `run`: a run id (or folder); `task`: a built-in task or "csv" (then
    csv_path=, text_column=, label_column=[, text_pair_column=]); other options: FinetuneConfig's fields (steps,
    pooling, lm_aux_weight, batch_size, lr, seed, max_len, device, ...). Everything a user can get wrong (the run, its
    weights, the task, the CSV) is checked here, before anything is queued: ValueError.

    Progress: manager.status(id) ({"state", "step", "total_steps", ...}) and manager.metrics(id); stop:
    manager.stop(id) (SIGTERM: the worker evaluates, writes its result so far and ends "stopped")."""

    home = manager.home
    run_dir = resolve_run_dir(run, home)
    allowed = {f.name for f in dataclasses.fields(FinetuneConfig)} - {"run_dir", "task", "out", "home"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise LabError("unknown fine-tuning option(s) {unknown}", unknown=', '.join(unknown))
    options = {k: v for k, v in options.items() if v is not None}
    config = FinetuneConfig(run_dir=str(run_dir), task=task, home=str(home), **options)

    select_device(config.device)  # ValueError for a device this machine does not have
    config_json = runs.read_config(run_dir)

    if config_json.get("family") not in TRAINED_FAMILIES or not isinstance(config_json.get("model"), dict):
        raise LabError("{name} is not a trained run this lab can fine-tune", name=run_dir.name)
    check_adversarial(config_json["family"], config.adversarial)  # an LSTM run cannot: say so before queueing
    weights_file(run_dir)  # ValueError when the run has no weights yet
    the_task = load_config_task(config)  # a bad CSV fails here, not in the worker
    folder = new_finetune_dir(home, run_dir.name, the_task.slug)
    config = dataclasses.replace(config, out=str(folder))
    request = {"task": the_task.name, "run_id": run_dir.name, "family": config_json.get("family"),
               "steps": config.steps, "finetune": config.to_dict()}
    return manager.start_command("finetune", finetune_command(config), folder, device=config.device,
                                 total_steps=config.steps, request=request)
