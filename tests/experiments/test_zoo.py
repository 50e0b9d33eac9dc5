"""The zoo (lab_models/experiments/zoo.py): one tagged run per family through the job manager, a second call that
continues, Ctrl-C that stops cleanly, and the progress the page draws.

Most tests drive a fake trainer (tests/support/fake_zoo_trainer.py) that keeps the run-folder contract in a fraction
of a second; one test runs the real `python -m lab_models zoo` for two families and a few steps.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lab_models.experiments import zoo
from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.files import available_cores, read_json
from tests.support.fake_zoo_trainer import FAKE_TRAINER
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_trainer(tmp_path) -> list[str]:
    script = tmp_path / "fake_zoo_trainer.py"
    script.write_text(FAKE_TRAINER)
    return [sys.executable, str(script)]


@pytest.fixture
def manager(tmp_path, fake_trainer):
    jobs = JobManager(tmp_path / "home", trainer_command=fake_trainer, stop_timeout_s=5, poll_interval_s=0.05)
    yield jobs
    jobs.close(timeout=5)




def test_the_zoo_order_holds_every_trainable_family_once_with_the_continuation_families_first():
    from lab_models.models.family import TRAINED_FAMILIES

    assert sorted(zoo.ZOO_ORDER) == sorted(TRAINED_FAMILIES) and len(zoo.ZOO_ORDER) == 17
    assert zoo.ZOO_ORDER[:4] == ("gpt", "gpt2", "bert", "t5")
    assert set(zoo.ZOO_BUDGET_FLOPS) == set(zoo.ZOO_PRESETS)


def test_a_zoo_config_refuses_bad_values_with_a_message():
    with pytest.raises(ValueError, match="preset"):
        zoo.ZooConfig(preset="huge")
    with pytest.raises(ValueError, match="Unknown family 'bart'"):
        zoo.ZooConfig(families=("gpt", "bart"))
    with pytest.raises(ValueError, match="steps"):
        zoo.ZooConfig(steps=0)
    with pytest.raises(ValueError, match="once"):
        zoo.ZooConfig(families=("gpt", "gpt"))
    with pytest.raises(ValueError, match="unknown family 'bart'"):
        zoo.parse_families("gpt,bart")


def test_trainer_intervals_follow_the_run_length():
    config = zoo.ZooConfig(steps=400)
    assert config.trainer_args("elmo") == ["--eval-every", "40", "--checkpoint-every", "100", "--vocab-size", "1024"]
    assert config.trainer_args("gpt")[6:] == ["--lr", "0.003", "--warmup-steps", "200", "--seq-len", "32"]  # the recipe
    assert "--vocab-size" not in zoo.ZooConfig(preset="small").trainer_args("gpt")
    assert config.name == "tiny-stories-400steps" and config.flops is None


def test_the_default_zoo_gives_every_family_the_presets_flops_on_the_stories_language():
    config = zoo.ZooConfig()
    assert config.name == "tiny-stories-1e12flops" and config.corpus_name == "stories"
    assert config.flops == zoo.ZOO_BUDGET_FLOPS["tiny"] == 1e12
    assert {config.steps_for(family) for family in zoo.ZOO_ORDER} == {None}  # each run counts its own steps
    for family in zoo.ZOO_ORDER:
        args = config.trainer_args(family)
        assert args[:4] == ["--budget-flops", "1000000000000.0", "--vocab-size", "1024"], family
    # the recipe: the same learning rate, warmup and row length for every Transformer, 40% masking where the
    # objective masks, translation for MASS and T5
    recipe = ["--lr", "0.003", "--warmup-steps", "200", "--seq-len", "32"]
    assert config.trainer_args("bert")[4:] == recipe + ["--set", "mask_rate=0.4"]
    assert config.trainer_args("xlnet")[4:] == recipe
    assert config.trainer_args("t5")[4:] == recipe + ["--objective", "translation=1"]
    assert config.trainer_args("cove")[4:] == []  # the RNN era keeps the preset's
    small = zoo.ZooConfig(preset="small")
    assert small.name == "small-stdlib-docs-2.5e13flops" and small.trainer_args("bert") == ["--budget-flops",
                                                                                           "25000000000000.0"]
    assert zoo.ZooConfig(corpus="synthetic").name == "tiny-synthetic-1e12flops"


def test_the_tiny_zoo_shares_the_cpu_between_one_thread_workers():
    assert zoo.ZooConfig(device="cpu").workers_here == min(zoo.MAX_ZOO_WORKERS, available_cores())
    assert zoo.ZooConfig(device="cpu", workers=3).workers_here == 3
    assert zoo.ZooConfig(preset="small", device="cpu").workers_here == 1
    for bad in (0, 9, True, 1.5):
        with pytest.raises(ValueError, match="workers must be a whole number from 1 to 8"):
            zoo.ZooConfig(workers=bad)


def test_a_flop_budget_zoo_gives_every_family_the_budget_instead_of_steps():
    config = zoo.ZooConfig(budget_flops=3e12)
    assert config.name == "tiny-stories-3e12flops" and config.steps_for("gpt") is None
    # the trainer finds its steps; the preset's intervals, as the steps are not known before it counts its FLOPs
    assert config.trainer_args("bert")[:4] == ["--budget-flops", "3000000000000.0", "--vocab-size", "1024"]
    with pytest.raises(ValueError, match="not both"):
        zoo.ZooConfig(steps=10, budget_flops=1e12)
    for bad in (0, -1e12, float("nan"), float("inf"), True, "1e12"):
        with pytest.raises(ValueError, match="positive number of FLOPs"):
            zoo.ZooConfig(budget_flops=bad)


def test_a_wall_time_zoo_gives_every_family_the_same_minutes():
    config = zoo.ZooConfig(budget_minutes=1.5)
    assert config.name == "tiny-stories-1p5min" and config.steps_for("t5") is None and config.flops is None
    assert config.trainer_args("gpt")[:4] == ["--budget-minutes", "1.5", "--vocab-size", "1024"]
    for mixed in (dict(steps=10), dict(budget_flops=1e12)):
        with pytest.raises(ValueError, match="one of steps, a FLOP budget or a wall-time budget"):
            zoo.ZooConfig(budget_minutes=2, **mixed)
    for bad in (0, -1, float("nan"), True, "2", 1e9):
        with pytest.raises(ValueError, match="number of minutes above 0"):
            zoo.ZooConfig(budget_minutes=bad)


def test_a_zoo_of_two_workers_runs_two_families_at_once_with_a_thread_each_and_a_plain_run_waits(tmp_path,
                                                                                                fake_trainer):
    jobs = JobManager(tmp_path / "home", trainer_command=fake_trainer, stop_timeout_s=5, poll_interval_s=0.05,
                      env={"FAKE_DELAY": "0.1"})
    try:
        config = zoo.ZooConfig(families=("gpt", "bert", "t5"), steps=8, device="cpu", workers=2)
        zoo.start_zoo(jobs, config)
        plain = jobs.start("gpt", steps=3, device="cpu")  # parallel=1: it never shares the CPU
        seen: list[set[str]] = []

        def running() -> set[str]:
            now = {row["run_id"] for row in jobs.list_runs() if jobs.status(row["run_id"])["state"] == "running"}
            seen.append(now)
            return now

        wait_for(lambda: len(running()) == 2, what="two of the zoo's runs running at once")
        wait_for(lambda: jobs.status(plain)["state"] == "finished", timeout=60, what="the plain run to finish")
        assert all(len(now) <= 2 for now in seen) and not any(plain in now and len(now) > 1 for now in seen), seen
        rows = zoo.zoo_rows(jobs, config.name)
        threads = {read_json(jobs.runs_dir / row["run_id"] / "config.json")["threads"] for row in rows.values()}
        assert threads == {str(max(1, available_cores() // 2))}
        assert read_json(jobs.runs_dir / plain / "config.json")["threads"] == os.environ.get("OMP_NUM_THREADS")
        assert {read_json(jobs.runs_dir / row["run_id"] / "job.json")["parallel"] for row in rows.values()} == {2}
    finally:
        jobs.close(timeout=5)


def test_start_zoo_tags_runs_and_a_second_call_skips_the_finished_ones(manager):
    config = zoo.ZooConfig(families=("gpt", "bert", "t5"), steps=6)
    plan = zoo.start_zoo(manager, config)
    assert plan.started == ("gpt", "bert", "t5") and not plan.skipped
    wait_for(lambda: zoo.zoo_progress(manager, config).finished == 3, what="the fake zoo to finish")
    progress = zoo.zoo_progress(manager, config)
    assert [run.family for run in progress.runs] == ["gpt", "bert", "t5"] and progress.fraction == 1.0
    for run in progress.runs:
        assert run.run_id.startswith(f"zoo-{config.name}-{run.family}-")
        assert read_json(manager.runs_dir / run.run_id / "job.json")["zoo"] == config.name
        argv_zoo = read_json(manager.runs_dir / run.run_id / "config.json")["zoo"]
        assert argv_zoo == config.name  # the trainer got --zoo
    # the zoo's runs are ordinary runs: the runs list shows them, with their zoo
    assert {row["zoo"] for row in manager.list_runs()} == {config.name}
    again = zoo.start_zoo(manager, config)
    assert again.skipped == ("gpt", "bert", "t5") and not again.queued
    assert zoo.list_zoos(manager) == [{"name": config.name, "runs": 3, "finished": 3}]


def test_a_zoo_of_several_seeds_trains_every_family_once_per_seed_and_extends_the_one_seed_zoo(manager):
    single = zoo.ZooConfig(families=("gpt", "bert"), steps=4)
    zoo.start_zoo(manager, single)
    wait_for(lambda: zoo.zoo_progress(manager, single).finished == 2, what="the one-seed zoo to finish")
    config = zoo.ZooConfig(families=("gpt", "bert"), steps=4, seeds=3)
    assert config.name == single.name and config.seed_values == (0, 1, 2)
    plan = zoo.start_zoo(manager, config)
    assert plan.skipped == ("gpt/seed0", "bert/seed0")  # the one-seed zoo's runs are its seed 0
    assert plan.started == ("gpt/seed1", "bert/seed1", "gpt/seed2", "bert/seed2")  # every family's seed 1 first
    wait_for(lambda: zoo.zoo_progress(manager, config).finished == 6, what="the three-seed zoo to finish")
    progress = zoo.zoo_progress(manager, config)
    assert [(run.family, run.seed) for run in progress.runs] == [
        ("gpt", 0), ("gpt", 1), ("gpt", 2), ("bert", 0), ("bert", 1), ("bert", 2)]
    for run in progress.runs:
        assert read_json(manager.runs_dir / run.run_id / "job.json")["seed"] == run.seed
    assert zoo.list_zoos(manager) == [{"name": config.name, "runs": 6, "finished": 6}]
    assert zoo.start_zoo(manager, zoo.ZooConfig(families=("gpt", "bert"), steps=4, seed=2)).skipped == ("gpt", "bert")
    assert "s1" in zoo.progress_line(1, 6, progress.runs[1], None, show_seed=True)
    for bad in (0, 21, True, 1.5):
        with pytest.raises(ValueError, match="seeds must be a whole number from 1 to 20"):
            zoo.ZooConfig(seeds=bad)


def test_stop_zoo_then_start_again_resumes_from_the_checkpoint(manager, monkeypatch):
    monkeypatch.setenv("FAKE_DELAY", "0.1")
    config = zoo.ZooConfig(families=("gpt", "bert"), steps=40)
    zoo.start_zoo(manager, config)
    first = wait_for(lambda: next((run for run in zoo.zoo_progress(manager, config).runs
                                   if run.state == "running" and run.step >= 2), None), what="gpt to run")
    assert first.family == "gpt"
    stopped = zoo.stop_zoo(manager, config.name)
    assert len(stopped) == 2  # bert off the queue, gpt checkpointed
    wait_for(lambda: not zoo.zoo_progress(manager, config).active, what="the zoo to stop")
    states = {run.family: run.state for run in zoo.zoo_progress(manager, config).runs}
    assert states == {"gpt": "stopped", "bert": "stopped"}
    monkeypatch.setenv("FAKE_DELAY", "0.01")
    plan = zoo.start_zoo(manager, config)
    assert plan.resumed == ("gpt", "bert") and not plan.started
    wait_for(lambda: zoo.zoo_progress(manager, config).finished == 2, what="the resumed zoo to finish")
    resumed_from = read_json(manager.runs_dir / first.run_id / "config.json")["resumed_from"]
    assert resumed_from >= 2  # continued from its checkpoint, not from step 0


def test_a_failed_run_is_reported_and_restarted_by_the_next_call(manager, monkeypatch):
    monkeypatch.setenv("FAKE_FAIL", "bert")
    config = zoo.ZooConfig(families=("gpt", "bert"), steps=4)
    zoo.start_zoo(manager, config)
    wait_for(lambda: not zoo.zoo_progress(manager, config).active and
             zoo.zoo_progress(manager, config).runs[1].state == "failed", what="bert to fail")
    bert = zoo.zoo_progress(manager, config).runs[1]
    assert "NaN" in bert.message
    line = zoo.progress_line(1, 2, bert, 1.0)
    assert "BERT" in line and "failed" in line and "NaN" in line
    monkeypatch.delenv("FAKE_FAIL")
    plan = zoo.start_zoo(manager, config)
    assert plan.skipped == ("gpt",) and plan.resumed == ("bert",)
    wait_for(lambda: zoo.zoo_progress(manager, config).finished == 2, what="bert to finish on the second call")


def _cli(home: Path, fake_trainer: list[str], *args: str) -> list[str]:
    code = ("import sys; from lab_models.experiments.zoo import main; "
            f"sys.exit(main(sys.argv[1:], trainer_command={fake_trainer!r}))")
    return [sys.executable, "-c", code, "--home", str(home), *args]


@pytest.mark.slow
def test_the_cli_prints_a_line_per_run_and_ctrl_c_stops_it_so_that_the_next_call_continues(tmp_path, fake_trainer):
    home = tmp_path / "home"
    env = {**os.environ, "FAKE_DELAY": "0.1", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(_cli(home, fake_trainer, "--families", "gpt,bert", "--steps", "60"), cwd=REPO,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = home / "runs"
    wait_for(lambda: any(read_json(d / "status.json").get("step", 0) >= 2 for d in runs.glob("zoo-*")),
             what="the first run to make progress")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == zoo.EXIT_INTERRUPTED, err
    assert "run the same command again" in err
    states = sorted(read_json(d / "status.json")["state"] for d in runs.glob("zoo-*"))
    assert states == ["stopped", "stopped"]
    env["FAKE_DELAY"] = "0.005"
    done = subprocess.run(_cli(home, fake_trainer, "--families", "gpt,bert", "--steps", "60"), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "2 queued, 0 finished already" in lines[0]
    assert any(line.startswith("[ 1/2] GPT") and "finished" in line and "60/60" in line for line in lines)
    assert any(line.startswith("[ 2/2] BERT") and "finished" in line for line in lines)
    assert lines[-1].startswith("zoo tiny-stories-60steps: 2 of 2 runs finished")
    third = subprocess.run(_cli(home, fake_trainer, "--families", "gpt,bert", "--steps", "60"), cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
    assert third.returncode == 0 and "0 queued, 2 finished already" in third.stdout


@pytest.mark.slow
def test_the_cli_refuses_a_bad_argument_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "lab_models", "zoo", "--families", "gpt,bart", "--home",
                             str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == zoo.EXIT_BAD_ARGUMENT
    assert result.stderr.strip().startswith("error: unknown family 'bart'") and len(result.stderr.splitlines()) == 1


@pytest.mark.slow
def test_the_real_zoo_trains_two_families_into_ordinary_runs(tmp_path):
    home = tmp_path / "home"
    result = subprocess.run([sys.executable, "-m", "lab_models", "zoo", "--families", "gpt,t5", "--steps", "3",
                             "--home", str(home)], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    for run_dir in (home / "runs").glob("zoo-*"):
        config = json.loads((run_dir / "config.json").read_text())
        assert config["zoo"] == "tiny-stories-3steps" and config["train"]["zoo"] == "tiny-stories-3steps"
        assert (run_dir / "model.safetensors").is_file()
    assert len(list((home / "runs").glob("zoo-tiny-stories-3steps-*"))) == 2
    # the Leaderboard ranks the zoo's runs alone
    from lab_models import api

    frame = api.leaderboard(home, zoo="tiny-stories-3steps", max_examples=4)
    assert sorted(frame["family"]) == ["gpt", "t5"] and frame.attrs["settings"]["zoo"] == "tiny-stories-3steps"
    with pytest.raises(ValueError, match="No run of the zoo 'tiny'"):
        api.leaderboard(home, zoo="tiny")


@pytest.mark.slow
def test_a_budget_zoo_trains_each_family_the_steps_the_same_flops_buy(tmp_path):
    """Equal compute: GPT and BERT get one FLOP budget and each trains the steps it buys (BERT's step costs less)."""
    home = tmp_path / "home"
    result = subprocess.run([sys.executable, "-m", "lab_models", "zoo", "--families", "gpt,bert", "--budget-flops",
                             "1e10", "--device", "cpu", "--home", str(home)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    spent = {}
    for run_dir in (home / "runs").glob("zoo-tiny-stories-1e10flops-*"):
        config = json.loads((run_dir / "config.json").read_text())
        budget = config["budget"]
        assert config["zoo"] == "tiny-stories-1e10flops" and budget["flops"] == 1e10
        assert budget["steps"] * budget["flops_per_step"] <= 1e10 < (budget["steps"] + 1) * budget["flops_per_step"]
        assert json.loads((run_dir / "status.json").read_text())["step"] == budget["steps"]
        spent[config["train"]["family"]] = budget["steps"]
    assert set(spent) == {"gpt", "bert"} and spent["bert"] > spent["gpt"]
