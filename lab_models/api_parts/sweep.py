"""`lab_models.api`'s sweep section (re-exported there: the UI imports only `lab_models.api`).

Scaling sweeps (lab_models/sweep.py): one family at several sizes (dense, and with --switch also with Switch
layers), queued on the job manager as one worker (`python -m lab_models.sweep`) in <home>/sweeps/<id>/, each size
an ordinary training run inside it; a power law of validation bits per byte against parameters and training FLOPs.
"""
from __future__ import annotations

import dataclasses as _dataclasses
from pathlib import Path

from .. import corpora
from .. import jobs as _jobs
from .. import runs as _runs
from .. import sweep as _sweep
from ..device import select_device
from ..home import lab_home
from .training import JobManager, RunStore, TRAINING_DEVICES

SWEEP_X_AXES = dict(_sweep.X_AXES)  # "parameters", "flops" -> axis title
SWEEP_POINT_COLUMNS = ["sweep", "family", "variant", "size", "state", "non_embedding", "active_non_embedding",
                       "train_flops", "tokens", "bits_per_byte", "seconds", "message"]
__all__ = ["SWEEP_X_AXES", "SWEEP_POINT_COLUMNS", "parse_sweep_sizes", "fit_power_law", "sweep_command",
            "start_sweep", "stop_sweep", "list_sweeps", "sweep_points"]
fit_power_law = _sweep.fit_power_law


def parse_sweep_sizes(text: str) -> list[dict]:
    """The sizes of a `--sizes` text (preset names or DxL), each as {label, d_model, n_layers, n_heads, d_ff}."""
    return [_dataclasses.asdict(size) for size in _sweep.parse_sizes(text)]


def _sweep_config(jobs: RunStore, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes,
                  n_experts, capacity_factor, expert_every, out="") -> "_sweep.SweepConfig":
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or steps != int(steps) or steps < 1:
        raise ValueError(f"Steps must be a whole number of 1 or more, got {steps!r}.")
    if device not in TRAINING_DEVICES:
        raise ValueError(f"Unknown device {device!r}: choose one of {', '.join(TRAINING_DEVICES)}.")
    select_device(device)
    if corpus is not None and corpus not in corpora.list_corpora(home=jobs.home) and not Path(str(corpus)).exists():
        raise ValueError(f"Unknown corpus {corpus!r}: choose one of {', '.join(corpora.list_corpora(home=jobs.home))}.")
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
    """The `python -m lab_models.sweep ...` command `start_sweep` runs with these arguments (SWEEP_DIR for its
    folder)."""
    import shlex

    config = _sweep_config(jobs, family, sizes, steps, switch, preset, corpus, seed, device, max_minutes, n_experts,
                           capacity_factor, expert_every, out="SWEEP_DIR")
    return shlex.join(["python", "-m", "lab_models.sweep", *_sweep.sweep_arguments(config)])


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
    command = [_sys.executable, "-m", "lab_models.sweep", *_sweep.sweep_arguments(config)]
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
        raise ValueError("Choose a sweep first.")
    folder = jobs.run_dir(sweep_id.strip())
    if folder.parent.name != _sweep.SWEEPS_FOLDER:
        raise ValueError(f"{sweep_id} is not a sweep.")
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
            request = _runs.read_json(Path(sweep["folder"]) / _jobs.JOB_FILE)
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
    return frame[SWEEP_POINT_COLUMNS + [c for c in frame.columns if c not in SWEEP_POINT_COLUMNS]]
