"""The Understand tab's Fine-tune section (app/understand/finetune_panel.py, app/understand/finetune_figures.py) and the
api's finetune section: unit tests of the figures, tables and parsing, then every `understand_finetune_*` endpoint
driven through `gradio_client` against the tiny gpt and bert runs that tests/support/tiny_runs.py trains (shared with the
Understand tab's tests): real fine-tunings queued on the app's job manager, watched until they finish, stopped, and
refused.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pandas as pd
import pytest
from gradio_client import Client, handle_file

from app.understand.finetune_figures import (TABLE_COLUMNS, accuracy_figure, best_per_run_and_task,
                                             csv_summary_markdown, defaults_markdown, leaderboard_table, progress_html,
                                             task_markdown)
from app.understand.finetune_panel import FinetuneView
from lab_models import api
from lab_models.text.tasks import load_task

from tests.support.tiny_runs import train_tiny_runs

FAMILIES = ("gpt", "bert")
STEPS = 30
WAIT_S = 240  # the app's job manager runs one job per device at a time, so other modules' runs may go first
TERMINAL = ("finished", "stopped", "failed")


def leaderboard_frame(rows) -> pd.DataFrame:
    """A frame shaped like api.finetune_leaderboard's, from (run, family, task, accuracy, baseline, λ) tuples."""
    return pd.DataFrame([{"finetune": f"{run}--{task}--{i}", "pretrained run": run, "family": family, "task": task,
                          "pooling": "first", "accuracy": accuracy, "macro F1": accuracy / 2,
                          "majority baseline": baseline, "steps": 30, "seconds": 1.234, "state": "finished",
                          "λ": weight} for i, (run, family, task, accuracy, baseline, weight) in enumerate(rows)],
                        columns=api.FINETUNE_LEADERBOARD_COLUMNS)


# ------------------------------------------------------------------------------------------------ figures and tables
def test_accuracy_figure_has_one_bar_trace_per_run_grouped_by_task_with_the_baseline():
    frame = leaderboard_frame([("bert-a", "bert", "topic", 0.8, 0.25, 0.0), ("gpt-b", "gpt", "topic", 0.5, 0.25, 0.5),
                               ("gpt-b", "gpt", "topic", 0.7, 0.25, 0.0), ("bert-a", "bert", "sentiment", 0.9, 0.34,
                                                                           0.0)])
    figure = accuracy_figure(frame, {"topic": "Topic (5-way)", "sentiment": "Sentiment (3-way)"})
    bars = [trace for trace in figure.data if trace.type == "bar"]
    assert [trace.name for trace in bars] == ["bert-a (bert)", "gpt-b (gpt)"]
    assert list(bars[0].x) == ["Topic (5-way)", "Sentiment (3-way)"]
    assert list(bars[0].y) == [0.8, 0.9]
    assert list(bars[1].y) == [0.7, None]  # gpt-b's best topic run (λ = 0) is drawn; it has no sentiment run
    assert list(bars[1].text) == ["0.700", ""]
    hover = [trace for trace in figure.data if trace.type == "scatter" and trace.hovertext]
    assert len(hover) == 1 and list(hover[0].y) == [0.25, 0.34]
    lines = sorted((shape.x0, shape.x1, shape.y0) for shape in figure.layout.shapes)
    assert lines == [(-0.4, 0.4, 0.25), (0.6, 1.4, 0.34)]  # across each task's group of bars
    assert "majority baseline" in [trace.name for trace in figure.data if trace.showlegend is not False]
    assert len(best_per_run_and_task(frame)) == 3


def test_accuracy_figure_without_results_says_what_to_do():
    figure = accuracy_figure(leaderboard_frame([]))
    assert not figure.data and "press Start" in figure.layout.annotations[0].text


def test_leaderboard_table_rounds_and_orders_the_columns():
    table = leaderboard_table(leaderboard_frame([("bert-a", "bert", "topic", 0.81234, 0.236, 0.0)]))
    assert list(table.columns) == TABLE_COLUMNS
    row = table.iloc[0]
    assert (row["accuracy"], row["macro F1"], row["majority baseline"], row["seconds"]) == (0.812, 0.406, 0.236, 1.2)
    assert row["λ"] == 0.0 and row["steps"] == 30 and row["finetune"] == "bert-a--topic--0"
    assert list(leaderboard_table(leaderboard_frame([])).columns) == TABLE_COLUMNS


