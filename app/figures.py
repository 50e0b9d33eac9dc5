"""Plotly figures and pandas tables for the views: attention heatmaps, tokenizer statistics.

Presentation only: every number drawn here comes from `lab_models.api`.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

ALLOWED_COLOR = "#2563eb"
BLOCKED_COLOR = "#f1f5f9"
STREAM_TITLES = {
    "self": "self-attention", "content": "content stream", "query": "query stream",
    "encoder": "encoder self-attention", "decoder": "decoder self-attention (causal)",
    "cross": "cross-attention (decoder → encoder)",
}


def _labels(tokens: list[str], prefix: str = "x") -> list[str]:
    return [f"{prefix}{i} {tok}" for i, tok in enumerate(tokens)]


def stream_axes(anatomy, stream: str) -> tuple[list[str], list[str]]:
    """Row and column labels of one attention stream, e.g. ("x3 cat", ...)."""
    inputs = _labels(anatomy.inputs)
    if stream == "query":
        slots = anatomy.query_slots if anatomy.query_slots is not None else list(range(len(anatomy.inputs)))
        # A query row knows its position but not its token: label it by the slot it sits at.
        rows = [f"q{i} @x{s}" for i, s in enumerate(slots)]
        return rows, inputs
    if stream in ("decoder", "cross"):
        decoder = _labels(anatomy.decoder_inputs or [], prefix="y")
        return decoder, (decoder if stream == "decoder" else inputs)
    return inputs, inputs


def stream_density(matrix) -> float:
    total = matrix.numel()
    return float(matrix.sum()) / total if total else 0.0


def anatomy_figure(anatomy, *, height_per_token: int = 16) -> go.Figure:
    """One heatmap per attention stream, side by side. Hover reads "x3 cat may attend x1 sat"."""
    streams = list(anatomy.attention)
    titles = [f"{STREAM_TITLES.get(s, s)} · density {stream_density(anatomy.attention[s]):.2f}" for s in streams]
    fig = make_subplots(rows=1, cols=len(streams), subplot_titles=titles, horizontal_spacing=0.12)
    longest = 1
    for col, stream in enumerate(streams, start=1):
        matrix = anatomy.attention[stream].to("cpu").numpy().astype(np.int8)  # (rows, cols)
        rows, cols = stream_axes(anatomy, stream)
        longest = max(longest, len(rows), len(cols))
        verdict = np.where(matrix == 1, "may attend", "may NOT attend")
        hover = [[f"{html.escape(r)} {verdict[i, j]} {html.escape(c)}" for j, c in enumerate(cols)]
                 for i, r in enumerate(rows)]
        fig.add_trace(
            go.Heatmap(z=matrix, x=list(range(len(cols))), y=list(range(len(rows))), text=hover,
                       hovertemplate="%{text}<extra></extra>", zmin=0, zmax=1, showscale=False,
                       colorscale=[[0.0, BLOCKED_COLOR], [0.5, BLOCKED_COLOR], [0.5, ALLOWED_COLOR],
                                   [1.0, ALLOWED_COLOR]], xgap=1, ygap=1),
            row=1, col=col)
        fig.update_xaxes(tickvals=list(range(len(cols))), ticktext=cols, tickangle=-60, row=1, col=col,
                         title_text="key j (attended)", side="bottom")
        fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed", row=1, col=col,
                         title_text="query i (attending)" if col == 1 else None)
    size = min(900, max(320, 120 + height_per_token * longest))
    fig.update_layout(height=size + 60, margin=dict(l=20, r=20, t=60, b=20), plot_bgcolor="white",
                      font=dict(size=11))
    return fig


def anatomy_table(anatomy) -> pd.DataFrame:
    """Inputs, position ids (both rows for GLM), segments and targets, one row per token."""
    records = []
    encoder_decoder = anatomy.decoder_inputs is not None
    for i, token in enumerate(anatomy.inputs):
        row = {"side": "encoder" if encoder_decoder else "input", "i": i, "token": token,
               "position": anatomy.positions[0][i]}
        if len(anatomy.positions) > 1:
            row["position (block)"] = anatomy.positions[1][i]
        if anatomy.segments is not None:
            row["segment"] = "AB"[anatomy.segments[i]] if anatomy.segments[i] in (0, 1) else anatomy.segments[i]
        row["target"] = "" if encoder_decoder else (anatomy.targets[i] or "")
        records.append(row)
    if encoder_decoder:
        for i, token in enumerate(anatomy.decoder_inputs):
            records.append({"side": "decoder", "i": i, "token": token,
                            "position": anatomy.decoder_positions[0][i], "target": anatomy.targets[i] or ""})
    return pd.DataFrame.from_records(records)


def token_length_figure(histograms: dict[str, dict[int, int]]) -> go.Figure:
    """Overlaid bar chart: how many vocabulary entries have each length, per tokenizer kind."""
    fig = go.Figure()
    for kind, histogram in histograms.items():
        lengths = sorted(histogram)
        fig.add_trace(go.Bar(x=lengths, y=[histogram[n] for n in lengths], name=kind, opacity=0.75))
    fig.update_layout(barmode="group", title="Vocabulary: token length distribution",
                      xaxis_title="token length (characters, markers removed)", yaxis_title="vocabulary entries",
                      height=360, margin=dict(l=20, r=20, t=50, b=40))
    return fig


def overlap_figure(overlap: pd.DataFrame) -> go.Figure:
    """Heatmap of pairwise vocabulary overlap (Jaccard) between tokenizer kinds."""
    fig = go.Figure(go.Heatmap(z=overlap.values, x=list(overlap.columns), y=list(overlap.index), zmin=0, zmax=1,
                               colorscale="Blues", text=np.round(overlap.values, 2), texttemplate="%{text}",
                               hovertemplate="%{y} ∩ %{x}: %{z:.2f}<extra></extra>"))
    fig.update_layout(title="Vocabulary overlap (Jaccard)", height=360, margin=dict(l=20, r=20, t=50, b=40),
                      yaxis_autorange="reversed")
    return fig
