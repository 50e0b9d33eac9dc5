"""The training job manager: a lock-protected queue that runs `python -m lab_models train` in worker processes.

What it is
----------
One `JobManager` per app (the app creates it and hands it to the Train tab; it is never a module global). It owns the
runs in `<lab home>/runs/<run_id>/` that it starts, and it reads every run folder there, whoever made it (the
read-only part is `RunStore`, which anything may create: it starts and changes nothing).

* `start(...)` creates the run folder, writes `status.json` {"state": "queued"} and `job.json` (the request, so the
  run can be resumed after a restart) atomically, and appends the job to a FIFO queue. It returns the run id
  `f"{family}-{preset}-{YYYYmmdd-HHMMSS}-{4 hex}"`, or `f"zoo-{zoo}-{family}-..."` for a run of a zoo
  (lab_models/experiments/zoo.py: `zoo=NAME` tags job.json and the trainer's config.json).
* A supervisor thread launches queued jobs: at most `max_concurrent_per_device` run at a time on each device (cpu,
  cuda, mps; "auto" counts as the device it resolves to), in the order they were queued. A job for a free device does
  not wait behind jobs for a busy one. Jobs started with `parallel=N` (the tiny zoo's) may share a device N at a
  time when every job on it allows as much, each with its share of the cores as torch threads (OMP_NUM_THREADS).
  Each job is a subprocess in its own session (so a signal reaches the trainer
  and everything it started, e.g. torchrun workers), with stdout and stderr appended to `<run_dir>/worker.log`.
  Training therefore never runs in the server process, and the page stays responsive.
* `stop(run_id)`: a queued job leaves the queue ("stopped"); a running one gets SIGTERM, which makes the trainer
  finish its step, checkpoint and exit "stopped". After `stop_timeout_s` it gets SIGKILL (its last checkpoint stays).
* `resume(run_id)`: queues a stopped or failed run again, with `--resume` when it has a checkpoint.
* `start_command(kind, command, run_dir)`: queues any other worker that keeps the run-folder contract (status.json
  with state/step/total_steps, SIGTERM -> "stopped"), e.g. a fine-tuning (`python -m lab_models finetune`, whose
  folders live in `<lab home>/finetunes/`; see lab_models/inference/finetuning/run.py: start_finetune). It shares the
  queue, the per-device limit, `stop`, `status` and `metrics` with the training runs; it is not resumable. `run_dir(id)`
  finds such folders too, but `run_ids()` and `list_runs()` list only `<lab home>/runs/`.
* A worker that exits non-zero without having written "failed" (a bad argument, an import error) is marked "failed"
  with the last lines of `worker.log`. One that is killed by a signal nobody here sent (`kill -9` from outside, the
  out-of-memory killer) is marked "died", with the signal, its last step and the last log lines (`log_tail`); it
  frees its device slot at once and can be resumed from its last checkpoint. A crashed run is reported; the app stays
  up.

Decisions a user should know about
----------------------------------
* Workers run at a lower priority (`niceness`, default `WORKER_NICENESS` = 10, as `nice -n 10` would): a training
  takes every core, and the page's clicks and the server's answers go first when both want the CPU. A machine with
  nothing else to do still gives the worker all of it. `niceness=0` keeps the server's priority.
* On start-up, runs that a previous server left "queued" or "running" are marked "stopped" with the message
  "interrupted: ..." (and `"interrupted": true`), so they can be resumed; nothing a user made is deleted. A trainer
  that is in fact still alive (the previous server was killed, its worker was not) is adopted instead: it keeps its
  device slot, can be stopped, and is marked when it ends.
* `close()` (the app calls it at exit) stops the supervisor and, by default, stops the running trainers cleanly (each
  writes a checkpoint and ends "stopped", resumable), waiting up to `stop_timeout_s`, then kills what is left; queued
  jobs are marked "stopped (interrupted)". Training does not outlive the server that started it, and no zombie
  processes are left behind. Pass `stop_runs=False` to leave the workers running (a later server adopts them).
* One server per lab home: two servers on the same home would each think the other's queued runs were interrupted.
* The queue lives in memory. Only the run folders are persistent; they are the truth for every finished run.

Beside it: lab_models/training/jobs/store.py (`RunStore`, the read-only view of the job folders, which `JobManager`
extends) and lab_models/training/jobs/files.py (the folder's file names, presets and devices, `Job`, `read_json`,
`log_tail`). This module holds `JobManager`: the queue, the supervisor and the worker processes.

Follows the usual "job queue + worker process" pattern of experiment runners (e.g. Slurm-style FIFO per resource,
SIGTERM-then-SIGKILL preemption with checkpointing); it deviates by keeping the scheduler in-process and per device.
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_json
from lab_models.training.jobs.unwritten import UnwrittenStatuses

from lab_models.training.jobs.files import (DEVICES, ACTIVE_STATES, TERMINAL_STATES, STATUS_FILE, JOB_FILE,
                                            CONFIG_FILE, LOG_FILE, RUN_ID_PATTERN, PACKAGE_ROOT, WORKER_NICENESS,
                                            default_trainer_command, resolve_device_key, read_json, log_tail,
                                            signal_name, process_alive, lower_priority, threads_per_job,
                                            MAX_PARALLEL, Job)
from lab_models.training.jobs.store import RunStore

logger = logging.getLogger(__name__)

def _parallel_of(request: Mapping) -> int:
    """job.json's "parallel" (1 when absent or not a sensible count)."""
    value = request.get("parallel", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_PARALLEL else 1


class JobManager(RunStore):
    """Queue, launch, stop and resume training runs; see the module docstring. Thread-safe."""

    def __init__(self, home=None, max_concurrent_per_device: int = 1, *, trainer_command: Sequence[str] | None = None,
                 stop_timeout_s: float = 60.0, poll_interval_s: float = 0.25, env: Mapping[str, str] | None = None,
                 recover: bool = True, niceness: int = WORKER_NICENESS):
        if isinstance(max_concurrent_per_device, bool) or not isinstance(max_concurrent_per_device, int) \
                or max_concurrent_per_device < 1:
            raise LabError("max_concurrent_per_device must be a whole number >= 1, got {max_concurrent_per_device!r}.",
                           max_concurrent_per_device=max_concurrent_per_device)
        super().__init__(home)
        self.max_concurrent_per_device = max_concurrent_per_device
        self.trainer_command = list(trainer_command) if trainer_command else default_trainer_command()
        self.stop_timeout_s = float(stop_timeout_s)
        self.poll_interval_s = float(poll_interval_s)
        self.env = dict(env or {})
        self.niceness = int(niceness)
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._unwritten = UnwrittenStatuses()
        self._queue: list[Job] = []
        self._running: dict[str, Job] = {}
        self._closed = False
        if recover:
            self._recover()
        self._thread = threading.Thread(target=self._supervise, name="lab-job-manager", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public
    def start(self, family: str, preset: str = "tiny", corpus: str | None = None, steps: int | None = None,
              seed: int = 0, device: str = "auto", objectives: Mapping[str, float] | None = None,
              settings: Mapping[str, object] | None = None, tokenizer: str | None = None,
              extra_args: Sequence[str] = (), zoo: str | None = None, parallel: int = 1) -> str:
        """Create the run folder, write status "queued" and queue the job; return the run id. `zoo` tags the run
        as a member of that zoo (job.json "zoo", the trainer's --zoo, run id "zoo-<zoo>-<family>-..."). `parallel`
        lets up to that many such jobs share the device at once, each with its share of the cores as threads (see
        `_allowed_on_device`); job.json keeps it, so a resume runs the same way."""
        request = self._validated_request(family, preset, corpus, steps, seed, device, objectives, settings,
                                          tokenizer, extra_args, zoo, parallel)
        with self._lock:
            if self._closed:
                raise LabError("The job manager is shut down; restart the app to train.")
            prefix = f"zoo-{zoo}-{request['family']}" if zoo else f"{request['family']}-{request['preset']}"
            run_id, run_dir = self._new_run_dir(prefix)
            now = time.time()
            request.update(run_id=run_id, created=now)
            atomic_write_json(run_dir / JOB_FILE, request)
            self._write_status(run_dir, {"state": "queued", "step": 0, "total_steps": request["steps"],
                                         "message": Message("queued"), "pid": None})
            job = Job(run_id, run_dir, self.trainer_args(request, run_dir), resolve_device_key(request["device"]),
                      queued_at=now, parallel=request.get("parallel", 1))
            self._queue.append(job)
            logger.info("queued %s on %s", run_id, job.device_key)
            self._wake.notify_all()
        return run_id

    def start_command(self, kind: str, command: Sequence[str], run_dir, *, device: str = "auto",
                      total_steps: int | None = None, request: Mapping | None = None) -> str:
        """Queue a worker that is not the trainer (e.g. kind "finetune": `python -m lab_models finetune ...`); return
        its id (the folder's name).

        `run_dir` is the job's folder, directly inside one of the lab home's job folders (runs/, finetunes/); it is
        created if missing and must not hold an active job. The worker must keep the run-folder contract: it writes
        status.json (state, step, total_steps) and metrics.jsonl there, and SIGTERM makes it stop cleanly with
        state "stopped". It is queued, launched, stopped, reaped and recovered like a training run (job.json records
        `kind` and `command`), but it cannot be resumed. `request`: extra JSON-able facts for job.json.
        """
        if not isinstance(kind, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", kind) or kind == "train":
            raise LabError("kind must be a lower-case word naming the job kind, such as 'finetune', got {kind!r}.",
                           kind=kind)
        argv = [str(a) for a in command] if isinstance(command, Sequence) and not isinstance(command, str) else None
        if not argv or any("\n" in a or "\0" in a for a in argv):
            raise LabError("command must be a non-empty list of arguments without line breaks.")
        if device not in DEVICES:
            raise LabError("Unknown device {device!r}: choose one of {devices}.",
                           device=device, devices=', '.join(DEVICES))
        if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                        or total_steps < 1):
            raise LabError("total_steps must be a whole number >= 1 or None, got {total_steps!r}.",
                           total_steps=total_steps)
        folder = Path(run_dir).expanduser().resolve()
        roots = [root.resolve() for root in self.job_roots]
        if folder.parent not in roots or not RUN_ID_PATTERN.match(folder.name):
            raise LabError("A job folder must be a plain name directly inside one of "
                           "{roots}; got {folder}.", roots=', '.join(str(r) for r in roots), folder=folder)
        with self._lock:
            if self._closed:
                raise LabError("The job manager is shut down; restart the app to start jobs.")
            previous = read_json(folder / STATUS_FILE)
            if self._find(folder.name) is not None or (previous.get("state") == "running"
                                                       and process_alive(previous.get("pid"), folder)):
                raise LabError("{name} is already queued or running.", name=folder.name)
            folder.mkdir(parents=True, exist_ok=True)
            now = time.time()
            job_request = {**dict(request or {}), "kind": kind, "command": argv, "device": device,
                           "run_id": folder.name, "created": now}
            atomic_write_json(folder / JOB_FILE, job_request)
            self._write_status(folder, {"state": "queued", "step": 0, "total_steps": total_steps,
                                        "message": Message("queued"), "pid": None})
            job = Job(folder.name, folder, [], resolve_device_key(device), queued_at=now, command=argv)
            self._queue.append(job)
            logger.info("queued %s %s on %s", kind, folder.name, job.device_key)
            self._wake.notify_all()
        return folder.name

    def stop(self, run_id: str) -> dict:
        """Stop a queued (removed from the queue) or running (SIGTERM, then SIGKILL) run; return its status."""
        run_dir = self.run_dir(run_id)
        with self._lock:
            for job in self._queue:
                if job.run_id == run_id:
                    self._queue.remove(job)
                    self._write_status(run_dir, {"state": "stopped",
                                                 "message": Message("stopped before it started")})
                    self._wake.notify_all()
                    return self.status(run_id)
            job = self._running.get(run_id)
            if job is not None:
                if job.stop_requested_at is None:
                    job.stop_requested_at = time.time()
                    self._signal(job, signal.SIGTERM)
                    logger.info("asked %s to stop", run_id)
                return self.status(run_id)
            state = read_json(run_dir / STATUS_FILE).get("state")
        raise LabError("Run {run_id} is not running or queued (it is {state}); nothing to stop.",
                       run_id=run_id, state=state or 'unknown')

    def resume(self, run_id: str) -> dict:
        """Queue a stopped or failed run again (with --resume when it has a checkpoint); return its status."""
        run_dir = self.run_dir(run_id)
        self._wait_for_exit(run_id)
        with self._lock:
            if self._closed:
                raise LabError("The job manager is shut down; restart the app to train.")
            if self._find(run_id) is not None:
                raise LabError("Run {run_id} is already queued or running.", run_id=run_id)
            kind = read_json(run_dir / JOB_FILE).get("kind")
            if kind and kind != "train":
                raise LabError("{run_id} is a {kind} job; it cannot be resumed: start a new one instead.",
                               run_id=run_id, kind=kind)
            state = self.status(run_id)["state"]  # a "running" whose trainer is gone reads "stopped" here
            if state == "finished":
                raise LabError("Run {run_id} has already finished all its steps; start a new run to train more.",
                               run_id=run_id)
            if state in ACTIVE_STATES:
                raise LabError("Run {run_id} is {state} in another server; wait for it or stop it there.",
                               run_id=run_id, state=state)
            request = self._request_of(run_dir)
            args = self.trainer_args(request, run_dir)
            if self.has_checkpoint(run_id):
                args.append("--resume")
            job = Job(run_id, run_dir, args, resolve_device_key(request.get("device", "auto")), queued_at=time.time(),
                      parallel=_parallel_of(request))
            self._write_status(run_dir, {"state": "queued", "message": Message("queued to resume"), "pid": None,
                                         "interrupted": False})
            self._queue.append(job)
            logger.info("queued %s to resume", run_id)
            self._wake.notify_all()
        return self.status(run_id)

    def _wait_for_exit(self, run_id: str, timeout: float = 15.0) -> None:
        """A trainer that has written its final state may still be exiting: give it a moment before a resume."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self._lock:
                job = self._running.get(run_id)
                if job is None or read_json(job.run_dir / STATUS_FILE).get("state") not in TERMINAL_STATES:
                    return
            time.sleep(0.05)

    def wait_until_idle(self, timeout: float = 30.0) -> bool:
        """Wait until no job is queued or running here (a trainer that has written its final state may still be
        exiting); True when idle, False after `timeout` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self._lock:
                if not self._queue and not self._running:
                    return True
            time.sleep(0.05)
        return False

    def status(self, run_id: str) -> dict:
        """status.json of the run, with the live queue position (1 = next) and whether a stop is under way."""
        with self._lock:  # read the file and the queue together, so a launch or an exit is seen whole
            status = super().status(run_id)
            status = self._unwritten.overlay(status["run_id"], status)  # what a full disk kept from the file
            position = self._position(run_id)
            job = self._running.get(run_id)
        if position is not None:
            status["state"] = "queued"
        status["queue_position"] = position
        status["stopping"] = bool(job is not None and job.stop_requested_at is not None)
        return status

    def _managed(self, run_id: str) -> bool:
        with self._lock:
            return self._find(run_id) is not None

    def queue_position(self, run_id: str) -> int | None:
        """1 for the next job to start on its device, 2 for the one after, ...; None when not queued."""
        self.run_dir(run_id)
        with self._lock:
            return self._position(run_id)

    def command(self, run_id: str) -> list[str]:
        """The full command line the run's worker runs (or would run)."""
        with self._lock:
            job = self._find(run_id)
            if job is not None:
                return list(job.command) if job.command is not None else self.trainer_command + job.args
        saved = read_json(self.run_dir(run_id) / JOB_FILE).get("command")
        if isinstance(saved, list) and saved:
            return [str(a) for a in saved]
        return self.trainer_command + self.trainer_args(self._request_of(self.run_dir(run_id)), self.run_dir(run_id))

    def close(self, stop_runs: bool = True, timeout: float | None = None) -> None:
        """Stop the supervisor; by default stop the running trainers cleanly and mark queued jobs interrupted."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._wake.notify_all()
        self._thread.join(timeout=10)
        timeout = self.stop_timeout_s if timeout is None else float(timeout)
        with self._lock:
            for job in self._queue:
                self._write_status(job.run_dir, {"state": "stopped", "interrupted": True, "pid": None,
                                                 "message": Message("interrupted: the server shut down before "
                                                                    "this run started; press Resume to run it")})
            self._queue.clear()
            running = list(self._running.values())
            if not stop_runs:
                for job in running:  # reap nothing: the workers go on, a later server adopts them
                    logger.info("leaving %s running (pid %s)", job.run_id, job.pid)
                self._running.clear()
                return
            for job in running:
                if job.stop_requested_at is None:
                    job.stop_requested_at = time.time()
                    self._signal(job, signal.SIGTERM)
        deadline = time.time() + timeout
        while True:
            with self._lock:
                self._reap()
                if not self._running:
                    break
                if time.time() > deadline:
                    for job in self._running.values():
                        if not job.killed:
                            job.killed = True
                            self._signal(job, signal.SIGKILL)
            time.sleep(0.05)
            if time.time() > deadline + 10:  # SIGKILL did not take: give up on waiting
                break

    def _request_of(self, run_dir: Path) -> dict:
        request = read_json(run_dir / JOB_FILE)
        if request.get("family"):
            return request
        config = read_json(run_dir / CONFIG_FILE)  # a run made by the CLI directly: resume it from its config
        if not config.get("family"):
            raise LabError("Run {name} has neither job.json nor config.json with a family; cannot resume.",
                           name=run_dir.name)
        train = config.get("train") if isinstance(config.get("train"), dict) else {}
        return {"family": config["family"], "preset": config.get("preset") or train.get("preset") or "tiny",
                "corpus": config.get("corpus") or train.get("corpus"), "steps": None,
                "seed": config.get("seed") or train.get("seed") or 0,
                "device": config.get("device") if config.get("device") in DEVICES else "auto"}

    # ------------------------------------------------------------------ internals (call with the lock held)
    def _new_run_dir(self, prefix: str) -> tuple[str, Path]:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for _ in range(100):
            run_id = f"{prefix}-{stamp}-{secrets.token_hex(2)}"
            run_dir = self.runs_dir / run_id
            try:
                run_dir.mkdir(parents=True)
            except FileExistsError:
                continue
            return run_id, run_dir
        raise LabError("Could not create a fresh run folder; is the lab home writable?")

    def _write_status(self, run_dir: Path, changes: Mapping, *, keep_when_full: bool = False) -> dict:
        """Update status.json; with `keep_when_full` (the supervisor's writes) a full disk keeps it in memory
        instead (lab_models/training/jobs/unwritten.py), so that the page still shows how the run ended."""
        return self._unwritten.write(run_dir, dict(changes), keep_when_full=keep_when_full)

    def _find(self, run_id: str) -> Job | None:
        if run_id in self._running:
            return self._running[run_id]
        return next((job for job in self._queue if job.run_id == run_id), None)

    def _position(self, run_id: str) -> int | None:
        job = next((j for j in self._queue if j.run_id == run_id), None)
        if job is None:
            return None
        same_device = [j for j in self._queue if j.device_key == job.device_key]
        return same_device.index(job) + 1

    def _signal(self, job: Job, sig: signal.Signals) -> None:
        """Send `sig` to the job's whole process group (its own session), or to the process where groups do not exist."""
        pid = job.pid
        if not pid:
            return
        try:
            if hasattr(os, "killpg"):
                os.killpg(os.getpgid(pid), sig)
            elif job.process is not None:
                job.process.terminate() if sig == signal.SIGTERM else job.process.kill()
        except (ProcessLookupError, PermissionError, OSError):
            pass  # it has already gone; the supervisor reaps it

    def _supervise(self) -> None:
        while True:
            with self._wake:
                if self._closed:
                    return
                try:
                    self._unwritten.flush()  # statuses a full disk kept in memory, written once there is room
                    self._reap()
                    self._escalate()
                    self._launch_ready()
                except Exception:  # noqa: BLE001 - the supervisor must survive anything a run does
                    logger.exception("job supervisor error")
                self._wake.wait(self.poll_interval_s)

    def _allowed_on_device(self, job: Job, running: Sequence[Job]) -> int:
        """How many jobs may run on `job`'s device if `job` joins `running` (the jobs already there): the manager's
        limit, or more when `job` and every running job allow sharing (`Job.parallel`, the smallest of them)."""
        shared = min([job.parallel] + [other.parallel for other in running])
        return max(self.max_concurrent_per_device, shared)

    def _launch_ready(self) -> None:
        running: dict[str, list[Job]] = {}
        for job in self._running.values():
            running.setdefault(job.device_key, []).append(job)
        for job in list(self._queue):
            there = running.setdefault(job.device_key, [])
            if len(there) >= self._allowed_on_device(job, there):
                continue
            self._queue.remove(job)
            if self._launch(job):
                there.append(job)

    def _launch(self, job: Job) -> bool:
        command = list(job.command) if job.command is not None else self.trainer_command + job.args
        self._write_status(job.run_dir, {"state": "running", "message": Message("starting the trainer"),
                                         "pid": None},
                           keep_when_full=True)
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONUNBUFFERED"] = "1"
        if job.parallel > 1:  # torch's intra-op threads: its share of the cores, so that the jobs do not contend
            env["OMP_NUM_THREADS"] = str(threads_per_job(job.parallel))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            with open(job.run_dir / LOG_FILE, "ab") as log:
                log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(command)}\n".encode())
                log.flush()
                job.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                               close_fds=True)
            lower_priority(job.process.pid, self.niceness)
        except OSError as error:
            logger.error("could not launch %s: %s", job.run_id, error)
            self._write_status(job.run_dir, {"state": "failed", "pid": None,
                                             "message": Message("could not start the trainer: {error}", error=error)},
                               keep_when_full=True)
            return False
        job.pid = job.process.pid
        job.started_at = time.time()
        self._running[job.run_id] = job
        logger.info("started %s (pid %d): %s", job.run_id, job.pid, shlex.join(command))
        return True

    def _escalate(self) -> None:
        now = time.time()
        for job in self._running.values():
            if job.stop_requested_at is not None and not job.killed and now - job.stop_requested_at > \
                    self.stop_timeout_s:
                logger.warning("%s did not stop within %.0f s: killing it", job.run_id, self.stop_timeout_s)
                job.killed = True
                self._signal(job, signal.SIGKILL)

    def _reap(self) -> None:
        for run_id, job in list(self._running.items()):
            if job.process is not None:
                code = job.process.poll()
                if code is None:
                    continue
            elif process_alive(job.pid, job.run_dir):
                continue
            else:
                code = None  # an adopted worker: its exit code is not ours to read
            del self._running[run_id]
            self._finalize(job, code)

    def _finalize(self, job: Job, code: int | None) -> None:
        """Make status.json tell the truth after a worker has exited.

        A final state the trainer wrote itself (finished / stopped / failed) is kept. Otherwise: a stop we asked for
        is "stopped"; an adopted worker that vanished is "stopped (interrupted)"; one killed by a signal nobody here
        sent "died"; anything else is "failed". Both "died" and "failed" keep the end of worker.log in "log_tail".
        """
        state = read_json(job.run_dir / STATUS_FILE).get("state")
        if state in TERMINAL_STATES:
            if code not in (0, None) and state != "failed":
                logger.warning("%s wrote %s but its worker exited with %s", job.run_id, state, code)
            logger.info("%s ended: %s", job.run_id, state)
            return
        resumable = (Message(" Resume continues from its last checkpoint.") if self.has_checkpoint(job.run_id)
                     else "")
        if job.stop_requested_at is not None:
            how = (Message("stopped: killed after it did not stop within {seconds:g} s.{resumable}",
                           seconds=self.stop_timeout_s, resumable=resumable) if job.killed
                   else Message("stopped.{resumable}", resumable=resumable))
            self._write_status(job.run_dir, {"state": "stopped", "message": how, "pid": None}, keep_when_full=True)
            return
        if code is None:
            self._write_status(job.run_dir, {"state": "stopped", "interrupted": True, "pid": None,
                                             "message": Message("interrupted: the trainer ended without a final "
                                                                "state.{resumable}", resumable=resumable)},
                               keep_when_full=True)
            return
        tail = log_tail(job.run_dir / LOG_FILE)
        last_line = tail.splitlines()[-1] if tail else "no output"
        if code < 0:  # a signal nobody here sent (a stop we asked for returned above)
            step = read_json(job.run_dir / STATUS_FILE).get("step")
            message = Message("the trainer was killed by {signal} at step {step} (from outside the lab, or by the "
                              "out-of-memory killer).{resumable}", signal=signal_name(code), step=step or 0,
                              resumable=resumable)
            logger.warning("%s died: killed by %s", job.run_id, signal_name(code))
            self._write_status(job.run_dir, {"state": "died", "pid": None, "message": message, "log_tail": tail},
                               keep_when_full=True)
            return
        if code == 0:
            message = Message("the trainer exited without reporting that it finished: {last_line}",
                              last_line=last_line)
        else:
            message = Message("the trainer exited with code {code}: {last_line}", code=code, last_line=last_line)
        logger.warning("%s failed: %s", job.run_id, message)
        self._write_status(job.run_dir, {"state": "failed", "pid": None, "message": message, "log_tail": tail},
                           keep_when_full=True)

    def _recover(self) -> None:
        """Adopt live workers of a previous server; mark its other queued/running runs 'stopped (interrupted)'."""
        for run_dir in [d for root in self.job_roots if root.is_dir() for d in root.iterdir()]:
            status = read_json(run_dir / STATUS_FILE)
            state = status.get("state")
            if state not in ACTIVE_STATES:
                continue
            pid = status.get("pid")
            if state == "running" and isinstance(pid, int) and process_alive(pid, run_dir):
                request = read_json(run_dir / JOB_FILE)
                command = request.get("command") if isinstance(request.get("command"), list) else None
                job = Job(run_dir.name, run_dir, [], resolve_device_key(request.get("device", "auto")),
                          queued_at=time.time(), pid=pid, adopted=True, started_at=time.time(), command=command)
                self._running[job.run_id] = job
                logger.info("adopted the live trainer of %s (pid %d)", job.run_id, pid)
                continue
            kind = read_json(run_dir / JOB_FILE).get("kind")
            if kind and kind != "train":  # a sweep, a zoo, a fine-tuning: it starts afresh
                message = (Message("interrupted: the server stopped before this run started; start it again")
                           if state == "queued" else
                           Message("interrupted: the server stopped before this run finished; start it again"))
            else:
                message = (Message("interrupted: the server stopped before this run started; press Resume to "
                                   "continue") if state == "queued" else
                           Message("interrupted: the server stopped before this run finished; press Resume to "
                                   "continue from its last checkpoint"))
            self._write_status(run_dir, {"state": "stopped", "interrupted": True, "pid": None, "message": message})
            logger.info("marked %s interrupted (was %s)", run_dir.name, state)
