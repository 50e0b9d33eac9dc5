"""The kill loop: `SIGKILL` a tiny training run at random moments, inside its checkpoint writes too, many times in a
row, resuming after each kill; then prove it ends with exactly the weights of a run that was never interrupted.

    python benchmarks/kill_loop.py [--kills 20] [--seed 0] [--workdir DIR]

In the spirit of Jepsen's kill loops and SQLite's crash tests. Each round starts `python -m lab_models train` (GPT,
tiny preset, one thread, a checkpoint every step, an evaluation every 5) and kills it one of four ways, chosen by a
seeded generator:
- `fault`: PRETRAINING_LAB_FAULT=checkpoint:<point>:kill@<step> makes the trainer SIGKILL itself at a named point of
  its checkpoint writer (lab_models/training/faults.py), a few steps past its last checkpoint (the seven points are
  taken in turn, in a shuffled order, so 20 kills reach every one of them);
- `pause`: the trainer pauses at such a point (checkpoint:<point>:pause=60@<step>), and is killed from outside while
  it waits there, its checkpoint half written;
- `timer`: killed from outside at a random moment: one time in four during its start-up (0 to 2 s after launch,
  e.g. while it cuts metrics.jsonl back to its checkpoint), else 0 to 250 ms after its training loop began;
- and after any of them, one time in three, a torn last line is appended to metrics.jsonl, as a kill in the middle
  of an append leaves it.
After every kill it checks: the newest checkpoint loads (the model is rebuilt from config.json and the checkpoint's
weights and AdamW state are loaded strictly, its step matching its folder); metrics.jsonl's train rows are steps
1, 2, ..., m with m at least the checkpoint's step (no gap, no repeat). Then `--resume` continues. At the end the run
finishes and its model.safetensors equals, tensor by tensor and bit for bit, that of an uninterrupted run with the same
seed (exact on a CPU), and its metrics hold every step once.

tests/reliability/test_training_faults.py runs `kill_loop(kills=5)` in CI; this script runs 20 (about 2 minutes on 2
cores).
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab_models.training import faults, runs  # noqa: E402

EVAL_EVERY = 5
KILL_KINDS = ("fault", "pause", "timer")
START_TIMEOUT_S = 180.0  # one trainer start and a few steps, on a loaded 2-core machine


@dataclass
class KillReport:
    kills: int = 0
    kinds: Counter = field(default_factory=Counter)
    points: Counter = field(default_factory=Counter)
    resumed_from: list[int] = field(default_factory=list)  # the checkpoint step after each kill (0: none yet)
    torn_lines: int = 0
    point_order: list[str] = field(default_factory=list)  # the writer's points in a shuffled order, taken in turn
    steps: int = 0
    seconds: float = 0.0


def trainer_command(run_dir: Path, home: Path, steps: int, *, resume: bool) -> list[str]:
    command = [sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--preset", "tiny",
               "--steps", str(steps),
               "--checkpoint-every", "1", "--eval-every", str(EVAL_EVERY), "--device", "cpu", "--seed", "0",
               "--out", str(run_dir), "--home", str(home)]
    return command + (["--resume"] if resume else [])


def child_env(fault: str | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != faults.FAULT_ENV_VAR}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(REPO))  # one thread: the same sums each time
    if fault:
        env[faults.FAULT_ENV_VAR] = fault
    return env


def train_steps(run_dir: Path) -> list[int]:
    return [row["step"] for row in runs.read_metrics(run_dir) if row.get("split", "train") == "train"]


def checkpoint_step(run_dir: Path) -> int:
    folder = runs.latest_checkpoint(run_dir)
    return 0 if folder is None else int(runs.read_json(folder / "state.json")["step"])


def check_checkpoint_loads(run_dir: Path) -> int:
    """Rebuild the model from the run's config and load the newest checkpoint's weights and AdamW state, strictly.
    Returns its step (0 when there is no checkpoint yet)."""
    import torch

    from lab_models.training.engine import parameter_groups
    from lab_models.models.family import build_model, model_config_from_dict
    from lab_models.text.tokenization import load_tokenizer_file
    from lab_models.objectives.settings import settings_from_dict
    from lab_models.text.vocab import prepare_tokenizer

    folder = runs.latest_checkpoint(run_dir)
    if folder is None:
        return 0
    config = runs.read_config(run_dir)
    _, vocab = prepare_tokenizer(load_tokenizer_file(run_dir / runs.TOKENIZER_FILE))
    settings = settings_from_dict("gpt", config.get("settings") or {})
    model = build_model("gpt", model_config_from_dict("gpt", config["model"]), settings, vocab,
                        config.get("objectives") or None)
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.01), lr=1e-3)
    state = runs.load_checkpoint(run_dir, model=model, optimizer=optimizer)
    step = int(state["step"])
    assert folder.name == f"step-{step:08d}", f"{folder.name} holds step {step}"
    assert len(optimizer.state) == len(list(model.parameters())), "the AdamW state is incomplete"
    return step


def check_metrics(run_dir: Path, at_least: int) -> int:
    """metrics.jsonl's train rows are 1..m (no gap, no repeat) with m >= `at_least`; returns m."""
    steps = train_steps(run_dir)
    assert steps == list(range(1, len(steps) + 1)), f"train steps have a gap or a repeat: {steps}"
    assert len(steps) >= at_least, f"metrics end at step {len(steps)}, before the checkpoint's step {at_least}"
    return len(steps)


