"""The Switch Transformer in the page, driven through `gradio_client`: the Train tab's toggle adds the `--model`
overrides to the command (and is ignored for an LSTM family, whose page hides it), a Switch run started from the page
logs per-expert routing that `/show_routing` draws, and the Understand tab's `/understand_routing` colours a
sentence's tokens by expert. Plus the figures' pure helpers."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from app.train.switch_figures import routing_figure, routing_series
from app.train.switch_panel import switch_model_overrides
from lab_models import api
from .test_train_tab import controls


def switch_controls(on=True, n_experts=4, capacity_factor=1.25, expert_every=2, z=0.0):
    return [on, n_experts, capacity_factor, expert_every, z]


def test_switch_toggle_adds_model_overrides_to_the_command(client):
    command = client.predict(*controls("gpt"), *switch_controls(), api_name="/training_command")
    assert "--model ffn=switch --model n_experts=4" in command and "capacity_factor" not in command
    assert "ffn" not in client.predict(*controls("gpt"), api_name="/training_command")  # off by default
    bad = client.predict(*controls("bert"), *switch_controls(capacity_factor=0), api_name="/training_command")
    assert bad.startswith("# ") and "capacity_factor must be a number > 0" in bad
    rnn = client.predict(*controls("elmo"), *switch_controls(), api_name="/training_command")
    assert rnn.startswith("python") and "ffn" not in rnn  # hidden for an LSTM family, so not passed on


def test_model_overrides_and_the_api_check():
    assert switch_model_overrides("t5", True, 8, 1.25, 2, 0) == {"ffn": "switch"}
    assert switch_model_overrides("t5", False, 4, 2, 1, 0) == {}
    assert switch_model_overrides("cove", True, 4, 2, 1, 0) == {}
    with pytest.raises(ValueError, match="LSTM model"):
        api.training_command(api.RunStore(), "ulmfit", model={"ffn": "switch"})


def test_a_switch_run_from_the_page_shows_its_routing(client, lab_jobs):
    run_id = client.predict(*controls("gpt", steps=8), *switch_controls(n_experts=4, capacity_factor=0.5),
                            api_name="/start_training")
    deadline = time.time() + 120
    while api.training_status(lab_jobs, run_id)["state"] in ("queued", "running"):
        assert time.time() < deadline, "the Switch run did not finish within 120 s"
        time.sleep(0.5)
    assert api.training_status(lab_jobs, run_id)["state"] == "finished"
    figure = json.loads(client.predict(run_id, api_name="/show_routing")["plot"])
    names = {trace["name"] for trace in figure["data"]}
    assert {"expert 0", "expert 3", "expert 0 dropped"} <= names
    assert "layer 2" in figure["layout"]["annotations"][0]["text"]

    assert run_id in [row["run_id"] for row in api.switch_runs(lab_jobs)]
    chips, note, table = client.predict(run_id, "the cat sees a red ball .", api_name="/understand_routing")
    assert 'data-expert="' in chips and "layer 2" in chips and "no token is dropped" in note
    assert table["headers"] == ["layer", "position", "token", "expert", "probability"]
    assert len(table["data"]) >= 5


def test_routing_errors_are_messages(client, lab_jobs):
    dense = lab_jobs.runs_dir / "gpt-tiny-dense-for-routing"  # a finished dense run's folder, as the page lists it
    dense.mkdir(parents=True, exist_ok=True)
    (dense / "config.json").write_text(json.dumps({"family": "gpt", "model": {"ffn": "dense"}}))
    (dense / "status.json").write_text(json.dumps({"state": "finished", "step": 1, "total_steps": 1}))
    try:
        with pytest.raises(Exception, match="has no Switch layers"):
            client.predict(dense.name, "the cat", api_name="/understand_routing")
        with pytest.raises(Exception, match="Choose a run with Switch layers|No run with Switch layers"):
            client.predict("", "the cat", api_name="/understand_routing")
        figure = json.loads(client.predict(dense.name, api_name="/show_routing")["plot"])
        assert "No Switch layers" in figure["layout"]["annotations"][0]["text"]
    finally:
        shutil.rmtree(dense)  # the other modules' tests see only real runs


def test_routing_series_and_figure():
    rows = [{"step": s, "switch": {"layers": ["layer 2", "layer 4"], "n_experts": 2, "routed": [[0.6, 0.4], [0.5, 0.5]],
                                   "dropped": [[0.1, 0.0], [0.0, 0.0]], "tokens": [64, 64]}} for s in (1, 2, 3)]
    rows.append({"split": "val", "step": 3, "loss": 1.0})
    series = routing_series(rows)
    assert list(series) == ["layer 2", "layer 4"]
    assert series["layer 2"]["dropped"][0] == [(1, 0.1), (2, 0.1), (3, 0.1)]
    figure = routing_figure(rows)
    assert len(figure.data) == 2 * 2 * 2  # 2 layers x 2 experts x (routed, dropped)
    assert [trace.showlegend for trace in figure.data[:4]] == [True, True, False, False]


# ------------------------------------------------------------------------------------------------ the Scaling tab


def sweep_controls(family="gpt", sizes="16x1", steps=2, preset="tiny", switch=False, n_experts=8, capacity=1.25,
                   every=2, max_minutes=5, device="cpu", seed=0, budget_flops=0, budget_minutes=0):
    return [family, sizes, steps, preset, switch, n_experts, capacity, every, max_minutes, device, seed, budget_flops,
            budget_minutes]


def test_scaling_tab_command_and_bad_sizes(client):
    command = client.predict(*sweep_controls(sizes="32x1,64x2", switch=True), api_name="/sweep_command")
    assert command.startswith("python -m lab_models sweep --family gpt --sizes 32x1,64x2 --steps 2")
    assert "--switch --n-experts 8" in command and "--max-minutes 5.0" in command
    assert client.predict(*sweep_controls(sizes="64y2"), api_name="/sweep_command").startswith("# unknown size")
    iso = client.predict(*sweep_controls(sizes="32x1,64x2", budget_flops=1e13), api_name="/sweep_command")
    assert "--budget-flops 10000000000000.0" in iso and "--steps" not in iso  # the budget replaces the steps
    timed = client.predict(*sweep_controls(budget_minutes=1.5), api_name="/sweep_command")
    assert "--budget-minutes 1.5" in timed
    both = client.predict(*sweep_controls(budget_flops=1e13, budget_minutes=1), api_name="/sweep_command")
    assert both.startswith("# give a sweep one of --steps, --budget-flops or --budget-minutes")
    with pytest.raises(Exception, match="unknown size '64y2'"):
        client.predict(*sweep_controls(sizes="64y2"), api_name="/start_sweep")


def test_a_sweep_from_the_page_trains_and_is_drawn(client, lab_jobs, lab_home_dir):
    picker = client.predict(*sweep_controls(sizes="16x1", steps=2), api_name="/start_sweep")
    [sweep_id] = picker["value"] if isinstance(picker, dict) else picker
    deadline = time.time() + 180
    while True:
        [sweep] = [s for s in api.list_sweeps(lab_jobs) if s["sweep_id"] == sweep_id]
        if sweep["status"].get("state") not in ("queued", "running"):
            break
        assert time.time() < deadline, f"the sweep did not finish within 180 s: {sweep['status']}"
        time.sleep(1)
    assert sweep["status"]["state"] == "finished", sweep["status"]
    assert [p["state"] for p in sweep["points"]] == ["finished"]
    status, plot, fits, table = client.predict([sweep_id], api_name="/show_sweeps")
    figure = json.loads(plot["plot"])
    assert figure["layout"]["xaxis"]["type"] == "log" and figure["layout"]["yaxis"]["type"] == "log"
    assert [trace["name"] for trace in figure["data"]] == ["gpt dense", "gpt dense"]  # the point, in both panels
    assert "no fit (a power law needs at least 2 points" in fits and "1 of 1 runs" in status
    assert [row[2] for row in table["data"]] == ["16x1"]
