"""The Train tab, driven through `gradio_client` as a program would drive the page: start a tiny run, watch its
metrics grow, stop it, resume it, stop it again; bad inputs give a clear error and the app keeps answering; a run
that crashes is reported in the page. Plus unit tests of the tab's pure helpers (figures, tables, settings)."""
from __future__ import annotations

import json
import time

import pandas as pd
import pytest
from gradio_client import Client

from app.display import format_duration
from app.train.addon_figures import addon_figure
from app.train.figures import (MARKER_LIMIT, MAX_POINTS, compare_figure, loss_figure, progress_html, runs_table,
                               split_rows, status_markdown, thin)
from app.train.tab import MAX_OBJECTIVES, SETTINGS_HEADERS, leak_demo_visible, setting_text, settings_overrides
from lab_models import api

POLL_S = 0.3


@pytest.fixture(scope="module")
def client(running_app, lab_jobs):
    url, _ = running_app
    yield Client(url, verbose=False)
    for row in api.list_runs(lab_jobs):  # leave no trainer running for the modules after this one
        if row.get("state") in ("queued", "running"):
            try:
                api.stop_training(lab_jobs, row["run_id"])
            except ValueError:
                pass


def controls(family="gpt", *, preset="tiny", corpus="", tokenizer="", steps=2000, seed=0, device="cpu",
             settings=None, weights=None):
    """The /start_training and /training_command inputs: (family, ..., settings, on_1, weight_1, ..., on_4, w_4)."""
    objectives = api.family(family).objectives if family in api.TRAINABLE_FAMILIES else ()
    weights = dict(weights or {})
    rows = []
    for index in range(MAX_OBJECTIVES):
        if index < len(objectives):
            weight = weights.get(objectives[index].name, objectives[index].weight)
            rows += [weight is not None and weight != 0, weight if weight is not None else 0]
        else:
            rows += [False, 0]
    defaults = api.family_settings(family) if family in api.TRAINABLE_FAMILIES else {}
    table = {"headers": SETTINGS_HEADERS,
             "data": [[k, v, setting_text(defaults[k]) if k in defaults else "", ""]
                      for k, v in (settings or {}).items()]}
    return [family, preset, corpus, tokenizer, steps, seed, device, table, *rows]


def watch(client, run_id) -> dict:
    progress, status, plot, log, details = client.predict(run_id, api_name="/show_run")
    return {"progress": progress, "status": status, "plot": plot, "log": log, **details}


def wait_for(client, run_id, predicate, timeout: float, what: str) -> dict:
    deadline = time.time() + timeout
    while True:
        seen = watch(client, run_id)
        if predicate(seen):
            return seen
        if time.time() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s; last status {seen['state']!r}, step {seen['step']}, "
                                 f"message {seen['message']!r}")
        time.sleep(POLL_S)


def test_start_watch_stop_resume_stop(client):
    run_id = client.predict(*controls("gpt", steps=2000), api_name="/start_training")
    assert run_id.startswith("gpt-tiny-")

    seen = wait_for(client, run_id, lambda s: s["metric_rows"] >= 3, 45, "three metrics rows")
    assert seen["state"] == "running" and seen["total_steps"] == 2000
    rows_before = seen["metric_rows"]
    assert "train-running" in seen["progress"] and "tokens/s" in seen["progress"] and "ETA" in seen["progress"]
    figure = json.loads(seen["plot"]["plot"])
    assert [trace["name"] for trace in figure["data"]][0] == "train loss (total)"
    assert len(figure["data"][0]["x"]) >= 3

    seen = wait_for(client, run_id, lambda s: s["metric_rows"] > rows_before, 20, "the metrics to grow")

    client.predict(run_id, api_name="/stop_run")
    seen = wait_for(client, run_id, lambda s: s["state"] != "running", 30, "the run to stop")
    assert seen["state"] == "stopped", seen["message"]
    stopped_at = seen["step"]
    assert 0 < stopped_at < 2000

    progress, status, *_ , details = client.predict(run_id, api_name="/resume_run")
    assert details["state"] in ("queued", "running")
    seen = wait_for(client, run_id, lambda s: s["state"] == "running" and s["step"] > stopped_at, 40,
                    "the resumed run to train on")
    client.predict(run_id, api_name="/stop_run")
    seen = wait_for(client, run_id, lambda s: s["state"] != "running", 30, "the resumed run to stop")
    assert seen["state"] == "stopped"

    table = client.predict(api_name="/list_runs")[0]
    row = next(r for r in table["data"] if r[0] == run_id)
    assert row[4] == "stopped" and row[5].endswith("/ 2000")
    comparison = json.loads(client.predict([run_id], "loss", api_name="/compare_runs")["plot"])
    assert [trace["name"] for trace in comparison["data"]] == [run_id]


