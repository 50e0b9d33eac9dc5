"""The run folder: what a training run writes, and how the UI lists and reads runs (docs/contract.md §2).

    DIR/
      config.json        the fully resolved configuration (written once at the start; rewritten on a fresh restart)
      status.json        {"state", "step", "total_steps", "message", "pid", "updated"}, written atomically
      metrics.jsonl      one JSON object per line: train rows and evaluation rows ("split": "val")
      tokenizer.json     the prepared tokenizer (the lab's special tokens included), written at the start
      model.safetensors  the final weights (also written when a run is stopped)
      train.log          the trainer's log
      checkpoint/        the resumable state:
        latest.json      {"step": 40, "dir": "step-00000040"}, replaced atomically after the folder is complete
        step-00000040/   model.safetensors, optimizer.safetensors, optimizer.json, state.json

Finite weights only. `save_checkpoint` first checks that every weight is finite and raises `NonFiniteLossError`
otherwise (an update can turn the weights NaN even when the loss that produced it was finite), so a diverged run never
replaces its last good checkpoint.

Atomicity. A checkpoint is written into a hidden temporary folder inside checkpoint/, each file flushed and fsynced,
then the folder is renamed to its final name (a rename is atomic), then latest.json is replaced, then older step
folders are deleted. A kill at any moment leaves the previous complete checkpoint readable: `load_checkpoint` follows
latest.json, or, if that is missing or points at nothing, takes the highest step folder that has its state.json
(written last). status.json and config.json go through `home.atomic_write_json` (temp file + fsync + os.replace).
The writer calls `lab_models.training.faults.fault_point` at its named steps (inert unless $PRETRAINING_LAB_FAULT is
set), so the reliability suite can kill it at each of them and check that the previous checkpoint still loads.
metrics.jsonl is append-only, one line per write; a kill can leave a half-written last line, which `read_metrics`
skips, and a resume first cuts the file back to the checkpoint's step, so no step appears twice.

No pickle anywhere: weights go to safetensors (tied weights are stored once, `safetensors.torch.save_model`), the
optimizer's tensors to safetensors and the rest of its state (param groups, hyper-parameters) to JSON.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from lab_models.messages import LabError, Message, messages_restored
from lab_models.training.engine import NonFiniteLossError
from lab_models.training.faults import fault_point
from lab_models.home import atomic_write_json, atomic_write_text, lab_home
from lab_models.home import is_inside

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
MODEL_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
LOG_FILE = "train.log"
CHECKPOINT_DIR = "checkpoint"
LATEST_FILE = "latest.json"
STATES = ("running", "finished", "stopped", "failed")


# ------------------------------------------------------------------------------------------------ small files
def read_json(path: str | os.PathLike) -> dict:
    """A JSON object from `path`, its messages restored; {} when the file is missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return messages_restored(data) if isinstance(data, dict) else {}


def write_config(run_dir: str | os.PathLike, config: dict) -> Path:
    return atomic_write_json(Path(run_dir) / CONFIG_FILE, config)


def read_config(run_dir: str | os.PathLike) -> dict:
    return read_json(Path(run_dir) / CONFIG_FILE)


def write_status(run_dir: str | os.PathLike, state: str, *, step: int, total_steps: int, message: Message | str = "",
                 pid: int | None = None, **extra) -> dict:
    """Replace status.json atomically. Example: write_status(d, "running", step=10, total_steps=50)."""
    if state not in STATES:
        raise LabError("unknown run state {state!r}: use one of {states}", state=state, states=', '.join(STATES))
    status = {"state": state, "step": int(step), "total_steps": int(total_steps),
              "message": message if isinstance(message, Message) else str(message),
              "pid": os.getpid() if pid is None else int(pid), "updated": time.time(), **extra}
    atomic_write_json(Path(run_dir) / STATUS_FILE, status)
    return status


def read_status(run_dir: str | os.PathLike) -> dict:
    """status.json as a dict ({} when the run has none yet)."""
    return read_json(Path(run_dir) / STATUS_FILE)


