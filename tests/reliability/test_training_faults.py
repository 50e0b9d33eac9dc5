"""Reliability suite, faults in training: kills, non-finite losses, a full disk and a worker that dies.

What it promises, and how it proves it (real `python -m lab_models train` processes at the tiny preset, one thread):
- A kill loop (benchmarks/kill_loop.py): the trainer is SIGKILLed 5 times in CI (PRETRAINING_LAB_KILLS, or the
  script's 20), at random moments and at named points inside its checkpoint writer (lab_models/training/faults.py),
  resuming each time. After every kill the newest checkpoint loads into a rebuilt model and metrics.jsonl's steps run
  1..m with no gap and no repeat; at the end the weights equal an uninterrupted run's bit for bit. A kill between a
  checkpoint and its step's evaluation loses no evaluation (a regression test for what the loop found).
- A learning rate of 1e6, or a NaN injected into the loss at step 3, stops the run with status "failed" and the
  message "non-finite loss at step N", the newest checkpoint holds finite weights from before step N, and the page's
  Train tab shows the reason. With `--on-nonfinite skip` the NaN step is skipped, said so in the log and its metrics
  row, and the run finishes with finite weights.
- A full disk: with the lab home on a small tmpfs (mounted when the tests run as root; skipped, saying why, otherwise)
  a run started from the page fails with "disk full: ...", its previous checkpoint stays intact and no half-written
  one is left, the server keeps serving, and after space is freed Resume finishes the run. The same failure injected
  with PRETRAINING_LAB_FAULT (no root needed) gives the same message.
- A trainer killed from outside shows as "died" in the page with the end of its log, and its device slot goes to the
  next queued run at once.
- The fault hooks are inert unless PRETRAINING_LAB_FAULT is set, reject typos, and nothing in the page can set them.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kill_loop import check_checkpoint_loads, child_env, kill_loop
from lab_models.training import faults, runs
from tests.support.launching import launch
from tests.support.ports import free_port
from tests.support.waiting import wait_for as _wait_for

REPO = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("PRETRAINING_LAB_KILLS", "5"))
TIMEOUT_S = 300
NO_SETTINGS = {"headers": ["setting", "value", "default", "what it does"], "data": []}  # GPT has none to change


def train(run_dir: Path, home: Path, *extra: str, fault: str | None = None, steps: int = 8, resume: bool = False):
    command = [sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--preset", "tiny",
               "--steps", str(steps),
               "--device", "cpu", "--out", str(run_dir), "--home", str(home), *extra]
    return subprocess.run(command + (["--resume"] if resume else []), cwd=REPO, env=child_env(fault),
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def wait_for(predicate, timeout: float = TIMEOUT_S, what: str = "condition"):
    return _wait_for(predicate, timeout, what, every=0.1)


def train_rows(run_dir: Path, split: str = "train") -> list[dict]:
    return [row for row in runs.read_metrics(run_dir) if row.get("split", "train") == split]




# ------------------------------------------------------------------------------------------------ the hooks
def test_fault_hooks_are_inert_unless_set_and_reject_typos(monkeypatch):
    monkeypatch.delenv(faults.FAULT_ENV_VAR, raising=False)
    for point in faults.POINTS:
        faults.fault_point(point, step=1)  # nothing happens: no kill, no pause, no error
    assert faults.poisoned_loss(2.5, 1) == 2.5
    monkeypatch.setenv(faults.FAULT_ENV_VAR, "checkpoint:after_weights:enospc@4")
    faults.fault_point("checkpoint:after_weights", step=3)  # another step: nothing
    with pytest.raises(OSError, match="No space left on device"):
        faults.fault_point("checkpoint:after_weights", step=4)
    monkeypatch.setenv(faults.FAULT_ENV_VAR, "train:loss:inf@2")
    assert faults.poisoned_loss(2.5, 2) == math.inf and faults.poisoned_loss(2.5, 3) == 2.5
    for typo in ("checkpoint:after_weight:kill", "checkpoint:after_weights:explode", "checkpoint:begin:nan",
                 "checkpoint:begin:pause=soon", "train:loss:nan@three", "kill"):
        with pytest.raises(ValueError, match=faults.FAULT_ENV_VAR):
            faults.parse_faults(typo)
    # only the server's own environment reaches a trainer: no page control, no --set key names the variable
    page_code = "".join(path.read_text() for path in (REPO / "app").rglob("*.py")) + (REPO / "app.py").read_text()
    assert faults.FAULT_ENV_VAR not in page_code and not re.search(r"\bfaults\b", page_code)


# ------------------------------------------------------------------------------------------------ kills
@pytest.mark.slow
def test_a_run_killed_again_and_again_ends_with_the_weights_of_one_never_killed(tmp_path):
    report = kill_loop(tmp_path, kills=KILLS, seed=0, log=lambda line: None)
    assert report.kills == KILLS and sum(report.kinds.values()) == KILLS
    assert report.resumed_from == sorted(report.resumed_from)  # never back past a checkpoint it had made


@pytest.mark.slow
def test_a_kill_between_a_checkpoint_and_its_evaluation_loses_no_evaluation(tmp_path):
    run_dir, home = tmp_path / "run", tmp_path / "home"
    killed = train(run_dir, home, "--checkpoint-every", "1", "--eval-every", "5",
                   fault="checkpoint:after_latest:kill@5")
    assert killed.returncode == -signal.SIGKILL
    assert check_checkpoint_loads(run_dir) == 5  # the checkpoint of step 5 is complete ...
    assert [row["step"] for row in train_rows(run_dir, "val")] == [5]  # ... and written after its evaluation
    done = train(run_dir, home, "--checkpoint-every", "1", "--eval-every", "5", resume=True)
    assert done.returncode == 0, done.stderr
    assert [row["step"] for row in train_rows(run_dir, "val")] == [5, 8]
    assert [row["step"] for row in train_rows(run_dir)] == list(range(1, 9))


# ------------------------------------------------------------------------------------------------ non-finite losses
def finite_weights(folder: Path) -> bool:
    import torch
    from safetensors.torch import load_file

    return all(bool(torch.isfinite(t).all()) for t in load_file(str(folder / runs.MODEL_FILE)).values())


def test_a_huge_learning_rate_fails_the_run_and_keeps_the_last_good_checkpoint(lab_home_dir, running_app):
    from gradio_client import Client

    run_id = "gpt-tiny-reliability-lr1e6"
    run_dir = lab_home_dir / "runs" / run_id
    done = train(run_dir, lab_home_dir, "--checkpoint-every", "1", "--lr", "1e6", steps=20)
    assert done.returncode == 1
    status = runs.read_status(run_dir)
    assert status["state"] == "failed" and status["message"].startswith("non-finite loss at step "), status
    bad_step = int(status["message"].split("step ")[1].split(":")[0])
    folder = runs.latest_checkpoint(run_dir)
    assert folder is not None and check_checkpoint_loads(run_dir) < bad_step and finite_weights(folder)
    assert done.stderr.strip().splitlines()[-1] == f"error: {status['message']}"
    # the page shows the reason: the Train tab's status for the run
    url, _ = running_app
    try:
        progress, markdown, _, _, _ = Client(url, verbose=False).predict(run_id, api_name="/show_run")
    finally:
        shutil.rmtree(run_dir)  # the session's later tests see only their own runs and the usual ones
    assert "failed" in progress and f"non-finite loss at step {bad_step}" in markdown


@pytest.mark.slow
def test_an_injected_nan_fails_the_run_or_is_skipped_as_asked(tmp_path):
    home = tmp_path / "home"
    failed = train(tmp_path / "fail", home, "--checkpoint-every", "1", fault="train:loss:nan@3")
    assert failed.returncode == 1
    status = runs.read_status(tmp_path / "fail")
    assert status["state"] == "failed" and status["message"].startswith("non-finite loss at step 3:"), status
    assert check_checkpoint_loads(tmp_path / "fail") == 2 and finite_weights(runs.latest_checkpoint(tmp_path / "fail"))

    skipped = train(tmp_path / "skip", home, "--checkpoint-every", "1", "--on-nonfinite", "skip",
                    fault="train:loss:nan@3")
    assert skipped.returncode == 0, skipped.stderr
    assert runs.read_status(tmp_path / "skip")["state"] == "finished"
    rows = train_rows(tmp_path / "skip")
    assert [row["step"] for row in rows] == list(range(1, 9))
    assert rows[2]["skipped_steps"] == [3] and rows[2]["loss"] is None
    assert all("skipped_steps" not in row for row in rows if row["step"] != 3)
    assert "step 3 skipped" in (tmp_path / "skip" / runs.LOG_FILE).read_text()
    assert finite_weights(tmp_path / "skip")


# ------------------------------------------------------------------------------------------------ a full disk
@pytest.mark.slow
def test_an_injected_full_disk_fails_the_run_clearly_and_keeps_the_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    done = train(run_dir, tmp_path / "home", "--checkpoint-every", "1", fault="checkpoint:after_weights:enospc@4")
    assert done.returncode == 1
    status = runs.read_status(run_dir)
    assert status["state"] == "failed" and status["message"].startswith("disk full: no space left on the device")
    assert "step-00000003" in status["message"] and "intact" in status["message"]
    assert check_checkpoint_loads(run_dir) == 3
    assert sorted(p.name for p in runs.checkpoint_dir(run_dir).iterdir()) == ["latest.json", "step-00000003"]


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs mounted for this test (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the injected full-disk test above covers the messages")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"could not mount a tmpfs ({mounted.stderr.strip()}); the injected full-disk test covers it")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; returns it."""
    filler = disk / "filler.bin"
    chunk = b"\0" * (256 * 1024)
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError:
            pass
    return filler


