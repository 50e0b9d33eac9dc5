"""Plotly figures and HTML for the Switch Transformer views: per-expert routing over training (Train tab) and token
chips coloured by expert (Understand tab).

Presentation only. The numbers are the `switch` entries of a run's metrics.jsonl train rows (lab_models/switch.py):
{"layers": ["layer 2", ...], "n_experts": 8, "routed": [[fraction per expert] per layer], "dropped": [[...]],
"tokens": [...]}, and `api.switch_routing`'s `RoutingView`. Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers;
no deviation (nothing is computed here). Every word drawn here is in the reader's language (`app.i18n.language.tr`, keys
`switch.*`); layer labels are translated word by word ("layer 2": 第 2 层), tokens and numbers stay as they are.

>>> routing_series([{"step": 1, "switch": {"layers": ["layer 2"], "n_experts": 2, "routed": [[0.7, 0.3]],
...                  "dropped": [[0.1, 0.0]], "tokens": [64]}}])["layer 2"]["routed"][0]
[(1, 0.7)]
"""
from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import empty_figure, expert_color, layer_label
from app.i18n.language import tr
from app.train_figures import split_rows, thin

NO_SWITCH = ("No Switch layers in this run.<br>Tick “Switch layers” before Start: this plot then shows, "
             "per expert,<br>the fraction of tokens routed to it and dropped at it.")  # switch.fig_empty's English
ROUTING_COLUMN_KEYS = ("col_layer", "col_position", "col_token", "col_expert", "col_probability")


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


def routing_chips_html(view) -> str:
    """A `RoutingView` as one row of token chips per Switch layer, each chip coloured by its expert (hover: expert
    and router probability; a faded chip is a token routed with low confidence), with a legend of the experts."""
    legend = "".join(f'<span class="tok-chip" style="background:{expert_color(e)};color:#fff">'
                     f'{html.escape(tr("switch.expert", expert=e))}</span>' for e in range(view.n_experts))
    rows = []
    for layer in view.layers:
        chips = []
        for token, expert, probability, kept in zip(layer.tokens, layer.experts, layer.probabilities, layer.kept):
            tooltip = tr("switch.chip_tooltip", token=repr(token), expert=expert, probability=f"{probability:.2f}")
            if not kept:
                tooltip += tr("switch.chip_dropped")
            opacity = 0.45 + 0.55 * min(1.0, max(0.0, (probability - 1.0 / view.n_experts) /
                                                 max(1e-9, 1.0 - 1.0 / view.n_experts)))
            style = (f"background:{expert_color(expert)};color:#fff;opacity:{opacity:.2f}"
                     + (";text-decoration:line-through" if not kept else ""))
            chips.append(f'<span class="tok-chip switch-chip" data-expert="{expert}" style="{style}" '
                         f'title="{html.escape(tooltip)}">{html.escape(token)}<sub>{expert}</sub></span>')
        used = len(set(layer.experts))
        counts = tr("switch.chips_counts", tokens=len(layer.tokens), used=used, experts=view.n_experts)
        rows.append(f'<div class="tok-row switch-layer"><div class="tok-title"><b>'
                    f'{html.escape(layer_label(layer.label))}</b> <span class="tok-sub">{html.escape(counts)}'
                    f'</span></div><div class="tok-chips">{"".join(chips)}</div></div>')
    head = tr("switch.chips_head", family=view.family, step=f"{view.step:,}", experts=view.n_experts)
    return (f'<div class="switch-routing" id="switch-routing-chips"><div class="tok-row"><div class="tok-title">'
            f'<b>{html.escape(view.run_id)}</b> <span class="tok-sub">{html.escape(head)}</span></div>'
            f'<div class="tok-chips">{legend}</div></div>{"".join(rows)}</div>')


def routing_table(view):
    """The view as a table: layer, position, token, expert, probability (pandas; headers and layer labels in the
    reader's language; the table is only shown, never read back)."""
    import pandas as pd

    records = [[layer_label(layer.label), position, token, expert, probability]
               for layer in view.layers
               for position, (token, expert, probability) in enumerate(zip(layer.tokens, layer.experts,
                                                                             layer.probabilities))]
    return pd.DataFrame(records, columns=[tr(f"switch.{key}") for key in ROUTING_COLUMN_KEYS])

