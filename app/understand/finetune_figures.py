"""Plotly figures, pandas tables, HTML and markdown for the Understand tab's Fine-tune section.

Presentation only: every number drawn here comes from `lab_models.api` (`finetune_status`, `finetune_leaderboard`,
`check_csv_task`, `default_pooling`, `default_lm_aux_weight`). The progress rows reuse the Train tab's progress-bar
classes from assets/lab.css (`train-progress`, `train-bar`, coloured by state), so a fine-tuning looks like a run.

Papers: the recipe drawn here is BERT §4 (a [CLS] head) and GPT §3.2 (a last-token head plus λ times the LM loss);
lab_models/inference/finetuning/run.py states how the lab deviates from them. This module adds no method of its own.

Every word drawn here (headers, titles, legends, hover texts, state names, notes) is in the reader's language
(app/i18n/language.py `tr`); `lab_models`' sentences (a task's description, an error, a worker's failure) go through the
message catalogue (app/i18n/messages.py). Run ids, family names, task names, label names and numbers stay as they are.
"""
from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

from app.display import (BAR_PATTERNS, FONT, MARGIN, STATE_COLORS, cjk_empty_figure, format_duration,
                          run_styles)
from app.i18n.language import marker, tr
from app.i18n.messages import translate
from app.inputs import finite

# the table the page shows: who, on what, how well, then how it was fine-tuned
TABLE_COLUMNS = ["pretrained run", "family", "task", "accuracy", "macro F1", "majority baseline", "pooling", "λ",
                 "adversarial", "steps", "seconds", "state", "finetune"]
# in pixels, each wide enough for its longest header word (in English, the longer language): the table fits a
# 1400-pixel window and scrolls sideways in a narrow one (a share of a phone's width would break every word)
TABLE_COLUMN_WIDTHS = ["150px", "76px", "72px", "84px", "76px", "90px", "78px", "44px", "112px", "64px", "88px", "92px",
                       "150px"]
# each column's header in the page: finetune.json "col_<key>" (λ is λ in every language)
TABLE_HEADER_KEYS = {"pretrained run": "col_pretrained_run", "family": "col_family", "task": "col_task",
                     "accuracy": "col_accuracy", "macro F1": "col_macro_f1", "majority baseline": "col_baseline",
                     "pooling": "col_pooling", "adversarial": "col_adversarial", "steps": "col_steps",
                     "seconds": "col_seconds", "state": "col_state", "finetune": "col_finetune"}
STATES = ("queued", "running", "finished", "failed", "stopped", "died", "unknown", "error")  # "state_<state>"
# the built-in tasks: finetune.json "task_<name>"
TASKS = ("sentiment", "topic", "entailment", "tagging", "scope", "story_order")
TASK_KINDS = ("sequence", "pair", "token")  # finetune.json "kind_<kind>"
POOLINGS = ("first", "mean", "last")  # finetune.json "pooling_<pooling>"


def task_title(name: str, english: str | None = None) -> str:
    """A built-in task's title in the reader's language ("topic" -> "Topic (5-way)"); another task keeps `english`
    (its spec's title) or its name."""
    return tr(f"finetune.task_{name}") if name in TASKS else (english or name)


def state_name(state: str) -> str:
    """A fine-tuning's state ("running") in the reader's language; an unknown state as it is."""
    return tr(f"finetune.state_{state}") if state in STATES else state
BASELINE_COLOR = "#0f172a"
BAR_GROUP_HALF_WIDTH = 0.4  # the baseline line spans the group of bars: category i covers i ± this (plotly's 0.8 gap)




def format_accuracy(value) -> str:
    """0.86 -> "0.860"; None (no evaluation yet) -> "—".

    >>> format_accuracy(0.86), format_accuracy(None)
    ('0.860', '—')
    """
    number = finite(value)
    return "—" if number is None else f"{number:.3f}"


# ------------------------------------------------------------------------------------------------ markdown
def _md(text) -> str:
    """Text made safe for a gr.Markdown: HTML escaped, quotes kept readable.

    >>> _md("no column 'x' <here>")
    "no column 'x' &lt;here&gt;"
    """
    return html.escape(str(text), quote=False)


