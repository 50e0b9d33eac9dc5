"""Plotly figure and table of the Understand tab's Logit lens section: for each run, a grid of layers (rows, the top
layer at the top) by ranks (columns), each cell the token that layer ranks there, coloured by its probability.

Presentation only: the numbers are `api.logit_lens`' tables (lab_models/inference/logit_lens.py). A result is one
dict per run: {"run_id", "family", "title", "step", "frame"} or, for a run whose family cannot be read at that
position, the same with "error". Every word drawn here is in the reader's language (area `probing`); the tokens,
run ids and numbers stay as they are, and the backend's notes go through app/i18n/messages.py.
"""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import FONT, cjk_empty_figure
from app.i18n.language import tr
from app.i18n.messages import translate
from app.understand.figures import format_prob, run_title, shown_token, wrap
from app.understand.probe_figures import layer_name_title

COLUMN_KEYS = ("col_run", "col_family", "col_layer", "col_layer_name", "col_rank", "col_token", "col_probability")


def lens_figure(results: list[dict]) -> go.Figure:
    """One panel per run: layers bottom (embeddings) to top, ranks left to right; the cell's text is the token, its
    colour the probability (one colour scale for all panels, 0 to the largest probability shown). A run that cannot
    be read shows why in its panel."""
    if not results:
        return cjk_empty_figure(tr("probing.fig_lens_empty"), 420)
    titles = [wrap(run_title(result), 38) for result in results]
    figure = make_subplots(rows=1, cols=len(results), subplot_titles=titles, horizontal_spacing=0.14 / len(results)
                           + 0.05)
    shown = [result["frame"] for result in results if result.get("frame") is not None and len(result["frame"])]
    top = max((float(frame["probability"].max()) for frame in shown), default=1.0) or 1.0
    layers_max = 1
    for column, result in enumerate(results, start=1):
        frame = result.get("frame")
        if frame is None or not len(frame):
            domain = figure.get_subplot(1, column).xaxis.domain  # the panel's place on the page
            figure.add_annotation(text=wrap(translate(result.get("error", "")), 34), showarrow=False,
                                  x=sum(domain) / 2, y=0.5, xref="paper", yref="paper",
                                  font={"size": 11, "color": "#b91c1c"})
            figure.update_xaxes(visible=False, row=1, col=column)
            figure.update_yaxes(visible=False, row=1, col=column)
            continue
        layers = sorted(set(frame["layer"]))
        ranks = sorted(set(frame["rank"]))
        layers_max = max(layers_max, len(layers))
        names = {int(row.layer): layer_name_title(row.layer_name) for row in frame.itertuples()}
        cells = {(int(row.layer), int(row.rank)): row for row in frame.itertuples()}
        z = [[float(cells[(layer, rank)].probability) if (layer, rank) in cells else None for rank in ranks]
             for layer in layers]
        tokens = [[shown_token(cells[(layer, rank)].token) if (layer, rank) in cells else "" for rank in ranks]
                  for layer in layers]
        hover = [[tr("probing.fig_lens_hover", layer=html.escape(names[layer]), rank=rank,
                     token=html.escape(tokens[i][j]), probability=format_prob(z[i][j] or 0.0))
                  for j, rank in enumerate(ranks)] for i, layer in enumerate(layers)]
        figure.add_trace(go.Heatmap(
            z=z, x=[str(rank) for rank in ranks], y=[names[layer] for layer in layers], text=tokens,
            texttemplate="%{text}", textfont={"size": 11}, coloraxis="coloraxis", xgap=2, ygap=2,
            hovertext=hover, hoverinfo="text"), row=1, col=column)
        figure.update_xaxes(title_text=tr("probing.fig_rank_axis"), row=1, col=column)
    figure.update_annotations(font_size=11)
    figure.update_layout(
        height=max(360, 70 + 44 * layers_max), template="plotly_white", font={"family": FONT},
        margin={"l": 110, "r": 20, "t": 90, "b": 50},
        coloraxis={"colorscale": "YlGnBu", "cmin": 0, "cmax": top,
                   "colorbar": {"title": tr("probing.fig_probability"), "thickness": 12}})
    return figure


def lens_notes(results: list[dict]) -> str:
    """Markdown: per run, the position read, the stream and how the head is applied (where it approximates)."""
    lines = []
    for result in results:
        frame = result.get("frame")
        if frame is None:
            continue
        attrs = frame.attrs
        skipped = ", ".join(attrs.get("skipped") or [])
        lines.append(tr("probing.lens_note", run=html.escape(run_title(result)), where=html.escape(translate(
            attrs.get("where", ""))), stream=html.escape(attrs.get("stream", "")),
            note=html.escape(translate(attrs.get("note", ""))),
            skipped=tr("probing.lens_skipped", layers=html.escape(skipped)) if skipped else ""))
    return "\n".join(f"- {line}" for line in lines)


def lens_table(results: list[dict]) -> pd.DataFrame:
    rows = []
    for result in results:
        frame = result.get("frame")
        if frame is None:
            continue
        for row in frame.itertuples():
            rows.append([result["run_id"], result.get("family", ""), int(row.layer), layer_name_title(row.layer_name),
                         int(row.rank), shown_token(row.token), round(float(row.probability), 5)])
    return pd.DataFrame(rows, columns=[tr(f"probing.{key}") for key in COLUMN_KEYS])