@pytest.mark.slow
def test_a_full_disk_fails_a_page_run_clearly_and_the_server_keeps_serving(small_disk, tmp_path):
    from gradio_client import Client

    from app.main import build_app, launch_kwargs
    from lab_models import api

    home = small_disk / "home"
    step = 40  # the tiny preset checkpoints at 25 and at its last step: the disk fills before the second
    release = tmp_path / "disk-is-full"  # not on the small disk: it must be creatable once that is full
    jobs = api.create_job_manager(home, poll_interval_s=0.1, env={
        faults.FAULT_ENV_VAR: f"checkpoint:begin:pause=120@{step}", faults.RELEASE_ENV_VAR: str(release),
        "OMP_NUM_THREADS": "1"})
    demo = build_app(home, jobs=jobs)
    demo.queue(default_concurrency_limit=4)
    port = free_port()
    launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
           **launch_kwargs(demo))
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        controls = ["gpt", "tiny", "", "", step, 0, "cpu", NO_SETTINGS, True, 1.0, False, 0, False, 0, False, 0]
        run_id = client.predict(*controls, api_name="/start_training")
        run_dir = home / "runs" / run_id
        log = run_dir / runs.LOG_FILE
        wait_for(lambda: log.is_file() and f"checkpoint:begin (step {step}): pause" in log.read_text(),
                 what="the trainer to pause at its second checkpoint")
        filler = fill(small_disk)  # while it waits: the disk is now full
        release.touch()
        wait_for(lambda: api.training_status(jobs, run_id)["state"] == "failed", what="the run to fail")
        status = api.training_status(jobs, run_id)
        assert status["message"].startswith("disk full: no space left on the device"), status["message"]
        assert "step-00000025" in status["message"]
        assert sorted(p.name for p in runs.checkpoint_dir(run_dir).iterdir()) == ["latest.json", "step-00000025"]
        assert check_checkpoint_loads(run_dir) == 25
        # the server keeps serving, on a full disk: the run's page and the Mask Explorer answer
        progress, markdown, _, _, _ = client.predict(run_id, api_name="/show_run")
        assert "failed" in progress and "disk full" in markdown
        assert client.predict("the cat sat", "whitespace", ["bert"], 0, "", None, None, "", None, "", True, True,
                              api_name="/explore_masks")
        filler.unlink()  # space again: Resume continues from step 25 and finishes
        client.predict(run_id, api_name="/resume_run")
        wait_for(lambda: api.training_status(jobs, run_id)["state"] in ("finished", "failed"), what="the resume")
        assert api.training_status(jobs, run_id)["state"] == "finished", api.training_status(jobs, run_id)
        assert [row["step"] for row in train_rows(run_dir)] == list(range(1, step + 1))
    finally:
        jobs.close(timeout=20)
        demo.close()


