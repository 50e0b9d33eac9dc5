"""Plotly figures, pandas tables and labels for the Understand tab: the run pickers' entries, fill-mask bars,
similarity per layer, the PCA scatter, the attention head grid.

Presentation only: every number drawn here comes from `lab_models.api` (`fill_mask`, `contextual_similarity`,
`embedding_projection`, `attention_maps`). A fill-mask result is one dict per run: {"run_id", "family", "title",
"step", "slots": [[(token, probability), ...] per [MASK] slot]} or, for a run that cannot fill masks, the same
with "error": the explanation instead of "slots".

The words are the reader's (`app.i18n.language.tr`, area `understand`): titles, axes, hover texts, the notes in empty
plots, table headers, stream and layer names, and the backend's messages (app/i18n/messages.py) are in Chinese for a
Chinese reader; run ids, family names, tokens and numbers stay as they are.
"""
from __future__ import annotations

import html
import math
import re
import textwrap

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.display import FONT, LINE_DASHES, MARGIN, cjk_empty_figure, family_color, run_styles
from app.i18n.language import text, tr
from app.i18n.messages import translate

SENTENCE_COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
BLOCKED_BACKGROUND = "#e2e8f0"  # heatmap cells the mask forbids are left empty: this colour shows through
STREAMS = ("self", "content", "query", "encoder", "decoder", "cross")  # each has its title, `understand.stream_<s>`
# the layer names of lab_models/inference/representations.py that are words (the rest, "biLSTM 1", "LSTM 2", are names):
# their keys
LAYER_NAMES = {"embeddings": "understand.layer_embeddings", "embedding": "understand.layer_embedding",
               "token layer [x; x]": "understand.layer_token_layer", "ELMo (scalar mix)": "understand.layer_elmo_mix",
               "ELMo (top layer)": "understand.layer_elmo_top", "embedding (GloVe's place)": "understand.layer_glove",
               "CoVe (MT-LSTM top layer)": "understand.layer_cove_top", "token layer": "understand.layer_token"}
BLOCK = re.compile(r"block (\d+)")
FORWARD_LSTM = re.compile(r"forward LSTM (\d+)")  # ELMo's layers in the logit lens (inference/logit_lens.py)


def wrap(text: str, width: int = 42) -> str:
    """Plain text broken into <br>-separated lines for a plotly annotation (escaped).

    >>> wrap("GPT reads left to right; it has no <mask> slots", 20)
    'GPT reads left to<br>right; it has no<br>&lt;mask&gt; slots'
    """
    return "<br>".join(html.escape(line) for line in textwrap.wrap(str(text), width) or [""])


def format_prob(prob: float) -> str:
    """0.4213 -> "0.421", 0.00012 -> "1.2e-04".

    >>> format_prob(0.4213), format_prob(0.00012)
    ('0.421', '1.2e-04')
    """
    prob = float(prob)
    return f"{prob:.3f}" if prob >= 0.001 or prob == 0 else f"{prob:.1e}"


def shown_token(token: str) -> str:
    """A predicted token as the page shows it: without the space that marks a word start, never empty (the exact
    strings stay in the raw predictions).

    >>> shown_token(" apple"), shown_token(" "), shown_token("")
    ('apple', '(space)', '∅')
    """
    token = str(token)
    if not token:
        return "∅"
    return token.strip() or tr("understand.token_newline" if "\n" in token else "understand.token_space")


def layer_title(name: str) -> str:
    """A probe's layer name in the reader's language: "embeddings" and "block 3" are words, "biLSTM 1" is a name.

    >>> layer_title("block 3"), layer_title("embeddings"), layer_title("biLSTM 1")
    ('block 3', 'embeddings', 'biLSTM 1')
    """
    name = str(name)
    block = BLOCK.fullmatch(name)
    if block:
        return tr("understand.layer_block", number=block.group(1))
    forward = FORWARD_LSTM.fullmatch(name)
    if forward:
        return tr("understand.layer_forward_lstm", number=forward.group(1))
    return tr(LAYER_NAMES[name]) if name in LAYER_NAMES else name


# ---------------------------------------------------------------------------------------------- run pickers