def _training_starts(log: Path) -> int:
    """How many times train.log says the loop began ("training gpt (... parameters) on cpu for N steps")."""
    try:
        return log.read_text(errors="replace").count(" parameters) on ")
    except OSError:
        return 0


def wait_for(predicate, process: subprocess.Popen, timeout: float = START_TIMEOUT_S) -> bool:
    """Poll until `predicate()` or the process ends; False when it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.01)
    process.kill()
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for the trainer")


def one_round(run_dir: Path, home: Path, steps: int, rng: random.Random, report: KillReport) -> bool:
    """Start (or resume) the trainer and kill it one way; True when it was killed, False when it finished first."""
    before = checkpoint_step(run_dir)
    kind = rng.choice(KILL_KINDS)
    target = min(steps, before + rng.randint(1, 3))
    point = report.point_order[sum(report.points.values()) % len(report.point_order)]  # every point, in turn
    fault = {"fault": f"{point}:kill@{target}", "pause": f"{point}:pause=60@{target}", "timer": None}[kind]
    resume = runs.has_checkpoint(run_dir)
    process = subprocess.Popen(trainer_command(run_dir, home, steps, resume=resume), cwd=REPO, env=child_env(fault),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if kind == "pause":  # kill it from outside while it waits inside the writer
            log = run_dir / runs.LOG_FILE
            marker = f"injected fault at {point} (step {target}): pause"
            if wait_for(lambda: log.is_file() and marker in log.read_text(errors="replace"), process):
                process.send_signal(signal.SIGKILL)
        elif kind == "timer":  # a random moment: one time in four while it starts up, else once it trains again
            log = run_dir / runs.LOG_FILE
            starts = _training_starts(log)
            if rng.random() < 0.25:
                time.sleep(rng.uniform(0.0, 2.0))
                process.send_signal(signal.SIGKILL)
            elif wait_for(lambda: _training_starts(log) > starts, process):
                time.sleep(rng.uniform(0.0, 0.25))
                process.send_signal(signal.SIGKILL)
        code = process.wait(timeout=START_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read() if process.stderr else ""
    if code != -signal.SIGKILL:
        assert code == 0, f"the trainer failed instead of being killed ({kind} {fault}): {stderr[-2000:]}"
        return False
    report.kills += 1
    report.kinds[kind] += 1
    if kind != "timer":
        report.points[point] += 1
    if rng.random() < 1 / 3 and (run_dir / runs.METRICS_FILE).exists():  # what a kill in the middle of an append leaves
        with open(run_dir / runs.METRICS_FILE, "a", encoding="utf-8") as handle:
            handle.write('{"split": "train", "step": 99999, "loss": 1.')
        report.torn_lines += 1
    step = check_checkpoint_loads(run_dir)
    check_metrics(run_dir, step)
    report.resumed_from.append(step)
    return True


def same_weights(path_a: Path, path_b: Path) -> list[str]:
    """The names of the tensors that differ between two safetensors files ([] when bit for bit equal)."""
    import torch
    from safetensors.torch import load_file

    a, b = load_file(str(path_a)), load_file(str(path_b))
    if a.keys() != b.keys():
        return sorted(set(a) ^ set(b))
    return [name for name in a if a[name].dtype != b[name].dtype or not torch.equal(a[name], b[name])]


def kill_loop(workdir: str | os.PathLike, kills: int = 20, seed: int = 0, log=print) -> KillReport:
    """Run the loop in `workdir` (see the module docstring); AssertionError at the first broken promise."""
    started = time.monotonic()
    workdir = Path(workdir)
    home, reference, victim = workdir / "home", workdir / "reference", workdir / "victim"
    steps = 5 * kills + 10  # each kill lands within a few steps of the last checkpoint; room for all of them
    report = KillReport(steps=steps)
    done = subprocess.run(trainer_command(reference, home, steps, resume=False), cwd=REPO, env=child_env(),
                          capture_output=True, text=True, timeout=20 * START_TIMEOUT_S)
    assert done.returncode == 0, f"the uninterrupted run failed: {done.stderr[-2000:]}"
    rng = random.Random(seed)
    report.point_order = rng.sample(faults.CHECKPOINT_POINTS, len(faults.CHECKPOINT_POINTS))
    rounds = 0
    while report.kills < kills:
        rounds += 1
        assert rounds <= 3 * kills, "the trainer kept finishing before it could be killed"
        if not one_round(victim, home, steps, rng, report):
            break  # it finished all its steps before a kill landed: nothing left to interrupt
        log(f"kill {report.kills}/{kills}: {dict(report.kinds)}, resumes from step {report.resumed_from[-1]}")
    assert report.kills == kills, f"only {report.kills} of {kills} kills landed before the run finished"
    done = subprocess.run(trainer_command(victim, home, steps, resume=runs.has_checkpoint(victim)), cwd=REPO,
                          env=child_env(), capture_output=True, text=True, timeout=20 * START_TIMEOUT_S)
    assert done.returncode == 0, f"the last resume failed: {done.stderr[-2000:]}"
    status = runs.read_status(victim)
    assert status.get("state") == "finished" and status.get("step") == steps, status
    assert check_metrics(victim, steps) == steps
    val_steps = [row["step"] for row in runs.read_metrics(victim) if row.get("split") == "val"]
    expected_val = sorted({*range(EVAL_EVERY, steps + 1, EVAL_EVERY), steps})
    assert val_steps == expected_val, f"evaluations {val_steps}, expected {expected_val}"
    differing = same_weights(victim / runs.MODEL_FILE, reference / runs.MODEL_FILE)
    assert not differing, f"the killed-and-resumed run ended with other weights: {differing[:5]}"
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where the runs go (default: a new temporary folder, removed afterwards)")
    args = parser.parse_args(argv)
    if args.workdir:
        report = kill_loop(args.workdir, args.kills, args.seed)
    else:
        with tempfile.TemporaryDirectory(prefix="kill-loop-") as workdir:
            report = kill_loop(workdir, args.kills, args.seed)
    load = os.getloadavg()
    print(f"{report.kills} kills ({dict(report.kinds)}; writer points {dict(report.points)}; {report.torn_lines} torn "
          f"metrics lines), resumed from steps {report.resumed_from}; {report.steps} steps; final weights equal "
          f"to the uninterrupted run's bit for bit; {report.seconds:.0f} s (load average {load[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
