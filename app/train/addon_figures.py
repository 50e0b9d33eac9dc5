"""Plotly figures for the add-on objectives (lab_models/objectives/addons.py) on the Train tab: the validation numbers
of a run with contrastive learning or back-translation. (The Understand tab's sentence similarity by topic, where the
contrastive add-on shows, is app/understand/similarity_figures.py's.)

Presentation only. A validation row of metrics.jsonl may carry `alignment`, `uniformity` and `topic_gap`
(contrastive) and `bleu_en_zh`, `bleu_zh_en`, `chrf_en_zh`, `chrf_zh_en` (back-translation); the adversarial add-on
needs no figure of its own (its `clean_nll` and `adversarial_nll` are loss parts, drawn by the loss curve).

Every word drawn here is in the reader's language (`app.i18n.language.tr`, keys `train.addon_*`); run ids, family names,
metric names (BLEU, chrF) and numbers stay as they are.

>>> [key for key, _ in SENTENCE_KEYS]
['topic_gap', 'alignment', 'uniformity']
>>> addon_keys([{"split": "val", "step": 5, "bleu_en_zh": 1.5}, {"split": "train", "step": 5, "loss": 2.0}])
['bleu_en_zh']
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import compact_empty_figure
from app.i18n.language import tr
from app.inputs import finite
from app.train.figures import thin_with_mode

SENTENCE_KEYS = (("topic_gap", "topic gap (same − different cosine, ↑)"), ("alignment", "alignment (↓)"),
                 ("uniformity", "uniformity (↓)"))
TRANSLATION_KEYS = (("bleu_en_zh", "BLEU en→zh"), ("bleu_zh_en", "BLEU zh→en"), ("chrf_en_zh", "chrF en→zh"),
                    ("chrf_zh_en", "chrF zh→en"))
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706")
NO_ADDON_NUMBERS = ("No add-on numbers for this run: they appear in the validation rows of runs with the "
                    "contrastive or back_translation objective.")  # the English of train.addon_empty
# the legend's words for the sentence-space metrics in the reader's language (train.json); BLEU and chrF stay
METRIC_KEYS = {"topic_gap": "addon_topic_gap", "alignment": "addon_alignment", "uniformity": "addon_uniformity"}


def metric_label(key: str, english: str) -> str:
    """An add-on metric's legend text in the reader's language."""
    return tr(f"train.{METRIC_KEYS[key]}") if key in METRIC_KEYS else english




def _val_rows(rows: list[dict]) -> list[dict]:
    by_step = {int(row["step"]): row for row in rows if row.get("split") == "val"
               and isinstance(row.get("step"), (int, float)) and not isinstance(row.get("step"), bool)}
    return [by_step[step] for step in sorted(by_step)]


def addon_keys(rows: list[dict]) -> list[str]:
    """The add-on metrics present in the validation rows, in display order."""
    present = {key for row in _val_rows(rows) for key in row if finite(row.get(key)) is not None}
    return [key for key, _ in (*SENTENCE_KEYS, *TRANSLATION_KEYS) if key in present]


def addon_row_count(rows: list[dict]) -> int:
    """How many validation rows carry add-on numbers: what the add-on figure draws, for the live tick's signature."""
    keys = {key for key, _ in (*SENTENCE_KEYS, *TRANSLATION_KEYS)}
    return sum(1 for row in _val_rows(rows) if any(finite(row.get(key)) is not None for key in keys))


def addon_figure(rows: list[dict], *, title: str = "", height: int = 320) -> go.Figure:
    """One panel per add-on with numbers: the sentence space (contrastive; the topic gap on its own axis, on the
    right, since it is a small difference of cosines) and translation quality (back-translation), each metric a line
    over the validation steps."""
    val = _val_rows(rows)
    keys = set(addon_keys(rows))
    panels = [(name, [(k, metric_label(k, label)) for k, label in group if k in keys])
              for name, group in ((tr("train.addon_sentence_panel"), SENTENCE_KEYS),
                                  (tr("train.addon_translation_panel"), TRANSLATION_KEYS))]
    panels = [(name, group) for name, group in panels if group]
    if not panels:
        return compact_empty_figure(tr("train.addon_empty"), height)
    figure = make_subplots(rows=1, cols=len(panels), subplot_titles=[name for name, _ in panels],
                           horizontal_spacing=0.14, specs=[[{"secondary_y": True} for _ in panels]])
    for column, (_, group) in enumerate(panels, start=1):
        for index, (key, label) in enumerate(group):
            points, mode = thin_with_mode([(row["step"], finite(row.get(key))) for row in val
                                           if finite(row.get(key)) is not None])
            right = key == "topic_gap"
            figure.add_trace(go.Scatter(x=[s for s, _ in points], y=[v for _, v in points], mode=mode,
                                        name=label, line={"color": COLORS[index % len(COLORS)], "width": 2,
                                                          "dash": "dot" if right else "solid"},
                                        legendgroup=str(column)), row=1, col=column, secondary_y=right)
            if right:
                figure.update_yaxes(title_text=tr("train.addon_topic_gap_axis"), secondary_y=True, row=1, col=column,
                                    showgrid=False)
        figure.update_xaxes(title_text=tr("train.fig_step"), row=1, col=column)
    figure.update_layout(title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height,
                         template="plotly_white", hovermode="x unified",
                         legend={"orientation": "h", "yanchor": "top", "y": -0.25, "xanchor": "left", "x": 0},
                         margin={"l": 50, "r": 20, "t": 60, "b": 60}, uirevision=title or "addons")
    return figure
