"""`RunStore`: the read-only view of the job folders under a lab home (`<home>/runs/`, `finetunes/`, `sweeps/`).

Anything may create one: it starts and changes nothing. It lists the runs of `<home>/runs/` (`run_ids`,
`list_runs`), finds any job folder by id (`run_dir`), and reads a run's status (with the progress, the ETA and, for a
worker that died, the reason), metrics, summary and log tail. The folders are the truth for every finished run;
`JobManager` (lab_models/training/jobs/manager.py) is a `RunStore` that also queues and runs workers.
"""
from __future__ import annotations

import json
import math
import re
import shlex
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from lab_models.messages import LabError, Message
from lab_models.home import lab_home
from lab_models.home import inside, plain_name, shown
from lab_models.training.jobs.files import (ETA_ROWS, PRESETS, DEVICES, ACTIVE_STATES, STATUS_FILE, JOB_FILE,
                                            CONFIG_FILE, METRICS_FILE, JOB_FOLDERS, RUN_ID_PATTERN, SETTING_KEY_PATTERN,
                                            ZOO_NAME_PATTERN, MAX_PARALLEL, format_value, read_json, process_alive, finite_number,
                                            nested_value, config_steps, eta_seconds)
from lab_models.training.runs import has_checkpoint
from lab_models.training.config import check_seed, check_steps


