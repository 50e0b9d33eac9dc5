"""The training job manager: FIFO queue per device, stop/resume, crash detection and recovery after a restart.

Most tests drive a tiny fake trainer (below) that honours the same CLI and run-folder contract as
`python -m lab_models train` (docs/contract.md §2) in a fraction of a second; one test runs the real CLI at
--preset tiny when it exists.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.files import log_tail, read_json
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]

FAKE_TRAINER = textwrap.dedent('''
    """A fake `python -m lab_models train`: same arguments, same run folder, no model. Behaviour via --set fake=..."""
    import argparse, json, os, signal, sys, time

    parser = argparse.ArgumentParser()
    for flag in ("--family", "--out", "--home", "--preset", "--corpus", "--device", "--tokenizer"):
        parser.add_argument(flag)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--objective", action="append", default=[])
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    settings = dict(item.split("=", 1) for item in args.set)
    mode = settings.get("fake", "normal")
    delay = float(settings.get("delay", "0.05"))
    if mode == "bad_argument":
        print("error: --preset huge is not a preset", file=sys.stderr)
        sys.exit(2)
    out = args.out

    def write_status(state, step, message=""):
        tmp = os.path.join(out, ".status.tmp")
        with open(tmp, "w") as f:
            json.dump({"state": state, "step": step, "total_steps": args.steps, "message": message,
                       "pid": os.getpid(), "updated": time.time()}, f)
        os.replace(tmp, os.path.join(out, "status.json"))

    stop = []
    if mode != "ignore_term":
        signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    else:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    start = 0

    def save_checkpoint(step):  # the layout of lab_models.training.runs: checkpoint/latest.json -> step-N/state.json
        folder = os.path.join(out, "checkpoint", "step-%08d" % step)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "state.json"), "w") as f:
            json.dump({"step": step}, f)
        with open(os.path.join(out, "checkpoint", "latest.json"), "w") as f:
            json.dump({"step": step, "dir": os.path.basename(folder)}, f)

    latest = os.path.join(out, "checkpoint", "latest.json")
    if args.resume:
        start = json.load(open(latest))["step"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"family": args.family, "preset": args.preset, "argv": sys.argv[1:]}, f)
    names = [o.split("=")[0] for o in args.objective] or ["clm"]
    t0 = time.time()
    print("fake trainer starting", args.family, "resume" if args.resume else "", flush=True)
    for step in range(start + 1, args.steps + 1):
        if stop:
            save_checkpoint(step - 1)
            write_status("stopped", step - 1, "stopped by SIGTERM")
            sys.exit(0)
        time.sleep(delay)
        if mode == "crash" and step == 3:
            print("Traceback (most recent call last):\\nRuntimeError: CUDA out of memory (fake)", flush=True)
            os._exit(3)
        if mode == "fail" and step == 3:
            write_status("failed", step, "loss became NaN at step 3")
            sys.exit(1)
        if mode == "sigkill" and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        loss = 5.0 / step
        with open(os.path.join(out, "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"step": step, "loss": loss, "losses": {n: loss for n in names}, "lr": 1e-3,
                                "tokens_per_s": 1000.0, "elapsed_s": time.time() - t0}) + "\\n")
            if step % 5 == 0:
                f.write(json.dumps({"step": step, "split": "val", "loss": loss * 1.1, "bits_per_byte": loss / 2})
                        + "\\n")
        if step % 2 == 0:
            save_checkpoint(step)
        write_status("running", step)
    write_status("finished", args.steps, "done")
''')


@pytest.fixture
def fake_trainer(tmp_path) -> list[str]:
    script = tmp_path / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    return [sys.executable, str(script)]


@pytest.fixture
def manager(tmp_path, fake_trainer):
    jobs = JobManager(tmp_path / "home", trainer_command=fake_trainer, stop_timeout_s=5, poll_interval_s=0.05)
    yield jobs
    jobs.close(timeout=5)




def state(jobs, run_id):
    return jobs.status(run_id)["state"]


def test_start_writes_a_queued_run_folder_and_runs_to_the_end(manager):
    run_id = manager.start("bert", "tiny", corpus="synthetic", steps=10, seed=3, device="cpu",
                           objectives={"mlm": 1.0, "nsp": 0.0}, settings={"mask_rate": 0.2, "nsp": False},
                           tokenizer="wordpiece")
    assert run_id.startswith("bert-tiny-") and len(run_id.split("-")[-1]) == 4
    run_dir = manager.runs_dir / run_id
    assert (run_dir / "status.json").exists() and (run_dir / "job.json").exists()
    wait_for(lambda: state(manager, run_id) == "finished", what="the fake run to finish")
    argv = read_json(run_dir / "config.json")["argv"]
    assert argv[argv.index("--out") + 1] == str(run_dir)
    assert "--home" in argv and argv[argv.index("--home") + 1] == str(manager.home)
    for pair in (["--objective", "mlm=1.0"], ["--objective", "nsp=0.0"], ["--set", "mask_rate=0.2"],
                 ["--set", "nsp=false"], ["--tokenizer", "wordpiece"], ["--steps", "10"], ["--seed", "3"]):
        assert any(argv[i:i + 2] == pair for i in range(len(argv))), (pair, argv)
    summary = manager.summary(run_id)
    assert summary["step"] == 10 and summary["total_steps"] == 10 and summary["family"] == "bert"
    assert summary["loss"] == pytest.approx(0.5) and summary["val_bits_per_byte"] == pytest.approx(0.25)
    rows = manager.metrics(run_id)
    assert [r["step"] for r in rows if "split" not in r] == list(range(1, 11))
    assert "fake trainer starting" in (run_dir / "worker.log").read_text()


PRIORITY_PROBE = textwrap.dedent('''
    """A worker that writes the priority of its main thread and of a thread it starts, then ends "finished"."""
    import json, os, sys, threading
    run_dir = sys.argv[1]
    seen = {"main": os.getpriority(os.PRIO_PROCESS, 0)}
    def probe():
        seen["thread"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())  # Linux: a thread's own
    worker = threading.Thread(target=probe)
    worker.start()
    worker.join()
    with open(os.path.join(run_dir, "priority.json"), "w") as out:
        json.dump(seen, out)
    with open(os.path.join(run_dir, "status.json.tmp"), "w") as out:  # atomically, as the run-folder contract asks
        json.dump({"state": "finished", "step": 1, "total_steps": 1}, out)
    os.replace(os.path.join(run_dir, "status.json.tmp"), os.path.join(run_dir, "status.json"))
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priorities are Linux's")
def test_workers_and_their_threads_run_at_a_lower_priority_than_the_server(tmp_path):
    script = tmp_path / "priority_probe.py"
    script.write_text(PRIORITY_PROBE)
    server = os.getpriority(os.PRIO_PROCESS, 0)
    for niceness, expected in ((None, max(server, 10)), (0, server)):
        options = {} if niceness is None else {"niceness": niceness}
        jobs = JobManager(tmp_path / f"home-{niceness}", poll_interval_s=0.05, **options)
        try:
            run_dir = jobs.runs_dir / "probe"
            run_id = jobs.start_command("probe", [sys.executable, str(script), str(run_dir)], run_dir, device="cpu")
            wait_for(lambda: state(jobs, run_id) == "finished", what="the probe to finish")
            assert read_json(run_dir / "priority.json") == {"main": expected, "thread": expected}
        finally:
            jobs.close()


def test_one_job_per_device_and_fifo_order(manager):
    slow = {"fake": "normal", "delay": "0.1"}
    first = manager.start("gpt", "tiny", steps=8, device="cpu", settings=slow)
    second = manager.start("gpt", "tiny", steps=3, device="cpu", settings=slow)
    third = manager.start("gpt", "tiny", steps=3, device="cpu", settings=slow)
    wait_for(lambda: state(manager, first) == "running", what="the first run to start")
    assert manager.queue_position(second) == 1 and manager.queue_position(third) == 2
    assert manager.status(second)["state"] == "queued" and manager.status(third)["queue_position"] == 2
    starts = {}
    while len(starts) < 3:
        running = [r for r in (first, second, third) if state(manager, r) == "running"]
        assert len(running) <= 1, f"two jobs ran at once on one device: {running}"
        for r in running:
            starts.setdefault(r, time.time())
        if all(state(manager, r) == "finished" for r in (first, second, third)):
            break
        time.sleep(0.02)
    wait_for(lambda: all(state(manager, r) == "finished" for r in (first, second, third)), what="all three")
    assert sorted(starts, key=starts.get) == [first, second, third][:len(starts)]


def test_two_devices_do_not_wait_for_each_other(tmp_path, fake_trainer):
    jobs = JobManager(tmp_path / "home2", trainer_command=fake_trainer, poll_interval_s=0.05)
    try:
        a = jobs.start("gpt", "tiny", steps=200, device="cpu", settings={"delay": "0.05"})
        wait_for(lambda: state(jobs, a) == "running")
        b = jobs.start("gpt", "tiny", steps=200, device="cuda", settings={"delay": "0.05"})  # the fake runs anywhere
        wait_for(lambda: state(jobs, b) == "running", what="a job on another device to start")
        jobs.stop(a), jobs.stop(b)
        wait_for(lambda: state(jobs, a) == "stopped" and state(jobs, b) == "stopped")
    finally:
        jobs.close(timeout=5)


def test_stop_a_queued_job_and_a_running_job_then_resume(manager):
    running = manager.start("bert", "tiny", steps=400, device="cpu", settings={"delay": "0.02"})
    queued = manager.start("bert", "tiny", steps=5, device="cpu")
    wait_for(lambda: manager.summary(running)["step"] >= 3, what="the first run to make progress")
    stopped = manager.stop(queued)
    assert stopped["state"] == "stopped" and stopped["queue_position"] is None
    assert "before it started" in stopped["message"]
    manager.stop(running)
    wait_for(lambda: state(manager, running) == "stopped", what="SIGTERM to stop the run")
    step_at_stop = manager.status(running)["step"]
    assert manager.status(running)["message"] == "stopped by SIGTERM"  # the trainer's own words are kept
    wait_for(lambda: not manager.status(running)["stopping"], what="the worker to exit")
    with pytest.raises(ValueError, match="nothing to stop"):
        manager.stop(running)
    time.sleep(0.3)
    assert state(manager, queued) == "stopped"  # a stopped queued job never starts

    manager.resume(running)
    assert "--resume" in manager.command(running)
    wait_for(lambda: manager.summary(running)["step"] > step_at_stop, what="the resumed run to go on")
    manager.stop(running)
    wait_for(lambda: state(manager, running) == "stopped")
    log = (manager.runs_dir / running / "worker.log").read_text()
    assert log.count("fake trainer starting") == 2 and "resume" in log


def test_a_trainer_that_ignores_sigterm_is_killed(tmp_path, fake_trainer):
    jobs = JobManager(tmp_path / "home3", trainer_command=fake_trainer, stop_timeout_s=0.5, poll_interval_s=0.05)
    try:
        run_id = jobs.start("gpt", "tiny", steps=1000, device="cpu", settings={"fake": "ignore_term"})
        wait_for(lambda: jobs.summary(run_id)["step"] >= 2)
        assert jobs.stop(run_id)["stopping"] is True
        wait_for(lambda: state(jobs, run_id) == "stopped", what="SIGKILL after the timeout")
        assert "killed after it did not stop" in jobs.status(run_id)["message"]
    finally:
        jobs.close(timeout=2)


@pytest.mark.parametrize("mode, final, expected", [
    ("crash", "failed", "exited with code 3: RuntimeError: CUDA out of memory (fake)"),
    ("sigkill", "died", "killed by SIGKILL at step 2 (from outside the lab, or by the out-of-memory killer)"),
    ("bad_argument", "failed", "error: --preset huge is not a preset"),
    ("fail", "failed", "loss became NaN at step 3"),  # the trainer's own "failed" is kept as written
])
def test_failed_runs_are_reported_with_the_end_of_the_log(manager, mode, final, expected):
    run_id = manager.start("gpt", "tiny", steps=10, device="cpu", settings={"fake": mode})
    wait_for(lambda: state(manager, run_id) == final, what=f"{mode} to be reported")
    assert expected in manager.status(run_id)["message"]
    if mode in ("crash", "sigkill"):  # the page shows the end of the log with the message
        assert "fake trainer starting" in manager.status(run_id)["log_tail"]
    follower = manager.start("gpt", "tiny", steps=2, device="cpu")  # the queue goes on after a crash
    wait_for(lambda: state(manager, follower) == "finished")


def test_interrupted_runs_are_marked_on_restart_and_can_resume(tmp_path, fake_trainer):
    home = tmp_path / "home4"
    jobs = JobManager(home, trainer_command=fake_trainer, poll_interval_s=0.05)
    running = jobs.start("gpt", "tiny", steps=1000, device="cpu", settings={"delay": "0.02"})
    queued = jobs.start("gpt", "tiny", steps=5, device="cpu")
    wait_for(lambda: jobs.summary(running)["step"] >= 3)
    jobs.close(stop_runs=False)  # as if the server died: the worker goes on, then dies without a word
    pid = jobs.status(running)["pid"]
    os.kill(pid, signal.SIGKILL)
    subprocess_reap(pid)
    # the closed manager marked its queued job; make it look like a crash left both "queued"/"running"
    (home / "runs" / queued / "status.json").write_text(json.dumps({"state": "queued", "step": 0}))

    restarted = JobManager(home, trainer_command=fake_trainer, poll_interval_s=0.05)
    try:
        for run_id in (running, queued):
            status = restarted.status(run_id)
            assert status["state"] == "stopped" and status["interrupted"] is True
            assert status["message"].startswith("interrupted")
        step = restarted.summary(running)["step"]
        restarted.resume(running)
        wait_for(lambda: restarted.summary(running)["step"] > step, what="the interrupted run to resume")
        restarted.stop(running)
        wait_for(lambda: state(restarted, running) == "stopped")
        assert restarted.status(running)["interrupted"] is False
    finally:
        restarted.close(timeout=5)


def subprocess_reap(pid):
    """The killed worker was our child (started by the first manager): reap it so it is not a zombie."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def test_a_live_worker_of_a_dead_server_is_adopted(tmp_path, fake_trainer):
    home = tmp_path / "home5"
    jobs = JobManager(home, trainer_command=fake_trainer, poll_interval_s=0.05)
    run_id = jobs.start("gpt", "tiny", steps=1000, device="cpu", settings={"delay": "0.02"})
    wait_for(lambda: jobs.summary(run_id)["step"] >= 2)
    process = jobs._running[run_id].process
    jobs.close(stop_runs=False)
    adopted = JobManager(home, trainer_command=fake_trainer, poll_interval_s=0.05)
    try:
        assert state(adopted, run_id) == "running"
        other = adopted.start("gpt", "tiny", steps=2, device="cpu")
        time.sleep(0.3)
        assert adopted.queue_position(other) == 1  # the adopted worker holds the cpu slot
        adopted.stop(run_id)
        process.wait(timeout=10)  # our child (the first manager's); the adopter sees it go
        wait_for(lambda: state(adopted, run_id) == "stopped")
        wait_for(lambda: state(adopted, other) == "finished")
    finally:
        adopted.close(timeout=5)