def task_markdown(spec=None, csv: bool = False) -> str:
    """What the chosen task is: its title, kind, labels and one-line description (a `FinetuneTaskSpec`), or how a
    CSV task is read when `csv` is True."""
    if csv or spec is None:
        return tr("finetune.csv_task_note")
    kind = tr(f"finetune.kind_{spec.kind}") if spec.kind in TASK_KINDS else spec.kind
    labels = ", ".join(spec.label_names)
    return tr("finetune.task_note", title=_md(task_title(spec.name, spec.title)), kind=kind, labels=_md(labels),
              description=_md(translate(spec.description)))


def csv_summary_markdown(summary: dict | None, error: str | None = None) -> str:
    """The CSV task as the worker will read it (`api.check_csv_task`), or the error that stops it."""
    if error:
        return f"⚠️ {_md(translate(error))}"
    if not summary:  # the page's own note: translated in the page (a marker in the Markdown's value)
        return marker("finetune.csv_upload_note")
    counts = summary.get("train_label_counts") or {}
    shown = ", ".join(f"{_md(str(name))} {count}" for name, count in list(counts.items())[:12])
    more = tr("finetune.csv_more", count=len(counts) - 12) if len(counts) > 12 else ""
    kind = tr("finetune.csv_pairs") if summary.get("kind") == "pair" else tr("finetune.csv_sentences")
    return "✅ " + tr("finetune.csv_summary", title=_md(summary.get("title") or summary.get("name")),
                      train=f"{summary.get('train_examples', 0):,}",
                      validation=f"{summary.get('validation_examples', 0):,}", kind=kind,
                      labels=len(summary.get("label_names") or []), counts=shown + more,
                      baseline=format_accuracy(summary.get("majority_baseline")))