def run_label(row: dict) -> str:
    """"run_id · family · step N" for the run pickers (N = the step of the weights a probe loads; the word "step" in
    the reader's language); "checkpoint of step N" when those weights are a checkpoint behind the run's own step (a
    run still training), so that a picker's step is not read as the run's.

    A run of a seed other than 0 (a zoo's second seed) says its seed after the family.

    >>> run_label({"run_id": "r", "family": "bert", "step": 491, "weights_step": 375})
    'r · bert · checkpoint of step 375'
    >>> run_label({"run_id": "r", "family": "bert", "step": 20, "seed": 2})
    'r · bert · seed 2 · step 20'
    """
    step = row.get("weights_step", row.get("step")) or 0
    behind = row.get("step") is not None and int(step) < int(row.get("step") or 0)
    family = row.get("family") or "?"
    if row.get("seed"):
        family = f"{family} · {tr('compare.header_seed', seed=row['seed'])}"
    return tr("understand.run_choice_checkpoint" if behind else "understand.run_choice", run_id=row["run_id"],
              family=family, step=f"{int(step):,}")


# ---------------------------------------------------------------------------------------------- fill-mask


def run_title(result: dict) -> str:
    """"GPT · gpt-tiny-... · step 30" for a column head; a run of a seed other than 0 (a zoo's second seed) says it.

    >>> run_title({"title": "BERT", "run_id": "r", "step": 30, "seed": 1})
    'BERT · r · seed 1 · step 30'
    """
    parts = [result.get("title") or result.get("family") or "", result.get("run_id") or ""]
    if result.get("seed"):
        parts.append(tr("compare.header_seed", seed=result["seed"]))
    if result.get("step") is not None:
        parts.append(tr("understand.fig_step", step=f"{int(result['step']):,}"))
    return " · ".join(p for p in parts if p)


def fill_mask_figure(results: list[dict]) -> go.Figure:
    """One column per run, one row per [MASK] slot: horizontal bars of the top-k predictions, best at the top.
    A run that cannot fill masks shows its explanation in its column instead of bars."""
    if not results:
        return cjk_empty_figure(tr("understand.fig_fill_empty"))
    n_slots = max([len(r.get("slots") or []) for r in results] + [1])
    cols = len(results)
    titles = []
    for row in range(n_slots):
        for result in results:
            head = run_title(result) if row == 0 else ""
            slot = f"[MASK] {row + 1}" if result.get("slots") else ""
            titles.append("<br>".join(wrap(t, 40) for t in (head, slot) if t))
    figure = make_subplots(rows=n_slots, cols=cols, subplot_titles=titles, horizontal_spacing=0.12 / max(cols, 1),
                           vertical_spacing=min(0.12, 0.5 / n_slots))
    # one probability axis for every panel, so that bars compare across runs; it ends a little past the best bar
    best = max([float(p) for r in results for slot in (r.get("slots") or []) for _, p in slot] + [0.0])
    top = min(1.0, max(0.05, best * 1.25))
    for col, result in enumerate(results, start=1):
        color = family_color(result.get("family"))  # the lab's one colour per family
        if result.get("error") is not None or not result.get("slots"):
            message = (translate(result["error"]) if result.get("error")
                       else tr("understand.fig_no_predictions"))
            x_domain = figure.get_subplot(1, col).xaxis.domain
            y_domain = figure.get_subplot(1, col).yaxis.domain
            # paper coordinates (the subplot's centre): "x2 domain" references are not drawn by every plotly.js
            figure.add_annotation(text=f"<i>{wrap(message, max(24, 90 // cols))}</i>", showarrow=False,
                                  xref="paper", yref="paper", x=sum(x_domain) / 2, y=sum(y_domain) / 2,
                                  xanchor="center", yanchor="middle", font={"size": 12, "color": "#64748b"},
                                  align="center")
            figure.update_xaxes(visible=False, row=1, col=col)
            figure.update_yaxes(visible=False, row=1, col=col)
            for row in range(2, n_slots + 1):
                figure.update_xaxes(visible=False, row=row, col=col)
                figure.update_yaxes(visible=False, row=row, col=col)
            continue
        for row, predictions in enumerate(result["slots"], start=1):
            tokens = [shown_token(token) for token, _ in predictions]
            probs = [float(p) for _, p in predictions]
            ranks = list(range(len(tokens)))
            figure.add_trace(go.Bar(x=probs, y=ranks, orientation="h", marker_color=color,
                                    text=[format_prob(p) for p in probs], textposition="auto",
                                    hovertemplate="%{customdata}: p = %{x:.4f}<extra></extra>",
                                    customdata=tokens, showlegend=False), row=row, col=col)
            figure.update_yaxes(tickvals=ranks, ticktext=tokens, autorange="reversed", row=row, col=col)
            figure.update_xaxes(range=[0, top], row=row, col=col, tickformat=".2f")
    figure.update_layout(height=max(260, 70 + 190 * n_slots), template="plotly_white", font={"family": FONT}, bargap=0.25,
                         margin={"l": 60, "r": 20, "t": 80, "b": 30})
    figure.update_annotations(font_size=12)
    return figure


