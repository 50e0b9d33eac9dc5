"""Plotly figures and tables for the Scaling tab: validation bits per byte against parameters and against training
FLOPs on log-log axes, with each sweep's fitted power law (its exponent in the legend), dense and Switch together.

Presentation only: the points and fits are `sweep.json`'s (lab_models/experiments/sweep.py, read through
`api.list_sweeps`). Papers: Kaplan et al. (2020), Scaling Laws for Neural Language Models; Fedus, Zoph, Shazeer (2022),
Switch Transformers. No deviation here; lab_models/experiments/sweep.py states how the points are counted and fitted.

Every word drawn here is in the reader's language (`app.i18n.language.tr`, keys `scaling.*`); sweep ids, family names,
variants (dense, switch) and sizes stay as they are, and the backend's messages (a sweep's status, a failed size's
reason, why there is no fit) go through the catalogue of app/i18n/locales/zh/messages/.

>>> fit_label("gpt", "switch", {"exponent": 0.1234, "r2": 0.98, "points": 4})
'gpt switch: L ∝ x^-0.123 (R² 0.98, 4 points)'
"""
from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import empty_figure, family_color, state_word
from app.i18n.language import marker, text, tr
from app.i18n.messages import translate

SWEEP_COLORS = ("#2563eb", "#ea580c", "#16a34a", "#db2777", "#0891b2", "#7c3aed")  # dense, switch per sweep
VARIANT_SYMBOLS = {"dense": "circle", "switch": "diamond"}
VARIANT_DASH = {"dense": "dash", "switch": "dot"}
AXES = (("parameters", "non_embedding", "non-embedding parameters N"),
        ("flops", "train_flops", "training FLOPs C = 6 N T"))
TABLE_COLUMNS = ["sweep", "variant", "size", "state", "N (non-embedding)", "active N", "training FLOPs", "tokens",
                 "val bits/byte", "seconds", "message"]  # the English of the col_* texts below (shown only)
TABLE_COLUMN_KEYS = ("col_sweep", "col_variant", "col_size", "col_state", "col_non_embedding", "col_active",
                     "col_flops", "col_tokens", "col_bpb", "col_seconds", "col_message")
AXIS_TITLE_KEYS = {"parameters": "fig_axis_parameters", "flops": "fig_axis_flops"}


def table_columns() -> list[str]:
    """The points table's headers in the reader's language (TABLE_COLUMNS in English)."""
    return [tr(f"scaling.{key}") for key in TABLE_COLUMN_KEYS]


def fit_label(family: str, variant: str, law: dict) -> str:
    """The legend text of a fitted line."""
    return tr("scaling.fit_label", family=family, variant=variant, exponent=f"{law['exponent']:.3f}",
              r2=f"{law['r2']:.2f}", points=law["points"])


def _short(sweep_id: str) -> str:
    """A sweep id without its family prefix and random tail: "gpt-sweep-20260101-120000-ab12" -> "01-01 12:00"."""
    parts = sweep_id.split("-")
    if len(parts) >= 4 and len(parts[-3]) == 8 and len(parts[-2]) == 6:
        day, clock = parts[-3], parts[-2]
        return f"{day[4:6]}-{day[6:]} {clock[:2]}:{clock[2:4]}"
    return sweep_id


def scaling_figure(sweeps: list[dict], *, height: int = 460) -> go.Figure:
    """Two log-log panels (against parameters, against training FLOPs): the finished points of every sweep and
    variant as markers, and its fitted power law as a line over the points' range, labelled with the exponent."""
    drawn = [s for s in sweeps if any(p.get("bits_per_byte") is not None for p in s.get("points") or [])]
    if not drawn:
        return empty_figure(tr("scaling.fig_empty"), height)
    figure = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                           subplot_titles=[tr("scaling.fig_against_parameters"), tr("scaling.fig_against_compute")])
    first_of_family: dict[str, int] = {}
    for index, sweep in enumerate(drawn):
        family = (sweep.get("config") or {}).get("family") or "?"
        first_of_family.setdefault(family, index)
        name = family if len(drawn) == 1 else f"{family} · {_short(sweep['sweep_id'])}"
        for variant_index, variant in enumerate(("dense", "switch")):
            # the family's colour (variants differ by marker and dash); a family's second sweep takes another
            color = (family_color(family) if first_of_family[family] == index
                     else SWEEP_COLORS[(2 * index + variant_index) % len(SWEEP_COLORS)])
            points = [p for p in sweep.get("points") or [] if p.get("variant") == variant
                      and p.get("bits_per_byte") is not None and p.get("state") == "finished"]
            if not points:
                continue
            law_entry = (sweep.get("fits") or {}).get(variant) or {}
            for column, (axis, key, _) in enumerate(AXES, start=1):
                xs = [p.get(key) for p in points]
                ys = [p["bits_per_byte"] for p in points]
                group = f"{sweep['sweep_id']}-{variant}"
                figure.add_trace(go.Scatter(
                    x=xs, y=ys, mode="markers", name=f"{name} {variant}", legendgroup=group, showlegend=column == 1,
                    marker={"color": color, "size": 10, "symbol": VARIANT_SYMBOLS[variant],
                            "line": {"width": 1, "color": "#0f172a"}},
                    text=[p["size"] for p in points],
                    hovertemplate=tr("scaling.fig_hover_point") + f"<extra>{name} {variant}</extra>"),
                    row=1, col=column)
                law = law_entry.get(axis) or {}
                valid = [x for x in xs if x and x > 0]
                if "exponent" in law and len(valid) >= 2:
                    line_x = np.geomspace(min(valid), max(valid), 30)
                    line_y = law["coefficient"] * line_x ** (-law["exponent"])
                    figure.add_trace(go.Scatter(
                        x=line_x, y=line_y, mode="lines", legendgroup=group,
                        name=fit_label(name, variant, law) + (" vs N" if axis == "parameters" else " vs C"),
                        line={"color": color, "dash": VARIANT_DASH[variant], "width": 1.6},
                        hovertemplate=tr("scaling.fig_hover_fit", exponent=f"{law['exponent']:.3f}")
                        + "<extra></extra>"), row=1, col=column)
    for column, (axis, _, _) in enumerate(AXES, start=1):
        figure.update_xaxes(type="log", title_text=tr(f"scaling.{AXIS_TITLE_KEYS[axis]}"), row=1, col=column)
        figure.update_yaxes(type="log", title_text=tr("scaling.fig_axis_bpb") if column == 1 else None,
                            row=1, col=column)
    figure.update_layout(template="plotly_white", height=height, margin={"l": 70, "r": 20, "t": 50, "b": 60},
                         legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0,
                                 "font": {"size": 11}},
                         uirevision="scaling")
    return figure


