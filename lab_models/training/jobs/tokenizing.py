"""`TokenizeJobs`: the Corpora tab's background tokenizations, each a `python -m lab_models tokenize` worker process
(lab_models/training/corpus_tokens.py), so that a corpus of gigabytes is tokenized while the page stays responsive.

    jobs = TokenizeJobs(home)
    job_id = jobs.start("web", family="gpt", preset="small")   # <home>/tokenize_jobs/<job id>/{status.json, worker.log}
    jobs.status(job_id)   # {"state": "running", "message": "tokenizing web: 120.0 / 300.0 MB ...", "progress": {...}}
    jobs.stop(job_id)     # SIGTERM: the worker keeps what it tokenized (the next start continues it) and ends "stopped"

One job per corpus at a time (starting a corpus that is being tokenized returns the running job). The worker writes
its status file itself (atomically); a worker that ended without saying so (killed, out of memory) reads "died" with
the end of its log. The shards it writes are the ones a run of that family and preset looks for, so a run started
afterwards (or meanwhile: it waits for the worker, text/token_shards.py) trains at once. Closing the app stops the
running workers; like a stop, nothing they did is lost.
"""
from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_json, child, lab_home
from lab_models.training.config import PRESET_DEFAULTS
from lab_models.training.jobs.files import PACKAGE_ROOT, log_tail, lower_priority, read_json

logger = logging.getLogger(__name__)

JOBS_FOLDER = "tokenize_jobs"
STATUS_FILE = "status.json"
LOG_FILE = "worker.log"


class TokenizeJobs:
    """The tokenize workers of one lab home (see the module docstring)."""

    def __init__(self, home=None, command: list[str] | None = None):
        self.home = lab_home(home)
        self.folder = self.home / JOBS_FOLDER
        self.command = command or [sys.executable, "-m", "lab_models", "tokenize"]
        self._processes: dict[str, subprocess.Popen] = {}
        self._corpora: dict[str, str] = {}  # job id -> the corpus it tokenizes
        self._lock = threading.Lock()

    def _job_folder(self, job_id: str) -> Path:
        folder = child(self.folder, job_id, Message("tokenize job id"))
        if not folder.is_dir():
            raise LabError("Unknown tokenize job {job_id!r}.", job_id=job_id)
        return folder

    def start(self, corpus: str, *, family: str = "gpt", preset: str = "tiny") -> str:
        """Start tokenizing `corpus` (a corpus name of this home) as a run of `family` at `preset` would; returns the
        job id (the running job's, when this corpus is being tokenized already)."""
        if preset not in PRESET_DEFAULTS:
            raise LabError("Unknown preset {preset!r}: choose one of {preset_defaults}.",
                           preset=preset, preset_defaults=', '.join(PRESET_DEFAULTS))
        with self._lock:
            for job_id, process in self._processes.items():
                if process.poll() is None and self._corpora.get(job_id) == corpus:
                    return job_id
            job_id = f"{corpus}-{family}-{preset}-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"
            folder = child(self.folder, job_id, Message("tokenize job id"))
            folder.mkdir(parents=True)
            status = folder / STATUS_FILE
            atomic_write_json(status, {"state": "running", "message": Message("starting"), "progress": {},
                                       "corpus": corpus, "started": time.time(), "updated": time.time()})
            self._corpora[job_id] = corpus
            command = self.command + ["--corpus", corpus, "--family", family, "--preset", preset,
                                      "--home", str(self.home), "--status", str(status)]
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
            with open(folder / LOG_FILE, "ab") as log:
                log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(command)}\n".encode())
                log.flush()
                self._processes[job_id] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                           stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                                           close_fds=True)
                lower_priority(self._processes[job_id].pid)
            logger.info("tokenize job %s started: %s", job_id, shlex.join(command))
            return job_id

    def status(self, job_id: str) -> dict:
        """The job's status file, with "job_id"; "died" with the end of its log when its worker ended silently."""
        folder = self._job_folder(job_id)
        status = read_json(folder / STATUS_FILE)
        status["job_id"] = job_id
        process = self._processes.get(job_id)
        if status.get("state") == "running" and (process is None or process.poll() is not None):
            time.sleep(0.2)  # a worker that just ended may be writing its last status
            status = {**read_json(folder / STATUS_FILE), "job_id": job_id}
            if status.get("state") == "running":
                code = process.returncode if process is not None else None
                why = (Message("killed by {signal}", signal=signal.Signals(-code).name) if code is not None and code < 0
                       else Message("exit status {code}", code=code) if code is not None
                       else Message("no worker is running it"))
                status.update(state="died", message=Message("the tokenize worker ended without finishing ({why})",
                                                            why=why),
                              log=log_tail(folder / LOG_FILE))
        return status

    def stop(self, job_id: str) -> dict:
        """Ask the job's worker to stop (SIGTERM): it keeps what it tokenized and ends "stopped"."""
        self._job_folder(job_id)
        process = self._processes.get(job_id)
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return self.status(job_id)

    def wait(self, job_id: str, timeout: float | None = None) -> dict:
        """Block until the job's worker ends (for scripts and tests); returns its status."""
        process = self._processes.get(job_id)
        if process is not None:
            process.wait(timeout)
        return self.status(job_id)

    def close(self, timeout: float = 20.0) -> None:
        """Stop every running worker and wait for it (their work is kept)."""
        with self._lock:
            running = [(job_id, process) for job_id, process in self._processes.items() if process.poll() is None]
        for job_id, process in running:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for _, process in running:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