class RunStore:
    """Read-only view of the run folders in <home>/runs: status, metrics (cached), one summary row per run.

    Safe to create anywhere (it starts nothing and changes nothing); `JobManager` adds the queue on top.
    """

    def __init__(self, home=None):
        self.home = lab_home(home)
        self.runs_dir = self.home / "runs"
        self.job_roots = tuple(self.home / name for name in JOB_FOLDERS)  # runs_dir first
        self._metrics_lock = threading.Lock()
        self._metrics_cache: dict[str, tuple[int, int, list[dict]]] = {}  # run_id -> (inode, offset, rows)

    def status(self, run_id: str) -> dict:
        """status.json of the run (with defaults for missing fields); ValueError for an unknown run."""
        run_dir = self.run_dir(run_id)
        status = read_json(run_dir / STATUS_FILE)
        if not status and not (run_dir / CONFIG_FILE).exists():
            raise LabError("Run {run_id} has no status.json yet; is it a run folder?", run_id=run_id)
        status.setdefault("state", "unknown")
        status.setdefault("step", 0)
        status.setdefault("total_steps", None)
        status.setdefault("message", "")
        status["interrupted"] = bool(status.get("interrupted"))
        status.setdefault("queue_position", None)
        status.setdefault("stopping", False)
        status["run_id"] = run_dir.name
        if status["state"] in ACTIVE_STATES and not self._managed(run_dir.name) and not process_alive(
                status.get("pid"), run_dir):
            # nobody is running it: a CLI run that was killed, or the queue of a server that is gone
            status.update(state="stopped", interrupted=True,
                          message=Message("interrupted: status.json says {state} but no trainer is running it",
                                          state=status["state"]))
        return status

    def _managed(self, run_id: str) -> bool:
        """Whether a job manager here is queueing or running `run_id` (never, for a read-only store)."""
        return False

    def run_ids(self) -> list[str]:
        """Every run folder under <home>/runs, newest first."""
        if not self.runs_dir.exists():
            return []
        dirs = [d for d in self.runs_dir.iterdir()
                if d.is_dir() and RUN_ID_PATTERN.match(d.name)
                and ((d / STATUS_FILE).exists() or (d / CONFIG_FILE).exists())]
        return [d.name for d in sorted(dirs, key=self._created, reverse=True)]

    def run_dir(self, run_id: str) -> Path:
        """The folder of an existing run (or job) named by its id, inside the lab home; ValueError for a malformed or
        unknown id. The id is one plain name (`lab_models.home.plain_name`: no '/', no '..', no NUL, at most
        200 characters) and its folder must resolve inside runs/ or finetunes/ (a symlink out of them is refused)."""
        if not isinstance(run_id, str) or not run_id.strip():
            raise LabError("Choose a run first.")
        try:
            run_id = plain_name(run_id, Message("run id"))
        except ValueError as error:
            raise LabError("{error} Run ids look like bert-tiny-20260101-120000-ab12.", error=error) from None
        for root in self.job_roots:  # runs/ first
            folder = root / run_id
            if folder.is_dir():
                inside(root, folder, Message("run folder"))
                return folder
        raise LabError("Unknown run {run_id}: no folder {path}.", run_id=shown(run_id), path=self.runs_dir / run_id)

    def has_checkpoint(self, run_id: str) -> bool:
        """Whether the run has a complete checkpoint to resume from (`lab_models.training.runs.has_checkpoint`)."""
        return has_checkpoint(self.run_dir(run_id))

    def metrics(self, run_id: str) -> list[dict]:
        """Every row of metrics.jsonl (read incrementally and cached; a half-written last line is skipped)."""
        path = self.run_dir(run_id) / METRICS_FILE
        try:
            info = path.stat()
        except OSError:
            return []
        with self._metrics_lock:
            inode, offset, rows = self._metrics_cache.get(run_id, (info.st_ino, 0, []))
            if inode != info.st_ino or info.st_size < offset:
                offset, rows = 0, []
            if info.st_size > offset:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read(info.st_size - offset)
                end = chunk.rfind(b"\n") + 1  # only complete lines
                rows = rows + [row for row in (self._parse_row(line) for line in chunk[:end].splitlines())
                               if row is not None]
                offset += end
            self._metrics_cache[run_id] = (info.st_ino, offset, rows)
            return list(rows)

    def summary(self, run_id: str) -> dict:
        """One row for the runs table: identity, state, progress, last losses, speed and ETA."""
        run_dir = self.run_dir(run_id)
        status = self.status(run_id)
        request = read_json(run_dir / JOB_FILE)
        config = read_json(run_dir / CONFIG_FILE)
        train, last_val = self._latest_rows(self.metrics(run_id))
        last = train[-1] if train else {}
        total = status.get("total_steps") or request.get("steps") or config_steps(config)
        timing = _budget_of(config)
        if timing and timing.get("minutes") is not None and timing.get("steps") is None:
            total = None  # a wall-time budget still timing its first steps: the total is not known yet
        step = max(int(status.get("step") or 0), int(last.get("step") or 0)) if (status or last) else 0
        return {
            "run_id": run_id,
            "family": request.get("family") or config.get("family"),
            "preset": request.get("preset") or config.get("preset") or nested_value(config, "train", "preset"),
            "corpus": request.get("corpus") or config.get("corpus") or nested_value(config, "train", "corpus"),
            "device": request.get("device") or config.get("device") or nested_value(config, "train", "device"),
            "zoo": request.get("zoo") or config.get("zoo"),
            "seed": _seed_of(request, config),
            # the budget the run was given instead of steps (config.json "budget": {"flops": F} or {"minutes": M}),
            # None for a run of a step count
            "budget": _budget_of(config),
            "state": status.get("state"),
            "queue_position": status.get("queue_position"),
            "stopping": status.get("stopping", False),
            "interrupted": bool(status.get("interrupted")),
            "message": status.get("message", ""),
            "step": step,
            "total_steps": total,
            "loss": finite_number(last.get("loss")),
            "losses": {k: finite_number(v) for k, v in (last.get("losses") or {}).items()},
            "val_loss": finite_number(last_val.get("loss")),
            "val_bits_per_byte": finite_number(last_val.get("bits_per_byte")),
            "val_perplexity": finite_number(last_val.get("perplexity")),
            "tokens_per_s": finite_number(last.get("tokens_per_s")),
            "flops_per_token": finite_number(last.get("flops_per_token")),
            "mfu": finite_number(last.get("mfu")),
            "mfu_peak_source": nested_value(config, "performance_used", "peak_source"),
            "precision": nested_value(config, "performance_used", "precision", "precision"),
            "eta_s": eta_seconds(train, step, total) if status.get("state") == "running" else None,
            # before its first step a run prepares its data: "tokenizing", with that part's progress (bytes and
            # tokens done, MB/s, ETA: lab_models/text/token_shards.py TokenizeProgress)
            "phase": status.get("phase") if status.get("state") == "running" else None,
            "tokenizing": status.get("tokenizing") if status.get("state") == "running" else None,
            "created": self._created(run_dir),
            "updated": status.get("updated"),
        }

    @staticmethod
    def _latest_rows(rows: list[dict], train_rows: int = ETA_ROWS) -> tuple[list[dict], dict]:
        """(the last `train_rows` train rows in order, the last validation row or {}), read from the end: a long run
        logs tens of thousands of rows and its summary is asked for every few seconds while the page shows it.

        >>> RunStore._latest_rows([{"step": 1}, {"split": "val", "step": 1}, {"step": 2}, {"step": 3}], 2)
        ([{'step': 2}, {'step': 3}], {'split': 'val', 'step': 1})
        """
        train, last_val = [], {}
        for row in reversed(rows):
            split = row.get("split", "train")
            if split == "val":
                last_val = last_val or row
            elif split == "train" and len(train) < train_rows:
                train.append(row)
            if last_val and len(train) >= train_rows:
                break
        return train[::-1], last_val

    def list_runs(self) -> list[dict]:
        """`summary` of every run folder, newest first."""
        out = []
        for run_id in self.run_ids():
            try:
                out.append(self.summary(run_id))
            except ValueError:  # a folder removed while listing
                continue
        return out

    @staticmethod
    def _parse_row(line: bytes) -> dict | None:
        try:
            row = json.loads(line)
        except ValueError:
            return None
        return row if isinstance(row, dict) else None

    @staticmethod
    def _created(run_dir: Path) -> float:
        created = read_json(run_dir / JOB_FILE).get("created")
        if isinstance(created, (int, float)):
            return float(created)
        try:
            return run_dir.stat().st_mtime
        except OSError:
            return 0.0

    # ------------------------------------------------------------------ arguments
    @staticmethod
    def _validated_request(family, preset, corpus, steps, seed, device, objectives, settings, tokenizer,
                           extra_args, zoo=None, parallel: int = 1) -> dict:
        if not isinstance(family, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", family or ""):
            raise LabError("family must be a family name such as 'bert', got {family!r}.", family=family)
        if preset not in PRESETS:
            raise LabError("Unknown preset {preset!r}: choose one of {presets}.",
                           preset=preset, presets=', '.join(PRESETS))
        if corpus is not None and (not isinstance(corpus, str) or not corpus.strip()):
            raise LabError("corpus must be a corpus name or path, got {corpus!r}.", corpus=corpus)
        if steps is not None:
            steps = check_steps(steps)  # None (blank) is the preset's default
        check_seed(seed)
        if device not in DEVICES:
            raise LabError("Unknown device {device!r}: choose one of {devices}.",
                           device=device, devices=', '.join(DEVICES))
        weights = {}
        for name, weight in dict(objectives or {}).items():
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise LabError("Objective names are words such as 'mlm', got {name!r}.", name=name)
            try:
                weight = float(weight)
            except (TypeError, ValueError):
                raise LabError("The weight of objective {name!r} must be a number, got {weight!r}.",
                               name=name, weight=weight) from None
            if not math.isfinite(weight) or weight < 0:
                raise LabError("The weight of objective {name!r} must be a finite number >= 0, got {weight!r}.",
                               name=name, weight=weight)
            weights[name] = weight
        values = {}
        for key, value in dict(settings or {}).items():
            if not isinstance(key, str) or not SETTING_KEY_PATTERN.match(key):
                raise LabError("Setting names are words such as 'mask_rate', got {key!r}.", key=key)
            text = format_value(value)
            if not text or "\n" in text:
                raise LabError("The value of setting {key!r} must be one line of text, got {value!r}.",
                               key=key, value=value)
            values[key] = text
        if tokenizer is not None and (not isinstance(tokenizer, str) or not tokenizer.strip()):
            raise LabError("tokenizer must be a tokenizer kind such as 'wordpiece', got {tokenizer!r}.",
                           tokenizer=tokenizer)
        extra = [str(a) for a in extra_args]
        if any("\n" in a for a in extra):
            raise LabError("Extra trainer arguments must not contain line breaks.")
        if zoo is not None and (not isinstance(zoo, str) or not ZOO_NAME_PATTERN.match(zoo)):
            raise LabError("A zoo name is a lower-case slug such as 'tiny' or 'tiny-synthetic', got {zoo!r}.", zoo=zoo)
        request = {"family": family, "preset": preset, "corpus": corpus.strip() if corpus else None, "steps": steps,
                   "seed": int(seed), "device": device, "objectives": weights, "settings": values,
                   "tokenizer": tokenizer.strip() if tokenizer else None, "extra_args": extra}
        if isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= MAX_PARALLEL:
            raise LabError("parallel must be a whole number of jobs from 1 to {most}, got {parallel!r}.",
                           most=MAX_PARALLEL, parallel=parallel)
        if parallel > 1:
            request["parallel"] = parallel
        return {**request, "zoo": zoo} if zoo else request

    def trainer_args(self, request: Mapping, run_dir: Path) -> list[str]:
        """The CLI arguments of a request (docs/contract.md §2): --family ... --out <run_dir> --home <home> ..."""
        args = ["--family", request["family"], "--out", str(run_dir), "--home", str(self.home),
                "--preset", request.get("preset") or "tiny"]
        if request.get("corpus"):
            args += ["--corpus", request["corpus"]]
        if request.get("steps"):
            args += ["--steps", str(int(request["steps"]))]
        args += ["--seed", str(int(request.get("seed") or 0)), "--device", request.get("device") or "auto"]
        for name, weight in (request.get("objectives") or {}).items():
            args += ["--objective", f"{name}={format_value(float(weight))}"]
        for key, value in (request.get("settings") or {}).items():
            args += ["--set", f"{key}={value}"]
        if request.get("tokenizer"):
            args += ["--tokenizer", request["tokenizer"]]
        if request.get("zoo"):
            args += ["--zoo", request["zoo"]]
        return args + list(request.get("extra_args") or [])

    def preview_command(self, family: str, preset: str = "tiny", corpus: str | None = None, steps: int | None = None,
                        seed: int = 0, device: str = "auto", objectives: Mapping[str, float] | None = None,
                        settings: Mapping[str, object] | None = None, tokenizer: str | None = None,
                        extra_args: Sequence[str] = (), run_dir: str = "RUN_DIR") -> str:
        """The shell command `start` would run for these arguments (validated the same way), for display."""
        request = self._validated_request(family, preset, corpus, steps, seed, device, objectives, settings,
                                          tokenizer, extra_args)
        return shlex.join(["python", "-m", "lab_models", "train"] + self.trainer_args(request, Path(run_dir)))


def _seed_of(request: Mapping, config: Mapping) -> int:
    """The run's seed: job.json's request, else config.json's (a run trained outside the job manager), else 0."""
    for value in (request.get("seed"), config.get("seed"), nested_value(config, "train", "seed")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def _budget_of(config: Mapping) -> dict | None:
    """{"flops": F} or {"minutes": M} (with "steps": the steps it bought, once known) from config.json, else None."""
    budget = config.get("budget")
    train = config.get("train") if isinstance(config.get("train"), Mapping) else {}
    for key, given in (("flops", train.get("budget_flops")), ("minutes", train.get("budget_minutes"))):
        value = budget.get(key) if isinstance(budget, Mapping) else None
        value = value if value is not None else given
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            steps = budget.get("steps") if isinstance(budget, Mapping) else None
            return {key: float(value), "steps": steps if isinstance(steps, int) else None}
    return None