def fits_markdown(sweeps: list[dict]) -> str:
    """One line per sweep and variant: the fitted exponents against N and C, or why there is no fit yet."""
    lines = []
    for sweep in sweeps:
        family = (sweep.get("config") or {}).get("family") or "?"
        for variant, entry in (sweep.get("fits") or {}).items():
            parts = []
            for axis, _, _ in AXES:
                law = entry.get(axis) or {}
                against = tr("scaling.fits_against_compute" if axis == "flops" else "scaling.fits_against_parameters")
                parts.append(tr("scaling.fits_law", against=against, exponent=f"{law['exponent']:.3f}",
                                r2=f"{law['r2']:.2f}", points=law["points"]) if "exponent" in law
                             else tr("scaling.fits_none", against=against,
                                     why=translate(law["error"]) if "error" in law
                                     else tr("scaling.fits_no_points")))

            lines.append(tr("scaling.fits_line", sweep_id=sweep["sweep_id"], family=family, variant=variant,
                            fits=tr("scaling.fits_separator").join(parts)))

    if not lines:
        return marker("scaling.no_fit")  # a handler returns it: plain JSON, the marker as a string
    return tr("scaling.fits_heading") + "\n\n" + "\n".join(lines)


def _sci(value) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if not math.isfinite(value) else f"{value:.3g}"


def points_table(frame: pd.DataFrame) -> pd.DataFrame:
    """`api.sweep_points`' frame formatted for reading: TABLE_COLUMNS, numbers as text, failures with their message."""
    records = []
    for row in frame.to_dict("records"):
        bpb = row.get("bits_per_byte")
        state = row.get("state")
        records.append([row.get("sweep"), row.get("variant"), row.get("size"),
                        state_word(state) if isinstance(state, str) else state,
                        f"{int(row['non_embedding']):,}" if _sci(row.get("non_embedding")) else "",
                        f"{int(row['active_non_embedding']):,}" if _sci(row.get("active_non_embedding")) else "",
                        _sci(row.get("train_flops")), f"{int(row['tokens']):,}" if _sci(row.get("tokens")) else "",
                        f"{bpb:.4f}" if _sci(bpb) else "", _sci(row.get("seconds")),
                        "" if row.get("state") == "finished" else translate(row.get("message") or "")])
    return pd.DataFrame(records, columns=table_columns())


def sweep_label(sweep: dict) -> str:
    """The picker's label: "gpt-sweep-... · gpt · 32x1,64x2 · dense + switch · finished 4/4"."""
    config = sweep.get("config") or {}
    status = sweep.get("status") or {}
    variants = "dense + switch" if config.get("switch") else "dense"
    done = status.get("step")
    total = status.get("total_steps")
    progress = f" {done}/{total}" if total else ""
    state = state_word(status["state"]) if isinstance(status.get("state"), str) else "?"
    return (f"{sweep['sweep_id']} · {config.get('family', '?')} · {','.join(config.get('sizes') or [])} · "
            f"{variants} · {state}{progress}")


def status_html(sweeps: list[dict]) -> str:
    """A progress line per picked sweep: state, runs done, the current message."""
    if not sweeps:
        return '<div class="sweep-status">' + text("scaling.no_sweep") + "</div>"
    rows = []
    for sweep in sweeps:
        status = sweep.get("status") or {}
        total = status.get("total_steps") or 0
        done = int(status.get("step") or 0)
        fraction = min(1.0, done / total) if total else 0.0
        state = status.get("state", "?")
        runs_done = tr("scaling.status_runs", done=done, total=total or "?")
        rows.append(f'<div class="sweep-status" data-state="{html.escape(str(status.get("state")))}">'
                    f'<b>{html.escape(sweep["sweep_id"])}</b> · '
                    f'{html.escape(state_word(state) if isinstance(state, str) else str(state))} · '
                    f'{html.escape(runs_done)} · {html.escape(translate(status.get("message") or ""))}'

                    f'<div class="train-bar"><div class="train-bar-fill" style="width:{fraction * 100:.0f}%">'
                    f'</div></div></div>')
    return "".join(rows)