def test_leak_demo_queues_xlnet_with_and_without_two_streams(client, lab_jobs):
    assert leak_demo_visible("xlnet")["visible"] is True and leak_demo_visible("bert")["visible"] is False
    client.predict("xlnet", api_name="/leak_demo_visibility")  # a layout group: no value comes back
    leaky, compared, metric = client.predict(api_name="/leak_demo")
    assert metric == "val_loss" and len(compared) == 2 and compared[1] == leaky
    requests = [json.loads((lab_jobs.run_dir(run_id) / "job.json").read_text()) for run_id in compared]
    assert [r["family"] for r in requests] == ["xlnet", "xlnet"]
    assert [r["settings"].get("two_stream") for r in requests] == ["true", "false"]
    assert [r["preset"] for r in requests] == ["tiny", "tiny"]
    for run_id in compared:
        api.stop_training(lab_jobs, run_id)
    for run_id in compared:
        wait_for(client, run_id, lambda s: s["state"] not in ("queued", "running"), 30, "the demo run to stop")


def test_the_command_repeats_the_run_headlessly(client):
    command = client.predict(*controls("bert", steps=0, settings={"mask_rate": "0.2"},
                                       weights={"nsp": 0}), api_name="/training_command")
    assert command.startswith("python -m lab_models train --family bert --out RUN_DIR")
    assert "--objective mlm=1.0 --objective nsp=0.0" in command and "--steps" not in command
    assert "--set mask_rate=0.2" in command  # only the edited setting is passed on
    assert command.count("--set") == 1


def test_a_budget_replaces_the_steps_in_the_run_and_its_command(lab_jobs):
    from app.train.tab import TrainView

    view = TrainView(lab_jobs.home, lab_jobs)
    switch_off = [False, 8, 1.25, 2, 0.001]  # the Switch section's controls, off
    command = view.command(*controls("bert", steps=0), *switch_off, "", 3e12, 0)
    assert command.endswith("--budget-flops 3000000000000.0") and "--steps" not in command
    assert view.command(*controls("gpt", steps=0), *switch_off, "", 0, 1.5).endswith("--budget-minutes 1.5")
    assert view.command(*controls("gpt", steps=300), *switch_off, "", 0, 0).count("--steps 300") == 1
    refused = view.command(*controls("gpt", steps=300), *switch_off, "", 1e12, 0)
    assert refused.startswith("# Give steps, a FLOP budget or a budget in minutes, not steps and budget_flops")
    assert view.command(*controls("gpt", steps=0), *switch_off, "", -1, 0).startswith(
        "# Budget: training FLOPs must be a positive number, or 0 for none")


@pytest.mark.parametrize("inputs, message", [
    (controls("nope"), "Unknown or untrainable family 'nope'"),
    (controls("bert", weights={"mlm": -1.0}), "weight of mlm must be 0 or more"),
    (controls("bert", weights={"mlm": 0, "nsp": 0}), "Turn on at least one of BERT's objectives"),
    (controls("bert", settings={"mask_rate": "lots"}), "setting 'mask_rate' of BERT is a number"),
    (controls("bert", settings={"nsp": "maybe"}), "is on/off"),
    (controls("bert", settings={"no_such_setting": "1"}), "BERT has no setting 'no_such_setting'"),
    (controls("gpt", steps=-5), "Steps must be a whole number from 1 to 10,000,000, or 0 for the preset's"),
    (controls("gpt", corpus="no-such-corpus"), "Unknown corpus 'no-such-corpus'"),
])
def test_bad_inputs_give_a_clear_error_and_the_app_stays_up(client, inputs, message):
    with pytest.raises(Exception, match=message):
        client.predict(*inputs, api_name="/start_training")
    assert client.predict(*inputs, api_name="/training_command").startswith("# ")  # the preview says why
    assert client.predict(*controls("gpt"), api_name="/training_command").startswith("python -m lab_models train")


