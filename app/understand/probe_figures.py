"""Plotly figure and table of the Understand tab's Probing section: probe accuracy against relative depth, one line
per run and stream, with the random-init control of each run and the majority baseline.

Presentation only: the numbers are `api.probe_layers`' tables (lab_models/inference/probing.py). Every word drawn
here is in the reader's language (`app.i18n.language.tr`, area `probing`); run ids, family names, stream and layer
names that are names ("biLSTM 1", "MT-LSTM") and numbers stay as they are.
"""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from app.display import FONT, MARGIN, cjk_empty_figure, run_styles
from app.i18n.language import tr
from app.understand.figures import layer_title

DASHES = ("solid", "dash", "dashdot", "longdash")  # one per stream of a run: encoder solid, decoder dashed, ...
RUN_MARKERS = ("circle", "square", "triangle-up", "cross")  # a family's first, second, ... run in one figure
# their titles: probing.task_<task>; the last three are the stories language's (lab_models/text/story_tasks.py)
TASKS = ("tags", "roles", "topic", "sentiment", "ambiguous_tags", "antecedent", "subject_number")
COLUMN_KEYS = ("col_run", "col_family", "col_stream", "col_layer", "col_layer_name", "col_depth", "col_accuracy",
               "col_control", "col_selectivity", "col_majority")


def layer_name_title(name: str) -> str:
    """A layer's name in the reader's language, the decoder's too ("decoder block 2").

    >>> layer_name_title("decoder block 2"), layer_name_title("biLSTM 1")
    ('decoder block 2', 'biLSTM 1')
    """
    name = str(name)
    if name.startswith("decoder "):
        return tr("probing.decoder_layer", layer=layer_title(name[len("decoder "):]))
    return layer_title(name)


def probe_stream_title(stream: str) -> str:
    """A probed stream's title: the Transformers' in the reader's language, the RNN families' names as they are.

    >>> probe_stream_title("encoder"), probe_stream_title("biLM")
    ('encoder', 'biLM')
    """
    return tr(f"probing.stream_{stream}") if stream in ("self", "content", "encoder", "decoder") else str(stream)


def task_title(task: str) -> str:
    return tr(f"probing.task_{task}") if task in TASKS else str(task)


def probe_figure(frames: list[pd.DataFrame]) -> go.Figure:
    """Accuracy against depth (0 = embeddings, 1 = top layer): per run a colour, per stream a dash; the random-init
    control of each (run, stream) dotted in the same colour; the majority baseline grey. A stream of one layer (ELMo's
    scalar mix, CoVe's [embedding; CoVe]) is a marker at depth 1."""
    frames = [frame for frame in frames if frame is not None and len(frame)]
    if not frames:
        return cjk_empty_figure(tr("probing.fig_empty"), 420)
    figure = go.Figure()
    # each run in its family's colour (the lab's palette); a family's second run by its marker
    styles = run_styles({index: frame.attrs.get("family", "") for index, frame in enumerate(frames)})
    for index, frame in enumerate(frames):
        color, rank = styles[index]
        symbol = RUN_MARKERS[rank % len(RUN_MARKERS)]
        run = f"{frame.attrs.get('family', '')} · {frame.attrs.get('run_id', '')}"
        for number, stream in enumerate(dict.fromkeys(frame["stream"])):
            part = frame[frame["stream"] == stream]
            single = len(part) == 1
            name = f"{run} · {probe_stream_title(stream)}"
            hover = [tr("probing.fig_hover", run=html.escape(run), stream=html.escape(probe_stream_title(stream)),
                        layer=html.escape(layer_name_title(row.layer_name)), depth=f"{row.depth:.2f}",
                        accuracy=f"{row.accuracy:.3f}", control=f"{row.control:.3f}",
                        selectivity=f"{row.selectivity:+.3f}") for row in part.itertuples()]
            figure.add_trace(go.Scatter(
                x=part["depth"], y=part["accuracy"], name=name, legendgroup=run, mode="markers" if single else
                "lines+markers", line={"color": color, "dash": DASHES[number % len(DASHES)], "width": 2.5},
                marker={"size": 11 if single else 7, "symbol": "diamond" if single else symbol, "color": color},
                hovertext=hover, hoverinfo="text"))
            figure.add_trace(go.Scatter(
                x=part["depth"], y=part["control"], name=f"{name} · {tr('probing.fig_control')}", legendgroup=run,
                mode="markers" if single else "lines+markers", opacity=0.55,
                line={"color": color, "dash": "dot", "width": 1.5},
                marker={"size": 8 if single else 5, "symbol": "diamond-open" if single else f"{symbol}-open",
                        "color": color}, hovertext=hover, hoverinfo="text"))
    majority = float(frames[0]["majority"].iloc[0])
    figure.add_trace(go.Scatter(x=[0, 1], y=[majority, majority], mode="lines", name=tr("probing.fig_majority"),
                                line={"color": "#64748b", "dash": "dash", "width": 1.5},
                                hovertext=tr("probing.fig_majority_hover", accuracy=f"{majority:.3f}"),
                                hoverinfo="text"))
    attrs = frames[0].attrs
    title = tr("probing.fig_title", task=task_title(attrs.get("task", "")), train=f"{attrs.get('train', 0):,}",
               validation=f"{attrs.get('validation', 0):,}")
    figure.update_layout(
        title={"text": title, "font": {"size": 14}}, height=520, template="plotly_white", font={"family": FONT},
        margin={**MARGIN, "b": 60}, hovermode="closest",
        xaxis={"title": tr("probing.fig_depth_axis"), "range": [-0.03, 1.03], "zeroline": False},
        yaxis={"title": tr("probing.fig_accuracy_axis"), "rangemode": "tozero"},
        legend={"font": {"size": 11}, "groupclick": "toggleitem"})
    figure.add_annotation(text=tr("probing.fig_note"), showarrow=False, x=0, y=-0.16, xref="paper", yref="paper",
                          xanchor="left", font={"size": 11, "color": "#64748b"})
    return figure


def table_columns() -> list[str]:
    return [tr(f"probing.{key}") for key in COLUMN_KEYS]


def probe_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per (run, stream, layer), rounded for the page (headers in the reader's language)."""
    rows = []
    for frame in frames:
        if frame is None:
            continue
        for row in frame.itertuples():
            rows.append([frame.attrs.get("run_id", ""), frame.attrs.get("family", ""), probe_stream_title(row.stream),
                         int(row.layer), layer_name_title(row.layer_name), round(float(row.depth), 3),
                         round(float(row.accuracy), 4), round(float(row.control), 4),
                         round(float(row.selectivity), 4), round(float(row.majority), 4)])
    return pd.DataFrame(rows, columns=table_columns())
