"""The Leaderboard tab's table and figure: `api.leaderboard`'s frame, shown for people.

Presentation only: every number here comes from `lab_models.api.leaderboard` (lab_models/inference/leaderboard.py
documents the metrics). The display table rounds the scores and writes "—" for a metric a run does not have; the reasons
are listed under it (`notes_markdown`); the CSV export keeps the frame itself, at full precision.

Headers, titles, legends and notes are written in the reader's language (app/i18n/language.py `tr`); the reasons that
`lab_models` gives for a missing score go through the message catalogue (app/i18n/messages.py). Run ids, family names,
task names and numbers stay as they are.
"""
from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import FONT, RUN_COLORS, cjk_empty_figure
from app.i18n.language import tr
from app.i18n.messages import translate_message

MISSING = "—"
# column of api.leaderboard -> (header in the page (English), whether lower is better); accuracy_<task> columns are
# added. The page writes each header and plot title in the reader's language: leaderboard.json "col_<column>" and
# "fig_<column>".
METRIC_TITLES = {
    "val_bits_per_byte": ("val bits/byte ↓", True),
    "fill_mask_accuracy": ("fill-mask acc ↑", False),
    "infill_exact_match": ("infill EM ↑", False),
    "probe_accuracy": ("probe acc (roles) ↑", False),
}
TABLE_KEYS = ("run", "family", "preset", "corpus", "steps", "training_tokens", "parameters")  # "col_<key>"
ACCURACY_PREFIX = "accuracy_"
BAR_HEIGHT = 30  # pixels per run in the figure


def task_columns(frame: pd.DataFrame) -> list[str]:
    """The accuracy_<task> columns of a leaderboard frame, in order.

    >>> task_columns(pd.DataFrame(columns=["run_id", "accuracy_topic", "fill_mask_note", "accuracy_sentiment"]))
    ['accuracy_topic', 'accuracy_sentiment']
    """
    return [name for name in frame.columns if str(name).startswith(ACCURACY_PREFIX)]


def metric_columns(frame: pd.DataFrame) -> list[str]:
    """Every score column of the frame (bits per byte, fill-mask, infill, then one per fine-tuning task)."""
    return [name for name in METRIC_TITLES if name in frame.columns] + task_columns(frame)


def format_score(value, digits: int = 3) -> str:
    """A score for the table: rounded, or "—" when the run has none.

    >>> format_score(0.123456), format_score(float("nan")), format_score(None), format_score(2.0)
    ('0.123', '—', '—', '2.000')
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return MISSING
    return MISSING if math.isnan(number) else f"{number:.{digits}f}"


def format_count(value) -> str:
    """A count with thousands separators, or "—".

    >>> format_count(153600.0), format_count(float("nan"))
    ('153,600', '—')
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return MISSING
    return MISSING if math.isnan(number) else f"{int(round(number)):,}"


NO_BITS_NOTE = "no_bits_note"  # leaderboard.json: why a run has no validation bits per byte


def notes_markdown(frame: pd.DataFrame) -> str:
    """Why some scores are missing (or based on fewer sentences), one bullet per reason with the runs it applies
    to; "" when every run has every score.

    >>> print(notes_markdown(pd.DataFrame({"run_id": ["a", "b"], "fill_mask_note": ["GPT reads left to right.", ""],
    ...                                    "infill_note": ["GPT reads left to right.", ""]})))
    **Why some scores are missing**
    - fill-mask and infill, **a**: GPT reads left to right.
    """
    reasons: dict[str, dict[str, list[str]]] = {}  # reason -> run -> the metrics it explains
    for _, row in frame.iterrows():
        if "val_bits_per_byte" in row and pd.isna(row["val_bits_per_byte"]):
            reasons.setdefault(NO_BITS_NOTE, {}).setdefault(str(row["run_id"]), []).append(tr("leaderboard.note_bits"))
        for column, key in (("fill_mask_note", "leaderboard.note_fill_mask"), ("infill_note", "leaderboard.note_infill"),
                            ("probe_note", "leaderboard.note_probe")):
            note = str(row.get(column) or "").strip()
            if note and note.lower() != "nan":
                reasons.setdefault(note, {}).setdefault(str(row["run_id"]), []).append(tr(key))
    if not reasons:
        return ""
    lines = [tr("leaderboard.notes_heading")]
    for note, per_run in reasons.items():
        reason = tr(f"leaderboard.{NO_BITS_NOTE}") if note == NO_BITS_NOTE else translate_message(note)
        by_metrics: dict[str, list[str]] = {}
        for run, labels in per_run.items():
            by_metrics.setdefault(tr("leaderboard.note_and").join(labels), []).append(f"**{run}**")
        for metrics, run_names in by_metrics.items():
            lines.append(tr("leaderboard.note_line", metrics=metrics, runs=tr("leaderboard.list_separator").join(run_names),
                            reason=html.escape(reason, quote=False)))  # <pad>: text
    return "\n".join(lines)


