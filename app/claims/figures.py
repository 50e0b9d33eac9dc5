"""Cards, bars, the verdict and its figure for the Claims tab.

Presentation only: the claims, their runs, scores and verdicts are lab_models/experiments/claims.py's (read through
`lab_models.api`), which says which paper each claim follows and how the verdict is computed; nothing here computes a
score. Every word drawn is in the reader's language (`app.i18n.language.tr`, keys `claims.*`): a claim's statement and
its arms' names come in both languages from the record; the paper's figure and why the lab's setting differs are
written as the papers report them, in English, in both.

The figure (`claim_figure`): on the left each seed's value of the deciding metric for each arm, with the arm's mean
and the verdict's difference and 95% interval in the title; on the right the arms' validation bits per byte against
the training FLOPs spent, one line per run, so that equal compute is seen as equal extent on the x axis.
"""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import empty_figure, state_word
from app.i18n.language import current_language, tr

ARM_COLORS = ("#64748b", "#2563eb")  # baseline grey, challenger blue
VERDICT_COLORS = {"holds": "#15803d", "reversed": "#b91c1c", "not resolved": "#a16207"}
VERDICT_KEYS = {"holds": "verdict_holds", "reversed": "verdict_reversed", "not resolved": "verdict_not_resolved"}
STATE_COLORS = {"finished": "#16a34a", "running": "#2563eb", "queued": "#94a3b8", "failed": "#dc2626",
                "stopped": "#d97706", "not started": "#cbd5e1"}
FIGURE_HEIGHT = 420


def zh() -> bool:
    return current_language() == "zh"


def statement(claim) -> str:
    return claim.statement_zh if zh() else claim.statement_en


def arm_label(arm) -> str:
    return arm.label_zh if zh() else arm.label_en


def metric_label(metric) -> str:
    return metric.label_zh if zh() else metric.label_en


def verdict_word(word: str | None) -> str:
    """A verdict in the reader's words ("not run" when there is none)."""
    return tr(f"claims.{VERDICT_KEYS[word]}") if word in VERDICT_KEYS else tr("claims.verdict_not_run")


OVER_KEYS = {"seeds": "over_seeds", "examples": "over_examples", "seeds and examples": "over_seeds_examples",
             "exact": "over_exact", "none": "over_none"}


def over_words(over: str) -> str:
    """What an interval is over, in the reader's words."""
    return tr(f"claims.{OVER_KEYS[over]}") if over in OVER_KEYS else over


def number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def claim_choice(claim) -> tuple[str, str]:
    """(the picker's label, the claim's key)."""
    return f"{claim.number}. {statement(claim)}", claim.key


def _badge(word: str | None) -> str:
    color = VERDICT_COLORS.get(word, "#94a3b8")
    return (f'<span class="claim-verdict" style="background:{color}">{html.escape(verdict_word(word))}</span>')


def cards_html(results, metrics) -> str:
    """One card per claim: number, statement, arms, metric, the verdict (or "not run")."""
    cards = []
    for result in results:
        claim, verdict = result.claim, result.verdict
        word = verdict.word if verdict else None
        difference = (f"{number(verdict.difference)} [{number(verdict.low)}, {number(verdict.high)}]"
                      if verdict else "")
        cards.append(
            f'<div class="claim-card" data-claim="{html.escape(claim.key)}">'
            f'<div class="claim-card-head"><b>{claim.number}.</b> {_badge(word)}</div>'
            f'<div class="claim-statement">{html.escape(statement(claim))}</div>'
            f'<div class="claim-arms">{html.escape(arm_label(claim.baseline))} → '
            f'{html.escape(arm_label(claim.challenger))}</div>'
            f'<div class="claim-metric">{html.escape(metric_label(metrics[claim.metric]))}'
            f'{" · " + html.escape(difference) if difference else ""}</div></div>')
    return f'<div class="claim-cards" id="claim-cards">{"".join(cards)}</div>'


