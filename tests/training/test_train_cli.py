"""Tests for `python -m lab_models train` (docs/contract.md §2): bad arguments exit non-zero with one clear line,
a tiny run writes the contract's run folder, SIGTERM stops it cleanly and `--resume` finishes it, and the same command
under `torchrun --nproc_per_node 2` trains with DDP on the gloo backend.

The argument checks run `main()` in-process (each subprocess costs a torch import); the run, signal and DDP checks use
real subprocesses because that is how the app and users start them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from lab_models.training import run as train

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def child_env(home: Path) -> dict:
    return {**os.environ, "PRETRAINING_LAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def read_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("argv, message", [
    (["--out", "R"], "--family is required"),
    (["--family", "gpt3", "--out", "R"], "choose one of gpt, gpt2, bert"),
    (["--family", "bert", "--out", "R", "--preset", "huge"], "unknown preset 'huge'"),
    (["--family", "bert", "--out", "R", "--objective", "mlm"], "write NAME=WEIGHT"),
    (["--family", "bert", "--out", "R", "--objective", "sbo=1"], "its objectives are mlm, nsp"),
    (["--family", "bert", "--out", "R", "--steps", "0"], "--steps must be at least 1"),
    (["--family", "bert", "--out", "R", "--set", "mask_rate=2"], "mask_rate must be a number in (0, 1]"),
    (["--family", "bert", "--out", "R", "--set", "nope=1"], "unknown setting 'nope'"),
    (["--family", "gpt", "--out", "R", "--corpus", "/no/such/corpus"], "unknown corpus"),
    (["--family", "gpt", "--out", "R", "--vocab-size", "0"], "--vocab-size must be at least 1"),
    (["--family", "gpt", "--out", "R", "--steps", "999999999999"], "--steps must be at most 10,000,000"),
    (["--family", "gpt", "--out", "R", "--vocab-size", "9999999"], "--vocab-size must be at most 262,144"),
    (["--family", "gpt", "--out", "R", "--seed", "99999999999"], "--seed must be at most 4,294,967,295"),
    (["--family", "gpt", "--out", "R", "--resume"], "nothing to resume"),
    (["--family", "gpt", "--out", "R", "--budget-flops", "1e12", "--steps", "5"], "not both"),
    (["--family", "gpt", "--out", "R", "--budget-flops", "0"], "--budget-flops must be a positive number"),
    (["--family", "gpt", "--out", "R", "--budget-flops", "nan"], "--budget-flops must be a positive number"),
    (["--family", "gpt", "--out", "R", "--budget-flops", "1e40"], "more than the 10,000,000 a run may take"),
    (["--family", "gpt", "--out", "R", "--budget-minutes", "2", "--steps", "5"], "not both"),
    (["--family", "gpt", "--out", "R", "--budget-minutes", "2", "--budget-flops", "1e12"], "not both"),
    (["--family", "gpt", "--out", "R", "--budget-minutes", "0"], "--budget-minutes must be a number of minutes"),
    (["--family", "gpt", "--out", "R", "--budget-minutes", "nan"], "--budget-minutes must be a number of minutes"),
    (["--family", "gpt", "--out", "R", "--budget-minutes", "1e9"], "at most 10,080"),
])
def test_bad_arguments_exit_non_zero_with_one_line(tmp_path, capsys, argv, message):
    argv = [str(tmp_path / "run") if a == "R" else a for a in argv]
    try:
        code = train.main(argv + ["--home", str(tmp_path / "home")])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_every_option_of_the_help_says_what_it_does():
    parser = train.build_parser()
    options = [action for action in parser._actions if action.option_strings]
    assert len(options) > 25
    assert [action.option_strings[0] for action in options if not action.help] == []
    assert "optimizer steps (default: the preset's" in parser.format_help()


@pytest.mark.slow
def test_missing_family_exits_through_argparse_with_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "lab_models", "train", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, env=child_env(tmp_path / "home"), cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: --family is required (one of gpt, gpt2, bert, roberta, albert, "
                                                "spanbert, electra, unilm, xlnet, mpnet, mass, glm, t5, elmo, cove, "
                                                "ulmfit, cvt)"]


@pytest.mark.slow
def test_sigterm_stops_cleanly_and_resume_finishes_the_run(tmp_path):
    run_dir, home = tmp_path / "run", tmp_path / "home"
    command = [sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--preset", "tiny", "--steps", "3000",
               "--checkpoint-every", "20", "--eval-every", "1000", "--device", "cpu", "--out", str(run_dir)]
    child = subprocess.Popen(command, env=child_env(home), cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (run_dir / "metrics.jsonl").exists() and len(read_rows(run_dir)) >= 25:
                break
            assert child.poll() is None, child.stderr.read()
            time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
    status = json.loads((run_dir / "status.json").read_text())
    stopped_at = status["step"]
    assert status["state"] == "stopped" and 25 <= stopped_at < 3000
    # a person at the terminal sees it start, its first step, and where the stopped run is
    said = child.stdout.read().splitlines()
    assert said[0] == f"preparing {run_dir}: the corpus, the tokenizer and the batches"
    assert said[1].startswith("training gpt (") and said[1].endswith(" parameters) on cpu for 3,000 steps")
    assert said[2].startswith("step     1/3000  loss ") and " tokens/s  0 s so far" in said[2]
    assert said[-2].startswith(f"stopped at step {stopped_at} in ") and said[-2].endswith(
        f"; the run is in {run_dir.resolve()} (resume with --resume)")
    assert said[-1] == ("to open it in the app, train it inside a lab home: --out HOME/runs/NAME, then python app.py "
                        "--home HOME")
    assert (run_dir / "model.safetensors").exists() and (run_dir / "checkpoint").is_dir()

    done = subprocess.run([sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--out", str(run_dir),
                           "--resume", "--steps", str(stopped_at + 10)],
                          capture_output=True, text=True, env=child_env(home), cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == stopped_at + 10
    said = done.stdout.splitlines()
    assert said[2].startswith(f"step {stopped_at + 1:>5}/{stopped_at + 10}  loss ")  # the resumed run's first step
    assert any(line.startswith(f"step {stopped_at + 10:>5}/{stopped_at + 10}  loss ") for line in said)  # the last
    assert said[-2].startswith(f"finished {stopped_at + 10} steps in ")
    steps = [row["step"] for row in read_rows(run_dir) if row.get("split") == "train"]
    # the stop checkpointed the step it finished, so the resumed process starts right after it: no gap, no repeat
    assert steps == list(range(1, stopped_at + 11))


@pytest.mark.slow
def test_torchrun_trains_with_ddp_on_two_gloo_processes(tmp_path):
    run_dir = tmp_path / "ddp"
    steps, batch, seq = 4, 4, 32
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
               "-m", "lab_models", "train", "--family", "bert", "--preset", "tiny", "--steps", str(steps),
               "--batch-size", str(batch), "--seq-len", str(seq), "--device", "cpu", "--out", str(run_dir)]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env(tmp_path / "home"), cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["world_size"] == 2 and config["family"] == "bert"
    rows = read_rows(run_dir)
    train_rows = [row for row in rows if row.get("split") == "train"]
    # one writer (rank 0) and one row per step; each step consumed both ranks' batches (the batch size is per rank)
    assert [row["step"] for row in train_rows] == list(range(1, steps + 1))
    assert train_rows[-1]["tokens"] == 2 * steps * batch * seq
    assert {"mlm", "nsp"} <= set(train_rows[-1]["losses"])
    assert any(row.get("split") == "val" and row["bits_per_byte"] > 0 for row in rows)
    weights = load_file(run_dir / "model.safetensors")
    assert weights and not any(name.startswith("module.") for name in weights)  # saved unwrapped, loadable alone


def test_a_wall_time_budget_times_its_first_steps_then_fixes_the_steps_that_fit():
    from lab_models.training.config import CALIBRATION_STEPS, TrainConfig
    from lab_models.training.run import _MinutesBudget

    config = TrainConfig(family="gpt", out="R", preset="tiny", corpus="synthetic", steps=10_000_000, seed=0,
                         device="cpu", objectives={}, settings={}, model={}, tokenizer="bpe", vocab_size=512,
                         batch_size=4, seq_len=16, lr=1e-3, schedule="cosine", warmup_steps=5, eval_every=25,
                         eval_batches=1, checkpoint_every=25, log_every=1, budget_minutes=1.0)
    budget = _MinutesBudget(1.0)
    assert budget.decide(config, 1, 0.5) is None  # the first logged step (it paid for warming up) starts the clock
    assert budget.decide(config, CALIBRATION_STEPS, 2.4) is None
    decided, record = budget.decide(config, CALIBRATION_STEPS + 1, 2.5)  # 20 steps in 2 s: 0.1 s a step
    assert record == {"minutes": 1.0, "steps": 21 + 575, "seconds_per_step": pytest.approx(0.1),
                      "timed_steps": [2, 21]}
    assert decided.steps == 596 and decided.budget_minutes == 1.0
    spent = _MinutesBudget(0.01)  # 0.6 s: spent before the timing ends, so one more step ends the run
    assert spent.decide(config, 1, 0.2) is None
    assert spent.decide(config, 5, 0.7)[0].steps == 6



def test_a_run_still_timing_its_steps_shows_no_total_yet(tmp_path):
    """While a wall-time budget times its first steps the provisional 10,000,000 steps are no one's total: the runs
    table and the progress bar say "?" until config.json "budget" holds the steps."""
    from lab_models.training import runs
    from lab_models.training.jobs.store import RunStore

    run_dir = tmp_path / "home" / "runs" / "gpt-tiny-20261202-000000-abcd"
    run_dir.mkdir(parents=True)
    runs.write_config(run_dir, {"family": "gpt", "steps": 10_000_000, "train": {"budget_minutes": 2.0}})
    runs.write_status(run_dir, "running", step=5, total_steps=10_000_000)
    store = RunStore(tmp_path / "home")
    assert store.summary(run_dir.name)["total_steps"] is None
    runs.write_config(run_dir, {"family": "gpt", "steps": 410, "train": {"budget_minutes": 2.0, "steps": 410},
                                "budget": {"minutes": 2.0, "steps": 410}})
    runs.write_status(run_dir, "running", step=30, total_steps=410)
    assert store.summary(run_dir.name)["total_steps"] == 410


@pytest.mark.slow
def test_a_wall_time_budget_records_the_steps_it_bought_and_a_resume_keeps_them(tmp_path):
    out = tmp_path / "gpt"
    result = subprocess.run([sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--out", str(out),
                             "--budget-minutes", "0.15", "--device", "cpu", "--home", str(tmp_path / "home")],
                            cwd=REPO, env=child_env(tmp_path / "home"), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    config = json.loads((out / "config.json").read_text())
    bought = config["budget"]
    assert bought["minutes"] == 0.15 == config["train"]["budget_minutes"]
    assert bought["steps"] == config["steps"] == config["train"]["steps"] > bought["timed_steps"][1]
    assert bought["timed_steps"][1] - bought["timed_steps"][0] + 1 == 20 and bought["seconds_per_step"] > 0
    status = json.loads((out / "status.json").read_text())
    assert (status["state"], status["step"], status["total_steps"]) == ("finished", bought["steps"], bought["steps"])
    assert f"buys {bought['steps']:,} steps" in result.stdout
    resumed, _ = train.config_from_run(train.build_parser().parse_args(["--out", str(out), "--resume"]))
    assert (resumed.steps, resumed.budget_minutes) == (bought["steps"], 0.15)


@pytest.mark.slow
def test_a_flop_budget_buys_each_family_the_steps_it_can_afford(tmp_path):
    """GPT and BERT with one budget: each trains the whole steps its own FLOPs per step fit in it (BERT projects only
    its masked rows onto the vocabulary, so a step costs it less and it gets more of them); config.json records the
    budget and what it bought, and the run ends at that step."""
    budget = 3e10
    bought = {}
    for family in ("gpt", "bert"):
        out = tmp_path / family
        result = subprocess.run([sys.executable, "-m", "lab_models", "train", "--family", family, "--out", str(out),
                                 "--budget-flops", str(budget), "--device", "cpu", "--home", str(tmp_path / "home")],
                                cwd=REPO, env=child_env(tmp_path / "home"), capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        config = json.loads((out / "config.json").read_text())
        spent = config["budget"]
        assert spent["flops"] == budget == config["train"]["budget_flops"]
        assert spent["flops_per_step"] == pytest.approx(spent["flops_per_token"] * spent["tokens_per_step"])
        assert spent["steps"] * spent["flops_per_step"] <= budget < (spent["steps"] + 1) * spent["flops_per_step"]
        assert config["train"]["steps"] == spent["steps"]
        status = json.loads((out / "status.json").read_text())
        assert (status["state"], status["step"], status["total_steps"]) == ("finished", spent["steps"], spent["steps"])
        assert f"buys {spent['steps']:,} steps" in result.stdout
        bought[family] = spent
    assert bought["bert"]["flops_per_token"] < bought["gpt"]["flops_per_token"]
    assert bought["bert"]["steps"] > bought["gpt"]["steps"]
