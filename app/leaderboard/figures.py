"""The Leaderboard tab's table and figure: `api.leaderboard`'s frame, shown for people.

Presentation only: every number here comes from `lab_models.api.leaderboard` (lab_models/inference/leaderboard.py
documents the metrics and their trivial baselines). The display table rounds the scores and writes "—" for a metric
a run does not have, with the number of its reason; the reasons are listed under it (`notes_markdown`), and its last
row holds each score's trivial baseline (the most frequent token or word, a unigram model, the majority class). The
CSV export keeps the frame itself, at full precision.

The figure: one bar chart per metric, the runs on one shared axis, each bar in its family's colour (the lab's family
palette, `app.display.family_color`), a black tick at each run's trivial baseline, and "n/a (k)" where a run has no
score, k the number of its reason under the table. Validation bits per byte is each family's own objective in bits,
so the runs are grouped by what that objective predicts (the next token, masked tokens, permuted tokens, spans) and
the chart says to compare within a group: a masked token seen from both sides is easier than the next one, so BERT's
2.0 and GPT's 0.8 are not one scale.

Headers, titles, legends and notes are written in the reader's language (app/i18n/language.py `tr`); the reasons that
`lab_models` gives for a missing score go through the message catalogue (app/i18n/messages.py). Run ids, family names,
task names and numbers stay as they are.
"""
from __future__ import annotations

import html
import math
import re

import pandas as pd

from lab_models import api
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import FONT, cjk_empty_figure, family_color
from app.i18n.language import tr
from app.i18n.messages import translate
from app.understand.probe_figures import layer_name_title, probe_stream_title

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
TABLE_KEYS = ("run", "family", "predicts", "preset", "corpus", "steps", "training_tokens",
              "parameters")  # "col_<key>"
ACCURACY_PREFIX = "accuracy_"
BASELINE_PREFIX = "baseline_"  # api.leaderboard's baseline_<score> columns
# each column's width in the page, in pixels: the table's base and score columns fit a 1400-pixel window without a
# horizontal scroll, every header word on one line (a cell wraps; a run id breaks after a hyphen)
COLUMN_WIDTHS = {"run": 206, "family": 78, "predicts": 108, "preset": 66, "corpus": 84, "steps": 60,
                 "training_tokens": 84, "parameters": 96, "val_bits_per_byte": 88, "fill_mask_accuracy": 88,
                 "infill_exact_match": 68, "probe_accuracy": 80, "best_probe_layer": 96}
TASK_COLUMN_WIDTH = 92  # a fine-tuning task's accuracy column, after the others
PREDICTS_ORDER = ("next_token", "masked_tokens", "permuted_tokens", "spans", "translation", "tags", "other")
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
NO_TASK_NOTE = "no_task_note"  # leaderboard.json: why a run has no accuracy on a fine-tuning task