def detail_html(result, metrics, budget_flops: float) -> str:
    """The picked claim's card in full: statement, arms, budget, metric, the paper's figure, why the lab differs, and
    the verdict with its interval, the smallest detectable effect and what resolving it would cost."""
    claim, verdict = result.claim, result.verdict
    metric = metrics[claim.metric]
    rows = [
        (tr("claims.arms"), f"{arm_label(claim.baseline)} → {arm_label(claim.challenger)}"),
        (tr("claims.budget"), tr("claims.budget_value", flops=f"{budget_flops:.3g}", seeds=claim.seeds)),
        (tr("claims.metric"), metric_label(metric)),
        (tr("claims.paper"), f"{claim.paper}: {claim.paper_figure}"),
        (tr("claims.why_differs"), claim.why_differs),
    ]
    if verdict is not None:
        baseline, challenger = result.arms
        rows.append((tr("claims.means"), f"{number(baseline.mean)} → {number(challenger.mean)}"))
        rows.append((tr("claims.difference"),
                     tr("claims.difference_value", difference=number(verdict.difference), low=number(verdict.low),
                        high=number(verdict.high), over=over_words(verdict.interval_over))))
        rows.append((tr("claims.detectable"), number(verdict.smallest_detectable)))
        if verdict.seeds_needed:
            minutes = result.more_run_minutes
            cost = tr("claims.seeds_needed_value", seeds=verdict.seeds_needed,
                      minutes=f"{minutes:.0f}" if minutes is not None else "–")
            rows.append((tr("claims.seeds_needed"), cost))
        if not math.isnan(result.flops_ratio):
            rows.append((tr("claims.flops_ratio"), f"{result.flops_ratio:.4f}"))
        for name, also in result.also.items():
            rows.append((metric_label(metrics[name]),
                         f"{verdict_word(also.word)}: {number(also.difference)} [{number(also.low)}, "
                         f"{number(also.high)}]"))
    body = "".join(f"<tr><th>{html.escape(key)}</th><td>{html.escape(value)}</td></tr>" for key, value in rows)
    return (f'<div class="claim-detail" id="claim-detail"><div class="claim-detail-head"><b>{claim.number}.</b> '
            f'{html.escape(statement(claim))} {_badge(verdict.word if verdict else None)}</div>'
            f'<table class="claim-facts">{body}</table></div>')


def progress_html(claim, progress: dict, score_jobs) -> str:
    """One bar per run of each arm (its seed, state and steps), then the claim's scoring job, if any."""
    rows = []
    for arm in claim.arms:
        for run in progress.get(arm.key, ()):
            color = STATE_COLORS.get(run.state, "#94a3b8")
            rows.append(
                f'<div class="zoo-run claim-run" title="{html.escape(arm_label(arm))}"><span class="zoo-family">'
                f'{html.escape(arm.key)} · '
                f'{html.escape(tr("claims.seed", seed=run.seed))}</span>'
                f'<span class="zoo-state" style="color:{color}">{html.escape(state_word(run.state))}</span>'
                f'<div class="train-bar zoo-bar" role="progressbar" aria-valuemin="0" '
                f'aria-valuemax="{run.total_steps}" aria-valuenow="{run.step}"><div class="train-bar-fill" '
                f'style="width:{run.fraction * 100:.1f}%;background:{color}"></div></div>'
                f'<span class="zoo-steps">{run.step:,} / {run.total_steps:,}</span></div>')
    job = next((job for job in score_jobs if claim.key in job["claims"]), None)
    scoring = ""
    if job is not None:
        scoring = (f'<div class="claim-scoring">{html.escape(tr("claims.scoring_job", state=state_word(job["state"] or ""), step=job["step"] or 0, total=job["total_steps"] or 0))}</div>')
    return f'<div class="zoo-progress" id="claim-progress"><div class="claim-runs">{"".join(rows)}</div>{scoring}</div>'


