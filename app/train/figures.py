"""Plotly figures, HTML and pandas tables for the Train tab: loss curves, the progress bar, the runs table.

Presentation only: every number drawn here is a row of a run's metrics.jsonl or a field of `api.training_status` /
`api.list_runs`. A metrics row looks like {"split": "train", "step": 3, "loss": 6.99, "losses": {"mlm": 6.29,
"nsp": 0.70}, "tokens_per_s": 1431.0, ...}; evaluation rows have "split": "val" and may carry "bits_per_byte".
Rows of a run whose model plans its own steps (ULMFiT, lab_models/models/rnn/ulmfit.py) also carry "stage", "stage_name"
and "lrs" (the learning rate of each layer group): the loss and learning-rate figures shade the stages and draw one line
per group. An objective a step did not train is null in that row (CVT alternates its two): its line joins the
steps that have it.

Every word drawn here is in the reader's language (`app.i18n.language.tr`: English, or Chinese for a Chinese page); run
ids, family and objective names and numbers stay as they are. The backend's sentences (a run's status message, a stage's
name) go through `app.i18n.messages.translate`, which translates each by its template (app/i18n/locales/zh/messages/).
"""
from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go

from lab_models import api
from app.display import LINE_DASHES, STATE_COLORS, empty_figure, format_duration, run_styles, state_word
from app.i18n.language import marker, text, tr
from app.i18n.messages import translate
from app.inputs import finite

