"""Plotly figures for the Train tab's Switch Transformer view: per expert, the fraction of each Switch layer's tokens
routed to it and dropped at it, over training. (The Understand tab's token chips by expert are
app/understand/routing_figures.py's.)

Presentation only. The numbers are the `switch` entries of a run's metrics.jsonl train rows (lab_models/models/switch.py):
{"layers": ["layer 2", ...], "n_experts": 8, "routed": [[fraction per expert] per layer], "dropped": [[...]],
"tokens": [...]}. Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers; no deviation (nothing is computed here).
Every word drawn here is in the reader's language (`app.i18n.language.tr`, keys `switch.*`); layer labels are
translated word by word ("layer 2": 第 2 层, `app.display.layer_label`), steps and numbers stay as they are.

>>> routing_series([{"step": 1, "switch": {"layers": ["layer 2"], "n_experts": 2, "routed": [[0.7, 0.3]],
...                  "dropped": [[0.1, 0.0]], "tokens": [64]}}])["layer 2"]["routed"][0]
[(1, 0.7)]
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import empty_figure, expert_color, layer_label
from app.i18n.language import tr
from app.train.figures import split_rows, thin

NO_SWITCH = ("No Switch layers in this run.<br>Tick “Switch layers” before Start: this plot then shows, "
             "per expert,<br>the fraction of tokens routed to it and dropped at it.")  # switch.fig_empty's English


def routing_series(rows: list[dict]) -> dict[str, dict]:
    """layer label -> {"n_experts": E, "routed": [[(step, fraction), ...] per expert], "dropped": [...]} from the
    train rows that carry a `switch` entry."""
    train, _ = split_rows(rows)
    series: dict[str, dict] = {}
    for row in thin([row for row in train if isinstance(row.get("switch"), dict)]):
        entry = row["switch"]
        for index, label in enumerate(entry.get("layers") or []):
            routed = (entry.get("routed") or [])[index] if index < len(entry.get("routed") or []) else []
            dropped = (entry.get("dropped") or [])[index] if index < len(entry.get("dropped") or []) else []
            layer = series.setdefault(label, {"n_experts": len(routed), "routed": [], "dropped": []})
            for kind, values in (("routed", routed), ("dropped", dropped)):
                while len(layer[kind]) < len(values):
                    layer[kind].append([])
                for expert, value in enumerate(values):
                    layer[kind][expert].append((row["step"], value))
            layer["n_experts"] = max(layer["n_experts"], len(routed))
    return series


def routing_row_count(rows: list[dict]) -> int:
    """How many training rows carry routing numbers (a resumed run's repeated steps counted again): what the routing
    figure draws, for the live tick's signature. One cheap pass: the tick asks it of every row of a run, every tick.

    >>> routing_row_count([{"step": 1, "switch": {"layers": []}}, {"step": 2}, {"step": 2, "split": "val"}])
    1
    """
    return sum(1 for row in rows if "switch" in row and row.get("split") != "val" and isinstance(row["switch"], dict))


def routing_figure(rows: list[dict], *, title: str = "", height_per_layer: int = 260) -> go.Figure:
    """One panel per Switch layer: per expert, the fraction of the layer's tokens routed to it (solid) and dropped at
    it because it was full (dotted, same colour), over the training steps; the grey line is a perfect balance."""
    series = routing_series(rows)
    if not series:
        return empty_figure(tr("switch.fig_empty"), 240)
    labels = list(series)
    figure = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.12 / max(1, len(labels)),
                           subplot_titles=[tr("switch.fig_panel", layer=layer_label(label)) for label in labels])
    for panel, label in enumerate(labels, start=1):
        layer = series[label]
        for expert, points in enumerate(layer["routed"]):
            color = expert_color(expert)
            figure.add_trace(go.Scatter(x=[s for s, _ in points], y=[v for _, v in points], mode="lines",
                                        name=tr("switch.expert", expert=expert), legendgroup=f"expert {expert}",
                                        hovertemplate=tr("switch.hover_routed", expert=expert)
                                        + " %{y:.3f}<extra></extra>",
                                        showlegend=panel == 1, line={"color": color, "width": 1.8}),
                             row=panel, col=1)
        for expert, points in enumerate(layer["dropped"]):
            figure.add_trace(go.Scatter(x=[s for s, _ in points], y=[v for _, v in points], mode="lines",
                                        name=tr("switch.expert_dropped", expert=expert),
                                        legendgroup=f"expert {expert}",
                                        hovertemplate=tr("switch.hover_dropped", expert=expert)
                                        + " %{y:.3f}<extra></extra>",
                                        showlegend=False,
                                        line={"color": expert_color(expert), "width": 1.2, "dash": "dot"}),
                             row=panel, col=1)
        if layer["n_experts"]:
            figure.add_hline(y=1.0 / layer["n_experts"], line={"color": "#94a3b8", "width": 1, "dash": "dash"},
                             annotation_text=tr("switch.balanced"), annotation_position="top left", row=panel,
                             col=1)
        figure.update_yaxes(title_text=tr("switch.fig_fraction"), rangemode="tozero", row=panel, col=1)
    figure.update_xaxes(title_text=tr("train.fig_step"), row=len(labels), col=1)
    figure.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}}, template="plotly_white", hovermode="x unified",
        height=150 + height_per_layer * len(labels), margin={"l": 60, "r": 20, "t": 70, "b": 110},
        legend={"orientation": "h", "yanchor": "top", "y": -0.5 / len(labels), "xanchor": "left", "x": 0,
                "font": {"size": 11}},
        uirevision=title or "routing")
    figure.update_annotations(font_size=12)
    return figure