def claim_figure(result, curves, metrics) -> go.Figure:
    """Each seed's value per arm beside the arms' validation curves against training FLOPs (module docstring)."""
    claim, verdict = result.claim, result.verdict
    values = [[value for value in arm.values if not math.isnan(value)] for arm in result.arms]
    if not any(values) and (curves is None or curves.empty):
        return empty_figure(tr("claims.no_runs"), FIGURE_HEIGHT)
    figure = make_subplots(rows=1, cols=2, column_widths=[0.35, 0.65], horizontal_spacing=0.1,
                           subplot_titles=(tr("claims.seeds_title"), tr("claims.curves_title")))
    for index, (arm, arm_values) in enumerate(zip(claim.arms, values)):
        label = arm_label(arm)
        color = ARM_COLORS[index]
        seeds = [seed for seed, value in zip(result.arms[index].seeds, result.arms[index].values)
                 if not math.isnan(value)]
        figure.add_trace(go.Scatter(x=[arm.key] * len(arm_values), y=arm_values, mode="markers",
                                    marker=dict(color=color, size=10, opacity=0.7), name=label,
                                    text=[tr("claims.seed", seed=seed) for seed in seeds],
                                    hovertemplate="%{text}: %{y:.4g}<extra></extra>", legendgroup=arm.key),
                         row=1, col=1)
        if arm_values:
            mean = sum(arm_values) / len(arm_values)
            figure.add_trace(go.Scatter(x=[arm.key], y=[mean], mode="markers", showlegend=False,
                                        marker=dict(color=color, size=18, symbol="line-ew-open", line_width=3),
                                        hovertemplate=f"{html.escape(tr('claims.mean'))}: %{{y:.4g}}<extra></extra>"),
                             row=1, col=1)
        if curves is not None and not curves.empty:
            for run_id, run_curve in curves[curves["arm"] == arm.key].groupby("run_id", sort=False):
                figure.add_trace(go.Scatter(x=run_curve["flops"], y=run_curve["val_bits_per_byte"], mode="lines",
                                            line=dict(color=color, width=1.5), opacity=0.8, showlegend=False,
                                            legendgroup=arm.key, name=label,
                                            hovertemplate=(f"{html.escape(label)} · "
                                                           f"{html.escape(tr('claims.seed', seed=int(run_curve['seed'].iloc[0])))}"
                                                           "<br>%{x:.3g} FLOPs: %{y:.3f}<extra></extra>")),
                                 row=1, col=2)
    title = verdict_word(verdict.word if verdict else None)
    if verdict is not None:
        title += " · " + tr("claims.difference_value", difference=number(verdict.difference),
                            low=number(verdict.low), high=number(verdict.high),
                            over=over_words(verdict.interval_over))
    figure.update_yaxes(title_text=claim.metric, row=1, col=1)
    figure.update_xaxes(title_text=tr("claims.axis_flops"), row=1, col=2)
    figure.update_yaxes(title_text=tr("claims.axis_bits_per_byte"), row=1, col=2)
    figure.update_layout(title=dict(text=html.escape(title), font_size=14), height=FIGURE_HEIGHT,
                         margin=dict(l=50, r=20, t=70, b=50), legend=dict(orientation="h", y=-0.18),
                         template="plotly_white")
    return figure


def table_rows(results) -> list[list]:
    """The verdicts table: one row per claim, in the reader's words."""
    rows = []
    for result in results:
        claim, verdict = result.claim, result.verdict
        baseline, challenger = result.arms
        rows.append([claim.number, statement(claim), f"{arm_label(claim.baseline)} → {arm_label(claim.challenger)}",
                     claim.metric, number(baseline.mean), number(challenger.mean),
                     (f"{number(verdict.difference)} [{number(verdict.low)}, {number(verdict.high)}]"
                      if verdict else "–"),
                     verdict_word(verdict.word if verdict else None), claim.paper_figure])
    return rows


TABLE_KEYS = ("col_claim", "col_statement", "col_arms", "col_metric", "col_baseline", "col_challenger",
              "col_difference", "col_verdict", "col_paper")


def table_headers() -> list[str]:
    return [tr(f"claims.{key}") for key in TABLE_KEYS]