def test_buttons_without_a_run_say_so(client):
    with pytest.raises(Exception, match="Choose a run first"):
        client.predict("", api_name="/stop_run")
    with pytest.raises(Exception, match="Unknown run"):
        client.predict("gpt-tiny-19990101-000000-dead", api_name="/resume_run")


@pytest.mark.parametrize("run_ids, metric", [([["a"]], "loss"), (["a"], ["loss"]), ([["a"]], ["loss"])])
def test_the_runs_comparison_refuses_a_list_where_one_name_belongs_and_the_app_stays_up(client, run_ids, metric):
    """An API client may send a list inside the run ids or as the plotted metric: the comparison (`/compare_runs`)
    and the runs table that draws it (`/list_runs`) refuse it with a message, never an exception's name."""
    for endpoint in ("/compare_runs", "/list_runs"):
        with pytest.raises(Exception, match=r"Pick (the plotted metric )?from the list") as refused:
            client.predict(run_ids, metric, api_name=endpoint)
        assert "TypeError" not in str(refused.value) and "Something went wrong" not in str(refused.value)
    assert client.predict([], "loss", api_name="/compare_runs")  # still answering


def test_a_list_as_the_compared_metric_is_refused_in_the_readers_language():
    import gradio as gr

    from app.i18n.language import reading_language
    from app.train.tab import TrainView

    view = TrainView(None, None)
    with pytest.raises(gr.Error) as english:
        view.compare(["a"], ["loss"])
    assert english.value.message == ("Pick the plotted metric from the list (loss, val_loss, val_bits_per_byte, "
                                     "val_topic_gap, val_uniformity, val_bleu_en_zh, val_bleu_zh_en, val_chrf_en_zh, "
                                     "val_chrf_zh_en): one name, got list.")
    with reading_language("zh"), pytest.raises(gr.Error) as chinese:
        view.compare([], {"metric": "loss"})
    assert chinese.value.message.startswith("请从列表中选择要绘制的指标（loss, val_loss, ")
    assert chinese.value.message.endswith("）：应为一个名称，收到的是 dict。")


def test_a_crashed_run_is_reported_in_the_page(client, tmp_path):
    # a setting of the right type that only the trainer refuses (a rate above 1): queued, then the trainer fails
    run_id = client.predict(*controls("bert", settings={"mask_rate": "5"}, steps=5), api_name="/start_training")
    seen = wait_for(client, run_id, lambda s: s["state"] not in ("queued", "running"), 45, "the run to fail")
    assert seen["state"] == "failed" and seen["message"]
    assert "The run failed" in seen["status"] and "train-failed" in seen["progress"]
    assert client.predict(*controls("gpt"), api_name="/training_command").startswith("python")  # still up


def test_the_page_trains_on_corpus_names_never_on_paths(client, tmp_path):
    text = tmp_path / "private.txt"
    text.write_text("someone else's words .\n" * 50)  # a file on the server: the page must not train on it
    with pytest.raises(Exception, match=r"Unknown corpus .*\(the page takes corpus names, not paths\)"):
        client.predict(*controls("gpt", corpus=str(text), steps=5), api_name="/start_training")


# ------------------------------------------------------------------------------------------------ pure helpers
ROWS = [
    {"split": "train", "step": 1, "loss": 7.0, "losses": {"mlm": 6.3, "nsp": 0.7}, "tokens_per_s": 1000.0},
    {"split": "train", "step": 2, "loss": 6.8, "losses": {"mlm": 6.1, "nsp": 0.7}, "tokens_per_s": 1100.0},
    {"split": "val", "step": 2, "loss": 6.9, "bits_per_byte": 2.9},
    {"split": "train", "step": 2, "loss": 6.7, "losses": {"mlm": 6.0, "nsp": 0.7}},  # after a resume: this one wins
]