def defaults_markdown(rows: list[dict]) -> str:
    """What "auto" means for each selected run: one line per run with its family's pooling and λ. Each row:
    run_id, family, pooling, lm_aux_weight (or error)."""
    if not rows:  # the page's own note: translated in the page (a marker in the Markdown's value)
        return marker("finetune.defaults_empty")
    lines = [tr("finetune.defaults_header"), "| --- | --- | --- | --- |"]
    for row in rows:
        if row.get("error"):
            lines.append(f"| `{_md(row['run_id'])}` | {_md(row.get('family') or '?')} | "
                         f"{_md(row['error'])} | |")
            continue
        pooling = tr(f"finetune.pooling_{row['pooling']}") if row["pooling"] in POOLINGS else row["pooling"]
        lines.append(f"| `{_md(row['run_id'])}` | {_md(row['family'])} | {pooling} | "
                     f"{row['lm_aux_weight']:g} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ progress
def progress_html(statuses: list[dict]) -> str:
    """One progress row per fine-tuning: state, run → task, step / total, the latest validation accuracy (and the
    training batches' accuracy), coloured like the Train tab's bar. Each status: `api.finetune_status`'s dict."""
    if not statuses:
        return ('<div class="train-progress train-idle"><div class="train-progress-head">'
                f'<span class="train-state">{html.escape(tr("finetune.progress_idle"))}</span>'
                f'<span>{html.escape(tr("finetune.progress_idle_hint"))}</span>'
                '</div><div class="train-bar"><div class="train-bar-fill" style="width:0%"></div></div></div>')
    return '<div class="ft-progress-list">' + "".join(_progress_row(status) for status in statuses) + "</div>"


def _state_label(status: dict) -> str:
    state = status.get("state") or "unknown"
    if state == "queued" and status.get("queue_position"):
        return tr("finetune.state_queued_at", position=status["queue_position"])
    if state == "running" and status.get("stopping"):
        return tr("finetune.state_stopping")
    if state == "stopped" and status.get("interrupted"):
        return tr("finetune.state_interrupted")
    return state_name(state)


def _head_settings(status: dict) -> str:
    """" · pooling last, λ 0.5" once the worker has resolved them ("auto" and empty say nothing yet)."""
    parts = []
    if status.get("pooling") and status.get("pooling") != "auto":
        parts.append(tr("finetune.head_pooling", pooling=html.escape(str(status["pooling"]))))
    if finite(status.get("lm_aux_weight")) is not None:
        parts.append(f"λ {float(status['lm_aux_weight']):g}")
    return f" · {tr('finetune.list_separator').join(parts)}" if parts else ""


def _progress_row(status: dict) -> str:
    if status.get("error"):  # a fine-tuning folder that went away, or an unknown id
        return (f'<div class="train-progress train-failed" data-state="error"><div class="train-progress-head">'
                f'<span class="train-state">{html.escape(state_name("error"))}</span>'
                f'<span>{html.escape(str(status.get("finetune_id", "")))}</span>'
                f'<span>{html.escape(translate(status["error"]))}</span></div></div>')
    state = status.get("state") or "unknown"
    step = int(status.get("step") or 0)
    total = status.get("total_steps")
    fraction = min(1.0, step / total) if total else 0.0
    if state == "finished":
        fraction = 1.0
    accuracy = finite(status.get("accuracy")) if status.get("has_result") else finite(status.get("val_accuracy"))
    where = (tr("finetune.progress_final") if status.get("has_result") else
             (tr("finetune.progress_at_step", step=status["val_step"]) if status.get("val_step") else ""))
    parts = [f'<span class="train-state">{html.escape(_state_label(status))}</span>',
             f"<span><b>{html.escape(str(status.get('run_id') or '?'))}</b> "
             f"({html.escape(str(status.get('family') or '?'))}) → {html.escape(str(status.get('task') or '?'))}"
             f"{_head_settings(status)}</span>",
             "<span>" + tr("finetune.progress_step", step=f"{step:,}", total=f"{int(total):,}" if total else "?",
                           percent=f"{fraction:.0%}") + "</span>",
             "<span>" + tr("finetune.progress_accuracy", accuracy=format_accuracy(accuracy))
             + (tr("finetune.progress_where", where=where) if accuracy is not None and where else "") + "</span>"]
    if finite(status.get("train_accuracy")) is not None and not status.get("has_result"):
        parts.append("<span>" + tr("finetune.progress_batches", accuracy=format_accuracy(status["train_accuracy"]))
                     + "</span>")
    if status.get("has_result") and finite(status.get("seconds")) is not None:
        parts.append(f"<span>{format_duration(status['seconds'])}</span>")
    if state in ("failed", "died") and status.get("message"):
        parts.append(f"<span>{html.escape(translate(status['message']))}</span>")
    color = STATE_COLORS.get(state, "#64748b")
    title = html.escape(str(status.get("finetune_id") or ""))
    return (f'<div class="train-progress train-{html.escape(state)}" data-state="{html.escape(state)}" '
            f'title="{title}"><div class="train-progress-head">{"".join(parts)}</div>'
            f'<div class="train-bar" role="progressbar" aria-valuemin="0" aria-valuemax="{int(total or 0)}" '
            f'aria-valuenow="{step}"><div class="train-bar-fill" style="width:{fraction * 100:.1f}%;'
            f'background:{color}"></div></div></div>')


# ------------------------------------------------------------------------------------------------ leaderboard
def leaderboard_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard (`api.finetune_leaderboard`'s frame) for the page: TABLE_COLUMNS, scores to 3 decimals,
    seconds to 1, best accuracy first within each task (the order the frame has). The headers and the state are in
    the reader's language; the page only shows this table (nothing reads it back)."""
    if frame is None or not len(frame):
        return pd.DataFrame(columns=table_headers())
    table = frame.copy()
    for column in TABLE_COLUMNS:
        if column not in table.columns:
            table[column] = None
    for column in ("accuracy", "macro F1", "majority baseline"):
        table[column] = [round(float(v), 3) if finite(v) is not None else None for v in table[column]]
    table["seconds"] = [round(float(v), 1) if finite(v) is not None else None for v in table["seconds"]]
    table["λ"] = [float(v) if finite(v) is not None else None for v in table["λ"]]
    table["steps"] = [int(v) if finite(v) is not None else None for v in table["steps"]]
    table["state"] = [state_name(str(v)) if isinstance(v, str) else v for v in table["state"]]
    table = table[TABLE_COLUMNS].reset_index(drop=True)
    table.columns = table_headers()
    return table


def table_headers() -> list[str]:
    """TABLE_COLUMNS as the page's headers, in the reader's language."""
    return [tr(f"finetune.{TABLE_HEADER_KEYS[column]}") if column in TABLE_HEADER_KEYS else column
            for column in TABLE_COLUMNS]


def best_per_run_and_task(frame: pd.DataFrame) -> pd.DataFrame:
    """The best fine-tuning (highest accuracy; the first on a tie) of each pretrained run on each task."""
    if frame is None or not len(frame):
        return pd.DataFrame(columns=list(frame.columns) if frame is not None else [])
    ordered = frame.assign(_accuracy=[finite(v) if finite(v) is not None else -1.0 for v in frame["accuracy"]])
    ordered = ordered.sort_values("_accuracy", ascending=False, kind="stable")
    best = ordered.drop_duplicates(["pretrained run", "task"], keep="first").drop(columns="_accuracy")
    return best.reset_index(drop=True)


def accuracy_figure(frame: pd.DataFrame, task_titles: dict[str, str] | None = None) -> go.Figure:
    """Validation accuracy per pretrained run (one colour each), grouped by task, each task's majority baseline
    drawn as a dashed line across its group. Plots each run's best fine-tuning per task (`best_per_run_and_task`);
    the table lists them all."""
    if frame is None or not len(frame):
        return cjk_empty_figure(tr("finetune.fig_empty"))
    best = best_per_run_and_task(frame)
    titles = dict(task_titles or {})
    tasks = list(dict.fromkeys(frame["task"]))  # the leaderboard's order (by task name)
    runs = sorted(dict.fromkeys(best["pretrained run"]))  # by name: a run keeps its colour as results come in
    labels = [titles.get(task, task) for task in tasks]
    figure = go.Figure()
    styles = run_styles({run: str(best[best["pretrained run"] == run]["family"].iloc[0] or "?") for run in runs})
    for index, run in enumerate(runs):
        rows = best[best["pretrained run"] == run].set_index("task")
        family = str(rows["family"].iloc[0] or "?")
        color, rank = styles[run]
        accuracy = [finite(rows.at[task, "accuracy"]) if task in rows.index else None for task in tasks]
        hover = []
        for task in tasks:
            if task not in rows.index:
                hover.append("")
                continue
            row = rows.loc[task]
            hover.append(tr("finetune.fig_hover", run=html.escape(run), family=html.escape(family),
                            task=html.escape(str(task)), accuracy=format_accuracy(row["accuracy"]),
                            f1=format_accuracy(row["macro F1"]), pooling=html.escape(str(row["pooling"])),
                            weight=row.get("λ"), steps=row["steps"], state=html.escape(state_name(str(row["state"]))),
                            finetune=html.escape(str(row["finetune"]))))
        figure.add_trace(go.Bar(
            x=labels, y=accuracy, name=f"{run} ({family})", marker_color=color,
            marker_pattern_shape=BAR_PATTERNS[rank % len(BAR_PATTERNS)],
            text=[format_accuracy(a) if a is not None else "" for a in accuracy], textposition="outside",
            hovertext=hover, hoverinfo="text", cliponaxis=False))
    baselines = [finite(best[best["task"] == task]["majority baseline"].iloc[0]) for task in tasks]
    for position, baseline in enumerate(baselines):
        if baseline is None:
            continue
        figure.add_shape(type="line", xref="x", yref="y", x0=position - BAR_GROUP_HALF_WIDTH,
                         x1=position + BAR_GROUP_HALF_WIDTH, y0=baseline, y1=baseline,
                         line={"color": BASELINE_COLOR, "width": 2, "dash": "dash"}, layer="above")
    # the baseline as traces too: a dashed legend entry, and (invisible) hover points at the middle of each group
    baseline_name = tr("finetune.fig_baseline")
    figure.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=baseline_name, hoverinfo="skip",
                                line={"color": BASELINE_COLOR, "width": 2, "dash": "dash"}))
    figure.add_trace(go.Scatter(
        x=labels, y=baselines, mode="markers", name=baseline_name, showlegend=False,
        marker={"size": 14, "color": BASELINE_COLOR, "opacity": 0},
        hovertext=[tr("finetune.fig_baseline_hover", task=html.escape(str(task)), accuracy=format_accuracy(b))
                   for task, b in zip(tasks, baselines)], hoverinfo="text"))
    figure.update_layout(
        template="plotly_white", font={"family": FONT}, margin={**MARGIN, "t": 50}, barmode="group", bargap=0.2,
        height=380, title={"text": tr("finetune.fig_title"), "x": 0.01},
        yaxis={"title": tr("finetune.fig_y"), "range": [0, 1.08], "tickformat": ".1f"},
        xaxis={"title": None, "type": "category"},
        legend={"orientation": "h", "yanchor": "top", "y": -0.12, "x": 0})
    return figure
