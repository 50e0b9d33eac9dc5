"""The job manager's memory of statuses it could not write because the disk was full.

When the lab home's disk fills up, the trainer fails, and often neither it nor the job manager can write status.json
any more: the page would then read the last status on disk ("running", by a process that is gone) and show the run as
interrupted, with nothing about the disk. `UnwrittenStatuses` keeps such a status in memory instead (a failed run's
message becomes "disk full: ..., the last complete checkpoint (...) is intact. Free some space, then press Resume."),
the job manager shows it in place of the file, and writes it as soon as there is room again (every supervisor tick).

    pending = UnwrittenStatuses()
    status = pending.write(run_dir, {"state": "failed", ...})   # written, or kept in memory on a full disk
    pending.overlay(run_id, status_from_file)                     # what the page shows
    pending.flush()                                               # retried by the supervisor
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from lab_models.messages import messages_restored
from lab_models.home import atomic_write_json
from lab_models.training.runs import disk_error_message

logger = logging.getLogger(__name__)

STATUS_FILE = "status.json"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return messages_restored(data) if isinstance(data, dict) else {}


class UnwrittenStatuses:
    """Statuses kept in memory while their disk is full (the job manager's lock guards every call)."""

    def __init__(self):
        self._kept: dict[str, tuple[Path, dict]] = {}  # run id -> (run folder, the whole status)

    def write(self, run_dir: Path, changes: dict, *, keep_when_full: bool = False) -> dict:
        """Update status.json with `changes` (on top of a status still kept in memory, if any) and return it. On a
        full or read-only disk: raise, or with `keep_when_full` keep it in memory (a "failed" one with the disk's
        message) and return it."""
        kept = self._kept.get(run_dir.name)
        status = dict(kept[1]) if kept else _read(run_dir / STATUS_FILE)
        status.update(changes)
        status["updated"] = time.time()
        try:
            atomic_write_json(run_dir / STATUS_FILE, status)
        except OSError as error:
            message = disk_error_message(error, run_dir)
            if message is None or not keep_when_full:
                raise
            if status.get("state") == "failed":
                status["message"] = message
            self._kept[run_dir.name] = (run_dir, status)
            logger.warning("%s: cannot write %s (%s); keeping the status in memory until there is room",
                           run_dir.name, STATUS_FILE, error)
            return status
        self._kept.pop(run_dir.name, None)
        return status

    def overlay(self, run_id: str, status: dict) -> dict:
        """`status` (read from the file) with the kept one on top, when there is one."""
        kept = self._kept.get(run_id)
        return {**status, "interrupted": False, **kept[1]} if kept else status  # not the file's "gone" guess

    def flush(self) -> None:
        """Write every kept status whose disk has room again."""
        for run_id, (run_dir, status) in list(self._kept.items()):
            try:
                atomic_write_json(run_dir / STATUS_FILE, status)
            except OSError:
                continue
            self._kept.pop(run_id, None)
            logger.info("%s: wrote the status kept while the disk was full", run_id)
