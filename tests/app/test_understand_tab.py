"""The Understand tab: unit tests of its figures and tables, then every endpoint driven through `gradio_client` against
the tiny gpt, bert, xlnet and t5 runs that tests/support/tiny_runs.py trains (once per session) into the app's lab home."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from gradio_client import Client

from app.understand.figures import (attention_figure, fill_mask_figure, fill_mask_table, run_label, similarity_figure, similarity_table)
from app.understand.tab import MAX_RUNS, UnderstandView
from lab_models import api

from tests.support.tiny_runs import FAMILIES, OTHER, SENTENCE, train_tiny_runs

needs_fill_mask = pytest.mark.skipif(not hasattr(api, "fill_mask"), reason="api.fill_mask is not there yet")


# ------------------------------------------------------------------------------------------------ figures and tables
def test_fill_mask_figure_puts_each_run_in_its_column_and_explains_the_ones_that_cannot():
    results = [{"run_id": "bert-x", "family": "bert", "title": "BERT", "step": 30,
                "slots": [[["cat", 0.5], ["dog", 0.25]], [["park", 0.75], ["zoo", 0.125]]]},
               {"run_id": "gpt-x", "family": "gpt", "title": "GPT", "step": 30,
                "error": "GPT reads left to right: it cannot fill a [MASK] in the middle."}]
    figure = fill_mask_figure(results)
    bars = [trace for trace in figure.data if trace.type == "bar"]
    assert len(bars) == 2 and list(bars[0].x) == [0.5, 0.25] and list(bars[1].x) == [0.75, 0.125]
    texts = " ".join(annotation.text for annotation in figure.layout.annotations).replace("<br>", " ")
    assert "BERT · bert-x · step 30" in texts and "[MASK] 2" in texts and "cannot fill a [MASK]" in texts
    table = fill_mask_table(results)
    assert list(table.columns) == ["slot", "rank", "bert-x", "gpt-x"] and len(table) == 4
    assert table.iloc[0]["bert-x"] == "cat (0.500)" and table.iloc[2]["bert-x"] == "park (0.750)"
    assert table.iloc[0]["gpt-x"].startswith("GPT reads") and table.iloc[1]["gpt-x"] == ""


def test_similarity_figure_and_table_have_one_line_and_one_row_per_run():
    frame = pd.DataFrame([["a", "gpt", layer, name, cos, "apple", "apple"]
                          for layer, name, cos in ((0, "embeddings", 1.0), (1, "block 1", 0.8), (2, "block 2", 0.5))]
                         + [["b", "bert", 0, "embeddings", 0.9, "ap ple", "[UNK]"]],
                         columns=["run", "family", "layer", "layer_name", "cosine", "pieces_a", "pieces_b"])
    figure = similarity_figure(frame, "apple")
    assert [trace.name for trace in figure.data] == ["a (gpt)", "b (bert)"]
    assert list(figure.data[0].y) == [1.0, 0.8, 0.5] and list(figure.layout.xaxis.ticktext)[0] == "embeddings"
    table = similarity_table(frame)
    assert list(table.columns) == ["run", "family", "embeddings", "block 1", "block 2"]
    assert table.iloc[0]["block 2"] == 0.5 and pd.isna(table.iloc[1]["block 1"])


@pytest.mark.slow
def test_attention_figure_leaves_masked_cells_empty(runs):
    maps = api.attention_maps(runs["gpt"], "the cat sees a ball .")
    figure = attention_figure(maps, "self", 1)
    heatmaps = [trace for trace in figure.data if trace.type == "heatmap"]
    assert len(heatmaps) == maps.n_heads
    z = heatmaps[0].z
    assert z[0][1] is None and z[1][0] is not None  # above the diagonal: masked, drawn grey
    assert list(figure.layout.xaxis.ticktext) == maps.tokens


# ------------------------------------------------------------------------------------------------ through the app
@pytest.fixture(scope="module")
def runs(lab_home_dir):
    return train_tiny_runs(lab_home_dir)


@pytest.fixture(scope="module")
def client(running_app, runs):
    url, _ = running_app
    return Client(url, verbose=False)


def run_id(runs, family: str) -> str:
    return runs[family].name


def test_the_pickers_list_the_runs_with_weights(client, runs, lab_home_dir):
    fill, embed, attention = client.predict([], [], None, api_name="/understand_runs_list")
    listed = {value for _, value in fill["choices"]}
    assert {run_id(runs, family) for family in FAMILIES} <= listed
    assert fill["choices"] == embed["choices"] == attention["choices"]
    assert attention["value"] in listed  # the attention picker always has a run
    labels = dict((value, label) for label, value in UnderstandView(lab_home_dir).run_choices())
    assert labels[run_id(runs, "t5")] == f"{run_id(runs, 't5')} · t5 · step 30"
    # the weights a probe loads: a checkpoint behind a run still training says so (not read as the run's step)
    assert run_label({"run_id": "r", "family": "gpt", "step": 5, "weights_step": 4}) == "r · gpt · checkpoint of step 4"
    assert run_label({"run_id": "r", "family": "gpt", "step": 5, "weights_step": 5}) == "r · gpt · step 5"


def test_similarity_endpoint_draws_one_line_per_run(client, runs):
    ids = [run_id(runs, family) for family in FAMILIES]
    plot, table = client.predict(ids, SENTENCE, SENTENCE, "apple", api_name="/understand_similarity")
    figure = json.loads(plot["plot"])
    assert [trace["name"] for trace in figure["data"]] == [f"{i} ({f})" for i, f in zip(ids, FAMILIES)]
    assert all(abs(y - 1) < 1e-5 for trace in figure["data"] for y in trace["y"])  # the same sentence: 1
    assert table["headers"] == ["run", "family", "embeddings", "block 1", "block 2"]
    assert [row[0] for row in table["data"]] == ids


def test_projection_endpoint_draws_one_scatter_per_run(client, runs):
    ids = [run_id(runs, "gpt"), run_id(runs, "xlnet")]
    plot = client.predict(ids, f"{SENTENCE}\n{OTHER}", "apple", api_name="/understand_projection")
    figure = json.loads(plot["plot"])
    traces = figure["data"]
    assert len(traces) == 4  # two runs x two sentences
    assert {trace["xaxis"] for trace in traces} == {"x", "x2"}
    assert any("star" in trace["marker"]["symbol"] for trace in traces)  # the word's tokens are marked


def test_attention_endpoint_for_each_kind_of_model(client, runs):
    expected = {"gpt": ["self"], "bert": ["self"], "xlnet": ["content", "query"],
                "t5": ["encoder", "decoder", "cross"]}
    for family, streams in expected.items():
        stream, layer, plot, note, details = client.predict(run_id(runs, family), SENTENCE, streams[-1], 2,
                                                            api_name="/understand_attention")
        assert [value for _, value in stream["choices"]] == streams and stream["value"] == streams[-1]
        assert layer["value"] == 2 and layer["maximum"] == 2
        assert details["stream"] == streams[-1] and details["layer"] == 2 and details["streams"] == streams
        assert family in note and len(json.loads(plot["plot"])["data"]) == details["n_heads"]
        weights, mask = torch.tensor(details["weights"]), torch.tensor(details["mask"], dtype=torch.bool)
        assert weights.shape[1:] == (len(details["rows"]), len(details["cols"]))
        assert torch.all(weights[:, ~mask] == 0)
        sums = weights.sum(-1)[:, mask.any(-1)]
        assert torch.allclose(sums, torch.ones_like(sums), atol=2e-3)  # rounded to 4 places
    # a stream the run does not have falls back to its first; the layer view redraws
    stream, _, _, _, details = client.predict(run_id(runs, "gpt"), SENTENCE, "cross", 1,
                                              api_name="/understand_attention_view")
    assert stream["value"] == "self" and details["stream"] == "self" and details["layer"] == 1
    gpt = torch.tensor(details["weights"])
    assert torch.all(gpt.triu(diagonal=1) == 0)


@needs_fill_mask
def test_fill_mask_endpoint_shows_predictions_and_explains_gpt(client, runs):
    ids = [run_id(runs, "bert"), run_id(runs, "gpt")]
    plot, table, results = client.predict(ids, "the girl eats a red [MASK] in the kitchen .", 3,
                                          api_name="/understand_fill_mask")
    bert, gpt = results
    assert bert["run_id"] == ids[0] and "error" not in bert, bert
    assert len(bert["slots"]) == 1 and len(bert["slots"][0]) == 3
    probs = [p for _, p in bert["slots"][0]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    assert gpt["error"] and "slots" not in gpt  # explained in its column, not an error popup
    assert gpt["error"][:30] in " ".join(a["text"] for a in json.loads(plot["plot"])["layout"]["annotations"]
                                         ).replace("<br>", " ")
    assert table["headers"] == ["slot", "rank", *ids]


def test_bad_inputs_are_clear_errors_and_the_app_keeps_answering(client, runs):
    gpt = run_id(runs, "gpt")
    with pytest.raises(Exception, match="does not occur in sentence B"):
        client.predict([gpt], SENTENCE, "the cat sees a ball .", "apple", api_name="/understand_similarity")
    with pytest.raises(Exception, match="it is empty"):
        client.predict(gpt, "  ", "self", 1, api_name="/understand_attention")
    with pytest.raises(Exception, match="the limit is 64 tokens"):
        client.predict(gpt, "the cat . " * 60, "self", 1, api_name="/understand_attention")
    with pytest.raises(Exception, match="Pick at least one run"):
        client.predict([], SENTENCE, OTHER, "apple", api_name="/understand_similarity")
    with pytest.raises(Exception, match=f"Pick at most {MAX_RUNS} runs"):
        client.predict([gpt, "a", "b", "c", "d"], "the [MASK] .", 5, api_name="/understand_fill_mask")
    with pytest.raises(Exception, match=r"The text has no \[MASK\]"):
        client.predict([gpt], "the cat", 5, api_name="/understand_fill_mask")
    with pytest.raises(Exception, match="Unknown run|not a run id|no run"):
        client.predict("gpt-tiny-19990101-000000-dead", SENTENCE, "self", 1, api_name="/understand_attention")
    plot, _ = client.predict([gpt], SENTENCE, OTHER, "apple", api_name="/understand_similarity")
    assert len(json.loads(plot["plot"])["data"]) == 1


def test_similarity_ticks_name_a_layer_only_where_every_run_names_it_the_same():
    frame = pd.DataFrame([["g", "gpt", 0, "embeddings", 1.0, "apple", "apple"],
                          ["g", "gpt", 1, "block 1", 0.9, "apple", "apple"],
                          ["e", "elmo", 0, "embeddings", 1.0, "apple", "apple"],
                          ["e", "elmo", 1, "biLSTM 1", 0.8, "apple", "apple"],
                          ["e", "elmo", 2, "ELMo (scalar mix)", 0.7, "apple", "apple"]],
                         columns=["run", "family", "layer", "layer_name", "cosine", "pieces_a", "pieces_b"])
    axis = similarity_figure(frame, "apple").layout.xaxis
    assert list(axis.ticktext) == ["embeddings", "1", "ELMo (scalar mix)"] and "hover" in axis.title.text


def test_the_pickers_help_lines_are_translation_markers_that_the_call_route_can_send(running_app, runs):
    """The refresh handlers return their pickers' help lines as translation markers (the page shows them in the
    browser's language); Gradio's `/call/` route (curl) serializes updates with plain `json`, so they are strings."""
    import httpx

    url, _ = running_app
    calls = {"compare_runs_list": ([[]], "compare.runs_info"),
             "understand_runs_list": ([[], [], None], "understand.runs_info"),
             "understand_sentences_runs_list": ([[]], "similarity.runs_info"),
             "understand_finetune_runs_list": ([[]], "finetune.runs_info"),
             # "no Switch run yet", or the usual help line once another test of the session trained one
             "understand_routing_runs": ([None], ("routing.no_switch_runs", "routing.run_info"))}
    for name, (data, key) in calls.items():
        posted = httpx.post(f"{url}gradio_api/call/{name}", json={"data": data}, timeout=60)
        assert posted.status_code == 200, (name, posted.text[:300])
        event = posted.json()["event_id"]
        stream = httpx.get(f"{url}gradio_api/call/{name}/{event}", timeout=120).text
        assert stream.startswith("event: complete"), (name, stream[:300])
        picker = json.loads(stream.split("data: ", 1)[1].splitlines()[0])[0]
        assert picker["info"].startswith("__i18n__")
        assert json.loads(picker["info"][len("__i18n__"):])["key"] in ((key,) if isinstance(key, str) else key)


@pytest.mark.slow
@needs_fill_mask
def test_a_column_names_the_step_of_the_weights_it_used_not_the_runs_step(runs, tmp_path):
    """A run still training answers from its newest checkpoint: its column says that checkpoint's step, not the step
    the trainer has reached (status.json)."""
    import shutil

    from lab_models.training import runs as runs_module

    home = tmp_path / "home"
    behind = home / "runs" / "bert-behind"
    shutil.copytree(runs["bert"], behind)
    (behind / "model.safetensors").unlink()  # no final weights: the checkpoint loads
    checkpoint_step = json.loads((runs_module.latest_checkpoint(behind) / "state.json").read_text())["step"]
    status = json.loads((behind / "status.json").read_text())
    (behind / "status.json").write_text(json.dumps({**status, "state": "stopped", "step": checkpoint_step + 13}))
    jobs = api.RunStore(home)
    _, _, results = UnderstandView(home, jobs).fill_mask(["bert-behind"], "the girl eats a red [MASK] .")
    assert "slots" in results[0] and results[0]["step"] == checkpoint_step
