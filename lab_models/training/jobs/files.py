"""What the job manager and the run store share: the names of a job folder's files (status.json, job.json,
config.json, metrics.jsonl, worker.log, checkpoint/), the presets and devices a job may ask for, the `Job` record,
and small readers (`read_json`, `log_tail`, whether a worker process is still alive, the ETA from the train rows), and
`lower_priority`, which every worker gets when it starts.

What `JobManager` (manager.py) and `RunStore` (store.py) share; manager.py's docstring describes the queue.
"""
from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import lab_models
from lab_models.messages import messages_restored
from lab_models.training.device import select_device

PRESETS = ("tiny", "small", "medium", "base")
DEVICES = ("auto", "cpu", "cuda", "mps")
ACTIVE_STATES = ("queued", "running")
TERMINAL_STATES = ("finished", "stopped", "failed", "died")
STATUS_FILE = "status.json"
JOB_FILE = "job.json"
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
LOG_FILE = "worker.log"
CHECKPOINT_DIR = "checkpoint"
JOB_FOLDERS = ("runs", "finetunes", "sweeps", "claims")  # job folders under the lab home; runs/ is the runs table
LOG_TAIL_LINES = 20
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SETTING_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
ZOO_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{0,60}$")  # a zoo tag goes into run ids: lower-case slug
MAX_PARALLEL = 32  # jobs that may share one device at once (Job.parallel)


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system says, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_per_job(parallel: int) -> int:
    """Torch threads for one of `parallel` jobs that share the CPU: its share of the cores, at least one.

    >>> threads_per_job(1) == available_cores(), threads_per_job(10 ** 6)
    (True, 1)
    """
    return max(1, available_cores() // max(1, parallel))
PACKAGE_ROOT = Path(lab_models.__file__).resolve().parent.parent  # the folder holding lab_models: the workers' import path


def default_trainer_command() -> list[str]:
    """The command prefix that runs the trainer: this Python, `-m lab_models train`."""
    return [sys.executable, "-m", "lab_models", "train"]


def format_value(value) -> str:
    """A setting value as the CLI reads it: True -> "true", 0.2 -> "0.2", 3 -> "3", "x" -> "x"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(float(value)) if not value.is_integer() else repr(value)
    return str(value)


def resolve_device_key(device: str) -> str:
    """The device a job occupies: "auto" resolves to cuda, mps or cpu; an unavailable device stays as named."""
    if device != "auto":
        return device
    try:

        return select_device("auto").type
    except Exception:  # noqa: BLE001 - a broken torch must not stop the queue; cpu is the safe guess
        return "cpu"


def read_json(path: Path) -> dict:
    """A JSON object from `path`, its messages restored (`messages_restored`), or {} when it is missing or unreadable
    (files are written atomically)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return messages_restored(data) if isinstance(data, dict) else {}


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_chars: int = 4000) -> str:
    """The last `lines` non-empty lines of a log file ('' when there is none)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64_000))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("=== ")]
    return "\n".join(kept[-lines:])[-max_chars:]


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def process_alive(pid: int | None, run_dir: Path) -> bool:
    """True when `pid` is a live (not zombie) process whose command line names `run_dir` (so not a reused pid)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    proc = Path(f"/proc/{pid}")
    try:
        stat = (proc / "stat").read_text()
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
        return str(run_dir) in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False  # cannot verify (no /proc): do not adopt a process we cannot identify


@dataclass
class Job:
    """One queued or running training job (in memory; the run folder is the persistent record)."""

    run_id: str
    run_dir: Path
    args: list[str]  # the trainer's arguments (after the command prefix)
    device_key: str
    queued_at: float
    process: subprocess.Popen | None = None
    pid: int | None = None  # set for a running job (and for an adopted one, which has no Popen)
    adopted: bool = False
    started_at: float | None = None
    stop_requested_at: float | None = None
    killed: bool = False
    extra: dict = field(default_factory=dict)
    command: list[str] | None = None  # a full command line (start_command); None: the trainer with `args`
    # how many jobs that all allow it may share the device at once, each with its share of the cores as threads (a
    # tiny model leaves a core idle while it runs Python: two one-thread tiny runs on 2 cores finish in half the time)
    parallel: int = 1


# A worker yields the CPU to the page and its server when both want it: training takes every core the machine has
# (torch's threads), so at the same priority a tab click waits behind it (0.7 to 1.3 s on 2 cores, measured). With
# nothing else running, the worker gets the whole machine all the same.
WORKER_NICENESS = 10


def lower_priority(pid: int, niceness: int = WORKER_NICENESS) -> None:
    """Give the worker process `pid` the scheduling priority `niceness` (Unix `nice`; 0 leaves it as it is). Called
    right after it starts, before its Python has started any thread: on Linux each thread has its own priority and
    new ones inherit their creator's, so torch's threads get it too. Where the system has no such call (Windows), or
    the process is already gone, nothing happens."""
    if niceness <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        if niceness > os.getpriority(os.PRIO_PROCESS, pid):  # never higher than the server's own (that needs root)
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
    except (ProcessLookupError, PermissionError):
        pass


def finite_number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def nested_value(mapping: Mapping, *keys):
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def config_steps(config: Mapping) -> int | None:
    for value in (config.get("steps"), config.get("total_steps"), nested_value(config, "train", "steps"),
                  nested_value(config, "train", "total_steps")):
        if isinstance(value, int) and value > 0:
            return value
    return None


ETA_ROWS = 20  # the pace behind an ETA: the last this many logged train steps


def eta_seconds(train_rows: list[dict], step: int, total: int | None) -> float | None:
    """Seconds left, from the pace over the last ETA_ROWS logged steps (robust to a resume that restarts
    elapsed_s)."""
    if not total:
        return None
    if step >= total:
        return 0.0
    points = [(r.get("step"), r.get("elapsed_s")) for r in train_rows[-ETA_ROWS:]]
    points = [(float(s), float(e)) for s, e in points if isinstance(s, (int, float)) and isinstance(e, (int, float))]
    rate = None
    if len(points) >= 2 and points[-1][0] > points[0][0] and points[-1][1] > points[0][1]:
        rate = (points[-1][0] - points[0][0]) / (points[-1][1] - points[0][1])
    elif points and points[-1][0] > 0 and points[-1][1] > 0:
        rate = points[-1][0] / points[-1][1]
    return (total - step) / rate if rate else None