def test_the_runs_table_says_a_runs_budget_beside_its_steps(tmp_path):
    from app.train.figures import runs_table
    from lab_models.training.jobs.store import _budget_of

    run = {"run_id": "r", "family": "gpt", "state": "finished", "step": 59, "total_steps": 59}
    flops = runs_table([{**run, "budget": {"flops": 3e12, "steps": 59}}]).iloc[0].tolist()[5]
    minutes = runs_table([{**run, "budget": {"minutes": 0.25, "steps": 59}}]).iloc[0].tolist()[5]
    assert (flops, minutes) == ("59 / 59 · budget 3e12 FLOPs", "59 / 59 · budget 0.25 min")
    assert runs_table([run]).iloc[0].tolist()[5] == "59 / 59"
    config = {"train": {"budget_minutes": 2.0}, "budget": {"minutes": 2.0, "steps": 410, "seconds_per_step": 0.3}}
    assert _budget_of(config) == {"minutes": 2.0, "steps": 410}
    assert _budget_of({"train": {"budget_flops": 1e12}}) == {"flops": 1e12, "steps": None}  # not yet counted
    assert _budget_of({"train": {"steps": 50}}) is None


def test_split_rows_keeps_the_last_row_of_each_step():
    train, val = split_rows(ROWS)
    assert [row["loss"] for row in train] == [7.0, 6.7] and [row["step"] for row in val] == [2]


def test_thin_keeps_the_last_point():
    assert thin(list(range(10)), 4) == [0, 3, 6, 9]
    assert thin(list(range(11)), 4)[-1] == 10 and len(thin(list(range(5000)))) <= 601


def test_loss_figure_has_total_objectives_and_validation():
    figure = loss_figure(ROWS, title="run")
    assert [trace.name for trace in figure.data] == ["train loss (total)", "train mlm", "train nsp",
                                                     "validation loss"]
    assert list(figure.data[0].y) == [7.0, 6.7]
    single = loss_figure([{"step": 1, "loss": 3.0, "losses": {"clm": 3.0}}])
    assert [trace.name for trace in single.data] == ["train loss (total)"]  # one objective: no duplicate line
    assert not loss_figure([]).data  # an empty plot with a note, not an error


def test_a_long_runs_validation_points_stay_bounded_and_lose_their_markers_in_every_live_figure():
    """The live figures are drawn again all through a run: the page keeps each marker as an SVG element, so a run
    evaluated every 25 steps for an hour would grow the open page without end."""
    def val_rows(count):
        return [{"split": "val", "step": 25 * (i + 1), "loss": 5.0 - i / count, "bits_per_byte": 2.0,
                 "alignment": 0.5} for i in range(count)]

    few, many = val_rows(MARKER_LIMIT), val_rows(20 * MAX_POINTS)
    figures = {"loss": lambda rows: loss_figure(rows).data[-1],
               "compare": lambda rows: compare_figure({"a": rows}, "val_bits_per_byte").data[0],
               "add-ons": lambda rows: addon_figure(rows).data[0]}
    for name, trace_of in figures.items():
        short, long = trace_of(few), trace_of(many)
        assert short.mode == "lines+markers" and len(short.x) == MARKER_LIMIT, name
        assert long.mode == "lines" and MAX_POINTS // 2 <= len(long.x) <= MAX_POINTS + 1, name
        assert long.x[-1] == many[-1]["step"], name  # the newest evaluation is always drawn


def test_compare_figure_overlays_runs():
    figure = compare_figure({"a": ROWS, "b": ROWS[:1]}, "val_bits_per_byte")
    assert [trace.name for trace in figure.data] == ["a", "b"] and list(figure.data[0].y) == [2.9]
    with pytest.raises(ValueError, match="Unknown metric"):
        compare_figure({"a": ROWS}, "accuracy")