def test_close_stops_running_jobs_cleanly_and_leaves_no_process(tmp_path, fake_trainer):
    jobs = JobManager(tmp_path / "home6", trainer_command=fake_trainer, poll_interval_s=0.05)
    run_id = jobs.start("gpt", "tiny", steps=1000, device="cpu", settings={"delay": "0.02"})
    queued = jobs.start("gpt", "tiny", steps=5, device="cpu")
    wait_for(lambda: jobs.summary(run_id)["step"] >= 2)
    process = jobs._running[run_id].process
    jobs.close(timeout=5)
    assert process.poll() == 0  # reaped, exited cleanly after its checkpoint
    assert state(jobs, run_id) == "stopped" and state(jobs, queued) == "stopped"
    assert jobs.status(queued)["interrupted"] is True
    with pytest.raises(ValueError, match="shut down"):
        jobs.start("gpt", "tiny")


@pytest.mark.parametrize("kwargs, message", [
    (dict(family="BERT!"), "family must be"),
    (dict(family="bert", preset="huge"), "Unknown preset"),
    (dict(family="bert", steps=0), "steps must be"),
    (dict(family="bert", steps=2.5), "steps must be"),
    (dict(family="bert", seed=-1), "seed must be"),
    (dict(family="bert", device="tpu"), "Unknown device"),
    (dict(family="bert", objectives={"mlm": -1}), "finite number >= 0"),
    (dict(family="bert", objectives={"mlm": "lots"}), "must be a number"),
    (dict(family="bert", settings={"mask rate": 0.1}), "Setting names"),
])
def test_bad_requests_are_value_errors(manager, kwargs, message):
    with pytest.raises(ValueError, match=message):
        manager.start(**kwargs)