def test_progress_html_shows_state_steps_and_the_latest_accuracy():
    assert "no fine-tuning" in progress_html([])
    running = {"finetune_id": "bert-a--topic--1", "run_id": "bert-a", "family": "bert", "task": "topic",
               "pooling": "first", "lm_aux_weight": 0.0, "state": "running", "step": 15, "total_steps": 60,
               "val_accuracy": 0.4567, "val_step": 12, "train_accuracy": 0.5, "has_result": False}
    finished = {**running, "finetune_id": "gpt-b--topic--2", "run_id": "gpt-b", "family": "gpt", "state": "finished",
                "step": 60, "accuracy": 0.75, "seconds": 42, "has_result": True, "lm_aux_weight": 0.5}
    queued = {**running, "finetune_id": "x", "state": "queued", "step": 0, "queue_position": 2, "val_accuracy": None,
              "val_step": None, "train_accuracy": None}
    page = progress_html([running, finished, queued, {"finetune_id": "gone", "error": "Unknown run 'gone'"}])
    assert re.findall(r'data-state="(\w+)"', page) == ["running", "finished", "queued", "error"]
    assert "step <b>15</b> / 60 (25%)" in page and "validation accuracy <b>0.457</b> (step 12)" in page
    assert "batches 0.500" in page and "pooling first, λ 0" in page
    assert "validation accuracy <b>0.750</b> (final)" in page and "λ 0.5" in page and "42 s" in page
    assert "queued (position 2)" in page and "Unknown run &#x27;gone&#x27;" in page
    assert 'style="width:25.0%' in page and 'style="width:100.0%' in page


def test_markdown_helpers_describe_tasks_csv_files_and_defaults():
    topic = api.FINETUNE_TASKS["topic"]
    assert "Topic (5-way)" in task_markdown(topic) and "animals, food, city, school, sports" in task_markdown(topic)
    assert "CSV" in task_markdown(None, csv=True)
    summary = {"name": "csv:r.csv", "title": "r.csv: label from text", "kind": "sequence", "label_names": ["a", "b"],
               "train_examples": 40, "validation_examples": 10, "train_label_counts": {"a": 30, "b": 10},
               "majority_baseline": 0.7}
    text = csv_summary_markdown(summary)
    assert "40 training and 10 validation sentences, 2 labels" in text and "a 30, b 10" in text and "0.700" in text
    assert csv_summary_markdown(None, "r.csv has no column 'x'") == "⚠️ r.csv has no column 'x'"
    table = defaults_markdown([{"run_id": "g", "family": "gpt", "pooling": "last", "lm_aux_weight": 0.5},
                               {"run_id": "b", "family": "bert", "pooling": "first", "lm_aux_weight": 0.0}])
    assert "| `g` | gpt | last (the final token's state; GPT §3.3) | 0.5 |" in table
    assert "| `b` | bert | first ([CLS], BERT §4) | 0 |" in table


def test_the_controls_are_parsed_with_messages_a_person_can_act_on(tmp_path):
    view = FinetuneView(tmp_path)
    task, options = view.options("topic", None, None, None, "", "auto", "", 40, 16, "", 3)
    assert task == "topic" and options == {"pooling": "auto", "lm_aux_weight": None, "steps": 40, "batch_size": 16,
                                           "lr": None, "seed": 3}
    _, options = view.options("topic", None, None, None, "", "mean", "0.25", None, "", "2e-3", None)
    assert (options["lm_aux_weight"], options["lr"], options["steps"], options["batch_size"], options["seed"]) == \
        (0.25, 2e-3, api.FINETUNE_DEFAULTS["steps"], api.FINETUNE_DEFAULTS["batch_size"], 0)
    bad = {"λ": ("topic", "auto", "-1", 10, 8, "", 0), "Steps": ("topic", "auto", "", 2.5, 8, "", 0),
           "Batch size": ("topic", "auto", "", 10, 5000, "", 0), "learning rate": ("topic", "auto", "", 10, 8, "0", 0),
           "Unknown pooling": ("topic", "max", "", 10, 8, "", 0), "Unknown task": ("nope", "auto", "", 10, 8, "", 0),
           "Upload a CSV": ("csv", "auto", "", 10, 8, "", 0)}
    for message, (task, pooling, weight, steps, batch, lr, seed) in bad.items():
        with pytest.raises(ValueError, match=message):
            view.options(task, None, "text", "label", "", pooling, weight, steps, batch, lr, seed)