def test_progress_html_and_status():
    summary = {"run_id": "r", "state": "running", "step": 50, "total_steps": 200, "tokens_per_s": 1234.5,
               "eta_s": 75, "message": "training"}
    bar = progress_html(summary)
    assert "width:25.0%" in bar and "1,234 tokens/s" in bar and "ETA 1 min 15 s" in bar
    queued = {"run_id": "r", "state": "queued", "queue_position": 2, "step": 0}
    assert "queued (position 2)" in progress_html(queued)
    # the place in the queue is the bar's alone: the line under it, redrawn less often, would name an older one
    assert "**queued**" in status_markdown(queued) and "position" not in status_markdown(queued)
    assert "width:100.0%" in progress_html({"state": "finished", "step": 10, "total_steps": 10})
    failed = status_markdown({"run_id": "r", "state": "failed", "message": "boom"}, "Traceback\nValueError: boom")
    assert "The run failed:** boom" in failed and "ValueError: boom" in failed
    assert format_duration(42) == "42 s" and format_duration(7260) == "2 h 01 min" and format_duration(None) == "—"


def test_runs_table_columns_and_blanks():
    table = runs_table([{"run_id": "r", "family": "bert", "preset": "tiny", "corpus": None, "state": "stopped",
                         "interrupted": True, "step": 5, "total_steps": None, "loss": 6.12345, "val_loss": None}])
    assert list(table.columns)[:6] == ["run id", "family", "preset", "corpus", "state", "step / total"]
    assert table.iloc[0].tolist() == ["r", "bert", "tiny", "(preset default)", "stopped (interrupted)", "5 / ?",
                                      "6.1235", "", "", ""]


def test_settings_table_explains_each_setting_from_the_code():
    from app.train.tab import settings_frame

    frame = settings_frame("xlnet")
    explained = dict(zip(frame["setting"], frame["what it does"]))
    assert explained["k"].startswith("K: about 1/K of the tokens are predicted")
    assert "leak" in explained["two_stream"]
    assert list(frame.columns) == SETTINGS_HEADERS


def test_settings_overrides_pass_only_edited_rows():
    frame = pd.DataFrame([["mask_rate", "0.2", "0.15", "fraction"], ["nsp", "true", "true", "NSP"], ["", "", "", ""]],
                         columns=SETTINGS_HEADERS)
    assert settings_overrides(frame) == {"mask_rate": "0.2"}
    assert settings_overrides({"headers": SETTINGS_HEADERS, "data": [["nsp", "false", "true", ""]]}) == {"nsp": "false"}
    assert settings_overrides(None) == {}


def test_every_objective_and_compared_metric_has_its_text_in_both_languages():
    """The bilingual page: an objective's help text and a comparison metric's name come from app/i18n/locales (English
    and Chinese), never from an English-only description; the family's own name stays the checkbox's label."""
    from app.i18n.language import english, translations
    from app.train.figures import COMPARE_METRICS
    from app.train.tab import METRIC_CHOICES, OBJECTIVE_TITLES, TrainView, objective_info, weight_label

    for spec in api.trainable_families():
        for objective in spec.objectives:
            assert objective.name in OBJECTIVE_TITLES, f"{spec.name}'s {objective.name} has no text in app/i18n/locales"
            assert objective_info(objective) == str(OBJECTIVE_TITLES[objective.name])
    assert set(METRIC_CHOICES) == set(COMPARE_METRICS)
    assert all(english(f"train.metric_{key}") == label for key, label in COMPARE_METRICS.items())
    assert translations()["zh"]["train"]["metric_val_loss"] == "验证损失"
    assert english("train.objective_mlm") == "masked language modelling: predict the corrupted tokens"
    assert weight_label("mlm").endswith(' "key": "train.weight_of"} mlm')  # translated in the browser: "权重 mlm"
    view = TrainView(None, None)
    tokenizer, *rows, _, note = view.family_defaults("spanbert")
    boxes = rows[0::2]
    assert [box["label"] for box in boxes[:3]] == ["mlm", "sbo", "adversarial"]
    assert [box["info"] for box in boxes[:2]] == [str(OBJECTIVE_TITLES["mlm"]), str(OBJECTIVE_TITLES["sbo"])]
    # what a handler returns is plain JSON (Gradio's /call route cannot encode a gr.I18nData): markers as strings
    json.dumps([tokenizer, rows, note, view.corpus_choices(), status_markdown(None), progress_html(None)])
    from app.scaling.figures import fits_markdown, status_html
    json.dumps([fits_markdown([]), status_html([])])
