"""Token chips of the Understand tab's Attributions section: each token the model read, shaded by its attribution
(red raised the explained probability, blue lowered it; the strongest token of a run at full colour), one row per
run, and a table of the numbers.

Presentation only: the numbers are `api.explain_prediction`'s (lab_models/inference/attributions.py). A result is
one dict per run: {"run_id", "title", "attribution": api.Attribution} or {"run_id", "title", "error"}. Every word is
in the reader's language (area `probing`); tokens, run ids and numbers stay as they are.
"""
from __future__ import annotations

import html
import math

import pandas as pd

from app.i18n.language import tr
from app.i18n.messages import translate
from app.understand.figures import format_prob

POSITIVE = (220, 38, 38)  # red: the token raised the probability
NEGATIVE = (37, 99, 235)  # blue: it lowered it
COLUMN_KEYS = ("col_run", "col_position", "col_token", "col_attribution")
COMPLETENESS_SHARE, COMPLETENESS_FLOOR = 0.05, 1e-4  # beyond this the page warns that the scores do not add up
METHOD_KEYS = {"integrated_gradients": "probing.method_ig", "gradient_x_input": "probing.method_gxi"}


def chip_color(score: float, scale: float) -> str:
    """The chip's background: red for a positive score, blue for a negative one, its opacity |score| / scale.

    >>> chip_color(0.5, 1.0), chip_color(-1.0, 1.0), chip_color(0.0, 0.0)
    ('rgba(220, 38, 38, 0.50)', 'rgba(37, 99, 235, 1.00)', 'rgba(220, 38, 38, 0.00)')
    """
    strength = min(1.0, abs(score) / scale) if scale > 0 and math.isfinite(score) else 0.0
    red, green, blue = POSITIVE if score >= 0 else NEGATIVE
    return f"rgba({red}, {green}, {blue}, {strength:.2f})"


def method_title(method: str) -> str:
    return tr(METHOD_KEYS[method]) if method in METHOD_KEYS else method


def summary_line(attribution) -> str:
    """What was explained and the completeness check, in the reader's language."""
    if attribution.method == "integrated_gradients":
        difference = attribution.probability - attribution.baseline_probability
        how = tr("probing.ig_how", steps=attribution.steps, baseline=tr(f"probing.baseline_{attribution.baseline}"),
                 total=f"{sum(attribution.scores):+.5f}", difference=f"{difference:+.5f}",
                 error=f"{attribution.completeness_error:.1e}")
        if attribution.completeness_error > max(COMPLETENESS_SHARE * abs(difference), COMPLETENESS_FLOOR):
            how += " " + tr("probing.completeness_warning")
    else:
        how = tr("probing.gxi_how", total=f"{sum(attribution.scores):+.5f}")
    return tr("probing.attribution_summary", target=html.escape(attribution.target),
              probability=format_prob(attribution.probability), where=html.escape(translate(attribution.where)),
              method=method_title(attribution.method), how=how)


def chips_html(results: list[dict]) -> str:
    """One block per run: its title, the summary, and the chips (the score on hover)."""
    if not results:
        return f"<p style='color:#64748b'>{html.escape(tr('probing.chips_empty'))}</p>"
    blocks = []
    for result in results:
        title = f"<div style='font-weight:600;margin:10px 0 4px'>{html.escape(result.get('title', ''))}</div>"
        if result.get("error"):
            blocks.append(f"{title}<div style='color:#b91c1c'>{html.escape(translate(result['error']))}</div>")
            continue
        attribution = result["attribution"]
        scale = max((abs(score) for score in attribution.scores if math.isfinite(score)), default=0.0)
        chips = "".join(
            f"<span title='{html.escape(f'{token}: {score:+.5f}', quote=True)}' style='display:inline-block;"
            f"margin:2px;padding:2px 6px;border-radius:6px;border:1px solid #cbd5e1;"
            f"background:{chip_color(score, scale)};font-family:monospace'>{html.escape(token) or '&nbsp;'}</span>"
            for token, score in zip(attribution.tokens, attribution.scores))
        blocks.append(f"{title}<div style='font-size:0.9em;color:#475569;margin-bottom:4px'>"
                      f"{summary_line(attribution)}</div><div class='attribution-chips'>{chips}</div>")
    legend = (f"<div style='font-size:0.85em;color:#64748b;margin-top:8px'>"
              f"{html.escape(tr('probing.chips_legend'))}</div>")
    return "".join(blocks) + legend


def attribution_table(results: list[dict]) -> pd.DataFrame:
    rows = []
    for result in results:
        attribution = result.get("attribution")
        if attribution is None:
            continue
        for position, (token, score) in enumerate(attribution.pairs):
            rows.append([result["run_id"], position, token, round(float(score), 6)])
    return pd.DataFrame(rows, columns=[tr(f"probing.{key}") for key in COLUMN_KEYS])
