"""Tests for scaling sweeps (lab_models/experiments/sweep.py) and the Scaling tab's helpers: the power-law fit recovers
known exponents, sizes parse (and bad ones say what to write), a size that fails or runs past its time limit is recorded
with its message while the others train, the CLI's bad arguments give one line, and the figure draws the fit."""
from __future__ import annotations

import json
import math
import random
import sys
import textwrap
import time

import pytest

from app.scaling.figures import fits_markdown, points_table, scaling_figure
from lab_models import api
from lab_models.experiments import sweep as sweep_cli
from lab_models.experiments.sweep import SweepConfig, fit_power_law, parse_sizes, run_sweep
from lab_models.messages import messages_restored


@pytest.mark.parametrize("exponent, coefficient", [(0.076, 12.0), (0.5, 3.0), (0.05, 1e3)])
def test_fit_recovers_a_known_exponent(exponent, coefficient):
    xs = [10 ** (3 + 0.5 * i) for i in range(8)]
    law = fit_power_law(xs, [coefficient * x ** (-exponent) for x in xs])
    assert law.exponent == pytest.approx(exponent, abs=1e-9)
    assert law.coefficient == pytest.approx(coefficient, rel=1e-9)
    assert law.r2 == pytest.approx(1.0) and law.points == 8
    rng = random.Random(0)  # 2% multiplicative noise: the exponent still comes back within 0.01
    noisy = fit_power_law(xs, [coefficient * x ** (-exponent) * math.exp(rng.gauss(0, 0.02)) for x in xs])
    assert noisy.exponent == pytest.approx(exponent, abs=0.01) and noisy.r2 < 1.0


