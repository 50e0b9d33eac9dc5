"""Test-only fault injection: kill, pause, fill the disk or poison the loss at named points of the trainer.

The reliability suite (tests/reliability/test_training_faults.py, benchmarks/kill_loop.py) needs to land a `SIGKILL`
*inside* a checkpoint write, make a write fail with "no space left on device", or make the loss NaN at a chosen step,
the way SQLite's crash tests stop its pager at named points. The trainer calls `fault_point(name, step=...)` at those
points; this module does nothing there unless the environment variable `PRETRAINING_LAB_FAULT` names that point.

Inert unless set. With `PRETRAINING_LAB_FAULT` unset or empty every hook is one dictionary lookup and returns. The
page cannot set it: it is read from the trainer process's own environment, which the job manager copies from the
server's environment (never from a request), and no page control or `--set` key reaches it.

Format: one or more faults separated by commas, each `AREA:POINT:ACTION[@STEP]`:

    PRETRAINING_LAB_FAULT=checkpoint:after_weights:kill@12      # SIGKILL itself half way through step 12's checkpoint
    PRETRAINING_LAB_FAULT=checkpoint:before_rename:pause=30@4   # sleep 30 s with step 4's checkpoint fully written
    PRETRAINING_LAB_FAULT=checkpoint:after_weights:enospc@4     # the write fails as on a full disk
    PRETRAINING_LAB_FAULT=train:loss:nan@3                      # step 3's loss (and so its gradients) becomes NaN

Points (in the order they happen):
- `checkpoint:begin` (the staging folder exists, empty), `checkpoint:after_weights`, `checkpoint:after_optimizer`,
  `checkpoint:after_state` (every file written, not yet fsynced), `checkpoint:before_rename` (fsynced),
  `checkpoint:after_rename` (the step folder is in place, latest.json not yet replaced), `checkpoint:after_latest`
  (latest.json replaced, older folders not yet deleted): lab_models/training/runs.py `save_checkpoint`.
- `train:loss`: after the forward pass of a training step, before backward: lab_models/training/engine.py.
- `tokenize:progress`: while a run tokenizes its corpus into token shards, after the k-th batch is written (`@k`
  counts batches, not steps): lab_models/training/run.py. `enospc` there fails the tokenization as a full disk does.

Actions: `kill` (SIGKILL to itself: no handler, no cleanup, exactly like `kill -9`), `pause=SECONDS` (so that a test
can kill it from outside, or fill its disk, at that moment; it ends early once the file named by
$PRETRAINING_LAB_FAULT_RELEASE exists), `enospc` (raise OSError ENOSPC, as a full disk does), and, at `train:loss`
only, `nan` and `inf` (the step's loss is multiplied by NaN, or becomes +inf). Without `@STEP` a fault fires every
time its point is reached.

    >>> parse_faults("checkpoint:after_weights:kill@12, train:loss:nan@3")
    [Fault(point='checkpoint:after_weights', action='kill', seconds=0.0, step=12), Fault(point='train:loss',
    action='nan', seconds=0.0, step=3)]
"""
from __future__ import annotations

import errno
import logging
import os
import signal
import time
from dataclasses import dataclass

from lab_models.messages import LabError, Message

logger = logging.getLogger(__name__)

FAULT_ENV_VAR = "PRETRAINING_LAB_FAULT"
RELEASE_ENV_VAR = "PRETRAINING_LAB_FAULT_RELEASE"  # a file whose appearance ends a pause early
CHECKPOINT_POINTS = ("checkpoint:begin", "checkpoint:after_weights", "checkpoint:after_optimizer",
                     "checkpoint:after_state", "checkpoint:before_rename", "checkpoint:after_rename",
                     "checkpoint:after_latest")
LOSS_POINT = "train:loss"
TOKENIZE_POINT = "tokenize:progress"  # after the k-th batch of a run's tokenization (@k), its progress reported
POINTS = (*CHECKPOINT_POINTS, LOSS_POINT, TOKENIZE_POINT)
ACTIONS = ("kill", "pause", "enospc", "nan", "inf")
LOSS_ACTIONS = ("nan", "inf")  # only meaningful where there is a loss to poison


