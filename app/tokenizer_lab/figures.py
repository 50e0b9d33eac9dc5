"""HTML and Plotly figures for the Tokenizer Lab: token chips (one coloured chip per token, its id on hover, markers
visible), the merge replay, and the tokenizer statistics (vocabulary entries by length, vocabulary overlap).

The words around the tokens (the counts, the hover text, the merge replay's line) and the figures' titles and axes are
in the reader's language (`app.i18n.language.tr`, keys `understand.chips_*` and `tokenizer.fig_*`); the tokens, kinds
and numbers are data and stay as they are.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.i18n.language import tr

PALETTE = ("#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#e0e7ff", "#ffedd5", "#ccfbf1", "#f3e8ff")


def _visible(text: str) -> str:
    """Make invisible characters visible: spaces as ␣, newlines as ⏎, tabs as ⇥."""
    return text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥")


def chips_html(title: str, pieces, *, subtitle: str = "") -> str:
    """A titled row of chips. Each piece has .text, .display, .id, .is_unknown, .is_special."""
    chips = []
    for index, piece in enumerate(pieces):
        classes = ["tok-chip"]
        if piece.is_unknown:
            classes.append("tok-unk")
        if piece.is_special:
            classes.append("tok-special")
        color = PALETTE[index % len(PALETTE)]
        tooltip = tr("understand.chips_tooltip", id=piece.id, text=repr(piece.text), display=repr(piece.display),
                     start=piece.start, end=piece.end)
        if piece.is_unknown:
            tooltip += tr("understand.chips_tooltip_unknown")
        covered = piece.display.strip()
        # Byte-level pieces (e.g. "çĮ") and unknowns do not show what they stand for: print the covered text below.
        surface = ""
        if covered and covered not in piece.text and any(ord(ch) > 127 for ch in covered):
            surface = f'<span class="tok-surface">{html.escape(covered)}</span>'
        chips.append(f'<span class="{" ".join(classes)}" style="background:{color}" title="{html.escape(tooltip)}">'
                     f'{html.escape(_visible(piece.text))}{surface}</span>')
    unknown = sum(1 for p in pieces if p.is_unknown)
    summary = tr("understand.chips_tokens", count=len(pieces))
    if unknown:
        summary = tr("understand.chips_tokens_with_unknown", count=len(pieces), unknown=(
            f"<b class='tok-unk-count'>{tr('understand.chips_unknown', count=unknown)}</b>"))
    return (f'<div class="tok-row"><div class="tok-title"><b>{html.escape(title)}</b> '
            f'<span class="tok-sub">{html.escape(subtitle)} · {summary}</span></div>'
            f'<div class="tok-chips">{"".join(chips)}</div></div>')


def pieces_html(words: list[list[str]], step: int, total: int) -> str:
    """The merge replay: each pre-token as a group of pieces after `step` of `total` merges."""
    groups = []
    for word in words:
        inner = "".join(f'<span class="tok-chip" style="background:{PALETTE[i % len(PALETTE)]}">'
                        f"{html.escape(_visible(p))}</span>" for i, p in enumerate(word))
        groups.append(f'<span class="merge-word">{inner}</span>')
    count = sum(len(w) for w in words)
    return (f'<div class="tok-row"><div class="tok-title">'
            f'{tr("understand.chips_merges", step=step, total=total, count=count)}</div>'
            f'<div class="tok-chips">{"".join(groups)}</div></div>')


def token_length_figure(histograms: dict[str, dict[int, int]]) -> go.Figure:
    """Overlaid bar chart: how many vocabulary entries have each length, per tokenizer kind."""
    fig = go.Figure()
    for kind, histogram in histograms.items():
        lengths = sorted(histogram)
        fig.add_trace(go.Bar(x=lengths, y=[histogram[n] for n in lengths], name=kind, opacity=0.75))
    fig.update_layout(barmode="group", title=tr("tokenizer.fig_length_title"),
                      xaxis_title=tr("tokenizer.fig_length_x"), yaxis_title=tr("tokenizer.fig_length_y"),
                      height=360, margin=dict(l=20, r=20, t=50, b=40))
    return fig


def overlap_figure(overlap: pd.DataFrame) -> go.Figure:
    """Heatmap of pairwise vocabulary overlap (Jaccard) between tokenizer kinds."""
    fig = go.Figure(go.Heatmap(z=overlap.values, x=list(overlap.columns), y=list(overlap.index), zmin=0, zmax=1,
                               colorscale="Blues", text=np.round(overlap.values, 2), texttemplate="%{text}",
                               hovertemplate="%{y} ∩ %{x}: %{z:.2f}<extra></extra>"))
    fig.update_layout(title=tr("tokenizer.fig_overlap_title"), height=360, margin=dict(l=20, r=20, t=50, b=40),
                      yaxis_autorange="reversed")
    return fig