def fill_mask_table(results: list[dict]) -> pd.DataFrame:
    """The predictions side by side: one row per (slot, rank), one column per run with "token (p)"; a run that cannot
    fill masks has its explanation in the first row of its column."""
    n_slots = max([len(r.get("slots") or []) for r in results] + [0])
    k = max([len(preds) for r in results for preds in (r.get("slots") or [])] + [0])
    slot_column, rank_column = tr("understand.col_slot"), tr("understand.col_rank")
    rows = []
    for slot in range(max(n_slots, 1)):
        for rank in range(max(k, 1)):
            row = {slot_column: f"[MASK] {slot + 1}", rank_column: rank + 1}
            for result in results:
                name = result.get("run_id") or "?"
                slots = result.get("slots") or []
                if result.get("error") is not None:
                    row[name] = translate(result["error"]) if slot == 0 and rank == 0 else ""
                elif slot < len(slots) and rank < len(slots[slot]):
                    token, prob = slots[slot][rank]
                    row[name] = f"{shown_token(token)} ({format_prob(prob)})"
                else:
                    row[name] = ""
            rows.append(row)
    if not results:
        return pd.DataFrame(columns=[slot_column, rank_column])
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- embeddings


def similarity_figure(frame: pd.DataFrame, word: str = "") -> go.Figure:
    """Cosine similarity of the word's two vectors per layer, one line per run (hover: the pieces averaged)."""
    if frame is None or frame.empty:
        return cjk_empty_figure(tr("understand.fig_similarity_empty"))
    figure = go.Figure()
    styles = run_styles({run: rows["family"].iloc[0] for run, rows in frame.groupby("run", sort=False)})
    for index, (run, rows) in enumerate(frame.groupby("run", sort=False)):
        rows = rows.sort_values("layer")
        family = rows["family"].iloc[0]
        color, rank = styles[run]
        figure.add_trace(go.Scatter(
            x=rows["layer"].tolist(), y=rows["cosine"].tolist(), mode="lines+markers", name=f"{run} ({family})",
            line={"color": color, "width": 2, "dash": LINE_DASHES[rank % len(LINE_DASHES)]}, marker={"size": 7},
            customdata=list(zip([layer_title(name) for name in rows["layer_name"]], rows["pieces_a"],
                                rows["pieces_b"])),
            hovertemplate=(f"%{{customdata[0]}}: {tr('understand.fig_cosine')} %{{y:.3f}}<br>A: %{{customdata[1]}}"
                           f"<br>B: %{{customdata[2]}}<extra>{html.escape(str(run))}</extra>")))
    # a tick is the layer's name where every run calls it the same, else its number (an LSTM's "biLSTM 1" is not
    # a transformer's "block 1"; each run's own name is in the hover)
    by_layer = frame.groupby("layer")["layer_name"].unique()
    names = {int(layer): (layer_title(found[0]) if len(found) == 1 else str(layer))
             for layer, found in by_layer.items()}
    mixed = any(len(found) > 1 for found in by_layer)
    low = min(0.0, float(frame["cosine"].min()) - 0.05)
    title = (tr("understand.fig_similarity_title", word=html.escape(word)) if word
             else tr("understand.fig_similarity_title_plain"))
    figure.update_layout(
        title=title, height=380, template="plotly_white", font={"family": FONT}, margin=MARGIN,
        xaxis={"title": tr("understand.fig_similarity_x_mixed") if mixed else tr("understand.fig_similarity_x"),
               "tickvals": list(names), "ticktext": list(names.values()),
               "range": [-0.2, max(names) + 0.2 if names else 1]},
        yaxis={"title": tr("understand.fig_similarity_y"), "range": [low, 1.05]},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0})
    figure.add_hline(y=1.0, line={"color": "#94a3b8", "dash": "dot", "width": 1})
    return figure


