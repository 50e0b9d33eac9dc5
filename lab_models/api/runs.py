"""The runs of the lab home: every run listed with the job manager's live view on top, a run's folder from its id, its
metrics and logs, the runs with weights to load (and the Switch runs among them), and paths the page may read inside a
folder it names.

The run folder is lab_models/training/runs.py's (what a training run writes), the store of runs and queued jobs
training/jobs/store.py's, which weights a run has inference/loading.py's, and the lab home and the paths inside it
home.py's. Each listing takes the app's job manager, or reads the lab home through a read-only `RunStore` without one.
"""
from __future__ import annotations

from pathlib import Path

from lab_models import home as _home
from lab_models.home import lab_home
from lab_models.messages import Message
from lab_models.inference import loading as _loading
from lab_models.training import runs as _runs
from lab_models.training.jobs import files as _files
from lab_models.training.jobs.store import RunStore

__all__ = ["RunStore", "lab_home", "list_runs", "has_runs", "run_folder", "path_inside", "run_metrics",
           "training_log", "runs_with_weights", "is_switch_run", "switch_runs"]


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


def has_runs(jobs: RunStore | None = None, *, home=None) -> bool:
    """Whether the lab home holds any run at all (the first tab offers the demo zoo when it holds none)."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return bool(store.run_ids())


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


def runs_with_weights(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The rows of `list_runs` whose run has weights to load now (finished or stopped runs, and running or failed ones
    with a checkpoint), newest first; each row gains "weights_step", the step of those weights."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    rows = []
    for row in list_runs(store):
        if row.get("state") == "queued" or not row.get("run_id"):
            continue
        try:
            _, step = _loading.weights_file(store.run_dir(row["run_id"]))
        except (ValueError, OSError):
            continue
        rows.append({**row, "weights_step": step})
    return rows


def is_switch_run(run_dir) -> bool:
    """Whether the run in `run_dir` was trained with Switch layers (its config.json says ffn "switch")."""
    model = _runs.read_config(Path(run_dir)).get("model")
    return isinstance(model, dict) and model.get("ffn") == "switch"


def switch_runs(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """`runs_with_weights` rows of the runs trained with Switch layers, newest first."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return [row for row in runs_with_weights(store) if is_switch_run(store.run_dir(row["run_id"]))]