# ------------------------------------------------------------------------------------------------ a worker that dies
def test_a_trainer_killed_from_outside_is_shown_died_and_frees_its_slot(running_app, lab_jobs):
    from gradio_client import Client

    url, _ = running_app
    client = Client(url, verbose=False)
    controls = ["gpt", "tiny", "", "", 100_000, 0, "cpu", NO_SETTINGS, True, 1.0, False, 0, False, 0, False, 0]
    victim = client.predict(*controls, api_name="/start_training")
    follower = client.predict(*controls, api_name="/start_training")  # the same device: it waits behind the victim
    try:
        wait_for(lambda: lab_jobs.summary(victim)["step"] >= 3, what="the victim to train")
        assert lab_jobs.status(follower)["state"] == "queued"
        os.kill(lab_jobs.status(victim)["pid"], signal.SIGKILL)  # from outside the lab
        wait_for(lambda: lab_jobs.status(victim)["state"] == "died", what="the victim to be reported died")
        wait_for(lambda: lab_jobs.status(follower)["state"] == "running", what="the follower to get the slot")
        progress, markdown, _, log, details = client.predict(victim, api_name="/show_run")
        assert details["state"] == "died" and 'data-state="died"' in progress
        assert "killed by SIGKILL" in markdown and "The run died" in markdown and "End of its log" in markdown
        assert "training gpt" in log  # the last lines of its log
    finally:
        for run_id in (victim, follower):
            try:
                lab_jobs.stop(run_id)
            except ValueError:
                pass
        wait_for(lambda: all(lab_jobs.status(r)["state"] not in ("queued", "running") for r in (victim, follower)),
                 what="the runs to stop")