def similarity_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The similarities as a runs x layers table (cosine rounded to 3 places), its headers in the reader's language
    (the layer names' English where two would read the same)."""
    run_column, family_column = tr("understand.col_run"), tr("understand.col_family")
    if frame is None or frame.empty:
        return pd.DataFrame(columns=[run_column, family_column])
    table = frame.pivot_table(index=["run", "family"], columns="layer_name", values="cosine", sort=False)
    order = list(dict.fromkeys(frame.sort_values("layer")["layer_name"]))
    table = table[order].round(3).reset_index()
    titles = [layer_title(name) for name in order]
    if len(set(titles)) < len(titles):
        titles = order
    table.columns = [run_column, family_column, *titles]
    return table


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def projection_figure(frames: list[pd.DataFrame], sentences: list[str], word: str = "") -> go.Figure:
    """One scatter per run: each token of each sentence at its 2-D PCA position, labelled with its text, coloured
    by sentence; the tokens of the word are drawn as stars."""
    frames = [f for f in frames if f is not None and not f.empty]
    if not frames:
        return cjk_empty_figure(tr("understand.fig_projection_empty"))
    cols = 1 if len(frames) == 1 else 2
    rows = math.ceil(len(frames) / cols)
    titles = []
    for frame in frames:
        variance = frame.attrs.get("explained_variance") or [0.0, 0.0]
        titles.append(f"{frame['run'].iloc[0]} ({frame['family'].iloc[0]}) · PC1 {variance[0]:.0%}, "
                      f"PC2 {variance[1]:.0%}")
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=titles, horizontal_spacing=0.08,
                           vertical_spacing=0.12 if rows > 1 else 0.1)
    for index, frame in enumerate(frames):
        row, col = index // cols + 1, index % cols + 1
        for sentence, points in frame.groupby("sentence", sort=True):
            color = SENTENCE_COLORS[int(sentence) % len(SENTENCE_COLORS)]
            text = (sentences[int(sentence)] if int(sentence) < len(sentences)
                    else tr("understand.fig_sentence", number=int(sentence) + 1))
            symbols = ["star" if flag else "circle" for flag in points["is_word"]]
            sizes = [16 if flag else 8 for flag in points["is_word"]]
            figure.add_trace(go.Scatter(
                x=points["x"].tolist(), y=points["y"].tolist(), mode="markers+text", text=points["token"].tolist(),
                textposition="top center",
                textfont={"size": 11, "color": color}, marker={"color": color, "symbol": symbols, "size": sizes},
                name=f"{int(sentence) + 1}: {_short(text)}", legendgroup=f"s{int(sentence)}",
                showlegend=index == 0, customdata=points["position"].tolist(),
                hovertemplate=(f"%{{text}} {tr('understand.fig_token_at', position='%{customdata}')}"
                               "<br>x %{x:.2f}, y %{y:.2f}<extra></extra>")),
                row=row, col=col)
    figure.update_xaxes(title_text="PC1", zeroline=False)
    figure.update_yaxes(title_text="PC2", zeroline=False)
    title = tr("understand.fig_projection_title")
    if word:
        title += tr("understand.fig_projection_word", word=html.escape(word))
    figure.update_layout(title=title, height=130 + 400 * rows, template="plotly_white", font={"family": FONT}, margin=MARGIN,
                         legend={"orientation": "h", "yanchor": "top", "y": -0.08, "x": 0})
    return figure


# ---------------------------------------------------------------------------------------------- attention