def test_fit_refuses_what_cannot_be_fitted():
    with pytest.raises(ValueError, match="at least 2 points"):
        fit_power_law([1e3, -5, None], [2.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="2 or more different sizes"):
        fit_power_law([1e3, 1e3], [2.0, 1.5])


def test_sizes_parse_and_bad_ones_say_what_to_write():
    sizes = parse_sizes("tiny, 128x2,small")
    assert [(s.label, s.d_model, s.n_layers, s.n_heads, s.d_ff) for s in sizes] == [
        ("tiny", 64, 2, 2, 256), ("128x2", 128, 2, 4, 512), ("small", 256, 4, 4, 1024)]
    for bad, message in (("huge", "unknown size 'huge'"), ("64x2,64x2", "listed twice"), ("", "at least one size"),
                         ("0x2", "at least 1")):
        with pytest.raises(ValueError, match=message):
            parse_sizes(bad)


FAKE_TRAINER = textwrap.dedent("""
    # Stands in for `python -m lab_models train`: d_model 24 fails as if out of memory, d_model 40 never ends (until
    # SIGTERM), anything else is the real trainer.
    import runpy, signal, sys, time
    from lab_models.training import runs
    args = sys.argv[1:]
    out = args[args.index("--out") + 1]
    if "d_model=24" in args:
        runs.write_status(out, "failed", step=3, total_steps=4,
                          message="OutOfMemoryError: CPU out of memory (tried to allocate 9.00 GiB)")
        print("error: OutOfMemoryError: CPU out of memory", file=sys.stderr)
        sys.exit(1)
    if "d_model=40" in args:
        def stop(signum, frame):
            runs.write_status(out, "stopped", step=7, total_steps=4, message="stopped by SIGTERM at step 7")
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        runs.write_status(out, "running", step=7, total_steps=4, message="training")
        time.sleep(120)
        sys.exit(1)
    sys.argv = ["lab_models", "train"] + args
    runpy.run_module("lab_models", run_name="__main__")
""")


@pytest.mark.slow
def test_a_failing_size_is_recorded_and_the_rest_train(tmp_path, lab_home_dir):
    fake = tmp_path / "fake_trainer.py"
    fake.write_text(FAKE_TRAINER)
    folder = tmp_path / "home" / "sweeps" / "gpt-sweep-test"
    config = SweepConfig(family="gpt", sizes=("24x1", "16x1"), steps=2, out=str(folder), switch=False,
                         home=str(lab_home_dir), device="cpu")
    record = run_sweep(config, trainer_command=[sys.executable, str(fake)])
    failed, done = record["points"]
    assert failed["size"] == "24x1" and failed["state"] == "failed" and "OutOfMemoryError" in failed["message"]
    assert done["size"] == "16x1" and done["state"] == "finished", done["message"]
    assert done["bits_per_byte"] > 0 and done["tokens"] == 2 * 16 * 64 and done["non_embedding"] > 0
    assert done["train_flops"] == 6 * done["active_non_embedding"] * done["tokens"]
    assert "at least 2 points" in record["fits"]["dense"]["parameters"]["error"]  # one finished size: no fit yet
    saved = json.loads((folder / "sweep.json").read_text())  # each message's English, its record beside it
    assert "message_record" in saved["points"][1] and messages_restored(saved)["points"] == record["points"]
    status = json.loads((folder / "status.json").read_text())
    assert status["state"] == "finished" and status["message"] == "1 of 2 runs finished"
    # the api reads it like any sweep in the lab home, failures with their message in the table
    [listed] = api.list_sweeps(home=tmp_path / "home")
    assert listed["sweep_id"] == "gpt-sweep-test" and listed["status"]["state"] == "finished"
    table = points_table(api.sweep_points(["gpt-sweep-test"], home=tmp_path / "home"))
    assert list(table["size"]) == ["24x1", "16x1"]
    assert "OutOfMemoryError" in table["message"][0] and table["message"][1] == ""


@pytest.mark.slow
def test_a_size_past_its_time_limit_is_stopped_and_recorded(tmp_path):
    fake = tmp_path / "fake_trainer.py"
    fake.write_text(FAKE_TRAINER)
    config = SweepConfig(family="gpt", sizes=("40x1",), steps=2, out=str(tmp_path / "sweep"), max_minutes=0.05)
    started = time.monotonic()
    [point] = run_sweep(config, trainer_command=[sys.executable, str(fake)])["points"]
    assert time.monotonic() - started < 60  # SIGTERM at 3 s, not the fake's two minutes
    assert point["state"] == "failed" and "ran past the 0.05-minute limit (--max-minutes)" in point["message"]


def test_switch_variant_follows_every_size(tmp_path):
    config = SweepConfig(family="gpt", sizes=("32x1", "64x3"), steps=1, out=str(tmp_path), switch=True)
    sizes = sweep_cli.check_config(config)
    args = sweep_cli.trainer_arguments(config, sizes[0], "switch")
    assert "ffn=switch" in args and "expert_every=1" in args  # one layer: its last layer switches
    assert "expert_every=2" in sweep_cli.trainer_arguments(config, sizes[1], "switch")
    assert "ffn=switch" not in sweep_cli.trainer_arguments(config, sizes[1], "dense")
    with pytest.raises(ValueError, match="LSTM family"):
        sweep_cli.check_config(SweepConfig(family="elmo", sizes=("32x1",), steps=1, out=str(tmp_path)))
    with pytest.raises(ValueError, match=r"size 64x2 \(switch\): .*needs expert_every=1"):
        sweep_cli.check_config(SweepConfig(family="albert", sizes=("32x1", "64x2"), steps=1, out=str(tmp_path),
                                           switch=True, expert_every=2))


def test_a_sweep_under_a_budget_gives_every_size_the_same_flops_or_minutes(tmp_path):
    config = SweepConfig(family="gpt", sizes=("32x1", "64x2"), steps=None, out=str(tmp_path), budget_flops=1e12)
    sizes = sweep_cli.check_config(config)
    for size in sizes:
        args = sweep_cli.trainer_arguments(config, size, "dense")
        assert args[args.index("--budget-flops") + 1] == "1000000000000.0" and "--steps" not in args
    assert "--budget-flops" in sweep_cli.sweep_arguments(config)
    timed = SweepConfig(family="gpt", sizes=("32x1",), steps=None, out=str(tmp_path), budget_minutes=0.5)
    assert "--budget-minutes" in sweep_cli.trainer_arguments(timed, sweep_cli.check_config(timed)[0], "dense")
    for bad in (dict(steps=None), dict(steps=5, budget_flops=1e12), dict(steps=None, budget_flops=1e12,
                                                                         budget_minutes=1)):
        with pytest.raises(ValueError, match="one of --steps, --budget-flops or --budget-minutes"):
            sweep_cli.check_config(SweepConfig(family="gpt", sizes=("32x1",), out=str(tmp_path), **bad))
    with pytest.raises(ValueError, match="--budget-flops must be a positive number"):
        sweep_cli.check_config(SweepConfig(family="gpt", sizes=("32x1",), steps=None, out=str(tmp_path),
                                           budget_flops=-1.0))


def test_cli_bad_arguments_give_one_line(capsys):
    assert sweep_cli.main(["--family", "gpt", "--sizes", "64y2", "--steps", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown size '64y2'")
    assert sweep_cli.main(["--family", "gpt", "--sizes", "64x2", "--steps", "5", "--model", "d_model=8"]) == 2
    assert "set by the sweep" in capsys.readouterr().err


def test_scaling_figure_draws_points_and_the_fit():
    points = [{"size": f"{d}x1", "variant": "dense", "state": "finished", "non_embedding": 12 * d * d,
               "train_flops": 6 * 12 * d * d * 1e5, "bits_per_byte": 5.0 * (12 * d * d) ** -0.1}
              for d in (32, 64, 128)]
    points.append({"size": "256x1", "variant": "dense", "state": "failed", "message": "out of memory"})
    sweep = {"sweep_id": "gpt-sweep-20260101-120000-ab12", "config": {"family": "gpt"}, "points": points,
             "fits": sweep_cli.fits(points)}
    assert sweep["fits"]["dense"]["parameters"]["exponent"] == pytest.approx(0.1)
    figure = scaling_figure([sweep])
    names = [trace.name for trace in figure.data]
    assert "gpt dense" in names and any("x^-0.100" in name for name in names)
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"
    assert "α = 0.100" in fits_markdown([sweep])
