"""Reliability suite, load: many clients at once while a run trains, and the queue of training starts.

What it promises, and how it proves it (a CI-sized version of benchmarks/bench_load.py, against the test session's
app, loopback only, with a bounded number of clients, calls and seconds):
- 5 gradio_client clients, each in its own thread, call the Mask Explorer 3 times each while a tiny run trains in its
  worker: every call is answered, none with an error, none hangs. (Latency and memory targets are measured by
  `python benchmarks/bench_load.py`, 20 clients x 10 calls and 200 calls for memory: timings belong in a benchmark.)
- Two clients press Start at the same moment: one run trains, the other waits in the queue at position 1; a third
  client presses Stop on the running one: that run stops (with its checkpoint), and the queued one takes the device.
"""
from __future__ import annotations

import time

from benchmarks.bench_load import gpt_start_inputs, hammer_mask_explorer, two_starts_and_a_stop, wait_training

CLIENTS = 5
CALLS = 3


def wait_until_idle(jobs, timeout: float = 300.0) -> None:
    """Runs other tests left queued or running would take the device first: wait for them to end."""
    from lab_models import api

    deadline = time.monotonic() + timeout
    while any(row.get("state") in ("queued", "running") for row in api.list_runs(jobs)):
        assert time.monotonic() < deadline, "other runs kept the device busy"
        time.sleep(0.5)


def test_many_clients_explore_masks_while_a_run_trains(running_app, lab_jobs):
    from gradio_client import Client

    url, _ = running_app
    wait_until_idle(lab_jobs)
    client = Client(url, verbose=False)
    background = client.predict(*gpt_start_inputs(100_000), api_name="/start_training")
    try:
        wait_training(client, background)
        result = hammer_mask_explorer(url, CLIENTS, CALLS, deadline_s=240)
        assert not result.errors, result.errors[:5]
        assert len(result.latencies) == CLIENTS * CALLS
        assert lab_jobs.status(background)["state"] == "running"  # it trained all along
    finally:
        client.predict(background, api_name="/stop_run")
    deadline = time.monotonic() + 120
    while lab_jobs.status(background)["state"] not in ("stopped", "finished", "failed", "died"):
        assert time.monotonic() < deadline, "the background run did not stop"
        time.sleep(0.3)
    assert lab_jobs.status(background)["state"] == "stopped"


def test_two_starts_queue_and_a_third_clients_stop_stops_the_right_run(running_app, lab_jobs):
    url, _ = running_app
    wait_until_idle(lab_jobs)
    seen = two_starts_and_a_stop(url)
    assert lab_jobs.status(seen["stopped"])["state"] == "stopped"
    assert lab_jobs.status(seen["then_running"])["state"] in ("stopped", "finished")  # stopped by the cleanup
    assert seen["stopped_at_step"] >= 1


def test_the_mask_explorer_figure_is_laid_out_as_make_subplots_lays_it_out():
    """anatomy_figure writes its figure as one specification (4x faster, for the load above); its axes, domains and
    stream titles must be exactly those plotly's make_subplots gives for the same streams."""
    from plotly.subplots import make_subplots

    from app.explorer.figures import anatomy_figure
    from lab_models import api

    tokens = "the quick brown fox jumps over the lazy dog".split()
    for family in ("bert", "xlnet", "t5"):  # one, two and three streams
        figure = anatomy_figure(api.anatomy(family, tokens)).to_dict()
        layout, streams = figure["layout"], len(figure["data"])
        spacing = 170 / layout["height"] if streams > 1 else 0.0
        titles = [annotation["text"] for annotation in layout["annotations"]]
        reference = make_subplots(rows=streams, cols=1, subplot_titles=titles, vertical_spacing=spacing).to_dict()
        for name in [key for key in reference["layout"] if key.startswith(("xaxis", "yaxis"))]:
            for field in ("anchor", "domain"):
                assert layout[name][field] == reference["layout"][name][field], (family, name, field)
        assert layout["annotations"] == reference["layout"]["annotations"]
        assert [(trace["xaxis"], trace["yaxis"]) for trace in figure["data"]] == [
            ("x", "y"), ("x2", "y2"), ("x3", "y3")][:streams]
