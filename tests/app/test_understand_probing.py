"""The Understand tab's Probing, Logit lens and Attributions sections and the attention model view: their figures
and tables, then every endpoint through `gradio_client` against the session's tiny gpt, bert, xlnet and t5 runs
(tests/support/tiny_runs.py trains them), in English and for a Chinese reader; the HTML downloads are standalone (plotly.js
inlined, nothing loaded from a network)."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from gradio_client import Client

from app.i18n.language import reading_language
from app.understand.attribution_figures import chip_color, chips_html
from app.understand.lens_figures import lens_figure
from app.understand.model_view import head_image, thumbnails
from app.understand.probe_figures import probe_figure, probe_table
from lab_models import api

from tests.support.tiny_runs import train_tiny_runs

SENTENCE = "the small cat [MASK] a red ball ."


def probe_frame(run_id: str, family: str, streams=("self",)) -> pd.DataFrame:
    rows = []
    for stream in streams:
        rows += [[stream, layer, layer / 2, 0.5 + 0.1 * layer, 0.3, 0.45, name, 0.05 + 0.1 * layer]
                 for layer, name in enumerate(("embeddings", "block 1", "block 2"))]
    frame = pd.DataFrame(rows, columns=api.PROBE_COLUMNS)
    frame.attrs.update(run_id=run_id, family=family, task="roles", train=3000, validation=2000)
    return frame


# ------------------------------------------------------------------------------------------------ figures and tables
def test_the_probe_figure_has_a_line_and_a_control_per_stream_and_the_majority_baseline():
    figure = probe_figure([probe_frame("g", "gpt"), probe_frame("t", "t5", ("encoder", "decoder"))])
    names = [trace.name for trace in figure.data]
    assert names == ["gpt · g · one stream", "gpt · g · one stream · untrained control", "t5 · t · encoder",
                     "t5 · t · encoder · untrained control", "t5 · t · decoder", "t5 · t · decoder · untrained control",
                     "majority baseline"]
    assert list(figure.data[0].x) == [0.0, 0.5, 1.0] and list(figure.data[0].y) == pytest.approx([0.5, 0.6, 0.7])
    assert list(figure.data[1].y) == [0.45, 0.45, 0.45] and figure.data[1].line.dash == "dot"
    assert figure.data[4].line.dash == "dash" and list(figure.data[-1].y) == [0.3, 0.3]
    table = probe_table([probe_frame("g", "gpt")])
    assert list(table.columns)[:4] == ["run", "family", "stream", "layer"] and len(table) == 3
    with reading_language("zh"):
        assert probe_figure([probe_frame("g", "gpt")]).data[-1].name == "多数类基线"


def test_the_lens_figure_draws_a_grid_per_run_and_explains_a_refusal():
    frame = pd.DataFrame([[layer, rank, f"w{layer}{rank}", 0.1 * rank, f"block {layer}" if layer else "embeddings"]
                          for layer in range(3) for rank in (1, 2)], columns=api.LENS_COLUMNS)
    figure = lens_figure([{"run_id": "b", "family": "bert", "title": "BERT", "step": 3, "frame": frame},
                          {"run_id": "c", "family": "cvt", "title": "CVT", "step": 3, "error": "CVT is a tagger."}])
    grid = [trace for trace in figure.data if trace.type == "heatmap"]
    assert len(grid) == 1 and list(grid[0].y) == ["embeddings", "block 1", "block 2"]
    assert grid[0].text[2] == ["w21", "w22"]
    assert any("CVT is a tagger." in annotation.text for annotation in figure.layout.annotations)


def test_chips_are_red_for_raising_and_blue_for_lowering():
    assert chip_color(0.5, 1.0) == "rgba(220, 38, 38, 0.50)" and chip_color(-0.25, 1.0) == "rgba(37, 99, 235, 0.25)"
    attribution = api.Attribution("r", "gpt", 3, "integrated_gradients", 32, "pad", ["a", "<b>"], [0.02, -0.01],
                                  "cat", "the next token after the text", 0.2, 0.19, 1e-9)
    html = chips_html([{"run_id": "r", "title": "gpt · r", "attribution": attribution}])
    assert "rgba(220, 38, 38, 1.00)" in html and "rgba(37, 99, 235, 0.50)" in html and "&lt;b&gt;" in html
    assert "completeness error 1.0e-09" in html and "do not add up" not in html
    broken = api.Attribution("r", "t5", 3, "integrated_gradients", 32, "zero", ["a"], [0.0], "x", "here", 0.06,
                             0.02, 0.04)
    assert "do not add up" in chips_html([{"run_id": "r", "title": "t5 · r", "attribution": broken}])


# ------------------------------------------------------------------------------------------------ through the app
@pytest.fixture(scope="module")
def runs(lab_home_dir):
    return train_tiny_runs(lab_home_dir)


@pytest.fixture(scope="module")
def client(running_app, runs):
    url, _ = running_app
    return Client(url, verbose=False)


def standalone(path: str) -> str:
    """The downloaded page: one HTML document with plotly.js inside it (no <script src=...>: it opens offline)."""
    page = Path(path).read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert not re.search(r"<script[^>]*\bsrc=", page) and "Plotly.newPlot" in page and len(page) > 3_000_000
    return page


def test_probing_through_the_app_draws_every_run_and_downloads_html(client, runs):
    figure, table, download = client.predict([runs["gpt"].name, runs["t5"].name], "roles", 0,
                                             api_name="/understand_probe")
    assert figure["type"] == "plotly"
    rows = pd.DataFrame(table["data"], columns=table["headers"])
    assert set(rows["run"]) == {runs["gpt"].name, runs["t5"].name}
    assert set(rows[rows["run"] == runs["t5"].name]["stream"]) == {"encoder", "decoder"}
    page = standalone(download)
    assert "Linear probes" in page and "plotly" in page
    choices = client.predict([], api_name="/understand_probe_runs_list")
    assert {runs["gpt"].name, runs["bert"].name} <= {value for _, value in choices["choices"]}


def test_the_lens_through_the_app_reads_each_run_and_explains_the_ones_it_cannot(client, runs):
    figure, notes, table, download = client.predict([runs["bert"].name, runs["gpt"].name], SENTENCE, 3,
                                                    api_name="/understand_lens")
    rows = pd.DataFrame(table["data"], columns=table["headers"])
    assert set(rows["run"]) == {runs["bert"].name, runs["gpt"].name} and set(rows["rank"]) == {1, 2, 3}
    assert "the first [MASK]" in notes and "the next token after the text before the first [MASK]" in notes
    standalone(download)
    with pytest.raises(Exception, match="Type a text first"):
        client.predict([runs["bert"].name], "  ", 3, api_name="/understand_lens")


def test_attributions_through_the_app_shade_every_token(client, runs):
    chips, table, download = client.predict([runs["bert"].name, runs["xlnet"].name], SENTENCE, "integrated_gradients",
                                            16, "pad", "", api_name="/understand_attributions")
    assert chips.count("attribution-chips") == 2 and "completeness error" in chips
    rows = pd.DataFrame(table["data"], columns=table["headers"])
    assert set(rows["run"]) == {runs["bert"].name, runs["xlnet"].name}
    assert "attribution-chips" in Path(download).read_text(encoding="utf-8")  # the chips' own page (no plotly)


def test_the_model_view_has_every_layer_and_head_and_a_click_draws_one_large(client, runs):
    gallery, heads, head, head_file, model_file, layer, first_head = client.predict(
        runs["bert"].name, "the cat sees a red ball .", "self", api_name="/understand_model_view")
    maps = api.attention_maps(runs["bert"], "the cat sees a red ball .")
    images = gallery["value"]  # the gallery comes as an update that also sets its columns (one per head)
    assert len(images) == maps.n_layers * maps.n_heads and gallery["columns"] == maps.n_heads == heads
    assert images[-1]["caption"] == f"layer {maps.n_layers} · head {maps.n_heads}" and (layer, first_head) == (1, 1)
    standalone(model_file)
    figure, file = client.predict(runs["bert"].name, "the cat sees a red ball .", "self", 2, 2,
                                  api_name="/understand_attention_head")
    assert "layer 2 · head 2" in figure["plot"] and standalone(file)
    html_file = client.predict(runs["bert"].name, "the cat sees a red ball .", "self", 2,
                               api_name="/understand_attention_html")
    assert "layer 2" in standalone(html_file)


@pytest.mark.slow
def test_a_thumbnail_is_the_head_scaled_to_its_maximum_with_forbidden_cells_grey(runs):
    maps = api.attention_maps(runs["gpt"], "the cat sees a ball .")
    images = thumbnails(maps, "self")
    assert len(images) == maps.n_layers * maps.n_heads and images[0][1] == "layer 1 · head 1"
    image = head_image(maps.weights["self"][0, 0].numpy(), maps.masks["self"].numpy().astype(bool))
    assert image.getpixel((image.width - 1, 0)) == (226, 232, 240)  # above the diagonal: GPT's mask forbids it