def test_unknown_runs_are_value_errors(manager):
    for bad in ("", "../etc", "no-such-run"):
        with pytest.raises(ValueError):
            manager.status(bad)
    with pytest.raises(ValueError):
        manager.resume("no-such-run")


def test_metrics_skip_a_half_written_line(manager):
    run_dir = manager.runs_dir / "gpt-tiny-20260101-000000-abcd"
    run_dir.mkdir()
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 2, "total_steps": 10}))
    (run_dir / "metrics.jsonl").write_text('{"step": 1, "loss": 3.0}\n{"step": 2, "loss": 2.')
    assert [r["step"] for r in manager.metrics(run_dir.name)] == [1]
    with open(run_dir / "metrics.jsonl", "a") as handle:
        handle.write('5}\n{"step": 3, "loss": 2.0}\n')
    assert [r["loss"] for r in manager.metrics(run_dir.name)] == [3.0, 2.5, 2.0]
    assert manager.list_runs()[0]["run_id"] == run_dir.name


def test_log_tail_keeps_the_last_lines(tmp_path):
    log = tmp_path / "worker.log"
    log.write_text("=== header\n" + "".join(f"line {i}\n" for i in range(50)))
    assert log_tail(log, lines=3) == "line 47\nline 48\nline 49"
    assert log_tail(tmp_path / "missing.log") == ""


@pytest.mark.slow
def test_the_real_cli_trains_a_tiny_run(tmp_path):
    jobs = JobManager(tmp_path / "home-real", poll_interval_s=0.1, env={"OMP_NUM_THREADS": "1"})
    try:
        run_id = jobs.start("gpt", "tiny", corpus="synthetic", steps=6, device="cpu")
        wait_for(lambda: state(jobs, run_id) in ("finished", "failed"), timeout=120, what="the real tiny run")
        status = jobs.status(run_id)
        assert status["state"] == "finished", (status, log_tail(jobs.runs_dir / run_id / "worker.log"))
        summary = jobs.summary(run_id)
        assert summary["step"] == 6 and summary["loss"] is not None
        assert (jobs.runs_dir / run_id / "config.json").exists()
    finally:
        jobs.close(timeout=10)
