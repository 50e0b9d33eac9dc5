"""The endpoints that other test modules reach only through their twins: the Enter-key (`_on_submit`) and
tab-opening (`_on_select`) copies of the Compare and Understand events, the decoding-controls toggle, the chained
leaderboard refresh after a fine-tuning starts, and the Train tab's learning-rate plot (`/show_schedule`, and
its redrawing by the tab's one live tick, `/refresh_run`). Each is driven through `gradio_client` against the tiny runs tests/support/tiny_runs.py trains, and
each twin must answer exactly as the endpoint it copies."""
from __future__ import annotations

import json

import pytest
from gradio_client import Client

from tests.support.tiny_runs import SENTENCE, train_tiny_runs


@pytest.fixture(scope="module")
def runs(lab_home_dir):
    return {family: path.name for family, path in train_tiny_runs(lab_home_dir).items()}


@pytest.fixture(scope="module")
def client(running_app, runs):
    url, _ = running_app
    return Client(url, verbose=False)


def plot_data(plot) -> list[dict]:
    return json.loads(plot["plot"])["data"]


def test_decoding_controls_show_only_what_the_strategy_uses(client):
    def visible(strategy):
        return [control["visible"] for control in client.predict(strategy, api_name="/compare_decoding_controls")]

    # temperature, top-k, top-p, beam size
    assert visible("greedy") == [False, False, False, False]
    assert visible("sample") == [True, True, True, False]
    assert visible("beam") == [False, False, False, True]


def test_generate_on_submit_answers_as_the_button(client, runs):
    inputs = ([runs["gpt"], runs["bert"]], "the cat sees", "continue", "greedy", 1.0, 0, 1.0, 4, 6, 0, 4, 0)
    page, details = client.predict(*inputs, api_name="/compare_generate")
    page_again, details_again = client.predict(*inputs, api_name="/compare_generate_on_submit")
    texts = [item.get("text") for item in details]
    assert texts == [item.get("text") for item in details_again]  # greedy: the same text twice
    assert details[0]["supported"] and texts[0] and details[1]["supported"] is False  # BERT cannot continue
    assert "BERT" in page_again and "GPT" in page_again


def test_compare_run_pickers_list_the_runs_with_weights(client, runs):
    for endpoint in ("/compare_runs_list", "/compare_runs_on_select"):
        picker = client.predict([runs["gpt"], "gone-run"], api_name=endpoint)
        assert set(runs.values()) <= {value for _, value in picker["choices"]}
        assert picker["value"] == [runs["gpt"]]  # a run that no longer exists is dropped


def test_understand_submit_twins_answer_as_their_buttons(client, runs):
    fill = ([runs["bert"], runs["gpt"]], "the girl eats a red [MASK] .", 3)
    assert client.predict(*fill, api_name="/understand_fill_mask_on_submit")[2] == \
        client.predict(*fill, api_name="/understand_fill_mask")[2]
    similarity = ([runs["bert"]], "I ate an apple today .", "Apple sells phones .", "apple")
    first = client.predict(*similarity, api_name="/understand_similarity")
    second = client.predict(*similarity, api_name="/understand_similarity_on_submit")
    lines, lines_again = plot_data(first[0]), plot_data(second[0])
    assert [(line["name"], line["x"]) for line in lines] == [(line["name"], line["x"]) for line in lines_again]
    for line, again in zip(lines, lines_again):  # the same forward passes (up to the CPU's summation order)
        assert again["y"] == pytest.approx(line["y"], abs=1e-5)
    attention = (runs["xlnet"], SENTENCE, "query", 1)
    for endpoint in ("/understand_attention", "/understand_attention_on_submit", "/understand_attention_stream"):
        stream, layer, heads, note, data = client.predict(*attention, api_name=endpoint)
        assert stream["value"] == "query" and [v for _, v in stream["choices"]] == ["content", "query"], endpoint
        assert plot_data(heads) and data, endpoint


def test_opening_the_understand_tab_refreshes_its_pickers(client, runs):
    # the three pickers, then probing, logit lens, attributions (its sources), sentence similarity and fine-tuning
    fill, embed, attention, probing, lens, sources, sentences, tuned = client.predict(
        [runs["bert"], "gone-run"], [], runs["gpt"], [runs["gpt"]], ["gone-run"], [], [], [runs["bert"]],
        api_name="/understand_runs_on_select")
    assert fill["value"] == [runs["bert"]] and attention["value"] == runs["gpt"]
    assert set(runs.values()) <= {value for _, value in embed["choices"]}
    assert probing["value"] == [runs["gpt"]] and tuned["value"] == [runs["bert"]]
    # a picker left with nothing picked gets the view's default picks (no zoo here: the newest runs)
    assert len(lens["value"]) == 2 and set(lens["value"]) <= set(runs.values())
    assert len(sources["value"]) == 2 and set(sources["value"]) <= set(runs.values())
    assert set(runs.values()) <= {value for _, value in sentences["choices"]}


def test_finetune_tab_opening_and_the_chained_leaderboard(client, runs):
    picker, shown, page, table, plot, defaults, task = client.predict(
        [runs["bert"]], [], "all runs", [runs["bert"]], "topic", api_name="/understand_finetune_on_select")
    assert picker["value"] == [runs["bert"]] and "train-progress" in page
    assert f"`{runs['bert']}`" in defaults and task  # the notes, in the same event
    table, plot = client.predict([runs["bert"]], "selected runs",
                                 api_name="/understand_finetune_leaderboard_after_start")
    assert "pretrained run" in table["headers"] and "data" in json.loads(plot["plot"])


def test_the_learning_rate_plot_of_a_run(client, runs):
    plot = client.predict(runs["gpt"], api_name="/show_schedule")
    lines = plot_data(plot)
    assert [line["name"] for line in lines] == ["learning rate"]
    assert len(lines[0]["y"]) == 30 and max(lines[0]["y"]) <= 1e-3  # one point per logged step, at most the peak
    # the tab's live tick: (run, compared runs, metric) -> the run's five outputs, then the learning-rate plot, ...
    again = client.predict(runs["gpt"], [], "loss", api_name="/refresh_run")[5]
    assert again == {"__type__": "update"}  # the session's signature says nothing new: the live tick skips
    fresh = Client(client.src, verbose=False)  # a new page has no signature yet: its first tick draws
    assert plot_data(fresh.predict(runs["gpt"], [], "loss", api_name="/refresh_run")[5]) == lines
    with pytest.raises(Exception, match="nope-run"):
        client.predict("nope-run", api_name="/show_schedule")
