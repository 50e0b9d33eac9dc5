"""Experiments over many runs: scaling sweeps, the equal-budget leaderboard and the model zoo.

A sweep (lab_models/experiments/sweep.py) trains one family at several sizes (dense, and with `switch` also with
Switch layers), queued on the job manager as one worker (`python -m lab_models sweep`) in <home>/sweeps/<id>/, each
size an ordinary training run inside it, and fits a power law of validation bits per byte against parameters and
training FLOPs. The leaderboard (lab_models/inference/leaderboard.py) has one row per run with weights (validation bits
per byte, fill-mask accuracy and infill exact match on held-out text, classification accuracy per fine-tuning task,
parameters, training tokens), filtered to one corpus; the forward-pass scores are cached in each run folder. The zoo
(lab_models/experiments/zoo.py) is one tagged run per family on one corpus at one budget, queued on the app's job
manager; the page's "Train the demo zoo" is `start_zoo(jobs)` with DEMO_ZOO (tiny preset, the stories language, 1e12 training FLOPs for every
family). A second start continues: finished runs are skipped, stopped or failed ones resumed.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from lab_models.messages import LabError
from lab_models.api.checks import MAX_STEPS
from lab_models.api.runs import runs_with_weights
from lab_models.api.training import TRAINING_DEVICES
from lab_models.experiments import sweep as _sweep
from lab_models.experiments import zoo as _zoo
from lab_models.home import lab_home
from lab_models.inference import leaderboard as _leaderboard
from lab_models.inference.generation.context import FILL_MASK_FAMILIES
from lab_models.text import corpora as _corpora
from lab_models.inference import seed_intervals as _seed_intervals
from lab_models.training import runs as _runs
from lab_models.training.device import select_device
from lab_models.training.jobs import files as _files
from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.store import RunStore

__all__ = ["SWEEP_X_AXES", "SWEEP_POINT_COLUMNS", "fit_power_law", "parse_sweep_sizes", "sweep_command",
           "start_sweep", "stop_sweep", "list_sweeps", "sweep_points", "LEADERBOARD_COLUMNS",
           "LEADERBOARD_NOTE_COLUMNS", "LEADERBOARD_METRICS", "LEADERBOARD_ACCURACY_PREFIX",
           "LEADERBOARD_DEFAULT_EXAMPLES", "LEADERBOARD_MAX_EXAMPLES", "leaderboard", "leaderboard_corpora",
           "leaderboard_csv", "ZooConfig", "ZooProgress", "ZooRun", "ZooPlan", "DEMO_ZOO", "ZOO_ORDER", "start_zoo",
           "stop_zoo", "zoo_progress", "list_zoos", "fill_mask_picks", "view_picks", "seed_summary",
           "trained_seeds", "MAX_ZOO_SEEDS"]

# Scaling sweeps (experiments/sweep.py).
SWEEP_X_AXES = dict(_sweep.X_AXES)  # "parameters", "flops" -> axis title
SWEEP_POINT_COLUMNS = ["sweep", "family", "variant", "size", "state", "non_embedding", "active_non_embedding",
                       "train_flops", "tokens", "bits_per_byte", "seconds", "message"]
fit_power_law = _sweep.fit_power_law


def parse_sweep_sizes(text: str) -> list[dict]:
    """The sizes of a `--sizes` text (preset names or DxL), each as {label, d_model, n_layers, n_heads, d_ff}."""
    return [dataclasses.asdict(size) for size in _sweep.parse_sizes(text)]


def _sweep_config(jobs: RunStore, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes,
                  n_experts, capacity_factor, expert_every, out="", budget_flops=None,
                  budget_minutes=None) -> "_sweep.SweepConfig":
    budgeted = budget_flops is not None or budget_minutes is not None
    if budgeted and steps is not None:
        raise LabError("Give a sweep steps or a budget (training FLOPs or minutes), not both: a budget decides each "
                       "size's steps.")
    if not budgeted and (isinstance(steps, bool) or not isinstance(steps, (int, float)) or steps != int(steps) or
                         not 1 <= steps <= MAX_STEPS):
        raise LabError("Steps must be a whole number from 1 to {max_steps:,}, got {steps!r}.",
                       max_steps=MAX_STEPS, steps=steps)
    if device not in TRAINING_DEVICES:
        raise LabError("Unknown device {device!r}: choose one of {training_devices}.",
                       device=device, training_devices=', '.join(TRAINING_DEVICES))
    select_device(device)
    if corpus is not None and corpus not in _corpora.list_corpora(home=jobs.home) and not Path(str(corpus)).exists():
        raise LabError("Unknown corpus {corpus!r}: choose one of {corpora}.",
                       corpus=corpus, corpora=', '.join(_corpora.list_corpora(home=jobs.home)))
    config = _sweep.SweepConfig(
        family=family, sizes=tuple(size.label for size in _sweep.parse_sizes(sizes)),
        steps=None if budgeted else int(steps), out=out, budget_flops=budget_flops, budget_minutes=budget_minutes,
        switch=bool(switch), preset=preset, corpus=corpus or None, seed=int(seed or 0), device=device,
        max_minutes=float(max_minutes) if max_minutes else None, n_experts=int(n_experts),
        capacity_factor=float(capacity_factor), expert_every=int(expert_every), home=str(jobs.home))
    _sweep.check_config(config)  # ValueError for a family, size or Switch setting that cannot train
    return config


def sweep_command(jobs: RunStore, family: str, sizes: str, *, steps: int | None = None, switch: bool = False,
                  preset: str = "tiny", corpus: str | None = None, seed: int = 0, device: str = "auto",
                  max_minutes: float | None = None, n_experts: int = 8, capacity_factor: float = 1.25,
                  expert_every: int = 2, budget_flops: float | None = None, budget_minutes: float | None = None) -> str:
    """The `python -m lab_models sweep ...` command `start_sweep` runs with these arguments (SWEEP_DIR for its
    folder)."""
    import shlex

    config = _sweep_config(jobs, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes, n_experts,
                           capacity_factor, expert_every, out="SWEEP_DIR", budget_flops=budget_flops,
                           budget_minutes=budget_minutes)
    return shlex.join(["python", "-m", "lab_models", "sweep", *_sweep.sweep_arguments(config)])


def start_sweep(jobs: JobManager, family: str, sizes: str, *, steps: int | None = None, switch: bool = False,
                preset: str = "tiny", corpus: str | None = None, seed: int = 0, device: str = "auto",
                max_minutes: float | None = None, n_experts: int = 8, capacity_factor: float = 1.25,
                expert_every: int = 2, budget_flops: float | None = None, budget_minutes: float | None = None) -> str:
    """Queue a scaling sweep of `family` at `sizes` ("32x1,64x2,tiny": preset names or DxL), `steps` steps per run
    (or, instead, `budget_flops` training FLOPs or `budget_minutes` minutes per run: sweep --budget-flops /
    --budget-minutes), with Switch twins when `switch`; returns its id (its folder name under <home>/sweeps/). The
    sizes share the `preset`'s data and training settings; `max_minutes` limits each run. ValueError before anything
    is queued for a bad family, size or setting."""
    import sys as _sys

    config = _sweep_config(jobs, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes, n_experts,
                           capacity_factor, expert_every, budget_flops=budget_flops, budget_minutes=budget_minutes)
    folder = _sweep.new_sweep_dir(jobs.home, family)
    config = dataclasses.replace(config, out=str(folder))
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


# The equal-budget leaderboard (inference/leaderboard.py).
LEADERBOARD_COLUMNS = _leaderboard.LEADERBOARD_COLUMNS
LEADERBOARD_NOTE_COLUMNS = _leaderboard.NOTE_COLUMNS
LEADERBOARD_METRICS = _leaderboard.METRIC_COLUMNS
LEADERBOARD_ACCURACY_PREFIX = _leaderboard.ACCURACY_PREFIX
LEADERBOARD_DEFAULT_EXAMPLES = _leaderboard.DEFAULT_MAX_EXAMPLES
LEADERBOARD_MAX_EXAMPLES = _leaderboard.MAX_EXAMPLES_LIMIT
leaderboard = _leaderboard.leaderboard
leaderboard_corpora = _leaderboard.leaderboard_corpora
# A leaderboard's runs per family (a zoo of --seeds N): each score's mean and 95% interval, and the families whose
# intervals overlap (inference/seed_intervals.py).
seed_summary = _seed_intervals.seed_summary


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


# The model zoo (experiments/zoo.py).
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


def trained_seeds(jobs: RunStore, config: ZooConfig = DEMO_ZOO) -> int:
    """How many seeds (from config.seed on) the zoo has runs of, at least 1."""
    return _zoo.trained_seeds(jobs, config)


MAX_ZOO_SEEDS = _zoo.MAX_SEEDS


def list_zoos(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The zoos in the lab home, newest first: {"name", "runs", "finished"}."""
    return _zoo.list_zoos(jobs if jobs is not None else RunStore(lab_home(home)))