def display_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard as the page shows it: readable headers, rounded scores and "—" for a missing one (the reasons
    go under the table, `notes_markdown`)."""
    columns = [tr(f"leaderboard.col_{key}") for key in TABLE_KEYS]
    columns += [tr(f"leaderboard.col_{name}") for name in METRIC_TITLES]
    probed = "best_probe_layer" in frame.columns
    columns += [tr("leaderboard.col_best_probe_layer")] if probed else []
    tasks = task_columns(frame)
    columns += [tr("leaderboard.col_task_accuracy", task=name[len(ACCURACY_PREFIX):]) for name in tasks]
    rows = []
    for _, row in frame.iterrows():
        shown = [row["run_id"], row["family"], row["preset"] or "", row["corpus"], format_count(row["steps"]),
                 format_count(row["training_tokens"]), format_count(row["parameters"])]
        shown += [format_score(row[name]) if name in row else MISSING for name in METRIC_TITLES]
        shown += [str(row["best_probe_layer"]) or MISSING] if probed else []
        shown += [format_score(row[name]) for name in tasks]
        rows.append(shown)
    return pd.DataFrame(rows, columns=columns)


def _run_labels(frame: pd.DataFrame) -> list[str]:
    """The y-axis label of each row: the run id, with its corpus when the table mixes corpora."""
    several = frame["corpus"].nunique() > 1
    return [f"{run} · {corpus}" if several else str(run) for run, corpus in zip(frame["run_id"], frame["corpus"])]


def leaderboard_figure(frame: pd.DataFrame) -> go.Figure:
    """One horizontal bar chart per metric, side by side, the runs on a shared y axis (the table's order, best bits
    per byte on top), one colour per family. A run without a metric shows "n/a" where its bar would be; bits per
    byte says "lower is better", the others "higher is better". Accuracies share the 0..1 scale."""
    if frame is None or not len(frame):
        return cjk_empty_figure(tr("leaderboard.fig_no_runs"))
    metrics = metric_columns(frame)
    titles = [tr(f"leaderboard.fig_{name}") if name in METRIC_TITLES else
              tr("leaderboard.fig_task_accuracy", task=html.escape(name[len(ACCURACY_PREFIX):])) for name in metrics]
    not_available = tr("leaderboard.fig_not_available")
    figure = make_subplots(rows=1, cols=len(metrics), shared_yaxes=True, subplot_titles=titles,
                           horizontal_spacing=0.03)
    labels = _run_labels(frame)
    families = list(dict.fromkeys(str(family) for family in frame["family"]))
    colors = {family: RUN_COLORS[i % len(RUN_COLORS)] for i, family in enumerate(families)}
    for col, metric in enumerate(metrics, start=1):
        values = pd.to_numeric(frame[metric], errors="coerce")
        for family in families:
            chosen = [i for i, f in enumerate(frame["family"]) if str(f) == family and not math.isnan(values[i])]
            figure.add_trace(go.Bar(
                x=[float(values[i]) for i in chosen], y=[labels[i] for i in chosen], orientation="h",
                name=family, legendgroup=family, showlegend=col == 1, marker_color=colors[family],
                text=[f"{float(values[i]):.3f}" for i in chosen], textposition="auto",
                hovertemplate=f"%{{y}}<br>{html.escape(metric)} = %{{x:.4f}}<extra>{html.escape(family)}</extra>"),
                row=1, col=col)
        missing = [labels[i] for i in range(len(frame)) if math.isnan(values[i])]
        if missing:  # say "n/a" where the bar would be, so a missing bar is never read as a zero
            figure.add_trace(go.Scatter(x=[0] * len(missing), y=missing, mode="text", text=[not_available] * len(missing),
                                        textposition="middle right", textfont={"color": "#94a3b8"},
                                        showlegend=False, hoverinfo="skip"), row=1, col=col)
        if metric != "val_bits_per_byte":
            figure.update_xaxes(range=[0, 1.05], row=1, col=col)
        else:
            top = values.max()
            figure.update_xaxes(range=[0, 1.15 * top if top == top and top > 0 else 1], row=1, col=col)
    figure.update_yaxes(categoryorder="array", categoryarray=list(reversed(labels)), automargin=True)
    figure.update_annotations(font={"size": 12})
    figure.update_layout(template="plotly_white", font={"family": FONT}, barmode="overlay", bargap=0.25,
                         height=150 + BAR_HEIGHT * len(frame), margin={"l": 10, "r": 20, "t": 70, "b": 40},
                         legend={"title": {"text": tr("leaderboard.fig_legend_family")}, "orientation": "h", "y": -0.08, "yanchor": "top"})
    return figure
