"""Tiny runs trained by the real CLI (`python -m lab_models train`, one process per family, in parallel, one thread
each) into the session's lab home, once per test session: the runs that the app and inference tests read.

- `train_tiny_runs`: gpt, bert, xlnet and t5 for 30 steps (others on request), shared by the representation and probing
  tests (tests/inference/) and the Understand tab's, the secondary endpoints' and the Chinese page's tests
  (tests/app/); with the sentences those tests probe them with.
- `trained_runs`: a module-scoped fixture with gpt, bert and t5 for 30 steps, shared by the Compare tab's tests
  (tests/app/test_compare_tab.py) and the leaderboard's (tests/inference/test_leaderboard.py).

A run that already has weights is reused, so whichever module runs first trains it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ("gpt", "bert", "xlnet", "t5")
SENTENCE = "the girl eats a red apple in the kitchen ."
OTHER = "a farmer sells my apple at the market ."


def train_tiny_runs(home: Path, families=FAMILIES, steps: int = 30) -> dict[str, Path]:
    """family -> run folder: `python -m lab_models train --family F --steps 30` into HOME/runs/F-tiny-understand-tab,
    each in its own process (one thread each); runs that already have weights are reused."""
    runs, processes = {}, []
    for family in families:
        run_dir = Path(home) / "runs" / f"{family}-tiny-understand-tab"
        runs[family] = run_dir
        if (run_dir / "model.safetensors").is_file():
            continue
        command = [sys.executable, "-m", "lab_models", "train", "--family", family, "--out", str(run_dir),
                   "--steps", str(steps), "--device", "cpu", "--home", str(home)]
        env = {**os.environ, "PRETRAINING_LAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        processes.append((family, subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT)))
    for family, process in processes:
        output, _ = process.communicate(timeout=240)
        assert process.returncode == 0, f"training {family} failed:\n{output.decode(errors='replace')[-2000:]}"
    return runs


E2E_FAMILIES = ("gpt", "bert", "t5")  # one causal, one MLM, one seq2seq: three default modes


@pytest.fixture(scope="module")
def trained_runs(lab_home_dir) -> dict[str, str]:
    """family -> run id: a tiny run of each of E2E_FAMILIES, trained once for this module by the CLI (in parallel,
    one thread each) into the app's lab home."""
    runs, processes = {}, []
    for family in E2E_FAMILIES:
        run_id = f"{family}-tiny-compare-tab"
        run_dir = Path(lab_home_dir) / "runs" / run_id
        runs[family] = run_id
        if (run_dir / "model.safetensors").is_file():
            continue
        command = [sys.executable, "-m", "lab_models", "train", "--family", family, "--out", str(run_dir),
                   "--steps", "30", "--device", "cpu", "--home", str(lab_home_dir)]
        processes.append((family, subprocess.Popen(command, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    for family, process in processes:
        output, _ = process.communicate(timeout=180)
        assert process.returncode == 0, f"training {family} failed:\n{output.decode(errors='replace')[-2000:]}"
    return runs