def append_metrics(run_dir: str | os.PathLike, row: dict) -> None:
    """Append one row to metrics.jsonl as a single line (one write call, then flush)."""
    line = json.dumps(row, ensure_ascii=False, allow_nan=True) + "\n"
    with open(Path(run_dir) / METRICS_FILE, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()


def read_metrics(run_dir: str | os.PathLike) -> list[dict]:
    """Every complete row of metrics.jsonl, in order. A half-written last line (a run killed mid-write, or a line
    being written right now) is skipped; so is any other line that is not a JSON object."""
    path = Path(run_dir) / METRICS_FILE
    try:
        data = path.read_bytes()
    except OSError:
        return []
    rows = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def latest_metrics(run_dir: str | os.PathLike) -> tuple[dict, dict]:
    """(the last train row, the last evaluation row) of metrics.jsonl, each {} when there is none, found from the end
    of the file: listing the runs must not parse every row of a long run (tens of thousands) each time a page asks. A
    half-written last line is skipped, as `read_metrics` does.

    >>> import tempfile; folder = tempfile.mkdtemp()
    >>> for row in ({"step": 1, "loss": 3.0}, {"split": "val", "step": 1, "loss": 3.5}, {"step": 2, "loss": 2.0}):
    ...     append_metrics(folder, row)
    >>> latest_metrics(folder)
    ({'step': 2, 'loss': 2.0}, {'split': 'val', 'step': 1, 'loss': 3.5})
    """
    try:
        data = (Path(run_dir) / METRICS_FILE).read_bytes()
    except OSError:
        return {}, {}
    last_train: dict = {}
    end = len(data)
    while end > 0 and not last_train:  # lines from the end until a train row
        start = data.rfind(b"\n", 0, end) + 1
        row = _metrics_row(data[start:end])
        if row is not None and row.get("split", "train") != "val":
            last_train = row
        end = start - 1
    last_val: dict = {}
    found = len(data)
    while not last_val:  # only the lines that say "val" are parsed
        found = data.rfind(b'"val"', 0, found)
        if found < 0:
            break
        start = data.rfind(b"\n", 0, found) + 1
        stop = data.find(b"\n", found)
        row = _metrics_row(data[start:len(data) if stop < 0 else stop])
        if row is not None and row.get("split") == "val":
            last_val = row
        found = start
    return last_train, last_val


def _metrics_row(line: bytes) -> dict | None:
    """One line of metrics.jsonl as a dict, or None (blank, half-written or not an object)."""
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def truncate_metrics(run_dir: str | os.PathLike, step: int) -> int:
    """Keep only the rows with step <= `step` (a resume repeats the steps after its checkpoint). Returns how many
    rows were kept. The file is rewritten atomically."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return 0
    kept = [row for row in read_metrics(run_dir) if isinstance(row.get("step"), int) and row["step"] <= step]
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in kept))
    return len(kept)


def disk_error_message(error: BaseException, run_dir: str | os.PathLike) -> Message | None:
    """The run's failure message for a full or read-only disk (None for any other error): what happened, that the last
    complete checkpoint is intact, and what to do.

    >>> import errno; disk_error_message(OSError(errno.ENOSPC, "No space left on device"), "/nowhere")[:44]
    'disk full: no space left on the device of /n'
    """
    if not isinstance(error, OSError) or error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        return None
    try:
        is_run = (Path(run_dir) / CONFIG_FILE).exists() or checkpoint_dir(run_dir).is_dir()
        kept = latest_checkpoint(run_dir) if is_run else None
    except OSError:
        is_run, kept = False, None
    if is_run:
        intact = (Message("; the last complete checkpoint ({checkpoint}) is intact", checkpoint=kept.name)
                  if kept is not None else Message("; no checkpoint had been written yet"))
        then = Message("press Resume")
    else:  # the lab home or another folder: nothing of a run to speak of
        intact, then = "", Message("try again")
    if error.errno == errno.EROFS:
        return Message("read-only disk: cannot write to {run_dir}{intact}. Make it writable, then {then}.",
                       run_dir=run_dir, intact=intact, then=then)
    what = Message("disk quota exceeded") if error.errno == errno.EDQUOT else Message("no space left on the device")
    return Message("disk full: {what} of {run_dir}{intact}. Free some space, then {then}.", what=what,
                   run_dir=run_dir, intact=intact, then=then)


# ------------------------------------------------------------------------------------------------ weights
def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    """Flush a folder's entries (renames into it) to the disk; a no-op where folders cannot be opened (Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_weights(module: torch.nn.Module, path: str | os.PathLike) -> Path:
    """Write a module's weights to a safetensors file atomically (temp file beside it, fsync, os.replace).
    Tensors that share memory (tied embeddings) are stored once."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_model(module, tmp, force_contiguous=True)
        _fsync_file(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_weights(module: torch.nn.Module, path: str | os.PathLike) -> None:
    """Load a safetensors file written by `save_weights` into `module` (strict: every weight must match)."""
    path = Path(path)
    if not path.is_file():
        raise LabError("no weights at {path}", path=path)
    missing, unexpected = load_model(module, str(path), strict=False)
    if missing or unexpected:
        raise LabError("{path} does not fit this model: missing {missing}, "
                       "unexpected {unexpected}",
                       path=path, missing=sorted(missing)[:5], unexpected=sorted(unexpected)[:5])


# ------------------------------------------------------------------------------------------------ optimizer
def _split_optimizer_state(state_dict: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """torch optimizer state_dict -> (tensors by flat name, JSON-able rest)."""
    tensors: dict[str, torch.Tensor] = {}
    plain_state: dict[str, dict] = {}
    for param_id, values in state_dict["state"].items():
        entry = {}
        for name, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{param_id}.{name}"] = value.detach().cpu().contiguous()
            else:
                entry[name] = value
        plain_state[str(param_id)] = entry
    return tensors, {"state": plain_state, "param_groups": state_dict["param_groups"]}


def _join_optimizer_state(tensors: dict[str, torch.Tensor], rest: dict) -> dict:
    state: dict[int, dict[str, Any]] = {int(k): dict(v) for k, v in rest["state"].items()}
    for key, tensor in tensors.items():
        _, param_id, name = key.split(".", 2)
        state.setdefault(int(param_id), {})[name] = tensor
    groups = []
    for group in rest["param_groups"]:
        group = dict(group)
        if isinstance(group.get("betas"), list):
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    return {"state": state, "param_groups": groups}


# ------------------------------------------------------------------------------------------------ checkpoints
def nonfinite_parameters(model: torch.nn.Module) -> list[str]:
    """The names of the model's floating-point weights and buffers that hold a NaN or an infinity ([] when all are
    finite). `save_checkpoint` refuses to write such weights over a good checkpoint."""
    return [name for name, tensor in model.state_dict().items()
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())]


def checkpoint_dir(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def _step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def save_checkpoint(run_dir: str | os.PathLike, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    state: dict) -> Path:
    """Write a complete resumable checkpoint atomically (see the module docstring). `state` is JSON-able and must
    hold "step". Returns the step folder."""
    step = int(state["step"])
    bad = nonfinite_parameters(model)
    if bad:
        kept = latest_checkpoint(run_dir)
        names = ", ".join(bad[:3]) + (" ..." if len(bad) > 3 else "")
        if kept:
            raise NonFiniteLossError(Message("non-finite weights at step {step} ({names} hold NaN or infinite values): "
                                             "not checkpointed, the checkpoint of {kept} is kept; lower --lr or check "
                                             "the data", step=step, names=names, kept=kept.name))
        raise NonFiniteLossError(Message("non-finite weights at step {step} ({names} hold NaN or infinite values): not "
                                         "checkpointed, no earlier checkpoint exists; lower --lr or check the data",
                                         step=step, names=names))
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".writing-{_step_dir_name(step)}-", dir=root))
    try:
        fault_point("checkpoint:begin", step=step)
        save_model(model, str(staging / MODEL_FILE), force_contiguous=True)
        fault_point("checkpoint:after_weights", step=step)
        tensors, rest = _split_optimizer_state(optimizer.state_dict())
        save_file(tensors, str(staging / "optimizer.safetensors"))
        fault_point("checkpoint:after_optimizer", step=step)
        (staging / "optimizer.json").write_text(json.dumps(rest), encoding="utf-8")
        (staging / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
        fault_point("checkpoint:after_state", step=step)
        for file in staging.iterdir():
            _fsync_file(file)
        fault_point("checkpoint:before_rename", step=step)
        final = root / _step_dir_name(step)
        if final.exists():  # the same step saved again (a stop right after a periodic checkpoint)
            shutil.rmtree(final)
        os.replace(staging, final)
        _fsync_dir(root)  # the rename itself reaches the disk (a power cut, not only a kill, keeps it)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fault_point("checkpoint:after_rename", step=step)
    atomic_write_json(root / LATEST_FILE, {"step": step, "dir": final.name})
    _fsync_dir(root)
    fault_point("checkpoint:after_latest", step=step)
    for old in root.iterdir():  # older complete checkpoints, and leftovers of killed writes
        if old.name != final.name and old.is_dir() and (old.name.startswith("step-") or old.name.startswith(".")):
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint folder, or None."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return None
    latest = read_json(root / LATEST_FILE)
    if isinstance(latest.get("dir"), str):
        candidate = root / latest["dir"]
        if (candidate / "state.json").is_file():
            return candidate
    complete = sorted(d for d in root.iterdir() if d.is_dir() and d.name.startswith("step-")
                      and (d / "state.json").is_file())
    return complete[-1] if complete else None


def has_checkpoint(run_dir: str | os.PathLike) -> bool:
    return latest_checkpoint(run_dir) is not None


def load_checkpoint(run_dir: str | os.PathLike, *, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer | None = None) -> dict:
    """Load the newest checkpoint into `model` (and `optimizer`); return its state dict ("step", ...)."""
    folder = latest_checkpoint(run_dir)
    if folder is None:
        raise LabError("{run_dir} has no checkpoint to resume from", run_dir=run_dir)
    load_weights(model, folder / MODEL_FILE)
    if optimizer is not None:
        # Loaded on the CPU: load_state_dict moves each tensor to its parameter's device, except AdamW's "step",
        # which stays on the CPU unless the optimizer is fused or capturable (then torch moves it too).
        tensors = load_file(str(folder / "optimizer.safetensors"), device="cpu")
        rest = json.loads((folder / "optimizer.json").read_text(encoding="utf-8"))
        optimizer.load_state_dict(_join_optimizer_state(tensors, rest))
    return json.loads((folder / "state.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------ listing
def pid_alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def run_summary(run_dir: str | os.PathLike) -> dict:
    """One row of `list_runs` for one folder."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    status = read_status(run_dir)
    last_train, last_val = latest_metrics(run_dir)
    state = status.get("state")
    if state == "running" and not pid_alive(status.get("pid")):
        state = "interrupted"  # the process that said "running" is gone (killed, or the machine restarted)
    try:
        created = float(config.get("created") or run_dir.stat().st_mtime)
    except OSError:
        created = 0.0
    return {
        "run_id": run_dir.name,
        "path": str(run_dir),
        "family": config.get("family"),
        "preset": config.get("preset"),
        "corpus": config.get("corpus"),
        "zoo": config.get("zoo"),
        "state": state,
        "message": status.get("message", ""),
        "step": status.get("step", last_train.get("step", 0)),
        "total_steps": status.get("total_steps", config.get("steps")),
        "loss": last_train.get("loss"),
        "val_loss": last_val.get("loss"),
        "val_bits_per_byte": last_val.get("bits_per_byte"),
        "created": created,
    }


def list_runs(home=None) -> list[dict]:
    """Every run folder under `<lab home>/runs/` (one with a config.json or status.json), newest first.

    Each row: run_id, path, family, preset, corpus, zoo (lab_models/experiments/zoo.py; None for other runs), state
    ("running", "finished", "stopped", "failed", or "interrupted" when status.json says running but its process is
    gone), message, step, total_steps, loss (last train row), val_loss, val_bits_per_byte (last evaluation), created
    (unix time). A folder that is a symlink leading out of runs/ is left out (the page serves nothing outside the lab
    home: lab_models/home.py).
    """
    runs_root = lab_home(home) / "runs"
    summaries = []
    for run_dir in runs_root.iterdir():
        if run_dir.is_dir() and ((run_dir / CONFIG_FILE).exists() or (run_dir / STATUS_FILE).exists()) \
                and is_inside(runs_root, run_dir):
            summaries.append(run_summary(run_dir))
    return sorted(summaries, key=lambda row: row["created"], reverse=True)