def stream_title(stream: str) -> str:
    """A stream's title in the reader's language ("self" -> "self-attention"); an unknown stream shows its name."""
    return tr(f"understand.stream_{stream}") if stream in STREAMS else stream


def stream_label(stream: str):
    """A stream's title as a translation marker, for the Stream picker's choices when the page is built (no reader
    yet: the page translates it)."""
    return text(f"understand.stream_{stream}") if stream in STREAMS else stream


def attention_figure(maps, stream: str, layer: int, *, max_cols: int = 4) -> go.Figure:
    """Layer `layer` (1-based) of `stream`: one heatmap per head. Rows attend (queries), columns are attended
    (keys); cells the mask forbids are left empty (grey). The colours run from 0 to the layer's largest probability,
    so that diffuse heads stay readable (the colour bar says where the top is)."""
    if maps is None:
        return cjk_empty_figure(tr("understand.fig_attention_empty"))
    weights = maps.weights[stream][layer - 1]  # (heads, Tq, Tk)
    mask = maps.masks.get(stream)
    row_labels, col_labels = maps.streams[stream]
    heads = weights.shape[0]
    cols = min(heads, max_cols)
    rows = math.ceil(heads / cols)
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=[tr("understand.fig_head", head=h + 1)
                                                                   for h in range(heads)],
                           horizontal_spacing=0.12 / cols + 0.04, vertical_spacing=0.3 / rows)
    ticks_x = list(range(len(col_labels)))
    ticks_y = list(range(len(row_labels)))
    for head in range(heads):
        z = weights[head].tolist()
        if mask is not None:
            z = [[value if allowed else None for value, allowed in zip(z_row, m_row)]
                 for z_row, m_row in zip(z, mask.tolist())]
        row, col = head // cols + 1, head % cols + 1
        figure.add_trace(go.Heatmap(
            z=z, x=ticks_x, y=ticks_y, coloraxis="coloraxis", xgap=1, ygap=1,
            customdata=[[(r, c) for c in col_labels] for r in row_labels],
            hovertemplate=("%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra>"
                           + tr("understand.fig_head", head=head + 1) + "</extra>")),
            row=row, col=col)
        figure.update_xaxes(tickvals=ticks_x, ticktext=col_labels, tickangle=-60, tickfont={"size": 10},
                            showgrid=False, row=row, col=col)
        figure.update_yaxes(tickvals=ticks_y, ticktext=row_labels, autorange="reversed", tickfont={"size": 10},
                            showgrid=False, row=row, col=col)
    top = float(weights.max()) if weights.numel() and float(weights.max()) > 0 else 1.0  # the colours span 0..max
    n = max(len(row_labels), 1)
    panel = max(260, min(560, 16 * n + 120))
    title = tr("understand.fig_attention_title", run_id=html.escape(maps.run_id), stream=stream_title(stream),
               layer=layer, layers=maps.weights[stream].shape[0])
    figure.update_layout(
        title={"text": title, "font": {"size": 14}}, height=90 + panel * rows, template="plotly_white", font={"family": FONT},
        plot_bgcolor=BLOCKED_BACKGROUND, margin={"l": 70, "r": 20, "t": 80, "b": 70},
        coloraxis={"colorscale": "Blues", "cmin": 0, "cmax": top, "colorbar": {"title": "p", "thickness": 12}})
    return figure


def attention_details(maps, stream: str, layer: int) -> dict:
    """The shown layer as plain data (for API clients and the raw-data panel): labels, the mask, and each head's
    probabilities rounded to 4 places."""
    weights = maps.weights[stream][layer - 1]
    rows, cols = maps.streams[stream]
    return {"run_id": maps.run_id, "family": maps.family, "step": maps.step, "stream": stream, "layer": layer,
            "n_layers": int(maps.weights[stream].shape[0]), "n_heads": int(weights.shape[0]),
            "streams": list(maps.streams), "tokens": list(maps.tokens), "rows": list(rows), "cols": list(cols),
            "mask": maps.masks[stream].int().tolist() if stream in maps.masks else None,
            "weights": [[[round(float(v), 4) for v in r] for r in head] for head in weights.tolist()],
            "check_error": maps.check_error, "note": maps.note}