MAX_POINTS = 600  # per line: enough for a smooth curve, small enough to resend every 1.5 s
# validation points drawn as markers up to this many, past it as a line alone: each marker is an SVG element that the
# open page keeps, so a long live run's markers would grow the page by about 115 elements a minute
MARKER_LIMIT = 60
TOTAL_COLOR = "#0f172a"
VAL_COLOR = "#dc2626"
OBJECTIVE_COLORS = ("#2563eb", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777")
COMPARE_METRICS = {"loss": "train loss", "val_loss": "validation loss", "val_bits_per_byte": "validation bits/byte",
                   # the add-on objectives' validation numbers (app/train/addon_figures.py)
                   "val_topic_gap": "validation topic gap (contrastive)",
                   "val_uniformity": "validation uniformity (contrastive)",
                   "val_bleu_en_zh": "validation BLEU en→zh", "val_bleu_zh_en": "validation BLEU zh→en",
                   "val_chrf_en_zh": "validation chrF en→zh", "val_chrf_zh_en": "validation chrF zh→en"}
RUNS_COLUMNS = ["run id", "family", "preset", "corpus", "state", "step / total", "loss", "val loss", "val bits/byte",
                "tokens/s"]
# the runs table's headers in the reader's language: train.json's col_<key>, in RUNS_COLUMNS' order
RUNS_COLUMN_KEYS = ("run_id", "family", "preset", "corpus", "state", "steps", "loss", "val_loss", "val_bpb",
                    "tokens_per_s")


def runs_columns() -> list[str]:
    """The runs table's headers in the reader's language (RUNS_COLUMNS in English)."""
    return [tr(f"train.col_{key}") for key in RUNS_COLUMN_KEYS]

def split_rows(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(train rows, val rows), each sorted by step with one row per step (a resumed run's later row wins).

    >>> split_rows([{"step": 2, "loss": 1.0}, {"step": 1, "loss": 2.0}, {"split": "val", "step": 2, "loss": 1.5}])
    ([{'step': 1, 'loss': 2.0}, {'step': 2, 'loss': 1.0}], [{'split': 'val', 'step': 2, 'loss': 1.5}])
    >>> split_rows([{"step": 1, "loss": 2.0}, {"split": "val", "step": 1}, {"step": 2.0}, {"step": "x"}])
    ([{'step': 1, 'loss': 2.0}, {'step': 2.0}], [{'split': 'val', 'step': 1}])
    """
    # the usual case first, in one pass without dicts: every step later than the last one of its split (a run that
    # was never resumed). The live tick splits all of a run's rows, about 70,000 after half an hour of the tiny preset
    ordered: tuple[list[dict], list[dict]] = ([], [])
    last = {False: -1, True: -1}  # is_val -> its last step
    for row in rows:
        step = row.get("step")
        if step.__class__ is not int:
            if not isinstance(step, (int, float)) or isinstance(step, bool):
                continue
            step = int(step)
        is_val = row.get("split") == "val"
        if step <= last[is_val]:
            break  # a step again (a resumed run): the general way below
        last[is_val] = step
        ordered[is_val].append(row)
    else:
        return ordered
    train: dict[int, dict] = {}
    val: dict[int, dict] = {}
    for row in rows:
        step = row.get("step")
        if not isinstance(step, (int, float)) or isinstance(step, bool):
            continue
        (val if row.get("split") == "val" else train)[int(step)] = row
    return [train[s] for s in sorted(train)], [val[s] for s in sorted(val)]


def thin(rows: list, max_points: int = MAX_POINTS) -> list:
    """Every k-th row so that at most about `max_points` remain, always keeping the last one.

    >>> thin(list(range(10)), 4)
    [0, 3, 6, 9]
    """
    if len(rows) <= max_points:
        return list(rows)
    stride = math.ceil(len(rows) / max_points)
    kept = rows[::stride]
    return kept if kept[-1] is rows[-1] else kept + [rows[-1]]


def thin_with_mode(points: list) -> tuple[list, str]:
    """Validation points to draw and their Plotly mode: thinned like the train curve, markers while at most
    MARKER_LIMIT remain, a line alone past that.

    >>> kept, mode = thin_with_mode(list(range(5000)))
    >>> len(kept) <= MAX_POINTS + 1, mode
    (True, 'lines')
    >>> thin_with_mode([1, 2, 3])
    ([1, 2, 3], 'lines+markers')
    """
    kept = thin(points)
    return kept, ("lines+markers" if len(kept) <= MARKER_LIMIT else "lines")


def loss_figure(rows: list[dict], *, title: str = "", height: int = 380) -> go.Figure:
    """The live loss curve of one run: total train loss, one dotted line per objective (when there are several)
    and the validation loss as points (a line alone once there are many: `thin_with_mode`). x = step."""
    train, val = split_rows(rows)
    if not train and not val:
        return empty_figure(tr("train.fig_loss_empty"), height)
    figure = go.Figure()
    train = thin(train)
    steps = [row["step"] for row in train]
    figure.add_trace(go.Scatter(x=steps, y=[finite(row.get("loss")) for row in train], mode="lines",
                                name=tr("train.fig_loss_total"), line={"color": TOTAL_COLOR, "width": 2}))
    objectives = []
    for row in train:
        for name in (row.get("losses") or {}):
            if name not in objectives:
                objectives.append(name)
    if len(objectives) > 1:
        for index, name in enumerate(objectives):
            figure.add_trace(go.Scatter(
                x=steps, y=[finite((row.get("losses") or {}).get(name)) for row in train], mode="lines",
                name=tr("train.fig_loss_objective", name=name),
                connectgaps=True,  # a step may not train every objective (CVT alternates)
                line={"color": OBJECTIVE_COLORS[index % len(OBJECTIVE_COLORS)], "width": 1.5, "dash": "dot"}))
    if val:
        val, val_mode = thin_with_mode(val)
        figure.add_trace(go.Scatter(x=[row["step"] for row in val], y=[finite(row.get("loss")) for row in val],
                                    mode=val_mode, name=tr("train.metric_val_loss"),
                                    line={"color": VAL_COLOR, "width": 1, "dash": "dash"},
                                    marker={"size": 9, "color": VAL_COLOR, "symbol": "diamond"}))
    figure.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height, template="plotly_white",
        xaxis_title=tr("train.fig_step"), yaxis_title=tr("train.fig_loss_axis"), hovermode="x unified",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
        margin={"l": 60, "r": 20, "t": 70, "b": 50}, uirevision=title or "loss")
    shade_stages(figure, train)
    return figure


STAGE_COLORS = ("#eff6ff", "#f0fdf4", "#fff7ed", "#faf5ff")


def stage_spans(train: list[dict]) -> list[tuple[int, int, str]]:
    """(first step, last step, label) of each run of consecutive rows with the same "stage"; [] without stages.

    >>> stage_spans([{"step": 1, "stage": 1, "stage_name": "LM"}, {"step": 2, "stage": 1}, {"step": 3, "stage": 2}])
    [(1, 2, 'stage 1: LM'), (3, 3, 'stage 2')]
    """
    spans: list[tuple[int, int, str]] = []
    current = None
    for row in train:
        stage = row.get("stage")
        if stage is None:
            continue
        if current is None or stage != current[2]:
            name = row.get("stage_name")
            label = (tr("train.fig_stage_named", stage=stage, name=translate(name)) if name
                     else tr("train.fig_stage", stage=stage))
            current = [row["step"], row["step"], stage, label]
            spans.append(current)
        current[1] = row["step"]
    return [(first, last, label) for first, last, _, label in spans]


def shade_stages(figure: go.Figure, train: list[dict]) -> None:
    """A shaded band and a label per training stage (rows with "stage"); nothing for runs without stages."""
    for index, (first, last, label) in enumerate(stage_spans(train)):
        figure.add_vrect(x0=first - 0.5, x1=last + 0.5, fillcolor=STAGE_COLORS[index % len(STAGE_COLORS)],
                         opacity=0.8, layer="below", line_width=0, annotation_text=label,
                         annotation_position="top left", annotation_font_size=11)


def lr_figure(rows: list[dict], *, title: str = "", height: int = 300) -> go.Figure:
    """The learning rate of each step: one line, or, for a run that records per-group rates ("lrs", ULMFiT's
    discriminative rates), one line per layer group on a log axis (a frozen group, rate 0, leaves a gap), with the
    stages shaded."""
    train, _ = split_rows(rows)
    train = thin([row for row in train if finite(row.get("lr")) is not None])
    if not train:
        return empty_figure(tr("train.fig_lr_empty"), height)
    figure = go.Figure()
    steps = [row["step"] for row in train]
    groups: list[str] = []
    for row in train:
        for name in (row.get("lrs") or {}):
            if name not in groups:
                groups.append(name)
    if groups:
        for index, name in enumerate(groups):
            values = [finite((row.get("lrs") or {}).get(name)) for row in train]
            figure.add_trace(go.Scatter(x=steps, y=[v if v else None for v in values], mode="lines",
                                        name=tr("train.fig_lr_group", name=name),
                                        line={"color": OBJECTIVE_COLORS[index % len(OBJECTIVE_COLORS)], "width": 1.5}))
    else:
        figure.add_trace(go.Scatter(x=steps, y=[finite(row.get("lr")) for row in train], mode="lines",
                                    name=tr("train.fig_lr"), line={"color": TOTAL_COLOR, "width": 2}))
    figure.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 14}}, height=height, template="plotly_white",
        xaxis_title=tr("train.fig_step"), yaxis_title=tr("train.fig_lr"), yaxis_type="log" if groups else "linear",
        hovermode="x unified", legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
        margin={"l": 60, "r": 20, "t": 60, "b": 50}, uirevision=(title or "lr") + ("-groups" if groups else ""))
    shade_stages(figure, train)
    return figure


def compare_figure(curves: dict[str, list[dict]], metric: str = "loss", *, height: int = 380,
                   families: dict[str, str] | None = None) -> go.Figure:
    """Overlay the runs in `curves` (run id -> metrics rows): x = step, y = `metric` (a key of COMPARE_METRICS). Each
    run is drawn in its family's colour (`families`: run id -> family; the lab's palette), a family's second run
    dashed."""
    if metric not in COMPARE_METRICS:
        raise api.LabError("Unknown metric {metric!r}: choose one of {compare_metrics}.",
                           metric=metric, compare_metrics=', '.join(COMPARE_METRICS))
    if not curves:
        return empty_figure(tr("train.fig_compare_empty"), height)
    figure = go.Figure()
    styles = run_styles({run_id: (families or {}).get(run_id) for run_id in curves})
    for index, (run_id, rows) in enumerate(curves.items()):
        color, rank = styles[run_id]
        train, val = split_rows(rows)
        if metric == "loss":
            points, key, mode = thin(train), "loss", "lines"
        else:
            (points, mode), key = thin_with_mode(val), metric[len("val_"):]  # val_loss -> the val row's "loss"
        figure.add_trace(go.Scatter(x=[row["step"] for row in points], y=[finite(row.get(key)) for row in points],
                                    mode=mode, name=run_id,
                                    line={"color": color, "dash": LINE_DASHES[rank % len(LINE_DASHES)]}))
    figure.update_layout(
        height=height, template="plotly_white", xaxis_title=tr("train.fig_step"),
        yaxis_title=tr(f"train.metric_{metric}"),
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0},
        margin={"l": 60, "r": 20, "t": 30, "b": 50}, uirevision=metric)
    return figure


def state_label(summary: dict) -> str:
    """'queued (position 2)', 'running', 'stopping…', 'finished', 'stopped (interrupted)', 'failed', ..."""
    state = summary.get("state") or "unknown"
    if state == "queued" and summary.get("queue_position"):
        return tr("train.state_queued_position", position=summary["queue_position"])
    if state == "running" and summary.get("stopping"):
        return tr("train.state_stopping")
    if state == "running" and summary.get("phase") == "tokenizing":
        return tr("train.state_tokenizing")
    if state == "stopped" and summary.get("interrupted"):
        return tr("train.state_stopped_interrupted")
    return state_word(state)


def format_mfu(summary: dict) -> str:
    """"41.3%", "unknown" (FLOPs counted, the device's peak not known: a run from before every device had one) or
    "—" (nothing counted yet).

    >>> format_mfu({"mfu": 0.4131, "flops_per_token": 1e8}), format_mfu({"mfu": None, "flops_per_token": 1e8})
    ('41.3%', 'unknown')
    """
    value = finite(summary.get("mfu"))
    if value is not None:
        return f"{value:.1%}"
    return tr("train.mfu_unknown") if finite(summary.get("flops_per_token")) is not None else "—"


def mfu_help(summary: dict) -> str:
    """What MFU means and the peak it divides by, with how the peak was obtained (a data sheet, or the matmul probe
    of this machine), in the reader's language."""
    source = summary.get("mfu_peak_source")
    if not source:
        return tr("train.progress_mfu_help")
    return tr("train.progress_mfu_help_peak", peak=translate(source),
              precision=summary.get("precision") or "?")


def progress_html(summary: dict | None) -> str:
    """A progress bar with step / total, tokens/s and ETA, coloured by state, inside a `train-progress-live` box
    that names the run and its state: the page's own script (app/train/progress_route.py) redraws the box's content
    between Gradio's redraws while the run is queued or running."""
    run_id = html.escape(str((summary or {}).get("run_id") or ""))
    state = html.escape(str((summary or {}).get("state") or ""))
    return (f'<div class="train-progress-live" data-run="{run_id}" data-state="{state}">{progress_bar_html(summary)}'
            '</div>')


def progress_bar_html(summary: dict | None) -> str:
    """The content of `progress_html`'s box: the bar itself."""
    if not summary:
        # one translated text per HTML value (Gradio's frontend translates one marker per string): the badge; the
        # status line under the bar says what to do (status_markdown(None))
        return ('<div class="train-progress train-idle"><div class="train-progress-head"><span class="train-state">'
                + text("train.progress_idle") +
                '</span></div><div class="train-bar"><div class="train-bar-fill" style="width:0%"></div></div></div>')
    state = summary.get("state") or "unknown"
    if state == "running" and summary.get("phase") == "tokenizing":
        return tokenizing_html(summary)
    step = int(summary.get("step") or 0)
    total = summary.get("total_steps")
    fraction = min(1.0, step / total) if total else 0.0
    if state == "finished":
        fraction = 1.0
    tokens = finite(summary.get("tokens_per_s"))
    total_text = f"{int(total):,}" if total is not None else "?"
    parts = [f'<span class="train-state">{html.escape(state_label(summary))}</span>',
             "<span>" + tr("train.progress_step", step=f"{step:,}", total=total_text, fraction=f"{fraction:.0%}")
             + "</span>",
             f"<span>{f'{tokens:,.0f}' if tokens is not None else '—'} tokens/s</span>",
             f'<span title="{_attribute(mfu_help(summary))}">MFU {format_mfu(summary)}</span>']
    if state == "running":
        parts.append("<span>" + tr("train.progress_eta", eta=format_duration(summary.get("eta_s"))) + "</span>")
    color = STATE_COLORS.get(state, "#64748b")
    return (f'<div class="train-progress train-{html.escape(state)}" data-state="{html.escape(state)}">'
            f'<div class="train-progress-head">{"".join(parts)}</div>'
            f'<div class="train-bar" role="progressbar" aria-valuemin="0" aria-valuemax="{int(total or 0)}" '
            f'aria-valuenow="{step}"><div class="train-bar-fill" style="width:{fraction * 100:.1f}%;'
            f'background:{color}"></div></div></div>')


def tokenizing_html(summary: dict) -> str:
    """The bar of a run that prepares its data before its first step: what it does now (reading the corpus,
    training the tokenizer, tokenizing), bytes done of all, tokens, MB/s and ETA (status.json "tokenizing")."""
    progress = summary.get("tokenizing") or {}
    phase = progress.get("phase") or "tokenizing"
    fraction = float(progress.get("fraction") or 0.0)
    label = tr(f"train.tokenizing_{phase}") if phase in TOKENIZING_PHASES else tr("train.state_tokenizing")
    if summary.get("stopping"):
        label = tr("train.state_stopping")
    parts = [f'<span class="train-state">{html.escape(label)}</span>']
    if progress.get("bytes_total"):
        parts.append("<span>" + tr("train.tokenizing_bytes", done=f"{progress.get('bytes_done', 0) / 1e6:,.1f}",
                                   total=f"{progress['bytes_total'] / 1e6:,.1f}", fraction=f"{fraction:.0%}")
                     + "</span>")
    if progress.get("tokens"):
        parts.append("<span>" + tr("train.tokenizing_tokens", tokens=f"{progress['tokens'] / 1e6:,.1f}M") + "</span>")
    if finite(progress.get("mb_per_s")) is not None:
        parts.append(f"<span>{progress['mb_per_s']:.1f} MB/s</span>")
    parts.append("<span>" + tr("train.progress_eta", eta=format_duration(progress.get("eta_s"))) + "</span>")
    color = STATE_COLORS.get("running")
    return (f'<div class="train-progress train-running train-tokenizing" data-state="running" '
            f'data-phase="{html.escape(phase)}"><div class="train-progress-head">{"".join(parts)}</div>'
            f'<div class="train-bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
            f'aria-valuenow="{fraction * 100:.0f}"><div class="train-bar-fill" style="width:{fraction * 100:.1f}%;'
            f'background:{color}"></div></div></div>')


TOKENIZING_PHASES = ("fingerprinting", "sampling", "tokenizer", "tokenizing", "waiting", "done")  # train.json


def _attribute(text: str) -> str:
    """`text` for a double-quoted HTML attribute (an apostrophe stays as it is)."""
    return html.escape(text, quote=False).replace('"', "&quot;")


def status_markdown(summary: dict | None, log_tail: str = "") -> str:

    """The run's id, state, message and last losses; for a failed or died run, the message and the end of its log.
    A queued run's place in the queue is the bar's alone (`progress_html`, redrawn every 2 s): this line is redrawn
    less often and would name an older place."""
    if not summary:
        return marker("train.no_run")  # a handler returns it too: plain JSON, the marker as a string
    lines = [tr("train.status_head", run_id=summary.get("run_id"), family=summary.get("family") or "?",
                preset=summary.get("preset") or "?", corpus=summary.get("corpus") or tr("train.status_preset_corpus"),
                device=summary.get("device") or "auto", state=state_label({**summary, "queue_position": None}))]
    losses = summary.get("losses") or {}
    numbers = []
    if finite(summary.get("loss")) is not None:
        numbers.append(tr("train.status_loss", value=f"{summary['loss']:.4f}"))
    if len(losses) > 1:
        numbers += [f"{name} {value:.4f}" for name, value in losses.items() if finite(value) is not None]
    if finite(summary.get("val_loss")) is not None:
        numbers.append(tr("train.status_val_loss", value=f"{summary['val_loss']:.4f}"))
    if finite(summary.get("val_bits_per_byte")) is not None:
        numbers.append(tr("train.status_val_bpb", value=f"{summary['val_bits_per_byte']:.3f}"))
    if finite(summary.get("flops_per_token")) is not None:
        numbers.append(tr("train.status_flops", mflops=f"{summary['flops_per_token'] / 1e6:,.1f}",
                          mfu=format_mfu(summary)))
        if summary.get("mfu_peak_source"):
            numbers.append(tr("train.status_precision", precision=summary.get("precision") or "?",
                              peak=translate(summary["mfu_peak_source"])))
    if numbers:
        lines.append(" · ".join(numbers))
    message = summary.get("message") or ""
    message = message if message.strip() else ""
    if summary.get("state") in ("failed", "died"):
        lines.append(tr(f"train.status_ended_{summary['state']}",
                        message=translate(message) if message else tr("train.status_no_message")))
        if log_tail:
            lines.append(tr("train.status_log_end") + "\n\n```text\n" + log_tail.replace("```", "'''") + "\n```")
    elif (message and message not in (summary.get("state"), "queued", "training")
          and summary.get("phase") != "tokenizing"):  # while a run tokenizes, its bar says what the message says
        lines.append(f"_{translate(message)}_")
    return "\n\n".join(lines)


def _fmt(value, digits: int) -> str:
    value = finite(value)
    return "" if value is None else f"{value:.{digits}f}"


def runs_table(rows: list[dict]) -> pd.DataFrame:
    """One row per run (newest first) with the RUNS_COLUMNS; numbers formatted as text so blanks stay blank."""
    records = []
    for row in rows:
        total = row.get("total_steps")
        tokens = finite(row.get("tokens_per_s"))
        steps = f"{int(row.get('step') or 0)} / {int(total) if total is not None else '?'}"  # 0 / 0: an import
        budget = row.get("budget") or {}
        if budget.get("flops") is not None:
            steps += " · " + tr("train.runs_budget_flops", flops=f"{budget['flops']:.2g}".replace("e+", "e"))
        elif budget.get("minutes") is not None:
            steps += " · " + tr("train.runs_budget_minutes", minutes=f"{budget['minutes']:g}")
        records.append([row.get("run_id"), row.get("family") or "", row.get("preset") or "",
                        row.get("corpus") or tr("train.runs_preset_corpus"), state_label(row), steps,
                        _fmt(row.get("loss"), 4), _fmt(row.get("val_loss"), 4), _fmt(row.get("val_bits_per_byte"), 3),
                        f"{tokens:,.0f}" if tokens is not None else ""])
    return pd.DataFrame(records, columns=runs_columns())

