"""Plotly figures and pandas tables for the Mask Explorer: one attention heatmap per stream, the anatomy table.

Presentation only: every number drawn here comes from `lab_models.api`. Every word drawn (titles, axes, hover texts,
table headers) is written in the reader's language (`app.i18n.language.tr`, at drawing time); tokens, kinds and numbers
stay as they are.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.i18n.language import tr

ALLOWED_COLOR = "#2563eb"
BLOCKED_COLOR = "#f1f5f9"
# each stream's title: app/i18n/locales/*/explorer.json "stream_<name>"
STREAMS = ("self", "content", "query", "encoder", "decoder", "cross")


def stream_title(stream: str) -> str:
    """An attention stream's name for a figure, in the reader's language ("self" -> "self-attention"); a stream the
    lab does not know keeps its key."""
    return tr(f"explorer.stream_{stream}") if stream in STREAMS else stream


def _labels(tokens: list[str], prefix: str = "x") -> list[str]:
    return [f"{prefix}{i} {tok}" for i, tok in enumerate(tokens)]


def _with_targets(rows: list[str], targets: list) -> list[str]:
    """Append "→ target" to the rows that predict something."""
    return [f"{row} → {target}" if target is not None else row for row, target in zip(rows, targets)]


def stream_axes(anatomy, stream: str) -> tuple[list[str], list[str]]:
    """Row and column labels of one attention stream, e.g. ("x3 cat", ...); predicting rows end in "→ target"."""
    inputs = _labels(anatomy.inputs)
    if stream == "query":
        slots = anatomy.query_slots if anatomy.query_slots is not None else list(range(len(anatomy.inputs)))
        # A query row knows its position but not its token: label it by the slot it sits at.
        rows = [f"q{i} @x{s}" for i, s in enumerate(slots)]
        return _with_targets(rows, [anatomy.targets[s] for s in slots]), inputs
    if stream in ("decoder", "cross"):
        decoder = _labels(anatomy.decoder_inputs or [], prefix="y")
        rows = _with_targets(decoder, anatomy.targets) if stream == "decoder" else decoder
        return rows, (decoder if stream == "decoder" else inputs)
    if stream == "self":
        return _with_targets(inputs, anatomy.targets), inputs
    return inputs, inputs


def stream_density(matrix) -> float:
    total = matrix.numel()
    return float(matrix.sum()) / total if total else 0.0


def anatomy_figure(anatomy, *, height_per_token: int = 16) -> go.Figure:
    """One heatmap per attention stream, stacked top to bottom. Hover reads "x3 cat may attend x1 sat".

    The figure is written as one plain specification and validated once by `go.Figure`: the same figure that
    `make_subplots` and per-axis updates build, about four times faster (the Mask Explorer draws four per click, and
    twenty clients click at once: benchmarks/bench_load.py).
    """
    streams = list(anatomy.attention)
    titles = [tr("explorer.fig_stream_title", stream=stream_title(s), density=f"{stream_density(anatomy.attention[s]):.2f}")
              for s in streams]
    axes = [stream_axes(anatomy, stream) for stream in streams]
    longest = max([1] + [max(len(rows), len(cols)) for rows, cols in axes])
    size = min(900, max(300, 120 + height_per_token * longest))  # pixels per stream
    gap = 170  # pixels between stacked streams: rotated key labels, the axis title and the next title
    height = size * len(streams) + gap * (len(streams) - 1) + 40
    # Streams are stacked vertically: side by side, two 64-token heatmaps in half a page are unreadable.
    spacing = gap / height if len(streams) > 1 else 0.0  # as a fraction of the figure, like make_subplots' spacing
    row_height = (1.0 - spacing * (len(streams) - 1)) / len(streams)
    traces, layout, annotations = [], {}, []
    may, may_not = f" {tr('explorer.hover_may_attend')} ", f" {tr('explorer.hover_may_not_attend')} "
    key_title, query_title = tr("explorer.axis_key"), tr("explorer.axis_query")
    for index, (stream, (rows, cols)) in enumerate(zip(streams, axes)):
        suffix = "" if index == 0 else str(index + 1)  # plotly's axis names: x, x2, x3, ...
        bottom = (len(streams) - 1 - index) * (row_height + spacing)  # the first stream on top, as make_subplots
        top = bottom + row_height
        domain = [bottom, top]
        matrix = anatomy.attention[stream].to("cpu").numpy().astype(np.int8)  # (rows, cols)
        # Hover text as one numpy string array: plotly validates numpy arrays far faster than nested lists.
        row_labels = np.array([html.escape(r) for r in rows], dtype=object)[:, None]  # (rows, 1)
        col_labels = np.array([html.escape(c) for c in cols], dtype=object)[None, :]  # (1, cols)
        verdict = np.where(matrix == 1, may, may_not).astype(object)  # (rows, cols)
        hover = (row_labels + verdict + col_labels).astype(str)  # (rows, cols)
        traces.append(dict(
            type="heatmap", z=matrix, x=np.arange(len(cols)), y=np.arange(len(rows)), text=hover,
            hovertemplate="%{text}<extra></extra>", zmin=0, zmax=1, showscale=False,
            colorscale=[[0.0, BLOCKED_COLOR], [0.5, BLOCKED_COLOR], [0.5, ALLOWED_COLOR], [1.0, ALLOWED_COLOR]],
            xgap=1, ygap=1, xaxis=f"x{suffix}", yaxis=f"y{suffix}"))
        layout[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", domain=[0.0, 1.0], title=dict(text=key_title),
                                        tickvals=list(range(len(cols))), ticktext=cols, tickangle=-60, side="bottom")
        layout[f"yaxis{suffix}"] = dict(anchor=f"x{suffix}", domain=domain, title=dict(text=query_title),
                                        tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed")
        annotations.append(dict(font=dict(size=16), showarrow=False, text=titles[index], x=0.5, xanchor="center",
                                xref="paper", y=top, yanchor="bottom", yref="paper"))
    layout.update(annotations=annotations, height=height, margin=dict(l=20, r=20, t=50, b=20), plot_bgcolor="white",
                  font=dict(size=11))
    return go.Figure(dict(data=traces, layout=layout))


ANATOMY_COLUMNS = {"side": "col_side", "i": "col_i", "token": "col_token", "position": "col_position",
                   "position (block)": "col_position_block", "segment": "col_segment", "target": "col_target"}


def anatomy_table(anatomy) -> pd.DataFrame:
    """Inputs, position ids (both rows for GLM), segments and targets, one row per token. Headers and the side
    ("encoder", "input", "decoder") in the reader's language; tokens and numbers as they are."""
    records = []
    encoder_decoder = anatomy.decoder_inputs is not None
    first_side = tr("explorer.side_encoder") if encoder_decoder else tr("explorer.side_input")
    for i, token in enumerate(anatomy.inputs):
        row = {"side": first_side, "i": i, "token": token, "position": anatomy.positions[0][i]}
        if len(anatomy.positions) > 1:
            row["position (block)"] = anatomy.positions[1][i]
        if anatomy.segments is not None:
            row["segment"] = "AB"[anatomy.segments[i]] if anatomy.segments[i] in (0, 1) else anatomy.segments[i]
        row["target"] = "" if encoder_decoder else (anatomy.targets[i] or "")
        records.append(row)
    if encoder_decoder:
        decoder_side = tr("explorer.side_decoder")
        for i, token in enumerate(anatomy.decoder_inputs):
            records.append({"side": decoder_side, "i": i, "token": token,
                            "position": anatomy.decoder_positions[0][i], "target": anatomy.targets[i] or ""})
    table = pd.DataFrame.from_records(records)
    return table.rename(columns={name: tr(f"explorer.{key}") for name, key in ANATOMY_COLUMNS.items()})