@dataclass(frozen=True)
class Fault:
    point: str
    action: str
    seconds: float = 0.0  # for "pause"
    step: int | None = None  # None: every time the point is reached


def parse_faults(text: str) -> list[Fault]:
    """The faults named by a PRETRAINING_LAB_FAULT value (see the module docstring); ValueError for a typo, so that
    a test never silently runs without the fault it asked for."""
    faults = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        spec, _, step_text = item.partition("@")
        area, point, action = (spec.split(":") + ["", "", ""])[:3] if spec.count(":") == 2 else ("", "", "")
        name = f"{area}:{point}"
        if name not in POINTS:
            raise LabError("{fault_env_var}: unknown fault point in {item!r}; write AREA:POINT:ACTION[@STEP] with "
                           "a point among {points}", fault_env_var=FAULT_ENV_VAR, item=item, points=', '.join(POINTS))
        verb, _, argument = action.partition("=")
        if verb not in ACTIONS or (verb in LOSS_ACTIONS and name != LOSS_POINT):
            raise LabError("{fault_env_var}: unknown action {action!r} at {name}; choose kill, pause=SECONDS, "
                           "enospc{nonfinite}",
                           fault_env_var=FAULT_ENV_VAR, action=action, name=name,
                           nonfinite=Message(", nan or inf") if name == LOSS_POINT else '')
        seconds = 0.0
        if verb == "pause":
            try:
                seconds = float(argument)
            except ValueError:
                raise LabError("{fault_env_var}: write pause=SECONDS, e.g. pause=30, not {action!r}",
                               fault_env_var=FAULT_ENV_VAR, action=action) from None
        step = None
        if step_text:
            if not step_text.strip().isdigit():
                raise LabError("{fault_env_var}: the step after @ must be a whole number, not {step_text!r}",
                               fault_env_var=FAULT_ENV_VAR, step_text=step_text)
            step = int(step_text)
        faults.append(Fault(name, verb, seconds, step))
    return faults


def _planned(point: str, step: int | None) -> list[Fault]:
    text = os.environ.get(FAULT_ENV_VAR)
    if not text:
        return []
    return [fault for fault in parse_faults(text) if fault.point == point and fault.step in (None, step)]


def fault_point(point: str, *, step: int | None = None) -> None:
    """A named point of the trainer: kill, pause or fail here if PRETRAINING_LAB_FAULT says so; else nothing."""
    for fault in _planned(point, step):
        if fault.action in LOSS_ACTIONS:
            continue  # applied by `poisoned_loss`
        logger.warning("injected fault at %s (step %s): %s", point, step, fault.action)
        if fault.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(10)  # SIGKILL is delivered asynchronously; never run on past the point
        elif fault.action == "pause":
            _pause(fault.seconds)
        elif fault.action == "enospc":
            raise OSError(errno.ENOSPC, f"No space left on device (injected by {FAULT_ENV_VAR} at {point})")


def _pause(seconds: float) -> None:
    """Sleep `seconds`, or less: until the file named by PRETRAINING_LAB_FAULT_RELEASE exists, when that is set."""
    release = os.environ.get(RELEASE_ENV_VAR)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if release and os.path.exists(release):
            return
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def poisoned_loss(loss, step: int):
    """`loss`, or loss * NaN / +inf when PRETRAINING_LAB_FAULT has `train:loss:nan` / `train:loss:inf` for `step`
    (the gradients then follow, as with a real overflow). Kill, pause and enospc act here as at any point."""
    for fault in _planned(LOSS_POINT, step):
        if fault.action in LOSS_ACTIONS:
            logger.warning("injected fault at %s (step %s): the loss becomes %s", LOSS_POINT, step, fault.action)
            loss = loss * float("nan") if fault.action == "nan" else loss + float("inf")
    fault_point(LOSS_POINT, step=step)
    return loss
