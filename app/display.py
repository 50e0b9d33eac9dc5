"""What several tabs show alike: blank figures that say what to do, the figures' colours and font, a run's state and
a duration in words, a Switch expert's colour and a Switch layer's name, a tokenizer kind's title.

Each helper here is used by more than one tab (the Mask Explorer and the Tokenizer Lab share the tokenizer kinds; the
Train tab, the Scaling tab and the demo zoo share the run states; ...); what one tab alone draws lives in that tab's
package. Every word is written in the reader's language (`app.i18n.language.tr`); names and numbers stay as they are.
"""
from __future__ import annotations

import html
import re

import plotly.graph_objects as go

from lab_models import api

from app.i18n.language import current_language, text, tr
from app.inputs import finite

# ------------------------------------------------------------------------------------------------ colours and font

RUN_COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
STATE_COLORS = {"queued": "#94a3b8", "running": "#2563eb", "finished": "#16a34a", "stopped": "#d97706",
                "failed": "#dc2626", "died": "#991b1b"}
# plotly's own font list, then CJK fonts: the synthetic corpus is English + Chinese, so predicted tokens and token
# labels may be Chinese characters, which the default list leaves as empty boxes in some browsers
FONT = ('"Open Sans", verdana, arial, "Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", '
        'sans-serif')
MARGIN = {"l": 50, "r": 20, "t": 60, "b": 40}  # the margins of the figures drawn in FONT


# ------------------------------------------------------------------------------------------------ empty figures


def empty_figure(message: str, height: int) -> go.Figure:
    """A blank figure with a grey note in its middle: what to do, or why there is nothing to draw (the Train tab's
    plots, its Switch routing plot, the Scaling plot)."""
    figure = go.Figure()
    figure.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font={"size": 14, "color": "#64748b"})
    figure.update_layout(height=height, template="plotly_white", margin={"l": 50, "r": 20, "t": 40, "b": 40},
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def compact_empty_figure(message: str, height: int = 300) -> go.Figure:
    """`empty_figure` with a smaller note and narrower margins (the add-on objectives' numbers on the Train tab, the
    sentence similarity plots on the Understand tab)."""
    figure = go.Figure()
    figure.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font={"size": 13, "color": "#64748b"})
    figure.update_layout(height=height, template="plotly_white", margin={"l": 40, "r": 20, "t": 30, "b": 30},
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def cjk_empty_figure(message: str, height: int = 320) -> go.Figure:
    """`empty_figure` for the figures drawn in FONT (the Understand tab, its Fine-tune section, the Leaderboard): the
    note is escaped (it may quote a token or a backend message) and written in FONT, within MARGIN."""
    figure = go.Figure()
    figure.add_annotation(text=html.escape(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font={"size": 14, "color": "#64748b"})
    figure.update_layout(height=height, template="plotly_white", font={"family": FONT}, margin=MARGIN,
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


# ------------------------------------------------------------------------------------------------ runs

RUN_STATES = ("queued", "running", "finished", "stopped", "failed", "died", "unknown", "not started")


def state_word(state: str) -> str:
    """A run's state ("running", "not started", ...) as a word in the reader's language; an unknown one as it is."""
    return tr("train.state_" + state.replace(" ", "_")) if state in RUN_STATES else state


def format_duration(seconds) -> str:
    """A short human duration.

    >>> format_duration(42), format_duration(190), format_duration(7260), format_duration(None)
    ('42 s', '3 min 10 s', '2 h 01 min', '—')
    """
    seconds = finite(seconds)
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


# ------------------------------------------------------------------------------------------------ Switch experts

# 16 distinguishable colours (Tableau 10 + 6): experts beyond 16 reuse them
EXPERT_COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                 "#9c755f", "#bab0ac", "#1f77b4", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f")
LAYER_LABEL = re.compile(r"(generator )?(shared )?(encoder |decoder )?layer(?: (\d+))?")


def expert_color(expert: int) -> str:
    """A Switch expert's colour, the same in the Train tab's routing plot and the Understand tab's routing chips."""
    return EXPERT_COLORS[expert % len(EXPERT_COLORS)]


def layer_label(label: str) -> str:
    """A Switch layer's label as lab_models/nn/moe.py writes it ("layer 2", "decoder layer 2", "shared layer",
    "generator layer 1") in the reader's language (第 2 层, 解码器第 2 层, ...); English, or another label, as it is.

    >>> layer_label("decoder layer 2"), layer_label("whatever")
    ('decoder layer 2', 'whatever')
    """
    match = LAYER_LABEL.fullmatch(label)
    if match is None or current_language() == "en":
        return label
    generator, shared, stack, number = match.groups()
    parts = [tr("switch.layer_generator")] if generator else []
    if stack:
        parts.append(tr(f"switch.layer_{stack.strip()}"))
    parts.append(tr("switch.layer_shared") if shared or not number else tr("switch.layer_number", number=number))
    return "".join(parts)


# ------------------------------------------------------------------------------------------------ tokenizer kinds


def tokenizer_title(kind: str) -> str:
    """A tokenizer kind's title in the reader's language ("bpe" -> "BPE (GPT)"; `api.TOKENIZER_KINDS`' English for a
    kind that has no text in app/i18n/locales/*/tokenizer.json)."""
    known = ("bpe", "byte_bpe", "wordpiece", "unigram")
    return tr(f"tokenizer.kind_{kind}") if kind in known else api.TOKENIZER_KINDS.get(kind, kind)


def tokenizer_kind_choices() -> list[tuple]:
    """(label, kind) for every tokenizer kind, each label in the reader's language (`api.TOKENIZER_KINDS`' English
    for a kind that has no text in app/i18n/locales/*/tokenizer.json yet)."""
    labels = {"bpe": text("tokenizer.kind_bpe"), "byte_bpe": text("tokenizer.kind_byte_bpe"),
              "wordpiece": text("tokenizer.kind_wordpiece"), "unigram": text("tokenizer.kind_unigram")}
    return [(labels.get(kind, title), kind) for kind, title in api.TOKENIZER_KINDS.items()]