def predicts_title(group) -> str:
    """What a family's validation loss is measured on, in the reader's language ("next token", "masked tokens", ...)."""
    group = str(group or "other")
    return tr(f"leaderboard.predicts_{group if group in PREDICTS_ORDER else 'other'}")


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows as the page shows them: by corpus, then by what the family's objective predicts (PREDICTS_ORDER),
    then by validation bits per byte, best first; the table and the figure share this order."""
    if frame is None or not len(frame) or "corpus" not in frame.columns:
        return frame
    frame = frame.copy()
    rank = {group: index for index, group in enumerate(PREDICTS_ORDER)}
    predicts = frame["predicts"] if "predicts" in frame.columns else pd.Series(["other"] * len(frame))
    frame["_group"] = [rank.get(str(group), len(rank)) for group in predicts]
    keys = [key for key in ("corpus", "_group", "val_bits_per_byte", "run_id") if key in frame.columns]
    frame = frame.sort_values(keys, na_position="last", kind="stable")
    return frame.drop(columns="_group").reset_index(drop=True)


def _missing_reasons(frame: pd.DataFrame) -> tuple[list[str], dict[tuple[str, str], int]]:
    """(the distinct reasons, in order, as NO_BITS_NOTE / NO_TASK_NOTE:<task> / the backend's note; and
    (run id, metric column) -> the reason's number, from 1) for every score a run lacks."""
    reasons: list[str] = []
    numbers: dict[tuple[str, str], int] = {}

    def number(reason: str) -> int:
        if reason not in reasons:
            reasons.append(reason)
        return reasons.index(reason) + 1

    for _, row in ordered(frame).iterrows():  # numbered in the order the table and the figure show the runs
        run = str(row["run_id"])
        if "val_bits_per_byte" in row and pd.isna(row["val_bits_per_byte"]):
            numbers[(run, "val_bits_per_byte")] = number(NO_BITS_NOTE)
        for column, note_column in (("fill_mask_accuracy", "fill_mask_note"), ("infill_exact_match", "infill_note"),
                                    ("probe_accuracy", "probe_note")):
            note = row.get(note_column)  # the backend's message: kept whole, for its translation
            if isinstance(note, str) and note.strip() and note.strip().lower() != "nan":
                numbers[(run, column)] = number(note)  # why it is missing, or what it was based on (sentences skipped)
        for column in task_columns(frame):
            if pd.isna(row[column]):
                numbers[(run, column)] = number(f"{NO_TASK_NOTE}:{column[len(ACCURACY_PREFIX):]}")
    return reasons, numbers


def _reason_text(reason: str) -> str:
    if reason == NO_BITS_NOTE:
        return tr(f"leaderboard.{NO_BITS_NOTE}")
    if reason.startswith(NO_TASK_NOTE + ":"):
        return tr(f"leaderboard.{NO_TASK_NOTE}", task=reason.split(":", 1)[1])
    return translate(reason)


def notes_markdown(frame: pd.DataFrame) -> str:
    """Why some scores are missing, one numbered line per reason with the runs and scores it applies to (the numbers
    the table's and the figure's "n/a (k)" point to); "" when every run has every score.

    >>> print(notes_markdown(pd.DataFrame({"run_id": ["a", "b"], "fill_mask_accuracy": [float("nan"), 0.5],
    ...                                    "fill_mask_note": ["GPT reads left to right.", ""]})))
    **Why some scores are missing**
    - (1) fill-mask, **a**: GPT reads left to right.
    """
    reasons, numbers = _missing_reasons(frame)
    if not reasons:
        return ""
    labels = {"val_bits_per_byte": tr("leaderboard.note_bits"), "fill_mask_accuracy": tr("leaderboard.note_fill_mask"),
              "infill_exact_match": tr("leaderboard.note_infill"), "probe_accuracy": tr("leaderboard.note_probe")}
    lines = [tr("leaderboard.notes_heading")]
    for index, reason in enumerate(reasons, start=1):
        per_run: dict[str, list[str]] = {}
        for (run, column), number in numbers.items():
            if number == index:
                label = labels.get(column) or tr("leaderboard.note_task", task=column[len(ACCURACY_PREFIX):])
                per_run.setdefault(run, []).append(label)
        by_metrics: dict[str, list[str]] = {}
        for run, metric_labels in per_run.items():
            by_metrics.setdefault(tr("leaderboard.note_and").join(metric_labels), []).append(f"**{run}**")
        for metrics, run_names in by_metrics.items():
            lines.append(tr("leaderboard.note_line", number=index, metrics=metrics,
                            runs=tr("leaderboard.list_separator").join(run_names),
                            reason=html.escape(_reason_text(reason), quote=False)))  # <pad>: text
    return "\n".join(lines)


def _baseline_cell(values) -> str:
    """A baseline column's cell in the table's last row: the value, or its range when the runs' tokenizers differ.

    >>> _baseline_cell([0.141, 0.141]), _baseline_cell([0.12, 0.15, float("nan")]), _baseline_cell([])
    ('0.141', '0.120–0.150', '—')
    """
    numbers = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not numbers:
        return MISSING
    low, high = format_score(min(numbers)), format_score(max(numbers))
    return low if low == high else f"{low}–{high}"


def tokens_and_flops(row) -> str:
    """The training tokens and, after them, the compute they cost in FLOPs, where the trainer counted it.

    >>> tokens_and_flops({"training_tokens": 1024000.0, "training_flops": 9.18e11})
    '1,024,000 · 9.2e11'
    >>> tokens_and_flops({"training_tokens": 1024000.0, "training_flops": float("nan")})
    '1,024,000'
    """
    flops = row.get("training_flops")
    tokens = format_count(row.get("training_tokens"))
    if not isinstance(flops, (int, float)) or not math.isfinite(flops) or flops <= 0:
        return tokens
    return f"{tokens} · " + re.sub(r"e\+?0*(\d)", r"e\1", f"{flops:.2g}")


def probe_layer_cell(row) -> str:
    """The best probe layer of a leaderboard row in the reader's language, from its parts: the layer ("block 2"),
    after its stream where a model has several ("content stream: block 1"; a T5 layer's name says "decoder"); the
    English of `best_probe_layer` where a frame has no parts; "—" where the run has no probe. The depth is left to
    the Probing view: the zoo's models are equally deep."""
    layer_name = row.get("best_probe_layer_name")
    if not (isinstance(layer_name, str) and layer_name):
        return str(row.get("best_probe_layer") or "") or MISSING
    stream = str(row.get("best_probe_stream") or "")
    layer = layer_name_title(layer_name)
    if stream in ("", "self") or layer_name.startswith(stream):
        return layer
    return tr("leaderboard.probe_layer_cell", stream=probe_stream_title(stream), layer=layer)


def column_widths() -> list[str]:
    """The table's column widths for gr.Dataframe, in `display_table`'s order of its columns (a table without a probe
    column shifts the task columns one to the left; they are as wide)."""
    return [f"{width}px" for width in COLUMN_WIDTHS.values()] + [f"{TASK_COLUMN_WIDTH}px"] * 8


def display_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard as the page shows it (`ordered`): readable headers, what each family's bits per byte are
    measured on, rounded scores, "— (k)" for a missing one (reason k is under the table, `notes_markdown`), and a
    last row with each score's trivial baseline."""
    frame = ordered(frame)
    columns = [tr(f"leaderboard.col_{key}") for key in TABLE_KEYS]
    scores = [name for name in METRIC_TITLES if name in frame.columns]  # a table without probes has no probe column
    columns += [tr(f"leaderboard.col_{name}") for name in scores]
    probed = "best_probe_layer" in frame.columns
    columns += [tr("leaderboard.col_best_probe_layer")] if probed else []
    tasks = task_columns(frame)
    columns += [tr("leaderboard.col_task_accuracy", task=name[len(ACCURACY_PREFIX):]) for name in tasks]
    _, numbers = _missing_reasons(frame)
    rows = []
    for _, row in frame.iterrows():
        shown = [row["run_id"], row["family"], predicts_title(row.get("predicts")), row["preset"] or "",
                 row["corpus"], format_count(row["steps"]), tokens_and_flops(row),
                 format_count(row["parameters"])]

        def score(name):
            number = numbers.get((str(row["run_id"]), name))
            if name not in row or pd.isna(row[name]):
                return f"{MISSING} ({number})" if number else MISSING
            return format_score(row[name]) + (f" ({number})" if number else "")

        shown += [score(name) for name in scores]
        shown += [probe_layer_cell(row)] if probed else []
        shown += [score(name) for name in tasks]
        rows.append(shown)
    if len(frame):
        baseline = [tr("leaderboard.baseline_row")] + [""] * (len(TABLE_KEYS) - 1)
        for name in (*scores, *(["best_probe_layer"] if probed else []), *tasks):
            column = BASELINE_PREFIX + name
            baseline.append("" if name == "best_probe_layer" else
                            _baseline_cell(frame[column]) if column in frame.columns else MISSING)
        rows.append(baseline)
    return pd.DataFrame(rows, columns=columns)


def _run_labels(frame: pd.DataFrame) -> list[str]:
    """The y-axis label of each row: the run id, with its corpus when the table mixes corpora."""
    several = frame["corpus"].nunique() > 1
    return [f"{run} · {corpus}" if several else str(run) for run, corpus in zip(frame["run_id"], frame["corpus"])]


def leaderboard_figure(frame: pd.DataFrame) -> go.Figure:
    """One horizontal bar chart per metric, side by side, the runs on a shared y axis in the table's order (`ordered`),
    each bar in its family's colour, a black tick at the run's trivial baseline, and "n/a (k)" where a run has no
    score (k: the reason's number under the table; hover shows it). Bits per byte: "lower is better", grouped by what
    each objective predicts, with the groups named; the others "higher is better" on a shared 0..1 scale."""
    if frame is None or not len(frame):
        return cjk_empty_figure(tr("leaderboard.fig_no_runs"))
    frame = ordered(frame)
    metrics = metric_columns(frame)
    titles = [tr(f"leaderboard.fig_{name}") if name in METRIC_TITLES else
              tr("leaderboard.fig_task_accuracy", task=html.escape(name[len(ACCURACY_PREFIX):])) for name in metrics]
    not_available = tr("leaderboard.fig_not_available")
    reasons, numbers = _missing_reasons(frame)
    figure = make_subplots(rows=1, cols=len(metrics), shared_yaxes=True, subplot_titles=titles,
                           horizontal_spacing=0.03)
    labels = _run_labels(frame)
    families = list(dict.fromkeys(str(family) for family in frame["family"]))
    baseline_in_legend = False
    for col, metric in enumerate(metrics, start=1):
        values = pd.to_numeric(frame[metric], errors="coerce")
        for family in families:
            chosen = [i for i, f in enumerate(frame["family"]) if str(f) == family and not math.isnan(values[i])]
            figure.add_trace(go.Bar(
                x=[float(values[i]) for i in chosen], y=[labels[i] for i in chosen], orientation="h",
                name=family, legendgroup=family, showlegend=col == 1, marker_color=family_color(family),
                text=[f"{float(values[i]):.3f}" for i in chosen], textposition="outside", cliponaxis=False,
                hovertemplate=f"%{{y}}<br>{html.escape(metric)} = %{{x:.4f}}<extra>{html.escape(family)}</extra>"),
                row=1, col=col)
        missing = [i for i in range(len(frame)) if math.isnan(values[i])]
        if missing:  # say "n/a (k)" where the bar would be, so a missing bar is never read as a zero
            marks = [numbers.get((str(frame["run_id"][i]), metric)) for i in missing]
            figure.add_trace(go.Scatter(
                x=[0] * len(missing), y=[labels[i] for i in missing], mode="text",
                text=[f"{not_available} ({k})" if k else not_available for k in marks], textposition="middle right",
                textfont={"color": "#64748b"}, showlegend=False,
                hovertext=[html.escape(_reason_text(reasons[k - 1])) if k else "" for k in marks],
                hoverinfo="text"), row=1, col=col)
        column = BASELINE_PREFIX + metric
        if column in frame.columns:
            base = pd.to_numeric(frame[column], errors="coerce")
            shown = [i for i in range(len(frame)) if not math.isnan(base[i]) and not math.isnan(values[i])]
            if shown:
                figure.add_trace(go.Scatter(
                    x=[float(base[i]) for i in shown], y=[labels[i] for i in shown], mode="markers",
                    marker={"symbol": "line-ns-open", "size": 22, "color": "#0f172a", "line": {"width": 2.5}},
                    name=tr("leaderboard.fig_baseline"), legendgroup="baseline",
                    showlegend=not baseline_in_legend, cliponaxis=False,
                    hovertemplate=f"%{{y}}<br>{html.escape(tr('leaderboard.fig_baseline_hover'))} %{{x:.4f}}"
                                  "<extra></extra>"), row=1, col=col)
                baseline_in_legend = True
        if metric != "val_bits_per_byte":
            figure.update_xaxes(range=[0, 1.15], row=1, col=col)
        else:
            top = max([v for v in values if not math.isnan(v)] + [v for v in pd.to_numeric(
                frame.get(BASELINE_PREFIX + metric, pd.Series(dtype=float)), errors="coerce") if not math.isnan(v)]
                + [0.0])
            figure.update_xaxes(range=[0, 1.3 * top if top > 0 else 1], row=1, col=col)
    categories = _categories(frame, labels)
    # every category shown, the group headings at the ends too (plotly's range would otherwise end at the data)
    figure.update_yaxes(categoryorder="array", categoryarray=list(reversed(categories)), automargin=True,
                        range=[-0.5, len(categories) - 0.5])
    figure.update_annotations(font={"size": 12})
    figure.update_layout(template="plotly_white", font={"family": FONT}, barmode="overlay", bargap=0.25,
                         height=170 + BAR_HEIGHT * len(categories),
                         margin={"l": 10, "r": 20, "t": 90, "b": 40},
                         legend={"title": {"text": tr("leaderboard.fig_legend_family")}, "orientation": "h",
                                 "y": -0.08, "yanchor": "top"})
    return figure


def _categories(frame: pd.DataFrame, labels: list[str]) -> list[str]:
    """The y axis from the top: before each group of runs whose objectives predict the same kind of token, a row
    with the group's name (bold), so that bits per byte are read within a group."""
    if "predicts" not in frame.columns:
        return labels
    several = frame["corpus"].nunique() > 1
    out, previous = [], None
    for label, corpus, group in zip(labels, frame["corpus"], frame["predicts"]):
        if (corpus, group) != previous:
            title = f"<b>{html.escape(predicts_title(group))}</b>"
            out.append(f"{title} · {html.escape(str(corpus))}" if several else title)
            previous = (corpus, group)
        out.append(label)
    return out


INTERVAL_SCORES = ("val_bits_per_byte", "fill_mask_accuracy", "infill_exact_match")  # the noise table's columns


def _with_interval(mean: float, low: float, high: float) -> str:
    """'0.312 [0.281, 0.343]'; '0.312' without an interval; '—' without a value."""
    if mean != mean:
        return "—"
    if low != low or high != high:
        return f"{mean:.3f}"
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def intervals_markdown(frame: pd.DataFrame) -> str:
    """The noise table of a zoo's ranking: per family, its seeds and each score's mean with its 95% interval (over
    seeds, or over the held-out sentences where a hit rate has one seed: api.seed_summary), and the families its
    fill-mask interval (bits per byte where no family fills a mask) does not tell apart from it; "" for no run.

    >>> frame = pd.DataFrame({"run_id": ["b0", "b1"], "family": ["bert"] * 2, "corpus": ["stories"] * 2,
    ...                       "seed": [0, 1], "val_bits_per_byte": [1.0, 1.2], "fill_mask_accuracy": [0.3, 0.3],
    ...                       "fill_mask_examples": [64, 64], "infill_exact_match": [float("nan")] * 2,
    ...                       "infill_examples": [0, 0], "probe_accuracy": [float("nan")] * 2})
    >>> print(intervals_markdown(frame).splitlines()[4])
    | bert | 2 | 1.100 [-0.171, 2.371] | 0.300 [0.202, 0.421] | — | — |
    """
    if frame is None or not len(frame) or "family" not in frame.columns:
        return ""
    fills = "fill_mask_accuracy" in frame.columns and frame["fill_mask_accuracy"].notna().any()
    rank_by = "fill_mask_accuracy" if fills else "val_bits_per_byte"
    summary = api.seed_summary(frame, rank_by=rank_by)
    headers = [tr("leaderboard.col_family"), tr("leaderboard.intervals_seeds"),
               *(tr(f"leaderboard.intervals_{score}") for score in INTERVAL_SCORES),
               tr("leaderboard.intervals_not_told_apart", score=tr(f"leaderboard.intervals_{rank_by}"))]
    lines = [tr("leaderboard.intervals_heading"), "", "| " + " | ".join(headers) + " |",
             "| " + " | ".join("---" for _ in headers) + " |"]
    separator = tr("leaderboard.list_separator")
    for _, row in summary.iterrows():
        cells = [str(row["family"]), str(len(row["seed_values"]))]
        cells += [_with_interval(row[f"{score}_mean"], row[f"{score}_low"], row[f"{score}_high"])
                  for score in INTERVAL_SCORES]
        cells.append(separator.join(row["not_told_apart_from"]) or "—")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", tr("leaderboard.intervals_note")]
    return "\n".join(lines)
