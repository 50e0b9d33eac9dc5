"""Plotly figures for the Understand tab's Sentence similarity section: per run, the topic x topic mean cosine of
held-out sentences' pooled vectors, and the same-topic and different-topic means side by side.

Presentation only: the numbers are `api.sentence_similarity`'s `TopicSimilarity` results
(lab_models/inference/sentence_similarity.py). Every word drawn here is in the reader's language
(`app.i18n.language.tr`, keys `train.similarity_*`); run ids, family names, topics and numbers stay as they are.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import compact_empty_figure
from app.i18n.language import tr
from app.inputs import finite


def topic_similarity_figure(results) -> go.Figure:
    """For each run (an `api.TopicSimilarity`): its topic x topic mean-cosine heatmap, titled with the same-topic and
    different-topic means and their gap. Each run has its own colour scale (its lowest to its highest mean), so that
    a bright diagonal (same topic closer) shows whatever the run's overall level; the numbers are in the cells."""
    if not results:
        return compact_empty_figure(tr("train.similarity_empty"), 360)
    titles = [tr("train.similarity_title", run_id=r.run_id, family=r.family, step=f"{r.step:,}", pooling=r.pooling,
                 auc=f"{r.auc:.3f}", same=f"{r.same:.3f}", different=f"{r.different:.3f}", gap=f"{r.gap:+.3f}")
              for r in results]
    figure = make_subplots(rows=1, cols=len(results), subplot_titles=titles, horizontal_spacing=0.08)
    for column, result in enumerate(results, start=1):
        values = [v for line in result.matrix for v in line if finite(v) is not None] or [0.0, 1.0]
        figure.add_trace(go.Heatmap(
            z=result.matrix, x=list(result.topics), y=list(result.topics), zmin=min(values), zmax=max(values),
            colorscale="Viridis", showscale=False,
            text=[[f"{v:.3f}" for v in line] for line in result.matrix], texttemplate="%{text}",
            hovertemplate=tr("train.similarity_hover")), row=1, col=column)
        figure.update_yaxes(autorange="reversed", row=1, col=column)
    figure.update_annotations(font_size=11)
    figure.add_annotation(text=tr("train.similarity_colour_note"), showarrow=False,
                          x=0, y=-0.14, xref="paper", yref="paper", xanchor="left", font={"size": 11,
                                                                                          "color": "#64748b"})
    figure.update_layout(height=440, template="plotly_white", margin={"l": 70, "r": 20, "t": 110, "b": 50})
    return figure


def topic_gap_figure(results) -> go.Figure:
    """Same-topic and different-topic mean cosine per run, as grouped bars (the gap between them is the point)."""
    if not results:
        return compact_empty_figure(tr("train.similarity_bars_empty"), 300)
    names = [f"{r.run_id} ({r.family})" for r in results]
    figure = go.Figure([
        go.Bar(name=tr("train.similarity_same"), x=names, y=[r.same for r in results], marker_color="#16a34a",
               text=[f"{r.same:.3f}" for r in results], textposition="outside"),
        go.Bar(name=tr("train.similarity_different"), x=names, y=[r.different for r in results],
               marker_color="#94a3b8", text=[f"{r.different:.3f}" for r in results], textposition="outside")])
    figure.update_layout(barmode="group", height=320, template="plotly_white",
                         yaxis_title=tr("train.similarity_axis"),

                         legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
                         margin={"l": 60, "r": 20, "t": 40, "b": 60})
    return figure