# ------------------------------------------------------------------------------------------------ the api section
def test_api_defaults_follow_the_papers():
    assert api.default_lm_aux_weight("gpt") == api.default_lm_aux_weight("gpt2") == 0.5
    assert api.default_lm_aux_weight("bert") == api.default_lm_aux_weight("t5") == 0.0
    assert (api.default_pooling("gpt"), api.default_pooling("xlnet")) == ("last", "first")
    with pytest.raises(ValueError):
        api.default_lm_aux_weight("no-such-family")
    assert [spec.name for spec in api.finetune_tasks()] == ["sentiment", "topic", "entailment", "tagging", "scope",
                                                            "story_order"]
    assert api.FINETUNE_DEFAULTS == {"pooling": "auto", "steps": 200, "batch_size": 32, "seed": 0}


def write_csv(path: Path, n: int = 60) -> Path:
    lines = ["text;label;other"] + [f"the food was {'great' if i % 2 else 'bad'} number {i};"
                                    f"{'pos' if i % 2 else 'neg'};{i}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_api_reads_stores_and_checks_a_csv_task(tmp_path):
    path = write_csv(tmp_path / "reviews.csv")
    assert api.csv_columns(path) == ["text", "label", "other"]
    summary = api.check_csv_task(path, "text", "label")
    assert summary["label_names"] == ["neg", "pos"] and summary["train_examples"] + summary[
        "validation_examples"] == 60
    stored = api.store_task_csv(path, tmp_path / "home")
    assert stored.name == "reviews.csv" and stored.read_bytes() == path.read_bytes()
    assert api.store_task_csv(path, tmp_path / "home") == stored  # the same content is stored once
    with pytest.raises(ValueError, match="no column 'nope'"):
        api.check_csv_task(path, "text", "nope")
    with pytest.raises(ValueError, match="Upload a CSV file first"):
        api.csv_columns("")
    (tmp_path / "one.csv").write_text("text,label\n" + "".join(f"s {i},x\n" for i in range(20)))
    with pytest.raises(ValueError, match="only one label"):
        api.check_csv_task(tmp_path / "one.csv", "text", "label")


def test_finetune_status_of_a_queued_job_names_its_pretrained_run(tmp_path):
    folder = tmp_path / "finetunes" / "bert-a--topic--20260101-000000"
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(json.dumps({"kind": "finetune", "run_id": folder.name, "task": "topic",
                                                 "steps": 12, "finetune": {"run_dir": "/x/runs/bert-a"}}))
    (folder / "status.json").write_text(json.dumps({"state": "queued", "step": 0, "total_steps": 12}))
    status = api.finetune_status(api.RunStore(tmp_path), folder.name)
    assert (status["run_id"], status["task"], status["total_steps"], status["val_accuracy"]) == \
        ("bert-a", "topic", 12, None)
    (tmp_path / "runs" / "bert-a").mkdir(parents=True)
    (tmp_path / "runs" / "bert-a" / "status.json").write_text('{"state": "finished"}')
    with pytest.raises(ValueError, match="not a fine-tuning"):
        api.finetune_status(api.RunStore(tmp_path), "bert-a")


# ------------------------------------------------------------------------------------------------ through the app
@pytest.fixture(scope="module")
def runs(lab_home_dir) -> dict[str, str]:
    return {family: path.name for family, path in train_tiny_runs(lab_home_dir, FAMILIES).items()}


@pytest.fixture(scope="module")
def client(running_app, lab_jobs, runs):
    url, _ = running_app
    yield Client(url, verbose=False)
    for row in api.list_finetunes(lab_jobs):  # leave no fine-tuning running for the modules after this one
        if row["state"] in ("queued", "running"):
            try:
                api.stop_finetune(lab_jobs, row["finetune_id"])
            except ValueError:
                pass


def start(client, run_ids, task="topic", *, csv=None, text="", label="", pair="", pooling="auto", weight="",
          steps=STEPS, batch_size=16, lr="", seed=0, shown=()):
    return client.predict(list(run_ids), task, handle_file(str(csv)) if csv else None, text, label, pair, pooling,
                          weight, steps, batch_size, lr, seed, list(shown), api_name="/understand_finetune_start")


def wait_for(client, shown, states=TERMINAL, condition=None) -> str:
    """Poll the progress endpoint until every shown fine-tuning is in one of `states`; return the progress HTML."""
    deadline = time.time() + WAIT_S
    while True:
        page = client.predict(list(shown), api_name="/understand_finetune_shown")
        found = re.findall(r'data-state="(\w+)"', page)
        if len(found) == len(shown) and all(state in states for state in found) and (condition is None
                                                                                      or condition(page)):
            return page
        assert time.time() < deadline, f"still {found} after {WAIT_S} s"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def topic_finetunes(client, runs):
    """Both runs fine-tuned on topic for STEPS steps through /understand_finetune_start, waited for to the end."""
    shown, status, page = start(client, [runs["bert"], runs["gpt"]], "topic")
    ids = shown["value"]
    assert len(ids) == 2 and all(i.startswith(f"{runs[f]}--topic--") for i, f in zip(ids, ("bert", "gpt")))
    assert "Queued 2 fine-tunings on **topic**" in status and re.findall(r'data-state="(\w+)"', page)
    final = wait_for(client, ids)
    return ids, final


def test_start_runs_one_finetuning_per_run_to_the_end(client, runs, topic_finetunes):
    ids, page = topic_finetunes
    assert re.findall(r'data-state="(\w+)"', page) == ["finished", "finished"], page
    assert page.count(f"step <b>{STEPS}</b> / {STEPS} (100%)") == 2 and page.count("(final)") == 2


def test_the_leaderboard_has_a_row_per_finetuning_with_its_scores(client, runs, topic_finetunes, lab_jobs):
    ids, _ = topic_finetunes
    table, plot = client.predict([runs["bert"], runs["gpt"]], "selected runs",
                                 api_name="/understand_finetune_leaderboard")
    assert table["headers"] == TABLE_COLUMNS
    rows = {row[-1]: dict(zip(table["headers"], row)) for row in table["data"]}
    baseline = round(load_task("topic").majority_baseline(), 3)
    for finetune_id, family in zip(ids, ("bert", "gpt")):
        row = rows[finetune_id]
        assert (row["pretrained run"], row["family"], row["task"], row["steps"], row["state"]) == \
            (runs[family], family, "topic", STEPS, "finished")
        assert 0.0 <= row["accuracy"] <= 1.0 and 0.0 <= row["macro F1"] <= 1.0
        assert row["majority baseline"] == baseline and row["seconds"] > 0
        assert (row["pooling"], row["λ"]) == (("first", 0.0) if family == "bert" else ("last", 0.5))
    figure = json.loads(plot["plot"])
    bars = {trace["name"]: trace for trace in figure["data"] if trace["type"] == "bar"}
    assert set(bars) >= {f"{runs['bert']} (bert)", f"{runs['gpt']} (gpt)"}
    best = max(r["accuracy"] for r in rows.values() if r["pretrained run"] == runs["bert"] and r["task"] == "topic")
    assert bars[f"{runs['bert']} (bert)"]["y"][bars[f"{runs['bert']} (bert)"]["x"].index("Topic (5-way)")] == \
        pytest.approx(best, abs=1e-3)
    # the same numbers as the library's leaderboard
    frame = api.finetune_leaderboard(lab_jobs, runs=[runs["bert"]], tasks=["topic"])
    assert ids[0] in set(frame["finetune"]) and ids[1] not in set(frame["finetune"])
    empty, _ = client.predict([], "selected runs", api_name="/understand_finetune_leaderboard")
    assert empty["headers"] == TABLE_COLUMNS and empty["data"] == []


def test_the_timer_redraws_only_what_changed(client, runs, topic_finetunes):
    ids, _ = topic_finetunes
    first = client.predict(ids, [runs["bert"]], "all runs", api_name="/understand_finetune_progress")
    assert re.findall(r'data-state="(\w+)"', first[0]) == ["finished", "finished"]
    again = client.predict(ids, [runs["bert"]], "all runs", api_name="/understand_finetune_progress")
    # nothing moved since the last tick: every output is skipped (an update without a value)
    assert all(part["__type__"] == "update" and "value" not in part and "value" not in part.get("props", {})
               for part in again)


def test_stop_ends_a_running_finetuning_with_its_result_so_far(client, runs, topic_finetunes, lab_jobs):
    shown, _, _ = start(client, [runs["bert"]], "sentiment", steps=20_000, batch_size=8)
    finetune_id = shown["value"][0]
    wait_for(client, [finetune_id], ("running",),
             condition=lambda page: re.search(r"step <b>[1-9]", page) is not None)
    status, page = client.predict([finetune_id], api_name="/understand_finetune_stop")
    assert "Asked 1 fine-tuning to stop" in status and finetune_id in status
    page = wait_for(client, [finetune_id])
    assert re.findall(r'data-state="(\w+)"', page) == ["stopped"]
    result = api.finetune_status(lab_jobs, finetune_id)
    assert result["has_result"] and 0 < result["steps"] < 20_000 and 0.0 <= result["accuracy"] <= 1.0
    table, _ = client.predict([runs["bert"]], "all runs", api_name="/understand_finetune_leaderboard")
    rows = {row[-1]: dict(zip(table["headers"], row)) for row in table["data"]}
    assert rows[finetune_id]["state"] == "stopped" and rows[finetune_id]["task"] == "sentiment"
    with pytest.raises(Exception, match="nothing to stop"):
        client.predict([finetune_id], api_name="/understand_finetune_stop")


def test_a_csv_task_is_checked_uploaded_and_fine_tuned(client, runs, tmp_path, lab_jobs):
    path = write_csv(tmp_path / "reviews.csv")
    text, label, pair, summary = client.predict(handle_file(str(path)), api_name="/understand_finetune_csv_columns")
    assert (text["value"], label["value"], pair["value"]) == ("text", "label", "")
    assert text["choices"] == [["text", "text"], ["label", "label"], ["other", "other"]]
    assert "2 labels" in summary and "reviews.csv" in summary
    bad = client.predict(handle_file(str(path)), "text", "missing", "", api_name="/understand_finetune_csv_check")
    assert bad.startswith("⚠️") and "no column 'missing'" in bad
    with pytest.raises(Exception, match="no column 'missing'"):
        start(client, [runs["bert"]], "csv", csv=path, text="text", label="missing")
    shown, status, _ = start(client, [runs["bert"]], "csv", csv=path, text="text", label="label", steps=10)
    finetune_id = shown["value"][0]
    assert finetune_id.startswith(f"{runs['bert']}--csv-reviews.csv--") and "csv" in status
    page = wait_for(client, [finetune_id])
    assert re.findall(r'data-state="(\w+)"', page) == ["finished"], page
    result = api.finetune_status(lab_jobs, finetune_id)
    assert result["task"] == "csv:reviews.csv" and 0.0 <= result["accuracy"] <= 1.0
    job = json.loads((lab_jobs.run_dir(finetune_id) / "job.json").read_text())
    assert "/task-csv/" in job["finetune"]["csv_path"]  # a copy inside the lab home, not the upload folder


def test_bad_requests_are_refused_with_a_message(client, runs, lab_home_dir):
    cases = {"Pick at least one run": ([], "topic", {}),
             "Unknown run 'nope-run'": (["nope-run"], "topic", {}),
             "Batch size must be a whole number": ([runs["bert"]], "topic", {"batch_size": 5000}),
             "learning rate must be a number": ([runs["bert"]], "topic", {"lr": "fast"}),
             "λ \\(the auxiliary LM weight\\) must be a number": ([runs["bert"]], "topic", {"weight": "-0.5"}),
             "Upload a CSV file": ([runs["bert"]], "csv", {})}
    for message, (run_ids, task, extra) in cases.items():
        with pytest.raises(Exception, match=message):
            start(client, run_ids, task, **extra)
    no_weights = Path(lab_home_dir) / "runs" / "bert-no-weights-finetune-tab"
    no_weights.mkdir(parents=True, exist_ok=True)
    (no_weights / "config.json").write_text((Path(lab_home_dir) / "runs" / runs["bert"] / "config.json").read_text())
    (no_weights / "status.json").write_text('{"state": "stopped", "step": 0}')
    with pytest.raises(Exception, match="Nothing was started.*bert-no-weights-finetune-tab"):
        start(client, [no_weights.name], "topic")


def test_the_small_endpoints(client, runs, lab_home_dir):
    # gradio_client returns only value components: the CSV group's visibility is checked on the handler itself
    assert "CSV" in client.predict("csv", api_name="/understand_finetune_task")
    assert "sentence pair" in client.predict("entailment", api_name="/understand_finetune_task")
    view = FinetuneView(lab_home_dir)
    assert view.task_info("csv")[1]["visible"] is True and view.task_info("entailment")[1]["visible"] is False
    defaults = client.predict([runs["gpt"], runs["bert"]], api_name="/understand_finetune_defaults")
    assert f"| `{runs['gpt']}` | gpt | last" in defaults and f"| `{runs['bert']}` | bert | first" in defaults
    for endpoint in ("/understand_finetune_runs_list",):  # opening the tab: test_secondary_endpoints.py
        picker = client.predict([runs["gpt"], "gone-run"], api_name=endpoint)
        assert {runs["gpt"], runs["bert"]} <= {value for _, value in picker["choices"]}
        assert picker["value"] == [runs["gpt"]]  # a run that no longer exists is dropped
    picker, shown, page, table, plot = client.predict([runs["bert"]], [], "all runs",
                                                      api_name="/understand_finetune_refresh")
    assert shown["value"] and len(re.findall(r'data-state="', page)) == len(shown["value"])
    assert table["headers"] == TABLE_COLUMNS and json.loads(plot["plot"])["data"]