def fill_mask_picks(jobs: RunStore, max_runs: int = 4) -> list[str]:
    """The runs to show first where a model fills masks (the Understand tab before the user picks): the demo zoo's
    finished runs that fill masks best at its budget (BERT, RoBERTa, MPNet, UniLM), then the newest other runs with
    weights of a family that can fill a mask; at most `max_runs`. [] when no run can fill a mask."""
    return view_picks(jobs, "fill_mask", max_runs)


def view_picks(jobs: RunStore, view: str, max_runs: int) -> list[str]:
    """The runs an Understand view shows before the reader picks: the demo zoo's finished runs of the view's showcase
    families (`ZOO_SHOWCASES[view]`), in that order, then the newest other runs with weights (for fill-mask only
    those of a family that can fill a mask), as many as the showcase names and at most `max_runs`; [] when no run
    has weights. Views: fill_mask, embeddings, sentences, probing, lens, attributions, finetune.

    A view the lab does not have is refused (`LabError`)."""
    if view not in _zoo.ZOO_SHOWCASES:
        raise LabError("Unknown view {view!r}: choose one of {views}.", view=view,
                       views=", ".join(_zoo.ZOO_SHOWCASES))
    showcase = _zoo.ZOO_SHOWCASES[view]
    rows = runs_with_weights(jobs)  # newest first
    with_weights = {row["run_id"] for row in rows}
    zoo = _zoo.zoo_progress(jobs, DEMO_ZOO)
    by_family = {run.family: run.run_id for run in zoo.runs if run.state == "finished" and run.run_id in with_weights}
    picks = [by_family[family] for family in showcase if family in by_family]
    usable = FILL_MASK_FAMILIES if view == "fill_mask" else None
    picks += [row["run_id"] for row in rows
              if (usable is None or row.get("family") in usable) and row["run_id"] not in picks]
    return picks[:min(len(showcase), max_runs)]
